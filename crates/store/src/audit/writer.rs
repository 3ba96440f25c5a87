//! Appending under the lock: open, check the trail's end against its anchor, recover a
//! torn tail, write a record (synced or not), move the anchor. See the module docs of
//! [`super`] for the protocol and what holds when a process is killed at each point.

use super::anchor::{self, Anchor, AnchorState, Point};
use super::fsutil::{self, FILE_MODE};
use super::record::{Kind, canonical_json, record_hash, sha256_tagged};
use super::{AuditError, AuditLog, AuditStep, Fault, Repair, scan};
use crate::atomic::{sync_dir, write_atomic};
use crate::error::StoreError;
use crate::session::{Timestamp, format_ts};
use serde_json::{Map, Value};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The trail opened for writing, its anchor locked exclusively until dropped.
pub(crate) struct Locked {
    /// The anchor file, which carries the lock.
    anchor_file: File,
    /// The trail, opened with `O_APPEND`.
    pub(crate) log: File,
    log_path: PathBuf,
    /// The anchor as read (or as made).
    pub(crate) anchor: Anchor,
    /// This boot.
    pub(crate) boot: String,
    /// The last record of the trail (after any recovery).
    pub(crate) tail: Point,
    /// The last record known synced.
    durable: Point,
    /// The trail was created by this open: its directory entry still needs a sync.
    created_log: bool,
    /// The torn tail this open recovered.
    pub(crate) repair: Option<Repair>,
}

/// One record written.
#[derive(Debug, Clone)]
pub(crate) struct Written {
    pub(crate) id: String,
    pub(crate) seq: u64,
    pub(crate) ts: Timestamp,
    pub(crate) hash: String,
    /// Where its line starts.
    pub(crate) start: u64,
}

fn unavailable(action: &'static str, path: &Path, e: std::io::Error) -> AuditError {
    AuditError::Store(StoreError::io(action, path, e))
}

fn contradicted(fault: Fault, detail: String) -> AuditError {
    AuditError::Contradicted { fault, detail }
}

pub(crate) fn uuid_v7(ts: Timestamp) -> String {
    let secs = u64::try_from(ts.as_second()).unwrap_or(0);
    let nanos = u32::try_from(ts.subsec_nanosecond()).unwrap_or(0);
    uuid::Uuid::new_v7(uuid::Timestamp::from_unix(uuid::NoContext, secs, nanos)).to_string()
}

/// The `hash` and `seq` of a stored line, or why it is not a record.
pub(crate) fn line_facts(line: &[u8]) -> Result<(String, Option<u64>), String> {
    let v: Value = serde_json::from_slice(line).map_err(|e| format!("{e}"))?;
    let hash = v
        .get("hash")
        .and_then(Value::as_str)
        .filter(|h| h.starts_with("sha256:"))
        .map(str::to_owned)
        .ok_or_else(|| "it has no `hash` field".to_owned())?;
    Ok((hash, v.get("seq").and_then(Value::as_u64)))
}

impl AuditLog {
    fn open_anchor(&self) -> std::io::Result<File> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .open(self.anchor_path())
    }

    /// Makes the anchor of a trail that has none: `point` in both slots, synced, its
    /// directory entry synced. Another process making it at the same moment wins the race
    /// harmlessly (then its file is opened).
    fn create_anchor(&self, point: Point, boot: &str) -> Result<File, AuditError> {
        let path = self.anchor_path();
        let mut a = Anchor::empty(boot);
        a.point = point.clone();
        a.durable = point;
        a.applied = if a.point.count == 0 { Some(0) } else { None };
        // Made whole beside it, then linked into place: nobody sees a half-written anchor,
        // and of two processes making it at once one wins and the other opens it.
        let dir = self.dir();
        let mut tmp = tempfile::Builder::new()
            .prefix(".tmp-anchor-")
            .tempfile_in(dir)
            .map_err(|e| unavailable("create a temporary file in", dir, e))?;
        tmp.write_all(&anchor::initial_bytes(&a))
            .and_then(|()| tmp.as_file().sync_all())
            .map_err(|e| unavailable("write", tmp.path(), e))?;
        match tmp.persist_noclobber(&path) {
            Ok(_) => {
                sync_dir(dir)?;
                self.open_anchor()
                    .map_err(|e| unavailable("open", &path, e))
            }
            Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => self
                .open_anchor()
                .map_err(|e| unavailable("open", &path, e)),
            Err(e) => Err(unavailable("create", &path, e.error)),
        }
    }

    /// The anchor of a trail without one: a fresh trail, or one written before anchors
    /// existed (adopted: counted, its modes tightened); a trail of this format without
    /// its anchor is refused (`missing_anchor`).
    fn anchor_for_unanchored(&self, boot: &str) -> Result<File, AuditError> {
        let log_path = self.path();
        let log = match File::open(log_path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return self.create_anchor(Point::genesis(), boot);
            }
            Err(e) => return Err(unavailable("open", log_path, e)),
        };
        let len = log
            .metadata()
            .map_err(|e| unavailable("read", log_path, e))?
            .len();
        let end = scan::end(&log, len).map_err(|e| unavailable("read", log_path, e))?;
        let Some((offset, last)) = end.last else {
            return self.create_anchor(Point::genesis(), boot);
        };
        let (head, seq) = line_facts(&last).map_err(|reason| AuditError::Damaged {
            path: log_path.to_path_buf(),
            offset,
            reason,
        })?;
        if seq.is_some() {
            // Another appender may have made the anchor after this one looked and before
            // it read the trail: records with `seq` are only ever written under an anchor.
            if let Ok(f) = self.open_anchor() {
                return Ok(f);
            }
            return Err(contradicted(
                Fault::MissingAnchor,
                format!(
                    "`{}` is gone while the trail holds records",
                    self.anchor_path().display()
                ),
            ));
        }
        // A trail from before anchors: count its lines once, and adopt it.
        let count = scan::count_lines(&log, end.complete_end)
            .map_err(|e| unavailable("read", log_path, e))?;
        fsutil::tighten(&log, log_path)?;
        fsutil::tighten_dir(self.dir())?;
        self.create_anchor(
            Point {
                count,
                head,
                end: end.complete_end,
            },
            boot,
        )
    }

    /// Opens the anchor (made for a fresh trail) and the trail for writing, without the
    /// lock: [`AuditLog::probe_writable`].
    pub(crate) fn open_for_writing(&self) -> Result<(), AuditError> {
        let anchor = match self.open_anchor() {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                fsutil::ensure_dir(self.dir())?;
                self.anchor_for_unanchored(&fsutil::boot_id())?
            }
            Err(e) => return Err(unavailable("open", &self.anchor_path(), e)),
        };
        drop(anchor);
        match OpenOptions::new().append(true).open(self.path()) {
            Ok(_) => Ok(()),
            // A fresh trail: the first append makes it, if its anchor names no record.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // The directory must take the new file.
                let probe = tempfile::Builder::new()
                    .prefix(".tmp-probe-")
                    .tempfile_in(self.dir())
                    .map_err(|e| unavailable("create a file in", self.dir(), e))?;
                drop(probe);
                Ok(())
            }
            Err(e) => Err(unavailable("open", self.path(), e)),
        }
    }

    /// Opens the trail for writing under the exclusive lock and checks its end against
    /// the anchor; recovers a torn tail. See the module docs.
    pub(crate) fn open_locked(&self) -> Result<Locked, AuditError> {
        let boot = fsutil::boot_id();
        let anchor_file = match self.open_anchor() {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                fsutil::ensure_dir(self.dir())?;
                self.anchor_for_unanchored(&boot)?
            }
            Err(e) => return Err(unavailable("open", &self.anchor_path(), e)),
        };
        anchor_file
            .lock()
            .map_err(|e| unavailable("lock", &self.anchor_path(), e))?;
        self.step(AuditStep::Locked);
        let anchor = match anchor::read(&anchor_file)
            .map_err(|e| unavailable("read", &self.anchor_path(), e))?
        {
            AnchorState::Valid(a) => a,
            AnchorState::Damaged(why) => return Err(contradicted(Fault::BadAnchor, why)),
        };
        let trusted = anchor.trusted(&boot).clone();
        let log_path = self.path().to_path_buf();
        let (log, created_log) = match OpenOptions::new().read(true).append(true).open(&log_path) {
            Ok(f) => (f, false),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && trusted.count == 0 => {
                let f = OpenOptions::new()
                    .read(true)
                    .append(true)
                    .create(true)
                    .mode(FILE_MODE)
                    .open(&log_path)
                    .map_err(|e| unavailable("create", &log_path, e))?;
                (f, true)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(contradicted(
                    Fault::MissingLog,
                    format!(
                        "the trail is gone while its anchor names {} records",
                        trusted.count
                    ),
                ));
            }
            Err(e) => return Err(unavailable("open", &log_path, e)),
        };
        // The trail's own lock too: what appenders took before the anchor existed, so that
        // an older hcp still running (a long-lived `hcp mcp`) waits for this one.
        log.lock().map_err(|e| unavailable("lock", &log_path, e))?;
        let len = log
            .metadata()
            .map_err(|e| unavailable("read", &log_path, e))?
            .len();
        let mut locked = Locked {
            anchor_file,
            log,
            log_path,
            durable: anchor.durable.clone(),
            tail: trusted.clone(),
            anchor,
            boot,
            created_log,
            repair: None,
        };
        if !(locked.anchor.same_boot(&locked.boot) && trusted.end == len) {
            locked.find_tail(&trusted, len)?;
            if locked.tail.end < len {
                self.recover(&mut locked, len)?;
            }
        }
        Ok(locked)
    }

    /// Cuts a torn tail (from `locked.tail.end` to `len`): saves it beside the trail, then
    /// overwrites it in place with a `recovery` record, so that at every instant the trail
    /// holds either the torn bytes or the record that names them.
    fn recover(&self, locked: &mut Locked, len: u64) -> Result<(), AuditError> {
        let from = locked.tail.end;
        let path = locked.log_path.clone();
        let torn = scan::read_at(&locked.log, from, len - from)
            .map_err(|e| unavailable("read", &path, e))?;
        let sha256 = sha256_tagged(&torn);
        let short = sha256.trim_start_matches("sha256:").get(..12).unwrap_or("");
        let saved_as = format!("torn-{from}-{short}.bin");
        write_atomic(&self.dir().join(&saved_as), &torn)?;
        let repair = Repair {
            offset: from,
            bytes: len - from,
            sha256,
            saved_as,
        };
        let mut fields = Map::new();
        fields.insert(
            "repair".into(),
            serde_json::to_value(&repair).unwrap_or(Value::Null),
        );
        let (line, w) = locked.encode(Kind::Recovery, fields, Timestamp::now());
        let at = OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(|e| unavailable("open", &path, e))?;
        at.write_all_at(&line, from)
            .map_err(|e| unavailable("write", &path, e))?;
        let end = from + line.len() as u64;
        if end < len {
            at.set_len(end)
                .map_err(|e| unavailable("truncate", &path, e))?;
        }
        at.sync_data().map_err(|e| unavailable("sync", &path, e))?;
        locked.advance(&w, end, true);
        locked.repair = Some(repair);
        self.step(AuditStep::Recovered);
        let applied = locked.applied_after(from);
        locked.write_anchor(applied);
        Ok(())
    }

    /// Writes one record of `kind` and, when `sync`, waits for `fdatasync`. A write or
    /// sync that fails is undone (the trail is cut back to where it was), so a failed
    /// append leaves nothing behind. The anchor is not moved: see
    /// [`Locked::write_anchor`].
    pub(crate) fn write_record(
        &self,
        locked: &mut Locked,
        kind: Kind,
        fields: Map<String, Value>,
        ts: Timestamp,
        sync: bool,
    ) -> Result<Written, AuditError> {
        let (line, w) = locked.encode(kind, fields, ts);
        let before = locked.tail.end;
        let path = locked.log_path.clone();
        let undo = |locked: &Locked, action, e| {
            // Best effort: a cut that fails leaves a torn tail, which the next open recovers.
            let _ = locked.log.set_len(before);
            unavailable(action, &path, e)
        };
        if let Err(e) = (&locked.log).write_all(&line) {
            return Err(undo(locked, "append to", e));
        }
        self.step(AuditStep::Written(kind));
        let durable = sync && self.durable;
        if durable {
            if let Err(e) = locked.log.sync_data() {
                return Err(undo(locked, "sync", e));
            }
            if locked.created_log {
                sync_dir(self.dir())?;
                locked.created_log = false;
            }
            self.step(AuditStep::Synced(kind));
        }
        locked.advance(&w, before + line.len() as u64, durable);
        Ok(w)
    }
}

impl Locked {
    /// Finds the trail's last record when the anchor does not say it (another boot, a
    /// crash before the anchor moved, a torn tail), and checks that the trail still holds
    /// what the anchor vouches for.
    fn find_tail(&mut self, trusted: &Point, len: u64) -> Result<(), AuditError> {
        let path = self.log_path.clone();
        let io = |e| unavailable("read", &path, e);
        let end = scan::end(&self.log, len).map_err(io)?;
        if trusted.end > end.complete_end {
            return Err(contradicted(
                Fault::Truncated,
                format!(
                    "the trail ends at byte {} and its anchor names {} records ending at byte {}",
                    end.complete_end, trusted.count, trusted.end
                ),
            ));
        }
        if trusted.count > 0 {
            let ok = match scan::line_ending_at(&self.log, trusted.end).map_err(io)? {
                Some((_, line)) => match line_facts(&line) {
                    Ok((hash, seq)) => {
                        hash == trusted.head && seq.is_none_or(|s| s == trusted.count)
                    }
                    Err(_) => false,
                },
                None => false,
            };
            if !ok {
                return Err(contradicted(
                    Fault::AnchorMismatch,
                    format!(
                        "the record that ends at byte {} is not record {} with hash `{}` of the anchor",
                        trusted.end, trusted.count, trusted.head
                    ),
                ));
            }
        }
        let Some((offset, last)) = end.last else {
            self.tail = Point::genesis();
            return Ok(());
        };
        let (head, seq) = line_facts(&last).map_err(|reason| AuditError::Damaged {
            path: path.clone(),
            offset,
            reason,
        })?;
        let count = match seq {
            Some(s) => s,
            None => {
                trusted.count
                    + scan::count_lines_between(&self.log, trusted.end, end.complete_end)
                        .map_err(io)?
            }
        };
        self.tail = Point {
            count,
            head,
            end: end.complete_end,
        };
        Ok(())
    }

    /// The line of the next record and what it will be once written.
    fn encode(&self, kind: Kind, fields: Map<String, Value>, ts: Timestamp) -> (Vec<u8>, Written) {
        let id = uuid_v7(ts);
        let seq = self.tail.count + 1;
        let mut m = fields;
        m.insert("ts".into(), Value::String(format_ts(ts)));
        m.insert("id".into(), Value::String(id.clone()));
        m.insert("seq".into(), Value::from(seq));
        m.insert("kind".into(), Value::String(kind.as_str().into()));
        m.insert("prev".into(), Value::String(self.tail.head.clone()));
        let hash = record_hash(&m);
        m.insert("hash".into(), Value::String(hash.clone()));
        let mut line = canonical_json(&Value::Object(m));
        line.push(b'\n');
        let w = Written {
            id,
            seq,
            ts,
            hash,
            start: self.tail.end,
        };
        (line, w)
    }

    fn advance(&mut self, w: &Written, end: u64, durable: bool) {
        self.tail = Point {
            count: w.seq,
            head: w.hash.clone(),
            end,
        };
        if durable {
            self.durable = self.tail.clone();
        }
    }

    /// Moves the anchor to the trail's last record (one `pwrite`, no sync), with the spend
    /// watermark `applied`. A failure leaves the anchor lagging, which is not damage, so
    /// it is not reported.
    pub(crate) fn write_anchor(&mut self, applied: Option<u64>) {
        let a = Anchor {
            v: 1,
            generation: self.anchor.generation + 1,
            boot: self.boot.clone(),
            point: self.tail.clone(),
            durable: self.durable.clone(),
            applied,
        };
        if anchor::write(&self.anchor_file, &a).is_ok() {
            self.anchor = a;
        }
    }

    /// The spend watermark after a record that spends nothing was appended at `start`:
    /// it moves past the record when it stood just before it.
    pub(crate) fn applied_after(&self, start: u64) -> Option<u64> {
        self.anchor
            .applied_in(&self.boot)
            .and_then(|a| (a == start).then_some(self.tail.end).or(Some(a)))
    }
}

impl Drop for Locked {
    fn drop(&mut self) {
        let _ = self.log.unlock();
        let _ = self.anchor_file.unlock();
    }
}
