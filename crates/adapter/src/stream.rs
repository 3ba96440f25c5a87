//! A confined child whose output the caller reads as it comes ([`start`]): `hcp sense`'s
//! triggers (RUNTIME §8), which run without a timeout and stream JSON lines. The same
//! spawn as [`run`](crate::run) — no shell, `/dev/null` stdin, its own process group, the
//! [`Confinement`](crate::Confinement) of [`Confinement::for_call`](crate::Confinement::for_call)
//! applied between `clone` and `execve`, the pinned bin checked again after the spawn —
//! but the caller polls the two pipes and decides when it ends.
//!
//! Ending it ([`Started::stop`], [`Started::finish`], or dropping it) ends its whole
//! process group and, where the child had no PID namespace, the orphans it left with
//! `hcp` (the child subreaper), as [`run`](crate::run) does at the end of a call. In a PID
//! namespace the child is its init, and every descendant ends with it.

use crate::AdapterError;
use crate::run::{GROUP_EXIT_WAIT, Invocation, check_unchanged, spawn, wait_group_gone};
use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

/// A started child: read [`take_stdout`](Self::take_stdout) and
/// [`take_stderr`](Self::take_stderr) as they come; end it with [`stop`](Self::stop), or
/// reap it once it exited with [`finish`](Self::finish). Dropping it kills its group.
#[derive(Debug)]
pub struct Started {
    /// The unreaped child (its pid is also its process group id); `None` once reaped.
    pid: Option<libc::pid_t>,
    pgid: Pid,
    stdout: Option<OwnedFd>,
    stderr: Option<OwnedFd>,
    /// Without a PID namespace: end the orphans the call left with `hcp`, too.
    sweep: bool,
    /// The egress listener of a call in a network namespace of its own.
    egress_listener: Option<OwnedFd>,
}

/// Starts `inv` (its `limits` and `cancel` are the caller's to enforce: nothing here
/// times it out) and checks that what runs is still the verified bin.
///
/// # Errors
/// As [`run`](crate::run): `bin_missing`, `bin_not_executable`, `bin_changed` (the child is
/// killed), `spawn_failed`, `arg_invalid` for a command line too long for one exec.
pub fn start(inv: &Invocation<'_>) -> Result<Started, AdapterError> {
    let sweep = inv
        .confine
        .is_some_and(|c| c.filters.is_some() && !c.has_pid_namespace());
    if sweep {
        crate::procs::become_subreaper();
    }
    // No listener: nothing here answers a notification, so a `deny` call's `socket(2)` is
    // refused by the filter itself.
    let child = spawn(inv, false)?;
    crate::procs::register(child.pid);
    let mut started = Started {
        pid: Some(child.pid),
        pgid: Pid::from_raw(child.pid),
        stdout: Some(child.stdout),
        stderr: Some(child.stderr),
        sweep,
        egress_listener: child.egress_listener,
    };
    check_unchanged(inv.bin).inspect_err(|_| started.kill())?;
    Ok(started)
}

impl Started {
    /// The child's process id, also its process group id.
    pub fn pid(&self) -> u32 {
        self.pgid.as_raw().unsigned_abs()
    }

    /// The read end of the child's stdout (`O_CLOEXEC`), once.
    pub fn take_stdout(&mut self) -> Option<OwnedFd> {
        self.stdout.take()
    }

    /// The read end of the child's stderr (`O_CLOEXEC`), once.
    pub fn take_stderr(&mut self) -> Option<OwnedFd> {
        self.stderr.take()
    }

    /// The TCP listener the child made on the loopback of its own network namespace
    /// (`{"allow": …}`, RUNTIME §5.5), once: the egress proxy accepts on it.
    pub fn take_egress_listener(&mut self) -> Option<OwnedFd> {
        self.egress_listener.take()
    }

    /// Whether the child still holds an egress listener not taken.
    pub fn egress_listener(&self) -> Option<&OwnedFd> {
        self.egress_listener.as_ref()
    }

    /// Whether the child has exited (it stays unreaped, so its pid keeps naming its
    /// group); `true` once reaped.
    pub fn has_exited(&self) -> bool {
        use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
        let Some(pid) = self.pid else {
            return true;
        };
        let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
        !matches!(
            waitid(Id::Pid(Pid::from_raw(pid)), flags),
            Ok(WaitStatus::StillAlive) | Err(Errno::EINTR)
        )
    }

    /// After the child has exited: ends what is left of its group (and the orphans of
    /// the call, without a PID namespace), reaps it and answers its exit status (its code,
    /// or `128 + n` for signal `n`). `None` when it was already reaped. Blocks until the
    /// child exits if it has not.
    pub fn finish(&mut self) -> Option<i32> {
        let pid = self.pid.take()?;
        // Unreaped, the pid still names the group: this reaches nothing else.
        let _ = killpg(self.pgid, Signal::SIGKILL);
        let status = crate::spawn::reap(pid).ok();
        crate::procs::unregister(pid);
        wait_group_gone(self.pgid);
        if self.sweep {
            crate::procs::end_orphans(GROUP_EXIT_WAIT);
        }
        status.map(exit_code)
    }

    /// Ends the child's group: `SIGTERM`, then `SIGKILL` after `grace` (the init of a PID
    /// namespace gets the `SIGTERM` only if it handles it), then [`finish`](Self::finish).
    pub fn stop(&mut self, grace: Duration) -> Option<i32> {
        self.pid?;
        let _ = killpg(self.pgid, Signal::SIGTERM);
        let until = Instant::now() + grace;
        let mut pause = Duration::from_micros(200);
        while Instant::now() < until && !self.has_exited() {
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(5));
        }
        self.finish()
    }

    fn kill(&mut self) {
        if self.pid.is_some() {
            let _ = killpg(self.pgid, Signal::SIGKILL);
            self.finish();
        }
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        self.kill();
    }
}

fn exit_code(raw: i32) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    let st = std::process::ExitStatus::from_raw(raw);
    match (st.code(), st.signal()) {
        (Some(c), _) => c,
        (None, Some(s)) => 128 + s,
        (None, None) => 128,
    }
}
