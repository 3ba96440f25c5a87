//! The seccomp filter of a call's child (RUNTIME §4 "the owner is never reachable from inside
//! a call", §5 "Confinement of every land"), built in the parent and installed in the
//! child after `PR_SET_NO_NEW_PRIVS`, where installing one is a single system call on a
//! program the parent prepared (no allocation between `clone` and `execve`).
//!
//! One program per call (installing a filter costs about 1.7 µs per instruction here,
//! as the kernel converts and compiles it, so one short program rather than one per
//! concern: about 25 instructions, built by [`build`], not by a general rule compiler),
//! with three parts:
//!
//! - the base, every call: `EPERM` for `ptrace` (within the call's own Landlock domain,
//!   where Landlock allows it), the kernel keyrings (`keyctl`, `add_key`,
//!   `request_key`: the owner's session and user keyrings are not the call's, and
//!   `request_key` can start a helper as root), `bpf` and `userfaultfd`. What would undo
//!   the rest of the confinement (`mount`, `umount2`, `open_tree`, `move_mount`, the
//!   `fs*` calls, `open_by_handle_at`) needs a capability no child keeps (see [`BASE`]);
//!   so do modules, `kexec`, `reboot`, clocks and raw I/O
//!   ([`crate::DROPPED_CAPABILITIES`] for root);
//! - `network: deny`: `EACCES` for every `socket(2)` — no TCP, UDP, raw, packet,
//!   netlink or vsock socket, and no Unix socket either, since Landlock ABI 7 cannot
//!   scope a pathname `connect()` to the sandbox (`socketpair(2)` stays: a pair connects
//!   the call to itself) — and for `io_uring_setup`, `io_uring_enter` and
//!   `io_uring_register` (io_uring's `IORING_OP_SOCKET` would make a socket without
//!   `socket(2)`);
//! - every non-owner call: the marker. The probe `prctl(PROBE_OPTION, PROBE_ARG)`
//!   answers [`MARK_ERRNO`] instead of the kernel's `EINVAL` ([`inside_non_owner_call`]).
//!   A filter cannot be removed, survives `fork`, `execve`, `setsid` and the death of any
//!   ancestor, so every descendant of the call carries it, whatever its environment.
//!
//! Another architecture's system call numbers kill the process; on x86_64 x32 numbers
//! are refused (`ENOSYS`), which would otherwise reach the same kernel entry points
//! under other numbers.

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
/// the marker of that call's seccomp filter answers the probe. One system call; no allocation.
///
/// A nested `hcp` asks this when no session is given: `true` means it must refuse
/// (`nested_call`, 77) rather than act as the owner. With a session it is that
/// session's principal either way.
pub fn inside_non_owner_call() -> bool {
    // SAFETY: prctl with integer arguments only; an unknown option touches no memory.
    let r = unsafe { libc::prctl(PROBE_OPTION, PROBE_ARG, 0, 0, 0) };
    r == -1 && io::Error::last_os_error().raw_os_error() == Some(MARK_ERRNO)
}

/// Which parts the call's one seccomp program holds (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Filter {
    /// `network: deny`: `EACCES` for `socket` and io_uring.
    pub network_deny: bool,
    /// A non-owner call: the nested-call marker.
    pub marker: bool,
}

/// System calls the base part refuses with `EPERM`: what no other layer of the call's
/// confinement covers. (The mount family, `open_tree` and `open_by_handle_at` need
/// `CAP_SYS_ADMIN` or `CAP_DAC_READ_SEARCH`, which no child has after `execve` — an
/// ordinary user's has no capability, a root child loses them from its bounding set —
/// and in a user namespace of its own the child finds the covering mounts locked;
/// Landlock refuses `mount`, `umount` and `pivot_root` and scopes `ptrace` and
/// `process_vm_*` to the call's domain. Each refused call costs one instruction, and
/// each instruction about 1.7 µs at every call's install.)
const BASE: [i64; 3] = [libc::SYS_ptrace, libc::SYS_bpf, libc::SYS_userfaultfd];

/// The keyring calls (`add_key`, `request_key`, `keyctl`), refused with `EPERM` too: their
/// numbers are consecutive, so one range check (two instructions) covers them.
const KEYRINGS: (i64, i64) = (libc::SYS_add_key, libc::SYS_keyctl);

/// System calls `network: deny` refuses with `EACCES`.
const NETWORK: [i64; 1] = [libc::SYS_socket];

/// io_uring (`io_uring_setup`, `io_uring_enter`, `io_uring_register`, consecutive), refused
/// with `EACCES` under `network: deny`: one range check.
const IO_URING: (i64, i64) = (libc::SYS_io_uring_setup, libc::SYS_io_uring_register);

/// `AUDIT_ARCH_*` of this architecture.
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

/// One classic BPF instruction (`struct sock_filter`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SockFilter {
    code: u16,
    jt: u8,
    jf: u8,
    k: u32,
}

const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
const JGT_K: u16 = 0x25; // BPF_JMP | BPF_JGT | BPF_K
const RET_K: u16 = 0x06; // BPF_RET | BPF_K
const RET_ALLOW: u32 = 0x7fff_0000; // SECCOMP_RET_ALLOW
const RET_KILL_PROCESS: u32 = 0x8000_0000;
const RET_ERRNO: u32 = 0x0005_0000;

/// Where a jump goes: the next instruction, or one of the shared returns.
#[derive(Clone, Copy, PartialEq, Eq)]
enum To {
    Next,
    /// Over the next instruction.
    Over,
    Allow,
    Eperm,
    Eacces,
    Enosys,
    Prctl,
}

/// Builds the call's one program: the architecture check (another architecture's
/// system call numbers would mean other calls: killed), x32 numbers refused on x86_64,
/// then one comparison per refused system call, each jumping to a shared return.
/// Installing a filter costs about 1.7 µs per instruction here (the kernel converts and
/// compiles it), so the program is one, and short: at most 26 instructions (consecutive
/// system call numbers share one range check).
pub(crate) fn build(filter: Filter) -> Vec<SockFilter> {
    let mut code: Vec<(u16, To, To, u32)> = vec![
        (LD_W_ABS, To::Next, To::Next, 4), // arch
        (JEQ_K, To::Next, To::Next, AUDIT_ARCH),
    ];
    // jt: skip the kill (handled below by a fixed offset).
    code.push((RET_K, To::Next, To::Next, RET_KILL_PROCESS));
    code.push((LD_W_ABS, To::Next, To::Next, 0)); // nr
    #[cfg(target_arch = "x86_64")]
    code.push((JGE_K, To::Enosys, To::Next, 0x4000_0000));
    // `lo <= nr <= hi` → `to`, in two instructions.
    let range = |code: &mut Vec<(u16, To, To, u32)>, (lo, hi): (i64, i64), to| {
        code.push((JGE_K, To::Next, To::Over, lo as u32));
        code.push((JGT_K, To::Next, to, hi as u32));
    };
    for nr in BASE {
        code.push((JEQ_K, To::Eperm, To::Next, nr as u32));
    }
    range(&mut code, KEYRINGS, To::Eperm);
    if filter.network_deny {
        for nr in NETWORK {
            code.push((JEQ_K, To::Eacces, To::Next, nr as u32));
        }
        range(&mut code, IO_URING, To::Eacces);
    }
    if filter.marker {
        code.push((JEQ_K, To::Prctl, To::Next, libc::SYS_prctl as u32));
    }
    code.push((RET_K, To::Next, To::Next, RET_ALLOW));
    let mut labels = std::collections::HashMap::new();
    if filter.marker {
        labels.insert(To::Prctl as u8, code.len());
        let [lo, hi] = [PROBE_ARG as u32, (PROBE_ARG >> 32) as u32];
        code.extend([
            (LD_W_ABS, To::Next, To::Next, 16), // args[0], low half (an int)
            (JEQ_K, To::Next, To::Allow, PROBE_OPTION as u32),
            (LD_W_ABS, To::Next, To::Next, 24), // args[1], low half
            (JEQ_K, To::Next, To::Allow, lo),
            (LD_W_ABS, To::Next, To::Next, 28), // args[1], high half
            (JEQ_K, To::Next, To::Allow, hi),
            (RET_K, To::Next, To::Next, RET_ERRNO | MARK_ERRNO as u32),
        ]);
    }
    for (to, k) in [
        (To::Allow, RET_ALLOW),
        (To::Eperm, RET_ERRNO | libc::EPERM as u32),
        (To::Eacces, RET_ERRNO | libc::EACCES as u32),
        (To::Enosys, RET_ERRNO | libc::ENOSYS as u32),
    ] {
        labels.insert(to as u8, code.len());
        code.push((RET_K, To::Next, To::Next, k));
    }
    let offset = |at: usize, to: To| -> u8 {
        match to {
            To::Next => 0,
            To::Over => 1,
            _ => u8::try_from(labels[&(to as u8)] - at - 1).unwrap_or(u8::MAX),
        }
    };
    let mut prog: Vec<SockFilter> = code
        .iter()
        .enumerate()
        .map(|(i, &(c, jt, jf, k))| SockFilter {
            code: c,
            jt: offset(i, jt),
            jf: offset(i, jf),
            k,
        })
        .collect();
    // The architecture check: equal → over the kill.
    prog[1].jt = 1;
    prog
}

/// The call's program for `filter`, built once per process and shared.
pub(crate) fn program(filter: Filter) -> &'static [SockFilter] {
    static PROGRAMS: [OnceLock<Vec<SockFilter>>; 4] = [
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
    ];
    let i = usize::from(filter.network_deny) | usize::from(filter.marker) << 1;
    PROGRAMS[i].get_or_init(|| build(filter)).as_slice()
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
    filter: *const SockFilter,
}

/// Installs `prog` on the calling thread. Async-signal-safe, allocates nothing; the
/// caller has set `PR_SET_NO_NEW_PRIVS`. Returns 0, or the errno.
pub(crate) fn install(prog: &[SockFilter]) -> i32 {
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
    fn the_program_is_short_and_every_jump_lands_inside_it() {
        for (network_deny, marker) in [(false, false), (true, false), (false, true), (true, true)] {
            let f = Filter {
                network_deny,
                marker,
            };
            let p = program(f);
            assert!(p.len() < 48, "{f:?}: {}", p.len());
            for (i, ins) in p
                .iter()
                .enumerate()
                .filter(|(_, ins)| ins.code & 0x07 == 0x05)
            {
                assert!(
                    i + 1 + usize::from(ins.jt.max(ins.jf)) < p.len(),
                    "{f:?} at {i}"
                );
            }
            assert_eq!(p.last().map(|i| i.code), Some(RET_K));
        }
    }

    #[test]
    fn the_ranges_are_consecutive_numbers() {
        assert_eq!(libc::SYS_request_key, libc::SYS_add_key + 1);
        assert_eq!(libc::SYS_keyctl, libc::SYS_add_key + 2);
        assert_eq!(libc::SYS_io_uring_enter, libc::SYS_io_uring_setup + 1);
        assert_eq!(libc::SYS_io_uring_register, libc::SYS_io_uring_setup + 2);
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
