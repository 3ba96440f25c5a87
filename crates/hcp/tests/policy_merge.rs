//! A new pack under a runtime policy (RUNTIME §7, issue 27) through the built `hcp`:
//! `hcp policy init --merge FILE` adds the new packs' tools to an existing policy and
//! keeps every edit; a session's call of a new pack is refused with every step it still
//! needs in one answer (`steps`); `hcp policy lock` warns of each verb the policy does not
//! cover.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod exec_common;

use common::World;
use exec_common::{authority_records, exec_json_env, grant, install, session, source, status};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Output;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn ok(w: &World, out: &Output) -> String {
    assert!(out.status.success(), "{}", w.render(out));
    text(&out.stdout)
}

/// The `  code: …` line of a refusal's stderr.
fn code_line(out: &Output) -> String {
    text(&out.stderr)
        .lines()
        .find_map(|l| l.trim().strip_prefix("code: ").map(str::to_owned))
        .unwrap_or_default()
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap()
}

/// The owner's hand edits of a starting policy: a comment, a tighter argument, a rule and
/// a role of its own.
fn hand_edit(start: &str) -> String {
    let edited = start
        .replace(
            "  transit.find:\n    access: read\n    args:\n      query: {type: string}\n",
            "  transit.find:\n    access: read\n    # the owner: short queries only\n    args:\n      query: {type: string, max_length: 40}\n    rate_limit: 30\n",
        )
        .replace("roles:\n", "# the owner's roles\nroles:\n  reader:\n    allow: [transit.find]\n");
    assert_ne!(edited, start, "the edits apply");
    edited
}

/// A world with transit installed, the owner's edited policy at `FILE` (not in the
/// store), then ledger installed after it was written.
fn world_with_edited_policy(ext: &str) -> (World, PathBuf, String) {
    let w = exec_common::world(&["transit"]);
    let start = ok(&w, &w.run(&["policy", "init", "--role", "agent"]));
    let file = w.root().join(format!("policy.{ext}"));
    let edited = hand_edit(&start);
    std::fs::write(&file, &edited).unwrap();
    install(&w, &source("ledger"));
    (w, file, edited)
}

#[test]
fn merge_adds_only_the_new_tools_and_keeps_every_edit() {
    let (w, file, edited) = world_with_edited_policy("yaml");
    let f = file.display().to_string();
    let out = w.run(&["policy", "init", "--merge", &f, "--role", "agent"]);
    insta::assert_snapshot!("merge_report", w.render(&out));
    let merged = read(&file);
    insta::assert_snapshot!("merge_yaml", merged);
    // every line of the edited file is still there, in its order
    let mut rest = merged.lines();
    for line in edited.lines() {
        assert!(rest.any(|l| l == line), "lost or moved: {line:?}\n{merged}");
    }
    // the result is a policy, covering every active verb, the new ones allowed for the role
    ok(&w, &w.run(&["policy", "check", &f]));
    ok(&w, &w.run(&["policy", "coverage", &f]));
    let decide = |tool: &str| -> Value {
        let mut c = w.hcp();
        let out = c
            .args(["policy", "decide", &f])
            .write_stdin(
                json!({"principal": {"role": "agent"}, "call": {"tool": tool, "args": {}}})
                    .to_string(),
            )
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap()
    };
    assert_eq!(decide("ledger.ledger.balance")["effect"], json!("allow"));
    // the hand-edited rule is kept: a long query is still refused
    assert!(merged.contains("      query: {type: string, max_length: 40}\n    rate_limit: 30\n"));

    // an act of authority, recorded once with what it added
    let merges = |w: &World| -> Vec<Value> {
        authority_records(w)
            .into_iter()
            .filter(|r| r["act"] == "policy init --merge")
            .collect()
    };
    let recs = merges(&w);
    assert_eq!(recs.len(), 1, "{recs:?}");
    assert_eq!(
        (
            recs[0]["changed"]["file"].clone(),
            recs[0]["changed"]["role"].clone()
        ),
        (json!(f), json!("agent"))
    );
    assert_eq!(
        recs[0]["changed"]["added"].as_array().map(Vec::len),
        Some(5)
    );

    // again: a no-op, nothing written, nothing recorded
    let before = std::fs::metadata(&file).unwrap().modified().unwrap();
    let out = w.run(&["policy", "init", "--merge", &f, "--role", "agent"]);
    insta::assert_snapshot!("merge_again", w.render(&out));
    assert_eq!(read(&file), merged);
    assert_eq!(
        std::fs::metadata(&file).unwrap().modified().unwrap(),
        before
    );
    let out = w.run(&["policy", "init", "--merge", &f, "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (v["added"].clone(), v["written"].clone()),
        (json!([]), json!(false))
    );
    assert_eq!(merges(&w).len(), 1);
}

#[test]
fn merge_without_a_role_grants_nothing_new_and_keeps_the_mode() {
    use std::os::unix::fs::PermissionsExt;
    let (w, file, _) = world_with_edited_policy("yaml");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
    let f = file.display().to_string();
    let out = w.run(&["policy", "init", "--merge", &f, "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["added"],
        json!([
            "ledger.ledger.balance",
            "ledger.ledger.list",
            "ledger.ledger.post",
            "ledger.ledger.preview",
            "ledger.ledger.validate"
        ]),
        "{v}"
    );
    let merged = read(&file);
    assert!(!merged.contains("      - ledger."), "{merged}");
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o7777,
        0o640
    );
    // nothing is left beside it
    let names: Vec<String> = std::fs::read_dir(w.root())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".hcp-merge-"))
        .collect();
    assert_eq!(names, Vec::<String>::new());
}

#[test]
fn merge_into_a_json_policy_keeps_it_json() {
    let w = exec_common::world(&["transit"]);
    let file = w.root().join("policy.json");
    let start = "{\n  \"schema_version\": \"histos.policy/0.1\",\n  \"tools\": {\n    \"transit.find\": {\"access\": \"read\", \"args\": {\"query\": {\"type\": \"string\", \"max_length\": 40}}}\n  },\n  \"roles\": {\"agent\": {\"allow\": [\"transit.find\"]}}\n}\n";
    std::fs::write(&file, start).unwrap();
    let f = file.display().to_string();
    let out = w.run(&["policy", "init", "--merge", &f, "--role", "agent"]);
    assert!(out.status.success(), "{}", w.render(&out));
    let merged = read(&file);
    insta::assert_snapshot!("merge_json", merged);
    assert!(merged.starts_with("{\n  \"schema_version\": \"histos.policy/0.1\",\n  \"tools\": {\n    \"transit.find\": {\"access\": \"read\", \"args\": {\"query\": {\"type\": \"string\", \"max_length\": 40}}},\n"));
    ok(&w, &w.run(&["policy", "coverage", &f]));
    // `tools: {}` in YAML becomes a block mapping
    let y = w.root().join("empty.yaml");
    std::fs::write(
        &y,
        "schema_version: histos.policy/0.1\ntools: {}\nroles:\n  agent:\n    allow: []\n",
    )
    .unwrap();
    let y = y.display().to_string();
    ok(
        &w,
        &w.run(&["policy", "init", "--merge", &y, "--role", "agent"]),
    );
    ok(&w, &w.run(&["policy", "coverage", &y]));
}

#[test]
fn a_file_that_does_not_load_is_refused_at_its_line_and_column_and_kept() {
    let w = exec_common::world(&["transit"]);
    for (name, body, code) in [
        // an unknown key, found by its path
        (
            "unknown.yaml",
            "schema_version: histos.policy/0.1\ntools:\n  transit.find:\n    args:\n      query: {type: string, maxLength: 40}\n",
            "unknown_key",
        ),
        // YAML that does not parse
        (
            "syntax.yaml",
            "schema_version: histos.policy/0.1\ntools:\n  transit.find: {args: {}\n",
            "unparseable",
        ),
        // JSON that does not parse
        (
            "syntax.json",
            "{\"schema_version\": \"histos.policy/0.1\", \"tools\": {,}}\n",
            "unparseable",
        ),
        // not UTF-8
        (
            "bytes.yaml",
            "schema_version: histos.policy/0.1\ntools: {}\n# caf\u{00e9}\n",
            "unparseable",
        ),
    ] {
        let p = w.root().join(name);
        let bytes = if name == "bytes.yaml" {
            body.replace('\u{00e9}', "\u{1}")
                .into_bytes()
                .into_iter()
                .map(|b| if b == 1 { 0xff } else { b })
                .collect()
        } else {
            body.as_bytes().to_vec()
        };
        std::fs::write(&p, &bytes).unwrap();
        let out = w.run(&["policy", "init", "--merge", &p.display().to_string()]);
        assert_eq!(
            (status(&out), code_line(&out)),
            (1, code.to_owned()),
            "{}",
            w.render(&out)
        );
        insta::assert_snapshot!(format!("merge_refused_{name}"), w.render(&out));
        assert_eq!(
            std::fs::read(&p).unwrap(),
            bytes,
            "{name} is kept as it was"
        );
    }
    // a file that is not there
    let out = w.run(&["policy", "init", "--merge", "nope.yaml"]);
    assert_eq!((status(&out), code_line(&out)), (1, "not_found".to_owned()));
    // a shape the merge cannot extend in place: said, nothing written
    let p = w.root().join("flow.yaml");
    let body = "schema_version: histos.policy/0.1\ntools: {transit.find: {args: {query: {type: string}}}}\n";
    std::fs::write(&p, body).unwrap();
    let out = w.run(&["policy", "init", "--merge", &p.display().to_string()]);
    assert_eq!(code_line(&out), "bad_input", "{}", w.render(&out));
    assert!(
        text(&out.stderr).contains("flow.yaml:2:8: `tools` is written as a flow mapping"),
        "{}",
        w.render(&out)
    );
    assert_eq!(read(&p), body);
    // a role without an `allow` list
    let p = w.root().join("norole.yaml");
    let body = "schema_version: histos.policy/0.1\ntools:\n  transit.find:\n    args: {query: {type: string}}\nroles: {}\n";
    std::fs::write(&p, body).unwrap();
    let out = w.run(&[
        "policy",
        "init",
        "--merge",
        &p.display().to_string(),
        "--role",
        "agent",
    ]);
    assert_eq!(code_line(&out), "bad_input", "{}", w.render(&out));
    assert_eq!(read(&p), body);
}

#[test]
fn merge_is_the_owners() {
    let (w, file, edited) = world_with_edited_policy("yaml");
    let token = session(&w, "agent-1", &[]);
    let mut c = w.hcp();
    let out = c
        .args(["policy", "init", "--merge", &file.display().to_string()])
        .env("HCP_SESSION", &token)
        .output()
        .unwrap();
    assert_eq!((status(&out), code_line(&out)), (77, "owner_only".into()));
    assert!(
        text(&out.stderr)
            .contains("the owner is the Unix user running `hcp` without `HCP_SESSION`"),
        "{}",
        w.render(&out)
    );
    assert_eq!(read(&file), edited);
}

// ---------------------------------------------------------------- one answer

/// A store whose policy (role `agent`, every transit tool) and lock cover transit, an
/// agent granted transit alone; then ledger installed.
fn governed_world() -> (World, String, PathBuf) {
    let w = exec_common::world(&["transit"]);
    let policy = w.hcp_home.join("policy.yaml");
    std::fs::write(
        &policy,
        ok(&w, &w.run(&["policy", "init", "--role", "agent"])),
    )
    .unwrap();
    ok(&w, &w.run(&["policy", "lock"]));
    let token = session(&w, "agent-1", &["--role", "agent"]);
    grant(&w, "agent-1", "transit", &["verb.exec.read"]);
    install(&w, &source("ledger"));
    (w, token, policy)
}

fn steps_of(v: &Value) -> Vec<(String, Option<String>)> {
    v["steps"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|s| {
                    (
                        s["code"].as_str().unwrap().to_owned(),
                        s["command"].as_str().map(str::to_owned),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_new_pack_under_a_policy_is_reported_in_one_answer() {
    let (w, token, policy) = governed_world();
    let p = policy.display().to_string();
    let as_agent = |args: &[&str]| exec_json_env(&w, args, &[("HCP_SESSION", &token)]);
    let (out, v) = as_agent(&["ledger.balance"]);
    // the first failing check's code, every step at once
    assert_eq!(
        (status(&out), v["code"].as_str()),
        (77, Some("missing_grant")),
        "{v}"
    );
    assert_eq!(
        steps_of(&v),
        vec![
            (
                "missing_grant".into(),
                Some("hcp grant agent-1 ledger verb.exec.read".into())
            ),
            (
                "unknown_tool".into(),
                Some(format!("hcp policy init --merge {p} --role agent"))
            ),
            ("tool_drift".into(), Some("hcp policy lock".into())),
        ],
        "{v}"
    );
    // the text face says the same
    let mut c = w.hcp();
    let out = c
        .args(["exec", "ledger.balance"])
        .env("HCP_SESSION", &token)
        .output()
        .unwrap();
    insta::assert_snapshot!("one_answer_text", w.render(&out));
    // the lock warns of the verbs the policy does not cover (before the merge)
    let out = w.run(&["policy", "lock", "--json"]);
    assert!(out.status.success(), "{}", w.render(&out));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        r["uncovered"],
        json!([
            "ledger.ledger.balance",
            "ledger.ledger.list",
            "ledger.ledger.post",
            "ledger.ledger.preview",
            "ledger.ledger.validate"
        ])
    );
    let err = text(&out.stderr);
    assert!(
        err.contains("warning: `ledger.ledger.balance` is locked but the runtime policy `")
            && err.contains("does not name it: every session call of it is refused (unknown_tool)"),
        "{err}"
    );
    let out = w.run(&["policy", "lock"]);
    assert_eq!(
        text(&out.stderr).matches("warning: ").count(),
        5,
        "{}",
        w.render(&out)
    );
    // the doctor names the verbs the policy does not cover, and how to add them
    let d: Value = serde_json::from_slice(&w.run(&["doctor", "--json"]).stdout).unwrap();
    assert_eq!(
        d["runtime_policy"]["uncovered"].as_array().map(Vec::len),
        Some(5),
        "{d}"
    );
    let human = text(&w.run(&["doctor"]).stdout);
    assert!(
        human.contains(
            "  not in the policy     5 active verbs, refused to sessions (unknown_tool): ledger.ledger.balance, "
        ) && human.contains(&format!("`hcp policy init --merge {p}` adds them")),
        "{human}"
    );
    // take the steps one by one: each answer lists what is left
    grant(&w, "agent-1", "ledger", &["verb.exec.read"]);
    let (_, v) = as_agent(&["ledger.balance"]);
    assert_eq!(v["code"].as_str(), Some("unknown_tool"), "{v}");
    assert_eq!(
        steps_of(&v),
        vec![(
            "unknown_tool".into(),
            Some(format!("hcp policy init --merge {p} --role agent"))
        )]
    );
    ok(
        &w,
        &w.run(&["policy", "init", "--merge", &p, "--role", "agent"]),
    );
    let (out, v) = as_agent(&["ledger.balance"]);
    assert_eq!(status(&out), 0, "{v}");
    assert!(v.get("steps").is_none(), "{v}");
    // every verb covered: the lock warns of nothing
    let out = w.run(&["policy", "lock"]);
    assert!(text(&out.stderr).is_empty(), "{}", w.render(&out));
}

#[test]
fn a_locked_store_names_the_lock_step_after_the_merge() {
    let (w, token, policy) = governed_world();
    let p = policy.display().to_string();
    grant(&w, "agent-1", "ledger", &["verb.exec.read"]);
    ok(
        &w,
        &w.run(&["policy", "init", "--merge", &p, "--role", "agent"]),
    );
    let (out, v) = exec_json_env(&w, &["ledger.balance"], &[("HCP_SESSION", &token)]);
    assert_eq!(
        (status(&out), v["code"].as_str()),
        (77, Some("tool_drift")),
        "{v}"
    );
    assert_eq!(
        steps_of(&v),
        vec![("tool_drift".into(), Some("hcp policy lock".into()))]
    );
    ok(&w, &w.run(&["policy", "lock"]));
    let (out, v) = exec_json_env(&w, &["ledger.balance"], &[("HCP_SESSION", &token)]);
    assert_eq!(status(&out), 0, "{v}");
}

#[test]
fn a_role_the_policy_does_not_allow_is_a_step_of_its_own() {
    let (w, _, policy) = governed_world();
    let p = policy.display().to_string();
    ok(
        &w,
        &w.run(&["policy", "init", "--merge", &p, "--role", "agent"]),
    );
    ok(&w, &w.run(&["policy", "lock"]));
    let token = session(&w, "agent-2", &["--role", "auditor"]);
    grant(&w, "agent-2", "ledger", &["verb.exec.read"]);
    let (out, v) = exec_json_env(&w, &["ledger.balance"], &[("HCP_SESSION", &token)]);
    assert_eq!(
        (status(&out), v["code"].as_str()),
        (77, Some("rbac")),
        "{v}"
    );
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 1, "{v}");
    assert_eq!(steps[0]["code"], json!("rbac"));
    assert!(
        steps[0]["step"]
            .as_str()
            .unwrap()
            .contains("roles.auditor.allow"),
        "{v}"
    );
    assert_eq!(steps[0]["command"], Value::Null);
}
