//! The compiled form of a loaded policy, for a host's policy cache: a policy that has
//! not changed is not parsed, screened or hashed again (RUNTIME §7: the policy governs
//! every call of a session principal).
//!
//! [`Policy::to_cache_bytes`] writes the typed model, its `content_hash` and the digest
//! of the source text it was loaded from; [`Policy::from_cache_bytes`] reads it back
//! only when the bytes were written by this very engine (crate version and
//! [`FORMAT_VERSION`]), name the same source digest, and are whole (length and a
//! checksum over every byte). Anything else is a [`CacheError`], and the host loads from
//! source instead: the cache can make a load faster, never make it decide differently.
//! Patterns come back screened and compile on first use; lookup indices, grants and the
//! canary matcher are rebuilt.
//!
//! Layout (little-endian): magic `HISTOSPC`, format version (u32), crate version (u8
//! length + bytes), source digest (32 bytes), payload length (u64), payload, checksum
//! (u64) of everything before it. The checksum detects truncation and corruption; it
//! is not a signature (the cache lives beside the policy, in the owner's store).

use sha2::{Digest, Sha256};

use crate::model::*;
use crate::pattern::Pattern;
use crate::value::{Map, Value};

/// Version of the byte layout; bumped whenever the encoding changes.
pub const FORMAT_VERSION: u32 = 1;
const MAGIC: &[u8; 8] = b"HISTOSPC";
const ENGINE: &str = env!("CARGO_PKG_VERSION");
/// Deepest value nesting read back (a corrupted entry cannot exhaust the stack).
const MAX_DEPTH: usize = 512;

/// The digest a cache entry is keyed by: SHA-256 of the policy file's bytes.
pub fn source_digest(source: &[u8]) -> [u8; 32] {
    Sha256::digest(source).into()
}

/// Why a cache entry was not used. Every case means: load the policy from source.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CacheError {
    /// Not a compiled policy (wrong magic).
    #[error("not a compiled Histos policy")]
    NotACache,
    /// Written by another engine version or format.
    #[error(
        "written by histos {engine} (format {format}); this is histos {ENGINE} (format {FORMAT_VERSION})"
    )]
    OtherVersion {
        /// The crate version that wrote it.
        engine: String,
        /// The format version it uses.
        format: u32,
    },
    /// Compiled from different source text.
    #[error("compiled from other source text")]
    OtherSource,
    /// Cut short.
    #[error("truncated")]
    Truncated,
    /// The bytes do not decode (a flipped bit, a wrong checksum, a bad value).
    #[error("corrupted: {0}")]
    Corrupted(&'static str),
}

impl CacheError {
    /// A stable word for why a compiled entry was not used, for a cache note (`hcp
    /// doctor`): `cache_not_a_cache`, `cache_other_version`, `cache_other_source`,
    /// `cache_truncated`, `cache_corrupted`. Not a refusal code: a compiled entry that
    /// cannot be used is compiled again.
    pub fn reason(&self) -> &'static str {
        match self {
            CacheError::NotACache => "cache_not_a_cache",
            CacheError::OtherVersion { .. } => "cache_other_version",
            CacheError::OtherSource => "cache_other_source",
            CacheError::Truncated => "cache_truncated",
            CacheError::Corrupted(_) => "cache_corrupted",
        }
    }
}

/// A 64-bit checksum over whole words (fast; detects corruption, not tampering).
fn checksum(b: &[u8]) -> u64 {
    let mut h: u64 = 0x243f_6a88_85a3_08d3 ^ (b.len() as u64);
    let mut chunks = b.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        h = (h ^ u64::from_le_bytes(w))
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(29);
    }
    let mut w = [0u8; 8];
    let rest = chunks.remainder();
    w[..rest.len()].copy_from_slice(rest);
    h = (h ^ u64::from_le_bytes(w)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    h ^ (h >> 31)
}

impl Policy {
    /// The compiled form of this policy, keyed by `source_digest` (see [`source_digest`]
    /// of the text it was loaded from).
    pub fn to_cache_bytes(&self, source_digest: &[u8; 32]) -> Vec<u8> {
        let mut w = W(Vec::with_capacity(4096));
        w.0.extend_from_slice(MAGIC);
        w.0.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        w.0.push(ENGINE.len() as u8);
        w.0.extend_from_slice(ENGINE.as_bytes());
        w.0.extend_from_slice(source_digest);
        let len_at = w.0.len();
        w.0.extend_from_slice(&0u64.to_le_bytes());
        let start = w.0.len();
        w.policy(self);
        let n = (w.0.len() - start) as u64;
        w.0[len_at..len_at + 8].copy_from_slice(&n.to_le_bytes());
        let sum = checksum(&w.0);
        w.0.extend_from_slice(&sum.to_le_bytes());
        w.0
    }

    /// The policy compiled into `bytes`, when they were written by this engine from the
    /// source whose digest is `source_digest`.
    ///
    /// # Errors
    /// A [`CacheError`]: the host then loads the policy from source.
    pub fn from_cache_bytes(bytes: &[u8], source_digest: &[u8; 32]) -> Result<Policy, CacheError> {
        let mut r = R { b: bytes, i: 0 };
        if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
            return Err(if MAGIC.starts_with(bytes) {
                CacheError::Truncated
            } else {
                CacheError::NotACache
            });
        }
        r.i = MAGIC.len();
        let format = r.u32()?;
        let n = r.u8()? as usize;
        let engine = std::str::from_utf8(r.take(n)?)
            .map_err(|_| CacheError::Corrupted("engine version"))?
            .to_string();
        if format != FORMAT_VERSION || engine != ENGINE {
            return Err(CacheError::OtherVersion { engine, format });
        }
        let digest = r.take(32)?;
        let len = r.u64()?;
        let start = r.i;
        let end = start
            .checked_add(usize::try_from(len).map_err(|_| CacheError::Corrupted("length"))?)
            .ok_or(CacheError::Corrupted("length"))?;
        let total = end.checked_add(8).ok_or(CacheError::Corrupted("length"))?;
        if bytes.len() < total {
            return Err(CacheError::Truncated);
        }
        if bytes.len() > total {
            return Err(CacheError::Corrupted("trailing bytes"));
        }
        let mut sum = [0u8; 8];
        sum.copy_from_slice(&bytes[end..end + 8]);
        if checksum(&bytes[..end]) != u64::from_le_bytes(sum) {
            return Err(CacheError::Corrupted("checksum"));
        }
        if digest != source_digest {
            return Err(CacheError::OtherSource);
        }
        let mut p = R {
            b: &bytes[..end],
            i: start,
        };
        let policy = p.policy()?;
        if p.i != end {
            return Err(CacheError::Corrupted("payload length"));
        }
        Ok(policy)
    }
}

struct W(Vec<u8>);

impl W {
    fn n(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }
    fn b(&mut self, v: bool) {
        self.0.push(u8::from(v));
    }
    fn s(&mut self, s: &str) {
        self.n(s.len() as u64);
        self.0.extend_from_slice(s.as_bytes());
    }
    fn os(&mut self, s: Option<&str>) {
        match s {
            None => self.0.push(0),
            Some(s) => {
                self.0.push(1);
                self.s(s);
            }
        }
    }
    fn on(&mut self, v: Option<u64>) {
        match v {
            None => self.0.push(0),
            Some(v) => {
                self.0.push(1);
                self.n(v);
            }
        }
    }
    fn strs(&mut self, v: &[String]) {
        self.n(v.len() as u64);
        for s in v {
            self.s(s);
        }
    }
    fn value(&mut self, v: &Value) {
        match v {
            Value::Null => self.0.push(0),
            Value::Bool(false) => self.0.push(1),
            Value::Bool(true) => self.0.push(2),
            Value::Int(i) => {
                self.0.push(3);
                self.0.extend_from_slice(&i.to_le_bytes());
            }
            Value::BigInt(s) => {
                self.0.push(4);
                self.s(s);
            }
            Value::Float(f) => {
                self.0.push(5);
                self.0.extend_from_slice(&f.to_bits().to_le_bytes());
            }
            Value::Str(s) => {
                self.0.push(6);
                self.s(s);
            }
            Value::List(l) => {
                self.0.push(7);
                self.n(l.len() as u64);
                for x in l {
                    self.value(x);
                }
            }
            Value::Map(m) => {
                self.0.push(8);
                self.n(m.len() as u64);
                for (k, x) in m.iter() {
                    self.s(k);
                    self.value(x);
                }
            }
            Value::Timestamp(s) => {
                self.0.push(9);
                self.s(s);
            }
        }
    }
    fn ov(&mut self, v: &Option<Value>) {
        match v {
            None => self.0.push(0),
            Some(v) => {
                self.0.push(1);
                self.value(v);
            }
        }
    }
    fn ol(&mut self, v: &Option<Vec<Value>>) {
        match v {
            None => self.0.push(0),
            Some(l) => {
                self.0.push(1);
                self.n(l.len() as u64);
                for x in l {
                    self.value(x);
                }
            }
        }
    }
    fn schema(&mut self, s: &Option<Schema>) {
        let Some(s) = s else {
            self.0.push(0);
            return;
        };
        self.0.push(1);
        self.b(s.allow_extra);
        self.n(s.fields.len() as u64);
        for f in &s.fields {
            self.s(&f.name);
            self.0.push(ty_code(f.ty));
            self.b(f.required);
            self.b(f.nullable);
            self.ol(&f.enum_values);
            self.ol(&f.item_enum);
            self.0.push(f.item_type.map_or(0, ty_code));
            self.on(f.min_length);
            self.on(f.max_length);
            self.os(f.pattern.as_ref().map(Pattern::source));
            self.0.push(match f.sensitive {
                None => 0,
                Some(Sensitive::Pii) => 1,
                Some(Sensitive::Secret) => 2,
            });
            self.on(f.min_items);
            self.on(f.max_items);
            self.b(f.unique_items);
            self.ov(&f.minimum);
            self.ov(&f.maximum);
            self.ov(&f.exclusive_minimum);
            self.ov(&f.exclusive_maximum);
            self.ov(&f.multiple_of);
        }
    }
    fn policy(&mut self, p: &Policy) {
        self.s(&p.schema_version);
        self.os(p.policy_id.as_deref());
        self.os(p.version.as_deref());
        self.os(p.created_at.as_deref());
        self.strs(&p.features);
        self.n(p.tools.len() as u64);
        for t in &p.tools {
            self.s(&t.name);
            self.schema(&t.args);
            self.schema(&t.returns);
            self.s(&t.access);
            self.s(&t.sensitivity);
            self.on(t.rate_limit);
            self.on(t.budget);
            self.b(t.requires_confirmation);
            self.on(t.confirmation_expires_in);
            self.b(t.requires_escalation);
            self.n(t.constraints.len() as u64);
            for c in &t.constraints {
                self.s(&c.field);
                self.0.push(op_code(c.op));
                self.ov(&c.value);
                self.os(c.principal_attr.as_deref());
            }
            self.n(t.bindings.len() as u64);
            for (a, b) in &t.bindings {
                self.s(a);
                self.s(b);
            }
            self.b(t.scan_output_for_canary);
            self.b(t.deny_secret_args);
            self.b(t.redact_secret_output);
            self.b(t.project_output);
            self.b(t.strict_returns);
            self.0.push(match t.on_output_violation {
                OnViolation::RedactAll => 0,
                OnViolation::Deny => 1,
                OnViolation::Allow => 2,
            });
        }
        self.n(p.roles.len() as u64);
        for r in &p.roles {
            self.s(&r.name);
            self.strs(&r.allow);
            self.os(r.inherits.as_deref());
        }
        self.strs(&p.canaries);
        self.s(&p.content_hash);
    }
}

const TYPES: [FieldType; 7] = [
    FieldType::String,
    FieldType::Integer,
    FieldType::Number,
    FieldType::Boolean,
    FieldType::Array,
    FieldType::Object,
    FieldType::Any,
];
const OPS: [Op; 8] = [
    Op::Eq,
    Op::Ne,
    Op::In,
    Op::NotIn,
    Op::Le,
    Op::Lt,
    Op::Ge,
    Op::Gt,
];

fn ty_code(t: FieldType) -> u8 {
    TYPES
        .iter()
        .position(|x| *x == t)
        .map_or(0, |i| i as u8 + 1)
}

fn op_code(o: Op) -> u8 {
    OPS.iter().position(|x| *x == o).map_or(0, |i| i as u8)
}

struct R<'a> {
    b: &'a [u8],
    i: usize,
}

type Res<T> = Result<T, CacheError>;

impl<'a> R<'a> {
    fn take(&mut self, n: usize) -> Res<&'a [u8]> {
        let end = self.i.checked_add(n).ok_or(CacheError::Truncated)?;
        let s = self.b.get(self.i..end).ok_or(CacheError::Truncated)?;
        self.i = end;
        Ok(s)
    }
    fn u8(&mut self) -> Res<u8> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Res<u32> {
        let mut a = [0u8; 4];
        a.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(a))
    }
    fn u64(&mut self) -> Res<u64> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }
    fn n(&mut self) -> Res<u64> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(CacheError::Corrupted("number"))
    }
    /// A count of items that each take at least one byte: never more than what is left.
    fn count(&mut self) -> Res<usize> {
        let n = self.n()?;
        if n > (self.b.len() - self.i) as u64 {
            return Err(CacheError::Corrupted("count"));
        }
        Ok(n as usize)
    }
    fn b(&mut self) -> Res<bool> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(CacheError::Corrupted("flag")),
        }
    }
    fn s(&mut self) -> Res<String> {
        let n = self.count()?;
        let raw = self.take(n)?;
        std::str::from_utf8(raw)
            .map(str::to_string)
            .map_err(|_| CacheError::Corrupted("text"))
    }
    fn some(&mut self) -> Res<bool> {
        self.b()
    }
    fn os(&mut self) -> Res<Option<String>> {
        Ok(if self.some()? { Some(self.s()?) } else { None })
    }
    fn on(&mut self) -> Res<Option<u64>> {
        Ok(if self.some()? { Some(self.n()?) } else { None })
    }
    fn strs(&mut self) -> Res<Vec<String>> {
        let n = self.count()?;
        (0..n).map(|_| self.s()).collect()
    }
    fn value(&mut self, depth: usize) -> Res<Value> {
        if depth > MAX_DEPTH {
            return Err(CacheError::Corrupted("nesting"));
        }
        Ok(match self.u8()? {
            0 => Value::Null,
            1 => Value::Bool(false),
            2 => Value::Bool(true),
            3 => {
                let mut a = [0u8; 8];
                a.copy_from_slice(self.take(8)?);
                Value::Int(i64::from_le_bytes(a))
            }
            4 => Value::BigInt(self.s()?.into()),
            5 => Value::Float(f64::from_bits(self.u64()?)),
            6 => Value::Str(self.s()?),
            7 => {
                let n = self.count()?;
                let mut l = Vec::with_capacity(n);
                for _ in 0..n {
                    l.push(self.value(depth + 1)?);
                }
                Value::List(l)
            }
            8 => {
                let n = self.count()?;
                let mut m = Map::new();
                for _ in 0..n {
                    let k = self.s()?;
                    if m.contains_key(&k) {
                        return Err(CacheError::Corrupted("repeated key"));
                    }
                    let v = self.value(depth + 1)?;
                    m.push_unchecked(k, v);
                }
                Value::Map(m)
            }
            9 => Value::Timestamp(self.s()?.into()),
            _ => return Err(CacheError::Corrupted("value tag")),
        })
    }
    fn ov(&mut self) -> Res<Option<Value>> {
        Ok(if self.some()? {
            Some(self.value(0)?)
        } else {
            None
        })
    }
    fn ol(&mut self) -> Res<Option<Vec<Value>>> {
        if !self.some()? {
            return Ok(None);
        }
        let n = self.count()?;
        let mut l = Vec::with_capacity(n);
        for _ in 0..n {
            l.push(self.value(0)?);
        }
        Ok(Some(l))
    }
    fn ty(&mut self) -> Res<FieldType> {
        let c = self.u8()?;
        TYPES
            .get(usize::from(c).wrapping_sub(1))
            .copied()
            .ok_or(CacheError::Corrupted("type"))
    }
    fn schema(&mut self) -> Res<Option<Schema>> {
        if !self.some()? {
            return Ok(None);
        }
        let allow_extra = self.b()?;
        let n = self.count()?;
        let mut fields = Vec::with_capacity(n);
        for _ in 0..n {
            let name = self.s()?;
            let ty = self.ty()?;
            let required = self.b()?;
            let nullable = self.b()?;
            let enum_values = self.ol()?;
            let item_enum = self.ol()?;
            let item_type = match self.u8()? {
                0 => None,
                c => Some(
                    TYPES
                        .get(usize::from(c) - 1)
                        .copied()
                        .ok_or(CacheError::Corrupted("type"))?,
                ),
            };
            let min_length = self.on()?;
            let max_length = self.on()?;
            let pattern = self.os()?.map(Pattern::screened);
            let sensitive = match self.u8()? {
                0 => None,
                1 => Some(Sensitive::Pii),
                2 => Some(Sensitive::Secret),
                _ => return Err(CacheError::Corrupted("sensitive")),
            };
            fields.push(Field {
                name,
                ty,
                required,
                nullable,
                enum_values,
                item_enum,
                item_type,
                min_length,
                max_length,
                pattern,
                sensitive,
                min_items: self.on()?,
                max_items: self.on()?,
                unique_items: self.b()?,
                minimum: self.ov()?,
                maximum: self.ov()?,
                exclusive_minimum: self.ov()?,
                exclusive_maximum: self.ov()?,
                multiple_of: self.ov()?,
            });
        }
        Ok(Some(Schema {
            allow_extra,
            fields,
        }))
    }
    fn policy(&mut self) -> Res<Policy> {
        let schema_version = self.s()?;
        let policy_id = self.os()?;
        let version = self.os()?;
        let created_at = self.os()?;
        let features = self.strs()?;
        let nt = self.count()?;
        let mut tools = Vec::with_capacity(nt);
        for _ in 0..nt {
            let name = self.s()?;
            let args = self.schema()?;
            let returns = self.schema()?;
            let access = self.s()?;
            let sensitivity = self.s()?;
            let rate_limit = self.on()?;
            let budget = self.on()?;
            let requires_confirmation = self.b()?;
            let confirmation_expires_in = self.on()?;
            let requires_escalation = self.b()?;
            let nc = self.count()?;
            let mut constraints = Vec::with_capacity(nc);
            for _ in 0..nc {
                let field = self.s()?;
                let op = *OPS
                    .get(usize::from(self.u8()?))
                    .ok_or(CacheError::Corrupted("operator"))?;
                constraints.push(Constraint {
                    field,
                    op,
                    value: self.ov()?,
                    principal_attr: self.os()?,
                });
            }
            let nb = self.count()?;
            let mut bindings = Vec::with_capacity(nb);
            for _ in 0..nb {
                bindings.push((self.s()?, self.s()?));
            }
            tools.push(Tool {
                name,
                args,
                returns,
                access,
                sensitivity,
                rate_limit,
                budget,
                requires_confirmation,
                confirmation_expires_in,
                requires_escalation,
                constraints,
                bindings,
                scan_output_for_canary: self.b()?,
                deny_secret_args: self.b()?,
                redact_secret_output: self.b()?,
                project_output: self.b()?,
                strict_returns: self.b()?,
                on_output_violation: match self.u8()? {
                    0 => OnViolation::RedactAll,
                    1 => OnViolation::Deny,
                    2 => OnViolation::Allow,
                    _ => return Err(CacheError::Corrupted("on_violation")),
                },
            });
        }
        let nr = self.count()?;
        let mut roles = Vec::with_capacity(nr);
        for _ in 0..nr {
            roles.push(Role {
                name: self.s()?,
                allow: self.strs()?,
                inherits: self.os()?,
            });
        }
        let canaries = self.strs()?;
        let content_hash = self.s()?;
        Ok(crate::load::assemble(
            schema_version,
            policy_id,
            version,
            created_at,
            features,
            tools,
            roles,
            canaries,
            content_hash,
        ))
    }
}
