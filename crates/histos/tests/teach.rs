//! Load errors that teach: an unknown key names the keys allowed at that place and the
//! nearest one, while the POLICY code stays the reference's (HISTOS-ENGINE §2).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use histos::{Policy, PolicyCode};

fn refusal(yaml: &str) -> histos::PolicyError {
    Policy::load_yaml(yaml).expect_err("must be refused")
}

#[test]
fn a_camel_case_field_key_suggests_its_snake_case_spelling() {
    let e = refusal("tools:\n  t:\n    args:\n      q: {type: string, maxLength: 5}\n");
    assert_eq!(e.code, PolicyCode::UnknownKey);
    assert_eq!(e.location.as_deref(), Some("tools.t.args.q"));
    assert!(e.message.contains("did you mean `max_length`?"), "{e}");
    assert!(
        e.message
            .contains("keys allowed here: enum, exclusive_maximum"),
        "{e}"
    );
    assert!(e.message.contains("item_type"), "{e}");
}

#[test]
fn a_limits_block_points_at_rate_limit_and_budget() {
    let e = refusal("tools:\n  t:\n    args: {}\n    limits: {rate: 5}\n");
    assert_eq!(e.code, PolicyCode::UnknownKey);
    assert_eq!(e.location.as_deref(), Some("tools.t"));
    assert!(
        e.message.contains("did you mean `budget` or `rate_limit`?"),
        "{e}"
    );
    assert!(
        e.message.contains("keys allowed here: access, args, bind"),
        "{e}"
    );
}

#[test]
fn unknown_keys_at_the_top_in_roles_and_in_output_name_what_is_allowed() {
    let e = refusal("tool: {}\n");
    assert_eq!(e.code, PolicyCode::UnknownKey);
    assert_eq!(e.location.as_deref(), Some("tool"));
    assert!(
        e.message
            .contains("unknown top-level key `tool`; did you mean `tools`?"),
        "{e}"
    );
    let e = refusal("roles:\n  r: {grants: [t]}\n");
    assert!(e.message.contains("did you mean `allow`?"), "{e}");
    assert_eq!(e.location.as_deref(), Some("roles.r"));
    let e = refusal("tools:\n  t:\n    args: {}\n    output: {redact: true}\n");
    assert!(
        e.message
            .contains("keys allowed here: on_violation, project"),
        "{e}"
    );
    let e = refusal("permissions: {}\n");
    assert!(e.message.contains("constructor spelling"), "{e}");
}

#[test]
fn a_json_schema_written_as_args_is_explained() {
    let e = refusal(
        "tools:\n  t:\n    args:\n      type: object\n      properties: {q: {type: string}}\n",
    );
    assert_eq!(e.code, PolicyCode::InvalidField);
    assert!(e.message.contains("reads like JSON Schema"), "{e}");
    let e = refusal("tools:\n  t:\n    args:\n      q: {type: string, description: x}\n");
    assert_eq!(e.code, PolicyCode::UnknownKey);
    assert!(e.message.contains("write a comment instead"), "{e}");
}
