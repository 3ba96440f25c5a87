//! Step 9b of RUNTIME §5: admission, the one step that spends — the counter slots and the
//! approval step 7 found — and makes the call's `intent` record durable, all or nothing
//! (`State::admit`). Nothing runs without it; from here on every end of the call is its
//! `outcome`.

use super::Stop;
use super::policy::Spend;
use crate::Runtime;
use crate::confirm::Answered;
use crate::record::Record;
use crate::refusal::Refusal;
use crate::seam::Point;
use hcp_model::facts::{Approval, Via};
use hcp_model::{Capability, Operation, Principal};
use hcp_store::pack::InstalledPack;
use hcp_store::state::{Admission, AdmitError};
use jiff::Timestamp;

/// What a call is admitted as: its pack, the capabilities step 4 checked, what it spends,
/// and its runtime-policy tool name (for the refusal of a slot another call took).
pub(crate) struct Admit<'a> {
    pub pack: &'a InstalledPack,
    pub capabilities: Vec<Capability>,
    pub spend: &'a Spend,
    pub tool: &'a str,
}

/// Admits the call; its intent is what `rec` knows now.
///
/// # Errors
/// What admission refuses, spending nothing: a slot or approval another call took since
/// step 7 (`rate_limit`, `budget`, `requires_confirmation`), a session that ended, a grant
/// revoked; `audit_unavailable`, `state_unavailable` (not recorded).
pub(crate) fn admit(
    rt: &Runtime,
    (principal, now): (&Principal, Timestamp),
    a: &Admit<'_>,
    answered: Option<&Answered>,
    rec: &mut Record,
) -> Result<(), Stop> {
    let intent = rec.intent();
    let admitted = rt
        .state()
        .admit(&Admission {
            session: principal.session_id(),
            pack: &a.pack.id,
            capabilities: &a.capabilities,
            intent: &intent,
            counters: &a.spend.counters,
            approvals: &a.spend.approvals,
            now,
        })
        .map_err(|e| refused(e, a.tool, rec))?;
    rec.admitted(admitted.intent.id.clone(), intent);
    rt.seam().reach(Point::Admitted);
    if let Some(id) = admitted.approval_ids.first() {
        if answered.and_then(|a| a.approval.as_ref()) == Some(id) {
            rec.facts.approved_by = Some(Via::Elicitation);
        }
        rec.facts.approval = Some(Approval::Taken(id.clone()));
    }
    Ok(())
}

/// The capabilities step 4 required of a session principal for verb `key` of `pack`: the
/// operation's, and `pack.connect` for the connect verb; none for the owner.
pub(crate) fn verb_capabilities(
    pack: &InstalledPack,
    key: &str,
    operation: Operation,
    principal: &Principal,
) -> Vec<Capability> {
    if principal.is_owner() {
        return Vec::new();
    }
    let mut caps = vec![Capability::for_operation(operation)];
    if pack.manifest.connect_verb() == Some(key) {
        caps.push(Capability::PackConnect);
    }
    caps
}

/// The capability step 4 required of a session principal for a sense; none for the
/// owner.
pub(crate) fn sense_capabilities(principal: &Principal) -> Vec<Capability> {
    if principal.is_owner() {
        Vec::new()
    } else {
        vec![Capability::SenseEnable]
    }
}

/// An admission refused: nothing was spent. Recorded unless the audit or the state
/// backend is what failed.
fn refused(e: AdmitError, tool: &str, rec: &mut Record) -> Stop {
    let code = e.code();
    if code.is_runtime_policy() {
        rec.facts.rule = Some(code.as_str());
    }
    let message = match &e {
        AdmitError::Limit { .. } => format!(
            "the runtime policy refuses `{tool}`: another call took the last of its `{code}` since it was checked"
        ),
        AdmitError::ApprovalGone => format!(
            "the approval of this call of `{tool}` was used by another call since it was looked up"
        ),
        AdmitError::Audit(inner) => {
            format!("the audit trail cannot be written, so nothing runs: {inner}")
        }
        AdmitError::State(inner) => format!("{inner}, so nothing runs"),
        AdmitError::Session(b) => format!("bad session: {b}"),
        other => format!("{other}; the call is refused"),
    };
    let hint = match &e {
        AdmitError::Audit(inner) => inner.hint().map(str::to_owned),
        AdmitError::State(inner) => inner.hint().map(str::to_owned),
        _ => None,
    };
    let refusal = Refusal {
        code,
        message,
        hint,
    };
    match e {
        AdmitError::Audit(_) | AdmitError::State(_) => Stop::Unrecorded(refusal),
        _ => Stop::Recorded(refusal),
    }
}
