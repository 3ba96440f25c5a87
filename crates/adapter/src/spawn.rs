//! Starting the child without copying `hcp` (RUNTIME §5 "The child").
//!
//! `fork(2)` copies the page tables of the whole parent and makes every page it writes
//! afterwards fault once (copy on write); for `hcp exec` that cost more than the child's
//! own start. Like glibc's `posix_spawn`, [`spawn`] uses
//! `clone(CLONE_VM | CLONE_VFORK)`: the child runs on a stack of its own inside the
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
//!    its caller;
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

use crate::confine::Confinement;
use crate::env::ChildEnv;
use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr;
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};

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
    // SAFETY: `child_main` only reads `args` (alive until `clone` returns: with
    // CLONE_VFORK this thread is suspended until the child has exec'd or exited) and
    // makes async-signal-safe calls on its own stack (`stack.top()`, mapped and
    // unshared). CLONE_VM without CLONE_SIGHAND or CLONE_FILES: the child's signal
    // dispositions and descriptor table are its own copies. The namespace flags of the
    // confinement (user, PID, mount, IPC, network) are given here too.
    let ns_flags = args.confine.map_or(0, Confinement::clone_flags);
    let pid = unsafe {
        libc::clone(
            child_main,
            stack.top(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD | ns_flags,
            ptr::from_ref(&args).cast_mut().cast(),
        )
    };
    let clone_error = io::Error::last_os_error();
    let _ = nix::sys::signal::pthread_sigmask(
        nix::sys::signal::SigmaskHow::SIG_SETMASK,
        Some(&old),
        None,
    );
    drop(stack);
    if pid < 0 {
        return Err(SpawnError::parent(clone_error));
    }
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
    })
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
        let stack = Self { base, len };
        // SAFETY: the first page of the mapping we own.
        if unsafe { libc::mprotect(base, page, libc::PROT_NONE) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(stack)
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

    // 1. Signals: every disposition back to the default, then an empty mask.
    // Through the system call itself: glibc's `sigaction` refuses the two signals it
    // keeps for itself (32 and 33), and those too may arrive ignored from the caller.
    for sig in 1..=KERNEL_SIGNALS {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        let mut old = KernelSigaction::default();
        // SAFETY: rt_sigaction writes the current disposition into a local of the
        // kernel's layout and size.
        let r = unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                sig,
                ptr::null::<KernelSigaction>(),
                &mut old,
                KERNEL_SIGSET_BYTES,
            )
        };
        // A handler of ours must not run here; an ignored signal would stay ignored
        // across execve (the caller's SIGXFSZ, say, turning the file-size limit into an
        // error the child may not check).
        if r == 0 && old.handler != libc::SIG_DFL {
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
            if r != 0 {
                return fail(1, errno());
            }
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
        && let Err(e) = c.isolate_in_child(args.channel, &args.facts, &args.failed_op)
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
        // Rust ignores SIGPIPE in its binaries (test harness included); block SIGUSR2 in
        // this thread too. None of it may reach the child.
        let mut usr2 = nix::sys::signal::SigSet::empty();
        usr2.add(nix::sys::signal::Signal::SIGUSR2);
        usr2.thread_block().unwrap();
        // And ignore SIGXFSZ process-wide, as some callers do (Python does).
        // SAFETY: setting a disposition to SIG_IGN; no handler involved.
        let old = unsafe {
            nix::sys::signal::signal(
                nix::sys::signal::Signal::SIGXFSZ,
                nix::sys::signal::SigHandler::SigIgn,
            )
        }
        .unwrap();
        let (out, st) = output(&["/bin/cat", "/proc/self/status"], Path::new("/"), None);
        // SAFETY: restoring the disposition read above.
        unsafe { nix::sys::signal::signal(nix::sys::signal::Signal::SIGXFSZ, old) }.unwrap();
        usr2.thread_unblock().unwrap();
        assert_eq!(st, 0);
        assert_eq!(status_field(&out, "SigIgn"), 0, "{out}");
        assert_eq!(status_field(&out, "SigBlk"), 0, "{out}");
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
