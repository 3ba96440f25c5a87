//! The keyed MACs of the state files that carry authority (RUNTIME §4 "Fault isolation",
//! §6 "Every act of authority is a record too"): a principal's grants
//! (`state/grants/<principal>.json`), a session (`state/sessions/<digest>.json`) and an
//! approval (`state/approvals/<id>.json`).
//!
//! Each such file is a JSON object with a field `mac`, written by hcp when it makes the
//! act: 64 hex digits of HMAC-SHA-256 under the store's chain key (`audit/chain.key`, the
//! owner's only and in no call's view) of
//!
//! ```text
//! "hcp-state-file/1\n" + PATH + "\n" + canonical_json(the object without "mac")
//! ```
//!
//! where `PATH` is the file's path below `state/` (`grants/alice.json`). A file edited by
//! hand (a grant added, a session's expiry or project changed, an approval marked
//! approved), one whose `mac` was removed, or one copied from another principal's or
//! session's name, is damaged ([`crate::StoreError::Damaged`], `store_damaged`): it
//! refuses the principal or the call it belongs to and grants nothing; `hcp doctor` lists
//! it with its repair ([`crate::damage::scan`]). Reading a file costs one HMAC and no
//! read beyond the file itself: the key is read once per process, with the audit trail
//! ([`crate::Home`] shares it).
//!
//! A store of an earlier version has these files without `mac`. They are read as they
//! are until the store's first call or act of authority by this version, which stamps
//! them under the store lock ([`migrate`]) and records a `migrate` act whose `changed`
//! holds [`KEYED_FIELD`]. From then on — and from `init` on for a store this version made,
//! whose `init` record holds [`KEYED_FIELD`] too — a file without `mac` is damage
//! ([`keyed`]: what the trail says, so removing the files' `mac` together with any
//! cache of this answer is not a way back to an unkeyed store).
//!
//! The install records and the bindings carry the same MAC, bound to their names
//! ([`records`]).
//!
//! The MAC is the file store's: the fleet's state in PostgreSQL (`hcp-state-pg`) is
//! guarded by the database's roles instead.

use crate::atomic::write_atomic;
use crate::audit::canonical_json;
use crate::error::{StoreError, StoreResult};
use crate::home::{Home, StoreDir};
use crate::lock::StoreLock;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::io::BufRead;
use std::path::{Path, PathBuf};

pub mod records;

/// The domain tag of a state file's MAC: no MAC made for another use of the chain key
/// (a record's hash, an anchor slot, `authority-files.json`) holds for a state file.
pub const STAMP_TAG: &[u8] = b"hcp-state-file/1\n";

/// The field of a state file that holds its MAC.
pub const MAC_FIELD: &str = "mac";

/// The field of an `init` or `migrate` record's `changed` that says the store's state
/// files carry MACs from that record on (its value: the version of the MAC, 1).
pub const KEYED_FIELD: &str = "state_macs";

/// The version of the MAC [`KEYED_FIELD`] names.
pub const KEYED_VERSION: u64 = 1;

/// The path of `path` below `state/`, `/`-separated: what the MAC binds the content to.
fn relative(home: &Home, path: &Path) -> String {
    let state = home.dir(StoreDir::State);
    let rel = path.strip_prefix(&state).unwrap_or(path);
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

fn mac_message(rel: &str, body: &Value) -> Vec<u8> {
    let mut msg = Vec::with_capacity(rel.len() + 256);
    msg.extend_from_slice(rel.as_bytes());
    msg.push(b'\n');
    msg.extend_from_slice(&canonical_json(body));
    msg
}

fn damaged(path: &Path, reason: impl Into<String>) -> StoreError {
    StoreError::Damaged {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// The bytes of the state file at `path` holding `value` (a struct that serializes to a
/// JSON object), with its `mac`: pretty JSON and a newline.
///
/// # Errors
/// [`StoreError::Io`] naming the chain key when it cannot be read (nothing is written
/// without its MAC); [`StoreError::Damaged`] when `value` is not an object.
pub fn seal<T: Serialize>(home: &Home, path: &Path, value: &T) -> StoreResult<Vec<u8>> {
    seal_mac(home, path, value).map(|(bytes, _)| bytes)
}

/// [`seal`], and the MAC it gave the file (what the state ledger keeps for it,
/// [`crate::ledger`]).
///
/// # Errors
/// As [`seal`].
pub fn seal_mac<T: Serialize>(
    home: &Home,
    path: &Path,
    value: &T,
) -> StoreResult<(Vec<u8>, String)> {
    seal_named_mac(home, &relative(home, path), path, value)
}

/// [`seal`] of a file whose MAC binds it to `name` rather than to its path below `state/`:
/// an install record, sealed in `staging/` under the name it will have in `packs/`
/// ([`records::record_name`]). `path` names the file in errors.
///
/// # Errors
/// As [`seal`].
pub fn seal_named<T: Serialize>(
    home: &Home,
    name: &str,
    path: &Path,
    value: &T,
) -> StoreResult<Vec<u8>> {
    seal_named_mac(home, name, path, value).map(|(bytes, _)| bytes)
}

/// [`seal_named`], and the MAC it gave the file.
///
/// # Errors
/// As [`seal`].
pub(crate) fn seal_named_mac<T: Serialize>(
    home: &Home,
    name: &str,
    path: &Path,
    value: &T,
) -> StoreResult<(Vec<u8>, String)> {
    let mut body =
        serde_json::to_value(value).map_err(|e| damaged(path, format!("cannot encode it: {e}")))?;
    let Value::Object(m) = &mut body else {
        return Err(damaged(path, "cannot encode it: not a JSON object"));
    };
    m.remove(MAC_FIELD);
    let key = home.chain_key()?;
    let mac = key.tagged_mac(STAMP_TAG, &mac_message(name, &body));
    if let Value::Object(m) = &mut body {
        m.insert(MAC_FIELD.into(), Value::String(mac.clone()));
    }
    let mut bytes = serde_json::to_vec_pretty(&body)
        .map_err(|e| damaged(path, format!("cannot encode it: {e}")))?;
    bytes.push(b'\n');
    Ok((bytes, mac))
}

/// Writes the state file at `path` holding `value` with its MAC ([`seal`]), then notes it
/// in the state ledger ([`crate::ledger::note`]), under the store lock the caller holds:
/// the one way an act writes a grant, session or approval file.
///
/// # Errors
/// As [`seal`]; [`StoreError`] when the file or the ledger cannot be written, or the
/// ledger is damaged.
pub fn write<T: Serialize>(
    home: &Home,
    lock: &StoreLock,
    path: &Path,
    value: &T,
) -> StoreResult<()> {
    crate::ledger::ready(home, lock)?;
    let (bytes, mac) = seal_mac(home, path, value)?;
    write_atomic(path, &bytes)?;
    crate::ledger::note(home, lock, &[(path, Some(mac))])
}

/// Removes the state file at `path` (absent is fine), then notes in the state ledger that
/// it is gone, under the store lock the caller holds.
///
/// # Errors
/// [`StoreError`] when it cannot be removed or the ledger cannot be written.
pub fn remove(home: &Home, lock: &StoreLock, path: &Path) -> StoreResult<()> {
    crate::ledger::ready(home, lock)?;
    match std::fs::remove_file(path) {
        Ok(()) => crate::atomic::sync_dir(path.parent().unwrap_or(Path::new(".")))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(StoreError::io("remove", path, e)),
    }
    crate::ledger::note(home, lock, &[(path, None)])
}

/// A state file read: its object without `mac`, and why it cannot be trusted, if it
/// cannot (its `mac` is missing or does not hold).
#[derive(Debug)]
pub(crate) struct Opened {
    /// The object, `mac` removed.
    pub(crate) value: Value,
    /// Why the file is damaged although it parses; `None` when its MAC holds (or the store
    /// is not keyed yet and it has none).
    pub(crate) fault: Option<String>,
}

/// The message of the typed parser for `bytes` (its line and column), for a file that is
/// not a JSON object.
fn typed_error<T: DeserializeOwned>(bytes: &[u8]) -> String {
    match serde_json::from_slice::<T>(bytes) {
        Err(e) => e.to_string(),
        Ok(_) => "it is not a JSON object".into(),
    }
}

/// Reads the state file at `path` (its `bytes`) and checks its MAC: one HMAC.
///
/// # Errors
/// [`StoreError::Damaged`] when it is not a JSON object (the message of `T`'s parser);
/// [`StoreError::Io`] naming the chain key when the MAC cannot be checked here.
pub(crate) fn read<T: DeserializeOwned>(
    home: &Home,
    path: &Path,
    bytes: &[u8],
) -> StoreResult<Opened> {
    read_named::<T>(
        home,
        path,
        &relative(home, path),
        bytes,
        || keyed(home),
        "grant, session and approval file",
        Ledgered::State,
    )
}

/// How the state ledger ([`crate::ledger`]) vouches for a file [`read_named`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ledgered {
    /// A grant, session or approval file ([`crate::ledger::vouch`]).
    State,
    /// An install record or a binding file ([`crate::ledger::vouch_record`]).
    Record,
}

/// [`read`] of a file whose MAC binds it to `name` (its path below `state/`, or below the
/// store's root for a file outside it), which must carry a MAC when `must_be_keyed`
/// answers yes; `kind` names what hcp writes with a MAC, for the fault's message; the
/// state ledger vouches for it too, as `ledgered` says.
///
/// # Errors
/// As [`read`].
pub(crate) fn read_named<T: DeserializeOwned>(
    home: &Home,
    path: &Path,
    name: &str,
    bytes: &[u8],
    must_be_keyed: impl Fn() -> bool + Copy,
    kind: &str,
    ledgered: Ledgered,
) -> StoreResult<Opened> {
    let vouch = |mac: &str| match ledgered {
        Ledgered::State => crate::ledger::vouch(home, path, mac),
        Ledgered::Record => crate::ledger::vouch_record(home, path, mac),
    };
    let Ok(Value::Object(mut m)) = serde_json::from_slice::<Value>(bytes) else {
        return Err(damaged(path, typed_error::<T>(bytes)));
    };
    let mac = m.remove(MAC_FIELD);
    let value = Value::Object(m);
    let fault = match mac {
        Some(Value::String(mac)) => {
            let key = home.chain_key()?;
            let msg = mac_message(name, &value);
            if !key.tagged_mac_holds(STAMP_TAG, &msg, &mac) {
                Some(format!(
                    "its `mac` does not hold: it was edited by hand, or copied from another file (hcp writes every {kind} with the MAC of its content and name)"
                ))
            } else {
                match vouch(&mac)? {
                    // A writer may be between the file and the ledger: look again under
                    // the lock, which every writer holds for both.
                    Some(_) if !crate::lock::held_here() => {
                        if let Ok(_lock) = StoreLock::acquire(home)
                            && let Ok(Some(again)) = crate::atomic::read_record(path)
                        {
                            return read_named::<T>(
                                home,
                                path,
                                name,
                                &again,
                                must_be_keyed,
                                kind,
                                ledgered,
                            );
                        }
                        vouch(&mac)?
                    }
                    why => why,
                }
            }
        }
        Some(_) => Some("its `mac` is not a string of hex digits: it was edited by hand".into()),
        None if must_be_keyed() => Some(format!(
            "it carries no `mac`: it was written or edited by hand (hcp writes every {kind} with the MAC of its content and name)"
        )),
        None => None,
    };
    Ok(Opened { value, fault })
}

/// Reads the state file at `path` (its `bytes`) as a `T`, its MAC checked first.
///
/// # Errors
/// [`StoreError::Damaged`] when it does not parse, or its MAC is missing (in a keyed
/// store) or does not hold; [`StoreError::Io`] naming the chain key when the MAC cannot
/// be checked here.
pub(crate) fn open<T: DeserializeOwned>(home: &Home, path: &Path, bytes: &[u8]) -> StoreResult<T> {
    let o = read::<T>(home, path, bytes)?;
    if let Some(reason) = o.fault {
        return Err(damaged(path, reason));
    }
    serde_json::from_value(o.value).map_err(|e| damaged(path, e.to_string()))
}

/// Whether the store's state files must carry a MAC: what its trail says (an `init` or
/// `migrate` record whose `changed` holds [`KEYED_FIELD`]), read once per process, and
/// only for a file without one. A trail that cannot be read answers yes (fails closed).
pub fn keyed(home: &Home) -> bool {
    if let Some(k) = home.keyed_known() {
        return k;
    }
    let k = trail_says_keyed(home);
    home.set_keyed(k);
    k
}

/// Keeps for this process that the store's state files carry MACs (after [`migrate`]'s
/// record).
pub fn mark_keyed(home: &Home) {
    home.set_keyed(true);
}

/// Reads the trail's records for one that says the state files are keyed.
fn trail_says_keyed(home: &Home) -> bool {
    trail_says(home, KEYED_FIELD)
}

/// Reads the trail's records for an `init` or `migrate` record whose `changed` holds
/// `field`. A trail that cannot be read answers yes (fails closed).
pub(crate) fn trail_says(home: &Home, field: &str) -> bool {
    trail_says_in(home, &["init", "migrate"], field)
}

/// [`trail_says`] for records of the acts `acts` only.
pub(crate) fn trail_says_in(home: &Home, acts: &[&str], field: &str) -> bool {
    let log = crate::audit::AuditLog::new(home);
    let Ok(f) = std::fs::File::open(log.path()) else {
        return true;
    };
    let quoted = format!("\"{field}\"");
    let finder = memchr::memmem::Finder::new(quoted.as_bytes());
    let mut reader = std::io::BufReader::with_capacity(64 * 1024, f);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => return false,
            Ok(_) => {}
            Err(_) => return true,
        }
        if finder.find(&line).is_none() {
            continue;
        }
        let Ok(v) = serde_json::from_slice::<Value>(&line) else {
            continue;
        };
        let act = v.get("act").and_then(Value::as_str);
        if act.is_some_and(|a| acts.contains(&a))
            && v.get("changed").and_then(|c| c.get(field)).is_some()
        {
            return true;
        }
    }
}

/// The number in `changed.<field>` of the trail's last `act made` record that holds one;
/// `None` when none does or the trail cannot be read. Reads the whole trail.
pub(crate) fn trail_last_made(home: &Home, field: &str) -> Option<u64> {
    trail_last_made_from(home, field, 0)
}

/// [`trail_last_made`] of the records from byte `from` of the trail on (the records after
/// the anchor's point: a lag the next append adopts).
pub(crate) fn trail_last_made_from(home: &Home, field: &str, from: u64) -> Option<u64> {
    use std::io::Seek;
    let log = crate::audit::AuditLog::new(home);
    let mut f = std::fs::File::open(log.path()).ok()?;
    if from > 0 {
        if f.metadata().ok()?.len() <= from {
            return None;
        }
        f.seek(std::io::SeekFrom::Start(from)).ok()?;
    }
    let quoted = format!("\"{field}\"");
    let finder = memchr::memmem::Finder::new(quoted.as_bytes());
    let mut reader = std::io::BufReader::with_capacity(64 * 1024, f);
    let mut line = Vec::new();
    let mut last = None;
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return last,
            Ok(_) => {}
        }
        if finder.find(&line).is_none() {
            continue;
        }
        let Ok(v) = serde_json::from_slice::<Value>(&line) else {
            continue;
        };
        if v.get("act")
            .and_then(Value::as_str)
            .is_some_and(crate::ledger::names_ledger)
            && let Some(g) = v
                .get("changed")
                .and_then(|c| c.get(field))
                .and_then(Value::as_u64)
        {
            last = Some(g);
        }
    }
}

/// How many state files [`migrate`] gave their MAC, by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Stamped {
    /// Session files.
    pub sessions: usize,
    /// Grant files.
    pub grants: usize,
    /// Approval files.
    pub approvals: usize,
}

/// The state files that carry a MAC, by kind: every session, grant and approval file.
pub(crate) fn keyed_paths(home: &Home) -> Vec<(&'static str, PathBuf)> {
    keyed_files(home)
}

fn keyed_files(home: &Home) -> Vec<(&'static str, PathBuf)> {
    let state = home.dir(StoreDir::State);
    let mut out = Vec::new();
    for (kind, dir, name_ok) in [
        (
            "sessions",
            "sessions",
            (|s: &str| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()))
                as fn(&str) -> bool,
        ),
        ("grants", "grants", |s: &str| {
            crate::session::PrincipalId::parse(s).is_ok()
        }),
        ("approvals", "approvals", |s: &str| {
            s.strip_prefix("apr_")
                .is_some_and(|h| h.len() == 20 && h.bytes().all(|b| b.is_ascii_hexdigit()))
        }),
    ] {
        let Ok(rd) = std::fs::read_dir(state.join(dir)) else {
            continue;
        };
        let mut paths: Vec<PathBuf> = rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .and_then(|n| n.strip_suffix(".json"))
                    .is_some_and(name_ok)
            })
            .collect();
        paths.sort();
        out.extend(paths.into_iter().map(|p| (kind, p)));
    }
    out
}

/// Gives the state files of a store of an earlier version their MACs (RUNTIME §4 "Stores
/// are made on purpose": a store of an earlier version gains what this version keeps at
/// its first use), under the store lock the caller holds: every session, grant and
/// approval file that is a JSON object without `mac` is rewritten with it (one that does
/// not parse stays as it is: it is damage either way). Answers `None`, writing nothing,
/// when the trail says the files are keyed already (a store this version made, or one
/// migrated before): then a file without `mac` stays damage. Otherwise the caller records
/// the `migrate` act with [`KEYED_FIELD`] and what was stamped, then [`mark_keyed`]. The
/// files are stamped before that record: stamping changes no authority (the same
/// contents, now keyed), and a process killed between the two leaves a store whose next
/// call stamps what is left and records the act.
///
/// # Errors
/// [`StoreError`] when the chain key cannot be read or a file cannot be rewritten.
pub fn migrate(home: &Home, lock: &StoreLock) -> StoreResult<Option<Stamped>> {
    if trail_says_keyed(home) {
        home.set_keyed(true);
        return Ok(None);
    }
    let mut stamped = Stamped::default();
    for (kind, path) in keyed_files(home) {
        let Ok(Some(bytes)) = crate::atomic::read_record(&path) else {
            continue;
        };
        let Ok(Value::Object(m)) = serde_json::from_slice::<Value>(&bytes) else {
            continue;
        };
        if m.contains_key(MAC_FIELD) {
            continue;
        }
        let (bytes, mac) = seal_mac(home, &path, &Value::Object(m))?;
        write_atomic(&path, &bytes)?;
        // A store that keeps a ledger already (one whose trail lost its word of the MACs)
        // has its entry follow; one that does not gains it whole next.
        crate::ledger::note(home, lock, &[(&path, Some(mac))])?;
        match kind {
            "sessions" => stamped.sessions += 1,
            "grants" => stamped.grants += 1,
            _ => stamped.approvals += 1,
        }
    }
    Ok(Some(stamped))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn store() -> (tempfile::TempDir, Home) {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("hcp");
        crate::made::init(&root, crate::audit::Actor::owner(), None).unwrap();
        let h = Home::open(&root).unwrap();
        (d, h)
    }

    #[test]
    fn a_sealed_file_opens_and_any_edit_name_or_strip_is_damage() {
        let (_d, h) = store();
        let state = h.dir(StoreDir::State);
        let a = state.join("grants/alice.json");
        let v = json!({"version": 1, "grants": []});
        // Sealed but not written by an act: the ledger holds no such file.
        let bytes = seal(&h, &a, &v).unwrap();
        let e = open::<Value>(&h, &a, &bytes).unwrap_err();
        assert!(e.to_string().contains("holds no such file"), "{e}");
        write(&h, &StoreLock::acquire(&h).unwrap(), &a, &v).unwrap();
        let bytes = std::fs::read(&a).unwrap();
        let back: Value = open(&h, &a, &bytes).unwrap();
        assert_eq!(back, v);
        // The same bytes under another name: damage.
        let b = state.join("grants/bob.json");
        let e = open::<Value>(&h, &b, &bytes).unwrap_err();
        assert!(e.to_string().contains("does not hold"), "{e}");
        // An edit of the content, with or without the mac: damage.
        let mut edited: Value = serde_json::from_slice(&bytes).unwrap();
        edited["version"] = json!(2);
        let e = open::<Value>(&h, &a, &serde_json::to_vec(&edited).unwrap()).unwrap_err();
        assert_eq!(e.code(), "store_damaged");
        edited.as_object_mut().unwrap().remove(MAC_FIELD);
        edited["version"] = json!(1);
        let e = open::<Value>(&h, &a, &serde_json::to_vec(&edited).unwrap()).unwrap_err();
        assert!(e.to_string().contains("carries no `mac`"), "{e}");
        // Whitespace and key order are not content.
        let compact = serde_json::to_vec(&serde_json::from_slice::<Value>(&bytes).unwrap());
        assert_eq!(open::<Value>(&h, &a, &compact.unwrap()).unwrap(), v);
        // An older copy, after the act that replaced it: damage.
        let w = json!({"version": 1, "grants": [], "x": 1});
        write(&h, &StoreLock::acquire(&h).unwrap(), &a, &w).unwrap();
        std::fs::write(&a, &bytes).unwrap();
        let e = open::<Value>(&h, &a, &bytes).unwrap_err();
        assert!(e.to_string().contains("older copy"), "{e}");
        // Removed by an act, put back: damage.
        let now = std::fs::read(&a).unwrap();
        remove(&h, &StoreLock::acquire(&h).unwrap(), &a).unwrap();
        std::fs::write(&a, &now).unwrap();
        let e = open::<Value>(&h, &a, &now).unwrap_err();
        assert!(e.to_string().contains("holds no such file"), "{e}");
    }

    #[test]
    fn an_earlier_store_reads_its_files_until_migrate_stamps_them_once() {
        let (_d, h) = store();
        // A trail without the keyed field: as a store of an earlier version.
        let log = crate::audit::AuditLog::new(&h);
        let text = std::fs::read_to_string(log.path()).unwrap();
        assert!(text.contains(KEYED_FIELD), "the init record says so");
        std::fs::write(log.path(), text.replace(KEYED_FIELD, "other")).unwrap();
        let h = Home::open(h.root()).unwrap();
        let path = h.dir(StoreDir::State).join("grants/alice.json");
        let v = json!({"version": 1, "grants": []});
        write_atomic(&path, &serde_json::to_vec(&v).unwrap()).unwrap();
        assert_eq!(
            open::<Value>(&h, &path, &std::fs::read(&path).unwrap()).unwrap(),
            v
        );
        let lock = StoreLock::acquire(&h).unwrap();
        let s = migrate(&h, &lock).unwrap().unwrap();
        assert_eq!(s.grants, 1);
        let bytes = std::fs::read(&path).unwrap();
        assert!(serde_json::from_slice::<Value>(&bytes).unwrap()[MAC_FIELD].is_string());
        assert_eq!(open::<Value>(&h, &path, &bytes).unwrap(), v);
        // A second run stamps nothing new.
        assert_eq!(migrate(&h, &lock).unwrap().unwrap(), Stamped::default());
    }

    #[test]
    fn a_store_made_by_this_version_never_stamps_a_file_without_mac() {
        let (_d, h) = store();
        let path = h
            .dir(StoreDir::State)
            .join("sessions")
            .join(format!("{}.json", "a".repeat(64)));
        write_atomic(&path, b"{\"x\": 1}").unwrap();
        let lock = StoreLock::acquire(&h).unwrap();
        assert_eq!(migrate(&h, &lock).unwrap(), None);
        assert_eq!(std::fs::read(&path).unwrap(), b"{\"x\": 1}");
        let e = open::<Value>(&h, &path, b"{\"x\": 1}").unwrap_err();
        assert!(e.to_string().contains("carries no `mac`"), "{e}");
    }
}
