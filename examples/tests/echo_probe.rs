//! `hcp-example-echo` and `hcp-example-probe`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{assert_error, cmd, files, ok_json, run, stdout};
use serde_json::json;
use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};

#[test]
fn echo_says_and_counts() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let v = ok_json(&run(
        "echo",
        d,
        &["say", "--json", "--", "-n; $(rm -rf /) \"x\""],
    ));
    assert_eq!(v, json!({ "text": "-n; $(rm -rf /) \"x\"" }));
    assert_eq!(
        stdout(&run("echo", d, &["upper", "héllo", "world"])),
        "HÉLLO WORLD\n"
    );
    std::fs::create_dir(d.join("sub")).unwrap();
    std::fs::write(d.join("a"), "1").unwrap();
    let v = ok_json(&run("echo", d, &["count", "--json"]));
    assert_eq!(v, json!({ "files": 1, "dirs": 1, "other": 0 }));
}

#[test]
fn echo_writes_only_with_confirm_and_only_plain_names() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    assert_error(
        &run("echo", d, &["write", "n.txt", "x"]),
        3,
        "without --confirm",
    );
    assert!(files(d).is_empty());
    let v = ok_json(&run(
        "echo",
        d,
        &["write", "--confirm", "--json", "--", "n.txt", "hi\n"],
    ));
    assert_eq!(v, json!({ "written": "n.txt", "bytes": 3 }));
    assert_eq!(files(d), ["n.txt"]);
    let v = ok_json(&run("echo", d, &["read", "--json", "--", "n.txt"]));
    assert_eq!(v["text"], "hi\n");
    assert_eq!(stdout(&run("echo", d, &["read", "n.txt"])), "hi\n");
    for bad in ["../x", "a/b", "", ".gitconfig", ".."] {
        let out = run("echo", d, &["write", "--confirm", "--", bad, "x"]);
        assert_eq!(out.status.code(), Some(1), "{bad}");
    }
    assert_error(
        &run("echo", d, &["read", "--", "missing"]),
        1,
        "cannot read `missing`",
    );
    assert_eq!(files(d), ["n.txt"]);
}

#[test]
fn echo_where_reports_cwd_and_home() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().canonicalize().unwrap();
    let out = cmd("echo", &d)
        .env("HOME", &d)
        .args(["where", "--json"])
        .output()
        .unwrap();
    let v = ok_json(&out);
    assert_eq!(v["cwd"], d.to_str().unwrap());
    assert_eq!(v["home"], d.to_str().unwrap());
    let v = ok_json(&run("echo", &d, &["where", "--json"]));
    assert_eq!(v["home"], serde_json::Value::Null);
}

fn probe(args: &[&str]) -> std::process::Output {
    run("probe", &std::env::temp_dir(), args)
}

#[test]
fn probe_env_argv_cwd_and_stdin() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().canonicalize().unwrap();
    let out = cmd("probe", &d)
        .env("HCP_PACK_ID", "x")
        .arg("env")
        .output()
        .unwrap();
    let v = ok_json(&out);
    assert_eq!(v["HCP_PACK_ID"], "x");
    assert!(v.get("HOME").is_none());
    let v = ok_json(&probe(&["argv", "a b", "--flag", "", "$(x)"]));
    assert_eq!(v, json!(["a b", "--flag", "", "$(x)"]));
    let v = ok_json(&run("probe", &d, &["cwd"]));
    assert_eq!(v["cwd"], d.to_str().unwrap());
    let out = cmd("probe", &d)
        .arg("stdin")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(ok_json(&out), json!({ "bytes": 0 }));
}

#[test]
fn probe_exit_big_sleep() {
    assert_eq!(probe(&["exit", "7"]).status.code(), Some(7));
    assert_eq!(probe(&["exit", "0"]).status.code(), Some(0));
    assert_error(&probe(&["exit", "256"]), 2, "not 0 to 255");
    let out = probe(&["big", "100000"]);
    assert!(out.status.success());
    assert_eq!(out.stdout.len(), 100_000);
    assert!(out.stdout.iter().all(|b| *b == b'x'));
    let out = probe(&["big", "10", "--stderr"]);
    assert!(out.stdout.is_empty());
    assert_eq!(out.stderr, b"xxxxxxxxxx");
    assert_eq!(
        ok_json(&probe(&["sleep", "0.01"])),
        json!({ "slept": "0.01" })
    );
    assert_error(&probe(&["sleep", "1.2345"]), 2, "not seconds");
    assert_error(&probe(&["sleep", "-1"]), 2, "not seconds");
}

#[test]
fn probe_write_and_read() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let v = ok_json(&run("probe", d, &["write", "f", "data"]));
    assert_eq!(v, json!({ "written": "f", "bytes": 4 }));
    assert_eq!(stdout(&run("probe", d, &["read", "f"])), "data");
    assert_error(
        &run("probe", d, &["write", "no/such/dir", "x"]),
        1,
        "cannot write",
    );
    assert_error(&run("probe", d, &["read", "nope"]), 1, "cannot read `nope`");
}

#[test]
fn probe_spew_stops_when_the_reader_goes_away() {
    let mut child = cmd("probe", &std::env::temp_dir())
        .arg("spew")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    out.read_exact(&mut buf).unwrap();
    assert!(buf.starts_with(b"spew 0 "));
    drop(out);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1));
}

#[test]
fn probe_fork_hold_leaves_a_grandchild_holding_stdout() {
    let mut child = cmd("probe", &std::env::temp_dir())
        .args(["fork-hold", "30"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    let pid = v["grandchild"].as_u64().unwrap();
    // The probe itself exits at once …
    assert!(child.wait().unwrap().success());
    // … while its grandchild is still alive, holding the pipe open.
    assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
    let killed = Command::new("kill").arg(pid.to_string()).status().unwrap();
    assert!(killed.success());
    // Once it is gone the pipe reaches end of file.
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert_eq!(rest, "");
}
