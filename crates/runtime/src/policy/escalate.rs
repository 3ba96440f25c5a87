//! The owner's approval queue as the runtime policy's escalation tier (RUNTIME §7,
//! HISTOS-ENGINE §6), when `config.json` says `"escalation": "approvals"`: a tool's
//! `escalate` is answered by the owner, never by the agent.
//!
//! The tier is dry like the rest of step 7: it looks up, for exactly this call (tool,
//! bound arguments, principal, policy), an escalation approval the owner granted
//! (`Approved`: the approval is taken at admission with the call's other spending), a
//! denial still in force (`Denied` → `escalation_denied`), or neither (`Pending`: the
//! pre-gate records a pending approval marked as an escalation and answers
//! `requires_confirmation` with its id). The engine asks the tier only after every
//! machine check passed, so `rbac`, `arg_schema` or a limit win over it.

use super::{approval_key, bound_digest};
use hcp_store::state::{ApprovalKey, State};
use histos::engine::Args;
use histos::{Escalation, EscalationTier, Principal};
use jiff::Timestamp;
use std::cell::RefCell;

/// What the tier answered for the call.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Answer {
    Approved(String, ApprovalKey),
    Denied,
    Pending,
}

/// The approval queue of a [`State`] as an [`EscalationTier`], for one call.
pub struct ApprovalTier<'a> {
    state: &'a dyn State,
    policy_hash: &'a str,
    now: Timestamp,
    answer: RefCell<Option<Answer>>,
    tenant: &'a super::Tenant,
}

impl<'a> ApprovalTier<'a> {
    /// The tier of `state` for a call under the policy `policy_hash` at `now`.
    /// `tenant` is the call's session and project, which the approval is bound to.
    pub fn new(
        state: &'a dyn State,
        policy_hash: &'a str,
        now: Timestamp,
        tenant: &'a super::Tenant,
    ) -> Self {
        Self {
            state,
            policy_hash,
            now,
            answer: RefCell::new(None),
            tenant,
        }
    }

    /// The approval the call would take at admission, when the owner granted its
    /// escalation.
    pub fn approved(&self) -> Option<(String, ApprovalKey)> {
        match &*self.answer.borrow() {
            Some(Answer::Approved(id, key)) => Some((id.clone(), key.clone())),
            _ => None,
        }
    }

    /// Whether the tier was asked and has no answer from the owner yet.
    pub fn pending(&self) -> bool {
        *self.answer.borrow() == Some(Answer::Pending)
    }
}

impl EscalationTier for ApprovalTier<'_> {
    fn judge(
        &self,
        tool: &str,
        args: &Args<'_>,
        principal: &Principal,
    ) -> Result<Escalation, String> {
        let digest = bound_digest(self.state, args).map_err(|e| e.to_string())?;
        let key = approval_key(
            tool,
            principal,
            self.tenant,
            &digest,
            self.policy_hash,
            true,
        );
        let found = self
            .state
            .approval_lookup(&key, self.now)
            .map_err(|e| e.to_string())?;
        let answer = if let Some(a) = found {
            Answer::Approved(a.id, key)
        } else if self
            .state
            .denial_lookup(&key, self.now)
            .map_err(|e| e.to_string())?
            .is_some()
        {
            Answer::Denied
        } else {
            Answer::Pending
        };
        let out = match &answer {
            Answer::Approved(..) => Escalation::Approved,
            Answer::Denied => Escalation::Denied,
            Answer::Pending => Escalation::Pending,
        };
        *self.answer.borrow_mut() = Some(answer);
        Ok(out)
    }
}
