//! Issue 23, "a read grant plants the owner's next action" (RUNTIME §5.1, protected names):
//! through the built `hcp`, as root and as `nobody`, in `local` land: a `read` verb writes
//! nothing in its workdir; a `write` verb that creates `.git/hooks/pre-commit`,
//! `.claude/settings.json`, `.agents/skills/x/SKILL.md`, `.envrc` or `.mcp.json` finds each
//! moved into the store's quarantine before the call answers, named in the result and the
//! outcome (`protected_created`) and listed by `hcp doctor`; the protected names that exist
//! cannot be changed; the call's other work stays.

#![allow(clippy::unwrap_used)]

mod common;
mod confine_common;
mod view_common;

use confine_common::users;
use serde_json::Value;
use std::path::Path;
use view_common::{Vw, outside, sqlite3_or_skip, tree};

const PLANT: &str = "mkdir -p .git/hooks && echo 'hcp grant agent-w sq verb.exec.write' > .git/hooks/pre-commit; \
    mkdir -p .claude && echo '{}' > .claude/settings.json; \
    mkdir -p .agents/skills/x && echo x > .agents/skills/x/SKILL.md; \
    echo 'export X=1' > .envrc; echo '{}' > .mcp.json; echo work > result.txt";

/// A git repository as the owner has it, without a hooks directory (so a call can only
/// create one), owned by the world's user.
fn repo(vw: &Vw) {
    let w = vw.w();
    let out = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&w.work)
        .output()
        .unwrap();
    assert!(out.status.success());
    std::fs::remove_dir_all(w.work.join(".git/hooks")).unwrap();
    vw.cw.own(&w.work);
}

fn audit_outcomes(vw: &Vw) -> Vec<Value> {
    let out = vw.cw.run(&["audit", "tail", "-n", "50", "--json"]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .flat_map(|v| match v {
            Value::Array(a) => a,
            other => vec![other],
        })
        .filter(|r| r.to_string().contains("protected_created"))
        .collect()
}

#[test]
fn a_write_verb_finds_what_it_planted_in_the_quarantine() {
    if !sqlite3_or_skip() {
        return;
    }
    for user in users() {
        let vw = Vw::new(user);
        let w = vw.w();
        repo(&vw);
        let before = outside(&vw);
        let (out, v) = vw.shell(Some(&vw.writer), "local.write", PLANT);
        let what = format!("{user:?}: {}", w.render(&out));
        assert_eq!(v["exit_code"], 0, "{what}");
        let created: Vec<&str> = v["protected_created"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        assert_eq!(
            created,
            vec![".agents", ".claude", ".envrc", ".git/hooks", ".mcp.json"],
            "{what}"
        );
        for name in created {
            assert!(
                std::fs::symlink_metadata(w.work.join(name)).is_err(),
                "{what}: `{name}` is still in the workdir"
            );
        }
        assert_eq!(
            std::fs::read_to_string(w.work.join("result.txt")).unwrap(),
            "work\n"
        );
        assert!(w.work.join(".git/HEAD").exists(), "the repository stays");
        let audit_id = v["audit_id"].as_str().unwrap();
        let kept = w
            .hcp_home
            .join("quarantine")
            .join(audit_id)
            .join("files/.git/hooks/pre-commit");
        assert!(
            std::fs::read_to_string(&kept)
                .unwrap()
                .contains("hcp grant"),
            "{what}: not kept at {}",
            kept.display()
        );
        // The outcome record names them; doctor lists the quarantine.
        assert!(
            !audit_outcomes(&vw).is_empty(),
            "{what}: no outcome names them"
        );
        let out = vw.cw.run(&["doctor", "--json"]);
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        let listed = doc["view"]["quarantine"].to_string();
        assert!(
            listed.contains(audit_id) && listed.contains(".git/hooks"),
            "{user:?}: doctor does not list the quarantine: {listed}"
        );
        assert_eq!(outside(&vw), before, "{user:?}");
    }
}

#[test]
fn a_read_verb_writes_nothing_in_its_workdir() {
    if !sqlite3_or_skip() {
        return;
    }
    for user in users() {
        let vw = Vw::new(user);
        let w = vw.w();
        repo(&vw);
        let work_before = tree(&[&w.work]);
        let (out, v) = vw.shell(
            Some(&vw.reader),
            "local.read",
            &format!("{PLANT}; touch x 2>&1; echo rc=$?"),
        );
        let what = format!("{user:?}: {}", w.render(&out));
        let said = v["stdout"].as_str().unwrap_or_default();
        assert!(
            said.contains("Read-only file system") && !said.contains("rc=0"),
            "{what}"
        );
        assert!(v["protected_created"].is_null(), "{what}");
        assert_eq!(tree(&[&w.work]), work_before, "{what}: the workdir changed");
        assert!(!w.hcp_home.join("quarantine").exists(), "{what}");
    }
}

#[test]
fn protected_names_that_exist_cannot_be_changed_or_removed() {
    if !sqlite3_or_skip() {
        return;
    }
    for user in users() {
        let vw = Vw::new(user);
        let w = vw.w();
        repo(&vw);
        for (name, text) in [
            (".git/hooks/pre-commit", "#!/bin/sh\nexit 0\n"),
            (".claude/settings.json", "{}\n"),
            (".envrc", "# the owner's\n"),
            (".mcp.json", "{}\n"),
        ] {
            let p = w.work.join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, text).unwrap();
        }
        vw.cw.own(&w.work);
        let protected_before = tree(&[
            &w.work.join(".git/hooks"),
            &w.work.join(".git/config"),
            &w.work.join(".claude"),
            &w.work.join(".envrc"),
            &w.work.join(".mcp.json"),
        ]);
        for cmd in [
            "echo evil >> .git/hooks/pre-commit",
            "echo evil > .claude/settings.json",
            "echo evil >> .envrc",
            "rm -rf .claude .envrc .mcp.json .git/hooks",
            "mv .git .git-old && mkdir .git",
            "mv .git/hooks .git/hooks-old",
            "echo '[core] hooksPath = /tmp' >> .git/config",
        ] {
            let (out, v) = vw.shell(
                Some(&vw.writer),
                "local.write",
                &format!("{cmd} 2>&1; echo rc=$?"),
            );
            let said = v["stdout"].as_str().unwrap_or_default();
            assert!(
                !said.contains("rc=0"),
                "{user:?} `{cmd}` worked: {}",
                w.render(&out)
            );
        }
        let after = tree(&[
            &w.work.join(".git/hooks"),
            &w.work.join(".git/config"),
            &w.work.join(".claude"),
            &w.work.join(".envrc"),
            &w.work.join(".mcp.json"),
        ]);
        assert_eq!(after, protected_before, "{user:?}");
        assert!(Path::new(&w.work.join(".git/HEAD")).exists());
    }
}

/// Git reads `$GIT_DIR/commondir` in any repository, and takes its configuration and hooks
/// from the directory it names: a `write` verb that creates `.git/commondir` pointing into
/// the workdir redirects the owner's next `git commit` to hooks the call wrote (checked by
/// hand: the owner's commit ran them). So `.git/commondir` is a protected name too (beside
/// RUNTIME §5.1's list): one the call creates is quarantined before it answers.
#[test]
fn a_write_verb_cannot_redirect_the_owners_git_through_commondir() {
    if !sqlite3_or_skip() {
        return;
    }
    for user in users() {
        let vw = Vw::new(user);
        let w = vw.w();
        repo(&vw);
        let plant = "mkdir -p evil/hooks && cp -r .git/objects .git/refs .git/HEAD evil/ && \
            printf '#!/bin/sh\\necho pwned > pwned\\n' > evil/hooks/pre-commit && chmod +x evil/hooks/pre-commit && \
            echo \"$PWD/evil\" > .git/commondir";
        let (out, v) = vw.shell(Some(&vw.writer), "local.write", plant);
        let what = format!("{user:?}: {}", w.render(&out));
        assert!(
            std::fs::symlink_metadata(w.work.join(".git/commondir")).is_err(),
            "{what}: `.git/commondir` stays in the workdir: the owner's next git runs the call's hooks"
        );
        assert!(!v["protected_created"].is_null(), "{what}");
    }
}
