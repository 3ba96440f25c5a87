//! The `kind: openapi` gold pack `tasks` against its server, `hcp-example-api`: every verb
//! names an operation of the document beside it, its arguments are what the document
//! says, and each verb's request, planned as exec plans it, gets the answer the skill
//! promises.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use hcp_examples::api::ApiServer;
use hcp_model::{Kind, Operation as Effect, parse_manifest, parse_policy};
use hcp_openapi::{Credential, Document, HttpOutcome, Limits, ServerUrl, plan, send};
use serde_json::{Map, Value, json};

fn pack_file(name: &str) -> String {
    std::fs::read_to_string(common::packs_dir().join("tasks").join(name)).unwrap()
}

#[test]
fn the_pack_is_four_files_and_every_verb_is_an_operation() {
    let files = common::files(&common::packs_dir().join("tasks"));
    assert_eq!(
        files,
        ["HARNESS.md", "openapi.json", "policy.json", "surface.json"]
    );
    let m = parse_manifest(&pack_file("surface.json")).unwrap();
    let p = parse_policy(&pack_file("policy.json")).unwrap();
    assert_eq!(m.kind, Kind::Openapi);
    assert_eq!(m.openapi.as_ref().unwrap().spec, "openapi.json");
    let doc = Document::parse(pack_file("openapi.json").as_bytes()).unwrap();
    let verbs: Vec<&String> = m.verbs.keys().collect();
    let policed: Vec<&String> = p.verbs.keys().collect();
    assert_eq!(verbs, policed);
    for (key, v) in &m.verbs {
        let op = doc.operation(v.operation.as_deref().unwrap()).unwrap();
        let effect = p.verbs.get(key).unwrap().operation;
        let safe = op.method == hcp_openapi::Method::Get;
        assert_eq!(
            effect == Effect::Read,
            safe,
            "{key}: reads are exactly the GETs"
        );
    }
    assert_eq!(m.connect_verb(), Some("connect"));
}

fn call(
    doc: &Document,
    server: &ServerUrl,
    id: &str,
    args: Value,
    token: Option<&Credential>,
) -> hcp_openapi::HttpAnswer {
    let args: Map<String, Value> = args.as_object().cloned().unwrap_or_default();
    let p = plan(&doc.operation(id).unwrap(), server, &args, token).unwrap();
    match send(&p, &Limits::default(), None) {
        HttpOutcome::Answered(a) => a,
        other => panic!("{id}: {other:?}"),
    }
}

#[test]
fn each_verb_against_the_example_server() {
    let s = ApiServer::start(0).unwrap();
    let doc = Document::parse(pack_file("openapi.json").as_bytes()).unwrap();
    // The operator's `server` replaces the document's fixed port.
    let server = ServerUrl::parse(&format!("{}/v1", s.origin())).unwrap();
    let t = call(&doc, &server, "createToken", json!({"user": "ann"}), None);
    assert_eq!(t.http_status, Some(201));
    let token = Credential::from_binding(t.data().as_object().unwrap()).unwrap();
    let a = call(
        &doc,
        &server,
        "createTask",
        json!({"title": "Buy milk", "priority": "high"}),
        Some(&token),
    );
    assert_eq!((a.http_status, a.exit_code()), (Some(201), 0));
    let id = a.data()["id"].as_str().unwrap().to_owned();
    let l = call(
        &doc,
        &server,
        "listTasks",
        json!({"status": "open", "limit": "10"}),
        Some(&token),
    );
    assert_eq!(l.data()[0]["title"], "Buy milk");
    let d = call(
        &doc,
        &server,
        "completeTask",
        json!({"task_id": id}),
        Some(&token),
    );
    assert_eq!(d.data()["status"], "done");
    let g = call(
        &doc,
        &server,
        "getTask",
        json!({"task_id": id}),
        Some(&token),
    );
    assert_eq!(g.data()["status"], "done");
    let r = call(
        &doc,
        &server,
        "deleteTask",
        json!({"task_id": id}),
        Some(&token),
    );
    assert_eq!((r.http_status, r.exit_code()), (Some(204), 0));
    let g = call(
        &doc,
        &server,
        "getTask",
        json!({"task_id": id}),
        Some(&token),
    );
    assert_eq!((g.http_status, g.exit_code()), (Some(404), 1));
    // The document's id pattern refuses what is not a task id before anything is sent.
    let before = s.hits();
    let e = plan(
        &doc.operation("getTask").unwrap(),
        &server,
        json!({"task_id": "../tokens"}).as_object().unwrap(),
        Some(&token),
    )
    .unwrap_err();
    assert_eq!(e.code, "arg_invalid");
    assert_eq!(s.hits(), before);
}

#[test]
fn the_server_binary_prints_its_origin_and_stops_when_stdin_closes_if_asked() {
    use std::io::BufRead;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_hcp-example-api"))
        .arg("--until-stdin-closes")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let origin = line.trim().to_owned();
    assert!(origin.starts_with("http://127.0.0.1:"), "{origin}");
    let server = ServerUrl::parse(&format!("{origin}/v1")).unwrap();
    let doc = Document::parse(pack_file("openapi.json").as_bytes()).unwrap();
    let t = call(&doc, &server, "createToken", json!({"user": "bo"}), None);
    assert_eq!(t.data(), json!({"token": "tok-bo"}));
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
}

#[test]
fn the_server_binary_serves_on_after_its_stdin_closes_until_it_is_killed() {
    use std::io::BufRead;
    use std::os::unix::process::ExitStatusExt;
    // A script's `hcp-example-api &`: stdin at end of file from the start.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_hcp-example-api"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let origin = line.trim().to_owned();
    assert!(origin.starts_with("http://127.0.0.1:"), "{origin}");
    let server = ServerUrl::parse(&format!("{origin}/v1")).unwrap();
    let doc = Document::parse(pack_file("openapi.json").as_bytes()).unwrap();
    for user in ["bo", "cy"] {
        let t = call(&doc, &server, "createToken", json!({"user": user}), None);
        assert_eq!(t.data(), json!({"token": format!("tok-{user}")}));
    }
    assert!(child.try_wait().unwrap().is_none(), "it stopped on its own");
    child.kill().unwrap();
    let status = child.wait().unwrap();
    // Ended by the kill (SIGKILL, 9), not by an exit of its own.
    assert_eq!(status.signal(), Some(9), "{status:?}");
}
