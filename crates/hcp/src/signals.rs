//! The signal pipe of the commands that run children (`hcp exec`, `hcp sense`): `SIGINT`,
//! `SIGTERM`, `SIGHUP`, `SIGQUIT`, `SIGUSR1`, `SIGUSR2` and `SIGALRM` ([`ARMED`]) make a
//! pipe readable instead of ending hcp, so the caller ends its child's process group,
//! writes its audit record and answers. A signal the caller ignores stays ignored.
//! `SIGKILL` cannot be caught: the child dies with hcp (parent-death signal), but the
//! call has no audit record and a grandchild may survive.

use crate::error::CliError;
use hcp_model::Code;
use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};

/// The signals that end the call like a cancel: those a user or a supervisor sends to
/// stop a process, whose default would end hcp without its audit record.
pub(crate) const ARMED: [Signal; 7] = [
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGALRM,
];

/// The write end of the signal pipe, for the handler; -1 when unset.
static SIGNAL_FD: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(_: libc::c_int) {
    let fd = SIGNAL_FD.load(Ordering::Relaxed);
    if fd >= 0 {
        let byte = 1u8;
        // SAFETY: write(2) is async-signal-safe; the pipe is non-blocking, so a full pipe
        // loses a wake-up that is already pending.
        unsafe {
            libc::write(fd, std::ptr::from_ref(&byte).cast(), 1);
        }
    }
}

/// The signal pipe: readable once one of [`ARMED`] arrived. Dropping it detaches the
/// handler from the write end before the descriptors close (the handlers stay armed, so
/// a late signal is ignored rather than fatal while the triggers are being stopped).
pub(crate) struct SignalPipe {
    /// Readable once a signal arrived.
    pub(crate) read: OwnedFd,
    _write: OwnedFd,
}

impl Drop for SignalPipe {
    fn drop(&mut self) {
        SIGNAL_FD.store(-1, Ordering::Relaxed);
    }
}

/// Arms [`ARMED`] (except those the caller ignores) to make the returned pipe readable.
///
/// # Errors
/// `spawn_failed` when the pipe or the handlers cannot be set up.
pub(crate) fn arm() -> Result<SignalPipe, CliError> {
    use nix::fcntl::OFlag;
    let (r, w) = nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)
        .map_err(|e| CliError::call(Code::SpawnFailed, "cannot make the signal pipe").cause(e))?;
    SIGNAL_FD.store(w.as_raw_fd(), Ordering::Relaxed);
    let action = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for sig in ARMED {
        // A signal the caller ignores stays ignored (`nohup`, or the SIGINT and SIGQUIT
        // a shell ignores for background jobs).
        // SAFETY: querying the disposition only.
        let ignored = unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            libc::sigaction(sig as libc::c_int, std::ptr::null(), &mut old) == 0
                && old.sa_sigaction == libc::SIG_IGN
        };
        if ignored {
            continue;
        }
        // SAFETY: the handler only loads an atomic and calls write(2).
        unsafe { sigaction(sig, &action) }.map_err(|e| {
            CliError::call(Code::SpawnFailed, "cannot arm the signal handlers").cause(e)
        })?;
    }
    Ok(SignalPipe { read: r, _write: w })
}
