//! Seccomp filters of a call's child (RUNTIME §4 "the owner is never reachable from inside
//! a call", §5 "Confinement of every land"), built in the parent and installed in the
//! child after `PR_SET_NO_NEW_PRIVS`, where installing one is a single system call on a
//! program the parent prepared (no allocation between `clone` and `execve`).
//!
//! Three filters, each a [`seccompiler`] program (one action per program; the kernel
//! runs every installed filter and the strictest answer wins):
//!
//! - [`Filter::Base`], every call: `EPERM` for the system calls that would undo the
//!   rest of the confinement or reach beyond the call — the mount family (`mount`,
//!   `umount2`, `pivot_root`, `open_tree`, `move_mount`, `fsopen`, `fsconfig`,
//!   `fsmount`, `fspick`, `mount_setattr`: Landlock forbids `mount` but not a detached
//!   `open_tree` clone, through which an overmounted path would show again),
//!   `open_by_handle_at` (opens an inode without a path, past Landlock), `ptrace`,
//!   `process_vm_readv`/`process_vm_writev`, the kernel keyrings (`keyctl`, `add_key`,
//!   `request_key`: the owner's session keyring is not the call's), `bpf`,
//!   `perf_event_open`, `userfaultfd`, module loading, `kexec_*`, `reboot`, `swapon`/
//!   `swapoff`, `acct`, `quotactl`, `iopl`/`ioperm` and setting the clock.
//! - [`Filter::NetworkDeny`], under `network: deny`: `EACCES` for every `socket(2)` —
//!   no TCP, UDP, raw, packet, netlink or vsock socket, and no Unix socket either, since
//!   Landlock ABI 7 cannot scope a pathname `connect()` to the sandbox (`socketpair(2)`
//!   stays: a pair connects the call to itself) — and for `io_uring_setup`,
//!   `io_uring_enter` and `io_uring_register` (io_uring's `IORING_OP_SOCKET` would make
//!   a socket without `socket(2)`).
//! - [`Filter::Marker`], every non-owner call: the probe `prctl(PROBE_OPTION, PROBE_ARG)`
//!   answers [`MARK_ERRNO`] instead of the kernel's `EINVAL` ([`inside_non_owner_call`]).
//!   A filter cannot be removed, survives `fork`, `execve`, `setsid` and the death of any
//!   ancestor, so every descendant of the call carries it, whatever its environment.
//!
//! On x86_64 each program also refuses x32 system call numbers (`ENOSYS`), which would
//! otherwise reach the same kernel entry points under other numbers.

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch, sock_filter,
};
use std::collections::BTreeMap;
use std::io;
use std::sync::OnceLock;

/// The `prctl(2)` option of the probe: `0x48435000` ("HCP\0"), which no kernel defines.
pub const PROBE_OPTION: libc::c_int = 0x4843_5000;
/// The probe's second argument (`"hcp-"`): the marker matches only this exact call.
pub const PROBE_ARG: libc::c_ulong = 0x6863_702d;
/// The errno the probe answers inside a non-owner call: `EKEYREJECTED` (129), which
/// `prctl` never returns by itself (it answers `EINVAL` to an unknown option).
pub const MARK_ERRNO: i32 = libc::EKEYREJECTED;

/// Whether the calling process descends from the child of a non-owner call (RUNTIME §4):
/// the [`Filter::Marker`] of that call answers the probe. One system call; no allocation.
///
/// A nested `hcp` asks this when no session is given: `true` means it must refuse
/// (`nested_call`, 77) rather than act as the owner. With a session it is that
/// session's principal either way.
pub fn inside_non_owner_call() -> bool {
    // SAFETY: prctl with integer arguments only; an unknown option touches no memory.
    let r = unsafe { libc::prctl(PROBE_OPTION, PROBE_ARG, 0, 0, 0) };
    r == -1 && io::Error::last_os_error().raw_os_error() == Some(MARK_ERRNO)
}

/// One of the call's seccomp programs (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filter {
    /// Every call: `EPERM` for what would undo the confinement.
    Base,
    /// `network: deny`: `EACCES` for `socket` and io_uring.
    NetworkDeny,
    /// Every non-owner call: the nested-call marker.
    Marker,
}

/// System calls [`Filter::Base`] refuses, by name (for the docs and tests) and number.
fn base_syscalls() -> Vec<i64> {
    let mut v = vec![
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_open_tree,
        libc::SYS_move_mount,
        libc::SYS_fsopen,
        libc::SYS_fsconfig,
        libc::SYS_fsmount,
        libc::SYS_fspick,
        libc::SYS_mount_setattr,
        libc::SYS_open_by_handle_at,
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_userfaultfd,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_kexec_load,
        libc::SYS_kexec_file_load,
        libc::SYS_reboot,
        libc::SYS_swapon,
        libc::SYS_swapoff,
        libc::SYS_acct,
        libc::SYS_quotactl,
        libc::SYS_settimeofday,
        libc::SYS_clock_settime,
    ];
    #[cfg(target_arch = "x86_64")]
    v.extend([libc::SYS_iopl, libc::SYS_ioperm]);
    v
}

fn target_arch() -> Result<TargetArch, String> {
    TargetArch::try_from(std::env::consts::ARCH).map_err(|e| e.to_string())
}

/// Builds the BPF program of `filter` for this architecture.
///
/// # Errors
/// A message when seccompiler cannot build it (an architecture it does not know).
pub(crate) fn build(filter: Filter) -> Result<BpfProgram, String> {
    let arch = target_arch()?;
    let unconditional = |nrs: &[i64]| -> BTreeMap<i64, Vec<SeccompRule>> {
        nrs.iter().map(|&n| (n, Vec::new())).collect()
    };
    let (rules, action) = match filter {
        Filter::Base => (
            unconditional(&base_syscalls()),
            SeccompAction::Errno(libc::EPERM as u32),
        ),
        Filter::NetworkDeny => (
            unconditional(&[
                libc::SYS_socket,
                libc::SYS_io_uring_setup,
                libc::SYS_io_uring_enter,
                libc::SYS_io_uring_register,
            ]),
            SeccompAction::Errno(libc::EACCES as u32),
        ),
        Filter::Marker => {
            let cond = |i, v| {
                SeccompCondition::new(i, SeccompCmpArgLen::Qword, SeccompCmpOp::Eq, v)
                    .map_err(|e| e.to_string())
            };
            let rule = SeccompRule::new(vec![
                cond(0, PROBE_OPTION as u64)?,
                cond(1, PROBE_ARG as u64)?,
            ])
            .map_err(|e| e.to_string())?;
            (
                BTreeMap::from([(libc::SYS_prctl, vec![rule])]),
                SeccompAction::Errno(MARK_ERRNO as u32),
            )
        }
    };
    let f =
        SeccompFilter::new(rules, SeccompAction::Allow, action, arch).map_err(|e| e.to_string())?;
    let mut prog: BpfProgram = f
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())?;
    guard_x32(&mut prog);
    Ok(prog)
}

/// Inserts, after seccompiler's architecture check (its first three instructions), a
/// refusal (`ENOSYS`) of x86_64's x32 system call numbers (bit 30 set). Its jumps stay
/// within the inserted instructions, so the program's own relative jumps are unchanged.
#[cfg(target_arch = "x86_64")]
fn guard_x32(prog: &mut BpfProgram) {
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    let ld_nr = sock_filter {
        code: 0x20, // BPF_LD | BPF_W | BPF_ABS
        jt: 0,
        jf: 0,
        k: 0, // offsetof(struct seccomp_data, nr)
    };
    let jge = sock_filter {
        code: 0x35, // BPF_JMP | BPF_JGE | BPF_K
        jt: 0,
        jf: 1,
        k: X32_SYSCALL_BIT,
    };
    let ret = sock_filter {
        code: 0x06, // BPF_RET | BPF_K
        jt: 0,
        jf: 0,
        k: libc::SECCOMP_RET_ERRNO | (libc::ENOSYS as u32),
    };
    let at = 3.min(prog.len());
    prog.splice(at..at, [ld_nr, jge, ret]);
}

#[cfg(not(target_arch = "x86_64"))]
fn guard_x32(_prog: &mut BpfProgram) {}

/// The call's programs, each built once per process (they depend on nothing of the
/// call) and shared.
pub(crate) fn program(filter: Filter) -> Result<&'static [sock_filter], String> {
    static BASE: OnceLock<Result<BpfProgram, String>> = OnceLock::new();
    static NET: OnceLock<Result<BpfProgram, String>> = OnceLock::new();
    static MARK: OnceLock<Result<BpfProgram, String>> = OnceLock::new();
    let cell = match filter {
        Filter::Base => &BASE,
        Filter::NetworkDeny => &NET,
        Filter::Marker => &MARK,
    };
    cell.get_or_init(|| build(filter))
        .as_ref()
        .map(Vec::as_slice)
        .map_err(Clone::clone)
}

/// Whether the kernel has seccomp filters: `prctl(PR_GET_SECCOMP)` answers (0 or 2)
/// rather than `EINVAL`.
pub fn seccomp_available() -> bool {
    // SAFETY: integer arguments only.
    unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) >= 0 }
}

/// `struct sock_fprog` as `seccomp(2)` reads it.
#[repr(C)]
struct Fprog {
    len: libc::c_ushort,
    filter: *const sock_filter,
}

/// Installs `prog` on the calling thread. Async-signal-safe, allocates nothing; the
/// caller has set `PR_SET_NO_NEW_PRIVS`. Returns 0, or the errno.
pub(crate) fn install(prog: &[sock_filter]) -> i32 {
    let fprog = Fprog {
        len: libc::c_ushort::try_from(prog.len()).unwrap_or(libc::c_ushort::MAX),
        filter: prog.as_ptr(),
    };
    // SAFETY: the kernel copies the program from `fprog`, which points into memory the
    // parent keeps alive until `clone` returns.
    let r = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0u32,
            &raw const fprog,
        )
    };
    if r == 0 {
        0
    } else {
        io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn every_filter_builds_and_fits() {
        for f in [Filter::Base, Filter::NetworkDeny, Filter::Marker] {
            let p = program(f).unwrap();
            assert!(p.len() > 6 && p.len() < 400, "{f:?}: {}", p.len());
        }
    }

    #[test]
    fn outside_any_call_the_probe_answers_einval() {
        assert!(!inside_non_owner_call());
        // SAFETY: integer arguments only.
        let r = unsafe { libc::prctl(PROBE_OPTION, PROBE_ARG, 0, 0, 0) };
        assert_eq!(r, -1);
        assert_eq!(
            io::Error::last_os_error().raw_os_error(),
            Some(libc::EINVAL)
        );
        assert!(seccomp_available());
    }
}
