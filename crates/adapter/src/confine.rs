//! The seam for kernel confinement of a child (RUNTIME §5, `local` land).
//!
//! A [`Confinement`] is prepared in the parent: everything that allocates or may fail
//! in an interesting way happens before `fork`. In the child, between `fork` and
//! `exec`, [`Confinement::apply_in_child`] only makes async-signal-safe system calls and
//! never allocates, because the parent may hold locks (the allocator's) that no thread
//! of the child will ever release.
//!
//! Implemented now: resource limits (`setrlimit`) and a parent-death signal. Landlock is
//! a later addition (not implemented here): build the ruleset in the parent with the
//! `landlock` crate, keep its descriptor here (an `Arc<OwnedFd>`, so that `Confinement`
//! stays `Clone`), and in [`Confinement::apply_in_child`] make only the two calls that
//! take it: `prctl(PR_SET_NO_NEW_PRIVS)` and `landlock_restrict_self(fd, 0)`. The
//! pinned bin must then be readable and executable under the ruleset (RUNTIME §5).
//!
//! Any confinement makes [`run`](crate::run) fork with a `pre_exec` hook instead of
//! taking std's `posix_spawn` fast path.

use nix::sys::resource::{Resource, setrlimit};
use std::io;

/// A resource limit to set in the child (soft and hard value alike).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rlimit {
    /// `RLIMIT_CPU`, seconds of CPU time.
    CpuSeconds(u64),
    /// `RLIMIT_AS`, bytes of address space.
    AddressSpaceBytes(u64),
    /// `RLIMIT_FSIZE`, bytes: the largest file the child may write.
    FileSizeBytes(u64),
    /// `RLIMIT_NOFILE`, open file descriptors.
    OpenFiles(u64),
    /// `RLIMIT_NPROC`, processes of the user (counts the user's other processes too).
    Processes(u64),
    /// `RLIMIT_CORE`, bytes of core dump (0: none).
    CoreBytes(u64),
}

impl Rlimit {
    fn resource(self) -> (Resource, u64) {
        match self {
            Self::CpuSeconds(v) => (Resource::RLIMIT_CPU, v),
            Self::AddressSpaceBytes(v) => (Resource::RLIMIT_AS, v),
            Self::FileSizeBytes(v) => (Resource::RLIMIT_FSIZE, v),
            Self::OpenFiles(v) => (Resource::RLIMIT_NOFILE, v),
            Self::Processes(v) => (Resource::RLIMIT_NPROC, v),
            Self::CoreBytes(v) => (Resource::RLIMIT_CORE, v),
        }
    }
}

/// What to apply to a child between `fork` and `exec`, prepared in the parent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Confinement {
    limits: Vec<(Resource, u64)>,
    die_with_parent: Option<libc::pid_t>,
}

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

    /// Sends `SIGKILL` to the direct child when the thread that spawned it dies (so an
    /// `hcp` killed with `SIGKILL` does not leave its child running). Grandchildren are
    /// not covered; the child's process group is killed by [`run`](crate::run) on every
    /// path it controls.
    pub fn die_with_parent(mut self) -> Self {
        self.die_with_parent = Some(std::process::id() as libc::pid_t);
        self
    }

    /// Whether there is anything to apply.
    pub fn is_empty(&self) -> bool {
        self.limits.is_empty() && self.die_with_parent.is_none()
    }

    /// Applies the confinement to the calling process. Called only in the child, after
    /// `fork` and before `exec`: makes only async-signal-safe calls and does not allocate
    /// (the error is built from a raw OS error code).
    ///
    /// # Errors
    /// The OS error of the failed call; the spawn then fails (`spawn_failed`).
    pub(crate) fn apply_in_child(&self) -> io::Result<()> {
        for &(resource, value) in &self.limits {
            setrlimit(resource, value, value)
                .map_err(|e| io::Error::from_raw_os_error(e as i32))?;
        }
        if let Some(parent) = self.die_with_parent {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                .map_err(|e| io::Error::from_raw_os_error(e as i32))?;
            // The parent may have died before the signal was armed.
            if nix::unistd::getppid().as_raw() != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
        }
        Ok(())
    }
}
