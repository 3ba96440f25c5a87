//! What callers hand the store for each kind of record, and the fields it writes for
//! them (the store adds `ts`, `id`, `seq`, `kind`, `prev`, `hash`).

use super::AuditError;
use super::record::{CORE_FIELDS, Decision, Entry, Kind};
use hcp_model::{Code, Land, Operation};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// An allowed call about to run: what its `intent` record says ([`super::AuditLog::admit`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Intent {
    /// The principal id, `owner` for the caller without a session.
    pub principal: String,
    /// The session's project, if any.
    pub project: Option<String>,
    /// The pack.
    pub pack_id: String,
    /// The verb key.
    pub verb_key: String,
    /// The verb's operation.
    pub operation: Operation,
    /// The verb's land; `None` for a call of several (`hcp sense PACK` of every stimulus).
    pub land: Option<Land>,
    /// The keyed digest of the (bound) arguments ([`super::DigestKey::args_digest`]).
    pub args_digest: String,
    /// Further fields (`policy_hash`, `rule`, `sandbox`, `face` …), covered by the hash.
    /// A key of [`CORE_FIELDS`] is refused.
    pub extra: BTreeMap<String, Value>,
}

impl Intent {
    /// The intent of a call described as an [`Entry`] (its decision, code, exit code and
    /// duration are not part of an intent); `None` when the entry names no pack or
    /// operation (a call that resolved no verb cannot be admitted).
    pub fn from_entry(e: &Entry) -> Option<Self> {
        Some(Self {
            principal: e.principal.clone(),
            project: e.project.clone(),
            pack_id: e.pack_id.clone()?,
            verb_key: e.verb_key.clone(),
            operation: e.operation?,
            land: e.land,
            args_digest: e.args_digest.clone(),
            extra: e.extra.clone(),
        })
    }

    /// The fields of its record as this store writes them (without `ts`, `id`, `seq`,
    /// `kind`, `spends`, `prev`, `hash`): what another backend's record carries too.
    ///
    /// # Errors
    /// [`AuditError::ReservedField`].
    pub fn to_fields(&self) -> Result<Map<String, Value>, AuditError> {
        intent_fields(self, &Spends::default())
    }
}

impl Outcome {
    /// The fields of its record as this store writes them (without `ts`, `id`, `seq`,
    /// `kind`, `prev`, `hash`).
    ///
    /// # Errors
    /// [`AuditError::ReservedField`].
    pub fn to_fields(&self) -> Result<Map<String, Value>, AuditError> {
        outcome_fields(self)
    }
}

/// What became of an admitted call ([`super::AuditLog::outcome`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The intent's `id` ([`super::Admitted::id`]).
    pub intent: String,
    /// The principal, as in the intent (so a line reads alone).
    pub principal: String,
    /// The pack, as in the intent.
    pub pack_id: String,
    /// The verb key, as in the intent.
    pub verb_key: String,
    /// Why the run did not end on its own (`timeout`, `cancelled`, `output_withheld`, a
    /// spawn failure such as `bin_changed`), `None` when it did.
    pub code: Option<Code>,
    /// The child's exit status, `None` when it never started or ended by a signal.
    pub exit_code: Option<i32>,
    /// Wall time from admission to the end of the run, in milliseconds.
    pub duration_ms: u64,
    /// Bytes read from the child's stdout (at most the cap when truncated).
    pub stdout_bytes: u64,
    /// Bytes read from the child's stderr (at most the cap when truncated).
    pub stderr_bytes: u64,
    /// Whether either stream was cut at its cap.
    pub truncated: bool,
    /// Further fields (`signal`, `post_rule` …). A key of [`CORE_FIELDS`] is refused.
    pub extra: BTreeMap<String, Value>,
}

/// What an intent spends, as its record names it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spends {
    /// Counter slots, one per (identity, tool).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counters: Vec<CounterKey>,
    /// The approvals taken (ids), if any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<String>,
}

impl Spends {
    /// Whether nothing is spent.
    pub fn is_empty(&self) -> bool {
        self.counters.is_empty() && self.approvals.is_empty()
    }
}

/// One counter: a principal identity and a tool.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CounterKey {
    /// The principal identity.
    pub identity: String,
    /// The tool (`PACK.VERB`).
    pub tool: String,
}

fn check_extra(extra: &BTreeMap<String, Value>) -> Result<(), AuditError> {
    match extra.keys().find(|k| CORE_FIELDS.contains(&k.as_str())) {
        Some(key) => Err(AuditError::ReservedField { key: key.clone() }),
        None => Ok(()),
    }
}

fn opt(s: &Option<String>) -> Value {
    s.clone().map_or(Value::Null, Value::String)
}

fn code(c: Option<Code>) -> Value {
    c.map_or(Value::Null, |c| Value::String(c.as_str().into()))
}

/// The fields of an entry's record (a refusal or an event).
pub(crate) fn entry_fields(e: &Entry) -> Result<(Kind, Map<String, Value>), AuditError> {
    check_extra(&e.extra)?;
    let mut m = Map::new();
    m.insert("principal".into(), Value::String(e.principal.clone()));
    m.insert("project".into(), opt(&e.project));
    m.insert("pack_id".into(), opt(&e.pack_id));
    m.insert("verb_key".into(), Value::String(e.verb_key.clone()));
    m.insert(
        "operation".into(),
        opt(&e.operation.map(|o| o.as_str().to_owned())),
    );
    m.insert("land".into(), opt(&e.land.map(|l| l.as_str().to_owned())));
    m.insert("decision".into(), Value::String(e.decision.as_str().into()));
    m.insert("code".into(), code(e.code));
    m.insert("args_digest".into(), Value::String(e.args_digest.clone()));
    m.insert(
        "exit_code".into(),
        e.exit_code.map_or(Value::Null, Value::from),
    );
    m.insert("duration_ms".into(), Value::from(e.duration_ms));
    for (k, v) in &e.extra {
        m.insert(k.clone(), v.clone());
    }
    let kind = match e.decision {
        Decision::Deny => Kind::Refusal,
        Decision::Allow => Kind::Event,
    };
    Ok((kind, m))
}

/// The fields of an intent's record.
pub(crate) fn intent_fields(i: &Intent, spends: &Spends) -> Result<Map<String, Value>, AuditError> {
    check_extra(&i.extra)?;
    let mut m = Map::new();
    m.insert("principal".into(), Value::String(i.principal.clone()));
    m.insert("project".into(), opt(&i.project));
    m.insert("pack_id".into(), Value::String(i.pack_id.clone()));
    m.insert("verb_key".into(), Value::String(i.verb_key.clone()));
    m.insert(
        "operation".into(),
        Value::String(i.operation.as_str().into()),
    );
    m.insert("land".into(), opt(&i.land.map(|l| l.as_str().to_owned())));
    m.insert("decision".into(), Value::String("allow".into()));
    m.insert("args_digest".into(), Value::String(i.args_digest.clone()));
    if !spends.is_empty() {
        m.insert(
            "spends".into(),
            serde_json::to_value(spends).unwrap_or(Value::Null),
        );
    }
    for (k, v) in &i.extra {
        m.insert(k.clone(), v.clone());
    }
    Ok(m)
}

/// The fields of an outcome's record.
pub(crate) fn outcome_fields(o: &Outcome) -> Result<Map<String, Value>, AuditError> {
    check_extra(&o.extra)?;
    let mut m = Map::new();
    m.insert("intent".into(), Value::String(o.intent.clone()));
    m.insert("principal".into(), Value::String(o.principal.clone()));
    m.insert("pack_id".into(), Value::String(o.pack_id.clone()));
    m.insert("verb_key".into(), Value::String(o.verb_key.clone()));
    m.insert("code".into(), code(o.code));
    m.insert(
        "exit_code".into(),
        o.exit_code.map_or(Value::Null, Value::from),
    );
    m.insert("duration_ms".into(), Value::from(o.duration_ms));
    m.insert("stdout_bytes".into(), Value::from(o.stdout_bytes));
    m.insert("stderr_bytes".into(), Value::from(o.stderr_bytes));
    m.insert("truncated".into(), Value::Bool(o.truncated));
    for (k, v) in &o.extra {
        m.insert(k.clone(), v.clone());
    }
    let keys: Vec<String> = o.extra.keys().cloned().collect();
    bound_outcome(&mut m, &keys);
    Ok(m)
}

/// Who made an act of authority (RUNTIME §6): the owner (the local user, by uid) or a
/// principal (a session's, for the acts a session may make: `connect`, `disconnect`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Actor {
    /// The owner: the local user.
    Owner {
        /// The user's uid.
        uid: u32,
    },
    /// A session's principal.
    Principal(String),
}

impl Actor {
    /// The owner, as the running process's real uid.
    pub fn owner() -> Self {
        // SAFETY: getuid cannot fail.
        Self::Owner {
            uid: unsafe { libc::getuid() },
        }
    }
}

/// An act of authority, as its record says it (RUNTIME §6): `act` (`init`, `migrate`,
/// `install`, `grant`, `session start` …), who made it and what it changed.
#[derive(Debug, Clone, PartialEq)]
pub struct Authority {
    /// The act: `init`, `migrate`, `install`, `uninstall`, `activate`, `deactivate`,
    /// `grant`, `revoke`, `session start`, `session end`, `approve`, `deny`, `connect`,
    /// `disconnect`, `policy lock`, `home rm`, `home --seed`, `config set`,
    /// `state migrate`, `install --join-family`, a `doctor` repair, `policy changed`,
    /// `config changed`.
    pub act: String,
    /// Who made it.
    pub actor: Actor,
    /// What it changed: a JSON object of the act's own facts (the pack and its digest,
    /// the principal and capabilities, a file's digest …), never a secret.
    pub changed: Value,
    /// Whether this record is the act's write-ahead intent (field `phase` =
    /// `"intent"`): written before the change, and followed by an [`ACT_MADE`] or
    /// [`ACT_FAILED`] record naming its `seq` once the change is made or has failed. An
    /// intent without either is `interrupted` (hcp was killed between them), as a call's
    /// intent without its outcome is. `false` for acts recorded whole (`init`,
    /// `migrate`, a noticed `config changed`, the completions themselves).
    pub intent: bool,
}

/// The act of the record that says an earlier act of authority was recorded and then
/// not made (its witness could not take the checkpoint, or its change failed): the
/// trail never states an act that did not happen (RUNTIME §6; docs/DESIGN.md).
pub const ACT_FAILED: &str = "act failed";

/// The act of the record that names the witness taking this trail's checkpoints
/// (`changed` = `{"witness": "directory DIR"}`, or `{"witness": null}` when the owner
/// stopped witnessing): written before the first checkpoint a witness takes of this store,
/// and by `hcp config set` / `unset audit.witness`; that record's own checkpoint is the
/// witness's first (docs/DESIGN.md, "Witnesses"). `hcp audit verify` holds the
/// configuration and the witness to it.
pub const WITNESS_ACT: &str = "witness";

/// The act of the record that says an act of authority recorded as an intent was made:
/// `changed` = `{"act", "seq"}`, the act and its intent's `seq` (RUNTIME §6;
/// docs/DESIGN.md, "The keyed chain").
pub const ACT_MADE: &str = "act made";

/// The value of an act's intent record's `phase` field.
pub const PHASE_INTENT: &str = "intent";

impl Authority {
    /// An act recorded whole (not an intent): `act` by `actor`, changing `changed`.
    pub fn new(act: impl Into<String>, actor: Actor, changed: Value) -> Self {
        Self {
            act: act.into(),
            actor,
            changed,
            intent: false,
        }
    }

    /// The write-ahead intent of `act` by `actor` (its field `intent`).
    pub fn write_ahead(act: impl Into<String>, actor: Actor, changed: Value) -> Self {
        Self {
            intent: true,
            ..Self::new(act, actor, changed)
        }
    }

    /// The record that says `self`, recorded at `seq`, was made: act [`ACT_MADE`], the
    /// same actor, `changed` = `{"act", "seq"}`.
    pub fn made(&self, seq: u64) -> Self {
        Self::new(
            ACT_MADE,
            self.actor.clone(),
            serde_json::json!({"act": self.act, "seq": seq}),
        )
    }

    /// [`Authority::failed`] with the error's message as well (`changed.error`,
    /// lowercase, never a secret).
    pub fn failed_because(&self, seq: u64, code: &str, error: &str) -> Self {
        let mut a = self.failed(seq, code);
        a.changed["error"] = Value::String(error.to_owned());
        a
    }

    /// The record that says `self`, recorded at `seq`, was not made, refused with `code`
    /// (a stable code of RUNTIME §6, `witness_unavailable`, `store_io` …): act
    /// [`ACT_FAILED`], the same actor, `changed` = `{"act", "seq", "code"}`.
    pub fn failed(&self, seq: u64, code: &str) -> Self {
        Self::new(
            ACT_FAILED,
            self.actor.clone(),
            serde_json::json!({"act": self.act, "seq": seq, "code": code}),
        )
    }

    /// The fields of its record as this store writes them (without `ts`, `id`, `seq`,
    /// `kind`, `prev`, `hash`): what another backend's record carries too.
    pub fn to_fields(&self) -> Map<String, Value> {
        authority_fields(self)
    }
}

/// The fields of an act of authority's record: `act`, `actor` (`owner` or the principal),
/// `uid` (the owner's), `changed`, and `phase` = `"intent"` for a write-ahead intent.
pub(crate) fn authority_fields(a: &Authority) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("act".into(), Value::String(a.act.clone()));
    match &a.actor {
        Actor::Owner { uid } => {
            m.insert("actor".into(), Value::String("owner".into()));
            m.insert("uid".into(), Value::from(*uid));
        }
        Actor::Principal(p) => {
            m.insert("actor".into(), Value::String(p.clone()));
        }
    }
    m.insert("changed".into(), a.changed.clone());
    if a.intent {
        m.insert("phase".into(), Value::String(PHASE_INTENT.into()));
    }
    m
}

/// The encoded length past which an outcome's extras are dropped, so that with its
/// stamps (`ts`, `id`, `seq`, `kind`, `prev`, `hash`: under 400 bytes) a record stays
/// within [`super::reserve::OUTCOME_MAX`].
const OUTCOME_FIELDS_MAX: usize = 7 * 1024;

/// Keeps an outcome within its bound (RUNTIME §5.4: outcomes are bounded, 8 KiB): while
/// its fields encode longer than that, the largest extra is dropped and its key listed in
/// `dropped`.
pub(crate) fn bound_outcome(m: &mut Map<String, Value>, extra_keys: &[String]) {
    let len = |m: &Map<String, Value>| super::record::canonical_object_len(m);
    if len(m) <= OUTCOME_FIELDS_MAX {
        return;
    }
    let mut dropped: Vec<String> = Vec::new();
    let mut keys: Vec<(usize, String)> = extra_keys
        .iter()
        .filter_map(|k| {
            m.get(k)
                .map(|v| (super::record::canonical_json(v).len(), k.clone()))
        })
        .collect();
    keys.sort();
    while len(m) > OUTCOME_FIELDS_MAX {
        let Some((_, k)) = keys.pop() else { break };
        m.remove(&k);
        dropped.push(k);
        dropped.sort();
        m.insert(
            "dropped".into(),
            Value::Array(dropped.iter().cloned().map(Value::String).collect()),
        );
    }
}
