//! `hcp install` interrupted at every named step and by real `SIGKILL`s: the next command
//! sees the old pack or the new one, never a mix, and the store stays usable (RUNTIME §3).
//!
//! Deterministic crash points use the debug-build test seam `HCP_TEST_ABORT_AT=<step>`
//! (see `hcp_store::pack::InstallStep`), which calls `std::process::abort()` there.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::World;
use hcp_store::pack::InstallStep;
use hcp_store::pack::record::{files_digest, sha256_tagged};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

const ID: &str = "crash";

fn write_pack(dir: &Path, lead: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let surface = format!(
        r#"{{
  "id": "{ID}",
  "name": "Crash",
  "kind": "composite",
  "binding": {{"mode": "local"}},
  "verbs": {{
    "{ID}.a": {{"description": "a", "cli": ["cat", "--", "{{{{file}}}}"]}},
    "{ID}.b": {{"description": "b", "cli": ["cat", "--", "{{{{file}}}}"]}},
    "{ID}.c": {{"description": "c", "cli": ["true"]}},
    "{ID}.d": {{"description": "d", "cli": ["true"]}},
    "{ID}.e": {{"description": "e", "cli": ["true", "--text={{{{text}}}}"]}}
  }}
}}
"#
    );
    let read = r#"{"operation": "read", "privacy": {"land": "local"}}"#;
    let policy = format!(
        r#"{{"surface_id": "{ID}", "version": 1, "verbs": {{
  "{ID}.a": {read}, "{ID}.b": {read}, "{ID}.c": {read}, "{ID}.d": {read},
  "{ID}.e": {{"operation": "write", "privacy": {{"land": "local"}}}}
}}}}
"#
    );
    let harness = format!(
        "# Crash\n\n{lead}\n\n## Hot path\n\n| a | b |\n|---|---|\n| x | y |\n\n## Anti-patterns\n\n- none\n"
    );
    std::fs::write(dir.join("surface.json"), surface).unwrap();
    std::fs::write(dir.join("policy.json"), policy).unwrap();
    std::fs::write(dir.join("HARNESS.md"), harness).unwrap();
    dir.to_path_buf()
}

/// One version of the pack: its source directory and `files_digest`.
struct Version {
    dir: PathBuf,
    digest: String,
    files: BTreeMap<String, Vec<u8>>,
}

fn version(w: &World, name: &str, lead: &str) -> Version {
    let dir = write_pack(&w.root().join(name), lead);
    let mut files = BTreeMap::new();
    let mut digests = BTreeMap::new();
    for f in ["surface.json", "policy.json", "HARNESS.md"] {
        let b = std::fs::read(dir.join(f)).unwrap();
        digests.insert(f.to_owned(), sha256_tagged(&b));
        files.insert(f.to_owned(), b);
    }
    Version {
        dir,
        digest: files_digest(&digests),
        files,
    }
}

/// Checks that the store holds nothing of pack `ID` (when `absent_ok`) or wholly one of
/// `versions`, and that readers and a later writer work. Returns the index of the version
/// found.
fn check(w: &World, versions: &[&Version], absent_ok: bool, ctx: &str) -> Option<usize> {
    let list = w.run(&["list", "--json"]);
    assert!(list.status.success(), "{ctx}: list: {}", w.render(&list));
    let dir = w.hcp_home.join("packs").join(ID);
    if !dir.exists() {
        assert!(absent_ok, "{ctx}: the pack vanished");
        return None;
    }
    let on_disk: BTreeMap<String, Vec<u8>> = ["surface.json", "policy.json", "HARNESS.md"]
        .iter()
        .map(|f| {
            (
                f.to_string(),
                std::fs::read(dir.join(f)).unwrap_or_default(),
            )
        })
        .collect();
    let found = versions
        .iter()
        .position(|v| v.files == on_disk)
        .unwrap_or_else(|| panic!("{ctx}: the installed files are a mix or torn"));
    let show = w.run(&["show", ID, "--json"]);
    assert!(show.status.success(), "{ctx}: show: {}", w.render(&show));
    let v: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap();
    assert_eq!(
        v["files_digest"], versions[found].digest,
        "{ctx}: the record is of another install"
    );
    // Nothing but whole packs under packs/.
    for e in std::fs::read_dir(w.hcp_home.join("packs")).unwrap() {
        assert_eq!(e.unwrap().file_name(), ID, "{ctx}: stray entry in packs/");
    }
    Some(found)
}

/// After a crash the next writer works and leaves `staging/` empty.
fn recover(w: &World, v: &Version, ctx: &str) {
    let out = w.run(&["install", "--force", "--activate", v.dir.to_str().unwrap()]);
    assert!(out.status.success(), "{ctx}: reinstall: {}", w.render(&out));
    assert_eq!(
        std::fs::read_dir(w.hcp_home.join("staging"))
            .unwrap()
            .count(),
        0,
        "{ctx}: staging leftovers survived a writer"
    );
    assert_eq!(check(w, &[v], false, ctx), Some(0));
    let skill = std::fs::read_to_string(w.hcp_home.join("skills").join(ID).join("SKILL.md"));
    assert!(skill.is_ok(), "{ctx}: no SKILL.md after --activate");
}

fn abort_at(w: &World, step: &str, args: &[&str]) -> std::process::Output {
    w.hcp()
        .env("HCP_TEST_ABORT_AT", step)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn a_first_install_killed_at_any_step_leaves_nothing_or_the_pack() {
    for step in InstallStep::ALL {
        let w = World::new();
        let v1 = version(&w, "v1", "First.");
        let ctx = format!("first install, abort at `{}`", step.name());
        let out = abort_at(
            &w,
            step.name(),
            &["install", "--activate", v1.dir.to_str().unwrap()],
        );
        let reached = step != InstallStep::OldRemoved;
        assert_eq!(
            out.status.code().is_none(),
            reached,
            "{ctx}: {}",
            w.render(&out)
        );
        check(&w, &[&v1], true, &ctx);
        recover(&w, &v1, &ctx);
    }
}

#[test]
fn a_reinstall_killed_at_any_step_leaves_the_old_pack_or_the_new_one() {
    for step in InstallStep::ALL {
        let w = World::new();
        let v1 = version(&w, "v1", "First.");
        let v2 = version(&w, "v2", "Second.");
        let ok = w.run(&["install", "--activate", v1.dir.to_str().unwrap()]);
        assert!(ok.status.success());
        let ctx = format!("reinstall, abort at `{}`", step.name());
        let out = abort_at(
            &w,
            step.name(),
            &["install", "--force", "--activate", v2.dir.to_str().unwrap()],
        );
        assert!(
            out.status.code().is_none(),
            "{ctx}: not reached: {}",
            w.render(&out)
        );
        let found = check(&w, &[&v1, &v2], false, &ctx);
        // Before the swap the old pack is there, from it on the new one.
        let swapped = InstallStep::ALL
            .iter()
            .position(|s| *s == step)
            .is_some_and(|i| i >= 4);
        assert_eq!(found, Some(usize::from(swapped)), "{ctx}");
        // The pack stays usable: activation works and describes what is installed.
        let act = w.run(&["activate", ID]);
        assert!(act.status.success(), "{ctx}: {}", w.render(&act));
        let skill =
            std::fs::read_to_string(w.hcp_home.join("skills").join(ID).join("SKILL.md")).unwrap();
        let lead = if swapped { "Second." } else { "First." };
        assert!(skill.contains(lead), "{ctx}: {skill}");
        recover(&w, &v2, &ctx);
    }
}

#[test]
fn installs_killed_with_sigkill_at_varied_moments_never_leave_a_mix() {
    let w = World::new();
    let v1 = version(&w, "v1", "First.");
    let v2 = version(&w, "v2", "Second.");
    assert!(
        w.run(&["install", "--activate", v1.dir.to_str().unwrap()])
            .status
            .success()
    );
    // How long a whole install takes here: the kills are spread over 0–125 % of it.
    let t = Instant::now();
    assert!(
        w.run(&["install", "--force", "--activate", v1.dir.to_str().unwrap()])
            .status
            .success()
    );
    let full = t.elapsed();
    let mut killed = 0;
    for i in 0..40u32 {
        let v = if i % 2 == 0 { &v2 } else { &v1 };
        let mut child = std::process::Command::new(common::hcp_bin())
            .env_clear()
            .env("HOME", &w.home)
            .env("HCP_HOME", &w.hcp_home)
            .env("PATH", w.path_var())
            .current_dir(&w.work)
            .args(["install", "--force", "--activate", v.dir.to_str().unwrap()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Vary the moment of the kill by spinning (this times the kill; it synchronises
        // nothing: every outcome is checked).
        let wait = full * i / 32;
        let t = Instant::now();
        while t.elapsed() < wait {
            std::hint::spin_loop();
        }
        child.kill().unwrap();
        let status = child.wait().unwrap();
        if status.code().is_none() {
            killed += 1;
        }
        check(&w, &[&v1, &v2], false, &format!("kill #{i} after {wait:?}"));
    }
    eprintln!(
        "{killed} of 40 installs were killed before they finished (a whole one takes {full:?})"
    );
    recover(&w, &v1, "after the kills");
}

#[test]
fn readers_racing_reinstalls_see_one_install_or_the_other() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let w = World::new();
    let v1 = version(&w, "v1", "First.");
    let v2 = version(&w, "v2", "Second.");
    assert!(
        w.run(&["install", "--activate", v1.dir.to_str().unwrap()])
            .status
            .success()
    );
    let done = AtomicBool::new(false);
    let mut reads = 0;
    std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            for i in 0..20 {
                let v = if i % 2 == 0 { &v2 } else { &v1 };
                let out = w.run(&["install", "--force", "--activate", v.dir.to_str().unwrap()]);
                assert!(out.status.success(), "{}", w.render(&out));
            }
            done.store(true, Ordering::SeqCst);
        });
        while !done.load(Ordering::SeqCst) {
            let show = w.run(&["show", ID, "--json"]);
            assert!(show.status.success(), "read #{reads}: {}", w.render(&show));
            let v: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap();
            assert!(
                v["files_digest"] == v1.digest || v["files_digest"] == v2.digest,
                "read #{reads}: {}",
                v["files_digest"]
            );
            reads += 1;
        }
        writer.join().unwrap();
    });
    eprintln!("{reads} reads raced 20 reinstalls");
}

/// Whether the store's skill of `ID` and its activation agree: both present or neither.
fn skill_and_activation(w: &World) -> (bool, bool) {
    let skill = w.hcp_home.join("skills").join(ID).join("SKILL.md").exists();
    let active = w.hcp_home.join("state/active").join(ID).exists();
    (skill, active)
}

#[test]
fn the_next_writer_repairs_a_skill_an_interrupted_install_left_behind() {
    for step in InstallStep::ALL {
        let ctx = format!("abort at `{}`, then another install", step.name());
        // A reinstall of an active pack: its skill must describe the copy installed.
        let w = World::new();
        let v1 = version(&w, "v1", "First.");
        let v2 = version(&w, "v2", "Second.");
        assert!(
            w.run(&["install", "--activate", v1.dir.to_str().unwrap()])
                .status
                .success()
        );
        let _ = abort_at(
            &w,
            step.name(),
            &["install", "--force", "--activate", v2.dir.to_str().unwrap()],
        );
        let other = write_pack(&w.root().join("other"), "Other.");
        let s = std::fs::read_to_string(other.join("surface.json"))
            .unwrap()
            .replace(ID, "other-pack");
        std::fs::write(other.join("surface.json"), s).unwrap();
        let p = std::fs::read_to_string(other.join("policy.json"))
            .unwrap()
            .replace(ID, "other-pack");
        std::fs::write(other.join("policy.json"), p).unwrap();
        let out = w.run(&["install", other.to_str().unwrap()]);
        assert!(out.status.success(), "{ctx}: {}", w.render(&out));
        let record =
            std::fs::read_to_string(w.hcp_home.join("packs").join(ID).join(".hcp/record.json"))
                .unwrap();
        let lead = if record.contains(&v2.digest) {
            "Second."
        } else {
            "First."
        };
        let skill =
            std::fs::read_to_string(w.hcp_home.join("skills").join(ID).join("SKILL.md")).unwrap();
        assert!(
            skill.contains(lead),
            "{ctx}: the skill does not describe the installed copy:\n{skill}"
        );
        assert_eq!(skill_and_activation(&w), (true, true), "{ctx}");

        // A first install with --activate: skill and activation agree afterwards.
        let w = World::new();
        let v1 = version(&w, "v1", "First.");
        let _ = abort_at(
            &w,
            step.name(),
            &["install", "--activate", v1.dir.to_str().unwrap()],
        );
        let out = w.run(&["install", other.to_str().unwrap()]);
        assert!(out.status.success(), "{ctx}: {}", w.render(&out));
        let (skill, active) = skill_and_activation(&w);
        assert_eq!(skill, active, "{ctx}: skill {skill}, active {active}");
    }
}
