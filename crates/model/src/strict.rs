//! Strict JSON reading: no repeated key, no unknown field, no wrong type, with line and
//! column on every error (RUNTIME §1.1, seeds §4 "validated strictly").
//!
//! `serde_json` keeps the last of two equal keys silently, in maps and in untyped values.
//! [`StrictMap`] and [`StrictValue`] refuse the repeat instead; struct fields already refuse
//! theirs (`duplicate field`), and `#[serde(deny_unknown_fields)]` on every struct refuses
//! unknown keys.

use indexmap::IndexMap;
use serde::de::{self, DeserializeOwned, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use std::borrow::Cow;
use std::fmt;

/// The code of a parse failure; the lint codes of RUNTIME §2 that parsing can raise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ParseCode {
    /// Not JSON, a trailing comma, a wrong type, a missing field.
    BadJson,
    /// The same key twice in one object.
    DuplicateKey,
    /// A key the format does not define.
    UnknownField,
    /// A land token other than `personal`, `brain`, `local`.
    BadLand,
    /// An operation other than `read`, `write`.
    BadOperation,
    /// A `version` (or `hcp` affinity) that is not `1`.
    BadVersion,
}

impl ParseCode {
    /// The code of the table ([`crate::code`]).
    pub fn code(self) -> crate::Code {
        use crate::Code;
        match self {
            Self::BadJson => Code::BadJson,
            Self::DuplicateKey => Code::DuplicateKey,
            Self::UnknownField => Code::UnknownField,
            Self::BadLand => Code::BadLand,
            Self::BadOperation => Code::BadOperation,
            Self::BadVersion => Code::BadVersion,
        }
    }

    /// The stable snake_case code.
    pub fn as_str(self) -> &'static str {
        self.code().as_str()
    }
}

impl fmt::Display for ParseCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A strict-parse failure: what, where (1-based line and column), and the JSON path of the
/// value that failed (`verbs.mail.send.privacy.land`; empty at the top level).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ParseError {
    /// The stable code.
    pub code: ParseCode,
    /// A lowercase message, user values in backticks.
    pub message: String,
    /// 1-based line of the failure (0 when unknown).
    pub line: usize,
    /// 1-based column of the failure (0 when unknown).
    pub column: usize,
    /// Dotted path of the failing value.
    pub path: String,
}

/// Parses `text` into `T`, refusing what [`ParseCode`] names.
///
/// # Errors
/// A [`ParseError`] for the first failure met.
pub fn parse_strict<T: DeserializeOwned>(text: &str) -> Result<T, ParseError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value: T = match serde_path_to_error::deserialize(&mut de) {
        Ok(v) => v,
        Err(e) => return Err(classify(&e.path().to_string(), e.inner())),
    };
    if let Err(e) = de.end() {
        return Err(classify("", &e));
    }
    Ok(value)
}

fn classify(path: &str, e: &serde_json::Error) -> ParseError {
    use serde_json::error::Category;
    let raw = e.to_string();
    // serde_json appends " at line L column C"; keep the message clean.
    let message = match raw.rfind(" at line ") {
        Some(i) => raw[..i].to_string(),
        None => raw.clone(),
    };
    // A segment the parser could not name (`?`: the key it was reading when the text
    // ended or broke) names nothing: the path stops before it.
    let path = match path.split('.').position(|s| s == "?" || s.is_empty()) {
        Some(0) => String::new(),
        Some(i) => path.split('.').take(i).collect::<Vec<_>>().join("."),
        None => path.to_string(),
    };
    let last = path.rsplit('.').next().unwrap_or("");
    let code = match e.classify() {
        Category::Syntax | Category::Eof | Category::Io => ParseCode::BadJson,
        Category::Data => {
            if message.starts_with("unknown field") {
                ParseCode::UnknownField
            } else if message.starts_with("duplicate field") || message.starts_with("duplicate key")
            {
                ParseCode::DuplicateKey
            } else if last == "land" {
                ParseCode::BadLand
            } else if last == "operation" {
                ParseCode::BadOperation
            } else if last == "version" || (last == "hcp" && !path.contains('.')) {
                ParseCode::BadVersion
            } else {
                ParseCode::BadJson
            }
        }
    };
    // Where the text is not JSON (or ends early), the line and column say where; a path
    // would only say how far the parser got.
    let message =
        if path.is_empty() || matches!(code, ParseCode::BadJson) && (e.is_syntax() || e.is_eof()) {
            message
        } else {
            format!("{message} (at `{path}`)")
        };
    ParseError {
        code,
        message: message.replace("duplicate field", "duplicate key"),
        line: e.line(),
        column: e.column(),
        path,
    }
}

/// A JSON object whose keys are unique, in document order. Deserializing refuses a repeated
/// key with `duplicate key `K``.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct StrictMap<V>(pub IndexMap<String, V>);

impl<V> Default for StrictMap<V> {
    fn default() -> Self {
        Self(IndexMap::new())
    }
}

impl<V> StrictMap<V> {
    /// The value under `key`.
    pub fn get(&self, key: &str) -> Option<&V> {
        self.0.get(key)
    }
    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }
    /// Entries in document order.
    pub fn iter(&self) -> indexmap::map::Iter<'_, String, V> {
        self.0.iter()
    }
    /// Keys in document order.
    pub fn keys(&self) -> indexmap::map::Keys<'_, String, V> {
        self.0.keys()
    }
    /// Number of entries.
    pub fn len(&self) -> usize {
        self.0.len()
    }
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<V> FromIterator<(String, V)> for StrictMap<V> {
    fn from_iter<I: IntoIterator<Item = (String, V)>>(iter: I) -> Self {
        Self(iter.into_iter().collect())
    }
}

impl<'a, V> IntoIterator for &'a StrictMap<V> {
    type Item = (&'a String, &'a V);
    type IntoIter = indexmap::map::Iter<'a, String, V>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for StrictMap<V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V_<V>(std::marker::PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for V_<V> {
            type Value = StrictMap<V>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = IndexMap::new();
                while let Some(key) = map.next_key::<String>()? {
                    if out.contains_key(&key) {
                        return Err(de::Error::custom(format!("duplicate key `{key}`")));
                    }
                    let value = map.next_value()?;
                    out.insert(key, value);
                }
                Ok(StrictMap(out))
            }
        }
        d.deserialize_map(V_(std::marker::PhantomData))
    }
}

impl<V: schemars::JsonSchema> schemars::JsonSchema for StrictMap<V> {
    fn schema_name() -> Cow<'static, str> {
        IndexMap::<String, V>::schema_name()
    }
    fn inline_schema() -> bool {
        true
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        IndexMap::<String, V>::json_schema(generator)
    }
}

/// Any JSON value, read with repeated keys refused at every depth.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(transparent)]
pub struct StrictValue(pub serde_json::Value);

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Vis;
        impl<'de> Visitor<'de> for Vis {
            type Value = StrictValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E>(self, v: bool) -> Result<StrictValue, E> {
                Ok(StrictValue(v.into()))
            }
            fn visit_i64<E>(self, v: i64) -> Result<StrictValue, E> {
                Ok(StrictValue(v.into()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<StrictValue, E> {
                Ok(StrictValue(v.into()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<StrictValue, E> {
                serde_json::Number::from_f64(v)
                    .map(|n| StrictValue(serde_json::Value::Number(n)))
                    .ok_or_else(|| E::custom("a number that is not finite"))
            }
            fn visit_str<E>(self, v: &str) -> Result<StrictValue, E> {
                Ok(StrictValue(v.into()))
            }
            fn visit_string<E>(self, v: String) -> Result<StrictValue, E> {
                Ok(StrictValue(v.into()))
            }
            fn visit_unit<E>(self) -> Result<StrictValue, E> {
                Ok(StrictValue(serde_json::Value::Null))
            }
            fn visit_none<E>(self) -> Result<StrictValue, E> {
                Ok(StrictValue(serde_json::Value::Null))
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<StrictValue, D::Error> {
                StrictValue::deserialize(d)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<StrictValue, A::Error> {
                let mut out = Vec::new();
                while let Some(StrictValue(v)) = seq.next_element()? {
                    out.push(v);
                }
                Ok(StrictValue(serde_json::Value::Array(out)))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StrictValue, A::Error> {
                let mut out = serde_json::Map::new();
                while let Some(key) = map.next_key::<String>()? {
                    if out.contains_key(&key) {
                        return Err(de::Error::custom(format!("duplicate key `{key}`")));
                    }
                    let StrictValue(v) = map.next_value()?;
                    out.insert(key, v);
                }
                Ok(StrictValue(serde_json::Value::Object(out)))
            }
        }
        d.deserialize_any(Vis)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct T {
        a: StrictMap<u32>,
        #[serde(default)]
        b: Option<StrictValue>,
    }

    #[test]
    fn repeated_key_in_map_is_refused_with_position() {
        let e = parse_strict::<T>("{\"a\": {\"x\": 1,\n \"x\": 2}}").unwrap_err();
        assert_eq!(e.code, ParseCode::DuplicateKey);
        assert_eq!((e.line, e.column), (2, 4));
        assert!(e.message.contains("duplicate key `x`"), "{}", e.message);
    }

    #[test]
    fn repeated_struct_field_is_duplicate_key() {
        let e = parse_strict::<T>("{\"a\": {}, \"a\": {}}").unwrap_err();
        assert_eq!(e.code, ParseCode::DuplicateKey);
    }

    #[test]
    fn repeated_key_deep_in_untyped_value() {
        let e =
            parse_strict::<T>("{\"a\": {}, \"b\": [{\"k\": {\"z\": 1, \"z\": 1}}]}").unwrap_err();
        assert_eq!(e.code, ParseCode::DuplicateKey);
    }

    #[test]
    fn unknown_field_and_trailing_comma() {
        let e = parse_strict::<T>("{\"a\": {}, \"c\": 1}").unwrap_err();
        assert_eq!(e.code, ParseCode::UnknownField);
        let e = parse_strict::<T>("{\"a\": {},}").unwrap_err();
        assert_eq!(e.code, ParseCode::BadJson);
        assert_eq!((e.line, e.column), (1, 10));
    }

    /// A text that ends early names no `?` path; serde's line and column are kept.
    #[test]
    fn a_text_that_ends_early_is_located_and_names_no_unknown_key() {
        for (text, at) in [
            ("{\"a\": {", (1, 7)),
            ("{", (1, 1)),
            ("{\"a\": {}, \"b\"", (1, 13)),
        ] {
            let e = parse_strict::<T>(text).unwrap_err();
            assert_eq!(e.code, ParseCode::BadJson, "{text}");
            assert!(!e.message.contains('?'), "{text}: {}", e.message);
            assert!(
                e.message.starts_with("EOF while parsing"),
                "{text}: {}",
                e.message
            );
            assert_eq!((e.line, e.column), at, "{text}");
            assert!(!e.path.contains('?'), "{text}: {}", e.path);
        }
    }

    #[test]
    fn trailing_garbage_is_refused() {
        let e = parse_strict::<T>("{\"a\": {}} x").unwrap_err();
        assert_eq!(e.code, ParseCode::BadJson);
    }
}
