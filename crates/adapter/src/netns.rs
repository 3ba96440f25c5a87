//! A network namespace of the call's own, for `"network": {"allow": [DEST…]}` (RUNTIME
//! §5.3, §5.5): the child is cloned with `CLONE_NEWNET`; before `execve` it brings up its
//! loopback and makes a TCP socket listening on `127.0.0.1:`[`EGRESS_PORT`] there, which it
//! hands to hcp ([`Spawned`](crate::Started) / [`Invocation::egress`](crate::Invocation)).
//! hcp's egress proxy accepts on it; the child's proxy variables name it. Nothing else is
//! reachable from inside: the namespace's one interface is its loopback.
//!
//! The port is fixed: the namespace is the call's, so no other program binds it.

use std::os::fd::RawFd;

/// The port of the egress listener in the call's namespace.
pub const EGRESS_PORT: u16 = 3128;

/// The proxy URL the child's environment names (`HTTPS_PROXY` …).
pub const EGRESS_PROXY_URL: &str = "http://127.0.0.1:3128";

/// Brings up `lo`, makes the listener and sends it over `channel`. Async-signal-safe, no
/// allocation; the caller holds `CAP_NET_ADMIN` in the namespace (before `execve`).
/// Returns 0 or the errno.
pub(crate) fn setup_in_child(channel: RawFd) -> i32 {
    let errno = || {
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL)
    };
    // SAFETY (each call below): integers and locals of this frame.
    unsafe {
        let s = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if s < 0 {
            return errno();
        }
        let mut ifr: libc::ifreq = std::mem::zeroed();
        for (i, b) in b"lo".iter().enumerate() {
            ifr.ifr_name[i] = *b as libc::c_char;
        }
        if libc::ioctl(s, libc::SIOCGIFFLAGS, &raw mut ifr) != 0 {
            let e = errno();
            libc::close(s);
            return e;
        }
        ifr.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        let r = libc::ioctl(s, libc::SIOCSIFFLAGS, &raw const ifr);
        let e = errno();
        libc::close(s);
        if r != 0 {
            return e;
        }
        let l = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if l < 0 {
            return errno();
        }
        let one: libc::c_int = 1;
        libc::setsockopt(
            l,
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&raw const one).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
        let addr = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: EGRESS_PORT.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from_be_bytes([127, 0, 0, 1]).to_be(),
            },
            sin_zero: [0; 8],
        };
        if libc::bind(
            l,
            (&raw const addr).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        ) != 0
            || libc::listen(l, 128) != 0
        {
            let e = errno();
            libc::close(l);
            return e;
        }
        let e = crate::channel::send(channel, crate::channel::TAG_EGRESS, l);
        libc::close(l);
        e
    }
}
