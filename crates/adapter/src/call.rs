//! The confinement of one call, every land (RUNTIME §4, §5.1–§5.4): the one entry point the
//! pipeline calls, [`Confinement::for_call`].
//!
//! Every call, every land, every child (a verb's, a connect verb's, a trigger's) gets:
//!
//! - its view ([`View`], the view module): mount, PID and IPC namespaces of its own, a root
//!   of its own holding only what the call was given; as an ordinary user inside a user
//!   namespace mapping only the caller's own uid and gid;
//! - its network ([`Network`]): `deny` (a seccomp filter), `host`, or a network namespace
//!   of its own for `{"allow": …}`;
//! - no privileges: every capability set empty, `no_new_privs`, `RLIMIT_RTPRIO` and
//!   `RLIMIT_NICE` 0;
//! - its processes kept in: a PID namespace (nothing outlives the call, also when hcp is
//!   killed), a fork bomb bounded by `limits.processes` (a pids cgroup as root,
//!   `RLIMIT_NPROC` otherwise);
//! - one memory bound for all its processes where hcp can make a memory cgroup, else
//!   `limits.address_space_bytes` per process;
//! - for a non-owner call, the nested-call marker ([`crate::inside_non_owner_call`]).
//!
//! **Where a mechanism is missing** (RUNTIME §5.4): a non-owner call whose view, network
//! mode or privilege drop cannot be had is refused (`sandbox_unavailable`) whatever
//! `sandbox.require` says. `sandbox.require` governs the owner's calls (without it an
//! owner's call runs without a view and says why) and the `processes` and `memory` parts.

use crate::AdapterError;
use crate::cgroup::{Bases, Bounds, CallCgroup};
use crate::confine::{Confinement, Filters, IdMaps, Namespaces, Network};
use crate::limits::ResourceLimits;
use crate::procs::ProcessMechanism;
use crate::report::{NetworkField, SandboxField, SandboxMode, SandboxReport, Status};
use crate::ruleset::{LandlockSupport, SCOPE_LANDLOCK_ABI};
use crate::seccomp::{self, Filter, Net};
use crate::view::{EtcIndex, StoreView, View, ViewSpec};
use crate::workdir::{SandboxPaths, check_sandbox_dir};
use hcp_model::Land;
use hcp_model::principal::Kind;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What one call is given, whatever its land (RUNTIME §5.1). Every list may be empty.
#[derive(Debug, Clone, Copy)]
pub struct CallSandbox<'a> {
    /// The verb's land.
    pub land: Land,
    /// Whose call: the owner's (no session: no nested-call marker, and a missing
    /// mechanism is refused only under `sandbox.require`) or a session's.
    pub caller: Kind,
    /// A `write` verb: a `local` workdir read-write, with its protected names.
    pub writes: bool,
    /// The workdir of a `local` call (at its own path in the view).
    pub workdir: &'a Path,
    /// `personal` and `brain`: the tenant home (RUNTIME §5.2) on the host, made already.
    pub tenant_home: Option<&'a Path>,
    /// The pinned bin.
    pub bin: &'a Path,
    /// The files of a script bin's pinned interpreter
    /// ([`VerifiedBin::interpreters`](crate::VerifiedBin::interpreters)); empty otherwise.
    pub interpreters: &'a [PathBuf],
    /// `$HCP_HOME`: never in a view, but for the bootstrap pack.
    pub hcp_home: &'a Path,
    /// `Some(names)` when the pinned bin is the running `hcp` (the bootstrap pack): the
    /// store is in its view, read-only, but for `names` (relative to it).
    pub bootstrap: Option<&'a [&'a str]>,
    /// The machine's homes (the password database's and `$HOME`), resolved, for the rule
    /// of the bin's directory and a `local` workdir's.
    pub homes: &'a [PathBuf],
    /// Read-only paths of the configuration (`packs.ID.read`, `sandbox.read`).
    pub read: &'a [PathBuf],
    /// Read-write paths of the configuration (`packs.ID.write`).
    pub write: &'a [PathBuf],
    /// The protected names of a writable workdir.
    pub protect_in_workdir: &'a [String],
    /// What of `/etc` the view covers and binds (the store keeps it).
    pub etc: &'a EtcIndex,
}

/// The configuration of one call's confinement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallPolicy {
    /// `sandbox.require`: refuse (`sandbox_unavailable`) an owner's call that cannot get
    /// its view, and any call whose `processes` or `memory` part cannot be enforced.
    pub require: bool,
    /// The call's network (`packs.ID.network`, else `sandbox.network`, default `deny`).
    pub network: Network,
    /// The resource limits, already tightened for this call.
    pub limits: ResourceLimits,
    /// `limits.cgroup`: a delegated cgroup an ordinary user may make the memory cgroup in.
    pub cgroup: Option<PathBuf>,
}

/// What this kernel and this process offer for confinement (for [`Confinement::for_call`]
/// and `hcp doctor`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelSupport {
    /// Landlock (its scopes, ABI ≥ 6).
    pub landlock: LandlockSupport,
    /// How a call gets its namespaces, or why it cannot.
    pub processes: ProcessMechanism,
    /// Seccomp filters.
    pub seccomp: bool,
    /// The mount API a view is built with (`open_tree`, `move_mount`, `mount_setattr`:
    /// Linux 5.12), or why it is missing.
    pub mount_api: Result<(), String>,
    /// As root: where call cgroups with `pids.max` are made, or why none can be. `Ok` of
    /// nothing for an ordinary user, whom `RLIMIT_NPROC` binds.
    pub pids_cgroup: Result<Option<PathBuf>, String>,
    /// As root: where call memory cgroups are made, or why none can be. `Ok` of nothing for
    /// an ordinary user (only a delegated `limits.cgroup` gives one a memory cgroup).
    pub memory_cgroup: Result<Option<PathBuf>, String>,
}

impl KernelSupport {
    /// Asks the kernel (a few system calls; as root also `/proc/self/cgroup`).
    pub fn probe() -> Self {
        let root = crate::limits::running_as_root();
        Self {
            landlock: LandlockSupport::probe(),
            processes: crate::procs::process_mechanism(),
            seccomp: seccomp::seccomp_available(),
            mount_api: mount_api(),
            pids_cgroup: if root {
                crate::cgroup::pids_cgroup_base().map(Some)
            } else {
                Ok(None)
            },
            memory_cgroup: if root {
                crate::cgroup::memory_cgroup_base().map(Some)
            } else {
                Ok(None)
            },
        }
    }

    /// Whether a fork bomb is bounded: an ordinary user (`RLIMIT_NPROC`), or root with
    /// a pids cgroup; otherwise why not.
    pub fn fork_bombs(&self) -> Status {
        match &self.pids_cgroup {
            Ok(_) => Status::Enforced,
            Err(why) => Status::NotEnforced(format!(
                "fork bombs are not bounded: the kernel does not apply `processes` to root, and {why}"
            )),
        }
    }

    /// Why a call cannot have its view here, or `None` when it can.
    pub fn view_missing(&self) -> Option<String> {
        if let ProcessMechanism::Subreaper(why) = &self.processes {
            return Some(format!("no namespaces for this user: {why}"));
        }
        self.mount_api.as_ref().err().cloned()
    }
}

/// Whether the kernel has `mount_setattr` (and with it `open_tree` and `move_mount`): a
/// call with an invalid descriptor answers `EBADF`, not `ENOSYS`.
fn mount_api() -> Result<(), String> {
    // SAFETY: an invalid descriptor and null pointers: the kernel refuses before reading.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            -1,
            std::ptr::null::<libc::c_char>(),
            0,
            std::ptr::null::<u8>(),
            0usize,
        )
    };
    if r != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
        return Err("the kernel has no `mount_setattr` (Linux 5.12 or later builds a view)".into());
    }
    Ok(())
}

fn unavailable(reason: String) -> AdapterError {
    AdapterError::SandboxUnavailable { reason }
}

impl View {
    /// The view of `call` ([`View::build`] of what it is given), with `stores` resolved and
    /// `tmp_bytes` the bound of its tmpfs: what [`Confinement::for_call`] mounts, and what
    /// `hcp show --view` lists without running anything.
    ///
    /// # Errors
    /// As [`View::build`].
    pub fn of_call(
        call: &CallSandbox<'_>,
        stores: &[PathBuf],
        tmp_bytes: u64,
    ) -> Result<Self, AdapterError> {
        View::build(&view_spec(call, call.workdir, stores, tmp_bytes))
    }
}

/// The view's inputs of `call`, its workdir `workdir`.
fn view_spec<'a>(
    call: &CallSandbox<'a>,
    workdir: &'a Path,
    stores: &'a [PathBuf],
    tmp_bytes: u64,
) -> ViewSpec<'a> {
    ViewSpec {
        land: call.land,
        workdir,
        workdir_writable: call.writes,
        tenant_home: call.tenant_home,
        bin: call.bin,
        interpreters: call.interpreters,
        homes: call.homes,
        stores,
        read: call.read,
        write: call.write,
        protect_in_workdir: call.protect_in_workdir,
        store: call.bootstrap.map(|hidden| StoreView {
            root: call.hcp_home,
            hidden,
        }),
        etc: call.etc,
        tmp_bytes,
    }
}

impl Confinement {
    /// The confinement of one call's child in any land (RUNTIME §5.1–§5.4), and its report.
    ///
    /// # Errors
    /// - `sandbox_unavailable` (exit 77): a non-owner call where the kernel cannot give a
    ///   view, its network mode or seccomp; an owner's call likewise under `require`; a
    ///   call whose `processes` or `memory` part cannot be enforced under `require`; a
    ///   `local` workdir that may not be one (see [`SandboxPaths`]); a path of the
    ///   configuration no view may hold;
    /// - `sandbox_failed` (exit 126): a path of the view cannot be resolved, a call cgroup
    ///   cannot be made.
    pub fn for_call(
        call: &CallSandbox<'_>,
        policy: &CallPolicy,
    ) -> Result<(Self, SandboxReport), AdapterError> {
        Self::for_call_with(support(), call, policy)
    }

    /// [`for_call`](Self::for_call) with what the kernel offers given: for tests of the
    /// weaker paths (a `support` claiming more than the kernel has fails in the child).
    ///
    /// # Errors
    /// As [`for_call`](Self::for_call).
    pub fn for_call_with(
        support: &KernelSupport,
        call: &CallSandbox<'_>,
        policy: &CallPolicy,
    ) -> Result<(Self, SandboxReport), AdapterError> {
        let local = call.land == Land::Local;
        let limits = policy.limits.effective();
        let root = crate::limits::running_as_root();
        let stores = [call
            .hcp_home
            .canonicalize()
            .unwrap_or_else(|_| call.hcp_home.to_owned())];
        // A `local` workdir is resolved once, here, and the view binds that very path.
        let workdir = if local {
            check_sandbox_dir(&SandboxPaths {
                workdir: call.workdir,
                protected: &stores,
                not_above: call.homes,
            })?
        } else {
            call.workdir.to_owned()
        };
        let mut c = Confinement::with_effective_limits(&limits);
        // In a user namespace of the call's own (an ordinary user) the bounding set gives
        // nothing back at `execve`: no uid 0 is mapped there, and `no_new_privs` is set.
        c.drop_caps = Some(root.then(crate::privileges::last_cap));

        // The view, or why there is none.
        let missing = support.view_missing();
        let view = match &missing {
            None => Some(Arc::new(View::build_resolved(&view_spec(
                call,
                &workdir,
                &stores,
                limits.tmp_bytes,
            ))?)),
            Some(why) if call.caller == Kind::Session => {
                return Err(unavailable(format!(
                    "{why}; a call of a session runs only in its view"
                )));
            }
            Some(why) if policy.require => {
                return Err(unavailable(format!(
                    "{why}, and the configuration requires the sandbox"
                )));
            }
            Some(_) => None,
        };
        let filesystem = match &missing {
            None => Status::Enforced,
            Some(why) => Status::NotEnforced(format!("no view: {why}")),
        };
        let socket_listed = view.as_ref().is_some_and(|v| v.lists_socket());
        if view.is_some() {
            c.ns = Namespaces {
                user: !root,
                pid: true,
                mount: true,
                ipc: true,
                net: policy.network == Network::Allow,
            };
            if !root {
                c.id_maps = Some(Arc::new(IdMaps::own()));
            }
            c.egress = policy.network == Network::Allow;
        }
        c.view = view;

        // Network: seccomp, and Landlock's scopes outside a namespace of the call's own.
        let refuse_network = |why: String| -> Result<Status, AdapterError> {
            if call.caller == Kind::Session || policy.require {
                return Err(unavailable(why));
            }
            Ok(Status::NotEnforced(why))
        };
        let mut network = Status::Enforced;
        if support.seccomp {
            let net = match policy.network {
                Network::Deny => Net::Deny,
                Network::Host => Net::Host,
                Network::Allow if c.egress => Net::OwnNamespace,
                Network::Allow => Net::Host,
            };
            let filter = Filter {
                net,
                unix: socket_listed,
                marker: call.caller == Kind::Session,
                notify: net == Net::Deny,
            };
            c.filters = Some(Filters {
                main: seccomp::program(filter),
                listener: filter.notify,
                fallback: seccomp::program(Filter {
                    notify: false,
                    ..filter
                }),
            });
            if policy.network == Network::Allow && !c.egress {
                network = refuse_network(
                    "no network namespace of the call's own, so `allow` cannot be kept to its destinations".into(),
                )?;
            }
        } else {
            network = refuse_network(format!(
                "the kernel has no seccomp filters, so the network `{}` cannot be enforced",
                policy.network.as_str()
            ))?;
        }
        if !c.egress {
            c.landlock_scope = crate::ruleset::scope_ruleset();
            if c.landlock_scope.is_none() && socket_listed && network.is_enforced() {
                network = Status::NotEnforced(format!(
                    "abstract unix sockets of the host are reachable through the listed socket: landlock abi {} < {SCOPE_LANDLOCK_ABI}",
                    support.landlock.abi()
                ));
            }
        }

        // Processes and memory.
        let mut processes = match &support.processes {
            ProcessMechanism::Subreaper(why) => Status::NotEnforced(format!(
                "descendants are ended at the end of the call but would outlive a killed hcp: {why}"
            )),
            _ if c.view.is_none() => Status::NotEnforced(
                "descendants are ended at the end of the call but would outlive a killed hcp: no pid namespace without the view".into(),
            ),
            _ => Status::Enforced,
        };
        let mut bases = Bases::default();
        if root {
            match &support.pids_cgroup {
                Ok(base) => bases.pids = base.clone(),
                Err(_) => {
                    if let Status::NotEnforced(r) = support.fork_bombs() {
                        processes = Status::NotEnforced(match processes {
                            Status::NotEnforced(p) => format!("{p}; {r}"),
                            Status::Enforced => r,
                        });
                    }
                }
            }
        }
        let memory_base = if root {
            support
                .memory_cgroup
                .clone()
                .and_then(|b| b.ok_or_else(|| "no memory cgroup for this process".to_owned()))
        } else {
            match &policy.cgroup {
                Some(dir) => crate::cgroup::delegated_memory_base(dir),
                None => Err(
                    "an ordinary user makes a memory cgroup only beneath a delegated one (`limits.cgroup`)"
                        .into(),
                ),
            }
        };
        let memory = match memory_base {
            Ok(base) => {
                bases.memory = Some(base);
                Status::Enforced
            }
            Err(why) => Status::NotEnforced(format!("per_process: {why}")),
        };
        if policy.require {
            for (part, st) in [("processes", &processes), ("memory", &memory)] {
                if let Status::NotEnforced(why) = st {
                    return Err(unavailable(format!(
                        "the configuration requires the sandbox, and its `{part}` part is not enforced here: {why}"
                    )));
                }
            }
        }
        if bases.pids.is_some() || bases.memory.is_some() {
            let leftovers = !c.ns.pid;
            if leftovers && let Some(b) = &bases.pids {
                crate::cgroup::sweep(b);
            }
            let cg = CallCgroup::claim(
                &bases,
                Bounds {
                    processes: bases.pids.as_ref().map(|_| limits.processes),
                    memory_bytes: bases.memory.as_ref().map(|_| limits.memory_bytes),
                },
                leftovers,
            )
            .map_err(|e| AdapterError::SandboxFailed {
                path: bases
                    .pids
                    .clone()
                    .or(bases.memory.clone())
                    .unwrap_or_default(),
                reason: "cannot make the call's cgroup".into(),
                source: Some(e),
            })?;
            c.cgroup = Some(Arc::new(cg));
        }

        let report = SandboxReport {
            mode: if c.view.is_some() {
                SandboxMode::View
            } else {
                SandboxMode::Unconfined
            },
            field: SandboxField {
                filesystem,
                processes,
                privileges: Status::Enforced,
                memory,
                network: NetworkField {
                    mode: policy.network.as_str(),
                    enforced: network,
                    refused: Vec::new(),
                },
            },
            limits,
            reason: missing,
        };
        Ok((c, report))
    }
}

/// What the kernel offers, asked once per process (every call of `hcp mcp` shares it).
fn support() -> &'static KernelSupport {
    static SUPPORT: std::sync::OnceLock<KernelSupport> = std::sync::OnceLock::new();
    SUPPORT.get_or_init(KernelSupport::probe)
}
