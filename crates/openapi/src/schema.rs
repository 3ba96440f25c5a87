//! The part of a JSON Schema (OpenAPI 3.0's dialect and 3.1's JSON Schema 2020-12) that
//! hcp enforces on arguments before anything is sent: types, `enum`/`const`, numeric
//! bounds, string lengths and `pattern`, array items and sizes, object properties, and
//! `allOf`/`anyOf`/`oneOf` of these.
//!
//! What it does not check, and so lets through to the server: `format`, `not`,
//! `if`/`then`/`else`, `dependentSchemas`, `patternProperties`, `additionalProperties`
//! given as a schema, and anything nested deeper than [`MAX_DEPTH`] levels below an
//! argument (recursive schemas such as trees end there).

mod check;

use crate::error::BadOpenapi;
use crate::load::Version;
use crate::pointer::{self, join, shorten};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// How deep below an argument's own schema constraints are compiled; deeper values are
/// accepted as they are.
pub const MAX_DEPTH: usize = 8;

/// A JSON type name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JsonType {
    /// `"string"`.
    String,
    /// `"integer"`: a number without a fractional part.
    Integer,
    /// `"number"`.
    Number,
    /// `"boolean"`.
    Boolean,
    /// `"array"`.
    Array,
    /// `"object"`.
    Object,
    /// `"null"`.
    Null,
}

impl JsonType {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "string" => Self::String,
            "integer" => Self::Integer,
            "number" => Self::Number,
            "boolean" => Self::Boolean,
            "array" => Self::Array,
            "object" => Self::Object,
            "null" => Self::Null,
            _ => return None,
        })
    }

    /// The type name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::String => "string",
            Self::Integer => "integer",
            Self::Number => "number",
            Self::Boolean => "boolean",
            Self::Array => "array",
            Self::Object => "object",
            Self::Null => "null",
        }
    }

    fn holds(self, v: &Value) -> bool {
        match (self, v) {
            (Self::String, Value::String(_))
            | (Self::Boolean, Value::Bool(_))
            | (Self::Array, Value::Array(_))
            | (Self::Object, Value::Object(_))
            | (Self::Null, Value::Null)
            | (Self::Number, Value::Number(_)) => true,
            (Self::Integer, Value::Number(n)) => {
                n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            _ => false,
        }
    }
}

/// A compiled schema. An empty [`Schema::types`] accepts every type.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Schema {
    /// Allowed types (`null` included when the schema is nullable); empty: any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub types: Vec<JsonType>,
    /// `enum` (or `const` as a one-element enum).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enumeration: Option<Vec<Value>>,
    /// Lower bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum: Option<f64>,
    /// Whether [`Schema::minimum`] itself is excluded.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exclusive_minimum: bool,
    /// Upper bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maximum: Option<f64>,
    /// Whether [`Schema::maximum`] itself is excluded.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exclusive_maximum: bool,
    /// `multipleOf`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multiple_of: Option<f64>,
    /// Least length of a string, in Unicode scalar values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_length: Option<u64>,
    /// Greatest length of a string, in Unicode scalar values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_length: Option<u64>,
    /// A regular expression a string must contain a match of (unanchored, as JSON
    /// Schema says), in the syntax of `fancy-regex` (ECMA 262 features such as
    /// look-ahead included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// `format`, informative only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// Schema of each array item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<Box<Schema>>,
    /// Least number of items.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_items: Option<u64>,
    /// Greatest number of items.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_items: Option<u64>,
    /// Whether items must be distinct.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unique_items: bool,
    /// Object properties, sorted by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub properties: Vec<(String, Schema)>,
    /// Required property names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required: Vec<String>,
    /// `additionalProperties: false`: no property beyond [`Schema::properties`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub closed: bool,
    /// Every one must hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub all_of: Vec<Schema>,
    /// At least one must hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub any_of: Vec<Schema>,
    /// Exactly one must hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub one_of: Vec<Schema>,
    /// `readOnly`: a request never carries it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
    /// `description`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `default`, informative (hcp sends nothing for an absent argument).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
}

fn num(o: &Map<String, Value>, k: &str, at: &str) -> Result<Option<f64>, BadOpenapi> {
    match o.get(k) {
        None => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_f64()),
        Some(_) => Err(BadOpenapi::at(
            join(at, k),
            format!("`{k}` is not a number"),
        )),
    }
}

fn count(o: &Map<String, Value>, k: &str, at: &str) -> Result<Option<u64>, BadOpenapi> {
    match o.get(k) {
        None => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| BadOpenapi::at(join(at, k), format!("`{k}` is not a count"))),
    }
}

/// Compiles the schema `v` found at `at`.
///
/// # Errors
/// [`BadOpenapi`] for a `$ref` that fails, a `type` hcp does not know, a bound that is not
/// a number, a `pattern` that does not compile.
pub(crate) fn compile(
    doc: &Value,
    v: &Value,
    at: &str,
    version: Version,
    depth: usize,
) -> Result<Schema, BadOpenapi> {
    if depth > MAX_DEPTH {
        return Ok(Schema::default());
    }
    let (v, at) = pointer::resolve(doc, v, at)?;
    let o = match v {
        Value::Object(o) => o,
        Value::Bool(true) => return Ok(Schema::default()),
        Value::Bool(false) => {
            return Ok(Schema {
                enumeration: Some(Vec::new()),
                ..Schema::default()
            });
        }
        _ => return Err(BadOpenapi::at(at, "a schema is not an object")),
    };
    let mut s = Schema::default();
    match o.get("type") {
        None => {}
        Some(Value::String(t)) => s.types.push(type_name(t, &join(&at, "type"))?),
        Some(Value::Array(ts)) => {
            for (i, t) in ts.iter().enumerate() {
                let t_at = format!("{}/{i}", join(&at, "type"));
                let t = t
                    .as_str()
                    .ok_or_else(|| BadOpenapi::at(t_at.clone(), "a type is not a string"))?;
                s.types.push(type_name(t, &t_at)?);
            }
        }
        Some(_) => return Err(BadOpenapi::at(join(&at, "type"), "`type` is not a string")),
    }
    if o.get("nullable") == Some(&Value::Bool(true)) && !s.types.is_empty() {
        s.types.push(JsonType::Null);
    }
    s.types.sort();
    s.types.dedup();
    if let Some(e) = o.get("enum") {
        let Some(e) = e.as_array() else {
            return Err(BadOpenapi::at(join(&at, "enum"), "`enum` is not an array"));
        };
        let mut e = e.clone();
        // 3.0: `nullable: true` admits null even when the enum does not list it.
        if s.types.contains(&JsonType::Null) && !e.contains(&Value::Null) {
            e.push(Value::Null);
        }
        s.enumeration = Some(e);
    }
    if let Some(c) = o.get("const") {
        s.enumeration = Some(vec![c.clone()]);
    }
    s.minimum = num(o, "minimum", &at)?;
    s.maximum = num(o, "maximum", &at)?;
    for (key, bound, flag) in [
        ("exclusiveMinimum", &mut s.minimum, &mut s.exclusive_minimum),
        ("exclusiveMaximum", &mut s.maximum, &mut s.exclusive_maximum),
    ] {
        match (o.get(key), version) {
            (None, _) => {}
            (Some(Value::Bool(b)), _) => *flag = *b && bound.is_some(),
            (Some(Value::Number(n)), _) => {
                let n = n.as_f64();
                // Both `minimum` and a numeric `exclusiveMinimum`: the tighter one holds.
                let tighter = match (*bound, n) {
                    (Some(b), Some(n)) => {
                        if key == "exclusiveMinimum" {
                            n >= b
                        } else {
                            n <= b
                        }
                    }
                    _ => true,
                };
                if tighter {
                    *bound = n;
                    *flag = true;
                }
            }
            (Some(_), _) => {
                return Err(BadOpenapi::at(
                    join(&at, key),
                    format!("`{key}` is not a number or a boolean"),
                ));
            }
        }
    }
    s.multiple_of = num(o, "multipleOf", &at)?.filter(|m| *m > 0.0);
    s.min_length = count(o, "minLength", &at)?;
    s.max_length = count(o, "maxLength", &at)?;
    s.min_items = count(o, "minItems", &at)?;
    s.max_items = count(o, "maxItems", &at)?;
    s.unique_items = o.get("uniqueItems") == Some(&Value::Bool(true));
    if let Some(p) = o.get("pattern") {
        let p_at = join(&at, "pattern");
        let Some(p) = p.as_str() else {
            return Err(BadOpenapi::at(p_at, "`pattern` is not a string"));
        };
        fancy_regex::Regex::new(p).map_err(|e| {
            BadOpenapi::at(
                p_at,
                format!("`pattern` `{}` does not compile: {e}", shorten(p)),
            )
        })?;
        s.pattern = Some(p.to_owned());
    }
    s.format = o.get("format").and_then(Value::as_str).map(str::to_owned);
    s.description = o
        .get("description")
        .or_else(|| o.get("title"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    s.default = o.get("default").cloned();
    s.read_only = o.get("readOnly") == Some(&Value::Bool(true));
    if let Some(items) = o.get("items") {
        s.items = Some(Box::new(compile(
            doc,
            items,
            &join(&at, "items"),
            version,
            depth + 1,
        )?));
    }
    if let Some(props) = o.get("properties") {
        let p_at = join(&at, "properties");
        let Some(props) = props.as_object() else {
            return Err(BadOpenapi::at(p_at, "`properties` is not an object"));
        };
        for (name, ps) in props {
            let ps = compile(doc, ps, &join(&p_at, name), version, depth + 1)?;
            s.properties.push((name.clone(), ps));
        }
    }
    if let Some(req) = o.get("required") {
        let Some(req) = req.as_array() else {
            return Err(BadOpenapi::at(
                join(&at, "required"),
                "`required` is not an array",
            ));
        };
        s.required = req
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect();
    }
    s.closed = o.get("additionalProperties") == Some(&Value::Bool(false));
    for (key, out) in [
        ("allOf", &mut s.all_of),
        ("anyOf", &mut s.any_of),
        ("oneOf", &mut s.one_of),
    ] {
        let Some(list) = o.get(key) else { continue };
        let l_at = join(&at, key);
        let Some(list) = list.as_array() else {
            return Err(BadOpenapi::at(l_at, format!("`{key}` is not an array")));
        };
        for (i, sub) in list.iter().enumerate() {
            out.push(compile(
                doc,
                sub,
                &format!("{l_at}/{i}"),
                version,
                depth + 1,
            )?);
        }
    }
    Ok(s)
}

fn type_name(t: &str, at: &str) -> Result<JsonType, BadOpenapi> {
    JsonType::parse(t).ok_or_else(|| BadOpenapi::at(at, format!("unknown type `{}`", shorten(t))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn c(v: Value, version: Version) -> Schema {
        compile(&json!({}), &v, "/s", version, 0).unwrap()
    }

    #[test]
    fn dialects_3_0_and_3_1_compile_to_the_same_bounds() {
        let a = c(
            json!({"type": "integer", "minimum": 1, "exclusiveMinimum": true, "nullable": true}),
            Version::V3_0,
        );
        let b = c(
            json!({"type": ["integer", "null"], "exclusiveMinimum": 1}),
            Version::V3_1,
        );
        assert_eq!(a.types, b.types);
        assert_eq!((a.minimum, a.exclusive_minimum), (Some(1.0), true));
        assert_eq!((b.minimum, b.exclusive_minimum), (Some(1.0), true));
        assert_eq!(a.check(&json!(1)).unwrap_err(), "must be > 1");
        assert!(b.check(&json!(2)).is_ok() && b.check(&Value::Null).is_ok());
    }

    #[test]
    fn coerces_cli_text_and_checks_it() {
        let s = c(
            json!({"type": "integer", "minimum": 1, "maximum": 100}),
            Version::V3_1,
        );
        assert_eq!(s.coerce(json!("5")), json!(5));
        assert_eq!(
            s.check(&s.coerce(json!("500"))).unwrap_err(),
            "must be ≤ 100"
        );
        assert_eq!(
            s.check(&s.coerce(json!("five"))).unwrap_err(),
            "must be an integer"
        );
        let e = c(
            json!({"type": "string", "enum": ["open", "done"]}),
            Version::V3_0,
        );
        assert_eq!(
            e.check(&json!("later")).unwrap_err(),
            "must be one of \"open\", \"done\""
        );
        let p = c(
            json!({"type": "string", "pattern": "^[a-z](?=[a-z0-9-]*$)", "maxLength": 4}),
            Version::V3_1,
        );
        assert!(p.check(&json!("ab-1")).is_ok());
        assert!(p.check(&json!("Ab")).is_err());
        assert!(p.check(&json!("abcde")).is_err());
        let arr = c(
            json!({"type": "array", "items": {"type": "integer"}, "maxItems": 2}),
            Version::V3_1,
        );
        assert_eq!(arr.coerce(json!("[1,2]")), json!([1, 2]));
        assert_eq!(
            arr.check(&json!([1, "x"])).unwrap_err(),
            "1: must be an integer"
        );
    }

    #[test]
    fn shows_as_json_schema_2020_12() {
        let s = c(
            json!({"type": "number", "maximum": 10, "exclusiveMaximum": true, "nullable": true,
                   "description": "d"}),
            Version::V3_0,
        );
        assert_eq!(
            s.to_json_schema(),
            json!({"type": ["number", "null"], "exclusiveMaximum": 10, "description": "d"})
        );
    }
}
