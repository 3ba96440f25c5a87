//! Acts of authority that must leave neither a false, a missing nor a half record
//! (RUNTIME §6 "Every act of authority is a record too", §3, §5.1), through the built
//! `hcp`: an act is write-ahead (its intent, then `act made` or `act failed`), so one
//! killed between its record and its change is `interrupted`, never a false record; the
//! stamp of the watched files is keyed, so a forged one hides no `config.json` change; a
//! `deactivate` or `activate` that cannot be made whole changes nothing and the trail says
//! it failed; a call refused for a bad `config.json` is recorded when its trail can be
//! reached; a read path that hands a call the whole host is refused (`bad_config_key` by
//! `hcp config set`, `bad_config` when the file is read); `hcp doctor` under a
//! session writes nothing; `install --force` says which grants it suspends.
//!
//! The kill between an act's record and its change is the debug build's seam
//! (`HCP_TEST_ABORT_AT=act_recorded`, `hcp_runtime::seam`: release builds read nothing),
//! which SIGKILLs hcp there as `kill -9` would. The tests that make a store file
//! immutable run as root (`chattr +i`); elsewhere they print `skipped:` (a failure under
//! `CI=true`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::code;
mod exec_common;

use common::World;
use common::immutable::Immutable;
use exec_common::{act_completions, all_records, authority_records};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;

fn ok(w: &World, args: &[&str]) -> std::process::Output {
    let o = w.run(args);
    assert_eq!(code(&o), 0, "{args:?}:\n{}", w.render(&o));
    o
}

fn code_line(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr)
        .lines()
        .find_map(|l| l.trim().strip_prefix("code: ").map(str::to_owned))
        .unwrap_or_default()
}

fn verify_json(w: &World) -> Value {
    let o = w.run(&["audit", "verify", "--json"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// Times, record ids and hashes of a trail's text as stable markers, for snapshots.
fn stable(text: &str) -> String {
    text.split('\n')
        .map(|line| {
            line.split(' ')
                .map(|tok| {
                    let bare = tok.trim_matches('`');
                    let mark = if bare.starts_with("hmac-sha256:") || bare.starts_with("sha256:") {
                        Some("[HASH]")
                    } else if bare.len() == 24 && bare.ends_with('Z') && bare.contains('T') {
                        Some("[TS]")
                    } else if bare.len() == 36 && bare.matches('-').count() == 4 {
                        Some("[ID]")
                    } else {
                        None
                    };
                    match mark {
                        Some(m) => tok.replace(bare, m),
                        None => tok.to_owned(),
                    }
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every file and directory under `root` with its bytes (directories as `dir`).
fn tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            let t = e.file_type().unwrap();
            if t.is_dir() {
                out.insert(rel, b"dir".to_vec());
                stack.push(p);
            } else if t.is_symlink() {
                out.insert(
                    rel,
                    std::fs::read_link(&p).unwrap().display().to_string().into(),
                );
            } else {
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// A store with `echo` installed and active.
fn echo_world() -> World {
    common::example_bins();
    let w = World::with_store();
    exec_common::install(&w, &common::gold_pack("echo"));
    w
}

/// `hcp ARGS` killed by the seam between the act's record and its change.
fn killed_after_record(w: &World, args: &[&str]) {
    let o = w
        .hcp()
        .env("HCP_TEST_ABORT_AT", "act_recorded")
        .args(args)
        .output()
        .unwrap();
    assert_eq!(o.status.signal(), Some(9), "{args:?}:\n{}", w.render(&o));
}

#[test]
fn an_act_killed_between_its_record_and_its_change_is_interrupted_and_not_made() {
    let w = echo_world();
    killed_after_record(&w, &["grant", "carol", "echo", "verb.exec.read"]);
    // The change never came: no grant, and the trail does not say there is one.
    assert!(!w.hcp_home.join("state/grants/carol.json").exists());
    let last = authority_records(&w).pop().unwrap();
    assert_eq!(
        (&last["act"], &last["phase"]),
        (&json!("grant"), &json!("intent"))
    );
    let v = verify_json(&w);
    assert_eq!(v["ok"], json!(true), "{v}");
    assert_eq!(v["interrupted"], json!([]), "not a call: {v}");
    let acts = v["interrupted_acts"].as_array().unwrap();
    assert_eq!(acts.len(), 1, "{v}");
    assert_eq!(
        (&acts[0]["act"], &acts[0]["seq"], &acts[0]["actor"]),
        (&json!("grant"), &last["seq"], &json!("owner"))
    );
    let o = ok(&w, &["audit", "verify"]);
    insta::assert_snapshot!(
        "interrupted_act_verify",
        stable(&w.filter(&String::from_utf8_lossy(&o.stdout)))
    );
    let tail = String::from_utf8(ok(&w, &["audit", "tail", "-n", "1"]).stdout).unwrap();
    assert!(tail.contains("  grant (interrupted)  "), "{tail}");

    // `config set` (an edit under the store lock) the same way: the file is not written.
    killed_after_record(&w, &["config", "set", "limits.open_files", "64"]);
    assert!(!w.hcp_home.join("config.json").exists());
    let v = verify_json(&w);
    let acts: Vec<&Value> = v["interrupted_acts"].as_array().unwrap().iter().collect();
    assert_eq!(
        acts.iter().map(|a| a["act"].clone()).collect::<Vec<_>>(),
        [json!("grant"), json!("config set")],
        "{v}"
    );

    // The next act is made whole: its intent, then `act made` naming it.
    ok(&w, &["grant", "carol", "echo", "verb.exec.read"]);
    let made = act_completions(&w).pop().unwrap();
    let intent = authority_records(&w).pop().unwrap();
    assert_eq!(made["act"], json!("act made"));
    // It names the generation of the state ledger it left (docs/DESIGN.md, "The store").
    let ledger: Value =
        serde_json::from_slice(&std::fs::read(w.hcp_home.join("state/ledger.json")).unwrap())
            .unwrap();
    assert_eq!(
        made["changed"],
        json!({"act": "grant", "ledger": ledger["generation"], "seq": intent["seq"]})
    );
    assert_eq!(
        verify_json(&w)["interrupted_acts"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let tail = String::from_utf8(ok(&w, &["audit", "tail", "-n", "2"]).stdout).unwrap();
    assert!(
        !tail.contains("(interrupted)") && tail.contains("  act made  act=grant ledger="),
        "{tail}"
    );
}

#[test]
fn an_act_whose_change_fails_is_followed_by_act_failed_with_the_error() {
    let w = echo_world();
    // `state/sessions` refuses the new session file after the record.
    let sessions = w.hcp_home.join("state").join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let Some(guard) = Immutable::new(&sessions) else {
        return common::skip::skip(
            "cannot make a directory immutable here (no `chattr +i` as root)",
        );
    };
    let o = w.run(&["session", "start", "--principal", "dave"]);
    drop(guard);
    assert_eq!(code(&o), 74, "{}", w.render(&o));
    let failed = act_completions(&w).pop().unwrap();
    assert_eq!(failed["act"], json!("act failed"));
    assert_eq!(failed["changed"]["act"], json!("session start"));
    assert_eq!(failed["changed"]["code"], json!("store_io"));
    let error = failed["changed"]["error"].as_str().unwrap();
    assert!(
        error.contains("sessions"),
        "the error names the place: {error}"
    );
    assert_eq!(verify_json(&w)["interrupted_acts"], Value::Null);
}

#[test]
fn an_ordinary_exec_adds_no_record_of_an_act() {
    let w = echo_world();
    let o = exec_common::exec(&w, &["echo.say", "one"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let before = all_records(&w).len();
    let o = exec_common::exec(&w, &["echo.say", "two"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let after = all_records(&w);
    let kinds: Vec<&Value> = after[before..].iter().map(|r| &r["kind"]).collect();
    assert_eq!(kinds, [&json!("intent"), &json!("outcome")]);
}

/// `sha256:` and the hex digest of `path`'s bytes, as the trail writes it.
fn sha256_tagged(path: &Path) -> String {
    let o = std::process::Command::new("sha256sum")
        .arg(path)
        .output()
        .unwrap();
    let text = String::from_utf8(o.stdout).unwrap();
    format!("sha256:{}", text.split_whitespace().next().unwrap())
}

/// What `state/authority-files.json` keeps of `path` for its stamp (inode, size,
/// modification and change times in ns).
fn stamp_of(path: &Path) -> String {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).unwrap();
    format!(
        "{}:{}:{}.{}:{}.{}",
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec()
    )
}

#[test]
fn a_forged_stamp_of_the_watched_files_hides_no_config_change() {
    let w = echo_world();
    let config = w.hcp_home.join("config.json");
    let stamps = w.hcp_home.join("state").join("authority-files.json");
    let changes = || {
        authority_records(&w)
            .into_iter()
            .filter(|r| r["act"] == "config changed")
            .map(|r| r["changed"].clone())
            .collect::<Vec<_>>()
    };
    std::fs::write(&config, json!({"limits": {"open_files": 30}}).to_string()).unwrap();
    assert_eq!(code(&exec_common::exec(&w, &["echo.say", "a"])), 0);
    assert_eq!(changes().len(), 1);
    let kept: Value = serde_json::from_slice(&std::fs::read(&stamps).unwrap()).unwrap();
    assert!(
        kept["mac"].as_str().is_some_and(|m| m.len() == 64),
        "{kept}"
    );

    // Edited by hand with the stamp rewritten to match, its MAC kept or dropped: either
    // way the edit is recorded, and the record says the stamp was refused.
    for (n, mac) in [(60, Some(kept["mac"].clone())), (90, None)] {
        std::fs::write(&config, json!({"limits": {"open_files": n}}).to_string()).unwrap();
        let mut forged = kept.clone();
        forged["config changed"] = json!({
            "file": "config.json",
            "digest": sha256_tagged(&config),
            "stamp": stamp_of(&config),
        });
        match mac {
            Some(m) => forged["mac"] = m,
            None => {
                forged.as_object_mut().unwrap().remove("mac");
            }
        }
        std::fs::write(&stamps, forged.to_string()).unwrap();
        assert_eq!(code(&exec_common::exec(&w, &["echo.say", "b"])), 0);
        let last = changes().pop().unwrap();
        assert_eq!(last["digest"], json!(sha256_tagged(&config)));
        assert_eq!(
            last["stamp_refused"],
            json!(if n == 60 { "bad mac" } else { "no mac" })
        );
    }
    assert_eq!(changes().len(), 3);
    // Recorded once: the stamp is keyed again, and the next call records nothing.
    assert_eq!(code(&exec_common::exec(&w, &["echo.say", "c"])), 0);
    assert_eq!(changes().len(), 3);
}

#[test]
fn a_deactivate_that_cannot_remove_all_of_it_changes_nothing_and_says_it_failed() {
    let w = echo_world();
    let skill = w.hcp_home.join("skills").join("echo");
    let marker = w.hcp_home.join("state").join("active").join("echo");
    assert!(skill.join("SKILL.md").exists() && marker.exists());
    let Some(guard) = Immutable::new(&skill) else {
        return common::skip::skip(
            "cannot make a directory immutable here (no `chattr +i` as root)",
        );
    };
    let before = tree(&w.hcp_home.join("state"));
    let o = w.run(&["deactivate", "echo"]);
    drop(guard);
    insta::assert_snapshot!("deactivate_half", w.render(&o));
    assert_eq!(code_line(&o), "store_io");
    // Nothing removed: still active, its skill in place, the state as it was but the
    // trail's records.
    assert!(marker.exists() && skill.join("SKILL.md").exists());
    assert_eq!(tree(&w.hcp_home.join("state")), before);
    let failed = act_completions(&w).pop().unwrap();
    assert_eq!(
        (
            &failed["act"],
            &failed["changed"]["act"],
            &failed["changed"]["code"]
        ),
        (
            &json!("act failed"),
            &json!("deactivate"),
            &json!("store_io")
        )
    );
    assert_eq!(verify_json(&w)["ok"], json!(true));
    // Once it can be, it is made whole.
    ok(&w, &["deactivate", "echo"]);
    assert!(!marker.exists() && !skill.exists());
}

#[test]
fn an_activate_that_cannot_write_all_of_it_changes_nothing_and_says_it_failed() {
    let w = echo_world();
    ok(&w, &["deactivate", "echo"]);
    let active = w.hcp_home.join("state").join("active");
    assert!(active.is_dir());
    let Some(guard) = Immutable::new(&active) else {
        return common::skip::skip(
            "cannot make a directory immutable here (no `chattr +i` as root)",
        );
    };
    let o = w.run(&["activate", "echo"]);
    drop(guard);
    assert_eq!(
        (code(&o), code_line(&o)),
        (74, "store_io".into()),
        "{}",
        w.render(&o)
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("hcp-home/state/active"),
        "names the file: {}",
        w.render(&o)
    );
    // The skill written before the marker failed is taken back.
    assert!(!w.hcp_home.join("skills").join("echo").exists());
    assert!(!active.join("echo").exists());
    let failed = act_completions(&w).pop().unwrap();
    assert_eq!(
        (&failed["act"], &failed["changed"]["act"]),
        (&json!("act failed"), &json!("activate"))
    );
}

#[test]
fn a_call_refused_for_a_bad_config_is_recorded_when_its_trail_can_be_reached() {
    let w = echo_world();
    let config = w.hcp_home.join("config.json");
    let refusals = || {
        exec_common::audit_records(&w)
            .into_iter()
            .filter(|r| r["kind"] == "refusal")
            .collect::<Vec<_>>()
    };
    // Unparseable, an unknown key, a wrong type: the trail is the files', recorded there.
    for (i, text) in [
        "{not json",
        r#"{"bogus": 1}"#,
        r#"{"sandbox": {"read": 5}}"#,
    ]
    .iter()
    .enumerate()
    {
        std::fs::write(&config, text).unwrap();
        let o = exec_common::exec(&w, &["echo.say", "x"]);
        assert_eq!(
            (code(&o), code_line(&o)),
            (78, "bad_config".into()),
            "{text}"
        );
        let r = refusals();
        assert_eq!(r.len(), i + 1, "{text}: {r:?}");
        let last = r.last().unwrap();
        assert_eq!(
            (&last["code"], &last["pack_id"], &last["verb_key"]),
            (&json!("bad_config"), &json!("echo"), &json!("echo.say"))
        );
    }
    // A bad `state` (a fleet's trail, which only a valid entry reaches): not recorded.
    let n = all_records(&w).len();
    for text in [
        r#"{"state": 1}"#,
        r#"{"state": {"url": ""}}"#,
        r#"{"state": "#,
    ] {
        std::fs::write(&config, text).unwrap();
        let o = exec_common::exec(&w, &["echo.say", "x"]);
        assert_eq!(
            (code(&o), code_line(&o)),
            (78, "bad_config".into()),
            "{text}"
        );
        assert_eq!(all_records(&w).len(), n, "{text}");
    }
}

#[test]
fn a_read_path_that_hands_a_call_the_whole_host_is_refused() {
    let w = echo_world();
    let config = w.hcp_home.join("config.json");
    let o = w.run(&["config", "set", "sandbox.read", r#"["/"]"#]);
    insta::assert_snapshot!("read_whole_host", w.render(&o));
    let home = w.home.display().to_string();
    let store = w.hcp_home.display().to_string();
    let above = w.root().display().to_string();
    for (key, path) in [
        ("sandbox.read", "/home"),
        ("sandbox.read", home.as_str()),
        ("sandbox.read", store.as_str()),
        ("sandbox.read", above.as_str()),
        ("packs.echo.read", "/"),
        ("packs.echo.write", home.as_str()),
    ] {
        let o = w.run(&["config", "set", key, &json!([path]).to_string()]);
        assert_eq!(
            (code(&o), code_line(&o)),
            (64, "bad_config_key".into()),
            "{key} {path}"
        );
        assert!(!config.exists(), "nothing written for {key} {path}");
    }
    // A directory inside the home is a grant like any other.
    let inside = w.home.join("projects");
    std::fs::create_dir_all(&inside).unwrap();
    ok(
        &w,
        &[
            "config",
            "set",
            "sandbox.read",
            &json!([inside]).to_string(),
        ],
    );
    // The same check when the file is read: written by hand, every call is refused.
    std::fs::write(&config, json!({"sandbox": {"read": ["/"]}}).to_string()).unwrap();
    let o = exec_common::exec(&w, &["echo.say", "x"]);
    assert_eq!((code(&o), code_line(&o)), (78, "bad_config".into()));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("is the whole host"),
        "{}",
        w.render(&o)
    );
}

#[test]
fn doctor_under_a_session_writes_nothing() {
    let w = echo_world();
    ok(&w, &["grant", "bob", "echo", "verb.exec.read"]);
    let token = exec_common::session(&w, "bob", &[]);
    // No fingerprint kept yet: the first verify of each bin would keep one.
    for e in std::fs::read_dir(w.hcp_home.join("packs"))
        .unwrap()
        .flatten()
    {
        let _ = std::fs::remove_file(e.path().join(".hcp").join("fingerprints.json"));
    }
    let before = tree(&w.hcp_home);
    let o = w
        .hcp()
        .env("HCP_SESSION", &token)
        .args(["doctor"])
        .output()
        .unwrap();
    assert!(matches!(code(&o), 0 | 1), "{}", w.render(&o));
    assert_eq!(tree(&w.hcp_home), before, "{}", w.render(&o));
}

#[test]
fn install_force_that_suspends_grants_warns_with_the_grant_that_restores_them() {
    let w = echo_world();
    ok(&w, &["grant", "bob", "echo", "verb.exec.read"]);
    // The repair of a damaged install record: its content counts as changed.
    std::fs::write(w.hcp_home.join("packs/echo/.hcp/record.json"), b"{").unwrap();
    let echo = common::gold_pack("echo").display().to_string();
    let o = ok(&w, &["install", "--force", "--json", &echo]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (&v["replaced"], &v["content_changed"]),
        (&json!(true), &json!(true))
    );
    let warnings = v["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{v}");
    let text = warnings[0].as_str().unwrap();
    assert!(
        text.contains("`hcp grant bob echo verb.exec.read`"),
        "{text}"
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(&format!("warning: {text}")),
        "{}",
        w.render(&o)
    );
    // Without grants to suspend, nothing to warn of.
    ok(&w, &["revoke", "bob", "echo"]);
    std::fs::write(w.hcp_home.join("packs/echo/.hcp/record.json"), b"{").unwrap();
    let o = ok(&w, &["install", "--force", "--json", &echo]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["warnings"], json!([]), "{v}");
}
