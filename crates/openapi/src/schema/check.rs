//! What a compiled [`Schema`] does with a value: coercion of CLI text, the checks, and its
//! JSON Schema 2020-12 form.

use super::{JsonType, Schema};
use crate::pointer::shorten;
use serde_json::{Map, Value};

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
