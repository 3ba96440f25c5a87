//! The Landlock side of confinement (RUNTIME §5 "The child"): what the kernel offers
//! ([`LandlockSupport`]) and the ruleset built in the parent from a list of [`Rule`]s,
//! whose descriptor [`Confinement`](crate::Confinement) applies in the child. This
//! module knows paths and rights only, nothing of lands or calls.

use crate::AdapterError;
use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, Ruleset, RulesetAttr,
    Scope,
};
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

/// The newest Landlock ABI this code was written and tested against: 7 (Linux 6.15).
/// A newer kernel is used at this level; newer rights are not requested untested.
pub const TESTED_LANDLOCK_ABI: u32 = 7;

/// The first Landlock ABI with TCP rules (Linux 6.7).
pub const NETWORK_LANDLOCK_ABI: u32 = 4;

/// The first Landlock ABI with signal and abstract-socket scoping (Linux 6.12).
pub const SCOPE_LANDLOCK_ABI: u32 = 6;

/// System paths a `local` child may read and execute beneath (RUNTIME §5). Absent ones
/// are skipped; symlinks (`/bin` → `/usr/bin`) are resolved when the rule is made.
pub const SYSTEM_READ_ONLY: [&str; 9] = [
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/sys/devices/system/cpu",
];

/// Paths a `local` child may read but not execute: the random devices. `/proc` is not
/// granted: a rule cannot name the child's own `/proc/self` before it exists, and all of
/// `/proc` would show every process's command line. `git`, shells, coreutils and Rust
/// programs run without it; a program that needs it gets it through
/// [`SandboxPaths::extra_ro`](crate::SandboxPaths::extra_ro).
pub const SYSTEM_READ_NO_EXEC: [&str; 2] = ["/dev/urandom", "/dev/random"];

/// Devices a `local` child may read and write (never execute).
pub const SYSTEM_DEVICES_RW: [&str; 3] = ["/dev/null", "/dev/zero", "/dev/full"];

/// What the kernel offers: Landlock's ABI version, or why there is none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LandlockSupport {
    /// ABI version (1 or more).
    Abi(u32),
    /// Built into the kernel but not enabled at boot (`EOPNOTSUPP`).
    NotEnabled,
    /// Not built into the kernel, or not Linux 5.13+ (`ENOSYS`).
    NotImplemented,
}

impl LandlockSupport {
    /// Asks the kernel (`landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)`).
    pub fn probe() -> Self {
        // SAFETY: with a null attribute pointer, size 0 and the VERSION flag the call reads
        // no memory and returns the ABI version or -1 with errno.
        let v = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                std::ptr::null::<libc::c_void>(),
                0usize,
                1u32, // LANDLOCK_CREATE_RULESET_VERSION
            )
        };
        if v > 0 {
            return Self::Abi(u32::try_from(v).unwrap_or(u32::MAX));
        }
        match io::Error::last_os_error().raw_os_error() {
            Some(libc::EOPNOTSUPP) => Self::NotEnabled,
            _ => Self::NotImplemented,
        }
    }

    /// The ABI version, 0 without Landlock.
    pub fn abi(self) -> u32 {
        match self {
            Self::Abi(v) => v,
            _ => 0,
        }
    }

    /// Why there is no Landlock, lowercase; `None` when there is.
    pub fn missing_reason(self) -> Option<&'static str> {
        match self {
            Self::Abi(_) => None,
            Self::NotEnabled => Some("landlock is built into the kernel but not enabled"),
            Self::NotImplemented => Some("the kernel has no landlock"),
        }
    }
}

/// What a rule grants beneath its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Grant {
    /// Read and execute (files, directories).
    Read,
    /// Read, not execute (the random devices).
    ReadNoExec,
    /// Every right the ABI handles (the sandbox, the private `TMPDIR`, granted paths).
    All,
    /// Read and write a device file, never execute (`/dev/null`).
    Device,
}

/// One rule of a ruleset: a path and what it grants beneath it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rule<'a> {
    /// The file or directory.
    pub path: &'a Path,
    /// What it grants.
    pub grant: Grant,
    /// `Some(what)`: the path must open, else `sandbox_failed` says `what`; `None`: an
    /// absent path is skipped.
    pub required: Option<&'static str>,
}

/// Creates the ruleset in the parent and returns its descriptor: every filesystem right
/// of `abi` handled (so denied outside the rules), TCP `bind`/`connect` handled (denied)
/// with `deny_tcp`, signals and abstract Unix sockets scoped from ABI 6 on.
pub(crate) fn build_ruleset(
    abi_n: u32,
    rules: &[Rule<'_>],
    deny_tcp: bool,
) -> Result<OwnedFd, AdapterError> {
    let abi = ABI::from(i32::try_from(abi_n).unwrap_or(0));
    let all = AccessFs::from_all(abi);
    let read = AccessFs::from_read(abi);
    let exec: BitFlags<AccessFs> = AccessFs::Execute.into();
    let ll = |e: landlock::RulesetError| AdapterError::SandboxFailed {
        path: PathBuf::new(),
        reason: format!("the kernel refused the landlock ruleset: {e}"),
        source: None,
    };
    let mut rs = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(all)
        .map_err(ll)?;
    if deny_tcp {
        rs = rs.handle_access(AccessNet::from_all(abi)).map_err(ll)?;
    }
    if abi_n >= SCOPE_LANDLOCK_ABI {
        rs = rs.scope(Scope::from_all(abi)).map_err(ll)?;
    }
    let created = rs.create().map_err(ll)?;
    let fd: Option<OwnedFd> = created.into();
    let fd = fd.ok_or_else(|| AdapterError::SandboxFailed {
        path: PathBuf::new(),
        reason: "the kernel gave no landlock ruleset".into(),
        source: None,
    })?;
    for rule in rules {
        let access = match rule.grant {
            Grant::Read => read,
            Grant::ReadNoExec => read & !exec,
            Grant::All => all,
            Grant::Device => AccessFs::from_file(abi) & !exec,
        };
        // One `open(O_PATH)` and one `fstat` a rule (the crate's `PathFd` and two `stat`s
        // cost twice that, on every call).
        let beneath = match open_path(rule.path) {
            Ok(b) => b,
            Err(_) if rule.required.is_none() => continue,
            Err(e) => {
                return Err(AdapterError::SandboxFailed {
                    path: rule.path.to_owned(),
                    reason: rule.required.unwrap_or_default().to_owned(),
                    source: Some(e),
                });
            }
        };
        let fmt = beneath.mode & libc::S_IFMT;
        // The kernel takes no rule on a socket or a FIFO: an optional one (in a
        // complement) is left out, and so denied.
        if rule.required.is_none() && (fmt == libc::S_IFSOCK || fmt == libc::S_IFIFO) {
            continue;
        }
        let access = if fmt == libc::S_IFDIR {
            access
        } else {
            access & AccessFs::from_file(abi)
        };
        add_rule(&fd, &beneath.fd, access.bits()).map_err(|e| AdapterError::SandboxFailed {
            path: rule.path.to_owned(),
            reason: "the kernel refused a landlock rule".into(),
            source: Some(e),
        })?;
    }
    Ok(fd)
}

/// A path opened `O_PATH` and its file type.
struct Beneath {
    fd: OwnedFd,
    mode: libc::mode_t,
}

fn open_path(path: &Path) -> io::Result<Beneath> {
    use std::os::fd::FromRawFd;
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: a NUL-terminated path; the descriptor is ours.
    let raw = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: just opened, owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: fstat writes into a zeroed local.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a descriptor we own and a local to write.
    if unsafe { libc::fstat(raw, &raw mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Beneath {
        fd,
        mode: st.st_mode,
    })
}

/// `struct landlock_path_beneath_attr` (packed: 8 + 4 bytes).
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// `landlock_add_rule(ruleset, LANDLOCK_RULE_PATH_BENEATH, …)`.
fn add_rule(ruleset: &OwnedFd, beneath: &OwnedFd, access: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let attr = PathBeneathAttr {
        allowed_access: access,
        parent_fd: beneath.as_raw_fd(),
    };
    // SAFETY: the kernel reads the attribute struct, which lives on this stack frame.
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            1u32, // LANDLOCK_RULE_PATH_BENEATH
            &raw const attr,
            0u32,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
