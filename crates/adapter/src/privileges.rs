//! No capability reaches outside a call (RUNTIME §5.4 "Privileges and resources").
//!
//! As root (no user namespace: it would map host uid 0), the child empties all five
//! capability sets before `execve`: every capability leaves the bounding set
//! (`PR_CAPBSET_DROP`, one call each), and the effective, permitted and inheritable sets are
//! set to nothing (`capset`), which clears the ambient set with them. `execve` of uid 0
//! then gives the program the bounding set ∪ inheritable set, which is empty;
//! `no_new_privs` (set after) keeps a setuid or file-capability program from raising it. In
//! the user namespace of an ordinary user's call the child holds every capability of that
//! namespace until the `capset`, and none after `execve` either: its uid there is not 0,
//! no uid 0 is mapped (so no file capability applies), and `no_new_privs` is set; its
//! bounding set is left full, since it could give nothing back (41 system calls fewer),
//! and a user namespace of its own, which would reset it, is refused by the seccomp
//! filter. Uid 0 still passes the owner bits of root's files, so the view keeps `/proc`
//! read-only, masks its dangerous parts and leaves every `/etc` entry that is not
//! world-readable out (the view module).
//!
//! Real-time scheduling and negative nice values fail: `RLIMIT_RTPRIO` and `RLIMIT_NICE`
//! are 0 (the limits module), and no child has `CAP_SYS_NICE`.

use std::sync::OnceLock;

/// The highest capability number this kernel knows (`/proc/sys/kernel/cap_last_cap`, read
/// once per process; 40, `CAP_CHECKPOINT_RESTORE`, when it cannot be read).
pub(crate) fn last_cap() -> u32 {
    static LAST: OnceLock<u32> = OnceLock::new();
    *LAST.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(40)
            .min(63)
    })
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Empties every capability set of the calling child (see the module docs): with
/// `bounding`, `last + 1` `prctl` calls for the bounding set (as root, where it is what
/// `execve` of uid 0 gives back), then one `capset` of nothing, which also clears the
/// ambient set (the kernel keeps an ambient capability only while it is both permitted
/// and inheritable). Async-signal-safe, no allocation. Returns 0 or the errno.
pub(crate) fn drop_all(bounding: Option<u32>) -> i32 {
    let errno = || {
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL)
    };
    if let Some(last) = bounding {
        for cap in 0..=last {
            // SAFETY: integers only. EINVAL: a capability the kernel does not know.
            let r = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) };
            if r != 0 && errno() != libc::EINVAL {
                return errno();
            }
        }
    }
    let mut h = CapHeader {
        version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
        pid: 0,
    };
    let d = [CapData::default(); 2];
    // SAFETY: capset reads the header and two data entries from this stack frame.
    let r = unsafe { libc::syscall(libc::SYS_capset, &raw mut h, d.as_ptr()) };
    if r != 0 {
        return errno();
    }
    0
}

/// The calling process's five capability sets as `/proc/self/status` shows them
/// (`CapInh`, `CapPrm`, `CapEff`, `CapBnd`, `CapAmb`), for tests and `hcp doctor`.
pub fn capability_sets(status: &str) -> [(String, u64); 5] {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| u64::from_str_radix(v.trim_start_matches(':').trim(), 16).ok())
            .unwrap_or(u64::MAX)
    };
    ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"].map(|n| (n.to_owned(), field(n)))
}
