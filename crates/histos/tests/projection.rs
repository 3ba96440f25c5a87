//! The JSON-Schema projection on the inputs a real tool listing (or a hostile one)
//! carries: what is carried, what is dropped on purpose, what is refused
//! (`json-schema-projection-0.1.md`, HISTOS-ENGINE §11).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use histos::model::FieldType;
use histos::projection::{self, MAX_PROPERTIES, SourceKind};
use histos::{PolicyCode, Value};
use serde_json::json;

fn mcp(input: serde_json::Value) -> Result<projection::ToolSource, histos::PolicyError> {
    projection::from_mcp(&Value::from(json!({"name": "t", "inputSchema": input})))
}

fn refused(input: serde_json::Value) -> histos::PolicyError {
    mcp(input).expect_err("must be refused")
}

#[test]
fn a_ref_loop_is_refused_and_a_local_ref_is_followed() {
    let e = refused(json!({
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/A"}},
        "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}}
    }));
    assert_eq!(e.code, PolicyCode::InvalidImport);
    assert!(e.message.contains("recursive"), "{e}");
    let self_loop = refused(json!({
        "type": "object", "properties": {"a": {"$ref": "#/properties/a"}}
    }));
    assert_eq!(self_loop.code, PolicyCode::InvalidImport);
    let remote = refused(json!({
        "type": "object", "properties": {"a": {"$ref": "https://example.com/s.json"}}
    }));
    assert!(
        remote.message.contains("not a pointer into this document"),
        "{remote}"
    );
    let dangling = refused(json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/X"}}}));
    assert!(dangling.message.contains("names nothing"), "{dangling}");
    // A pydantic-style enum behind a local reference keeps its enum; a sibling bound
    // composes with the target's (the tighter wins).
    let t = mcp(json!({
        "type": "object",
        "properties": {
            "mode": {"$ref": "#/$defs/Mode"},
            "q": {"$ref": "#/$defs/Q", "maxLength": 8}
        },
        "required": ["mode"],
        "$defs": {"Mode": {"type": "string", "enum": ["a", "b"]}, "Q": {"type": "string", "maxLength": 64}}
    }))
    .unwrap();
    let args = t.contract.args.unwrap();
    let mode = args.field("mode").unwrap();
    assert_eq!(mode.ty, FieldType::String);
    assert!(mode.required);
    assert_eq!(mode.enum_values.as_ref().unwrap().len(), 2);
    assert_eq!(args.field("q").unwrap().max_length, Some(8));
}

#[test]
fn combinators_are_refused_by_name() {
    for kw in ["allOf", "oneOf", "not", "if"] {
        let e = refused(json!({
            "type": "object",
            "properties": {"a": {kw: [{"type": "string"}, {"minLength": 2}]}}
        }));
        assert_eq!(e.code, PolicyCode::InvalidImport, "{kw}");
        assert!(e.message.contains(kw), "{e}");
    }
    let top = refused(json!({"type": "object", "allOf": [{"properties": {}}]}));
    assert!(top.message.contains("allOf"), "{top}");
    // A real union of two types has no single field.
    let e =
        refused(json!({"type": "object", "properties": {"a": {"type": ["string", "integer"]}}}));
    assert!(e.message.contains("union of types"), "{e}");
    let e = refused(
        json!({"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}}),
    );
    assert!(e.message.contains("anyOf"), "{e}");
}

#[test]
fn a_draft4_boolean_exclusive_minimum_is_dropped_and_minimum_stands() {
    let t = mcp(json!({
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 3, "exclusiveMinimum": true, "exclusiveMaximum": false}}
    }))
    .unwrap();
    let n = t
        .contract
        .args
        .as_ref()
        .unwrap()
        .field("n")
        .unwrap()
        .clone();
    assert_eq!(n.minimum, Some(Value::Int(3)));
    assert_eq!(n.exclusive_minimum, None);
    assert_eq!(n.exclusive_maximum, None);
    // A boolean anywhere else is a malformed bound, not an older dialect.
    let e = refused(
        json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": true}}}),
    );
    assert_eq!(e.code, PolicyCode::InvalidImport);
}

#[test]
fn a_nullable_type_list_is_optional_and_accepts_null() {
    for schema in [
        json!({"type": ["string", "null"]}),
        json!({"anyOf": [{"type": "string"}, {"type": "null"}]}),
    ] {
        let t =
            mcp(json!({"type": "object", "properties": {"a": schema}, "required": ["a"]})).unwrap();
        let a = t
            .contract
            .args
            .as_ref()
            .unwrap()
            .field("a")
            .unwrap()
            .clone();
        assert_eq!(a.ty, FieldType::String);
        assert!(a.nullable && !a.required);
    }
}

#[test]
fn ten_thousand_properties_are_refused_quickly_and_a_thousand_project() {
    let many = |n: usize| {
        let props: serde_json::Map<String, serde_json::Value> = (0..n)
            .map(|i| (format!("a{i}"), json!({"type": "string", "maxLength": 8})))
            .collect();
        json!({"type": "object", "properties": props})
    };
    let t0 = Instant::now();
    let e = refused(many(10_000));
    assert_eq!(e.code, PolicyCode::InvalidImport);
    assert!(e.message.contains("10000 arguments"), "{e}");
    let t = mcp(many(MAX_PROPERTIES)).unwrap();
    assert_eq!(t.contract.args.unwrap().fields.len(), MAX_PROPERTIES);
    // Not a timing assertion on the engine's speed: a guard against quadratic blow-up.
    assert!(t0.elapsed().as_secs() < 20);
}

#[test]
fn what_the_projection_carries_and_what_it_leaves_out() {
    let t = mcp(json!({
        "type": "object",
        "title": "ignored",
        "properties": {
            "kind": {"const": "invoice"},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 5, "enum": ["a", "b"]}, "maxItems": 3, "uniqueItems": true},
            "email": {"type": "string", "format": "email", "x-sensitive": "pii", "default": "x"},
            "any": {}
        },
        "additionalProperties": true
    }))
    .unwrap();
    let args = t.contract.args.as_ref().unwrap();
    assert!(args.allow_extra);
    let kind = args.field("kind").unwrap();
    assert_eq!(kind.ty, FieldType::String);
    assert_eq!(kind.enum_values, Some(vec![Value::Str("invoice".into())]));
    let tags = args.field("tags").unwrap();
    assert_eq!(tags.item_type, Some(FieldType::String));
    assert_eq!(tags.max_length, Some(5));
    assert_eq!(tags.max_items, Some(3));
    assert!(tags.unique_items);
    assert_eq!(tags.item_enum.as_ref().unwrap().len(), 2);
    assert_eq!(
        args.field("email").unwrap().sensitive,
        Some(histos::model::Sensitive::Pii)
    );
    assert_eq!(args.field("any").unwrap().ty, FieldType::Any);
    // Annotations move the schema hash, never the contract hash.
    let plain = mcp(json!({
        "type": "object",
        "properties": {
            "kind": {"const": "invoice"},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 5, "enum": ["a", "b"]}, "maxItems": 3, "uniqueItems": true},
            "email": {"type": "string", "x-sensitive": "pii"},
            "any": {}
        },
        "additionalProperties": true
    }))
    .unwrap();
    assert_eq!(plain.contract_sha256(), t.contract_sha256());
    assert_ne!(plain.schema_sha256(), t.schema_sha256());
}

#[test]
fn malformed_bounds_and_markers_are_refused_not_dropped() {
    for (prop, needle) in [
        (json!({"type": "string", "maxLength": "50"}), "maxLength"),
        (json!({"type": "string", "maxLength": -1}), "maxLength"),
        (json!({"type": "strin"}), "unknown type"),
        (json!({"type": "integer", "enum": ["a"]}), "contradicts"),
        (
            json!({"type": "string", "x-sensitive": "PII"}),
            "x-sensitive",
        ),
        (
            json!({"type": "string", "x_sensitive": "pii"}),
            "x-sensitive",
        ),
        (
            json!({"type": "string", "items": {"type": "string"}}),
            "not an array",
        ),
        (json!({"const": 1, "enum": [1]}), "const"),
    ] {
        let e = refused(json!({"type": "object", "properties": {"a": prop}}));
        assert_eq!(e.code, PolicyCode::InvalidImport, "{e}");
        assert!(e.message.contains(needle), "{needle}: {e}");
    }
    // The loader's own field rules still apply to a projected contract.
    let e = refused(
        json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "^(a+)+$"}}}),
    );
    assert_eq!(e.code, PolicyCode::UnsafePattern);
    let e = refused(
        json!({"type": "object", "properties": {"a": {"type": "integer", "minimum": 5, "maximum": 1}}}),
    );
    assert_eq!(e.code, PolicyCode::InvalidField);
    let e = refused(json!({"type": "string"}));
    assert!(e.message.contains("type `object`"), "{e}");
}

#[test]
fn openai_and_mcp_project_the_same_schema_alike() {
    let schema = json!({"type": "object", "properties": {"a": {"type": "string", "maxLength": 8}}, "required": ["a"]});
    let m = projection::read_listing(
        SourceKind::Mcp,
        &Value::from(json!({"tools": [{"name": "t", "description": "d", "inputSchema": schema}]})),
    )
    .unwrap();
    let o = projection::read_listing(
        SourceKind::OpenAi,
        &Value::from(json!([{"type": "function", "function": {"name": "t", "description": "d", "parameters": schema}}])),
    )
    .unwrap();
    assert_eq!(m[0].contract_sha256(), o[0].contract_sha256());
    assert_eq!(m[0].description_sha256(), o[0].description_sha256());
    assert_ne!(m[0].schema_sha256(), o[0].schema_sha256());
    let twice = projection::read_listing(
        SourceKind::Mcp,
        &Value::from(
            json!([{"name": "t", "inputSchema": schema}, {"name": "t", "inputSchema": schema}]),
        ),
    )
    .unwrap_err();
    assert!(twice.message.contains("declared twice"), "{twice}");
}

#[test]
fn the_input_schema_hcp_mcp_shows_for_a_verb_projects() {
    // The shape `hcp mcp` lists as `inputSchema` (RUNTIME §7: contracts from packs).
    let t = projection::from_mcp(&Value::from(json!({
        "name": "transit.find",
        "description": "Find stops by name.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "text": {"type": "string", "description": "fills `{{text}}` of the verb's command, as one argument"},
                "confirm": {"type": "boolean", "description": "confirm the write"}
            },
            "required": ["text"],
            "additionalProperties": false
        },
        "annotations": {"readOnlyHint": true, "openWorldHint": false}
    })))
    .unwrap();
    let args = t.contract.args.as_ref().unwrap();
    assert!(!args.allow_extra);
    assert!(args.field("text").unwrap().required);
    assert_eq!(args.field("confirm").unwrap().ty, FieldType::Boolean);
    // The annotations are source evidence: they move schema_sha256, not the contract.
    let Value::Map(shape) = &t.shape else {
        panic!()
    };
    assert!(matches!(shape.get("rest"), Some(Value::Map(r)) if r.contains_key("annotations")));
}

#[test]
fn an_output_schema_projects_to_returns_with_its_sensitivity() {
    let tool = |marker: &str| {
        projection::from_mcp(&Value::from(json!({
            "name": "get_user",
            "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
            "outputSchema": {
                "type": "object",
                "properties": {"id": {"type": "string"}, "email": {"type": "string", "x-sensitive": marker}}
            }
        })))
        .unwrap()
    };
    let pii = tool("pii");
    let returns = pii.contract.returns.as_ref().unwrap();
    assert_eq!(
        returns.field("email").unwrap().sensitive,
        Some(histos::model::Sensitive::Pii)
    );
    assert_eq!(returns.field("id").unwrap().sensitive, None);
    // Changing what is redacted changes the enforced contract.
    assert_ne!(pii.contract_sha256(), tool("secret").contract_sha256());
    let view = serde_json::Value::from(&pii.contract.view());
    assert_eq!(
        view["returns"]["fields"]["email"]["sensitive"],
        json!("pii")
    );
    assert_eq!(view["args"]["fields"]["id"]["required"], json!(true));
}
