//! Skills where harnesses look (RUNTIME §10): `config.json` `"skills": {"export": [DIR…]}`
//! makes activation write `DIR/ID/SKILL.md`, marked as hcp's; deactivate and uninstall
//! remove only what hcp wrote; a skill hcp did not write is never overwritten
//! (`skill_collision`); a folder that cannot take the skill refuses the whole activation
//! and changes nothing; `hcp doctor` lists the folders and what needs the owner.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::World;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Output;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Writes `config.json` with `export` as `skills.export`.
fn export_to(w: &World, export: &[&str]) {
    std::fs::create_dir_all(&w.hcp_home).unwrap();
    std::fs::write(
        w.hcp_home.join("config.json"),
        serde_json::to_string_pretty(&json!({ "skills": { "export": export } })).unwrap(),
    )
    .unwrap();
}

/// Two export folders: `~/.agents/skills` (written with `~`) and `clients/claude`.
fn two_folders(w: &World) -> (PathBuf, PathBuf) {
    let agents = w.home.join(".agents/skills");
    let claude = w.root().join("clients/claude");
    for d in [&agents, &claude] {
        std::fs::create_dir_all(d).unwrap();
    }
    export_to(w, &["~/.agents/skills", s(&claude)]);
    (agents, claude)
}

fn install(w: &World, pack: &str, activate: bool) -> Output {
    common::example_bins();
    let src = common::gold_pack(pack);
    let mut args = vec!["install", s(&src)];
    if activate {
        args.push("--activate");
    }
    w.run(&args)
}

/// Every file under `dir`, relative, with its bytes (directories end in `/`).
fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(root: &Path, d: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        let Ok(rd) = std::fs::read_dir(d) else { return };
        for e in rd {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            let m = std::fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                out.push((format!("{rel}/"), Vec::new()));
                walk(root, &p, out);
            } else if m.file_type().is_symlink() {
                out.push((format!("{rel}@"), Vec::new()));
            } else {
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// `skills-ref validate DIR` passes (skipped visibly without the validator, a failure
/// under `CI=true`).
fn skills_ref_validates(dir: &Path) {
    let cmd = ["skills-ref", "agentskills"].into_iter().find(|c| {
        std::process::Command::new(c)
            .arg("--help")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    let Some(cmd) = cmd else {
        return common::skip::skip(
            "the Agent Skills validator is not installed (`pip install skills-ref`)",
        );
    };
    let out = std::process::Command::new(cmd)
        .arg("validate")
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{cmd} validate {}:\n{}{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let props = std::process::Command::new(cmd)
        .arg("read-properties")
        .arg(dir)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&props.stdout).unwrap();
    assert_eq!(v["metadata"]["generated-by"], "hcp", "{v}");
}

#[test]
fn activate_exports_a_marked_skill_that_the_validator_accepts_and_deactivate_removes_it() {
    let w = World::new();
    let (agents, claude) = two_folders(&w);
    // A skill of the user's own beside it, which hcp must never touch.
    std::fs::create_dir_all(agents.join("mine")).unwrap();
    std::fs::write(agents.join("mine/SKILL.md"), "---\nname: mine\n---\n").unwrap();
    let out = install(&w, "transit", false);
    assert!(out.status.success(), "{}", w.render(&out));
    let out = w.run(&["activate", "transit"]);
    insta::assert_snapshot!("activate_exported", w.render(&out));
    let store = std::fs::read_to_string(w.hcp_home.join("skills/transit/SKILL.md")).unwrap();
    for dir in [&agents, &claude] {
        let text = std::fs::read_to_string(dir.join("transit/SKILL.md")).unwrap();
        let id = hcp_store::skill::export::marker(&text).expect("the marker");
        // The exported copy is the store's with the marker in its front matter.
        assert_eq!(
            text.replace(&hcp_store::skill::export::marker_lines(id), ""),
            store
        );
        skills_ref_validates(&dir.join("transit"));
    }
    // Activating again rewrites hcp's own copy (it is not a collision).
    let out = w.run(&["activate", "transit"]);
    assert!(out.status.success(), "{}", w.render(&out));

    let out = w.run(&["deactivate", "transit"]);
    assert!(out.status.success(), "{}", w.render(&out));
    for dir in [&agents, &claude] {
        assert!(!dir.join("transit").exists());
    }
    assert!(agents.join("mine/SKILL.md").exists());
    assert!(
        !w.hcp_home.join("state/skill-exports/transit").exists(),
        "the ledger goes with the copies"
    );
}

#[test]
fn uninstall_removes_the_exported_copies_and_keeps_what_hcp_did_not_write() {
    let w = World::new();
    let (agents, claude) = two_folders(&w);
    let out = install(&w, "transit", true);
    insta::assert_snapshot!("install_activate_exported", w.render(&out));
    // The owner keeps notes beside hcp's skill in one folder, and replaced hcp's skill by
    // one of their own in the other: neither is hcp's to remove.
    std::fs::write(agents.join("transit/NOTES.md"), "mine").unwrap();
    std::fs::write(
        claude.join("transit/SKILL.md"),
        "---\nname: transit\n---\nmine\n",
    )
    .unwrap();
    let out = w.run(&["uninstall", "transit"]);
    assert!(out.status.success(), "{}", w.render(&out));
    assert_eq!(
        tree(&agents.join("transit")),
        vec![("NOTES.md".to_owned(), b"mine".to_vec())]
    );
    assert_eq!(
        std::fs::read_to_string(claude.join("transit/SKILL.md")).unwrap(),
        "---\nname: transit\n---\nmine\n"
    );
}

#[test]
fn a_skill_hcp_did_not_write_is_never_overwritten_and_nothing_changes() {
    let w = World::new();
    let (agents, claude) = two_folders(&w);
    let out = install(&w, "transit", false);
    assert!(out.status.success(), "{}", w.render(&out));
    // The second folder holds someone else's `transit` skill.
    std::fs::create_dir_all(claude.join("transit")).unwrap();
    std::fs::write(
        claude.join("transit/SKILL.md"),
        "---\nname: transit\n---\ntheirs\n",
    )
    .unwrap();
    let before = (tree(&w.hcp_home), tree(&agents), tree(&claude));
    let out = w.run(&["activate", "transit"]);
    assert_eq!(out.status.code(), Some(1), "{}", w.render(&out));
    insta::assert_snapshot!("collision", w.render(&out));
    // Nothing was written anywhere, the first folder included: the store is as it was.
    assert_eq!((tree(&w.hcp_home), tree(&agents), tree(&claude)), before);
    assert!(!w.run(&["list", "--json"]).stdout.is_empty());

    // `install --activate` of a new pack in the same state refuses before installing.
    std::fs::create_dir_all(agents.join("echo")).unwrap();
    std::fs::write(agents.join("echo/SKILL.md"), "---\nname: echo\n---\n").unwrap();
    let before = tree(&w.hcp_home);
    let out = install(&w, "echo", true);
    assert_eq!(out.status.code(), Some(1), "{}", w.render(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("code: skill_collision"));
    assert_eq!(tree(&w.hcp_home), before);
    assert!(!w.hcp_home.join("packs/echo").exists());

    // A symlink named like the pack is foreign too, wherever it points.
    std::fs::remove_dir_all(claude.join("transit")).unwrap();
    std::fs::create_dir_all(w.root().join("elsewhere")).unwrap();
    std::os::unix::fs::symlink(w.root().join("elsewhere"), claude.join("transit")).unwrap();
    let out = w.run(&["activate", "transit"]);
    assert_eq!(out.status.code(), Some(1), "{}", w.render(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("is a symlink") && err.contains("code: skill_collision"),
        "{err}"
    );
    assert_eq!(tree(&w.root().join("elsewhere")), vec![]);
    assert!(!agents.join("transit").exists());
}

#[test]
fn another_stores_skill_is_foreign_to_this_one() {
    let a = World::new();
    let shared = a.root().join("shared-skills");
    std::fs::create_dir_all(&shared).unwrap();
    export_to(&a, &[s(&shared)]);
    assert!(install(&a, "transit", true).status.success());
    let b = World::new();
    export_to(&b, &[s(&shared)]);
    let out = install(&b, "transit", true);
    assert_eq!(out.status.code(), Some(1), "{}", b.render(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("a skill another hcp store wrote"),
        "{}",
        b.render(&out)
    );
    // B's deactivate of a pack it never exported leaves A's copy.
    assert!(install(&b, "transit", false).status.success());
    let _ = b.run(&["deactivate", "transit"]);
    assert!(shared.join("transit/SKILL.md").exists());
    assert!(a.run(&["deactivate", "transit"]).status.success());
    assert!(!shared.join("transit").exists());
}

/// Makes a directory unwritable for this process for as long as it lives: `chattr +i`
/// (which binds root too) when running as root, else mode 0555.
struct ReadOnly(PathBuf, bool);

impl ReadOnly {
    fn new(dir: &Path) -> Option<Self> {
        use std::os::unix::fs::MetadataExt;
        let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
        if root {
            let ok = std::process::Command::new("chattr")
                .arg("+i")
                .arg(dir)
                .status()
                .is_ok_and(|s| s.success());
            ok.then(|| Self(dir.to_path_buf(), true))
        } else {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o555)).ok()?;
            Some(Self(dir.to_path_buf(), false))
        }
    }
}

impl Drop for ReadOnly {
    fn drop(&mut self) {
        if self.1 {
            let _ = std::process::Command::new("chattr")
                .arg("-i")
                .arg(&self.0)
                .status();
        } else {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&self.0, std::fs::Permissions::from_mode(0o755));
        }
    }
}

#[test]
fn a_folder_that_cannot_take_the_skill_refuses_activation_and_changes_nothing() {
    let w = World::new();
    let ok = w.root().join("ok");
    std::fs::create_dir_all(&ok).unwrap();
    let out = install(&w, "transit", false);
    assert!(out.status.success(), "{}", w.render(&out));
    let file = w.root().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let missing = w.root().join("missing");
    let cases: Vec<(&str, Vec<String>)> = vec![
        ("missing", vec![s(&ok).into(), s(&missing).into()]),
        ("file", vec![s(&ok).into(), s(&file).into()]),
        (
            "in_store",
            vec![s(&ok).into(), s(&w.hcp_home.join("packs")).into()],
        ),
    ];
    for (name, export) in cases {
        export_to(&w, &export.iter().map(String::as_str).collect::<Vec<_>>());
        // The first owner command after the edit records the changed `config.json`
        // (RUNTIME §6: noticed by the next act or call); the refused act changes nothing
        // more.
        let out = w.run(&["activate", "transit"]);
        assert_eq!(out.status.code(), Some(1), "{name}: {}", w.render(&out));
        let before = (tree(&w.hcp_home), tree(&ok));
        let out = w.run(&["activate", "transit"]);
        assert_eq!(out.status.code(), Some(1), "{name}: {}", w.render(&out));
        insta::assert_snapshot!(format!("unusable_{name}"), w.render(&out));
        assert_eq!((tree(&w.hcp_home), tree(&ok)), before, "{name}");
    }
    // `~` with no usable `HOME`.
    export_to(&w, &["~/.agents/skills"]);
    let out = w
        .hcp()
        .env_remove("HOME")
        .args(["activate", "transit"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", w.render(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`HOME` is unset"));
    // A relative folder is a bad configuration, at its line and column.
    std::fs::write(
        w.hcp_home.join("config.json"),
        "{\"skills\": {\"export\": [\n  \"skills\"]}}",
    )
    .unwrap();
    let out = w.run(&["activate", "transit"]);
    assert_eq!(out.status.code(), Some(78), "{}", w.render(&out));
    insta::assert_snapshot!("relative_export", w.render(&out));
    assert!(!w.hcp_home.join("state/active/transit").exists());

    // Not writable.
    let ro = w.root().join("read-only");
    std::fs::create_dir_all(&ro).unwrap();
    export_to(&w, &[s(&ok), s(&ro)]);
    let Some(guard) = ReadOnly::new(&ro) else {
        return common::skip::skip(
            "cannot make a directory read-only here (no `chattr +i` as root)",
        );
    };
    // As above: the first command after the edit records the changed `config.json`.
    assert_eq!(w.run(&["activate", "transit"]).status.code(), Some(1));
    let before = (tree(&w.hcp_home), tree(&ok));
    let out = w.run(&["activate", "transit"]);
    drop(guard);
    assert_eq!(out.status.code(), Some(1), "{}", w.render(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("is not writable") && err.contains("code: skill_export_unusable"),
        "{err}"
    );
    assert_eq!((tree(&w.hcp_home), tree(&ok)), before);
}

#[test]
fn a_folder_taken_out_of_the_configuration_is_still_cleaned_and_doctor_says_so() {
    let w = World::new();
    let (agents, claude) = two_folders(&w);
    assert!(install(&w, "transit", true).status.success());
    assert!(install(&w, "echo", true).status.success());
    // The owner drops the claude folder, puts a skill of their own named like an active
    // pack in the agents folder, and deletes another by hand.
    export_to(&w, &["~/.agents/skills"]);
    std::fs::remove_dir_all(agents.join("echo")).unwrap();
    let (code, v) = doctor(&w);
    assert_eq!(code, 1, "{v}");
    let folders = v["skill_exports"].as_array().unwrap();
    let summary: Vec<Value> = folders
        .iter()
        .map(|f| {
            json!({
                "configured": f["configured"],
                "status": f["status"],
                "entries": f["entries"].as_array().unwrap().iter()
                    .map(|e| format!("{} {}", e["id"].as_str().unwrap(), e["state"].as_str().unwrap()))
                    .collect::<Vec<_>>(),
            })
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            json!({"configured": true, "status": "ok", "entries": ["echo missing"]}),
            json!({"configured": false, "status": "not in `skills.export`", "entries": ["echo stale", "transit stale"]}),
        ]
    );
    let text = w.run(&["doctor"]);
    let text = String::from_utf8_lossy(&text.stdout);
    let section = text
        .split_once("skill exports\n")
        .unwrap()
        .1
        .split_once(" problem(s):")
        .unwrap()
        .0
        .rsplit_once('\n')
        .unwrap()
        .0;
    insta::assert_snapshot!("doctor_exports", w.filter(section));
    // Deactivate removes the copies in the folder the configuration no longer names.
    assert!(w.run(&["deactivate", "transit"]).status.success());
    assert!(!claude.join("transit").exists());
    assert!(claude.join("echo/SKILL.md").exists());
    // A foreign skill named like an active pack is reported.
    std::fs::create_dir_all(agents.join("echo")).unwrap();
    std::fs::write(agents.join("echo/SKILL.md"), "---\nname: echo\n---\n").unwrap();
    let (_, v) = doctor(&w);
    assert_eq!(
        v["skill_exports"][0]["entries"][0]["state"], "foreign",
        "{v}"
    );
}

fn doctor(w: &World) -> (i32, Value) {
    let o = w.run(&["doctor", "--json"]);
    (
        o.status.code().unwrap(),
        serde_json::from_slice(&o.stdout).unwrap(),
    )
}

#[test]
fn an_interrupted_install_leaves_the_exported_copy_following_the_store() {
    // A killed install (or activate) is finished by the next writer: the exported copy
    // then agrees with the store's own skill, whichever way the journal said.
    for step in hcp_store::pack::InstallStep::ALL {
        let w = World::new();
        let dir = w.root().join("skills");
        std::fs::create_dir_all(&dir).unwrap();
        export_to(&w, &[s(&dir)]);
        common::example_bins();
        let out = w
            .hcp()
            .env("HCP_TEST_ABORT_AT", step.name())
            .args(["install", "--activate", s(&common::gold_pack("transit"))])
            .output()
            .unwrap();
        let _ = out;
        // Any writer repairs; installing another pack is one that leaves transit alone.
        let out = install(&w, "echo", false);
        assert!(out.status.success(), "{}: {}", step.name(), w.render(&out));
        let pending = w.hcp_home.join("state/skill-pending");
        assert_eq!(tree(&pending), vec![], "{}", step.name());
        let active = w.hcp_home.join("state/active/transit").exists();
        let store = std::fs::read_to_string(w.hcp_home.join("skills/transit/SKILL.md")).ok();
        let exported = std::fs::read_to_string(dir.join("transit/SKILL.md")).ok();
        assert_eq!(store.is_some(), active, "{}", step.name());
        assert_eq!(exported.is_some(), active, "{}", step.name());
        if let (Some(st), Some(ex)) = (store, exported) {
            let id = hcp_store::skill::export::marker(&ex).unwrap();
            assert_eq!(
                ex.replace(&hcp_store::skill::export::marker_lines(id), ""),
                st
            );
        }
        // And a deactivate then removes both.
        assert!(w.run(&["deactivate", "transit"]).status.success() || !active);
        assert!(!dir.join("transit").exists(), "{}", step.name());
    }
}
