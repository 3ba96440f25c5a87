//! Issue 23, "no tenant on disk" (RUNTIME §5.2): the gold `mail` pack, with no change to its
//! CLI, keeps each principal's mail and each project's notes apart, because each call's
//! `HOME` is its tenant's home: a message delivered to one principal is not in another's
//! inbox, a message sent to another principal stays in the sender's home, and a project's
//! notes are not another project's. Delivery between principals needs a root shared on
//! purpose (`packs.mail.write`), which `hcp home --seed` points each home at — as the README
//! says.

#![allow(clippy::unwrap_used)]

mod common;

use common::World;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::Output;

struct Mail {
    w: World,
    alice: String,
    bob: String,
}

fn run_as(w: &World, token: Option<&str>, args: &[&str]) -> Output {
    let mut c = w.hcp();
    if let Some(t) = token {
        c.env("HCP_SESSION", t);
    }
    c.args(args).output().unwrap()
}

fn exec(w: &World, token: &str, project: Option<&str>, args: &[&str]) -> Value {
    let mut c = w.hcp();
    c.env("HCP_SESSION", token);
    if let Some(p) = project {
        c.env("HCP_PROJECT", p);
    }
    let out = c.arg("exec").arg("--json").args(args).output().unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", w.render(&out)))
}

fn world() -> Mail {
    common::example_bins();
    let w = World::new();
    let out = w.run(&[
        "install",
        "--activate",
        &common::gold_pack("mail").display().to_string(),
    ]);
    assert!(out.status.success(), "{}", w.render(&out));
    let mut tokens = Vec::new();
    for (p, project) in [("alice", "p1"), ("bob", "p2")] {
        let out = w.run(&["session", "start", "--principal", p, "--project", project]);
        assert!(out.status.success(), "{}", w.render(&out));
        let t = String::from_utf8(out.stdout).unwrap().trim().to_owned();
        let out = w.run(&[
            "grant",
            p,
            "mail",
            "verb.exec.read",
            "verb.exec.write",
            "pack.connect",
        ]);
        assert!(out.status.success(), "{}", w.render(&out));
        let out = run_as(&w, Some(&t), &["connect", "mail"]);
        assert!(out.status.success(), "{}", w.render(&out));
        tokens.push(t);
    }
    let bob = tokens.pop().unwrap();
    let alice = tokens.pop().unwrap();
    Mail { w, alice, bob }
}

/// `hcp home mail --principal P`.
fn home(w: &World, principal: &str) -> PathBuf {
    let out = w.run(&["home", "mail", "--principal", principal]);
    assert!(out.status.success(), "{}", w.render(&out));
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// Delivers a message to `to` under mail root `root`, as a mail server outside hcp would.
fn deliver(root: &std::path::Path, to: &str, subject: &str) {
    let out = std::process::Command::new(common::bin_dir().join("hcp-example-mail"))
        .args([
            "deliver",
            "--to",
            to,
            "--from",
            "carol@example.org",
            "--subject",
            subject,
            "--body",
            "hi",
            "--root",
        ])
        .arg(root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn subjects(v: &Value) -> Vec<String> {
    let list = v["data"]
        .as_array()
        .or_else(|| v["data"]["messages"].as_array())
        .cloned()
        .unwrap_or_default();
    list.iter()
        .filter_map(|m| m["subject"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn two_principals_mail_is_kept_apart_with_no_change_to_the_cli() {
    let m = world();
    let w = &m.w;
    deliver(
        &home(w, "alice").join(".hcp-example-mail"),
        "alice",
        "for alice",
    );
    let a = exec(w, &m.alice, None, &["mail.list"]);
    assert_eq!(subjects(&a), vec!["for alice"], "{a}");
    let b = exec(w, &m.bob, None, &["mail.list"]);
    assert!(subjects(&b).is_empty(), "bob sees alice's mail: {b}");
    // What alice sends bob stays in alice's home: no root is shared.
    let sent = exec(
        w,
        &m.alice,
        None,
        &[
            "mail.send",
            "--to",
            "bob",
            "--subject",
            "to bob",
            "--body",
            "b",
            "--confirm",
        ],
    );
    assert_eq!(sent["exit_code"], 0, "{sent}");
    let b = exec(w, &m.bob, None, &["mail.list"]);
    assert!(subjects(&b).is_empty(), "{b}");
    assert!(
        home(w, "alice")
            .join(".hcp-example-mail/bob/Maildir/new")
            .is_dir()
    );
    assert!(!home(w, "bob").join(".hcp-example-mail/alice").exists());
    // A project's notes are the project's: alice's p1, bob's p2.
    let n = exec(
        w,
        &m.alice,
        Some("p1"),
        &["notes.create", "--title", "plan", "--body", "x"],
    );
    assert_eq!(n["exit_code"], 0, "{n}");
    let project_home = |p: &str| {
        let out = w.run(&["home", "mail", "--project", p]);
        PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
    };
    assert!(
        project_home("p1")
            .join(".hcp-example-mail/projects/p1/notes")
            .is_dir()
    );
    assert!(
        !project_home("p2")
            .join(".hcp-example-mail/projects")
            .exists()
    );
    // Nothing in the owner's real home.
    assert!(!w.home.join(".hcp-example-mail").exists());
}

#[test]
fn delivery_between_principals_needs_a_root_shared_on_purpose() {
    let m = world();
    let w = &m.w;
    let shared = w.root().join("srv-mail");
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::write(
        w.hcp_home.join("config.json"),
        json!({"packs": {"mail": {"write": [shared]}}}).to_string(),
    )
    .unwrap();
    // Each home's mail root is a link to the shared one (a seed copies links as links).
    let seed = w.root().join("mail-seed");
    std::fs::create_dir_all(&seed).unwrap();
    std::os::unix::fs::symlink(&shared, seed.join(".hcp-example-mail")).unwrap();
    for p in ["alice", "bob"] {
        let out = w.run(&[
            "home",
            "mail",
            "--principal",
            p,
            "--seed",
            &seed.display().to_string(),
        ]);
        assert!(out.status.success(), "{}", w.render(&out));
    }
    let sent = exec(
        w,
        &m.alice,
        None,
        &[
            "mail.send",
            "--to",
            "bob",
            "--subject",
            "shared",
            "--body",
            "b",
            "--confirm",
        ],
    );
    assert_eq!(sent["exit_code"], 0, "{sent}");
    let b = exec(w, &m.bob, None, &["mail.list"]);
    assert_eq!(subjects(&b), vec!["shared"], "{b}");
    assert!(
        shared
            .join("bob/Maildir/new")
            .read_dir()
            .unwrap()
            .next()
            .is_some()
    );
}
