//! Step 9a of RUNTIME §5: preparation, after the gate and binding mint and before
//! admission — nothing here spends. A verb's child ([`crate::prepare::child`]: the
//! verified bin, argv, the environment's layers, the confinement), or the HTTP request of
//! a `kind: openapi` verb ([`crate::http::prepare`]); each trigger of a sense through the
//! same [`crate::prepare::child`]. A command the person accepted must be the one about to
//! run. Last, a cheap look whether the trail opens for writing: a call whose record could
//! not be written is not run.

use super::Stop;
use super::target::{Stimuli, Verb};
use crate::Runtime;
use crate::call::Caller;
use crate::confirm::{self, Answered};
use crate::http::Work;
use crate::prepare::{self, Child, ChildSpec};
use crate::record::Record;
use crate::refusal::Refusal;
use hcp_gate::{Allowed, StimulusAllowed};
use hcp_model::facts::{Sandbox, Via};
use hcp_model::{ArgValue, Code, Operation, Principal};
use hcp_store::config::{ConfigError, RuntimeConfig};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// What preparation reads besides the call: `config.json` and the sessions' working
/// directories, as the snapshot read them.
#[derive(Clone, Copy)]
pub(crate) struct PrepareReads<'a> {
    pub config: &'a Result<RuntimeConfig, ConfigError>,
}

/// Step 9a for a verb: its child or its request, the person's accept checked against it.
///
/// # Errors
/// Preparation's refusals (`bin_missing`, `bin_changed`, `arg_invalid`, `bad_config`,
/// `sandbox_unavailable`, `env_refused` …); `confirm_required` when the command is not
/// the one the person accepted; `audit_unavailable` (not recorded) when the trail cannot
/// be written.
pub(crate) fn verb(
    (rt, caller): (&Runtime, &Caller),
    (verb, principal): (&Verb, &Principal),
    (allowed, values): (&Allowed, &BTreeMap<String, ArgValue>),
    (secret, reads): (Option<&Map<String, Value>>, PrepareReads<'_>),
    answered: Option<&Answered>,
    rec: &mut Record,
) -> Result<Work, Stop> {
    let spec = ChildSpec {
        pack: &verb.pack,
        key: &verb.key,
        allowed,
        values,
        principal,
        secret,
        config: reads.config,
    };
    let mut work = match &verb.operation {
        None => Work::Child(Box::new(prepare::child(rt.home(), caller, &spec)?)),
        Some(op) => Work::Http(crate::http::prepare(op, &spec)?),
    };
    if let Some(accepted) = answered.and_then(|a| a.command.as_deref()) {
        if let Err(r) = the_accepted(&work, verb, allowed, accepted) {
            work.clean_up();
            return Err(r.into());
        }
        rec.facts.confirm = Some(Via::Elicitation);
    }
    if let Some(s) = work.sandbox() {
        rec.facts.sandbox = Some(Sandbox::One(s));
    }
    if let Err(r) = audit_ready(rt) {
        work.clean_up();
        return Err(r);
    }
    Ok(work)
}

/// The person accepted one command: this call runs that one or nothing. A request of a
/// `kind: openapi` verb has no preview to accept (`confirm::preview` renders commands
/// only), so an answer for one is refused.
fn the_accepted(
    work: &Work,
    verb: &Verb,
    allowed: &Allowed,
    accepted: &str,
) -> Result<(), Refusal> {
    let about_to_run = match work {
        Work::Child(c) => crate::pins::pin_of(&verb.pack, &allowed.plan.program).map(|pin| {
            confirm::digest(
                verb.pack.id.as_str(),
                &verb.key,
                &pin,
                &c.argv0,
                &c.args,
                &c.cwd,
            )
        }),
        Work::Http(_) => Err(confirm::changed()),
    };
    match about_to_run {
        Ok(d) if d == accepted => Ok(()),
        Ok(_) => Err(confirm::changed()),
        Err(r) => Err(r),
    }
}

/// Step 9a for a sense: the child of each trigger that runs, in the order of its refs.
///
/// # Errors
/// As [`verb`]'s for the first trigger that cannot be prepared; `audit_unavailable` (not
/// recorded).
pub(crate) fn stimuli(
    (rt, caller): (&Runtime, &Caller),
    (stimuli, principal): (&Stimuli, &Principal),
    allowed: &[(String, StimulusAllowed)],
    (secret, reads): (Option<&Map<String, Value>>, PrepareReads<'_>),
    rec: &mut Record,
) -> Result<Vec<(String, Child)>, Stop> {
    let none = BTreeMap::new();
    let mut triggers = Vec::new();
    for (reference, a) in allowed {
        let Some(plan) = &a.plan else {
            continue;
        };
        let allowed = Allowed {
            plan: plan.clone(),
            values: BTreeMap::new(),
            operation: Operation::Read,
            land: a.land,
            workdir: a.workdir.clone(),
            project: a.project.clone(),
            confirmed: false,
        };
        let spec = ChildSpec {
            pack: &stimuli.pack,
            key: reference,
            allowed: &allowed,
            values: &none,
            principal,
            secret,
            config: reads.config,
        };
        triggers.push((reference.clone(), prepare::child(rt.home(), caller, &spec)?));
    }
    if !triggers.is_empty() {
        let by_ref: Map<String, Value> = triggers
            .iter()
            .map(|(r, c)| (r.clone(), c.sandbox.clone().unwrap_or(Value::Null)))
            .collect();
        rec.facts.sandbox = Some(Sandbox::ByRef(by_ref));
    }
    audit_ready(rt)?;
    Ok(triggers)
}

/// Fail closed: a call whose record could not be written is not run (`audit_unavailable`,
/// not recorded).
fn audit_ready(rt: &Runtime) -> Result<(), Stop> {
    rt.state().audit_ready().map_err(|e| {
        Stop::Unrecorded(Refusal::new(
            Code::AuditUnavailable,
            format!("the audit trail cannot be written, so nothing runs: {e}"),
        ))
    })
}
