//! `hcp exec` through the built binary, its two faces (RUNTIME §5): the CLI face's words,
//! the JSON envelope (strict: `bad_envelope`, exit 65), argument refusals of step 3
//! (`arg_unknown`, `arg_missing`, `arg_invalid`, `tenant_in_args`, `arg_looks_like_flag`),
//! target misses (`unknown_verb` with suggestions, `ambiguous_verb`, `pack_inactive`) and
//! the exact confirm refusal of the JSON face.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod exec_common;

use exec_common::*;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

#[test]
fn cli_face_runs_a_read_and_prints_the_child_output() {
    let w = world(&["transit"]);
    let out = exec(&w, &["transit.find", "Central"]);
    snap!("cli_find", w.render(&out));
    let out = exec(&w, &["transit.plan", "--to", "Harbor", "Central", "--json"]);
    let v = parse(&w, &out);
    assert_eq!(status(&out), 0);
    assert_eq!(v["ok"], json!(true));
    assert_eq!(v["data"]["from"]["id"].is_string(), true, "{v}");
}

#[test]
fn json_face_answers_the_result_object() {
    let w = world(&["transit"]);
    let (out, v) = envelope(
        &w,
        br#"{"pack_id": "transit", "verb_key": "find", "args": {"query": "Harbor"}}"#,
    );
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    for k in [
        "ok",
        "pack_id",
        "verb_key",
        "operation",
        "land",
        "exit_code",
        "stdout",
        "stderr",
        "data",
        "truncated",
        "duration_ms",
        "audit_id",
    ] {
        assert!(keys.contains(&k), "result lacks `{k}`: {v}");
    }
    assert_eq!(
        (&v["ok"], &v["operation"], &v["land"], &v["exit_code"]),
        (&json!(true), &json!("read"), &json!("personal"), &json!(0))
    );
    assert!(v["data"].is_object(), "stdout parsed as JSON: {v}");
    assert_eq!(v["audit_id"], last_audit(&w)["id"]);
    // The verb key alone, without pack_id, when it is unique.
    let (out, v) = envelope(&w, br#"{"verb_key": "transit.status", "args": {}}"#);
    assert_eq!((status(&out), &v["ok"]), (0, &json!(true)), "{v}");
}

#[test]
fn bad_envelopes_are_refused_with_65() {
    let w = world(&["transit"]);
    let cases: [(&str, &[u8]); 10] = [
        (
            "duplicate_key",
            br#"{"verb_key": "transit.find", "args": {"query": "a", "query": "b"}}"#,
        ),
        (
            "null_value",
            br#"{"verb_key": "transit.find", "args": {"query": null}}"#,
        ),
        ("not_json", b"transit.find Central"),
        ("empty", b""),
        (
            "unknown_field",
            br#"{"verb_key": "find", "pack_id": "transit", "args": {}, "sudo": true}"#,
        ),
        (
            "unknown_field_nested_type",
            br#"{"verb_key": "find", "args": {"query": {"$ne": null}}}"#,
        ),
        (
            "wrong_type_args",
            br#"{"verb_key": "find", "args": ["Central"]}"#,
        ),
        ("wrong_type_verb", br#"{"verb_key": 7, "args": {}}"#),
        ("missing_verb_key", br#"{"args": {"query": "x"}}"#),
        (
            "trailing",
            br#"{"verb_key": "find", "args": {}} {"verb_key": "find", "args": {}}"#,
        ),
    ];
    for (name, body) in cases {
        let (out, v) = envelope(&w, body);
        assert_refused(&w, &out, &v, "bad_envelope", 65);
        assert!(out.stderr.is_empty(), "{name}: {}", w.render(&out));
        if name == "unknown_field" {
            snap!("envelope_unknown_field", w.render(&out));
        }
    }
    let (out, v) = envelope(&w, &[0xff, 0xfe, b'{', b'}']);
    assert_refused(&w, &out, &v, "bad_envelope", 65);
}

#[test]
fn envelope_usage_errors_exit_64() {
    let w = world(&["transit"]);
    let out = exec(&w, &["--envelope", "file.json"]);
    assert_eq!(status(&out), 64, "{}", w.render(&out));
    let out = exec(&w, &["--envelope", "-", "transit.find"]);
    assert_eq!(status(&out), 64, "{}", w.render(&out));
    let out = exec(&w, &[]);
    snap!("usage_no_target", w.render(&out));
    let out = exec(&w, &["transit.find", "--query"]);
    assert_eq!(status(&out), 64, "{}", w.render(&out));
    let out = exec(&w, &["transit.find", "x", "--timeout", "0"]);
    assert_eq!(status(&out), 64, "{}", w.render(&out));
}

#[test]
fn nul_byte_is_arg_invalid_on_both_faces() {
    let w = world(&["probe"]);
    let (out, v) = envelope(
        &w,
        br#"{"pack_id": "probe", "verb_key": "args", "args": {"first": "a\u0000b"}}"#,
    );
    assert_refused(&w, &out, &v, "arg_invalid", 65);
    assert_eq!(last_audit(&w)["code"], json!("arg_invalid"));
    // The CLI face cannot carry a NUL in argv at all: the kernel stops the string there.
}

#[test]
fn unknown_and_missing_arguments() {
    let w = world(&["transit", "probe"]);
    let (out, v) = exec_json(&w, &["transit.find", "Central", "--limit", "3"]);
    assert_refused(&w, &out, &v, "arg_unknown", 65);
    assert_eq!(v["hint"], json!("this verb takes `query`"));
    // A positional value beyond the verb's arguments.
    let (out, v) = exec_json(&w, &["transit.find", "Central", "Harbor"]);
    assert_refused(&w, &out, &v, "arg_unknown", 65);
    let (out, v) = exec_json(&w, &["transit.status", "now"]);
    assert_refused(&w, &out, &v, "arg_unknown", 65);
    let (out, v) = exec_json(&w, &["transit.plan", "Central"]);
    assert_refused(&w, &out, &v, "arg_missing", 65);
    let (out, v) = envelope(&w, br#"{"verb_key": "transit.find", "args": {}}"#);
    assert_refused(&w, &out, &v, "arg_missing", 65);
    // The JSON face has no words: its hint names the argument to add, not a flag.
    assert_eq!(v["hint"], json!("give `query` in the call's arguments"));
    let out = exec(&w, &["transit.plan", "Central"]);
    snap!("arg_missing_text", w.render(&out));
    let out = exec(&w, &["probe.argv", "--nope", "x"]);
    snap!("arg_unknown_text", w.render(&out));
    for r in audit_records(&w) {
        assert_eq!(r["decision"], json!("deny"), "{r}");
    }
}

#[test]
fn tenant_bearing_names_are_refused_before_anything_else() {
    let w = world(&["transit"]);
    for name in ["project_id", "tenant_id", "tenant", "principal"] {
        let flag = format!("--{name}");
        let (out, v) = exec_json(&w, &["transit.find", "Central", &flag, "acme"]);
        assert_refused(&w, &out, &v, "tenant_in_args", 65);
        let body = json!({"pack_id": "transit", "verb_key": "find",
            "args": {"query": "Central", name: "acme"}});
        let (out, v) = envelope(&w, body.to_string().as_bytes());
        assert_refused(&w, &out, &v, "tenant_in_args", 65);
    }
    // `--project-id` reads as `project_id`.
    let (out, v) = exec_json(&w, &["transit.find", "Central", "--project-id", "acme"]);
    assert_refused(&w, &out, &v, "tenant_in_args", 65);
    let out = exec(&w, &["transit.find", "Central", "--tenant", "acme"]);
    snap!("tenant_in_args_text", w.render(&out));
}

#[test]
fn flag_looking_positional_values_are_refused_unless_after_double_dash() {
    let w = world(&["probe"]);
    let canary = w.root().join("canary");
    let touch = format!("--upload-pack=touch {}", canary.display());
    for bad in ["--output=X", touch.as_str(), "-c", "-", "-1"] {
        let (out, v) = exec_json(&w, &["probe.argv", "--value", bad]);
        assert_refused(&w, &out, &v, "arg_looks_like_flag", 65);
        let body = json!({"pack_id": "probe", "verb_key": "argv", "args": {"value": bad}});
        let (out, v) = envelope(&w, body.to_string().as_bytes());
        assert_refused(&w, &out, &v, "arg_looks_like_flag", 65);
    }
    // A negative number on the JSON face renders with a leading dash too.
    let (out, v) = envelope(
        &w,
        br#"{"pack_id": "probe", "verb_key": "argv", "args": {"value": -5}}"#,
    );
    assert_refused(&w, &out, &v, "arg_looks_like_flag", 65);
    // After a literal `--` in the template the same value is harmless and arrives as is.
    let (out, v) = exec_json(&w, &["probe.args", "--", "--output=X", &touch]);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    assert_eq!(v["data"], json!(["--", "--output=X", touch]));
    assert!(!canary.exists());
    let out = exec(&w, &["probe.argv", "--value=--output=X"]);
    snap!("arg_looks_like_flag_text", w.render(&out));
}

/// A pack whose verb keys repeat its id (`ledger.post` of pack `ledger`, typed
/// `hcp exec ledger.post`) is suggested as it is typed.
#[test]
fn a_miss_of_a_verb_key_that_repeats_the_pack_id_suggests_it_as_typed() {
    let w = world(&["ledger"]);
    let (out, v) = exec_json(&w, &["ledger.pots"]);
    assert_refused(&w, &out, &v, "unknown_verb", 66);
    assert_eq!(v["hint"], json!("did you mean `ledger.post`?"), "{v}");
}

#[test]
fn target_misses_suggest_and_ambiguity_lists() {
    let w = world(&["transit", "git", "hcp-cli"]);
    let out = exec(&w, &["transit.fnd", "Central"]);
    snap!("unknown_verb_suggests", w.render(&out));
    let (out, v) = exec_json(&w, &["transit.fnd", "Central"]);
    assert_refused(&w, &out, &v, "unknown_verb", 66);
    assert!(
        v["hint"].as_str().unwrap().contains("`transit.find`"),
        "{v}"
    );
    let (out, v) = exec_json(&w, &["nosuchpack.find"]);
    assert_refused(&w, &out, &v, "unknown_verb", 66);
    // A miss far from every verb of a named pack lists that pack's verbs.
    let (out, v) = exec_json(&w, &["transit.timetable"]);
    assert_refused(&w, &out, &v, "unknown_verb", 66);
    let hint = v["hint"].as_str().unwrap();
    assert!(
        hint.starts_with("the verbs of `transit`: `transit.")
            && hint.ends_with("(`hcp show transit`)"),
        "{v}"
    );
    let out = exec(&w, &["status"]);
    snap!("ambiguous_status", w.render(&out));
    let (out, v) = exec_json(&w, &["show", "x"]);
    assert_refused(&w, &out, &v, "ambiguous_verb", 66);
    let msg = v["error"].as_str().unwrap();
    for p in ["`git.show`", "`transit.show`", "`hcp-cli.show`"] {
        assert!(msg.contains(p), "{msg}");
    }
    // A unique bare key resolves.
    let (out, v) = exec_json(&w, &["find", "Central"]);
    assert_eq!((status(&out), &v["pack_id"]), (0, &json!("transit")));
    // Envelope: an unknown pack, an unknown verb of a known pack.
    let (out, v) = envelope(
        &w,
        br#"{"pack_id": "nope", "verb_key": "find", "args": {}}"#,
    );
    assert_refused(&w, &out, &v, "unknown_verb", 66);
    let (out, v) = envelope(
        &w,
        br#"{"pack_id": "transit", "verb_key": "fid", "args": {}}"#,
    );
    assert_refused(&w, &out, &v, "unknown_verb", 66);
    assert!(v["hint"].as_str().unwrap().contains("transit.find"), "{v}");
}

#[test]
fn an_inactive_pack_is_a_target_miss() {
    common::example_bins();
    let w = common::World::new();
    let out = w.run(&["install", &source("transit").display().to_string()]);
    assert!(out.status.success(), "{}", w.render(&out));
    let (out, v) = exec_json(&w, &["transit.find", "Central"]);
    assert_refused(&w, &out, &v, "pack_inactive", 66);
    let out = w.run(&["activate", "transit"]);
    assert!(out.status.success(), "{}", w.render(&out));
    let (out, _) = exec_json(&w, &["transit.find", "Central"]);
    assert_eq!(status(&out), 0);
}

#[test]
fn confirm_refusal_is_exact_on_the_json_face() {
    let w = world(&["ledger"]);
    let body = br#"{"pack_id": "ledger", "verb_key": "ledger.post",
        "args": {"account": "cash", "amount": "12.50", "memo": "coffee"}}"#;
    let (out, v) = envelope(&w, body);
    assert_refused(&w, &out, &v, "confirm_required", 77);
    assert_eq!(v["error"], json!("confirm required"));
    assert_eq!(
        (&v["operation"], &v["land"], &v["stdout"]),
        (&json!("write"), &json!("local"), &Value::Null)
    );
    assert!(
        !w.work.join("ledger.jsonl").exists(),
        "the adapter never ran"
    );
    let rec = last_audit(&w);
    assert_eq!(
        (&rec["decision"], &rec["code"], &rec["exit_code"]),
        (&json!("deny"), &json!("confirm_required"), &Value::Null),
        "{rec}"
    );
    // `"confirm": false` is no confirmation; a string other than true/false is invalid.
    let body = br#"{"pack_id": "ledger", "verb_key": "ledger.post",
        "args": {"account": "cash", "amount": "12.50", "memo": "coffee", "confirm": false}}"#;
    let (out, v) = envelope(&w, body);
    assert_refused(&w, &out, &v, "confirm_required", 77);
    let body = br#"{"pack_id": "ledger", "verb_key": "ledger.post",
        "args": {"account": "cash", "amount": "12.50", "memo": "coffee", "confirm": "yes"}}"#;
    let (out, v) = envelope(&w, body);
    assert_refused(&w, &out, &v, "arg_invalid", 65);
    // With it, the write happens.
    let body = br#"{"pack_id": "ledger", "verb_key": "ledger.post",
        "args": {"account": "cash", "amount": "12.50", "memo": "coffee", "confirm": true}}"#;
    let (out, v) = envelope(&w, body);
    assert_eq!((status(&out), &v["ok"]), (0, &json!(true)), "{v}");
    assert!(w.work.join("ledger.jsonl").exists());
    // The text face says it on stderr with its code.
    let out = exec(&w, &["ledger.post", "cash", "1", "tea"]);
    snap!("confirm_required_text", w.render(&out));
    let (out, v) = exec_json(&w, &["ledger.post", "cash", "1", "tea", "--apply"]);
    assert_eq!((status(&out), &v["ok"]), (0, &json!(true)), "{v}");
}

/// RUNTIME §5: "Order of checks, each refusal audited" — step 1 (resolve the target; the
/// pack must be installed and active) included; §6: every exec decision, allowed or
/// refused, appends one record.
#[test]
fn target_misses_are_audited() {
    common::example_bins();
    let w = common::World::new();
    let out = w.run(&["install", &source("transit").display().to_string()]);
    assert!(out.status.success(), "{}", w.render(&out));
    let (out, v) = exec_json(&w, &["transit.find", "Central"]);
    assert_refused(&w, &out, &v, "pack_inactive", 66);
    assert_eq!(audit_records(&w).len(), 1, "pack_inactive is audited");
    let (out, v) = exec_json(&w, &["transit.fnd", "Central"]);
    assert_refused(&w, &out, &v, "unknown_verb", 66);
    assert_eq!(audit_records(&w).len(), 2, "unknown_verb is audited");
}

#[test]
fn the_envelope_is_an_object_with_args_and_confirms_with_a_boolean() {
    let w = world(&["probe", "ledger"]);
    for bad in [
        r#"["probe", "argv", {"value": "x"}]"#,
        r#"{"pack_id": "probe", "verb_key": "argv"}"#,
    ] {
        let (out, v) = envelope(&w, bad.as_bytes());
        assert_refused(&w, &out, &v, "bad_envelope", 65);
    }
    // On the JSON face only the boolean confirms (§4.5.2: the string is the CLI face's).
    let (out, v) = envelope(
        &w,
        br#"{"verb_key": "ledger.post", "args": {"account": "cash", "amount": "1", "memo": "m", "confirm": "true"}}"#,
    );
    assert_refused(&w, &out, &v, "arg_invalid", 65);
    assert!(!w.work.join("ledger.jsonl").exists());
}

/// A value the gate lets through (at most 131,071 bytes) can still make an argv element
/// too long once its template prefix is added, or the whole command line too long for
/// one exec: `arg_invalid` (65), audited, nothing run; not `spawn_failed`.
#[test]
fn a_value_too_long_for_exec_once_rendered_is_arg_invalid() {
    let w = world(&["ledger"]);
    // `--account={{account?}}`: 10 bytes of prefix on a value just under the gate's cap.
    let account = "x".repeat(131_064);
    let body = serde_json::to_vec(&json!({
        "pack_id": "ledger", "verb_key": "ledger.list", "args": {"account": account}
    }))
    .unwrap();
    let (out, v) = envelope(&w, &body);
    assert_refused(&w, &out, &v, "arg_invalid", 65);
    assert!(v["error"].as_str().unwrap().contains("prefix"), "{v}");
    assert!(
        v["hint"].as_str().unwrap().contains("through a file"),
        "{v}"
    );
    assert_eq!(last_audit(&w)["code"], json!("arg_invalid"));
    assert!(
        !w.work.join("ledger.jsonl").exists(),
        "the adapter never ran"
    );
}
