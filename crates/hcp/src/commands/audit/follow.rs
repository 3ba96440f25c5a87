//! `hcp audit tail --follow`: the trail's new records as JSON lines, for a log shipper
//! (Vector, Fluent Bit, a SIEM's agent), until SIGINT, SIGTERM or a closed stdout.
//!
//! The loop waits in `poll(2)` on three things: an inotify watch of the audit directory
//! (an append, a file moved in or out), a signalfd for SIGINT and SIGTERM (blocked, so
//! they are read rather than delivered), and stdout itself, which reports an error when
//! the reader has gone away (a broken pipe is the normal end of a shipper's pipeline).
//! Without inotify it looks again every second.

use crate::error::{CliError, CliResult};
use crate::exit;
use hcp_store::audit::AuditLog;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// How long to wait without an event before looking again, in milliseconds.
const IDLE_MS: i32 = 1000;

fn io_error(what: &str, e: std::io::Error) -> CliError {
    CliError::new(
        hcp_model::Code::StoreIo,
        format!("cannot follow the audit trail: {what}: {e}"),
    )
}

/// SIGINT and SIGTERM, blocked and readable from a descriptor.
fn signal_fd() -> std::io::Result<OwnedFd> {
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

/// An inotify watch of `dir` for appends and files moved or created; `None` when the
/// kernel or the directory does not allow one.
fn watch(dir: &std::path::Path) -> Option<OwnedFd> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: `inotify_init1` returns a new descriptor or -1; `path` is a valid C string
    // that outlives the call.
    unsafe {
        let fd = libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK);
        if fd < 0 {
            return None;
        }
        let owned = OwnedFd::from_raw_fd(fd);
        let mask = libc::IN_MODIFY
            | libc::IN_CREATE
            | libc::IN_MOVED_TO
            | libc::IN_MOVED_FROM
            | libc::IN_DELETE
            | libc::IN_CLOSE_WRITE;
        if libc::inotify_add_watch(fd, path.as_ptr(), mask) < 0 {
            return None;
        }
        Some(owned)
    }
}

/// Reads and drops what a non-blocking descriptor holds.
fn drain(fd: &OwnedFd) {
    let mut buf = [0u8; 4096];
    loop {
        // SAFETY: `buf` is a live local buffer of the given length.
        let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            break;
        }
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

/// Runs the follow loop (see the module docs).
pub fn run(log: &AuditLog, n: usize) -> CliResult {
    let signals = signal_fd().map_err(|e| io_error("signals", e))?;
    let mut follower = log
        .follow(n)
        .map_err(|e| io_error("open", std::io::Error::other(e.to_string())))?;
    let mut inotify = watch(log.dir());
    loop {
        let lines = follower.poll().map_err(|e| io_error("read", e))?;
        if !emit(&lines) {
            return Ok(exit::OK);
        }
        if inotify.is_none() {
            inotify = watch(log.dir());
        }
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
            libc::pollfd {
                fd: inotify.as_ref().map_or(-1, AsRawFd::as_raw_fd),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: `fds` is a live array of initialised pollfd of the given length.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, IDLE_MS) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(io_error("poll", e));
        }
        if fds[0].revents != 0 {
            return Ok(exit::OK);
        }
        if fds[1].revents & (libc::POLLERR | libc::POLLHUP) != 0 {
            return Ok(exit::OK);
        }
        if let Some(fd) = &inotify
            && fds[2].revents != 0
        {
            drain(fd);
        }
    }
}
