//! The audit trail (RUNTIME §6): `audit/audit.jsonl`, one keyed, chained record a line,
//! with its keyed anchor `audit/audit.anchor`, the chain key, the argument-digest secret
//! and the checkpoint key ([`KEY_FILES`]), all 0600 in a 0700 directory.
//!
//! # Records
//! Every record has `ts` (RFC 3339 UTC, milliseconds), `id` (UUID v7), `seq` (its
//! position, from 1), `kind`, then the fields of its kind, then `prev` (the previous
//! record's `hash`, [`GENESIS`] for the first) and `hash` ([`ChainKey::record_hash`]:
//! `hmac-sha256:` and the HMAC-SHA-256 under the store's chain key of the
//! [`canonical_json`] of the record without `hash`). A line is the canonical encoding of
//! the whole record, so keys appear sorted. Kinds ([`Kind`]): `intent` (an allowed call,
//! written and synced by [`AuditLog::admit`] before its child starts, naming what it
//! spends), `outcome` ([`AuditLog::outcome`]: exit code, duration, bytes, `truncated`, and
//! the `intent` it closes), `refusal` and `event` ([`AuditLog::append`] of an [`Entry`]),
//! `authority` (an act of authority, [`AuditLog::append_authority`]: the store's first
//! record is its `init`), `recovery` (a torn tail cut off, or a torn anchor slot). Records
//! of trails from before keyed chains (plain SHA-256, [`record_hash`]) may only come before
//! the keyed part, which begins with `init` or with the `migrate` record that moved the
//! trail onto the key ([`AuditLog::migrate_trail`]). docs/DESIGN.md ("The keyed chain")
//! writes the format down for an outside verifier.
//!
//! # Appending
//! Appenders hold an exclusive lock on the anchor file. Each one checks the end of the
//! trail against the anchor (a cut tail, a deleted or replaced trail stop every append
//! with `audit_unavailable`, so that the evidence is never written over), recovers a torn
//! tail left by a crash, writes its line with `O_APPEND` into the reserve ([`reserve`]),
//! syncs it when its kind asks for it (intents, refusals, events, acts, recoveries: yes;
//! outcomes: no, the next sync covers them), then rewrites one slot of the anchor without
//! syncing. What holds under a process kill and under a power cut at each point is
//! written down in docs/DESIGN.md ("The audit trail").
//!
//! # Spending
//! The intent is the spend: counter slots and an approval are taken by the record that
//! names them. The counter files and approval markers are caches of the trail, brought up
//! to date under the lock before every admission ([`admit`]).
//!
//! # What the chain does not prove
//! Whoever lacks the chain key cannot rewrite the trail or its anchor to match. The keys
//! do not stop a copy of the store's own writing put back: an older trail and anchor
//! together, an older anchor with the trail cut to match. A signed [`checkpoint`] kept
//! elsewhere — a [`witness`] takes one after every act of authority and every 100 records —
//! catches those down to its newest.

mod acts;
mod admit;
pub(crate) mod anchor;
pub mod checkpoint;
mod create;
mod digest;
mod earlier;
mod fields;
mod follow;
mod fsutil;
pub mod key;
mod read;
mod record;
mod report;
pub mod reserve;
mod scan;
mod verify;
pub mod witness;
pub mod witnessed;
mod writer;

pub use acts::{ActsLock, Owed};
pub use admit::{Admission, AdmitError, Admitted, ApprovalRefusal, ApprovalSpend, CounterSpend};
pub use anchor::{ANCHOR_FILE, Anchor, Point, legacy_bytes};
pub use create::{Migrated, NEW_KEY_FILE};
pub use digest::{DIGEST_PREFIX, DIGEST_SECRET_FILE, DigestKey};
pub use fields::{
    ACT_FAILED, ACT_MADE, Actor, Authority, CounterKey, Intent, Outcome, PHASE_INTENT, Spends,
    WITNESS_ACT,
};
pub use follow::{FileFollow, Follower};
pub use fsutil::{Boot, read_small};
pub use key::{CHAIN_KEY_FILE, ChainKey, KEYED_PREFIX, KeyRead};
pub use read::{ChainPos, ReadBatch, ReadFault, ReadRecord};
pub use record::{
    CORE_FIELDS, Decision, Entry, GENESIS, Kind, Record, args_digest, canonical_json, record_hash,
    sha256_tagged,
};
pub use report::{AuditFollow, AuditReport, ChainVerify};
pub use verify::{
    Against, Broken, ChainCheck, CheckpointNote, CheckpointSource, FailedAct, Interrupted,
    InterruptedAct, RepairNote, RetiredWitness, VerifyReport, WitnessNamed, WitnessTorn,
};

use crate::error::StoreError;
use crate::home::{Home, StoreDir};
use crate::session::Timestamp;
use hcp_model::Code;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// The trail's file name inside `audit/`.
pub const AUDIT_FILE: &str = "audit.jsonl";

/// The store's keys, relative to `$HCP_HOME` (RUNTIME §5.1, §6): the chain key, the
/// argument-digest secret and the checkpoint signing key. In no call's view; the
/// bootstrap pack's child, which reads the store, never sees them either.
pub const KEY_FILES: [&str; 3] = [
    "audit/chain.key",
    "audit/digest.secret",
    "audit/checkpoint.key",
];

/// A fault of the trail: the stable codes of `hcp audit verify` (RUNTIME §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fault {
    /// A line that is not a record.
    Unparseable,
    /// A record whose `hash` is not the hash of its content: it was edited.
    HashMismatch,
    /// A record whose `prev` is not the previous record's hash: one before it was
    /// removed, inserted or moved (or this one was).
    PrevMismatch,
    /// A record whose `seq` is not its position.
    SeqMismatch,
    /// The trail holds fewer records than its anchor names: its tail was cut.
    Truncated,
    /// The trail is gone while its anchor names records.
    MissingLog,
    /// The anchor is gone while the trail holds records of this format.
    MissingAnchor,
    /// The record the anchor names is not in the trail: the trail was replaced or rewritten.
    AnchorMismatch,
    /// The anchor file holds no valid slot.
    BadAnchor,
    /// The trail does not extend a checkpoint, or it was signed by another key.
    CheckpointMismatch,
    /// An outcome that names no earlier intent.
    OrphanOutcome,
    /// A second outcome for one intent.
    DuplicateOutcome,
    /// A second intent that spends an approval an earlier intent spent (single use,
    /// RUNTIME §7): the state that said it was spent was put back from before the spend.
    ApprovalSpentTwice,
    /// A record in one machine's chain that names another machine (a database backend's
    /// chains, RUNTIME §9).
    MachineMismatch,
    /// The trail holds fewer records than its newest witnessed checkpoint: it was rolled
    /// back (a store copied back from an older backup).
    Rollback,
    /// The chain key is gone while the store's marker or keyed anchor says it was made.
    MissingChainKey,
    /// The witness `audit.witness` names cannot be read, so the trail cannot be checked
    /// against it.
    WitnessUnavailable,
}

impl Fault {
    /// The code: `hash_mismatch`, `truncated`, `missing_log` …
    pub fn code(self) -> Code {
        match self {
            Self::Unparseable => Code::Unparseable,
            Self::HashMismatch => Code::HashMismatch,
            Self::PrevMismatch => Code::PrevMismatch,
            Self::SeqMismatch => Code::SeqMismatch,
            Self::Truncated => Code::Truncated,
            Self::MissingLog => Code::MissingLog,
            Self::MissingAnchor => Code::MissingAnchor,
            Self::AnchorMismatch => Code::AnchorMismatch,
            Self::BadAnchor => Code::BadAnchor,
            Self::CheckpointMismatch => Code::CheckpointMismatch,
            Self::OrphanOutcome => Code::OrphanOutcome,
            Self::DuplicateOutcome => Code::DuplicateOutcome,
            Self::ApprovalSpentTwice => Code::ApprovalSpentTwice,
            Self::MachineMismatch => Code::MachineMismatch,
            Self::Rollback => Code::Rollback,
            Self::MissingChainKey => Code::MissingChainKey,
            Self::WitnessUnavailable => Code::WitnessUnavailable,
        }
    }

    /// [`Fault::code`]'s spelling.
    pub fn as_str(self) -> &'static str {
        self.code().as_str()
    }
}

/// What can go wrong when writing the trail. Every variant but
/// [`AuditError::ReservedField`] means the record was not written, and is
/// `audit_unavailable` (74): nothing may run unaudited.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The last complete line is not a record with a `hash`: not a crash artifact (a crash
    /// leaves a line without its `\n`), so appends stop until the owner fixes the file.
    #[error("the last record of `{path}` (at byte {offset}) is damaged: {reason}")]
    Damaged {
        /// The trail.
        path: PathBuf,
        /// Where the line starts.
        offset: u64,
        /// Why, lowercase.
        reason: String,
    },
    /// The trail contradicts its anchor (cut, deleted, replaced) or the anchor is gone or
    /// unreadable: appending would write over the evidence.
    #[error("the audit trail does not match its anchor ({}): {detail}", .fault.as_str())]
    Contradicted {
        /// What `hcp audit verify` reports.
        fault: Fault,
        /// What was found, lowercase.
        detail: String,
    },
    /// The trail is behind the checkpoint its witness holds, or not the one it signed
    /// (`rollback`, `checkpoint_mismatch`): an act of authority is refused rather than
    /// bury the witnessed checkpoint under a new one (RUNTIME §6).
    #[error("{detail}")]
    Behind {
        /// `rollback` or `checkpoint_mismatch`.
        fault: Fault,
        /// What was found, lowercase.
        detail: String,
    },
    /// A trail that is not taken for one of an earlier version, so not migrated: the first
    /// fault `verify` finds in it (RUNTIME §4, §6) — a store of this version whose marker,
    /// keys and trail were removed (`missing_log`), a trail recomputed without the key that
    /// holds what only a keyed store writes (`hash_mismatch`), a trail that does not match
    /// its old anchor. Nothing was written.
    #[error("the audit trail is broken{} ({}): {detail}", at_line(.line), .fault.as_str())]
    Broken {
        /// What `hcp audit verify` reports.
        fault: Fault,
        /// The line of the first fault, from 1 (0: the trail as a whole).
        line: u64,
        /// What was found, lowercase.
        detail: String,
    },
    /// An extra key that the store writes itself (code `audit_bad_entry`).
    #[error("audit field `{key}` is reserved")]
    ReservedField {
        /// The key.
        key: String,
    },
    /// The disk refused (full, read-only, gone) or a file could not be read; or the
    /// state backend that keeps the records cannot be reached
    /// ([`StoreError::StateUnavailable`], code `state_unavailable`).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Even the audit's reserve is short (RUNTIME §5.4): the disk is full and the space
    /// kept for the store's own records does not hold this one beyond the room held for
    /// the outcomes of calls that run.
    #[error(
        "the audit's reserve beside `{path}` is short: {reserved} bytes left, {needed} needed (the disk is full)"
    )]
    ReserveShort {
        /// The trail.
        path: PathBuf,
        /// Bytes of the reserve left.
        reserved: u64,
        /// Bytes this record needs.
        needed: u64,
    },
    /// The witness cannot take a checkpoint (`witness_unavailable`, 74): no act of
    /// authority happens.
    #[error(transparent)]
    Witness(#[from] witness::WitnessError),
    /// What the backend does not offer (`hcp audit checkpoint` of a database's chains).
    #[error("the `{backend}` state backend does not offer {what}")]
    Unsupported {
        /// The backend (`postgresql`).
        backend: &'static str,
        /// What, as a noun phrase.
        what: &'static str,
    },
}

impl AuditError {
    /// The stable code: `audit_bad_entry` for a reserved field; a state backend that
    /// cannot be used answers its own (`state_unavailable`, `bad_config`, RUNTIME §9);
    /// `usage` for what the backend does not offer; else `audit_unavailable`.
    pub fn code(&self) -> Code {
        match self {
            Self::ReservedField { .. } => Code::AuditBadEntry,
            Self::Store(e @ (StoreError::StateUnavailable { .. } | StoreError::Config(_))) => {
                e.code()
            }
            Self::Unsupported { .. } => Code::Usage,
            Self::Witness(_) => Code::WitnessUnavailable,
            Self::Behind { fault, .. } => fault.code(),
            _ => Code::AuditUnavailable,
        }
    }

    /// What the owner can do, when there is something to say.
    pub fn hint(&self) -> Option<&str> {
        match self {
            Self::Broken {
                fault: Fault::MissingLog,
                ..
            } => Some(
                "`hcp audit verify` names what was found; keep the store as evidence: restore `store.json` and `audit/` from a backup, or make a new store with `hcp init` under another `HCP_HOME` and install the packs there",
            ),
            Self::Damaged { .. } | Self::Contradicted { .. } | Self::Broken { .. } => Some(
                "`hcp audit verify` names the fault; keep the trail as evidence and move \
                 `audit/audit.jsonl` and `audit/audit.anchor` aside to start a new one",
            ),
            Self::Store(e @ (StoreError::StateUnavailable { .. } | StoreError::Config(_))) => {
                e.hint()
            }
            Self::Store(_) => Some("the audit directory must be writable and its disk not full"),
            Self::ReserveShort { .. } => Some(
                "free space on the store's disk (`hcp doctor` shows it): the reserve is refilled as soon as there is room",
            ),
            Self::Witness(e) => Some(e.hint()),
            Self::Behind { .. } => Some(
                "`hcp audit verify` names the fault; keep the store and the witness as evidence. A witness that lost checkpoints takes them back from a backup of its file; a store restored from a backup on purpose, or one whose witness lost its checkpoints for good, goes on with a new witness: `hcp config set audit.witness NEW_DIR` (a recorded act that works while this refuses others; the old witness keeps what it holds, and `hcp audit verify` still checks the trail against it)",
            ),
            Self::ReservedField { .. } | Self::Unsupported { .. } => None,
        }
    }

    /// The cause's own code: the [`Fault`] of the trail, `unparseable`, or the store's.
    pub fn cause_code(&self) -> Code {
        match self {
            Self::Damaged { .. } => Fault::Unparseable.code(),
            Self::Contradicted { fault, .. }
            | Self::Behind { fault, .. }
            | Self::Broken { fault, .. } => fault.code(),
            Self::ReservedField { .. } => Code::AuditBadEntry,
            Self::Store(e) => e.code(),
            Self::Unsupported { .. } => Code::Usage,
            Self::ReserveShort { .. } => Code::AuditUnavailable,
            Self::Witness(_) => Code::WitnessUnavailable,
        }
    }
}

/// ` at line N` for a line from 1; nothing for 0 (the trail as a whole).
#[allow(clippy::trivially_copy_pass_by_ref)]
fn at_line(line: &u64) -> String {
    if *line == 0 {
        String::new()
    } else {
        format!(" at line {line}")
    }
}

/// A torn tail cut off by a `recovery` record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Repair {
    /// Where the torn bytes started (the end of the last complete line), in bytes.
    pub offset: u64,
    /// How many bytes were cut.
    pub bytes: u64,
    /// `sha256:` of the cut bytes.
    pub sha256: String,
    /// The file in `audit/` that holds them.
    pub saved_as: String,
}

/// What an append wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct Appended {
    /// The record's `id`.
    pub id: String,
    /// Its position in the chain, from 1.
    pub seq: u64,
    /// Its time.
    pub ts: Timestamp,
    /// Its `hash`, the new head of the chain.
    pub hash: String,
    /// The torn tail this append recovered first, if any.
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

/// A named point of the write path, for crash tests: a debug build of hcp maps
/// `HCP_TEST_ABORT_AT=<name>` to an abort there ([`AuditLog::step_hook`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditStep {
    /// The lock is held, nothing read yet.
    Locked,
    /// A torn tail was replaced by its `recovery` record.
    Recovered,
    /// A record's line was written (not yet synced).
    Written(Kind),
    /// A record was synced.
    Synced(Kind),
    /// An admission's spend caches were updated.
    CachesUpdated,
    /// The anchor was moved.
    AnchorWritten,
}

impl AuditStep {
    /// `locked`, `recovered`, `intent_written`, `intent_synced`, `outcome_written`,
    /// `refusal_synced` …, `caches_updated`, `anchor_written`.
    pub fn name(self) -> String {
        match self {
            Self::Locked => "locked".into(),
            Self::Recovered => "recovered".into(),
            Self::Written(k) => format!("{}_written", k.as_str()),
            Self::Synced(k) => format!("{}_synced", k.as_str()),
            Self::CachesUpdated => "caches_updated".into(),
            Self::AnchorWritten => "anchor_written".into(),
        }
    }
}

/// A function called at each [`AuditStep`].
pub type StepHook = Arc<dyn Fn(AuditStep) + Send + Sync>;

/// The crash-test hook of `spec`, `STEP` or `STEP:N` (an [`AuditStep::name`]): it kills
/// the process with SIGKILL the Nth time (default the first) the write path reaches that
/// step, so nothing runs after it, as with `kill -9`. For debug builds of hcp, which read
/// `spec` from `HCP_TEST_ABORT_AT`; `None` when `spec` names no step.
pub fn abort_hook(spec: &str) -> Option<StepHook> {
    let (step, n) = match spec.split_once(':') {
        Some((s, n)) => (s, n.parse::<usize>().ok()?),
        None => (spec, 1),
    };
    let known = ["locked", "recovered", "caches_updated", "anchor_written"];
    let valid = known.contains(&step)
        || Kind::ALL.iter().any(|k| {
            step == format!("{}_written", k.as_str()) || step == format!("{}_synced", k.as_str())
        });
    if !valid || n == 0 {
        return None;
    }
    let step = step.to_owned();
    let seen = std::sync::atomic::AtomicUsize::new(0);
    Some(Arc::new(move |s: AuditStep| {
        if s.name() == step && seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 == n {
            // SAFETY: signalling this process; SIGKILL does not return.
            unsafe {
                libc::kill(libc::getpid(), libc::SIGKILL);
            }
        }
    }))
}

/// The audit trail of a home.
#[derive(Clone)]
pub struct AuditLog {
    home: Home,
    path: PathBuf,
    dir: PathBuf,
    durable: bool,
    hook: Option<StepHook>,
    /// The chain key, read once.
    key: Arc<OnceLock<ChainKey>>,
    /// The boot the rules use: the running one unless a test says otherwise.
    boot: Option<Boot>,
    /// The reserve kept beside the trail, in bytes.
    reserve: u64,
    /// `KIND_write`: fail that kind's write with `EIO` (tests of `outcome_deferred`).
    fail: Option<String>,
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditLog")
            .field("path", &self.path)
            .field("durable", &self.durable)
            .finish_non_exhaustive()
    }
}

/// Opens a file of the trail for reading; `None` when it does not exist.
fn open_read(path: &Path) -> Result<Option<File>, StoreError> {
    match File::open(path) {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoreError::io("open", path, e)),
    }
}

impl AuditLog {
    /// The trail of `home` (`audit/audit.jsonl`), durable. Does no I/O.
    pub fn new(home: &Home) -> Self {
        let dir = home.dir(StoreDir::Audit);
        Self {
            home: home.clone(),
            path: dir.join(AUDIT_FILE),
            dir,
            durable: true,
            hook: None,
            // Shared with the home, so the MACs of the state files and the trail read the
            // key once per process.
            key: home.key_cell(),
            boot: None,
            reserve: reserve::RESERVE_BYTES,
            fail: None,
        }
    }

    /// Takes `boot` for the running boot (tests and simulations of a power cut: the
    /// anchor's rules of RUNTIME §6 depend on the boot id and when the boot began).
    pub fn with_boot(mut self, boot: Boot) -> Self {
        self.boot = Some(boot);
        self
    }

    /// Keeps a reserve of `bytes` beside the trail instead of [`reserve::RESERVE_BYTES`]
    /// (tests that exhaust it on a small disk; the store keeps at least 1 MiB otherwise).
    pub fn with_reserve(mut self, bytes: u64) -> Self {
        self.reserve = bytes;
        self
    }

    /// Makes every write of a record of the kind `spec` names (`outcome_write`,
    /// `intent_write` …) fail with `EIO` instead of writing (tests of `outcome_deferred`).
    /// `None` when `spec` names no kind.
    pub fn failing_at(mut self, spec: &str) -> Option<Self> {
        let kind = spec.strip_suffix("_write")?;
        Kind::ALL.iter().any(|k| k.as_str() == kind).then(|| {
            self.fail = Some(kind.to_owned());
            self
        })
    }

    pub(crate) fn fails_at(&self, kind: Kind) -> bool {
        self.fail.as_deref() == Some(kind.as_str())
    }

    pub(crate) fn boot(&self) -> Boot {
        self.boot.clone().unwrap_or_else(Boot::current)
    }

    pub(crate) fn reserve_bytes(&self) -> u64 {
        self.reserve
    }

    /// The store's chain key, read once; its absence is `missing_chain_key`: the key is
    /// made with the store ([`crate::made`]) and never again.
    pub(crate) fn chain_key(&self) -> Result<ChainKey, AuditError> {
        if let Some(k) = self.key.get() {
            return Ok(k.clone());
        }
        let path = self.dir.join(key::CHAIN_KEY_FILE);
        match ChainKey::read(&path)? {
            KeyRead::Found(k) => Ok(self.key.get_or_init(|| k).clone()),
            KeyRead::Absent => Err(AuditError::Contradicted {
                fault: Fault::MissingChainKey,
                detail: format!(
                    "`{}` is gone: the trail cannot be extended without the key it is chained with",
                    path.display()
                ),
            }),
            KeyRead::Unreadable(e) => Err(AuditError::Store(StoreError::io("read", &path, e))),
        }
    }

    /// Whether records that ask for a sync get one (the default, `true`). `false` trades
    /// the last records on a power cut for speed (benchmarks, tests); a process kill loses
    /// nothing either way.
    pub fn durable(mut self, durable: bool) -> Self {
        self.durable = durable;
        self
    }

    /// Calls `hook` at each [`AuditStep`] (crash tests).
    pub fn step_hook(mut self, hook: StepHook) -> Self {
        self.hook = Some(hook);
        self
    }

    pub(crate) fn step(&self, s: AuditStep) {
        if let Some(h) = &self.hook {
            h(s);
        }
    }

    /// The trail's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The audit directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The anchor's path.
    pub fn anchor_path(&self) -> PathBuf {
        self.dir.join(ANCHOR_FILE)
    }

    pub(crate) fn home(&self) -> &Home {
        &self.home
    }

    /// Appends `entry` (a refusal or an event) stamped with the current time, read under
    /// the lock so that times follow the chain's order, and syncs it.
    ///
    /// # Errors
    /// [`AuditError::ReservedField`]; any other [`AuditError`] is `audit_unavailable`.
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

    fn append_inner(&self, entry: &Entry, ts: Option<Timestamp>) -> Result<Appended, AuditError> {
        let (kind, fields) = fields::entry_fields(entry)?;
        self.append_fields(kind, fields, ts, true)
    }

    /// Appends the `outcome` of an admitted call. Not synced: a process kill keeps it, the
    /// next synced record makes it durable, and a power cut before that leaves the call
    /// `interrupted` (see docs/DESIGN.md).
    ///
    /// # Errors
    /// As [`AuditLog::append`].
    pub fn outcome(&self, o: &Outcome) -> Result<Appended, AuditError> {
        self.append_fields(Kind::Outcome, fields::outcome_fields(o)?, None, false)
    }

    /// [`AuditLog::outcome`] stamped with `ts`.
    ///
    /// # Errors
    /// As [`AuditLog::append`].
    pub fn outcome_at(&self, o: &Outcome, ts: Timestamp) -> Result<Appended, AuditError> {
        self.append_fields(Kind::Outcome, fields::outcome_fields(o)?, Some(ts), false)
    }

    fn append_fields(
        &self,
        kind: Kind,
        fields: serde_json::Map<String, serde_json::Value>,
        ts: Option<Timestamp>,
        sync: bool,
    ) -> Result<Appended, AuditError> {
        let mut locked = self.open_locked()?;
        let ts = ts.unwrap_or_else(Timestamp::now);
        let w = self.write_record(&mut locked, kind, fields, ts, sync)?;
        let applied = locked.applied_after(w.start);
        locked.write_anchor(applied);
        self.step(AuditStep::AnchorWritten);
        Ok(Appended {
            id: w.id,
            seq: w.seq,
            ts: w.ts,
            hash: w.hash,
            repair: locked.repair.take(),
        })
    }

    /// Appends the record of an act of authority (RUNTIME §6), synced: durable when this
    /// returns. The caller makes the act only after it returns, and takes the witness's
    /// checkpoint ([`AuditLog::witness`]) before it answers.
    ///
    /// # Errors
    /// As [`AuditLog::append`].
    pub fn append_authority(&self, a: &Authority) -> Result<Appended, AuditError> {
        self.append_fields(Kind::Authority, fields::authority_fields(a), None, true)
    }

    /// Migrates a trail from before keyed chains onto one (RUNTIME §6; the module docs of
    /// `create`), recording `act`. The caller holds the store's lock.
    ///
    /// # Errors
    /// [`AuditError`]: the old trail does not match its old anchor, or a file fails.
    pub fn migrate_trail(&self, act: &Authority) -> Result<Migrated, AuditError> {
        create::migrate(self, act)
    }

    /// A signed checkpoint of what the anchor vouches for now (its count and head, read
    /// under the trail's shared lock and checked under the chain key), at `time`.
    ///
    /// # Errors
    /// [`AuditError`] when the anchor or the keys cannot be read, or the anchor does not
    /// hold.
    pub fn checkpoint_now(&self, time: Timestamp) -> Result<checkpoint::Checkpoint, AuditError> {
        let point = self.anchor_point()?;
        Ok(checkpoint::sign(self, point.count, &point.head, time)?)
    }

    /// What the anchor vouches for now (read under the trail's shared lock and checked
    /// under the chain key).
    ///
    /// # Errors
    /// As [`AuditLog::checkpoint_now`].
    pub fn anchor_point(&self) -> Result<Point, AuditError> {
        let key = self.chain_key()?;
        let path = self.anchor_path();
        let f = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(AuditError::Contradicted {
                    fault: Fault::MissingAnchor,
                    detail: format!("`{}` is gone", path.display()),
                });
            }
            Err(e) => return Err(AuditError::Store(StoreError::io("open", &path, e))),
        };
        f.lock_shared()
            .map_err(|e| AuditError::Store(StoreError::io("lock", &path, e)))?;
        let boot = self.boot();
        let point = match anchor::read(&f, Some(&key))
            .map_err(|e| AuditError::Store(StoreError::io("read", &path, e)))?
        {
            anchor::AnchorState::Valid(a) => a.trusted(&boot.id).clone(),
            anchor::AnchorState::SlotFault(sf) => sf.intact.trusted(&boot.id).clone(),
            anchor::AnchorState::Damaged(why) => {
                return Err(AuditError::Contradicted {
                    fault: Fault::BadAnchor,
                    detail: why,
                });
            }
        };
        drop(f);
        Ok(point)
    }

    /// Takes a checkpoint of the trail now into `witness` (RUNTIME §6): after an act of
    /// authority, and after every 100th record. A witness that holds no checkpoint of
    /// this store yet gets the [`WITNESS_ACT`] record naming it first, and the checkpoint
    /// of exactly that record ([`AuditLog::witness_named`]), when it may be named
    /// ([`witnessed`]: not over checkpoints it lost, nor when the trail names another).
    ///
    /// # Errors
    /// [`AuditError::Witness`] (`witness_unavailable`) when the witness does not take it;
    /// as [`AuditLog::checkpoint_now`].
    pub fn witness(
        &self,
        witness: &dyn witness::Witness,
        time: Timestamp,
    ) -> Result<checkpoint::Checkpoint, AuditError> {
        let store = crate::made::Marker::read(self.home.root())
            .ok()
            .flatten()
            .map(|m| m.store_id);
        if let Some(store) = store
            && witness.is_new_for(&store)?
        {
            self.may_name(witness)?;
            if let Some(c) = self.witness_named(Some(witness), time)? {
                return Ok(c);
            }
        }
        let c = self.checkpoint_now(time)?;
        witness.take(&c)?;
        self.note_taken(&witness.describe(), c.count);
        Ok(c)
    }

    /// Takes the checkpoint of the act of authority `act` into `witness` (RUNTIME §6): of
    /// exactly its record (its `seq` as `count`, its `hash` as `head`), never of a count
    /// another process's record, appended meanwhile, makes later, so each act keeps a
    /// checkpoint of its own record however many are made at once. A witness that holds
    /// no checkpoint of this store yet is named first, as by [`AuditLog::witness`].
    ///
    /// # Errors
    /// As [`AuditLog::witness`].
    pub fn witness_act(
        &self,
        witness: &dyn witness::Witness,
        act: &Appended,
    ) -> Result<checkpoint::Checkpoint, AuditError> {
        let store = crate::made::Marker::read(self.home.root())
            .ok()
            .flatten()
            .map(|m| m.store_id);
        if let Some(store) = store
            && witness.is_new_for(&store)?
        {
            self.may_name(witness)?;
            if let Some(c) = self.witness_named(Some(witness), act.ts)? {
                return Ok(c);
            }
        }
        let c = checkpoint::sign(self, act.seq, &act.hash, act.ts)?;
        witness.take(&c)?;
        self.note_taken(&witness.describe(), c.count);
        Ok(c)
    }

    /// Appends the [`WITNESS_ACT`] record naming `witness` (`None`: no witness from now
    /// on) and has `witness` take the checkpoint of exactly that record, its first of
    /// this store. When it cannot, an [`ACT_FAILED`] record naming the `witness` record
    /// follows (best effort), so the trail never says a witness holds what it does not.
    ///
    /// # Errors
    /// [`AuditError`]; [`AuditError::Witness`] when the witness refuses.
    pub fn witness_named(
        &self,
        witness: Option<&dyn witness::Witness>,
        time: Timestamp,
    ) -> Result<Option<checkpoint::Checkpoint>, AuditError> {
        let act = Authority::new(
            WITNESS_ACT,
            Actor::owner(),
            serde_json::json!({"witness": witness.map(|w| w.describe())}),
        );
        let a = self.append_authority(&act)?;
        let Some(w) = witness else {
            self.note_named(None, a.seq, 0);
            return Ok(None);
        };
        let taken = checkpoint::sign(self, a.seq, &a.hash, time)
            .map_err(AuditError::from)
            .and_then(|c| w.take(&c).map(|()| c).map_err(AuditError::from));
        match &taken {
            Ok(c) => self.note_named(Some(w.describe()), a.seq, c.count),
            Err(e) => {
                let _ = self.append_authority(&act.failed(a.seq, e.code().as_str()));
            }
        }
        taken.map(Some)
    }

    /// Whether the trail is behind the newest checkpoint `witness` holds of it (RUNTIME
    /// §6): a store restored from an older copy (`rollback`), or one whose head is not the
    /// one witnessed at the same count, or a witness holding a forged line
    /// (`checkpoint_mismatch`); or whether the witness holds less than the trail says it
    /// took ([`witnessed`]: its file deleted, emptied or cut, `checkpoint_mismatch`). Reads the anchor and the witness's last lines only; an
    /// act of authority is refused on it, rather than bury the witnessed checkpoint under
    /// a new one. A fork that grew past the witnessed count is found by `hcp audit
    /// verify`, which walks the trail.
    ///
    /// # Errors
    /// [`AuditError::Behind`]; [`AuditError::Witness`] when the witness cannot be read.
    pub fn check_witnessed(&self, witness: &dyn witness::Witness) -> Result<(), AuditError> {
        let Some(store) = crate::made::Marker::read(self.home.root())
            .ok()
            .flatten()
            .map(|m| m.store_id)
        else {
            return Ok(());
        };
        let c = match witness.newest(&store, None)? {
            witness::Newest::None => return self.check_kept(witness, None),
            witness::Newest::Forged { reason } => {
                return Err(AuditError::Behind {
                    fault: Fault::CheckpointMismatch,
                    detail: format!(
                        "the witness ({}) holds a line that is not a checkpoint of this store: {reason}",
                        witness.describe()
                    ),
                });
            }
            witness::Newest::Checkpoint(c) => c,
        };
        self.check_kept(witness, Some(c.count))?;
        let point = self.anchor_point()?;
        if c.count > point.count {
            return Err(AuditError::Behind {
                fault: Fault::Rollback,
                detail: format!(
                    "the trail holds {} records and the witness ({}) holds a checkpoint of {} signed at {}: the store was rolled back (restored from an older copy)",
                    point.count,
                    witness.describe(),
                    c.count,
                    c.time
                ),
            });
        }
        if c.count == point.count && c.head != point.head {
            return Err(AuditError::Behind {
                fault: Fault::CheckpointMismatch,
                detail: format!(
                    "record {} of the trail is not the one the witness ({}) signed at {}: the trail was rewritten or replaced",
                    c.count,
                    witness.describe(),
                    c.time
                ),
            });
        }
        Ok(())
    }

    /// Checks that a record could be appended now: the trail opens for writing under the
    /// lock and matches its anchor, and a torn tail is recovered. A call is then refused
    /// before it runs rather than run unaudited (a full disk is found only by the append
    /// itself: [`AuditLog::admit`] refuses then, still before anything runs).
    ///
    /// # Errors
    /// Any [`AuditError`] (`audit_unavailable`).
    pub fn ensure_writable(&self) -> Result<(), AuditError> {
        let mut locked = self.open_locked()?;
        if locked.repair.is_some() {
            let applied = locked.applied_after(locked.tail.end);
            locked.write_anchor(applied);
        }
        Ok(())
    }

    /// A cheaper [`AuditLog::ensure_writable`] for callers whose record is written by
    /// [`AuditLog::admit`] before anything runs (which makes every check again): the
    /// anchor (made for a fresh trail) and the trail open for writing, without the lock.
    ///
    /// # Errors
    /// Any [`AuditError`] (`audit_unavailable`).
    pub fn probe_writable(&self) -> Result<(), AuditError> {
        self.open_for_writing()
    }

    /// Walks the whole chain and checks it against the anchor (RUNTIME §6). Reads only:
    /// a torn tail is reported as a crash to be recovered, not repaired here.
    ///
    /// # Errors
    /// [`AuditError::Store`] when a file cannot be read. A broken trail is not an error:
    /// it is [`VerifyReport::broken`].
    pub fn verify(&self) -> Result<VerifyReport, AuditError> {
        Ok(verify::verify(self, &Against::Nothing)?)
    }

    /// [`AuditLog::verify`] against the checkpoint `against` names (a witness's newest,
    /// a file, the store's last; or the witness's fault).
    ///
    /// # Errors
    /// As [`AuditLog::verify`].
    pub fn verify_with(&self, against: &Against) -> Result<VerifyReport, AuditError> {
        let mut r = verify::verify(self, against)?;
        r.witnesses_checked = against.witnesses();
        Ok(r)
    }

    /// [`AuditLog::verify`], and whether the trail extends `checkpoint` (a
    /// `checkpoint_mismatch` otherwise, naming where it stops doing so).
    ///
    /// # Errors
    /// As [`AuditLog::verify`].
    pub fn verify_against(
        &self,
        checkpoint: &checkpoint::Checkpoint,
    ) -> Result<VerifyReport, AuditError> {
        Ok(verify::verify(
            self,
            &Against::Checkpoint(checkpoint.clone(), CheckpointSource::File),
        )?)
    }

    /// The last `n` complete lines, oldest first, read from the end, and the length in
    /// bytes of a torn tail (0 when there is none).
    ///
    /// # Errors
    /// [`AuditError::Store`] when the file cannot be opened or read.
    pub fn tail(&self, n: usize) -> Result<(Vec<TailLine>, u64), AuditError> {
        let (lines, torn) = self.tail_lines(n)?;
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

    /// The last `n` complete lines as stored (without `\n`), oldest first, and the
    /// length in bytes of a torn tail.
    ///
    /// # Errors
    /// [`AuditError::Store`] when the file cannot be opened or read.
    pub fn tail_lines(&self, n: usize) -> Result<(Vec<Vec<u8>>, u64), AuditError> {
        let Some(file) = open_read(&self.path)? else {
            return Ok((Vec::new(), 0));
        };
        let len = file
            .metadata()
            .map_err(|e| StoreError::io("read", &self.path, e))?
            .len();
        Ok(scan::last_lines(&file, len, n).map_err(|e| StoreError::io("read", &self.path, e))?)
    }

    /// The [`AuditFollow`] of this trail: after its last `n` records, woken by inotify.
    ///
    /// # Errors
    /// [`AuditError::Store`] when the trail cannot be read.
    pub fn follow_records(&self, n: usize) -> Result<FileFollow, AuditError> {
        FileFollow::new(self.path.clone(), self.dir.clone(), n)
            .map_err(|e| AuditError::Store(StoreError::io("read", &self.path, e)))
    }

    /// The audit directory and files whose modes grant anything to group or others
    /// (RUNTIME §6: the owner's only; `hcp doctor` reports them): each path with its
    /// mode (`0o7777` bits). New files are made 0600 in a 0700 directory; a trail
    /// adopted from before is tightened on its next append.
    ///
    /// # Errors
    /// [`StoreError`] when the directory exists and cannot be read.
    pub fn loose_modes(&self) -> Result<Vec<(PathBuf, u32)>, StoreError> {
        use std::os::unix::fs::PermissionsExt;
        let mut out = Vec::new();
        let meta = match std::fs::metadata(&self.dir) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(StoreError::io("read", &self.dir, e)),
        };
        let mode = meta.permissions().mode() & 0o7777;
        if mode & 0o077 != 0 {
            out.push((self.dir.clone(), mode));
        }
        let entries =
            std::fs::read_dir(&self.dir).map_err(|e| StoreError::io("read", &self.dir, e))?;
        let mut files: Vec<(PathBuf, u32)> = entries
            .flatten()
            .filter_map(|e| {
                let m = std::fs::symlink_metadata(e.path()).ok()?;
                let mode = m.permissions().mode() & 0o7777;
                (m.is_file() && mode & 0o077 != 0).then(|| (e.path(), mode))
            })
            .collect();
        files.sort();
        out.extend(files);
        Ok(out)
    }

    /// The audit's reserve as `hcp doctor` shows it (RUNTIME §5.4): the bytes kept beside
    /// the trail, what is kept when the disk has room, the disk's free space, and whether
    /// the file system can keep one at all.
    ///
    /// # Errors
    /// [`StoreError`] when the trail exists and cannot be read.
    pub fn reserve_report(&self) -> Result<reserve::ReserveReport, StoreError> {
        let reserved = match std::fs::metadata(&self.path) {
            Ok(m) => reserve::beyond_end(&m),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(StoreError::io("read", &self.path, e)),
        };
        Ok(reserve::ReserveReport {
            reserved,
            target: self.reserve,
            free: reserve::free_bytes(&self.dir),
            cannot_keep: reserve::cannot_keep(&self.dir),
        })
    }

    /// A reader of records as they are appended ([`Follower`]), starting after the last
    /// `n` complete records.
    ///
    /// # Errors
    /// [`AuditError::Store`] when the trail cannot be read.
    pub fn follow(&self, n: usize) -> Result<Follower, AuditError> {
        Follower::new(self.path.clone(), n)
            .map_err(|e| AuditError::Store(StoreError::io("read", &self.path, e)))
    }
}

/// Makes a new trail in `dir` (RUNTIME §4, §6): the keys, `first` as record 1, its anchor
/// and the reserve ([`crate::made`] calls it for a store being built). Answers record 1's
/// hash.
///
/// # Errors
/// [`AuditError`] when a file cannot be made.
pub(crate) fn create_trail(
    dir: &Path,
    first: &Authority,
    ts: Timestamp,
    boot: &Boot,
    reserve_bytes: u64,
) -> Result<String, AuditError> {
    create::create(dir, first, ts, boot, reserve_bytes)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::result_large_err)]
mod tests;
