//! `hcp doctor`'s examination (RUNTIME §3, §5 "The child" and "Confinement of every
//! land", §10): store health, the Landlock ABI, seccomp, which mechanism keeps processes
//! from outliving a call, whether fork bombs are bounded, which resource limits hold, whether each installed
//! pack's bins still match their pins (the one bin verifier, [`crate::pins::check`]),
//! which stored credentials are too open, and the skill export folders with any missing,
//! stale or foreign skill in them. The binary prints the [`Report`].
//!
//! `ok` is false when something is wrong (a bin changed or missing, a damaged record or
//! audit trail, an invalid configuration, `sandbox.require` on a kernel without
//! Landlock, `network: deny` without seccomp). A weaker mechanism (no Landlock, hcp as
//! subreaper instead of a PID namespace, an unbounded root fork bomb) is a note, not a
//! failure.

use crate::Runtime;
use crate::refusal::Refusal;
use hcp_adapter::{
    KernelSupport, LandlockSupport, ResourceLimits, SCOPE_LANDLOCK_ABI, Status, TESTED_LANDLOCK_ABI,
};
use hcp_store::Home;
use hcp_store::config::RuntimeConfig;
use hcp_store::pack;
use serde::Serialize;
use std::path::PathBuf;

/// What `hcp doctor` found (RUNTIME §3, §5 "The child").
#[derive(Debug, Serialize)]
pub struct Report {
    /// Whether nothing is wrong.
    pub ok: bool,
    /// The store.
    pub store: StoreHealth,
    /// The state backend (RUNTIME §9): files, or the fleet's database and whether it
    /// answers.
    pub state: crate::backend::StateHealth,
    /// What the kernel's confinement gives every call's child here.
    pub sandbox: Sandbox,
    /// The resource limits of every child.
    pub limits: Vec<Limit>,
    /// Each installed pack's bins.
    pub packs: Vec<PackBins>,
    /// Each installed pack's network, with its destinations (RUNTIME §5.5).
    pub networks: Vec<crate::egress::PackNetwork>,
    /// The stored credentials' files.
    pub bindings: Vec<BindingFile>,
    /// The skill export folders (RUNTIME §10) and any missing, stale or foreign skill in
    /// them.
    pub skill_exports: Vec<hcp_store::skill::export::FolderHealth>,
    /// The runtime policy, its compiled cache and the tool lock (RUNTIME §7).
    pub runtime_policy: crate::policy::health::PolicyHealth,
    /// What calls are given beyond the view, what the machine lacks for it, the
    /// quarantine (RUNTIME §5.1–§5.4, [`crate::view_health`]).
    pub view: crate::view_health::ViewHealth,
    /// Every damaged record of the file state (RUNTIME §4 "Fault isolation"), each with
    /// whom it refuses and the command that repairs or removes it.
    pub damaged: Vec<hcp_store::damage::Damaged>,
    /// What is wrong, one sentence each.
    pub problems: Vec<String>,
    /// What holds less than it could on this machine (a weaker mechanism), one sentence
    /// each; not a failure.
    pub notes: Vec<String>,
}

/// A stored credential's file (never its value): who, which family, its mode.
#[derive(Debug, Serialize)]
pub struct BindingFile {
    /// The principal.
    pub principal: String,
    /// The binding family.
    pub family: String,
    /// The file's mode, four octal digits.
    pub mode: String,
    /// Whether it is 0600 or tighter (exec refuses it otherwise: `binding_insecure`).
    pub secure: bool,
}

/// The store.
#[derive(Debug, Serialize)]
pub struct StoreHealth {
    /// `$HCP_HOME`.
    pub home: PathBuf,
    /// Whether it exists.
    pub exists: bool,
    /// `config.json`.
    pub config: ConfigHealth,
    /// Installed packs.
    pub packs_installed: usize,
    /// Active packs.
    pub packs_active: usize,
    /// The audit trail.
    pub audit: AuditHealth,
}

/// `config.json`.
#[derive(Debug, Serialize)]
pub struct ConfigHealth {
    /// Its path.
    pub path: PathBuf,
    /// Whether it exists (absent: the defaults).
    pub present: bool,
    /// Why it does not load, when it does not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The audit trail.
#[derive(Debug, Serialize)]
pub struct AuditHealth {
    /// The records of the intact chains.
    pub records: u64,
    /// Whether every chain verifies.
    pub sound: bool,
    /// The first fault's code (`truncated`, `hash_mismatch` …), when one does not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fault: Option<String>,
    /// Calls with an intent and no outcome: hcp was killed while they ran (or they
    /// still run). Not damage.
    pub interrupted: usize,
    /// Audit files and the directory whose modes grant anything to group or others
    /// (RUNTIME §6: the owner's only), as `PATH (MODE)`.
    pub loose_modes: Vec<String>,
    /// Why it cannot be read, when it cannot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A trail of an earlier version (plain SHA-256, no chain key), not migrated yet: the
    /// next command that uses the store migrates it (`hcp doctor` writes nothing).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub earlier_version: bool,
    /// The audit's reserve and the disk's free space (RUNTIME §5.4; the file store).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reserve: Option<hcp_store::audit::reserve::ReserveReport>,
    /// The witness of the trail's checkpoints (`audit.witness`, RUNTIME §6).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub witness: Option<String>,
}

/// The audit part of the examination: every chain verified, interrupted calls counted,
/// and (file store) the modes of `audit/` and its files.
fn audit_health(rt: &Runtime, problems: &mut Vec<String>) -> AuditHealth {
    let mut h = AuditHealth {
        records: 0,
        sound: false,
        fault: None,
        interrupted: 0,
        loose_modes: Vec::new(),
        error: None,
        earlier_version: false,
        reserve: None,
        witness: rt.state().audit_witness(),
    };
    match rt.state().audit_verify(None) {
        Ok(v) => {
            h.records = v.records();
            h.sound = v.is_clean();
            h.earlier_version = v.chains.iter().any(|c| {
                c.machine.is_none() && c.report.chain == hcp_store::audit::ChainCheck::Legacy
            });
            h.interrupted = v.interrupted();
            if let Some(c) = v.first_broken()
                && let Some(b) = &c.report.broken
            {
                h.fault = Some(b.fault.as_str().to_owned());
                problems.push(format!(
                    "the audit trail is broken ({}): see `hcp audit verify`",
                    b.fault.as_str()
                ));
            }
        }
        Err(e) => {
            problems.push(format!("cannot verify the audit trail: {e}"));
            h.error = Some(e.to_string());
        }
    }
    if rt.state().backend() == "file" {
        match hcp_store::audit::AuditLog::new(rt.home()).loose_modes() {
            Ok(loose) => {
                for (path, mode) in loose {
                    let shown = format!("{} ({mode:04o})", path.display());
                    problems.push(format!(
                        "`{}` has mode {mode:04o}: the audit is the owner's only (0700 directory, 0600 files); `chmod go-rwx` it",
                        path.display()
                    ));
                    h.loose_modes.push(shown);
                }
            }
            Err(e) => problems.push(format!("cannot read the audit directory's modes: {e}")),
        }
        h.reserve = crate::trail::reserve_health(rt.home(), problems);
    }
    h
}

/// What the kernel's confinement gives every call's child here (RUNTIME §5
/// "Confinement of every land"), from `hcp_adapter::KernelSupport::probe`.
#[derive(Debug, Serialize)]
pub struct Sandbox {
    /// `available`, `not_enabled` or `not_implemented`.
    pub landlock: &'static str,
    /// The kernel's Landlock ABI (0: none).
    pub landlock_abi: u32,
    /// The ABI hcp will use: the kernel's, at most the tested one.
    pub used_abi: u32,
    /// Whether a call gets its view here.
    pub filesystem: bool,
    /// How what a call was not given is kept from it: `view` (a root of its own, RUNTIME
    /// §5.1), `none` where the kernel cannot build one.
    pub hidden_paths: &'static str,
    /// Whether the kernel has seccomp filters: `network: deny` and the nested-call marker
    /// need them.
    pub seccomp: bool,
    /// `sandbox.network` as configured: `deny` (the default), `host` or `allow`.
    pub network: &'static str,
    /// Whether a `deny` can be enforced here (seccomp).
    pub network_deny_enforceable: bool,
    /// Whether signals and abstract sockets are scoped to the call (Landlock ABI ≥ 6).
    pub scoped: bool,
    /// Which mechanism keeps descendants from outliving a call: a PID namespace, a user
    /// and PID namespace, or `hcp` as child subreaper (and why).
    pub processes: String,
    /// Whether a descendant ends within a second also when `hcp` itself is killed (a PID
    /// namespace); else the call's end alone ends them.
    pub descendants_end_with_killed_hcp: bool,
    /// `bounded` (`RLIMIT_NPROC` for an ordinary user, a pids cgroup for root), or why a
    /// fork bomb is not.
    pub fork_bombs: String,
    /// `sandbox.require`.
    pub require: bool,
    /// What a call gets here: `confined`, `unconfined` (no filesystem rules) or
    /// `refused`; `local` verbs apart, since their default is `network: deny`.
    pub calls: &'static str,
    /// What a `local` verb gets here: `confined`, `unconfined` or `refused`.
    pub local_verbs: &'static str,
}

/// One resource limit of every child.
#[derive(Debug, Serialize)]
pub struct Limit {
    /// Its name in `config.json`.
    pub name: &'static str,
    /// As configured.
    pub configured: u64,
    /// As applied (at most the hard limit hcp runs under).
    pub effective: u64,
    /// Whether the kernel applies it.
    pub enforced: bool,
    /// Why `effective` differs or it is not enforced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<&'static str>,
}

/// One installed pack's bins.
#[derive(Debug, Serialize)]
pub struct PackBins {
    /// The pack id.
    pub id: String,
    /// Why the pack cannot be read, when it cannot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub damaged: Option<String>,
    /// Its pinned bins.
    pub bins: Vec<BinHealth>,
}

/// One pinned bin.
#[derive(Debug, Serialize)]
pub struct BinHealth {
    /// The program as the manifest writes it.
    pub program: String,
    /// The pinned path.
    pub path: PathBuf,
    /// `ok`, `changed` or `missing`.
    pub status: &'static str,
    /// Why not `ok`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Examines the store of `rt` and this machine.
///
/// # Errors
/// The store's when the packs cannot be listed.
pub fn examine(rt: &Runtime) -> Result<Report, Refusal> {
    let home = rt.home();
    let mut problems = Vec::new();
    let mut notes = Vec::new();
    let root = home.root().to_owned();
    let config_path = RuntimeConfig::path(&root);
    let (config, config_error) = match RuntimeConfig::load(&root) {
        Ok(c) => (c, None),
        Err(e) => {
            problems.push(e.to_string());
            (RuntimeConfig::default(), Some(e.to_string()))
        }
    };

    let listing = pack::list(home).map_err(|e| Refusal::store(&e))?;
    let state = crate::backend::health(rt);
    if let Some(e) = &state.error {
        problems.push(format!(
            "the state backend `{}`: {}",
            state.backend, e.message
        ));
    }
    let audit = audit_health(rt, &mut problems);
    let mut damaged = hcp_store::damage::scan(home);
    damaged.extend(lost_policy(rt));
    damaged.extend(damaged_kept(rt));
    damaged.extend(hcp_store::damage::homes(&crate::home::homes_of(
        home.root(),
        &config,
    )));
    for d in &damaged {
        problems.push(format!(
            "damaged {} `{}`: {}; it refuses {}; repair: `{}`",
            d.kind,
            d.path.display(),
            d.reason,
            d.refuses,
            d.repair
        ));
    }

    let sandbox = sandbox(&config, &mut problems, &mut notes);
    let limits = limits(&config);

    let packs = pack_bins(home, &listing, &mut problems);

    let bindings = bindings(home, &mut problems);
    let skill_exports = hcp_store::skill::export::health(
        home,
        &config,
        std::env::var_os("HOME").as_deref(),
        &mut problems,
    );
    let runtime_policy = crate::policy::health::examine(home, &mut problems);
    let view = crate::view_health::examine(rt, &config, &mut problems, &mut notes);
    Ok(Report {
        ok: problems.is_empty(),
        store: StoreHealth {
            exists: root.is_dir(),
            home: root,
            config: ConfigHealth {
                present: config_path.exists(),
                path: config_path,
                error: config_error,
            },
            packs_installed: listing.len(),
            packs_active: listing.iter().filter(|p| p.active).count(),
            audit,
        },
        state,
        sandbox,
        limits,
        networks: listing
            .iter()
            .map(|l| crate::egress::pack_network(&config, &l.id))
            .collect(),
        packs,
        bindings,
        skill_exports,
        runtime_policy,
        view,
        damaged,
        problems,
        notes,
    })
}

/// The resource limits `config.json` asks for, what applies under the hard limits hcp
/// runs under, and whether the kernel enforces each.
fn limits(config: &RuntimeConfig) -> Vec<Limit> {
    let limits_config = crate::prepare::resource_limits(&config.limits);
    let effective = limits_config.effective();
    let root_user = hcp_adapter::running_as_root();
    let cgroup = matches!(KernelSupport::probe().pids_cgroup, Ok(Some(_)));
    config
        .limits
        .named()
        .into_iter()
        .zip(resource_limits_named(&effective))
        .map(|((name, configured), effective)| {
            let nproc_root = name == "processes" && root_user && !cgroup;
            Limit {
                name,
                configured,
                effective,
                enforced: !nproc_root,
                note: if nproc_root {
                    Some("the kernel does not apply it to root, and there is no pids cgroup")
                } else if name == "processes" && root_user {
                    Some("bound for root by a pids cgroup per call")
                } else if effective < configured {
                    Some("lowered to the hard limit hcp runs under")
                } else {
                    None
                },
            }
        })
        .collect()
}

/// The runtime policy gone with the stamp of its digest, as a damaged record
/// ([`crate::authority::policy_lost`]).
fn lost_policy(rt: &Runtime) -> Option<hcp_store::damage::Damaged> {
    let hcp_store::StoreError::Damaged { path, reason } = crate::authority::policy_lost(rt)? else {
        return None;
    };
    Some(hcp_store::damage::Damaged {
        kind: "runtime policy",
        repair: format!("cp COPY {}", path.display()),
        refuses: "every session's call, the owner's go on (COPY: the policy of that digest; to run without one, put it back, then remove it: the next call records its removal)".into(),
        path,
        reason,
    })
}

/// `state/authority-files.json` that is no record, as a damaged record
/// ([`crate::authority::kept_damaged`]).
fn damaged_kept(rt: &Runtime) -> Option<hcp_store::damage::Damaged> {
    let hcp_store::StoreError::Damaged { path, reason } = crate::authority::kept_damaged(rt)?
    else {
        return None;
    };
    Some(hcp_store::damage::Damaged {
        kind: "record of the watched files",
        repair: format!("rm -r {}", path.display()),
        refuses: "every session's call and every edit of `config.json`, the owner's calls go on (the next call after its removal records the runtime policy and `config.json` afresh)".into(),
        path,
        reason,
    })
}

/// Each installed pack's pinned bins, checked; a damaged record or a bin that changed is
/// a problem.
fn pack_bins(
    home: &Home,
    listing: &[pack::PackListing],
    problems: &mut Vec<String>,
) -> Vec<PackBins> {
    let mut packs = Vec::new();
    for l in listing {
        // A damaged record is a problem of the damaged records' list (`damage::scan`).
        if let Some(d) = &l.damaged {
            packs.push(PackBins {
                id: l.id.clone(),
                damaged: Some(d.clone()),
                bins: Vec::new(),
            });
            continue;
        }
        let loaded = match pack::load(home, &l.id) {
            Ok(p) => p,
            Err(e) => {
                problems.push(format!("pack `{}` cannot be loaded: {e}", l.id));
                packs.push(PackBins {
                    id: l.id.clone(),
                    damaged: Some(e.to_string()),
                    bins: Vec::new(),
                });
                continue;
            }
        };
        let bins = loaded
            .record
            .bins
            .iter()
            .map(|b| {
                let (status, reason) = match crate::pins::check(b) {
                    Ok(()) => ("ok", None),
                    Err((missing, why)) => {
                        problems.push(format!("pack `{}`: {why}", l.id));
                        (if missing { "missing" } else { "changed" }, Some(why))
                    }
                };
                BinHealth {
                    program: b.program.clone(),
                    path: b.path.clone(),
                    status,
                    reason,
                }
            })
            .collect();
        packs.push(PackBins {
            id: l.id.clone(),
            damaged: None,
            bins,
        });
    }
    packs
}

/// The credential files: one wider than 0600 is refused at exec (`binding_insecure`), so
/// it is a problem.
fn bindings(home: &Home, problems: &mut Vec<String>) -> Vec<BindingFile> {
    // Credential files wider than 0600 are refused at exec (`binding_insecure`): say so.
    hcp_store::binding::list(home)
        .into_iter()
        .map(|(principal, family, mode)| {
            let secure = mode & 0o077 == 0;
            if !secure {
                problems.push(format!(
                    "the binding of `{principal}` for `{family}` has mode {mode:o}; it must be 0600 (exec refuses it: `binding_insecure`)"
                ));
            }
            BindingFile { principal, family, mode: format!("{mode:04o}"), secure }
        })
        .collect()
}

/// The sandbox section: what `KernelSupport::probe` offers against what `config.json`
/// asks. A requirement the kernel cannot meet is a problem; a weaker mechanism is a note.
fn sandbox(config: &RuntimeConfig, problems: &mut Vec<String>, notes: &mut Vec<String>) -> Sandbox {
    let k = KernelSupport::probe();
    let abi = k.landlock.abi();
    let used = abi.min(TESTED_LANDLOCK_ABI);
    let require = config.sandbox.require;
    let view = k.view_missing();
    let verdict = if view.is_none() && k.seccomp {
        "confined"
    } else if require {
        "refused"
    } else {
        "unconfined"
    };
    if let Some(why) = &view {
        problems.push(format!(
            "no call can have its view here ({why}): every session's call is refused{}",
            if require {
                ", and the owner's too (`sandbox.require`)"
            } else {
                "; the owner's calls run without one"
            }
        ));
    }
    if !k.seccomp {
        problems.push(
            "the kernel has no seccomp filters, so no network mode can be enforced: every session's call is refused"
                .into(),
        );
    }
    for key in config.ignored_keys() {
        notes.push(format!(
            "`{key}` in `config.json` is ignored: a call sees only its view (remove the key)"
        ));
    }
    if !k.processes.survives_sigkill_of_hcp() {
        notes.push(format!("processes: {}", k.processes.describe()));
    }
    let fork_bombs = match k.fork_bombs() {
        Status::Enforced => "bounded".to_owned(),
        other => {
            notes.push(other.as_str().to_owned());
            other.as_str().to_owned()
        }
    };
    Sandbox {
        landlock: match k.landlock {
            LandlockSupport::Abi(_) => "available",
            LandlockSupport::NotEnabled => "not_enabled",
            LandlockSupport::NotImplemented => "not_implemented",
        },
        landlock_abi: abi,
        used_abi: used,
        filesystem: view.is_none(),
        hidden_paths: if view.is_none() { "view" } else { "none" },
        seccomp: k.seccomp,
        network: config.sandbox.network.mode(),
        network_deny_enforceable: k.seccomp,
        scoped: used >= SCOPE_LANDLOCK_ABI,
        processes: k.processes.describe(),
        descendants_end_with_killed_hcp: k.processes.survives_sigkill_of_hcp(),
        fork_bombs,
        require,
        calls: verdict,
        local_verbs: verdict,
    }
}

fn resource_limits_named(l: &ResourceLimits) -> [u64; 7] {
    [
        l.cpu_seconds,
        l.address_space_bytes,
        l.open_files,
        l.file_size_bytes,
        l.processes,
        l.tmp_bytes,
        l.memory_bytes,
    ]
}
