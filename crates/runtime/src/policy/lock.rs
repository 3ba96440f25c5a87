//! Tool locks (RUNTIME §7): `hcp policy lock` writes `$HCP_HOME/tools.lock.json`
//! (`histos::lock`, version 2) for the verbs of the active packs; while the file exists, a
//! session's call of a verb whose definition no longer matches its entry — its contract,
//! its declared shape or its description — is refused (`tool_drift`, 77) until the owner
//! locks again. The owner's own calls are not checked (the owner writes the lock).
//!
//! Fail closed, at every call of a session:
//!
//! - a lock that does not read is refused with its code: `lock_unparseable` (not JSON, not
//!   UTF-8, unreadable), `lock_duplicate_key`, `lock_unsupported_version` (a newer
//!   `lock_version`), `lock_invalid`, `lock_too_large`; never ignored;
//! - a verb the lock has no entry for (installed or added after the lock) is `tool_drift`:
//!   nobody reviewed it;
//! - a lock entry of the call's pack naming a verb the pack no longer has is `lock_stale`:
//!   the pack changed since the lock. Entries of other packs are checked by `hcp policy
//!   lock --check` and `hcp doctor`, which name every stale entry (a call reads only its
//!   own pack, so its cost does not grow with the number of packs).
//!
//! A call needs only each entry's three hashes, not the reviewed copies that make up most
//! of the file: the lock is parsed and validated strictly once per content (its SHA-256),
//! and the hashes kept in `$HCP_HOME/cache/lock.index` (a text file naming hcp's version,
//! the lock's digest and a digest of its own body); a call whose lock has that digest reads
//! the index instead. An index that is missing, damaged or another lock's is ignored and
//! written again: like the compiled policy cache, it can only make a call faster.

use super::PolicyRefusal;
use super::contracts::{self, PackTool};
use crate::refusal::Refusal;
use hcp_model::Code;
use hcp_store::Home;
use hcp_store::pack::InstalledPack;
use histos::lock::{DriftReport, Lock, LockCode, LockEntry, LockError, LockSource};
use histos::projection::{SourceKind, ToolSource};
use std::path::PathBuf;

/// The lock's file name under `$HCP_HOME`.
pub const LOCK_FILE: &str = "tools.lock.json";

/// `$HCP_HOME/tools.lock.json`.
pub fn lock_path(home: &Home) -> PathBuf {
    home.root().join(LOCK_FILE)
}

/// The refusal of a lock that does not read.
pub fn refusal_of(e: &LockError) -> PolicyRefusal {
    let at = e
        .location
        .as_deref()
        .map(|l| format!(" (at {l})"))
        .unwrap_or_default();
    PolicyRefusal::new(
        Code::from(e.code),
        format!("the tool lock `{LOCK_FILE}` does not read: {}{at}", e.message),
    )
    .with_hint(
        "every session call is refused until the owner writes it again with `hcp policy lock` (or removes it)",
    )
}

/// The store's tool lock; `None` when there is none. Parsed and validated once per
/// content; a call of a lock already seen reads its index (see the module docs).
///
/// # Errors
/// A [`PolicyRefusal`] with the lock's code when the file exists and does not read.
pub fn read(home: &Home) -> Result<Option<Lock>, PolicyRefusal> {
    let path = lock_path(home);
    let bytes = match crate::policy::source::read_regular(&path, histos::lock::MAX_LOCK_BYTES) {
        Ok(Some(b)) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => {
            return Err(PolicyRefusal::new(
                Code::from(LockCode::Unparseable),
                format!("the tool lock `{LOCK_FILE}` does not read: {e}"),
            )
            .with_hint(
                "every session call is refused until the owner writes it again with `hcp policy lock` (or removes it)",
            ));
        }
        // Too large or unreadable: the engine's reader says which, with its code.
        _ => return read_strict(home).map(Some),
    };
    let digest = hex::encode(histos::cache::source_digest(&bytes));
    if let Some(l) = index::read(home, &digest) {
        return Ok(Some(l));
    }
    let Ok(text) = std::str::from_utf8(&bytes) else {
        return read_strict(home).map(Some);
    };
    let l = Lock::parse(text).map_err(|e| refusal_of(&e))?;
    index::write(home, &digest, &l);
    Ok(Some(l))
}

fn read_strict(home: &Home) -> Result<Lock, PolicyRefusal> {
    Lock::load_path(&lock_path(home)).map_err(|e| refusal_of(&e))
}

/// The lock's hashes, as a call needs them (`cache/lock.index`).
mod index {
    use super::*;

    const MAGIC: &str = "hcp-lock-index 1";
    const FILE: &str = "lock.index";

    fn path(home: &Home) -> PathBuf {
        home.root().join(super::super::source::CACHE_DIR).join(FILE)
    }

    fn digest_of(body: &str) -> String {
        hex::encode(histos::cache::source_digest(body.as_bytes()))
    }

    fn sha(s: &str) -> bool {
        s.strip_prefix("sha256:").is_some_and(|h| {
            h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        })
    }

    /// The lock indexed for `lock_digest`, when the index is whole and this hcp's.
    pub(super) fn read(home: &Home, lock_digest: &str) -> Option<Lock> {
        let text = std::fs::read_to_string(path(home)).ok()?;
        let (head, body) = text.split_once('\n')?;
        let mut h = head.strip_prefix(MAGIC)?.split(' ').skip(1);
        let (hcp, digest, body_digest, version, count) =
            (h.next()?, h.next()?, h.next()?, h.next()?, h.next()?);
        if hcp != env!("CARGO_PKG_VERSION")
            || digest != lock_digest
            || body_digest != digest_of(body)
            || h.next().is_some()
        {
            return None;
        }
        let count: usize = count.parse().ok()?;
        let mut tools = Vec::with_capacity(count);
        for line in body.lines() {
            let f: Vec<&str> = line.split('\t').collect();
            let [name, kind, contract, schema, description] = f.as_slice() else {
                return None;
            };
            if !(sha(contract) && sha(schema) && sha(description)) {
                return None;
            }
            tools.push((
                (*name).to_owned(),
                LockEntry {
                    source: LockSource {
                        kind: SourceKind::parse(kind)?,
                        locator: None,
                    },
                    schema_sha256: (*schema).to_owned(),
                    description_sha256: (*description).to_owned(),
                    contract_sha256: (*contract).to_owned(),
                    reviewed: None,
                },
            ));
        }
        if tools.len() != count || !tools.windows(2).all(|w| w[0].0 < w[1].0) {
            return None;
        }
        Some(Lock {
            version: version.parse().ok()?,
            policy: None,
            tools,
        })
    }

    /// Writes the index of `lock` (best effort; a name a line cannot hold is not indexed).
    pub(super) fn write(home: &Home, lock_digest: &str, lock: &Lock) {
        let mut body = String::new();
        for (name, e) in &lock.tools {
            if name.contains(['\t', '\n', '\r']) {
                return;
            }
            body.push_str(&format!(
                "{name}\t{}\t{}\t{}\t{}\n",
                e.source.kind.as_str(),
                e.contract_sha256,
                e.schema_sha256,
                e.description_sha256
            ));
        }
        let head = format!(
            "{MAGIC} {} {lock_digest} {} {} {}\n",
            env!("CARGO_PKG_VERSION"),
            digest_of(&body),
            lock.version,
            lock.tools.len()
        );
        let _ = hcp_store::atomic::write_atomic(&path(home), format!("{head}{body}").as_bytes());
    }
}

/// The lock's entries of `pack` that name no verb it has (`lock_stale`), by tool name.
fn stale_of(lock: &Lock, pack: &InstalledPack) -> Vec<String> {
    let prefix = format!("{}.", pack.id);
    lock.tools
        .iter()
        .filter_map(|(name, _)| name.strip_prefix(&prefix).map(|k| (name, k)))
        .filter(|(_, key)| contracts::definition(pack, key).is_none())
        .map(|(name, _)| name.clone())
        .collect()
}

/// Checks a session's call of `verb_key` of `pack` against `lock` (see the module docs).
///
/// # Errors
/// `lock_stale`, or `tool_drift` naming what moved.
pub fn check_call(lock: &Lock, pack: &InstalledPack, verb_key: &str) -> Result<(), PolicyRefusal> {
    let tool = format!("{}.{verb_key}", pack.id);
    let relock = "the owner reviews the change, then locks again with `hcp policy lock`";
    let stale = stale_of(lock, pack);
    if !stale.is_empty() {
        return Err(PolicyRefusal::new(
            Code::LockStale,
            format!(
                "the tool lock names {} that pack `{}` no longer has: the pack changed since it was locked",
                list(&stale),
                pack.id
            ),
        )
        .with_hint(relock));
    }
    let Some(entry) = lock.entry(&tool) else {
        return Err(PolicyRefusal::new(
            Code::ToolDrift,
            format!(
                "`{tool}` is not in the tool lock: nobody reviewed it since the lock was written"
            ),
        )
        .with_hint(relock));
    };
    let current = contracts::tool_source(pack, verb_key)
        .map_err(|e| PolicyRefusal::new(Code::ToolDrift, format!("`{tool}`: {}", e.message)))?;
    let drift = entry.compare(&current);
    if drift.is_clean() {
        return Ok(());
    }
    let what: Vec<&str> = drift
        .moved()
        .into_iter()
        .map(|h| match h {
            "contract_sha256" => "its argument contract",
            "schema_sha256" => "its declared schema",
            _ => "its description",
        })
        .collect();
    Err(PolicyRefusal::new(
        Code::ToolDrift,
        format!(
            "`{tool}` no longer matches the tool lock: {} changed since it was locked ({})",
            what.join(", "),
            drift.moved().join(", ")
        ),
    )
    .with_hint(relock))
}

fn list(names: &[String]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    quoted.join(", ")
}

/// The verbs of `packs` as tool sources, in name order (what a lock covers: verbs, not
/// stimulus refs).
///
/// # Errors
/// The projection's refusal of a verb (`invalid_import` …), naming it.
pub fn sources(packs: &[InstalledPack]) -> Result<Vec<(ToolSource, String)>, Refusal> {
    let mut out = Vec::new();
    for p in packs {
        for PackTool {
            name,
            key,
            stimulus,
            ..
        } in contracts::tools_of(p)
        {
            if stimulus {
                continue;
            }
            let s = contracts::tool_source(p, &key).map_err(|e| {
                Refusal::new(
                    Code::from(e.code),
                    format!("`{name}` cannot be locked: {}", e.message),
                )
            })?;
            out.push((s, format!("packs/{}/surface.json#/verbs/{key}", p.id)));
        }
    }
    out.sort_by(|a, b| a.0.name.cmp(&b.0.name));
    Ok(out)
}

/// The lock of the active verbs of `packs`, naming the store's policy file (`policy`).
pub fn build(sources: &[(ToolSource, String)], policy: Option<&str>) -> Lock {
    Lock::of(sources.iter().map(|(s, l)| (s, Some(l.as_str()))), policy)
}

/// Writes `lock` as `$HCP_HOME/tools.lock.json`, atomically (temporary file, `fsync`,
/// `rename`).
///
/// # Errors
/// The store's.
pub fn write(home: &Home, lock: &Lock) -> Result<(), Refusal> {
    hcp_store::atomic::write_atomic(&lock_path(home), lock.to_json().as_bytes())
        .map_err(|e| Refusal::store(&e))
}

/// Every difference between `lock` and the active verbs `current`: drifted and unlocked
/// verbs, and stale entries (`missing`: verbs that no longer exist or are not active).
pub fn check_all(lock: &Lock, current: &[(ToolSource, String)]) -> DriftReport {
    let tools: Vec<ToolSource> = current.iter().map(|(s, _)| s.clone()).collect();
    lock.check(&tools)
}
