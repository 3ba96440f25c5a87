//! The binding acts of RUNTIME §8 and their records: `hcp disconnect` removes the calling
//! principal's credential for the pack's family ([`disconnect`], after steps 1, 2 and the
//! grant of step 4); `hcp connect`'s decision on what its verb printed (stored, refused)
//! is recorded by [`record`]. Each is an audit record of its own — `"binding": "stored" |
//! "refused" | "removed" | "absent"`, the family, the run's record — with the usual digest
//! of the arguments, never the credential.

use super::Stop;
use super::target::Verb;
use crate::Runtime;
use crate::call::Answer;
use crate::record::Record;
use crate::refusal::Refusal;
use hcp_model::facts::{BindingAct, BindingOutcome};
use hcp_model::{CallFacts, Code, ExecResult, Principal, exit};
use hcp_store::audit::{Decision, Entry};
use hcp_store::binding;
use hcp_store::pack::InstalledPack;
use hcp_store::{StoreError, StoreLock};
use serde_json::Value;

/// Records the binding act `act` (`connect`, `disconnect`) of `principal` (`owner`: the
/// owner, by uid) on `pack`'s `family` as an act of authority (RUNTIME §6), before it is
/// made.
///
/// # Errors
/// The audit's refusal (74): the act must not happen.
pub(crate) fn authority<'a>(
    rt: &'a Runtime,
    principal: &str,
    act: &'a str,
    pack: &InstalledPack,
    family: &str,
) -> Result<crate::authority::Act<'a>, Refusal> {
    let actor = if principal == hcp_model::principal::OWNER {
        hcp_store::audit::Actor::owner()
    } else {
        hcp_store::audit::Actor::Principal(principal.to_owned())
    };
    // The call noted the watched files at its start, and the store lock is held.
    let made = crate::authority::Act::noted(rt, act, actor);
    made.record(
        serde_json::json!({"pack_id": pack.id.as_str(), "family": family, "principal": principal}),
    )
    .map_err(|e| {
        Refusal::new(e.code(), e.to_string())
            .hint("nothing was changed; `hcp audit verify` checks the trail")
    })?;
    Ok(made)
}

/// Removes `principal`'s credential for the family of `verb`'s pack and records it.
///
/// # Errors
/// The store's failure to remove it (not recorded).
pub(crate) fn disconnect(
    rt: &Runtime,
    (verb, principal): (&Verb, &Principal),
    rec: &mut Record,
) -> Result<Answer, Stop> {
    let pack = &verb.pack;
    let family = pack.manifest.family().to_owned();
    let lock = StoreLock::acquire(rt.home()).map_err(|e| Stop::Unrecorded(Refusal::store(&e)))?;
    // An act of authority (RUNTIME §6): recorded before the credential is removed.
    let made =
        authority(rt, &principal.id, "disconnect", pack, &family).map_err(Stop::Unrecorded)?;
    let removed = made
        .settle(
            binding::remove(rt.home(), &lock, &principal.id, &family),
            StoreError::code,
        )
        .map_err(|e| Stop::Unrecorded(Refusal::store(&e)))?;
    drop(lock);
    let outcome = if removed {
        BindingOutcome::Removed
    } else {
        BindingOutcome::Absent
    };
    let digest = rec.args_digest.clone().unwrap_or_default();
    let of = Of {
        pack,
        verb_key: &verb.key,
        principal: &principal.id,
        args_digest: &digest,
    };
    let audit_id = record(rt, &of, None, outcome, None);
    rec.facts.binding = Some(BindingAct {
        outcome,
        family: Some(family),
        run_audit_id: None,
    });
    let result = ExecResult {
        ok: true,
        pack_id: rec.pack_id.clone(),
        verb_key: rec.verb_key.clone(),
        operation: rec.operation.map(|o| o.to_string()),
        land: rec.land.map(|l| l.to_string()),
        error: None,
        code: None,
        hint: None,
        exit_code: None,
        stdout: None,
        stderr: None,
        data: Value::Null,
        truncated: false,
        duration_ms: rec.elapsed_ms(),
        audit_id,
        extra: serde_json::Map::new(),
    };
    Ok(Answer {
        result,
        exit: exit::OK,
        stdout: Vec::new(),
        stderr: Vec::new(),
        preview: None,
        principal: Some(principal.id.clone()),
        facts: std::mem::take(&mut rec.facts),
    })
}

/// Whose binding decision on which pack: what its record names.
pub(crate) struct Of<'a> {
    pub pack: &'a InstalledPack,
    pub verb_key: &'a str,
    pub principal: &'a str,
    pub args_digest: &'a str,
}

/// Appends the record of a binding decision (`code` for a refusal): what became of the
/// credential, the family and the run's record. Returns its id.
pub(crate) fn record(
    rt: &Runtime,
    of: &Of<'_>,
    code: Option<Code>,
    outcome: BindingOutcome,
    run: Option<&str>,
) -> Option<String> {
    let act = BindingAct {
        outcome,
        family: Some(of.pack.manifest.family().to_owned()),
        run_audit_id: run.map(str::to_owned),
    };
    rt.state().record(&entry(of, code, act)).ok().map(|a| a.id)
}

/// The record of `hcp disconnect` refused (`"binding": "refused"`), under the principal
/// the call is recorded as. Returns its id.
pub(crate) fn refused(rt: &Runtime, rec: &Record, code: Code) -> Option<String> {
    let digest = rec.args_digest.clone().unwrap_or_default();
    let principal = rec.principal.clone().unwrap_or_else(|| "unknown".into());
    let act = BindingAct {
        outcome: BindingOutcome::Refused,
        family: None,
        run_audit_id: None,
    };
    let mut e = Entry {
        principal,
        project: None,
        pack_id: rec.pack_id.clone(),
        verb_key: rec.verb_key.clone().unwrap_or_default(),
        operation: rec.operation,
        land: rec.land,
        decision: Decision::Deny,
        code: Some(code),
        args_digest: digest,
        exit_code: None,
        duration_ms: 0,
        extra: Default::default(),
    };
    e.extra = CallFacts {
        binding: Some(act),
        ..CallFacts::default()
    }
    .audit_fields();
    rt.state().record(&e).ok().map(|a| a.id)
}

/// The audit entry of a binding decision on `of.pack`'s connect verb.
fn entry(of: &Of<'_>, code: Option<Code>, act: BindingAct) -> Entry {
    let policy = of.pack.policy.verbs.get(of.verb_key);
    Entry {
        principal: of.principal.to_owned(),
        project: None,
        pack_id: Some(of.pack.id.to_string()),
        verb_key: of.verb_key.to_owned(),
        operation: policy.map(|p| p.operation),
        land: policy.map(|p| p.privacy.land),
        decision: if code.is_some() {
            Decision::Deny
        } else {
            Decision::Allow
        },
        code,
        args_digest: of.args_digest.to_owned(),
        exit_code: None,
        duration_ms: 0,
        extra: CallFacts {
            binding: Some(act),
            ..CallFacts::default()
        }
        .audit_fields(),
    }
}
