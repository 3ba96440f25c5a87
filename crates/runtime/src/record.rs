//! The record of one call: what it learned so far ([`Record`]), and the audit records and
//! answers made of it — the one record of a refusal ([`Record::entry`]), the `intent` of
//! an allowed call ([`Record::intent`]) and, once admitted, its `outcome`
//! ([`Record::outcome`]); the answer of a refusal ([`Record::refusal_answer`]).

use crate::call::Answer;
use crate::refusal::Refusal;
use hcp_model::{CallFacts, Code, ExecResult, Land, Operation};
use hcp_store::audit::{Decision, Entry, Intent, Outcome};
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Instant;

/// What a call learned so far, for its result and its audit records.
#[derive(Debug)]
pub struct Record {
    /// When the call started.
    pub started: Instant,
    /// The resolved pack.
    pub pack_id: Option<String>,
    /// The verb key (or the target as asked, or the stimulus ref).
    pub verb_key: Option<String>,
    /// The verb's operation.
    pub operation: Option<Operation>,
    /// The verb's land.
    pub land: Option<Land>,
    /// The principal the record is made under.
    pub principal: Option<String>,
    /// The call's project.
    pub project: Option<String>,
    /// The digest of the arguments.
    pub args_digest: Option<String>,
    /// What the call learned beyond those, for its records and its result
    /// ([`CallFacts`]).
    pub facts: CallFacts,
    /// What a call refused at the confirm gate would run (the MCP face).
    pub preview: Option<Box<crate::confirm::Preview>>,
    /// The admitted call's intent record (its `id` is the `audit_id`) and the extra
    /// fields it carries, until the outcome is written: then a stop is an outcome, not a
    /// refusal (RUNTIME §6: every intent gets an outcome unless hcp dies).
    pub admitted: Option<(String, BTreeMap<String, Value>)>,
}

impl Record {
    /// Nothing known yet; the clock starts. Until the arguments are known the record's
    /// digest is that of no arguments, by `rt`'s state.
    pub fn start(rt: &crate::Runtime) -> Self {
        Self {
            args_digest: rt.state().args_digest(&[]).ok(),
            ..Self::new()
        }
    }

    fn new() -> Self {
        Self {
            started: Instant::now(),
            pack_id: None,
            verb_key: None,
            operation: None,
            land: None,
            principal: None,
            project: None,
            args_digest: None,
            facts: CallFacts::default(),
            preview: None,
            admitted: None,
        }
    }

    /// Milliseconds since the call started.
    pub fn elapsed_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// The audit entry of a decision: `code` set for a refusal (`Deny`), or for an allowed
    /// call that ended abnormally (`timeout`, `cancelled`, `output_withheld`).
    pub fn entry(&self, decision: Decision, code: Option<Code>, exit_code: Option<i32>) -> Entry {
        Entry {
            principal: self.principal.clone().unwrap_or_else(|| "unknown".into()),
            project: self.project.clone(),
            pack_id: self.pack_id.clone(),
            verb_key: self.verb_key.clone().unwrap_or_default(),
            operation: self.operation,
            land: self.land,
            decision,
            code,
            args_digest: self.args_digest.clone().unwrap_or_default(),
            exit_code,
            duration_ms: self.elapsed_ms(),
            extra: self.facts.audit_fields(),
        }
    }

    /// The `intent` record of the call about to be admitted: what is known now, the
    /// additive fields among it (`policy_hash`, `rule`, `approval_id`, `sandbox`, `face`).
    pub fn intent(&self) -> Intent {
        Intent {
            principal: self.principal.clone().unwrap_or_else(|| "unknown".into()),
            project: self.project.clone(),
            pack_id: self.pack_id.clone().unwrap_or_default(),
            verb_key: self.verb_key.clone().unwrap_or_default(),
            operation: self.operation.unwrap_or(Operation::Read),
            land: self.land,
            args_digest: self.args_digest.clone().unwrap_or_default(),
            extra: self.facts.audit_fields(),
        }
    }

    /// The admitted call's `audit_id` (its intent's `id`), until its outcome is taken.
    pub fn admitted_id(&self) -> Option<String> {
        self.admitted.as_ref().map(|(id, _)| id.clone())
    }

    /// The answer of a call that ended with exit status `exit` without a result of a run
    /// of its own (a sense's relay), with its `audit_id`.
    pub fn answer(&mut self, exit: u8, audit_id: Option<String>) -> Answer {
        let result = ExecResult {
            ok: exit == 0,
            pack_id: self.pack_id.clone(),
            verb_key: self.verb_key.clone(),
            operation: self.operation.map(|o| o.to_string()),
            land: self.land.map(|l| l.to_string()),
            error: None,
            code: None,
            hint: None,
            exit_code: Some(i32::from(exit)),
            stdout: None,
            stderr: None,
            data: Value::Null,
            truncated: false,
            duration_ms: self.elapsed_ms(),
            audit_id,
            extra: self.facts.result_fields(),
        };
        Answer {
            result,
            exit,
            stdout: Vec::new(),
            stderr: Vec::new(),
            preview: None,
            principal: self.principal.clone(),
            facts: std::mem::take(&mut self.facts),
        }
    }

    /// Notes that `intent` was admitted as record `audit_id`.
    pub fn admitted(&mut self, audit_id: String, intent: Intent) {
        self.admitted = Some((audit_id, intent.extra));
    }

    /// The `outcome` record of the admitted call (`None` before admission, or once taken):
    /// `code` for a run that did not end on its own or never started (`timeout`,
    /// `cancelled`, `output_withheld`, `spawn_failed`, `bin_changed` …), the child's exit
    /// code, the bytes read from its streams (kept or not) and whether either was cut at
    /// its cap; extra: the additive fields learned after admission (`signal`,
    /// `post_rule`, `approved_by` …). Taking it means a later stop writes no second one.
    pub fn outcome(
        &mut self,
        code: Option<Code>,
        exit_code: Option<i32>,
        bytes: (u64, u64),
        truncated: bool,
    ) -> Option<Outcome> {
        let (intent, at_admission) = self.admitted.take()?;
        let mut extra = self.facts.audit_fields();
        extra.retain(|k, v| at_admission.get(k) != Some(v));
        Some(Outcome {
            intent,
            principal: self.principal.clone().unwrap_or_else(|| "unknown".into()),
            pack_id: self.pack_id.clone().unwrap_or_default(),
            verb_key: self.verb_key.clone().unwrap_or_default(),
            code,
            exit_code,
            duration_ms: self.elapsed_ms(),
            stdout_bytes: bytes.0,
            stderr_bytes: bytes.1,
            truncated,
            extra,
        })
    }

    /// The answer of a refusal, with the audit id of its record when it was written.
    pub fn refusal_answer(&mut self, r: Refusal, audit_id: Option<String>) -> Answer {
        let exit = r.exit();
        let result = ExecResult {
            ok: false,
            pack_id: self.pack_id.clone(),
            verb_key: self.verb_key.clone(),
            operation: self.operation.map(|o| o.to_string()),
            land: self.land.map(|l| l.to_string()),
            error: Some(r.message),
            code: Some(r.code),
            // Every refusal names its next step: its own hint, else its code's, naming
            // the call's pack.
            hint: r
                .hint
                .or_else(|| Some(r.code.next_step_for(self.pack_id.as_deref()))),
            exit_code: None,
            stdout: None,
            stderr: None,
            data: Value::Null,
            truncated: false,
            duration_ms: self.elapsed_ms(),
            audit_id,
            extra: self.facts.result_fields(),
        };
        Answer {
            result,
            exit,
            stdout: Vec::new(),
            stderr: Vec::new(),
            preview: self.preview.take(),
            principal: self.principal.clone(),
            facts: std::mem::take(&mut self.facts),
        }
    }
}

/// The refusal answer of a call that never reached the pipeline (a bad envelope, a value
/// too long for MCP): not audited, as no principal was resolved.
pub fn early_refusal(r: Refusal) -> Answer {
    Record::new().refusal_answer(r, None)
}
