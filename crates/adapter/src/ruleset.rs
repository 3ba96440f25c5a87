//! The Landlock side of confinement (RUNTIME §5.1 "Sockets"): what the kernel offers
//! ([`LandlockSupport`]) and the one ruleset a call uses. The view is the filesystem's
//! wall, so Landlock is left its scopes alone: outside a network namespace of the call's
//! own, abstract Unix sockets and signals are scoped to the call (ABI ≥ 6). The ruleset
//! handles no access right and is the same for every call, so it is made once per process
//! ([`scope_ruleset`]); the child only calls `landlock_restrict_self` with it.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::OnceLock;

/// The newest Landlock ABI this code was written and tested against: 7 (Linux 6.15).
/// A newer kernel is used at this level; newer rights are not requested untested.
pub const TESTED_LANDLOCK_ABI: u32 = 7;

/// The first Landlock ABI with signal and abstract-socket scoping (Linux 6.12).
pub const SCOPE_LANDLOCK_ABI: u32 = 6;

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

/// `struct landlock_ruleset_attr` up to ABI 6 (`scoped`).
#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

/// `LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL`.
const SCOPES: u64 = 0x1 | 0x2;

/// The ruleset that scopes abstract Unix sockets and signals to the call and handles
/// nothing else, made on first use and kept open for the life of the process; `None` where
/// the kernel's ABI is below [`SCOPE_LANDLOCK_ABI`] or it refused.
pub(crate) fn scope_ruleset() -> Option<RawFd> {
    static RULESET: OnceLock<Option<OwnedFd>> = OnceLock::new();
    RULESET
        .get_or_init(|| {
            if LandlockSupport::probe().abi() < SCOPE_LANDLOCK_ABI {
                return None;
            }
            let attr = RulesetAttr {
                handled_access_fs: 0,
                handled_access_net: 0,
                scoped: SCOPES,
            };
            // SAFETY: the kernel reads the attribute struct from this stack frame.
            let fd = unsafe {
                libc::syscall(
                    libc::SYS_landlock_create_ruleset,
                    &raw const attr,
                    std::mem::size_of::<RulesetAttr>(),
                    0u32,
                )
            };
            // SAFETY: a descriptor the kernel just made, owned by nothing else.
            (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
        })
        .as_ref()
        .map(AsRawFd::as_raw_fd)
}
