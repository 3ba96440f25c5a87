//! `hcp audit tail --follow`: the trail's new records as JSON lines, for a log shipper
//! (Vector, Fluent Bit, a SIEM's agent), until SIGINT, SIGTERM or a closed stdout.
//!
//! The state backend's follower ([`hcp_store::audit::AuditFollow`]) waits for records
//! (the file store: an inotify watch of the audit directory, which also sees a rotation;
//! a database: its notifications), woken early by a signalfd for SIGINT and SIGTERM
//! (blocked, so they are read rather than delivered). Between waits it looks at stdout,
//! which reports an error when the reader has gone away (a broken pipe is the normal end
//! of a shipper's pipeline).

use crate::error::{CliError, CliResult};
use crate::exit;
use hcp_store::state::State;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// How long the follower waits without a record before looking again (and at stdout: a
/// reader gone while nothing is written is noticed within this time).
const IDLE: Duration = Duration::from_millis(500);

fn io_error(what: &str, e: std::io::Error) -> CliError {
    CliError::new(
        hcp_model::Code::StoreIo,
        format!("cannot follow the audit trail: {what}: {e}"),
    )
}

/// SIGINT and SIGTERM, blocked and readable from a descriptor.
pub(super) fn signal_fd() -> std::io::Result<OwnedFd> {
    // SAFETY: `set` is a local sigset initialised by `sigemptyset` before use; the calls
    // only read it. `signalfd` returns a new descriptor we own, or -1.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let fd = libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

/// Writes `lines` to stdout; `false` when the reader has gone away.
fn emit(lines: &[Vec<u8>]) -> bool {
    let mut out = std::io::stdout().lock();
    for l in lines {
        if serde_json::from_slice::<serde_json::Value>(l).is_err() {
            eprintln!(
                "warning: skipped a line of the trail that is not JSON; `hcp audit verify` says more"
            );
            continue;
        }
        if out
            .write_all(l)
            .and_then(|()| out.write_all(b"\n"))
            .is_err()
        {
            return false;
        }
    }
    out.flush().is_ok()
}

/// Whether the signal fd is readable or stdout has an error or hang-up, now.
fn stopped(signals: BorrowedFd<'_>) -> bool {
    let mut fds = [
        libc::pollfd {
            fd: signals.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: 1,
            events: 0,
            revents: 0,
        },
    ];
    // SAFETY: `fds` is a live array of initialised pollfd of the given length.
    let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 0) };
    r > 0 && (fds[0].revents != 0 || fds[1].revents & (libc::POLLERR | libc::POLLHUP) != 0)
}

/// Runs the follow loop (see the module docs).
pub fn run(state: &dyn State, n: usize) -> CliResult {
    let signals = signal_fd().map_err(|e| io_error("signals", e))?;
    let mut follower = state.audit_follow(n).map_err(|e| super::audit_error(&e))?;
    loop {
        // Not stdout: a terminal would wake it for every key typed.
        let lines = follower
            .next(IDLE, &[signals.as_fd()])
            .map_err(|e| super::audit_error(&e))?;
        if !emit(&lines) || stopped(signals.as_fd()) {
            return Ok(exit::OK);
        }
    }
}
