//! Running one child (RUNTIME §5 "The child"): no shell, `/dev/null` stdin, exact
//! environment, own process group, a timeout that ends the whole group, capped output;
//! the answers to a `deny` call's `socket(2)` (RUNTIME §5.3) and the end of the whole call
//! when its memory cgroup runs out (§5.4).
//!
//! One thread: a `poll(2)` loop over the two pipes, a pidfd (`pidfd_open`) for the
//! child's exit, the cancel descriptor, the call's seccomp listener and its memory cgroup's
//! OOM eventfd, with the next deadline as the poll timeout. Without pidfd (Linux older
//! than 5.3) the loop polls the pipes in 5 ms slices and checks the child with
//! `waitid(WNOHANG | WNOWAIT)`. The child is reaped only after the rest of its group has
//! been killed, so its pid cannot have been reused for another group by then.

use crate::AdapterError;
use crate::cgroup::CallCgroup;
use crate::confine::Confinement;
use crate::env::ChildEnv;
use crate::pin::{StatFingerprint, VerifiedBin};
use crate::spawn::{self, Program, SpawnError, Spawned, Step};
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

/// Default timeout of a call: 60 s (RUNTIME §5).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// Default time between `SIGTERM` and `SIGKILL` to the group on timeout: 1 s.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(1);
/// Default cap of each output stream: 1 MiB (RUNTIME §5).
pub const DEFAULT_OUTPUT_CAP: usize = 1024 * 1024;
/// How long [`run`] waits, at most, for the killed members of a group to disappear after
/// the direct child exited: 500 ms.
pub const GROUP_EXIT_WAIT: Duration = Duration::from_millis(500);

/// The exit status of a child ended at its output cap ([`Limits::end_at_cap`]): 143,
/// `128 + SIGTERM`, also when the `SIGKILL` after the grace ended it (RUNTIME §5).
pub const ENDED_AT_CAP: i32 = 128 + libc::SIGTERM;

/// Bytes read per `read(2)`: 64 KiB, the default pipe capacity.
const CHUNK: usize = 64 * 1024;

/// Time and output bounds of one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall time from spawn after which the group gets `SIGTERM` ([`DEFAULT_TIMEOUT`]).
    pub timeout: Duration,
    /// Time after `SIGTERM` before `SIGKILL` ([`DEFAULT_GRACE`]).
    pub grace: Duration,
    /// Bytes of stdout kept; the rest is read and discarded ([`DEFAULT_OUTPUT_CAP`]).
    pub stdout_cap: usize,
    /// Bytes of stderr kept; the rest is read and discarded ([`DEFAULT_OUTPUT_CAP`]).
    pub stderr_cap: usize,
    /// End the group (`SIGTERM`, then `SIGKILL` after [`Limits::grace`]) once a stream is
    /// past its cap: a `read` verb's child (RUNTIME §5), whose answer is cut anyway; its
    /// [`Outcome::exit_code`] is then [`ENDED_AT_CAP`]. A
    /// `write` verb's child (false, the default) runs to its end or its timeout, so a
    /// write is never cut in the middle.
    pub end_at_cap: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            timeout: DEFAULT_TIMEOUT,
            grace: DEFAULT_GRACE,
            stdout_cap: DEFAULT_OUTPUT_CAP,
            stderr_cap: DEFAULT_OUTPUT_CAP,
            end_at_cap: false,
        }
    }
}

/// One command to run: everything the child gets is spelled out here.
#[derive(Debug)]
pub struct Invocation<'a> {
    /// The verified, open bin ([`verify_bin`](crate::verify_bin)).
    pub bin: &'a VerifiedBin,
    /// `argv[0]`: the CLI name (`cliBin`), not the pinned path.
    pub argv0: OsString,
    /// `argv[1..]`, from [`render`](crate::render).
    pub args: Vec<OsString>,
    /// The exact environment.
    pub env: &'a ChildEnv,
    /// The working directory (absolute).
    pub cwd: PathBuf,
    /// Time and output bounds.
    pub limits: Limits,
    /// Kernel confinement, applied in the child between `clone` and `execve`
    /// (see the spawn module); `None` applies nothing.
    pub confine: Option<&'a Confinement>,
    /// A descriptor that becomes readable when the call must be abandoned (a self-pipe
    /// or signalfd the binary arms on `SIGINT`/`SIGTERM`); the group is then ended as on
    /// timeout and [`Outcome::cancelled`] is set.
    pub cancel: Option<BorrowedFd<'a>>,
    /// For a call in a network namespace of its own (`{"allow": …}`): given the listener
    /// the child made on its loopback (RUNTIME §5.5) right after the spawn, before the
    /// run loop starts; the egress proxy accepts on it. `None`: the listener is closed
    /// (the child's connections are refused).
    pub egress: Option<Egress<'a>>,
}

/// The egress proxy's hook of [`Invocation::egress`]: called once with the listener.
#[derive(Clone, Copy)]
pub struct Egress<'a>(pub &'a (dyn Fn(OwnedFd) + Sync));

impl std::fmt::Debug for Egress<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Egress(..)")
    }
}

/// What a run produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The child's process id, which was also its process group id.
    pub pid: u32,
    /// The exit status: the child's code, or `128 + n` when signal `n` ended it; a child
    /// that [`Limits::end_at_cap`] ended (by the `SIGTERM`, or by the `SIGKILL` after the
    /// grace) is [`ENDED_AT_CAP`] whichever signal it was, so the status does not depend
    /// on whether the child is its PID namespace's init ([`Outcome::signal`] keeps the
    /// signal itself).
    pub exit_code: i32,
    /// The signal that ended the child, when one did.
    pub signal: Option<i32>,
    /// The timeout fired and the group was ended (`hcp exec` answers `timeout`, 124).
    pub timed_out: bool,
    /// [`Invocation::cancel`] fired and the group was ended.
    pub cancelled: bool,
    /// The first [`Limits::stdout_cap`] bytes of stdout.
    pub stdout: Vec<u8>,
    /// The first [`Limits::stderr_cap`] bytes of stderr.
    pub stderr: Vec<u8>,
    /// Whether stdout went past its cap.
    pub stdout_truncated: bool,
    /// Whether stderr went past its cap.
    pub stderr_truncated: bool,
    /// Bytes of stdout read in all, kept or not.
    pub stdout_total: u64,
    /// Bytes of stderr read in all, kept or not.
    pub stderr_total: u64,
    /// Wall time from just before the spawn to the reaping of the child.
    pub duration: Duration,
    /// How many times the call tried `socket(2)` under `network: deny` (hcp answered
    /// each `EACCES`; RUNTIME §5.3: the result then carries a hint naming the key).
    pub socket_attempts: u32,
    /// The call's memory bound was reached (its memory cgroup counted an OOM kill) and
    /// hcp ended the call (RUNTIME §5.4, `memory_exceeded`).
    pub memory_exceeded: bool,
    /// The kernel refused the call a `/proc` of its own: its view has none (RUNTIME §5.1).
    pub no_proc: bool,
}

impl Outcome {
    /// [`Outcome::duration`] in whole milliseconds (the result's `duration_ms`).
    pub fn duration_ms(&self) -> u64 {
        u64::try_from(self.duration.as_millis()).unwrap_or(u64::MAX)
    }

    /// Whether either stream went past its cap (the result's `truncated`).
    pub fn truncated(&self) -> bool {
        self.stdout_truncated || self.stderr_truncated
    }
}

/// Runs `inv` to completion (RUNTIME §5 "The child").
///
/// The child runs in its own process group. When it exits, the rest of its group
/// (background grandchildren) gets `SIGKILL` and the pipes are drained of what is
/// already written, without waiting for a grandchild that still holds them. On timeout
/// (or cancel) the group gets `SIGTERM`, then `SIGKILL` after the grace. On every early
/// return, the group is killed and the child reaped. A process that left the group
/// (`setsid`, a double fork) ends with the child's PID namespace when the confinement
/// gives it one ([`Confinement::for_call`]), else, under a confinement with seccomp
/// filters, as an orphan re-parented to `hcp` (the child subreaper) once the child has
/// exited. In a PID namespace the child is its init: it gets the timeout's `SIGTERM`
/// only if it handles it, and the `SIGKILL` after the grace either way. The caller must
/// not set `SIGCHLD` to `SIG_IGN` (children would be reaped behind its back).
///
/// # Errors
/// - `bin_missing` / `bin_not_executable`: the kernel refused the verified bin;
/// - `bin_changed`: the bin was written between [`verify_bin`](crate::verify_bin) and the
///   spawn (the child is killed);
/// - `spawn_failed`: the working directory is missing, no process or pipe could be made,
///   or the confinement failed in the child;
/// - `supervise_failed`: `poll`, `read` or `waitpid` failed (the group is killed).
pub fn run(inv: &Invocation<'_>) -> Result<Outcome, AdapterError> {
    run_with(inv, true)
}

/// [`run`], with the pidfd optional so that the fallback loop is tested too.
fn run_with(inv: &Invocation<'_>, use_pidfd: bool) -> Result<Outcome, AdapterError> {
    let start = Instant::now();
    let sweep = inv
        .confine
        .is_some_and(|c| c.filters.is_some() && !c.has_pid_namespace());
    if sweep {
        crate::procs::become_subreaper();
    }
    let mut child = spawn(inv, true)?;
    let pgid = Pid::from_raw(child.pid);
    crate::procs::register(child.pid);
    let mut guard = Reaper {
        pid: Some(child.pid),
        pgid,
        sweep,
    };
    check_unchanged(inv.bin).inspect_err(|_| guard.kill())?;
    if let (Some(listener), Some(hook)) = (child.egress_listener.take(), inv.egress) {
        (hook.0)(listener);
    }
    let mut notify = child.notify.take();
    let mut socket_attempts = 0u32;
    let oom = inv
        .confine
        .and_then(Confinement::cgroup)
        .and_then(CallCgroup::oom_event);
    let mut out_of_memory = false;
    let mut streams = [
        Stream::new(Some(child.stdout), inv.limits.stdout_cap)?,
        Stream::new(Some(child.stderr), inv.limits.stderr_cap)?,
    ];
    let pidfd = if use_pidfd {
        child.pidfd.take().or_else(|| pidfd_open(pgid))
    } else {
        None
    };

    let deadline = start + inv.limits.timeout;
    let mut kill_at: Option<Instant> = None;
    let mut timed_out = false;
    let mut cancelled = false;
    let mut ended_at_cap = false;
    loop {
        let now = Instant::now();
        if kill_at.is_none() && now >= deadline {
            timed_out = true;
            let _ = killpg(pgid, Signal::SIGTERM);
            kill_at = Some(now + inv.limits.grace);
        }
        if kill_at.is_some_and(|k| now >= k) {
            let _ = killpg(pgid, Signal::SIGKILL);
        }
        let next = match kill_at {
            Some(k) if now < k => k,
            Some(_) => now + Duration::from_millis(50), // killed: waiting for the exit
            None => deadline,
        };
        let mut wait = next.saturating_duration_since(now);
        if pidfd.is_none() {
            wait = wait.min(Duration::from_millis(5));
        }
        let watch_cancel = inv.cancel.filter(|_| kill_at.is_none());
        let watch_oom = oom.filter(|_| !out_of_memory);
        let mut exited = false;
        let mut cancel_fired = false;
        let mut drop_notify = false;
        let notified;
        let oom_fired;
        {
            let mut fds: [Option<PollFd<'_>>; 6] = [None, None, None, None, None, None];
            for (slot, s) in fds.iter_mut().zip(streams.iter()) {
                *slot =
                    s.fd.as_ref()
                        .map(|fd| PollFd::new(fd.as_fd(), PollFlags::POLLIN));
            }
            fds[2] = pidfd
                .as_ref()
                .map(|fd| PollFd::new(fd.as_fd(), PollFlags::POLLIN));
            fds[3] = watch_cancel.map(|fd| PollFd::new(fd, PollFlags::POLLIN));
            fds[4] = notify
                .as_ref()
                .map(|fd| PollFd::new(fd.as_fd(), PollFlags::POLLIN));
            fds[5] = watch_oom.map(|fd| PollFd::new(fd, PollFlags::POLLIN));
            let mut active: Vec<PollFd<'_>> = Vec::with_capacity(6);
            let mut which = [usize::MAX; 6];
            for (i, f) in fds.into_iter().enumerate() {
                if let Some(f) = f {
                    which[active.len()] = i;
                    active.push(f);
                }
            }
            match poll(&mut active, poll_timeout(wait)) {
                Ok(_) | Err(Errno::EINTR) => {}
                Err(e) => {
                    guard.kill();
                    return Err(supervise("poll failed", e));
                }
            }
            let mut ready = [false; 6];
            let mut listener_gone = false;
            for (j, f) in active.iter().enumerate() {
                ready[which[j]] = f.revents().is_some_and(|r| !r.is_empty());
                if which[j] == 4 {
                    // A hang-up without a notification: every process under the filter is
                    // gone, nothing is left to answer (no `SECCOMP_IOCTL_NOTIF_RECV` to
                    // learn it).
                    listener_gone = f.revents().is_some_and(|r| {
                        !r.contains(PollFlags::POLLIN)
                            && r.intersects(PollFlags::POLLHUP | PollFlags::POLLERR)
                    });
                }
            }
            notified = ready[4] && !listener_gone;
            if listener_gone {
                drop_notify = true;
            }
            oom_fired = ready[5];
            for (s, r) in streams.iter_mut().zip(ready) {
                if r && let Err(e) = s.read_available() {
                    guard.kill();
                    return Err(supervise("reading the child's output failed", e));
                }
            }
            if ready[2] {
                exited = true;
            }
            if ready[3] {
                cancel_fired = true;
            }
        }
        if drop_notify {
            notify = None;
        }
        if notified && let Some(fd) = &notify {
            match crate::notify::answer(fd) {
                Ok(true) => socket_attempts = socket_attempts.saturating_add(1),
                Ok(false) => {}
                // Every process under the filter is gone.
                Err(_) => notify = None,
            }
        }
        if oom_fired {
            // The memory cgroup ran out: the whole call ends together.
            out_of_memory = true;
            let _ = killpg(pgid, Signal::SIGKILL);
            let _ = kill(pgid, Signal::SIGKILL);
        }
        if inv.limits.end_at_cap && kill_at.is_none() && streams.iter().any(|s| s.truncated) {
            ended_at_cap = true;
            let _ = killpg(pgid, Signal::SIGTERM);
            kill_at = Some(Instant::now() + inv.limits.grace);
        }
        if cancel_fired {
            cancelled = true;
            let _ = killpg(pgid, Signal::SIGTERM);
            kill_at = Some(Instant::now() + inv.limits.grace);
        }
        if pidfd.is_none() {
            // WNOWAIT: leave the child unreaped, so its pid keeps naming the group.
            use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
            let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
            match waitid(Id::Pid(pgid), flags) {
                Ok(WaitStatus::StillAlive) | Err(Errno::EINTR) => {}
                Ok(_) => exited = true,
                Err(e) => {
                    guard.kill();
                    return Err(supervise("waiting for the child failed", e));
                }
            }
        }
        if exited {
            break;
        }
    }

    // The child has exited. While it is unreaped its pid still names the group, so this
    // cannot reach an unrelated group: end what is left of it.
    let _ = killpg(pgid, Signal::SIGKILL);
    for s in &mut streams {
        // Only what is already written: a grandchild may hold the pipe open.
        if let Err(e) = s.read_available() {
            guard.kill();
            return Err(supervise("reading the child's output failed", e));
        }
    }
    let status = match guard.wait() {
        Ok(st) => ExitStatus::from_raw(st),
        Err(e) => {
            guard.kill();
            return Err(supervise_io("waiting for the child failed", e));
        }
    };
    let duration = start.elapsed();
    wait_group_gone(pgid);
    if sweep {
        crate::procs::end_orphans(GROUP_EXIT_WAIT);
    }

    let signal = status.signal();
    let [out, err] = streams;
    let memory_exceeded = out_of_memory
        || inv
            .confine
            .and_then(Confinement::cgroup)
            .is_some_and(CallCgroup::memory_exceeded);
    let exit_code = match (status.code(), signal) {
        // Ended at the cap by hcp's SIGTERM, or by the SIGKILL after the grace when the
        // child is its PID namespace's init (which gets a SIGTERM only if it handles it):
        // one status either way, 128 + SIGTERM.
        (None, Some(s))
            if ended_at_cap
                && !memory_exceeded
                && (s == Signal::SIGTERM as i32 || s == Signal::SIGKILL as i32) =>
        {
            ENDED_AT_CAP
        }
        (Some(c), _) => c,
        (None, Some(s)) => 128 + s,
        (None, None) => 128,
    };
    Ok(Outcome {
        pid: pgid.as_raw().unsigned_abs(),
        exit_code,
        signal,
        timed_out,
        cancelled,
        stdout_truncated: out.truncated,
        stderr_truncated: err.truncated,
        stdout_total: out.total,
        stderr_total: err.total,
        stdout: out.buf,
        stderr: err.buf,
        duration,
        socket_attempts,
        memory_exceeded,
        no_proc: child.facts & crate::view::child::FACT_NO_PROC != 0,
    })
}

/// Starts the child ([`spawn::spawn`]). An ELF bin is executed through its verified
/// descriptor (`execveat`); a `#!` script run by its pinned interpreter
/// ([`VerifiedBin::run_by`]) by that interpreter's verified descriptor, with the pinned
/// arguments before the call's own; a script without one (a caller of the adapter that
/// pinned none), or any program where the kernel lacks `execveat` (Linux before 3.19), by
/// its pinned path (see the pin module's docs).
pub(crate) fn spawn(inv: &Invocation<'_>, listen: bool) -> Result<Spawned, AdapterError> {
    let bin = inv.bin;
    let interpreter = bin.interpreter.as_deref().filter(|_| bin.script);
    let argv: Vec<&OsStr> = match interpreter {
        Some(i) => i.argv.iter().map(OsString::as_os_str).collect(),
        None => vec![inv.argv0.as_os_str()],
    }
    .into_iter()
    .chain(inv.args.iter().map(OsString::as_os_str))
    .collect();
    check_exec_size(&argv, inv.env)?;
    let (first, by_path) = match interpreter.and_then(|i| i.files.last()) {
        Some(runs) => (Program::Fd(runs.file.as_raw_fd()), runs.path.as_path()),
        None if bin.script => (Program::Path(&bin.path), bin.path.as_path()),
        None => (Program::Fd(bin.file.as_raw_fd()), bin.path.as_path()),
    };
    let start =
        |program: Program<'_>| spawn::spawn(program, &argv, inv.env, &inv.cwd, inv.confine, listen);
    match start(first) {
        Ok(c) => Ok(c),
        Err(e) if e.step == Some(Step::Chdir) => Err(AdapterError::SpawnFailed {
            program: bin.path.clone(),
            reason: if e.error.kind() == io::ErrorKind::NotFound {
                format!("working directory `{}` is missing", inv.cwd.display())
            } else {
                format!("cannot enter the working directory `{}`", inv.cwd.display())
            },
            source: Some(e.error),
        }),
        Err(e)
            if e.step == Some(Step::Exec)
                && e.error.raw_os_error() == Some(libc::ENOSYS)
                && matches!(first, Program::Fd(_)) =>
        {
            // No execveat: fall back to the pinned path (residual window documented).
            start(Program::Path(by_path)).map_err(|e| spawn_error(inv, e))
        }
        Err(e) => Err(spawn_error(inv, e)),
    }
}

/// Refuses argv and environment that together exceed what one `execve` takes
/// (`sysconf(_SC_ARG_MAX)`: a quarter of the stack limit, at least 128 KiB), counting
/// each string with its NUL and each pointer, as the kernel does.
fn check_exec_size(argv: &[&OsStr], env: &ChildEnv) -> Result<(), AdapterError> {
    let strings: usize = argv.iter().map(|a| a.len() + 1).sum::<usize>()
        + env
            .iter()
            .map(|(k, v)| k.len() + v.len() + 2)
            .sum::<usize>();
    let pointers = (argv.len() + 1 + env.len() + 1) * std::mem::size_of::<usize>();
    let bytes = strings + pointers;
    // SAFETY: sysconf takes a constant.
    let max = usize::try_from(unsafe { libc::sysconf(libc::_SC_ARG_MAX) }).unwrap_or(128 * 1024);
    if bytes > max {
        return Err(AdapterError::ArgTooLong {
            message: format!(
                "the arguments and the environment are {bytes} bytes; one exec takes at most {max} here"
            ),
        });
    }
    Ok(())
}

fn spawn_error(inv: &Invocation<'_>, e: SpawnError) -> AdapterError {
    let path = inv.bin.path.clone();
    let SpawnError {
        step,
        error,
        view_op,
    } = e;
    match (step, error.raw_os_error()) {
        (Some(Step::Exec), Some(libc::ENOENT)) => AdapterError::BinMissing {
            path,
            source: Some(error),
        },
        (Some(Step::Exec), Some(libc::EACCES | libc::ENOEXEC | libc::EPERM | libc::ETXTBSY)) => {
            AdapterError::BinNotExecutable {
                path,
                reason: "the kernel refused to execute it".into(),
                source: Some(error),
            }
        }
        // What `check_exec_size` could not foresee (the kernel's own accounting).
        (Some(Step::Exec), Some(libc::E2BIG)) => AdapterError::ArgTooLong {
            message: "the kernel refused the arguments and the environment as too long (E2BIG)"
                .into(),
        },
        (Some(Step::Confine), _) => AdapterError::SpawnFailed {
            program: path,
            reason: "the confinement could not be applied in the child".into(),
            source: Some(error),
        },
        (Some(Step::Isolate), errno) => {
            let what = match (view_op, inv.confine.and_then(Confinement::view)) {
                (Some(i), Some(v)) => v.describe_step(i),
                _ => "the call's cgroup, user or network namespace".to_owned(),
            };
            if matches!(errno, Some(libc::EPERM | libc::EACCES | libc::ENOSYS)) {
                AdapterError::SandboxUnavailable {
                    reason: format!(
                        "the kernel refused the call's view ({what}): {error}; a user namespace may be forbidden to hcp here (Ubuntu 23.10 and later: an AppArmor profile granting hcp `userns`)"
                    ),
                }
            } else {
                AdapterError::SandboxFailed {
                    path,
                    reason: format!("cannot build the call's view ({what})"),
                    source: Some(error),
                }
            }
        }
        _ => AdapterError::SpawnFailed {
            program: path,
            reason: "the process could not be started".into(),
            source: Some(error),
        },
    }
}

/// After the spawn: the file must still have the status it had when verified (a write in
/// between changes its ctime), and so must each file of a script's interpreter. A script
/// is checked by path, since that is what ran.
pub(crate) fn check_unchanged(bin: &VerifiedBin) -> Result<(), AdapterError> {
    let files = std::iter::once(bin).chain(bin.interpreter.iter().flat_map(|i| i.files.iter()));
    for f in files {
        let now = if f.script {
            std::fs::metadata(&f.path)
        } else {
            f.file.metadata()
        };
        if !matches!(now.map(|m| StatFingerprint::of(&m)), Ok(fp) if fp == f.snapshot) {
            return Err(AdapterError::BinChanged {
                path: f.path.clone(),
                pinned: "the verified file".into(),
                actual: "a file written or replaced while starting".into(),
            });
        }
    }
    Ok(())
}

/// Owns the child until it is reaped; dropping it kills the group and reaps the child.
struct Reaper {
    /// The unreaped child; `None` once reaped.
    pid: Option<libc::pid_t>,
    pgid: Pid,
    /// Without a PID namespace: also end the orphans the call left with `hcp`.
    sweep: bool,
}

impl Reaper {
    /// Reaps the child: its raw wait status.
    fn wait(&mut self) -> io::Result<i32> {
        let pid = self
            .pid
            .ok_or_else(|| io::Error::other("the child was already reaped"))?;
        let status = spawn::reap(pid)?;
        self.pid = None;
        crate::procs::unregister(pid);
        Ok(status)
    }

    fn kill(&mut self) {
        if let Some(pid) = self.pid.take() {
            // The child is unreaped, so the pgid is still ours.
            let _ = killpg(self.pgid, Signal::SIGKILL);
            let _ = spawn::reap(pid);
            crate::procs::unregister(pid);
            if self.sweep {
                crate::procs::end_orphans(GROUP_EXIT_WAIT);
            }
        }
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Waits (bounded by [`GROUP_EXIT_WAIT`]) until no process of the group is left. The
/// common case, a child without grandchildren, returns after one `kill(-pgid, 0)`.
pub(crate) fn wait_group_gone(pgid: Pid) {
    let start = Instant::now();
    let mut pause = Duration::from_micros(50);
    while kill(Pid::from_raw(-pgid.as_raw()), None) != Err(Errno::ESRCH) {
        if start.elapsed() >= GROUP_EXIT_WAIT {
            return;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(5));
    }
}

/// One captured output stream.
struct Stream {
    fd: Option<OwnedFd>,
    buf: Vec<u8>,
    cap: usize,
    total: u64,
    truncated: bool,
}

impl Stream {
    fn new(fd: Option<OwnedFd>, cap: usize) -> Result<Self, AdapterError> {
        if let Some(fd) = &fd {
            use nix::fcntl::{FcntlArg, OFlag, fcntl};
            fcntl(fd, FcntlArg::F_SETFL(OFlag::O_NONBLOCK))
                .map_err(|e| supervise("making a pipe non-blocking failed", e))?;
        }
        Ok(Self {
            fd,
            buf: Vec::new(),
            cap,
            total: 0,
            truncated: false,
        })
    }

    /// Reads what the pipe holds now, keeping up to the cap; closes it at end of file.
    fn read_available(&mut self) -> Result<(), Errno> {
        let Some(fd) = &self.fd else {
            return Ok(());
        };
        let mut chunk = [0u8; CHUNK];
        loop {
            match nix::unistd::read(fd, &mut chunk) {
                Ok(0) => {
                    self.fd = None;
                    return Ok(());
                }
                Ok(n) => {
                    self.total += n as u64;
                    let room = self.cap.saturating_sub(self.buf.len());
                    let take = n.min(room);
                    if self.buf.capacity() - self.buf.len() < take {
                        // Grow by doubling, but never past the cap: memory stays bounded
                        // by the cap plus one stack chunk.
                        let want = (self.buf.len() + take)
                            .max(self.buf.len() * 2)
                            .min(self.cap);
                        self.buf.reserve_exact(want - self.buf.len());
                    }
                    self.buf.extend_from_slice(&chunk[..take]);
                    if n > room {
                        self.truncated = true;
                    }
                    if n < CHUNK {
                        // Likely drained; poll tells us when there is more.
                        return Ok(());
                    }
                }
                Err(Errno::EAGAIN) => return Ok(()),
                Err(Errno::EINTR) => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// `pidfd_open(2)` for our unreaped child (its pid cannot be reused). `None` when the
/// kernel lacks it.
fn pidfd_open(pid: Pid) -> Option<OwnedFd> {
    // SAFETY: `pidfd_open` takes a pid and flags and returns a new descriptor or -1; it
    // touches no memory of ours.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid.as_raw(), 0) };
    if fd < 0 {
        return None;
    }
    let fd = i32::try_from(fd).ok()?;
    // SAFETY: the kernel just returned this descriptor to us; nothing else owns it.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn poll_timeout(d: Duration) -> PollTimeout {
    // Round up, so that a deadline 0.3 ms away does not spin with a 0 ms timeout.
    let ms = d.as_micros().div_ceil(1000);
    PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX)
}

fn supervise(reason: &'static str, e: Errno) -> AdapterError {
    supervise_io(reason, io::Error::from_raw_os_error(e as i32))
}

fn supervise_io(reason: &'static str, source: io::Error) -> AdapterError {
    AdapterError::SuperviseFailed { reason, source }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use hcp_model::Code;
    use std::os::unix::process::CommandExt;
    use std::path::Path;
    use std::process::{Command, Stdio};

    /// Live (not zombie) members of process group `pgid`.
    fn live_in_group(pgid: i32) -> usize {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
            .filter(|stat| {
                let f: Vec<&str> = stat
                    .rsplit_once(')')
                    .map(|(_, r)| r.split_whitespace().collect())
                    .unwrap_or_default();
                f.len() > 2 && f[2] == pgid.to_string() && f[0] != "Z" && f[0] != "X"
            })
            .count()
    }

    #[test]
    #[allow(clippy::zombie_processes)] // the Reaper reaps it
    fn dropping_the_reaper_kills_the_group() {
        let child = Command::new("/bin/sh")
            .args(["-c", "sleep 1000 & sleep 1000"])
            .stdin(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap();
        let pgid = Pid::from_raw(child.id() as i32);
        drop(Reaper {
            pid: Some(pgid.as_raw()),
            pgid,
            sweep: false,
        });
        wait_group_gone(pgid);
        assert_eq!(live_in_group(pgid.as_raw()), 0);
    }

    #[test]
    fn fallback_without_pidfd() {
        let bin = crate::verify_bin(&crate::pin_bin(Path::new("/bin/sh")).unwrap()).unwrap();
        let env = ChildEnv::new();
        let inv = |script: &str, timeout_ms| Invocation {
            bin: &bin,
            argv0: "sh".into(),
            args: vec!["-c".into(), script.into()],
            env: &env,
            cwd: "/".into(),
            limits: Limits {
                timeout: Duration::from_millis(timeout_ms),
                grace: Duration::from_millis(100),
                ..Limits::default()
            },
            confine: None,
            cancel: None,
            egress: None,
        };
        let out = run_with(&inv("sleep 1000 & echo hi; exit 4", 60_000), false).unwrap();
        assert_eq!((out.stdout.as_slice(), out.exit_code), (&b"hi\n"[..], 4));
        assert_eq!(live_in_group(out.pid as i32), 0);
        let out = run_with(&inv("sleep 1000", 200), false).unwrap();
        assert!(out.timed_out);
        assert_eq!(live_in_group(out.pid as i32), 0);
    }

    #[test]
    fn a_command_line_too_long_for_one_exec_is_arg_invalid() {
        let bin = crate::verify_bin(&crate::pin_bin(Path::new("/bin/true")).unwrap()).unwrap();
        let env = ChildEnv::new();
        // SAFETY: sysconf takes a constant.
        let max = usize::try_from(unsafe { libc::sysconf(libc::_SC_ARG_MAX) }).unwrap();
        let n = max / 100_000 + 1;
        let inv = Invocation {
            bin: &bin,
            argv0: "true".into(),
            args: vec![OsString::from("x".repeat(100_000)); n],
            env: &env,
            cwd: "/".into(),
            limits: Limits::default(),
            confine: None,
            cancel: None,
            egress: None,
        };
        let e = run(&inv).unwrap_err();
        assert_eq!(
            (e.code(), e.code().exit_status()),
            (Code::ArgInvalid, 65),
            "{e}"
        );
        assert!(e.to_string().contains("one exec takes at most"), "{e}");
    }

    #[test]
    fn poll_timeout_rounds_up() {
        assert_eq!(i32::from(poll_timeout(Duration::from_micros(300))), 1);
        assert_eq!(i32::from(poll_timeout(Duration::ZERO)), 0);
        assert_eq!(
            i32::from(poll_timeout(Duration::from_secs(1 << 40))),
            i32::MAX
        );
    }
}
