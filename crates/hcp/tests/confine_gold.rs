//! Issue 12, "Shows": the gold packs (git, mail, ledger, transit, echo, hcp-cli) still
//! work in every land they use, now that every call runs in its view — as root and as
//! `nobody`, as the owner and as an agent. The mail pack writes `$HOME/.hcp-example-mail`,
//! which is now the tenant home of its caller (RUNTIME §5.2): each principal's mail stays
//! in its own home, and nothing reaches the owner's real home.

#![allow(clippy::unwrap_used)]

mod common;
mod confine_common;

use confine_common::{Cw, users};
use serde_json::{Value, json};
use std::process::Output;

fn ok(cw: &Cw, what: &str, (out, v): (Output, Value)) -> Value {
    assert_eq!(
        (out.status.code(), v["exit_code"].clone()),
        (Some(0), json!(0)),
        "{what}: {}",
        cw.w.render(&out)
    );
    assert_eq!(v["sandbox"]["filesystem"], "enforced", "{what}: {v}");
    v
}

#[test]
fn every_gold_pack_works_in_its_lands_as_owner_and_agent() {
    if !std::path::Path::new("/usr/bin/git").exists()
        && !std::path::Path::new("/usr/local/bin/git").exists()
    {
        common::skip::skip("no git");
        return;
    }
    for user in users() {
        let cw = Cw::new(
            user,
            &["transit", "echo", "ledger", "mail", "git", "hcp-cli"],
        );
        let tok = cw.session("agent-1", &["--project", "p1"]);
        for p in ["transit", "echo", "ledger", "mail", "git", "hcp-cli"] {
            cw.grant(
                "agent-1",
                p,
                &["verb.exec.read", "verb.exec.write", "pack.connect"],
            );
        }
        for who in [None, Some(tok.as_str())] {
            let w = format!("{user:?} {}", if who.is_some() { "agent" } else { "owner" });
            // transit: personal.
            ok(&cw, &w, cw.exec(who, &["transit.find", "Central"]));
            // echo and ledger: local, in the sandbox.
            let v = ok(&cw, &w, cw.exec(who, &["echo.say", "hello"]));
            assert_eq!(v["data"]["text"], "hello", "{v}");
            ok(
                &cw,
                &w,
                cw.exec(who, &["echo.write", "a.txt", "one", "--confirm"]),
            );
            ok(
                &cw,
                &w,
                cw.exec(who, &["ledger.post", "cash", "1.50", "tea", "--confirm"]),
            );
            ok(&cw, &w, cw.exec(who, &["ledger.balance", "cash"]));
            // hcp-cli: personal, the store it was called from.
            ok(&cw, &w, cw.exec(who, &["hcp-cli.list"]));
            // mail: personal and brain, with a binding made by `hcp connect`.
            let mut c = cw.hcp();
            c.args(["connect", "mail"]);
            if let Some(t) = who {
                c.env("HCP_SESSION", t);
            }
            let out = c.output().unwrap();
            assert!(out.status.success(), "{w} connect: {}", cw.w.render(&out));
            ok(
                &cw,
                &w,
                cw.exec(
                    who,
                    &[
                        "mail.send",
                        "--to",
                        "bob",
                        "--subject",
                        "s",
                        "--body",
                        "b",
                        "--confirm",
                    ],
                ),
            );
            ok(&cw, &w, cw.exec(who, &["mail.list"]));
            let mut c = cw.hcp();
            c.env("HCP_PROJECT", "p1").args([
                "exec",
                "--json",
                "notes.create",
                "--title",
                "t",
                "--body",
                "b",
            ]);
            if let Some(t) = who {
                c.env("HCP_SESSION", t);
            }
            let out = c.output().unwrap();
            let v: Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(v["land"], "brain");
            ok(&cw, &w, (out, v));
        }
        // Each sender's mail is in its own tenant home, none in the owner's real home.
        for tenant in ["owner", "agent-1"] {
            let maildir =
                cw.w.hcp_home
                    .join("homes/mail/principal")
                    .join(tenant)
                    .join(".hcp-example-mail/bob/Maildir/new");
            assert_eq!(maildir.read_dir().unwrap().count(), 1, "{tenant}");
        }
        assert!(!cw.w.home.join(".hcp-example-mail").exists());
        // git: local, in a repository that is the sandbox.
        let repo = cw.w.work.join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        let init = std::process::Command::new("git")
            .args(["init", "-q", "-b", "main"])
            .current_dir(&repo)
            .output()
            .unwrap();
        assert!(init.status.success());
        std::fs::write(repo.join("a.txt"), "one\n").unwrap();
        cw.own(&repo);
        for who in [None, Some(tok.as_str())] {
            let mut c = cw.hcp();
            c.current_dir(&repo).args(["exec", "--json", "git.status"]);
            if let Some(t) = who {
                c.env("HCP_SESSION", t);
            }
            let out = c.output().unwrap();
            let v: Value = serde_json::from_slice(&out.stdout).unwrap();
            let v = ok(&cw, &format!("{user:?} git"), (out, v));
            assert!(v["stdout"].as_str().unwrap().contains("a.txt"), "{v}");
        }
    }
}
