//! `hcp sense PACK [REF]` (RUNTIME §8) after admission ([`crate::pipeline::sense`]): the
//! triggers' preparation and the relay of their JSON lines and of the recorded stimuli,
//! `{"pack_id", "ref", "event"}` one a line, until stopped.
//!
//! A trigger runs with the hygiene and the confinement of exec (pinned and verified bin,
//! no shell, cleared environment plus the allow-list, `agent_env`, `HCP_*`, the binding in
//! its environment only, null stdin, its own process group, the kernel confinement of its
//! land with a private `TMPDIR`: [`crate::prepare::confine`]) but with no timeout and
//! streamed output (`hcp_adapter::start`). The relay stops, ending each trigger's process
//! group (`SIGTERM`, then `SIGKILL` after [`STOP_GRACE`]), when the stop descriptor becomes
//! readable (a signal), its output is closed, after `--count` events, or when every
//! trigger it runs has exited.

use crate::call::Caller;
use crate::refusal::Refusal;
use hcp_adapter::{ChildEnv, Confinement, PrivateTmp, SessionValues, VerifiedBin};
use hcp_gate::StimulusAllowed;
use hcp_model::Principal;
use hcp_model::{Code, Land};
use hcp_store::Home;
use hcp_store::config::{ConfigError, RuntimeConfig};
use hcp_store::pack::InstalledPack;
use serde_json::{Map, Value};
use std::path::PathBuf;
use std::time::Duration;

pub use crate::sense_audit::{SenseAudit, run};
pub use crate::sense_relay::{Sinks, relay};

/// The longest line a trigger may print, in bytes (1 MiB); a longer one is dropped.
pub const MAX_LINE_BYTES: usize = 1024 * 1024;
/// How often recorded stimuli are looked for: every 200 ms.
pub const RECORDED_POLL: Duration = Duration::from_millis(200);
/// Time between `SIGTERM` and `SIGKILL` to a trigger's group when sense stops: 1 s.
pub const STOP_GRACE: Duration = Duration::from_secs(1);

/// A trigger allowed to run: what the child gets.
#[derive(Debug)]
pub struct Planned {
    /// The stimulus ref.
    pub reference: String,
    /// `argv[0]`: the CLI name.
    pub argv0: String,
    /// `argv[1..]`.
    pub args: Vec<std::ffi::OsString>,
    /// The exact environment.
    pub env: ChildEnv,
    /// The working directory.
    pub workdir: PathBuf,
    /// The verified, open bin (checked again right after the spawn).
    pub bin: VerifiedBin,
    /// The kernel confinement of its land (dropped when the trigger ends).
    pub confinement: Confinement,
    /// Its private `TMPDIR`, removed when the trigger ends.
    pub private_tmp: Option<PrivateTmp>,
    /// Its `sandbox` field (RUNTIME §5): `{"filesystem", "network", "processes"}`.
    pub sandbox: Value,
}

/// What planning a trigger reads besides the pack and the gate's answer: the store, the
/// caller, and what the snapshot read.
#[derive(Debug, Clone, Copy)]
pub struct World<'a> {
    /// The store.
    pub home: &'a Home,
    /// The caller.
    pub caller: &'a Caller,
    /// `config.json`.
    pub config: &'a Result<RuntimeConfig, ConfigError>,
    /// Every session's working directory with its principal.
    pub sandboxes: &'a Result<Vec<(String, PathBuf)>, Refusal>,
}

/// The refs of `hcp sense PACK [REF]`: `REF` when the pack declares it, else every ref.
///
/// # Errors
/// `unknown_stimulus` (66) for an undeclared ref or a pack without stimuli.
pub fn refs(pack: &InstalledPack, reference: Option<&str>) -> Result<Vec<String>, Refusal> {
    let declared: Vec<String> = pack
        .manifest
        .stimulus_triggers
        .iter()
        .map(|t| t.reference.clone())
        .collect();
    match reference {
        Some(r) if declared.iter().any(|d| d == r) => Ok(vec![r.to_owned()]),
        Some(r) => Err(Refusal::new(
            Code::UnknownStimulus,
            format!("pack `{}` declares no stimulus `{r}`", pack.id),
        )
        .hint(known(&declared))),
        None if declared.is_empty() => Err(Refusal::new(
            Code::UnknownStimulus,
            format!("pack `{}` declares no stimuli", pack.id),
        )),
        None => Ok(declared),
    }
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

/// The preparation of trigger `reference` (allowed by the gate as `a`), in every land:
/// its verified bin, argv, environment and kernel confinement
/// ([`crate::prepare::confine`]).
///
/// # Errors
/// The pin's and the adapter's refusals (`sandbox_unavailable`, `sandbox_failed` …),
/// `bad_config`, the state's when the sessions could not be listed.
pub fn plan(
    world: &World<'_>,
    pack: &InstalledPack,
    principal: &Principal,
    reference: &str,
    a: &StimulusAllowed,
    secret: Option<&Map<String, Value>>,
) -> Result<Planned, Refusal> {
    let Some(plan) = &a.plan else {
        return Err(Refusal::new(
            Code::InternalError,
            format!("trigger `{reference}` has no command"),
        ));
    };
    let bin = crate::pins::verify(pack, &plan.program)?;
    let session_values = SessionValues {
        principal_id: principal.id.clone(),
        project_id: a.project.clone(),
        workdir: a.workdir.clone(),
    };
    let none = std::collections::BTreeMap::new();
    let args = hcp_adapter::render(&plan.args, &none, &session_values, reference)
        .map_err(|e| Refusal::adapter(&e))?;
    let allowed = hcp_gate::Allowed {
        plan: plan.clone(),
        values: none,
        operation: hcp_model::Operation::Read,
        land: a.land,
        workdir: a.workdir.clone(),
        project: a.project.clone(),
        confirmed: false,
    };
    let config = crate::prepare::config_of(world.config)?;
    let sandboxes = world.sandboxes.as_ref().map_err(Clone::clone)?;
    let confined = crate::prepare::confine(
        world.home,
        world.caller,
        &crate::prepare::ConfineSpec {
            land: a.land,
            principal,
            workdir: &a.workdir,
            bin: bin.path(),
            bootstrap: false,
            pack_id: pack.id.as_str(),
            config,
            sandboxes,
        },
    )?;
    let mut env =
        ChildEnv::from_parent(world.caller.parent_env.iter().cloned()).tmpdir(confined.tmp.path());
    if a.land == Land::Local {
        env = env.home(&a.workdir);
    }
    let env = crate::prepare::layer_env(env, pack, reference, &principal.id, &allowed, secret)
        .map_err(|e| Refusal::adapter(&e))?;
    Ok(Planned {
        reference: reference.to_owned(),
        argv0: pack
            .manifest
            .cli_bin
            .clone()
            .unwrap_or_else(|| plan.program.clone()),
        args,
        env,
        workdir: a.workdir.clone(),
        bin,
        sandbox: confined.report.field_json(),
        confinement: confined.confinement,
        private_tmp: Some(confined.tmp),
    })
}
