//! A script bin's interpreter is pinned at install with the bin (RUNTIME §5.1, "the pinned
//! bin"; §5 step 9): `env NAME` resolved through the installing `PATH`, each file of the
//! interpreter by path and digest; a call runs exactly that file, whatever its own `PATH`
//! finds, refuses an interpreter that changed (`bin_changed`) or is gone (`bin_missing`),
//! naming it; install says when the interpreter lies outside the system directories.

#![allow(clippy::unwrap_used)]

mod common;
mod exec_common;

use common::World;
use exec_common::{assert_refused, exec_json_env, install};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

/// A `wrap` pack `sc` whose bin is the script `bin/tool` of its source directory, with one
/// `personal` read verb `sc.say`.
fn script_pack(w: &World, script: &str) -> (PathBuf, PathBuf) {
    let dir = w.root().join("src/sc");
    let tool = dir.join("bin/tool");
    std::fs::create_dir_all(tool.parent().unwrap()).unwrap();
    std::fs::write(&tool, script).unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        dir.join("surface.json"),
        r#"{"id": "sc", "name": "Script", "kind": "wrap", "cliBin": "tool",
  "transports": ["cli", "json_exec"], "binding": {"mode": "public"},
  "wrap": {"bin": "bin/tool"},
  "verbs": {"say": {"description": "Say it.", "cli": ["tool", "{{text}}"]}}}"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("policy.json"),
        r#"{"surface_id": "sc", "version": 1, "stimuli": {},
  "verbs": {"say": {"operation": "read", "privacy": {"land": "personal"}}}}"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("HARNESS.md"),
        "# HCP — Script\n\nA script.\n\n## Hot path\n\n| Command | CLI |\n|---|---|\n\
         | `say` | `tool TEXT` |\n\n## Anti-patterns\n\n- None\n",
    )
    .unwrap();
    (dir, tool.canonicalize().unwrap())
}

fn pinned_interpreter(w: &World) -> serde_json::Value {
    let out = w.run(&["show", "sc", "--json"]);
    assert!(out.status.success(), "{}", w.render(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["bins"][0]["interpreter"].clone()
}

/// The first `python3` on the world's `PATH`, resolved, or `None` after a visible skip.
fn python3(w: &World) -> Option<PathBuf> {
    let found = std::env::split_paths(&w.path_var())
        .map(|d| d.join("python3"))
        .find(|p| p.is_file())
        .and_then(|p| p.canonicalize().ok());
    if found.is_none() {
        common::skip::skip("no python3 on PATH");
    }
    found
}

#[test]
fn an_env_python3_script_runs_the_python3_install_found() {
    let w = World::new();
    let Some(python) = python3(&w) else {
        return;
    };
    let (dir, tool) = script_pack(
        &w,
        "#!/usr/bin/env python3\nimport sys\nprint('said', sys.argv[1])\n",
    );
    install(&w, &dir);
    let i = pinned_interpreter(&w);
    assert_eq!(i["line"], "/usr/bin/env python3", "{i}");
    assert_eq!(
        i["argv"],
        serde_json::json!(["python3", tool.display().to_string()]),
        "{i}"
    );
    assert_eq!(i["files"][0]["path"], python.display().to_string(), "{i}");
    // A `python3` first on the call's PATH is not what runs: the pinned one is.
    let fake = w.root().join("fake-bin");
    std::fs::create_dir_all(&fake).unwrap();
    std::fs::write(fake.join("python3"), "#!/bin/sh\necho fake python\n").unwrap();
    std::fs::set_permissions(fake.join("python3"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", fake.display(), w.path_var());
    let (out, v) = exec_json_env(&w, &["sc.say", "hi"], &[("PATH", path.as_str())]);
    assert_eq!(v["stdout"], "said hi\n", "{}", w.render(&out));
    assert_eq!(v["exit_code"], 0);
}

#[test]
fn an_interpreter_replaced_or_removed_after_install_is_refused_naming_it() {
    let w = World::new();
    let interp_dir = w.root().join("opt/interp/bin");
    std::fs::create_dir_all(&interp_dir).unwrap();
    let interp = interp_dir.join("myinterp");
    std::fs::copy(std::fs::canonicalize("/bin/sh").unwrap(), &interp).unwrap();
    let (dir, _) = script_pack(&w, &format!("#!{}\necho said \"$1\"\n", interp.display()));
    let out = w.run(&["install", "--activate", &dir.display().to_string()]);
    assert!(out.status.success(), "{}", w.render(&out));
    // Outside the system directories: install says so, and what of it a call sees.
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        said.contains(&format!("the interpreter `{}`", interp.display()))
            && said.contains("outside the system directories"),
        "{said}"
    );
    let (out, v) = exec_json_env(&w, &["sc.say", "hi"], &[]);
    assert_eq!(v["stdout"], "said hi\n", "{}", w.render(&out));
    // Replaced (another program under its name): refused before anything runs.
    std::fs::remove_file(&interp).unwrap();
    std::fs::copy(std::fs::canonicalize("/bin/true").unwrap(), &interp).unwrap();
    let (out, v) = exec_json_env(&w, &["sc.say", "hi"], &[]);
    assert_refused(&w, &out, &v, "bin_changed", 126);
    let err = v["error"].as_str().unwrap();
    assert!(
        err.contains(&interp.display().to_string()) && err.contains("interpreter"),
        "{err}"
    );
    // Gone.
    std::fs::remove_file(&interp).unwrap();
    let (out, v) = exec_json_env(&w, &["sc.say", "hi"], &[]);
    assert_refused(&w, &out, &v, "bin_missing", 127);
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains(&interp.display().to_string()),
        "{v}"
    );
    // doctor names it too.
    let out = w.run(&["doctor", "--json"]);
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains(&format!("pinned interpreter `{}`", interp.display())),
        "{}",
        w.render(&out)
    );
}

#[test]
fn a_script_whose_interpreter_cannot_be_pinned_is_not_installed() {
    let w = World::new();
    let (dir, _) = script_pack(&w, "#!/usr/bin/env hcp-no-such-interpreter\n");
    let out = w.run(&["install", &dir.display().to_string()]);
    assert_eq!(out.status.code(), Some(1), "{}", w.render(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bin_missing") && err.contains("hcp-no-such-interpreter"),
        "{err}"
    );
    assert!(!w.hcp_home.join("packs/sc").exists());
}

#[test]
fn a_record_without_the_interpreter_pin_refuses_the_script_until_reinstalled() {
    let w = World::new();
    let (dir, _) = script_pack(&w, "#!/bin/sh\necho said \"$1\"\n");
    install(&w, &dir);
    // What an install by an earlier hcp left: no `interpreter` in the record.
    let record = w.hcp_home.join("packs/sc/.hcp/record.json");
    let mut r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
    r["bins"][0].as_object_mut().unwrap().remove("interpreter");
    // Sealed again, as that hcp's record is once the store is migrated.
    let home = hcp_store::Home::open(&w.hcp_home).unwrap();
    let (sealed, mac) =
        hcp_store::stamp::records::seal_record_mac(&home, "sc", &record, &r).unwrap();
    std::fs::write(&record, sealed).unwrap();
    let lock = hcp_store::StoreLock::acquire(&home).unwrap();
    hcp_store::ledger::note(&home, &lock, &[(&record, Some(mac))]).unwrap();
    drop(lock);
    let (out, v) = exec_json_env(&w, &["sc.say", "hi"], &[]);
    assert_refused(&w, &out, &v, "bin_changed", 126);
    assert!(v["error"].as_str().unwrap().contains("not pinned"), "{v}");
    let out = w.run(&[
        "install",
        "--force",
        "--activate",
        &dir.display().to_string(),
    ]);
    assert!(out.status.success(), "{}", w.render(&out));
    let (out, v) = exec_json_env(&w, &["sc.say", "hi"], &[]);
    assert_eq!(v["stdout"], "said hi\n", "{}", w.render(&out));
}
