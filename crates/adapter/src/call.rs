//! The confinement of one call, every land (RUNTIME §4, §5 "Confinement of every land"):
//! the one entry point the pipeline calls, [`Confinement::for_call`].
//!
//! | | `local` | `personal`, `brain` |
//! |---|---|---|
//! | read | system paths, the bin, the sandbox, `read` grants | everything the user can, but the hidden paths |
//! | write | the sandbox, the private `TMPDIR`, `write` grants | the private `TMPDIR`, `write` grants |
//! | hidden (neither readable nor writable) | the same, where the rules would reach them | `$HCP_HOME` (the bootstrap pack: parts of it), other principals' sandboxes, the protected secrets, `sandbox.protect` |
//! | network default | `deny` | `allow` |
//!
//! Every call: signals and abstract Unix sockets scoped to it (Landlock ABI ≥ 6), the
//! seccomp base filter, a PID namespace where the kernel allows one, the resource
//! limits, the parent-death signal; as root, a `pids` cgroup and fewer capabilities.
//! Every non-owner call: the nested-call marker ([`crate::inside_non_owner_call`]).

use crate::AdapterError;
use crate::cgroup::CallCgroup;
use crate::confine::{Confinement, IdMaps, Namespaces, Network, local_rules};
use crate::hide::{self, Covers, HOME_SECRETS, Hidden, MountPlan};
use crate::limits::ResourceLimits;
use crate::procs::ProcessMechanism;
use crate::report::{SandboxField, SandboxMode, SandboxReport, Status};
use crate::ruleset::{
    Grant, LandlockSupport, NETWORK_LANDLOCK_ABI, Rule, SCOPE_LANDLOCK_ABI, SYSTEM_DEVICES_RW,
    SYSTEM_READ_ONLY, TESTED_LANDLOCK_ABI, build_ruleset,
};
use crate::seccomp::{self, Filter};
use crate::workdir::{SandboxPaths, check_sandbox_dir};
use hcp_model::Land;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The paths of one call, whatever its land (RUNTIME §5). Every list may be empty.
#[derive(Debug, Clone, Copy)]
pub struct CallSandbox<'a> {
    /// The verb's land.
    pub land: Land,
    /// The caller is the owner (no session): no nested-call marker.
    pub owner: bool,
    /// The child's working directory: the sandbox of a `local` call (read-write), the
    /// caller's directory otherwise (readable like the rest).
    pub workdir: &'a Path,
    /// The private temporary directory ([`PrivateTmp`](crate::PrivateTmp)), the child's
    /// `TMPDIR`: read-write in every land.
    pub tmpdir: &'a Path,
    /// The pinned bin.
    pub bin: &'a Path,
    /// `$HCP_HOME`: hidden, unless [`bootstrap`](Self::bootstrap).
    pub hcp_home: &'a Path,
    /// `Some(paths)` when the pinned bin is the running `hcp` (the bootstrap pack, the
    /// one exception): `$HCP_HOME` stays readable (never writable) but for `paths`
    /// (credentials in `state/bindings`, the audit's secret and keys), which are hidden.
    pub bootstrap: Option<&'a [PathBuf]>,
    /// The user's homes (`$HOME` as hcp sees it and the password database's): their
    /// [`HOME_SECRETS`] are hidden.
    pub homes: &'a [PathBuf],
    /// Homes a `local` sandbox may lie in but neither be nor hold (every home of
    /// `/etc/passwd`, `$HOME`).
    pub not_above: &'a [PathBuf],
    /// Other principals' sandboxes and session working directories: hidden.
    pub other_sandboxes: &'a [PathBuf],
    /// The operator's `sandbox.protect` paths: hidden.
    pub protect: &'a [PathBuf],
    /// The operator's `read` grants of the pack (`config.json` `packs.ID.read`):
    /// readable, also where they lie in a protected path.
    pub read: &'a [PathBuf],
    /// The operator's `write` grants of the pack (`packs.ID.write`): read-write.
    pub write: &'a [PathBuf],
    /// More paths a `local` child may read and execute (an interpreter).
    pub extra_ro: &'a [PathBuf],
}

/// The configuration of one call's confinement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallPolicy {
    /// `sandbox.require`: refuse (`sandbox_unavailable`) rather than run where the
    /// kernel cannot confine the filesystem.
    pub require: bool,
    /// The pack's `network` override, else `sandbox.network`; `None`: the land's
    /// default ([`Network::default_for`]).
    pub network: Option<Network>,
    /// The resource limits, already tightened for this call.
    pub limits: ResourceLimits,
}

/// What this kernel and this process offer for confinement (for [`Confinement::for_call`]
/// and `hcp doctor`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelSupport {
    /// Landlock.
    pub landlock: LandlockSupport,
    /// How descendants are kept from outliving a call.
    pub processes: ProcessMechanism,
    /// Seccomp filters.
    pub seccomp: bool,
    /// As root: where call cgroups with `pids.max` are made, or why none can be. `Ok`
    /// of nothing for an ordinary user, whom `RLIMIT_NPROC` binds.
    pub pids_cgroup: Result<Option<PathBuf>, String>,
}

impl KernelSupport {
    /// Asks the kernel (a few system calls; as root also `/proc/self/cgroup` and
    /// `/proc/self/mountinfo`).
    pub fn probe() -> Self {
        Self {
            landlock: LandlockSupport::probe(),
            processes: crate::procs::process_mechanism(),
            seccomp: seccomp::seccomp_available(),
            pids_cgroup: if crate::limits::running_as_root() {
                crate::cgroup::pids_cgroup_base().map(Some)
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
}

fn unavailable(reason: String) -> AdapterError {
    AdapterError::SandboxUnavailable { reason }
}

impl Confinement {
    /// The confinement of one call's child in any land (RUNTIME §5), and its report.
    ///
    /// # Errors
    /// - `sandbox_unavailable` (exit 77): a `local` working directory that may not be a
    ///   sandbox (see [`SandboxPaths`]); a working directory or `TMPDIR` inside a
    ///   hidden path; `require` where the kernel has no Landlock; `network: deny` where
    ///   it has no seccomp;
    /// - `sandbox_failed` (exit 126): a path of the rules cannot be opened, the kernel
    ///   refused the ruleset, a filter could not be built, the call cgroup could not be
    ///   made.
    pub fn for_call(
        call: &CallSandbox<'_>,
        policy: &CallPolicy,
    ) -> Result<(Self, SandboxReport), AdapterError> {
        Self::for_call_with(&KernelSupport::probe(), call, policy)
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
        let network = policy.network.unwrap_or(Network::default_for(call.land));
        let deny = network == Network::Deny;
        let root = crate::limits::running_as_root();
        let abi = support.landlock.abi().min(TESTED_LANDLOCK_ABI);
        let canon = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_owned());

        if local {
            let mut protected = vec![call.hcp_home.to_owned()];
            protected.extend(call.other_sandboxes.iter().cloned());
            check_sandbox_dir(&SandboxPaths {
                workdir: call.workdir,
                tmpdir: call.tmpdir,
                bin: call.bin,
                extra_ro: call.extra_ro,
                protected: &protected,
                not_above: call.not_above,
            })?;
        }

        // What no child may reach.
        let mut candidates: Vec<PathBuf> = Vec::new();
        for home in call.homes {
            candidates.extend(HOME_SECRETS.iter().map(|s| home.join(s)));
        }
        candidates.extend(hide::system_secrets());
        candidates.extend(hide::SYSTEM_SOCKETS.iter().map(PathBuf::from));
        candidates.push(hide::runtime_dir());
        if root && !local {
            candidates.extend(hide::block_devices());
        }
        candidates.extend(call.protect.iter().cloned());
        candidates.extend(call.other_sandboxes.iter().cloned());
        // What killed calls left beside our `TMPDIR` is removed; other calls' private
        // `TMPDIR`s there (the same user's, so readable by the permission bits: another
        // principal's files in flight) are hidden. One directory read.
        let base = call.tmpdir.parent().unwrap_or(call.tmpdir);
        let (_, others) = crate::tmp::PrivateTmp::sweep_listing(base, Some(call.tmpdir));
        if !local {
            candidates.extend(others);
        }
        match call.bootstrap {
            None => candidates.push(call.hcp_home.to_owned()),
            Some(inner) => candidates.extend(inner.iter().cloned()),
        }
        let readable: Vec<PathBuf> = if local {
            let mut r: Vec<PathBuf> = SYSTEM_READ_ONLY
                .iter()
                .map(|p| crate::workdir::resolve_system(Path::new(p)))
                .collect();
            r.extend([call.bin, call.workdir, call.tmpdir].map(canon));
            r.extend(
                call.extra_ro
                    .iter()
                    .chain(call.read)
                    .chain(call.write)
                    .map(|p| canon(p)),
            );
            r
        } else {
            vec![PathBuf::from("/")]
        };
        let reveal: Vec<PathBuf> = call.read.to_vec();
        let hidden = hide::hidden(&candidates, &readable, &reveal);
        let (work, tmp) = (canon(call.workdir), canon(call.tmpdir));
        if let Some(h) = hidden
            .iter()
            .find(|h| work.starts_with(&h.path) || tmp.starts_with(&h.path))
        {
            return Err(unavailable(format!(
                "the working directory `{}` or the private temporary directory lies inside `{}`, which no call may reach",
                work.display(),
                h.path.display()
            )));
        }

        // Namespaces.
        let (ns, id_maps) = match &support.processes {
            ProcessMechanism::PidNamespace => (
                Namespaces {
                    user: false,
                    pid: true,
                    mount: !hidden.is_empty(),
                },
                None,
            ),
            ProcessMechanism::UserPidNamespace => (
                Namespaces {
                    user: true,
                    pid: true,
                    mount: !hidden.is_empty(),
                },
                Some(Arc::new(IdMaps::own())),
            ),
            ProcessMechanism::Subreaper(_) => (Namespaces::default(), None),
        };

        let mut c = Confinement::with_effective_limits(&limits);
        c.ns = ns;
        c.id_maps = id_maps;
        c.drop_caps = root;
        if ns.mount {
            let base = call.tmpdir.parent().unwrap_or(call.tmpdir);
            let covers = Covers::shared(base).map_err(|e| AdapterError::SandboxFailed {
                path: base.to_owned(),
                reason: "cannot make what covers the hidden paths".into(),
                source: Some(e),
            })?;
            let proc = ns.pid && !local;
            c.mounts = Some(Arc::new(MountPlan::new(&hidden, !ns.user, &covers, proc)));
            c.covers = Some(Arc::new(covers));
        }

        // Landlock.
        let filesystem = if abi == 0 {
            let reason = support
                .landlock
                .missing_reason()
                .unwrap_or("landlock is not available");
            if policy.require {
                return Err(unavailable(format!(
                    "{reason} and the configuration requires the sandbox"
                )));
            }
            Status::NotEnforced(reason.to_owned())
        } else {
            let to_expand = if ns.mount { &[][..] } else { &hidden[..] };
            let root_dir = PathBuf::from("/");
            let ro: Vec<PathBuf> = call.extra_ro.iter().chain(call.read).cloned().collect();
            let mut rules: Vec<Rule<'_>> = if local {
                local_rules(call.workdir, call.tmpdir, call.bin, &ro, call.write)
            } else {
                let mut r = vec![
                    Rule {
                        path: root_dir.as_path(),
                        grant: Grant::Read,
                        required: None,
                    },
                    Rule {
                        path: call.tmpdir,
                        grant: Grant::All,
                        required: Some("cannot open the private temporary directory"),
                    },
                ];
                r.extend(call.write.iter().map(|p| Rule {
                    path: p,
                    grant: Grant::All,
                    required: None,
                }));
                r.extend(SYSTEM_DEVICES_RW.iter().map(|p| Rule {
                    path: Path::new(p),
                    grant: Grant::Device,
                    required: None,
                }));
                r
            };
            let expanded = expand(&mut rules, to_expand);
            let mut all: Vec<Rule<'_>> = rules;
            all.extend(expanded.iter().map(|(p, g)| Rule {
                path: p,
                grant: *g,
                required: None,
            }));
            let fd = build_ruleset(abi, &all, deny && abi >= NETWORK_LANDLOCK_ABI)?;
            c.ruleset = Some(Arc::new(fd));
            Status::Enforced
        };

        // Seccomp.
        let network_status = if support.seccomp {
            c.filters.push(seccomp::program(Filter {
                network_deny: deny,
                marker: !call.owner,
            }));
            if deny {
                Status::Enforced
            } else {
                Status::Allowed
            }
        } else if deny {
            return Err(unavailable(
                "the kernel has no seccomp filters, so the network `deny` cannot be enforced"
                    .into(),
            ));
        } else {
            Status::Allowed
        };

        // Processes.
        let mut processes = match &support.processes {
            ProcessMechanism::Subreaper(why) => Status::NotEnforced(format!(
                "descendants are ended at the end of the call but would outlive a killed hcp: {why}"
            )),
            _ => Status::Enforced,
        };
        if root {
            match &support.pids_cgroup {
                Ok(Some(base)) => {
                    let subreaper = matches!(support.processes, ProcessMechanism::Subreaper(_));
                    if subreaper {
                        crate::cgroup::sweep(base);
                    }
                    let cg = CallCgroup::claim(base, limits.processes, subreaper).map_err(|e| {
                        AdapterError::SandboxFailed {
                            path: base.clone(),
                            reason: "cannot make the call's pids cgroup".into(),
                            source: Some(e),
                        }
                    })?;
                    c.cgroup = Some(Arc::new(cg));
                }
                Ok(None) => {}
                Err(_) => {
                    if let Status::NotEnforced(r) = support.fork_bombs() {
                        processes = Status::NotEnforced(match processes {
                            Status::NotEnforced(p) => format!("{p}; {r}"),
                            _ => r,
                        });
                    }
                }
            }
        }

        let report = SandboxReport {
            mode: if c.ruleset.is_some() {
                SandboxMode::Landlock
            } else {
                SandboxMode::Unconfined
            },
            abi,
            field: SandboxField {
                filesystem,
                network: network_status,
                processes,
            },
            scoped: abi >= SCOPE_LANDLOCK_ABI,
            limits,
            reason: (abi == 0).then(|| {
                support
                    .landlock
                    .missing_reason()
                    .unwrap_or("landlock is not available")
                    .to_owned()
            }),
        };
        Ok((c, report))
    }
}

/// Where no mount namespace covers the hidden paths: each rule whose path strictly holds
/// a hidden one is replaced by the complement (a rule per other entry on the way), and a
/// rule on or inside a hidden path is dropped. Returns the added (owned) rule paths.
fn expand(rules: &mut Vec<Rule<'_>>, hidden: &[Hidden]) -> Vec<(PathBuf, Grant)> {
    let mut added = Vec::new();
    if hidden.is_empty() {
        return added;
    }
    rules.retain(|r| {
        let p = r.path.canonicalize().unwrap_or_else(|_| r.path.to_owned());
        if hidden.iter().any(|h| p.starts_with(&h.path)) {
            return false;
        }
        if hidden.iter().any(|h| h.path.starts_with(&p) && h.path != p) {
            added.extend(
                hide::complement(&p, hidden)
                    .into_iter()
                    .map(|q| (q, r.grant)),
            );
            return false;
        }
        true
    });
    added
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod timing {
    use super::*;
    use std::time::Instant;

    /// Where the parent's preparation time goes (`cargo test -p hcp-adapter --release
    /// timing -- --ignored --nocapture`).
    #[test]
    #[ignore = "a measurement, not a test"]
    fn stages() {
        let n = 300;
        let t = |name: &str, f: &mut dyn FnMut()| {
            let s = Instant::now();
            for _ in 0..n {
                f();
            }
            eprintln!(
                "{name}: {:.1} µs",
                s.elapsed().as_secs_f64() * 1e6 / f64::from(n)
            );
        };
        let home = PathBuf::from(std::env::var_os("HOME").unwrap());
        let d = tempfile::tempdir().unwrap();
        t("landlock probe", &mut || {
            let _ = LandlockSupport::probe();
        });
        t("process_mechanism", &mut || {
            drop(crate::procs::process_mechanism())
        });
        t("pids_cgroup_base", &mut || {
            drop(crate::cgroup::pids_cgroup_base())
        });
        t("seccomp build", &mut || {
            drop(seccomp::build(Filter {
                network_deny: true,
                marker: true,
            }))
        });
        t("system_secrets", &mut || drop(hide::system_secrets()));
        let mut cand: Vec<PathBuf> = HOME_SECRETS.iter().map(|s| home.join(s)).collect();
        cand.extend(hide::system_secrets());
        cand.push(d.path().to_owned());
        t("hidden", &mut || {
            drop(hide::hidden(&cand, &[PathBuf::from("/")], &[]))
        });
        let rules = [
            Rule {
                path: Path::new("/"),
                grant: Grant::Read,
                required: None,
            },
            Rule {
                path: d.path(),
                grant: Grant::All,
                required: None,
            },
            Rule {
                path: Path::new("/dev/null"),
                grant: Grant::Device,
                required: None,
            },
            Rule {
                path: Path::new("/dev/zero"),
                grant: Grant::Device,
                required: None,
            },
            Rule {
                path: Path::new("/dev/full"),
                grant: Grant::Device,
                required: None,
            },
        ];
        t("ruleset (5 rules)", &mut || {
            drop(build_ruleset(7, &rules, false))
        });
        let local = local_rules(d.path(), d.path(), Path::new("/bin/true"), &[], &[]);
        t("ruleset (local)", &mut || {
            drop(build_ruleset(7, &local, true))
        });
        if crate::limits::running_as_root() {
            let base = crate::cgroup::pids_cgroup_base().unwrap();
            t("cgroup create+drop", &mut || {
                drop(CallCgroup::create(&base, 100))
            });
            t("cgroup claim+drop (pooled)", &mut || {
                drop(CallCgroup::claim(&base, 100, false))
            });
            t("cgroup sweep", &mut || {
                let _ = crate::cgroup::sweep(&base);
            });
        }
    }
}
