//! Resource limits of every child (RUNTIME §5 "The child", §5.4): `setrlimit` of CPU
//! seconds, address space, open files, file size and processes, no core dumps, no
//! real-time priority and no nice value below the current one; and the two bounds a
//! call's view and cgroup apply, `tmp_bytes` and `memory_bytes`.

use nix::sys::resource::{Resource, getrlimit};
use serde::{Deserialize, Serialize};

/// A resource limit to set in the child: soft and hard value alike, except the CPU
/// time, whose hard limit is one second above (see [`Rlimit::CpuSeconds`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rlimit {
    /// `RLIMIT_CPU`, seconds of CPU time: `SIGXCPU` at the value (the soft limit), and
    /// `SIGKILL` one second later (the hard limit), so that a child ended by this limit
    /// is told apart from one killed otherwise. Where `hcp`'s own hard limit is lower,
    /// the hard limit stays there.
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
    /// `RLIMIT_RTPRIO`, the highest real-time priority (0: `SCHED_FIFO` and `SCHED_RR`
    /// fail).
    RealtimePriority(u64),
    /// `RLIMIT_NICE`, the nice ceiling as `20 - value` (0: no nice value below the
    /// current one).
    Nice(u64),
}

impl Rlimit {
    /// The resource, soft and hard value.
    pub(crate) fn resource(self) -> (Resource, u64, u64) {
        match self {
            Self::CpuSeconds(v) => {
                let ceiling = getrlimit(Resource::RLIMIT_CPU).map_or(u64::MAX, |(_, h)| h);
                let hard = v.saturating_add(1).min(ceiling).max(v);
                (Resource::RLIMIT_CPU, v, hard)
            }
            Self::AddressSpaceBytes(v) => (Resource::RLIMIT_AS, v, v),
            Self::FileSizeBytes(v) => (Resource::RLIMIT_FSIZE, v, v),
            Self::OpenFiles(v) => (Resource::RLIMIT_NOFILE, v, v),
            Self::Processes(v) => (Resource::RLIMIT_NPROC, v, v),
            Self::CoreBytes(v) => (Resource::RLIMIT_CORE, v, v),
            Self::RealtimePriority(v) => (Resource::RLIMIT_RTPRIO, v, v),
            Self::Nice(v) => (Resource::RLIMIT_NICE, v, v),
        }
    }
}

/// The resource limits of every child (RUNTIME §5), soft = hard. Defaults live in the
/// runtime configuration (`hcp_store::config`); a per-exec override can only tighten
/// ([`ResourceLimits::tightened`]). A value above the limit `hcp` itself runs under is
/// lowered to it, since an unprivileged process cannot raise a hard limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceLimits {
    /// `RLIMIT_CPU`: seconds of CPU time; then `SIGXCPU`/`SIGKILL`.
    pub cpu_seconds: u64,
    /// `RLIMIT_AS`: bytes of virtual address space; allocations past it fail.
    pub address_space_bytes: u64,
    /// `RLIMIT_NOFILE`: open file descriptors.
    pub open_files: u64,
    /// `RLIMIT_FSIZE`: bytes of the largest file the child may write; then `SIGXFSZ`.
    pub file_size_bytes: u64,
    /// `RLIMIT_NPROC`: processes and threads of the user, counting those the user runs
    /// outside hcp; for root, `pids.max` of the call's pids cgroup.
    pub processes: u64,
    /// Bytes of the call's tmpfs (`/tmp` and `/dev/shm` of its view together).
    pub tmp_bytes: u64,
    /// Bytes of memory of all the call's processes together (a memory cgroup, where one
    /// can be made).
    pub memory_bytes: u64,
}

/// Per-exec overrides of [`ResourceLimits`]: `None` keeps the configured value, a larger
/// value than the configured one is ignored (overrides only tighten).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitOverrides {
    /// Seconds of CPU time.
    pub cpu_seconds: Option<u64>,
    /// Bytes of address space.
    pub address_space_bytes: Option<u64>,
    /// Open file descriptors.
    pub open_files: Option<u64>,
    /// Bytes of the largest file.
    pub file_size_bytes: Option<u64>,
    /// Processes of the user.
    pub processes: Option<u64>,
    /// Bytes of the call's tmpfs.
    pub tmp_bytes: Option<u64>,
    /// Bytes of memory of the call.
    pub memory_bytes: Option<u64>,
}

impl ResourceLimits {
    /// Each limit the smaller of the configured value and the override: an override can
    /// tighten a limit, never loosen it.
    pub fn tightened(self, o: &LimitOverrides) -> Self {
        let t = |v: u64, o: Option<u64>| o.map_or(v, |o| o.min(v));
        Self {
            cpu_seconds: t(self.cpu_seconds, o.cpu_seconds),
            address_space_bytes: t(self.address_space_bytes, o.address_space_bytes),
            open_files: t(self.open_files, o.open_files),
            file_size_bytes: t(self.file_size_bytes, o.file_size_bytes),
            processes: t(self.processes, o.processes),
            tmp_bytes: t(self.tmp_bytes, o.tmp_bytes),
            memory_bytes: t(self.memory_bytes, o.memory_bytes),
        }
    }

    /// The limits as [`Rlimit`]s, with `RLIMIT_CORE`, `RLIMIT_RTPRIO` and `RLIMIT_NICE` 0.
    pub fn rlimits(&self) -> [Rlimit; 8] {
        [
            Rlimit::CpuSeconds(self.cpu_seconds),
            Rlimit::AddressSpaceBytes(self.address_space_bytes),
            Rlimit::OpenFiles(self.open_files),
            Rlimit::FileSizeBytes(self.file_size_bytes),
            Rlimit::Processes(self.processes),
            Rlimit::CoreBytes(0),
            Rlimit::RealtimePriority(0),
            Rlimit::Nice(0),
        ]
    }

    /// The limits the child will really get: each lowered to the hard limit of the
    /// calling process (which an unprivileged child could not exceed anyway).
    pub fn effective(&self) -> Self {
        let cap = |r: Resource, v: u64| match getrlimit(r) {
            Ok((_, hard)) => v.min(hard),
            Err(_) => v,
        };
        Self {
            cpu_seconds: cap(Resource::RLIMIT_CPU, self.cpu_seconds),
            address_space_bytes: cap(Resource::RLIMIT_AS, self.address_space_bytes),
            open_files: cap(Resource::RLIMIT_NOFILE, self.open_files),
            file_size_bytes: cap(Resource::RLIMIT_FSIZE, self.file_size_bytes),
            processes: cap(Resource::RLIMIT_NPROC, self.processes),
            tmp_bytes: self.tmp_bytes,
            memory_bytes: self.memory_bytes,
        }
    }
}

/// Whether the calling process runs as root (effective uid 0): the kernel then does not
/// apply [`ResourceLimits::processes`] (`RLIMIT_NPROC`) to its children.
pub fn running_as_root() -> bool {
    // SAFETY: `geteuid` takes no argument and cannot fail.
    unsafe { libc::geteuid() == 0 }
}
