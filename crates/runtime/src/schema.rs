//! The JSON Schema of a verb's arguments (RUNTIME §7, "Contracts from packs"; the
//! `inputSchema` `hcp mcp` shows): every placeholder a string, the required ones required,
//! `confirm` where the policy asks for it, closed; narrowed by the runtime policy's
//! argument contract where it has one for the tool.

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
}
