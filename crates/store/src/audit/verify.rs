//! Walking the chain: `hcp audit verify` (RUNTIME §6).

use super::record::{GENESIS, record_hash};
use super::{Repair, open_shared};
use crate::error::StoreError;
use serde::Serialize;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;

/// What broke, at the first broken record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BreakKind {
    /// The line is not a JSON object with string `hash` and `prev` fields.
    Unparseable,
    /// The record's `hash` is not the hash of its content: the record was edited.
    HashMismatch,
    /// The record's `prev` is not the previous record's `hash`: a record before it was
    /// removed, inserted or moved (or this one was).
    PrevMismatch,
    /// The last line has no newline: a write was cut short (a crash, a full disk). The
    /// next append cuts it off, saves it beside the trail and records a `repair`.
    TornTail,
}

impl BreakKind {
    /// The word: `unparseable`, `hash_mismatch`, `prev_mismatch`, `torn_tail`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unparseable => "unparseable",
            Self::HashMismatch => "hash_mismatch",
            Self::PrevMismatch => "prev_mismatch",
            Self::TornTail => "torn_tail",
        }
    }
}

/// The first broken record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Broken {
    /// Its line number, from 1.
    pub line: u64,
    /// Its `id`, when the line parses far enough to have one.
    pub id: Option<String>,
    /// What broke.
    pub kind: BreakKind,
    /// What was expected there (`hash`: the recomputed hash; `prev`: the previous
    /// record's hash), when that applies.
    pub expected: Option<String>,
    /// What the line holds instead (for a torn tail: its length in bytes).
    pub found: Option<String>,
}

/// A record that follows a repaired torn tail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RepairNote {
    /// The line of the record carrying the `repair` field, from 1.
    pub line: u64,
    /// That record's `id`.
    pub id: Option<String>,
    /// What was cut.
    pub repair: Repair,
}

/// The answer of [`super::AuditLog::verify`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    /// Records checked and found sound, up to the first broken one.
    pub records: u64,
    /// The `hash` of the last sound record ([`GENESIS`] for an empty trail).
    pub head: String,
    /// Repairs recorded along the sound part of the chain, oldest first.
    pub repairs: Vec<RepairNote>,
    /// The first broken record; `None` when the whole chain is sound.
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

/// Walks the file at `path` under a shared lock (appends wait; readers do not).
pub(super) fn verify(path: &Path) -> Result<VerifyReport, StoreError> {
    let mut report = VerifyReport {
        records: 0,
        head: GENESIS.to_owned(),
        repairs: Vec::new(),
        broken: None,
    };
    let Some(file) = open_shared(path)? else {
        return Ok(report);
    };
    let mut reader = BufReader::new(&file);
    let mut buf = Vec::new();
    let mut line = 0u64;
    loop {
        buf.clear();
        let n = reader
            .read_until(b'\n', &mut buf)
            .map_err(|e| StoreError::io("read", path, e))?;
        if n == 0 {
            return Ok(report);
        }
        line += 1;
        let brk = |kind, id, expected, found| {
            Some(Broken {
                line,
                id,
                kind,
                expected,
                found,
            })
        };
        if buf.last() != Some(&b'\n') {
            report.broken = brk(BreakKind::TornTail, None, None, Some(format!("{n} bytes")));
            return Ok(report);
        }
        let parsed = serde_json::from_slice::<Value>(&buf[..n - 1]);
        let Ok(Value::Object(m)) = parsed else {
            let why = match parsed {
                Err(e) => e.to_string(),
                Ok(_) => "not a JSON object".to_owned(),
            };
            report.broken = brk(BreakKind::Unparseable, None, None, Some(why));
            return Ok(report);
        };
        let id = str_field(&m, "id");
        let (Some(hash), Some(prev)) = (str_field(&m, "hash"), str_field(&m, "prev")) else {
            let why = "no string `hash` or `prev` field".to_owned();
            report.broken = brk(BreakKind::Unparseable, id, None, Some(why));
            return Ok(report);
        };
        let computed = record_hash(&m);
        if computed != hash {
            report.broken = brk(BreakKind::HashMismatch, id, Some(computed), Some(hash));
            return Ok(report);
        }
        if prev != report.head {
            let expected = report.head.clone();
            report.broken = brk(BreakKind::PrevMismatch, id, Some(expected), Some(prev));
            return Ok(report);
        }
        if let Some(r) = m.get("repair") {
            match serde_json::from_value::<Repair>(r.clone()) {
                Ok(repair) => report.repairs.push(RepairNote { line, id, repair }),
                Err(e) => {
                    let why = format!("its `repair` field does not parse: {e}");
                    report.broken = brk(BreakKind::Unparseable, id, None, Some(why));
                    return Ok(report);
                }
            }
        }
        report.records += 1;
        report.head = hash;
    }
}
