//! Starting the child without copying `hcp` (RUNTIME §5 "The child").
//!
//! `fork(2)` copies the page tables of the whole parent and makes every page it writes
//! afterwards fault once (copy on write); for `hcp exec` that cost more than the child's
//! own start. Like glibc's `posix_spawn`, [`spawn`] uses
//! `clone(CLONE_VM | CLONE_VFORK)` — `clone3` where the kernel has it, which also hands
//! back a pidfd (`CLONE_PIDFD`) and can place the child in a cgroup v2 directly
//! (`CLONE_INTO_CGROUP`): the child runs on a stack of its own inside the
//! parent's memory, and the calling thread is suspended until the child has called
//! `execve` (or exited). Unlike `posix_spawn`, it can apply what std's `pre_exec` hook
//! applied: the resource limits, the parent-death signal and the Landlock domain of a
//! [`Confinement`].
//!
//! Between `clone` and `execve` the child only reads data prepared by the parent (paths,
//! argv and environment as C strings, descriptors) and makes async-signal-safe system
//! calls through libc; it never allocates, takes no lock and cannot panic. Its steps:
//!
//! 1. every signal disposition, handled or ignored, is reset to the default (while every
//!    signal is blocked, as the parent blocked them all around `clone`), then the signal
//!    mask is emptied: the child starts with none of the signal state of `hcp` or of
//!    its caller. Where the kernel has `clone3` with `CLONE_CLEAR_SIGHAND` (Linux 5.5), the
//!    child is made with it: the kernel resets every handled signal, and the child resets
//!    only those its `SigIgn` (`/proc/self/status`) shows ignored, which the flag leaves
//!    ignored — one read instead of 64 `rt_sigaction` calls. Elsewhere (and for a kernel
//!    or a filter that refuses `clone3`) the child asks each of the 64 itself;
//! 2. `setpgid(0, 0)`: the child leads a process group of its own;
//! 3. standard input `/dev/null`, output and error the write ends of two pipes; every
//!    other descriptor marked close-on-exec, including any the caller of `hcp` left
//!    inheritable;
//! 4. the call's cgroups, user namespace maps, network namespace and view
//!    ([`Confinement::isolate_in_child`]), then `chdir` to the working directory (in the
//!    view);
//! 5. the rest of the confinement ([`Confinement::apply_in_child`]);
//! 6. `execveat` of the verified descriptor (or `execve` of a script's path).
//!
//! A failing step stores its number and `errno` (and, for the view, the index of its failed
//! step) where the parent reads them once `clone` returns, and the child exits with 127;
//! the parent then reaps it. What the child hands hcp (the seccomp listener, the egress
//! listener) comes over a socket pair (the channel module) and is read once `clone`
//! returns.

use crate::cgroup::CallCgroup;
use crate::confine::Confinement;
use crate::env::ChildEnv;
use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};

/// Bytes of stack for the child between `clone` and `execve`, plus one guard page below
/// it. The steps above use a few KiB; the pages are only touched as used.
const STACK_BYTES: usize = 256 * 1024;

/// The step of the child that failed (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Signal dispositions or mask.
    Signals,
    /// `setpgid`.
    ProcessGroup,
    /// `dup2` of the standard streams.
    Streams,
    /// `chdir` to the working directory.
    Chdir,
    /// The confinement: limits, parent-death signal, Landlock.
    Confine,
    /// `execve` of the program.
    Exec,
    /// The call cgroup, the id maps of a user namespace, the mounts.
    Isolate,
}

impl Step {
    fn from_code(code: i32) -> Self {
        match code {
            1 => Self::Signals,
            2 => Self::ProcessGroup,
            3 => Self::Streams,
            4 => Self::Chdir,
            5 => Self::Confine,
            7 => Self::Isolate,
            _ => Self::Exec,
        }
    }
}

/// Why the child did not start: the step and the OS error.
#[derive(Debug)]
pub(crate) struct SpawnError {
    /// The failed step; `None` when no child was made (`clone`, pipes, stack).
    pub step: Option<Step>,
    /// The OS error of that step.
    pub error: io::Error,
    /// For [`Step::Isolate`] in the view: the index of its failed step (-1: the fixed steps
    /// around the plan).
    pub view_op: Option<i32>,
}

impl SpawnError {
    fn parent(error: io::Error) -> Self {
        Self {
            step: None,
            error,
            view_op: None,
        }
    }
}

/// A started child: its pid (also its process group id), the read ends of its
/// stdout and stderr pipes (`O_CLOEXEC`), and what it handed hcp.
#[derive(Debug)]
pub(crate) struct Spawned {
    /// Process id of the child, leader of its own process group.
    pub pid: libc::pid_t,
    /// Read end of the child's stdout.
    pub stdout: OwnedFd,
    /// Read end of the child's stderr.
    pub stderr: OwnedFd,
    /// The seccomp listener of a `deny` call, whose `socket(2)` hcp answers.
    pub notify: Option<OwnedFd>,
    /// The TCP listener of a call in a network namespace of its own.
    pub egress_listener: Option<OwnedFd>,
    /// What the child learned building its view (`FACT_*` of the view's child module).
    pub facts: u32,
    /// A pidfd of the child, when `clone3` made it (`CLONE_PIDFD`); else the caller opens
    /// one.
    pub pidfd: Option<OwnedFd>,
}

/// What the child executes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Program<'a> {
    /// An open ELF file, executed by `execveat(fd, "", …, AT_EMPTY_PATH)`: exactly the
    /// file that was verified, whatever is renamed over its path since; the process is
    /// named after the file, as with a path.
    Fd(RawFd),
    /// A path (a `#!` script, whose interpreter must reopen it by name).
    Path(&'a Path),
}

/// Everything the child reads, prepared (and allocated) by the parent before `clone`.
struct ChildArgs<'a> {
    /// The path to execute; empty with `program_fd`.
    program: &'a CString,
    /// The descriptor to execute (`Program::Fd`), or -1.
    program_fd: RawFd,
    argv: &'a [*const libc::c_char],
    envp: &'a [*const libc::c_char],
    cwd: &'a CString,
    stdin: RawFd,
    stdout: RawFd,
    stderr: RawFd,
    /// The parent's read ends of the two pipes: the child closes its copies, so that
    /// its stdout shows whether the parent still holds the other end.
    parent_ends: [RawFd; 2],
    confine: Option<&'a Confinement>,
    /// hcp answers the child's seccomp notifications (a `run`, not a `start`).
    listen: bool,
    /// The child's end of the channel, or -1.
    channel: RawFd,
    /// One above the highest descriptor number that may be open (`RLIMIT_NOFILE`), for
    /// kernels without `close_range`.
    max_fd: libc::c_int,
    /// Set by the child before it exits on a failure: the step (1-based).
    failed_step: AtomicI32,
    /// Set by the child with `failed_step`: the `errno` of the step.
    failed_errno: AtomicI32,
    /// Set by the child when its view failed: the index of the view's step.
    failed_op: AtomicI32,
    /// What the child learned building its view.
    facts: AtomicU32,
    /// Set by the parent before it makes the child: the kernel cleared the handled
    /// signals (`CLONE_CLEAR_SIGHAND`), so the child resets only the ignored ones.
    cleared_handlers: AtomicBool,
    /// Set by the parent before it makes the child: the kernel placed it in the cgroup v2
    /// at this index of the confinement's (`CLONE_INTO_CGROUP`), or -1.
    joined_cgroup: AtomicI32,
    /// The `cgroup.procs` of each of the confinement's cgroups, opened by the parent: the
    /// descriptor, or -1 and the errno of its open.
    cgroup_procs: &'a [(RawFd, i32)],
}

fn cstring(bytes: &[u8], what: &str) -> Result<CString, SpawnError> {
    CString::new(bytes).map_err(|_| {
        SpawnError::parent(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("the {what} holds a NUL byte"),
        ))
    })
}

/// A descriptor at 3 or above (`O_CLOEXEC`), so that placing the standard streams in the
/// child cannot overwrite it. Rust's runtime opens 0–2 at start-up, so this only copies
/// when the process was started without them.
fn above_stdio(fd: OwnedFd) -> Result<OwnedFd, SpawnError> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    // SAFETY: F_DUPFD_CLOEXEC on a descriptor we own returns a new one or -1.
    let new = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if new < 0 {
        return Err(SpawnError::parent(io::Error::last_os_error()));
    }
    // SAFETY: the kernel just returned this descriptor; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

fn pipe() -> Result<(OwnedFd, OwnedFd), SpawnError> {
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(|e| SpawnError::parent(io::Error::from_raw_os_error(e as i32)))?;
    Ok((above_stdio(r)?, above_stdio(w)?))
}

/// Starts `program` with `argv` (`argv[0]` included) and exactly `env`, in `cwd`, in
/// its own process group, stdin `/dev/null` and stdout/stderr on new pipes, under
/// `confine` (see the module docs). With `listen`, the caller answers the child's seccomp
/// notifications ([`Spawned::notify`]); without, a `deny` call's `socket(2)` is refused
/// without telling hcp. Returns once the child has called `execve`.
///
/// # Errors
/// [`SpawnError`] with the failed step of the child (the child is reaped), or with no
/// step when the pipes, the stack or the process could not be made, or an argument,
/// variable or path holds a NUL byte.
pub(crate) fn spawn(
    program: Program<'_>,
    argv: &[&OsStr],
    env: &ChildEnv,
    cwd: &Path,
    confine: Option<&Confinement>,
    listen: bool,
) -> Result<Spawned, SpawnError> {
    // Everything that allocates happens here, before `clone`.
    let (program, program_fd) = match program {
        Program::Fd(fd) => (CString::default(), fd),
        Program::Path(p) => (cstring(p.as_os_str().as_bytes(), "program path")?, -1),
    };
    let cwd = cstring(cwd.as_os_str().as_bytes(), "working directory")?;
    let argv_c = argv
        .iter()
        .map(|a| cstring(a.as_bytes(), "argument"))
        .collect::<Result<Vec<_>, _>>()?;
    let envp_c = env
        .iter()
        .map(|(k, v)| {
            let mut kv = Vec::with_capacity(k.len() + v.len() + 1);
            kv.extend_from_slice(k.as_bytes());
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            cstring(&kv, "environment")
        })
        .collect::<Result<Vec<_>, _>>()?;
    let argv_p: Vec<*const libc::c_char> = argv_c
        .iter()
        .map(|c| c.as_ptr())
        .chain(std::iter::once(ptr::null()))
        .collect();
    let envp_p: Vec<*const libc::c_char> = envp_c
        .iter()
        .map(|c| c.as_ptr())
        .chain(std::iter::once(ptr::null()))
        .collect();

    let stdin = std::fs::File::open("/dev/null")
        .map(OwnedFd::from)
        .map_err(SpawnError::parent)
        .and_then(above_stdio)?;
    let (out_r, out_w) = pipe()?;
    let (err_r, err_w) = pipe()?;
    let stack = Stack::new().map_err(SpawnError::parent)?;
    let confine = confine.filter(|c| !c.is_empty());
    let channel = match confine {
        Some(c) if c.needs_channel(listen) => {
            Some(crate::channel::Channel::new().map_err(SpawnError::parent)?)
        }
        _ => None,
    };

    // The cgroups' `cgroup.procs`, opened here: the child joins each with one write.
    let procs_fds = confine
        .and_then(Confinement::cgroup)
        .map(CallCgroup::open_procs)
        .unwrap_or_default();
    let cgroup_procs: Vec<(RawFd, i32)> = procs_fds
        .iter()
        .map(|(fd, e)| (fd.as_ref().map_or(-1, AsRawFd::as_raw_fd), *e))
        .collect();

    let args = ChildArgs {
        program: &program,
        program_fd,
        argv: &argv_p,
        envp: &envp_p,
        cwd: &cwd,
        stdin: stdin.as_raw_fd(),
        stdout: out_w.as_raw_fd(),
        stderr: err_w.as_raw_fd(),
        parent_ends: [out_r.as_raw_fd(), err_r.as_raw_fd()],
        confine,
        listen,
        channel: channel.as_ref().map_or(-1, |c| c.child.as_raw_fd()),
        max_fd: nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
            .ok()
            .and_then(|(soft, _)| libc::c_int::try_from(soft.min(1 << 20)).ok())
            .unwrap_or(1 << 16),
        failed_step: AtomicI32::new(0),
        failed_errno: AtomicI32::new(0),
        failed_op: AtomicI32::new(0),
        facts: AtomicU32::new(0),
        cleared_handlers: AtomicBool::new(false),
        joined_cgroup: AtomicI32::new(-1),
        cgroup_procs: &cgroup_procs,
    };

    // Block every signal around `clone`, so that no handler of ours runs in the child
    // (which shares our memory) before it has reset the dispositions.
    let all = nix::sys::signal::SigSet::all();
    let mut old = nix::sys::signal::SigSet::empty();
    nix::sys::signal::pthread_sigmask(
        nix::sys::signal::SigmaskHow::SIG_SETMASK,
        Some(&all),
        Some(&mut old),
    )
    .map_err(|e| SpawnError::parent(io::Error::from_raw_os_error(e as i32)))?;
    let ns_flags = args.confine.map_or(0, Confinement::clone_flags);
    let into = args
        .confine
        .and_then(Confinement::cgroup)
        .and_then(CallCgroup::join_at_clone);
    let mut pidfd: RawFd = -1;
    let made: io::Result<libc::pid_t> = match clone3(&args, &stack, ns_flags, into, &mut pidfd) {
        Some(made) => made,
        None => {
            // SAFETY: `child_main` only reads `args` (alive until `clone` returns: with
            // CLONE_VFORK this thread is suspended until the child has exec'd or exited)
            // and makes async-signal-safe calls on its own stack (`stack.top()`, mapped
            // and unshared). CLONE_VM without CLONE_SIGHAND or CLONE_FILES: the child's
            // signal dispositions and descriptor table are its own copies. The namespace
            // flags of the confinement (user, PID, mount, IPC, network) are given here
            // too.
            let pid = unsafe {
                libc::clone(
                    child_main,
                    stack.top(),
                    libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD | ns_flags,
                    ptr::from_ref(&args).cast_mut().cast(),
                )
            };
            if pid < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(pid)
            }
        }
    };
    let _ = nix::sys::signal::pthread_sigmask(
        nix::sys::signal::SigmaskHow::SIG_SETMASK,
        Some(&old),
        None,
    );
    drop(stack);
    let pid = made.map_err(SpawnError::parent)?;
    // SAFETY: the pidfd `clone3` just made for this child, owned by nothing else.
    let pidfd = (pidfd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(pidfd) });
    let step = args.failed_step.load(Ordering::Acquire);
    if step != 0 {
        let errno = args.failed_errno.load(Ordering::Acquire);
        let _ = reap(pid);
        let step = Step::from_code(step);
        return Err(SpawnError {
            step: Some(step),
            error: io::Error::from_raw_os_error(errno),
            view_op: (step == Step::Isolate).then(|| args.failed_op.load(Ordering::Acquire)),
        });
    }
    let (mut notify, mut egress_listener) = (None, None);
    if let Some(ch) = &channel {
        for (tag, fd) in ch.receive() {
            match tag {
                crate::channel::TAG_NOTIFY => notify = Some(fd),
                crate::channel::TAG_EGRESS => egress_listener = Some(fd),
                _ => {}
            }
        }
    }
    Ok(Spawned {
        pid,
        stdout: out_r,
        stderr: err_r,
        notify,
        egress_listener,
        facts: args.facts.load(Ordering::Acquire),
        pidfd,
    })
}

/// `clone3`'s flags beyond `clone`'s (`linux/sched.h`).
const CLONE_PIDFD: u64 = 0x1000;
const CLONE_CLEAR_SIGHAND: u64 = 0x1_0000_0000;
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// `struct clone_args` (its size 88 bytes: Linux 5.7, with `cgroup`).
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// Set once `clone3` showed it cannot make our children (no such call, an older
/// `struct clone_args`, no `CLONE_CLEAR_SIGHAND`): every later spawn of this process uses
/// `clone(2)` directly.
static CLONE3_REFUSED: AtomicBool = AtomicBool::new(false);

/// Makes the child with `clone3(CLONE_VM | CLONE_VFORK | CLONE_PIDFD | CLONE_CLEAR_SIGHAND
/// | ns_flags [| CLONE_INTO_CGROUP])` on `stack`, running [`child_main`] with `args`, the
/// pidfd written to `pidfd`. `into`: the index in the confinement's cgroups and a
/// descriptor of the cgroup v2 directory the child starts in. `None` when the kernel or a
/// filter around hcp does not offer `clone3` with these flags (the caller uses `clone`,
/// and the child resets every signal and joins every cgroup itself).
fn clone3(
    args: &ChildArgs<'_>,
    stack: &Stack,
    ns_flags: libc::c_int,
    into: Option<(usize, RawFd)>,
    pidfd: &mut RawFd,
) -> Option<io::Result<libc::pid_t>> {
    if CLONE3_REFUSED.load(Ordering::Relaxed) || !RAW_CLONE3 {
        return None;
    }
    let base = CLONE_VM_VFORK | CLONE_PIDFD | CLONE_CLEAR_SIGHAND | ns_flags as u32 as u64;
    let attempt = |into: Option<(usize, RawFd)>, pidfd: &mut RawFd| {
        let mut ca = CloneArgs {
            flags: base,
            pidfd: ptr::from_mut(pidfd) as u64,
            exit_signal: libc::SIGCHLD as u64,
            stack: stack.low() as u64,
            stack_size: stack.size() as u64,
            ..CloneArgs::default()
        };
        if let Some((_, fd)) = into {
            ca.flags |= CLONE_INTO_CGROUP;
            ca.cgroup = fd as u64;
        }
        args.cleared_handlers.store(true, Ordering::Release);
        args.joined_cgroup.store(
            into.map_or(-1, |(i, _)| i32::try_from(i).unwrap_or(-1)),
            Ordering::Release,
        );
        // SAFETY: as for `clone` in `spawn`: `child_main` only reads `args` (kept alive
        // until the call returns: CLONE_VFORK suspends this thread until the child has
        // exec'd or exited) on its own stack; the kernel reads `ca` and writes `pidfd`.
        unsafe { raw_clone3(&raw mut ca, ptr::from_ref(args).cast_mut().cast()) }
    };
    let mut r = attempt(into, pidfd);
    if r == -(libc::EINVAL as isize) || r == -(libc::E2BIG as isize) {
        // A kernel before 5.7 knows neither `CLONE_INTO_CGROUP` nor the larger struct.
        if into.is_some() {
            r = attempt(None, pidfd);
        }
    }
    if r >= 0 {
        return Some(Ok(libc::pid_t::try_from(r).unwrap_or(-1)));
    }
    let e = i32::try_from(-r).unwrap_or(libc::EINVAL);
    args.cleared_handlers.store(false, Ordering::Release);
    args.joined_cgroup.store(-1, Ordering::Release);
    *pidfd = -1;
    match e {
        libc::ENOSYS | libc::E2BIG | libc::EINVAL => {
            CLONE3_REFUSED.store(true, Ordering::Relaxed);
            None
        }
        // A filter around hcp may refuse `clone3` alone: `clone` may still work.
        libc::EPERM => None,
        e => Some(Err(io::Error::from_raw_os_error(e))),
    }
}

/// `CLONE_VM | CLONE_VFORK`, as `clone3`'s 64-bit flags.
const CLONE_VM_VFORK: u64 = (libc::CLONE_VM | libc::CLONE_VFORK) as u64;

/// Whether this architecture has the `clone3` trampoline ([`raw_clone3`]).
const RAW_CLONE3: bool = cfg!(any(target_arch = "x86_64", target_arch = "aarch64"));

/// `clone3(ca, sizeof *ca)`; in the child, on the stack `ca` names, `child_main(arg)` and
/// then `exit` with what it returns (it never returns: it execs or exits itself). Returns
/// the child's pid, or `-errno`, in the parent. No libc wrapper exists: the child must not
/// return into this function's frame, which is the parent's.
///
/// # Safety
/// `ca` names a mapped stack the parent does not use, and `arg` is what [`child_main`]
/// expects, alive until the child has exec'd or exited (`CLONE_VFORK`).
#[cfg(target_arch = "x86_64")]
unsafe fn raw_clone3(ca: *mut CloneArgs, arg: *mut libc::c_void) -> isize {
    let ret: isize;
    // SAFETY: see the function's contract. The parent's registers but rax, rcx and r11
    // are left as they were; the child runs only on its own stack.
    unsafe {
        std::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "xor ebp, ebp",
            "mov rdi, r13",
            "call r12",
            "mov edi, eax",
            "mov eax, 60", // exit
            "syscall",
            "ud2",
            "2:",
            inlateout("rax") libc::SYS_clone3 as isize => ret,
            in("rdi") ca,
            in("rsi") std::mem::size_of::<CloneArgs>(),
            in("r12") child_main as extern "C" fn(*mut libc::c_void) -> libc::c_int,
            in("r13") arg,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

/// See the x86_64 version.
///
/// # Safety
/// As the x86_64 version.
#[cfg(target_arch = "aarch64")]
unsafe fn raw_clone3(ca: *mut CloneArgs, arg: *mut libc::c_void) -> isize {
    let ret: isize;
    // SAFETY: see the function's contract; the kernel preserves every register but x0.
    unsafe {
        std::arch::asm!(
            "svc #0",
            "cbnz x0, 2f",
            "mov x29, xzr",
            "mov x30, xzr",
            "mov x0, x10",
            "blr x9",
            "mov x8, #93", // exit
            "svc #0",
            "brk #0",
            "2:",
            inlateout("x0") ca as isize => ret,
            in("x1") std::mem::size_of::<CloneArgs>(),
            in("x8") libc::SYS_clone3,
            in("x9") child_main as extern "C" fn(*mut libc::c_void) -> libc::c_int,
            in("x10") arg,
            options(nostack),
        );
    }
    ret
}

/// Never called: [`RAW_CLONE3`] is false here.
///
/// # Safety
/// None needed.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
unsafe fn raw_clone3(_: *mut CloneArgs, _: *mut libc::c_void) -> isize {
    -(libc::ENOSYS as isize)
}

/// Waits for `pid`, retrying on `EINTR`; returns the raw wait status.
pub(crate) fn reap(pid: libc::pid_t) -> io::Result<i32> {
    let mut status = 0;
    loop {
        // SAFETY: waitpid writes the status into a local.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            return Ok(status);
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}

/// The child's stack: an anonymous private mapping with a `PROT_NONE` guard page at its
/// low end (stacks grow down), unmapped on drop.
struct Stack {
    base: *mut libc::c_void,
    len: usize,
    /// Bytes of the guard page at the low end.
    guard: usize,
}

impl Stack {
    fn new() -> io::Result<Self> {
        // SAFETY: sysconf takes a constant.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        let len = STACK_BYTES + page;
        // SAFETY: a fresh anonymous mapping; no existing memory is touched.
        let base = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let stack = Self {
            base,
            len,
            guard: page,
        };
        // SAFETY: the first page of the mapping we own.
        if unsafe { libc::mprotect(base, page, libc::PROT_NONE) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(stack)
    }

    /// The usable stack's low end (above the guard page), for `clone3`.
    fn low(&self) -> usize {
        self.base as usize + self.guard
    }

    /// The usable stack's size in bytes, for `clone3`.
    fn size(&self) -> usize {
        self.len - self.guard
    }

    /// The initial stack pointer: the high end, 16-byte aligned (the mapping is
    /// page-aligned and its length a multiple of the page size).
    fn top(&self) -> *mut libc::c_void {
        // SAFETY: one past the end of our mapping, which `clone` uses as the initial
        // stack pointer and never dereferences at that address.
        unsafe { self.base.cast::<u8>().add(self.len).cast() }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: our own mapping, no longer used (the child has exec'd or exited).
        unsafe {
            libc::munmap(self.base, self.len);
        }
    }
}

/// Sets `FD_CLOEXEC` on every descriptor from 3 on: one `close_range(3, ~0,
/// CLOSE_RANGE_CLOEXEC)` (Linux 5.11), else `fcntl` on each number below `max_fd`.
/// Returns 0, or -1 with `errno` set. Async-signal-safe.
fn mark_cloexec_from_3(max_fd: libc::c_int) -> libc::c_int {
    // SAFETY: integers only.
    let r = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if r == 0 {
        return 0;
    }
    for fd in 3..max_fd {
        // SAFETY: integers only; EBADF for a number that is not open.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
                libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
            }
        }
    }
    0
}

/// Signals the kernel numbers (1–64 on Linux).
const KERNEL_SIGNALS: libc::c_int = 64;
/// Bytes of the kernel's signal set, the last argument of `rt_sigaction`.
const KERNEL_SIGSET_BYTES: usize = 8;

/// `struct sigaction` as the `rt_sigaction` system call reads it (x86_64, aarch64 and
/// the other architectures of the generic layout): not glibc's, whose mask is 128 bytes.
#[repr(C)]
#[derive(Default)]
struct KernelSigaction {
    handler: libc::sighandler_t,
    flags: libc::c_ulong,
    restorer: usize,
    mask: u64,
}

/// Whether signal `sig`'s disposition is the default. Through the system call itself:
/// glibc's `sigaction` refuses the two signals it keeps for itself (32 and 33), and those
/// too may arrive ignored from the caller. Async-signal-safe.
fn is_default(sig: libc::c_int) -> bool {
    let mut old = KernelSigaction::default();
    // SAFETY: rt_sigaction writes the current disposition into a local of the kernel's
    // layout and size.
    let r = unsafe {
        libc::syscall(
            libc::SYS_rt_sigaction,
            sig,
            ptr::null::<KernelSigaction>(),
            &mut old,
            KERNEL_SIGSET_BYTES,
        )
    };
    r != 0 || old.handler == libc::SIG_DFL
}

/// Sets signal `sig` to its default disposition; the errno on a failure.
/// Async-signal-safe.
fn set_default(sig: libc::c_int) -> Result<(), i32> {
    // A handler of ours must not run here; an ignored signal would stay ignored across
    // execve (the caller's SIGXFSZ, say, turning the file-size limit into an error the
    // child may not check).
    let dfl = KernelSigaction::default();
    // SAFETY: the default disposition, from a local of the kernel's layout.
    let r = unsafe {
        libc::syscall(
            libc::SYS_rt_sigaction,
            sig,
            &dfl,
            ptr::null_mut::<KernelSigaction>(),
            KERNEL_SIGSET_BYTES,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL))
    }
}

/// The calling process's ignored signals, bit `n - 1` for signal `n`, from the `SigIgn`
/// line of `/proc/self/status` (one open, one or two reads, one close, into a buffer on
/// this stack); `None` when it cannot be read. Async-signal-safe, no allocation.
fn ignored_signals() -> Option<u64> {
    let mut buf = [0u8; 4096];
    // SAFETY: a NUL-terminated path; reads into a buffer on this stack; a descriptor we
    // opened, closed before returning.
    let n = unsafe {
        let fd = libc::open(
            c"/proc/self/status".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return None;
        }
        let mut n = 0usize;
        while n < buf.len() {
            let r = libc::read(fd, buf.as_mut_ptr().add(n).cast(), buf.len() - n);
            if r <= 0 {
                break;
            }
            n += r as usize;
        }
        libc::close(fd);
        n
    };
    sig_ignored_of(&buf[..n])
}

/// The `SigIgn:` mask of a `/proc/PID/status` text.
fn sig_ignored_of(status: &[u8]) -> Option<u64> {
    const KEY: &[u8] = b"\nSigIgn:\t";
    let at = status.windows(KEY.len()).position(|w| w == KEY)? + KEY.len();
    let mut mask = 0u64;
    let mut digits = 0;
    for &b in status.get(at..)? {
        let d = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            _ => break,
        };
        mask = (mask << 4) | u64::from(d);
        digits += 1;
    }
    (digits == 16).then_some(mask)
}

/// The child between `clone` and `execve`. See the module docs for what it may do.
extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `ChildArgs` the parent passed to `clone`; the parent is
    // suspended (CLONE_VFORK) and keeps it alive until the child exec's or exits.
    let args = unsafe { &*arg.cast::<ChildArgs<'_>>() };
    let fail = |step: i32, errno: i32| -> libc::c_int {
        args.failed_errno.store(errno, Ordering::Release);
        args.failed_step.store(step, Ordering::Release);
        // SAFETY: `_exit` ends this process without running anything of the parent's.
        unsafe { libc::_exit(127) }
    };
    let errno = || {
        io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL)
    };

    // 1. Signals: every disposition back to the default, then an empty mask. After
    // `CLONE_CLEAR_SIGHAND` only the ignored ones are left to reset.
    let ignored = if args.cleared_handlers.load(Ordering::Acquire) {
        ignored_signals()
    } else {
        None
    };
    for sig in 1..=KERNEL_SIGNALS {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        let reset = match ignored {
            Some(mask) => mask & (1u64 << (sig - 1)) != 0,
            None => !is_default(sig),
        };
        if reset && let Err(e) = set_default(sig) {
            return fail(1, e);
        }
    }
    // SAFETY: an empty set built in a local; then the mask set from it.
    unsafe {
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        if libc::sigprocmask(libc::SIG_SETMASK, &empty, ptr::null_mut()) != 0 {
            return fail(1, errno());
        }
    }
    // 2. Own process group.
    // SAFETY: integers only.
    if unsafe { libc::setpgid(0, 0) } != 0 {
        return fail(2, errno());
    }
    // 3. Standard streams. All three sources are at 3 or above (`above_stdio`), so
    // no dup2 overwrites another source, and dup2 clears O_CLOEXEC on the target.
    for (from, to) in [(args.stdin, 0), (args.stdout, 1), (args.stderr, 2)] {
        // SAFETY: integers only.
        if unsafe { libc::dup2(from, to) } < 0 {
            return fail(3, errno());
        }
    }
    // 3b. Every other descriptor is closed at `execve`, whatever the caller of `hcp`
    // left open without O_CLOEXEC: an inherited descriptor would reach past Landlock,
    // which checks paths when they are opened. Marked, not closed, because the program
    // may be `/proc/self/fd/N`.
    if mark_cloexec_from_3(args.max_fd) != 0 {
        return fail(3, errno());
    }
    for fd in args.parent_ends {
        // SAFETY: our copy of a descriptor the parent keeps; closing it here leaves the
        // parent's open (no CLONE_FILES).
        unsafe {
            libc::close(fd);
        }
    }
    // 3c. The call's cgroup, user namespace maps and mounts, before the working
    // directory is entered (a directory entered before the mounts would still reach
    // what they cover).
    if let Some(c) = args.confine
        && let Err(e) = c.isolate_in_child(
            args.channel,
            args.joined_cgroup.load(Ordering::Acquire),
            args.cgroup_procs,
            &args.facts,
            &args.failed_op,
        )
    {
        return fail(7, e.raw_os_error().unwrap_or(libc::EINVAL));
    }
    // 4. Working directory.
    // SAFETY: a NUL-terminated path owned by the parent.
    if unsafe { libc::chdir(args.cwd.as_ptr()) } != 0 {
        return fail(4, errno());
    }
    // 5. Confinement.
    if let Some(c) = args.confine
        && let Err(e) = c.apply_in_child(args.channel, args.listen)
    {
        return fail(5, e.raw_os_error().unwrap_or(libc::EINVAL));
    }
    // 6. The program. Returns only on failure.
    // SAFETY: NUL-terminated strings and NULL-terminated pointer arrays owned by the
    // parent, alive until `clone` returns in the parent.
    unsafe {
        if args.program_fd >= 0 {
            libc::syscall(
                libc::SYS_execveat,
                args.program_fd,
                c"".as_ptr(),
                args.argv.as_ptr(),
                args.envp.as_ptr(),
                libc::AT_EMPTY_PATH,
            );
        } else {
            libc::execve(
                args.program.as_ptr(),
                args.argv.as_ptr(),
                args.envp.as_ptr(),
            );
        }
    }
    fail(6, errno())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::io::Read;

    /// Runs `argv` through [`spawn`] and returns (stdout, raw wait status).
    fn output(argv: &[&str], cwd: &Path, confine: Option<&Confinement>) -> (String, i32) {
        let argv: Vec<&OsStr> = argv.iter().map(OsStr::new).collect();
        let env = ChildEnv::new();
        let s = spawn(
            Program::Path(Path::new(argv[0])),
            &argv,
            &env,
            cwd,
            confine,
            false,
        )
        .unwrap();
        let mut out = String::new();
        std::fs::File::from(s.stdout)
            .read_to_string(&mut out)
            .unwrap();
        (out, reap(s.pid).unwrap())
    }

    fn status_field(status: &str, name: &str) -> u64 {
        let line = status
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .unwrap();
        u64::from_str_radix(line.trim(), 16).unwrap()
    }

    #[test]
    fn the_child_gets_default_signals_an_empty_mask_and_its_own_group() {
        // Made by clone3 (CLONE_CLEAR_SIGHAND) where the kernel has it, then by clone(2).
        signals_reset();
        CLONE3_REFUSED.store(true, Ordering::Relaxed);
        signals_reset();
        CLONE3_REFUSED.store(false, Ordering::Relaxed);
    }

    extern "C" fn on_usr1(_: libc::c_int) {}

    fn signals_reset() {
        // Rust ignores SIGPIPE in its binaries (test harness included); block SIGUSR2 in
        // this thread too. None of it may reach the child.
        let mut usr2 = nix::sys::signal::SigSet::empty();
        usr2.add(nix::sys::signal::Signal::SIGUSR2);
        usr2.thread_block().unwrap();
        // And ignore SIGXFSZ process-wide, as some callers do (Python does), and handle
        // SIGUSR1.
        // SAFETY: setting a disposition to SIG_IGN, and a handler that does nothing.
        let (old, old_usr1) = unsafe {
            (
                nix::sys::signal::signal(
                    nix::sys::signal::Signal::SIGXFSZ,
                    nix::sys::signal::SigHandler::SigIgn,
                )
                .unwrap(),
                nix::sys::signal::signal(
                    nix::sys::signal::Signal::SIGUSR1,
                    nix::sys::signal::SigHandler::Handler(on_usr1),
                )
                .unwrap(),
            )
        };
        let (out, st) = output(&["/bin/cat", "/proc/self/status"], Path::new("/"), None);
        // SAFETY: restoring the dispositions read above.
        unsafe {
            nix::sys::signal::signal(nix::sys::signal::Signal::SIGXFSZ, old).unwrap();
            nix::sys::signal::signal(nix::sys::signal::Signal::SIGUSR1, old_usr1).unwrap();
        }
        usr2.thread_unblock().unwrap();
        assert_eq!(st, 0);
        assert_eq!(status_field(&out, "SigIgn"), 0, "{out}");
        assert_eq!(status_field(&out, "SigBlk"), 0, "{out}");
        assert_eq!(status_field(&out, "SigCgt"), 0, "{out}");
        let pid: u64 = out
            .lines()
            .find_map(|l| l.strip_prefix("Pid:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // The child leads its own group: pgid == pid (field 5 of /proc/PID/stat is gone
        // after exit, so ask the child itself).
        let (stat, _) = output(&["/bin/cat", "/proc/self/stat"], Path::new("/"), None);
        let after_comm: Vec<&str> = stat
            .rsplit_once(')')
            .unwrap()
            .1
            .split_whitespace()
            .collect();
        assert_ne!(pid, 0);
        assert_eq!(after_comm[2], stat.split_whitespace().next().unwrap()); // pgrp == pid
    }

    #[test]
    fn the_ignored_mask_is_read_from_status() {
        let text = b"Name:\tx\nSigPnd:\t0000000000000000\nSigIgn:\t0000000000001001\nSigCgt:\t0\n";
        assert_eq!(sig_ignored_of(text), Some(0x1001));
        assert_eq!(sig_ignored_of(b"Name:\tx\nSigIgn:\t12\n"), None);
        assert_eq!(sig_ignored_of(b""), None);
    }

    #[test]
    fn the_child_has_only_its_three_streams_and_runs_in_cwd() {
        let dir = tempfile::tempdir().unwrap();
        let (out, st) = output(&["/bin/pwd", "-P"], dir.path(), None);
        assert_eq!(st, 0);
        assert_eq!(
            Path::new(out.trim_end()),
            dir.path().canonicalize().unwrap()
        );
        // ls's own listing: 0, 1, 2 and the directory it opened (3); nothing of ours.
        let (out, st) = output(&["/bin/ls", "/proc/self/fd"], dir.path(), None);
        assert_eq!(st, 0);
        assert_eq!(
            out.lines().collect::<Vec<_>>(),
            ["0", "1", "2", "3"],
            "{out}"
        );
    }

    #[test]
    fn each_failing_step_is_reported() {
        let argv = [OsStr::new("x")];
        let env = ChildEnv::new();
        let e = spawn(
            Program::Path(Path::new("/bin/true")),
            &argv,
            &env,
            Path::new("/no/such/dir"),
            None,
            false,
        )
        .unwrap_err();
        assert_eq!(e.step, Some(Step::Chdir));
        assert_eq!(e.error.raw_os_error(), Some(libc::ENOENT));
        let e = spawn(
            Program::Path(Path::new("/no/such/bin")),
            &argv,
            &env,
            Path::new("/"),
            None,
            false,
        )
        .unwrap_err();
        assert_eq!(e.step, Some(Step::Exec));
        assert_eq!(e.error.raw_os_error(), Some(libc::ENOENT));
        let dir = tempfile::tempdir().unwrap();
        let not_exec = dir.path().join("data");
        std::fs::write(&not_exec, "#!/bin/sh\n").unwrap();
        let e = spawn(
            Program::Path(&not_exec),
            &argv,
            &env,
            Path::new("/"),
            None,
            false,
        )
        .unwrap_err();
        assert_eq!(e.step, Some(Step::Exec));
        assert_eq!(e.error.raw_os_error(), Some(libc::EACCES));
        let bad = [OsStr::new("a\0b")];
        let e = spawn(
            Program::Path(Path::new("/bin/true")),
            &bad,
            &env,
            Path::new("/"),
            None,
            false,
        )
        .unwrap_err();
        assert_eq!(e.step, None);
        assert_eq!(e.error.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn limits_are_applied_before_exec() {
        let c = Confinement::new().rlimit(crate::Rlimit::OpenFiles(17));
        let (out, st) = output(&["/bin/sh", "-c", "ulimit -n"], Path::new("/"), Some(&c));
        assert_eq!((out.trim(), st), ("17", 0));
    }

    #[test]
    fn a_descriptor_is_executed_and_names_the_process() {
        let file = std::fs::File::open("/bin/cat").unwrap();
        let argv = [OsStr::new("cat"), OsStr::new("/proc/self/comm")];
        let s = spawn(
            Program::Fd(file.as_raw_fd()),
            &argv,
            &ChildEnv::new(),
            Path::new("/"),
            None,
            false,
        )
        .unwrap();
        let mut out = String::new();
        std::fs::File::from(s.stdout)
            .read_to_string(&mut out)
            .unwrap();
        assert_eq!((out.as_str(), reap(s.pid).unwrap()), ("cat\n", 0));
    }
}
