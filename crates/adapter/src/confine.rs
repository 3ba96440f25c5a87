//! Kernel confinement of a child (RUNTIME §5 "The child", `local` land).
//!
//! A [`Confinement`] is prepared in the parent: everything that allocates or may fail
//! in an interesting way happens before the child is made. In the child, between
//! `clone` and `execve`, [`Confinement::apply_in_child`] only makes async-signal-safe
//! system calls and never allocates, because other threads of the parent may hold locks
//! (the allocator's) that the child would wait on forever.
//!
//! Two layers:
//!
//! - **Resource limits** for every child ([`ResourceLimits`], [`Confinement::with_limits`]):
//!   `setrlimit` of CPU seconds, address space, open files, file size and processes, and
//!   no core dumps.
//! - **Landlock** for `local` land ([`Confinement::for_local_land`]): a ruleset built in
//!   the parent (read-write beneath the sandbox working directory and the private
//!   temporary directory; read and execute on [`SYSTEM_READ_ONLY`] and the pinned
//!   bin; the null and random devices; nothing else: not `$HOME`, not `$HCP_HOME`, not
//!   `/tmp`, not `/proc`), applied in the child by `prctl(PR_SET_NO_NEW_PRIVS)` and
//!   `landlock_restrict_self`. Landlock checks the resolved object, so a symlink inside
//!   the sandbox that points out of it leads nowhere, and a sibling whose name extends
//!   the sandbox's (`work-evil` beside `work`) is another directory. With ABI 4 or later
//!   TCP `bind`/`connect` can be denied ([`Network::Deny`]); with ABI 6 or later the child
//!   can neither signal processes outside its domain nor reach abstract UNIX sockets made
//!   outside it. Landlock also forbids `ptrace` of processes outside the domain.
//!
//! Where the kernel has no Landlock, a `local` child runs unconfined (in the sandbox
//! directory, with its limits) and the [`SandboxReport`] says `unconfined`, unless the
//! configuration requires the sandbox ([`SandboxPolicy::require`]): then
//! `sandbox_unavailable`. A network denial that the kernel cannot enforce is refused
//! too (fail closed).
//!
//! The child is made by `clone(CLONE_VM | CLONE_VFORK)` (the spawn module), which shares
//! the parent's memory until `execve`: the same constraints as after `fork`, without
//! copying the parent.
//!
//! Known limits: `RLIMIT_NPROC` counts every process of the user, not only the child's,
//! and the kernel does not enforce it for root (uid 0); the whole of `/etc` is
//! readable (so a child run by root reads `/etc/shadow`); Landlock does not restrict
//! `stat`, `chdir` or reading a symlink's target, so names outside the sandbox can be
//! probed, not read.

use crate::AdapterError;
use crate::ruleset::build_ruleset;
pub use crate::ruleset::{
    LandlockSupport, NETWORK_LANDLOCK_ABI, SCOPE_LANDLOCK_ABI, SYSTEM_DEVICES_RW,
    SYSTEM_READ_NO_EXEC, SYSTEM_READ_ONLY, TESTED_LANDLOCK_ABI,
};
use nix::sys::resource::{Resource, getrlimit, setrlimit};
use serde::{Deserialize, Serialize};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A resource limit to set in the child: soft and hard value alike, except the CPU
/// time, whose hard limit is one second above (see [`Rlimit::CpuSeconds`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rlimit {
    /// `RLIMIT_CPU`, seconds of CPU time: `SIGXCPU` at the value (the soft limit), and
    /// `SIGKILL` one second later (the hard limit), so that a child ended by this limit
    /// is told apart from one killed otherwise. Where `hcp`'s own hard limit is lower,
    /// the hard limit stays there.
    CpuSeconds(u64),
    /// `RLIMIT_AS`, bytes of address space.
    AddressSpaceBytes(u64),
    /// `RLIMIT_FSIZE`, bytes: the largest file the child may write.
    FileSizeBytes(u64),
    /// `RLIMIT_NOFILE`, open file descriptors.
    OpenFiles(u64),
    /// `RLIMIT_NPROC`, processes of the user (counts the user's other processes too).
    Processes(u64),
    /// `RLIMIT_CORE`, bytes of core dump (0: none).
    CoreBytes(u64),
}

impl Rlimit {
    /// The resource, soft and hard value.
    fn resource(self) -> (Resource, u64, u64) {
        match self {
            Self::CpuSeconds(v) => {
                let ceiling = getrlimit(Resource::RLIMIT_CPU).map_or(u64::MAX, |(_, h)| h);
                let hard = v.saturating_add(1).min(ceiling).max(v);
                (Resource::RLIMIT_CPU, v, hard)
            }
            Self::AddressSpaceBytes(v) => (Resource::RLIMIT_AS, v, v),
            Self::FileSizeBytes(v) => (Resource::RLIMIT_FSIZE, v, v),
            Self::OpenFiles(v) => (Resource::RLIMIT_NOFILE, v, v),
            Self::Processes(v) => (Resource::RLIMIT_NPROC, v, v),
            Self::CoreBytes(v) => (Resource::RLIMIT_CORE, v, v),
        }
    }
}

/// The resource limits of every child (RUNTIME §5), soft = hard. Defaults live in the
/// runtime configuration (`hcp_store::config`); a per-exec override can only tighten
/// ([`ResourceLimits::tightened`]). A value above the limit `hcp` itself runs under is
/// lowered to it, since an unprivileged process cannot raise a hard limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceLimits {
    /// `RLIMIT_CPU`: seconds of CPU time; then `SIGXCPU`/`SIGKILL`.
    pub cpu_seconds: u64,
    /// `RLIMIT_AS`: bytes of virtual address space; allocations past it fail.
    pub address_space_bytes: u64,
    /// `RLIMIT_NOFILE`: open file descriptors.
    pub open_files: u64,
    /// `RLIMIT_FSIZE`: bytes of the largest file the child may write; then `SIGXFSZ`.
    pub file_size_bytes: u64,
    /// `RLIMIT_NPROC`: processes and threads of the user, counting those the user runs
    /// outside hcp; not enforced by the kernel for root.
    pub processes: u64,
}

/// Per-exec overrides of [`ResourceLimits`]: `None` keeps the configured value, a larger
/// value than the configured one is ignored (overrides only tighten).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitOverrides {
    /// Seconds of CPU time.
    pub cpu_seconds: Option<u64>,
    /// Bytes of address space.
    pub address_space_bytes: Option<u64>,
    /// Open file descriptors.
    pub open_files: Option<u64>,
    /// Bytes of the largest file.
    pub file_size_bytes: Option<u64>,
    /// Processes of the user.
    pub processes: Option<u64>,
}

impl ResourceLimits {
    /// Each limit the smaller of the configured value and the override: an override can
    /// tighten a limit, never loosen it.
    pub fn tightened(self, o: &LimitOverrides) -> Self {
        let t = |v: u64, o: Option<u64>| o.map_or(v, |o| o.min(v));
        Self {
            cpu_seconds: t(self.cpu_seconds, o.cpu_seconds),
            address_space_bytes: t(self.address_space_bytes, o.address_space_bytes),
            open_files: t(self.open_files, o.open_files),
            file_size_bytes: t(self.file_size_bytes, o.file_size_bytes),
            processes: t(self.processes, o.processes),
        }
    }

    /// The limits as [`Rlimit`]s, `RLIMIT_CORE` 0 included.
    pub fn rlimits(&self) -> [Rlimit; 6] {
        [
            Rlimit::CpuSeconds(self.cpu_seconds),
            Rlimit::AddressSpaceBytes(self.address_space_bytes),
            Rlimit::OpenFiles(self.open_files),
            Rlimit::FileSizeBytes(self.file_size_bytes),
            Rlimit::Processes(self.processes),
            Rlimit::CoreBytes(0),
        ]
    }

    /// The limits the child will really get: each lowered to the hard limit of the
    /// calling process (which an unprivileged child could not exceed anyway).
    pub fn effective(&self) -> Self {
        let cap = |r: Resource, v: u64| match getrlimit(r) {
            Ok((_, hard)) => v.min(hard),
            Err(_) => v,
        };
        Self {
            cpu_seconds: cap(Resource::RLIMIT_CPU, self.cpu_seconds),
            address_space_bytes: cap(Resource::RLIMIT_AS, self.address_space_bytes),
            open_files: cap(Resource::RLIMIT_NOFILE, self.open_files),
            file_size_bytes: cap(Resource::RLIMIT_FSIZE, self.file_size_bytes),
            processes: cap(Resource::RLIMIT_NPROC, self.processes),
        }
    }
}

/// Whether a `local` child may use the network (TCP `bind`/`connect`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Network {
    /// The default: no network rule.
    #[default]
    Allow,
    /// Deny TCP `bind` and `connect` on every port (Landlock ABI ≥ 4); refused as
    /// `sandbox_unavailable` where the kernel cannot enforce it. UDP and raw sockets are
    /// not covered by ABI 7.
    Deny,
}

/// The sandbox configuration of `local` land, from the runtime configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SandboxPolicy {
    /// Refuse `local` verbs (`sandbox_unavailable`) when Landlock is not available.
    pub require: bool,
    /// Network access of `local` children.
    pub network: Network,
    /// Resource limits, already tightened for this exec.
    pub limits: ResourceLimits,
}

/// The paths of one `local` exec.
#[derive(Debug, Clone, Copy)]
pub struct SandboxPaths<'a> {
    /// The sandbox working directory: read-write, the child's cwd and `HOME`.
    pub workdir: &'a Path,
    /// The private temporary directory ([`PrivateTmp`](crate::PrivateTmp)): read-write, the child's `TMPDIR`.
    pub tmpdir: &'a Path,
    /// The pinned bin: read and execute.
    pub bin: &'a Path,
    /// More paths to read and execute beneath, never write (an interpreter outside the
    /// system paths, say).
    pub extra_ro: &'a [PathBuf],
    /// Paths the sandbox may neither be, hold, nor lie inside (`$HCP_HOME`): the child
    /// could write there. A working directory that breaks this is refused
    /// (`sandbox_unavailable`).
    pub protected: &'a [PathBuf],
    /// Home directories: the sandbox may lie inside one but neither be nor hold one, nor
    /// lie inside one of its dot-directories (`~/.ssh`, `~/.config`, `~/.cargo` …): a
    /// project under a home is a sandbox, the home itself is not. Refused likewise.
    pub not_above: &'a [PathBuf],
}

/// How a child was confined, for the exec result and the audit record (`sandbox`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SandboxReport {
    /// `landlock` or `unconfined`.
    pub mode: SandboxMode,
    /// The Landlock ABI used (0 when unconfined).
    pub abi: u32,
    /// Filesystem rules enforced.
    pub filesystem: bool,
    /// The network as configured and as enforced.
    pub network: NetworkReport,
    /// Signals and abstract UNIX sockets scoped to the sandbox (ABI ≥ 6).
    pub scoped: bool,
    /// The resource limits the child gets.
    pub limits: ResourceLimits,
    /// Why the child is unconfined, when it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Whether Landlock confined the child.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxMode {
    /// A Landlock ruleset was applied.
    Landlock,
    /// No Landlock: only the working directory and the limits.
    Unconfined,
}

/// The network of a `local` child.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NetworkReport {
    /// Allowed by the configuration.
    Allowed,
    /// Denied by the configuration and by the kernel (TCP).
    Denied,
}

impl SandboxReport {
    /// The one-word summary the result and the audit record carry as `sandbox`:
    /// `landlock abi N` or `unconfined`.
    pub fn summary(&self) -> String {
        match self.mode {
            SandboxMode::Landlock => format!("landlock abi {}", self.abi),
            SandboxMode::Unconfined => "unconfined".to_owned(),
        }
    }
}

/// Whether the calling process runs as root (effective uid 0): the kernel then does not
/// apply [`ResourceLimits::processes`] (`RLIMIT_NPROC`) to its children.
pub fn running_as_root() -> bool {
    // SAFETY: `geteuid` takes no argument and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// What to apply to a child between `clone` and `execve`, prepared in the parent.
#[derive(Debug, Clone, Default)]
pub struct Confinement {
    /// Resource, soft and hard value.
    limits: Vec<(Resource, u64, u64)>,
    die_with_parent: Option<libc::pid_t>,
    /// A created Landlock ruleset (`O_CLOEXEC`, so it does not reach the program).
    ruleset: Option<Arc<OwnedFd>>,
}

impl PartialEq for Confinement {
    fn eq(&self, other: &Self) -> bool {
        self.limits == other.limits
            && self.die_with_parent == other.die_with_parent
            && match (&self.ruleset, &other.ruleset) {
                (None, None) => true,
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                _ => false,
            }
    }
}

impl Eq for Confinement {}

impl Confinement {
    /// No confinement yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a resource limit (soft = hard = the value).
    pub fn rlimit(mut self, limit: Rlimit) -> Self {
        self.limits.push(limit.resource());
        self
    }

    /// The resource limits of every child (RUNTIME §5), each lowered to what `hcp` runs
    /// under ([`ResourceLimits::effective`]), no core dumps, and
    /// [`die_with_parent`](Self::die_with_parent). For lands other than `local`.
    pub fn with_limits(limits: &ResourceLimits) -> Self {
        let mut c = Self::new().die_with_parent();
        for l in limits.effective().rlimits() {
            c = c.rlimit(l);
        }
        c
    }

    /// Sends `SIGKILL` to the direct child when the thread that spawned it dies (so an
    /// `hcp` killed with `SIGKILL` does not leave its child running). Grandchildren are
    /// not covered; the child's process group is killed by [`run`](crate::run) on every
    /// path it controls.
    pub fn die_with_parent(mut self) -> Self {
        self.die_with_parent = Some(std::process::id() as libc::pid_t);
        self
    }

    /// Whether there is anything to apply.
    pub fn is_empty(&self) -> bool {
        self.limits.is_empty() && self.die_with_parent.is_none() && self.ruleset.is_none()
    }

    /// Whether a Landlock ruleset will be applied.
    pub fn is_landlocked(&self) -> bool {
        self.ruleset.is_some()
    }

    /// The confinement of a `local` land child (RUNTIME §5): [`with_limits`](Self::with_limits)
    /// plus a Landlock ruleset at the best ABI the kernel offers (up to
    /// [`TESTED_LANDLOCK_ABI`]), and the report of what will be enforced.
    ///
    /// # Errors
    /// - `sandbox_unavailable` (exit 77): no Landlock and `policy.require`; network
    ///   `deny` and an ABI below [`NETWORK_LANDLOCK_ABI`]; a working directory that is
    ///   `/`, holds a `paths.protected` or `paths.not_above` path or the parent of
    ///   `paths.tmpdir` (the system temporary directory), or lies inside a
    ///   `paths.protected` one;
    /// - `sandbox_failed` (exit 126): the working directory, temporary directory or bin
    ///   cannot be opened, or the kernel refused the ruleset.
    pub fn for_local_land(
        paths: &SandboxPaths<'_>,
        policy: &SandboxPolicy,
    ) -> Result<(Self, SandboxReport), AdapterError> {
        Self::for_local_land_with(LandlockSupport::probe(), paths, policy)
    }

    /// [`for_local_land`](Self::for_local_land) as if the kernel offered `support`, capped
    /// at what it really offers (so this can only weaken the sandbox, never claim more):
    /// for tests of the unconfined and older-ABI paths, and for `hcp doctor`.
    ///
    /// # Errors
    /// As [`for_local_land`](Self::for_local_land).
    pub fn for_local_land_with(
        support: LandlockSupport,
        paths: &SandboxPaths<'_>,
        policy: &SandboxPolicy,
    ) -> Result<(Self, SandboxReport), AdapterError> {
        check_protected(paths)?;
        let real = LandlockSupport::probe();
        let abi = support.abi().min(real.abi()).min(TESTED_LANDLOCK_ABI);
        let limits = policy.limits.effective();
        let mut confinement = Self::with_limits(&policy.limits);
        if abi == 0 {
            let reason = support
                .missing_reason()
                .or(real.missing_reason())
                .unwrap_or("landlock is not available");
            if policy.require {
                return Err(AdapterError::SandboxUnavailable {
                    reason: format!("{reason} and the configuration requires the sandbox"),
                });
            }
            if policy.network == Network::Deny {
                return Err(AdapterError::SandboxUnavailable {
                    reason: format!(
                        "{reason}, so the configured network `deny` cannot be enforced"
                    ),
                });
            }
            let report = SandboxReport {
                mode: SandboxMode::Unconfined,
                abi: 0,
                filesystem: false,
                network: NetworkReport::Allowed,
                scoped: false,
                limits,
                reason: Some(reason.to_owned()),
            };
            return Ok((confinement, report));
        }
        let deny_net = policy.network == Network::Deny;
        if deny_net && abi < NETWORK_LANDLOCK_ABI {
            return Err(AdapterError::SandboxUnavailable {
                reason: format!(
                    "the configured network `deny` needs landlock abi {NETWORK_LANDLOCK_ABI}, the kernel offers {abi}"
                ),
            });
        }
        let fd = build_ruleset(abi, paths, deny_net)?;
        confinement.ruleset = Some(Arc::new(fd));
        let report = SandboxReport {
            mode: SandboxMode::Landlock,
            abi,
            filesystem: true,
            network: if deny_net {
                NetworkReport::Denied
            } else {
                NetworkReport::Allowed
            },
            scoped: abi >= SCOPE_LANDLOCK_ABI,
            limits,
            reason: None,
        };
        Ok((confinement, report))
    }

    /// Applies the confinement to the calling process. Called only in the child, after
    /// `clone` and before `execve`, in the parent's memory: makes only async-signal-safe
    /// calls and does not allocate (the error is built from a raw OS error code).
    ///
    /// # Errors
    /// The OS error of the failed call; the spawn then fails (`spawn_failed`).
    pub(crate) fn apply_in_child(&self) -> io::Result<()> {
        for &(resource, soft, hard) in &self.limits {
            setrlimit(resource, soft, hard).map_err(|e| io::Error::from_raw_os_error(e as i32))?;
        }
        if let Some(parent) = self.die_with_parent {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                .map_err(|e| io::Error::from_raw_os_error(e as i32))?;
            // The parent may have died before the signal was armed.
            if nix::unistd::getppid().as_raw() != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
        }
        if let Some(fd) = &self.ruleset {
            // SAFETY: `prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)` takes integers only.
            if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: `landlock_restrict_self(fd, 0)` takes a descriptor we own (kept
            // open by the `Arc` the hook holds) and flags; it touches no memory of ours.
            let r =
                unsafe { libc::syscall(libc::SYS_landlock_restrict_self, fd.as_raw_fd(), 0u32) };
            if r != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

/// System directories a sandbox working directory may neither be nor lie inside:
/// [`SYSTEM_READ_ONLY`] (a child would get write access to programs and configuration,
/// as root to all of them) and the kernel's and devices' trees.
pub const NOT_A_SANDBOX: [&str; 16] = [
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/boot", "/proc",
    "/sys", "/dev", "/run", "/var", "/opt", "/snap",
];

/// Directories whose contents may be sandboxes, but not they themselves: shared roots that
/// hold other users' or other programs' files. `/var/tmp` is also the one place under
/// `/var` a sandbox may lie in.
pub const SHARED_ROOTS: [&str; 6] = ["/tmp", "/var/tmp", "/home", "/srv", "/mnt", "/media"];

/// Refuses a working directory that is `/` or a [`SHARED_ROOTS`] directory, is or lies
/// inside a [`NOT_A_SANDBOX`] directory (`/var/tmp` apart), holds a protected path, a
/// home or the directory the private temporary directory was made in, is a home or lies
/// inside a home's dot-directory, or lies inside a protected path.
fn check_protected(paths: &SandboxPaths<'_>) -> Result<(), AdapterError> {
    let work = paths
        .workdir
        .canonicalize()
        .map_err(|e| sandbox_failed(paths.workdir, "cannot resolve the working directory", e))?;
    if work == Path::new("/") {
        return Err(AdapterError::SandboxUnavailable {
            reason: "the sandbox working directory is `/`".into(),
        });
    }
    let resolve = |p: &PathBuf| p.canonicalize().unwrap_or_else(|_| p.clone());
    let shared: Vec<PathBuf> = SHARED_ROOTS
        .iter()
        .map(|p| resolve(&PathBuf::from(p)))
        .collect();
    if let Some(root) = shared.iter().find(|r| **r == work) {
        return Err(AdapterError::SandboxUnavailable {
            reason: format!(
                "the sandbox working directory `{}` is a shared directory that holds other users' files; use a directory inside it",
                root.display()
            ),
        });
    }
    let in_var_tmp = shared
        .iter()
        .any(|r| r.ends_with("var/tmp") && work.starts_with(r));
    for system in NOT_A_SANDBOX.iter().map(|p| resolve(&PathBuf::from(p))) {
        if work.starts_with(&system) && !in_var_tmp {
            return Err(AdapterError::SandboxUnavailable {
                reason: format!(
                    "the sandbox working directory `{}` is a system directory (`{}`), which a local command may not write",
                    work.display(),
                    system.display()
                ),
            });
        }
    }
    let refuse = |p: &Path, how: &str| AdapterError::SandboxUnavailable {
        reason: format!(
            "the sandbox working directory `{}` {how} `{}`, which a local command may not write",
            work.display(),
            p.display()
        ),
    };
    for p in paths.protected.iter().map(resolve) {
        if p.starts_with(&work) {
            return Err(refuse(&p, "holds"));
        }
        if work.starts_with(&p) {
            return Err(refuse(&p, "lies inside"));
        }
    }
    for home in paths.not_above.iter().map(resolve) {
        if work == home {
            return Err(AdapterError::SandboxUnavailable {
                reason: format!(
                    "the sandbox working directory `{}` is a home directory; use a project directory inside it",
                    work.display()
                ),
            });
        }
        if home.starts_with(&work) {
            return Err(refuse(&home, "holds the home directory"));
        }
        // Dot-directories of a home hold keys, credentials, configuration, tools and
        // what runs at login; none is a sandbox.
        if let Ok(rest) = work.strip_prefix(&home)
            && let Some(first) = rest.components().next()
            && first.as_os_str().as_encoded_bytes().starts_with(b".")
        {
            return Err(AdapterError::SandboxUnavailable {
                reason: format!(
                    "the sandbox working directory `{}` lies inside `{}`, a hidden directory of a home (configuration, keys, tools)",
                    work.display(),
                    home.join(first).display()
                ),
            });
        }
    }
    // The directory private temporary directories are made in (`/tmp`): holding it
    // would hand the child every other exec's `TMPDIR`.
    if let Some(base) = paths.tmpdir.parent().map(|p| resolve(&p.to_path_buf()))
        && base.starts_with(&work)
    {
        return Err(refuse(
            &base,
            "holds the directory of the private temporary directories,",
        ));
    }
    Ok(())
}

fn sandbox_failed(path: &Path, reason: &str, e: io::Error) -> AdapterError {
    AdapterError::SandboxFailed {
        path: path.to_owned(),
        reason: reason.to_owned(),
        source: Some(e),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    const LIMITS: ResourceLimits = ResourceLimits {
        cpu_seconds: 10,
        address_space_bytes: 1 << 30,
        open_files: 256,
        file_size_bytes: 1 << 20,
        processes: 100,
    };

    #[test]
    fn overrides_only_tighten() {
        let o = LimitOverrides {
            cpu_seconds: Some(5),
            open_files: Some(100_000),
            ..LimitOverrides::default()
        };
        assert_eq!(
            LIMITS.tightened(&o),
            ResourceLimits {
                cpu_seconds: 5,
                ..LIMITS
            }
        );
    }

    #[test]
    fn unconfined_without_landlock_unless_required() {
        let dir = tempfile::tempdir().unwrap();
        let paths = SandboxPaths {
            workdir: dir.path(),
            tmpdir: dir.path(),
            bin: Path::new("/bin/sh"),
            extra_ro: &[],
            protected: &[],
            not_above: &[],
        };
        let mut policy = SandboxPolicy {
            require: false,
            network: Network::Allow,
            limits: LIMITS,
        };
        let none = LandlockSupport::NotImplemented;
        let (c, report) = Confinement::for_local_land_with(none, &paths, &policy).unwrap();
        assert!(!c.is_landlocked());
        assert_eq!(report.summary(), "unconfined");
        assert_eq!(report.reason.as_deref(), Some("the kernel has no landlock"));
        policy.require = true;
        let e = Confinement::for_local_land_with(none, &paths, &policy).unwrap_err();
        assert_eq!((e.code(), e.exit_status()), ("sandbox_unavailable", 77));
        policy.require = false;
        policy.network = Network::Deny;
        let e = Confinement::for_local_land_with(none, &paths, &policy).unwrap_err();
        assert_eq!(e.code(), "sandbox_unavailable");
        let e =
            Confinement::for_local_land_with(LandlockSupport::Abi(3), &paths, &policy).unwrap_err();
        assert_eq!(e.code(), "sandbox_unavailable");
    }

    #[test]
    fn a_workdir_holding_a_protected_path_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("hcp-home");
        std::fs::create_dir(&home).unwrap();
        let protected = [home];
        let paths = SandboxPaths {
            workdir: dir.path(),
            tmpdir: dir.path(),
            bin: Path::new("/bin/sh"),
            extra_ro: &[],
            protected: &protected,
            not_above: &[],
        };
        let policy = SandboxPolicy {
            require: false,
            network: Network::Allow,
            limits: LIMITS,
        };
        let e = Confinement::for_local_land(&paths, &policy).unwrap_err();
        assert_eq!(e.code(), "sandbox_unavailable");
        let root = SandboxPaths {
            workdir: Path::new("/"),
            protected: &[],
            ..paths
        };
        let e = Confinement::for_local_land(&root, &policy).unwrap_err();
        assert_eq!(e.code(), "sandbox_unavailable");
        // Inside `$HCP_HOME`: refused; inside `$HOME`: a sandbox; `$HOME` itself: refused.
        let inside = protected[0].join("state");
        std::fs::create_dir(&inside).unwrap();
        let within = SandboxPaths {
            workdir: &inside,
            ..paths
        };
        let e = Confinement::for_local_land(&within, &policy).unwrap_err();
        assert!(e.to_string().contains("lies inside"), "{e}");
        let home = [dir.path().to_owned()];
        let project = dir.path().join("project");
        std::fs::create_dir(&project).unwrap();
        let in_home = SandboxPaths {
            workdir: &project,
            protected: &[],
            not_above: &home,
            ..paths
        };
        assert!(Confinement::for_local_land(&in_home, &policy).is_ok());
        let at_home = SandboxPaths {
            workdir: dir.path(),
            ..in_home
        };
        let e = Confinement::for_local_land(&at_home, &policy).unwrap_err();
        assert!(e.to_string().contains("is a home directory"), "{e}");
        // Above the home, or inside one of its dot-directories: refused.
        let nested_home = [project.clone()];
        let above_home = SandboxPaths {
            workdir: dir.path(),
            not_above: &nested_home,
            ..in_home
        };
        let e = Confinement::for_local_land(&above_home, &policy).unwrap_err();
        assert!(e.to_string().contains("holds the home"), "{e}");
        let dot = dir.path().join(".cargo/registry");
        std::fs::create_dir_all(&dot).unwrap();
        let in_dot = SandboxPaths {
            workdir: &dot,
            ..in_home
        };
        let e = Confinement::for_local_land(&in_dot, &policy).unwrap_err();
        assert!(e.to_string().contains("hidden directory"), "{e}");
        // Shared roots themselves: refused; inside them, and inside /var/tmp: a sandbox.
        for root in ["/tmp", "/var/tmp", "/home"] {
            if !Path::new(root).is_dir() {
                continue;
            }
            let at = SandboxPaths {
                workdir: Path::new(root),
                not_above: &[],
                ..in_home
            };
            let e = Confinement::for_local_land(&at, &policy).unwrap_err();
            assert!(e.to_string().contains("shared directory"), "{root}: {e}");
        }
        let var_tmp = tempfile::tempdir_in("/var/tmp").unwrap();
        let in_var_tmp = SandboxPaths {
            workdir: var_tmp.path(),
            not_above: &[],
            ..in_home
        };
        assert!(Confinement::for_local_land(&in_var_tmp, &policy).is_ok());
        // Holding the directory of the private temporary directories (`/tmp`): refused.
        let tmp = dir.path().join("sys-tmp/hcp-exec-x");
        std::fs::create_dir_all(&tmp).unwrap();
        let above_tmp = SandboxPaths {
            workdir: dir.path(),
            tmpdir: &tmp,
            not_above: &[],
            ..in_home
        };
        let e = Confinement::for_local_land(&above_tmp, &policy).unwrap_err();
        assert!(e.to_string().contains("sys-tmp"), "{e}");
        // System directories, and whatever lies inside them: refused.
        for system in [
            "/usr",
            "/usr/share",
            "/etc",
            "/proc/self",
            "/sys/kernel",
            "/dev",
        ] {
            let at = SandboxPaths {
                workdir: Path::new(system),
                ..in_home
            };
            let e = Confinement::for_local_land(&at, &policy).unwrap_err();
            assert_eq!(e.code(), "sandbox_unavailable", "{system}");
            assert!(e.to_string().contains("system directory"), "{system}: {e}");
        }
    }
}
