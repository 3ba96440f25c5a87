//! `hcp doctor [--json]`: what this machine and store can enforce (RUNTIME §3, §5 "The
//! child"): store health, the Landlock ABI, which confinements and resource limits hold,
//! whether each installed pack's bins still match their pins, and the skill export folders
//! (RUNTIME §10) with any missing, stale or foreign skill in them.
//!
//! Exit 0 when nothing is wrong, 1 when something is (a bin changed or missing, a damaged
//! record or audit trail, an invalid configuration, `sandbox.require` on a kernel without
//! Landlock). A kernel without Landlock is reported, not a failure, unless required.

use super::install::{open_home, store_error};
use crate::error::{CliError, CliResult};
use crate::exit;
use hcp_adapter::{
    LandlockSupport, NETWORK_LANDLOCK_ABI, Network, ResourceLimits, SCOPE_LANDLOCK_ABI,
    SandboxPolicy, TESTED_LANDLOCK_ABI,
};
use hcp_store::audit::AuditLog;
use hcp_store::config::{LimitsConfig, NetworkMode, RuntimeConfig};
use hcp_store::{Home, pack};
use serde::Serialize;
use std::io::Write;
use std::path::PathBuf;

/// Arguments of `hcp doctor`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
}

/// The adapter's sandbox policy from the runtime configuration (the limits before any
/// per-exec tightening, `hcp_adapter::ResourceLimits::tightened`).
pub(crate) fn sandbox_policy(config: &RuntimeConfig) -> SandboxPolicy {
    SandboxPolicy {
        require: config.sandbox.require,
        network: match config.sandbox.network {
            NetworkMode::Allow => Network::Allow,
            NetworkMode::Deny => Network::Deny,
        },
        limits: resource_limits(&config.limits),
    }
}

/// The adapter's resource limits from `limits` of the runtime configuration.
pub(crate) fn resource_limits(l: &LimitsConfig) -> ResourceLimits {
    ResourceLimits {
        cpu_seconds: l.cpu_seconds,
        address_space_bytes: l.address_space_bytes,
        open_files: l.open_files,
        file_size_bytes: l.file_size_bytes,
        processes: l.processes,
    }
}

#[derive(Debug, Serialize)]
struct Report {
    ok: bool,
    store: StoreHealth,
    sandbox: Sandbox,
    limits: Vec<Limit>,
    packs: Vec<PackBins>,
    bindings: Vec<BindingFile>,
    skill_exports: Vec<hcp_store::skill::export::FolderHealth>,
    problems: Vec<String>,
}

/// A stored credential's file (never its value): who, which family, its mode.
#[derive(Debug, Serialize)]
struct BindingFile {
    principal: String,
    family: String,
    mode: String,
    secure: bool,
}

#[derive(Debug, Serialize)]
struct StoreHealth {
    home: PathBuf,
    exists: bool,
    config: ConfigHealth,
    packs_installed: usize,
    packs_active: usize,
    audit: AuditHealth,
}

#[derive(Debug, Serialize)]
struct ConfigHealth {
    path: PathBuf,
    present: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

#[derive(Debug, Serialize)]
struct AuditHealth {
    records: u64,
    sound: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

#[derive(Debug, Serialize)]
struct Sandbox {
    /// `available`, `not_enabled` or `not_implemented`.
    landlock: &'static str,
    landlock_abi: u32,
    /// The ABI hcp will use: the kernel's, at most the tested one.
    used_abi: u32,
    filesystem: bool,
    network: &'static str,
    network_deny_enforceable: bool,
    scoped: bool,
    require: bool,
    /// What a `local` verb gets here: `confined`, `unconfined` or `refused`.
    local_verbs: &'static str,
}

#[derive(Debug, Serialize)]
struct Limit {
    name: &'static str,
    configured: u64,
    effective: u64,
    enforced: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<&'static str>,
}

#[derive(Debug, Serialize)]
struct PackBins {
    id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    damaged: Option<String>,
    bins: Vec<BinHealth>,
}

#[derive(Debug, Serialize)]
struct BinHealth {
    program: String,
    path: PathBuf,
    /// `ok`, `changed` or `missing`.
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

/// Runs `hcp doctor`.
pub fn run(a: Args) -> CliResult {
    let home = open_home()?;
    let report = examine(&home)?;
    let mut out = std::io::stdout().lock();
    let r = if a.json {
        serde_json::to_string_pretty(&report)
            .map_err(std::io::Error::other)
            .and_then(|s| writeln!(out, "{s}"))
    } else {
        write!(out, "{}", human(&report))
    };
    match r {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(CliError::new(
            "store_io",
            format!("cannot write the report: {e}"),
            exit::EX_IOERR,
        )),
        _ => Ok(if report.ok { exit::OK } else { exit::REFUSED }),
    }
}

fn examine(home: &Home) -> Result<Report, CliError> {
    let mut problems = Vec::new();
    let root = home.root().to_owned();
    let config_path = RuntimeConfig::path(&root);
    let (config, config_error) = match RuntimeConfig::load(&root) {
        Ok(c) => (c, None),
        Err(e) => {
            problems.push(e.to_string());
            (RuntimeConfig::default(), Some(e.to_string()))
        }
    };

    let listing = pack::list(home).map_err(store_error)?;
    let audit = match AuditLog::new(home).verify() {
        Ok(v) => {
            if !v.is_clean() {
                problems.push("the audit trail is broken (see `hcp audit verify`)".into());
            }
            AuditHealth {
                records: v.records,
                sound: v.is_clean(),
                error: None,
            }
        }
        Err(e) => {
            problems.push(format!("cannot verify the audit trail: {e}"));
            AuditHealth {
                records: 0,
                sound: false,
                error: Some(e.to_string()),
            }
        }
    };

    let support = LandlockSupport::probe();
    let abi = support.abi();
    let used = abi.min(TESTED_LANDLOCK_ABI);
    let policy = sandbox_policy(&config);
    let deny = policy.network == Network::Deny;
    let local_verbs = if used == 0 && (policy.require || deny) {
        problems.push(match support.missing_reason() {
            Some(r) if policy.require => {
                format!("{r}, and `sandbox.require` is set: local verbs are refused")
            }
            Some(r) => format!("{r}, and `sandbox.network` is `deny`: local verbs are refused"),
            None => "local verbs are refused".into(),
        });
        "refused"
    } else if deny && used < NETWORK_LANDLOCK_ABI {
        problems.push(format!(
            "`sandbox.network` is `deny` but landlock abi {used} has no tcp rules: local verbs are refused"
        ));
        "refused"
    } else if used == 0 {
        "unconfined"
    } else {
        "confined"
    };
    let sandbox = Sandbox {
        landlock: match support {
            LandlockSupport::Abi(_) => "available",
            LandlockSupport::NotEnabled => "not_enabled",
            LandlockSupport::NotImplemented => "not_implemented",
        },
        landlock_abi: abi,
        used_abi: used,
        filesystem: used > 0,
        network: if deny { "deny" } else { "allow" },
        network_deny_enforceable: used >= NETWORK_LANDLOCK_ABI,
        scoped: used >= SCOPE_LANDLOCK_ABI,
        require: policy.require,
        local_verbs,
    };

    let effective = policy.limits.effective();
    let root_user = hcp_adapter::running_as_root();
    let limits = config
        .limits
        .named()
        .into_iter()
        .zip(resource_limits_named(&effective))
        .map(|((name, configured), effective)| {
            let nproc_root = name == "processes" && root_user;
            Limit {
                name,
                configured,
                effective,
                enforced: !nproc_root,
                note: if nproc_root {
                    Some("the kernel does not apply it to root")
                } else if effective < configured {
                    Some("lowered to the hard limit hcp runs under")
                } else {
                    None
                },
            }
        })
        .collect();

    let mut packs = Vec::new();
    for l in &listing {
        if let Some(d) = &l.damaged {
            problems.push(format!("pack `{}` has a damaged record: {d}", l.id));
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
                let (status, reason) = match b.verify() {
                    Ok(_) => ("ok", None),
                    Err(e) => {
                        problems.push(format!("pack `{}`: {e}", l.id));
                        let status = if e.code() == "bin_missing" {
                            "missing"
                        } else {
                            "changed"
                        };
                        (status, Some(e.to_string()))
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

    // Credential files wider than 0600 are refused at exec (`binding_insecure`): say so.
    let bindings: Vec<BindingFile> = hcp_store::binding::list(home)
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
        .collect();
    let skill_exports = hcp_store::skill::export::health(
        home,
        &config,
        std::env::var_os("HOME").as_deref(),
        &mut problems,
    );
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
        sandbox,
        limits,
        packs,
        bindings,
        skill_exports,
        problems,
    })
}

fn resource_limits_named(l: &ResourceLimits) -> [u64; 5] {
    [
        l.cpu_seconds,
        l.address_space_bytes,
        l.open_files,
        l.file_size_bytes,
        l.processes,
    ]
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

fn human(r: &Report) -> String {
    let mut s = String::new();
    let mut line = |t: String| {
        s.push_str(&t);
        s.push('\n');
    };
    line("store".into());
    line(format!(
        "  home                  `{}`{}",
        r.store.home.display(),
        if r.store.exists {
            ""
        } else {
            " (not created yet)"
        }
    ));
    line(format!(
        "  config                `{}`: {}",
        r.store.config.path.display(),
        match (&r.store.config.error, r.store.config.present) {
            (Some(_), _) => "invalid, see below".to_owned(),
            (None, true) => "ok".into(),
            (None, false) => "absent, defaults".into(),
        }
    ));
    line(format!(
        "  packs                 {} installed, {} active",
        r.store.packs_installed, r.store.packs_active
    ));
    line(format!(
        "  audit trail           {} records, {}",
        r.store.audit.records,
        if r.store.audit.sound {
            "sound"
        } else {
            "broken"
        }
    ));
    let sb = &r.sandbox;
    line("sandbox (local land)".into());
    line(format!(
        "  landlock              {}",
        match sb.landlock {
            "available" => format!("abi {} (hcp uses {})", sb.landlock_abi, sb.used_abi),
            "not_enabled" => "not enabled in this kernel".into(),
            _ => "not in this kernel".into(),
        }
    ));
    line(format!("  filesystem rules      {}", yes(sb.filesystem)));
    line(format!(
        "  network               {} (deny enforceable: {})",
        sb.network,
        yes(sb.network_deny_enforceable)
    ));
    line(format!("  signal scoping        {}", yes(sb.scoped)));
    line(format!("  require               {}", yes(sb.require)));
    line(format!("  local verbs           {}", sb.local_verbs));
    line("limits (every child)".into());
    for l in &r.limits {
        line(format!(
            "  {:<22}{}{}{}",
            l.name,
            l.effective,
            if l.enforced { "" } else { " (not enforced)" },
            l.note.map(|n| format!(": {n}")).unwrap_or_default()
        ));
    }
    line("packs".into());
    if r.packs.is_empty() {
        line("  none installed".into());
    }
    for p in &r.packs {
        if let Some(d) = &p.damaged {
            line(format!("  {}  damaged: {d}", p.id));
        }
        for b in &p.bins {
            line(format!(
                "  {}  {} `{}`: {}",
                p.id,
                b.program,
                b.path.display(),
                b.status
            ));
        }
    }
    if !r.bindings.is_empty() {
        line("bindings".into());
        for b in &r.bindings {
            line(format!(
                "  {}  {}  mode {}{}",
                b.principal,
                b.family,
                b.mode,
                if b.secure {
                    ""
                } else {
                    "  (insecure: refused at exec)"
                }
            ));
        }
    }
    if !r.skill_exports.is_empty() {
        line("skill exports".into());
        for f in &r.skill_exports {
            line(format!(
                "  `{}`{}: {}",
                f.dir
                    .as_ref()
                    .map_or(f.entry.clone(), |d| d.display().to_string()),
                if f.configured {
                    ""
                } else {
                    " (left `skills.export`)"
                },
                f.status
            ));
            for e in &f.entries {
                line(format!("    {}  {}: {}", e.id, e.state, e.detail));
            }
        }
    }
    if r.problems.is_empty() {
        line("no problems found".into());
    } else {
        line(format!("{} problem(s):", r.problems.len()));
        for p in &r.problems {
            line(format!("  - {p}"));
        }
    }
    s
}
