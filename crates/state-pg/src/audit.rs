//! The audit in the database (RUNTIME §6, §9): one hash chain per machine.
//!
//! A record is a row `(machine, seq, prev, hash, body)`. `body` is the canonical JSON
//! (`hcp_store::audit::canonical_json`) of its fields, `ts`, `id` (UUID v7) and
//! `machine` among them; `seq`, `prev` and `hash` are the chain's, assigned by the server
//! under the lock of the machine's head row (`audit_chain`, also the anchor):
//!
//! ```text
//! hash = "sha256:" + hex(SHA-256(prev + "\n" + seq + "\n" + body))      prev of seq 1: GENESIS
//! ```
//!
//! [`PgState::audit_verify`] recomputes every chain and names the first fault of each:
//! `hash_mismatch` (a body or hash edited), `prev_mismatch` (a record removed, moved or
//! re-linked), `machine_mismatch` (a record that names another machine), `truncated`
//! (the anchor is ahead of the last record: records cut off the end), `anchor_mismatch`
//! (the anchor disagrees with the last record, or is missing), `missing_log` (an anchor
//! without records). What the chain cannot prove: whoever may write the tables can
//! rewrite a chain and its anchor together; a signed checkpoint kept elsewhere catches
//! that (RUNTIME §6).

use crate::PgState;
use crate::error::{PgError, PgResult};
use crate::machine::MachineId;
use hcp_model::Code;
use hcp_store::audit::{Entry, Fault as StoreFault, GENESIS, canonical_json, sha256_tagged};
use hcp_store::session::{Timestamp, format_ts};
use postgres::fallible_iterator::FallibleIterator;
use postgres::types::Type;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Keys a caller may not put in a record's fields: those the backend stamps (`ts`, `id`,
/// `machine`) and the chain's own (`seq`, `prev`, `hash`).
pub const RESERVED_FIELDS: [&str; 6] = ["ts", "id", "machine", "seq", "prev", "hash"];

/// The field that says what a record is (`intent`, `outcome`, …).
pub const KIND_FIELD: &str = "kind";
/// The kind of a call's write-ahead record.
pub const KIND_INTENT: &str = "intent";
/// The kind of a call's closing record.
pub const KIND_OUTCOME: &str = "outcome";
/// The kind of an act of authority's record.
pub const KIND_AUTHORITY: &str = "authority";
/// The field of an outcome that names its intent's `id`.
pub const INTENT_LINK_FIELD: &str = "intent";

/// Why a record cannot be appended (besides the database).
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// A field the store writes itself (code `audit_bad_entry`).
    #[error("audit field `{key}` is reserved")]
    ReservedField {
        /// The key.
        key: String,
    },
    /// The database failed (code `state_unavailable`).
    #[error(transparent)]
    State(#[from] PgError),
}

impl AuditError {
    /// `audit_bad_entry`, or the database's code.
    pub fn code(&self) -> Code {
        match self {
            Self::ReservedField { .. } => Code::AuditBadEntry,
            Self::State(e) => e.code(),
        }
    }
}

/// The fields of a file-store [`Entry`] as a record body (without `ts`, `id`,
/// `machine`): the same names and values the file store writes.
pub fn body_from_entry(entry: &Entry) -> Map<String, Value> {
    let mut m = Map::new();
    let opt = |s: &Option<String>| s.clone().map_or(Value::Null, Value::String);
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
    m.insert(
        "code".into(),
        entry
            .code
            .map_or(Value::Null, |c| Value::String(c.as_str().into())),
    );
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
    m
}

/// A body stamped with its time and id.
pub(crate) struct Stamped {
    pub ts: Timestamp,
    pub id: String,
    pub body: String,
}

fn uuid_v7(ts: Timestamp) -> String {
    let secs = u64::try_from(ts.as_second()).unwrap_or(0);
    let nanos = u32::try_from(ts.subsec_nanosecond()).unwrap_or(0);
    uuid::Uuid::new_v7(uuid::Timestamp::from_unix(uuid::NoContext, secs, nanos)).to_string()
}

/// Adds `ts`, `id` and `machine` to `fields` and encodes them canonically.
pub(crate) fn stamp(
    machine: &MachineId,
    fields: &Map<String, Value>,
    now: Timestamp,
) -> Result<Stamped, AuditError> {
    if let Some(key) = fields
        .keys()
        .find(|k| RESERVED_FIELDS.contains(&k.as_str()))
    {
        return Err(AuditError::ReservedField { key: key.clone() });
    }
    let id = uuid_v7(now);
    let mut m = fields.clone();
    m.insert("ts".into(), Value::String(format_ts(now)));
    m.insert("id".into(), Value::String(id.clone()));
    m.insert("machine".into(), Value::String(machine.as_str().to_owned()));
    let body = String::from_utf8(canonical_json(&Value::Object(m)))
        .map_err(|_| AuditError::State(PgError::damaged("a record that is not UTF-8")))?;
    Ok(Stamped { ts: now, id, body })
}

/// The chain hash of a record (see the module docs).
pub fn chain_hash(prev: &str, seq: u64, body: &str) -> String {
    sha256_tagged(format!("{prev}\n{seq}\n{body}").as_bytes())
}

/// One record as read back.
#[derive(Debug, Clone, PartialEq)]
pub struct PgRecord {
    /// The machine whose chain holds it.
    pub machine: String,
    /// Its place in that chain (from 1).
    pub seq: u64,
    /// The previous record's hash ([`GENESIS`] for seq 1).
    pub prev: String,
    /// Its hash.
    pub hash: String,
    /// Its fields (`ts`, `id`, `machine`, …); empty when the body is not a JSON object.
    pub body: Map<String, Value>,
}

impl PgRecord {
    /// The record as one JSON object: its fields with `seq`, `prev` and `hash` (what
    /// `hcp audit tail --json` prints, one a line).
    pub fn to_json(&self) -> Value {
        let mut m = self.body.clone();
        m.insert("machine".into(), Value::String(self.machine.clone()));
        m.insert("seq".into(), Value::from(self.seq));
        m.insert("prev".into(), Value::String(self.prev.clone()));
        m.insert("hash".into(), Value::String(self.hash.clone()));
        Value::Object(m)
    }

    /// The record's `id`.
    pub fn id(&self) -> Option<&str> {
        self.body.get("id").and_then(Value::as_str)
    }

    /// The record's `kind`, if it has one.
    pub fn kind(&self) -> Option<&str> {
        self.body.get(KIND_FIELD).and_then(Value::as_str)
    }

    fn from_row(row: &postgres::Row) -> PgResult<Self> {
        let body: String = row.try_get(4)?;
        Ok(Self {
            machine: row.try_get(0)?,
            seq: u64::try_from(row.try_get::<_, i64>(1)?).unwrap_or(0),
            prev: row.try_get(2)?,
            hash: row.try_get(3)?,
            body: match serde_json::from_str(&body) {
                Ok(Value::Object(m)) => m,
                _ => Map::new(),
            },
        })
    }
}

/// What [`PgState::record`] appended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgAppended {
    /// The record's `id`.
    pub id: String,
    /// Its `ts`.
    pub ts: Timestamp,
    /// Its place in this machine's chain.
    pub seq: u64,
    /// Its hash.
    pub hash: String,
}

/// The first fault of one chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// `hash_mismatch`, `prev_mismatch`, `machine_mismatch`, `truncated`,
    /// `anchor_mismatch`, `missing_log`: the file store's fault of the same name.
    pub code: StoreFault,
    /// The record where it shows, when there is one.
    pub seq: Option<u64>,
    /// That record's `id`, when it has one.
    pub id: Option<String>,
    /// What is wrong, lowercase.
    pub reason: String,
}

/// An intent without an outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenIntent {
    /// Its `id` (the call's `audit_id`).
    pub id: String,
    /// Its place in the chain.
    pub seq: u64,
    /// Its `ts`.
    pub ts: String,
    /// Its principal, pack and verb key, when the record has them.
    pub principal: Option<String>,
    /// The pack.
    pub pack_id: Option<String>,
    /// The verb key.
    pub verb_key: Option<String>,
}

/// An act of authority's intent without its completion (RUNTIME §6; docs/DESIGN.md, "Acts:
/// intent and completion").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenAct {
    /// Its `seq` in the machine's chain.
    pub seq: u64,
    /// Its `id`.
    pub id: String,
    /// Its time.
    pub ts: String,
    /// The act (`grant`, `session start` …).
    pub act: String,
    /// Who made it (`owner`, or the principal).
    pub actor: Option<String>,
}

/// One machine's chain as verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainReport {
    /// The machine.
    pub machine: String,
    /// Records read.
    pub records: u64,
    /// The last record's hash, if any.
    pub head: Option<String>,
    /// Intents without an outcome (calls whose hcp was killed): `interrupted`, not
    /// damage. In chain order.
    pub interrupted: Vec<OpenIntent>,
    /// Acts of authority recorded as an intent (`phase: intent`) with no `act made` or
    /// `act failed` after them (hcp killed between the record and the change):
    /// `interrupted`, not damage. In chain order.
    pub interrupted_acts: Vec<OpenAct>,
    /// The first fault, `None` when the chain is sound.
    pub fault: Option<Fault>,
    /// Whether the chain holds keyed records (`hmac-sha256:`).
    pub keyed: bool,
    /// Keyed records whose hash was not checked: another machine's chain, whose key only
    /// that machine holds (`not_checked`).
    pub not_checked: bool,
    /// The checkpoint it was checked against: its count, and the records past it.
    pub checkpoint: Option<(u64, u64)>,
}

/// Every chain of the database, by machine.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VerifyReport {
    /// One per machine, ordered by machine id.
    pub chains: Vec<ChainReport>,
}

impl VerifyReport {
    /// Whether every chain is sound.
    pub fn is_sound(&self) -> bool {
        self.chains.iter().all(|c| c.fault.is_none())
    }

    /// Records of all chains together.
    pub fn records(&self) -> u64 {
        self.chains.iter().map(|c| c.records).sum()
    }
}

/// Where [`PgState::audit_follow`] goes on from: the last seq seen per machine.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Cursor {
    seen: BTreeMap<String, u64>,
}

impl Cursor {
    /// A cursor before every record (follow then replays everything).
    pub fn start() -> Self {
        Self::default()
    }

    /// The last seq seen of `machine` (0: none).
    pub fn seen(&self, machine: &str) -> u64 {
        self.seen.get(machine).copied().unwrap_or(0)
    }

    fn advance(&mut self, r: &PgRecord) {
        let e = self.seen.entry(r.machine.clone()).or_insert(0);
        *e = (*e).max(r.seq);
    }
}

const RECORD_COLUMNS: &str = "machine, seq, prev, hash, body";

struct ChainWalk {
    report: ChainReport,
    expect_prev: String,
    expect_seq: u64,
    open: Vec<OpenIntent>,
    /// Acts' intents without a completion yet, by `seq`.
    open_acts: BTreeMap<u64, OpenAct>,
    /// The chain key, for this machine's own chain.
    key: Option<hcp_store::audit::ChainKey>,
    /// The witnessed checkpoint to check against: its count and head.
    checkpoint: Option<(u64, String)>,
}

impl ChainWalk {
    fn new(machine: &str) -> Self {
        Self {
            report: ChainReport {
                machine: machine.to_owned(),
                records: 0,
                head: None,
                interrupted: Vec::new(),
                interrupted_acts: Vec::new(),
                fault: None,
                keyed: false,
                not_checked: false,
                checkpoint: None,
            },
            expect_prev: GENESIS.to_owned(),
            expect_seq: 1,
            open: Vec::new(),
            open_acts: BTreeMap::new(),
            key: None,
            checkpoint: None,
        }
    }

    /// Whether `hash` holds for the record: the server's plain hash before the keyed part,
    /// the machine's keyed hash in it (checked with the key when this is this machine's
    /// chain). Records a fault when not.
    fn hash_holds(
        &mut self,
        seq: u64,
        prev: &str,
        hash: &str,
        body: &str,
        id: &Option<String>,
    ) -> bool {
        let machine = self.report.machine.clone();
        if hash.starts_with(hcp_store::audit::KEYED_PREFIX) {
            self.report.keyed = true;
            match &self.key {
                Some(k) if crate::keyed_chain_hash(k, prev, seq, body) != hash => {
                    self.fault(
                        StoreFault::HashMismatch,
                        Some(seq),
                        id.clone(),
                        format!("record {seq} of machine `{machine}` was changed, or its chain recomputed without the machine's key: its keyed hash does not hold"),
                    );
                    false
                }
                Some(_) => true,
                None => {
                    self.report.not_checked = true;
                    true
                }
            }
        } else if self.report.keyed {
            self.fault(
                StoreFault::HashMismatch,
                Some(seq),
                id.clone(),
                format!("record {seq} of machine `{machine}` has a plain hash after the keyed part of its chain: it was not written by the machine"),
            );
            false
        } else if chain_hash(prev, seq, body) != hash {
            self.fault(
                StoreFault::HashMismatch,
                Some(seq),
                id.clone(),
                format!("record {seq} of machine `{machine}` was changed: its hash does not match its content"),
            );
            false
        } else {
            true
        }
    }

    fn fault(&mut self, code: StoreFault, seq: Option<u64>, id: Option<String>, reason: String) {
        self.report.fault = Some(Fault {
            code,
            seq,
            id,
            reason,
        });
    }

    /// Checks one raw row; returns false once a fault is found.
    fn step(&mut self, seq: u64, prev: &str, hash: &str, body: &str) -> bool {
        let parsed: Option<Map<String, Value>> = match serde_json::from_str(body) {
            Ok(Value::Object(m)) => Some(m),
            _ => None,
        };
        let id = parsed
            .as_ref()
            .and_then(|m| m.get("id"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let machine = self.report.machine.clone();
        if prev != self.expect_prev || seq != self.expect_seq {
            let reason = if seq != self.expect_seq {
                format!(
                    "record {seq} of machine `{machine}` follows record {}: records are missing or moved",
                    self.expect_seq - 1
                )
            } else {
                format!("record {seq} of machine `{machine}` does not link to the record before it")
            };
            self.fault(StoreFault::PrevMismatch, Some(seq), id, reason);
            return false;
        }
        if !self.hash_holds(seq, prev, hash, body, &id) {
            return false;
        }
        if let Some((count, head)) = &self.checkpoint
            && *count == seq
            && head != hash
        {
            self.fault(
                StoreFault::CheckpointMismatch,
                Some(seq),
                id,
                format!("record {seq} of machine `{machine}` is not the one its witnessed checkpoint names: the chain was rewritten since"),
            );
            return false;
        }
        let Some(m) = parsed else {
            self.fault(
                StoreFault::HashMismatch,
                Some(seq),
                None,
                format!("record {seq} of machine `{machine}` is not a JSON object"),
            );
            return false;
        };
        if m.get("machine").and_then(Value::as_str) != Some(machine.as_str()) {
            self.fault(
                StoreFault::MachineMismatch,
                Some(seq),
                id,
                format!("record {seq} in the chain of machine `{machine}` names another machine"),
            );
            return false;
        }
        match m.get(KIND_FIELD).and_then(Value::as_str) {
            Some(KIND_INTENT) => {
                if let Some(id) = &id {
                    let text = |k: &str| m.get(k).and_then(Value::as_str).map(str::to_owned);
                    self.open.push(OpenIntent {
                        id: id.clone(),
                        seq,
                        ts: text("ts").unwrap_or_default(),
                        principal: text("principal"),
                        pack_id: text("pack_id"),
                        verb_key: text("verb_key"),
                    });
                }
            }
            Some(KIND_OUTCOME) => {
                if let Some(link) = m.get(INTENT_LINK_FIELD).and_then(Value::as_str) {
                    self.open.retain(|o| o.id != link);
                }
            }
            Some(KIND_AUTHORITY) => {
                let text = |k: &str| m.get(k).and_then(Value::as_str).map(str::to_owned);
                let act = text("act").unwrap_or_default();
                if act == hcp_store::audit::ACT_MADE || act == hcp_store::audit::ACT_FAILED {
                    let of = m
                        .get("changed")
                        .and_then(|c| c.get("seq"))
                        .and_then(Value::as_u64);
                    if let Some(of) = of {
                        self.open_acts.remove(&of);
                    }
                } else if m.get("phase").and_then(Value::as_str)
                    == Some(hcp_store::audit::PHASE_INTENT)
                {
                    self.open_acts.insert(
                        seq,
                        OpenAct {
                            seq,
                            id: id.clone().unwrap_or_default(),
                            ts: text("ts").unwrap_or_default(),
                            act,
                            actor: text("actor"),
                        },
                    );
                }
            }
            _ => {}
        }
        self.report.records += 1;
        self.report.head = Some(hash.to_owned());
        self.expect_prev = hash.to_owned();
        self.expect_seq += 1;
        true
    }

    fn finish(mut self, anchor: Option<(u64, String)>) -> ChainReport {
        if self.report.fault.is_none()
            && let Some((count, _)) = &self.checkpoint
        {
            let last = self.expect_seq - 1;
            if *count > last {
                let machine = self.report.machine.clone();
                let count = *count;
                self.fault(
                    StoreFault::Rollback,
                    Some(last + 1),
                    None,
                    format!("machine `{machine}`'s chain holds {last} records and its witnessed checkpoint names {count}: records were removed or the database restored"),
                );
            } else {
                self.report.checkpoint = Some((*count, last - count));
            }
        }
        if self.report.fault.is_none() {
            let last = self.expect_seq - 1;
            let machine = self.report.machine.clone();
            match anchor {
                None => self.fault(
                    StoreFault::AnchorMismatch,
                    None,
                    None,
                    format!("machine `{machine}` has records but no anchor"),
                ),
                Some((seq, _)) if seq > 0 && last == 0 => self.fault(
                    StoreFault::MissingLog,
                    None,
                    None,
                    format!("the anchor of machine `{machine}` counts {seq} records; none is left"),
                ),
                Some((seq, _)) if seq > last => self.fault(
                    StoreFault::Truncated,
                    Some(last + 1),
                    None,
                    format!(
                        "the anchor of machine `{machine}` counts {seq} records; only {last} are left: records {}..={seq} were cut",
                        last + 1
                    ),
                ),
                Some((seq, hash)) if seq != last || Some(&hash) != self.report.head.as_ref() && last > 0 => {
                    self.fault(
                        StoreFault::AnchorMismatch,
                        Some(seq),
                        None,
                        format!("the anchor of machine `{machine}` does not match its last record {last}"),
                    );
                }
                Some(_) => {}
            }
        }
        self.report.interrupted = self.open;
        self.report.interrupted_acts = self.open_acts.into_values().collect();
        self.report
    }
}

impl PgState {
    /// Appends one record (a refusal, an event) to this machine's chain and waits for it to
    /// be durable: one statement, one transaction.
    ///
    /// # Errors
    /// [`AuditError::ReservedField`]; [`AuditError::State`] when the database fails.
    pub fn record(
        &self,
        fields: &Map<String, Value>,
        now: Timestamp,
    ) -> Result<PgAppended, AuditError> {
        self.append(fields, now, true)
    }

    /// Appends a call's outcome: committed, but without waiting for the server's WAL
    /// flush (`synchronous_commit = off` for that transaction), as the file store writes
    /// an outcome without its own fdatasync. Every later durable commit carries it; a
    /// crash of the server before one leaves the call `interrupted`, never a broken chain.
    ///
    /// # Errors
    /// As [`PgState::record`].
    pub fn record_outcome(
        &self,
        fields: &Map<String, Value>,
        now: Timestamp,
    ) -> Result<PgAppended, AuditError> {
        self.append(fields, now, false)
    }

    fn append(
        &self,
        fields: &Map<String, Value>,
        now: Timestamp,
        sync: bool,
    ) -> Result<PgAppended, AuditError> {
        let Stamped { ts, id, body } = stamp(self.machine(), fields, now)?;
        if let Some(key) = self.chain_key() {
            let (seq, hash) = self.append_keyed(key, &body, sync)?;
            self.noted(seq);
            return Ok(PgAppended { id, ts, seq, hash });
        }
        let (seq, hash) = self.with(|c| {
            let row = c.query_typed_one(
                "SELECT o_seq, o_hash FROM @.hcp_append($1, $2, $3)",
                &[
                    (&self.machine().as_str(), Type::TEXT),
                    (&body, Type::TEXT),
                    (&sync, Type::BOOL),
                ],
            )?;
            Ok((row.try_get::<_, i64>(0)?, row.try_get::<_, String>(1)?))
        })?;
        Ok(PgAppended {
            id,
            ts,
            seq: u64::try_from(seq).unwrap_or(0),
            hash,
        })
    }

    /// Appends `body` keyed by this machine's chain key, computed on the head it knows,
    /// again on the head the server answers while another process of the machine moved it
    /// (see `keyed`).
    fn append_keyed(
        &self,
        key: &hcp_store::audit::ChainKey,
        body: &str,
        sync: bool,
    ) -> Result<(u64, String), AuditError> {
        for _ in 0..crate::keyed::MAX_STALE {
            let head = self.head_guess();
            let prev_seq = head
                .as_ref()
                .map(|(s, _)| i64::try_from(*s).unwrap_or(i64::MAX));
            let prev_hash = head.as_ref().map(|(_, h)| h.clone());
            let hash = head
                .as_ref()
                .map(|(s, h)| crate::keyed_chain_hash(key, h, s + 1, body));
            let (status, seq, h): (String, i64, String) = self.with(|c| {
                let row = c.query_typed_one(
                    "SELECT o_status, o_seq, o_hash FROM @.hcp_append_keyed($1, $2, $3, $4, $5, $6)",
                    &[
                        (&self.machine().as_str(), Type::TEXT),
                        (&body, Type::TEXT),
                        (&sync, Type::BOOL),
                        (&prev_seq, Type::INT8),
                        (&prev_hash, Type::TEXT),
                        (&hash, Type::TEXT),
                    ],
                )?;
                Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?))
            })?;
            let seq = u64::try_from(seq).unwrap_or(0);
            self.set_head(seq, h.clone());
            if status == "appended" {
                return Ok((seq, h));
            }
        }
        Err(AuditError::State(PgError::damaged(
            "the chain's head kept moving: another process appends without end",
        )))
    }

    /// [`PgState::record`] of a file-store [`Entry`].
    ///
    /// # Errors
    /// As [`PgState::record`].
    pub fn record_entry(&self, entry: &Entry, now: Timestamp) -> Result<PgAppended, AuditError> {
        self.record(&body_from_entry(entry), now)
    }

    /// Verifies every machine's chain (see the module docs), streaming the records, all
    /// read in one snapshot (so appends racing it are not faults) without a time limit.
    ///
    /// # Errors
    /// [`PgError`] when the database fails; a broken chain is a [`Fault`], not an error.
    pub fn audit_verify(&self) -> PgResult<VerifyReport> {
        self.audit_verify_against(&BTreeMap::new())
    }

    /// [`PgState::audit_verify`], each machine's chain also checked against the witnessed
    /// checkpoint `checkpoints` names for it (its count and head).
    ///
    /// # Errors
    /// As [`PgState::audit_verify`].
    pub fn audit_verify_against(
        &self,
        checkpoints: &BTreeMap<String, (u64, String)>,
    ) -> PgResult<VerifyReport> {
        let own = self.machine().as_str().to_owned();
        let key = self.chain_key().cloned();
        self.with(|conn| {
            // One snapshot: an append racing the walk can neither make an anchor look
            // behind its records nor a record appear after its anchor was read.
            let mut c = conn.snapshot()?;
            let anchors: BTreeMap<String, (u64, String)> = c
                .query_typed("SELECT machine, seq, hash FROM @.audit_chain", &[])?
                .iter()
                .map(|r| {
                    Ok((
                        r.try_get::<_, String>(0)?,
                        (
                            u64::try_from(r.try_get::<_, i64>(1)?).unwrap_or(0),
                            r.try_get(2)?,
                        ),
                    ))
                })
                .collect::<PgResult<_>>()?;
            let mut machines: BTreeSet<String> = anchors.keys().cloned().collect();
            for r in c.query_typed("SELECT DISTINCT machine FROM @.audit_record", &[])? {
                machines.insert(r.try_get(0)?);
            }
            let mut out = VerifyReport::default();
            for m in machines {
                let mut walk = ChainWalk::new(&m);
                if m == own {
                    walk.key.clone_from(&key);
                }
                walk.checkpoint = checkpoints.get(&m).cloned();
                let mut rows = c.query_typed_raw(
                    &format!(
                        "SELECT {RECORD_COLUMNS} FROM @.audit_record WHERE machine = $1 ORDER BY seq"
                    ),
                    [(&m as &(dyn postgres::types::ToSql + Sync), Type::TEXT)],
                )?;
                while let Some(row) = rows.next()? {
                    let seq = u64::try_from(row.try_get::<_, i64>(1)?).unwrap_or(0);
                    let prev: &str = row.try_get(2)?;
                    let hash: &str = row.try_get(3)?;
                    let body: &str = row.try_get(4)?;
                    if !walk.step(seq, prev, hash, body) {
                        break;
                    }
                }
                drop(rows);
                out.chains.push(walk.finish(anchors.get(&m).cloned()));
            }
            c.commit()?;
            Ok(out)
        })
    }

    /// The last `n` records of the fleet, oldest first (by arrival in the database).
    ///
    /// # Errors
    /// [`PgError`].
    pub fn audit_tail(&self, n: usize) -> PgResult<Vec<PgRecord>> {
        let n = i64::try_from(n).unwrap_or(i64::MAX);
        self.with(|c| {
            let rows = c.query_typed(
                &format!(
                    "SELECT {RECORD_COLUMNS} FROM (SELECT {RECORD_COLUMNS}, gid FROM @.audit_record
                     ORDER BY gid DESC LIMIT $1) t ORDER BY gid"
                ),
                &[(&n, Type::INT8)],
            )?;
            rows.iter().map(PgRecord::from_row).collect()
        })
    }

    /// A cursor at the current end of every chain (follow then shows only new records).
    ///
    /// # Errors
    /// [`PgError`].
    pub fn audit_cursor_end(&self) -> PgResult<Cursor> {
        self.with(|c| {
            let mut cur = Cursor::default();
            for r in c.query_typed("SELECT machine, seq FROM @.audit_chain", &[])? {
                cur.seen.insert(
                    r.try_get(0)?,
                    u64::try_from(r.try_get::<_, i64>(1)?).unwrap_or(0),
                );
            }
            Ok(cur)
        })
    }

    /// The records after `cursor` (at most 1,000 per machine a call), waiting up to `wait`
    /// for one to arrive (LISTEN `hcp_audit`, which every append notifies; the query is
    /// also run once after the wait, so a lost notification delays, never drops, a
    /// record). Advances `cursor`. Per machine, records commit in seq order, so a cursor
    /// never skips one.
    ///
    /// # Errors
    /// [`PgError`].
    pub fn audit_follow(&self, cursor: &mut Cursor, wait: Duration) -> PgResult<Vec<PgRecord>> {
        self.with(|c| {
            c.client
                .batch_execute(&format!("LISTEN {}", notify_channel(c.schema)))?;
            let mut got = after(c, cursor)?;
            if got.is_empty() {
                let mut n = c.client.notifications();
                let mut it = n.timeout_iter(wait);
                let _ = it.next()?;
                drop(it);
                drop(n);
                got = after(c, cursor)?;
            }
            // Drain notifications that this batch answered.
            let mut n = c.client.notifications();
            let mut it = n.iter();
            while it.next()?.is_some() {}
            for r in &got {
                cursor.advance(r);
            }
            Ok(got)
        })
    }
}

/// The channel appends notify: `hcp_audit_<schema>` (one per schema, so followers of
/// another schema in the same database are not woken).
fn notify_channel(schema: &str) -> String {
    format!("hcp_audit_{schema}")
}

fn after(c: &mut crate::conn::Conn<'_>, cursor: &Cursor) -> PgResult<Vec<PgRecord>> {
    let machines: Vec<&str> = cursor.seen.keys().map(String::as_str).collect();
    let seqs: Vec<i64> = cursor
        .seen
        .values()
        .map(|s| i64::try_from(*s).unwrap_or(i64::MAX))
        .collect();
    let rows = c.query_typed(
        "WITH cur (machine, seq) AS (SELECT * FROM unnest($1::text[], $2::bigint[]))
         SELECT r.machine, r.seq, r.prev, r.hash, r.body
         FROM @.audit_chain ch
         LEFT JOIN cur ON cur.machine = ch.machine
         CROSS JOIN LATERAL (
             SELECT x.machine, x.seq, x.prev, x.hash, x.body, x.gid FROM @.audit_record x
             WHERE x.machine = ch.machine AND x.seq > coalesce(cur.seq, 0)
             ORDER BY x.seq LIMIT 1000) r
         WHERE ch.seq > coalesce(cur.seq, 0)
         ORDER BY r.gid",
        &[(&machines, Type::TEXT_ARRAY), (&seqs, Type::INT8_ARRAY)],
    )?;
    rows.iter().map(PgRecord::from_row).collect()
}
