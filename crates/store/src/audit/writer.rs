//! Appending under the lock: open, check the trail's end against its anchor, recover a
//! torn tail, write a record (synced or not), move the anchor. See the module docs of
//! [`super`] for the protocol and what holds when a process is killed at each point.

use super::anchor::{self, Anchor, AnchorState, Point, SlotFault};
use super::fsutil::Boot;
use super::key::{ChainKey, KEYED_PREFIX};
use super::record::{Kind, canonical_json, canonical_sealed, sha256_tagged};
use super::{AuditError, AuditLog, AuditStep, Fault, Repair, reserve, scan};
use crate::atomic::write_atomic;
use crate::error::StoreError;
use crate::session::{Timestamp, format_ts};
use serde_json::{Map, Value};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileExt, MetadataExt};
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
    /// The newest ledger generation an `act made` record names, as the next anchor
    /// carries it ([`Anchor::ledger`]).
    ledger: Option<u64>,
    /// The newest ledger generation this process wrote (0: none): the next anchor carries
    /// it too, whether or not a record names it (an approval's spend notes its marker
    /// in the ledger after the intent).
    written: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// The torn tail this open recovered.
    pub(crate) repair: Option<Repair>,
    /// The chain key.
    pub(crate) key: ChainKey,
    /// Outcomes the reserve holds room for (calls admitted and not ended, this boot).
    pub(crate) held: u64,
    /// Bytes allocated to the trail beyond its end: the reserve ([`reserve`]).
    pub(crate) reserved: u64,
    /// The reserve to keep, in bytes.
    reserve_target: u64,
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
        .filter(|h| h.starts_with("sha256:") || h.starts_with(KEYED_PREFIX))
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

    /// Why there is no anchor to open: a trail of this store without its anchor
    /// (`missing_anchor`), or neither (`missing_log`): a store's trail is made with its
    /// keys and first record ([`crate::made`]), so a missing anchor is never a fresh trail.
    fn no_anchor(&self) -> AuditError {
        if self.path().exists() {
            contradicted(
                Fault::MissingAnchor,
                format!(
                    "`{}` is gone while the trail holds records",
                    self.anchor_path().display()
                ),
            )
        } else {
            contradicted(
                Fault::MissingLog,
                format!(
                    "`{}` and its anchor are gone while the store's chain key says it wrote a trail",
                    self.path().display()
                ),
            )
        }
    }

    /// Opens the anchor and the trail for writing, without the lock:
    /// [`AuditLog::probe_writable`].
    pub(crate) fn open_for_writing(&self) -> Result<(), AuditError> {
        match self.open_anchor() {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(self.no_anchor()),
            Err(e) => return Err(unavailable("open", &self.anchor_path(), e)),
        }
        match OpenOptions::new().append(true).open(self.path()) {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(self.no_anchor()),
            Err(e) => Err(unavailable("open", self.path(), e)),
        }
    }

    /// Opens the trail for writing under the exclusive lock and checks its end against
    /// the anchor; recovers a torn tail and a torn anchor slot; refills the reserve. See
    /// the module docs.
    pub(crate) fn open_locked(&self) -> Result<Locked, AuditError> {
        let boot = self.boot();
        let key = self.chain_key()?;
        let anchor_file = match self.open_anchor() {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(self.no_anchor()),
            Err(e) => return Err(unavailable("open", &self.anchor_path(), e)),
        };
        anchor_file
            .lock()
            .map_err(|e| unavailable("lock", &self.anchor_path(), e))?;
        self.step(AuditStep::Locked);
        let (anchor, slot_fault) = self.checked_anchor(&anchor_file, &key, &boot)?;
        let trusted = anchor.trusted(&boot.id).clone();
        let log_path = self.path().to_path_buf();
        let log = match OpenOptions::new().read(true).append(true).open(&log_path) {
            Ok(f) => f,
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
        let meta = log
            .metadata()
            .map_err(|e| unavailable("read", &log_path, e))?;
        let len = meta.len();
        let mut locked = Locked {
            anchor_file,
            log,
            log_path,
            durable: anchor.durable.clone(),
            tail: trusted.clone(),
            held: anchor.held_in(&boot.id),
            ledger: anchor.ledger,
            written: self.home().ledger_newest_cell(),
            anchor,
            boot: boot.id,
            repair: None,
            key,
            reserved: reserve::beyond_end(&meta),
            reserve_target: self.reserve_bytes(),
        };
        if trusted.end < len {
            // Records past the anchor's point (an anchor put back older than the trail, or
            // a writer killed before it moved the anchor): the ledger generations their
            // acts name stay carried by the anchor this append writes, or a state ledger
            // put back older would be believed after one more record.
            let lag = crate::stamp::trail_last_made_from(
                self.home(),
                crate::ledger::MADE_FIELD,
                trusted.end,
            );
            locked.ledger = locked.ledger.max(lag);
        }
        if !(locked.anchor.same_boot(&locked.boot) && trusted.end == len) {
            locked.find_tail(&trusted, len)?;
            if locked.tail.end < len {
                self.recover(&mut locked, len)?;
            }
        }
        if let Some(sf) = slot_fault {
            self.record_slot_recovery(&mut locked, &sf)?;
        }
        locked.refill_if_low();
        Ok(locked)
    }

    /// The anchor read under `key`: a slot fault is accepted only when a power cut explains
    /// it (RUNTIME §6), and is then returned for the caller to record.
    fn checked_anchor(
        &self,
        file: &File,
        key: &ChainKey,
        boot: &Boot,
    ) -> Result<(Anchor, Option<SlotFault>), AuditError> {
        let path = self.anchor_path();
        match anchor::read(file, Some(key)).map_err(|e| unavailable("read", &path, e))? {
            AnchorState::Valid(a) if a.v == anchor::KEYED => Ok((a, None)),
            AnchorState::Valid(a) => Err(contradicted(
                Fault::BadAnchor,
                format!(
                    "the anchor is of format {} beside the store's chain key: it was replaced",
                    a.v
                ),
            )),
            AnchorState::SlotFault(sf) => {
                let ctime = file
                    .metadata()
                    .map(|m| m.ctime())
                    .map_err(|e| unavailable("read", &path, e))?;
                if sf.recoverable(ctime, &boot.id, boot.began()) {
                    Ok((sf.intact.clone(), Some(sf)))
                } else {
                    Err(contradicted(
                        Fault::AnchorMismatch,
                        format!(
                            "slot {} of the anchor does not hold ({}), and no power cut explains it: the anchor was changed in this boot",
                            sf.slot, sf.why
                        ),
                    ))
                }
            }
            AnchorState::Damaged(why) => Err(contradicted(Fault::BadAnchor, why)),
        }
    }

    /// Records that an anchor slot torn by a power cut was recovered from the other slot
    /// (a `recovery` record naming the slot, synced), then rewrites both slots.
    fn record_slot_recovery(&self, locked: &mut Locked, sf: &SlotFault) -> Result<(), AuditError> {
        let mut fields = Map::new();
        fields.insert(
            "anchor_slot".into(),
            serde_json::json!({
                "slot": sf.slot,
                "generation": sf.intact.generation,
                "reason": sf.why,
            }),
        );
        let w = self.write_record(locked, Kind::Recovery, fields, Timestamp::now(), true)?;
        let applied = locked.applied_after(w.start);
        locked.rewrite_anchor(applied);
        Ok(())
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
        let ledger = (kind == Kind::Authority)
            .then(|| made_ledger(&fields))
            .flatten();
        let (line, w) = locked.encode(kind, fields, ts);
        let before = locked.tail.end;
        let path = locked.log_path.clone();
        // The reserve (RUNTIME §5.4): an outcome uses the room its admission held; any
        // other record is written only when the reserve holds it beyond that room, and an
        // intent only when it also holds its call's outcome.
        if kind != Kind::Outcome && !locked.has_room(line.len() as u64, kind == Kind::Intent) {
            return Err(AuditError::ReserveShort {
                path: path.clone(),
                reserved: locked.reserved,
                needed: reserve::need(locked.held, line.len() as u64, kind == Kind::Intent),
            });
        }
        let undo = |locked: &Locked, action, e| {
            // Best effort: a cut that fails leaves a torn tail, which the next open recovers.
            let _ = locked.log.set_len(before);
            unavailable(action, &path, e)
        };
        if self.fails_at(kind) {
            return Err(undo(
                locked,
                "append to",
                std::io::Error::from_raw_os_error(libc::EIO),
            ));
        }
        if let Err(e) = (&locked.log).write_all(&line) {
            return Err(undo(locked, "append to", e));
        }
        self.step(AuditStep::Written(kind));
        let durable = sync && self.durable;
        if durable {
            if let Err(e) = locked.log.sync_data() {
                return Err(undo(locked, "sync", e));
            }
            self.step(AuditStep::Synced(kind));
        }
        locked.advance(&w, before + line.len() as u64, durable);
        if let Some(g) = ledger {
            locked.ledger = Some(locked.ledger.map_or(g, |l| l.max(g)));
        }
        locked.reserved = locked.reserved.saturating_sub(line.len() as u64);
        match kind {
            Kind::Intent => locked.held += 1,
            Kind::Outcome => locked.held = locked.held.saturating_sub(1),
            _ => {}
        }
        Ok(w)
    }
}

/// The ledger generation an `act made` or `migrate` record's fields name
/// ([`crate::ledger::MADE_FIELD`] of its `changed`), for the anchor to carry.
fn made_ledger(fields: &Map<String, Value>) -> Option<u64> {
    if !fields
        .get("act")
        .and_then(Value::as_str)
        .is_some_and(crate::ledger::names_ledger)
    {
        return None;
    }
    fields
        .get("changed")?
        .get(crate::ledger::MADE_FIELD)?
        .as_u64()
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
        encode(&self.key, &self.tail, kind, fields, ts)
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

    fn next_anchor(&self, applied: Option<u64>) -> Anchor {
        Anchor {
            v: anchor::KEYED,
            generation: self.anchor.generation + 1,
            boot: self.boot.clone(),
            point: self.tail.clone(),
            durable: self.durable.clone(),
            applied,
            held: Some(self.held),
            ledger: match self.written.load(std::sync::atomic::Ordering::Relaxed) {
                0 => self.ledger,
                g => Some(self.ledger.map_or(g, |l| l.max(g))),
            },
        }
    }

    /// Moves the anchor to the trail's last record (one `pwrite`, no sync), with the spend
    /// watermark `applied`. A failure leaves the anchor lagging, which is not damage, so
    /// it is not reported.
    pub(crate) fn write_anchor(&mut self, applied: Option<u64>) {
        let a = self.next_anchor(applied);
        if anchor::write(&self.anchor_file, &a, &self.key).is_ok() {
            self.anchor = a;
        }
    }

    /// [`Locked::write_anchor`] into both slots (one `pwrite` of both: after a torn slot
    /// was recovered, so that both hold again).
    fn rewrite_anchor(&mut self, applied: Option<u64>) {
        let a = self.next_anchor(applied);
        if self
            .anchor_file
            .write_all_at(&anchor::initial_bytes(&a, &self.key), 0)
            .is_ok()
        {
            self.anchor = a;
        }
    }

    /// Tops the reserve up when less than half of it is left (one `fallocate`, keeping the
    /// file's size); a disk that has no room keeps what is left.
    fn refill_if_low(&mut self) {
        let want = reserve::target(self.reserve_target, self.held);
        if self.reserved >= want / 2 {
            return;
        }
        if let Ok(now) = reserve::refill(&self.log, self.tail_len(), want) {
            self.reserved = now;
        }
    }

    /// The trail's length (its complete lines: after the open, nothing else follows).
    fn tail_len(&self) -> u64 {
        self.tail.end
    }

    /// Whether the reserve holds `line` bytes more than the room set aside for the
    /// outcomes of admitted calls and, for an admission (`admitting`), for this call's
    /// outcome too; tops it up first when it does not.
    pub(crate) fn has_room(&mut self, line: u64, admitting: bool) -> bool {
        let need = reserve::need(self.held, line, admitting);
        if self.reserved >= need {
            return true;
        }
        // The whole reserve if the disk has room for it, else at least this record's need.
        let want = reserve::target(self.reserve_target, self.held).max(need);
        for n in [want, need] {
            if let Ok(now) = reserve::refill(&self.log, self.tail_len(), n) {
                self.reserved = now;
            }
            if self.reserved >= need {
                return true;
            }
        }
        reserve::unsupported(&self.log)
    }

    /// The spend watermark after a record that spends nothing was appended at `start`:
    /// it moves past the record when it stood just before it.
    pub(crate) fn applied_after(&self, start: u64) -> Option<u64> {
        self.anchor
            .applied_in(&self.boot)
            .and_then(|a| (a == start).then_some(self.tail.end).or(Some(a)))
    }
}

/// The line of the record after `tail`, keyed by `key`, and what it will be once written:
/// `ts`, `id`, `seq`, `kind` and `prev` added to `fields`, the keyed `hash` over the
/// canonical JSON of that object, the line the canonical JSON of the whole record.
pub(crate) fn encode(
    key: &ChainKey,
    tail: &Point,
    kind: Kind,
    fields: Map<String, Value>,
    ts: Timestamp,
) -> (Vec<u8>, Written) {
    let id = uuid_v7(ts);
    let seq = tail.count + 1;
    let mut m = fields;
    m.insert("ts".into(), Value::String(format_ts(ts)));
    m.insert("id".into(), Value::String(id.clone()));
    m.insert("seq".into(), Value::from(seq));
    m.insert("kind".into(), Value::String(kind.as_str().into()));
    m.insert("prev".into(), Value::String(tail.head.clone()));
    let (mut line, hash) = if m.contains_key("hash") {
        // Fields that name a `hash` of their own: hashed with it, then replaced.
        let mut m = Value::Object(m);
        let hash = key.hash_canonical(&canonical_json(&m));
        if let Value::Object(o) = &mut m {
            o.insert("hash".into(), Value::String(hash.clone()));
        }
        (canonical_json(&m), hash)
    } else {
        // One encoding: the line is the hashed bytes with `hash` spliced in.
        canonical_sealed(&m, "hash", |b| key.hash_canonical(b))
    };
    line.push(b'\n');
    let w = Written {
        id,
        seq,
        ts,
        hash,
        start: tail.end,
    };
    (line, w)
}

impl Drop for Locked {
    fn drop(&mut self) {
        let _ = self.log.unlock();
        let _ = self.anchor_file.unlock();
    }
}
