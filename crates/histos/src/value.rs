//! The document and argument value model (HISTOS-ENGINE §3.5).
//!
//! JSON and YAML documents, call arguments and tool outputs are all [`Value`]s. Unlike
//! `serde_json::Value`, a [`Value`] keeps the integer/float distinction a document wrote
//! and integers of any size (as decimal text past `i64`), which the content hash and the
//! "integer means integer" rule of the validator both need.

use std::fmt::Write as _;

/// A JSON-like value that keeps what a Histos engine must distinguish.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `null` (YAML `~`, `null`, empty).
    Null,
    /// `true` / `false` (YAML only `true/True/TRUE/false/False/FALSE`).
    Bool(bool),
    /// An integer that fits in 64 bits.
    Int(i64),
    /// An integer outside `i64`, as canonical decimal text (optional `-`, no leading zeros).
    BigInt(Box<str>),
    /// A float (may be non-finite when a document wrote `1e400` or YAML `.inf`).
    Float(f64),
    /// A string.
    Str(String),
    /// A list.
    List(Vec<Value>),
    /// A mapping with unique keys in document order.
    Map(Map),
    /// A YAML 1.1 timestamp (`2026-01-01`): not a JSON value, refused wherever it appears
    /// in a policy (HISTOS-ENGINE §3.5). Holds the source text.
    Timestamp(Box<str>),
}

/// Prefix marking a mapping key that was not a string in the source document (a YAML
/// `1:` key). Such a key never passes a name check (HISTOS-ENGINE §3.5).
pub const NON_STRING_KEY_PREFIX: char = '\u{0}';

/// String equality without a `memcmp` call for short names (hot-path lookups): names
/// of up to 16 bytes are compared as two overlapping machine words.
#[inline(always)]
pub(crate) fn fast_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let n = a.len();
    if n != b.len() {
        return false;
    }
    #[inline(always)]
    fn w8(s: &[u8], at: usize) -> u64 {
        let mut x = [0u8; 8];
        x.copy_from_slice(&s[at..at + 8]);
        u64::from_ne_bytes(x)
    }
    #[inline(always)]
    fn w4(s: &[u8], at: usize) -> u32 {
        let mut x = [0u8; 4];
        x.copy_from_slice(&s[at..at + 4]);
        u32::from_ne_bytes(x)
    }
    match n {
        0 => true,
        1..=3 => a == b,
        4..=8 => w4(a, 0) == w4(b, 0) && w4(a, n - 4) == w4(b, n - 4),
        9..=16 => w8(a, 0) == w8(b, 0) && w8(a, n - 8) == w8(b, n - 8),
        _ => a == b,
    }
}

/// An ordered mapping with unique keys (document or call order is kept).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Map {
    entries: Vec<(String, Value)>,
}

impl Map {
    /// An empty mapping.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the mapping is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The value under `key` (linear scan: mappings here are small).
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.entries
            .iter()
            .find(|(k, _)| fast_eq(k, key))
            .map(|(_, v)| v)
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Sets `key`: replaces in place when present, appends otherwise (Python dict semantics).
    pub fn insert(&mut self, key: impl Into<String>, value: Value) {
        let key = key.into();
        if let Some(slot) = self.entries.iter_mut().find(|(k, _)| *k == key) {
            slot.1 = value;
        } else {
            self.entries.push((key, value));
        }
    }

    /// Appends without a duplicate check (the caller has checked).
    pub(crate) fn push_unchecked(&mut self, key: String, value: Value) {
        self.entries.push((key, value));
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        let pos = self.entries.iter().position(|(k, _)| k == key)?;
        Some(self.entries.remove(pos).1)
    }

    /// Entries in order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    /// Mutable entries in order.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&String, &mut Value)> {
        self.entries.iter_mut().map(|(k, v)| (&*k, v))
    }

    /// Keys in order.
    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.entries.iter().map(|(k, _)| k)
    }

    /// Keeps only the entries for which `f` returns true.
    pub fn retain(&mut self, mut f: impl FnMut(&str, &Value) -> bool) {
        self.entries.retain(|(k, v)| f(k, v));
    }
}

impl FromIterator<(String, Value)> for Map {
    fn from_iter<T: IntoIterator<Item = (String, Value)>>(iter: T) -> Self {
        let mut m = Map::new();
        for (k, v) in iter {
            m.insert(k, v);
        }
        m
    }
}

impl Value {
    /// Whether this is a number (int, big int or float; never a bool).
    pub fn is_number(&self) -> bool {
        matches!(self, Value::Int(_) | Value::BigInt(_) | Value::Float(_))
    }

    /// Whether this is an integer (never a bool or a float, even an integral one).
    pub fn is_integer(&self) -> bool {
        matches!(self, Value::Int(_) | Value::BigInt(_))
    }

    /// The string, when this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The mapping, when this is one.
    pub fn as_map(&self) -> Option<&Map> {
        match self {
            Value::Map(m) => Some(m),
            _ => None,
        }
    }

    /// The number as an `f64` (lossy for big integers), when this is one.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::BigInt(s) => s.parse::<f64>().ok(),
            Value::Float(f) => Some(*f),
            _ => None,
        }
    }

    /// A short type name for messages (`string`, `integer`, …).
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Int(_) | Value::BigInt(_) => "integer",
            Value::Float(_) => "number",
            Value::Str(_) => "string",
            Value::List(_) => "array",
            Value::Map(_) => "object",
            Value::Timestamp(_) => "timestamp",
        }
    }

    /// Python-equality (`==`) between two values: `1 == 1.0 == true`, deep for
    /// containers (HISTOS-ENGINE §4, `enum` membership).
    pub fn py_eq(&self, other: &Value) -> bool {
        use Value::*;
        match (self, other) {
            (Null, Null) => true,
            (Str(a), Str(b)) => a == b,
            (List(a), List(b)) => a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.py_eq(y)),
            (Map(a), Map(b)) => {
                a.len() == b.len() && a.iter().all(|(k, v)| b.get(k).is_some_and(|w| v.py_eq(w)))
            }
            (Timestamp(a), Timestamp(b)) => a == b,
            _ => match (num_of(self), num_of(other)) {
                (Some(a), Some(b)) => a.cmp_num(&b) == Some(std::cmp::Ordering::Equal),
                _ => false,
            },
        }
    }

    /// Python `str()` of a leaf, as the argument scan blob renders it (HISTOS-ENGINE §4:
    /// `True`, `None`, `1.0`, ints as digits). Containers are not leaves.
    pub(crate) fn write_py_str(&self, out: &mut String) {
        match self {
            Value::Null => out.push_str("None"),
            Value::Bool(true) => out.push_str("True"),
            Value::Bool(false) => out.push_str("False"),
            Value::Int(i) => push_int(*i, out),
            Value::BigInt(s) => out.push_str(s),
            Value::Float(f) => out.push_str(&py_float_repr(*f)),
            Value::Str(s) => out.push_str(s),
            Value::Timestamp(s) => out.push_str(s),
            Value::List(_) | Value::Map(_) => {}
        }
    }
}

/// Appends the decimal digits of `i` without the formatting machinery.
fn push_int(i: i64, out: &mut String) {
    let mut buf = [0u8; 20];
    let mut n = i.unsigned_abs();
    let mut pos = buf.len();
    loop {
        pos -= 1;
        buf[pos] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if i < 0 {
        out.push('-');
    }
    for &b in &buf[pos..] {
        out.push(b as char);
    }
}

/// A number view used for Python-faithful comparisons.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Num<'a> {
    Int(i64),
    Big(&'a str),
    Float(f64),
}

/// The number view of a value; bools count as 0/1 like Python.
pub(crate) fn num_of(v: &Value) -> Option<Num<'_>> {
    match v {
        Value::Bool(b) => Some(Num::Int(*b as i64)),
        Value::Int(i) => Some(Num::Int(*i)),
        Value::BigInt(s) => Some(Num::Big(s)),
        Value::Float(f) => Some(Num::Float(*f)),
        _ => None,
    }
}

impl Num<'_> {
    /// Python ordering between numbers: exact between ints and floats; `None` with NaN.
    pub(crate) fn cmp_num(&self, other: &Num<'_>) -> Option<std::cmp::Ordering> {
        use std::cmp::Ordering;
        match (*self, *other) {
            (Num::Int(a), Num::Int(b)) => Some(a.cmp(&b)),
            (Num::Float(a), Num::Float(b)) => a.partial_cmp(&b),
            (Num::Int(a), Num::Float(b)) => cmp_int_float(a as i128, b),
            (Num::Float(a), Num::Int(b)) => cmp_int_float(b as i128, a).map(Ordering::reverse),
            (Num::Big(a), Num::Big(b)) => Some(cmp_big(a, b)),
            (Num::Big(a), Num::Int(_)) => Some(if a.starts_with('-') {
                Ordering::Less
            } else {
                Ordering::Greater
            }),
            (Num::Int(_), Num::Big(b)) => Some(if b.starts_with('-') {
                Ordering::Greater
            } else {
                Ordering::Less
            }),
            (Num::Big(a), Num::Float(b)) => a.parse::<f64>().ok()?.partial_cmp(&b),
            (Num::Float(a), Num::Big(b)) => a.partial_cmp(&b.parse::<f64>().ok()?),
        }
    }
}

fn cmp_big(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let (na, nb) = (a.starts_with('-'), b.starts_with('-'));
    match (na, nb) {
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        _ => {
            let (da, db) = (a.trim_start_matches('-'), b.trim_start_matches('-'));
            let mag = da.len().cmp(&db.len()).then_with(|| da.cmp(db));
            if na { mag.reverse() } else { mag }
        }
    }
}

fn cmp_int_float(i: i128, f: f64) -> Option<std::cmp::Ordering> {
    use std::cmp::Ordering;
    if f.is_nan() {
        return None;
    }
    if f >= 1.8e19 {
        return Some(Ordering::Less);
    }
    if f <= -1.8e19 {
        return Some(Ordering::Greater);
    }
    let t = f.trunc();
    let ti = t as i128;
    match i.cmp(&ti) {
        Ordering::Equal => {
            let frac = f - t;
            Some(if frac > 0.0 {
                Ordering::Less
            } else if frac < 0.0 {
                Ordering::Greater
            } else {
                Ordering::Equal
            })
        }
        o => Some(o),
    }
}

/// Python `repr()` of a float: shortest round-trip digits, positional for
/// `1e-4 <= |x| < 1e16`, else `d.ddde±XX` (HISTOS-ENGINE §3.3).
pub(crate) fn py_float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if f == 0.0 {
        return if f.is_sign_negative() {
            "-0.0".into()
        } else {
            "0.0".into()
        };
    }
    let sci = format!("{f:e}");
    let (mant, exp) = match sci.split_once('e') {
        Some((m, e)) => (m.to_string(), e.parse::<i32>().unwrap_or(0)),
        None => (sci.clone(), 0),
    };
    if (-4..16).contains(&exp) {
        let s = format!("{f}");
        if s.contains('.') { s } else { format!("{s}.0") }
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mant}e{sign}{:02}", exp.abs())
    }
}

/// Canonical decimal text of a number for the content hash (HISTOS-ENGINE §3.3):
/// integers as exact digits, integral floats as the exact integer value of the double,
/// others as Python `repr`.
pub(crate) fn canonical_number(v: &Value) -> Option<String> {
    match v {
        Value::Int(i) => Some(i.to_string()),
        Value::BigInt(s) => Some(s.to_string()),
        Value::Float(f) => {
            if !f.is_finite() {
                return Some(py_float_repr(*f));
            }
            if f.fract() == 0.0 {
                if f.abs() < 9.0e18 {
                    Some((*f as i64).to_string())
                } else {
                    Some(exact_integral_double(*f))
                }
            } else {
                Some(py_float_repr(*f))
            }
        }
        _ => None,
    }
}

/// Exact decimal text of an integral double (any magnitude).
fn exact_integral_double(f: f64) -> String {
    let bits = f.to_bits();
    let neg = bits >> 63 == 1;
    let exp = ((bits >> 52) & 0x7ff) as i32;
    let mant = if exp == 0 {
        (bits & ((1u64 << 52) - 1)) << 1
    } else {
        (bits & ((1u64 << 52) - 1)) | (1u64 << 52)
    };
    let shift = exp - 1075;
    // Little-endian base-1e9 limbs.
    let mut limbs: Vec<u64> = vec![
        mant % 1_000_000_000,
        mant / 1_000_000_000 % 1_000_000_000,
        mant / 1_000_000_000_000_000_000,
    ];
    if shift < 0 {
        // Integral double with a negative shift: divide exactly.
        let v = mant >> (-shift);
        return format!("{}{}", if neg { "-" } else { "" }, v);
    }
    for _ in 0..shift {
        let mut carry = 0u64;
        for l in limbs.iter_mut() {
            let x = *l * 2 + carry;
            *l = x % 1_000_000_000;
            carry = x / 1_000_000_000;
        }
        if carry > 0 {
            limbs.push(carry);
        }
    }
    while limbs.len() > 1 && limbs.last() == Some(&0) {
        limbs.pop();
    }
    let mut s = String::new();
    if neg {
        s.push('-');
    }
    let mut it = limbs.iter().rev();
    if let Some(first) = it.next() {
        let _ = write!(s, "{first}");
    }
    for l in it {
        let _ = write!(s, "{l:09}");
    }
    s
}

impl From<serde_json::Value> for Value {
    fn from(v: serde_json::Value) -> Self {
        match v {
            serde_json::Value::Null => Value::Null,
            serde_json::Value::Bool(b) => Value::Bool(b),
            serde_json::Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    Value::Int(i)
                } else if let Some(u) = n.as_u64() {
                    Value::BigInt(u.to_string().into())
                } else {
                    Value::Float(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            serde_json::Value::String(s) => Value::Str(s),
            serde_json::Value::Array(a) => Value::List(a.into_iter().map(Value::from).collect()),
            serde_json::Value::Object(o) => {
                Value::Map(o.into_iter().map(|(k, v)| (k, Value::from(v))).collect())
            }
        }
    }
}

impl From<&Value> for serde_json::Value {
    fn from(v: &Value) -> Self {
        match v {
            Value::Null => serde_json::Value::Null,
            Value::Bool(b) => serde_json::Value::Bool(*b),
            Value::Int(i) => serde_json::Value::from(*i),
            Value::BigInt(s) => s
                .parse::<u64>()
                .map(serde_json::Value::from)
                .unwrap_or_else(|_| serde_json::Value::String(s.to_string())),
            Value::Float(f) => serde_json::Number::from_f64(*f)
                .map(serde_json::Value::Number)
                .unwrap_or(serde_json::Value::Null),
            Value::Str(s) => serde_json::Value::String(s.clone()),
            Value::Timestamp(s) => serde_json::Value::String(s.to_string()),
            Value::List(l) => serde_json::Value::Array(l.iter().map(Into::into).collect()),
            Value::Map(m) => {
                serde_json::Value::Object(m.iter().map(|(k, v)| (k.clone(), v.into())).collect())
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn float_repr_matches_python() {
        assert_eq!(py_float_repr(1e-5), "1e-05");
        assert_eq!(py_float_repr(1.5e-7), "1.5e-07");
        assert_eq!(py_float_repr(0.5), "0.5");
        assert_eq!(py_float_repr(0.0001), "0.0001");
        assert_eq!(py_float_repr(123.456), "123.456");
        assert_eq!(py_float_repr(1.0), "1.0");
    }

    #[test]
    fn canonical_numbers() {
        assert_eq!(
            canonical_number(&Value::Float(500.0)).as_deref(),
            Some("500")
        );
        assert_eq!(canonical_number(&Value::Float(-0.0)).as_deref(), Some("0"));
        assert_eq!(
            canonical_number(&Value::Float(1e20)).as_deref(),
            Some("100000000000000000000")
        );
        assert_eq!(canonical_number(&Value::Int(5)).as_deref(), Some("5"));
        assert_eq!(canonical_number(&Value::Float(2.5)).as_deref(), Some("2.5"));
    }

    #[test]
    fn python_equality() {
        assert!(Value::Int(1).py_eq(&Value::Float(1.0)));
        assert!(Value::Int(1).py_eq(&Value::Bool(true)));
        assert!(!Value::Int(1).py_eq(&Value::Str("1".into())));
    }
}

#[cfg(test)]
mod fast_eq_tests {
    #[test]
    fn fast_eq_agrees_with_eq_at_every_length() {
        for n in 0..40 {
            let a: String = (0..n).map(|i| (b'a' + (i % 26) as u8) as char).collect();
            assert!(super::fast_eq(&a, &a.clone()));
            for k in 0..n {
                let mut b = a.clone().into_bytes();
                b[k] = b'#';
                let b = String::from_utf8(b).unwrap_or_default();
                assert!(!super::fast_eq(&a, &b), "{a} {b}");
            }
            assert!(!super::fast_eq(&a, &format!("{a}x")));
        }
    }
}
