//! `hcp mcp`'s revisions (RUNTIME §10, "Revisions"): 2025-06-18 and 2025-11-25 with the
//! `initialize` handshake, 2026-07-28 stateless (every request carries its `_meta`,
//! `server/discover`, the person asked through an input-required result answered by a
//! retry), and what is refused: an unknown revision, a batch, an answer that is not
//! exactly the one asked for.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod mcp_common;

use mcp_common::{Raw, last_audit, modern, refusal_code, world_with};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn asking() -> Value {
    json!({ "elicitation": {} })
}

fn write(name: &str, text: &str, caps: &Value) -> Value {
    modern(
        json!({ "name": "echo.echo.write", "arguments": { "name": name, "text": text } }),
        caps,
    )
}

#[test]
fn initialize_answers_the_newest_revision_both_know() {
    let w = world_with(&["transit"]);
    for (asked, got) in [
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        // 2026-07-28 has no handshake: a client that still sends `initialize` is answered
        // with the newest revision that has one; so are one hcp does not serve and one it
        // has never heard of.
        ("2026-07-28", "2025-11-25"),
        ("2024-11-05", "2025-11-25"),
        ("2099-01-01", "2025-11-25"),
    ] {
        let mut s = Raw::spawn(&w, None);
        let r = s.request(
            "initialize",
            json!({ "protocolVersion": asked, "capabilities": {},
                    "clientInfo": { "name": "raw", "version": "0" } }),
        );
        assert_eq!(r["result"]["protocolVersion"], got, "{asked}: {r}");
        assert!(s.finish().success());
    }
}

#[test]
fn stateless_requests_discover_list_and_call() {
    let w = world_with(&["transit"]);
    let mut s = Raw::spawn(&w, None);
    let r = s.request("server/discover", modern(json!({}), &json!({})));
    assert_eq!(
        r["result"]["supportedVersions"],
        json!(["2025-06-18", "2025-11-25", "2026-07-28"]),
        "{r}"
    );
    assert!(r["result"]["capabilities"]["tools"].is_object(), "{r}");
    let r = s.request("tools/list", modern(json!({}), &json!({})));
    let names: Vec<&str> = r["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"transit.find"), "{r}");
    let r = s.request(
        "tools/call",
        modern(
            json!({ "name": "transit.find", "arguments": { "query": "central" } }),
            &json!({}),
        ),
    );
    assert_eq!(r["result"]["isError"], false, "{r}");
    // A request naming a revision hcp does not serve is refused with the list it does.
    let mut meta = modern(json!({}), &json!({}));
    meta["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let r = s.request("tools/list", meta);
    assert!(r["error"].is_object(), "{r}");
    assert!(r.to_string().contains("2026-07-28"), "{r}");
    // No batches in any revision hcp serves.
    s.send_raw(r#"[{"jsonrpc": "2.0", "id": 90, "method": "ping"}]"#);
    assert_eq!(s.read()["error"]["code"], -32600);
    assert!(s.finish().success());
}

/// Reads the input-required result of a call, its one question and the handle.
fn question(r: &Value) -> (Value, String) {
    let result = &r["result"];
    assert_eq!(result["resultType"], "input_required", "{r}");
    let q = result["inputRequests"]["hcp_person"].clone();
    assert_eq!(q["method"], "elicitation/create", "{r}");
    let handle = result["requestState"].as_str().unwrap().to_owned();
    assert_eq!(handle.len(), 64, "{handle}");
    (q, handle)
}

fn retry(name: &str, text: &str, handle: &str, answer: Value) -> Value {
    let mut p = write(name, text, &asking());
    p["requestState"] = json!(handle);
    p["inputResponses"] = json!({ "hcp_person": answer });
    p
}

fn accept() -> Value {
    json!({ "action": "accept", "content": { "run": true } })
}

#[test]
fn the_person_is_asked_with_an_input_required_result_and_an_accept_runs_it_once() {
    let w = world_with(&["echo"]);
    let mut s = Raw::spawn(&w, None);
    // A client that asks its person is not offered `confirm`.
    let r = s.request("tools/list", modern(json!({}), &asking()));
    let tool = r["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "echo.echo.write")
        .unwrap()
        .clone();
    assert!(tool["inputSchema"]["properties"].get("confirm").is_none());

    let r = s.request("tools/call", write("a.txt", "one line", &asking()));
    let (q, handle) = question(&r);
    let message = q["params"]["message"].as_str().unwrap();
    assert!(
        message.contains("hcp-example-echo write --confirm --json -- a.txt 'one line'"),
        "{message}"
    );
    assert_eq!(q["params"]["requestedSchema"]["required"], json!(["run"]));
    assert!(
        !w.work.join("a.txt").exists(),
        "nothing runs while the person reads"
    );
    assert_eq!(last_audit(&w)["code"], "confirm_required");

    let r = s.request("tools/call", retry("a.txt", "one line", &handle, accept()));
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
    // The same answer again: the question was answered; nothing runs, nothing is asked.
    std::fs::remove_file(w.work.join("a.txt")).unwrap();
    let r = s.request("tools/call", retry("a.txt", "one line", &handle, accept()));
    assert_eq!(refusal_code(&r), "confirm_required");
    assert!(
        r["result"]
            .get("resultType")
            .is_none_or(|t| t != "input_required")
    );
    assert!(!w.work.join("a.txt").exists());
    assert!(s.finish().success());
}

#[test]
fn anything_but_an_accept_of_that_very_call_is_confirm_required() {
    let w = world_with(&["echo"]);
    let mut s = Raw::spawn(&w, None);
    for (answer, name, text, handle) in [
        (json!({ "action": "decline" }), "b.txt", "x", None),
        (json!({ "action": "cancel" }), "b.txt", "x", None),
        (
            json!({ "action": "accept", "content": { "run": false } }),
            "b.txt",
            "x",
            None,
        ),
        (
            json!({ "action": "accept", "content": { "run": "true" } }),
            "b.txt",
            "x",
            None,
        ),
        // An accept of the question for b.txt, retried as a call of other arguments.
        (accept(), "c.txt", "x", None),
        (accept(), "b.txt", "other text", None),
        // A handle hcp never gave.
        (accept(), "b.txt", "x", Some("0".repeat(64))),
    ] {
        let r = s.request("tools/call", write("b.txt", "x", &asking()));
        let (_, given) = question(&r);
        let handle = handle.unwrap_or(given);
        let r = s.request("tools/call", retry(name, text, &handle, answer.clone()));
        assert_eq!(
            refusal_code(&r),
            "confirm_required",
            "{answer} {name} {text}: {r}"
        );
        assert!(
            r["result"]["hint"].is_null()
                || r["result"]["structuredContent"]["hint"]
                    .as_str()
                    .unwrap()
                    .contains("did not accept"),
            "{r}"
        );
        assert!(!w.work.join(name).exists(), "{answer}");
    }
    // A client without the capability is never asked: `confirm required`, as on stdio.
    let r = s.request("tools/call", write("d.txt", "x", &json!({})));
    assert_eq!(refusal_code(&r), "confirm_required");
    assert!(s.finish().success());
}

/// Under 2025-06-18 the person is asked with `elicitation/create`, and an answer counts
/// only with the exact id hcp sent: the string `"1"` does not answer the request `1`.
#[test]
fn an_elicitation_is_answered_only_by_its_exact_id() {
    let w = world_with(&["echo"]);
    let mut s = Raw::start_with(&w, None, &asking());
    let id = s.send_request(
        "tools/call",
        json!({ "name": "echo.echo.write", "arguments": { "name": "e.txt", "text": "x" } }),
    );
    let (_, ask) = s.read_request("elicitation/create");
    assert!(ask["id"].is_number(), "{ask}");
    let as_text = ask["id"].to_string();
    s.send(&json!({ "jsonrpc": "2.0", "id": as_text, "result": accept() }));
    // Nothing ran on the string id; the real answer still counts.
    let (notes, pong) = s.request_seeing("ping", json!({}));
    assert!(pong["result"].is_object(), "{pong} {notes:?}");
    assert!(!w.work.join("e.txt").exists());
    s.answer(&ask, accept());
    let (_, r) = s.read_response(id);
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert!(w.work.join("e.txt").exists());
    assert!(s.finish().success());
}

/// With `mcp.approve_by_elicitation`, a call the runtime policy pauses for `confirmation`
/// is put to the person as an input-required result too: a decline leaves the approval
/// pending for the owner; an accept approves exactly it, and the retry runs once.
#[test]
fn with_the_opt_in_the_person_approves_through_an_input_required_result() {
    let w = world_with(&["echo"]);
    std::fs::write(
        w.hcp_home.join("policy.json"),
        r#"{"schema_version": "histos.policy/0.1",
            "tools": {"echo.echo.say": {"args": {"text": {"type": "string"}},
                                        "confirmation": {"required": true, "expires_in": 60}}},
            "roles": {"agent": {"allow": ["echo.echo.say"]}}}"#,
    )
    .unwrap();
    std::fs::write(
        w.hcp_home.join("config.json"),
        r#"{"mcp": {"approve_by_elicitation": true}}"#,
    )
    .unwrap();
    let out = w.run(&[
        "session",
        "start",
        "--principal",
        "agent-1",
        "--role",
        "agent",
    ]);
    assert!(out.status.success(), "{}", w.render(&out));
    let token = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let out = w.run(&["grant", "agent-1", "echo", "verb.exec.read"]);
    assert!(out.status.success(), "{}", w.render(&out));
    let mut s = Raw::spawn(&w, Some(&token));
    let say = |text: &str| {
        modern(
            json!({ "name": "echo.echo.say", "arguments": { "text": text } }),
            &asking(),
        )
    };
    let answered = |text: &str, handle: &str, answer: Value| {
        let mut p = say(text);
        p["requestState"] = json!(handle);
        p["inputResponses"] = json!({ "hcp_person": answer });
        p
    };
    // Declined: still pending.
    let r = s.request("tools/call", say("first"));
    let (q, handle) = question(&r);
    let approval = q["params"]["_meta"]["hcp"]["approval"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = s.request(
        "tools/call",
        answered("first", &handle, json!({ "action": "decline" })),
    );
    assert_eq!(refusal_code(&r), "requires_confirmation");
    let out = w.run(&["approvals", "--json"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains(&approval));
    // Accepted: approved once, as `hcp approve` would, and the retry runs.
    let r = s.request("tools/call", say("second"));
    let (q, handle) = question(&r);
    let approval = q["params"]["_meta"]["hcp"]["approval"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = s.request("tools/call", answered("second", &handle, accept()));
    assert_eq!(r["result"]["isError"], false, "{r}");
    let a = last_audit(&w);
    assert_eq!(
        (&a["approval_id"], &a["approved_by"]),
        (&json!(approval), &json!("elicitation"))
    );
    assert!(s.finish().success());
}
