//! A read-only view of a parsed policy document, so that one loader reads both of its
//! inputs without copying either: an owned [`Value`] tree (YAML, and documents a caller
//! has already parsed) and the JSON reader's [`Tape`](crate::json::Tape), whose strings
//! are borrowed from the source text (HISTOS-ENGINE §2, §3.5).

use crate::value::{Map, Value, fast_eq};

/// What a node is, with its scalar borrowed from the document.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Kind<'d> {
    Null,
    Bool(bool),
    Int(i64),
    /// An integer outside `i64`, as canonical decimal text.
    Big(&'d str),
    Float(f64),
    Str(&'d str),
    /// A YAML 1.1 timestamp (source text).
    Timestamp(&'d str),
    List,
    Map,
}

impl Kind<'_> {
    /// The number as an `f64` (lossy for big integers), when this is one.
    pub(crate) fn as_f64(self) -> Option<f64> {
        match self {
            Kind::Int(i) => Some(i as f64),
            Kind::Big(s) => s.parse::<f64>().ok(),
            Kind::Float(f) => Some(f),
            _ => None,
        }
    }
}

/// One node of a document. Mapping keys are unique (both readers refuse duplicates) and
/// keep document order; a key that was not a string in the source starts with
/// [`NON_STRING_KEY_PREFIX`](crate::value::NON_STRING_KEY_PREFIX).
pub(crate) trait Node<'d>: Copy {
    /// What this node is.
    fn kind(self) -> Kind<'d>;
    /// Entries of a mapping in document order (empty for anything else).
    fn entries(self) -> impl Iterator<Item = (&'d str, Self)>;
    /// Elements of a list in order (empty for anything else).
    fn items(self) -> impl Iterator<Item = Self>;
    /// Number of entries of a mapping or elements of a list.
    fn len(self) -> usize;
    /// An owned copy (for the values a policy keeps: `enum`, bounds, `where` values).
    fn to_value(self) -> Value;

    /// The value under `key` of a mapping.
    fn get(self, key: &str) -> Option<Self> {
        self.entries()
            .find(|(k, _)| fast_eq(k, key))
            .map(|(_, v)| v)
    }

    /// Whether a mapping holds `key`.
    fn contains_key(self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// `Some(self)` when this is a mapping.
    fn map(self) -> Option<Self> {
        (self.kind() == Kind::Map).then_some(self)
    }

    /// The string, when this is one.
    fn str(self) -> Option<&'d str> {
        match self.kind() {
            Kind::Str(s) => Some(s),
            _ => None,
        }
    }
}

impl<'d> Node<'d> for &'d Value {
    #[inline]
    fn kind(self) -> Kind<'d> {
        match self {
            Value::Null => Kind::Null,
            Value::Bool(b) => Kind::Bool(*b),
            Value::Int(i) => Kind::Int(*i),
            Value::BigInt(s) => Kind::Big(s),
            Value::Float(f) => Kind::Float(*f),
            Value::Str(s) => Kind::Str(s),
            Value::Timestamp(s) => Kind::Timestamp(s),
            Value::List(_) => Kind::List,
            Value::Map(_) => Kind::Map,
        }
    }

    fn entries(self) -> impl Iterator<Item = (&'d str, Self)> {
        let m: Option<&'d Map> = match self {
            Value::Map(m) => Some(m),
            _ => None,
        };
        m.into_iter()
            .flat_map(Map::iter)
            .map(|(k, v)| (k.as_str(), v))
    }

    fn items(self) -> impl Iterator<Item = Self> {
        match self {
            Value::List(l) => l.iter(),
            _ => [].iter(),
        }
    }

    fn len(self) -> usize {
        match self {
            Value::List(l) => l.len(),
            Value::Map(m) => m.len(),
            _ => 0,
        }
    }

    fn to_value(self) -> Value {
        self.clone()
    }

    #[inline]
    fn get(self, key: &str) -> Option<Self> {
        match self {
            Value::Map(m) => m.get(key),
            _ => None,
        }
    }
}
