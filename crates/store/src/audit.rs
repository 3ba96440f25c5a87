//! The audit trail (RUNTIME §6): `audit/audit.jsonl`, one hash-chained record a line.
//!
//! Every exec decision, allowed or refused, appends one record ([`Entry`] in, [`Record`]
//! out): `ts` (RFC 3339 UTC, milliseconds), `id` (UUID v7), `principal`, `project`,
//! `pack_id`, `verb_key`, `operation`, `land`, `decision` (`allow` | `deny`), `code`,
//! `args_digest` ([`args_digest`]: never the raw values), `exit_code`, `duration_ms`,
//! any additive fields ([`Entry::extra`]: `policy_hash`, `rule`, `sandbox` …), then `prev`
//! (the previous record's `hash`, [`GENESIS`] for the first) and `hash` ([`record_hash`]:
//! `sha256:` over the [`canonical_json`] of the record without `hash`). A line is the
//! canonical encoding of the whole record, so keys appear sorted.
//!
//! # Appending
//!
//! [`AuditLog::append`] opens the file, takes an exclusive [`std::fs::File::lock`], reads
//! the last line's `hash` by scanning back from the end (a few KiB, whatever the file's
//! size), writes one line with `O_APPEND`, `sync_data`s it (unless built with
//! [`AuditLog::durable`]`(false)`), and unlocks. Concurrent processes therefore neither
//! lose a record nor fork the chain.
//!
//! # A torn tail
//!
//! A crash or a full disk in the middle of a write leaves a last line without its `\n`.
//! `audit verify` reports it as [`BreakKind::TornTail`]. The next append repairs it under
//! the lock: it saves the torn bytes as `audit/torn-<offset>-<sha256 prefix>.bin`,
//! truncates the file to the end of the last complete line, and writes its record with a
//! `repair` field ([`Repair`]: offset, length, digest and file name of what was cut). The
//! chain then links to the last complete record and verifies clean; `audit verify` lists
//! each repair. A last line that *has* its `\n` but is not a record is not a crash
//! artifact: appends refuse with `audit_damaged` until the owner fixes the file.
//!
//! # What the chain does not prove
//!
//! Anyone who can write the file can rewrite it and recompute every hash, and removing
//! records from the end leaves a shorter valid chain. The chain detects edits, removals
//! and reordering *inside* the trail; anchoring the head elsewhere is left to the owner.

mod record;
mod scan;
mod verify;

pub use record::{
    CORE_FIELDS, Decision, Entry, GENESIS, Record, args_digest, canonical_json, record_hash,
    sha256_tagged,
};
pub use verify::{BreakKind, Broken, RepairNote, VerifyReport};

use crate::atomic::{sync_dir, write_atomic};
use crate::error::StoreError;
use crate::home::{Home, StoreDir};
use crate::session::{Timestamp, format_ts};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The trail's file name inside `audit/`.
pub const AUDIT_FILE: &str = "audit.jsonl";

/// What can go wrong with the audit trail.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The last complete line is not a record with a `hash`; appends refuse until the
    /// owner fixes the file (code `audit_damaged`).
    #[error("the last record of `{path}` (at byte {offset}) is damaged: {reason}")]
    Damaged {
        /// The trail.
        path: PathBuf,
        /// Where the line starts.
        offset: u64,
        /// Why, lowercase.
        reason: String,
    },
    /// An [`Entry::extra`] key that the store writes itself (code `audit_bad_entry`).
    #[error("audit field `{key}` is reserved")]
    ReservedField {
        /// The key.
        key: String,
    },
    /// The store failed (its own codes).
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl AuditError {
    /// The stable code: `audit_damaged`, `audit_bad_entry`, or the store's.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Damaged { .. } => "audit_damaged",
            Self::ReservedField { .. } => "audit_bad_entry",
            Self::Store(e) => e.code().as_str(),
        }
    }
}

/// What an append cut off before writing: a torn tail (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Repair {
    /// Where the torn bytes started (the file's length after the cut), in bytes.
    pub offset: u64,
    /// How many bytes were cut.
    pub bytes: u64,
    /// `sha256:` of the cut bytes.
    pub sha256: String,
    /// The file in `audit/` that holds them.
    pub saved_as: String,
}

/// What [`AuditLog::append`] wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct Appended {
    /// The record's `id` (the exec result's `audit_id`).
    pub id: String,
    /// The record's time.
    pub ts: Timestamp,
    /// The record's `hash`, the new head of the chain.
    pub hash: String,
    /// The torn tail this append cut off first, if any.
    pub repair: Option<Repair>,
}

/// One line of [`AuditLog::tail`].
#[derive(Debug, Clone, PartialEq)]
pub enum TailLine {
    /// A record.
    Record(Box<Record>),
    /// A line that is not a record (`audit verify` says more).
    Unparseable {
        /// The parse error, lowercase.
        reason: String,
    },
}

/// The audit trail of a home.
#[derive(Debug, Clone)]
pub struct AuditLog {
    path: PathBuf,
    durable: bool,
}

/// Opens the trail for reading under a shared lock; `None` when it does not exist.
fn open_shared(path: &Path) -> Result<Option<File>, StoreError> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StoreError::io("open", path, e)),
    };
    file.lock_shared()
        .map_err(|e| StoreError::io("lock", path, e))?;
    Ok(Some(file))
}

fn uuid_v7(ts: Timestamp) -> String {
    let secs = u64::try_from(ts.as_second()).unwrap_or(0);
    let nanos = u32::try_from(ts.subsec_nanosecond()).unwrap_or(0);
    uuid::Uuid::new_v7(uuid::Timestamp::from_unix(uuid::NoContext, secs, nanos)).to_string()
}

impl AuditLog {
    /// The trail of `home` (`audit/audit.jsonl`), durable. Does no I/O.
    pub fn new(home: &Home) -> Self {
        Self {
            path: home.dir(StoreDir::Audit).join(AUDIT_FILE),
            durable: true,
        }
    }

    /// Whether each append waits for `sync_data` (the default, `true`). `false` trades
    /// the last records on a power loss for speed; see BENCHMARKS.md for the cost.
    pub fn durable(mut self, durable: bool) -> Self {
        self.durable = durable;
        self
    }

    /// The trail's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `entry` stamped with the current time, read under the lock so that times
    /// follow the chain's order. See the module docs for the protocol.
    ///
    /// # Errors
    /// [`AuditError::ReservedField`], [`AuditError::Damaged`], [`AuditError::Store`].
    pub fn append(&self, entry: &Entry) -> Result<Appended, AuditError> {
        self.append_inner(entry, None)
    }

    /// Appends `entry` stamped with `ts` (tests, replays).
    ///
    /// # Errors
    /// As [`AuditLog::append`].
    pub fn append_at(&self, entry: &Entry, ts: Timestamp) -> Result<Appended, AuditError> {
        self.append_inner(entry, Some(ts))
    }

    /// Checks that a record could be appended now (the trail opens for append, creating
    /// it when absent), so a call is refused before it runs rather than run unaudited.
    ///
    /// # Errors
    /// [`StoreError`] naming the file when it cannot be opened for append.
    pub fn ensure_writable(&self) -> Result<(), StoreError> {
        self.open_for_append().map(drop)
    }

    fn open_for_append(&self) -> Result<File, StoreError> {
        let open = || {
            OpenOptions::new()
                .read(true)
                .append(true)
                .create(true)
                .open(&self.path)
        };
        match open() {
            Ok(f) => Ok(f),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let dir = self.path.parent().unwrap_or(Path::new("."));
                std::fs::create_dir_all(dir).map_err(|e| StoreError::io("create", dir, e))?;
                open().map_err(|e| StoreError::io("open", &self.path, e))
            }
            Err(e) => Err(StoreError::io("open", &self.path, e)),
        }
    }

    fn append_inner(&self, entry: &Entry, ts: Option<Timestamp>) -> Result<Appended, AuditError> {
        if let Some(key) = entry
            .extra
            .keys()
            .find(|k| CORE_FIELDS.contains(&k.as_str()))
        {
            return Err(AuditError::ReservedField { key: key.clone() });
        }
        let path = &self.path;
        let io = |action, e| AuditError::Store(StoreError::io(action, path, e));
        let file = self.open_for_append()?;
        file.lock().map_err(|e| io("lock", e))?;
        let len = file.metadata().map_err(|e| io("read", e))?.len();
        let end = scan::end(&file, len).map_err(|e| io("read", e))?;

        let repair = if end.complete_end < len {
            Some(self.cut_torn_tail(&file, end.complete_end, len)?)
        } else {
            None
        };
        let prev = match &end.last {
            None => GENESIS.to_owned(),
            Some((offset, bytes)) => last_hash(bytes).map_err(|reason| AuditError::Damaged {
                path: path.clone(),
                offset: *offset,
                reason,
            })?,
        };

        let ts = ts.unwrap_or_else(Timestamp::now);
        let id = uuid_v7(ts);
        let mut m = Map::new();
        let opt = |s: &Option<String>| s.clone().map_or(Value::Null, Value::String);
        m.insert("ts".into(), Value::String(format_ts(ts)));
        m.insert("id".into(), Value::String(id.clone()));
        m.insert("principal".into(), Value::String(entry.principal.clone()));
        m.insert("project".into(), opt(&entry.project));
        m.insert("pack_id".into(), opt(&entry.pack_id));
        m.insert("verb_key".into(), Value::String(entry.verb_key.clone()));
        m.insert(
            "operation".into(),
            opt(&entry.operation.map(|o| o.as_str().to_owned())),
        );
        m.insert(
            "land".into(),
            opt(&entry.land.map(|l| l.as_str().to_owned())),
        );
        m.insert(
            "decision".into(),
            Value::String(entry.decision.as_str().into()),
        );
        m.insert("code".into(), opt(&entry.code));
        m.insert(
            "args_digest".into(),
            Value::String(entry.args_digest.clone()),
        );
        m.insert(
            "exit_code".into(),
            entry.exit_code.map_or(Value::Null, Value::from),
        );
        m.insert("duration_ms".into(), Value::from(entry.duration_ms));
        for (k, v) in &entry.extra {
            m.insert(k.clone(), v.clone());
        }
        if let Some(r) = &repair {
            m.insert(
                "repair".into(),
                serde_json::to_value(r).map_err(|e| io("encode", std::io::Error::other(e)))?,
            );
        }
        m.insert("prev".into(), Value::String(prev));
        let hash = record_hash(&m);
        m.insert("hash".into(), Value::String(hash.clone()));
        let mut line = canonical_json(&Value::Object(m));
        line.push(b'\n');

        (&file).write_all(&line).map_err(|e| io("append to", e))?;
        if self.durable {
            file.sync_data().map_err(|e| io("sync", e))?;
            if len == 0 {
                // The file may be new: make its directory entry durable too.
                sync_dir(path.parent().unwrap_or(Path::new(".")))?;
            }
        }
        file.unlock().map_err(|e| io("unlock", e))?;
        Ok(Appended {
            id,
            ts,
            hash,
            repair,
        })
    }

    /// Saves the bytes from `from` to `len` beside the trail, then cuts the file at `from`.
    fn cut_torn_tail(&self, file: &File, from: u64, len: u64) -> Result<Repair, AuditError> {
        let path = &self.path;
        let io = |action, e| AuditError::Store(StoreError::io(action, path, e));
        let torn = scan::read_at(file, from, len - from).map_err(|e| io("read", e))?;
        let sha256 = sha256_tagged(&torn);
        let short = sha256.trim_start_matches("sha256:").get(..12).unwrap_or("");
        let saved_as = format!("torn-{from}-{short}.bin");
        let dir = path.parent().unwrap_or(Path::new("."));
        write_atomic(&dir.join(&saved_as), &torn)?;
        file.set_len(from).map_err(|e| io("truncate", e))?;
        if self.durable {
            file.sync_data().map_err(|e| io("sync", e))?;
        }
        Ok(Repair {
            offset: from,
            bytes: len - from,
            sha256,
            saved_as,
        })
    }

    /// Walks the whole chain under a shared lock and names the first broken record.
    ///
    /// # Errors
    /// [`AuditError::Store`] when the file cannot be opened or read. A broken chain is
    /// not an error: it is [`VerifyReport::broken`].
    pub fn verify(&self) -> Result<VerifyReport, AuditError> {
        Ok(verify::verify(&self.path)?)
    }

    /// The last `n` complete lines, oldest first, read from the end under a shared lock,
    /// and the length in bytes of a torn tail (0 when there is none).
    ///
    /// # Errors
    /// [`AuditError::Store`] when the file cannot be opened or read.
    pub fn tail(&self, n: usize) -> Result<(Vec<TailLine>, u64), AuditError> {
        let Some(file) = open_shared(&self.path)? else {
            return Ok((Vec::new(), 0));
        };
        let len = file
            .metadata()
            .map_err(|e| StoreError::io("read", &self.path, e))?
            .len();
        let (lines, torn) =
            scan::last_lines(&file, len, n).map_err(|e| StoreError::io("read", &self.path, e))?;
        let lines = lines
            .iter()
            .map(|l| match serde_json::from_slice::<Record>(l) {
                Ok(r) => TailLine::Record(Box::new(r)),
                Err(e) => TailLine::Unparseable {
                    reason: e.to_string(),
                },
            })
            .collect();
        Ok((lines, torn))
    }
}

/// The `hash` of a stored line.
fn last_hash(line: &[u8]) -> Result<String, String> {
    let v: Value = serde_json::from_slice(line).map_err(|e| format!("{e}"))?;
    v.get("hash")
        .and_then(Value::as_str)
        .filter(|h| h.starts_with("sha256:"))
        .map(str::to_owned)
        .ok_or_else(|| "it has no `hash` field".to_owned())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::result_large_err)]
mod tests;
