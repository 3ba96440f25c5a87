//! The acts of authority `hcp`'s commands make (RUNTIME §6): each is checked, then
//! recorded here, then made; an act that cannot be recorded does not happen (74) and
//! nothing of it is written ([`hcp_runtime::authority`]).
//!
//! `hcp config set` / `unset` (RUNTIME §3) write `config.json` through
//! [`hcp_runtime::authority::change_file`] (`act` `config set` / `config unset`, with the
//! key and the new file's digest), which records the act, writes, and keeps the digest so
//! the next call does not record the same change as `config changed`.

use crate::error::CliError;
use hcp_runtime::Runtime;
use hcp_store::audit::Actor;
use serde_json::Value;

/// Records the owner's act `act` with what it changes.
///
/// # Errors
/// The audit's refusal (`audit_unavailable`, `witness_unavailable` …, 74): do not make
/// the act.
pub(crate) fn record(rt: &Runtime, act: &str, changed: Value) -> Result<(), CliError> {
    record_as(rt, Actor::owner(), act, changed)
}

/// Records `actor`'s act `act` with what it changes.
///
/// # Errors
/// As [`record`].
pub(crate) fn record_as(
    rt: &Runtime,
    actor: Actor,
    act: &str,
    changed: Value,
) -> Result<(), CliError> {
    hcp_runtime::authority::record(rt, act, actor, changed)
        .map(|_| ())
        .map_err(|e| super::audit::audit_error(&e))
}
