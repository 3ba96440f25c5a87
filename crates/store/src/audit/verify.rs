//! Walking the chain: `hcp audit verify` (RUNTIME §6).
//!
//! Records whose `hash` is `sha256:` are the part of a trail written before keyed chains,
//! checked by that rule ([`record_hash`]); they may only come before the keyed part. The
//! keyed part (`hmac-sha256:`) begins with the store's `init` record, or with the `migrate`
//! record that moved an older trail onto the key, and each of its hashes is checked under
//! the chain key. A verifier without the key (the bootstrap pack's child, whose view covers
//! the key on the store's read-only mount, [`ChainKey::covered_by_view`]; nowhere else is a
//! keyed trail verified without its key: `missing_chain_key`) checks everything else — each
//! record's structure, `prev`, `seq`, intents and outcomes, the anchor's content — and the
//! newest signed checkpoint, and reports the keyed chain `not_checked`.
//!
//! A trail of an earlier version is checked as it is, writing nothing; what tells it from a
//! store of this version whose trail was removed or recomputed is `earlier`'s.

use super::anchor::{self, AnchorState, Point, SlotFault};
use super::checkpoint::Checkpoint;
use super::key::{ChainKey, KEYED_PREFIX, KeyRead};
use super::record::{GENESIS, Kind, record_hash};
use super::witness::Held;
use super::{AuditLog, Fault, Repair, open_read};
use crate::error::StoreError;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::MetadataExt;

/// How the keyed chain was checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChainCheck {
    /// Every keyed hash (and the anchor's MACs) checked under the chain key.
    Checked,
    /// The chain key cannot be read here (a call's view, a copy without its keys): the
    /// keyed hashes and the anchor's MACs were not checked; everything else was.
    NotChecked,
    /// A trail from before keyed chains, not migrated yet: plain SHA-256 throughout.
    Legacy,
}

/// Where the checkpoint a trail was checked against came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckpointSource {
    /// `--checkpoint FILE`.
    File,
    /// The witness `audit.witness` names (how it is named: `directory …`, `state`).
    Witness(String),
    /// The store's own copy of the newest checkpoint it signed (`audit/checkpoint.last`),
    /// for a verifier without the witness.
    Last,
}

/// The checkpoint a trail is checked against, as the caller found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Against {
    /// None.
    Nothing,
    /// A checkpoint whose signature held, from `source`.
    Checkpoint(Checkpoint, CheckpointSource),
    /// Every checkpoint a witness (or a file of them) holds, from `source`: the trail is
    /// checked against each.
    Held(Held, CheckpointSource),
    /// What each of several witnesses holds (the configured one and those the trail named
    /// before it, RUNTIME §6): the trail is checked against every checkpoint of each, and
    /// against the newest of them all.
    Witnesses(Vec<(Held, CheckpointSource)>),
    /// The witness holds a line that is not a valid checkpoint of this store.
    Forged(CheckpointSource, String),
    /// The witness cannot be read.
    Unavailable(CheckpointSource, String),
}

impl Against {
    /// The witnesses it names (`CheckpointSource::Witness`), each once, in its order.
    pub fn witnesses(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let sources: Vec<&CheckpointSource> = match self {
            Self::Checkpoint(_, s) | Self::Held(_, s) => vec![s],
            Self::Witnesses(sets) => sets.iter().map(|(_, s)| s).collect(),
            Self::Nothing | Self::Forged(..) | Self::Unavailable(..) => Vec::new(),
        };
        for s in sources {
            if let CheckpointSource::Witness(w) = s
                && !out.contains(w)
            {
                out.push(w.clone());
            }
        }
        out
    }
}

/// What the trail was checked against and how far it runs past it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckpointNote {
    /// Where it came from.
    pub source: CheckpointSource,
    /// Its record count.
    pub count: u64,
    /// When it was signed.
    pub time: String,
    /// Records of the trail after it.
    pub past: u64,
}

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

/// An act of authority recorded and then not made: the [`super::ACT_FAILED`] record that
/// says so (docs/DESIGN.md, "The chain's format"). Not damage: the trail tells the truth.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FailedAct {
    /// The line of the `act failed` record, from 1.
    pub line: u64,
    /// The `seq` of the act's own record.
    pub seq: Option<u64>,
    /// The act (`grant`, `session start` …).
    pub act: String,
    /// Why it was not made (`witness_unavailable`, `store_io` …).
    pub code: String,
    /// The `act failed` record's time.
    pub ts: String,
}

/// An act of authority whose write-ahead intent (`phase` = `"intent"`) has neither an
/// [`super::ACT_MADE`] nor an [`super::ACT_FAILED`] record after it: hcp was killed
/// between the act's record and its completion (or it still runs). Not damage: the act
/// may or may not have been made, and the trail says just that.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InterruptedAct {
    /// The intent's line, from 1.
    pub line: u64,
    /// Its `seq`.
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

/// A record that names the trail's witness ([`super::WITNESS_ACT`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WitnessNamed {
    /// Its line, from 1.
    pub line: u64,
    /// Its `seq`.
    pub seq: u64,
    /// Its hash: the head of the checkpoint the witness took of it.
    pub hash: String,
    /// The witness as the runtime names it (`directory DIR`); `None`: none from then on.
    pub witness: Option<String>,
}

/// A witness the trail named before its present one, retired by the recorded act that
/// named the next, whose checkpoints are gone (its directory, or its file of this store,
/// removed): the part of the trail it witnessed is checked by the chain alone. A note, not
/// a fault (docs/DESIGN.md, "Witnesses").
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RetiredWitness {
    /// The witness as the trail names it (`directory DIR`).
    pub witness: String,
    /// The `seq` of the first record naming it.
    pub from: u64,
    /// The `seq` of the record naming the next witness (or none).
    pub until: u64,
    /// Why it holds nothing, lowercase.
    pub why: String,
}

/// A torn line of the witness's file: a crash mid-append, not damage (RUNTIME §6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WitnessTorn {
    /// Where: the file and its line.
    pub place: String,
    /// Its bytes.
    pub bytes: u64,
    /// Whether a recovery line follows it (else it is the last line, and the next
    /// checkpoint recovers it).
    pub recovered: bool,
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
    /// Acts of authority recorded and then not made, oldest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failed_acts: Vec<FailedAct>,
    /// Acts of authority whose intent has no completion, oldest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub interrupted_acts: Vec<InterruptedAct>,
    /// Bytes of a torn last line (a crash mid-write): the next append recovers it.
    pub torn_tail: Option<u64>,
    /// The anchor, when there is one.
    pub anchor: Option<AnchorNote>,
    /// Records written before `seq` and `kind` existed (their trail has no anchor until
    /// its next append adopts it).
    pub legacy: u64,
    /// The checkpoint the trail was checked against and found extended (its count).
    pub checkpoint: Option<u64>,
    /// The checkpoint it was checked against: where from, and how far the trail runs past
    /// it.
    pub against: Option<CheckpointNote>,
    /// Each witness the trail was checked against, as the runtime names it (`directory
    /// DIR`, `state`), oldest part first; empty when none was (then a rewrite by whoever
    /// holds the store's keys is not caught: RUNTIME §6, docs/DESIGN.md).
    pub witnesses_checked: Vec<String>,
    /// How many witnessed checkpoints the trail was checked against (each one's record
    /// must hash to its head).
    #[serde(skip_serializing_if = "is_zero")]
    pub witnessed: u64,
    /// The records naming the trail's witness, oldest first (those an `act failed`
    /// record withdrew left out): what `hcp audit verify` holds the configuration and the
    /// witness to.
    #[serde(skip)]
    pub witness_named: Vec<WitnessNamed>,
    /// The `seq` of each act of authority that its witness (if it had one) took a
    /// checkpoint of when it was made (acts noticed at a call, acts an `act failed`
    /// record withdrew, and interrupted acts — an intent without completion — left out),
    /// oldest first.
    #[serde(skip)]
    pub witnessed_acts: Vec<u64>,
    /// Torn lines of the witness's file (crashes mid-append, not damage).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub witness_torn: Vec<WitnessTorn>,
    /// Witnesses the trail named before its present one whose checkpoints are gone (not
    /// damage: each was retired by a recorded act), oldest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub retired_witnesses: Vec<RetiredWitness>,
    /// How the keyed chain was checked.
    pub chain: ChainCheck,
    /// The line where the keyed part begins (its `init` or `migrate` record).
    pub keyed_from: Option<u64>,
    /// An anchor slot torn by a power cut, recovered from the other slot (not damage; the
    /// next append records it): the slot's index.
    pub slot_recovered: Option<usize>,
    /// The first fault; `None` when the whole trail is sound.
    pub broken: Option<Broken>,
}

impl VerifyReport {
    /// Whether the whole trail is sound.
    pub fn is_clean(&self) -> bool {
        self.broken.is_none()
    }
}

#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn str_field(m: &serde_json::Map<String, Value>, k: &str) -> Option<String> {
    m.get(k).and_then(Value::as_str).map(str::to_owned)
}

enum AnchorSeen {
    Missing,
    Damaged(String),
    /// A slot fault no power cut explains.
    Tampered(String),
    /// A legacy anchor beside the chain key.
    Replaced(u32),
    Trusted(Point, Option<usize>),
}

/// The key a verifier checks with, or why it has none.
enum KeyMode {
    Keyed(ChainKey),
    NotChecked,
    /// No key and nothing says the store was made with one.
    Legacy,
    /// A trail of an earlier version whose migration was killed after its `migrate`
    /// record: the key it is being moved onto, still `.chain.key.new`.
    Migrating(ChainKey),
    /// No key, no marker, and a file only this version writes: the store's marker, keys and
    /// trail were removed (its words name the file).
    Wiped(String),
    /// The key is gone from a store that was made with one, and the store is not the
    /// read-only one of a view without the keys.
    Missing,
    /// The key cannot be read (a directory in its place, its mode), and the store is not
    /// the read-only one of a view without the keys.
    Unreadable(std::io::Error),
}

fn key_mode(log: &AuditLog) -> Result<KeyMode, StoreError> {
    let path = log.dir().join(super::key::CHAIN_KEY_FILE);
    // The bootstrap pack's child: its view holds the store on a read-only mount with the
    // key covered (and nothing else does).
    if ChainKey::covered_by_view(&path) {
        return Ok(KeyMode::NotChecked);
    }
    let read = ChainKey::read(&path)?;
    let marker = || crate::made::Marker::read(log.home().root()).ok().flatten();
    let made_keyed = || {
        marker().is_some()
            || std::fs::read(log.anchor_path()).is_ok_and(|b| b.starts_with(br#"{"v":2"#))
    };
    Ok(match read {
        KeyRead::Found(k) => KeyMode::Keyed(k),
        KeyRead::Unreadable(e) => KeyMode::Unreadable(e),
        KeyRead::Absent => match ChainKey::read(&log.dir().join(super::NEW_KEY_FILE))? {
            KeyRead::Found(k) if marker().is_none() => KeyMode::Migrating(k),
            _ if made_keyed() => KeyMode::Missing,
            _ => match super::earlier::current_format_sign(log.home()) {
                Some(sign) => KeyMode::Wiped(sign),
                None => KeyMode::Legacy,
            },
        },
    })
}

/// Reads the anchor, then the trail's length, so that the anchor never names more than
/// the length holds except when records were removed.
fn snapshot(
    log: &AuditLog,
    key: Option<&ChainKey>,
    keyed: bool,
) -> Result<(AnchorSeen, Option<std::fs::File>, u64), StoreError> {
    let path = log.anchor_path();
    let boot = log.boot();
    let seen = match open_read(&path)? {
        None => AnchorSeen::Missing,
        Some(f) => {
            f.lock_shared()
                .map_err(|e| StoreError::io("lock", &path, e))?;
            match anchor::read(&f, key).map_err(|e| StoreError::io("read", &path, e))? {
                AnchorState::Valid(a) if keyed && a.v != anchor::KEYED => AnchorSeen::Replaced(a.v),
                AnchorState::Valid(a) => AnchorSeen::Trusted(a.trusted(&boot.id).clone(), None),
                AnchorState::SlotFault(sf) => {
                    let ctime = f
                        .metadata()
                        .map_err(|e| StoreError::io("read", &path, e))?
                        .ctime();
                    slot_seen(&sf, ctime, &boot)
                }
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

fn slot_seen(sf: &SlotFault, ctime: i64, boot: &super::Boot) -> AnchorSeen {
    if sf.recoverable(ctime, &boot.id, boot.began()) {
        AnchorSeen::Trusted(sf.intact.trusted(&boot.id).clone(), Some(sf.slot))
    } else {
        AnchorSeen::Tampered(format!(
            "slot {} of the anchor does not hold ({}), and no power cut explains it: the anchor was changed in this boot",
            sf.slot, sf.why
        ))
    }
}

struct Walk<'a> {
    report: VerifyReport,
    open: BTreeMap<String, Interrupted>,
    /// Acts' intents without a completion yet, by `seq`.
    open_acts: BTreeMap<u64, InterruptedAct>,
    /// Each approval an intent spent (`spends.approvals`), with that intent's line.
    spent: BTreeMap<String, u64>,
    anchor: Option<&'a Point>,
    /// Each checkpoint by its count, with where it is named.
    checkpoints: BTreeMap<u64, Vec<(String, &'a Checkpoint)>>,
    seq_seen: bool,
    key: Option<&'a ChainKey>,
    /// The bootstrap pack's view: keyed hashes are not checked (there is no key to check
    /// them with); anywhere else a keyed record without a key is `missing_chain_key`.
    keyless: bool,
}

impl Walk<'_> {
    /// Checks a record's hash by the rule of its part: plain SHA-256 before the keyed
    /// part, HMAC-SHA-256 under the chain key from its `init` or `migrate` record on.
    fn hash_holds(
        &mut self,
        line: u64,
        id: &Option<String>,
        m: &serde_json::Map<String, Value>,
        hash: &str,
    ) -> bool {
        let keyed = hash.starts_with(KEYED_PREFIX);
        if !keyed && !hash.starts_with("sha256:") {
            self.fail(
                Fault::HashMismatch,
                line,
                id.clone(),
                None,
                Some(hash.to_owned()),
                "its hash is neither `hmac-sha256:` nor `sha256:`".into(),
            );
            return false;
        }
        if keyed && self.report.keyed_from.is_none() {
            let act = m.get("act").and_then(Value::as_str);
            let opens = m.get("kind").and_then(Value::as_str) == Some(Kind::Authority.as_str())
                && (act == Some("migrate") || (act == Some("init") && self.report.records == 0));
            if !opens {
                self.fail(
                    Fault::HashMismatch,
                    line,
                    id.clone(),
                    None,
                    Some(hash.to_owned()),
                    "the keyed part of the trail does not begin with its `init` or `migrate` record".into(),
                );
                return false;
            }
            self.report.keyed_from = Some(line);
        }
        if !keyed && self.report.keyed_from.is_some() {
            self.fail(
                Fault::HashMismatch,
                line,
                id.clone(),
                None,
                Some(hash.to_owned()),
                "a record with a plain SHA-256 hash follows the keyed part: it was not written by this store".into(),
            );
            return false;
        }
        if !keyed && let Some(why) = super::earlier::keyed_only(m) {
            self.fail(
                Fault::HashMismatch,
                line,
                id.clone(),
                None,
                Some(hash.to_owned()),
                why,
            );
            return false;
        }
        let computed = match (keyed, self.key) {
            (false, _) => record_hash(m),
            (true, Some(k)) => k.record_hash(m),
            (true, None) if self.keyless => return true,
            (true, None) => {
                self.fail(
                    Fault::MissingChainKey,
                    line,
                    id.clone(),
                    None,
                    Some(hash.to_owned()),
                    "a keyed record in a store without its chain key: the key was removed".into(),
                );
                return false;
            }
        };
        if computed != hash {
            let detail = if keyed {
                "its keyed hash does not hold under the store's chain key: the record was edited, or the chain was recomputed without the key"
            } else {
                "its hash does not match its content: the record was edited"
            };
            self.fail(
                Fault::HashMismatch,
                line,
                id.clone(),
                Some(computed),
                Some(hash.to_owned()),
                detail.into(),
            );
            return false;
        }
        true
    }

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
        if !self.hash_holds(line, &id, &m, &hash) {
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
            let approvals = m
                .get("spends")
                .and_then(|s| s.get("approvals"))
                .and_then(Value::as_array);
            for a in approvals.into_iter().flatten().filter_map(Value::as_str) {
                if let Some(first) = self.spent.insert(a.to_owned(), line) {
                    self.fail(
                        Fault::ApprovalSpentTwice,
                        line,
                        id,
                        Some(format!("approval `{a}` spent once, at line {first}")),
                        Some(a.to_owned()),
                        format!(
                            "a second intent spends approval `{a}`, which the intent at line {first} spent: the state that said so was put back from before that spend"
                        ),
                    );
                    return false;
                }
            }
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
        } else if kind == Some(Kind::Authority.as_str())
            && m.get("act").and_then(Value::as_str) == Some(super::WITNESS_ACT)
        {
            self.report.witness_named.push(WitnessNamed {
                line,
                seq: position,
                hash: hash.clone(),
                witness: m
                    .get("changed")
                    .and_then(|c| c.get("witness"))
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            });
        } else if kind == Some(Kind::Authority.as_str())
            && m.get("act").and_then(Value::as_str) == Some(super::ACT_MADE)
        {
            let of = m
                .get("changed")
                .and_then(|c| c.get("seq"))
                .and_then(Value::as_u64);
            if of.and_then(|s| self.open_acts.remove(&s)).is_none() {
                self.fail(
                    Fault::OrphanOutcome,
                    line,
                    id,
                    None,
                    of.map(|s| s.to_string()),
                    "an `act made` record that names no earlier act's intent without a completion"
                        .into(),
                );
                return false;
            }
        } else if kind == Some(Kind::Authority.as_str())
            && !matches!(
                m.get("act").and_then(Value::as_str),
                Some(super::ACT_FAILED | "policy changed" | "config changed")
            )
        {
            // An act's record (whole, or its intent): its checkpoint is owed; an
            // intent waits for its completion (`act made` / `act failed`).
            self.report.witnessed_acts.push(position);
            if m.get("phase").and_then(Value::as_str) == Some(super::PHASE_INTENT)
                && let Some(seq) = seq
            {
                self.open_acts.insert(
                    seq,
                    InterruptedAct {
                        line,
                        seq,
                        id: id.clone().unwrap_or_default(),
                        ts: str_field(&m, "ts").unwrap_or_default(),
                        act: str_field(&m, "act").unwrap_or_default(),
                        actor: str_field(&m, "actor"),
                    },
                );
            }
        } else if kind == Some(Kind::Authority.as_str())
            && m.get("act").and_then(Value::as_str) == Some(super::ACT_FAILED)
        {
            let changed = m.get("changed");
            if let Some(of) = changed.and_then(|c| c.get("seq")).and_then(Value::as_u64) {
                self.report.witness_named.retain(|n| n.seq != of);
                self.report.witnessed_acts.retain(|&s| s != of);
                self.open_acts.remove(&of);
            }
            let text = |k: &str| {
                changed
                    .and_then(|c| c.get(k))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            self.report.failed_acts.push(FailedAct {
                line,
                seq: changed.and_then(|c| c.get("seq")).and_then(Value::as_u64),
                act: text("act"),
                code: text("code"),
                ts: str_field(&m, "ts").unwrap_or_default(),
            });
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
        if let Some(list) = self.checkpoints.get(&position)
            && let Some((place, c)) = list.iter().find(|(_, c)| c.head != hash)
        {
            self.fail(Fault::CheckpointMismatch, line, id, Some(c.head.clone()), Some(hash),
                format!("the checkpoint of {position} records signed at {} ({place}) names another record here: the trail was rewritten, forked or replaced by another since it was signed", c.time));
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
        failed_acts: Vec::new(),
        interrupted_acts: Vec::new(),
        torn_tail: None,
        anchor: None,
        legacy: 0,
        checkpoint: None,
        against: None,
        witnesses_checked: Vec::new(),
        witnessed: 0,
        witness_named: Vec::new(),
        witnessed_acts: Vec::new(),
        witness_torn: Vec::new(),
        retired_witnesses: Vec::new(),
        chain: ChainCheck::Legacy,
        keyed_from: None,
        slot_recovered: None,
        broken: None,
    }
}

/// How a message names where a checkpoint came from.
fn source_name(src: &CheckpointSource) -> String {
    match src {
        CheckpointSource::Witness(w) => format!("the witness ({w})"),
        CheckpointSource::File => "the checkpoint file".into(),
        CheckpointSource::Last => format!("`{}`", super::checkpoint::LAST_FILE),
    }
}

/// Walks the trail of `log` against its anchor and the checkpoint `against`.
pub(super) fn verify(log: &AuditLog, against: &Against) -> Result<VerifyReport, StoreError> {
    let mode = key_mode(log)?;
    let (key, chain) = match &mode {
        KeyMode::Keyed(k) => (Some(k), ChainCheck::Checked),
        KeyMode::NotChecked => (None, ChainCheck::NotChecked),
        KeyMode::Legacy => (None, ChainCheck::Legacy),
        KeyMode::Migrating(k) => (Some(k), ChainCheck::Legacy),
        KeyMode::Wiped(sign) => {
            let mut report = empty_report();
            report.chain = ChainCheck::NotChecked;
            report.broken = Some(Broken {
                fault: Fault::MissingLog,
                line: 0,
                id: None,
                expected: None,
                found: None,
                detail: format!(
                    "the store has no `{}` and no `{}/{}`, while it holds {sign}, which only this version of hcp writes: its marker, keys and trail were removed, so it is not a store of an earlier version",
                    crate::made::MARKER_FILE,
                    crate::home::StoreDir::Audit.name(),
                    super::key::CHAIN_KEY_FILE
                ),
            });
            return Ok(report);
        }
        KeyMode::Missing | KeyMode::Unreadable(_) => {
            let path = log.dir().join(super::key::CHAIN_KEY_FILE);
            let mut report = empty_report();
            report.chain = ChainCheck::NotChecked;
            report.broken = Some(Broken {
                fault: Fault::MissingChainKey,
                line: 0,
                id: None,
                expected: None,
                found: None,
                detail: match &mode {
                    KeyMode::Unreadable(e) => format!(
                        "`{}` cannot be read ({e}): the keyed chain cannot be checked, and only the bootstrap pack's view of the store may verify without its key",
                        path.display()
                    ),
                    _ => format!(
                        "`{}` is gone while the store's marker and its keyed anchor say it was made with one",
                        path.display()
                    ),
                },
            });
            return Ok(report);
        }
    };
    let keyed_store = !matches!(mode, KeyMode::Legacy | KeyMode::Migrating(_));
    let (seen, file, len) = snapshot(log, key, keyed_store)?;
    let single;
    let sets: Vec<(&Held, Option<CheckpointSource>)> = match against {
        Against::Nothing => {
            single = Held::default();
            vec![(&single, None)]
        }
        Against::Checkpoint(c, src) => {
            single = Held {
                checkpoints: vec![(0, c.clone())],
                ..Held::default()
            };
            vec![(&single, Some(src.clone()))]
        }
        Against::Held(h, src) => vec![(h, Some(src.clone()))],
        Against::Witnesses(v) => v.iter().map(|(h, src)| (h, Some(src.clone()))).collect(),
        Against::Forged(src, why) | Against::Unavailable(src, why) => {
            let mut report = empty_report();
            report.chain = chain;
            let fault = if matches!(against, Against::Forged(..)) {
                Fault::CheckpointMismatch
            } else {
                Fault::WitnessUnavailable
            };
            report.broken = Some(Broken {
                fault,
                line: 0,
                id: None,
                expected: None,
                found: None,
                detail: format!("{}: {why}", source_name(src)),
            });
            return Ok(report);
        }
    };
    let torn: Vec<WitnessTorn> = sets
        .iter()
        .flat_map(|(held, _)| {
            held.torn
                .iter()
                .map(|&(line, bytes, recovered)| WitnessTorn {
                    place: held.place(line),
                    bytes,
                    recovered,
                })
        })
        .collect();
    if let Some((held, source, (line, why))) = sets
        .iter()
        .find_map(|(h, src)| h.forged.as_ref().map(|f| (h, src, f)))
    {
        let mut report = empty_report();
        report.chain = chain;
        report.witness_torn = torn;
        report.broken = Some(Broken {
            fault: Fault::CheckpointMismatch,
            line: 0,
            id: None,
            expected: None,
            found: None,
            detail: format!(
                "{}, {}: {why} (a forged or edited line)",
                source
                    .as_ref()
                    .map_or_else(|| "the witness".to_owned(), source_name),
                held.place(*line)
            ),
        });
        return Ok(report);
    }
    if sets.iter().any(|(h, _)| !h.checkpoints.is_empty()) {
        let ours = super::checkpoint::public_key(log)?;
        if let Some((held, (line, c))) = sets.iter().find_map(|(h, _)| {
            h.checkpoints
                .iter()
                .find(|(_, c)| ours.as_deref() != Some(c.key.as_str()))
                .map(|found| (h, found))
        }) {
            let mut report = empty_report();
            report.chain = chain;
            let at = if *line > 0 {
                format!(" ({})", held.place(*line))
            } else {
                String::new()
            };
            report.broken = Some(Broken {
                fault: Fault::CheckpointMismatch,
                line: 0,
                id: None,
                expected: ours.clone(),
                found: Some(c.key.clone()),
                detail: match ours {
                    Some(_) => format!(
                        "the checkpoint{at} was signed by another key than this store's: it is forged, or another store's"
                    ),
                    None => format!(
                        "this store has no checkpoint key: the checkpoint{at} is another store's"
                    ),
                },
            });
            return Ok(report);
        }
    }
    let mut by_count: BTreeMap<u64, Vec<(String, &Checkpoint)>> = BTreeMap::new();
    for (held, _) in &sets {
        for (line, c) in &held.checkpoints {
            by_count
                .entry(c.count)
                .or_default()
                .push((held.place(*line), c));
        }
    }
    // The newest checkpoint of them all (a trail with fewer records is a rollback), and
    // the one the report names: the first witness's (the configured one's) newest, when
    // it holds one.
    fn newest_of<'h>(
        (h, src): &(&'h Held, Option<CheckpointSource>),
    ) -> Option<(&'h Checkpoint, Option<CheckpointSource>)> {
        h.newest().map(|c| (c, src.clone()))
    }
    let checkpoint =
        sets.iter()
            .filter_map(|(h, _)| h.newest())
            .fold(None, |best: Option<&Checkpoint>, c| match best {
                Some(b) if b.count >= c.count => Some(b),
                _ => Some(c),
            });
    let shown = sets.first().and_then(newest_of).or_else(|| {
        sets.iter()
            .filter_map(newest_of)
            .find(|(c, _)| Some(c.count) == checkpoint.map(|n| n.count))
    });
    let witnessed: usize = sets.iter().map(|(h, _)| h.checkpoints.len()).sum();
    let (trusted, slot_recovered) = match &seen {
        AnchorSeen::Trusted(p, slot) => (Some(p.clone()), *slot),
        _ => (None, None),
    };
    let mut w = Walk {
        report: empty_report(),
        open: BTreeMap::new(),
        open_acts: BTreeMap::new(),
        spent: BTreeMap::new(),
        anchor: trusted.as_ref(),
        checkpoints: by_count,
        seq_seen: false,
        key,
        keyless: matches!(mode, KeyMode::NotChecked),
    };
    w.report.chain = chain;
    w.report.slot_recovered = slot_recovered;
    w.report.witness_torn = torn;
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
    // An act whose intent has no completion was interrupted (hcp killed, perhaps before
    // its checkpoint was taken): it is owed no checkpoint (RUNTIME §6: a crash at any
    // instant never makes verify report damage).
    report
        .witnessed_acts
        .retain(|s| !w.open_acts.contains_key(s));
    report.interrupted_acts = w.open_acts.into_values().collect();
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
        AnchorSeen::Missing if keyed_store && file.is_none() => fail(
            &mut report,
            Fault::MissingLog,
            None,
            None,
            format!(
                "`{}` and its anchor are gone while the store's chain key says it wrote a trail",
                super::AUDIT_FILE
            ),
        ),
        AnchorSeen::Missing if records > report.legacy || (keyed_store && records > 0) => fail(
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
        AnchorSeen::Tampered(why) => fail(&mut report, Fault::AnchorMismatch, None, None, why),
        AnchorSeen::Replaced(v) => fail(
            &mut report,
            Fault::BadAnchor,
            None,
            None,
            format!("the anchor is of format {v} beside the store's chain key: it was replaced"),
        ),
        AnchorSeen::Trusted(p, _) => {
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
                Fault::Rollback,
                Some(format!("{} records", c.count)),
                Some(format!("{records} records")),
                format!(
                    "the trail holds {records} records and the checkpoint signed at {} names {}: the store was rolled back (restored from an older copy) or its records were removed",
                    c.time, c.count
                ),
            );
        } else if let Some((c, source)) = shown {
            report.witnessed = witnessed as u64;
            report.checkpoint = Some(c.count);
            report.against = source.map(|source| CheckpointNote {
                source,
                count: c.count,
                time: c.time.clone(),
                past: records - c.count,
            });
        }
    }
    Ok(report)
}
