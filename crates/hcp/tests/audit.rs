//! The audit trail through the built `hcp` (RUNTIME §6): `audit verify`, `audit tail`,
//! tampering, a torn tail, and concurrent appenders in separate processes.
//!
//! Records are appended with the store API (`hcp_store::audit::AuditLog`), the path
//! `hcp exec` uses; the concurrency test runs this test binary itself as the appender
//! processes (`child_appender`, which does nothing unless `HCP_TEST_AUDIT_CHILD` is set).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::World;
use hcp_model::{ArgValue, Land, Operation};
use hcp_store::Home;
use hcp_store::audit::{AuditLog, Decision, Entry, args_digest};
use hcp_store::session::Timestamp;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::process::Output;

macro_rules! snapshot {
    ($name:expr, $text:expr) => {
        insta::with_settings!({filters => vec![
            (r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}", "[UUID]"),
            (r"sha256:[0-9a-f]{64}", "[SHA256]"),
            (r"torn-(\d+)-[0-9a-f]{12}\.bin", "torn-$1-[SHORT].bin"),
        ]}, {
            insta::assert_snapshot!($name, $text);
        });
    };
}

const CHILD: &str = "HCP_TEST_AUDIT_CHILD";
const CHILD_HOME: &str = "HCP_TEST_AUDIT_HOME";
const PER_CHILD: u64 = 200;
const CHILDREN: u64 = 8;

fn entry(principal: &str, i: u64) -> Entry {
    let to = ArgValue::String(format!("stop {i}"));
    let allow = i % 3 != 1;
    Entry {
        principal: principal.into(),
        project: None,
        pack_id: Some("transit".into()),
        verb_key: "transit.status".into(),
        operation: Some(Operation::Read),
        land: Some(Land::Personal),
        decision: if allow {
            Decision::Allow
        } else {
            Decision::Deny
        },
        code: (!allow).then(|| "missing_grant".to_owned()),
        args_digest: args_digest([("stop", &to)]),
        exit_code: allow.then_some(0),
        duration_ms: i,
        extra: BTreeMap::new(),
    }
}

fn log(w: &World) -> AuditLog {
    AuditLog::new(&Home::open(&w.hcp_home).unwrap())
}

/// Appends `n` records stamped a second apart from a fixed time.
fn fill(w: &World, n: u64) {
    let l = log(w);
    for i in 0..n {
        let ts: Timestamp = format!("2026-01-01T00:00:{i:02}.250Z").parse().unwrap();
        l.append_at(&entry("alice", i), ts).unwrap();
    }
}

fn lines(w: &World) -> Vec<String> {
    std::fs::read_to_string(log(w).path())
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn write_lines(w: &World, lines: &[String]) {
    std::fs::write(log(w).path(), lines.join("\n") + "\n").unwrap();
}

fn id_of(line: &str) -> String {
    let v: Value = serde_json::from_str(line).unwrap();
    v["id"].as_str().unwrap().to_owned()
}

fn verify_json(w: &World) -> (Option<i32>, Value) {
    let o = w.run(&["audit", "verify", "--json"]);
    let v = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    (o.status.code(), v)
}

fn render(w: &World, o: &Output) -> String {
    w.render(o)
}

#[test]
fn an_empty_trail_verifies() {
    let w = World::new();
    let o = w.run(&["audit", "verify"]);
    snapshot!("verify_empty", render(&w, &o));
    let o = w.run(&["audit", "tail"]);
    assert_eq!((o.status.code(), o.stdout.len()), (Some(0), 0));
}

#[test]
fn verify_and_tail_a_sound_trail() {
    let w = World::new();
    fill(&w, 4);
    let o = w.run(&["audit", "verify"]);
    snapshot!("verify_clean", render(&w, &o));
    let o = w.run(&["audit", "tail", "-n", "3"]);
    snapshot!("tail", render(&w, &o));

    let o = w.run(&["audit", "tail", "-n", "2", "--json"]);
    assert_eq!(o.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let records = v.as_array().unwrap();
    assert_eq!(records.len(), 2);
    let text = lines(&w);
    let last: Value = serde_json::from_str(&text[3]).unwrap();
    assert_eq!(records[1], last, "tail --json gives the records as stored");
    assert_eq!(
        records[1]["prev"],
        serde_json::from_str::<Value>(&text[2]).unwrap()["hash"]
    );
    let keys: BTreeSet<&str> = records[0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        BTreeSet::from([
            "args_digest",
            "code",
            "decision",
            "duration_ms",
            "exit_code",
            "hash",
            "id",
            "land",
            "operation",
            "pack_id",
            "prev",
            "principal",
            "project",
            "ts",
            "verb_key"
        ])
    );
    assert!(
        !std::fs::read_to_string(log(&w).path())
            .unwrap()
            .contains("stop 1")
    );
}

#[test]
fn an_edited_field_names_its_record() {
    let w = World::new();
    fill(&w, 5);
    let mut text = lines(&w);
    let id = id_of(&text[2]);
    text[2] = text[2].replace("\"principal\":\"alice\"", "\"principal\":\"bob\"");
    write_lines(&w, &text);
    let o = w.run(&["audit", "verify"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains(&id));
    snapshot!("verify_edited", render(&w, &o));
}

#[test]
fn a_deleted_line_names_the_record_after_it() {
    let w = World::new();
    fill(&w, 5);
    let mut text = lines(&w);
    text.remove(2);
    let id = id_of(&text[2]);
    write_lines(&w, &text);
    let (code, v) = verify_json(&w);
    assert_eq!(code, Some(1));
    assert_eq!(v["ok"], json!(false));
    assert_eq!(v["records"], json!(2));
    assert_eq!(
        (
            &v["broken"]["line"],
            &v["broken"]["id"],
            &v["broken"]["kind"]
        ),
        (&json!(3), &json!(id), &json!("prev_mismatch"))
    );
}

#[test]
fn swapped_lines_name_the_first_of_them() {
    let w = World::new();
    fill(&w, 5);
    let mut text = lines(&w);
    text.swap(3, 4);
    let id = id_of(&text[3]);
    write_lines(&w, &text);
    let (code, v) = verify_json(&w);
    assert_eq!(code, Some(1));
    assert_eq!(
        (
            &v["broken"]["line"],
            &v["broken"]["id"],
            &v["broken"]["kind"]
        ),
        (&json!(4), &json!(id), &json!("prev_mismatch"))
    );
    let o = w.run(&["audit", "verify"]);
    snapshot!("verify_swapped", render(&w, &o));
}

#[test]
fn a_line_that_is_not_json_is_unparseable() {
    let w = World::new();
    fill(&w, 3);
    let mut text = lines(&w);
    text[1] = "{\"ts\": oops".into();
    write_lines(&w, &text);
    let (code, v) = verify_json(&w);
    assert_eq!(code, Some(1));
    assert_eq!(
        (&v["broken"]["line"], &v["broken"]["kind"]),
        (&json!(2), &json!("unparseable"))
    );
}

#[test]
fn a_torn_tail_is_reported_then_repaired_and_recorded() {
    let w = World::new();
    fill(&w, 2);
    let torn = br#"{"args_digest":"sha256:0123"#;
    let mut bytes = std::fs::read(log(&w).path()).unwrap();
    let offset = bytes.len();
    bytes.extend_from_slice(torn);
    std::fs::write(log(&w).path(), &bytes).unwrap();

    let o = w.run(&["audit", "verify"]);
    snapshot!("verify_torn", render(&w, &o));
    let o = w.run(&["audit", "tail", "-n", "1"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("torn line of 27 bytes"));

    let ts: Timestamp = "2026-01-01T00:01:00Z".parse().unwrap();
    let a = log(&w).append_at(&entry("alice", 9), ts).unwrap();
    let o = w.run(&["audit", "verify"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains(&a.id));
    snapshot!("verify_repaired", render(&w, &o));
    let saved = log(&w)
        .path()
        .parent()
        .unwrap()
        .join(&a.repair.as_ref().unwrap().saved_as);
    assert_eq!(std::fs::read(saved).unwrap(), torn);
    assert_eq!(a.repair.unwrap().offset, offset as u64);
    assert_eq!(lines(&w).len(), 3);
}

#[test]
fn a_damaged_last_line_refuses_appends() {
    let w = World::new();
    fill(&w, 1);
    let mut text = lines(&w);
    text.push("garbage".into());
    write_lines(&w, &text);
    let e = log(&w).append(&entry("alice", 1)).unwrap_err();
    assert_eq!(e.code(), "audit_damaged");
    assert_eq!(lines(&w).len(), 2);
}

/// One appender process of the concurrency test. Does nothing in a normal run.
#[test]
fn child_appender() {
    let Some(child) = std::env::var_os(CHILD) else {
        return;
    };
    let child = child.to_str().unwrap().to_owned();
    let home = Home::open(std::env::var_os(CHILD_HOME).unwrap()).unwrap();
    let l = AuditLog::new(&home);
    for seq in 0..PER_CHILD {
        let mut e = entry(&format!("child-{child}"), seq);
        e.extra.insert("child".into(), json!(child));
        e.extra.insert("seq".into(), json!(seq));
        l.append(&e).unwrap();
    }
}

#[test]
fn concurrent_processes_lose_nothing_and_keep_one_chain() {
    let w = World::new();
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..CHILDREN)
        .map(|i| {
            std::process::Command::new(&exe)
                .args([
                    "--exact",
                    "child_appender",
                    "--test-threads",
                    "1",
                    "--quiet",
                ])
                .env(CHILD, i.to_string())
                .env(CHILD_HOME, &w.hcp_home)
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let (code, v) = verify_json(&w);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["records"], json!(CHILDREN * PER_CHILD));

    let o = w.run(&["audit", "tail", "-n", "5000", "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let seen: BTreeSet<(String, u64)> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["child"].as_str().unwrap().to_owned(),
                r["seq"].as_u64().unwrap(),
            )
        })
        .collect();
    let want: BTreeSet<(String, u64)> = (0..CHILDREN)
        .flat_map(|c| (0..PER_CHILD).map(move |s| (c.to_string(), s)))
        .collect();
    assert_eq!(seen, want);
}
