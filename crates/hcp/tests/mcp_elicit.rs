//! `hcp mcp` and the person in the loop (RUNTIME §10), with a raw JSON-RPC client that
//! plays the MCP client and its person: the confirm gate answered by elicitation (the exact
//! command shown, only an accept of exactly that runs it, once), the bad answers (changed
//! content, twice, late, from a client that never declared the capability), the tools a
//! session is shown, and a runtime-policy approval given by elicitation when the operator
//! opts in.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod mcp_common;

use common::World;
use mcp_common::{Raw, last_audit, refusal_code, world_with};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn asking() -> Value {
    json!({ "elicitation": {} })
}

fn write_args(name: &str, text: &str) -> Value {
    json!({ "name": "echo.echo.write", "arguments": { "name": name, "text": text } })
}

fn audit_len(w: &World) -> usize {
    let out = w.run(&["audit", "tail", "-n", "1000", "--json"]);
    serde_json::from_slice::<Vec<Value>>(&out.stdout)
        .unwrap()
        .len()
}

fn run_ok(w: &World, args: &[&str]) -> String {
    let out = w.run(args);
    assert!(out.status.success(), "{}", w.render(&out));
    String::from_utf8(out.stdout).unwrap()
}

fn session(w: &World, args: &[&str]) -> String {
    let mut all = vec!["session", "start"];
    all.extend_from_slice(args);
    run_ok(w, &all).trim().to_owned()
}

#[test]
fn an_accept_runs_exactly_the_command_shown_once() {
    let w = world_with(&["echo"]);
    let mut s = Raw::start_with(&w, None, &asking());
    // A client that asks its person is not offered `confirm`.
    let r = s.request("tools/list", json!({}));
    let write = r["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "echo.echo.write")
        .unwrap()
        .clone();
    assert!(
        write["inputSchema"]["properties"].get("confirm").is_none(),
        "{write}"
    );
    assert!(
        write["description"]
            .as_str()
            .unwrap()
            .contains("the person is asked")
    );

    let id = s.send_request("tools/call", write_args("a.txt", "one line"));
    let (_, ask) = s.read_request("elicitation/create");
    let p = &ask["params"];
    assert_eq!(p["mode"], "form", "{ask}");
    let message = p["message"].as_str().unwrap();
    assert!(
        message.contains("hcp-example-echo write --confirm --json -- a.txt 'one line'"),
        "{message}"
    );
    assert!(
        message.contains("`owner` asks to run `echo.echo.write`"),
        "{message}"
    );
    assert!(
        message.contains(&format!("in {}", w.work.display())),
        "{message}"
    );
    assert_eq!(p["requestedSchema"]["required"], json!(["run"]));
    assert_eq!(
        p["_meta"]["hcp"]["command"]["args"],
        json!(["write", "--confirm", "--json", "--", "a.txt", "one line"])
    );
    // Nothing ran while the person reads.
    assert!(!w.work.join("a.txt").exists());
    s.answer(
        &ask,
        json!({ "action": "accept", "content": { "run": true } }),
    );
    let (_, r) = s.read_response(id);
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert_eq!(
        std::fs::read_to_string(w.work.join("a.txt")).unwrap(),
        "one line"
    );
    let a = last_audit(&w);
    assert_eq!(
        (&a["decision"], &a["confirm"]),
        (&json!("allow"), &json!("elicitation"))
    );
    // Answered twice: the second answer finds no question and runs nothing.
    let records = audit_len(&w);
    std::fs::remove_file(w.work.join("a.txt")).unwrap();
    s.answer(
        &ask,
        json!({ "action": "accept", "content": { "run": true } }),
    );
    let (notes, pong) = s.request_seeing("ping", json!({}));
    assert!(pong["result"].is_object(), "{pong}");
    assert_eq!(notes, Vec::<Value>::new());
    assert!(!w.work.join("a.txt").exists());
    assert_eq!(audit_len(&w), records);
    assert!(s.finish().success());
}

#[test]
fn anything_but_an_exact_accept_is_confirm_required_and_runs_nothing() {
    let w = world_with(&["echo"]);
    let mut s = Raw::start_with(&w, None, &asking());
    for (i, answer) in [
        json!({ "action": "decline" }),
        json!({ "action": "cancel" }),
        json!({ "action": "accept" }),
        json!({ "action": "accept", "content": {} }),
        json!({ "action": "accept", "content": { "run": false } }),
        json!({ "action": "accept", "content": { "run": "true" } }),
        json!({ "action": "accept", "content": { "run": true, "text": "other" } }),
        json!({ "action": "maybe", "content": { "run": true } }),
    ]
    .into_iter()
    .enumerate()
    {
        let name = format!("f{i}.txt");
        let id = s.send_request("tools/call", write_args(&name, "x"));
        let (_, ask) = s.read_request("elicitation/create");
        s.answer(&ask, answer.clone());
        let (_, r) = s.read_response(id);
        assert_eq!(refusal_code(&r), "confirm_required", "{answer}: {r}");
        assert_eq!(r["result"]["content"][0]["text"], "confirm required");
        assert!(!w.work.join(&name).exists(), "{answer}");
    }
    // An error answer, and an answer whose content repeats a key, are no accept either.
    let id = s.send_request("tools/call", write_args("g.txt", "x"));
    let (_, ask) = s.read_request("elicitation/create");
    s.send(&json!({ "jsonrpc": "2.0", "id": ask["id"],
                    "error": { "code": -1, "message": "the user closed the dialog" } }));
    let (_, r) = s.read_response(id);
    assert_eq!(refusal_code(&r), "confirm_required", "{r}");
    assert!(!w.work.join("g.txt").exists());
    // Every refusal is one record; nothing ran.
    let out = w.run(&["audit", "tail", "-n", "100", "--json"]);
    let all: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        all.iter()
            .filter(|r| r["kind"] != "authority")
            .all(|r| r["decision"] == "deny"),
        "{all:?}"
    );
    assert!(s.finish().success());
}

#[test]
fn the_models_confirm_does_not_replace_the_person() {
    let w = world_with(&["echo"]);
    let mut s = Raw::start_with(&w, None, &asking());
    // `confirm: true` from the model: the person is asked all the same.
    let id = s.send_request(
        "tools/call",
        json!({ "name": "echo.echo.write",
                "arguments": { "name": "m.txt", "text": "x", "confirm": true } }),
    );
    let (_, ask) = s.read_request("elicitation/create");
    s.answer(&ask, json!({ "action": "decline" }));
    let (_, r) = s.read_response(id);
    assert_eq!(refusal_code(&r), "confirm_required", "{r}");
    let hint = r["result"]["structuredContent"]["hint"].as_str().unwrap();
    assert!(hint.contains("the person did not accept"), "{hint}");
    assert!(!hint.contains("confirm: true"), "{hint}");
    // And after the decline, the model's own confirm changes nothing.
    let id = s.send_request(
        "tools/call",
        json!({ "name": "echo.echo.write",
                "arguments": { "name": "m.txt", "text": "x", "apply": true } }),
    );
    let (_, ask) = s.read_request("elicitation/create");
    s.answer(&ask, json!({ "action": "cancel" }));
    let (_, r) = s.read_response(id);
    assert_eq!(refusal_code(&r), "confirm_required", "{r}");
    assert!(!w.work.join("m.txt").exists());
    assert!(s.finish().success());
}

#[test]
fn an_answer_after_the_timeout_is_ignored() {
    let w = world_with(&["echo"]);
    std::fs::write(
        w.hcp_home.join("config.json"),
        r#"{"mcp": {"elicitation_timeout_s": 1}}"#,
    )
    .unwrap();
    let mut s = Raw::start_with(&w, None, &asking());
    let id = s.send_request("tools/call", write_args("late.txt", "x"));
    let (_, ask) = s.read_request("elicitation/create");
    // No answer: after the timeout the server withdraws the question and refuses.
    let (before, r) = s.read_response(id);
    assert_eq!(refusal_code(&r), "confirm_required", "{r}");
    assert!(
        before
            .iter()
            .any(|m| m["method"] == "notifications/cancelled"
                && m["params"]["requestId"] == ask["id"]),
        "{before:?}"
    );
    let records = audit_len(&w);
    s.answer(
        &ask,
        json!({ "action": "accept", "content": { "run": true } }),
    );
    let (_, pong) = s.request_seeing("ping", json!({}));
    assert!(pong["result"].is_object(), "{pong}");
    assert!(!w.work.join("late.txt").exists());
    assert_eq!(audit_len(&w), records);
    assert!(s.finish().success());
}

#[test]
fn a_client_that_never_declared_the_capability_is_never_asked() {
    let w = world_with(&["echo"]);
    let mut s = Raw::start(&w, None);
    let r = s.request("tools/list", json!({}));
    let write = r["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "echo.echo.write")
        .unwrap()
        .clone();
    assert_eq!(
        write["inputSchema"]["properties"]["confirm"]["type"],
        "boolean"
    );
    let id = s.send_request("tools/call", write_args("n.txt", "x"));
    let (before, r) = s.read_response(id);
    assert_eq!(
        before,
        Vec::<Value>::new(),
        "asked a client that cannot answer"
    );
    assert_eq!(refusal_code(&r), "confirm_required", "{r}");
    // Answers it was never asked for (the ids a server's first requests would have)
    // run nothing.
    for rid in [json!(0), json!(1), json!("0")] {
        s.send(&json!({ "jsonrpc": "2.0", "id": rid,
                        "result": { "action": "accept", "content": { "run": true } } }));
    }
    let (_, pong) = s.request_seeing("ping", json!({}));
    assert!(pong["result"].is_object(), "{pong}");
    assert!(!w.work.join("n.txt").exists());
    assert!(s.finish().success());
}

#[test]
fn a_command_that_changed_while_the_person_read_it_does_not_run() {
    let w = world_with(&["echo"]);
    let mut s = Raw::start_with(&w, None, &asking());
    let id = s.send_request("tools/call", write_args("c.txt", "x"));
    let (_, ask) = s.read_request("elicitation/create");
    // The owner reinstalls echo with another template for `write` meanwhile.
    let src = w.root().join("src/echo");
    std::fs::create_dir_all(&src).unwrap();
    for f in ["surface.json", "policy.json", "HARNESS.md"] {
        let text = std::fs::read_to_string(common::gold_pack("echo").join(f)).unwrap();
        let text = text.replace(
            r#""write", "--confirm", "--json", "--", "{{name}}", "{{text}}""#,
            r#""write", "--confirm", "--", "{{name}}", "{{text}}""#,
        );
        std::fs::write(src.join(f), text).unwrap();
    }
    run_ok(&w, &["install", "--force", src.to_str().unwrap()]);
    s.answer(
        &ask,
        json!({ "action": "accept", "content": { "run": true } }),
    );
    let (_, r) = s.read_response(id);
    assert_eq!(refusal_code(&r), "confirm_required", "{r}");
    assert!(
        r["result"]["content"][1]["text"]
            .as_str()
            .unwrap()
            .contains("changed since the person accepted"),
        "{r}"
    );
    assert!(!w.work.join("c.txt").exists());
    assert!(s.finish().success());
}

#[test]
fn calls_waiting_for_the_person_hold_no_slot() {
    let w = world_with(&["echo"]);
    let mut s = Raw::start_with(&w, None, &asking());
    // More questions open than the server runs calls at once…
    let mut asks = Vec::new();
    let mut ids = Vec::new();
    for i in 0..10 {
        ids.push(s.send_request("tools/call", write_args(&format!("w{i}.txt"), "x")));
        asks.push(s.read_request("elicitation/create").1);
    }
    // …and a read is still answered.
    let r = s.request(
        "tools/call",
        json!({ "name": "echo.echo.say", "arguments": { "text": "still here" } }),
    );
    assert_eq!(r["result"]["isError"], false, "{r}");
    for ask in &asks {
        s.answer(ask, json!({ "action": "decline" }));
    }
    for id in ids {
        let (_, r) = s.read_response(id);
        assert_eq!(refusal_code(&r), "confirm_required");
    }
    assert!(s.finish().success());
}

#[test]
fn a_session_is_shown_only_its_tools_and_the_gate_refuses_the_others_by_name() {
    let w = world_with(&["transit", "echo"]);
    let token = session(&w, &["--principal", "agent-1"]);
    let mut s = Raw::start(&w, Some(&token));
    assert_eq!(s.tool_names(), Vec::<String>::new());
    run_ok(&w, &["grant", "agent-1", "transit", "verb.exec.read"]);
    // A grant changes the list: announced at the next request.
    let (notes, r) = s.request_seeing("tools/list", json!({}));
    assert_eq!(
        notes,
        vec![json!({ "jsonrpc": "2.0", "method": "notifications/tools/list_changed" })]
    );
    let names: Vec<&str> = r["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "transit.find",
            "transit.plan",
            "transit.show",
            "transit.status",
            "transit.follow"
        ],
        "transit's tools in manifest order, and none of echo's"
    );
    // A tool not listed, called by name: the gate refuses it as it always has.
    let r = s.call("echo.echo.say", json!({ "text": "hi" }));
    assert_eq!(refusal_code(&r), "missing_grant");
    assert_eq!(last_audit(&w)["code"], "missing_grant");
    let r = s.call(
        "echo.echo.write",
        json!({ "name": "x.txt", "text": "x", "confirm": true }),
    );
    assert_eq!(refusal_code(&r), "missing_grant");
    let r = s.call("transit.find", json!({ "query": "central" }));
    assert_eq!(r["result"]["isError"], false, "{r}");
    // A revoke, too.
    run_ok(&w, &["revoke", "agent-1", "transit"]);
    let (notes, _) = s.request_seeing("ping", json!({}));
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert_eq!(s.tool_names(), Vec::<String>::new());
    assert!(s.finish().success());
}

const APPROVAL_POLICY: &str = r#"{
  "schema_version": "histos.policy/0.1",
  "tools": {
    "echo.echo.say": {"args": {"text": {"type": "string"}},
                      "confirmation": {"required": true, "expires_in": 60},
                      "returns": {"text": {"type": "string"}}}
  },
  "roles": {"agent": {"allow": ["echo.echo.say"]}}
}"#;

fn approval_world(opt_in: bool) -> (World, String) {
    let w = world_with(&["echo"]);
    std::fs::write(w.hcp_home.join("policy.json"), APPROVAL_POLICY).unwrap();
    if opt_in {
        std::fs::write(
            w.hcp_home.join("config.json"),
            r#"{"mcp": {"approve_by_elicitation": true}}"#,
        )
        .unwrap();
    }
    let token = session(&w, &["--principal", "agent-1", "--role", "agent"]);
    run_ok(&w, &["grant", "agent-1", "echo", "verb.exec.read"]);
    (w, token)
}

fn say(text: &str) -> Value {
    json!({ "name": "echo.echo.say", "arguments": { "text": text } })
}

#[test]
fn without_the_opt_in_a_runtime_policy_approval_is_the_owners() {
    let (w, token) = approval_world(false);
    let mut s = Raw::start_with(&w, Some(&token), &asking());
    let id = s.send_request("tools/call", say("hi"));
    let (before, r) = s.read_response(id);
    assert_eq!(before, Vec::<Value>::new(), "asked without the opt-in");
    assert_eq!(refusal_code(&r), "requires_confirmation");
    let approval = r["result"]["structuredContent"]["approval_id"]
        .as_str()
        .unwrap()
        .to_owned();
    run_ok(&w, &["approve", &approval]);
    let r = s.call("echo.echo.say", json!({ "text": "hi" }));
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert!(last_audit(&w).get("approved_by").is_none());
    assert!(s.finish().success());
}

#[test]
fn with_the_opt_in_the_person_approves_that_pending_call_once() {
    let (w, token) = approval_world(true);
    let mut s = Raw::start_with(&w, Some(&token), &asking());
    // The tool's outputSchema is the policy's `returns`.
    let r = s.request("tools/list", json!({}));
    assert_eq!(
        r["result"]["tools"][0]["outputSchema"]["properties"],
        json!({ "text": { "type": "string" } })
    );
    // Declined: still pending, for the owner.
    let id = s.send_request("tools/call", say("first"));
    let (_, ask) = s.read_request("elicitation/create");
    let approval = ask["params"]["_meta"]["hcp"]["approval"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let message = ask["params"]["message"].as_str().unwrap();
    assert!(
        message.contains("`agent-1` calls `echo.echo.say`"),
        "{message}"
    );
    assert!(message.contains("text = first"), "{message}");
    s.answer(&ask, json!({ "action": "decline" }));
    let (_, r) = s.read_response(id);
    assert_eq!(refusal_code(&r), "requires_confirmation");
    let pending = run_ok(&w, &["approvals", "--json"]);
    assert!(pending.contains(&approval), "{pending}");
    // Accepted: approved through the store as `hcp approve` would, and the call runs once.
    let id = s.send_request("tools/call", say("second"));
    let (_, ask) = s.read_request("elicitation/create");
    let approval = ask["params"]["_meta"]["hcp"]["approval"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    s.answer(
        &ask,
        json!({ "action": "accept", "content": { "run": true } }),
    );
    let (_, r) = s.read_response(id);
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert_eq!(
        r["result"]["structuredContent"],
        json!({ "text": "second" })
    );
    let a = last_audit(&w);
    assert_eq!(
        (&a["approval_id"], &a["approved_by"]),
        (&json!(approval), &json!("elicitation"))
    );
    let all = run_ok(&w, &["approvals", "--all", "--json"]);
    let all: Vec<Value> = serde_json::from_str(&all).unwrap();
    let used = all.iter().find(|x| x["id"] == approval.as_str()).unwrap();
    assert_eq!(used["state"], "used", "{used}");
    // The same call again is paused anew: the approval was for one call.
    let id = s.send_request("tools/call", say("second"));
    let (_, ask) = s.read_request("elicitation/create");
    assert_ne!(
        ask["params"]["_meta"]["hcp"]["approval"]["id"],
        json!(approval)
    );
    s.answer(&ask, json!({ "action": "cancel" }));
    let (_, r) = s.read_response(id);
    assert_eq!(refusal_code(&r), "requires_confirmation");
    assert!(s.finish().success());
}

#[test]
fn a_bad_mcp_key_is_bad_config() {
    let w = world_with(&["echo"]);
    std::fs::write(
        w.hcp_home.join("config.json"),
        r#"{"mcp": {"approve_by_elicitation": "yes"}}"#,
    )
    .unwrap();
    let out = w.run(&["exec", "echo.say", "hi"]);
    assert_eq!(out.status.code(), Some(78), "{}", w.render(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad_config"));
}
