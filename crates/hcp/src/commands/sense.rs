//! `hcp sense PACK [REF]` (RUNTIME §8): relays a pack's stimuli as JSON lines
//! `{"pack_id", "ref", "event"}` on stdout, as they arrive, until stopped.
//!
//! Two sources: the trigger's command (a `stimulusTriggers` entry with `cli`), run with
//! the hygiene of exec (pinned and verified bin, no shell, cleared environment, null
//! stdin, own process group, the principal's binding in its environment only), each JSON
//! line it prints relayed; and the stimuli the runtime recorded for the principal
//! (`hcp_store::stimulus`, such as `binding.degraded`), delivered at least once.
//!
//! Gate (fail closed): the pack is active; the ref is declared and its policy entry is
//! `read` (`write_stimulus` otherwise, §4.2.6); a control-plane pack only for the owner; a
//! session needs `sense.enable`; then the land, project and arguments checks of the exec
//! gate for the trigger's command; then binding mint. Each decision is audited.
//!
//! Runs without exec's timeout. Stops, ending the trigger's process group (`SIGTERM`, then
//! `SIGKILL` after a grace), on `SIGINT`/`SIGTERM`, when its stdout is closed, after
//! `--count` events, or when every trigger it runs has exited.

use super::connect::{require_capability, resolve_principal};
use super::exec::engine::ExecEnv;
use super::exec::exec_env;
use crate::error::{CliError, CliResult};
use crate::exit;
use hcp_adapter::{BinPin, ChildEnv, SessionValues};
use hcp_gate::{Context, Decision, Face, GrantView, PackView, Principal, SessionView};
use hcp_model::manifest::VerbSpec;
use hcp_model::{BindingMode, Land, Operation, Plane};
use hcp_store::audit::{self, AuditLog, Entry};
use hcp_store::pack::{self, InstalledPack};
use hcp_store::session::Session;
use hcp_store::{binding, stimulus};
use jiff::Timestamp;
use serde_json::{Map, Value, json};
use std::io::Write;
use std::time::Duration;

mod relay;

/// The longest line a trigger may print, in bytes (1 MiB); a longer one is dropped.
pub const MAX_LINE_BYTES: usize = 1024 * 1024;
/// How often recorded stimuli are looked for: every 200 ms.
pub const RECORDED_POLL: Duration = Duration::from_millis(200);
/// Time between `SIGTERM` and `SIGKILL` to a trigger's group when sense stops: 1 s.
pub const STOP_GRACE: Duration = Duration::from_secs(1);

/// Arguments of `hcp sense`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Prints one JSON line {\"pack_id\", \"ref\", \"event\"} per event, as it \
                  arrives, until SIGINT/SIGTERM, a closed stdout, `--count`, or the end of \
                  every trigger it runs. Without REF: every stimulus the pack declares."
)]
pub struct Args {
    /// The pack id.
    pack: String,
    /// The stimulus ref (`new_item`, `binding.degraded` …); all of the pack's when omitted.
    #[arg(value_name = "REF")]
    reference: Option<String>,
    /// Stop after relaying this many events.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    count: Option<u64>,
}

/// A trigger allowed to run: what the child gets.
struct Planned {
    reference: String,
    argv0: String,
    args: Vec<std::ffi::OsString>,
    env: ChildEnv,
    workdir: std::path::PathBuf,
    pin: BinPin,
}

/// Runs `hcp sense`.
pub fn run(a: Args) -> CliResult {
    let env = exec_env()?;
    let pack = pack::load(&env.home, &a.pack).map_err(super::install::pack_error)?;
    if !pack::is_active(&env.home, pack.id.as_str()) {
        return Err(CliError::new(
            "pack_inactive",
            format!("pack `{}` is installed but not active", pack.id),
            exit::EX_NOINPUT,
        )
        .hint(format!("the owner runs `hcp activate {}`", pack.id)));
    }
    let declared: Vec<String> = pack
        .manifest
        .stimulus_triggers
        .iter()
        .map(|t| t.reference.clone())
        .collect();
    let refs: Vec<String> = match &a.reference {
        Some(r) if declared.contains(r) => vec![r.clone()],
        Some(r) => {
            return Err(CliError::new(
                "unknown_stimulus",
                format!("pack `{}` declares no stimulus `{r}`", pack.id),
                exit::EX_NOINPUT,
            )
            .hint(known(&declared)));
        }
        None if declared.is_empty() => {
            return Err(CliError::new(
                "unknown_stimulus",
                format!("pack `{}` declares no stimuli", pack.id),
                exit::EX_NOINPUT,
            ));
        }
        None => declared,
    };
    let target = a.reference.clone().unwrap_or_else(|| "*".into());
    let session = resolve_principal(&env).inspect_err(|e| {
        audit_sense(&env.home, "unknown", None, &pack, &target, Some(&e.code));
    })?;
    let principal = session
        .as_ref()
        .map_or("owner", |s| s.principal.as_str())
        .to_owned();
    let refuse = |e: CliError| {
        audit_sense(&env.home, &principal, None, &pack, &target, Some(&e.code));
        e
    };
    let planned =
        gate(&env, &pack, session.as_ref(), &refs, a.reference.is_some()).map_err(refuse)?;
    audit_sense(&env.home, &principal, None, &pack, &target, None);
    relay::relay(&env, &pack, &principal, &refs, planned, a.count)
}

fn known(declared: &[String]) -> String {
    if declared.is_empty() {
        return "the pack declares no stimuli".into();
    }
    format!(
        "the pack declares: {}",
        declared
            .iter()
            .map(|d| format!("`{d}`"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// The checks of sense, in order; answers the triggers to run and the secret to redact.
fn gate(
    env: &ExecEnv,
    pack: &InstalledPack,
    session: Option<&Session>,
    refs: &[String],
    explicit: bool,
) -> Result<(Vec<Planned>, Option<Map<String, Value>>), CliError> {
    let m = &pack.manifest;
    for r in refs {
        // Lint `write_stimulus` makes this impossible for an installed pack; checked anyway.
        match pack.policy.stimuli.get(r) {
            Some(e) if e.operation == Operation::Read => {}
            _ => {
                return Err(CliError::new(
                    "write_stimulus",
                    format!(
                        "stimulus `{r}` of pack `{}` is not a `read` in its policy; sense cannot write",
                        pack.id
                    ),
                    exit::EX_NOPERM,
                ));
            }
        }
    }
    if m.plane == Plane::Control && session.is_some() {
        return Err(CliError::new(
            "control_plane",
            format!(
                "pack `{}` is a control-plane pack; only the owner may sense it",
                pack.id
            ),
            exit::EX_NOPERM,
        ));
    }
    if let Some(s) = session {
        require_capability(&env.home, s, pack, "sense.enable")?;
    }
    let principal = match session {
        None => Principal::Owner,
        Some(s) => Principal::Session(SessionView {
            principal_id: s.principal.as_str().to_owned(),
            projects: s.projects.clone(),
            workdir: s.workdir.clone(),
        }),
    };
    let with_cli: Vec<&hcp_model::manifest::Trigger> = m
        .stimulus_triggers
        .iter()
        .filter(|t| refs.contains(&t.reference) && t.cli.is_some())
        .collect();
    if with_cli.is_empty() {
        return Ok((Vec::new(), None));
    }
    // Binding mint (RUNTIME §5 step 8), for the triggers' commands.
    let mut secret = None;
    if m.binding.mode == BindingMode::User {
        let now = Timestamp::now();
        match binding::load(&env.home, principal.id(), m.family(), now) {
            Ok(c) => secret = Some(c.secret),
            Err(e) => {
                let _ = stimulus::record_binding_degraded(
                    &env.home,
                    pack,
                    principal.id(),
                    &with_cli[0].reference,
                    &e,
                    now,
                );
                let status = if matches!(e.code(), "binding_required" | "binding_insecure") {
                    exit::EX_NOPERM
                } else {
                    exit::EX_IOERR
                };
                let err = CliError::new(e.code(), e.to_string(), status).hint(format!(
                    "run `hcp connect {}` to establish the binding",
                    pack.id
                ));
                if explicit {
                    return Err(err);
                }
                // Every stimulus asked for: the recorded ones still flow, among them the
                // `binding.degraded` just recorded.
                let mut out = std::io::stderr().lock();
                let _ = writeln!(
                    out,
                    "hcp: sense: the triggers of `{}` cannot run ({}); relaying recorded stimuli only",
                    pack.id, err.code
                );
                return Ok((Vec::new(), None));
            }
        }
    }
    let mut planned = Vec::new();
    for t in with_cli {
        planned.push(plan(env, pack, &principal, t, secret.as_ref())?);
    }
    Ok((planned, secret))
}

/// The exec gate's land, project and argument checks for trigger `t`, then its argv,
/// environment and pinned bin.
fn plan(
    env: &ExecEnv,
    pack: &InstalledPack,
    principal: &Principal,
    t: &hcp_model::manifest::Trigger,
    secret: Option<&Map<String, Value>>,
) -> Result<Planned, CliError> {
    let r = t.reference.as_str();
    // The trigger as the one verb of a view of the pack, so the pure gate checks it.
    let mut manifest = pack.manifest.clone();
    manifest.verbs = std::iter::once((
        r.to_owned(),
        VerbSpec {
            description: t.description.clone().unwrap_or_default(),
            cli: t.cli.clone(),
            operation: None,
        },
    ))
    .collect();
    manifest.binding.connect = None;
    let mut policy = pack.policy.clone();
    policy.verbs = policy
        .stimuli
        .iter()
        .filter(|(k, _)| k.as_str() == r)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    // `sense.enable` was checked by the caller; it stands for the gate's read grant.
    let grants = GrantView {
        held: vec![("verb.exec.read".into(), Timestamp::MAX)],
    };
    let ctx = Context {
        principal,
        pack: PackView {
            manifest: &manifest,
            policy: &policy,
            active: true,
            content_changed_at: None,
        },
        verb_key: r,
        face: Face::Cli,
        grants: &grants,
        cwd: &env.cwd,
        project: env.project.as_deref(),
    };
    let no_args: Vec<(String, hcp_model::ArgValue)> = Vec::new();
    let allowed = match hcp_gate::check(&ctx, no_args.iter().map(|(k, v)| (k, v))) {
        Decision::Allow(a) => a,
        Decision::Deny(d) => {
            return Err(
                CliError::new(d.code.as_str(), d.message, d.code.exit_status())
                    .hint(d.hint.unwrap_or_default()),
            );
        }
    };
    if allowed.land == Land::Local {
        // RUNTIME §5: `local` land children are confined by the kernel; the adapter's
        // confinement is applied only by its own run, which does not stream. Fail closed.
        return Err(CliError::new(
            "sandbox_unavailable",
            format!("trigger `{r}` works in `local` land, which `hcp sense` cannot confine yet"),
            exit::EX_NOPERM,
        ));
    }
    let adapter =
        |e: hcp_adapter::AdapterError| CliError::new(e.code(), e.to_string(), e.exit_status());
    let pin = pack.record.bin(&allowed.plan.program).ok_or_else(|| {
        CliError::new(
            "bin_missing",
            format!(
                "program `{}` has no pin in the install record",
                allowed.plan.program
            ),
            exit::BIN_MISSING,
        )
    })?;
    let bin_pin = BinPin {
        path: pin.path.clone(),
        sha256: pin.sha256.parse().map_err(|_| {
            CliError::new(
                "store_damaged",
                format!("pin of `{}` is not a sha256 digest", pin.program),
                exit::EX_IOERR,
            )
        })?,
        fingerprint: super::exec::pins::cached(&pack.dir, pin),
    };
    let session_values = SessionValues {
        principal_id: principal.id().to_owned(),
        project_id: allowed.project.clone(),
        workdir: allowed.workdir.clone(),
    };
    let args = hcp_adapter::render(&allowed.plan.args, &allowed.values, &session_values, r)
        .map_err(adapter)?;
    let mut child_env = ChildEnv::from_parent(env.parent_env.iter().cloned());
    if allowed.land == Land::Local {
        child_env = child_env.home(&allowed.workdir);
    }
    let child_env =
        super::exec::engine::layer_child_env(child_env, pack, r, principal.id(), &allowed, secret)
            .map_err(adapter)?;
    Ok(Planned {
        reference: r.to_owned(),
        argv0: pack
            .manifest
            .cli_bin
            .clone()
            .unwrap_or_else(|| allowed.plan.program.clone()),
        args,
        env: child_env,
        workdir: allowed.workdir,
        pin: bin_pin,
    })
}

/// The audit record of a sense decision: `verb_key` is the ref (`*` for all), `face` is
/// `sense`; no arguments, so the digest of none.
fn audit_sense(
    home: &hcp_store::Home,
    principal: &str,
    project: Option<&str>,
    pack: &InstalledPack,
    target: &str,
    code: Option<&str>,
) {
    let entry_policy = pack.policy.stimuli.get(target);
    let mut extra = std::collections::BTreeMap::new();
    extra.insert("face".to_owned(), json!("sense"));
    let entry = Entry {
        principal: principal.to_owned(),
        project: project.map(str::to_owned),
        pack_id: Some(pack.id.to_string()),
        verb_key: target.to_owned(),
        operation: Some(Operation::Read),
        land: entry_policy.map(|p| p.privacy.land),
        decision: if code.is_some() {
            audit::Decision::Deny
        } else {
            audit::Decision::Allow
        },
        code: code.map(str::to_owned),
        args_digest: audit::args_digest(std::iter::empty()),
        exit_code: None,
        duration_ms: 0,
        extra,
    };
    let _ = AuditLog::new(home).append(&entry);
}
