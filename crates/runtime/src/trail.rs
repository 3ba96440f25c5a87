//! The audit trail's part in a call that the pipeline's steps call into (RUNTIME §5.4,
//! §6): what a call answers when its outcome record could not be written.

use hcp_model::CallFacts;
use hcp_model::facts::Deferred;
use hcp_store::audit::AuditError;
use serde_json::Value;

/// The result field that marks a call whose outcome record could not be written.
pub const OUTCOME_DEFERRED: &str = "outcome_deferred";

/// The verb ran and its outcome record could not be written (RUNTIME §6: an I/O error;
/// the reserve keeps a full disk from causing one): the call answers with the child's
/// result, never with a refusal — a harness must never retry a write that happened — and
/// the result says so ([`OUTCOME_DEFERRED`]: `{"code", "message"}`, the audit's failure).
/// The intent stands, so the trail shows the call `interrupted`. Answers the call's
/// `audit_id` (its intent's).
pub(crate) fn defer_outcome(facts: &mut CallFacts, intent: String, e: &AuditError) -> String {
    facts.outcome_deferred = Some(Deferred {
        code: e.code(),
        message: format!(
            "the verb ran, but its outcome record could not be written: {e}; the trail shows the call interrupted"
        ),
    });
    intent
}

/// The note a text face prints on stderr for a result marked [`OUTCOME_DEFERRED`].
pub fn deferred_note(extra: &serde_json::Map<String, Value>) -> Option<String> {
    let d = extra.get(OUTCOME_DEFERRED)?;
    Some(format!(
        "hcp: {} ({OUTCOME_DEFERRED}, {})",
        d.get("message").and_then(Value::as_str).unwrap_or(""),
        d.get("code").and_then(Value::as_str).unwrap_or("")
    ))
}

/// The audit's reserve for `hcp doctor` (RUNTIME §5.4), with a problem when even the
/// reserve is short (calls are then refused before anything runs), when the disk has less
/// free space than the reserve keeps (the reserve is then spent, not refilled: calls run
/// and are recorded from it until it is short) or the file system cannot keep one.
pub(crate) fn reserve_health(
    home: &hcp_store::Home,
    problems: &mut Vec<String>,
) -> Option<hcp_store::audit::reserve::ReserveReport> {
    use hcp_store::audit::reserve::OUTCOME_MAX;
    let r = match hcp_store::audit::AuditLog::new(home).reserve_report() {
        Ok(r) => r,
        Err(e) => {
            problems.push(format!("cannot read the audit's reserve: {e}"));
            return None;
        }
    };
    let free = r.free.map_or("unknown".to_owned(), bytes);
    if let Some(fs) = r.cannot_keep {
        problems.push(format!(
            "the store is on {fs}, which cannot keep the audit's reserve (blocks allocated ahead still need new space there): a child that fills the disk can make calls unrecordable; keep `HCP_HOME` on another file system"
        ));
    } else if r.reserved < 2 * OUTCOME_MAX {
        problems.push(format!(
            "the audit's reserve is short: {} left of {} ({free} free on the disk): calls are refused (`audit_unavailable`) until space is freed",
            bytes(r.reserved),
            bytes(r.target)
        ));
    } else if r.free.is_some_and(|f| f < r.target) {
        problems.push(format!(
            "the store's disk is full: {free} free, less than the audit's reserve of {}: calls run and are recorded from the reserve ({} left) and are refused (`audit_unavailable`) once it is short; free space on the disk of `{}`",
            bytes(r.target),
            bytes(r.reserved),
            home.root().display()
        ));
    }
    Some(r)
}

/// A size in bytes as people read it: `512 B`, `8 KiB`, `1.0 MiB`.
pub fn bytes(n: u64) -> String {
    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * 1024;
    const GIB: u64 = 1024 * MIB;
    #[allow(clippy::cast_precision_loss)]
    match n {
        n if n >= GIB => format!("{:.1} GiB", n as f64 / GIB as f64),
        n if n >= MIB => format!("{:.1} MiB", n as f64 / MIB as f64),
        n if n >= KIB => format!("{} KiB", n / KIB),
        n => format!("{n} B"),
    }
}
