//! The end of a call (RUNTIME §6): an admitted call's `outcome` record — its exit code,
//! duration, the bytes read from each stream and `truncated` — and the answer; for a
//! call that stopped, its one refusal record, or after admission its outcome.

use super::Stop;
use super::post::{Posted, Withheld};
use super::run::Relayed;
use super::target::Verb;
use crate::Runtime;
use crate::call::Answer;
use crate::record::Record;
use crate::refusal::Refusal;
use hcp_gate::Allowed;
use hcp_model::{Code, ExecResult};
use hcp_store::audit::Decision as Logged;
use serde_json::Value;

/// A verb's outcome record, then its answer.
///
/// When the outcome cannot be written the verb ran: the answer is its result, marked
/// `outcome_deferred`, and its intent shows the call interrupted (RUNTIME §6).
///
/// # Errors
/// `internal_error` for a run without an admission.
pub(crate) fn verb(
    rt: &Runtime,
    (verb, allowed): (&Verb, &Allowed),
    p: Posted,
    rec: &mut Record,
) -> Result<Answer, Stop> {
    let Posted {
        ran,
        stdout,
        exit,
        code,
        error,
        withheld,
    } = p;
    let outcome = ran.outcome;
    let run = (
        outcome.exit_code,
        outcome.stdout_total,
        outcome.stderr_total,
    );
    let audit_id = record(rt, rec, code, run, (outcome.truncated(), ran.duration_ms))?;
    // Bytes that are not UTF-8 are never replaced by U+FFFD: the result carries them as
    // base64 and says so (`stdout_encoding`), and `data` is null.
    let (stdout_text, binary) = match std::str::from_utf8(&stdout) {
        Ok(text) => (text.to_owned(), false),
        // Text cut by the cap in the middle of a character: the whole characters.
        Err(e) if e.error_len().is_none() && outcome.stdout_truncated => (
            String::from_utf8_lossy(&stdout[..e.valid_up_to()]).into_owned(),
            false,
        ),
        Err(_) => {
            use base64::Engine as _;
            (
                base64::engine::general_purpose::STANDARD.encode(&stdout),
                true,
            )
        }
    };
    let mut extra = rec.facts.result_fields();
    if binary {
        extra.insert("stdout_encoding".into(), Value::from("base64"));
    }
    let data = if outcome.stdout_truncated || binary {
        Value::Null
    } else {
        serde_json::from_str(&stdout_text).unwrap_or(Value::Null)
    };
    let ok = !outcome.timed_out
        && !outcome.cancelled
        && withheld == Withheld::No
        && outcome.exit_code == 0;
    let result = ExecResult {
        ok,
        pack_id: Some(verb.pack.id.to_string()),
        verb_key: Some(verb.key.clone()),
        operation: Some(allowed.operation.to_string()),
        land: Some(allowed.land.to_string()),
        error,
        code,
        hint: None,
        exit_code: Some(outcome.exit_code),
        stdout: Some(stdout_text),
        stderr: Some(String::from_utf8_lossy(&outcome.stderr).into_owned()),
        data,
        truncated: outcome.truncated(),
        duration_ms: ran.duration_ms,
        audit_id: Some(audit_id),
        extra,
    };
    Ok(Answer {
        result,
        exit,
        stdout,
        stderr: outcome.stderr,
        preview: None,
        principal: rec.principal.clone(),
        facts: std::mem::take(&mut rec.facts),
    })
}

/// The outcome record of an admitted call that ran (RUNTIME §6): `code` when the run did
/// not end on its own (`timeout`, `cancelled`, `output_withheld`), the exit code, the
/// bytes read from each stream, whether either was cut and its duration. Answers the
/// call's `audit_id` (its intent's `id`). Written without a sync of its own: the next
/// durable record carries it.
fn record(
    rt: &Runtime,
    rec: &mut Record,
    code: Option<Code>,
    (exit_code, stdout_bytes, stderr_bytes): (i32, u64, u64),
    (truncated, duration_ms): (bool, u64),
) -> Result<String, Stop> {
    let bytes = (stdout_bytes, stderr_bytes);
    let Some(mut o) = rec.outcome(code, Some(exit_code), bytes, truncated) else {
        return Err(Stop::Unrecorded(Refusal::new(
            Code::InternalError,
            "a run without an admission",
        )));
    };
    o.duration_ms = duration_ms;
    match rt.state().record_outcome(&o) {
        Ok(_) => Ok(o.intent),
        // The child ran: its result is the answer, marked (RUNTIME §6 `outcome_deferred`).
        Err(e) => Ok(crate::trail::defer_outcome(&mut rec.facts, o.intent, &e)),
    }
}

/// A sense's outcome record when its relay stopped, whatever the reason (best effort: a
/// missing outcome shows the sense as interrupted), then its answer: the relay's exit
/// status, or the refusal of a trigger that could not start.
pub(crate) fn stimuli(rt: &Runtime, r: Relayed, rec: &mut Record) -> Answer {
    rec.facts.events = Some(r.events);
    rec.facts.connections = r.connections;
    let (code, exit) = match &r.status {
        Ok(status) => (None, Some(i32::from(*status))),
        Err(e) => (Some(e.code), None),
    };
    let audit_id = rec.admitted_id();
    if let Some(o) = rec.outcome(code, exit, (r.stdout_bytes, r.stderr_bytes), false) {
        let _ = rt.state().record_outcome(&o);
    }
    match r.status {
        Ok(status) => rec.answer(status, audit_id),
        Err(refusal) => rec.refusal_answer(refusal, audit_id),
    }
}

/// The record of a call that stopped (RUNTIME §6): the outcome of an admitted call (its
/// code the stop's: nothing ran, or the run failed — a spawn refused after admission, a
/// changed bin), else the refusal's one record when the stop is recorded; then the
/// refusal's answer, with the call's `audit_id` (an admitted call's is its intent's,
/// whatever became of the outcome).
pub(crate) fn stopped(rt: &Runtime, rec: &mut Record, stop: Stop) -> Answer {
    let code = stop.refusal().code;
    let audit_id = match rec.outcome(Some(code), None, (0, 0), false) {
        Some(o) => {
            let _ = rt.state().record_outcome(&o);
            Some(o.intent)
        }
        None => match &stop {
            Stop::Unrecorded(_) => None,
            Stop::Recorded(_) => {
                let entry = rec.entry(Logged::Deny, Some(code), None);
                rt.state().record(&entry).ok().map(|a| a.id)
            }
        },
    };
    rec.refusal_answer(stop.into_refusal(), audit_id)
}
