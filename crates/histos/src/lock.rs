//! Tool locks: `tools.lock.json` in the format of `spec/tool-lock-0.1.schema.json`
//! (versions 1 and 2; HISTOS-ENGINE §11). A lock records, per imported tool, where it
//! came from and the three hashes of what a person reviewed; a drift check compares a
//! tool's current definition against its entry.
//!
//! Reading is strict and fails closed: a file that is not JSON, has a repeated key, an
//! unknown or missing key, a digest that is not `sha256:` + 64 lowercase hex digits, an
//! unknown source kind, or a `lock_version` this engine does not read is refused with a
//! [`LockCode`], never read in part. Writing is byte-stable: keys sorted, two-space
//! indentation, one trailing newline.

use std::fmt;
use std::io::Read;
use std::path::Path;

use crate::hash::json_escape;
use crate::projection::{SourceKind, ToolSource};
use crate::value::{Map, Value, py_float_repr};

/// The version this engine writes (adds the reviewed copy to version 1).
pub const LOCK_VERSION: u64 = 2;
/// The largest lock file read, in bytes (16 MiB).
pub const MAX_LOCK_BYTES: u64 = 16 * 1024 * 1024;
/// A reviewed shape larger than this (compact JSON bytes) is recorded as elided.
pub const MAX_RECORDED_SHAPE_BYTES: usize = 16_384;
/// A reviewed description longer than this (characters) is recorded as elided.
pub const MAX_RECORDED_DESCRIPTION_CHARS: usize = 4_096;

/// Why a lock file is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LockCode {
    /// Not JSON (or not UTF-8, or unreadable).
    Unparseable,
    /// A repeated key anywhere.
    DuplicateKey,
    /// A `lock_version` newer than this engine reads.
    UnsupportedVersion,
    /// Valid JSON that is not a valid lock (unknown or missing key, bad digest, …).
    Invalid,
    /// Larger than [`MAX_LOCK_BYTES`].
    TooLarge,
    /// The lock file does not exist (path reader only).
    NotFound,
}

impl LockCode {
    /// Every code, in the order above.
    pub const ALL: &'static [LockCode] = &[
        LockCode::Unparseable,
        LockCode::DuplicateKey,
        LockCode::UnsupportedVersion,
        LockCode::Invalid,
        LockCode::TooLarge,
        LockCode::NotFound,
    ];

    /// The stable snake_case code.
    pub fn as_str(self) -> &'static str {
        match self {
            LockCode::Unparseable => "lock_unparseable",
            LockCode::DuplicateKey => "lock_duplicate_key",
            LockCode::UnsupportedVersion => "lock_unsupported_version",
            LockCode::Invalid => "lock_invalid",
            LockCode::TooLarge => "lock_too_large",
            LockCode::NotFound => "lock_not_found",
        }
    }
}

impl fmt::Display for LockCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A lock file that cannot be read: code, message, and where (`tools.x.source`, or a
/// line and column).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message} [{code}]{}", location.as_ref().map(|l| format!(" at `{l}`")).unwrap_or_default())]
pub struct LockError {
    /// The code.
    pub code: LockCode,
    /// A lowercase explanation.
    pub message: String,
    /// Where, when known.
    pub location: Option<String>,
}

fn lerr(code: LockCode, msg: impl Into<String>, at: impl Into<String>) -> LockError {
    let at = at.into();
    LockError {
        code,
        message: msg.into(),
        location: (!at.is_empty()).then_some(at),
    }
}

/// `source` of an entry: which reader, and where it read from.
#[derive(Debug, Clone, PartialEq)]
pub struct LockSource {
    /// Which reader produced the entry.
    pub kind: SourceKind,
    /// Where the definition was read (never dereferenced automatically).
    pub locator: Option<String>,
}

/// What a person reviewed (version 2). `None` in `shape`/`description` means recorded as
/// absent in the source; a part too large to record is named in `elided` instead.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Reviewed {
    /// The reviewed shape (`Some(Value::Null)` when the source declared none).
    pub shape: Option<Value>,
    /// The reviewed description (`Some(None)` when the source had none).
    pub description: Option<Option<String>>,
    /// Parts omitted for size: `shape`, `description`.
    pub elided: Vec<String>,
}

/// One tool's entry.
#[derive(Debug, Clone, PartialEq)]
pub struct LockEntry {
    /// Provenance.
    pub source: LockSource,
    /// Digest of the per-kind shape.
    pub schema_sha256: String,
    /// Digest of the description (or of null).
    pub description_sha256: String,
    /// Digest of the projected contract.
    pub contract_sha256: String,
    /// The reviewed copy (required in version 2, absent in version 1).
    pub reviewed: Option<Reviewed>,
}

/// Which of a tool's hashes moved since it was locked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Drift {
    /// The enforced part changed (`contract_sha256`).
    pub contract: bool,
    /// The declared shape changed, maybe only in a part the projection discards.
    pub schema: bool,
    /// The description changed (where a tool-poisoning payload hides).
    pub description: bool,
}

impl Drift {
    /// Whether nothing moved.
    pub fn is_clean(&self) -> bool {
        !(self.contract || self.schema || self.description)
    }

    /// The names of the moved hashes, `contract_sha256` first.
    pub fn moved(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.contract {
            v.push("contract_sha256");
        }
        if self.schema {
            v.push("schema_sha256");
        }
        if self.description {
            v.push("description_sha256");
        }
        v
    }
}

/// The result of checking current tools against a lock.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DriftReport {
    /// Locked tools whose definition changed, by name, in name order.
    pub drifted: Vec<(String, Drift)>,
    /// Current tools the lock does not cover (not verified by the lock), in name order.
    pub unlocked: Vec<String>,
    /// Locked tools that no longer exist, in name order.
    pub missing: Vec<String>,
}

impl DriftReport {
    /// Whether every current tool is locked and unchanged and no locked tool is gone.
    pub fn is_clean(&self) -> bool {
        self.drifted.is_empty() && self.unlocked.is_empty() && self.missing.is_empty()
    }
}

/// A tool lock: entries keyed by tool name, in name order.
#[derive(Debug, Clone, PartialEq)]
pub struct Lock {
    /// `lock_version` (1 or 2).
    pub version: u64,
    /// `policy`: the file name of the policy the entries belong to (informational).
    pub policy: Option<String>,
    /// Entries sorted by tool name.
    pub tools: Vec<(String, LockEntry)>,
}

impl LockEntry {
    /// The version-2 entry for `source` as it is now, read from `locator`.
    pub fn of(source: &ToolSource, locator: Option<&str>) -> LockEntry {
        let mut elided = Vec::new();
        let shape = if compact(&source.shape).len() > MAX_RECORDED_SHAPE_BYTES {
            elided.push("shape".to_string());
            None
        } else {
            Some(source.shape.clone())
        };
        let description = match &source.description {
            Some(d) if d.chars().count() > MAX_RECORDED_DESCRIPTION_CHARS => {
                elided.push("description".to_string());
                None
            }
            d => Some(d.clone()),
        };
        LockEntry {
            source: LockSource {
                kind: source.kind,
                locator: locator.map(str::to_string),
            },
            schema_sha256: source.schema_sha256(),
            description_sha256: source.description_sha256(),
            contract_sha256: source.contract_sha256(),
            reviewed: Some(Reviewed {
                shape,
                description,
                elided,
            }),
        }
    }

    /// Which hashes of `current` differ from this entry (`tool_drift` when any does).
    pub fn compare(&self, current: &ToolSource) -> Drift {
        Drift {
            contract: self.contract_sha256 != current.contract_sha256(),
            schema: self.schema_sha256 != current.schema_sha256(),
            description: self.description_sha256 != current.description_sha256(),
        }
    }
}

impl Lock {
    /// A version-2 lock of `sources` (each with its locator), for the policy file
    /// `policy`. A name given twice keeps the last.
    pub fn of<'a>(
        sources: impl IntoIterator<Item = (&'a ToolSource, Option<&'a str>)>,
        policy: Option<&str>,
    ) -> Lock {
        let mut tools: Vec<(String, LockEntry)> = Vec::new();
        for (s, loc) in sources {
            let e = LockEntry::of(s, loc);
            match tools.iter_mut().find(|(n, _)| *n == s.name) {
                Some(slot) => slot.1 = e,
                None => tools.push((s.name.clone(), e)),
            }
        }
        tools.sort_by(|a, b| a.0.cmp(&b.0));
        Lock {
            version: LOCK_VERSION,
            policy: policy.map(str::to_string),
            tools,
        }
    }

    /// The entry of `tool`.
    pub fn entry(&self, tool: &str) -> Option<&LockEntry> {
        self.tools
            .binary_search_by(|(n, _)| n.as_str().cmp(tool))
            .ok()
            .map(|i| &self.tools[i].1)
    }

    /// Compares `current` (every tool that exists now) with the lock.
    pub fn check(&self, current: &[ToolSource]) -> DriftReport {
        let mut r = DriftReport::default();
        for t in current {
            match self.entry(&t.name) {
                None => r.unlocked.push(t.name.clone()),
                Some(e) => {
                    let d = e.compare(t);
                    if !d.is_clean() {
                        r.drifted.push((t.name.clone(), d));
                    }
                }
            }
        }
        for (name, _) in &self.tools {
            if !current.iter().any(|t| t.name == *name) {
                r.missing.push(name.clone());
            }
        }
        r.drifted.sort_by(|a, b| a.0.cmp(&b.0));
        r.unlocked.sort();
        r
    }

    /// Reads a lock file.
    ///
    /// # Errors
    /// `lock_not_found`, `lock_too_large`, `lock_unparseable`, then those of
    /// [`Lock::parse`].
    pub fn load_path(path: &Path) -> Result<Lock, LockError> {
        let at = path.display().to_string();
        let file = std::fs::File::open(path).map_err(|e| {
            let code = if e.kind() == std::io::ErrorKind::NotFound {
                LockCode::NotFound
            } else {
                LockCode::Unparseable
            };
            lerr(code, format!("cannot open the tool lock: {e}"), &at)
        })?;
        let mut buf = Vec::new();
        file.take(MAX_LOCK_BYTES + 1)
            .read_to_end(&mut buf)
            .map_err(|e| {
                lerr(
                    LockCode::Unparseable,
                    format!("cannot read the tool lock: {e}"),
                    &at,
                )
            })?;
        if buf.len() as u64 > MAX_LOCK_BYTES {
            return Err(lerr(
                LockCode::TooLarge,
                format!("the tool lock is larger than {MAX_LOCK_BYTES} bytes"),
                &at,
            ));
        }
        let text = String::from_utf8(buf)
            .map_err(|_| lerr(LockCode::Unparseable, "the tool lock is not UTF-8", &at))?;
        Lock::parse(&text)
    }

    /// Parses and validates lock text.
    ///
    /// # Errors
    /// `lock_unparseable` (not JSON), `lock_duplicate_key`, `lock_unsupported_version`
    /// (a newer `lock_version`), `lock_invalid` (anything else the format refuses).
    pub fn parse(text: &str) -> Result<Lock, LockError> {
        if text.len() as u64 > MAX_LOCK_BYTES {
            return Err(lerr(LockCode::TooLarge, "the tool lock is too large", ""));
        }
        let doc = crate::json::parse(text).map_err(|e| {
            let code = match e.code {
                crate::PolicyCode::DuplicateKey => LockCode::DuplicateKey,
                _ => LockCode::Unparseable,
            };
            LockError {
                code,
                message: format!("the tool lock is not valid JSON: {}", e.message),
                location: e.location,
            }
        })?;
        let Value::Map(top) = doc else {
            return Err(lerr(LockCode::Invalid, "a tool lock is a JSON object", ""));
        };
        keys(
            &top,
            &["lock_version", "policy", "tools"],
            &["lock_version", "tools"],
            "",
        )?;
        let version = match top.get("lock_version") {
            Some(Value::Int(v)) if *v == 1 || *v == 2 => *v as u64,
            Some(Value::Int(v)) if *v > 2 => {
                return Err(lerr(
                    LockCode::UnsupportedVersion,
                    format!(
                        "lock_version {v} is newer than this engine reads (1 and 2); \
                         upgrade, or write the lock again"
                    ),
                    "lock_version",
                ));
            }
            Some(Value::BigInt(s)) if !s.starts_with('-') => {
                return Err(lerr(
                    LockCode::UnsupportedVersion,
                    format!("lock_version {s} is newer than this engine reads (1 and 2)"),
                    "lock_version",
                ));
            }
            _ => {
                return Err(lerr(
                    LockCode::Invalid,
                    "lock_version must be the integer 1 or 2",
                    "lock_version",
                ));
            }
        };
        let policy = match top.get("policy") {
            None => None,
            Some(Value::Str(s)) => Some(s.clone()),
            Some(_) => {
                return Err(lerr(
                    LockCode::Invalid,
                    "`policy` must be a string",
                    "policy",
                ));
            }
        };
        let Some(Value::Map(tools_m)) = top.get("tools") else {
            return Err(lerr(
                LockCode::Invalid,
                "`tools` must be an object",
                "tools",
            ));
        };
        let mut tools = Vec::with_capacity(tools_m.len());
        for (name, node) in tools_m.iter() {
            let at = format!("tools.{name}");
            if name.is_empty() {
                return Err(lerr(LockCode::Invalid, "a tool name must not be empty", at));
            }
            tools.push((name.clone(), entry(node, version, &at)?));
        }
        tools.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(Lock {
            version,
            policy,
            tools,
        })
    }

    /// The lock as JSON text: keys sorted, two-space indentation, a trailing newline;
    /// the same lock always gives the same bytes.
    pub fn to_json(&self) -> String {
        let mut tools = Map::new();
        for (name, e) in &self.tools {
            let mut m = Map::new();
            m.insert("contract_sha256", Value::Str(e.contract_sha256.clone()));
            m.insert(
                "description_sha256",
                Value::Str(e.description_sha256.clone()),
            );
            if let Some(r) = &e.reviewed {
                let mut rm = Map::new();
                if let Some(d) = &r.description {
                    rm.insert("description", d.clone().map_or(Value::Null, Value::Str));
                }
                if !r.elided.is_empty() {
                    rm.insert(
                        "elided",
                        Value::List(r.elided.iter().cloned().map(Value::Str).collect()),
                    );
                }
                if let Some(s) = &r.shape {
                    rm.insert("shape", s.clone());
                }
                m.insert("reviewed", Value::Map(rm));
            }
            m.insert("schema_sha256", Value::Str(e.schema_sha256.clone()));
            let mut sm = Map::new();
            sm.insert("kind", Value::Str(e.source.kind.as_str().into()));
            if let Some(l) = &e.source.locator {
                sm.insert("locator", Value::Str(l.clone()));
            }
            m.insert("source", Value::Map(sm));
            tools.push_unchecked(name.clone(), Value::Map(m));
        }
        let mut top = Map::new();
        top.insert("lock_version", Value::Int(self.version as i64));
        if let Some(p) = &self.policy {
            top.insert("policy", Value::Str(p.clone()));
        }
        top.insert("tools", Value::Map(tools));
        let mut out = String::new();
        pretty(&Value::Map(top), 0, &mut out);
        out.push('\n');
        out
    }
}

fn keys(m: &Map, allowed: &[&str], required: &[&str], at: &str) -> Result<(), LockError> {
    for k in m.keys() {
        if !allowed.contains(&k.as_str()) {
            return Err(lerr(
                LockCode::Invalid,
                format!(
                    "unknown key `{k}` (keys allowed here: {})",
                    allowed.join(", ")
                ),
                at,
            ));
        }
    }
    for k in required {
        if !m.contains_key(k) {
            return Err(lerr(LockCode::Invalid, format!("missing key `{k}`"), at));
        }
    }
    Ok(())
}

fn digest_of(m: &Map, k: &str, at: &str) -> Result<String, LockError> {
    match m.get(k) {
        Some(Value::Str(s))
            if s.len() == 71
                && s.starts_with("sha256:")
                && s[7..]
                    .bytes()
                    .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) =>
        {
            Ok(s.clone())
        }
        _ => Err(lerr(
            LockCode::Invalid,
            format!("`{k}` must be `sha256:` followed by 64 lowercase hexadecimal digits"),
            format!("{at}.{k}"),
        )),
    }
}

fn entry(node: &Value, version: u64, at: &str) -> Result<LockEntry, LockError> {
    let Value::Map(m) = node else {
        return Err(lerr(LockCode::Invalid, "a lock entry is an object", at));
    };
    const V1: [&str; 4] = [
        "contract_sha256",
        "description_sha256",
        "schema_sha256",
        "source",
    ];
    const V2: [&str; 5] = [
        "contract_sha256",
        "description_sha256",
        "reviewed",
        "schema_sha256",
        "source",
    ];
    if version == 1 {
        keys(m, &V1, &V1, at)?;
    } else {
        keys(m, &V2, &V2, at)?;
    }
    let sat = format!("{at}.source");
    let Some(Value::Map(s)) = m.get("source") else {
        return Err(lerr(LockCode::Invalid, "`source` must be an object", sat));
    };
    keys(s, &["kind", "locator"], &["kind"], &sat)?;
    let kind = s
        .get("kind")
        .and_then(Value::as_str)
        .and_then(SourceKind::parse)
        .ok_or_else(|| {
            lerr(
                LockCode::Invalid,
                "`source.kind` must be mcp, openai or openapi",
                &sat,
            )
        })?;
    let locator = match s.get("locator") {
        None => None,
        Some(Value::Str(l)) => Some(l.clone()),
        Some(_) => {
            return Err(lerr(
                LockCode::Invalid,
                "`source.locator` must be a string",
                sat,
            ));
        }
    };
    let reviewed = match m.get("reviewed") {
        None => None,
        Some(r) => Some(reviewed(r, &format!("{at}.reviewed"))?),
    };
    Ok(LockEntry {
        source: LockSource { kind, locator },
        schema_sha256: digest_of(m, "schema_sha256", at)?,
        description_sha256: digest_of(m, "description_sha256", at)?,
        contract_sha256: digest_of(m, "contract_sha256", at)?,
        reviewed,
    })
}

fn reviewed(node: &Value, at: &str) -> Result<Reviewed, LockError> {
    let Value::Map(m) = node else {
        return Err(lerr(LockCode::Invalid, "`reviewed` must be an object", at));
    };
    keys(m, &["description", "elided", "shape"], &[], at)?;
    let mut elided: Vec<String> = Vec::new();
    match m.get("elided") {
        None => {}
        Some(Value::List(l)) => {
            for p in l {
                match p.as_str() {
                    Some(s @ ("shape" | "description")) if !elided.iter().any(|e| e == s) => {
                        elided.push(s.to_string())
                    }
                    _ => {
                        return Err(lerr(
                            LockCode::Invalid,
                            "`elided` lists `shape` and `description` at most once each",
                            at,
                        ));
                    }
                }
            }
        }
        Some(_) => return Err(lerr(LockCode::Invalid, "`elided` must be a list", at)),
    }
    let shape = match m.get("shape") {
        None => None,
        Some(v @ (Value::Map(_) | Value::Null)) => Some(v.clone()),
        Some(_) => {
            return Err(lerr(
                LockCode::Invalid,
                "`shape` must be an object or null",
                at,
            ));
        }
    };
    let description = match m.get("description") {
        None => None,
        Some(Value::Null) => Some(None),
        Some(Value::Str(s)) => Some(Some(s.clone())),
        Some(_) => {
            return Err(lerr(
                LockCode::Invalid,
                "`description` must be a string or null",
                at,
            ));
        }
    };
    for (part, present) in [
        ("shape", shape.is_some()),
        ("description", description.is_some()),
    ] {
        let listed = elided.iter().any(|e| e == part);
        if present == listed {
            return Err(lerr(
                LockCode::Invalid,
                format!("`{part}` must be recorded, or named in `elided`, and not both"),
                at,
            ));
        }
    }
    Ok(Reviewed {
        shape,
        description,
        elided,
    })
}

fn number_text(v: &Value, out: &mut String) {
    match v {
        Value::Int(i) => out.push_str(&i.to_string()),
        Value::BigInt(s) => out.push_str(s),
        Value::Float(f) if f.is_finite() => out.push_str(&py_float_repr(*f)),
        _ => out.push_str("null"),
    }
}

fn compact(v: &Value) -> String {
    let mut out = String::new();
    write_compact(v, &mut out);
    out
}

fn write_compact(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(_) | Value::BigInt(_) | Value::Float(_) => number_text(v, out),
        Value::Str(s) => json_escape(s, out),
        Value::Timestamp(s) => json_escape(s, out),
        Value::List(l) => {
            out.push('[');
            for (i, x) in l.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_compact(x, out);
            }
            out.push(']');
        }
        Value::Map(m) => {
            out.push('{');
            for (i, (k, x)) in sorted(m).into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                json_escape(k, out);
                out.push(':');
                write_compact(x, out);
            }
            out.push('}');
        }
    }
}

fn sorted(m: &Map) -> Vec<(&String, &Value)> {
    let mut v: Vec<(&String, &Value)> = m.iter().collect();
    v.sort_by(|a, b| a.0.cmp(b.0));
    v
}

fn pretty(v: &Value, depth: usize, out: &mut String) {
    let pad = |n: usize, out: &mut String| out.extend(std::iter::repeat_n(' ', n * 2));
    match v {
        Value::List(l) if !l.is_empty() => {
            out.push_str("[\n");
            for (i, x) in l.iter().enumerate() {
                if i > 0 {
                    out.push_str(",\n");
                }
                pad(depth + 1, out);
                pretty(x, depth + 1, out);
            }
            out.push('\n');
            pad(depth, out);
            out.push(']');
        }
        Value::Map(m) if !m.is_empty() => {
            out.push_str("{\n");
            for (i, (k, x)) in sorted(m).into_iter().enumerate() {
                if i > 0 {
                    out.push_str(",\n");
                }
                pad(depth + 1, out);
                json_escape(k, out);
                out.push_str(": ");
                pretty(x, depth + 1, out);
            }
            out.push('\n');
            pad(depth, out);
            out.push('}');
        }
        Value::List(_) => out.push_str("[]"),
        Value::Map(_) => out.push_str("{}"),
        leaf => write_compact(leaf, out),
    }
}
