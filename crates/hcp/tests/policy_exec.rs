//! The operator's runtime policy in `hcp exec` (RUNTIME §5 step 7, §7), end to end through
//! the built `hcp`: session principals under `$HCP_HOME/policy.json|yaml` — RBAC with
//! inheritance, deny-by-default for unlisted verbs, the closed argument contract, `bind`
//! from session attributes, canaries and checksum secrets in arguments, `rate_limit` and
//! `budget` shared by concurrent processes and kept across runs, owner approvals, the
//! output post-gate, the audit fields, and a policy that does not load stopping every
//! exec.
//!
//! The verbs are those of the `polprobe` fixture pack (`hcp-example-probe` echoing its
//! argv, or printing a file); the policies are in `tests/fixtures/policies/`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "../../../tests/histos-conformance/corpus.rs"]
mod corpus;
mod exec_common;

use common::World;
use exec_common::{
    assert_audit_clean, assert_refused, audit_calls, envelope_env, exec_json, exec_json_env, grant,
    last_audit, session, status,
};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

/// A fixture policy (`tests/fixtures/policies/NAME`).
fn policy_fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/policies")
        .join(name)
}

/// A world with `polprobe` installed and active, `agent` and `other` granted every exec
/// capability on every pack, and the fixture policy `name` as the store's runtime policy
/// (`policy.json` or `policy.yaml` after the fixture's extension).
fn world(name: &str) -> World {
    let w = exec_common::world(&["polprobe"]);
    for p in ["agent", "other"] {
        grant(&w, p, "*", &["verb.exec.read", "verb.exec.write"]);
    }
    set_policy(&w, name);
    w
}

/// Puts fixture policy `name` in the store (replacing any other).
fn set_policy(w: &World, name: &str) {
    let ext = Path::new(name).extension().unwrap().to_str().unwrap();
    write_policy(
        w,
        ext,
        &std::fs::read_to_string(policy_fixture(name)).unwrap(),
    );
}

/// Writes `text` as the store's `policy.EXT`, removing the other spelling.
fn write_policy(w: &World, ext: &str, text: &str) {
    for e in ["json", "yaml"] {
        let _ = std::fs::remove_file(w.hcp_home.join(format!("policy.{e}")));
    }
    std::fs::write(w.hcp_home.join(format!("policy.{ext}")), text).unwrap();
}

/// The store's runtime policy file.
fn policy_path(w: &World) -> PathBuf {
    ["json", "yaml"]
        .iter()
        .map(|e| w.hcp_home.join(format!("policy.{e}")))
        .find(|p| p.exists())
        .expect("a runtime policy in the store")
}

/// `hcp policy hash` of the store's policy.
fn policy_hash(w: &World) -> String {
    let out = w.run(&["policy", "hash", &policy_path(w).display().to_string()]);
    assert!(out.status.success(), "{}", w.render(&out));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// `hcp exec --json ARGS…` as the session `token`.
fn as_session(w: &World, token: &str, args: &[&str]) -> (Output, Value) {
    exec_json_env(w, args, &[("HCP_SESSION", token)])
}

/// An envelope call as the session `token`.
fn envelope_as(w: &World, token: &str, env: &Value) -> (Output, Value) {
    envelope_env(w, env.to_string().as_bytes(), &[("HCP_SESSION", token)])
}

/// Asserts a successful run whose child printed `["--", values…]` (probe argv).
fn assert_ran_with(w: &World, out: &Output, v: &Value, values: &[&str]) {
    assert_eq!(status(out), 0, "{}", w.render(out));
    assert_eq!(v["ok"], json!(true), "{v}");
    let mut want = vec!["--"];
    want.extend_from_slice(values);
    assert_eq!(v["data"], json!(want), "{v}");
}

/// Asserts a runtime-policy refusal: exit 77, `code`, nothing ran, and an audit record
/// `deny` with that code and `rule`, carrying the policy hash.
fn assert_policy_refused(w: &World, out: &Output, v: &Value, code: &str) {
    assert_refused(w, out, v, code, 77);
    let rec = last_audit(w);
    assert_eq!(rec["decision"], json!("deny"), "{rec}");
    assert_eq!(rec["code"], json!(code), "{rec}");
    assert_eq!(
        rec["id"], v["audit_id"],
        "the answer names its record: {rec}"
    );
}

// ---------------------------------------------------------------- RBAC and the contract

#[test]
fn rbac_allows_a_granted_role_and_denies_the_others() {
    let w = world("rbac.yaml");
    let reader = session(&w, "agent", &["--role", "reader"]);
    let (out, v) = as_session(&w, &reader, &["polprobe.argv", "--value", "hi"]);
    assert_ran_with(&w, &out, &v, &["hi"]);
    let rec = last_audit(&w);
    assert_eq!(
        (rec["decision"].as_str(), rec["rule"].as_str()),
        (Some("allow"), Some("allow")),
        "{rec}"
    );
    // reader has no grant for wire
    let (out, v) = as_session(
        &w,
        &reader,
        &["polprobe.wire", "--to", "bob", "--amount", "5", "--confirm"],
    );
    assert_policy_refused(&w, &out, &v, "rbac");
    // a role the policy has no grants for, an undeclared role, no role at all: each
    // said as what it is, with the step that fixes it
    for (extra, said, hint) in [
        (
            &["--role", "auditor"][..],
            "role `auditor` of `",
            "the owner allows `polprobe.argv` for role `auditor` under `roles:`",
        ),
        (
            &["--role", "nobody"][..],
            "role `nobody` is not in `",
            "the owner allows `polprobe.argv` for role `nobody` under `roles:`",
        ),
        (
            &[][..],
            "the session has no role, and `",
            "start the session with `hcp session start --principal ID --role ROLE`",
        ),
    ] {
        let t = session(&w, "agent", extra);
        let (out, v) = as_session(&w, &t, &["polprobe.argv", "--value", "hi"]);
        assert_policy_refused(&w, &out, &v, "rbac");
        assert_eq!(last_audit(&w)["rule"], json!("rbac"));
        let text = v.to_string();
        assert!(text.contains(said) && text.contains(hint), "{v}");
    }
}

#[test]
fn a_role_inherits_its_parents_grants() {
    let w = world("rbac.yaml");
    let clerk = session(&w, "agent", &["--role", "clerk"]);
    // inherited from reader
    let (out, v) = as_session(&w, &clerk, &["polprobe.argv", "--value", "hi"]);
    assert_ran_with(&w, &out, &v, &["hi"]);
    // its own
    let (out, v) = as_session(
        &w,
        &clerk,
        &["polprobe.wire", "--to", "bob", "--amount", "5", "--confirm"],
    );
    assert_ran_with(&w, &out, &v, &["bob", "5"]);
    // inheritance is one way: the parent does not get the child's grant
    let reader = session(&w, "agent", &["--role", "reader"]);
    let (out, v) = as_session(
        &w,
        &reader,
        &["polprobe.wire", "--to", "bob", "--amount", "5", "--confirm"],
    );
    assert_policy_refused(&w, &out, &v, "rbac");
}

#[test]
fn an_unlisted_verb_is_unknown_tool_for_sessions_and_free_for_the_owner() {
    let w = world("rbac.yaml");
    let clerk = session(&w, "agent", &["--role", "clerk"]);
    for verb in ["polprobe.note", "polprobe.show"] {
        let arg = if verb.ends_with("note") {
            ["--value", "x"]
        } else {
            ["--path", "/dev/null"]
        };
        let (out, v) = as_session(&w, &clerk, &[verb, arg[0], arg[1]]);
        assert_policy_refused(&w, &out, &v, "unknown_tool");
    }
    // the owner answers to §4 alone: the policy does not govern its calls
    let (out, v) = exec_json(&w, &["polprobe.note", "--value", "x"]);
    assert_ran_with(&w, &out, &v, &["x"]);
    let rec = last_audit(&w);
    assert_eq!(rec["principal"], json!("owner"), "{rec}");
    assert_eq!(rec["decision"], json!("allow"), "{rec}");
    assert!(rec.get("rule").is_none_or(Value::is_null), "{rec}");
    // an owner call outside the policy's contract is not checked either
    let (out, v) = exec_json(&w, &["polprobe.argv", "--value", "far more than sixteen"]);
    assert_ran_with(&w, &out, &v, &["far more than sixteen"]);
}

#[test]
fn the_policy_only_refuses_more_than_the_section_4_checks() {
    let w = world("rbac.yaml");
    // a principal the policy would allow but hcp has not granted: §4 refuses first
    let t = session(&w, "stranger", &["--role", "reader"]);
    let (out, v) = as_session(&w, &t, &["polprobe.argv", "--value", "hi"]);
    assert_refused(&w, &out, &v, "missing_grant", 77);
    assert!(last_audit(&w).get("rule").is_none_or(Value::is_null));
    // an argument the verb does not have: §5.3 refuses before the policy is asked
    let reader = session(&w, "agent", &["--role", "reader"]);
    let (out, v) = as_session(
        &w,
        &reader,
        &["polprobe.argv", "--value", "hi", "--extra", "1"],
    );
    assert_eq!(status(&out), 65, "{}", w.render(&out));
    assert_eq!(v["ok"], json!(false));
    // the pack's own confirm gate (§4.5) still applies to a policy-allowed write
    let clerk = session(&w, "agent", &["--role", "clerk"]);
    let (out, v) = as_session(
        &w,
        &clerk,
        &["polprobe.wire", "--to", "bob", "--amount", "5"],
    );
    assert_refused(&w, &out, &v, "confirm_required", 77);
}

#[test]
fn the_argument_contract_is_closed_and_checked() {
    let w = world("rbac.yaml");
    let reader = session(&w, "agent", &["--role", "reader"]);
    // `pair` declares only `first`: the verb's `second` is an undeclared argument
    let (out, v) = as_session(
        &w,
        &reader,
        &["polprobe.pair", "--first", "a", "--second", "b"],
    );
    assert_policy_refused(&w, &out, &v, "arg_schema");
    assert!(
        v["error"].as_str().unwrap().contains("`second`"),
        "names the field: {v}"
    );
    // a declared bound: max_length 16
    let (out, v) = as_session(
        &w,
        &reader,
        &["polprobe.argv", "--value", "seventeen chars!!"],
    );
    assert_policy_refused(&w, &out, &v, "arg_schema");
    let (out, v) = as_session(
        &w,
        &reader,
        &["polprobe.argv", "--value", "sixteen chars!!!"],
    );
    assert_ran_with(&w, &out, &v, &["sixteen chars!!!"]);
    // a type: the envelope's number is not the declared string
    let (out, v) = envelope_as(
        &w,
        &reader,
        &json!({"pack_id": "polprobe", "verb_key": "argv", "args": {"value": 12}}),
    );
    assert_policy_refused(&w, &out, &v, "arg_schema");
    // a tool with no `args` block is denied outright
    let (out, v) = as_session(&w, &reader, &["polprobe.count", "--value", "1"]);
    assert_policy_refused(&w, &out, &v, "no_arg_schema");
}

// ---------------------------------------------------------------- bind

#[test]
fn bind_puts_the_session_attribute_in_the_childs_argv() {
    let w = world("bind.yaml");
    let acme = session(&w, "agent", &["--role", "agent", "--attr", "tenant=acme"]);
    // the caller's value is overwritten before any check, and the child gets the bound one
    let (out, v) = as_session(&w, &acme, &["polprobe.argv", "--value", "globex"]);
    assert_ran_with(&w, &out, &v, &["acme"]);
    assert!(
        !v["stdout"].as_str().unwrap().contains("globex"),
        "the spoofed value reached the child: {v}"
    );
    // another session of the same principal, another tenant
    let initech = session(
        &w,
        "agent",
        &["--role", "agent", "--attr", "tenant=initech"],
    );
    let (out, v) = as_session(&w, &initech, &["polprobe.argv", "--value", "acme"]);
    assert_ran_with(&w, &out, &v, &["initech"]);
    // no such attribute: fail closed, never an empty value
    let bare = session(&w, "agent", &["--role", "agent", "--attr", "team=blue"]);
    let (out, v) = as_session(&w, &bare, &["polprobe.argv", "--value", "acme"]);
    assert_policy_refused(&w, &out, &v, "arg_binding_unresolved");
    assert!(v["error"].as_str().unwrap().contains("tenant"), "{v}");
    // the owner's own call is not bound
    let (out, v) = exec_json(&w, &["polprobe.argv", "--value", "globex"]);
    assert_ran_with(&w, &out, &v, &["globex"]);
}

// ---------------------------------------------------------------- canaries and secrets

#[test]
fn a_canary_in_an_argument_is_denied_verbatim_full_width_or_zero_width() {
    let w = world("scan.json");
    let t = session(&w, "agent", &["--role", "agent"]);
    for value in [
        "here it is: CANARY-7f3a-DO-NOT-LEAK",
        // full-width letters (NFKC folds them)
        "\u{ff23}\u{ff21}\u{ff2e}\u{ff21}\u{ff32}\u{ff39}-7f3a-DO-NOT-LEAK",
        // every character full-width, the hyphens too
        "\u{ff23}\u{ff21}\u{ff2e}\u{ff21}\u{ff32}\u{ff39}\u{ff0d}\u{ff17}\u{ff46}\u{ff13}\u{ff41}\u{ff0d}\u{ff24}\u{ff2f}\u{ff0d}\u{ff2e}\u{ff2f}\u{ff34}\u{ff0d}\u{ff2c}\u{ff25}\u{ff21}\u{ff2b}",
        // zero-width space, non-joiner, word joiner inside the token
        "CAN\u{200b}ARY-7f3a-DO\u{200c}-NOT-LE\u{2060}AK",
        // a byte-order mark and a zero-width joiner
        "CANARY\u{feff}-7f3a-DO-NOT-LEAK\u{200d}",
    ] {
        let (out, v) = as_session(&w, &t, &["polprobe.argv", "--value", value]);
        assert_policy_refused(&w, &out, &v, "canary_exfil");
        // the refusal does not echo the token back
        assert!(
            !String::from_utf8_lossy(&out.stdout).contains("CANARY-7f3a-DO-NOT-LEAK"),
            "{v}"
        );
    }
    // only a full-width prefix of the token: not a canary
    let prefix =
        "\u{ff23}\u{ff21}\u{ff2e}\u{ff21}\u{ff32}\u{ff39}\u{ff0d}\u{ff17}\u{ff46}\u{ff13}\u{ff41}";
    let (out, v) = as_session(&w, &t, &["polprobe.argv", "--value", prefix]);
    assert_ran_with(&w, &out, &v, &[prefix]);
    // split across the two arguments of one call: the blob is joined, then normalised
    let (out, v) = as_session(
        &w,
        &t,
        &[
            "polprobe.pair",
            "--first",
            "CANARY-7f3a",
            "--second",
            "DO-NOT-LEAK",
        ],
    );
    assert_policy_refused(&w, &out, &v, "canary_exfil");
    // an innocent value passes
    let (out, v) = as_session(&w, &t, &["polprobe.argv", "--value", "canary bird"]);
    assert_ran_with(&w, &out, &v, &["canary bird"]);
}

#[test]
fn a_card_number_split_across_two_arguments_is_denied() {
    // HISTOS-ENGINE §4: the argument blob joins values with single spaces, so the halves
    // of a PAN in two arguments read as one space-grouped PAN: secret_detected.
    let w = world("scan.json");
    let t = session(&w, "agent", &["--role", "agent"]);
    let (out, v) = as_session(
        &w,
        &t,
        &[
            "polprobe.pair",
            "--first",
            "4111 1111",
            "--second",
            "1111 1111",
        ],
    );
    assert_policy_refused(&w, &out, &v, "secret_detected");
    let (out, v) = as_session(
        &w,
        &t,
        &[
            "polprobe.pair",
            "--first",
            "41111111",
            "--second",
            "11111111",
        ],
    );
    assert_policy_refused(&w, &out, &v, "secret_detected");
    // one digit off the Luhn check: not a card
    let (out, v) = as_session(
        &w,
        &t,
        &[
            "polprobe.pair",
            "--first",
            "4111 1111",
            "--second",
            "1111 1112",
        ],
    );
    assert_ran_with(&w, &out, &v, &["4111 1111", "1111 1112"]);
}

#[test]
fn an_integer_argument_that_is_a_valid_card_number_is_denied() {
    let w = world("scan.json");
    let t = session(&w, "agent", &["--role", "agent"]);
    let call = |n: Value| {
        envelope_as(
            &w,
            &t,
            &json!({"pack_id": "polprobe", "verb_key": "count", "args": {"value": n}}),
        )
    };
    let (out, v) = call(json!(4111111111111111u64));
    assert_policy_refused(&w, &out, &v, "secret_detected");
    // as a string on the CLI face too
    let (out, v) = as_session(&w, &t, &["polprobe.argv", "--value", "4111111111111111"]);
    assert_policy_refused(&w, &out, &v, "secret_detected");
    // a Luhn-invalid number runs, and reaches the child as its digits
    let (out, v) = call(json!(4111111111111112u64));
    assert_ran_with(&w, &out, &v, &["4111111111111112"]);
}

// ---------------------------------------------------------------- limits

/// `hcp exec --json ARGS…` as session `token`, spawned (not waited for).
fn spawn_exec(w: &World, token: &str, args: &[&str]) -> Child {
    Command::new(common::hcp_bin())
        .env_clear()
        .env("HOME", &w.home)
        .env("HCP_HOME", &w.hcp_home)
        .env("PATH", w.path_var())
        .env("LANG", "C")
        .env("NO_COLOR", "1")
        .env("HCP_SESSION", token)
        .current_dir(&w.work)
        .arg("exec")
        .arg("--json")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn four_parallel_processes_racing_a_rate_limit_of_5_get_exactly_5() {
    let w = world("limits.yaml");
    let t = session(&w, "agent", &["--role", "agent"]);
    let mut allowed = Vec::new();
    let mut limited = 0;
    // three rounds of 4 concurrent hcp processes: 12 calls inside the 60 s window
    for round in 0..3 {
        let children: Vec<Child> = (0..4)
            .map(|i| {
                let value = format!("r{round}c{i}");
                spawn_exec(&w, &t, &["polprobe.count", "--value", &value])
            })
            .collect();
        for c in children {
            let out = c.wait_with_output().unwrap();
            let v: Value = serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|e| panic!("{e}:\n{}", w.render(&out)));
            match status(&out) {
                0 => allowed.push(v["data"][1].as_str().unwrap().to_owned()),
                77 => {
                    assert_eq!(v["code"], json!("rate_limit"), "{v}");
                    limited += 1;
                }
                s => panic!("unexpected exit {s}:\n{}", w.render(&out)),
            }
        }
        if round == 0 {
            assert_eq!(allowed.len(), 4, "the first 4 fit in the limit");
        }
    }
    assert_eq!((allowed.len(), limited), (5, 7), "allowed: {allowed:?}");
    // the audit agrees, and the concurrent appends kept the chain linear
    let recs: Vec<Value> = audit_calls(&w)
        .into_iter()
        .filter(|r| r["verb_key"] == json!("count"))
        .collect();
    assert_eq!(recs.len(), 12);
    assert_eq!(
        recs.iter()
            .filter(|r| r["decision"] == json!("allow"))
            .count(),
        5
    );
    assert_eq!(
        recs.iter()
            .filter(|r| r["code"] == json!("rate_limit"))
            .count(),
        7
    );
    assert_audit_clean(&w);
    // per principal: another one has its own window
    let o = session(&w, "other", &["--role", "agent"]);
    let (out, v) = as_session(&w, &o, &["polprobe.count", "--value", "x"]);
    assert_ran_with(&w, &out, &v, &["x"]);
    // and a new session of the first principal does not reset it
    let t2 = session(&w, "agent", &["--role", "agent"]);
    let (out, v) = as_session(&w, &t2, &["polprobe.count", "--value", "x"]);
    assert_policy_refused(&w, &out, &v, "rate_limit");
}

#[test]
fn a_budget_is_kept_across_runs_and_sessions() {
    let w = world("limits.yaml");
    let t = session(&w, "agent", &["--role", "agent"]);
    for i in 0..3 {
        let value = format!("call{i}");
        let (out, v) = as_session(&w, &t, &["polprobe.argv", "--value", &value]);
        assert_ran_with(&w, &out, &v, &[&value]);
    }
    let (out, v) = as_session(&w, &t, &["polprobe.argv", "--value", "call3"]);
    assert_policy_refused(&w, &out, &v, "budget");
    // a new session of the same principal: still spent
    let t2 = session(&w, "agent", &["--role", "agent"]);
    let (out, v) = as_session(&w, &t2, &["polprobe.argv", "--value", "call4"]);
    assert_policy_refused(&w, &out, &v, "budget");
    // refused calls did not count for anyone else
    let o = session(&w, "other", &["--role", "agent"]);
    let (out, v) = as_session(&w, &o, &["polprobe.argv", "--value", "mine"]);
    assert_ran_with(&w, &out, &v, &["mine"]);
    // the owner is not counted nor limited
    for _ in 0..4 {
        let (out, v) = exec_json(&w, &["polprobe.argv", "--value", "owner"]);
        assert_ran_with(&w, &out, &v, &["owner"]);
    }
}

// ---------------------------------------------------------------- confirmation

const WIRE: [&str; 6] = ["polprobe.wire", "--to", "bob", "--amount", "5", "--confirm"];

/// A paused call: asserts `requires_confirmation` with an approval id, returns the id.
fn paused(w: &World, token: &str, args: &[&str]) -> String {
    let (out, v) = as_session(w, token, args);
    assert_policy_refused(w, &out, &v, "requires_confirmation");
    let id = v["approval_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no approval_id: {v}"))
        .to_owned();
    assert!(id.starts_with("apr_"), "{id}");
    assert_eq!(last_audit(w)["approval_id"], json!(id));
    id
}

/// `hcp approvals --all --json`: the approval `id`.
fn approval(w: &World, id: &str) -> Value {
    let out = w.run(&["approvals", "--all", "--json"]);
    assert!(out.status.success(), "{}", w.render(&out));
    let list: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    list.into_iter()
        .find(|a| a["id"] == json!(id))
        .unwrap_or_else(|| panic!("no approval {id}"))
}

/// `hcp approve ID` by the owner, asserting success.
fn approve(w: &World, id: &str) {
    let out = w.run(&["approve", id]);
    assert!(out.status.success(), "{}", w.render(&out));
}

#[test]
fn a_confirmation_is_approved_by_the_owner_and_passes_once() {
    let w = world("confirm.yaml");
    let clerk = session(&w, "agent", &["--role", "clerk"]);
    let id = paused(&w, &clerk, &WIRE);
    // asking again returns the same pending request
    assert_eq!(paused(&w, &clerk, &WIRE), id);
    // the owner sees it, with tool, principal and an argument summary
    let out = w.run(&["approvals"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{}", w.render(&out));
    for want in [
        id.as_str(),
        "pending",
        "agent",
        "polprobe.wire",
        "to=\"bob\"",
    ] {
        assert!(text.contains(want), "`{want}` not in:\n{text}");
    }
    let a = approval(&w, &id);
    assert_eq!(
        (
            a["tool"].as_str(),
            a["principal"].as_str(),
            a["state"].as_str()
        ),
        (Some("polprobe.wire"), Some("agent"), Some("pending")),
        "{a}"
    );
    assert_eq!(a["summary"], json!({"to": "bob", "amount": "5"}), "{a}");
    assert_eq!(a["window_s"], json!(60), "{a}");
    // the agent cannot approve (nor list) for itself
    for args in [&["approve", id.as_str()][..], &["approvals"][..]] {
        let out = w
            .hcp()
            .args(args)
            .env("HCP_SESSION", &clerk)
            .output()
            .unwrap();
        assert_eq!(status(&out), 77, "{}", w.render(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("owner_only"),
            "{}",
            w.render(&out)
        );
    }
    assert_eq!(approval(&w, &id)["state"], json!("pending"));
    // the owner approves
    approve(&w, &id);
    assert_eq!(approval(&w, &id)["state"], json!("approved"));
    // now the same call passes, once
    let (out, v) = as_session(&w, &clerk, &WIRE);
    assert_ran_with(&w, &out, &v, &["bob", "5"]);
    let rec = last_audit(&w);
    assert_eq!(
        (rec["rule"].as_str(), rec["approval_id"].as_str()),
        (Some("confirmed"), Some(id.as_str())),
        "{rec}"
    );
    assert_eq!(approval(&w, &id)["state"], json!("used"));
    // replayed: paused again, under a new request
    let again = paused(&w, &clerk, &WIRE);
    assert_ne!(again, id, "a used approval is not handed out again");
    // and the used one cannot be approved again
    let out = w.run(&["approve", &id]);
    assert_eq!(status(&out), 1, "{}", w.render(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("approval_used"));
    // an unknown id
    let out = w.run(&["approve", "apr_00000000000000000000"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown_approval"));
    assert_audit_clean(&w);
}

/// A spent approval's `.used` marker removed by hand does not make it spendable again:
/// the state ledger says a call spent it, so the approval is damaged — the call it was
/// for is refused (`confirm_error`, naming the file), other calls go on, and `hcp doctor`
/// lists it with its repair (RUNTIME §4 "Fault isolation"; docs/DESIGN.md).
#[test]
fn a_spent_approval_whose_marker_is_removed_is_not_spent_again() {
    let w = world("confirm.yaml");
    let clerk = session(&w, "agent", &["--role", "clerk"]);
    let id = paused(&w, &clerk, &WIRE);
    approve(&w, &id);
    let (out, v) = as_session(&w, &clerk, &WIRE);
    assert_ran_with(&w, &out, &v, &["bob", "5"]);
    let marker = w
        .hcp_home
        .join("state/approvals")
        .join(format!("{id}.used"));
    assert!(marker.is_file(), "{}", marker.display());
    std::fs::remove_file(&marker).unwrap();
    // Answered as a damaged approval is today: the confirmation fails, naming the file.
    let (out, v) = as_session(&w, &clerk, &WIRE);
    assert_eq!(v["code"], json!("confirm_error"), "{}", w.render(&out));
    let e = v["error"].as_str().unwrap_or("");
    assert!(
        e.contains(&format!("approvals/{id}.json` is damaged")) && e.contains("was removed"),
        "names the approval: {v}"
    );
    // Another call goes on: it asks for its own approval.
    let other = paused(
        &w,
        &clerk,
        &["polprobe.wire", "--to", "bob", "--amount", "6", "--confirm"],
    );
    assert_ne!(other, id);
    let out = w.run(&["doctor"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("damaged ")).collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert!(
        lines[0].contains("damaged approval") && lines[0].contains(".used` was removed"),
        "{text}"
    );
}

/// The whole `state/` directory copied back from before a spend (the approval approved,
/// no `.used` marker, the ledger that did not know of one): the spend's note of its
/// marker moved the trail's anchor past that ledger, so nothing it vouches for is
/// believed and the call does not run a second time; the owner's calls go on.
#[test]
fn a_state_directory_put_back_from_before_a_spend_does_not_spend_it_again() {
    let w = world("confirm.yaml");
    let clerk = session(&w, "agent", &["--role", "clerk"]);
    let id = paused(&w, &clerk, &WIRE);
    approve(&w, &id);
    let state = w.hcp_home.join("state");
    let backup = w.hcp_home.parent().unwrap().join("state-backup");
    let copied = std::process::Command::new("cp")
        .args(["-a", state.to_str().unwrap(), backup.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(copied.success());
    let (out, v) = as_session(&w, &clerk, &WIRE);
    assert_ran_with(&w, &out, &v, &["bob", "5"]);
    std::fs::remove_dir_all(&state).unwrap();
    let copied = std::process::Command::new("cp")
        .args(["-a", backup.to_str().unwrap(), state.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(copied.success());
    assert!(!state.join(format!("approvals/{id}.used")).exists());
    let (out, v) = as_session(&w, &clerk, &WIRE);
    assert_eq!(v["code"], json!("store_damaged"), "{}", w.render(&out));
    assert!(v.to_string().contains("older than"), "{v}");
    let o = w.run(&["audit", "tail", "--json", "-n", "50"]);
    let records: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap();
    let spends = records
        .iter()
        .filter(|r| r["kind"] == "intent" && r.to_string().contains(&id))
        .count();
    assert_eq!(spends, 1, "one intent spent it: {records:?}");
}

#[test]
fn an_approval_is_bound_to_its_arguments_and_principal() {
    let w = world("confirm.yaml");
    let clerk = session(&w, "agent", &["--role", "clerk"]);
    let id = paused(&w, &clerk, &WIRE);
    approve(&w, &id);
    // different arguments: not this approval
    let other_args = paused(
        &w,
        &clerk,
        &[
            "polprobe.wire",
            "--to",
            "bob",
            "--amount",
            "50000",
            "--confirm",
        ],
    );
    assert_ne!(other_args, id);
    let other_to = paused(
        &w,
        &clerk,
        &[
            "polprobe.wire",
            "--to",
            "mallory",
            "--amount",
            "5",
            "--confirm",
        ],
    );
    assert_ne!(other_to, id);
    // another principal, same role and arguments: not this approval
    let other = session(&w, "other", &["--role", "clerk"]);
    let theirs = paused(&w, &other, &WIRE);
    assert_ne!(theirs, id);
    assert_eq!(approval(&w, &theirs)["principal"], json!("other"));
    // none of them used it up: the approved call itself still passes, once
    assert_eq!(approval(&w, &id)["state"], json!("approved"));
    let (out, v) = as_session(&w, &clerk, &WIRE);
    assert_ran_with(&w, &out, &v, &["bob", "5"]);
    let _ = paused(&w, &clerk, &WIRE);
}

#[test]
fn an_approval_expires() {
    let w = world("confirm.yaml");
    let clerk = session(&w, "agent", &["--role", "clerk"]);
    let id = paused(&w, &clerk, &WIRE);
    approve(&w, &id);
    // Test technique, not a sleep: the approval's file is rewritten so that it was granted
    // long before its 60 s window; hcp must then treat it as expired.
    let file = w
        .hcp_home
        .join("state")
        .join("approvals")
        .join(format!("{id}.json"));
    let mut a: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert!(a["approved_at"].is_string(), "{a}");
    a["approved_at"] = json!("2000-01-01T00:00:00Z");
    // hcp would refuse a file edited by hand: the test writes it with its MAC, as hcp does.
    let home = hcp_store::Home::open(&w.hcp_home).unwrap();
    hcp_store::stamp::write(
        &home,
        &hcp_store::StoreLock::acquire(&home).unwrap(),
        &file,
        &a,
    )
    .unwrap();
    assert_eq!(approval(&w, &id)["state"], json!("expired"));
    let again = paused(&w, &clerk, &WIRE);
    assert_ne!(again, id);
    let out = w.run(&["approve", &id]);
    assert!(!out.status.success(), "{}", w.render(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("approval_expired"));
    // the pending list no longer shows it
    let out = w.run(&["approvals", "--json"]);
    let list: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert!(list.iter().all(|x| x["id"] != json!(id)), "{list:?}");
}

#[test]
fn an_approval_does_not_survive_a_policy_change() {
    let w = world("confirm.yaml");
    let clerk = session(&w, "agent", &["--role", "clerk"]);
    let id = paused(&w, &clerk, &WIRE);
    approve(&w, &id);
    // a different policy (another hash): the approval was granted under the old one
    let text = std::fs::read_to_string(policy_fixture("confirm.yaml"))
        .unwrap()
        .replace("expires_in: 60", "expires_in: 120");
    write_policy(&w, "yaml", &text);
    let again = paused(&w, &clerk, &WIRE);
    assert_ne!(again, id);
}

// ---------------------------------------------------------------- output post-gate

/// Writes `name` holding `text` where a `personal` call of `polprobe` by principal `agent`
/// (and by the owner) reads it: its tenant home, `/home/hcp` in its view (RUNTIME §5.2).
/// Returns the path in the view.
fn in_agents_home(w: &World, name: &str, text: &str) -> String {
    for principal in ["agent", "owner"] {
        let home = w.hcp_home.join("homes/polprobe/principal").join(principal);
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(home.join(name), text).unwrap();
    }
    format!("/home/hcp/{name}")
}

/// Writes the JSON the `show` verb will print, and returns its path in the call's view.
fn output_file(w: &World, v: &Value) -> String {
    in_agents_home(w, "out.json", &v.to_string())
}

#[test]
fn the_output_post_gate_projects_redacts_and_respects_can_view() {
    let w = world("output.yaml");
    let path = output_file(
        &w,
        &json!({
            "name": "Ann",
            "email": "ann@example.com",
            "note": "see CANARY-7f3a-DO-NOT-LEAK and card 4111 1111 1111 1111",
            "ssn": "078-05-1120",
            "internal": {"token": "abc"}
        }),
    );
    let t = session(&w, "agent", &["--role", "agent"]);
    let (out, v) = as_session(&w, &t, &["polprobe.show", "--path", &path]);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    let d = &v["data"];
    // projected: only the declared keys
    let mut keys: Vec<&str> = d.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["email", "name", "note"], "{v}");
    assert_eq!(d["name"], json!("Ann"));
    // sensitive without can_view
    assert_eq!(d["email"], json!("[REDACTED]"), "{v}");
    // the canary and the card number in a declared field
    let note = d["note"].as_str().unwrap();
    assert!(note.contains("[REDACTED-CANARY]"), "{note}");
    assert!(note.contains("[REDACTED-SECRET]"), "{note}");
    let raw = v["stdout"].as_str().unwrap();
    for leak in [
        "CANARY-7f3a",
        "ann@example.com",
        "078-05-1120",
        "4111",
        "abc",
    ] {
        assert!(!raw.contains(leak), "`{leak}` left through stdout: {raw}");
    }
    let rec = last_audit(&w);
    assert_eq!(
        (rec["rule"].as_str(), rec["post_rule"].as_str()),
        (Some("allow"), Some("post_redaction")),
        "{rec}"
    );
    // a session that may view pii sees the email, and nothing else changes
    let viewer = session(&w, "agent", &["--role", "agent", "--can-view", "pii"]);
    let (out, v) = as_session(&w, &viewer, &["polprobe.show", "--path", &path]);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    assert_eq!(v["data"]["email"], json!("ann@example.com"), "{v}");
    assert!(v["data"].get("ssn").is_none(), "{v}");
    assert!(
        v["data"]["note"]
            .as_str()
            .unwrap()
            .contains("[REDACTED-CANARY]")
    );
    // a class it does not hold does not unredact
    let other = session(&w, "agent", &["--role", "agent", "--can-view", "secret"]);
    let (_, v) = as_session(&w, &other, &["polprobe.show", "--path", &path]);
    assert_eq!(v["data"]["email"], json!("[REDACTED]"), "{v}");
    // the owner's own call is not post-gated
    let (out, v) = exec_json(&w, &["polprobe.show", "--path", &path]);
    assert_eq!(status(&out), 0);
    assert_eq!(v["data"]["ssn"], json!("078-05-1120"), "{v}");
}

#[test]
fn clean_output_passes_untouched() {
    let w = world("output.yaml");
    let path = output_file(&w, &json!({"name": "Bo", "note": "fine"}));
    let t = session(&w, "agent", &["--role", "agent"]);
    let (out, v) = as_session(&w, &t, &["polprobe.show", "--path", &path]);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    assert_eq!(v["data"], json!({"name": "Bo", "note": "fine"}));
    assert_eq!(last_audit(&w)["post_rule"], json!("allow"));
}

#[test]
fn strict_returns_with_deny_withholds_the_output() {
    let w = exec_common::world(&["polprobe"]);
    grant(&w, "agent", "*", &["verb.exec.read"]);
    write_policy(
        &w,
        "yaml",
        "schema_version: histos.policy/0.1\ntools:\n  polprobe.show:\n    args: {path: {type: string}}\n    returns:\n      n: {type: integer}\n    output: {strict: true, on_violation: deny}\nroles:\n  agent: {allow: [polprobe.show]}\n",
    );
    let t = session(&w, "agent", &["--role", "agent"]);
    let path = output_file(&w, &json!({"n": "not a number", "secret": "s3cr3t"}));
    let (out, v) = as_session(&w, &t, &["polprobe.show", "--path", &path]);
    assert_eq!(status(&out), 77, "{}", w.render(&out));
    assert_eq!(v["code"], json!("output_withheld"), "{v}");
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("s3cr3t"),
        "{}",
        w.render(&out)
    );
    assert_eq!(last_audit(&w)["post_rule"], json!("output_schema"));
    // a conforming output passes
    let path = output_file(&w, &json!({"n": 3}));
    let (out, v) = as_session(&w, &t, &["polprobe.show", "--path", &path]);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    assert_eq!(v["data"], json!({"n": 3}));
}

// ---------------------------------------------------------------- audit

#[test]
fn audit_records_carry_the_policy_hash_and_the_rule() {
    let w = world("rbac.yaml");
    let hash = policy_hash(&w);
    let reader = session(&w, "agent", &["--role", "reader"]);
    let (out, _) = as_session(&w, &reader, &["polprobe.argv", "--value", "hi"]);
    assert_eq!(status(&out), 0);
    let (out, _) = as_session(&w, &reader, &["polprobe.note", "--value", "hi"]);
    assert_eq!(status(&out), 77);
    let (out, _) = as_session(
        &w,
        &reader,
        &["polprobe.pair", "--first", "a", "--second", "b"],
    );
    assert_eq!(status(&out), 77);
    // The run is an intent (policy hash, rule) and an outcome (the post-gate's rule).
    let out = w.run(&["audit", "tail", "-n", "4", "--json"]);
    assert!(out.status.success(), "{}", w.render(&out));
    let tail: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(tail.len(), 4, "{tail:?}");
    assert_eq!(
        (&tail[1]["kind"], &tail[1]["intent"], &tail[1]["post_rule"]),
        (&json!("outcome"), &tail[0]["id"], &json!("allow"))
    );
    let calls = [&tail[0], &tail[2], &tail[3]];
    let seen: Vec<(&str, &str, &str)> = calls
        .iter()
        .map(|r| {
            assert_eq!(r["policy_hash"], json!(hash), "{r}");
            (
                r["decision"].as_str().unwrap(),
                r["rule"].as_str().unwrap(),
                r["verb_key"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("allow", "allow", "argv"),
            ("deny", "unknown_tool", "note"),
            ("deny", "arg_schema", "pair"),
        ]
    );
    // raw argument values never reach the audit
    let all = std::fs::read_to_string(w.hcp_home.join("audit").join("audit.jsonl")).unwrap();
    assert!(!all.contains("\"hi\""), "raw values in the audit");
    assert_audit_clean(&w);
}

// ---------------------------------------------------------------- loading fails closed

#[test]
fn a_policy_that_does_not_load_stops_every_exec_with_its_code() {
    let w = world("rbac.yaml");
    let t = session(&w, "agent", &["--role", "reader"]);
    for (ext, text, code) in [
        (
            "yaml",
            "schema_version: histos.policy/0.1\ntools: {}\ntelemetry: {x: 1}\n",
            "unknown_key",
        ),
        (
            "json",
            r#"{"tools": {"t": {"args": {}, "bind": {"x": "args.y"}}}}"#,
            "invalid_binding",
        ),
        (
            "yaml",
            "tools:\n  t:\n    args: {}\n    rate_limit: 10.0\n",
            "invalid_contract",
        ),
        ("json", "{\"tools\": {", "unparseable"),
        ("json", r#"{"tools": {}, "tools": {}}"#, "duplicate_key"),
        (
            "yaml",
            "schema_version: histos.policy/99\n",
            "unsupported_version",
        ),
    ] {
        write_policy(&w, ext, text);
        // the session's call
        let (out, v) = as_session(&w, &t, &["polprobe.argv", "--value", "hi"]);
        assert_policy_refused(&w, &out, &v, code);
        assert!(
            v["error"].as_str().unwrap().contains("does not load"),
            "{v}"
        );
        // and the owner's, which the policy does not even govern
        let (out, v) = exec_json(&w, &["polprobe.note", "--value", "hi"]);
        assert_refused(&w, &out, &v, code, 77);
        // the text face names the code too
        let out = exec_common::exec(&w, &["polprobe.note", "--value", "hi"]);
        assert_eq!(status(&out), 77);
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(code),
            "{}",
            w.render(&out)
        );
    }
    // an alias bomb and an oversized file are refused, and quickly
    let mut bomb =
        String::from("tools:\n  t:\n    args:\n      x:\n        type: any\n        enum:\n");
    bomb.push_str("          - &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for i in 1..10 {
        let refs = vec![format!("*a{}", i - 1); 10].join(", ");
        bomb.push_str(&format!("          - &a{i} [{refs}]\n"));
    }
    let big = format!(
        "{{\"policy_id\": \"{}\", \"tools\": {{}}}}",
        "x".repeat(5 << 20)
    );
    for (ext, text) in [("yaml", bomb), ("json", big)] {
        write_policy(&w, ext, &text);
        let started = std::time::Instant::now();
        let (out, v) = as_session(&w, &t, &["polprobe.argv", "--value", "hi"]);
        assert_policy_refused(&w, &out, &v, "policy_too_large");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
    }
    // an empty file is not "no policy"
    write_policy(&w, "yaml", "");
    let (out, v) = exec_json(&w, &["polprobe.note", "--value", "hi"]);
    assert_refused(&w, &out, &v, "unparseable", 77);
    // fixed: calls run again
    set_policy(&w, "rbac.yaml");
    let (out, v) = as_session(&w, &t, &["polprobe.argv", "--value", "hi"]);
    assert_ran_with(&w, &out, &v, &["hi"]);
    let (out, v) = exec_json(&w, &["polprobe.note", "--value", "hi"]);
    assert_ran_with(&w, &out, &v, &["hi"]);
}

#[test]
fn every_invalid_policy_of_the_corpus_stops_exec() {
    let dir = corpus::locate()
        .unwrap_or_else(|e| panic!("{e}"))
        .join("invalid-policy");
    let w = world("rbac.yaml");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let fx: Value = serde_json::from_slice(&std::fs::read(e.unwrap().path()).unwrap()).unwrap();
        let code = fx["expect"]["code"].as_str().unwrap();
        write_policy(&w, "json", &fx["document"].to_string());
        let (out, v) = exec_json(&w, &["polprobe.note", "--value", "hi"]);
        assert_refused(&w, &out, &v, code, 77);
        n += 1;
    }
    assert!(n > 0);
}

#[test]
fn both_policy_json_and_policy_yaml_present_is_refused() {
    let w = world("rbac.yaml");
    std::fs::copy(policy_fixture("scan.json"), w.hcp_home.join("policy.json")).unwrap();
    let t = session(&w, "agent", &["--role", "reader"]);
    let (out, v) = as_session(&w, &t, &["polprobe.argv", "--value", "hi"]);
    assert_policy_refused(&w, &out, &v, "policy_conflict");
    let (out, v) = exec_json(&w, &["polprobe.note", "--value", "hi"]);
    assert_refused(&w, &out, &v, "policy_conflict", 77);
    // one of them gone: fine again
    std::fs::remove_file(w.hcp_home.join("policy.json")).unwrap();
    let (out, v) = as_session(&w, &t, &["polprobe.argv", "--value", "hi"]);
    assert_ran_with(&w, &out, &v, &["hi"]);
}

#[test]
fn the_policy_runs_before_the_binding_mint() {
    // mail is a `user`-binding pack: a session without a binding is refused at step 8
    // (binding_required), but only once the policy (step 7) has let the call through.
    let w = exec_common::world(&["polprobe", "mail"]);
    grant(&w, "agent", "*", &["verb.exec.read", "verb.exec.write"]);
    write_policy(
        &w,
        "yaml",
        "tools:\n  mail.mail.list:\n    args: {}\nroles:\n  reader: {allow: [mail.mail.list]}\n  nobody: {}\n",
    );
    let denied = session(&w, "agent", &["--role", "nobody"]);
    let (out, v) = as_session(&w, &denied, &["mail.mail.list"]);
    assert_policy_refused(&w, &out, &v, "rbac");
    let reader = session(&w, "agent", &["--role", "reader"]);
    let (out, v) = as_session(&w, &reader, &["mail.mail.list"]);
    assert_refused(&w, &out, &v, "binding_required", 77);
    assert_eq!(last_audit(&w)["rule"], json!("allow"));
}

#[test]
fn an_approval_is_bound_to_the_whole_session_principal() {
    let w = world("confirm.yaml");
    let clerk = session(&w, "agent", &["--role", "clerk", "--attr", "desk=a"]);
    let id = paused(&w, &clerk, &WIRE);
    approve(&w, &id);
    // the same principal id, under a session with other trusted attributes and can_view
    let wider = session(
        &w,
        "agent",
        &["--role", "clerk", "--attr", "desk=b", "--can-view", "pii"],
    );
    let theirs = paused(&w, &wider, &WIRE);
    assert_ne!(theirs, id);
    // the approved session's own call still passes
    let (out, v) = as_session(&w, &clerk, &WIRE);
    assert_ran_with(&w, &out, &v, &["bob", "5"]);
}

#[test]
fn escalation_and_resource_constraints_deny_for_want_of_a_tier_and_a_resolver() {
    // hcp wires neither a semantic tier nor a resource resolver: such tools are denied,
    // never waved through (HISTOS-ENGINE §1b steps 4 and 8).
    let w = exec_common::world(&["polprobe"]);
    grant(&w, "agent", "*", &["verb.exec.read"]);
    write_policy(
        &w,
        "yaml",
        "tools:\n  polprobe.argv:\n    args: {value: {type: string}}\n    escalate: {required: true}\n  polprobe.pair:\n    args: {first: {type: string}, second: {type: string}}\n    resource: {owns: tenant}\nroles:\n  r: {allow: [polprobe.argv, polprobe.pair]}\n",
    );
    let t = session(&w, "agent", &["--role", "r", "--attr", "tenant=acme"]);
    let (out, v) = as_session(&w, &t, &["polprobe.argv", "--value", "x"]);
    assert_policy_refused(&w, &out, &v, "no_escalation_tier");
    let (out, v) = as_session(&w, &t, &["polprobe.pair", "--first", "x", "--second", "y"]);
    assert_policy_refused(&w, &out, &v, "no_resource_resolver");
}

#[test]
fn a_gold_pack_under_the_policy_tool_names_bind_and_approval() {
    // The ledger pack's verb `ledger.post` is tool `ledger.ledger.post`; the session's
    // `account` attribute is bound into the journal entry, and into `balance`'s optional
    // argument when the caller leaves it out.
    let w = exec_common::world(&["ledger"]);
    grant(&w, "agent", "*", &["verb.exec.read", "verb.exec.write"]);
    write_policy(
        &w,
        "yaml",
        "schema_version: histos.policy/0.1\ntools:\n  ledger.ledger.post:\n    access: write\n    args:\n      account: {type: string}\n      amount: {type: string}\n      memo: {type: string, max_length: 200}\n    bind: {account: principal.account}\n    confirmation: {required: true}\n  ledger.ledger.balance:\n    args: {account: {type: string, required: false}}\n    bind: {account: principal.account}\n  ledger.list:\n    args: {}\nroles:\n  bookkeeper: {allow: [ledger.ledger.post, ledger.ledger.balance, ledger.list]}\n",
    );
    // the owner posts to another account
    let (out, _) = exec_json(
        &w,
        &[
            "ledger.post",
            "--account",
            "income:sales",
            "--amount",
            "100",
            "--memo",
            "seed",
            "--confirm",
        ],
    );
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    let t = session(
        &w,
        "agent",
        &["--role", "bookkeeper", "--attr", "account=assets:cash"],
    );
    // the policy's `ledger.list` is not the tool `ledger.ledger.list`
    let (out, v) = as_session(&w, &t, &["ledger.list"]);
    assert_policy_refused(&w, &out, &v, "unknown_tool");
    // post: paused, approved by the owner, then written to the bound account
    let post = [
        "ledger.post",
        "--account",
        "income:sales",
        "--amount",
        "12",
        "--memo",
        "hi",
        "--confirm",
    ];
    let id = paused(&w, &t, &post);
    assert_eq!(
        approval(&w, &id)["summary"]["account"],
        json!("assets:cash"),
        "the owner reviews the bound value"
    );
    approve(&w, &id);
    let (out, v) = as_session(&w, &t, &post);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    assert_eq!(v["data"]["posted"]["account"], json!("assets:cash"), "{v}");
    // balance without `account`: the bound one is added, so only that account shows
    let (out, v) = as_session(&w, &t, &["ledger.balance"]);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    let accounts: Vec<&str> = v["data"]["accounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["account"].as_str().unwrap())
        .collect();
    assert_eq!(accounts, ["assets:cash"], "{v}");
    // the owner sees both
    let (_, v) = exec_json(&w, &["ledger.balance"]);
    assert_eq!(v["data"]["accounts"].as_array().unwrap().len(), 2, "{v}");
}

#[test]
fn text_output_is_scanned_and_lists_of_records_are_projected() {
    let w = exec_common::world(&["polprobe"]);
    grant(&w, "agent", "*", &["verb.exec.read"]);
    let t = session(&w, "agent", &["--role", "r"]);
    // no `returns`: the canary and the card number are still removed from plain text
    write_policy(
        &w,
        "yaml",
        "canaries: [CANARY-7f3a-DO-NOT-LEAK]\ntools:\n  polprobe.show:\n    args: {path: {type: string}}\nroles:\n  r: {allow: [polprobe.show]}\n",
    );
    let path = in_agents_home(
        &w,
        "out.txt",
        "plain CANARY-7f3a-DO-NOT-LEAK text 4111111111111111\n",
    );
    let (out, v) = as_session(&w, &t, &["polprobe.show", "--path", &path]);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    let s = v["stdout"].as_str().unwrap();
    assert!(s.starts_with("plain [REDACTED-CANARY] text"), "{s}");
    assert!(!s.contains("4111111111111111"), "{s}");
    // the text face prints the post-gated bytes, not the child's
    let out = exec_common::exec_env(
        &w,
        &["polprobe.show", "--path", &path],
        &[("HCP_SESSION", t.as_str())],
    );
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        !printed.contains("CANARY-7f3a") && printed.contains("[REDACTED-CANARY]"),
        "{printed}"
    );
    // a list of records is projected record by record
    write_policy(
        &w,
        "yaml",
        "tools:\n  polprobe.show:\n    args: {path: {type: string}}\n    returns: {id: {type: integer}, email: {type: string, sensitive: pii}}\n    output: {project: true}\nroles:\n  r: {allow: [polprobe.show]}\n",
    );
    let path = in_agents_home(
        &w,
        "out.txt",
        &json!([{"id": 1, "email": "a@x", "pw": "hunter2"}, {"id": 2, "pw": "swordfish"}])
            .to_string(),
    );
    let (out, v) = as_session(&w, &t, &["polprobe.show", "--path", &path]);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    assert_eq!(
        v["data"],
        json!([{"id": 1, "email": "[REDACTED]"}, {"id": 2}]),
        "{v}"
    );
}

#[test]
fn an_approved_call_raced_by_4_processes_passes_exactly_once() {
    let w = world("confirm.yaml");
    let clerk = session(&w, "agent", &["--role", "clerk"]);
    let id = paused(&w, &clerk, &WIRE);
    approve(&w, &id);
    let children: Vec<Child> = (0..4).map(|_| spawn_exec(&w, &clerk, &WIRE)).collect();
    let mut passed = 0;
    for c in children {
        let out = c.wait_with_output().unwrap();
        let v: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}:\n{}", w.render(&out)));
        match status(&out) {
            0 => passed += 1,
            77 => {
                assert_eq!(v["code"], json!("requires_confirmation"), "{v}");
                assert_ne!(v["approval_id"], json!(id), "{v}");
            }
            s => panic!("unexpected exit {s}:\n{}", w.render(&out)),
        }
    }
    assert_eq!(passed, 1, "a single-use approval was used {passed} times");
    assert_eq!(approval(&w, &id)["state"], json!("used"));
    assert_audit_clean(&w);
}

/// Runs `hcp mcp` as session `token`, sends `initialize` then each `tools/call`
/// (name, arguments), closes stdin, and returns the responses by request id (calls are
/// ids 2, 3, …).
fn mcp_calls(w: &World, token: &str, calls: &[(&str, Value)]) -> Vec<Value> {
    use std::io::Write;
    let mut child = Command::new(common::hcp_bin())
        .env_clear()
        .env("HOME", &w.home)
        .env("HCP_HOME", &w.hcp_home)
        .env("PATH", w.path_var())
        .env("LANG", "C")
        .env("NO_COLOR", "1")
        .env("HCP_SESSION", token)
        .current_dir(&w.work)
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut msgs = vec![
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "policy-tests", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ];
    for (i, (name, args)) in calls.iter().enumerate() {
        msgs.push(
            json!({"jsonrpc": "2.0", "id": i + 2, "method": "tools/call",
            "params": {"name": name, "arguments": args}}),
        );
    }
    let mut stdin = child.stdin.take().unwrap();
    for m in &msgs {
        writeln!(stdin, "{m}").unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let all: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (0..calls.len())
        .map(|i| {
            all.iter()
                .find(|m| m["id"] == json!(i + 2))
                .unwrap_or_else(|| panic!("no answer to call {}: {all:?}", i + 2))
                .clone()
        })
        .collect()
}

#[test]
fn the_mcp_face_answers_to_the_same_policy() {
    let w = exec_common::world(&["polprobe"]);
    grant(&w, "agent", "*", &["verb.exec.read", "verb.exec.write"]);
    write_policy(
        &w,
        "yaml",
        "canaries: [CANARY-7f3a-DO-NOT-LEAK]\ntools:\n  polprobe.argv:\n    args: {value: {type: string}}\n    bind: {value: principal.tenant}\n  polprobe.pair:\n    args: {first: {type: string}, second: {type: string}}\n  polprobe.wire:\n    args: {to: {type: string}, amount: {type: string}}\n    confirmation: {required: true}\nroles:\n  r: {allow: [polprobe.argv, polprobe.pair, polprobe.wire]}\n",
    );
    let t = session(&w, "agent", &["--role", "r", "--attr", "tenant=acme"]);
    let r = mcp_calls(
        &w,
        &t,
        &[
            ("polprobe.argv", json!({"value": "globex"})),
            (
                "polprobe.pair",
                json!({"first": "CANARY-7f3a-DO-NOT-LEAK", "second": "x"}),
            ),
            ("polprobe.note", json!({"value": "x"})),
            (
                "polprobe.wire",
                json!({"to": "bob", "amount": "5", "confirm": true}),
            ),
        ],
    );
    assert_eq!(r[0]["result"]["isError"], json!(false), "{}", r[0]);
    assert_eq!(
        r[0]["result"]["content"][0]["text"],
        json!("[\"--\",\"acme\"]\n"),
        "{}",
        r[0]
    );
    let code = |x: &Value| x["result"]["structuredContent"]["code"].clone();
    assert_eq!(code(&r[1]), json!("canary_exfil"), "{}", r[1]);
    assert_eq!(code(&r[2]), json!("unknown_tool"), "{}", r[2]);
    assert_eq!(code(&r[3]), json!("requires_confirmation"), "{}", r[3]);
    let id = r[3]["result"]["structuredContent"]["approval_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no approval_id: {}", r[3]))
        .to_owned();
    approve(&w, &id);
    let r = mcp_calls(
        &w,
        &t,
        &[(
            "polprobe.wire",
            json!({"to": "bob", "amount": "5", "confirm": true}),
        )],
    );
    assert_eq!(r[0]["result"]["isError"], json!(false), "{}", r[0]);
    assert_eq!(approval(&w, &id)["state"], json!("used"));
}

#[test]
fn a_counter_or_approval_store_that_cannot_be_used_fails_closed() {
    let w = world("limits.yaml");
    let t = session(&w, "agent", &["--role", "agent"]);
    // the counters' directory is a file: limits cannot be counted, so nothing runs
    let state = w.hcp_home.join("state");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(state.join("counters"), "").unwrap();
    let (out, v) = as_session(&w, &t, &["polprobe.count", "--value", "1"]);
    assert_policy_refused(&w, &out, &v, "limit_store_unavailable");
    std::fs::remove_file(state.join("counters")).unwrap();
    let (out, v) = as_session(&w, &t, &["polprobe.count", "--value", "1"]);
    assert_ran_with(&w, &out, &v, &["1"]);
    // the approvals' directory is a file: no approval can be read, the call is refused
    set_policy(&w, "confirm.yaml");
    let clerk = session(&w, "agent", &["--role", "clerk"]);
    std::fs::write(state.join("approvals"), "").unwrap();
    let (out, v) = as_session(&w, &clerk, &WIRE);
    assert_policy_refused(&w, &out, &v, "confirm_error");
    assert!(v.get("approval_id").is_none(), "{v}");
}

/// An approval marked approved by hand (its file edited, not `hcp approve`) approves
/// nothing: its MAC does not hold, so the call it names is refused (`confirm_error`, naming
/// the file), until the file is removed (the call then asks again); the same call of
/// another principal, the owner's call and the owner's `hcp approvals` go on; `hcp
/// approve` refuses it; `hcp doctor` lists it and exits 1 (docs/DESIGN.md, "The store").
#[test]
fn an_approval_marked_approved_by_hand_approves_nothing() {
    let w = world("confirm.yaml");
    let clerk = session(&w, "agent", &["--role", "clerk"]);
    let other = session(&w, "other", &["--role", "clerk"]);
    let id = paused(&w, &clerk, &WIRE);
    let file = w
        .hcp_home
        .join("state")
        .join("approvals")
        .join(format!("{id}.json"));
    let mut a: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    a["approved_at"] = json!(jiff::Timestamp::now().to_string());
    std::fs::write(&file, serde_json::to_vec_pretty(&a).unwrap()).unwrap();
    let edited = std::fs::read(&file).unwrap();
    let (out, v) = as_session(&w, &clerk, &WIRE);
    // The runtime policy's own code for a confirmation it cannot check (as a damaged
    // counter is its `limit_store_unavailable`), naming the file.
    assert_refused(&w, &out, &v, "confirm_error", 77);
    let e = v["error"].as_str().unwrap();
    assert!(
        e.contains(&file.display().to_string()) && e.contains("does not hold"),
        "{v}"
    );
    // Another principal's same call asks for its own approval; the owner's runs.
    assert_ne!(paused(&w, &other, &WIRE), id);
    let (out, v) = exec_json(&w, &WIRE);
    assert_eq!(status(&out), 0, "{v}");
    let out = w.run(&["approvals"]);
    assert!(out.status.success(), "{}", w.render(&out));
    let out = w.run(&["approve", &id]);
    assert_eq!(status(&out), 74, "{}", w.render(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("store_damaged"));
    let out = w.run(&["doctor"]);
    assert_eq!(status(&out), 1, "{}", w.render(&out));
    let text = w.filter(&String::from_utf8_lossy(&out.stdout));
    let line = text
        .lines()
        .find(|l| l.contains("damaged approval"))
        .unwrap_or_else(|| panic!("{text}"));
    insta::assert_snapshot!(
        "approval_marked_approved_by_hand",
        line.replace(&id, "{id}")
    );
    assert_eq!(std::fs::read(&file).unwrap(), edited, "left as it was");
    std::fs::remove_file(&file).unwrap();
    assert_ne!(paused(&w, &clerk, &WIRE), id);
}

#[test]
fn a_pending_request_expires_after_a_day() {
    let w = world("confirm.yaml");
    let clerk = session(&w, "agent", &["--role", "clerk"]);
    let id = paused(&w, &clerk, &WIRE);
    // Test technique, not a sleep: the request is backdated past the 24 h it may wait.
    let file = w
        .hcp_home
        .join("state")
        .join("approvals")
        .join(format!("{id}.json"));
    let mut a: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    a["requested_at"] = json!("2000-01-01T00:00:00Z");
    // hcp would refuse a file edited by hand: the test writes it with its MAC, as hcp does.
    let home = hcp_store::Home::open(&w.hcp_home).unwrap();
    hcp_store::stamp::write(
        &home,
        &hcp_store::StoreLock::acquire(&home).unwrap(),
        &file,
        &a,
    )
    .unwrap();
    let out = w.run(&["approve", &id]);
    assert!(!out.status.success(), "{}", w.render(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("approval_expired"));
    // the call asks anew
    assert_ne!(paused(&w, &clerk, &WIRE), id);
}

#[test]
fn the_text_face_names_the_approval_and_the_list_cannot_be_spoofed() {
    let w = exec_common::world(&["polprobe"]);
    grant(&w, "agent", "*", &["verb.exec.write"]);
    write_policy(
        &w,
        "yaml",
        "tools:\n  polprobe.wire:\n    args: {to: {type: string}, amount: {type: string}}\n    confirmation: {required: true}\nroles:\n  clerk: {allow: [polprobe.wire]}\n",
    );
    let clerk = session(&w, "agent", &["--role", "clerk"]);
    // terminal escapes and a forged second line in the arguments
    let out = exec_common::exec_env(
        &w,
        &[
            "polprobe.wire",
            "--to",
            "bob\u{1b}[2J\u{1b}]0;pwned\u{7}",
            "--amount",
            "1\napr_00000000000000000000  approved  owner",
            "--confirm",
        ],
        &[("HCP_SESSION", clerk.as_str())],
    );
    assert_eq!(status(&out), 77, "{}", w.render(&out));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(err.contains("requires_confirmation"), "{err}");
    let pending: Vec<Value> =
        serde_json::from_slice(&w.run(&["approvals", "--json"]).stdout).unwrap();
    assert_eq!(pending.len(), 1, "{pending:?}");
    let id = pending[0]["id"].as_str().unwrap();
    assert!(err.contains(&format!("hcp approve {id}")), "{err}");
    let out = w.run(&["approvals"]);
    let listing = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        listing.lines().count(),
        1,
        "one line per approval:\n{listing}"
    );
    assert!(
        !listing.bytes().any(|b| b == 0x1b || b == 0x07),
        "control bytes reach the owner's terminal: {listing:?}"
    );
    assert!(listing.starts_with(id), "{listing}");
}

#[test]
fn a_repeated_json_key_does_not_smuggle_a_canary_past_the_post_gate() {
    let w = exec_common::world(&["polprobe"]);
    grant(&w, "agent", "*", &["verb.exec.read"]);
    write_policy(
        &w,
        "yaml",
        "canaries: [CANARY-7f3a-DO-NOT-LEAK]\ntools:\n  polprobe.show:\n    args: {path: {type: string}}\nroles:\n  r: {allow: [polprobe.show]}\n",
    );
    let t = session(&w, "agent", &["--role", "r"]);
    let p = w.root().join("dup.json");
    std::fs::write(
        &p,
        r#"{"note": "CANARY-7f3a-DO-NOT-LEAK card 4111111111111111", "note": "clean"}"#,
    )
    .unwrap();
    let path = p.display().to_string();
    let (out, v) = as_session(&w, &t, &["polprobe.show", "--path", &path]);
    let raw = String::from_utf8_lossy(&out.stdout);
    assert!(!raw.contains("CANARY-7f3a-DO-NOT-LEAK"), "{v}");
    assert!(!raw.contains("4111111111111111"), "{v}");
}

#[test]
fn redacting_output_keeps_the_other_values_exact() {
    let w = world("output.yaml");
    // a number serde_json cannot hold exactly, written by hand
    let path = in_agents_home(
        &w,
        "out.json",
        r#"{"name": 123456789012345678901234567890, "email": "a@b", "note": "0.1"}"#,
    );
    let t = session(&w, "agent", &["--role", "agent"]);
    let (out, v) = as_session(&w, &t, &["polprobe.show", "--path", &path]);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    let s = v["stdout"].as_str().unwrap();
    assert!(s.contains("[REDACTED]"), "{s}");
    assert!(s.contains("123456789012345678901234567890"), "{s}");
}

#[test]
fn a_canary_on_the_childs_stderr_is_redacted() {
    common::example_bins();
    let w = World::new();
    // a pack whose CLI fails and says too much on stderr
    let dir = w.root().join("src").join("leaky");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("surface.json"),
        json!({"id": "leaky", "name": "Leaky", "kind": "wrap", "cliBin": "leak",
            "transports": ["cli", "json_exec"], "binding": {"mode": "public"},
            "wrap": {"bin": "./leak"},
            "verbs": {"fail": {"description": "Fail, saying too much.", "cli": ["leak", "fail"]}}})
        .to_string(),
    )
    .unwrap();
    std::fs::write(
        dir.join("policy.json"),
        json!({"surface_id": "leaky", "version": 1, "stimuli": {},
            "verbs": {"fail": {"operation": "read", "privacy": {"land": "personal"}}}})
        .to_string(),
    )
    .unwrap();
    std::fs::write(
        dir.join("HARNESS.md"),
        "# HCP — Leaky\n\n## Hot path\n\n| Command | CLI |\n|---|---|\n| `fail` | `leak fail` |\n\n## Anti-patterns\n\n- Using it\n",
    )
    .unwrap();
    let bin = dir.join("leak");
    std::fs::write(
        &bin,
        "#!/bin/sh\necho '{\"ok\": false}'\necho 'error: token CANARY-7f3a-DO-NOT-LEAK card 4111111111111111' >&2\nexit 1\n",
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    exec_common::install(&w, &dir);
    grant(&w, "agent", "*", &["verb.exec.read"]);
    write_policy(
        &w,
        "yaml",
        "canaries: [CANARY-7f3a-DO-NOT-LEAK]\ntools:\n  leaky.fail:\n    args: {}\nroles:\n  r: {allow: [leaky.fail]}\n",
    );
    let t = session(&w, "agent", &["--role", "r"]);
    let (out, v) = as_session(&w, &t, &["leaky.fail"]);
    assert_eq!(v["exit_code"], json!(1), "{}", w.render(&out));
    let err = v["stderr"].as_str().unwrap();
    assert!(!err.contains("CANARY-7f3a-DO-NOT-LEAK"), "{err}");
    assert!(!err.contains("4111111111111111"), "{err}");
}

#[test]
fn a_typed_contract_reads_cli_text_as_its_type() {
    let w = world("scan.json");
    write_policy(
        &w,
        "json",
        r#"{"schema_version": "histos.policy/0.1",
            "tools": {"polprobe.count": {"access": "read",
              "args": {"value": {"type": "integer", "minimum": 1, "maximum": 10}}}},
            "roles": {"agent": {"allow": ["polprobe.count"]}}}"#,
    );
    let t = session(&w, "agent", &["--role", "agent"]);
    // The CLI face carries text: `5` is read as the integer the contract declares.
    let (out, v) = as_session(&w, &t, &["polprobe.count", "--value", "5"]);
    assert_ran_with(&w, &out, &v, &["5"]);
    // Not canonical, or out of bounds: still refused by the contract.
    for bad in ["05", "5.0", "11", "five"] {
        let (out, v) = as_session(&w, &t, &["polprobe.count", "--value", bad]);
        assert_policy_refused(&w, &out, &v, "arg_schema");
    }
    // The JSON face carries real types and is never converted.
    let (out, v) = envelope_as(
        &w,
        &t,
        &json!({"pack_id": "polprobe", "verb_key": "count", "args": {"value": "5"}}),
    );
    assert_policy_refused(&w, &out, &v, "arg_schema");
}

#[test]
fn an_approval_is_bound_to_its_session_and_project() {
    let w = world("confirm.yaml");
    let clerk = session(
        &w,
        "agent",
        &["--role", "clerk", "--project", "pa", "--project", "pb"],
    );
    let in_project = |token: &str, project: Option<&str>| {
        let mut env = vec![("HCP_SESSION", token)];
        if let Some(p) = project {
            env.push(("HCP_PROJECT", p));
        }
        exec_json_env(&w, &WIRE, &env)
    };
    // Asked for under project pa (`HCP_PROJECT`) of this session.
    let (out, v) = in_project(&clerk, Some("pa"));
    assert_policy_refused(&w, &out, &v, "requires_confirmation");
    let id = v["approval_id"].as_str().unwrap().to_owned();
    // `hcp approvals` shows its session and project.
    let short = {
        let out = w.run(&["session", "list", "--json"]);
        let list: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
        list[0]["id"].as_str().unwrap().to_owned()
    };
    let a = approval(&w, &id);
    assert_eq!(
        (&a["session"], &a["project"]),
        (&json!(short), &json!("pa")),
        "{a}"
    );
    let text = String::from_utf8(w.run(&["approvals"]).stdout).unwrap();
    assert!(
        text.contains(&format!("session {short}")) && text.contains("project pa"),
        "{text}"
    );
    approve(&w, &id);
    // Bad input: the same call from another project of the session, from another
    // session of the same principal (and role), each asks anew; the approval stays.
    let (out, v) = in_project(&clerk, Some("pb"));
    assert_policy_refused(&w, &out, &v, "requires_confirmation");
    assert_ne!(v["approval_id"], json!(id));
    let other = session(&w, "agent", &["--role", "clerk", "--project", "pa"]);
    let (out, v) = in_project(&other, Some("pa"));
    assert_policy_refused(&w, &out, &v, "requires_confirmation");
    assert_ne!(v["approval_id"], json!(id));
    assert_eq!(approval(&w, &id)["state"], json!("approved"));
    // The same session, without `HCP_PROJECT`, is its first project: pa, the same call.
    let (out, v) = in_project(&clerk, None);
    assert_ran_with(&w, &out, &v, &["bob", "5"]);
    assert_eq!(approval(&w, &id)["state"], json!("used"));
    // After the session ended, an approval of it is not usable.
    let (out, v) = in_project(&clerk, Some("pa"));
    assert_policy_refused(&w, &out, &v, "requires_confirmation");
    let again = v["approval_id"].as_str().unwrap().to_owned();
    approve(&w, &again);
    let out = w.run(&["session", "end", &clerk]);
    assert!(out.status.success(), "{}", w.render(&out));
    let (out, v) = in_project(&clerk, Some("pa"));
    assert_refused(&w, &out, &v, "bad_session", 77);
    assert_eq!(
        approval(&w, &again)["state"],
        json!("approved"),
        "never spent"
    );
}
