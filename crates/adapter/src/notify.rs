//! hcp's side of a `deny` call's seccomp listener (RUNTIME §5.3): every `socket(2)` of the
//! call's processes waits for hcp's answer, which is always `EACCES`; hcp counts the
//! attempts so that the result can name the key that would allow a network
//! (`packs.ID.network`).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

/// Answers one pending notification on `listener` with `EACCES`. `Ok(true)`: one was
/// answered; `Ok(false)`: none was pending or its process went away meanwhile.
///
/// # Errors
/// The listener is done: every process under the filter has exited (`ENOENT` on an empty
/// listener whose filter has no users, or a hang-up).
pub(crate) fn answer(listener: &OwnedFd) -> io::Result<bool> {
    // SAFETY: the kernel requires the request zeroed; plain data.
    let mut req: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: an ioctl that writes one `seccomp_notif` into `req`.
    let r = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_RECV as _,
            &raw mut req,
        )
    };
    if r != 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            // The process was killed before we read its call, or a spurious wake-up.
            Some(libc::EINTR | libc::EAGAIN) => Ok(false),
            _ => Err(e),
        };
    }
    let resp = libc::seccomp_notif_resp {
        id: req.id,
        val: 0,
        error: -libc::EACCES,
        flags: 0,
    };
    // SAFETY: an ioctl that reads one `seccomp_notif_resp` from `resp`.
    let r = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND as _,
            &raw const resp,
        )
    };
    // ENOENT: the process went away before the answer; it made no socket either.
    Ok(r == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ENOENT))
}
