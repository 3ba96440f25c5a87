//! Install records and bindings carry the keyed MAC of their content and name, and a
//! runtime policy removed with the stamp of its digest is not dropped quietly (RUNTIME §3
//! "Install pins what it will run", §4 "Fault isolation", §6, §8; docs/DESIGN.md, "The
//! store"). Without the chain key:
//!
//! - an install record whose pin was re-pointed at another program, or one copied from
//!   another pack, refuses that pack alone (`store_damaged`, naming the file, the hint its
//!   repair) and never runs the other program; `hcp doctor` lists it; `hcp install
//!   --force` from the source repairs it;
//! - a binding copied from the owner to another principal's name, its `principal` edited,
//!   refuses that principal's binding alone and never hands over the credential;
//! - a store of an earlier version, whose records and bindings have no `mac`, gains them at
//!   its first call with one `migrate` record, and a `mac` removed after that is damage;
//! - `policy.yaml` removed together with `state/authority-files.json` is recorded once as
//!   a change (digest `absent`) and refuses every session's call until it is back.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::{code, view_or_skip};
#[path = "exec_common/mod.rs"]
mod exec_common;

use common::World;
use exec_common::{exec_json_env, grant, session, world};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::path::Path;

fn outcome(o: &std::process::Output, v: &Value) -> String {
    match v["code"].as_str() {
        Some(c) => format!("{} {c}", code(o)),
        None => format!("{} ok", code(o)),
    }
}

fn read_json(p: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

fn write_json(p: &Path, v: &Value) {
    std::fs::write(p, serde_json::to_vec_pretty(v).unwrap()).unwrap();
}

/// `hcp doctor`'s lines of damaged records, its exit status asserted 1.
fn doctor_damaged(w: &World) -> Vec<String> {
    let o = w.run(&["doctor"]);
    assert_eq!(code(&o), 1, "{}", w.render(&o));
    let text = w.filter(&String::from_utf8_lossy(&o.stdout));
    text.lines()
        .filter(|l| l.contains("damaged "))
        .map(str::to_owned)
        .collect()
}

/// What the trail's last records say, as `audit tail --json` shows them.
fn tail(w: &World, n: &str) -> Vec<Value> {
    let o = w.run(&["audit", "tail", "--json", "-n", n]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    v.as_array().unwrap().clone()
}

/// Stores `token` as `principal`'s credential for `mail`, as `hcp connect` does.
fn connect(w: &World, principal: &str, token: &str) {
    exec_common::store_binding(w, principal, "mail", token);
}

/// Each edit of `echo`'s install record: the owner's `echo.say` and `mail.list` and
/// `hcp doctor` (snapshot); the record's pin re-pointed at `ls` never runs `ls`; the
/// repair doctor names gives the pack back.
#[test]
fn an_install_record_edited_or_copied_refuses_its_pack_alone() {
    for kind in ["bin_repointed", "copied_from_another_pack", "mac_stripped"] {
        let w = world(&["echo", "mail"]);
        connect(&w, "owner", "owner-token");
        let record = w.hcp_home.join("packs/echo/.hcp/record.json");
        let mut r = read_json(&record);
        match kind {
            "bin_repointed" => {
                // Another program the store pinned (echo's `ls`), path and digest.
                let bins = r["bins"].as_array().unwrap().clone();
                let ls = bins.iter().find(|b| b["program"] == "ls").unwrap();
                let say = bins
                    .iter()
                    .position(|b| b["program"] == "hcp-example-echo")
                    .unwrap();
                r["bins"][say]["path"] = ls["path"].clone();
                r["bins"][say]["sha256"] = ls["sha256"].clone();
                write_json(&record, &r);
            }
            "copied_from_another_pack" => {
                let from = w.hcp_home.join("packs/mail/.hcp/record.json");
                let text = std::fs::read_to_string(from).unwrap();
                std::fs::write(
                    &record,
                    text.replace("\"pack_id\": \"mail\"", "\"pack_id\": \"echo\""),
                )
                .unwrap();
            }
            "mac_stripped" => {
                r.as_object_mut().unwrap().remove("mac").unwrap();
                write_json(&record, &r);
            }
            _ => unreachable!(),
        }
        let mut answers = Vec::new();
        for args in [&["echo.say", "hi"][..], &["mail.list"][..]] {
            let (o, v) = exec_json_env(&w, args, &[]);
            if args[0] == "echo.say" {
                assert_eq!(v["code"], json!("store_damaged"), "{kind}: {v}");
                let e = v["error"].as_str().unwrap();
                assert!(e.contains(&record.display().to_string()), "{kind}: {v}");
                let hint = v["hint"].as_str().unwrap();
                assert!(hint.contains("hcp install --force"), "{kind}: {v}");
                // Nothing ran: no `ls` listing, no echo.
                assert!(v.get("result").is_none(), "{kind}: {v}");
            } else {
                assert_eq!(code(&o), 0, "{kind}: the other pack: {v}");
            }
            answers.push(format!("owner {}: {}", args[0], outcome(&o, &v)));
        }
        let o = w.run(&["list"]);
        let listed = w.filter(&String::from_utf8_lossy(&o.stdout));
        assert!(listed.contains("echo"), "{kind}: {listed}");
        let lines = doctor_damaged(&w);
        assert_eq!(lines.len(), 1, "{kind}: {lines:?}");
        let shown = format!("{}\n--- doctor\n{}", answers.join("\n"), lines.join("\n"));
        insta::assert_snapshot!(format!("record_{kind}"), shown);
        // The repair doctor names.
        let src = exec_common::source("echo").display().to_string();
        let o = w.run(&["install", "--force", "--activate", &src]);
        assert_eq!(code(&o), 0, "{kind}: {}", w.render(&o));
        let (o, v) = exec_json_env(&w, &["echo.say", "hi"], &[]);
        assert_eq!(code(&o), 0, "{kind}: after the repair: {v}");
    }
}

/// The owner's binding copied to `agent-1`'s name with its `principal` edited: `agent-1`'s
/// `mail.list` is refused `store_damaged` (the credential never reaches it), the owner's
/// goes on, doctor lists the file; removing it leaves `agent-1` without a binding.
#[test]
fn a_binding_copied_to_another_principal_refuses_that_binding_alone() {
    if !view_or_skip() {
        return;
    }
    let w = world(&["mail"]);
    connect(&w, "owner", "owner-token");
    let agent = session(&w, "agent-1", &[]);
    grant(&w, "agent-1", "mail", &["verb.exec.read"]);
    let (o, v) = exec_json_env(&w, &["mail.list"], &[("HCP_SESSION", &agent)]);
    assert_eq!(v["code"], json!("binding_required"), "{}", w.render(&o));
    let owner = w.hcp_home.join("state/bindings/owner/mail.json");
    let stolen = w.hcp_home.join("state/bindings/agent-1/mail.json");
    std::fs::create_dir_all(stolen.parent().unwrap()).unwrap();
    let text = std::fs::read_to_string(&owner).unwrap();
    std::fs::write(&stolen, text.replace("\"owner\"", "\"agent-1\"")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&stolen, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut answers = Vec::new();
    for (who, env) in [("owner", None), ("agent-1", Some(agent.as_str()))] {
        let env: Vec<(&str, &str)> = env.map(|t| ("HCP_SESSION", t)).into_iter().collect();
        let o = w
            .hcp()
            .args(["exec", "--json", "mail.list"])
            .envs(env.clone())
            .output();
        let o = o.unwrap();
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(
            who == "owner" || !out.contains("owner-token"),
            "the credential reached {who}: {out}"
        );
        let (o, v) = exec_json_env(&w, &["mail.list"], &env);
        if who == "agent-1" {
            assert_eq!(v["code"], json!("store_damaged"), "{v}");
            let e = v["error"].as_str().unwrap();
            assert!(e.contains(&stolen.display().to_string()), "{v}");
            assert!(
                v["hint"].as_str().unwrap().contains("hcp disconnect mail"),
                "{v}"
            );
        } else {
            assert_eq!(code(&o), 0, "{v}");
        }
        answers.push(format!("{who} mail.list: {}", outcome(&o, &v)));
    }
    let lines = doctor_damaged(&w);
    assert_eq!(lines.len(), 1, "{lines:?}");
    let shown = format!("{}\n--- doctor\n{}", answers.join("\n"), lines.join("\n"));
    insta::assert_snapshot!("binding_copied_to_another_principal", shown);
    // The repair the refusal names: `agent-1`'s own disconnect removes the file.
    grant(&w, "agent-1", "mail", &["pack.connect"]);
    let o = w
        .hcp()
        .args(["disconnect", "mail"])
        .env("HCP_SESSION", &agent)
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    assert!(!stolen.exists());
    let (_, v) = exec_json_env(&w, &["mail.list"], &[("HCP_SESSION", &agent)]);
    assert_eq!(v["code"], json!("binding_required"), "{v}");
}

/// A store of an earlier version: its record and binding without `mac`, its trail without
/// a word of them. `hcp list` reads them as they are; the first call stamps both under the
/// store lock with one `migrate` record; a `mac` removed after that is damage, even with
/// `state/authority-files.json` removed too; no second migration.
#[test]
fn an_earlier_store_gains_record_and_binding_macs_at_its_first_call_once() {
    let w = world(&["mail"]);
    connect(&w, "owner", "owner-token");
    let record = w.hcp_home.join("packs/mail/.hcp/record.json");
    let binding = w.hcp_home.join("state/bindings/owner/mail.json");
    for p in [&record, &binding] {
        let mut v = read_json(p);
        v.as_object_mut().unwrap().remove("mac").unwrap();
        write_json(p, &v);
    }
    let _ = std::fs::remove_file(w.hcp_home.join("state/authority-files.json"));
    let log = w.hcp_home.join("audit/audit.jsonl");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("\"record_macs\":1,"),
        "the init record says so"
    );
    // As an earlier version wrote it (a test technique: the chain no longer verifies,
    // which nothing here reads). Same length, so the trail still meets its anchor.
    std::fs::write(
        &log,
        text.replace("\"record_macs\":1,", "\"xecord_macs\":1,"),
    )
    .unwrap();
    let o = w.run(&["list"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    assert!(
        !String::from_utf8_lossy(&o.stdout).contains("damaged"),
        "read as they are before the first call: {}",
        w.render(&o)
    );
    let (o, v) = exec_json_env(&w, &["mail.list"], &[]);
    assert_eq!(code(&o), 0, "{v}");
    for p in [&record, &binding] {
        assert_eq!(
            read_json(p)["mac"].as_str().map(str::len),
            Some(64),
            "{p:?}"
        );
    }
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&binding).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the binding stays the owner's only");
    let migrates: Vec<Value> = tail(&w, "20")
        .into_iter()
        .filter(|r| r["act"] == "migrate")
        .collect();
    assert_eq!(migrates.len(), 1, "{migrates:?}");
    assert_eq!(
        migrates[0]["changed"],
        json!({"record_macs": 1, "record_files": {"records": 1, "bindings": 1}})
    );
    let (o, _) = exec_json_env(&w, &["mail.list"], &[]);
    assert_eq!(code(&o), 0);
    let mut v = read_json(&record);
    v.as_object_mut().unwrap().remove("mac").unwrap();
    write_json(&record, &v);
    std::fs::remove_file(w.hcp_home.join("state/authority-files.json")).unwrap();
    let (o, v) = exec_json_env(&w, &["mail.list"], &[]);
    assert_eq!((code(&o), &v["code"]), (74, &json!("store_damaged")), "{v}");
    assert!(
        v["error"].as_str().unwrap().contains("carries no `mac`"),
        "{v}"
    );
    let migrates = tail(&w, "20")
        .into_iter()
        .filter(|r| r["act"] == "migrate")
        .count();
    assert_eq!(migrates, 1, "no second migration");
}

/// The runtime policy removed with `state/authority-files.json`: the next call records it
/// once (digest `absent`, `lost`), every session's call is refused `store_damaged` naming
/// it while the owner's go on, doctor lists it; put back, it governs again with no new
/// record; removed alone (the stamp intact), its removal is recorded and it is dropped.
#[test]
fn a_policy_removed_with_its_stamp_is_recorded_once_and_refuses_sessions() {
    if !view_or_skip() {
        return;
    }
    let w = world(&["echo"]);
    let agent = session(&w, "agent-1", &[]);
    grant(&w, "agent-1", "echo", &["verb.exec.read"]);
    let policy = w.hcp_home.join("policy.yaml");
    let text = "schema_version: histos.policy/0.1\ntools: {}\n";
    std::fs::write(&policy, text).unwrap();
    let say = |env: &[(&str, &str)]| exec_json_env(&w, &["echo.say", "hi"], env);
    let (_, v) = say(&[("HCP_SESSION", &agent)]);
    assert_eq!(v["code"], json!("unknown_tool"), "the policy governs: {v}");
    let changes = |w: &World| -> Vec<Value> {
        tail(w, "200")
            .into_iter()
            .filter(|r| r["act"] == "policy changed")
            .map(|r| r["changed"].clone())
            .collect()
    };
    assert_eq!(changes(&w).len(), 1);
    std::fs::remove_file(&policy).unwrap();
    std::fs::remove_file(w.hcp_home.join("state/authority-files.json")).unwrap();
    let lines = doctor_damaged(&w);
    assert_eq!(lines.len(), 1, "doctor sees it before any call: {lines:?}");
    let mut answers = Vec::new();
    for (who, env) in [
        ("agent-1", vec![("HCP_SESSION", agent.as_str())]),
        ("owner", vec![]),
        ("agent-1", vec![("HCP_SESSION", agent.as_str())]),
    ] {
        let (o, v) = say(&env);
        if who == "owner" {
            assert_eq!(code(&o), 0, "{v}");
        } else {
            assert_eq!(v["code"], json!("store_damaged"), "{v}");
            let e = v["error"].as_str().unwrap();
            assert!(e.contains(&policy.display().to_string()), "{v}");
        }
        answers.push(format!("{who} echo.say: {}", outcome(&o, &v)));
    }
    let digest = {
        use sha2::Digest;
        format!(
            "sha256:{}",
            hex::encode(sha2::Sha256::digest(text.as_bytes()))
        )
    };
    let c = changes(&w);
    assert_eq!(c.len(), 2, "recorded once: {c:?}");
    assert_eq!(
        c[1],
        json!({"removed": true, "digest": "absent", "lost": true, "stamp_refused": "missing",
               "was": {"file": "policy.yaml", "digest": digest}})
    );
    // The stamp removed again (and again): the trail's last record says the policy was
    // lost, so it still refuses every session's call, with no new record.
    for _ in 0..2 {
        std::fs::remove_file(w.hcp_home.join("state/authority-files.json")).unwrap();
        let (_, v) = say(&[("HCP_SESSION", &agent)]);
        assert_eq!(v["code"], json!("store_damaged"), "{v}");
        let (_, v) = say(&[("HCP_SESSION", &agent)]);
        assert_eq!(v["code"], json!("store_damaged"), "{v}");
    }
    assert_eq!(changes(&w).len(), 2, "nothing recorded again");
    // The stamp removed again (and again): the trail's last record says the policy was
    // lost, so it still refuses every session's call, with no new record.
    for _ in 0..2 {
        std::fs::remove_file(w.hcp_home.join("state/authority-files.json")).unwrap();
        let (_, v) = say(&[("HCP_SESSION", &agent)]);
        assert_eq!(v["code"], json!("store_damaged"), "{v}");
        let (_, v) = say(&[("HCP_SESSION", &agent)]);
        assert_eq!(v["code"], json!("store_damaged"), "{v}");
    }
    assert_eq!(changes(&w).len(), 2, "nothing recorded again");
    let lines = doctor_damaged(&w);
    assert_eq!(lines.len(), 1, "{lines:?}");
    let shown = format!("{}\n--- doctor\n{}", answers.join("\n"), lines.join("\n"))
        .replace(&digest, "{digest}");
    insta::assert_snapshot!("policy_removed_with_its_stamp", shown);
    // Put back: it governs again, and the same content is no change.
    std::fs::write(&policy, text).unwrap();
    let (_, v) = say(&[("HCP_SESSION", &agent)]);
    assert_eq!(v["code"], json!("unknown_tool"), "{v}");
    assert_eq!(changes(&w).len(), 2);
    let o = w.run(&["doctor"]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(!out.contains("damaged runtime policy"), "{out}");
    // Removed alone: recorded, and dropped.
    std::fs::remove_file(&policy).unwrap();
    let (o, v) = say(&[("HCP_SESSION", &agent)]);
    assert_eq!(code(&o), 0, "{v}");
    let c = changes(&w);
    assert_eq!(
        c.last().unwrap(),
        &json!({"removed": true, "digest": "absent", "was": {"file": "policy.yaml", "digest": digest}})
    );
}

/// An older copy of `state/authority-files.json` (its MAC holds) put back with the
/// runtime policy removed: the state ledger does not vouch for it, so it is no record,
/// and the policy the trail last recorded is lost, not dropped: every session's call is
/// refused.
#[test]
fn an_older_copy_of_the_watched_files_record_does_not_drop_the_policy() {
    if !view_or_skip() {
        return;
    }
    let w = world(&["echo"]);
    let agent = session(&w, "agent-1", &[]);
    grant(&w, "agent-1", "echo", &["verb.exec.read"]);
    let (o, v) = exec_json_env(&w, &["echo.say", "hi"], &[("HCP_SESSION", &agent)]);
    assert_eq!(code(&o), 0, "{v}");
    let kept = w.hcp_home.join("state/authority-files.json");
    let old = std::fs::read(&kept).unwrap();
    let policy = w.hcp_home.join("policy.yaml");
    std::fs::write(&policy, "schema_version: histos.policy/0.1\ntools: {}\n").unwrap();
    let (_, v) = exec_json_env(&w, &["echo.say", "hi"], &[("HCP_SESSION", &agent)]);
    assert_eq!(v["code"], json!("unknown_tool"), "the policy governs: {v}");
    std::fs::remove_file(&policy).unwrap();
    std::fs::write(&kept, old).unwrap();
    for _ in 0..2 {
        let (_, v) = exec_json_env(&w, &["echo.say", "hi"], &[("HCP_SESSION", &agent)]);
        assert_eq!(v["code"], json!("store_damaged"), "{v}");
    }
    let (o, v) = exec_json_env(&w, &["echo.say", "hi"], &[]);
    assert_eq!(code(&o), 0, "the owner's calls go on: {v}");
}
