//! The acts of authority `hcp`'s commands make (RUNTIME §6): each is begun (the files a
//! call would notice noted first), checked, recorded here, then made; an act that cannot
//! be recorded does not happen (74) and nothing of it is written; one whose change fails
//! after its record is followed by an `act failed` record ([`hcp_runtime::authority::Act`]).
//! An act that would change nothing (a `revoke` of grants not held, a `session end` of no
//! open session) is not made and records nothing.
//!
//! `hcp config set` / `unset` (RUNTIME §3) write `config.json` through
//! [`hcp_runtime::authority::change_file`] (`act` `config set` / `config unset`, with the
//! key and the new file's digest), which records the act, writes, and keeps the digest so
//! the next call does not record the same change as `config changed`.

use crate::error::CliError;
use hcp_runtime::Runtime;
use hcp_runtime::authority::Act;
use hcp_store::StoreError;
use serde_json::Value;

/// A store error of an act as the binary says it: the audit's own refusal (code and
/// hint), or the store's.
pub(crate) fn act_error(e: &StoreError) -> CliError {
    match e {
        StoreError::Audit(a) => super::audit::audit_error(a),
        e => super::session::store_error(e),
    }
}

/// Begins the owner's act `act` ([`Act::by_owner`]).
///
/// # Errors
/// A noticed change that cannot be recorded (74): do not make the act.
pub(crate) fn begin<'a>(rt: &'a Runtime, act: &'a str) -> Result<Act<'a>, CliError> {
    Act::by_owner(rt, act).map_err(|e| act_error(&e))
}

/// Records `act` with what it changes ([`Act::record`]).
///
/// # Errors
/// The audit's refusal (`audit_unavailable`, `witness_unavailable`, `store_io` …, 74):
/// do not make the act.
pub(crate) fn record_act(act: &Act<'_>, changed: Value) -> Result<(), CliError> {
    act.record(changed).map_err(|e| act_error(&e))
}

/// Begins and records the owner's act `act` with what it changes, in one step, for a
/// command that checks nothing between the two; make the change through
/// [`Act::settle`].
///
/// # Errors
/// As [`begin`] and [`record_act`].
pub(crate) fn record<'a>(
    rt: &'a Runtime,
    act: &'a str,
    changed: Value,
) -> Result<Act<'a>, CliError> {
    let a = begin(rt, act)?;
    record_act(&a, changed)?;
    Ok(a)
}
