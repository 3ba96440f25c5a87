//! Kernel confinement of a child (RUNTIME §5 "The child", "Confinement of every land").
//!
//! A [`Confinement`] is prepared in the parent: everything that allocates or may fail
//! in an interesting way happens before the child is made. In the child, between
//! `clone` and `execve`, it only makes async-signal-safe system calls and never
//! allocates, because other threads of the parent may hold locks (the allocator's) that
//! the child would wait on forever.
//!
//! What it can hold, in the order the child applies it:
//!
//! 1. namespaces, given to `clone` itself ([`Confinement::clone_flags`]): a PID
//!    namespace (the procs module), a user namespace around it for an ordinary user, and
//!    a mount namespace when paths must be hidden (the hide module);
//! 2. a call cgroup with `pids.max` (root only, the cgroup module), entered first;
//! 3. in a user namespace: the child's own uid and gid maps (`U U 1`, `setgroups deny`);
//! 4. the mounts that cover the hidden paths; then the spawn enters the working
//!    directory, so that a working directory is never reached through a covered path;
//! 5. resource limits ([`ResourceLimits`]) and the parent-death signal (`SIGKILL`);
//! 6. as root: the capabilities that reach beyond a call leave the bounding set
//!    ([`DROPPED_CAPABILITIES`]);
//! 7. `PR_SET_NO_NEW_PRIVS`, the Landlock domain (a ruleset built in the parent), then the
//!    seccomp filters (the seccomp module).
//!
//! [`Confinement::for_call`] (the call module) prepares all of it for every land;
//! [`Confinement::for_local_land`] and [`Confinement::with_limits`] are the older,
//! narrower entry points (Landlock for `local` land only, limits elsewhere).
//!
//! The child is made by `clone(CLONE_VM | CLONE_VFORK)` (the spawn module), which shares
//! the parent's memory until `execve`: the same constraints as after `fork`, without
//! copying the parent.

use crate::AdapterError;
use crate::cgroup::CallCgroup;
use crate::hide::MountPlan;
pub use crate::limits::{LimitOverrides, ResourceLimits, Rlimit, running_as_root};
use crate::report::{SandboxField, SandboxMode, SandboxReport, Status};
use crate::ruleset::{Grant, Rule, build_ruleset};
pub use crate::ruleset::{
    LandlockSupport, NETWORK_LANDLOCK_ABI, SCOPE_LANDLOCK_ABI, SYSTEM_DEVICES_RW,
    SYSTEM_READ_NO_EXEC, SYSTEM_READ_ONLY, TESTED_LANDLOCK_ABI,
};
use crate::workdir::{SandboxPaths, check_sandbox_dir};
use nix::sys::resource::{Resource, setrlimit};
use serde::{Deserialize, Serialize};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;

/// Whether a child may use the network.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Network {
    /// No network rule.
    #[default]
    Allow,
    /// No network at all ([`Confinement::for_call`]): no socket but a `socketpair`, no
    /// io_uring, and TCP rules too where Landlock has them. Through the older
    /// [`Confinement::for_local_land`]: TCP `bind` and `connect` only (Landlock ABI ≥ 4).
    Deny,
}

impl Network {
    /// The default of a land (RUNTIME §5): `deny` for `local`, `allow` for `personal`
    /// and `brain`.
    pub fn default_for(land: hcp_model::Land) -> Self {
        match land {
            hcp_model::Land::Local => Self::Deny,
            _ => Self::Allow,
        }
    }
}

/// The sandbox configuration of `local` land, from the runtime configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SandboxPolicy {
    /// Refuse `local` verbs (`sandbox_unavailable`) when Landlock is not available.
    pub require: bool,
    /// Network access of `local` children.
    pub network: Network,
    /// Resource limits, already tightened for this exec.
    pub limits: ResourceLimits,
}

/// Capabilities a root child loses (bounding set), so that its `execve` cannot give them
/// back: loading modules, raw I/O (`/dev/mem`, `/proc/kcore`), administration (mounts,
/// namespaces of others), `ptrace`, BPF and perf, clocks, boot, audit, MAC, immutable
/// files, handles (`open_by_handle_at`), device nodes, resource overrides, keyrings and
/// setting file capabilities. Root keeps what ordinary root work on files needs:
/// ownership, permission overrides, `kill`, `setuid`/`setgid`, low ports, `chroot`.
pub const DROPPED_CAPABILITIES: [u32; 25] = [
    2,  // CAP_DAC_READ_SEARCH
    8,  // CAP_SETPCAP
    9,  // CAP_LINUX_IMMUTABLE
    12, // CAP_NET_ADMIN
    15, // CAP_IPC_OWNER
    16, // CAP_SYS_MODULE
    17, // CAP_SYS_RAWIO
    19, // CAP_SYS_PTRACE
    20, // CAP_SYS_PACCT
    21, // CAP_SYS_ADMIN
    22, // CAP_SYS_BOOT
    24, // CAP_SYS_RESOURCE
    25, // CAP_SYS_TIME
    26, // CAP_SYS_TTY_CONFIG
    27, // CAP_MKNOD
    30, // CAP_AUDIT_CONTROL
    31, // CAP_SETFCAP
    32, // CAP_MAC_OVERRIDE
    33, // CAP_MAC_ADMIN
    34, // CAP_SYSLOG
    35, // CAP_WAKE_ALARM
    36, // CAP_BLOCK_SUSPEND
    38, // CAP_PERFMON
    39, // CAP_BPF
    40, // CAP_CHECKPOINT_RESTORE
];

/// Namespaces the child is cloned into.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Namespaces {
    pub user: bool,
    pub pid: bool,
    pub mount: bool,
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

/// What to apply to a child between `clone` and `execve`, prepared in the parent.
#[derive(Debug, Clone, Default)]
pub struct Confinement {
    /// Resource, soft and hard value.
    pub(crate) limits: Vec<(Resource, u64, u64)>,
    pub(crate) die_with_parent: Option<libc::pid_t>,
    /// A created Landlock ruleset (`O_CLOEXEC`, so it does not reach the program).
    pub(crate) ruleset: Option<Arc<OwnedFd>>,
    /// Seccomp programs, installed in this order.
    pub(crate) filters: Vec<&'static [crate::seccomp::SockFilter]>,
    pub(crate) ns: Namespaces,
    pub(crate) id_maps: Option<Arc<IdMaps>>,
    pub(crate) mounts: Option<Arc<MountPlan>>,
    pub(crate) cgroup: Option<Arc<CallCgroup>>,
    /// What the mounts bind over hidden paths; kept until the call ends.
    pub(crate) covers: Option<Arc<crate::hide::Covers>>,
    /// Drop [`DROPPED_CAPABILITIES`] from the bounding set (root).
    pub(crate) drop_caps: bool,
}

fn same<T>(a: &Option<Arc<T>>, b: &Option<Arc<T>>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        _ => false,
    }
}

impl PartialEq for Confinement {
    fn eq(&self, other: &Self) -> bool {
        self.limits == other.limits
            && self.die_with_parent == other.die_with_parent
            && same(&self.ruleset, &other.ruleset)
            && self.filters.len() == other.filters.len()
            && self.ns == other.ns
            && same(&self.id_maps, &other.id_maps)
            && same(&self.mounts, &other.mounts)
            && same(&self.cgroup, &other.cgroup)
            && self.drop_caps == other.drop_caps
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
    /// under ([`ResourceLimits::effective`]), no core dumps, and
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
            && self.ruleset.is_none()
            && self.filters.is_empty()
            && self.ns == Namespaces::default()
            && self.cgroup.is_none()
            && !self.drop_caps
    }

    /// Whether a Landlock ruleset will be applied.
    pub fn is_landlocked(&self) -> bool {
        self.ruleset.is_some()
    }

    /// Whether the child starts in a PID namespace of its own (it is that namespace's
    /// init; every descendant ends with it).
    pub fn has_pid_namespace(&self) -> bool {
        self.ns.pid
    }

    /// The namespace flags for `clone`.
    pub(crate) fn clone_flags(&self) -> libc::c_int {
        let mut f = 0;
        if self.ns.user {
            f |= libc::CLONE_NEWUSER;
        }
        if self.ns.pid {
            f |= libc::CLONE_NEWPID;
        }
        if self.ns.mount {
            f |= libc::CLONE_NEWNS;
        }
        f
    }

    /// The confinement of a `local` land child through the older entry point:
    /// [`with_limits`](Self::with_limits) plus a Landlock ruleset at the best ABI the
    /// kernel offers (up to [`TESTED_LANDLOCK_ABI`]), and the report of what will be
    /// enforced. [`for_call`](Self::for_call) supersedes it.
    ///
    /// # Errors
    /// - `sandbox_unavailable` (exit 77): no Landlock and `policy.require`; network
    ///   `deny` and an ABI below [`NETWORK_LANDLOCK_ABI`]; a working directory that is
    ///   `/`, holds a `paths.protected` or `paths.not_above` path or the parent of
    ///   `paths.tmpdir` (the system temporary directory), or lies inside a
    ///   `paths.protected` one;
    /// - `sandbox_failed` (exit 126): the working directory, temporary directory or bin
    ///   cannot be opened, or the kernel refused the ruleset.
    pub fn for_local_land(
        paths: &SandboxPaths<'_>,
        policy: &SandboxPolicy,
    ) -> Result<(Self, SandboxReport), AdapterError> {
        Self::for_local_land_with(LandlockSupport::probe(), paths, policy)
    }

    /// [`for_local_land`](Self::for_local_land) as if the kernel offered `support`, capped
    /// at what it really offers (so this can only weaken the sandbox, never claim more):
    /// for tests of the unconfined and older-ABI paths, and for `hcp doctor`.
    ///
    /// # Errors
    /// As [`for_local_land`](Self::for_local_land).
    pub fn for_local_land_with(
        support: LandlockSupport,
        paths: &SandboxPaths<'_>,
        policy: &SandboxPolicy,
    ) -> Result<(Self, SandboxReport), AdapterError> {
        check_sandbox_dir(paths)?;
        let real = LandlockSupport::probe();
        let abi = support.abi().min(real.abi()).min(TESTED_LANDLOCK_ABI);
        let limits = policy.limits.effective();
        let mut confinement = Self::with_limits(&policy.limits);
        let processes =
            Status::NotEnforced("the process group alone is ended at the end of the call".into());
        if abi == 0 {
            let reason = support
                .missing_reason()
                .or(real.missing_reason())
                .unwrap_or("landlock is not available");
            if policy.require {
                return Err(AdapterError::SandboxUnavailable {
                    reason: format!("{reason} and the configuration requires the sandbox"),
                });
            }
            if policy.network == Network::Deny {
                return Err(AdapterError::SandboxUnavailable {
                    reason: format!(
                        "{reason}, so the configured network `deny` cannot be enforced"
                    ),
                });
            }
            let report = SandboxReport {
                mode: SandboxMode::Unconfined,
                abi: 0,
                field: SandboxField {
                    filesystem: Status::NotEnforced(reason.to_owned()),
                    network: Status::Allowed,
                    processes,
                },
                scoped: false,
                limits,
                reason: Some(reason.to_owned()),
            };
            return Ok((confinement, report));
        }
        let deny_net = policy.network == Network::Deny;
        if deny_net && abi < NETWORK_LANDLOCK_ABI {
            return Err(AdapterError::SandboxUnavailable {
                reason: format!(
                    "the configured network `deny` needs landlock abi {NETWORK_LANDLOCK_ABI}, the kernel offers {abi}"
                ),
            });
        }
        let rules = local_rules(paths.workdir, paths.tmpdir, paths.bin, paths.extra_ro, &[]);
        let fd = build_ruleset(abi, &rules, deny_net)?;
        confinement.ruleset = Some(Arc::new(fd));
        let report = SandboxReport {
            mode: SandboxMode::Landlock,
            abi,
            field: SandboxField {
                filesystem: Status::Enforced,
                network: if deny_net {
                    Status::NotEnforced("only tcp is denied".into())
                } else {
                    Status::Allowed
                },
                processes,
            },
            scoped: abi >= SCOPE_LANDLOCK_ABI,
            limits,
            reason: None,
        };
        Ok((confinement, report))
    }

    /// Steps 2–4 of the module docs, in the child before it enters its working
    /// directory: the cgroup, the id maps, the mounts. Async-signal-safe, no allocation.
    ///
    /// # Errors
    /// The OS error of the failed call; the spawn then fails (`spawn_failed`).
    pub(crate) fn isolate_in_child(&self) -> io::Result<()> {
        if let Some(cg) = &self.cgroup
            && write_file(&cg.procs, b"0") != 0
        {
            return Err(io::Error::last_os_error());
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
        if let Some(m) = &self.mounts {
            let e = m.apply_in_child();
            if e != 0 {
                return Err(io::Error::from_raw_os_error(e));
            }
        }
        Ok(())
    }

    /// Steps 5–7 of the module docs, in the child after it entered its working
    /// directory and before `execve`, in the parent's memory: async-signal-safe calls
    /// only, no allocation (the error is built from a raw OS error code).
    ///
    /// # Errors
    /// The OS error of the failed call; the spawn then fails (`spawn_failed`).
    pub(crate) fn apply_in_child(&self) -> io::Result<()> {
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
        if self.drop_caps {
            for &cap in &DROPPED_CAPABILITIES {
                // SAFETY: integer arguments only. EINVAL: a capability this kernel
                // does not know, so nothing to drop.
                let r =
                    unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) };
                if r != 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL) {
                    return Err(io::Error::last_os_error());
                }
            }
        }
        if self.ruleset.is_some() || !self.filters.is_empty() {
            // SAFETY: `prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)` takes integers only.
            if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        if let Some(fd) = &self.ruleset {
            // SAFETY: `landlock_restrict_self(fd, 0)` takes a descriptor we own (kept
            // open by the `Arc` the hook holds) and flags; it touches no memory of ours.
            let r =
                unsafe { libc::syscall(libc::SYS_landlock_restrict_self, fd.as_raw_fd(), 0u32) };
            if r != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        for prog in &self.filters {
            let e = crate::seccomp::install(prog);
            if e != 0 {
                return Err(os(e));
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

fn write_file(path: &CString, data: &[u8]) -> i32 {
    write_cfile(path.as_c_str(), data)
}

/// The Landlock rules of `local` land: read-write beneath the sandbox and the private
/// temporary directory (and `write` grants); read and execute on [`SYSTEM_READ_ONLY`],
/// the bin and `extra_ro`; the random devices read-only; the null devices read-write.
pub(crate) fn local_rules<'a>(
    workdir: &'a Path,
    tmpdir: &'a Path,
    bin: &'a Path,
    extra_ro: &'a [std::path::PathBuf],
    write: &'a [std::path::PathBuf],
) -> Vec<Rule<'a>> {
    let mut rules = vec![
        Rule {
            path: workdir,
            grant: Grant::All,
            required: Some("cannot open the sandbox working directory"),
        },
        Rule {
            path: tmpdir,
            grant: Grant::All,
            required: Some("cannot open the private temporary directory"),
        },
        Rule {
            path: bin,
            grant: Grant::Read,
            required: Some("cannot open the pinned bin"),
        },
    ];
    let opt = |path: &'a Path, grant| Rule {
        path,
        grant,
        required: None,
    };
    rules.extend(
        SYSTEM_READ_ONLY
            .iter()
            .map(|p| opt(Path::new(p), Grant::Read)),
    );
    rules.extend(extra_ro.iter().map(|p| opt(p, Grant::Read)));
    rules.extend(write.iter().map(|p| opt(p, Grant::All)));
    rules.extend(
        SYSTEM_READ_NO_EXEC
            .iter()
            .map(|p| opt(Path::new(p), Grant::ReadNoExec)),
    );
    rules.extend(
        SYSTEM_DEVICES_RW
            .iter()
            .map(|p| opt(Path::new(p), Grant::Device)),
    );
    rules
}
