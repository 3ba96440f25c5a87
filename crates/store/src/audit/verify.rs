//! Walking the chain: `hcp audit verify` (RUNTIME §6).

use super::anchor::{self, AnchorState, Point};
use super::checkpoint::Checkpoint;
use super::fsutil;
use super::record::{GENESIS, Kind, record_hash};
use super::{AuditLog, Fault, Repair, open_read};
use crate::error::StoreError;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};

/// The first fault of a trail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Broken {
    /// The fault's code.
    pub fault: Fault,
    /// The line where the trail stops being sound, from 1 (for a cut tail: the line the
    /// first missing record would be on).
    pub line: u64,
    /// The record there, when the line parses far enough to have one.
    pub id: Option<String>,
    /// What was expected there (a hash, a count), when that applies.
    pub expected: Option<String>,
    /// What the trail holds instead.
    pub found: Option<String>,
    /// What broke, in words, lowercase.
    pub detail: String,
}

/// A call whose intent has no outcome: hcp was killed while it ran, or it still runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Interrupted {
    /// The intent's line, from 1.
    pub line: u64,
    /// Its `seq`.
    pub seq: Option<u64>,
    /// Its `id` (the call's `audit_id`).
    pub id: String,
    /// Its time.
    pub ts: String,
    /// The principal.
    pub principal: Option<String>,
    /// The pack.
    pub pack_id: Option<String>,
    /// The verb key.
    pub verb_key: Option<String>,
}

/// A `recovery` record (or a legacy record carrying `repair`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RepairNote {
    /// The line of the record, from 1.
    pub line: u64,
    /// Its `id`.
    pub id: Option<String>,
    /// What was cut.
    pub repair: Repair,
}

/// What the anchor said, as the walk found it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AnchorNote {
    /// The records it vouches for (the last written in this boot, else the last synced).
    pub count: u64,
    /// The hash of the last of them.
    pub head: String,
    /// Records after it: appended by a process killed before it moved the anchor, or
    /// written before a reboot; not damage.
    pub lag: u64,
}

/// The answer of [`AuditLog::verify`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    /// Records checked and found sound, up to the first fault.
    pub records: u64,
    /// The `hash` of the last sound record ([`GENESIS`] for an empty trail).
    pub head: String,
    /// Recoveries of torn tails along the sound part, oldest first.
    pub repairs: Vec<RepairNote>,
    /// Calls with an intent and no outcome, oldest first.
    pub interrupted: Vec<Interrupted>,
    /// Bytes of a torn last line (a crash mid-write): the next append recovers it.
    pub torn_tail: Option<u64>,
    /// The anchor, when there is one.
    pub anchor: Option<AnchorNote>,
    /// Records written before `seq` and `kind` existed (their trail has no anchor until
    /// its next append adopts it).
    pub legacy: u64,
    /// The checkpoint the trail was checked against and found extended.
    pub checkpoint: Option<u64>,
    /// The first fault; `None` when the whole trail is sound.
    pub broken: Option<Broken>,
}

impl VerifyReport {
    /// Whether the whole trail is sound.
    pub fn is_clean(&self) -> bool {
        self.broken.is_none()
    }
}

fn str_field(m: &serde_json::Map<String, Value>, k: &str) -> Option<String> {
    m.get(k).and_then(Value::as_str).map(str::to_owned)
}

enum AnchorSeen {
    Missing,
    Damaged(String),
    Trusted(Point),
}

/// Reads the anchor, then the trail's length, so that the anchor never names more than
/// the length holds except when records were removed.
fn snapshot(log: &AuditLog) -> Result<(AnchorSeen, Option<std::fs::File>, u64), StoreError> {
    let path = log.anchor_path();
    let seen = match open_read(&path)? {
        None => AnchorSeen::Missing,
        Some(f) => {
            f.lock_shared()
                .map_err(|e| StoreError::io("lock", &path, e))?;
            match anchor::read(&f).map_err(|e| StoreError::io("read", &path, e))? {
                AnchorState::Valid(a) => AnchorSeen::Trusted(a.trusted(&fsutil::boot_id()).clone()),
                AnchorState::Damaged(why) => AnchorSeen::Damaged(why),
            }
        }
    };
    let file = open_read(log.path())?;
    let len = match &file {
        Some(f) => f
            .metadata()
            .map_err(|e| StoreError::io("read", log.path(), e))?
            .len(),
        None => 0,
    };
    Ok((seen, file, len))
}

struct Walk<'a> {
    report: VerifyReport,
    open: BTreeMap<String, Interrupted>,
    anchor: Option<&'a Point>,
    checkpoint: Option<&'a Checkpoint>,
    seq_seen: bool,
}

impl Walk<'_> {
    fn fail(
        &mut self,
        fault: Fault,
        line: u64,
        id: Option<String>,
        expected: Option<String>,
        found: Option<String>,
        detail: String,
    ) {
        self.report.broken = Some(Broken {
            fault,
            line,
            id,
            expected,
            found,
            detail,
        });
    }

    /// Checks one complete line; `false` when it is the first fault.
    fn line(&mut self, line: u64, bytes: &[u8], end: u64) -> bool {
        let parsed = serde_json::from_slice::<Value>(bytes);
        let Ok(Value::Object(m)) = parsed else {
            let why = match parsed {
                Err(e) => e.to_string(),
                Ok(_) => "not a JSON object".to_owned(),
            };
            self.fail(
                Fault::Unparseable,
                line,
                None,
                None,
                Some(why),
                "the line is not an audit record".into(),
            );
            return false;
        };
        let id = str_field(&m, "id");
        let (Some(hash), Some(prev)) = (str_field(&m, "hash"), str_field(&m, "prev")) else {
            self.fail(
                Fault::Unparseable,
                line,
                id,
                None,
                None,
                "the line has no string `hash` or `prev` field".into(),
            );
            return false;
        };
        let computed = record_hash(&m);
        if computed != hash {
            self.fail(
                Fault::HashMismatch,
                line,
                id,
                Some(computed),
                Some(hash),
                "its hash does not match its content: the record was edited".into(),
            );
            return false;
        }
        if prev != self.report.head {
            let expected = self.report.head.clone();
            self.fail(Fault::PrevMismatch, line, id, Some(expected), Some(prev),
                "its `prev` is not the previous record's hash: a record before it was removed, inserted or moved".into());
            return false;
        }
        let position = self.report.records + 1;
        let seq = m.get("seq").and_then(Value::as_u64);
        match seq {
            Some(s) if s != position => {
                self.fail(
                    Fault::SeqMismatch,
                    line,
                    id,
                    Some(position.to_string()),
                    Some(s.to_string()),
                    "its `seq` is not its position in the chain".into(),
                );
                return false;
            }
            Some(_) => self.seq_seen = true,
            None if self.seq_seen => {
                self.fail(
                    Fault::SeqMismatch,
                    line,
                    id,
                    Some(position.to_string()),
                    None,
                    "a record without `seq` follows records that have one".into(),
                );
                return false;
            }
            None => self.report.legacy += 1,
        }
        let kind = m.get("kind").and_then(Value::as_str);
        if kind == Some(Kind::Intent.as_str()) {
            let i = Interrupted {
                line,
                seq,
                id: id.clone().unwrap_or_default(),
                ts: str_field(&m, "ts").unwrap_or_default(),
                principal: str_field(&m, "principal"),
                pack_id: str_field(&m, "pack_id"),
                verb_key: str_field(&m, "verb_key"),
            };
            self.open.insert(i.id.clone(), i);
        } else if kind == Some(Kind::Outcome.as_str()) {
            let of = str_field(&m, "intent").unwrap_or_default();
            if self.open.remove(&of).is_none() {
                self.fail(
                    Fault::OrphanOutcome,
                    line,
                    id,
                    None,
                    Some(of),
                    "an outcome that names no earlier intent without an outcome".into(),
                );
                return false;
            }
        }
        if let Some(r) = m.get("repair") {
            match serde_json::from_value::<Repair>(r.clone()) {
                Ok(repair) => self.report.repairs.push(RepairNote {
                    line,
                    id: id.clone(),
                    repair,
                }),
                Err(e) => {
                    self.fail(
                        Fault::Unparseable,
                        line,
                        id,
                        None,
                        Some(e.to_string()),
                        "its `repair` field does not parse".into(),
                    );
                    return false;
                }
            }
        }
        if let Some(a) = self.anchor
            && a.count == position
            && (a.head != hash || a.end != end)
        {
            self.fail(Fault::AnchorMismatch, line, id, Some(a.head.clone()), Some(hash),
                format!("the anchor names record {position} ending at byte {}, and the trail holds another one: it was replaced or rewritten", a.end));
            return false;
        }
        if let Some(c) = self.checkpoint
            && c.count == position
            && c.head != hash
        {
            self.fail(Fault::CheckpointMismatch, line, id, Some(c.head.clone()), Some(hash),
                format!("the checkpoint of {position} records names another record here: the trail no longer extends it"));
            return false;
        }
        self.report.records = position;
        self.report.head = hash;
        true
    }
}

impl Default for VerifyReport {
    /// The report of an empty trail.
    fn default() -> Self {
        empty_report()
    }
}

fn empty_report() -> VerifyReport {
    VerifyReport {
        records: 0,
        head: GENESIS.to_owned(),
        repairs: Vec::new(),
        interrupted: Vec::new(),
        torn_tail: None,
        anchor: None,
        legacy: 0,
        checkpoint: None,
        broken: None,
    }
}

/// Walks the trail of `log` against its anchor and, when given, a checkpoint.
pub(super) fn verify(
    log: &AuditLog,
    checkpoint: Option<&Checkpoint>,
) -> Result<VerifyReport, StoreError> {
    let (seen, file, len) = snapshot(log)?;
    if let Some(c) = checkpoint {
        let ours = super::checkpoint::public_key(log)?;
        if ours.as_deref() != Some(c.key.as_str()) {
            let mut report = empty_report();
            report.broken = Some(Broken {
                fault: Fault::CheckpointMismatch,
                line: 0,
                id: None,
                expected: ours.clone(),
                found: Some(c.key.clone()),
                detail: match ours {
                    Some(_) => "the checkpoint was signed by another key than this store's".into(),
                    None => {
                        "this store has no checkpoint key: the checkpoint is another store's".into()
                    }
                },
            });
            return Ok(report);
        }
    }
    let trusted = match &seen {
        AnchorSeen::Trusted(p) => Some(p.clone()),
        _ => None,
    };
    let mut w = Walk {
        report: empty_report(),
        open: BTreeMap::new(),
        anchor: trusted.as_ref(),
        checkpoint,
        seq_seen: false,
    };
    if let Some(file) = &file {
        let mut reader = BufReader::with_capacity(64 * 1024, file.take(len));
        let mut buf = Vec::new();
        let (mut line, mut end) = (0u64, 0u64);
        loop {
            buf.clear();
            let n = reader
                .read_until(b'\n', &mut buf)
                .map_err(|e| StoreError::io("read", log.path(), e))?;
            if n == 0 {
                break;
            }
            line += 1;
            if buf.last() != Some(&b'\n') {
                w.report.torn_tail = Some(n as u64);
                break;
            }
            end += n as u64;
            if !w.line(line, &buf[..n - 1], end) {
                break;
            }
        }
    }
    let mut report = w.report;
    report.interrupted = w.open.into_values().collect();
    report.interrupted.sort_by_key(|i| i.line);
    if report.broken.is_some() {
        return Ok(report);
    }
    let records = report.records;
    let next_line = records + 1;
    let fail = |report: &mut VerifyReport,
                fault,
                expected: Option<String>,
                found: Option<String>,
                detail: String| {
        report.broken = Some(Broken {
            fault,
            line: next_line,
            id: None,
            expected,
            found,
            detail,
        });
    };
    match seen {
        AnchorSeen::Missing if records > report.legacy => fail(
            &mut report,
            Fault::MissingAnchor,
            None,
            None,
            format!(
                "`{}` is gone while the trail holds {records} records",
                super::ANCHOR_FILE
            ),
        ),
        AnchorSeen::Missing => {}
        AnchorSeen::Damaged(why) => fail(&mut report, Fault::BadAnchor, None, None, why),
        AnchorSeen::Trusted(p) => {
            if file.is_none() && p.count > 0 {
                fail(
                    &mut report,
                    Fault::MissingLog,
                    Some(format!("{} records", p.count)),
                    None,
                    format!(
                        "`{}` is gone while its anchor names {} records",
                        super::AUDIT_FILE,
                        p.count
                    ),
                );
            } else if p.count > records {
                fail(
                    &mut report,
                    Fault::Truncated,
                    Some(format!("{} records", p.count)),
                    Some(format!("{records} records")),
                    format!(
                        "the trail holds {records} records and its anchor names {}: its tail was cut",
                        p.count
                    ),
                );
            } else {
                report.anchor = Some(AnchorNote {
                    lag: records - p.count,
                    count: p.count,
                    head: p.head,
                });
            }
        }
    }
    if report.broken.is_none()
        && let Some(c) = checkpoint
    {
        if c.count > records {
            fail(
                &mut report,
                Fault::CheckpointMismatch,
                Some(format!("{} records", c.count)),
                Some(format!("{records} records")),
                format!(
                    "the trail holds {records} records and the checkpoint names {}: records were removed",
                    c.count
                ),
            );
        } else {
            report.checkpoint = Some(c.count);
        }
    }
    Ok(report)
}
