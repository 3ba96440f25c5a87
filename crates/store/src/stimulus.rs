//! Recorded stimuli (RUNTIME §8): events the runtime itself raises for a pack, such as
//! `binding.degraded` when a binding cannot be minted, kept until `hcp sense` delivers
//! them.
//!
//! ```text
//! state/stimuli/<principal>/<pack>.jsonl   one record a line, mode 0600, directories 0700
//! state/stimuli/<principal>/.lock          serialises the writers of that principal
//! ```
//!
//! A record is `{"id", "at", "ref", "event"}`: a UUID v7, the RFC 3339 time of the first
//! occurrence, the stimulus ref and the event object. Delivery is at least once: `hcp
//! sense` reads the [`pending`] records, writes them out, then [`ack`]s them, which removes
//! them. A record equal to one still pending (same ref and event) is not added twice, and
//! at most [`MAX_PENDING`] records are kept per principal and pack (the oldest go first),
//! so a caller looping on a refused call cannot grow the file without bound.
//!
//! This module stores what it is given; it never holds a credential (the events the
//! runtime records name families, verbs and reasons, never values). What a pack declares,
//! and so whether `binding.degraded` is recorded for it, is the runtime's to decide
//! (`hcp_runtime`): the queue knows principals, pack ids and refs, not packs.

use crate::atomic::write_atomic;
use crate::binding::safe_component;
use crate::error::{StoreError, StoreResult};
use crate::home::{Home, StoreDir};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Records kept per principal and pack, at most (64); the oldest are dropped first.
pub const MAX_PENDING: usize = 64;

/// The ref of the stimulus raised when a binding cannot be minted (RUNTIME §8).
pub const BINDING_DEGRADED: &str = "binding.degraded";

/// One recorded stimulus.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stimulus {
    /// A UUID v7, lowercase hyphenated.
    pub id: String,
    /// When it was first recorded.
    pub at: Timestamp,
    /// The stimulus ref (a key of the pack policy's `stimuli`).
    #[serde(rename = "ref")]
    pub reference: String,
    /// The event object.
    pub event: serde_json::Value,
}

/// What [`record`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recorded {
    /// Appended, with this id.
    Added(String),
    /// An equal record is still pending; nothing was added.
    Coalesced,
}

fn dir_of(home: &Home, principal: &str) -> StoreResult<PathBuf> {
    let root = home.dir(StoreDir::State).join("stimuli");
    if !safe_component(principal) {
        return Err(StoreError::Unusable {
            path: root,
            reason: format!("principal `{principal}` cannot name a stimulus queue"),
        });
    }
    Ok(root.join(principal))
}

fn file_of(home: &Home, principal: &str, pack_id: &str) -> StoreResult<PathBuf> {
    if !safe_component(pack_id) {
        return Err(StoreError::Unusable {
            path: home.dir(StoreDir::State).join("stimuli"),
            reason: format!("pack `{pack_id}` cannot name a stimulus queue"),
        });
    }
    Ok(dir_of(home, principal)?.join(format!("{pack_id}.jsonl")))
}

/// Holds the writers' lock of one principal's queues until dropped.
struct QueueLock {
    _file: std::fs::File,
}

fn lock(home: &Home, principal: &str) -> StoreResult<QueueLock> {
    let dir = dir_of(home, principal)?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|e| StoreError::io("create", &dir, e))?;
    let path = dir.join(".lock");
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| StoreError::io("open", &path, e))?;
    file.lock().map_err(|e| StoreError::io("lock", &path, e))?;
    Ok(QueueLock { _file: file })
}

/// Reads every record of a queue file; a missing file is empty. A line that is not a
/// record (a torn tail) is skipped.
fn read_all(path: &Path) -> StoreResult<Vec<Stimulus>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StoreError::io("read", path, e)),
    };
    Ok(text
        .lines()
        .filter_map(|l| serde_json::from_str::<Stimulus>(l).ok())
        .collect())
}

fn encode(records: &[Stimulus], path: &Path) -> StoreResult<Vec<u8>> {
    let mut out = Vec::new();
    for r in records {
        serde_json::to_writer(&mut out, r).map_err(|e| StoreError::Damaged {
            path: path.to_path_buf(),
            reason: format!("cannot encode a stimulus: {e}"),
        })?;
        out.push(b'\n');
    }
    Ok(out)
}

/// Records `event` under `reference` for `principal` on pack `pack_id` at `now`.
///
/// # Errors
/// [`StoreError`] when the principal or pack cannot name a file, or on I/O.
pub fn record(
    home: &Home,
    principal: &str,
    pack_id: &str,
    reference: &str,
    event: serde_json::Value,
    now: Timestamp,
) -> StoreResult<Recorded> {
    let path = file_of(home, principal, pack_id)?;
    let _lock = lock(home, principal)?;
    let mut records = read_all(&path)?;
    if records
        .iter()
        .any(|r| r.reference == reference && r.event == event)
    {
        return Ok(Recorded::Coalesced);
    }
    let id = uuid::Uuid::now_v7().hyphenated().to_string();
    let new = Stimulus {
        id: id.clone(),
        at: now,
        reference: reference.to_owned(),
        event,
    };
    if records.len() >= MAX_PENDING {
        records.drain(..=records.len() - MAX_PENDING);
        records.push(new);
        write_atomic(&path, &encode(&records, &path)?)?;
        return Ok(Recorded::Added(id));
    }
    let line = encode(std::slice::from_ref(&new), &path)?;
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| StoreError::io("open", &path, e))?;
    f.write_all(&line)
        .and_then(|()| f.sync_data())
        .map_err(|e| StoreError::io("append to", &path, e))?;
    Ok(Recorded::Added(id))
}

/// The pending records of `principal` on `pack_id`, oldest first; only those whose ref is
/// in `refs` when given.
///
/// # Errors
/// [`StoreError`] when the principal or pack cannot name a file, or on I/O.
pub fn pending(
    home: &Home,
    principal: &str,
    pack_id: &str,
    refs: Option<&[&str]>,
) -> StoreResult<Vec<Stimulus>> {
    let path = file_of(home, principal, pack_id)?;
    let mut all = read_all(&path)?;
    if let Some(refs) = refs {
        all.retain(|r| refs.contains(&r.reference.as_str()));
    }
    Ok(all)
}

/// Removes the records with these ids (they were delivered). Unknown ids are ignored.
///
/// # Errors
/// [`StoreError`] when the principal or pack cannot name a file, or on I/O.
pub fn ack(home: &Home, principal: &str, pack_id: &str, ids: &[String]) -> StoreResult<()> {
    if ids.is_empty() {
        return Ok(());
    }
    let path = file_of(home, principal, pack_id)?;
    let _lock = lock(home, principal)?;
    let mut records = read_all(&path)?;
    let before = records.len();
    records.retain(|r| !ids.contains(&r.id));
    if records.len() == before {
        return Ok(());
    }
    write_atomic(&path, &encode(&records, &path)?)
}

/// Removes every principal's recorded stimuli for pack `pack_id` (for uninstall); returns
/// how many queue files were removed.
///
/// # Errors
/// [`StoreError::Io`] naming the file.
pub fn remove_pack(home: &Home, pack_id: &str) -> StoreResult<usize> {
    let root = home.dir(StoreDir::State).join("stimuli");
    let Ok(rd) = std::fs::read_dir(&root) else {
        return Ok(0);
    };
    let mut n = 0;
    for entry in rd.flatten() {
        let p = entry.path().join(format!("{pack_id}.jsonl"));
        match std::fs::remove_file(&p) {
            Ok(()) => n += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(StoreError::io("remove", &p, e)),
        }
    }
    Ok(n)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::os::unix::fs::PermissionsExt;

    fn now() -> Timestamp {
        "2026-06-01T00:00:00Z".parse().unwrap()
    }

    #[test]
    fn record_pending_ack() {
        let d = tempfile::tempdir().unwrap();
        let home = Home::open(d.path()).unwrap();
        assert_eq!(pending(&home, "alice", "mail", None).unwrap(), vec![]);
        let ev = serde_json::json!({"reason": "missing"});
        let Recorded::Added(id) = record(
            &home,
            "alice",
            "mail",
            "binding.degraded",
            ev.clone(),
            now(),
        )
        .unwrap() else {
            panic!("not added");
        };
        // the same event while one is pending is not added twice
        assert_eq!(
            record(
                &home,
                "alice",
                "mail",
                "binding.degraded",
                ev.clone(),
                now()
            )
            .unwrap(),
            Recorded::Coalesced
        );
        record(
            &home,
            "alice",
            "mail",
            "other",
            serde_json::json!({}),
            now(),
        )
        .unwrap();
        let got = pending(&home, "alice", "mail", Some(&["binding.degraded"])).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].id.as_str(), &got[0].event), (id.as_str(), &ev));
        // another principal's queue is its own
        assert_eq!(pending(&home, "bob", "mail", None).unwrap(), vec![]);
        let path = d.path().join("state/stimuli/alice/mail.jsonl");
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        ack(&home, "alice", "mail", std::slice::from_ref(&id)).unwrap();
        let left = pending(&home, "alice", "mail", None).unwrap();
        assert_eq!(
            left.iter()
                .map(|s| s.reference.as_str())
                .collect::<Vec<_>>(),
            vec!["other"]
        );
        // delivered, so the same event is recorded again
        assert!(matches!(
            record(&home, "alice", "mail", "binding.degraded", ev, now()).unwrap(),
            Recorded::Added(_)
        ));
        assert_eq!(remove_pack(&home, "mail").unwrap(), 1);
        assert_eq!(pending(&home, "alice", "mail", None).unwrap(), vec![]);
    }

    #[test]
    fn bounded_oldest_dropped() {
        let d = tempfile::tempdir().unwrap();
        let home = Home::open(d.path()).unwrap();
        for i in 0..MAX_PENDING + 5 {
            record(&home, "a", "p", "r", serde_json::json!({ "n": i }), now()).unwrap();
        }
        let all = pending(&home, "a", "p", None).unwrap();
        assert_eq!(all.len(), MAX_PENDING);
        assert_eq!(all[0].event["n"], 5);
        assert_eq!(all[MAX_PENDING - 1].event["n"], MAX_PENDING + 4);
    }

    #[test]
    fn unsafe_names_refused() {
        let d = tempfile::tempdir().unwrap();
        let home = Home::open(d.path()).unwrap();
        assert!(record(&home, "../x", "p", "r", serde_json::json!({}), now()).is_err());
        assert!(pending(&home, "a", "../p", None).is_err());
    }
}
