//! Descriptors the child hands to hcp before `execve` (RUNTIME §5.3, §5.5): the seccomp
//! listener of a `deny` call, the TCP listener of a call in a network namespace of its own.
//!
//! The child shares hcp's memory until `execve` (`CLONE_VM`) but has a descriptor table of
//! its own, so a descriptor it makes reaches hcp only as `SCM_RIGHTS` over a socket pair
//! the parent made before `clone`. Each message is one tag byte and one descriptor; the
//! parent reads them once `clone` has returned (the child has exec'd by then, so every
//! message is queued). The child's end is close-on-exec: the program never holds it.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// The tag of the seccomp listener.
pub(crate) const TAG_NOTIFY: u8 = b'N';
/// The tag of the egress TCP listener.
pub(crate) const TAG_EGRESS: u8 = b'E';

/// The parent's and the child's ends.
#[derive(Debug)]
pub(crate) struct Channel {
    pub parent: OwnedFd,
    pub child: OwnedFd,
}

impl Channel {
    /// A `SOCK_DGRAM` Unix socket pair, both ends close-on-exec.
    pub(crate) fn new() -> io::Result<Self> {
        let mut fds = [-1; 2];
        // SAFETY: socketpair writes two descriptors into a local array.
        let r = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: just made; owned by nothing else.
        Ok(unsafe {
            Self {
                parent: OwnedFd::from_raw_fd(fds[0]),
                child: OwnedFd::from_raw_fd(fds[1]),
            }
        })
    }

    /// Takes every descriptor the child sent, by tag (non-blocking).
    pub(crate) fn receive(&self) -> Vec<(u8, OwnedFd)> {
        let mut out = Vec::new();
        loop {
            let mut tag = [0u8; 1];
            let mut iov = libc::iovec {
                iov_base: tag.as_mut_ptr().cast(),
                iov_len: 1,
            };
            let mut cbuf = [0u64; 8];
            // SAFETY: msghdr is plain data; zeroed is its empty value.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_iov = &raw mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = cbuf.as_mut_ptr().cast();
            msg.msg_controllen = std::mem::size_of_val(&cbuf) as _;
            // SAFETY: the buffers above live through the call.
            let n = unsafe {
                libc::recvmsg(
                    self.parent.as_raw_fd(),
                    &raw mut msg,
                    libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC,
                )
            };
            if n <= 0 {
                return out;
            }
            // SAFETY: the kernel filled `msg`; the macros walk its control buffer.
            unsafe {
                let mut c = libc::CMSG_FIRSTHDR(&raw const msg);
                while !c.is_null() {
                    if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                        let fd: RawFd = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                        out.push((tag[0], OwnedFd::from_raw_fd(fd)));
                    }
                    c = libc::CMSG_NXTHDR(&raw const msg, c);
                }
            }
        }
    }
}

/// Sends `fd` with `tag` over the child's end `sock`. Async-signal-safe, no allocation.
/// Returns 0 or the errno.
pub(crate) fn send(sock: RawFd, tag: u8, fd: RawFd) -> i32 {
    let mut t = [tag];
    let mut iov = libc::iovec {
        iov_base: t.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut cbuf = [0u64; 4];
    // SAFETY: plain data; the macros compute offsets in `cbuf`, which is large enough for
    // one descriptor (CMSG_SPACE(4) = 24 bytes on 64-bit).
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &raw mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) as _;
        let c = libc::CMSG_FIRSTHDR(&raw const msg);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<RawFd>(), fd);
        if libc::sendmsg(sock, &raw const msg, libc::MSG_DONTWAIT) < 0 {
            return std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EINVAL);
        }
    }
    0
}
