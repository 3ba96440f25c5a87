//! The skill journal extends to the exported copies: a writer killed between the steps of
//! an activation or a deactivation is finished by the next writer.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::pack::{BinLookup, CheckedPack, InstallOptions, install};
use pretty_assertions::assert_eq;
use std::path::Path;

fn write_pack(dir: &Path, id: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("surface.json"),
        format!(
            r#"{{"id": "{id}", "name": "T", "kind": "composite", "binding": {{"mode": "local"}},
  "verbs": {{"{id}.get": {{"description": "get", "cli": ["cat", "{{{{file}}}}"]}}}}}}"#
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("policy.json"),
        format!(
            r#"{{"surface_id": "{id}", "version": 1,
  "verbs": {{"{id}.get": {{"operation": "read", "privacy": {{"land": "local"}}}}}}}}"#
        ),
    )
    .unwrap();
    std::fs::write(dir.join("HARNESS.md"), "# T\n\nOne.\n").unwrap();
}

/// A store with pack `t` installed (inactive), exporting to `<tmp>/skills`.
fn world() -> (tempfile::TempDir, Home, std::path::PathBuf) {
    let t = tempfile::tempdir().unwrap();
    crate::made::init(&t.path().join("home"), crate::audit::Actor::owner(), None).unwrap();
    let home = Home::open(t.path().join("home")).unwrap();
    let out = t.path().join("skills");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::create_dir_all(home.root()).unwrap();
    std::fs::write(
        home.root().join("config.json"),
        format!(r#"{{"skills": {{"export": ["{}"]}}}}"#, out.display()),
    )
    .unwrap();
    for id in ["t", "u"] {
        write_pack(&t.path().join("src").join(id), id);
    }
    install_src(&home, t.path(), "t");
    (t, home, out)
}

fn install_src(home: &Home, root: &Path, id: &str) {
    let o = InstallOptions {
        lookup: BinLookup {
            path: Some("/usr/bin:/bin".into()),
            cwd: "/".into(),
        },
        ..InstallOptions::default()
    };
    let dir = root.join("src").join(id);
    let files = hcp_model::PACK_FILES.map(|n| std::fs::read(dir.join(n)).unwrap());
    let checked = CheckedPack::parse(files, dir.canonicalize().unwrap()).unwrap();
    install(home, &checked, &o).unwrap();
}

fn pending(home: &Home) -> usize {
    std::fs::read_dir(home.dir(StoreDir::State).join("skill-pending"))
        .map(|rd| rd.count())
        .unwrap_or(0)
}

#[test]
fn a_killed_activation_is_finished_by_the_next_writer() {
    let (t, home, out) = world();
    // An activation killed after the store's skill and the export, before the marker.
    {
        let lock = StoreLock::acquire(&home).unwrap();
        journal_write(&home, "t", Journal::Activate).unwrap();
        let pack = load(&home, "t").unwrap();
        write_skill_locked(&home, &lock, &pack).unwrap();
    }
    assert!(!crate::pack::is_active(&home, "t"));
    assert!(out.join("t/SKILL.md").exists());
    // The next writer (an install of another pack) completes it.
    install_src(&home, t.path(), "u");
    assert!(crate::pack::is_active(&home, "t"));
    assert!(out.join("t/SKILL.md").exists());
    assert_eq!(pending(&home), 0);
}

#[test]
fn a_killed_deactivation_is_finished_by_the_next_writer() {
    let (t, home, out) = world();
    activate(&home, "t").unwrap();
    assert_eq!(export::ledger(&home, "t"), vec![out.clone()]);
    // A deactivation killed after the marker went, before the exported copy did.
    {
        let _lock = StoreLock::acquire(&home).unwrap();
        journal_write(&home, "t", Journal::Deactivate).unwrap();
        std::fs::remove_file(marker_path(&home, "t")).unwrap();
    }
    assert!(out.join("t/SKILL.md").exists());
    install_src(&home, t.path(), "u");
    assert!(!out.join("t").exists());
    assert!(!skill_path(&home, "t").exists());
    assert!(export::ledger(&home, "t").is_empty());
    assert_eq!(pending(&home), 0);
}

#[test]
fn a_refused_activation_writes_nothing() {
    let (_t, home, out) = world();
    std::fs::create_dir_all(out.join("t")).unwrap();
    std::fs::write(out.join("t/SKILL.md"), "---\nname: t\n---\n").unwrap();
    let e = activate(&home, "t").unwrap_err();
    assert_eq!(e.code(), "skill_collision");
    assert!(!skill_path(&home, "t").exists());
    assert!(!crate::pack::is_active(&home, "t"));
    assert!(export::ledger(&home, "t").is_empty());
    assert_eq!(pending(&home), 0);
    assert_eq!(
        std::fs::read_to_string(out.join("t/SKILL.md")).unwrap(),
        "---\nname: t\n---\n"
    );
}
