//! Issue 12, "the same child can read every credential file in the store and everything
//! in `~`": through the built `hcp`, as root and as `nobody`, a `personal` or `brain`
//! child reads none of the store and nothing of the owner's home — neither is in its view
//! (RUNTIME §5.1) — and writes only its own `/tmp`, its tenant home and what `config.json`
//! gives its pack. Every attempt fails inside the child; nothing outside changes.

#![allow(clippy::unwrap_used)]

mod common;
mod confine_common;

use confine_common::{Cw, SECRET, assert_denied, assert_ok, line, users};
use serde_json::json;

/// A world with secrets in the store too: a credential under `state/bindings`, the
/// sessions, the grants; an agent allowed the hostile pack.
fn world(user: confine_common::As) -> (Cw, String) {
    let cw = Cw::new(user, &["hostile"]);
    let tok = cw.session("agent-1", &["--project", "p1"]);
    cw.grant("agent-1", "hostile", &["verb.exec.read"]);
    let bindings = cw.w.hcp_home.join("state/bindings/agent-9");
    std::fs::create_dir_all(&bindings).unwrap();
    std::fs::write(
        bindings.join("mail.json"),
        format!("{{\"token\": \"{SECRET}\"}}"),
    )
    .unwrap();
    cw.own(&cw.w.hcp_home);
    (cw, tok)
}

#[test]
fn a_personal_or_brain_child_reads_neither_the_store_nor_the_secrets() {
    for user in users() {
        let (cw, tok) = world(user);
        let store = cw.w.hcp_home.display().to_string();
        let home = cw.w.home.display().to_string();
        let session_file = std::fs::read_dir(cw.w.hcp_home.join("state/sessions"))
            .unwrap()
            .flatten()
            .next()
            .unwrap()
            .path()
            .display()
            .to_string();
        for verb in ["hostile.personal.try", "hostile.brain.try"] {
            for path in [
                format!("{store}/state/bindings/agent-9/mail.json"),
                session_file.clone(),
                format!("{store}/state/grants/agent-1.json"),
                format!("{store}/audit/audit.jsonl"),
                format!("{home}/.ssh/id_ed25519"),
                format!("{home}/.aws/credentials"),
            ] {
                let (_, v) = cw.exec(Some(&tok), &[verb, "read", &path]);
                assert_denied(&v, &format!("{user:?} {verb} read {path}"));
                assert_eq!(v["sandbox"]["filesystem"], "enforced", "{v}");
            }
            for dir in [format!("{store}/state/sessions"), format!("{store}/state")] {
                let (_, v) = cw.exec(Some(&tok), &[verb, "list", &dir]);
                assert!(
                    !line(&v).contains(".json"),
                    "{user:?} {verb} list {dir}: {v}"
                );
            }
            // /etc/shadow: hidden (root), or kept out by its permission bits.
            let (_, v) = cw.exec(Some(&tok), &[verb, "read", "/etc/shadow"]);
            assert!(!line(&v).contains("root:"), "{user:?} {verb}: {v}");
            // The owner's keyrings and ptrace are out of reach (seccomp).
            for what in ["keyctl", "ptrace"] {
                let (_, v) = cw.exec(Some(&tok), &[verb, what]);
                assert_denied(&v, &format!("{user:?} {verb} {what}"));
            }
            // Nothing of the owner's home is in the view, what no list names included.
            let (_, v) = cw.exec(Some(&tok), &[verb, "read", &format!("{home}/.bashrc")]);
            assert_denied(&v, "read ~/.bashrc");
        }
        // The owner's own calls: the store is out of their children's reach too.
        let (_, v) = cw.exec(
            None,
            &[
                "hostile.personal.try",
                "read",
                &format!("{store}/state/grants/agent-1.json"),
            ],
        );
        assert_denied(&v, "the owner's child reads the store");
    }
}

#[test]
fn a_personal_child_writes_only_its_tmpdir_and_its_grants() {
    for user in users() {
        let (cw, tok) = world(user);
        let granted = cw.w.root().join("granted");
        std::fs::create_dir_all(&granted).unwrap();
        cw.own(&granted);
        cw.config(&json!({"packs": {"hostile": {"write": [granted]}}}));
        let before_grants = cw.grants();
        let store = cw.w.hcp_home.display().to_string();
        let home = cw.w.home.display().to_string();
        for path in [
            format!("{home}/.bashrc"),
            format!("{home}/.ssh/authorized_keys"),
            format!("{home}/new-file"),
            format!("{store}/state/grants/agent-1.json"),
            format!("{store}/evil"),
            cw.w.work.join("x").display().to_string(),
        ] {
            for verb in ["hostile.personal.try", "hostile.brain.try"] {
                let (_, v) = cw.exec(Some(&tok), &[verb, "write", &path]);
                assert_denied(&v, &format!("{user:?} {verb} write {path}"));
            }
        }
        assert_eq!(
            std::fs::read_to_string(cw.w.home.join(".bashrc")).unwrap(),
            "# bashrc\n"
        );
        assert!(!cw.w.home.join(".ssh/authorized_keys").exists());
        assert!(!cw.w.home.join("new-file").exists());
        assert!(!cw.w.hcp_home.join("evil").exists());
        assert!(!cw.w.work.join("x").exists());
        assert_eq!(cw.grants(), before_grants);
        // What the operator granted, and the private TMPDIR, are writable.
        let (_, v) = cw.exec(
            Some(&tok),
            &[
                "hostile.personal.try",
                "write",
                &granted.join("f").display().to_string(),
            ],
        );
        assert_ok(&v, "a write grant");
        assert_eq!(
            std::fs::read_to_string(granted.join("f")).unwrap(),
            "evil\n"
        );
    }
}

#[test]
fn protected_paths_are_hidden_and_a_read_grant_reveals_one() {
    for user in users() {
        let (cw, tok) = world(user);
        let vault = cw.w.home.join(".password-store");
        std::fs::create_dir_all(&vault).unwrap();
        std::fs::write(vault.join("bank.gpg"), SECRET).unwrap();
        cw.own(&vault);
        let bank = vault.join("bank.gpg").display().to_string();
        let aws = cw.w.home.join(".aws");
        // `sandbox.protect` is read and ignored: the vault is not in the view anyway. The
        // read path names ~/.aws in full.
        cw.config(&json!({
            "sandbox": {"protect": ["~/.password-store"]},
            "packs": {"hostile": {"read": [aws]}}
        }));
        let (_, v) = cw.exec(Some(&tok), &["hostile.personal.try", "read", &bank]);
        assert_denied(&v, "sandbox.protect");
        let creds = aws.join("credentials").display().to_string();
        let (_, v) = cw.exec(Some(&tok), &["hostile.personal.try", "read", &creds]);
        assert_ok(&v, "a read grant of ~/.aws");
        let key = cw.w.home.join(".ssh/id_ed25519").display().to_string();
        let (_, v) = cw.exec(Some(&tok), &["hostile.personal.try", "read", &key]);
        assert_denied(&v, "~/.ssh beside a read grant");
    }
}

#[test]
fn a_bad_grant_in_config_json_refuses_every_call_with_its_place() {
    let (cw, tok) = world(confine_common::As::Me);
    std::fs::write(
        cw.w.hcp_home.join("config.json"),
        "{\"packs\": {\"hostile\": {\n  \"write\": [\"~/.bashrc\"]}}}",
    )
    .unwrap();
    let (out, v) = cw.exec(Some(&tok), &["hostile.personal.try", "marker"]);
    assert_eq!(out.status.code(), Some(78), "{}", cw.w.render(&out));
    assert_eq!(v["code"], "bad_config");
    let e = v["error"].as_str().unwrap();
    assert!(
        e.contains("line 2, column 13") && e.contains("`HOME`"),
        "{e}"
    );
}
