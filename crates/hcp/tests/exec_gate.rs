//! The gate of `hcp exec` through the built binary (RUNTIME §4, §5 steps 2–9): sessions
//! (`bad_session`, never a fallback to the owner), grants (`missing_grant`, the rug-pull
//! suspension on a reinstall that changes a pack), land (`project_required`,
//! `not_project_member`), the confirm gate before binding mint and the adapter, and the
//! pinned bin (`bin_changed`, `bin_missing`). Every decision is audited.
//!
//! Expired sessions: `hcp session start --ttl` cannot make one without sleeping, so the
//! tests backdate `expires_at` in the session's file (`state/sessions/<sha256>.json`,
//! the sha256 of the token) to its `created_at`.
//!
//! Bindings: `hcp connect` is built by another change; where a test needs a credential it
//! stores one with the store API (`hcp_store::binding::save`), which is what connect does.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod exec_common;

use exec_common::*;
use hcp_store::Home;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn session_file(w: &common::World, token: &str) -> std::path::PathBuf {
    w.hcp_home
        .join("state/sessions")
        .join(format!("{}.json", hcp_store::session::token_digest(token)))
}

#[test]
fn bad_sessions_are_refused_and_never_fall_back_to_the_owner() {
    let w = world(&["transit"]);
    // The owner may run it: a fallback would succeed.
    let (out, _) = exec_json(&w, &["transit.status"]);
    assert_eq!(status(&out), 0);
    let ended = session(&w, "agent-1", &[]);
    grant(&w, "agent-1", "transit", &["verb.exec.read"]);
    let out = w.run(&["session", "end", &ended]);
    assert!(out.status.success(), "{}", w.render(&out));
    let expired = session(&w, "agent-1", &[]);
    let path = session_file(&w, &expired);
    let mut s: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    s["expires_at"] = s["created_at"].clone();
    // hcp would refuse a file edited by hand: the test writes it with its MAC, as hcp does.
    let home = Home::open(&w.hcp_home).unwrap();
    hcp_store::stamp::write(
        &home,
        &hcp_store::StoreLock::acquire(&home).unwrap(),
        &path,
        &s,
    )
    .unwrap();
    let unknown = format!("hcp_{}", "0".repeat(64));
    let cases = [
        ("garbage", "not-a-token; rm -rf /"),
        ("empty", ""),
        ("unknown", unknown.as_str()),
        ("ended", ended.as_str()),
        ("expired", expired.as_str()),
    ];
    for (name, tok) in cases {
        let n = audit_records(&w).len();
        let (out, v) = exec_json_env(&w, &["transit.status"], &[("HCP_SESSION", tok)]);
        assert_refused(&w, &out, &v, "bad_session", 77);
        assert!(!v["error"].as_str().unwrap().contains(tok) || tok.is_empty());
        let recs = audit_records(&w);
        assert_eq!(recs.len(), n + 1, "{name}: audited");
        let r = recs.last().unwrap();
        assert_eq!(
            (&r["principal"], &r["code"]),
            (&json!("unknown"), &json!("bad_session")),
            "{name}: {r}"
        );
    }
    // The JSON face too.
    let (out, v) = envelope_env(
        &w,
        br#"{"verb_key": "transit.status", "args": {}}"#,
        &[("HCP_SESSION", &expired)],
    );
    assert_refused(&w, &out, &v, "bad_session", 77);
    let out = exec_env(&w, &["transit.status"], &[("HCP_SESSION", "garbage")]);
    snap!("bad_session_text", w.render(&out));
    assert_audit_clean(&w);
}

#[test]
fn missing_grant_then_allowed_after_grant() {
    let w = world(&["transit", "ledger"]);
    let tok = session(&w, "agent-1", &[]);
    let env = [("HCP_SESSION", tok.as_str())];
    let (out, v) = exec_json_env(&w, &["transit.find", "Central"], &env);
    assert_refused(&w, &out, &v, "missing_grant", 77);
    assert_eq!(
        v["hint"],
        json!("the owner runs `hcp grant agent-1 transit verb.exec.read`")
    );
    let out = exec_env(&w, &["transit.find", "Central"], &env);
    snap!("missing_grant_text", w.render(&out));
    grant(&w, "agent-1", "transit", &["verb.exec.read"]);
    let (out, v) = exec_json_env(&w, &["transit.find", "Central"], &env);
    assert_eq!((status(&out), &v["ok"]), (0, &json!(true)), "{v}");
    let rec = last_audit(&w);
    assert_eq!(
        (&rec["principal"], &rec["decision"]),
        (&json!("agent-1"), &json!("allow"))
    );
    // A grant on one pack is not a grant on another; read is not write.
    let (out, v) = exec_json_env(&w, &["ledger.balance"], &env);
    assert_refused(&w, &out, &v, "missing_grant", 77);
    grant(&w, "agent-1", "ledger", &["verb.exec.read"]);
    let (out, v) = exec_json_env(&w, &["ledger.balance"], &env);
    assert_eq!((status(&out), &v["ok"]), (0, &json!(true)), "{v}");
    let (out, v) = exec_json_env(&w, &["ledger.post", "cash", "1", "x", "--confirm"], &env);
    assert_refused(&w, &out, &v, "missing_grant", 77);
    assert!(v["error"].as_str().unwrap().contains("verb.exec.write"));
    assert!(!w.work.join("ledger.jsonl").exists());
    // `*` grants every pack; revoke takes it back.
    let out = w.run(&["revoke", "agent-1", "transit", "verb.exec.read"]);
    assert!(out.status.success(), "{}", w.render(&out));
    let (out, v) = exec_json_env(&w, &["transit.find", "Central"], &env);
    assert_refused(&w, &out, &v, "missing_grant", 77);
    grant(&w, "agent-1", "*", &["verb.exec.read"]);
    let (out, _) = exec_json_env(&w, &["transit.find", "Central"], &env);
    assert_eq!(status(&out), 0);
    // A session cannot grant itself.
    let out = w
        .hcp()
        .env("HCP_SESSION", &tok)
        .args(["grant", "agent-1", "ledger", "verb.exec.write"])
        .output()
        .unwrap();
    assert_eq!(status(&out), 77, "{}", w.render(&out));
    assert_audit_clean(&w);
}

#[test]
fn reinstall_that_changes_a_pack_suspends_non_owner_grants() {
    let w = world(&[]);
    let src = w.copy_pack("transit");
    install(&w, &src);
    let tok = session(&w, "agent-1", &[]);
    let env = [("HCP_SESSION", tok.as_str())];
    grant(&w, "agent-1", "transit", &["verb.exec.read"]);
    let (out, _) = exec_json_env(&w, &["transit.status"], &env);
    assert_eq!(status(&out), 0);
    // Same content: grants hold.
    let out = w.run(&[
        "install",
        "--force",
        "--activate",
        &src.display().to_string(),
    ]);
    assert!(out.status.success(), "{}", w.render(&out));
    let (out, _) = exec_json_env(&w, &["transit.status"], &env);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    // Changed content: the agent's grant is suspended, the owner's calls are not.
    let surface = src.join("surface.json");
    let text = std::fs::read_to_string(&surface)
        .unwrap()
        .replace("Live observation.", "Live observation, now different.");
    std::fs::write(&surface, text).unwrap();
    let out = w.run(&[
        "install",
        "--force",
        "--activate",
        &src.display().to_string(),
    ]);
    assert!(out.status.success(), "{}", w.render(&out));
    let (out, v) = exec_json_env(&w, &["transit.status"], &env);
    assert_refused(&w, &out, &v, "missing_grant", 77);
    assert!(v["error"].as_str().unwrap().contains("suspended"), "{v}");
    let (out, _) = exec_json(&w, &["transit.status"]);
    assert_eq!(status(&out), 0, "the owner is not suspended");
    grant(&w, "agent-1", "transit", &["verb.exec.read"]);
    let (out, _) = exec_json_env(&w, &["transit.status"], &env);
    assert_eq!(status(&out), 0, "granted again: {}", w.render(&out));
}

#[test]
fn brain_land_needs_a_project_and_membership() {
    let w = world(&["mail"]);
    let args = ["notes.create", "--title", "t", "--body", "b"];
    // The owner, no project.
    let (out, v) = exec_json(&w, &args);
    assert_refused(&w, &out, &v, "project_required", 77);
    assert_eq!(v["land"], json!("brain"));
    let out = exec(&w, &args);
    snap!("project_required_text", w.render(&out));
    // An agent with the grant but a session without a project.
    let tok = session(&w, "agent-1", &[]);
    grant(&w, "agent-1", "mail", &["verb.exec.write"]);
    let (out, v) = exec_json_env(&w, &args, &[("HCP_SESSION", &tok)]);
    assert_refused(&w, &out, &v, "project_required", 77);
    // A session of two projects needs HCP_PROJECT to pick one.
    let two = session(&w, "agent-2", &["--project", "p1", "--project", "p2"]);
    grant(&w, "agent-2", "mail", &["verb.exec.write"]);
    let (out, v) = exec_json_env(&w, &args, &[("HCP_SESSION", &two)]);
    assert_refused(&w, &out, &v, "project_required", 77);
    assert!(v["hint"].as_str().unwrap().contains("p1, p2"), "{v}");
    // HCP_PROJECT naming a project the session is not a member of.
    let (out, v) = exec_json_env(&w, &args, &[("HCP_SESSION", &two), ("HCP_PROJECT", "p3")]);
    assert_refused(&w, &out, &v, "not_project_member", 77);
    let out = exec_env(&w, &args, &[("HCP_SESSION", &two), ("HCP_PROJECT", "p3")]);
    snap!("not_project_member_text", w.render(&out));
    // A member: the land passes, the next step (binding mint) answers.
    let (out, v) = exec_json_env(&w, &args, &[("HCP_SESSION", &two), ("HCP_PROJECT", "p2")]);
    assert_refused(&w, &out, &v, "binding_required", 77);
    let rec = last_audit(&w);
    assert_eq!(rec["project"], json!("p2"), "{rec}");
    // With a credential (what `hcp connect` stores), the note lands in the project.
    store_binding(&w, "agent-2", "mail", "mailtok-test");
    let (out, v) = exec_json_env(&w, &args, &[("HCP_SESSION", &two), ("HCP_PROJECT", "p2")]);
    assert_eq!((status(&out), &v["ok"]), (0, &json!(true)), "{v}");
    // …in the project's tenant home (RUNTIME §5.2), not the owner's.
    let notes = w
        .hcp_home
        .join("homes/mail/project/p2/.hcp-example-mail/projects/p2/notes");
    assert!(!w.home.join(".hcp-example-mail/projects/p2").exists());
    assert_eq!(std::fs::read_dir(&notes).unwrap().count(), 1, "{v}");
}

#[test]
fn confirm_is_checked_before_binding_mint_and_the_adapter() {
    let w = world(&["mail", "echo"]);
    let args = ["mail.send", "--to", "bob", "--subject", "s", "--body", "b"];
    // No binding, no confirm: the confirm gate answers first.
    let (out, v) = exec_json(&w, &args);
    assert_refused(&w, &out, &v, "confirm_required", 77);
    assert_eq!(v["error"], json!("confirm required"));
    let mut confirmed = args.to_vec();
    confirmed.push("--confirm");
    let (out, v) = exec_json(&w, &confirmed);
    assert_refused(&w, &out, &v, "binding_required", 77);
    assert_eq!(
        v["hint"],
        json!("run `hcp connect mail` to establish the binding")
    );
    // An echo write without confirm leaves no file.
    let (out, v) = exec_json(&w, &["echo.write", "note.txt", "hello"]);
    assert_refused(&w, &out, &v, "confirm_required", 77);
    assert!(!w.work.join("note.txt").exists());
    let (out, _) = exec_json(&w, &["echo.write", "note.txt", "hello", "--confirm"]);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    assert_eq!(
        std::fs::read_to_string(w.work.join("note.txt")).unwrap(),
        "hello"
    );
}

/// A copy of the probe bin in the world, pinned by an install that finds it first on
/// `PATH`, so a test may replace or delete it.
fn world_with_own_probe() -> (common::World, std::path::PathBuf) {
    let bins = common::example_bins();
    let w = common::World::new();
    let own = w.root().join("bin");
    std::fs::create_dir_all(&own).unwrap();
    let bin = own.join("hcp-example-probe");
    std::fs::copy(bins.join("hcp-example-probe"), &bin).unwrap();
    let path = format!("{}:{}", own.display(), w.path_var());
    let out = w
        .hcp()
        .env("PATH", &path)
        .args([
            "install",
            "--activate",
            &fixture("probe").display().to_string(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", w.render(&out));
    (w, bin)
}

#[test]
fn a_replaced_bin_is_bin_changed() {
    let (w, bin) = world_with_own_probe();
    // Twice: the first call hashes, the second trusts the remembered stat fingerprint.
    for _ in 0..2 {
        let (out, v) = exec_json(&w, &["probe.args", "ok"]);
        assert_eq!((status(&out), &v["data"]), (0, &json!(["--", "ok"])));
    }
    // Replaced by another program (a new inode, as a package upgrade does).
    let tmp = bin.with_extension("new");
    std::fs::copy(common::bin_dir().join("hcp-example-echo"), &tmp).unwrap();
    std::fs::rename(&tmp, &bin).unwrap();
    let (out, v) = exec_json(&w, &["probe.args", "ok"]);
    assert_refused(&w, &out, &v, "bin_changed", 126);
    let out = exec(&w, &["probe.args", "ok"]);
    snap!("bin_changed_text", w.render(&out));
    assert_eq!(last_audit(&w)["code"], json!("bin_changed"));
    // Written in place, same length, one byte changed.
    std::fs::copy(common::bin_dir().join("hcp-example-probe"), &bin).unwrap();
    let (out, _) = exec_json(&w, &["probe.args", "ok"]);
    assert_eq!(status(&out), 0, "the original is back: {}", w.render(&out));
    let mut bytes = std::fs::read(&bin).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&bin, &bytes).unwrap();
    let (out, v) = exec_json(&w, &["probe.args", "ok"]);
    assert_refused(&w, &out, &v, "bin_changed", 126);
}

#[test]
fn a_deleted_bin_is_bin_missing() {
    let (w, bin) = world_with_own_probe();
    let (out, _) = exec_json(&w, &["probe.args", "ok"]);
    assert_eq!(status(&out), 0);
    std::fs::remove_file(&bin).unwrap();
    let (out, v) = exec_json(&w, &["probe.args", "ok"]);
    assert_refused(&w, &out, &v, "bin_missing", 127);
    assert_eq!(last_audit(&w)["code"], json!("bin_missing"));
    let out = exec(&w, &["probe.args", "ok"]);
    snap!("bin_missing_text", w.render(&out));
    assert_audit_clean(&w);
}

#[test]
fn every_decision_is_audited_with_a_digest_not_the_values() {
    let w = world(&["transit"]);
    let secret = "very-secret-value-1234";
    let (out, _) = exec_json(&w, &["transit.find", secret]);
    assert_eq!(status(&out), 0, "a find with no match still answers");
    let (out, _) = exec_json(&w, &["transit.find", secret, "--tenant", "x"]);
    assert_eq!(status(&out), 65);
    // The run: its intent, then its outcome; the refusal: one record.
    let recs = audit_records(&w);
    assert_eq!(recs.len(), 3);
    assert_eq!(
        (&recs[0]["kind"], &recs[0]["decision"], &recs[1]["kind"]),
        (&json!("intent"), &json!("allow"), &json!("outcome"))
    );
    assert_eq!(
        (&recs[1]["intent"], &recs[1]["exit_code"]),
        (&recs[0]["id"], &json!(0))
    );
    let recs = audit_calls(&w);
    assert_eq!(
        (&recs[1]["decision"], &recs[1]["code"]),
        (&json!("deny"), &json!("tenant_in_args"))
    );
    let text = std::fs::read_to_string(w.hcp_home.join("audit/audit.jsonl")).unwrap();
    assert!(!text.contains(secret), "raw values never reach the audit");
    assert_audit_clean(&w);
}

#[test]
fn uninstall_takes_the_packs_grants_with_it() {
    let w = world(&[]);
    let src = w.copy_pack("transit");
    install(&w, &src);
    let tok = session(&w, "agent-1", &[]);
    let env = [("HCP_SESSION", tok.as_str())];
    grant(&w, "agent-1", "transit", &["verb.exec.read"]);
    let (out, _) = exec_json_env(&w, &["transit.status"], &env);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    let out = w.run(&["uninstall", "transit"]);
    assert!(out.status.success(), "{}", w.render(&out));
    // Whatever is installed next under the same id starts without the old grant.
    install(&w, &src);
    let (out, v) = exec_json_env(&w, &["transit.status"], &env);
    assert_refused(&w, &out, &v, "missing_grant", 77);
    let listed = w.run(&["grant", "--list", "--json"]);
    assert!(
        !String::from_utf8_lossy(&listed.stdout).contains("\"transit\""),
        "{}",
        w.render(&listed)
    );
}
