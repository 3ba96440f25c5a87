//! Resource resolvers (RUNTIME §7, issue 16): `config.json` `"resolvers"` names a `read`
//! verb whose JSON stdout is the resource, called as the same principal, gated and
//! recorded as a call of its own; each way it can fail is its own refusal.

use super::{World, code, s};
use crate::Answer;
use hcp_model::Capability;
use hcp_store::session::NewSession;
use jiff::Timestamp;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::ffi::OsString;

const POLICY: &str = "schema_version: histos.policy/0.1
tools:
  rs.act:
    access: write
    args: {id: {type: string}}
    resource: {owns: team}
  rs.lookup:
    args: {id: {type: string}}
  rs.wlookup:
    access: write
    args: {id: {type: string}}
  rs.slow:
    args: {id: {type: string}}
  rs.fail:
    args: {id: {type: string}}
  rs.guarded:
    args: {id: {type: string}}
    resource: {owns: team}
  rs2.lookup:
    args: {id: {type: string}}
roles:
  agent:
    allow: [rs.act, rs.lookup, rs.wlookup, rs.slow, rs.fail, rs.guarded, rs2.lookup]
";

/// The verbs: `act` (the tool with a constraint), and resolver verbs that print their
/// argument (`lookup`, `wlookup` a write), sleep (`slow`), exit with it (`fail`), or
/// need a resource themselves (`guarded`).
const RS: &[super::Verb<'static>] = &[
    ("act", "write", "personal", false, &["say", "{{id}}"]),
    ("lookup", "read", "personal", false, &["json", "{{id}}"]),
    ("wlookup", "write", "personal", false, &["json", "{{id}}"]),
    ("slow", "read", "personal", false, &["sleep", "{{id}}"]),
    ("fail", "read", "personal", false, &["exit", "{{id}}"]),
    ("guarded", "read", "personal", false, &["json", "{{id}}"]),
];

fn world(resolver: &str) -> (World, crate::Caller) {
    let w = World::new();
    w.install_pack("rs", "public", RS, false);
    w.install_pack("rs2", "public", &RS[1..2], false);
    w.policy(POLICY);
    w.config(Some(&format!(
        "{{\"resolvers\": {{\"rs.act\": \"{resolver}\"}}}}"
    )));
    let new = NewSession {
        principal: "agent".into(),
        role: Some("agent".into()),
        attributes: vec!["team=red".into()],
        ..NewSession::default()
    };
    let (token, _) = w.rt.state().session_start(&new, Timestamp::now()).unwrap();
    w.grant(
        "agent",
        "*",
        &[Capability::VerbExecRead, Capability::VerbExecWrite],
    );
    let c = crate::Caller {
        session_token: Some(OsString::from(token.as_str())),
        ..w.owner()
    };
    (w, c)
}

fn act(w: &World, c: &crate::Caller, id: &str, timeout_ms: Option<u64>) -> Answer {
    let call = crate::Call {
        pack_id: None,
        target: "rs.act".into(),
        args: crate::CallArgs::Named(vec![("id".into(), s(id))]),
        face: crate::Face::Json,
        timeout: timeout_ms.map(std::time::Duration::from_millis),
    };
    crate::pipeline::run(
        &w.rt,
        c,
        crate::pipeline::Subject::Verb(call),
        crate::pipeline::Mode::Exec(None),
    )
}

/// The resolver's own record and the tool's, by the ids the answer names.
fn records(w: &World, a: &Answer) -> (Value, Value) {
    let all = w.records();
    let by = |id: &Value| {
        all.iter()
            .find(|r| &r["id"] == id)
            .cloned()
            .unwrap_or(Value::Null)
    };
    let tool = by(&json!(a.result.audit_id));
    let resolver = by(&a.result.extra["resolver"]["audit_id"]);
    (tool, resolver)
}

#[test]
fn the_resource_is_the_resolvers_json_and_the_constraint_decides() {
    let (w, c) = world("rs.lookup");
    let a = act(&w, &c, r#"{"team": "red", "n": 1}"#, None);
    assert_eq!(code(&a), (None, 0), "{:?}", a.result);
    let (tool, resolver) = records(&w, &a);
    assert_eq!(tool["resolver"]["verb"], json!("rs.lookup"));
    assert_eq!(tool["resolver"]["code"], json!(null));
    // its own record: the same principal, its own verb, allowed
    assert_eq!(
        (
            &resolver["principal"],
            &resolver["verb_key"],
            &resolver["decision"]
        ),
        (&json!("agent"), &json!("lookup"), &json!("allow"))
    );
    let a = act(&w, &c, r#"{"team": "blue"}"#, None);
    assert_eq!(code(&a), (Some("resource_constraint"), 77));
    // a falsy resource is empty: the field is missing
    let a = act(&w, &c, "[]", None);
    assert_eq!(code(&a), (Some("resource_constraint"), 77));
    // `null` is "no such resource"
    let a = act(&w, &c, "null", None);
    assert_eq!(code(&a), (Some("resource_not_found"), 77));
    assert_eq!(
        a.result.extra["resolver"]["code"],
        json!("resource_not_found")
    );
}

/// `resolver_error`, with the resolver's own code in the answer and the record.
fn assert_resolver_error(w: &World, a: &Answer, received: &str, ran: bool) {
    assert_eq!(code(a), (Some("resolver_error"), 77), "{:?}", a.result);
    assert_eq!(a.result.extra["resolver"]["code"], json!(received));
    assert!(
        a.result.error.as_deref().unwrap_or("").contains("resolver"),
        "{:?}",
        a.result.error
    );
    let (tool, resolver) = records(w, a);
    assert_eq!(
        (&tool["decision"], &tool["code"]),
        (&json!("deny"), &json!("resolver_error"))
    );
    assert_eq!(tool["resolver"]["code"], json!(received));
    assert_eq!(resolver.is_null(), !ran, "{resolver}");
}

#[test]
fn a_write_resolver_is_refused_and_never_run() {
    let (w, c) = world("rs.wlookup");
    let before = w.records().len();
    let a = act(&w, &c, r#"{"team": "red"}"#, None);
    assert_resolver_error(&w, &a, "resolver_not_read", false);
    // one call record: the tool's refusal; the write never ran (the first call also
    // records the runtime policy and config.json it finds, as acts of authority)
    let calls: Vec<_> = w.records()[before..]
        .iter()
        .filter(|r| r["kind"] != json!("authority"))
        .cloned()
        .collect();
    assert_eq!(calls.len(), 1, "{calls:?}");
}

#[test]
fn a_resolver_that_prints_no_json_object_is_refused() {
    let (w, c) = world("rs.lookup");
    for out in ["not json", "[1, 2]", "\"text\"", "{\"a\": 1, \"a\": 2}"] {
        let a = act(&w, &c, out, None);
        assert_resolver_error(&w, &a, "resolver_output_invalid", true);
    }
}

#[test]
fn a_resolver_that_times_out_is_refused() {
    let (w, c) = world("rs.slow");
    let a = act(&w, &c, "5", Some(300));
    assert_resolver_error(&w, &a, "timeout", true);
    // the resolver's call is an intent and an outcome; the outcome says how it ended
    let id = &a.result.extra["resolver"]["audit_id"];
    let outcome = w
        .records()
        .into_iter()
        .find(|r| r["kind"] == json!("outcome") && &r["intent"] == id)
        .unwrap_or(Value::Null);
    assert_eq!(outcome["code"], json!("timeout"), "{outcome}");
}

#[test]
fn a_resolver_that_fails_is_refused() {
    let (w, c) = world("rs.fail");
    let a = act(&w, &c, "3", None);
    assert_resolver_error(&w, &a, "resolver_failed", true);
}

#[test]
fn a_resolver_that_is_not_active_is_refused() {
    let (w, c) = world("rs2.lookup");
    let a = act(&w, &c, r#"{"team": "red"}"#, None);
    assert_eq!(code(&a), (None, 0));
    std::fs::remove_file(w.home().root().join("state/active/rs2")).unwrap();
    let a = act(&w, &c, r#"{"team": "red"}"#, None);
    assert_resolver_error(&w, &a, "pack_inactive", true);
    // an unknown resolver verb answers the same way, with its own code
    w.config(Some(r#"{"resolvers": {"rs.act": "rs.nope"}}"#));
    let a = act(&w, &c, r#"{"team": "red"}"#, None);
    assert_resolver_error(&w, &a, "unknown_verb", true);
}

#[test]
fn a_resolver_the_principal_has_no_grant_for_is_refused() {
    let (w, c) = world("rs2.lookup");
    // the grant covers rs only: the tool passes step 4, its resolver does not
    w.rt.state()
        .revoke(
            &hcp_store::session::PrincipalId::parse("agent").unwrap(),
            &hcp_store::grant::PackScope::parse("*").unwrap(),
            &[],
        )
        .unwrap();
    w.grant(
        "agent",
        "rs",
        &[Capability::VerbExecRead, Capability::VerbExecWrite],
    );
    let a = act(&w, &c, r#"{"team": "red"}"#, None);
    assert_resolver_error(&w, &a, "missing_grant", true);
}

#[test]
fn a_resolver_resolves_nothing_itself_and_unwired_tools_say_so() {
    // the resolver's own tool has a constraint: its call is refused for want of a
    // resolver (no loop), and the tool's answer names it
    let (w, c) = world("rs.guarded");
    let a = act(&w, &c, r#"{"team": "red"}"#, None);
    assert_resolver_error(&w, &a, "no_resource_resolver", true);
    // without `resolvers`: no_resource_resolver, with a hint naming the key
    w.config(None);
    let a = act(&w, &c, r#"{"team": "red"}"#, None);
    assert_eq!(code(&a), (Some("no_resource_resolver"), 77));
    assert!(
        a.result
            .hint
            .as_deref()
            .unwrap_or("")
            .contains("\"resolvers\""),
        "{:?}",
        a.result.hint
    );
}

#[test]
fn a_bad_config_refuses_a_session_call_under_a_policy_at_step_7() {
    let (w, c) = world("rs.lookup");
    w.config(Some(r#"{"resolvers": {"rs.act": "nodot"}}"#));
    let a = act(&w, &c, r#"{"team": "red"}"#, None);
    assert_eq!(code(&a), (Some("bad_config"), 78));
    assert!(
        a.result.error.as_deref().unwrap_or("").contains("line 1"),
        "{:?}",
        a.result.error
    );
}
