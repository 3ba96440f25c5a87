//! No capability reaches outside a call (RUNTIME §5.4 "Privileges and resources").
//!
//! As root (no user namespace: it would map host uid 0), the child empties all five
//! capability sets before `execve`: every capability leaves the bounding set
//! (`PR_CAPBSET_DROP`), the ambient set is cleared, and the effective, permitted and
//! inheritable sets are set to nothing (`capset`). `execve` of uid 0 then gives the program
//! the bounding set ∪ inheritable set, which is empty; `no_new_privs` (set after) keeps a
//! setuid or file-capability program from raising it. In a user namespace the same steps
//! run: the child holds no capability in it after `execve` either (its uid there is not 0),
//! and its bounding set is empty too. Uid 0 still passes the owner bits of root's files, so
//! the view keeps `/proc`'s dangerous parts read-only or masked and leaves every `/etc`
//! entry that is not world-readable out (the view module).
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

/// Empties every capability set of the calling child (see the module docs): `last + 1`
/// `prctl` calls, one more for the ambient set and one `capset`. Async-signal-safe, no
/// allocation. Returns 0 or the errno.
pub(crate) fn drop_all(last: u32) -> i32 {
    let errno = || {
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL)
    };
    for cap in 0..=last {
        // SAFETY: integers only. EINVAL: a capability the kernel does not know.
        let r = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) };
        if r != 0 && errno() != libc::EINVAL {
            return errno();
        }
    }
    // SAFETY: integers only.
    let r = unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    if r != 0 && errno() != libc::EINVAL {
        return errno();
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
