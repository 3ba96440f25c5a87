//! The `binding.degraded` stimulus (RUNTIME §8): when binding mint fails and the pack
//! declares the stimulus (a trigger with that ref and its policy entry), the runtime
//! records it for the principal, for `hcp sense` to deliver. The event names the family,
//! the verb, the refusal code and why — `{"family", "verb_key", "code", "reason":
//! "missing" | "expired" | "insecure" | "store"}` — never a credential. The store's
//! `stimulus` queue only keeps what it is given; what the pack declares is decided here.

use hcp_store::Home;
use hcp_store::binding::MintError;
use hcp_store::pack::InstalledPack;
use hcp_store::stimulus::{self, BINDING_DEGRADED, Recorded};
use jiff::Timestamp;

/// Records `binding.degraded` for `principal` on `pack` after binding mint failed with
/// `error` for `verb_key`; `Ok(None)` when the pack does not declare the stimulus.
///
/// # Errors
/// The store's, from `hcp_store::stimulus::record`.
pub fn record(
    home: &Home,
    pack: &InstalledPack,
    principal: &str,
    verb_key: &str,
    error: &MintError,
    now: Timestamp,
) -> hcp_store::StoreResult<Option<Recorded>> {
    let declared = pack
        .manifest
        .stimulus_triggers
        .iter()
        .any(|t| t.reference == BINDING_DEGRADED)
        && pack.policy.stimuli.contains_key(BINDING_DEGRADED);
    if !declared {
        return Ok(None);
    }
    let reason = match error {
        MintError::Missing { .. } => "missing",
        MintError::Expired { .. } => "expired",
        MintError::Insecure { .. } => "insecure",
        MintError::Store(_) => "store",
    };
    let event = serde_json::json!({
        "family": pack.manifest.family(),
        "verb_key": verb_key,
        "code": error.code().as_str(),
        "reason": reason,
    });
    stimulus::record(
        home,
        principal,
        pack.id.as_str(),
        BINDING_DEGRADED,
        event,
        now,
    )
    .map(Some)
}
