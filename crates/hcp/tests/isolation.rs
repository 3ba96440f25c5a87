//! One careless session or one damaged record never stops the others (RUNTIME §4
//! `--workdir`, "Fault isolation"): session workdirs are checked at start by one set of
//! rules (`bad_workdir`, 64), calls never read other sessions, and a damaged session file
//! refuses its own token alone while `session list` and `hcp doctor` name it. Each store
//! file damaged in turn (a session, a grant file, an approval, a counter, an install
//! record, a tenant home) refuses only what it belongs to; grants are kept one file per
//! principal, counted in the install records; a write verb on a full disk answers its
//! child's result or is refused before it runs; `config.json` rewritten while calls run
//! is read whole.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::{code, view_or_skip};
#[path = "exec_common/mod.rs"]
mod exec_common;

use common::World;
use exec_common::{exec_json_env, grant, session, world};
use pretty_assertions::assert_eq;
use serde_json::Value;
use std::path::Path;

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
fn a_session_workdir_whose_path_is_not_utf8_is_bad_workdir_and_nothing_is_written() {
    use std::os::unix::ffi::OsStrExt;
    let w = World::with_store();
    let dir = w.root().join(std::ffi::OsStr::from_bytes(b"w\xff"));
    std::fs::create_dir(&dir).unwrap();
    // Named directly, and through a UTF-8 symbolic link to it.
    let link = w.root().join("link-to-w");
    std::os::unix::fs::symlink(&dir, &link).unwrap();
    for given in [&dir, &link] {
        let o = w
            .hcp()
            .args(["session", "start", "--principal", "agent-1", "--workdir"])
            .arg(given)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(code(&o), 64, "{}", w.render(&o));
        assert!(
            err.contains("code: bad_workdir") && err.contains("rule: a UTF-8 path"),
            "{err}"
        );
    }
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
    // With its MAC, as the migration of that earlier store stamped it.
    let planted: Value = serde_json::from_str(&planted).unwrap();
    let home = hcp_store::Home::open(&w.hcp_home).unwrap();
    hcp_store::stamp::write(
        &home,
        &hcp_store::StoreLock::acquire(&home).unwrap(),
        &file,
        &planted,
    )
    .unwrap();
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
    let kinds: [(&str, &str); 5] = [
        ("session", "state/sessions/{digest}.json"),
        ("grants", "state/grants/agent-2.json"),
        ("grants_legacy", "state/grants.json"),
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

/// `session end ID` of a session whose file is damaged says so, naming the file, and
/// ends it: the act is recorded (with the file and the digest of what it held), then the
/// file is removed; its token stays refused (`bad_session` now), and the other sessions
/// are untouched.
#[test]
fn session_end_of_a_damaged_session_names_the_file_and_removes_it() {
    let w = World::with_store();
    let _victim = session(&w, "victim", &[]);
    let damaged = session_files(&w).pop().unwrap();
    let _other = session(&w, "agent-2", &[]);
    std::fs::write(&damaged, "[]\n").unwrap();
    let id = damaged.file_stem().unwrap().to_str().unwrap()[..12].to_owned();
    let o = w.run(&["session", "end", &id]);
    let text = w.render(&o);
    assert_eq!(code(&o), 0, "{text}");
    assert!(
        text.contains("damaged") && text.contains(damaged.file_name().unwrap().to_str().unwrap()),
        "{text}"
    );
    assert!(!damaged.exists());
    let recs = exec_common::authority_records(&w);
    let last = recs.last().unwrap();
    assert_eq!(last["act"], "session end", "{last}");
    assert_eq!(
        last["changed"]["sessions"][0],
        Value::from(id.clone()),
        "{last}"
    );
    assert!(
        last["changed"]["damaged"]["digest"]
            .as_str()
            .is_some_and(|d| d.starts_with("sha256:")),
        "{last}"
    );
    let o = w.run(&["session", "list", "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v[0]["principal"], "agent-2", "{v}");
    // Now there is no such session at all.
    let o = w.run(&["session", "end", &id]);
    assert_eq!(code(&o), 1, "{}", w.render(&o));
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
        text.contains("damaged install record") && text.contains("hcp uninstall probe"),
        "{text}"
    );
}

/// What one call answered: its exit status and, for a refusal, its code.
fn outcome(o: &std::process::Output, v: &Value) -> String {
    match v["code"].as_str() {
        Some(c) => format!("{} {c}", code(o)),
        None => format!("{} ok", code(o)),
    }
}

/// Each store file damaged in turn — a session, a grant file (damaged, missing beside its
/// count, the legacy one file), an approval, a counter, an install record, a tenant home —
/// then the owner's calls, another principal's and the damaged record's principal's, and
/// `hcp doctor`: only the one the record belongs to is refused (snapshots: the calls'
/// answers and doctor's lines). Approvals and counters are read only by a runtime policy's
/// `confirmation`, `rate_limit` and `budget`, so without a policy nobody is refused.
#[test]
fn each_store_file_damaged_in_turn_refuses_only_its_own() {
    if !view_or_skip() {
        return;
    }
    let kinds = [
        "session",
        "grant_file",
        "grant_file_missing",
        "grants_legacy",
        "approval",
        "counter",
        "install_record",
        "tenant_home",
    ];
    for kind in kinds {
        let w = world(&["echo", "probe"]);
        let victim = session(&w, "agent-1", &[]);
        let victim_session = session_files(&w).pop().unwrap();
        let other = session(&w, "agent-2", &[]);
        for p in ["agent-1", "agent-2"] {
            grant(&w, p, "echo", &["verb.exec.read"]);
            grant(&w, p, "probe", &["verb.exec.read"]);
        }
        // The victim's first calls make its tenant home.
        let (o, _) = exec_json_env(&w, &["probe.big", "3"], &[("HCP_SESSION", &victim)]);
        assert_eq!(code(&o), 0, "{kind}: {}", w.render(&o));
        let digest = victim_session
            .file_stem()
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned();
        let state = w.hcp_home.join("state");
        match kind {
            "session" => std::fs::write(&victim_session, "[]\n").unwrap(),
            "grant_file" => std::fs::write(state.join("grants/agent-1.json"), "garbage\n").unwrap(),
            "grant_file_missing" => {
                std::fs::remove_file(state.join("grants/agent-1.json")).unwrap()
            }
            "grants_legacy" => std::fs::write(state.join("grants.json"), "garbage\n").unwrap(),
            "approval" => {
                std::fs::create_dir_all(state.join("approvals")).unwrap();
                std::fs::write(
                    state.join("approvals/apr_00000000000000000000.json"),
                    "garbage\n",
                )
                .unwrap();
            }
            "counter" => {
                std::fs::create_dir_all(state.join("counters")).unwrap();
                std::fs::write(
                    state.join(format!("counters/{}.json", "0".repeat(64))),
                    "garbage\n",
                )
                .unwrap();
            }
            "install_record" => {
                std::fs::write(w.hcp_home.join("packs/probe/.hcp/record.json"), "{}\n").unwrap();
            }
            "tenant_home" => {
                let home = w.hcp_home.join("homes/probe/principal/agent-1");
                assert!(home.is_dir(), "{kind}: {}", home.display());
                std::fs::remove_dir_all(&home).unwrap();
                std::fs::write(&home, "not a directory\n").unwrap();
            }
            _ => unreachable!(),
        }
        let mut answers = Vec::new();
        for (who, env) in [
            ("owner", None),
            ("agent-2", Some(other.as_str())),
            ("agent-1", Some(victim.as_str())),
        ] {
            for call in [&["echo.say", "hi"][..], &["probe.big", "3"]] {
                let env: Vec<(&str, &str)> = env.map(|t| ("HCP_SESSION", t)).into_iter().collect();
                let (o, v) = exec_json_env(&w, call, &env);
                if v["code"] == "store_damaged" {
                    let e = v["error"].as_str().unwrap_or_default();
                    assert!(
                        e.contains(&w.hcp_home.display().to_string()),
                        "{kind}: names no file: {v}"
                    );
                }
                answers.push(format!("{who} {}: {}", call[0], outcome(&o, &v)));
            }
        }
        let o = w.run(&["doctor"]);
        assert_eq!(code(&o), 1, "{kind}: {}", w.render(&o));
        let text = w.filter(&String::from_utf8_lossy(&o.stdout));
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("damaged ") || l.contains("damaged record"))
            .collect();
        assert!(!lines.is_empty(), "{kind}: {text}");
        let shown = format!("{}\n--- doctor\n{}", answers.join("\n"), lines.join("\n"))
            .replace(&digest, "{digest}");
        insta::assert_snapshot!(format!("damaged_in_turn_{kind}"), shown);
        // The repair doctor names gives the victim its calls back.
        let repair: &[&str] = match kind {
            "grant_file" | "grant_file_missing" => &["revoke", "agent-1", "--all"],
            "tenant_home" => &["home", "rm", "probe", "--principal", "agent-1"],
            _ => continue,
        };
        let o = w.run(repair);
        assert_eq!(code(&o), 0, "{kind}: {}", w.render(&o));
        grant(&w, "agent-1", "probe", &["verb.exec.read"]);
        let (o, v) = exec_json_env(&w, &["probe.big", "3"], &[("HCP_SESSION", &victim)]);
        assert_eq!(code(&o), 0, "{kind}: after the repair: {v}");
    }
}

/// A damaged or missing grant file is repaired by `hcp revoke PRINCIPAL --all` (the file
/// moved aside, the counts zeroed): the principal is granted again and its calls run; `hcp
/// grant --list` meanwhile warns of the file and lists everybody else's grants.
#[test]
fn a_damaged_grant_file_is_repaired_by_revoke_all() {
    if !view_or_skip() {
        return;
    }
    let w = world(&["echo"]);
    let victim = session(&w, "agent-1", &[]);
    grant(&w, "agent-1", "echo", &["verb.exec.read"]);
    grant(&w, "agent-2", "*", &["verb.exec.read"]);
    let file = w.hcp_home.join("state/grants/agent-1.json");
    std::fs::write(&file, "{").unwrap();
    let o = w.run(&["grant", "--list"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("agent-2") && !out.contains("agent-1"), "{out}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("damaged grant file"),
        "{}",
        w.render(&o)
    );
    // The owner cannot grant into the damaged file, nor uninstall a pack it may name.
    let o = w.run(&["grant", "agent-1", "echo", "verb.exec.write"]);
    assert_eq!(code(&o), 74, "{}", w.render(&o));
    let o = w.run(&["uninstall", "echo"]);
    assert_eq!(code(&o), 74, "{}", w.render(&o));
    assert!(w.hcp_home.join("packs/echo").is_dir());
    let o = w.run(&["revoke", "agent-1", "--all"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    assert_eq!(
        std::fs::read(file.with_extension("json.damaged")).unwrap(),
        b"{"
    );
    let (o, v) = exec_json_env(&w, &["echo.say", "hi"], &[("HCP_SESSION", &victim)]);
    assert_eq!(
        (code(&o), &v["code"]),
        (77, &Value::from("missing_grant")),
        "{v}"
    );
    grant(&w, "agent-1", "echo", &["verb.exec.read"]);
    let (o, _) = exec_json_env(&w, &["echo.say", "hi"], &[("HCP_SESSION", &victim)]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let o = w.run(&["doctor"]);
    assert!(
        !String::from_utf8_lossy(&o.stdout).contains("damaged grants"),
        "{}",
        w.render(&o)
    );
    // The same for a missing file: its count makes it damage until the repair.
    std::fs::remove_file(&file).unwrap();
    let (o, v) = exec_json_env(&w, &["echo.say", "hi"], &[("HCP_SESSION", &victim)]);
    assert_eq!(
        (code(&o), &v["code"]),
        (74, &Value::from("store_damaged")),
        "{v}"
    );
    assert!(v["error"].as_str().unwrap().contains("is missing"), "{v}");
    let o = w.run(&["revoke", "agent-1", "--all"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let (o, v) = exec_json_env(&w, &["echo.say", "hi"], &[("HCP_SESSION", &victim)]);
    assert_eq!(
        (code(&o), &v["code"]),
        (77, &Value::from("missing_grant")),
        "{v}"
    );
}

/// A store of an earlier hcp keeps every grant in `state/grants.json`: its first command by
/// this version splits it into one file per principal, counts them in the install
/// records and records a `migrate` act; the principals' calls then run as before.
#[test]
fn the_one_grants_file_of_an_earlier_hcp_is_split_at_first_use() {
    if !view_or_skip() {
        return;
    }
    let w = world(&["echo"]);
    let token = session(&w, "agent-1", &[]);
    let legacy = serde_json::json!({"version": 1, "grants": [
        {"principal": "agent-1", "pack": "echo", "capability": "verb.exec.read",
         "granted_at": "2026-01-01T00:00:00.000Z"},
        {"principal": "agent-2", "pack": "*", "capability": "verb.exec.read",
         "granted_at": "2026-01-01T00:00:00.000Z"},
    ]});
    std::fs::write(w.hcp_home.join("state/grants.json"), legacy.to_string()).unwrap();
    let (o, _) = exec_json_env(&w, &["echo.say", "hi"], &[("HCP_SESSION", &token)]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    assert!(!w.hcp_home.join("state/grants.json").exists());
    for p in ["agent-1", "agent-2"] {
        assert!(
            w.hcp_home.join(format!("state/grants/{p}.json")).is_file(),
            "{p}"
        );
    }
    let record: Value = serde_json::from_slice(
        &std::fs::read(w.hcp_home.join("packs/echo/.hcp/record.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        record["grants"],
        serde_json::json!({"agent-1": 1, "agent-2": 1})
    );
    let o = w.run(&["audit", "tail", "--json", "-n", "50"]);
    let tail: Value = serde_json::from_slice(&o.stdout).unwrap();
    let migrates: Vec<&Value> = tail
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["act"] == "migrate")
        .collect();
    assert_eq!(migrates.len(), 1, "{tail}");
    assert_eq!(
        migrates[0]["changed"]["grants"]["principals"],
        serde_json::json!(2),
        "{tail}"
    );
    let o = w.run(&["audit", "verify"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
}

/// A write verb on a full disk (the store and the workdir on a small tmpfs the test fills
/// first): every call either answers its child's result — its effect happened or the child
/// says why not — or is refused before anything runs (`audit_unavailable`, 74, no effect);
/// never 74 after the effect. `hcp doctor` says the disk is full as soon as it is, and
/// the reserve is short once it is.
#[test]
fn a_write_verb_on_a_full_disk_answers_its_result_or_never_runs() {
    common::example_bins();
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return common::skip::skip("a small tmpfs for the store needs root to mount");
    }
    let probe = std::process::Command::new("unshare")
        .args(["--mount", "--propagation", "private", "true"])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        return common::skip::skip("no private mount namespace (unshare --mount)");
    }
    let w = World::new();
    let walprobe = exec_common::fixture("walprobe");
    let script = r#"
        full="$ROOT/full"; mkdir -p "$full"
        mount -t tmpfs -o size=4m tmpfs "$full"
        export HCP_HOME="$full/store" HCP_TEST_RESERVE_BYTES=32768
        mkdir "$full/work"; cd "$full/work"
        "$HCP" install --activate "$WALPROBE" > /dev/null
        "$HCP" exec --json walprobe.mark warm text > /dev/null
        dd if=/dev/zero of="$full/filler" bs=64k 2> /dev/null || true
        set +e
        "$HCP" doctor --json > "$ROOT/doctor-full.json"; echo $? > "$ROOT/doctor-full-status"
        set -e
        i=0
        while [ $i -lt 100 ]; do
            set +e
            "$HCP" exec --json walprobe.mark "m-$i" text > "$ROOT/call-$i.json"; echo $? > "$ROOT/status-$i"
            set -e
            [ -e "m-$i" ] && echo yes > "$ROOT/effect-$i" || echo no > "$ROOT/effect-$i"
            [ "$(cat "$ROOT/status-$i")" = 74 ] && break
            i=$((i+1))
        done
        echo $i > "$ROOT/last"
        set +e
        "$HCP" doctor --json > "$ROOT/doctor.json"; echo $? > "$ROOT/doctor-status"
    "#;
    let out = std::process::Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-ec", script])
        .env_clear()
        .env("HOME", &w.home)
        .env("PATH", w.path_var())
        .env("LANG", "C")
        .env("HCP", common::hcp_bin())
        .env("ROOT", w.root())
        .env("WALPROBE", &walprobe)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", w.render(&out));
    let read = |f: &str| {
        std::fs::read_to_string(w.root().join(f))
            .unwrap()
            .trim()
            .to_owned()
    };
    // The disk full, the reserve still whole: doctor says so, and exits 1.
    let doctor: Value = serde_json::from_str(&read("doctor-full.json")).unwrap();
    assert_eq!(read("doctor-full-status"), "1", "{doctor}");
    let problems = doctor["problems"].to_string();
    assert!(
        problems.contains("the store's disk is full") && !problems.contains("reserve is short"),
        "{doctor}"
    );
    let last: u32 = read("last").parse().unwrap();
    assert!(last < 100, "the reserve never ran short");
    for i in 0..=last {
        let status = read(&format!("status-{i}"));
        let effect = read(&format!("effect-{i}"));
        let v: Value = serde_json::from_str(&read(&format!("call-{i}.json"))).unwrap();
        if status == "74" {
            assert_eq!(v["code"], "audit_unavailable", "call {i}: {v}");
            assert_eq!(effect, "no", "call {i}: 74 after its effect: {v}");
            assert!(v["exit_code"].is_null(), "call {i}: {v}");
        } else {
            // The child ran: its own answer, whatever the disk let it do.
            assert!(v["exit_code"].is_number(), "call {i}: {v}");
            assert_eq!(status, v["exit_code"].to_string(), "call {i}: {v}");
        }
    }
    assert_eq!(read(&format!("status-{last}")), "74", "no call was refused");
    let doctor: Value = serde_json::from_str(&read("doctor.json")).unwrap();
    assert_eq!(read("doctor-status"), "1", "{doctor}");
    assert!(
        doctor["problems"].to_string().contains("reserve is short"),
        "{doctor}"
    );
}

/// `config.json` rewritten atomically (a temporary file renamed over it) by a thread while
/// calls run: every call reads the old file or the new one whole — none fails with
/// `bad_config` or any torn read — and each change a call noticed is recorded once (no two
/// consecutive `config changed` records of the same content).
#[test]
fn config_json_rewritten_while_calls_run_is_read_whole() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    if !view_or_skip() {
        return;
    }
    let w = world(&["echo"]);
    let config = w.hcp_home.join("config.json");
    let versions = [
        r#"{"limits": {"open_files": 256}}"#,
        r#"{"limits": {"open_files": 257}}"#,
    ];
    std::fs::write(&config, versions[0]).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let writes = Arc::new(AtomicUsize::new(0));
    let writer = {
        let (done, writes, config) = (done.clone(), writes.clone(), config.clone());
        std::thread::spawn(move || {
            let mut i = 0;
            while !done.load(Ordering::Relaxed) {
                i += 1;
                let tmp = config.with_extension(format!("json.tmp{i}"));
                std::fs::write(&tmp, versions[i % 2]).unwrap();
                std::fs::rename(&tmp, &config).unwrap();
                writes.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    // Calls run until the writer has changed the file several times under them.
    let mut calls = 0;
    while calls < 8 || writes.load(Ordering::Relaxed) < 20 {
        let (o, v) = exec_json_env(&w, &["echo.say", "hi"], &[]);
        assert_eq!(code(&o), 0, "call {calls}: {v}");
        assert_eq!(v["ok"], Value::Bool(true), "call {calls}: {v}");
        calls += 1;
        assert!(calls < 200, "the writer made no progress");
    }
    done.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let o = w.run(&["audit", "tail", "--json", "-n", "1000"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let tail: Value = serde_json::from_slice(&o.stdout).unwrap();
    let changes: Vec<Value> = tail
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["act"] == "config changed")
        .map(|r| r["changed"].clone())
        .collect();
    // The first version is noticed by the first call; later ones as calls see them.
    assert!(
        !changes.is_empty(),
        "no change of config.json recorded: {tail}"
    );
    assert!(
        changes.len() <= writes.load(Ordering::Relaxed) + 1,
        "{changes:?}"
    );
    for pair in changes.windows(2) {
        assert_ne!(pair[0], pair[1], "a change recorded twice: {changes:?}");
    }
    let o = w.run(&["audit", "verify"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
}

/// A runtime policy that reads both kinds of record: `polprobe.count` is counted
/// (`rate_limit`, a counter file per principal and tool), `polprobe.wire` needs the
/// owner's approval (`confirmation`, an approval file per request).
const COUNTED_AND_CONFIRMED: &str = r#"{
  "schema_version": "histos.policy/0.1",
  "tools": {
    "polprobe.count": {"args": {"value": {"type": "string"}}, "rate_limit": 5},
    "polprobe.wire": {
      "access": "write",
      "args": {"to": {"type": "string"}, "amount": {"type": "string", "pattern": "^[0-9]{1,6}$"}},
      "confirmation": {"required": true, "expires_in": 60}
    }
  },
  "roles": {"agent": {"allow": ["polprobe.count", "polprobe.wire"]}}
}
"#;

/// The one record of `dir` (a state directory: its `.json` files), asserting there is one.
fn only_file(dir: &Path) -> std::path::PathBuf {
    let files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    assert_eq!(files.len(), 1, "{}: {files:?}", dir.display());
    files.into_iter().next().unwrap()
}

/// Under a runtime policy (`$HCP_HOME/policy.json`), where approvals and counters are read:
/// one principal's approval file, then its counter file, damaged in turn. The owner's
/// calls and another principal's go on; the damaged record's principal alone is refused
/// (`store_damaged`, naming the file) on the calls that read it; `hcp doctor` names the
/// file and the command that removes it (snapshots: the calls' answers and doctor's lines).
#[test]
fn under_a_runtime_policy_a_damaged_approval_or_counter_refuses_its_principal_alone() {
    if !view_or_skip() {
        return;
    }
    for kind in ["approval", "counter"] {
        let w = world(&["polprobe"]);
        for p in ["agent-1", "agent-2"] {
            grant(&w, p, "polprobe", &["verb.exec.read", "verb.exec.write"]);
        }
        std::fs::write(w.hcp_home.join("policy.json"), COUNTED_AND_CONFIRMED).unwrap();
        let victim = session(&w, "agent-1", &["--role", "agent"]);
        let other = session(&w, "agent-2", &["--role", "agent"]);
        let count: &[&str] = &["polprobe.count", "--value", "a"];
        let wire: &[&str] = &["polprobe.wire", "--to", "bob", "--amount", "5", "--confirm"];
        // The victim's records: a counter (its first counted call) and a pending approval.
        let (o, v) = exec_json_env(&w, count, &[("HCP_SESSION", &victim)]);
        assert_eq!(code(&o), 0, "{kind}: {}", w.render(&o));
        let (o, v2) = exec_json_env(&w, wire, &[("HCP_SESSION", &victim)]);
        assert_eq!(
            v2["code"],
            "requires_confirmation",
            "{kind}: {v} {}",
            w.render(&o)
        );
        let state = w.hcp_home.join("state");
        let file = only_file(&state.join(match kind {
            "approval" => "approvals",
            _ => "counters",
        }));
        std::fs::write(&file, "garbage\n").unwrap();
        let stem = file.file_stem().unwrap().to_str().unwrap().to_owned();
        let mut answers = Vec::new();
        for (who, env) in [
            ("owner", None),
            ("agent-2", Some(other.as_str())),
            ("agent-1", Some(victim.as_str())),
        ] {
            for call in [count, wire] {
                let env: Vec<(&str, &str)> = env.map(|t| ("HCP_SESSION", t)).into_iter().collect();
                let (o, v) = exec_json_env(&w, call, &env);
                // A refusal the damaged file caused names it, and `hcp doctor` (which
                // names the repair) in its hint.
                if v["code"] == "store_damaged" || v["code"] == "limit_store_unavailable" {
                    let e = v["error"].as_str().unwrap_or_default();
                    assert!(
                        e.contains(&file.display().to_string()),
                        "{kind}: names not the file {}: {v}",
                        file.display()
                    );
                    assert!(
                        v["hint"]
                            .as_str()
                            .unwrap_or_default()
                            .contains("hcp doctor"),
                        "{kind}: {v}"
                    );
                }
                answers.push(format!("{who} {}: {}", call[0], outcome(&o, &v)));
            }
        }
        let o = w.run(&["doctor"]);
        assert_eq!(code(&o), 1, "{kind}: {}", w.render(&o));
        let text = w.filter(&String::from_utf8_lossy(&o.stdout));
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("damaged ") || l.contains("damaged record"))
            .collect();
        assert_eq!(lines.len(), 1, "{kind}: {text}");
        assert!(
            lines[0].contains(&stem),
            "{kind}: names not the file: {text}"
        );
        let shown = format!("{}\n--- doctor\n{}", answers.join("\n"), lines.join("\n"))
            .replace(&stem, "{file}");
        insta::assert_snapshot!(format!("damaged_under_policy_{kind}"), shown);
    }
}

/// A typo'd `HCP_HOME`, for the commands that need a store beyond those of
/// `audit_trail::a_typod_home_is_no_store_for_every_command_and_nothing_is_made`: each is
/// `no_store` (66) naming the path and `hcp init`, and none makes anything there.
#[test]
fn a_typod_home_is_no_store_for_the_other_commands_too() {
    let w = World::with_store();
    let typo = w.root().join("hcp-hmoe");
    for args in [
        &["deactivate", "echo"][..],
        &["connect", "echo"],
        &["disconnect", "echo"],
        &["sense", "echo"],
        &["approve", "apr_00000000000000000000"],
        &["deny", "apr_00000000000000000000"],
        &["state", "migrate"],
        &["policy", "init"],
        &["policy", "coverage"],
        &["policy", "lock"],
        &["config", "get"],
        &["config", "set", "limits.open_files", "256"],
        &["revoke", "agent", "--all"],
        &["home", "echo", "--principal", "agent"],
        &["home", "rm", "echo", "--principal", "agent"],
        &["session", "end", "--principal", "agent"],
    ] {
        let o = w
            .hcp()
            .env("HCP_HOME", &typo)
            .args(args)
            .write_stdin("")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(code(&o), 66, "{args:?}: {}", w.render(&o));
        assert!(
            err.contains("code: no_store") && err.contains("hcp-hmoe") && err.contains("hcp init"),
            "{args:?}: {err}"
        );
        assert!(!typo.exists(), "{args:?} made a store");
    }
}

/// A relative `HCP_HOME` (`.hcp`) is refused before anything is made, and the message
/// gives the absolute form to use instead.
#[test]
fn a_relative_home_is_refused_with_the_absolute_form_to_give() {
    let w = World::with_store();
    let o = w
        .hcp()
        .current_dir(w.root())
        .env("HCP_HOME", ".hcp")
        .args(["exec", "echo.say", "a"])
        .write_stdin("")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(code(&o), 74, "{}", w.render(&o));
    assert!(
        err.contains("code: store_unusable") && err.contains(r#"`HCP_HOME="$PWD/.hcp"`"#),
        "{err}"
    );
    assert!(!w.root().join(".hcp").exists());
}

/// Every kind of damaged record at once — a session, a grant file, an approval, a counter,
/// an install record, a tenant home: `hcp doctor` lists each (one problem apiece, in the
/// text and in `--json`) and exits 1; the owner's and the other principal's calls of the
/// undamaged pack go on (snapshot: doctor's lines).
#[test]
fn doctor_lists_every_damaged_record_at_once() {
    if !view_or_skip() {
        return;
    }
    let w = world(&["echo", "probe"]);
    let victim = session(&w, "agent-1", &[]);
    let victim_session = session_files(&w).pop().unwrap();
    let other = session(&w, "agent-2", &[]);
    for p in ["agent-1", "agent-2", "agent-3"] {
        grant(&w, p, "echo", &["verb.exec.read"]);
        grant(&w, p, "probe", &["verb.exec.read"]);
    }
    let (o, _) = exec_json_env(&w, &["probe.big", "3"], &[("HCP_SESSION", &victim)]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let digest = victim_session
        .file_stem()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    let state = w.hcp_home.join("state");
    std::fs::write(&victim_session, "[]\n").unwrap();
    std::fs::write(state.join("grants/agent-3.json"), "garbage\n").unwrap();
    for dir in ["approvals", "counters"] {
        std::fs::create_dir_all(state.join(dir)).unwrap();
    }
    std::fs::write(
        state.join("approvals/apr_00000000000000000000.json"),
        "garbage\n",
    )
    .unwrap();
    std::fs::write(
        state.join(format!("counters/{}.json", "0".repeat(64))),
        "garbage\n",
    )
    .unwrap();
    let home = w.hcp_home.join("homes/probe/principal/agent-1");
    std::fs::remove_dir_all(&home).unwrap();
    std::fs::write(&home, "not a directory\n").unwrap();
    std::fs::write(w.hcp_home.join("packs/probe/.hcp/record.json"), "{}\n").unwrap();
    for env in [None, Some(other.as_str())] {
        let env: Vec<(&str, &str)> = env.map(|t| ("HCP_SESSION", t)).into_iter().collect();
        let (o, v) = exec_json_env(&w, &["echo.say", "hi"], &env);
        assert_eq!(code(&o), 0, "{env:?}: {v}");
    }
    let o = w.run(&["doctor"]);
    assert_eq!(code(&o), 1, "{}", w.render(&o));
    let text = w.filter(&String::from_utf8_lossy(&o.stdout));
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("  - ") && l.contains("damaged"))
        .collect();
    assert_eq!(lines.len(), 6, "{text}");
    let o = w.run(&["doctor", "--json"]);
    assert_eq!(code(&o), 1, "{}", w.render(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let damaged = v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p.to_string().contains("damaged"))
        .count();
    assert_eq!(damaged, 6, "{v}");
    insta::assert_snapshot!(
        "doctor_damaged_all_at_once",
        lines.join("\n").replace(&digest, "{digest}")
    );
}

/// Lint and install apply one rule to a verb's program path (RUNTIME §3): a path that is
/// absolute or leaves the pack directory is `unsafe_path` for both — lint exits 1, install
/// installs nothing — and a path inside the pack is accepted by both.
#[test]
fn lint_and_install_agree_on_every_program_path() {
    let bins = common::example_bins();
    let w = World::with_store();
    let listed = |w: &World| String::from_utf8_lossy(&w.run(&["list"]).stdout).into_owned();
    let before = listed(&w);
    for (program, safe) in [
        ("../x", false),
        ("./../x", false),
        ("bin/../../x", false),
        ("bin/..", false),
        ("/usr/bin/echo", false),
        ("bin/tool", true),
        ("./bin/tool", true),
    ] {
        let dir = w.copy_pack("echo");
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        std::fs::copy(bins.join("hcp-example-echo"), dir.join("bin/tool")).unwrap();
        let path = dir.join("surface.json");
        let text = std::fs::read_to_string(&path).unwrap();
        let changed = text.replacen(
            r#""cli": ["hcp-example-echo", "say""#,
            &format!(r#""cli": ["{program}", "say""#),
            1,
        );
        assert_ne!(text, changed, "the echo pack's `echo.say` moved");
        std::fs::write(&path, changed).unwrap();
        let lint = w.run(&["lint", dir.to_str().unwrap()]);
        let install = w.run(&["install", "--force", dir.to_str().unwrap()]);
        let (lint_out, install_err) = (
            String::from_utf8_lossy(&lint.stdout).into_owned()
                + &String::from_utf8_lossy(&lint.stderr),
            String::from_utf8_lossy(&install.stderr).into_owned(),
        );
        if safe {
            assert_eq!(code(&lint), 0, "{program}: {}", w.render(&lint));
            assert_eq!(code(&install), 0, "{program}: {}", w.render(&install));
            let o = w.run(&["uninstall", "echo"]);
            assert_eq!(code(&o), 0, "{program}: {}", w.render(&o));
        } else {
            assert_eq!(code(&lint), 1, "{program}: {}", w.render(&lint));
            assert!(
                lint_out.contains("error[unsafe_path]") && lint_out.contains(program),
                "{program}: {lint_out}"
            );
            assert_ne!(code(&install), 0, "{program}: {}", w.render(&install));
            assert!(
                install_err.contains("error[unsafe_path]") && install_err.contains(program),
                "{program}: {install_err}"
            );
        }
        assert_eq!(listed(&w), before, "{program}: a pack is left installed");
    }
}

/// A store record that is not a regular file — a FIFO at one principal's grant file (a
/// plain read would block for ever), a symbolic link to `/dev/zero` at another's session
/// file (a plain read would never end) — is damage of that record: it refuses its own
/// principal at once, the owner's and everybody else's calls go on, and `hcp doctor` lists
/// both without reading them.
#[test]
fn a_record_that_is_not_a_regular_file_refuses_its_own_at_once() {
    if !view_or_skip() {
        return;
    }
    let w = world(&["echo", "probe"]);
    let fifo_holder = session(&w, "agent-1", &[]);
    let link_holder = session(&w, "agent-2", &[]);
    let link_session = session_files(&w)
        .into_iter()
        .find(|p| std::fs::read_to_string(p).is_ok_and(|t| t.contains("\"agent-2\"")))
        .unwrap();
    let bystander = session(&w, "agent-3", &[]);
    for p in ["agent-1", "agent-2", "agent-3"] {
        grant(&w, p, "echo", &["verb.exec.read"]);
    }
    let grant_file = w.hcp_home.join("state/grants/agent-1.json");
    std::fs::remove_file(&grant_file).unwrap();
    let c = std::ffi::CString::new(grant_file.to_str().unwrap()).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    std::fs::remove_file(&link_session).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &link_session).unwrap();

    let mut answers = Vec::new();
    for (who, token) in [
        ("owner", None),
        ("agent-3", Some(bystander.as_str())),
        ("agent-1", Some(fifo_holder.as_str())),
        ("agent-2", Some(link_holder.as_str())),
    ] {
        let env: Vec<(&str, &str)> = token.map(|t| ("HCP_SESSION", t)).into_iter().collect();
        let (o, v) = exec_json_env(&w, &["echo.say", "hi"], &env);
        answers.push(format!("{who}: {}", outcome(&o, &v)));
    }
    assert_eq!(
        answers,
        [
            "owner: 0 ok",
            "agent-3: 0 ok",
            "agent-1: 74 store_damaged",
            "agent-2: 74 store_damaged"
        ]
    );
    let o = w.run(&["doctor"]);
    assert_eq!(code(&o), 1, "{}", w.render(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("agent-1.json") && text.contains("it is a FIFO, not a regular file"),
        "{text}"
    );
    assert!(
        text.contains("it is a symbolic link, not a regular file"),
        "{text}"
    );
}

/// `state/authority-files.json` (the keyed record of the runtime policy's and
/// `config.json`'s digests) made a directory: the owner's calls go on, every session's
/// call is refused `store_damaged` naming the file, `hcp config set` refuses before it
/// writes, `hcp doctor` lists it with its repair, and after that repair the next call
/// records the watched files afresh and sessions run again.
#[test]
fn a_damaged_record_of_the_watched_files_refuses_the_sessions_not_the_owner() {
    if !view_or_skip() {
        return;
    }
    let w = world(&["echo", "probe"]);
    let token = session(&w, "agent-1", &[]);
    grant(&w, "agent-1", "echo", &["verb.exec.read"]);
    let kept = w.hcp_home.join("state/authority-files.json");
    assert!(kept.is_file());
    std::fs::remove_file(&kept).unwrap();
    std::fs::create_dir(&kept).unwrap();
    let config_before = std::fs::read(w.hcp_home.join("config.json")).ok();

    let (o, v) = exec_json_env(&w, &["echo.say", "hi"], &[]);
    assert_eq!(outcome(&o, &v), "0 ok", "{}", w.render(&o));
    let (o, v) = exec_json_env(&w, &["echo.say", "hi"], &[("HCP_SESSION", token.as_str())]);
    assert_eq!(outcome(&o, &v), "74 store_damaged", "{}", w.render(&o));
    assert!(
        v.to_string().contains("authority-files.json"),
        "the refusal names the file: {v}"
    );
    let o = w.run(&["config", "set", "limits.cpu_seconds", "30"]);
    assert_eq!(code(&o), 74, "{}", w.render(&o));
    assert_eq!(
        std::fs::read(w.hcp_home.join("config.json")).ok(),
        config_before,
        "config.json unchanged"
    );
    let o = w.run(&["doctor"]);
    assert_eq!(code(&o), 1, "{}", w.render(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("authority-files.json")
            && text.contains("it is a directory, not a regular file")
            && text.contains(&format!("repair: `rm -r {}`", kept.display())),
        "{text}"
    );

    std::fs::remove_dir(&kept).unwrap();
    let (o, v) = exec_json_env(&w, &["echo.say", "hi"], &[("HCP_SESSION", token.as_str())]);
    assert_eq!(outcome(&o, &v), "0 ok", "{}", w.render(&o));
    assert!(kept.is_file(), "the record is kept again");
    let o = w.run(&["doctor"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let o = w.run(&["audit", "verify"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
}

/// Makes a FIFO at `path` (removing what is there).
fn fifo_at(path: &Path) {
    let _ = std::fs::remove_file(path);
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// Store files that are FIFOs or links where a record should be, each in turn: nothing
/// waits on a FIFO or reads a link to its end. The ledger a FIFO: every call of a pack is
/// refused `store_damaged`, the owner's too (no install record can be believed without
/// it), the owner's commands go on, and `hcp doctor` lists the ledger
/// alone (not every file it vouched for, whose repairs would throw authority away). A
/// pack's bin cache a FIFO or a link to `/dev/zero`: calls go on (it is a cache). An
/// install record a FIFO or a link: its pack is refused `store_damaged`, and `hcp install
/// --force` (doctor's repair) makes it whole.
#[test]
fn fifos_and_links_in_the_store_hang_nothing_and_are_named() {
    if !view_or_skip() {
        return;
    }
    let w = world(&["echo", "probe"]);
    let token = session(&w, "agent-1", &[]);
    grant(&w, "agent-1", "echo", &["verb.exec.read"]);
    let (o, v) = exec_json_env(&w, &["echo.say", "hi"], &[]);
    assert_eq!(outcome(&o, &v), "0 ok");

    let ledger = w.hcp_home.join("state/ledger.json");
    let kept = std::fs::read(&ledger).unwrap();
    fifo_at(&ledger);
    // No install record can be believed without the ledger: the owner's call of a pack
    // is refused too, its hint the ledger's repair (an older pack put back with the
    // ledger broken is never run).
    let (o, v) = exec_json_env(&w, &["echo.say", "hi"], &[]);
    assert_eq!(outcome(&o, &v), "74 store_damaged", "{v}");
    assert!(
        v["hint"].as_str().unwrap().contains("hcp state reledger"),
        "{v}"
    );
    let (o, v) = exec_json_env(&w, &["echo.say", "hi"], &[("HCP_SESSION", token.as_str())]);
    assert_eq!(outcome(&o, &v), "74 store_damaged", "{v}");
    let o = w.run(&["doctor"]);
    assert_eq!(code(&o), 1, "{}", w.render(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    // The list of damaged records (the packs' own lines say why each is refused).
    let damaged: Vec<&str> = text
        .lines()
        .filter(|l| l.trim_start().starts_with("- damaged "))
        .collect();
    assert_eq!(damaged.len(), 1, "the ledger alone: {text}");
    assert!(
        damaged[0].contains("damaged ledger") && damaged[0].contains("it is a FIFO"),
        "{text}"
    );
    std::fs::remove_file(&ledger).unwrap();
    std::fs::write(&ledger, kept).unwrap();

    let cache = w.hcp_home.join("packs/echo/.hcp/fingerprints.json");
    fifo_at(&cache);
    let (o, v) = exec_json_env(&w, &["echo.say", "hi"], &[]);
    assert_eq!(outcome(&o, &v), "0 ok", "{v}");
    std::fs::remove_file(&cache).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &cache).unwrap();
    let (o, v) = exec_json_env(&w, &["echo.say", "hi"], &[]);
    assert_eq!(outcome(&o, &v), "0 ok", "{v}");
    std::fs::remove_file(&cache).unwrap();

    // `config.json` governs every call: a FIFO there refuses them (74) at once, never a
    // wait for a writer.
    let config = w.hcp_home.join("config.json");
    let kept = std::fs::read(&config).ok();
    fifo_at(&config);
    let (o, v) = exec_json_env(&w, &["echo.say", "hi"], &[]);
    assert_eq!(code(&o), 74, "{v}");
    std::fs::remove_file(&config).unwrap();
    if let Some(k) = kept {
        std::fs::write(&config, k).unwrap();
    }

    let record = w.hcp_home.join("packs/echo/.hcp/record.json");
    for link in [false, true] {
        if link {
            std::fs::remove_file(&record).unwrap();
            std::os::unix::fs::symlink("/dev/zero", &record).unwrap();
        } else {
            fifo_at(&record);
        }
        let (o, v) = exec_json_env(&w, &["echo.say", "hi"], &[]);
        assert_eq!(outcome(&o, &v), "74 store_damaged", "{v}");
        let (o, v) = exec_json_env(&w, &["probe.argv", "--value", "x"], &[]);
        assert_eq!(outcome(&o, &v), "0 ok", "another pack goes on: {v}");
        let o = w.run(&["doctor"]);
        assert_eq!(code(&o), 1, "{}", w.render(&o));
        let dir = exec_common::source("echo").display().to_string();
        let o = w.run(&["install", "--force", &dir]);
        assert_eq!(code(&o), 0, "{}", w.render(&o));
        let (o, v) = exec_json_env(&w, &["echo.say", "hi"], &[]);
        assert_eq!(outcome(&o, &v), "0 ok", "{v}");
    }
}

/// `$HCP_HOME/homes` made a link (to a directory elsewhere) or a file: no call's home is
/// made or given through it, every `personal` call is refused `store_damaged`, a `local`
/// call goes on (its workdir is not taken for a tenant home), and `hcp doctor` names the
/// one record with a repair that removes the link, never what it points to.
#[test]
fn a_homes_directory_made_a_link_or_a_file_is_damage_and_nothing_goes_through_it() {
    if !view_or_skip() {
        return;
    }
    let w = world(&["echo", "transit"]);
    let token = session(&w, "agent-1", &[]);
    grant(&w, "agent-1", "echo", &["verb.exec.read"]);
    let homes = w.hcp_home.join("homes");
    let elsewhere = w.hcp_home.parent().unwrap().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let _ = std::fs::remove_dir_all(&homes);
    std::os::unix::fs::symlink(&elsewhere, &homes).unwrap();
    for file in [false, true] {
        if file {
            std::fs::remove_file(&homes).unwrap();
            std::fs::write(&homes, "[]").unwrap();
        }
        let (o, v) = exec_json_env(&w, &["transit.find", "Central"], &[]);
        assert_eq!(outcome(&o, &v), "74 store_damaged", "{v}");
        let (o, v) = exec_json_env(&w, &["echo.say", "hi"], &[("HCP_SESSION", token.as_str())]);
        assert_eq!(outcome(&o, &v), "0 ok", "{v}");
        assert_eq!(
            std::fs::read_dir(&elsewhere).unwrap().count(),
            0,
            "nothing made through the link"
        );
        let o = w.run(&["doctor"]);
        assert_eq!(code(&o), 1, "{}", w.render(&o));
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(
            text.contains("damaged homes directory")
                && text.contains(&format!("repair: `rm {}`", homes.display())),
            "{text}"
        );
    }
    std::fs::remove_file(&homes).unwrap();
    let (o, v) = exec_json_env(&w, &["transit.find", "Central"], &[]);
    assert_eq!(outcome(&o, &v), "0 ok", "{v}");
}

/// An activation marker made a directory is a damaged marker of its pack (not an
/// inactive pack), and `hcp deactivate` (doctor's repair) removes it.
#[test]
fn an_activation_marker_made_a_directory_is_damage_that_deactivate_repairs() {
    let w = world(&["echo"]);
    let marker = w.hcp_home.join("state/active/echo");
    std::fs::remove_file(&marker).unwrap();
    std::fs::create_dir(&marker).unwrap();
    let (o, v) = exec_json_env(&w, &["echo.say", "hi"], &[]);
    assert_eq!(outcome(&o, &v), "74 store_damaged", "{v}");
    let o = w.run(&["doctor"]);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("damaged activation"),
        "{}",
        w.render(&o)
    );
    for args in [&["deactivate", "echo"][..], &["activate", "echo"][..]] {
        let o = w.run(args);
        assert_eq!(code(&o), 0, "{}", w.render(&o));
    }
    let (o, v) = exec_json_env(&w, &["echo.say", "hi"], &[]);
    assert_eq!(outcome(&o, &v), "0 ok", "{v}");
}

/// `--workdir ""` is a workdir the rules refuse (`bad_workdir`, 64), not a usage error.
#[test]
fn an_empty_workdir_is_bad_workdir() {
    let w = world(&["echo"]);
    let o = w.run(&["session", "start", "--principal", "x", "--workdir", ""]);
    assert_eq!(code(&o), 64, "{}", w.render(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("bad_workdir"),
        "{}",
        w.render(&o)
    );
}

/// A store directory made a link (`skills/` to a directory elsewhere): nothing is written
/// through it (activation is refused `store_damaged`), `hcp doctor` names it with a
/// repair that removes the link. The ledger made a directory: `hcp state reledger`
/// replaces it. `store.json` and `state/store-id` made FIFOs: nothing waits on them.
#[test]
fn store_directories_made_links_and_marker_files_made_fifos_are_named_not_followed() {
    let w = world(&["echo"]);
    let skills = w.hcp_home.join("skills");
    let elsewhere = w.hcp_home.parent().unwrap().join("elsewhere-skills");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::remove_dir_all(&skills).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &skills).unwrap();
    let o = w.run(&["deactivate", "echo"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let o = w.run(&["activate", "echo"]);
    assert_eq!(code(&o), 74, "{}", w.render(&o));
    assert_eq!(
        std::fs::read_dir(&elsewhere).unwrap().count(),
        0,
        "nothing written there"
    );
    let o = w.run(&["doctor"]);
    assert_eq!(code(&o), 1, "{}", w.render(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains(&format!("repair: `rm {}`", skills.display())),
        "{}",
        w.render(&o)
    );
    std::fs::remove_file(&skills).unwrap();
    let o = w.run(&["activate", "echo"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));

    let ledger = w.hcp_home.join("state/ledger.json");
    std::fs::remove_file(&ledger).unwrap();
    std::fs::create_dir(&ledger).unwrap();
    let o = w.run(&["state", "reledger"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    assert!(ledger.is_file());

    for marker in ["store.json", "state/store-id"] {
        let p = w.hcp_home.join(marker);
        let kept = std::fs::read(&p).unwrap();
        fifo_at(&p);
        // Answered at once, never a wait for a writer (`store.json` names the store, so
        // every command refuses it, 74).
        for args in [&["exec", "echo.say", "hi"][..], &["doctor"][..]] {
            let o = w.run(args);
            if marker == "store.json" {
                assert_eq!(code(&o), 74, "{marker}: {}", w.render(&o));
            }
        }
        std::fs::remove_file(&p).unwrap();
        std::fs::write(&p, kept).unwrap();
    }
    let o = w.run(&["doctor"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
}
