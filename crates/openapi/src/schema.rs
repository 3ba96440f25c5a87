//! The part of a JSON Schema (OpenAPI 3.0's dialect and 3.1's JSON Schema 2020-12) that
//! hcp enforces on arguments before anything is sent: types, `enum`/`const`, numeric
//! bounds, string lengths and `pattern`, array items and sizes, object properties, and
//! `allOf`/`anyOf`/`oneOf` of these.
//!
//! What it does not check, and so lets through to the server: `format`, `not`,
//! `if`/`then`/`else`, `dependentSchemas`, `patternProperties`, `additionalProperties`
//! given as a schema, and anything nested deeper than [`MAX_DEPTH`] levels below an
//! argument (recursive schemas such as trees end there).

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

impl Schema {
    /// Whether a value of type `t` can satisfy the schema's own `type` (not its
    /// combinators).
    pub fn admits(&self, t: JsonType) -> bool {
        self.types.is_empty()
            || self.types.contains(&t)
            || (t == JsonType::Integer && self.types.contains(&JsonType::Number))
    }

    /// The text of the types for messages: `integer`, `string or null`, `any value`.
    pub fn type_text(&self) -> String {
        if self.types.is_empty() {
            return "any value".into();
        }
        let names: Vec<&str> = self.types.iter().map(|t| t.as_str()).collect();
        names.join(" or ")
    }

    /// A value as the CLI face gives it (always a string) turned into the type the schema
    /// wants: `"5"` for an integer, `"true"` for a boolean, JSON text for an array or an
    /// object. A string stays a string when the schema admits strings; what does not
    /// parse stays as it was, for [`Schema::check`] to refuse.
    pub fn coerce(&self, v: Value) -> Value {
        let Value::String(s) = &v else { return v };
        if self.admits(JsonType::String) {
            return v;
        }
        for t in &self.types {
            let parsed = match t {
                JsonType::Integer | JsonType::Number => serde_json::from_str::<Value>(s.trim())
                    .ok()
                    .filter(Value::is_number),
                JsonType::Boolean => match s.as_str() {
                    "true" => Some(Value::Bool(true)),
                    "false" => Some(Value::Bool(false)),
                    _ => None,
                },
                JsonType::Array => serde_json::from_str::<Value>(s)
                    .ok()
                    .filter(Value::is_array),
                JsonType::Object => serde_json::from_str::<Value>(s)
                    .ok()
                    .filter(Value::is_object),
                JsonType::Null => (s == "null").then_some(Value::Null),
                JsonType::String => None,
            };
            if let Some(p) = parsed
                && t.holds(&p)
            {
                return p;
            }
        }
        v
    }

    /// Checks `v` against the schema.
    ///
    /// # Errors
    /// Why it does not hold, lowercase, naming the rule and never quoting a string value
    /// (the path within the argument first, as `items/2: …`, when it is deeper).
    pub fn check(&self, v: &Value) -> Result<(), String> {
        self.check_at(v, "")
    }

    fn check_at(&self, v: &Value, at: &str) -> Result<(), String> {
        let fail = |why: String| {
            if at.is_empty() {
                Err(why)
            } else {
                Err(format!("{}: {why}", at.trim_start_matches('/')))
            }
        };
        if !self.types.is_empty() && !self.types.iter().any(|t| t.holds(v)) {
            return fail(format!("must be {}", article(&self.type_text())));
        }
        if let Some(e) = &self.enumeration
            && !e.iter().any(|x| same(x, v))
        {
            let shown: Vec<String> = e.iter().take(12).map(Value::to_string).collect();
            let more = if e.len() > 12 { ", …" } else { "" };
            return fail(if e.is_empty() {
                "no value is allowed".into()
            } else {
                format!("must be one of {}{more}", shown.join(", "))
            });
        }
        match v {
            Value::Number(n) => {
                let Some(x) = n.as_f64() else {
                    return Ok(());
                };
                if let Some(m) = self.minimum
                    && (x < m || (self.exclusive_minimum && x == m))
                {
                    let op = if self.exclusive_minimum { ">" } else { "≥" };
                    return fail(format!("must be {op} {m}"));
                }
                if let Some(m) = self.maximum
                    && (x > m || (self.exclusive_maximum && x == m))
                {
                    let op = if self.exclusive_maximum { "<" } else { "≤" };
                    return fail(format!("must be {op} {m}"));
                }
                if let Some(m) = self.multiple_of
                    && ((x / m) - (x / m).round()).abs() > 1e-9
                {
                    return fail(format!("must be a multiple of {m}"));
                }
            }
            Value::String(s) => {
                let len = s.chars().count() as u64;
                if let Some(m) = self.min_length
                    && len < m
                {
                    return fail(format!("must be at least {m} characters long"));
                }
                if let Some(m) = self.max_length
                    && len > m
                {
                    return fail(format!("must be at most {m} characters long"));
                }
                if let Some(p) = &self.pattern {
                    let ok = fancy_regex::Regex::new(p)
                        .ok()
                        .and_then(|r| r.is_match(s).ok())
                        .unwrap_or(false);
                    if !ok {
                        return fail(format!("must match the pattern `{}`", shorten(p)));
                    }
                }
            }
            Value::Array(a) => {
                let n = a.len() as u64;
                if let Some(m) = self.min_items
                    && n < m
                {
                    return fail(format!("must have at least {m} items"));
                }
                if let Some(m) = self.max_items
                    && n > m
                {
                    return fail(format!("must have at most {m} items"));
                }
                if self.unique_items {
                    for (i, x) in a.iter().enumerate() {
                        if a[..i].iter().any(|y| same(x, y)) {
                            return fail(format!("item {i} repeats an earlier item"));
                        }
                    }
                }
                if let Some(items) = &self.items {
                    for (i, x) in a.iter().enumerate() {
                        items.check_at(x, &format!("{at}/{i}"))?;
                    }
                }
            }
            Value::Object(o) => {
                for r in &self.required {
                    if !o.contains_key(r) {
                        return fail(format!("lacks the required property `{}`", shorten(r)));
                    }
                }
                for (k, x) in o {
                    match self.properties.iter().find(|(n, _)| n == k) {
                        Some((_, ps)) => ps.check_at(x, &format!("{at}/{k}"))?,
                        None if self.closed => {
                            return fail(format!("has the unknown property `{}`", shorten(k)));
                        }
                        None => {}
                    }
                }
            }
            _ => {}
        }
        for s in &self.all_of {
            s.check_at(v, at)?;
        }
        if !self.any_of.is_empty() && !self.any_of.iter().any(|s| s.check_at(v, at).is_ok()) {
            return fail("matches none of the `anyOf` alternatives".into());
        }
        if !self.one_of.is_empty() {
            let n = self
                .one_of
                .iter()
                .filter(|s| s.check_at(v, at).is_ok())
                .count();
            if n != 1 {
                return fail(format!(
                    "must match exactly one of the `oneOf` alternatives (it matches {n})"
                ));
            }
        }
        Ok(())
    }

    /// The schema as JSON Schema 2020-12 (what `hcp mcp` shows as a property of
    /// `inputSchema`): 3.0's `nullable` becomes a `null` type, bounds are numeric.
    pub fn to_json_schema(&self) -> Value {
        let mut o = Map::new();
        match self.types.as_slice() {
            [] => {}
            [t] => {
                o.insert("type".into(), t.as_str().into());
            }
            ts => {
                o.insert(
                    "type".into(),
                    ts.iter().map(|t| Value::from(t.as_str())).collect(),
                );
            }
        }
        if let Some(d) = &self.description {
            o.insert("description".into(), d.clone().into());
        }
        if let Some(e) = &self.enumeration {
            o.insert("enum".into(), Value::Array(e.clone()));
        }
        let number = |f: f64| {
            if f.fract() == 0.0 && f.abs() < 9.0e15 {
                Value::from(f as i64)
            } else {
                serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
            }
        };
        if let Some(m) = self.minimum {
            let k = if self.exclusive_minimum {
                "exclusiveMinimum"
            } else {
                "minimum"
            };
            o.insert(k.into(), number(m));
        }
        if let Some(m) = self.maximum {
            let k = if self.exclusive_maximum {
                "exclusiveMaximum"
            } else {
                "maximum"
            };
            o.insert(k.into(), number(m));
        }
        if let Some(m) = self.multiple_of {
            o.insert("multipleOf".into(), number(m));
        }
        for (k, v) in [
            ("minLength", self.min_length),
            ("maxLength", self.max_length),
            ("minItems", self.min_items),
            ("maxItems", self.max_items),
        ] {
            if let Some(v) = v {
                o.insert(k.into(), v.into());
            }
        }
        if self.unique_items {
            o.insert("uniqueItems".into(), true.into());
        }
        if let Some(p) = &self.pattern {
            o.insert("pattern".into(), p.clone().into());
        }
        if let Some(f) = &self.format {
            o.insert("format".into(), f.clone().into());
        }
        if let Some(d) = &self.default {
            o.insert("default".into(), d.clone());
        }
        if let Some(i) = &self.items {
            o.insert("items".into(), i.to_json_schema());
        }
        if !self.properties.is_empty() {
            let props: Map<String, Value> = self
                .properties
                .iter()
                .map(|(k, s)| (k.clone(), s.to_json_schema()))
                .collect();
            o.insert("properties".into(), Value::Object(props));
        }
        if !self.required.is_empty() {
            o.insert(
                "required".into(),
                self.required
                    .iter()
                    .map(|r| Value::from(r.as_str()))
                    .collect(),
            );
        }
        if self.closed {
            o.insert("additionalProperties".into(), false.into());
        }
        for (k, list) in [
            ("allOf", &self.all_of),
            ("anyOf", &self.any_of),
            ("oneOf", &self.one_of),
        ] {
            if !list.is_empty() {
                o.insert(k.into(), list.iter().map(Schema::to_json_schema).collect());
            }
        }
        Value::Object(o)
    }
}

/// JSON equality with numbers compared by value (`1` equals `1.0`).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

fn article(t: &str) -> String {
    match t.chars().next() {
        Some('a' | 'e' | 'i' | 'o' | 'u') => format!("an {t}"),
        _ => format!("a {t}"),
    }
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
