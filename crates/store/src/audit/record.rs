//! The audit record (RUNTIME §6), its canonical encoding and its hash.

use hcp_model::{ArgValue, Code, Land, Operation};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The `prev` of the first record: `sha256:` and 64 zeros.
pub const GENESIS: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

/// The keys the store writes itself: the fields of every kind of record. An
/// [`Entry::extra`] (or [`Intent::extra`], [`Outcome::extra`]) key may not be one of these.
pub const CORE_FIELDS: [&str; 29] = [
    "ts",
    "id",
    "seq",
    "kind",
    "principal",
    "project",
    "pack_id",
    "verb_key",
    "operation",
    "land",
    "decision",
    "code",
    "args_digest",
    "exit_code",
    "duration_ms",
    "intent",
    "spends",
    "stdout_bytes",
    "stderr_bytes",
    "truncated",
    "prev",
    "hash",
    "repair",
    "anchor_slot",
    "act",
    "actor",
    "uid",
    "changed",
    "dropped",
];

/// What a record is (RUNTIME §6). Records written before kinds existed have none and
/// read as [`Kind::Refusal`] or [`Kind::Event`] by their `decision`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// An allowed call, made durable before its child starts.
    Intent,
    /// What became of an intent's call: exit code, duration, bytes, `truncated`.
    Outcome,
    /// A refused call: one record.
    Refusal,
    /// Any other allowed decision recorded in one record (a stored binding, a sense
    /// stream, an exec recorded after its run by callers that do not write ahead).
    Event,
    /// A torn tail cut off after a crash (what was cut and where it was saved), or an
    /// anchor slot torn by a power cut and recovered from the other.
    Recovery,
    /// An act of authority (RUNTIME §6): what the owner (or a principal) changed —
    /// `init`, `migrate`, `grant`, `install` … — with its actor.
    Authority,
}

impl Kind {
    /// Every kind, in the order of their declaration.
    pub const ALL: [Kind; 6] = [
        Kind::Intent,
        Kind::Outcome,
        Kind::Refusal,
        Kind::Event,
        Kind::Recovery,
        Kind::Authority,
    ];

    /// `intent`, `outcome`, `refusal`, `event`, `recovery`, `authority`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Intent => "intent",
            Self::Outcome => "outcome",
            Self::Refusal => "refusal",
            Self::Event => "event",
            Self::Recovery => "recovery",
            Self::Authority => "authority",
        }
    }
}

/// The gate's answer as the audit records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// The call passed the gate (whatever the child then did).
    Allow,
    /// The call was refused; `code` says why.
    Deny,
}

impl Decision {
    /// `allow` or `deny`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Deny => "deny",
        }
    }
}

/// What a caller records about one decision in one record: a refusal (`decision: deny`)
/// or an event (`allow`). The store adds `ts`, `id`, `seq`, `kind`, `prev` and `hash` when
/// it appends ([`super::AuditLog::append`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The principal id, `owner` for the caller without a session.
    pub principal: String,
    /// The session's project, if any.
    pub project: Option<String>,
    /// The resolved pack; `None` when resolution failed (`unknown_verb`).
    pub pack_id: Option<String>,
    /// The verb key, or the target as asked when resolution failed.
    pub verb_key: String,
    /// The verb's operation, when resolution got that far.
    pub operation: Option<Operation>,
    /// The verb's land, when resolution got that far.
    pub land: Option<Land>,
    /// Allowed or refused.
    pub decision: Decision,
    /// The refusal code (`missing_grant` …); `None` when allowed.
    pub code: Option<Code>,
    /// [`args_digest`] of the call's arguments.
    pub args_digest: String,
    /// The child's exit status; `None` for a refusal.
    pub exit_code: Option<i32>,
    /// Wall time of the decision and run, in milliseconds.
    pub duration_ms: u64,
    /// Further fields (`policy_hash`, `rule`, `sandbox` …), written as they are and
    /// covered by the hash. Additive: `audit verify` needs no change to check them. A key
    /// of [`CORE_FIELDS`] is refused.
    pub extra: BTreeMap<String, Value>,
}

/// One stored record of any kind, as read back ([`super::AuditLog::tail`]). Fields a kind
/// does not carry are `None`; unknown fields land in `extra`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// RFC 3339 UTC with milliseconds.
    pub ts: String,
    /// A UUID v7, lowercase hyphenated. An intent's id is its call's `audit_id`.
    pub id: String,
    /// The record's position in the chain, from 1 (absent on records written before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// What the record is (absent on records written before kinds existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<Kind>,
    /// See [`Entry::principal`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    /// See [`Entry::project`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// See [`Entry::pack_id`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pack_id: Option<String>,
    /// See [`Entry::verb_key`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verb_key: Option<String>,
    /// See [`Entry::operation`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<Operation>,
    /// See [`Entry::land`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub land: Option<Land>,
    /// See [`Entry::decision`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
    /// See [`Entry::code`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// See [`Entry::args_digest`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args_digest: Option<String>,
    /// See [`Entry::exit_code`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// See [`Entry::duration_ms`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// An outcome's intent: that record's `id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent: Option<String>,
    /// Any other field: extras, `spends`, an outcome's byte counts, a recovery's `repair`.
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
    /// The previous record's `hash` ([`GENESIS`] for the first).
    pub prev: String,
    /// `sha256:` over the canonical encoding of this record without `hash`.
    pub hash: String,
}

impl Record {
    /// The record's kind; a record written before kinds existed reads as a refusal or an
    /// event by its decision.
    pub fn kind(&self) -> Kind {
        self.kind.unwrap_or(match self.decision {
            Some(Decision::Deny) => Kind::Refusal,
            _ => Kind::Event,
        })
    }
}

/// The canonical encoding of a JSON value, the bytes that are hashed: no whitespace,
/// object keys sorted by their UTF-8 bytes at every depth, strings escaped as
/// `serde_json` escapes them (`"`, `\`, control characters; other characters verbatim),
/// numbers as `serde_json` prints them. Records hold no floating-point numbers.
pub fn canonical_json(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Object(m) => write_object(m.iter(), out),
        Value::Array(a) => {
            out.push(b'[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(x, out);
            }
            out.push(b']');
        }
        // Scalars: serde_json's own output is already canonical for them.
        other => write_compact(other, out),
    }
}

/// An object of `entries`, keys sorted by their UTF-8 bytes.
fn write_object<'a>(entries: impl Iterator<Item = (&'a String, &'a Value)>, out: &mut Vec<u8>) {
    let mut entries: Vec<(&String, &Value)> = entries.collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    out.push(b'{');
    for (i, (k, value)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_compact(k.as_str(), out);
        out.push(b':');
        write_canonical(value, out);
    }
    out.push(b'}');
}

/// The length of the [`canonical_json`] of the object `m`, encoded without a copy of it.
pub(crate) fn canonical_object_len(m: &Map<String, Value>) -> usize {
    let mut out = Vec::with_capacity(1024);
    write_object(m.iter(), &mut out);
    out.len()
}

/// The [`canonical_json`] of the object `m` and of `m` with the string `key` added, whose
/// value `seal` computes from the first encoding (a record and its `hash`): the object is
/// encoded once and the second encoding made by splicing `"key":value` in at its sorted
/// place, which gives the same bytes as encoding the object again. Answers the second
/// encoding and the value. `m` must not hold `key` (the caller encodes twice otherwise).
pub(crate) fn canonical_sealed(
    m: &Map<String, Value>,
    key: &str,
    seal: impl FnOnce(&[u8]) -> String,
) -> (Vec<u8>, String) {
    debug_assert!(!m.contains_key(key));
    let mut entries: Vec<(&String, &Value)> = m.iter().collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let mut out = Vec::with_capacity(1024);
    out.push(b'{');
    // Where `key` goes: the byte after the entries sorting before it, and their count.
    let mut at = None;
    for (i, (k, value)) in entries.iter().enumerate() {
        if at.is_none() && k.as_str() > key {
            at = Some((out.len(), i));
        }
        if i > 0 {
            out.push(b',');
        }
        write_compact(k.as_str(), &mut out);
        out.push(b':');
        write_canonical(value, &mut out);
    }
    let (at, before) = at.unwrap_or((out.len(), entries.len()));
    out.push(b'}');
    let sealed = seal(&out);
    let mut line = Vec::with_capacity(out.len() + key.len() + sealed.len() + 8);
    line.extend_from_slice(&out[..at]);
    if before > 0 {
        line.push(b',');
    }
    write_compact(key, &mut line);
    line.push(b':');
    write_compact(sealed.as_str(), &mut line);
    if before == 0 && !entries.is_empty() {
        line.push(b',');
    }
    line.extend_from_slice(&out[at..]);
    (line, sealed)
}

/// serde_json's compact encoding of a key or a scalar (what `Value`'s `Display` prints),
/// written straight into `out`.
fn write_compact<T: Serialize + ?Sized>(v: &T, out: &mut Vec<u8>) {
    // Writing into a `Vec` cannot fail, and strings and JSON scalars always serialize.
    let _ = serde_json::to_writer(&mut *out, v);
}

pub use crate::digest::sha256_tagged;

/// The hash of a record given as a JSON object: [`sha256_tagged`] over the
/// [`canonical_json`] of the object without its `hash` key.
pub fn record_hash(record: &Map<String, Value>) -> String {
    let mut out = Vec::with_capacity(512);
    write_object(
        record.iter().filter(|(k, _)| k.as_str() != "hash"),
        &mut out,
    );
    sha256_tagged(&out)
}

/// The digest of a call's arguments that the audit keeps instead of their values
/// (RUNTIME §6): [`sha256_tagged`] over the [`canonical_json`] of the object
/// `{name: value}` (strings, numbers as written, booleans). Order of `args` is
/// irrelevant; no arguments is the digest of `{}`.
///
/// A digest of a guessable value (a yes/no, a small number) can be confirmed by
/// guessing: it proves which arguments were used, it does not hide low-entropy ones.
pub fn args_digest<'a>(args: impl IntoIterator<Item = (&'a str, &'a ArgValue)>) -> String {
    let m: Map<String, Value> = args
        .into_iter()
        .map(|(k, v)| {
            let value = match v {
                ArgValue::Bool(b) => Value::Bool(*b),
                ArgValue::Number(n) => Value::Number(n.clone()),
                ArgValue::String(s) => Value::String(s.clone()),
            };
            (k.to_owned(), value)
        })
        .collect();
    sha256_tagged(&canonical_json(&Value::Object(m)))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::result_large_err)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn canonical_json_sorts_keys_at_every_depth_and_drops_whitespace() {
        let v: Value =
            serde_json::from_str(r#"{ "b": [ {"z": 1, "a": null} ], "a": "x\n\"é" }"#).unwrap();
        assert_eq!(
            String::from_utf8(canonical_json(&v)).unwrap(),
            r#"{"a":"x\n\"é","b":[{"a":null,"z":1}]}"#
        );
    }

    #[test]
    fn a_sealed_object_encodes_as_the_object_with_its_seal() {
        let objects = [
            r#"{}"#,
            r#"{"a": 1}"#,
            r#"{"z": 1}"#,
            r#"{"a": 1, "z": [{"y": null, "b": "x\n"}]}"#,
            r#"{"args_digest": "d", "id": "i", "kind": "intent", "prev": "p", "seq": 3, "ts": "t"}"#,
            r#"{"g": 1, "ha": 2, "hash0": 3, "has": 4, "h": 5}"#,
        ];
        for text in objects {
            let Value::Object(m) = serde_json::from_str::<Value>(text).unwrap() else {
                panic!("{text}");
            };
            let mut seen = Vec::new();
            let (line, sealed) = canonical_sealed(&m, "hash", |b| {
                seen = b.to_vec();
                "sha256:0\"1".to_owned()
            });
            assert_eq!(seen, canonical_json(&Value::Object(m.clone())), "{text}");
            let mut whole = m.clone();
            whole.insert("hash".into(), Value::String(sealed));
            assert_eq!(
                String::from_utf8(line).unwrap(),
                String::from_utf8(canonical_json(&Value::Object(whole))).unwrap(),
                "{text}"
            );
        }
    }

    #[test]
    fn args_digest_ignores_order_and_never_holds_values() {
        let a = ArgValue::String("secret value".into());
        let n = ArgValue::Number(serde_json::Number::from(3));
        let d1 = args_digest([("to", &a), ("count", &n)]);
        let d2 = args_digest([("count", &n), ("to", &a)]);
        assert_eq!(d1, d2);
        assert!(!d1.contains("secret"));
        assert_eq!(
            d1,
            sha256_tagged(br#"{"count":3,"to":"secret value"}"#),
            "the digest is over the canonical object"
        );
        // A string "3" is not the number 3.
        let s3 = ArgValue::String("3".into());
        assert_ne!(args_digest([("count", &s3)]), args_digest([("count", &n)]));
        assert_eq!(args_digest([]), sha256_tagged(b"{}"));
    }

    #[test]
    fn record_hash_excludes_only_the_hash_field() {
        let m = json!({"a": 1, "prev": GENESIS, "hash": "sha256:whatever"});
        let Value::Object(m) = m else { unreachable!() };
        let expected = sha256_tagged(format!(r#"{{"a":1,"prev":"{GENESIS}"}}"#).as_bytes());
        assert_eq!(record_hash(&m), expected);
    }
}
