//! One careless session or one damaged record never stops the others (RUNTIME §4
//! `--workdir`, "Fault isolation"): session workdirs are checked at start by one set of
//! rules (`bad_workdir`, 64), calls never read other sessions, and a damaged session file
//! refuses its own token alone while `session list` and `hcp doctor` name it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "exec_common/mod.rs"]
mod exec_common;

use common::World;
use exec_common::{exec_json_env, grant, session, world};
use pretty_assertions::assert_eq;
use serde_json::Value;
use std::path::Path;

fn code(o: &std::process::Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

/// Whether this machine gives a call its view (a session's `local` call needs one).
fn view_or_skip() -> bool {
    if let Some(why) = hcp_adapter::KernelSupport::probe().view_missing() {
        common::skip::skip(&format!("no view for a call here: {why}"));
        return false;
    }
    true
}

fn start(w: &World, principal: &str, workdir: &Path) -> std::process::Output {
    w.run(&[
        "session",
        "start",
        "--principal",
        principal,
        "--workdir",
        &workdir.display().to_string(),
    ])
}

/// The session files of the store, by path.
fn session_files(w: &World) -> Vec<std::path::PathBuf> {
    let dir = w.hcp_home.join("state/sessions");
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    v.sort();
    v
}

#[test]
fn a_session_workdir_is_checked_by_every_rule_and_nothing_is_written() {
    let w = World::with_store();
    let file = w.root().join("a-file");
    std::fs::write(&file, "").unwrap();
    let cases: [(&str, std::path::PathBuf, &str); 10] = [
        ("root", "/".into(), "rule: not `/`"),
        ("usr", "/usr".into(), "rule: no system directory"),
        ("etc", "/etc".into(), "rule: no system directory"),
        (
            "tmp",
            "/tmp".into(),
            "rule: no system directory or shared root",
        ),
        ("dev_shm", "/dev/shm".into(), "rule: no system directory"),
        ("store", w.hcp_home.clone(), "rule: not the store"),
        ("in_store", w.hcp_home.join("state"), "rule: not the store"),
        ("holds_store", w.root(), "rule: no home"),
        ("file", file.clone(), "rule: a directory"),
        (
            "missing",
            w.root().join("missing"),
            "rule: an existing directory",
        ),
    ];
    let mut text = String::new();
    for (name, dir, rule) in cases {
        if name == "in_store" {
            std::fs::create_dir_all(&dir).unwrap();
        }
        let o = start(&w, "agent-1", &dir);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(code(&o), 64, "{name}: {}", w.render(&o));
        assert!(
            err.contains("code: bad_workdir") && err.contains(rule),
            "{name}: {err}"
        );
        text.push_str(&format!("## {name}\n{}\n", w.render(&o)));
    }
    insta::assert_snapshot!("bad_workdirs", text);
    // A directory holding the store that holds no home: refused for the store.
    let outer = w.root().join("outer");
    std::fs::create_dir_all(outer.join("store")).unwrap();
    let o = w
        .hcp()
        .env("HCP_HOME", outer.join("store"))
        .args(["init"])
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let o = w
        .hcp()
        .env("HCP_HOME", outer.join("store"))
        .args(["session", "start", "--principal", "a", "--workdir"])
        .arg(&outer)
        .output()
        .unwrap();
    assert_eq!(code(&o), 64, "{}", w.render(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("holds the store"),
        "{}",
        w.render(&o)
    );
    // Nothing was written: no session.
    let o = w.run(&["session", "list"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "no sessions\n");
}

#[test]
fn a_live_session_of_another_principal_keeps_its_workdir_and_no_other() {
    let w = World::with_store();
    let theirs = w.work.join("theirs");
    std::fs::create_dir_all(theirs.join("inner")).unwrap();
    let tok = {
        let o = start(&w, "agent-1", &theirs);
        assert_eq!(code(&o), 0, "{}", w.render(&o));
        String::from_utf8(o.stdout).unwrap().trim().to_owned()
    };
    // Another principal: neither inside nor above it.
    for dir in [theirs.join("inner"), w.work.clone()] {
        let o = start(&w, "agent-2", &dir);
        assert_eq!(code(&o), 64, "{}", w.render(&o));
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("rule: no other principal's workdir"),
            "{}",
            w.render(&o)
        );
    }
    // The same principal may have a second session there; a sibling is anyone's.
    assert_eq!(code(&start(&w, "agent-1", &theirs.join("inner"))), 0);
    std::fs::create_dir_all(w.work.join("mine")).unwrap();
    assert_eq!(code(&start(&w, "agent-2", &w.work.join("mine"))), 0);
    // Once agent-1's sessions end, the directory is free.
    let o = w.run(&["session", "end", "--principal", "agent-1"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let _ = tok;
    assert_eq!(code(&start(&w, "agent-3", &theirs.join("inner"))), 0);
}

/// Issue 27: `--workdir /` accepted once stopped every other principal's call, also after
/// the session ended. A session record that names `/` (an earlier version accepted it)
/// refuses nobody else: calls never read other sessions.
#[test]
fn one_sessions_workdir_never_refuses_another_principals_call() {
    if !view_or_skip() {
        return;
    }
    let w = world(&["echo"]);
    let careless_dir = w.work.join("careless");
    std::fs::create_dir_all(&careless_dir).unwrap();
    let careless = session(
        &w,
        "careless",
        &["--workdir", &careless_dir.display().to_string()],
    );
    // Plant `/` as its workdir, as an earlier version stored it.
    let file = session_files(&w).pop().unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    let planted = text.replace(&format!("{}", careless_dir.display()), "/");
    assert_ne!(text, planted);
    std::fs::write(&file, planted).unwrap();
    let mine = w.work.join("mine");
    std::fs::create_dir_all(&mine).unwrap();
    let other = session(&w, "agent-2", &["--workdir", &mine.display().to_string()]);
    grant(&w, "agent-2", "echo", &["verb.exec.read"]);
    grant(&w, "careless", "echo", &["verb.exec.read"]);
    let (o, v) = exec_json_env(&w, &["echo.say", "hi"], &[("HCP_SESSION", &other)]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    assert_eq!(v["ok"], Value::Bool(true), "{v}");
    // The owner's own local call from its directory runs too.
    let (o, _) = exec_json_env(&w, &["echo.say", "hi"], &[]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    // The careless session alone is refused, by the workdir rules.
    let (o, v) = exec_json_env(&w, &["echo.say", "hi"], &[("HCP_SESSION", &careless)]);
    assert_eq!(
        (code(&o), &v["code"]),
        (64, &Value::from("bad_workdir")),
        "{v}"
    );
    // Ended, it still refuses nobody.
    let o = w.run(&["session", "end", "--principal", "careless"]);
    assert_eq!(code(&o), 0);
    let (o, _) = exec_json_env(&w, &["echo.say", "hi"], &[("HCP_SESSION", &other)]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
}

/// A damaged session file refuses its own token alone (`store_damaged`, naming the file);
/// the owner and other principals go on, `session list` lists it as damaged and `hcp
/// doctor` names the command that removes it, exiting 1.
#[test]
fn a_damaged_session_refuses_its_holder_alone() {
    if !view_or_skip() {
        return;
    }
    let w = world(&["echo"]);
    let victim = session(&w, "victim", &[]);
    let damaged = session_files(&w).pop().unwrap();
    let other = session(&w, "agent-2", &[]);
    grant(&w, "agent-2", "echo", &["verb.exec.read"]);
    std::fs::write(&damaged, "[]\n").unwrap();
    let (o, _) = exec_json_env(&w, &["echo.say", "hi"], &[("HCP_SESSION", &other)]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let (o, _) = exec_json_env(&w, &["echo.say", "hi"], &[]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let (o, v) = exec_json_env(&w, &["echo.say", "hi"], &[("HCP_SESSION", &victim)]);
    assert_eq!(
        (code(&o), &v["code"]),
        (74, &Value::from("store_damaged")),
        "{v}"
    );
    let name = damaged.file_name().unwrap().to_str().unwrap();
    assert!(v["error"].as_str().unwrap().contains(name), "{v}");
    let o = w.run(&["session", "list"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("agent-2") && out.contains("damaged"), "{out}");
    let o = w.run(&["session", "list", "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        v.as_array()
            .unwrap()
            .iter()
            .any(|s| s["state"] == "damaged"),
        "{v}"
    );
    let o = w.run(&["doctor"]);
    assert_eq!(code(&o), 1, "{}", w.render(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("damaged session") && text.contains(&format!("rm {}", damaged.display())),
        "{text}"
    );
}

/// Each kind of damaged record in turn: the owner's call goes on, and `hcp doctor` lists
/// the record with its repair and exits 1 (snapshots of the lines it prints).
#[test]
fn doctor_lists_each_damaged_record_with_its_repair() {
    if !view_or_skip() {
        return;
    }
    let kinds: [(&str, &str); 4] = [
        ("session", "state/sessions/{digest}.json"),
        ("grants", "state/grants.json"),
        ("approval", "state/approvals/apr_00000000000000000000.json"),
        ("counter", "state/counters/{digest}.json"),
    ];
    for (kind, rel) in kinds {
        let w = world(&["echo"]);
        let _ = session(&w, "agent-2", &[]);
        grant(&w, "agent-2", "echo", &["verb.exec.read"]);
        let rel = rel.replace("{digest}", &"0".repeat(64));
        let path = w.hcp_home.join(&rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "garbage\n").unwrap();
        let (o, _) = exec_json_env(&w, &["echo.say", "hi"], &[]);
        assert_eq!(code(&o), 0, "{kind}: the owner's call: {}", w.render(&o));
        let o = w.run(&["doctor"]);
        assert_eq!(code(&o), 1, "{kind}: {}", w.render(&o));
        let text = w.filter(&String::from_utf8_lossy(&o.stdout));
        let lines: Vec<&str> = text.lines().filter(|l| l.contains("damaged ")).collect();
        assert_eq!(lines.len(), 1, "{kind}: {text}");
        insta::assert_snapshot!(format!("doctor_damaged_{kind}"), lines.join("\n"));
    }
}

/// `session end` takes the id `session list` shows, as well as the token.
#[test]
fn session_end_takes_the_listed_id() {
    let w = World::with_store();
    let _ = session(&w, "agent-1", &[]);
    let o = w.run(&["session", "list", "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let id = v[0]["id"].as_str().unwrap().to_owned();
    let o = w.run(&["session", "end", &id]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains(&format!("ended the session `{id}`")));
    let o = w.run(&["session", "list", "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v[0]["state"], "ended", "{v}");
    let o = w.run(&["session", "end", "0123456789ab"]);
    assert_eq!(code(&o), 1, "{}", w.render(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("code: bad_session"));
}

/// An argument that is not UTF-8 is a usage error (64) with a code, never exit 2 and
/// never a value with U+FFFD in it.
#[test]
fn an_argument_that_is_not_utf8_is_refused_with_64() {
    use std::os::unix::ffi::OsStrExt;
    let w = World::with_store();
    let bad = std::ffi::OsStr::from_bytes(b"a\xffb");
    for args in [
        &["exec", "echo.say"][..],
        &["session", "start", "--principal"],
    ] {
        let o = w.hcp().args(args).arg(bad).output().unwrap();
        assert_eq!(code(&o), 64, "{args:?}: {}", w.render(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("code: usage") && err.contains("not valid UTF-8"),
            "{err}"
        );
    }
}

/// Binary stdout in `--json` is base64 with `stdout_encoding: "base64"`, never U+FFFD.
#[test]
fn binary_stdout_is_base64_in_json() {
    use std::os::unix::ffi::OsStrExt;
    if !view_or_skip() {
        return;
    }
    let w = world(&["echo"]);
    let name = std::ffi::OsStr::from_bytes(b"caf\xe9");
    std::fs::write(w.work.join(name), "").unwrap();
    let (o, v) = exec_json_env(&w, &["echo.ls"], &[]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    assert_eq!(v["stdout_encoding"], "base64", "{v}");
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(v["stdout"].as_str().unwrap())
        .unwrap();
    assert_eq!(bytes, b"caf\xe9\n");
    // Text stays text, without the field.
    std::fs::remove_file(w.work.join(name)).unwrap();
    std::fs::write(w.work.join("cafe"), "").unwrap();
    let (_, v) = exec_json_env(&w, &["echo.ls"], &[]);
    assert_eq!(
        (v["stdout"].as_str(), v.get("stdout_encoding")),
        (Some("cafe\n"), None)
    );
}

/// A damaged install record refuses its own pack alone: the other packs' calls go on, and
/// `hcp doctor` names the pack with its repair and exits 1.
#[test]
fn a_damaged_install_record_refuses_its_pack_alone() {
    if !view_or_skip() {
        return;
    }
    let w = world(&["echo", "probe"]);
    let record = w.hcp_home.join("packs/probe/.hcp/record.json");
    assert!(record.is_file(), "{}", record.display());
    std::fs::write(&record, "{}\n").unwrap();
    let (o, _) = exec_json_env(&w, &["echo.say", "hi"], &[]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let (o, v) = exec_json_env(&w, &["probe.big", "3"], &[]);
    assert_ne!(code(&o), 0, "{}", w.render(&o));
    assert_eq!(v["ok"], Value::Bool(false), "{v}");
    let o = w.run(&["doctor"]);
    assert_eq!(code(&o), 1, "{}", w.render(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("pack `probe` has a damaged record") && text.contains("hcp uninstall probe"),
        "{text}"
    );
}
