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
use hcp_store::audit::{
    Admission, Admitted, AuditLog, Decision, DigestKey, Entry, Intent, Outcome, args_digest,
};
use hcp_store::session::Timestamp;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::process::{Output, Stdio};

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
        code: (!allow).then_some(hcp_model::Code::MissingGrant),
        args_digest: args_digest([("stop", &to)]),
        exit_code: allow.then_some(0),
        duration_ms: i,
        extra: BTreeMap::new(),
    }
}

fn log(w: &World) -> AuditLog {
    AuditLog::new(&Home::open(&w.hcp_home).unwrap())
}

/// Appends `n` records stamped a second apart from a fixed time, after the store's
/// `init` record (the store is made first when it is not).
fn fill(w: &World, n: u64) {
    if !w.hcp_home.join("store.json").exists() {
        w.init();
    }
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
fn a_new_store_verifies_and_its_trail_holds_its_init() {
    let w = World::with_store();
    let o = w.run(&["audit", "verify"]);
    snapshot!("verify_new", render(&w, &o));
    let o = w.run(&["audit", "tail", "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (&v[0]["kind"], &v[0]["act"], &v[0]["actor"]),
        (&json!("authority"), &json!("init"), &json!("owner"))
    );
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
    let last: Value = serde_json::from_str(&text[4]).unwrap();
    assert_eq!(records[1], last, "tail --json gives the records as stored");
    assert_eq!(
        records[1]["prev"],
        serde_json::from_str::<Value>(&text[3]).unwrap()["hash"]
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
            "kind",
            "land",
            "operation",
            "pack_id",
            "prev",
            "principal",
            "project",
            "seq",
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
            &v["broken"]["fault"]
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
            &v["broken"]["fault"]
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
        (&v["broken"]["line"], &v["broken"]["fault"]),
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
    assert!(String::from_utf8_lossy(&o.stdout).contains("records a recovery"));
    snapshot!("verify_repaired", render(&w, &o));
    let saved = log(&w)
        .path()
        .parent()
        .unwrap()
        .join(&a.repair.as_ref().unwrap().saved_as);
    assert_eq!(std::fs::read(saved).unwrap(), torn);
    assert_eq!(a.repair.unwrap().offset, offset as u64);
    assert_eq!(
        lines(&w).len(),
        5,
        "init, 2 records, the recovery, the new one"
    );
}

#[test]
fn a_damaged_last_line_refuses_appends() {
    let w = World::new();
    fill(&w, 1);
    let mut text = lines(&w);
    text.push("garbage".into());
    write_lines(&w, &text);
    let e = log(&w).append(&entry("alice", 1)).unwrap_err();
    assert_eq!(
        (e.code().as_str(), e.cause_code().as_str()),
        ("audit_unavailable", "unparseable")
    );
    assert_eq!(lines(&w).len(), 3);
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
        e.extra.insert("n".into(), json!(seq));
        l.append(&e).unwrap();
    }
}

#[test]
fn concurrent_processes_lose_nothing_and_keep_one_chain() {
    let w = World::with_store();
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
    assert_eq!(v["records"], json!(CHILDREN * PER_CHILD + 1));

    let o = w.run(&["audit", "tail", "-n", "5000", "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let seen: BTreeSet<(String, u64)> = v
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] != json!("authority"))
        .map(|r| {
            (
                r["child"].as_str().unwrap().to_owned(),
                r["n"].as_u64().unwrap(),
            )
        })
        .collect();
    let want: BTreeSet<(String, u64)> = (0..CHILDREN)
        .flat_map(|c| (0..PER_CHILD).map(move |s| (c.to_string(), s)))
        .collect();
    assert_eq!(seen, want);
}

fn admit(w: &World, principal: &str) -> Admitted {
    let intent = Intent {
        principal: principal.into(),
        project: None,
        pack_id: "transit".into(),
        verb_key: "find".into(),
        operation: Operation::Read,
        land: Some(Land::Local),
        args_digest: DigestKey::load_or_create(&Home::open(&w.hcp_home).unwrap())
            .unwrap()
            .args_digest([]),
        extra: BTreeMap::new(),
    };
    log(w)
        .admit(&Admission {
            intent,
            counters: vec![],
            approvals: vec![],
        })
        .unwrap()
}

fn finish(w: &World, a: &Admitted, principal: &str, truncated: bool) {
    log(w)
        .outcome(&Outcome {
            intent: a.id.clone(),
            principal: principal.into(),
            pack_id: "transit".into(),
            verb_key: "find".into(),
            code: None,
            exit_code: Some(0),
            duration_ms: 4,
            stdout_bytes: 1 << 20,
            stderr_bytes: 0,
            truncated,
            extra: BTreeMap::new(),
        })
        .unwrap();
}

fn fault_of(w: &World) -> (Option<i32>, Value) {
    let (code, v) = verify_json(w);
    (code, v["broken"]["fault"].clone())
}

#[test]
fn every_cut_wipe_and_replacement_is_a_fault_with_exit_1() {
    // Cut by 1 and by 5 records.
    for cut in [1, 5] {
        let w = World::new();
        fill(&w, 8);
        let text = lines(&w);
        write_lines(&w, &text[..9 - cut]);
        assert_eq!(fault_of(&w), (Some(1), json!("truncated")), "cut by {cut}");
    }
    // Deleted; emptied.
    let w = World::new();
    fill(&w, 3);
    std::fs::remove_file(log(&w).path()).unwrap();
    assert_eq!(fault_of(&w), (Some(1), json!("missing_log")));
    let o = w.run(&["audit", "verify"]);
    assert!(
        String::from_utf8_lossy(&o.stdout).starts_with("audit trail broken at line 1: missing_log")
    );
    let w = World::new();
    fill(&w, 3);
    std::fs::write(log(&w).path(), "").unwrap();
    assert_eq!(fault_of(&w), (Some(1), json!("truncated")));
    // The anchor deleted.
    let w = World::new();
    fill(&w, 3);
    std::fs::remove_file(log(&w).anchor_path()).unwrap();
    assert_eq!(fault_of(&w), (Some(1), json!("missing_anchor")));
    // Nothing can be appended over the evidence: an append is refused.
    let e = log(&w).append(&entry("alice", 9)).unwrap_err();
    assert_eq!(
        (e.code().as_str(), e.cause_code().as_str()),
        ("audit_unavailable", "missing_anchor")
    );
}

#[test]
fn a_checkpoint_catches_an_older_copy_of_trail_and_anchor() {
    let w = World::new();
    fill(&w, 3);
    let keep = w.tmp.path().join("keep");
    std::fs::create_dir(&keep).unwrap();
    for f in ["audit.jsonl", "audit.anchor"] {
        std::fs::copy(log(&w).dir().join(f), keep.join(f)).unwrap();
    }
    fill(&w, 2);
    let o = w.run(&["audit", "checkpoint"]);
    assert_eq!(o.status.code(), Some(0), "{}", render(&w, &o));
    let cp: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (&cp["format"], &cp["count"]),
        (&json!("hcp-audit-checkpoint/2"), &json!(6))
    );
    assert!(cp["key"].as_str().unwrap().starts_with("ed25519:"));
    let file = w.tmp.path().join("cp.json");
    std::fs::write(&file, &o.stdout).unwrap();
    let file = file.to_str().unwrap();
    let o = w.run(&["audit", "verify", "--checkpoint", file]);
    assert_eq!(o.status.code(), Some(0), "{}", render(&w, &o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("extends the checkpoint file: 6 records at"),
        "{}",
        render(&w, &o)
    );
    // Both replaced by the older copy: consistent with each other, caught by the
    // checkpoint — the one given, and the store's own copy of the last one it signed
    // (`audit/checkpoint.last`), which verify checks by default without a witness.
    for f in ["audit.jsonl", "audit.anchor"] {
        std::fs::copy(keep.join(f), log(&w).dir().join(f)).unwrap();
    }
    let (code, v) = verify_json(&w);
    assert_eq!(
        (code, &v["broken"]["fault"]),
        (Some(1), &json!("rollback")),
        "{v}"
    );
    let o = w.run(&["audit", "verify", "--checkpoint", file, "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(v["broken"]["fault"], json!("rollback"), "{v}");
    // A checkpoint edited by hand is not a checkpoint.
    let forged = std::fs::read_to_string(file)
        .unwrap()
        .replace("\"count\":6", "\"count\":3");
    std::fs::write(file, forged).unwrap();
    let o = w.run(&["audit", "verify", "--checkpoint", file]);
    assert_eq!(o.status.code(), Some(2), "{}", render(&w, &o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("bad_checkpoint"));
}

#[test]
fn a_broken_trail_is_not_checkpointed() {
    let w = World::new();
    fill(&w, 3);
    let text = lines(&w);
    write_lines(&w, &text[..2]);
    let o = w.run(&["audit", "checkpoint"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stdout.is_empty());
    assert!(String::from_utf8_lossy(&o.stderr).contains("truncated"));
}

#[test]
fn verify_and_tail_show_interrupted_calls() {
    let w = World::with_store();
    let a = admit(&w, "alice");
    finish(&w, &a, "alice", true);
    let b = admit(&w, "bob");
    let o = w.run(&["audit", "verify"]);
    assert_eq!(o.status.code(), Some(0), "{}", render(&w, &o));
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        text.contains("interrupted: 1 call with an intent and no outcome"),
        "{text}"
    );
    assert!(text.contains(&b.id) && !text.contains(&a.id), "{text}");
    let (_, v) = verify_json(&w);
    assert_eq!(v["interrupted"][0]["id"], json!(b.id));
    let o = w.run(&["audit", "tail"]);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let rows: Vec<&str> = text.lines().collect();
    assert_eq!(rows.len(), 4, "{text}");
    assert!(
        rows[0].contains("act") && rows[0].contains("init"),
        "{text}"
    );
    assert!(
        rows[1].contains("intent") && rows[1].contains("admitted"),
        "{text}"
    );
    assert!(
        rows[2].contains("outcome") && rows[2].contains("exit=0") && rows[2].contains("truncated"),
        "{text}"
    );
    assert!(
        rows[3].contains("intent") && rows[3].contains("interrupted") && rows[3].contains(&b.id),
        "{text}"
    );
    // The digest is keyed: it is not the plain sha256 of the arguments.
    let rec: Value = serde_json::from_str(&lines(&w)[1]).unwrap();
    assert!(
        rec["args_digest"]
            .as_str()
            .unwrap()
            .starts_with("hmac-sha256:")
    );
}

fn spawn_follow(w: &World, n: Option<&str>) -> std::process::Child {
    let mut args = vec!["audit", "tail", "--follow"];
    if let Some(n) = n {
        args.extend(["-n", n]);
    }
    std::process::Command::new(common::hcp_bin())
        .env_clear()
        .env("HOME", &w.home)
        .env("HCP_HOME", &w.hcp_home)
        .env("PATH", w.path_var())
        .current_dir(&w.work)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for `child` on another thread, at most 20 s (a hung follower fails the test
/// instead of hanging it).
fn wait_for(mut child: std::process::Child) -> std::process::ExitStatus {
    let (tx, rx) = std::sync::mpsc::channel();
    let pid = child.id();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait().unwrap());
    });
    rx.recv_timeout(std::time::Duration::from_secs(20))
        .unwrap_or_else(|_| {
            let _ = std::process::Command::new("kill")
                .arg("-9")
                .arg(pid.to_string())
                .status();
            panic!("the follower did not stop")
        })
}

#[test]
fn follow_streams_new_records_as_json_lines_and_stops_on_sigint() {
    let w = World::new();
    fill(&w, 3);
    let mut child = spawn_follow(&w, Some("1"));
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let first: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(first["seq"], json!(4), "it starts after the last N records");
    // New records arrive as they are appended, exactly as stored.
    let a = admit(&w, "alice");
    line.clear();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim_end(), lines(&w)[4]);
    finish(&w, &a, "alice", false);
    line.clear();
    out.read_line(&mut line).unwrap();
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        (&v["kind"], &v["intent"]),
        (&json!("outcome"), &json!(a.id))
    );
    let pid = child.id();
    let status = std::process::Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let status = wait_for(child);
    assert_eq!(status.code(), Some(0), "a clean stop on SIGINT");
}

#[test]
fn follow_without_n_starts_at_the_end_of_the_trail() {
    let w = World::new();
    fill(&w, 3);
    let mut child = spawn_follow(&w, None);
    let mut out = BufReader::new(child.stdout.take().unwrap());
    // The follower prints no old record; the first line it prints is the first record
    // appended after it started. It cannot tell us when it has started, so appends go on
    // until one arrives: every record it prints must be a new one.
    let before = lines(&w).len();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = out.read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = loop {
        log(&w).append(&entry("carol", 99)).unwrap();
        if let Ok(l) = rx.recv_timeout(std::time::Duration::from_millis(200)) {
            break l;
        }
    };
    let v: Value = serde_json::from_str(&line).unwrap();
    assert!(
        v["seq"].as_u64().unwrap() > before as u64,
        "an old record was printed: {line}"
    );
    assert_eq!(v["principal"], json!("carol"));
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    assert_eq!(wait_for(child).code(), Some(0));
}

#[test]
fn follow_stops_when_its_reader_goes_away() {
    let w = World::new();
    fill(&w, 1);
    let mut child = spawn_follow(&w, Some("1"));
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    drop(out);
    let status = wait_for(child);
    assert_eq!(
        status.code(),
        Some(0),
        "a closed stdout is the end of the stream"
    );
}

#[test]
fn exec_refuses_to_run_over_a_cut_trail() {
    common::example_bins();
    let w = World::new();
    let echo = common::gold_pack("echo");
    let o = w.run(&["install", echo.to_str().unwrap(), "--activate"]);
    assert_eq!(o.status.code(), Some(0), "{}", render(&w, &o));
    let o = w.run(&["exec", "echo.say", "first"]);
    assert_eq!(o.status.code(), Some(0), "{}", render(&w, &o));
    let o = w.run(&["exec", "echo.say", "second"]);
    assert_eq!(o.status.code(), Some(0), "{}", render(&w, &o));
    let text = lines(&w);
    write_lines(&w, &text[..text.len() - 1]);
    let o = w.run(&["exec", "echo.say", "third"]);
    assert_eq!(o.status.code(), Some(74), "{}", render(&w, &o));
    assert!(o.stdout.is_empty(), "the verb did not run");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("audit_unavailable"),
        "{}",
        render(&w, &o)
    );
    assert_eq!(
        lines(&w).len(),
        text.len() - 1,
        "nothing was written over the evidence"
    );
    assert_eq!(fault_of(&w), (Some(1), json!("truncated")));
}

/// A torn last line is "recovered by the next append" only where an append may happen:
/// while the trail does not match its anchor (its tail cut) every append is refused, and
/// `verify` says the torn line stays.
#[test]
fn a_torn_tail_behind_a_cut_trail_is_not_promised_a_recovery() {
    let w = World::new();
    fill(&w, 3);
    let mut text = lines(&w);
    text.pop();
    write_lines(&w, &text);
    let mut bytes = std::fs::read(log(&w).path()).unwrap();
    bytes.extend_from_slice(br#"{"args_digest":"sha256:0123"#);
    std::fs::write(log(&w).path(), &bytes).unwrap();
    let o = w.run(&["audit", "verify"]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("truncated"), "{out}");
    assert!(
        out.contains("torn line of 27 bytes")
            && out.contains("every append is refused")
            && !out.contains("the next append recovers it"),
        "{out}"
    );
    // And so it is.
    let e = log(&w).append(&entry("alice", 9)).unwrap_err();
    assert_eq!(e.code().as_str(), "audit_unavailable");
}
