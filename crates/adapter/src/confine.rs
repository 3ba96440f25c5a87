//! Kernel confinement of a child (RUNTIME §5 "The child", §5.1–§5.4).
//!
//! A [`Confinement`] is prepared in the parent: everything that allocates or may fail
//! in an interesting way happens before the child is made. In the child, between
//! `clone` and `execve`, it only makes async-signal-safe system calls and never
//! allocates, because other threads of the parent may hold locks (the allocator's) that
//! the child would wait on forever.
//!
//! What it holds, in the order the child applies it:
//!
//! 1. namespaces, given to `clone` itself ([`Confinement::clone_flags`]): mount, PID and
//!    IPC for every call with a view, a user namespace around them for an ordinary user
//!    (never as root: it would map host uid 0), a network namespace for
//!    `{"allow": …}`;
//! 2. the call's cgroups (pids as root, memory), entered first;
//! 3. in a user namespace: the child's own uid and gid maps (`U U 1`, `setgroups deny`);
//! 4. in a network namespace of its own: `lo` up and the egress listener handed to hcp
//!    (the netns module);
//! 5. the view (the view module): its own root, `pivot_root`, the given paths bound;
//!    then the spawn enters the working directory in the view;
//! 6. resource limits ([`ResourceLimits`]) and the parent-death signal (`SIGKILL`);
//! 7. every capability set emptied (the privileges module);
//! 8. `PR_SET_NO_NEW_PRIVS`, Landlock's scopes (abstract Unix sockets and signals, ABI ≥ 6,
//!    outside a network namespace of the call's own), then the seccomp filter (the seccomp
//!    module), whose listener, under `deny`, goes to hcp.
//!
//! [`Confinement::for_call`] (the call module) prepares all of it for every land.
//!
//! The child is made by `clone(CLONE_VM | CLONE_VFORK)` (the spawn module), which shares
//! the parent's memory until `execve`: the same constraints as after `fork`, without
//! copying the parent.

use crate::cgroup::CallCgroup;
pub use crate::limits::{LimitOverrides, ResourceLimits, Rlimit, running_as_root};
use crate::seccomp::SockFilter;
use crate::view::View;
use nix::sys::resource::{Resource, setrlimit};
use serde::{Deserialize, Serialize};
use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, AtomicU32};

/// A call's network (RUNTIME §5.3), as the adapter enforces it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Network {
    /// No socket at all but a `socketpair` (a seccomp filter): no TCP, UDP, raw, packet,
    /// netlink, vsock or Unix socket, no io_uring.
    #[default]
    Deny,
    /// The host's network namespace: every socket family but `AF_UNIX` and `AF_VSOCK`.
    Host,
    /// A network namespace of the call's own whose one interface is a loopback, with a
    /// listener on it handed to hcp's egress proxy; `AF_INET` and `AF_INET6` only.
    Allow,
}

impl Network {
    /// `deny`, `host` or `allow`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Deny => "deny",
            Self::Host => "host",
            Self::Allow => "allow",
        }
    }
}

/// Namespaces the child is cloned into.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Namespaces {
    pub user: bool,
    pub pid: bool,
    pub mount: bool,
    pub ipc: bool,
    pub net: bool,
}

/// The uid and gid maps a child in a new user namespace writes for itself.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct IdMaps {
    pub uid_map: Vec<u8>,
    pub gid_map: Vec<u8>,
}

impl IdMaps {
    /// Maps of the calling process's own effective uid and gid to themselves.
    pub(crate) fn own() -> Self {
        // SAFETY: geteuid/getegid cannot fail.
        let (u, g) = unsafe { (libc::geteuid(), libc::getegid()) };
        Self {
            uid_map: format!("{u} {u} 1\n").into_bytes(),
            gid_map: format!("{g} {g} 1\n").into_bytes(),
        }
    }
}

/// The call's seccomp program, and the one installed instead when its listener cannot be
/// had (another listener up the filter chain: `EBUSY`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Filters {
    pub main: &'static [SockFilter],
    /// `main` hands `socket(2)` to hcp: install it with a new listener.
    pub listener: bool,
    /// Without a listener.
    pub fallback: &'static [SockFilter],
}

/// What to apply to a child between `clone` and `execve`, prepared in the parent.
#[derive(Debug, Clone, Default)]
pub struct Confinement {
    /// Resource, soft and hard value.
    pub(crate) limits: Vec<(Resource, u64, u64)>,
    pub(crate) die_with_parent: Option<libc::pid_t>,
    pub(crate) ns: Namespaces,
    pub(crate) id_maps: Option<Arc<IdMaps>>,
    pub(crate) view: Option<Arc<View>>,
    pub(crate) cgroup: Option<Arc<CallCgroup>>,
    /// Empty every capability set (the privileges module): the bounding set too, up to
    /// this capability number, or (`None`: in a user namespace of the call's own, where
    /// it grants nothing after `execve`) not.
    pub(crate) drop_caps: Option<Option<u32>>,
    /// Landlock's scopes: a ruleset made once per process.
    pub(crate) landlock_scope: Option<RawFd>,
    pub(crate) filters: Option<Filters>,
    /// A network namespace of the call's own, with the egress listener.
    pub(crate) egress: bool,
}

impl PartialEq for Confinement {
    fn eq(&self, other: &Self) -> bool {
        fn same<T>(a: &Option<Arc<T>>, b: &Option<Arc<T>>) -> bool {
            match (a, b) {
                (None, None) => true,
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                _ => false,
            }
        }
        self.limits == other.limits
            && self.die_with_parent == other.die_with_parent
            && self.ns == other.ns
            && same(&self.id_maps, &other.id_maps)
            && same(&self.view, &other.view)
            && same(&self.cgroup, &other.cgroup)
            && self.drop_caps == other.drop_caps
            && self.egress == other.egress
    }
}

impl Eq for Confinement {}

impl Confinement {
    /// No confinement yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a resource limit (soft = hard = the value).
    pub fn rlimit(mut self, limit: Rlimit) -> Self {
        self.limits.push(limit.resource());
        self
    }

    /// The resource limits of every child (RUNTIME §5), each lowered to what `hcp` runs
    /// under ([`ResourceLimits::effective`]), no core dumps, no real-time priority, and
    /// [`die_with_parent`](Self::die_with_parent).
    pub fn with_limits(limits: &ResourceLimits) -> Self {
        Self::with_effective_limits(&limits.effective())
    }

    /// [`with_limits`](Self::with_limits) of limits already lowered by
    /// [`ResourceLimits::effective`].
    pub(crate) fn with_effective_limits(limits: &ResourceLimits) -> Self {
        let mut c = Self::new().die_with_parent();
        for l in limits.rlimits() {
            c = c.rlimit(l);
        }
        c
    }

    /// Sends `SIGKILL` to the direct child when the thread that spawned it dies (so an
    /// `hcp` killed with `SIGKILL` does not leave its child running). In a PID namespace
    /// this ends every descendant; elsewhere grandchildren are not covered.
    pub fn die_with_parent(mut self) -> Self {
        self.die_with_parent = Some(std::process::id() as libc::pid_t);
        self
    }

    /// Whether there is anything to apply.
    pub fn is_empty(&self) -> bool {
        self.limits.is_empty()
            && self.die_with_parent.is_none()
            && self.ns == Namespaces::default()
            && self.cgroup.is_none()
            && self.drop_caps.is_none()
            && self.filters.is_none()
            && self.view.is_none()
    }

    /// Whether the child starts in a PID namespace of its own (it is that namespace's
    /// init; every descendant ends with it).
    pub fn has_pid_namespace(&self) -> bool {
        self.ns.pid
    }

    /// The call's view, when it has one: its entries ([`View::describe`]), `HOME`, the
    /// protected names found before the call.
    pub fn view(&self) -> Option<&View> {
        self.view.as_deref()
    }

    /// The call's cgroups, when it has any (whether its memory bound was reached:
    /// [`CallCgroup::memory_exceeded`]).
    pub fn cgroup(&self) -> Option<&CallCgroup> {
        self.cgroup.as_deref()
    }

    /// Whether the child hands hcp a seccomp listener (`deny`: hcp answers its
    /// `socket(2)` and learns it tried).
    pub fn notifies_sockets(&self) -> bool {
        self.filters.is_some_and(|f| f.listener)
    }

    /// Whether the child runs in a network namespace of its own and hands hcp the egress
    /// listener.
    pub fn has_egress(&self) -> bool {
        self.egress
    }

    /// Whether the child hands hcp descriptors over a socket pair before `execve` (when
    /// hcp will `listen` to its seccomp notifications).
    pub(crate) fn needs_channel(&self, listen: bool) -> bool {
        self.egress || (listen && self.notifies_sockets())
    }

    /// The namespace flags for `clone`.
    pub(crate) fn clone_flags(&self) -> libc::c_int {
        let mut f = 0;
        for (on, flag) in [
            (self.ns.user, libc::CLONE_NEWUSER),
            (self.ns.pid, libc::CLONE_NEWPID),
            (self.ns.mount, libc::CLONE_NEWNS),
            (self.ns.ipc, libc::CLONE_NEWIPC),
            (self.ns.net, libc::CLONE_NEWNET),
        ] {
            if on {
                f |= flag;
            }
        }
        f
    }

    /// Steps 2–5 of the module docs, in the child before it enters its working
    /// directory: the cgroups (but the one `clone3` placed it in, index `joined`; each
    /// joined by one `write` to the `cgroup.procs` descriptor the parent opened, `procs`:
    /// the descriptor or -1 with the errno of its open), the id maps, the network
    /// namespace, the view.
    /// Async-signal-safe, no allocation.
    ///
    /// # Errors
    /// The OS error of the failed call; the spawn then fails (`spawn_failed`, or
    /// `sandbox_unavailable` where the kernel refused the view).
    pub(crate) fn isolate_in_child(
        &self,
        channel: RawFd,
        joined: i32,
        procs: &[(RawFd, i32)],
        facts: &AtomicU32,
        failed_op: &AtomicI32,
    ) -> io::Result<()> {
        // The one `clone3` placed the child in (`joined`, -1 for none) is not written.
        for (i, &(fd, open_errno)) in procs.iter().enumerate() {
            if i32::try_from(i).is_ok_and(|i| i == joined) {
                continue;
            }
            if fd < 0 {
                return Err(io::Error::from_raw_os_error(open_errno));
            }
            // SAFETY: a descriptor the parent opened for this child; one byte from a
            // static.
            let n = unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) };
            if n != 1 {
                return Err(if n < 0 {
                    io::Error::last_os_error()
                } else {
                    io::Error::from_raw_os_error(libc::EIO)
                });
            }
        }
        if let Some(maps) = &self.id_maps {
            for (path, data) in [
                (c"/proc/self/uid_map", maps.uid_map.as_slice()),
                (c"/proc/self/setgroups", b"deny".as_slice()),
                (c"/proc/self/gid_map", maps.gid_map.as_slice()),
            ] {
                let e = write_cfile(path, data);
                if e != 0 {
                    return Err(io::Error::from_raw_os_error(e));
                }
            }
        }
        if self.egress {
            let e = crate::netns::setup_in_child(channel);
            if e != 0 {
                return Err(io::Error::from_raw_os_error(e));
            }
        }
        if let Some(v) = &self.view {
            let e = crate::view::child::apply(v, facts, failed_op);
            if e != 0 {
                return Err(io::Error::from_raw_os_error(e));
            }
        }
        Ok(())
    }

    /// Steps 6–8 of the module docs, in the child after it entered its working
    /// directory and before `execve`, in the parent's memory: async-signal-safe calls
    /// only, no allocation (the error is built from a raw OS error code).
    ///
    /// # Errors
    /// The OS error of the failed call; the spawn then fails (`spawn_failed`).
    pub(crate) fn apply_in_child(&self, channel: RawFd, listen: bool) -> io::Result<()> {
        let os = |e: i32| io::Error::from_raw_os_error(e);
        for &(resource, soft, hard) in &self.limits {
            setrlimit(resource, soft, hard).map_err(|e| os(e as i32))?;
        }
        if let Some(parent) = self.die_with_parent {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                .map_err(|e| os(e as i32))?;
            // The parent may have died before the signal was armed.
            if self.ns.pid {
                // In a PID namespace the parent is outside it (getppid() is 0): its end
                // of the stdout pipe tells (the child closed its own copy of it).
                let mut p = libc::pollfd {
                    fd: 1,
                    events: libc::POLLOUT,
                    revents: 0,
                };
                // SAFETY: one pollfd on the stack, no timeout.
                let r = unsafe { libc::poll(&raw mut p, 1, 0) };
                if r > 0 && p.revents & libc::POLLERR != 0 {
                    return Err(os(libc::ESRCH));
                }
            } else if nix::unistd::getppid().as_raw() != parent {
                return Err(os(libc::ESRCH));
            }
        }
        if let Some(last) = self.drop_caps {
            let e = crate::privileges::drop_all(last);
            if e != 0 {
                return Err(os(e));
            }
        }
        // SAFETY: `prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)` takes integers only.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
            return Err(io::Error::last_os_error());
        }
        if let Some(fd) = self.landlock_scope {
            // SAFETY: `landlock_restrict_self(fd, 0)` takes a descriptor the process keeps
            // open for its life and flags; it touches no memory of ours.
            let r = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, fd, 0u32) };
            if r != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        if let Some(f) = &self.filters {
            let listener = f.listener && listen;
            let mut r = if listener {
                crate::seccomp::install(f.main, true)
            } else {
                crate::seccomp::install(f.fallback, false)
            };
            if listener && r == -libc::EBUSY {
                r = crate::seccomp::install(f.fallback, false);
            } else if listener && r >= 0 {
                let e = crate::channel::send(channel, crate::channel::TAG_NOTIFY, r);
                // SAFETY: the listener this child just got; hcp holds its own copy now.
                unsafe { libc::close(r) };
                if e != 0 {
                    return Err(os(e));
                }
            }
            if r < 0 {
                return Err(os(-r));
            }
        }
        Ok(())
    }
}

/// Writes `data` to the file at `path` (open, one write, close). Async-signal-safe.
/// Returns 0 or the errno.
fn write_cfile(path: &std::ffi::CStr, data: &[u8]) -> i32 {
    let errno = || {
        io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL)
    };
    // SAFETY: a NUL-terminated path; the write reads `data` only.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return errno();
        }
        let n = libc::write(fd, data.as_ptr().cast(), data.len());
        let e = if n < 0 || n as usize != data.len() {
            errno()
        } else {
            0
        };
        libc::close(fd);
        e
    }
}
