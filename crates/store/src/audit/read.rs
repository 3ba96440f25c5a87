//! Reading the trail from a position, checking each record as it comes: what `hcp audit
//! export` ships (RUNTIME §11). A reader takes no lock and writes nothing, so it never
//! slows a call; it checks each record's hash and that it follows the one before it, and
//! stops at the first record that does not verify.

use super::record::{GENESIS, record_hash};
use super::{AuditError, AuditLog, Fault, open_read};
use crate::error::StoreError;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};

/// Where a reader of one chain stands: after the record numbered `seq` (0: before the
/// first) whose hash is `hash`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChainPos {
    /// The machine whose chain it is (a fleet's database, RUNTIME §9); `None` for the file
    /// store's one trail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    /// The number of records read, from 0.
    pub seq: u64,
    /// The hash of the last record read ([`GENESIS`] before the first).
    pub hash: String,
    /// The file store: the byte offset just after that record's line; 0 otherwise.
    #[serde(default)]
    pub offset: u64,
}

impl ChainPos {
    /// Before the first record of `machine`'s chain (`None`: the file store's trail).
    pub fn start(machine: Option<String>) -> Self {
        Self {
            machine,
            seq: 0,
            hash: GENESIS.to_owned(),
            offset: 0,
        }
    }
}

/// One record read and verified.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadRecord {
    /// The record's fields as stored, `hash` and `prev` included (for a database's record
    /// also `machine` and `seq`).
    pub fields: Map<String, Value>,
    /// Where the reader stands after it.
    pub after: ChainPos,
}

/// The first record that does not verify, where a reader stops.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReadFault {
    /// The chain's machine (`None`: the file store).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    /// The record's place in its chain (from 1): the record after the last one read.
    pub seq: u64,
    /// Its `id`, when the line has one.
    pub id: Option<String>,
    /// What `hcp audit verify` would call it.
    pub fault: Fault,
    /// What is wrong, lowercase.
    pub detail: String,
}

/// What one read returned: records of every chain in order within each chain, and the
/// first fault, after which that chain yields nothing more.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReadBatch {
    /// The records read, each verified.
    pub records: Vec<ReadRecord>,
    /// A record that does not verify: the reader stopped before it.
    pub fault: Option<ReadFault>,
}

impl ChainPos {
    /// Checks the record `m` that comes next in this chain, whose hash computed by its
    /// backend is `computed`, ending at byte `offset` (0 for a database): its `hash` is
    /// `computed`, its `prev` is this position's hash, its `seq` (when it has one) is the
    /// next number. The position after it.
    ///
    /// # Errors
    /// The [`ReadFault`] that stops a reader there.
    pub fn next(
        &self,
        m: &Map<String, Value>,
        computed: &str,
        offset: u64,
    ) -> Result<ChainPos, ReadFault> {
        step(self, m, computed, offset)
    }
}

fn step(
    pos: &ChainPos,
    m: &Map<String, Value>,
    computed: &str,
    offset: u64,
) -> Result<ChainPos, ReadFault> {
    let id = m.get("id").and_then(Value::as_str).map(str::to_owned);
    let seq = pos.seq + 1;
    let fault = |fault, detail: String| ReadFault {
        machine: pos.machine.clone(),
        seq,
        id: id.clone(),
        fault,
        detail,
    };
    let (Some(hash), Some(prev)) = (
        m.get("hash").and_then(Value::as_str),
        m.get("prev").and_then(Value::as_str),
    ) else {
        return Err(fault(
            Fault::Unparseable,
            "the record has no string `hash` or `prev` field".into(),
        ));
    };
    if hash != computed {
        return Err(fault(
            Fault::HashMismatch,
            "its hash does not match its content: the record was edited".into(),
        ));
    }
    if prev != pos.hash {
        return Err(fault(
            Fault::PrevMismatch,
            format!(
                "its `prev` is not the hash of record {} (`{}`): a record was removed, inserted or moved, or the trail was replaced",
                pos.seq, pos.hash
            ),
        ));
    }
    if let Some(s) = m.get("seq").and_then(Value::as_u64)
        && s != seq
    {
        return Err(fault(
            Fault::SeqMismatch,
            format!("its `seq` is {s}, its place in the chain {seq}"),
        ));
    }
    Ok(ChainPos {
        machine: pos.machine.clone(),
        seq,
        hash: hash.to_owned(),
        offset,
    })
}

impl AuditLog {
    /// At most `max` complete records after `from`, each checked ([`record_hash`], `prev`,
    /// `seq`), oldest first; the first that does not verify ends the batch as its
    /// [`ReadBatch::fault`]. Takes no lock and writes nothing: a line being written (or a
    /// torn one) is not complete and is not read. A trail shorter than `from` says so
    /// (`truncated`), as does a trail whose first record after `from` does not name it.
    ///
    /// # Errors
    /// [`AuditError::Store`] when the trail cannot be read.
    pub fn read_after(&self, from: &ChainPos, max: usize) -> Result<ReadBatch, AuditError> {
        let mut batch = ReadBatch::default();
        let Some(mut file) = open_read(self.path())? else {
            if from.seq > 0 {
                batch.fault = Some(ReadFault {
                    machine: None,
                    seq: from.seq + 1,
                    id: None,
                    fault: Fault::MissingLog,
                    detail: format!(
                        "the trail is gone while {} records of it were read before",
                        from.seq
                    ),
                });
            }
            return Ok(batch);
        };
        let io = |e| AuditError::Store(StoreError::io("read", self.path(), e));
        let len = file.metadata().map_err(io)?.len();
        if len < from.offset {
            batch.fault = Some(ReadFault {
                machine: None,
                seq: from.seq + 1,
                id: None,
                fault: Fault::Truncated,
                detail: format!(
                    "the trail holds {len} bytes, and {} were read before: it was cut or replaced",
                    from.offset
                ),
            });
            return Ok(batch);
        }
        file.seek(SeekFrom::Start(from.offset)).map_err(io)?;
        let mut reader = BufReader::with_capacity(256 * 1024, file.take(len - from.offset));
        let mut pos = from.clone();
        let mut buf = Vec::new();
        while batch.records.len() < max {
            buf.clear();
            let n = reader.read_until(b'\n', &mut buf).map_err(io)?;
            if n == 0 || buf.last() != Some(&b'\n') {
                break;
            }
            let offset = pos.offset + n as u64;
            let m = match serde_json::from_slice::<Value>(&buf[..n - 1]) {
                Ok(Value::Object(m)) => m,
                other => {
                    batch.fault = Some(ReadFault {
                        machine: None,
                        seq: pos.seq + 1,
                        id: None,
                        fault: Fault::Unparseable,
                        detail: match other {
                            Err(e) => format!("the line is not an audit record: {e}"),
                            Ok(_) => "the line is not a JSON object".into(),
                        },
                    });
                    break;
                }
            };
            let computed = record_hash(&m);
            match step(&pos, &m, &computed, offset) {
                Ok(after) => {
                    pos = after.clone();
                    batch.records.push(ReadRecord { fields: m, after });
                }
                Err(f) => {
                    batch.fault = Some(f);
                    break;
                }
            }
        }
        Ok(batch)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::result_large_err)]
mod tests {
    use super::*;
    use crate::audit::{Decision, Entry};
    use crate::home::Home;
    use std::collections::BTreeMap;

    fn entry(i: usize) -> Entry {
        Entry {
            principal: "agent".into(),
            project: None,
            pack_id: Some("echo".into()),
            verb_key: format!("v{i}"),
            operation: None,
            land: None,
            decision: Decision::Deny,
            code: Some(hcp_model::Code::MissingGrant),
            args_digest: "sha256:00".into(),
            exit_code: None,
            duration_ms: 1,
            extra: BTreeMap::new(),
        }
    }

    #[test]
    fn reads_in_batches_from_where_it_stood_and_stops_at_an_edited_record() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::open(dir.path()).unwrap();
        let log = AuditLog::new(&home).durable(false);
        for i in 0..5 {
            log.append(&entry(i)).unwrap();
        }
        let first = log.read_after(&ChainPos::start(None), 3).unwrap();
        assert_eq!(first.records.len(), 3);
        assert_eq!(first.fault, None);
        let at = first.records[2].after.clone();
        assert_eq!(at.seq, 3);
        let rest = log.read_after(&at, 100).unwrap();
        assert_eq!(
            rest.records.iter().map(|r| r.after.seq).collect::<Vec<_>>(),
            [4, 5]
        );
        // Record 4 edited: the reader stops before it, naming it.
        let text = std::fs::read_to_string(log.path()).unwrap();
        let edited = text.replacen("\"verb_key\":\"v3\"", "\"verb_key\":\"vX\"", 1);
        std::fs::write(log.path(), edited).unwrap();
        let again = log.read_after(&at, 100).unwrap();
        assert!(again.records.is_empty());
        let f = again.fault.unwrap();
        assert_eq!((f.fault, f.seq), (Fault::HashMismatch, 4));
    }

    #[test]
    fn a_torn_line_is_not_read_and_a_cut_trail_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::open(dir.path()).unwrap();
        let log = AuditLog::new(&home).durable(false);
        log.append(&entry(0)).unwrap();
        let all = log.read_after(&ChainPos::start(None), 10).unwrap();
        let at = all.records[0].after.clone();
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(log.path())
            .unwrap();
        f.write_all(b"{\"half\":").unwrap();
        let b = log.read_after(&at, 10).unwrap();
        assert_eq!((b.records.len(), b.fault), (0, None));
        std::fs::write(log.path(), b"").unwrap();
        let cut = log.read_after(&at, 10).unwrap();
        assert_eq!(cut.fault.unwrap().fault, Fault::Truncated);
    }
}
