//! Making a trail, and moving a trail from before keyed chains onto one (RUNTIME §4
//! "Stores are made on purpose", §6 "Keyed chain").
//!
//! A new trail ([`create`]) is made whole in a directory that nothing uses yet (the store
//! being built under a temporary name, [`crate::made`]): the keys, the first record, its
//! anchor and the reserve, each synced. So a store whose keys exist has a trail, and a
//! store whose keys exist without a trail has lost it (`missing_log`).
//!
//! A trail from before keyed chains (plain SHA-256 records, an FNV-checked anchor or none)
//! is migrated in place ([`migrate`]) under both its locks: its end is checked against its
//! old anchor as an append of that format did, a torn tail is cut (and saved), then one
//! keyed record `migrate` (an act of authority) follows its last record, and the anchor is
//! replaced by a keyed one. The new key is written first as `.chain.key.new` and renamed to
//! `chain.key` last, so a crash anywhere resumes with the same key, and a store whose
//! `chain.key` exists is never migrated again (the old part of its trail stays verified by
//! the old rule; the keyed part after `migrate` by the key).

use super::anchor::{self, Anchor, AnchorState, Point};
use super::fields::{Authority, authority_fields};
use super::fsutil::{self, Boot, FILE_MODE};
use super::key::{CHAIN_KEY_FILE, ChainKey, KEYED_PREFIX, KeyRead};
use super::record::{Kind, sha256_tagged};
use super::writer::{encode, line_facts};
use super::{ANCHOR_FILE, AUDIT_FILE, AuditError, AuditLog, Fault, Repair, reserve, scan};
use crate::atomic::{sync_dir, write_atomic};
use crate::error::StoreError;
use crate::session::Timestamp;
use serde_json::{Map, Value};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

/// The name of a chain key being made by a migration, inside `audit/`.
pub const NEW_KEY_FILE: &str = ".chain.key.new";

/// What a migration found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Migrated {
    /// Records of the old trail.
    pub records: u64,
    /// Its last record's hash.
    pub head: String,
    /// The `migrate` record's `seq`.
    pub seq: u64,
    /// A torn tail cut off the old trail first, if any.
    pub repair: Option<Repair>,
}

fn io(action: &'static str, path: &Path, e: std::io::Error) -> AuditError {
    AuditError::Store(StoreError::io(action, path, e))
}

/// Makes a new trail in `dir` (which must hold no trail): `chain.key`, `digest.secret`,
/// `checkpoint.key`, the trail with `first` as its record 1 (an act of authority, synced)
/// and its anchor (keyed, both slots, synced), and the reserve of `reserve_bytes`.
/// Answers the first record's hash.
///
/// # Errors
/// [`AuditError`] when a file cannot be made.
pub(crate) fn create(
    dir: &Path,
    first: &Authority,
    ts: Timestamp,
    boot: &Boot,
    reserve_bytes: u64,
) -> Result<String, AuditError> {
    fsutil::ensure_dir(dir)?;
    let key = ChainKey::generate()?;
    key.write_new(&dir.join(CHAIN_KEY_FILE))?;
    other_keys(dir)?;
    let (line, w) = encode(
        &key,
        &Point::genesis(),
        Kind::Authority,
        authority_fields(first),
        ts,
    );
    let log_path = dir.join(AUDIT_FILE);
    let mut log = OpenOptions::new()
        .read(true)
        .append(true)
        .create_new(true)
        .mode(FILE_MODE)
        .open(&log_path)
        .map_err(|e| io("create", &log_path, e))?;
    log.write_all(&line)
        .and_then(|()| log.sync_data())
        .map_err(|e| io("write", &log_path, e))?;
    let _ = reserve::refill(&log, line.len() as u64, reserve_bytes);
    let point = Point {
        count: 1,
        head: w.hash.clone(),
        end: line.len() as u64,
    };
    let mut a = Anchor::empty(&boot.id);
    a.point = point.clone();
    a.durable = point;
    a.applied = None;
    let anchor_path = dir.join(ANCHOR_FILE);
    let f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .open(&anchor_path)
        .map_err(|e| io("create", &anchor_path, e))?;
    f.write_all_at(&anchor::initial_bytes(&a, &key), 0)
        .and_then(|()| f.sync_all())
        .map_err(|e| io("write", &anchor_path, e))?;
    sync_dir(dir)?;
    Ok(w.hash)
}

/// The argument-digest secret and the checkpoint key in `dir`, each made when missing.
fn other_keys(dir: &Path) -> Result<(), AuditError> {
    for name in [super::DIGEST_SECRET_FILE, super::checkpoint::KEY_FILE] {
        fsutil::load_or_create_secret(&dir.join(name), || {
            Ok(fsutil::random_bytes::<32>()?.to_vec())
        })?;
    }
    Ok(())
}

/// Opens `path` for reading and writing and takes its exclusive lock; `None` when absent.
fn open_locked(path: &Path, append: bool) -> Result<Option<File>, AuditError> {
    let mut o = OpenOptions::new();
    o.read(true);
    if append {
        o.append(true);
    } else {
        o.write(true);
    }
    match o.open(path) {
        Ok(f) => {
            f.lock().map_err(|e| io("lock", path, e))?;
            Ok(Some(f))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io("open", path, e)),
    }
}

/// Migrates the trail of `log` onto a keyed chain (see the module docs), recording `act`
/// (an act of authority `migrate`; its `changed` gains the old trail's `records` and
/// `head`). The caller holds the store's lock and checked that no `chain.key` exists.
///
/// # Errors
/// [`AuditError::Contradicted`] when the old trail does not match its old anchor (it is
/// left as it is); [`AuditError::Store`] when a file cannot be read or written.
pub(crate) fn migrate(log: &AuditLog, act: &Authority) -> Result<Migrated, AuditError> {
    let dir = log.dir();
    fsutil::ensure_dir(dir)?;
    fsutil::tighten_dir(dir)?;
    let boot = log.boot();
    // Both locks: the anchor's (this format's and the last one's) and the trail's (what
    // appenders took before anchors existed).
    let anchor_file = open_locked(&log.anchor_path(), false)?;
    let log_file = open_locked(log.path(), true)?;
    let new_key_path = dir.join(NEW_KEY_FILE);
    let key = match ChainKey::read(&new_key_path)? {
        KeyRead::Found(k) => k,
        KeyRead::Absent => {
            let k = ChainKey::generate()?;
            k.write_new(&new_key_path)?;
            k
        }
        KeyRead::Unreadable(e) => return Err(io("read", &new_key_path, e)),
    };
    let old = match &anchor_file {
        None => None,
        Some(f) => {
            match anchor::read(f, Some(&key)).map_err(|e| io("read", &log.anchor_path(), e))? {
                AnchorState::Valid(a) => Some(a),
                AnchorState::SlotFault(sf) => Some(sf.intact),
                AnchorState::Damaged(why) => {
                    return Err(AuditError::Contradicted {
                        fault: Fault::BadAnchor,
                        detail: why,
                    });
                }
            }
        }
    };
    let (tail, repair, resumed) = match &log_file {
        None => {
            if let Some(a) = &old
                && a.trusted(&boot.id).count > 0
            {
                return Err(AuditError::Contradicted {
                    fault: Fault::MissingLog,
                    detail: format!(
                        "the trail is gone while its anchor names {} records",
                        a.trusted(&boot.id).count
                    ),
                });
            }
            (Point::genesis(), None, false)
        }
        Some(f) => old_tail(log, f, old.as_ref(), &boot, &key)?,
    };
    let (records, head) = if resumed {
        // The `migrate` record is written already; its `changed` names the old trail.
        (tail.count - 1, String::new())
    } else {
        (tail.count, tail.head.clone())
    };
    let mut point = tail.clone();
    if !resumed {
        let mut a = act.clone();
        if let Value::Object(m) = &mut a.changed {
            m.insert("records".into(), Value::from(tail.count));
            m.insert("head".into(), Value::String(tail.head.clone()));
            if let Some(r) = &repair {
                m.insert(
                    "repair".into(),
                    serde_json::to_value(r).unwrap_or(Value::Null),
                );
            }
        }
        let (line, w) = encode(
            &key,
            &tail,
            Kind::Authority,
            authority_fields(&a),
            Timestamp::now(),
        );
        let path = log.path();
        let f = match &log_file {
            Some(f) => f,
            None => &OpenOptions::new()
                .read(true)
                .append(true)
                .create_new(true)
                .mode(FILE_MODE)
                .open(path)
                .map_err(|e| io("create", path, e))?,
        };
        let mut w_ = f;
        w_.write_all(&line)
            .and_then(|()| f.sync_data())
            .map_err(|e| io("append to", path, e))?;
        fsutil::tighten(f, path)?;
        point = Point {
            count: w.seq,
            head: w.hash,
            end: tail.end + line.len() as u64,
        };
        if log_file.is_none() {
            sync_dir(dir)?;
        }
    }
    // The keyed anchor, made whole beside the old one and renamed over it.
    let mut a = Anchor::empty(&boot.id);
    a.generation = old.as_ref().map_or(0, |o| o.generation + 1);
    a.point = point.clone();
    a.durable = point.clone();
    a.applied = None;
    let mut tmp = tempfile::Builder::new()
        .prefix(".tmp-anchor-")
        .tempfile_in(dir)
        .map_err(|e| io("create a temporary file in", dir, e))?;
    tmp.write_all(&anchor::initial_bytes(&a, &key))
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(|e| io("write", tmp.path(), e))?;
    tmp.persist(log.anchor_path())
        .map_err(|e| io("rename into", &log.anchor_path(), e.error))?;
    sync_dir(dir)?;
    std::fs::rename(&new_key_path, dir.join(CHAIN_KEY_FILE))
        .map_err(|e| io("rename into", &dir.join(CHAIN_KEY_FILE), e))?;
    sync_dir(dir)?;
    other_keys(dir)?;
    if let Ok(f) = File::open(log.path()) {
        let _ = reserve::refill(&f, point.end, log.reserve_bytes());
    }
    Ok(Migrated {
        records,
        head,
        seq: point.count,
        repair,
    })
}

/// The last record of an old trail, checked against its old anchor as an append of that
/// format did; a torn tail is cut (saved beside the trail first). `resumed`: the last
/// record is this migration's `migrate` record, written by a run that was killed.
fn old_tail(
    log: &AuditLog,
    f: &File,
    old: Option<&Anchor>,
    boot: &Boot,
    key: &ChainKey,
) -> Result<(Point, Option<Repair>, bool), AuditError> {
    let path = log.path();
    let len = f.metadata().map_err(|e| io("read", path, e))?.len();
    let end = scan::end(f, len).map_err(|e| io("read", path, e))?;
    let mut repair = None;
    if end.complete_end < len {
        let torn = scan::read_at(f, end.complete_end, len - end.complete_end)
            .map_err(|e| io("read", path, e))?;
        let sha256 = sha256_tagged(&torn);
        let short = sha256.trim_start_matches("sha256:").get(..12).unwrap_or("");
        let saved_as = format!("torn-{}-{short}.bin", end.complete_end);
        write_atomic(&log.dir().join(&saved_as), &torn)?;
        f.set_len(end.complete_end)
            .and_then(|()| f.sync_data())
            .map_err(|e| io("truncate", path, e))?;
        repair = Some(Repair {
            offset: end.complete_end,
            bytes: len - end.complete_end,
            sha256,
            saved_as,
        });
    }
    let Some((offset, last)) = end.last else {
        return Ok((Point::genesis(), repair, false));
    };
    let (head, seq) = line_facts(&last).map_err(|reason| AuditError::Damaged {
        path: path.to_path_buf(),
        offset,
        reason,
    })?;
    let resumed = head.starts_with(KEYED_PREFIX);
    if resumed {
        // Only this migration's own record can be keyed here.
        let m: Map<String, Value> = serde_json::from_slice(&last).unwrap_or_default();
        let holds =
            key.record_hash(&m) == head && m.get("act").and_then(Value::as_str) == Some("migrate");
        if !holds {
            return Err(AuditError::Damaged {
                path: path.to_path_buf(),
                offset,
                reason:
                    "a keyed record that is not this migration's in a trail without a chain key"
                        .into(),
            });
        }
    }
    if old.is_none() && seq.is_some() && !resumed {
        // Records of the anchored format are only ever written under an anchor.
        return Err(AuditError::Contradicted {
            fault: Fault::MissingAnchor,
            detail: format!(
                "`{}` is gone while the trail holds records",
                log.anchor_path().display()
            ),
        });
    }
    if let Some(a) = old {
        let trusted = a.trusted(&boot.id);
        if trusted.end > end.complete_end {
            return Err(AuditError::Contradicted {
                fault: Fault::Truncated,
                detail: format!(
                    "the trail ends at byte {} and its anchor names {} records ending at byte {}",
                    end.complete_end, trusted.count, trusted.end
                ),
            });
        }
        if trusted.count > 0 {
            let ok = match scan::line_ending_at(f, trusted.end).map_err(|e| io("read", path, e))? {
                Some((_, line)) => line_facts(&line)
                    .is_ok_and(|(h, s)| h == trusted.head && s.is_none_or(|s| s == trusted.count)),
                None => false,
            };
            if !ok {
                return Err(AuditError::Contradicted {
                    fault: Fault::AnchorMismatch,
                    detail: format!(
                        "the record that ends at byte {} is not record {} of the anchor",
                        trusted.end, trusted.count
                    ),
                });
            }
        }
    }
    let count = match seq {
        Some(s) => s,
        None => scan::count_lines(f, end.complete_end).map_err(|e| io("read", path, e))?,
    };
    Ok((
        Point {
            count,
            head,
            end: end.complete_end,
        },
        repair,
        resumed,
    ))
}
