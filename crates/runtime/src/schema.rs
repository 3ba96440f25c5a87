//! The JSON Schemas `hcp mcp` shows. A verb's arguments (RUNTIME §7, "Contracts from
//! packs"; the `inputSchema`): every placeholder a string, the required ones required,
//! `confirm` where the policy asks for it, closed; narrowed by the runtime policy's
//! argument contract where it has one for the tool. A tool's `outputSchema` (RUNTIME §10):
//! the runtime policy's `returns`, the reverse of the JSON Schema projection
//! ([`output_schema`]), and the check that a result fits it ([`conforms`]).

use serde_json::{Map, Value, json};

/// A JSON object.
pub type JsonObject = Map<String, Value>;

/// The `inputSchema` of a verb: each placeholder a string (what the child receives; a
/// number or boolean is accepted too and passed as its JSON text, as on the envelope face,
/// but a single `type` keeps the schema portable across model providers), the required
/// ones required, `confirm` (boolean) where the policy sets `confirm: true`, and nothing
/// else (`additionalProperties: false`).
pub fn input_schema(args: &[(String, bool)], confirm: bool) -> JsonObject {
    let mut props = JsonObject::new();
    let mut required = Vec::new();
    for (name, req) in args {
        props.insert(
            name.clone(),
            json!({
                "type": "string",
                "description": format!("fills `{{{{{name}}}}}` of the verb's command, as one argument")
            }),
        );
        if *req {
            required.push(Value::String(name.clone()));
        }
    }
    if confirm {
        props.insert("confirm".into(), confirm_property());
    }
    let mut schema = JsonObject::new();
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), Value::Object(props));
    if !required.is_empty() {
        schema.insert("required".into(), Value::Array(required));
    }
    schema.insert("additionalProperties".into(), json!(false));
    schema
}

/// The `inputSchema` of verb `verb_key` of `pack` (`confirm` where its policy sets it):
/// its placeholders ([`input_schema`]), or for a `kind: openapi` verb its operation's
/// parameters and body properties, typed and bounded by the document
/// (`hcp_openapi::Operation::input_schema`, from the pinned copy: RUNTIME §1.3). `None`
/// when the verb cannot be planned or its operation read.
pub fn verb_input_schema(
    pack: &hcp_store::pack::InstalledPack,
    verb_key: &str,
    confirm: bool,
) -> Option<JsonObject> {
    if pack.manifest.kind != hcp_model::Kind::Openapi {
        let plan = pack.manifest.plan_verb(verb_key).ok()?;
        return Some(input_schema(
            &hcp_model::manifest::arguments(&plan),
            confirm,
        ));
    }
    let op = hcp_store::pack::openapi::pinned_operation(pack, verb_key).ok()?;
    let Value::Object(mut schema) = op.input_schema() else {
        return None;
    };
    if confirm && let Some(Value::Object(props)) = schema.get_mut("properties") {
        props.insert("confirm".into(), confirm_property());
    }
    Some(schema)
}

fn confirm_property() -> Value {
    json!({
        "type": "boolean",
        "description": "true to run this write; without it the call is refused with `confirm required` (HCP §4.5)"
    })
}

/// Narrows a verb's input schema by the runtime policy's argument contract (HISTOS-ENGINE
/// §4) for the placeholders it declares: a scalar `type`, `enum`, string lengths, numeric
/// bounds, and `required` (a placeholder the contract requires becomes required). Patterns
/// are left out (Python `re` is not JSON Schema's dialect); fields that are not
/// placeholders are ignored (the verb cannot take them); the schema stays closed.
pub fn refine(schema: &mut JsonObject, contract: &histos::model::Schema) {
    use histos::model::FieldType;
    let mut newly_required = Vec::new();
    if let Some(Value::Object(props)) = schema.get_mut("properties") {
        for f in &contract.fields {
            let Some(Value::Object(prop)) = props.get_mut(&f.name) else {
                continue;
            };
            let ty = match f.ty {
                FieldType::String => Some("string"),
                FieldType::Integer => Some("integer"),
                FieldType::Number => Some("number"),
                FieldType::Boolean => Some("boolean"),
                _ => None,
            };
            if let Some(t) = ty {
                prop.insert("type".into(), json!(t));
            }
            if let Some(values) = &f.enum_values {
                prop.insert(
                    "enum".into(),
                    Value::Array(values.iter().map(Value::from).collect()),
                );
            }
            if f.ty == FieldType::String {
                if let Some(n) = f.min_length {
                    prop.insert("minLength".into(), json!(n));
                }
                if let Some(n) = f.max_length {
                    prop.insert("maxLength".into(), json!(n));
                }
            }
            for (key, v) in [
                ("minimum", &f.minimum),
                ("maximum", &f.maximum),
                ("exclusiveMinimum", &f.exclusive_minimum),
                ("exclusiveMaximum", &f.exclusive_maximum),
                ("multipleOf", &f.multiple_of),
            ] {
                if let Some(v) = v {
                    prop.insert(key.into(), Value::from(v));
                }
            }
            if f.required {
                newly_required.push(f.name.clone());
            }
        }
    }
    if newly_required.is_empty() {
        return;
    }
    let required = schema
        .entry("required")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(list) = required {
        for n in newly_required {
            if !list.iter().any(|v| v == n.as_str()) {
                list.push(Value::String(n));
            }
        }
    }
}

/// The JSON type of a contract field type; `None` for `any`.
fn json_type(t: histos::model::FieldType) -> Option<&'static str> {
    use histos::model::FieldType;
    Some(match t {
        FieldType::String => "string",
        FieldType::Integer => "integer",
        FieldType::Number => "number",
        FieldType::Boolean => "boolean",
        FieldType::Array => "array",
        FieldType::Object => "object",
        FieldType::Any => return None,
    })
}

/// What the post-gate puts in place of a sensitive field the principal may not view
/// (HISTOS-ENGINE §1e step 5).
pub const REDACTED_FIELD: &str = histos::post::REDACTED_FIELD;

/// The `outputSchema` of a tool whose runtime-policy contract has `returns`: the reverse
/// of the JSON Schema projection (`json-schema-projection-0.1.md`), so projecting it back
/// gives the same contract. Per field: `type` (`any`: none; `nullable`: `[T, "null"]`,
/// and `null` joins an `enum`), `enum`, `minLength`/`maxLength`, `minimum`, `maximum`,
/// `exclusiveMinimum`/`exclusiveMaximum`, `multipleOf`, `items` (`type`, `enum`),
/// `minItems`/`maxItems`/`uniqueItems`, `x-sensitive`; the required fields `required`;
/// `additionalProperties` as `$allow_extra` (closed by default). Two departures, both
/// describing what the client is sent: a `pattern` is left out (the policy's dialect is
/// Python's `re`, not JSON Schema's; the post-gate still enforces it under `strict`), and
/// a `sensitive` field whose class is not in the principal's `can_view` is the string the
/// post-gate puts in its place ([`REDACTED_FIELD`]).
pub fn output_schema(returns: &histos::model::Schema, can_view: &[String]) -> JsonObject {
    let mut props = JsonObject::new();
    let mut required = Vec::new();
    for f in &returns.fields {
        if f.required {
            required.push(Value::String(f.name.clone()));
        }
        let mut p = JsonObject::new();
        if let Some(class) = f.sensitive.map(histos::model::Sensitive::as_str) {
            p.insert("x-sensitive".into(), json!(class));
            if !can_view.iter().any(|c| c == class) {
                p.insert("type".into(), json!("string"));
                p.insert("const".into(), json!(REDACTED_FIELD));
                props.insert(f.name.clone(), Value::Object(p));
                continue;
            }
        }
        match (json_type(f.ty), f.nullable) {
            (Some(t), false) => p.insert("type".into(), json!(t)),
            (Some(t), true) => p.insert("type".into(), json!([t, "null"])),
            (None, _) => None,
        };
        if let Some(values) = &f.enum_values {
            let mut list: Vec<Value> = values.iter().map(Value::from).collect();
            if f.nullable && !list.contains(&Value::Null) {
                list.push(Value::Null);
            }
            p.insert("enum".into(), Value::Array(list));
        }
        for (key, n) in [
            ("minLength", f.min_length),
            ("maxLength", f.max_length),
            ("minItems", f.min_items),
            ("maxItems", f.max_items),
        ] {
            if let Some(n) = n {
                p.insert(key.into(), json!(n));
            }
        }
        if f.unique_items {
            p.insert("uniqueItems".into(), json!(true));
        }
        for (key, v) in [
            ("minimum", &f.minimum),
            ("maximum", &f.maximum),
            ("exclusiveMinimum", &f.exclusive_minimum),
            ("exclusiveMaximum", &f.exclusive_maximum),
            ("multipleOf", &f.multiple_of),
        ] {
            if let Some(v) = v {
                p.insert(key.into(), Value::from(v));
            }
        }
        let mut items = JsonObject::new();
        if let Some(t) = f.item_type.and_then(json_type) {
            items.insert("type".into(), json!(t));
        }
        if let Some(values) = &f.item_enum {
            items.insert(
                "enum".into(),
                Value::Array(values.iter().map(Value::from).collect()),
            );
        }
        if !items.is_empty() {
            p.insert("items".into(), Value::Object(items));
        }
        props.insert(f.name.clone(), Value::Object(p));
    }
    let mut schema = JsonObject::new();
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), Value::Object(props));
    if !required.is_empty() {
        schema.insert("required".into(), Value::Array(required));
    }
    schema.insert("additionalProperties".into(), json!(returns.allow_extra));
    schema
}

/// Whether `value` fits `schema`, a schema [`output_schema`] made (its keywords only:
/// `type`, `enum`, `const`, string and array lengths, numeric bounds, `multipleOf`,
/// `items`, `uniqueItems`, `properties`, `required`, `additionalProperties`).
///
/// # Errors
/// Where and why it does not, lowercase (`` `count`: not of type integer ``).
pub fn conforms(schema: &JsonObject, value: &Value) -> Result<(), String> {
    fits(schema, value, "")
}

fn fits(schema: &JsonObject, v: &Value, at: &str) -> Result<(), String> {
    let here = if at.is_empty() {
        "the output".to_owned()
    } else {
        format!("`{at}`")
    };
    let fail = |why: String| Err(format!("{here}: {why}"));
    if let Some(t) = schema.get("type") {
        let types: Vec<&str> = match t {
            Value::String(s) => vec![s.as_str()],
            Value::Array(l) => l.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !types.iter().any(|t| of_type(t, v)) {
            return fail(format!("not of type {}", types.join(" or ")));
        }
    }
    if let Some(Value::Array(list)) = schema.get("enum")
        && !list.iter().any(|x| same(x, v))
    {
        return fail("not one of its `enum` values".into());
    }
    if let Some(c) = schema.get("const")
        && !same(c, v)
    {
        return fail(format!("not {c}"));
    }
    let bound = |key: &str| schema.get(key).and_then(Value::as_u64);
    if let Value::String(s) = v {
        let n = s.chars().count() as u64;
        if bound("minLength").is_some_and(|m| n < m) || bound("maxLength").is_some_and(|m| n > m) {
            return fail("a string of a length out of its bounds".into());
        }
    }
    if let Some(x) = v.as_f64().filter(|_| v.is_number()) {
        let num = |key: &str| schema.get(key).and_then(Value::as_f64);
        let out = num("minimum").is_some_and(|m| x < m)
            || num("maximum").is_some_and(|m| x > m)
            || num("exclusiveMinimum").is_some_and(|m| x <= m)
            || num("exclusiveMaximum").is_some_and(|m| x >= m)
            || num("multipleOf")
                .is_some_and(|m| m > 0.0 && ((x / m) - (x / m).round()).abs() > 1e-9);
        if out {
            return fail("a number out of its bounds".into());
        }
    }
    if let Value::Array(items) = v {
        fits_list(schema, items, (at, &here))?;
    }
    if let Value::Object(m) = v {
        fits_object(schema, m, (at, &here))?;
    }
    Ok(())
}

/// [`fits`] of a list at `at` (`here`: how a failure there names it).
fn fits_list(schema: &JsonObject, items: &[Value], (at, here): (&str, &str)) -> Result<(), String> {
    let fail = |why: &str| Err(format!("{here}: {why}"));
    let bound = |key: &str| schema.get(key).and_then(Value::as_u64);
    let n = items.len() as u64;
    if bound("minItems").is_some_and(|m| n < m) || bound("maxItems").is_some_and(|m| n > m) {
        return fail("a list of a length out of its bounds");
    }
    if schema.get("uniqueItems") == Some(&json!(true))
        && items
            .iter()
            .enumerate()
            .any(|(i, a)| items[..i].iter().any(|b| same(a, b)))
    {
        return fail("a list with repeated elements");
    }
    if let Some(Value::Object(each)) = schema.get("items") {
        for (i, item) in items.iter().enumerate() {
            fits(each, item, &format!("{at}[{i}]"))?;
        }
    }
    Ok(())
}

/// [`fits`] of an object at `at` (`here`: how a failure there names it).
fn fits_object(
    schema: &JsonObject,
    m: &serde_json::Map<String, Value>,
    (at, here): (&str, &str),
) -> Result<(), String> {
    let props = schema.get("properties").and_then(Value::as_object);
    if let Some(Value::Array(req)) = schema.get("required") {
        for name in req.iter().filter_map(Value::as_str) {
            if !m.contains_key(name) {
                return Err(format!("{here}: no `{name}`, which is required"));
            }
        }
    }
    for (k, x) in m {
        let path = if at.is_empty() {
            k.clone()
        } else {
            format!("{at}.{k}")
        };
        match props.and_then(|p| p.get(k)) {
            Some(Value::Object(sub)) => fits(sub, x, &path)?,
            Some(_) => {}
            None if schema.get("additionalProperties") == Some(&json!(false)) => {
                return Err(format!("{here}: `{k}` is not among its properties"));
            }
            None => {}
        }
    }
    Ok(())
}

fn of_type(t: &str, v: &Value) -> bool {
    match t {
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        "number" => v.is_number(),
        // JSON Schema's integer: a number with no fraction (`7.0` is one).
        "integer" => v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0),
        _ => false,
    }
}

/// JSON Schema's equality: numbers by value (`1` is `1.0`), the rest structurally.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(i), Some(j)) => i == j,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, a)| y.get(k).is_some_and(|b| same(a, b)))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn schema_is_closed_and_lists_required_and_confirm() {
        let s = input_schema(&[("text".into(), true), ("path".into(), false)], true);
        assert_eq!(
            Value::Object(s),
            json!({
                "type": "object",
                "properties": {
                    "text": { "type": "string", "description": "fills `{{text}}` of the verb's command, as one argument" },
                    "path": { "type": "string", "description": "fills `{{path}}` of the verb's command, as one argument" },
                    "confirm": {
                        "type": "boolean",
                        "description": "true to run this write; without it the call is refused with `confirm required` (HCP §4.5)"
                    }
                },
                "required": ["text"],
                "additionalProperties": false
            })
        );
        let s = input_schema(&[], false);
        assert_eq!(
            Value::Object(s),
            json!({ "type": "object", "properties": {}, "additionalProperties": false })
        );
    }

    #[test]
    fn the_runtime_policy_contract_narrows_placeholders() {
        let policy = histos::Policy::load_json(
            &json!({
                "schema_version": "histos.policy/0.1",
                "tools": {"t.find": {"args": {
                    "query": {"type": "string", "max_length": 40, "min_length": 1},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 50},
                    "mode": {"type": "string", "enum": ["fast", "slow"], "required": false},
                    "other": {"type": "string"}
                }}},
                "roles": {}
            })
            .to_string(),
        )
        .unwrap();
        let mut s = input_schema(
            &[
                ("query".into(), true),
                ("limit".into(), false),
                ("mode".into(), false),
            ],
            false,
        );
        refine(
            &mut s,
            policy.tool("t.find").unwrap().args.as_ref().unwrap(),
        );
        let d = |n: &str| format!("fills `{{{{{n}}}}}` of the verb's command, as one argument");
        assert_eq!(
            Value::Object(s),
            json!({
                "type": "object",
                "properties": {
                    "query": { "type": "string", "description": d("query"), "minLength": 1, "maxLength": 40 },
                    "limit": { "type": "integer", "description": d("limit"), "minimum": 1, "maximum": 50 },
                    "mode": { "type": "string", "description": d("mode"), "enum": ["fast", "slow"] }
                },
                "required": ["query", "limit"],
                "additionalProperties": false
            })
        );
    }

    fn returns_of(policy: &serde_json::Value) -> histos::Policy {
        histos::Policy::load_json(&policy.to_string()).unwrap()
    }

    #[test]
    fn returns_become_an_output_schema_that_projects_back_to_them() {
        let p = returns_of(&json!({
            "schema_version": "histos.policy/0.1",
            "tools": {"t.find": {"returns": {
                "id": {"type": "string", "min_length": 1, "max_length": 40},
                "count": {"type": "integer", "minimum": 0, "maximum": 500},
                "ratio": {"type": "number", "exclusive_minimum": 0, "multiple_of": 0.5},
                "mode": {"type": "string", "enum": ["fast", "slow"], "required": false},
                "tags": {"type": "array", "item_type": "string", "max_items": 3, "unique_items": true},
                "extra": {"type": "object", "required": false},
                "email": {"type": "string", "sensitive": "pii", "required": false},
                "anything": {"type": "any", "required": false}
            }}},
            "roles": {}
        }));
        let returns = p.tool("t.find").unwrap().returns.as_ref().unwrap();
        let schema = output_schema(returns, &["pii".into()]);
        assert_eq!(
            Value::Object(schema.clone()),
            json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string", "minLength": 1, "maxLength": 40},
                    "count": {"type": "integer", "minimum": 0, "maximum": 500},
                    "ratio": {"type": "number", "exclusiveMinimum": 0, "multipleOf": 0.5},
                    "mode": {"type": "string", "enum": ["fast", "slow"]},
                    "tags": {"type": "array", "maxItems": 3, "uniqueItems": true, "items": {"type": "string"}},
                    "extra": {"type": "object"},
                    "email": {"type": "string", "x-sensitive": "pii"},
                    "anything": {}
                },
                "required": ["count", "id", "ratio", "tags"],
                "additionalProperties": false
            })
        );
        // The projection of the schema is the contract it came from.
        let tool =
            json!({"name": "t.find", "inputSchema": {"type": "object"}, "outputSchema": schema});
        let back = histos::projection::from_mcp(&histos::Value::from(tool)).unwrap();
        let original = histos::projection::Contract {
            args: None,
            returns: Some(returns.clone()),
        };
        let view = |c: &histos::projection::Contract| {
            serde_json::Value::from(&c.view())["returns"].clone()
        };
        assert_eq!(view(&back.contract), view(&original));
    }

    #[test]
    fn a_field_the_principal_may_not_view_is_the_redaction_and_null_is_allowed_where_nullable() {
        let p = returns_of(&json!({
            "schema_version": "histos.policy/0.1",
            "tools": {"t.x": {"returns": {
                "$allow_extra": true,
                "card": {"type": "integer", "sensitive": "secret"},
                "note": {"type": "string", "nullable": true, "enum": ["a"]}
            }}},
            "roles": {}
        }));
        let schema = output_schema(p.tool("t.x").unwrap().returns.as_ref().unwrap(), &[]);
        assert_eq!(
            Value::Object(schema.clone()),
            json!({
                "type": "object",
                "properties": {
                    "card": {"x-sensitive": "secret", "type": "string", "const": "[REDACTED]"},
                    "note": {"type": ["string", "null"], "enum": ["a", null]}
                },
                "required": ["card", "note"],
                "additionalProperties": true
            })
        );
        assert!(
            conforms(
                &schema,
                &json!({"card": "[REDACTED]", "note": null, "more": 1})
            )
            .is_ok()
        );
        assert!(conforms(&schema, &json!({"card": 4111, "note": "a"})).is_err());
    }

    #[test]
    fn conformance_says_where_and_why() {
        let p = returns_of(&json!({
            "schema_version": "histos.policy/0.1",
            "tools": {"t.find": {"returns": {
                "id": {"type": "string", "max_length": 3},
                "count": {"type": "integer", "minimum": 0},
                "tags": {"type": "array", "item_type": "string", "unique_items": true, "required": false}
            }}},
            "roles": {}
        }));
        let s = output_schema(p.tool("t.find").unwrap().returns.as_ref().unwrap(), &[]);
        assert_eq!(conforms(&s, &json!({"id": "abc", "count": 2})), Ok(()));
        assert_eq!(conforms(&s, &json!({"id": "abc", "count": 2.0})), Ok(()));
        for (v, why) in [
            (
                json!([{"id": "a", "count": 1}]),
                "the output: not of type object",
            ),
            (
                json!({"id": "abc"}),
                "the output: no `count`, which is required",
            ),
            (
                json!({"id": "abcd", "count": 1}),
                "`id`: a string of a length out of its bounds",
            ),
            (
                json!({"id": "a", "count": 1.5}),
                "`count`: not of type integer",
            ),
            (
                json!({"id": "a", "count": -1}),
                "`count`: a number out of its bounds",
            ),
            (
                json!({"id": "a", "count": 1, "x": 1}),
                "the output: `x` is not among its properties",
            ),
            (
                json!({"id": "a", "count": 1, "tags": ["a", 2]}),
                "`tags[1]`: not of type string",
            ),
            (
                json!({"id": "a", "count": 1, "tags": ["a", "a"]}),
                "`tags`: a list with repeated elements",
            ),
        ] {
            assert_eq!(conforms(&s, &v), Err(why.to_owned()), "{v}");
        }
    }
}
