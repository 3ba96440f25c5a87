//! Telling a store of an earlier version from a store of this version whose marker, keys
//! and trail were removed or rewritten (RUNTIME §4 "Stores are made on purpose", §6
//! "Crash versus tampering").
//!
//! A store of an earlier version (format 1: no `store.json`, no `audit/chain.key`, a trail
//! of plain SHA-256 records) gains its marker and keys with a `migrate` record at its first
//! use by this version. An earlier version never wrote what only this version writes, so:
//!
//! - a store without its marker and chain key that holds a file or a field only this
//!   version writes ([`current_format_sign`]) is a store of this version whose marker and
//!   trail were removed: `missing_log`, never migrated, never verified as an earlier one;
//! - a record with a plain SHA-256 hash that only a keyed store writes ([`keyed_only`]: an
//!   act of authority — `init`, `migrate`, `witness`, `act made`, `act failed`, an act's
//!   `phase: "intent"` — or a kind format 1 did not have) was not written by an earlier
//!   version: the chain was recomputed without the key (`hash_mismatch` at its line).
//!
//! What counts as a sign is listed in [`current_format_sign`]'s documentation; each is
//! something a format-1 hcp could not write. A store of this version that holds none of them (packs
//! installed, nothing granted, no runtime policy or `config.json` ever noticed) cannot be
//! told from an earlier one by its files; its witness, when it has one, still holds its
//! checkpoints, which is a sign too.

use crate::home::{Home, StoreDir};
use crate::pack::record::{RECORD_DIR, RECORD_FILE};
use serde_json::{Map, Value};
use std::path::Path;

/// The kinds of record a trail of format 1 holds (its `kind` field, when it has one).
const EARLIER_KINDS: [&str; 5] = ["intent", "outcome", "refusal", "event", "recovery"];

/// The fields only an act of authority has (format 2).
const ACT_FIELDS: [&str; 2] = ["act", "phase"];

/// The largest state file read for a sign, in bytes (an install record or an approval is
/// a few KiB); a larger one is not looked into.
const SIGN_FILE_MAX: usize = 1 << 20;

/// Why the record `m`, whose hash is a plain SHA-256, cannot have been written by an
/// earlier version (see the module docs); `None` when it can.
pub(crate) fn keyed_only(m: &Map<String, Value>) -> Option<String> {
    let act = m.get("act").and_then(Value::as_str);
    match m.get("kind") {
        None | Some(Value::Null) => {}
        Some(Value::String(k)) if EARLIER_KINDS.contains(&k.as_str()) => {}
        Some(k) => {
            let what = match act {
                Some(a) => format!("an act of authority (`{}`)", a.escape_debug()),
                None => format!("a record of kind {k}"),
            };
            return Some(format!(
                "{what} with a plain SHA-256 hash: only a keyed store writes such records, and it writes them keyed; the chain was recomputed without the chain key"
            ));
        }
    }
    ACT_FIELDS.iter().find(|f| m.contains_key(**f)).map(|f| {
        format!(
            "a record with the field `{f}`, which only a keyed store's acts of authority have, and a plain SHA-256 hash: the chain was recomputed without the chain key"
        )
    })
}

/// What only a store of this version holds outside its marker and `audit/` (a sign):
///
/// - `state/authority-files.json`, the keyed digests of the runtime policy and
///   `config.json` as last recorded;
/// - `state/grants/`, the grants kept one file per principal (an earlier hcp kept one
///   `state/grants.json`, split into these when the store is migrated, after its marker);
/// - an install record (`packs/<id>/.hcp/record.json`) that counts the grants made on it
///   (`grants`);
/// - an approval (`state/approvals/<id>.json`) bound to its session or project;
/// - any state file that carries a keyed MAC ([`crate::stamp::MAC_FIELD`], `mac`): a
///   session (`state/sessions/<digest>.json`), an approval, a principal's grants — an
///   earlier hcp wrote none of them with one;
/// - checkpoints of this store (by `state/store-id`) held by the witness `config.json`
///   names.
///
/// The first found, in words naming its path; `None` when there is none.
pub(crate) fn current_format_sign(home: &Home) -> Option<String> {
    let state = home.dir(StoreDir::State);
    let stamps = state.join("authority-files.json");
    if stamps.symlink_metadata().is_ok() {
        return Some(format!(
            "`{}` (the keyed digests of the runtime policy and `config.json`)",
            stamps.display()
        ));
    }
    let grants = crate::grant::grants_dir(home);
    if grants.symlink_metadata().is_ok() {
        return Some(format!(
            "`{}` (grants kept one file per principal)",
            grants.display()
        ));
    }
    if let Ok(packs) = std::fs::read_dir(home.dir(StoreDir::Packs)) {
        for p in packs.flatten() {
            let record = p.path().join(RECORD_DIR).join(RECORD_FILE);
            if json_has(&record, &["grants"]) {
                return Some(format!(
                    "`{}` (an install record that counts the grants made on it)",
                    record.display()
                ));
            }
        }
    }
    if let Ok(approvals) = std::fs::read_dir(state.join("approvals")) {
        for a in approvals.flatten() {
            let path = a.path();
            if path.extension().is_some_and(|e| e == "json")
                && json_has(&path, &["session", "project"])
            {
                return Some(format!(
                    "`{}` (an approval bound to its session and project)",
                    path.display()
                ));
            }
        }
    }
    if let Some(path) = keyed_state_file(&state) {
        return Some(format!(
            "`{}` (a state file with a keyed MAC, `{}`)",
            path.display(),
            crate::stamp::MAC_FIELD
        ));
    }
    witnessed(home)
}

/// The first state file below `state/` (its sessions, approvals and grants) whose JSON
/// object has the field [`crate::stamp::MAC_FIELD`].
fn keyed_state_file(state: &Path) -> Option<std::path::PathBuf> {
    for dir in ["sessions", "approvals", "grants"] {
        let Ok(entries) = std::fs::read_dir(state.join(dir)) else {
            continue;
        };
        let mut paths: Vec<_> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        paths.sort();
        if let Some(p) = paths
            .into_iter()
            .find(|p| json_has(p, &[crate::stamp::MAC_FIELD]))
        {
            return Some(p);
        }
    }
    None
}

/// Whether the JSON object in the file at `path` has one of `keys`.
fn json_has(path: &Path, keys: &[&str]) -> bool {
    super::fsutil::read_small(path, SIGN_FILE_MAX)
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .and_then(|v| {
            v.as_object()
                .map(|o| keys.iter().any(|k| o.contains_key(*k)))
        })
        .unwrap_or(false)
}

/// The witness `config.json` names, when it holds checkpoints of this store.
fn witnessed(home: &Home) -> Option<String> {
    let id = crate::skill::export::store_id(home)?;
    let w = crate::made::witness_of(home.root()).ok().flatten()?;
    match w.is_new_for(&id) {
        Ok(false) => Some(format!(
            "the witness ({}) (it holds checkpoints of this store, `{id}`)",
            w.describe()
        )),
        _ => None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn records_of_format_one_pass_and_acts_do_not() {
        for ok in [
            json!({"kind": "refusal", "decision": "deny"}),
            json!({"kind": "intent"}),
            json!({"decision": "allow"}),
            json!({"kind": "event", "changed": 1}),
        ] {
            assert_eq!(keyed_only(&obj(ok.clone())), None, "{ok}");
        }
        for bad in [
            json!({"kind": "authority", "act": "init", "changed": {"format": 2}}),
            json!({"kind": "authority", "act": "act made"}),
            json!({"kind": "refusal", "phase": "intent"}),
            json!({"act": "witness"}),
            json!({"kind": "mystery"}),
        ] {
            assert!(keyed_only(&obj(bad.clone())).is_some(), "{bad}");
        }
    }
}
