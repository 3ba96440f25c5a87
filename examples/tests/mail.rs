//! `hcp-example-mail`: Maildir delivery per principal, the binding token, project notes,
//! and the `new_item` watcher.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{assert_error, cmd, files, ok_json};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// `mail ARGS…` with `HOME` set to `home` and no other variable but `PATH`.
fn mail(home: &Path, args: &[&str]) -> Output {
    cmd("mail", home)
        .env("HOME", home)
        .args(args)
        .output()
        .unwrap()
}

fn token(home: &Path, principal: &str) -> String {
    let v = ok_json(&mail(home, &["connect", "--principal", principal]));
    v["token"].as_str().unwrap().to_owned()
}

fn send(home: &Path, principal: &str, token: Option<&str>, to: &str, subject: &str) -> Output {
    let mut c = cmd("mail", home);
    c.env("HOME", home).args([
        "send",
        &format!("--to={to}"),
        &format!("--subject={subject}"),
        "--body=hello\nsecond line",
        "--confirm",
        &format!("--principal={principal}"),
        "--json",
    ]);
    if let Some(t) = token {
        c.env("HCP_BINDING_TOKEN", t);
    }
    c.output().unwrap()
}

fn inbox(home: &Path, principal: &str) -> Vec<Value> {
    let v = ok_json(&mail(home, &["list", "--principal", principal, "--json"]));
    assert_eq!(v["principal"], principal);
    v["messages"].as_array().unwrap().clone()
}

fn maildir(home: &Path, principal: &str) -> std::path::PathBuf {
    home.join(".hcp-example-mail")
        .join(principal)
        .join("Maildir")
}

#[test]
fn connect_prints_a_stable_per_principal_token() {
    let tmp = tempfile::tempdir().unwrap();
    let h = tmp.path();
    let a = token(h, "alice");
    assert!(a.starts_with("mailtok-"), "{a}");
    assert_eq!(a, token(h, "alice"));
    assert_ne!(a, token(h, "bob"));
    // The principal may come from the environment hcp sets (RUNTIME §5).
    let out = cmd("mail", h)
        .env("HCP_PRINCIPAL_ID", "alice")
        .arg("connect")
        .output()
        .unwrap();
    assert_eq!(ok_json(&out)["token"], a.as_str());
    assert_error(&mail(h, &["connect"]), 2, "no principal");
    assert_error(
        &mail(h, &["connect", "--principal", "../x"]),
        1,
        "not a valid id",
    );
}

#[test]
fn send_delivers_into_the_recipients_maildir() {
    let tmp = tempfile::tempdir().unwrap();
    let h = tmp.path();
    let t = token(h, "alice");
    let v = ok_json(&send(h, "alice", Some(&t), "bob@example.test", "lunch?"));
    let id = v["sent"].as_str().unwrap().to_owned();
    assert_eq!(v["from"], "alice");

    // Delivered the Maildir way: into new/, nothing left in tmp/.
    let bob = maildir(h, "bob");
    assert_eq!(files(&bob.join("new")), std::slice::from_ref(&id));
    assert!(files(&bob.join("tmp")).is_empty());
    assert!(bob.join("cur").is_dir());
    let raw = std::fs::read_to_string(bob.join("new").join(&id)).unwrap();
    assert!(
        raw.starts_with("From: alice\nTo: bob@example.test\nSubject: lunch?\n"),
        "{raw}"
    );
    assert!(raw.ends_with("\n\nhello\nsecond line"), "{raw}");
    // A copy in the sender's Sent folder.
    assert_eq!(
        files(&maildir(h, "alice").join(".Sent").join("new")),
        std::slice::from_ref(&id)
    );

    let msgs = inbox(h, "bob");
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0]["id"], id.as_str());
    assert_eq!(msgs[0]["from"], "alice");
    assert_eq!(msgs[0]["subject"], "lunch?");
    assert_eq!(msgs[0]["seen"], false);
    assert_eq!(msgs[0]["preview"], "hello");
    // Scoped per principal: alice's inbox holds nothing.
    assert!(inbox(h, "alice").is_empty());

    // A second message gets a distinct name and lists after the first.
    let v2 = ok_json(&send(h, "alice", Some(&t), "bob", "again"));
    assert_ne!(v2["sent"], v["sent"]);
    let msgs = inbox(h, "bob");
    assert_eq!(msgs.len(), 2);
    assert_eq!(msgs[1]["subject"], "again");
}

#[test]
fn send_needs_the_principals_binding_and_confirm() {
    let tmp = tempfile::tempdir().unwrap();
    let h = tmp.path();
    assert_error(
        &send(h, "alice", None, "bob", "s"),
        3,
        "HCP_BINDING_TOKEN is unset",
    );
    let bobs = token(h, "bob");
    assert_error(
        &send(h, "alice", Some(&bobs), "bob", "s"),
        3,
        "does not belong to principal `alice`",
    );
    let t = token(h, "alice");
    let out = cmd("mail", h)
        .env("HOME", h)
        .env("HCP_BINDING_TOKEN", &t)
        .args([
            "send",
            "--to=bob",
            "--subject=s",
            "--body=b",
            "--principal=alice",
        ])
        .output()
        .unwrap();
    assert_error(&out, 3, "without --confirm");
    // Header injection and bad recipients are refused.
    assert_error(
        &send(h, "alice", Some(&t), "bob", "hi\nBcc: eve"),
        1,
        "control characters",
    );
    assert_error(
        &send(h, "alice", Some(&t), "../eve", "s"),
        1,
        "cannot deliver",
    );
    assert!(!h.join(".hcp-example-mail").exists());
}

#[test]
fn notes_land_in_the_project() {
    let tmp = tempfile::tempdir().unwrap();
    let h = tmp.path();
    let v = ok_json(&mail(
        h,
        &[
            "note",
            "--project=apollo",
            "--title=plan",
            "--body=step one",
            "--principal=alice",
            "--json",
        ],
    ));
    let id = v["created"].as_str().unwrap();
    let dir = h.join(".hcp-example-mail/projects/apollo/notes");
    assert_eq!(files(&dir), [format!("{id}.json")]);
    let note: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join(format!("{id}.json"))).unwrap())
            .unwrap();
    assert_eq!(note["author"], "alice");
    assert_eq!(note["title"], "plan");
    assert_eq!(note["body"], "step one");
    assert_error(
        &mail(
            h,
            &[
                "note",
                "--project=../x",
                "--title=t",
                "--body=b",
                "--principal=a",
            ],
        ),
        1,
        "project",
    );
}

fn deliver(root: &Path, to: &str, subject: &str) -> String {
    let out = Command::new(common::bin("mail"))
        .env_clear()
        .args(["deliver", "--root"])
        .arg(root)
        .args([
            "--to",
            to,
            "--from",
            "carol",
            "--subject",
            subject,
            "--body",
            "b",
            "--json",
        ])
        .output()
        .unwrap();
    ok_json(&out)["delivered"].as_str().unwrap().to_owned()
}

#[test]
fn watch_emits_one_line_per_new_message_and_not_the_backlog() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let old = deliver(&root, "alice", "already there");

    let mut child = Command::new(common::bin("mail"))
        .env_clear()
        .args([
            "watch",
            "--principal",
            "alice",
            "--count",
            "2",
            "--interval-ms",
            "10",
            "--root",
        ])
        .arg(&root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The watcher says on stderr when its snapshot is taken; deliver only after that.
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut ready = String::new();
    err.read_line(&mut ready).unwrap();
    assert_eq!(ready, "watching the inbox of alice\n");

    let first = deliver(&root, "alice", "one");
    let _other = deliver(&root, "bob", "not for alice");
    let second = deliver(&root, "alice", "two");

    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let events: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.len(), 2);
    let ids: Vec<&str> = events.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert!(!ids.contains(&old.as_str()));
    let mut want = vec![first.as_str(), second.as_str()];
    let mut got = ids.clone();
    want.sort_unstable();
    got.sort_unstable();
    assert_eq!(got, want);
    for e in &events {
        assert_eq!(e["principal"], "alice");
        assert_eq!(e["from"], "carol");
        assert_eq!(e["folder"], "new");
    }
}

#[test]
fn watch_backlog_once_emits_what_is_waiting() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let id = deliver(&root, "alice", "waiting");
    let out = Command::new(common::bin("mail"))
        .env_clear()
        .env("HCP_PRINCIPAL_ID", "alice")
        .args(["watch", "--backlog", "--once", "--root"])
        .arg(&root)
        .output()
        .unwrap();
    let v = ok_json(&out);
    assert_eq!(v["id"], id.as_str());
    assert_eq!(v["subject"], "waiting");
    assert_eq!(String::from_utf8(out.stdout).unwrap().lines().count(), 1);
    let bad = Command::new(common::bin("mail"))
        .env_clear()
        .args(["watch", "--principal=a", "--once", "--count=2", "--root"])
        .arg(&root)
        .output()
        .unwrap();
    assert_error(&bad, 2, "not both");
}
