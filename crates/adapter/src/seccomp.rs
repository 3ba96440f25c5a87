//! The seccomp filter of a call's child (RUNTIME §4 "the owner is never reachable from inside
//! a call", §5.1 "Sockets", §5.3 "Network"), built once per process and installed in the
//! child after `PR_SET_NO_NEW_PRIVS`, where installing one is a single system call on a
//! program the parent prepared (no allocation between `clone` and `execve`).
//!
//! One program per call (installing a filter costs about 1.7 µs per instruction here, as
//! the kernel converts and compiles it, so one short program rather than one per concern:
//! at most about 40 instructions, built by [`build`], not by a general rule compiler), with
//! these parts:
//!
//! - the base, every call: `EPERM` for `ptrace`, the kernel keyrings (`keyctl`, `add_key`,
//!   `request_key`: the owner's session and user keyrings are not the call's, and
//!   `request_key` can start a helper as root), `bpf`, `userfaultfd` and
//!   `open_by_handle_at`; `EACCES` for `io_uring_setup`, `io_uring_enter` and
//!   `io_uring_register` in every network mode (io_uring's `IORING_OP_SOCKET` would make a
//!   socket without `socket(2)`);
//! - no user namespace of the call's own: `unshare` and `clone` with `CLONE_NEWUSER` answer
//!   `EPERM`, and `clone3`, whose flags lie in memory a filter cannot read, `ENOSYS` (libc
//!   then falls back to `clone`). A new user namespace would give its maker every
//!   capability in it again, whatever the child dropped: the mounts of a namespace of its
//!   own (a tmpfs of any size, beyond `limits.tmp_bytes`), and as root, whose namespace maps
//!   host uid 0, capabilities over root's files in the view;
//! - `socket(2)` by network mode ([`Net`]): under `deny` no socket at all — a call for
//!   another family than `AF_UNIX` is handed to hcp as a seccomp user notification when
//!   hcp listens (hcp answers `EACCES` and learns that the child tried, for the result's
//!   hint), else refused with `EACCES`;
//!   under `host` every family but `AF_UNIX` and `AF_VSOCK`; in a network namespace of the
//!   call's own (`{"allow": …}`) `AF_INET` and `AF_INET6` only. `AF_UNIX` passes in every
//!   mode when the operator listed a socket (`packs.ID.write`). `socketpair(2)` always
//!   works: a pair connects the call to itself;
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
/// A nested `hcp` asks this before it looks for a store: `true` means it must refuse
/// (`nested_call`, 77) rather than act as the owner. With a session it is that
/// session's principal either way.
pub fn inside_non_owner_call() -> bool {
    // SAFETY: prctl with integer arguments only; an unknown option touches no memory.
    let r = unsafe { libc::prctl(PROBE_OPTION, PROBE_ARG, 0, 0, 0) };
    r == -1 && io::Error::last_os_error().raw_os_error() == Some(MARK_ERRNO)
}

/// Which sockets `socket(2)` may make (RUNTIME §5.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Net {
    /// `deny`: none.
    Deny,
    /// `host`: every family but `AF_UNIX` and `AF_VSOCK`.
    Host,
    /// A network namespace of the call's own: `AF_INET` and `AF_INET6`.
    OwnNamespace,
}

/// Which parts the call's one seccomp program holds (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Filter {
    /// The network mode's rule for `socket(2)`.
    pub net: Net,
    /// The operator listed a socket: `AF_UNIX` passes.
    pub unix: bool,
    /// A non-owner call: the nested-call marker.
    pub marker: bool,
    /// Under `deny`, hand `socket(2)` to hcp as a user notification (the filter is then
    /// installed with `SECCOMP_FILTER_FLAG_NEW_LISTENER`).
    pub notify: bool,
}

/// System calls the base part refuses with `EPERM`.
const BASE: [i64; 4] = [
    libc::SYS_ptrace,
    libc::SYS_bpf,
    libc::SYS_userfaultfd,
    libc::SYS_open_by_handle_at,
];

/// `CLONE_NEWUSER`, the flag `unshare` and `clone` may not carry.
const NEW_USER: u32 = libc::CLONE_NEWUSER as u32;

/// The keyring calls (`add_key`, `request_key`, `keyctl`), refused with `EPERM` too: their
/// numbers are consecutive, so one range check (two instructions) covers them.
const KEYRINGS: (i64, i64) = (libc::SYS_add_key, libc::SYS_keyctl);

/// io_uring (`io_uring_setup`, `io_uring_enter`, `io_uring_register`, consecutive), refused
/// with `EACCES`: one range check.
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
const JSET_K: u16 = 0x45; // BPF_JMP | BPF_JSET | BPF_K
const RET_K: u16 = 0x06; // BPF_RET | BPF_K
const RET_ALLOW: u32 = 0x7fff_0000; // SECCOMP_RET_ALLOW
const RET_KILL_PROCESS: u32 = 0x8000_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const RET_USER_NOTIF: u32 = 0x7fc0_0000;

/// Offset of `seccomp_data.nr`, `.arch` and the low half of `.args[0]`, `.args[1]`.
const NR: u32 = 0;
const ARCH: u32 = 4;
const ARG0: u32 = 16;
const ARG1_LO: u32 = 24;
const ARG1_HI: u32 = 28;

/// Where a jump goes.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum To {
    Next,
    Allow,
    Kill,
    Eperm,
    Eacces,
    Enosys,
    Notify,
    Socket,
    Prctl,
    /// `unshare` or `clone`: their flags (argument 0) checked for `CLONE_NEWUSER`.
    Namespaces,
    /// The instruction after the next (the end of a range check).
    Over,
}

/// A small forward-only assembler: instructions with symbolic jumps, then offsets.
struct Asm {
    code: Vec<(u16, To, To, u32)>,
    labels: std::collections::HashMap<To, usize>,
}

impl Asm {
    fn ld(&mut self, off: u32) {
        self.code.push((LD_W_ABS, To::Next, To::Next, off));
    }
    fn jeq(&mut self, k: u32, t: To, f: To) {
        self.code.push((JEQ_K, t, f, k));
    }
    fn ret(&mut self, k: u32) {
        self.code.push((RET_K, To::Next, To::Next, k));
    }
    fn label(&mut self, l: To) {
        self.labels.insert(l, self.code.len());
    }
    /// `lo <= nr <= hi` → `to`, in two instructions.
    fn range(&mut self, (lo, hi): (i64, i64), to: To) {
        self.code.push((JGE_K, To::Next, To::Over, lo as u32));
        self.code.push((JGT_K, To::Next, to, hi as u32));
    }
    fn finish(self) -> Vec<SockFilter> {
        let Self { code, labels } = self;
        let offset = |at: usize, to: To| -> u8 {
            match to {
                To::Next => 0,
                To::Over => 1,
                _ => u8::try_from(labels[&to] - at - 1).unwrap_or(u8::MAX),
            }
        };
        code.iter()
            .enumerate()
            .map(|(i, &(c, jt, jf, k))| SockFilter {
                code: c,
                jt: offset(i, jt),
                jf: offset(i, jf),
                k,
            })
            .collect()
    }
}

/// Builds the call's one program (see the module docs): the architecture check, x32
/// numbers refused on x86_64, then one comparison per refused system call, each jumping
/// to a shared return.
pub(crate) fn build(filter: Filter) -> Vec<SockFilter> {
    let mut a = Asm {
        code: Vec::new(),
        labels: std::collections::HashMap::new(),
    };
    a.ld(ARCH);
    a.jeq(AUDIT_ARCH, To::Next, To::Kill);
    a.ld(NR);
    #[cfg(target_arch = "x86_64")]
    a.code.push((JGE_K, To::Enosys, To::Next, 0x4000_0000));
    for nr in BASE {
        a.jeq(nr as u32, To::Eperm, To::Next);
    }
    a.range(KEYRINGS, To::Eperm);
    a.range(IO_URING, To::Eacces);
    a.jeq(libc::SYS_unshare as u32, To::Namespaces, To::Next);
    a.jeq(libc::SYS_clone as u32, To::Namespaces, To::Next);
    a.jeq(libc::SYS_clone3 as u32, To::Enosys, To::Next);
    a.jeq(libc::SYS_socket as u32, To::Socket, To::Next);
    if filter.marker {
        a.jeq(libc::SYS_prctl as u32, To::Prctl, To::Next);
    }
    a.ret(RET_ALLOW);

    // unshare(2), clone(2): no new user namespace (the flags are an int, argument 0).
    a.label(To::Namespaces);
    a.ld(ARG0);
    a.code.push((JSET_K, To::Eperm, To::Allow, NEW_USER));

    // socket(2): by family.
    a.label(To::Socket);
    a.ld(ARG0);
    let unix = if filter.unix { To::Allow } else { To::Eacces };
    match filter.net {
        Net::Deny => {
            // A Unix socket is refused without a word to hcp: glibc's name service asks
            // nscd and systemd-userdb over one at every user lookup, and the hint is about
            // the network.
            a.jeq(libc::AF_UNIX as u32, unix, To::Next);
            a.ret(if filter.notify {
                RET_USER_NOTIF
            } else {
                RET_ERRNO | libc::EACCES as u32
            });
        }
        Net::Host => {
            a.jeq(libc::AF_UNIX as u32, unix, To::Next);
            a.jeq(libc::AF_VSOCK as u32, To::Eacces, To::Next);
            a.ret(RET_ALLOW);
        }
        Net::OwnNamespace => {
            a.jeq(libc::AF_INET as u32, To::Allow, To::Next);
            a.jeq(libc::AF_INET6 as u32, To::Allow, To::Next);
            a.jeq(libc::AF_UNIX as u32, unix, To::Next);
            a.ret(RET_ERRNO | libc::EACCES as u32);
        }
    }

    if filter.marker {
        a.label(To::Prctl);
        let [lo, hi] = [PROBE_ARG as u32, (PROBE_ARG >> 32) as u32];
        a.ld(ARG0); // option, an int
        a.jeq(PROBE_OPTION as u32, To::Next, To::Allow);
        a.ld(ARG1_LO);
        a.jeq(lo, To::Next, To::Allow);
        a.ld(ARG1_HI);
        a.jeq(hi, To::Next, To::Allow);
        a.ret(RET_ERRNO | MARK_ERRNO as u32);
    }
    for (to, k) in [
        (To::Allow, RET_ALLOW),
        (To::Kill, RET_KILL_PROCESS),
        (To::Eperm, RET_ERRNO | libc::EPERM as u32),
        (To::Eacces, RET_ERRNO | libc::EACCES as u32),
        (To::Enosys, RET_ERRNO | libc::ENOSYS as u32),
        (To::Notify, RET_USER_NOTIF),
    ] {
        a.label(to);
        a.ret(k);
    }
    a.finish()
}

/// The call's program for `filter`, built once per process and shared.
pub(crate) fn program(filter: Filter) -> &'static [SockFilter] {
    static PROGRAMS: [OnceLock<Vec<SockFilter>>; 24] = [const { OnceLock::new() }; 24];
    let net = match filter.net {
        Net::Deny => 0,
        Net::Host => 1,
        Net::OwnNamespace => 2,
    };
    let i = net * 8
        + usize::from(filter.unix) * 4
        + usize::from(filter.marker) * 2
        + usize::from(filter.notify);
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

/// Installs `prog` on the calling thread, with a new listener when `listener` (the
/// descriptor is returned). Async-signal-safe, allocates nothing; the caller has set
/// `PR_SET_NO_NEW_PRIVS`. Returns the listener (or 0), or `-errno`.
pub(crate) fn install(prog: &[SockFilter], listener: bool) -> i32 {
    let fprog = Fprog {
        len: libc::c_ushort::try_from(prog.len()).unwrap_or(libc::c_ushort::MAX),
        filter: prog.as_ptr(),
    };
    let flags: libc::c_ulong = if listener {
        libc::SECCOMP_FILTER_FLAG_NEW_LISTENER
    } else {
        0
    };
    // SAFETY: the kernel copies the program from `fprog`, which points into memory the
    // parent keeps alive until `clone` returns.
    let r = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            flags,
            &raw const fprog,
        )
    };
    if r >= 0 {
        i32::try_from(r).unwrap_or(0)
    } else {
        -io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn every_program_is_short_and_every_jump_lands_inside_it() {
        for net in [Net::Deny, Net::Host, Net::OwnNamespace] {
            for bits in 0..8u8 {
                let f = Filter {
                    net,
                    unix: bits & 1 != 0,
                    marker: bits & 2 != 0,
                    notify: bits & 4 != 0,
                };
                let p = program(f);
                assert!(p.len() < 64, "{f:?}: {}", p.len());
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
