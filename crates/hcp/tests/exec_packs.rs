//! Every verb of every gold pack through the built `hcp exec` (transit, echo, ledger,
//! mail, hcp-cli, git), and option injection into git through refs and paths.
//!
//! Mail is a `user`-binding pack: where a verb needs the credential, the test stores the
//! one `mail.connect` printed with the store API (`hcp_store::binding::save`), which is
//! what `hcp connect` does once it is built.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod exec_common;

use exec_common::*;
use pretty_assertions::assert_eq;
use serde_json::json;
use std::path::Path;

fn ok(w: &common::World, out: &std::process::Output) {
    assert_eq!(status(out), 0, "{}", w.render(out));
}

#[test]
fn transit_every_verb() {
    let w = world(&["transit"]);
    let plan = exec(&w, &["transit.plan", "Central", "Harbor"]);
    snap!("transit_plan", w.render(&plan));
    let data: serde_json::Value = serde_json::from_slice(&plan.stdout).unwrap();
    let option = data["options"][0]["id"].as_str().unwrap().to_owned();
    let run = data["options"][0]["run"].as_str().unwrap().to_owned();
    for (name, args) in [
        ("transit_find", vec!["transit.find", "Central"]),
        ("transit_show", vec!["transit.show", option.as_str()]),
        ("transit_status", vec!["transit.status"]),
        ("transit_follow", vec!["transit.follow", run.as_str()]),
    ] {
        let out = exec(&w, &args);
        ok(&w, &out);
        snap!(name, w.render(&out));
    }
    // The verb keys alone are unique here.
    let (out, v) = exec_json(&w, &["follow", "--run-id", "run-4"]);
    ok(&w, &out);
    assert_eq!(v["data"]["run"], json!("run-4"));
    // An unknown option id is the CLI's own failure, passed through.
    let (out, v) = exec_json(&w, &["transit.show", "opt-nope"]);
    assert_eq!((status(&out), &v["exit_code"]), (1, &json!(1)));
    assert!(v["stderr"].as_str().unwrap().starts_with("error: "), "{v}");
    assert_audit_clean(&w);
}

#[test]
fn echo_every_verb() {
    let w = world(&["echo"]);
    let (out, v) = exec_json(&w, &["echo.say", "hello world"]);
    ok(&w, &out);
    assert_eq!(v["data"], json!({"text": "hello world"}));
    let (out, v) = exec_json(&w, &["echo.upper", "hello"]);
    ok(&w, &out);
    assert_eq!(v["data"], json!({"text": "HELLO"}));
    let (out, v) = exec_json(&w, &["echo.write", "a.txt", "one", "--confirm"]);
    ok(&w, &out);
    assert_eq!(v["operation"], json!("write"));
    assert_eq!(
        std::fs::read_to_string(w.work.join("a.txt")).unwrap(),
        "one"
    );
    let (out, v) = exec_json(&w, &["echo.read", "a.txt"]);
    ok(&w, &out);
    assert_eq!(v["data"], json!({"name": "a.txt", "text": "one"}));
    let (out, v) = exec_json(&w, &["echo.count"]);
    ok(&w, &out);
    assert_eq!(v["data"], json!({"dirs": 0, "files": 1, "other": 0}));
    // Local land: the working dir is the caller's, and so is HOME.
    let out = exec(&w, &["echo.where"]);
    snap!("echo_where", w.render(&out));
    let out = exec(&w, &["echo.ls"]);
    snap!("echo_ls", w.render(&out));
    let (out, v) = exec_json(&w, &["echo.ls", "--path", "a.txt"]);
    ok(&w, &out);
    assert_eq!(v["stdout"], json!("a.txt\n"));
    // A value starting with `-` after the template's `--` is a file name, not an option.
    let (out, v) = exec_json(&w, &["echo.ls", "--path", "-la"]);
    assert_eq!(status(&out), 2, "{}", w.render(&out));
    assert!(v["stderr"].as_str().unwrap().contains("-la"), "{v}");
    assert_audit_clean(&w);
}

#[test]
fn ledger_every_verb() {
    let w = world(&["ledger"]);
    let (out, v) = exec_json(&w, &["ledger.validate", "cash", "0", "x"]);
    assert_eq!(status(&out), 1, "{}", w.render(&out));
    assert_eq!(v["data"]["valid"], json!(false));
    let (out, v) = exec_json(&w, &["ledger.validate", "cash", "12.50", "coffee"]);
    ok(&w, &out);
    assert_eq!(v["data"]["valid"], json!(true), "{v}");
    // preview persists nothing and needs no confirm.
    let (out, v) = exec_json(&w, &["ledger.preview", "cash", "12.50", "coffee"]);
    ok(&w, &out);
    assert_eq!(v["data"]["dry_run"], json!(true));
    assert!(!w.work.join("ledger.jsonl").exists());
    let out = exec(&w, &["ledger.post", "cash", "12.50", "coffee", "--confirm"]);
    snap!("ledger_post", w.render(&out));
    // A negative amount is a value after the template's `--`.
    let (out, _) = exec_json(&w, &["ledger.post", "cash", "-0.75", "refund", "--confirm"]);
    ok(&w, &out);
    let out = exec(&w, &["ledger.balance"]);
    snap!("ledger_balance", w.render(&out));
    let (out, v) = exec_json(&w, &["ledger.balance", "cash"]);
    ok(&w, &out);
    assert_eq!(v["data"]["total"], json!("11.75"), "{v}");
    let (out, v) = exec_json(&w, &["ledger.list", "--limit", "1"]);
    ok(&w, &out);
    assert_eq!(
        v["data"]["entries"].as_array().map(Vec::len),
        Some(1),
        "{v}"
    );
    let (out, v) = exec_json(&w, &["ledger.list", "--account", "cash"]);
    ok(&w, &out);
    assert_eq!(
        v["data"]["entries"].as_array().map(Vec::len),
        Some(2),
        "{v}"
    );
    assert_audit_clean(&w);
}

#[test]
fn mail_every_verb() {
    let w = world(&["mail"]);
    // connect runs without a binding (it is what makes one) and prints the credential.
    let (out, v) = exec_json(&w, &["mail.connect"]);
    ok(&w, &out);
    let token = v["data"]["token"].as_str().unwrap().to_owned();
    assert!(token.starts_with("mailtok-"), "{v}");
    // Without a stored binding the other verbs are refused at binding mint.
    for args in [
        vec!["mail.list"],
        vec![
            "mail.send",
            "--to",
            "bob",
            "--subject",
            "s",
            "--body",
            "b",
            "--confirm",
        ],
    ] {
        let (out, v) = exec_json(&w, &args);
        assert_refused(&w, &out, &v, "binding_required", 77);
    }
    let (out, v) = exec_json_env(
        &w,
        &["notes.create", "--title", "t", "--body", "b"],
        &[("HCP_PROJECT", "p1")],
    );
    assert_refused(&w, &out, &v, "binding_required", 77);
    // Store what connect printed, as `hcp connect` does.
    store_binding(&w, "owner", "mail", &token);
    let (out, v) = exec_json(&w, &["mail.list"]);
    ok(&w, &out);
    assert!(v["data"].is_object() || v["data"].is_array(), "{v}");
    let (out, v) = exec_json(
        &w,
        &[
            "mail.send",
            "--to",
            "bob",
            "--subject",
            "hi; rm -rf /",
            "--body",
            "$(id)",
            "--confirm",
        ],
    );
    ok(&w, &out);
    // The owner's mail is in its tenant home (RUNTIME §5.2).
    let inbox = w
        .hcp_home
        .join("homes/mail/principal/owner/.hcp-example-mail/bob/Maildir/new");
    let msgs: Vec<_> = std::fs::read_dir(&inbox).unwrap().collect();
    assert_eq!(msgs.len(), 1, "{v}");
    let body = std::fs::read_to_string(msgs[0].as_ref().unwrap().path()).unwrap();
    assert!(
        body.contains("hi; rm -rf /") && body.contains("$(id)"),
        "{body}"
    );
    let (out, v) = exec_json_env(
        &w,
        &["notes.create", "--title", "t", "--body", "b"],
        &[("HCP_PROJECT", "p1")],
    );
    ok(&w, &out);
    assert_eq!(v["land"], json!("brain"));
    let notes = w
        .hcp_home
        .join("homes/mail/project/p1/.hcp-example-mail/projects/p1/notes");
    assert_eq!(std::fs::read_dir(&notes).unwrap().count(), 1);
    assert_audit_clean(&w);
}

#[test]
fn hcp_cli_every_verb() {
    let w = world(&["hcp-cli", "transit"]);
    let (out, v) = exec_json(&w, &["hcp-cli.list"]);
    ok(&w, &out);
    assert!(v["data"].is_array() || v["data"].is_object(), "{v}");
    // Its `lint` reads paths of its view only (RUNTIME §5.1): outside it, the directory is
    // not there; given with `sandbox.read`, it is.
    let gold = common::gold_pack("transit").display().to_string();
    let (out, v) = exec_json(&w, &["hcp-cli.lint", &gold]);
    assert_eq!(
        v["data"]["code"],
        json!("bad_pack_dir"),
        "{}",
        w.render(&out)
    );
    std::fs::write(
        w.hcp_home.join("config.json"),
        json!({"sandbox": {"read": [gold]}}).to_string(),
    )
    .unwrap();
    let (out, v) = exec_json(&w, &["hcp-cli.lint", &gold]);
    ok(&w, &out);
    assert!(!v["data"].is_null(), "{v}");
    let (out, _) = exec_json(&w, &["hcp-cli.audit.verify"]);
    ok(&w, &out);
    let (out, _) = exec_json(&w, &["hcp-cli.audit.tail"]);
    ok(&w, &out);
    let (out, _) = exec_json(&w, &["hcp-cli.audit.tail", "--lines", "2"]);
    ok(&w, &out);
    let (out, v) = exec_json(&w, &["hcp-cli.show", "hcp-cli"]);
    // `show` of a pack the child's store does not hold is the child's own refusal.
    assert!(v["exit_code"].is_i64(), "{}", w.render(&out));
    assert_audit_clean(&w);
}

/// The `hcp-cli` pack runs `hcp` itself, but the child's environment is cleared and
/// `HCP_HOME` is not on the allow-list of RUNTIME §5, so under an `HCP_HOME` store the
/// child reads another store (HOME's default) and does not see the packs it runs from.
#[test]
fn hcp_cli_for_an_agent_never_acts_as_the_owner() {
    let w = world(&["hcp-cli", "transit"]);
    let tok = session(&w, "agent-1", &[]);
    grant(&w, "agent-1", "hcp-cli", &["verb.exec.read"]);
    let env = [("HCP_SESSION", tok.as_str())];
    // Reads anyone may make still work …
    let (out, v) = exec_json_env(&w, &["hcp-cli.show", "transit"], &env);
    ok(&w, &out);
    assert_eq!(v["exit_code"], json!(0), "{v}");
    // … the owner-only audit does not: the child hcp refuses it (`owner_only`, 77).
    let (out, v) = exec_json_env(&w, &["hcp-cli.audit.tail"], &env);
    assert_eq!(v["exit_code"], json!(77), "{}", w.render(&out));
    assert!(v["stderr"].as_str().unwrap().contains("owner_only"), "{v}");
    // The owner's own call reads it.
    let (out, v) = exec_json(&w, &["hcp-cli.audit.tail"]);
    ok(&w, &out);
    assert_eq!(v["exit_code"], json!(0), "{v}");
}

#[test]
fn hcp_cli_sees_the_store_it_runs_from() {
    let w = world(&["hcp-cli", "transit"]);
    let (out, v) = exec_json(&w, &["hcp-cli.show", "transit"]);
    ok(&w, &out);
    assert_eq!(v["exit_code"], json!(0), "{v}");
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn git_every_verb_in_a_scratch_repository() {
    let w = world(&["git"]);
    let repo = w.work.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("a.txt"), "one\n").unwrap();
    let in_repo = |args: &[&str]| {
        let mut all = vec!["exec", "--json"];
        all.extend_from_slice(args);
        let out = w.hcp().current_dir(&repo).args(&all).output().unwrap();
        let v = parse(&w, &out);
        (out, v)
    };
    let (out, v) = in_repo(&["git.status"]);
    ok(&w, &out);
    assert_eq!(v["stdout"], json!("## No commits yet on main\n?? a.txt\n"));
    let (out, _) = in_repo(&["git.add", "a.txt"]);
    ok(&w, &out);
    let (out, v) = in_repo(&["git.commit", "--message", "first; touch x"]);
    assert_refused(&w, &out, &v, "confirm_required", 77);
    let (out, v) = in_repo(&["git.commit", "--message", "first; touch x", "--confirm"]);
    ok(&w, &out);
    assert!(!repo.join("x").exists());
    assert_eq!(v["operation"], json!("write"));
    let (out, v) = in_repo(&["git.log"]);
    ok(&w, &out);
    let line = v["stdout"].as_str().unwrap();
    assert!(
        line.contains(" hcp agent ") && line.trim_end().ends_with(" first; touch x"),
        "{line}"
    );
    let (out, v) = in_repo(&[
        "git.log", "--limit", "1", "--rev", "main", "--path", "a.txt",
    ]);
    ok(&w, &out);
    assert_eq!(v["stdout"].as_str().unwrap().lines().count(), 1);
    let (out, v) = in_repo(&["git.show", "HEAD"]);
    ok(&w, &out);
    assert!(v["stdout"].as_str().unwrap().contains("+one"), "{v}");
    std::fs::write(repo.join("a.txt"), "two\n").unwrap();
    let (out, v) = in_repo(&["git.diff"]);
    ok(&w, &out);
    let diff = v["stdout"].as_str().unwrap();
    assert!(diff.contains("-one") && diff.contains("+two"), "{diff}");
    let (out, v) = in_repo(&["git.diff", "--rev", "HEAD", "--path", "a.txt"]);
    ok(&w, &out);
    assert!(v["stdout"].as_str().unwrap().contains("+two"));
    let (out, v) = in_repo(&["git.status", "--path", "a.txt"]);
    ok(&w, &out);
    assert_eq!(v["stdout"], json!("## main\n M a.txt\n"));
    assert_eq!(git(&repo, &["log", "--format=%s"]), "first; touch x\n");
    assert_audit_clean(&w);
}

#[test]
fn git_refs_that_look_like_options_are_refused_and_paths_stay_paths() {
    let w = world(&["git"]);
    let repo = w.work.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("a.txt"), "one\n").unwrap();
    git(&repo, &["add", "a.txt"]);
    git(
        &repo,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "-m",
            "c",
        ],
    );
    let canary = w.root().join("canary");
    let c = canary.display().to_string();
    let upload = format!("--upload-pack=touch {c}");
    let output = format!("--output={c}");
    let pager = format!("core.pager=touch {c}");
    let bad = [output.as_str(), upload.as_str(), "-c", "--exec-path=/tmp"];
    let run = |args: &[&str]| {
        let mut all = vec!["exec", "--json"];
        all.extend_from_slice(args);
        let out = w.hcp().current_dir(&repo).args(&all).output().unwrap();
        let v = parse(&w, &out);
        (out, v)
    };
    for b in bad {
        for verb in ["git.show", "git.log", "git.diff"] {
            let (out, v) = run(&[verb, "--rev", b]);
            assert_refused(&w, &out, &v, "arg_looks_like_flag", 65);
        }
    }
    // `-c core.pager=…` as a ref: `-c` is refused; the value alone is just a bad ref.
    let (out, v) = run(&["git.show", &pager]);
    assert_eq!(status(&out), 128, "{}", w.render(&out));
    assert!(v["stderr"].as_str().unwrap().contains("fatal"), "{v}");
    // As a path (after the template's `--`), each is a literal pathspec.
    for b in [output.as_str(), upload.as_str(), "-c", pager.as_str()] {
        let (out, _) = run(&["git.status", "--path", b]);
        ok(&w, &out);
        let (out, _) = run(&["git.log", "--path", b]);
        ok(&w, &out);
        let (out, v) = run(&["git.add", "--path", b]);
        assert_eq!(status(&out), 128, "{}", w.render(&out));
        assert!(
            v["stderr"].as_str().unwrap().contains("did not match"),
            "{v}"
        );
    }
    assert!(!canary.exists(), "an option reached git");
    let out = w
        .hcp()
        .current_dir(&repo)
        .args(["exec", "git.show", &output])
        .output()
        .unwrap();
    snap!("git_show_flag", w.render(&out).replace(&c, "[CANARY]"));
}

#[test]
fn git_as_an_agent_in_its_session_workdir() {
    let w = world(&["git"]);
    let repo = w.root().join("sandbox-repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("b.txt"), "bee\n").unwrap();
    let tok = session(&w, "agent-1", &["--workdir", &repo.display().to_string()]);
    let env = [("HCP_SESSION", tok.as_str())];
    grant(&w, "agent-1", "git", &["verb.exec.read"]);
    // The caller's directory is `work/`, not a repository: the session's workdir wins.
    let (out, v) = exec_json_env(&w, &["git.status"], &env);
    ok(&w, &out);
    assert_eq!(v["stdout"], json!("## No commits yet on main\n?? b.txt\n"));
    let (out, v) = exec_json_env(&w, &["git.add", "b.txt"], &env);
    assert_refused(&w, &out, &v, "missing_grant", 77);
    grant(&w, "agent-1", "git", &["verb.exec.write"]);
    let (out, _) = exec_json_env(&w, &["git.add", "b.txt"], &env);
    ok(&w, &out);
    let (out, v) = exec_json_env(&w, &["git.commit", "--message", "bee"], &env);
    assert_refused(&w, &out, &v, "confirm_required", 77);
    let (out, _) = exec_json_env(&w, &["git.commit", "--message", "bee", "--confirm"], &env);
    ok(&w, &out);
    assert_eq!(git(&repo, &["log", "--format=%an %s"]), "hcp agent bee\n");
    let recs = audit_records(&w);
    assert!(recs.iter().all(|r| r["principal"] == json!("agent-1")));
}
