//! The seccomp filter of a call's child (RUNTIME §4 "the owner is never reachable from inside
//! a call", §5.1 "Sockets", §5.3 "Network"), built once per process and installed in the
//! child after `PR_SET_NO_NEW_PRIVS`, where installing one is a single system call on a
//! program the parent prepared (no allocation between `clone` and `execve`).
//!
//! One program per call (installing a filter costs the kernel a conversion and a compile of
//! the program, and a walk of it for every system call number to fill its action cache, so
//! one short program rather than one per concern: at most 46 instructions, built by
//! [`build`], not by a general rule compiler, searching the numbers rather than comparing
//! them in a row), with these parts:
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
pub struct SockFilter {
    code: u16,
    jt: u8,
    jf: u8,
    k: u32,
}

const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
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
    /// A node of the search over the system call numbers.
    Node(u16),
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
    /// The search over `segs` (consecutive, covering every number; see [`segments`]): a
    /// `JGE` per node, splitting where the weights below and above are nearest alike, its
    /// branches a segment's target or a further node.
    fn search(&mut self, segs: &[Segment]) {
        let mut nodes = 0u16;
        let mut pending: Vec<(To, &[Segment])> = Vec::new();
        let root = self.branch(segs, &mut nodes, &mut pending);
        if pending.is_empty() {
            // One segment: every number goes to the same place.
            self.code.push((JGE_K, root, root, 0));
        }
        while let Some((label, part)) = pending.pop() {
            self.label(label);
            let split = split_at(part);
            let (lo, hi) = part.split_at(split);
            let f = self.branch(lo, &mut nodes, &mut pending);
            let t = self.branch(hi, &mut nodes, &mut pending);
            self.code.push((JGE_K, t, f, hi[0].first));
        }
    }

    /// Where a search over `part` goes: a single segment's target, else a new node, queued
    /// to be emitted.
    fn branch<'s>(
        &mut self,
        part: &'s [Segment],
        nodes: &mut u16,
        pending: &mut Vec<(To, &'s [Segment])>,
    ) -> To {
        if let [one] = part {
            return one.to;
        }
        let label = To::Node(*nodes);
        *nodes += 1;
        pending.push((label, part));
        label
    }

    fn finish(self) -> Vec<SockFilter> {
        let Self { code, labels } = self;
        let offset = |at: usize, to: To| -> u8 {
            match to {
                To::Next => 0,
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

/// A stretch of system call numbers, `first` up to the next segment's, and where they go.
#[derive(Debug, Clone, Copy)]
struct Segment {
    first: u32,
    /// Numbers below [`NUMBERS_WALKED`] in it: what a search for it costs at install.
    weight: u32,
    to: To,
}

/// The numbers the filter looks at, `(first, last, to)`, as consecutive segments from 0
/// up, every number not named allowed; neighbours going to the same place merged.
fn segments(mut looked_at: Vec<(u32, u32, To)>) -> Vec<Segment> {
    looked_at.sort_by_key(|&(first, _, _)| first);
    let mut segs: Vec<(u32, To)> = Vec::new();
    let mut next = 0u64;
    for (first, last, to) in looked_at {
        if u64::from(first) > next {
            segs.push((next as u32, To::Allow));
        }
        segs.push((first, to));
        next = u64::from(last) + 1;
    }
    if next <= u64::from(u32::MAX) {
        segs.push((next as u32, To::Allow));
    }
    segs.dedup_by(|b, a| a.1 == b.1);
    let ends: Vec<u64> = segs
        .iter()
        .skip(1)
        .map(|&(f, _)| u64::from(f))
        .chain([1 << 32])
        .collect();
    segs.iter()
        .zip(ends)
        .map(|(&(first, to), end)| Segment {
            first,
            weight: (end.min(u64::from(NUMBERS_WALKED))).saturating_sub(u64::from(first)) as u32,
            to,
        })
        .collect()
}

/// Where to split `part` (at least two segments): the index of the first segment above,
/// so that the weights below and above are nearest alike.
fn split_at(part: &[Segment]) -> usize {
    let total: u32 = part.iter().map(|s| s.weight).sum();
    let mut below = 0u32;
    let mut best = (u32::MAX, 1);
    for (i, s) in part.iter().enumerate().take(part.len() - 1) {
        below += s.weight;
        let gap = below.abs_diff(total - below);
        if gap < best.0 {
            best = (gap, i + 1);
        }
    }
    best.1
}

/// System call numbers the kernel's action cache walks the program for at install, for
/// the weights of the search below: a little above the highest number of Linux 6.18
/// (x86_64: 467).
const NUMBERS_WALKED: u32 = 512;

/// Builds the call's one program (see the module docs): the architecture check, then a
/// binary search over the system call numbers the filter looks at (x32 numbers refused on
/// x86_64 among them), each leaf a shared return or the argument check of its call.
///
/// The search, rather than one comparison per call in a row, is what the kernel's action
/// cache walks at install (`seccomp_cache_prepare`: the program emulated once for every
/// system call number, to learn which are always allowed): about 9 instructions per
/// number instead of 15–16. It splits where the numbers below and above weigh alike, so
/// the wide allowed stretches between the refused calls are reached in few comparisons.
pub(crate) fn build(filter: Filter) -> Vec<SockFilter> {
    let mut a = Asm {
        code: Vec::new(),
        labels: std::collections::HashMap::new(),
    };
    a.ld(ARCH);
    a.jeq(AUDIT_ARCH, To::Next, To::Kill);
    a.ld(NR);
    let mut looked_at: Vec<(u32, u32, To)> = BASE
        .iter()
        .map(|&nr| (nr as u32, nr as u32, To::Eperm))
        .chain([
            (KEYRINGS.0 as u32, KEYRINGS.1 as u32, To::Eperm),
            (IO_URING.0 as u32, IO_URING.1 as u32, To::Eacces),
            (
                libc::SYS_unshare as u32,
                libc::SYS_unshare as u32,
                To::Namespaces,
            ),
            (
                libc::SYS_clone as u32,
                libc::SYS_clone as u32,
                To::Namespaces,
            ),
            (libc::SYS_clone3 as u32, libc::SYS_clone3 as u32, To::Enosys),
            (libc::SYS_socket as u32, libc::SYS_socket as u32, To::Socket),
        ])
        .collect();
    if filter.marker {
        looked_at.push((libc::SYS_prctl as u32, libc::SYS_prctl as u32, To::Prctl));
    }
    #[cfg(target_arch = "x86_64")]
    looked_at.push((0x4000_0000, u32::MAX, To::Enosys));
    a.search(&segments(looked_at));

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

    /// `struct seccomp_data` as the filter reads it: the number, the architecture, the
    /// arguments.
    struct Data {
        nr: u32,
        arch: u32,
        args: [u64; 6],
    }

    /// Runs `prog` on `d` as the kernel does: its return value.
    fn run(prog: &[SockFilter], d: &Data) -> u32 {
        let word = |off: u32| -> u32 {
            match off {
                NR => d.nr,
                ARCH => d.arch,
                _ => {
                    let i = (off as usize - 16) / 8;
                    let a = d.args[i];
                    if (off - 16).is_multiple_of(8) {
                        a as u32
                    } else {
                        (a >> 32) as u32
                    }
                }
            }
        };
        let (mut pc, mut acc) = (0usize, 0u32);
        loop {
            let ins = prog[pc];
            pc += 1;
            let jump = |taken: bool| usize::from(if taken { ins.jt } else { ins.jf });
            match ins.code {
                LD_W_ABS => acc = word(ins.k),
                JEQ_K => pc += jump(acc == ins.k),
                JGE_K => pc += jump(acc >= ins.k),
                JSET_K => pc += jump(acc & ins.k != 0),
                RET_K => return ins.k,
                c => panic!("unexpected instruction {c:#x}"),
            }
        }
    }

    /// What the module docs say the filter answers for `d`.
    fn expected(f: Filter, d: &Data) -> u32 {
        let eperm = RET_ERRNO | libc::EPERM as u32;
        let eacces = RET_ERRNO | libc::EACCES as u32;
        let enosys = RET_ERRNO | libc::ENOSYS as u32;
        if d.arch != AUDIT_ARCH {
            return RET_KILL_PROCESS;
        }
        if cfg!(target_arch = "x86_64") && d.nr >= 0x4000_0000 {
            return enosys;
        }
        let nr = i64::from(d.nr);
        let arg0 = d.args[0] as u32;
        match nr {
            _ if BASE.contains(&nr) => eperm,
            _ if (KEYRINGS.0..=KEYRINGS.1).contains(&nr) => eperm,
            _ if (IO_URING.0..=IO_URING.1).contains(&nr) => eacces,
            libc::SYS_unshare | libc::SYS_clone if arg0 & NEW_USER != 0 => eperm,
            libc::SYS_clone3 => enosys,
            libc::SYS_socket => {
                let fam = arg0 as i32;
                match f.net {
                    Net::Deny if fam == libc::AF_UNIX && f.unix => RET_ALLOW,
                    Net::Deny if fam == libc::AF_UNIX => eacces,
                    Net::Deny if f.notify => RET_USER_NOTIF,
                    Net::Deny => eacces,
                    Net::Host if fam == libc::AF_UNIX && !f.unix => eacces,
                    Net::Host if fam == libc::AF_VSOCK => eacces,
                    Net::Host => RET_ALLOW,
                    Net::OwnNamespace if fam == libc::AF_INET || fam == libc::AF_INET6 => RET_ALLOW,
                    Net::OwnNamespace if fam == libc::AF_UNIX && f.unix => RET_ALLOW,
                    Net::OwnNamespace => eacces,
                }
            }
            libc::SYS_prctl
                if f.marker && arg0 == PROBE_OPTION as u32 && d.args[1] == PROBE_ARG =>
            {
                RET_ERRNO | MARK_ERRNO as u32
            }
            _ => RET_ALLOW,
        }
    }

    fn every_filter() -> impl Iterator<Item = Filter> {
        [Net::Deny, Net::Host, Net::OwnNamespace]
            .into_iter()
            .flat_map(|net| {
                (0..8u8).map(move |bits| Filter {
                    net,
                    unix: bits & 1 != 0,
                    marker: bits & 2 != 0,
                    notify: bits & 4 != 0,
                })
            })
    }

    #[test]
    fn every_program_answers_what_the_module_docs_say() {
        let numbers = (0..1024u32).chain([
            0x3fff_ffff,
            0x4000_0000,
            0x4000_0000 + libc::SYS_ptrace as u32,
            0x4000_0000 + libc::SYS_socket as u32,
            0x8000_0000,
            u32::MAX,
        ]);
        let numbers: Vec<u32> = numbers.collect();
        let arg0s = [
            0u64,
            libc::AF_UNIX as u64,
            libc::AF_INET as u64,
            libc::AF_INET6 as u64,
            libc::AF_PACKET as u64,
            libc::AF_VSOCK as u64,
            libc::AF_NETLINK as u64,
            u64::from(NEW_USER),
            u64::from(NEW_USER) | libc::CLONE_NEWNS as u64,
            libc::CLONE_NEWNS as u64,
            PROBE_OPTION as u64,
            1 << 32 | libc::AF_UNIX as u64,
        ];
        let arg1s = [0u64, PROBE_ARG, PROBE_ARG | 1 << 32, 1];
        for f in every_filter() {
            let p = program(f);
            for &nr in &numbers {
                for arch in [AUDIT_ARCH, 0x4000_0003] {
                    for a0 in arg0s {
                        for a1 in arg1s {
                            let d = Data {
                                nr,
                                arch,
                                args: [a0, a1, 0, 0, 0, 0],
                            };
                            assert_eq!(
                                run(p, &d),
                                expected(f, &d),
                                "{f:?} nr {nr} {a0:#x} {a1:#x}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// The instructions the kernel's action cache walks when the filter is installed
    /// (`seccomp_cache_prepare`: for each system call number below `numbers`, the program
    /// is emulated until a return, or until it loads an argument), summed over the
    /// numbers.
    fn cache_walk(prog: &[SockFilter], numbers: u32) -> usize {
        let mut steps = 0;
        for nr in 0..numbers {
            let (mut pc, mut acc) = (0usize, 0u32);
            loop {
                let ins = prog[pc];
                pc += 1;
                steps += 1;
                let jump = |taken: bool| usize::from(if taken { ins.jt } else { ins.jf });
                match ins.code {
                    LD_W_ABS if ins.k == NR => acc = nr,
                    LD_W_ABS if ins.k == ARCH => acc = AUDIT_ARCH,
                    LD_W_ABS | RET_K => break,
                    JEQ_K => pc += jump(acc == ins.k),
                    JGE_K => pc += jump(acc >= ins.k),
                    JSET_K => pc += jump(acc & ins.k != 0),
                    c => panic!("unexpected instruction {c:#x}"),
                }
            }
        }
        steps
    }

    #[test]
    fn installing_walks_few_instructions_per_system_call() {
        // x86_64 numbers reach 467 on Linux 6.18; the kernel walks each below NR_syscalls.
        // One comparison per refused call in a row walked 15–16 per number (7,217–7,671).
        for f in every_filter() {
            let p = program(f);
            let walked = cache_walk(p, 468);
            println!(
                "{f:?}: {} instructions, {walked} walked at install",
                p.len()
            );
            assert!(walked <= 9 * 468, "{f:?}: {walked}");
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
