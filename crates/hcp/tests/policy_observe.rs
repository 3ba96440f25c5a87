//! Observe mode (RUNTIME §11, issue 28): `"policy_mode": "observe"` in `config.json` runs
//! the runtime policy without enforcing it, one test per sentence of the contract: a call
//! it would refuse runs and its intent records `would_refuse: CODE` (the first refusal it
//! would have made); no `bind`, no output control, no counter spent, no approval taken;
//! the §4 checks (session, grants, land, confirm) are never observed only; `hcp doctor`
//! says when observe mode is on. Also: a `policy_mode` that is not understood refuses.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod exec_common;

use common::World;
use exec_common::{audit_records, exec_json_env, grant, last_audit, session, status};
use serde_json::{Value, json};
use std::process::Output;

const POLICY: &str = "schema_version: histos.policy/0.1
tools:
  polprobe.argv:
    args:
      value: {type: string, max_length: 3}
    bind: {value: principal.team}
  polprobe.count:
    args:
      value: {type: string}
    budget: 1
  polprobe.show:
    args: {path: {type: string}}
    returns:
      n: {type: integer}
    output: {strict: true, on_violation: deny}
  polprobe.pair:
    args:
      first: {type: string}
      second: {type: string}
    confirmation: {required: true}
  polprobe.wire:
    access: write
    args:
      to: {type: string}
      amount: {type: string}
roles:
  agent:
    allow: [polprobe.argv, polprobe.count, polprobe.show, polprobe.pair, polprobe.wire]
  guest:
    allow: []
";

fn world(mode: &str) -> World {
    let w = exec_common::world(&["polprobe"]);
    std::fs::write(w.hcp_home.join("policy.yaml"), POLICY).unwrap();
    grant(
        &w,
        "agent",
        "polprobe",
        &["verb.exec.read", "verb.exec.write"],
    );
    grant(&w, "guest", "polprobe", &["verb.exec.read"]);
    std::fs::write(
        w.hcp_home.join("config.json"),
        json!({"policy_mode": mode}).to_string(),
    )
    .unwrap();
    w
}

fn call(w: &World, token: &str, args: &[&str]) -> (Output, Value) {
    exec_json_env(w, args, &[("HCP_SESSION", token)])
}

fn intent_of(w: &World, v: &Value) -> Value {
    let id = v["audit_id"].as_str().unwrap();
    audit_records(w)
        .into_iter()
        .find(|r| r["id"] == id)
        .unwrap()
}

#[test]
fn a_call_the_policy_would_refuse_runs_and_records_its_first_refusal() {
    let w = world("observe");
    let guest = session(&w, "guest", &["--role", "guest", "--attr", "team=x"]);
    // The guest's role has no grant (rbac) and the value is too long (arg_schema): the
    // first refusal is rbac. (Without the attribute `bind` reads, it would have been
    // `arg_binding_unresolved`, which the engine checks first.)
    let (out, v) = call(&w, &guest, &["polprobe.argv", "toolong"]);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    assert_eq!(v["data"], json!(["--", "toolong"]));
    let intent = intent_of(&w, &v);
    assert_eq!(intent["would_refuse"], "rbac", "{intent}");
    assert_eq!(intent["policy_mode"], "observe");
    assert!(
        intent["policy_hash"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    // A call it would let through records no would_refuse.
    let agent = session(&w, "agent", &["--role", "agent", "--attr", "team=red"]);
    let (out, v) = call(&w, &agent, &["polprobe.count", "x"]);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    assert!(intent_of(&w, &v).get("would_refuse").is_none());
    // The same calls enforced: refused with the code observe mode recorded.
    std::fs::write(w.hcp_home.join("config.json"), "{}").unwrap();
    let (out, v) = call(&w, &guest, &["polprobe.argv", "toolong"]);
    assert_eq!((status(&out), &v["code"]), (77, &json!("rbac")), "{v}");
}

#[test]
fn observe_mode_binds_nothing() {
    let w = world("observe");
    let agent = session(&w, "agent", &["--role", "agent", "--attr", "team=red"]);
    let (out, v) = call(&w, &agent, &["polprobe.argv", "abc"]);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    assert_eq!(
        v["data"],
        json!(["--", "abc"]),
        "the caller's value, not the bound one"
    );
    std::fs::write(w.hcp_home.join("config.json"), "{}").unwrap();
    let (out, v) = call(&w, &agent, &["polprobe.argv", "abc"]);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    assert_eq!(
        v["data"],
        json!(["--", "red"]),
        "enforced, `bind` replaces it"
    );
}

#[test]
fn observe_mode_applies_no_output_control() {
    let w = world("observe");
    // The file the probe prints lies outside the view unless the operator gives it.
    let given = w.root().join("given");
    std::fs::create_dir(&given).unwrap();
    std::fs::write(
        w.hcp_home.join("config.json"),
        json!({"policy_mode": "observe", "packs": {"polprobe": {"read": [given]}}}).to_string(),
    )
    .unwrap();
    let agent = session(&w, "agent", &["--role", "agent"]);
    let path = given.join("out.json");
    std::fs::write(&path, json!({"n": "not a number"}).to_string()).unwrap();
    let (out, v) = call(
        &w,
        &agent,
        &["polprobe.show", "--path", path.to_str().unwrap()],
    );
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    assert_eq!(v["data"], json!({"n": "not a number"}));
    assert!(
        last_audit(&w).get("post_rule").is_none(),
        "no post-gate ran"
    );
}

#[test]
fn observe_mode_spends_no_counter() {
    let w = world("observe");
    let agent = session(&w, "agent", &["--role", "agent"]);
    for _ in 0..3 {
        let (out, v) = call(&w, &agent, &["polprobe.count", "x"]);
        assert_eq!(status(&out), 0, "{}", w.render(&out));
        let intent = intent_of(&w, &v);
        assert!(intent.get("spends").is_none(), "{intent}");
    }
    // Enforced now: the budget of 1 is whole, so one call passes, then `budget`.
    std::fs::write(w.hcp_home.join("config.json"), "{}").unwrap();
    let (out, _) = call(&w, &agent, &["polprobe.count", "x"]);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    let (out, v) = call(&w, &agent, &["polprobe.count", "x"]);
    assert_eq!((status(&out), &v["code"]), (77, &json!("budget")), "{v}");
}

#[test]
fn observe_mode_takes_and_asks_for_no_approval() {
    let w = world("observe");
    let agent = session(&w, "agent", &["--role", "agent"]);
    let (out, v) = call(&w, &agent, &["polprobe.pair", "a", "b"]);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    assert_eq!(intent_of(&w, &v)["would_refuse"], "requires_confirmation");
    let out = w.run(&["approvals", "--all", "--json"]);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list, json!([]), "no approval was requested");
}

#[test]
fn the_gates_own_checks_are_never_observed_only() {
    let w = world("observe");
    // Grants: the guest holds no write grant.
    let guest = session(&w, "guest", &["--role", "guest"]);
    let (out, v) = call(&w, &guest, &["polprobe.wire", "bob", "5", "--confirm"]);
    assert_eq!(
        (status(&out), &v["code"]),
        (77, &json!("missing_grant")),
        "{v}"
    );
    // Confirm: a confirm-gated write without --confirm.
    let agent = session(&w, "agent", &["--role", "agent"]);
    let (out, v) = call(&w, &agent, &["polprobe.wire", "bob", "5"]);
    assert_eq!(
        (status(&out), &v["code"]),
        (77, &json!("confirm_required")),
        "{v}"
    );
    // Session: a bad token.
    let (out, v) = call(&w, "not-a-token", &["polprobe.count", "x"]);
    assert_eq!(
        (status(&out), &v["code"]),
        (77, &json!("bad_session")),
        "{v}"
    );
    // Land: a brain-land call needs a project (none here), so a local check instead:
    // the confirmed write runs, recorded as observed.
    let (out, v) = call(&w, &agent, &["polprobe.wire", "bob", "5", "--confirm"]);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    assert_eq!(intent_of(&w, &v)["policy_mode"], "observe");
}

#[test]
fn doctor_says_when_observe_mode_is_on() {
    let w = world("observe");
    let out = w.run(&["doctor"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains("observe: not enforced"), "{text}");
    assert!(text.contains("`policy_mode` is `observe`"), "{text}");
    let out = w.run(&["doctor", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["runtime_policy"]["mode"], "observe", "{v}");
    std::fs::write(w.hcp_home.join("config.json"), "{}").unwrap();
    let out = w.run(&["doctor"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(!text.contains("observe"), "{text}");
}

#[test]
fn a_policy_mode_that_is_not_understood_refuses_every_session_call() {
    let w = world("observe");
    let agent = session(&w, "agent", &["--role", "agent"]);
    // After the session start: an owner's act under a `config.json` that does not load is
    // refused itself.
    std::fs::write(
        w.hcp_home.join("config.json"),
        json!({"policy_mode": "audit"}).to_string(),
    )
    .unwrap();
    let (out, v) = call(&w, &agent, &["polprobe.count", "x"]);
    assert_eq!(
        (status(&out), &v["code"]),
        (78, &json!("bad_config")),
        "{v}"
    );
}
