//! The pack store through the built `hcp`: install, uninstall, list, show, activate,
//! deactivate (RUNTIME §3), each test in its own temporary `HCP_HOME`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::World;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;

/// Snapshot filters for values that change per run or per machine.
fn filters() -> Vec<(&'static str, &'static str)> {
    vec![
        (r"sha256:[0-9a-f]{64}", "sha256:[HASH]"),
        (r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z", "[TIME]"),
    ]
}

macro_rules! snap {
    ($name:expr, $text:expr) => {
        insta::with_settings!({ filters => filters(), prepend_module_to_snapshot => true }, {
            insta::assert_snapshot!($name, $text);
        })
    };
}

const HARNESS: &str = "# Notes\n\nKeep short notes in a local file.\n\n## Hot path\n\n\
| task | command |\n|---|---|\n| read the notes | `hcp exec notes.list --file notes.txt` |\n\n\
## Anti-patterns\n\n- Do not edit the notes file by hand while a write runs.\n";

/// A lint-clean composite pack whose programs are bare `cat` and `true` from `PATH`.
/// `name` and `harness` vary it; `extra` adds a verb.
fn notes_pack(dir: &Path, id: &str, name: &str, harness: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let surface = serde_json::json!({
        "id": id,
        "name": name,
        "kind": "composite",
        "binding": {"mode": "local"},
        "verbs": {
            format!("{id}.list"): {"description": "print the notes", "cli": ["cat", "--", "{{file}}"]},
            format!("{id}.show"): {"description": "print one file", "cli": ["cat", "--", "{{file}}"]},
            format!("{id}.count"): {"description": "count notes", "cli": ["true", "--limit={{limit?}}"]},
            format!("{id}.add"): {"description": "add a note", "cli": ["true", "--text={{text}}"]},
            format!("{id}.wipe"): {"description": "remove every note", "cli": ["true", "--confirm"]}
        }
    });
    let entry =
        |op: &str, land: &str| serde_json::json!({"operation": op, "privacy": {"land": land}});
    let mut wipe = entry("write", "local");
    wipe["confirm"] = Value::Bool(true);
    let policy = serde_json::json!({
        "surface_id": id,
        "version": 1,
        "verbs": {
            format!("{id}.list"): entry("read", "local"),
            format!("{id}.show"): entry("read", "local"),
            format!("{id}.count"): entry("read", "personal"),
            format!("{id}.add"): entry("write", "local"),
            format!("{id}.wipe"): wipe,
        }
    });
    std::fs::write(dir.join("surface.json"), format!("{surface:#}\n")).unwrap();
    std::fs::write(dir.join("policy.json"), format!("{policy:#}\n")).unwrap();
    std::fs::write(dir.join("HARNESS.md"), harness).unwrap();
    dir.to_path_buf()
}

fn src(w: &World, id: &str) -> PathBuf {
    notes_pack(&w.root().join("src").join(id), id, "Notes", HARNESS)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn json(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Every file under `dir` with its bytes, sorted (the store's whole state).
fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(root: &Path, d: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        let Ok(rd) = std::fs::read_dir(d) else { return };
        for e in rd {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            if p.is_dir() {
                out.push((format!("{rel}/"), Vec::new()));
                walk(root, &p, out);
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

/// The Agent Skills reference validator (`skills-ref`, whose PyPI package installs the
/// command as `skills-ref` or `agentskills`). Missing: a failure under `CI=true`, else
/// `None` with the reason printed.
fn skills_ref() -> Option<String> {
    for cmd in ["skills-ref", "agentskills"] {
        let ok = std::process::Command::new(cmd)
            .arg("--help")
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return Some(cmd.to_owned());
        }
    }
    common::skip::skip("the Agent Skills validator is not installed (`pip install skills-ref`)");
    None
}

/// Validates the skill directory with `skills-ref validate` and returns its front matter
/// as the validator reads it.
fn validate_skill(dir: &Path) -> Option<Value> {
    let cmd = skills_ref()?;
    let out = std::process::Command::new(&cmd)
        .arg("validate")
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{cmd} validate failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let props = std::process::Command::new(&cmd)
        .arg("read-properties")
        .arg(dir)
        .output()
        .unwrap();
    assert!(props.status.success());
    Some(serde_json::from_slice(&props.stdout).unwrap())
}

#[test]
fn install_list_show_activate_deactivate_uninstall() {
    let w = World::new();
    let dir = src(&w, "notes");
    let out = w.run(&["install", s(&dir)]);
    snap!("install", w.render(&out));

    let list = w.run(&["list"]);
    snap!("list", w.render(&list));
    let lj = json(&w.run(&["list", "--json"]));
    let p = &lj["packs"][0];
    assert_eq!(lj["packs"].as_array().unwrap().len(), 1);
    assert_eq!(
        (&p["id"], &p["name"], &p["kind"], &p["active"], &p["verbs"]),
        (
            &Value::from("notes"),
            &Value::from("Notes"),
            &Value::from("composite"),
            &Value::from(false),
            &Value::from(5)
        )
    );

    let show = w.run(&["show", "notes"]);
    snap!("show", w.render(&show));
    let sj = json(&w.run(&["show", "notes", "--json"]));
    let wipe = sj["verbs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["key"] == "notes.wipe")
        .unwrap();
    assert_eq!(wipe["operation"], "write");
    assert_eq!(wipe["confirm"], true);
    assert_eq!(wipe["exec"], "hcp exec notes.wipe --confirm");
    let bins = sj["bins"].as_array().unwrap();
    assert_eq!(
        bins.iter()
            .map(|b| b["program"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["true", "cat"],
        "in the order of the manifest's verbs"
    );
    for b in bins {
        assert!(Path::new(b["path"].as_str().unwrap()).is_absolute());
    }

    // The installed copy is byte-for-byte the source.
    for f in ["surface.json", "policy.json", "HARNESS.md"] {
        assert_eq!(
            std::fs::read(w.hcp_home.join("packs/notes").join(f)).unwrap(),
            std::fs::read(dir.join(f)).unwrap(),
            "{f}"
        );
    }

    let act = w.run(&["activate", "notes"]);
    snap!("activate", w.render(&act));
    let skill_dir = w.hcp_home.join("skills/notes");
    let skill = std::fs::read_to_string(skill_dir.join("SKILL.md")).unwrap();
    snap!("skill_md", skill);
    assert!(w.hcp_home.join("state/active/notes").is_file());
    assert_eq!(
        json(&w.run(&["list", "--json"]))["packs"][0]["active"],
        true
    );
    if let Some(props) = validate_skill(&skill_dir) {
        assert_eq!(props["name"], "notes");
    }

    let de = w.run(&["deactivate", "notes"]);
    snap!("deactivate", w.render(&de));
    assert!(!skill_dir.exists());
    assert!(!w.hcp_home.join("state/active/notes").exists());

    w.run(&["activate", "notes"]);
    let un = w.run(&["uninstall", "notes"]);
    snap!("uninstall", w.render(&un));
    assert!(!w.hcp_home.join("packs/notes").exists());
    assert!(!skill_dir.exists());
    assert!(!w.hcp_home.join("state/active/notes").exists());
    snap!("list_empty", w.render(&w.run(&["list"])));
    assert_eq!(
        json(&w.run(&["list", "--json"]))["packs"],
        serde_json::json!([])
    );
}

#[test]
fn install_with_activate_does_both() {
    let w = World::new();
    let dir = src(&w, "notes");
    let out = w.run(&["install", "--activate", s(&dir)]);
    snap!("install_activate", w.render(&out));
    assert!(w.hcp_home.join("skills/notes/SKILL.md").is_file());
    assert!(w.hcp_home.join("state/active/notes").is_file());
}

#[test]
fn reinstall_without_force_is_refused_and_changes_nothing() {
    let w = World::new();
    let dir = src(&w, "notes");
    assert!(w.run(&["install", "--activate", s(&dir)]).status.success());
    std::fs::write(dir.join("HARNESS.md"), format!("{HARNESS}\nMore.\n")).unwrap();
    let before = tree(&w.hcp_home);
    let out = w.run(&["install", s(&dir)]);
    snap!("already_installed", w.render(&out));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(tree(&w.hcp_home), before);
}

#[test]
fn force_reinstall_records_a_content_change_and_rewrites_the_skill() {
    let w = World::new();
    let dir = src(&w, "notes");
    assert!(w.run(&["install", "--activate", s(&dir)]).status.success());
    let first = json(&w.run(&["show", "notes", "--json"]));
    assert_eq!(first["content_changed_at"], Value::Null);

    // Same content: no change recorded.
    assert!(w.run(&["install", "--force", s(&dir)]).status.success());
    let same = json(&w.run(&["show", "notes", "--json"]));
    assert_eq!(same["content_changed_at"], Value::Null);
    assert_eq!(same["files_digest"], first["files_digest"]);

    // Changed content: recorded, reported, the active skill follows.
    std::fs::write(
        dir.join("HARNESS.md"),
        HARNESS.replace("short notes", "tidy notes"),
    )
    .unwrap();
    let out = w.run(&["install", "--force", s(&dir)]);
    snap!("reinstall_changed", w.render(&out));
    let changed = json(&w.run(&["show", "notes", "--json"]));
    assert_ne!(changed["files_digest"], first["files_digest"]);
    let at = changed["content_changed_at"].as_str().unwrap().to_owned();
    assert!(changed["active"].as_bool().unwrap());
    let skill = std::fs::read_to_string(w.hcp_home.join("skills/notes/SKILL.md")).unwrap();
    assert!(skill.contains("tidy notes"));

    // A same-content reinstall after a change keeps the change time: a second `--force`
    // does not lift the rug-pull guard.
    assert!(w.run(&["install", "--force", s(&dir)]).status.success());
    let again = json(&w.run(&["show", "notes", "--json"]));
    assert_eq!(again["content_changed_at"].as_str(), Some(at.as_str()));
    assert_eq!(
        std::fs::read_dir(w.hcp_home.join("staging"))
            .unwrap()
            .count(),
        0
    );
}

#[test]
fn lint_errors_refuse_install_and_write_nothing() {
    let w = World::new();
    let dir = src(&w, "notes");
    std::fs::remove_file(dir.join("HARNESS.md")).unwrap();
    let out = w.run(&["install", s(&dir)]);
    snap!("lint_failed", w.render(&out));
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("error[missing_file]"), "{err}");
    assert!(err.contains("code: lint_failed"), "{err}");
    assert!(!w.hcp_home.join("packs").exists());

    // A manifest that does not parse.
    let dir = src(&w, "broken");
    std::fs::write(dir.join("surface.json"), "{\"id\": \"broken\",}").unwrap();
    let out = w.run(&["install", s(&dir)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("code: lint_failed"));
    assert!(!w.hcp_home.join("packs/broken").exists());
}

#[test]
fn a_program_that_cannot_be_found_refuses_install() {
    let w = World::new();
    let dir = src(&w, "notes");
    let text = std::fs::read_to_string(dir.join("surface.json")).unwrap();
    std::fs::write(
        dir.join("surface.json"),
        text.replace("\"true\"", "\"hcp-no-such-program\""),
    )
    .unwrap();
    let out = w.run(&["install", s(&dir)]);
    snap!("bin_missing", w.render(&out));
    assert_eq!(out.status.code(), Some(1));
    assert!(!w.hcp_home.join("packs/notes").exists());
}

#[test]
fn a_relative_program_is_pinned_inside_the_pack_and_never_run() {
    use std::os::unix::fs::PermissionsExt;
    let w = World::new();
    let dir = src(&w, "notes");
    // If install ran the program, it would leave this file.
    let witness = w.root().join("ran");
    let tool = dir.join("bin/tool");
    std::fs::create_dir_all(tool.parent().unwrap()).unwrap();
    std::fs::write(&tool, format!("#!/bin/sh\ntouch {}\n", witness.display())).unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let text = std::fs::read_to_string(dir.join("surface.json")).unwrap();
    std::fs::write(
        dir.join("surface.json"),
        text.replace("\"true\"", "\"bin/tool\""),
    )
    .unwrap();
    let out = w.run(&["install", s(&dir)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sj = json(&w.run(&["show", "notes", "--json"]));
    let pin = sj["bins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["program"] == "bin/tool")
        .unwrap()
        .clone();
    assert_eq!(pin["path"], s(&tool.canonicalize().unwrap()));
    assert_eq!(
        pin["sha256"],
        hcp_store::pack::record::sha256_tagged(&std::fs::read(&tool).unwrap())
    );
    assert!(!witness.exists(), "install ran a program of the pack");

    // Through a symlink: refused, nothing changed.
    let dir2 = src(&w, "linked");
    std::fs::create_dir_all(dir2.join("real")).unwrap();
    std::fs::copy(&tool, dir2.join("real/tool")).unwrap();
    std::os::unix::fs::symlink(dir2.join("real"), dir2.join("bin")).unwrap();
    let text = std::fs::read_to_string(dir2.join("surface.json")).unwrap();
    std::fs::write(
        dir2.join("surface.json"),
        text.replace("\"true\"", "\"bin/tool\""),
    )
    .unwrap();
    let out = w.run(&["install", s(&dir2)]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("symlink"), "{err}");
    assert!(!w.hcp_home.join("packs/linked").exists());
}

#[test]
fn a_symlinked_pack_directory_is_refused() {
    let w = World::new();
    let dir = src(&w, "notes");
    let link = w.root().join("link");
    std::os::unix::fs::symlink(&dir, &link).unwrap();
    let out = w.run(&["install", s(&link)]);
    snap!("symlinked_dir", w.render(&out));
    assert_ne!(out.status.code(), Some(0));
    assert!(!w.hcp_home.join("packs/notes").exists());
}

#[test]
fn unknown_ids_are_not_installed() {
    let w = World::with_store();
    for cmd in ["uninstall", "show", "activate", "deactivate"] {
        let out = w.run(&[cmd, "ghost"]);
        assert_eq!(out.status.code(), Some(66), "{cmd}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("code: not_installed"));
    }
    snap!(
        "uninstall_unknown",
        w.render(&w.run(&["uninstall", "ghost"]))
    );
    let out = w.run(&["show", "../etc"]);
    assert_eq!(out.status.code(), Some(66));
}

#[test]
fn a_home_that_is_a_file_is_unusable() {
    let w = World::new();
    std::fs::write(&w.hcp_home, "not a directory").unwrap();
    let dir = src(&w, "notes");
    for args in [
        &["install", s(&dir)][..],
        &["list"],
        &["show", "notes"],
        &["activate", "notes"],
    ] {
        let out = w.run(args);
        assert_eq!(out.status.code(), Some(74), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("code: store_unusable"));
    }
    snap!("home_is_file", w.render(&w.run(&["install", s(&dir)])));
    assert_eq!(
        std::fs::read_to_string(&w.hcp_home).unwrap(),
        "not a directory"
    );
}

/// Makes a directory unwritable for this process for as long as it lives: `chattr +i`
/// (which binds root too) when running as root, else mode 0555.
struct ReadOnly(PathBuf, bool);

impl ReadOnly {
    fn new(dir: &Path) -> Option<Self> {
        use std::os::unix::fs::MetadataExt;
        // `/proc/self` belongs to this process's effective user.
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
fn a_home_without_write_permission_is_unusable_and_unchanged() {
    let w = World::new();
    let dir = src(&w, "notes");
    assert!(w.run(&["install", s(&dir)]).status.success());
    let other = src(&w, "other");
    let before = tree(&w.hcp_home);
    let Some(guard) = ReadOnly::new(&w.hcp_home) else {
        return common::skip::skip(
            "cannot make a directory read-only here (no `chattr +i` as root)",
        );
    };
    let outs: Vec<(String, Output)> = [
        vec!["install", s(&other)],
        vec!["install", "--force", s(&dir)],
        vec!["activate", "notes"],
        vec!["uninstall", "notes"],
    ]
    .into_iter()
    .map(|a| (a.join(" "), w.run(&a)))
    .collect();
    drop(guard);
    for (args, out) in &outs {
        assert_eq!(out.status.code(), Some(74), "{args}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("code: store_unusable"),
            "{args}"
        );
    }
    snap!("home_read_only", w.render(&outs[0].1));
    assert_eq!(tree(&w.hcp_home), before);
    // Readers still work.
    assert!(w.run(&["list"]).status.success());
}

#[test]
fn the_front_matter_survives_hostile_names() {
    let w = World::new();
    let name = "Evil --- name: \"quoted\" 'single'\nsecond line: yes # not a comment \\ back";
    let dir = notes_pack(&w.root().join("src/evil"), "evil", name, HARNESS);
    let out = w.run(&["install", "--activate", s(&dir)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let skill_dir = w.hcp_home.join("skills/evil");
    let text = std::fs::read_to_string(skill_dir.join("SKILL.md")).unwrap();
    let front = text.split("---\n").nth(1).unwrap();
    assert_eq!(front.lines().count(), 2, "{front}");
    assert!(!front.contains("---"), "{front}");
    if let Some(props) = validate_skill(&skill_dir) {
        let d = props["description"].as_str().unwrap();
        assert!(
            d.starts_with(
                "Evil --- name: \"quoted\" 'single' second line: yes # not a comment \\ back"
            ),
            "{d}"
        );
        assert!(d.chars().count() <= 1024);
    }
}

#[test]
fn a_long_description_is_cut_to_1024_characters() {
    let w = World::new();
    let name = "N".repeat(3000);
    let dir = notes_pack(&w.root().join("src/long"), "long", &name, HARNESS);
    assert!(w.run(&["install", "--activate", s(&dir)]).status.success());
    if let Some(props) = validate_skill(&w.hcp_home.join("skills/long")) {
        assert_eq!(props["description"].as_str().unwrap().chars().count(), 1024);
    }
}

#[test]
fn concurrent_installs_and_activations_lose_nothing() {
    let w = World::new();
    let ids: Vec<String> = (0..8).map(|i| format!("pack-{i}")).collect();
    let dirs: Vec<PathBuf> = ids.iter().map(|id| src(&w, id)).collect();
    let shared = src(&w, "shared");
    let mut children = Vec::new();
    for (i, d) in dirs.iter().enumerate() {
        let mut c = std_cmd(&w);
        c.args(["install", "--activate", s(d)])
            .stderr(std::process::Stdio::piped());
        children.push(c.spawn().unwrap());
        // Several processes replace the same pack at once.
        let mut c = std_cmd(&w);
        c.args(["install", "--force", s(&shared)])
            .stderr(std::process::Stdio::piped());
        if i % 2 == 0 {
            c.arg("--activate");
        }
        children.push(c.spawn().unwrap());
    }
    for c in children {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let lj = json(&w.run(&["list", "--json"]));
    let mut listed: Vec<(String, bool)> = lj["packs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["id"].as_str().unwrap().to_owned(),
                p["active"].as_bool().unwrap(),
            )
        })
        .collect();
    listed.sort();
    let mut want: Vec<(String, bool)> = ids.iter().map(|i| (i.clone(), true)).collect();
    want.push(("shared".into(), true));
    want.sort();
    assert_eq!(listed, want);
    for id in ids.iter().chain(["shared".to_owned()].iter()) {
        assert!(w.run(&["show", id]).status.success(), "{id}");
        assert!(
            w.hcp_home
                .join("skills")
                .join(id)
                .join("SKILL.md")
                .is_file()
        );
    }
    assert_eq!(
        std::fs::read_dir(w.hcp_home.join("staging"))
            .unwrap()
            .count(),
        0
    );
}

/// `hcp` as a `std::process::Command`, with the environment of [`World::hcp`].
fn std_cmd(w: &World) -> std::process::Command {
    let mut c = std::process::Command::new(common::hcp_bin());
    c.env_clear()
        .env("HOME", &w.home)
        .env("HCP_HOME", &w.hcp_home)
        .env("PATH", w.path_var())
        .env("LANG", "C")
        .env("NO_COLOR", "1")
        .current_dir(&w.work)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    c
}

#[test]
fn the_transit_gold_pack_installs_and_activates_as_a_valid_skill() {
    let gold = common::gold_pack("transit");
    if !gold.join("surface.json").exists() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "the gold pack `packs/transit` is missing"
        );
        eprintln!("skipping: the gold pack `packs/transit` is not written yet");
        return;
    }
    let bins = common::example_bins();
    let w = World::new();
    // From the repository root, as the README says.
    let out = w
        .hcp()
        .current_dir(common::repo_root())
        .args(["install", "./packs/transit"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", w.render(&out));
    let act = w.run(&["activate", "transit"]);
    assert!(act.status.success(), "{}", w.render(&act));
    let skill_dir = w.hcp_home.join("skills/transit");
    let text = std::fs::read_to_string(skill_dir.join("SKILL.md")).unwrap();
    assert!(
        text.starts_with("---\nname: transit\ndescription: \""),
        "{text}"
    );
    assert!(text.contains("| verb | command | operation | land | confirm |"));
    if let Some(props) = validate_skill(&skill_dir) {
        assert_eq!(props["name"], "transit");
    }
    let sj = json(&w.run(&["show", "transit", "--json"]));
    let bin = &sj["bins"][0];
    assert_eq!(
        bin["path"].as_str().unwrap(),
        s(&bins.join("hcp-example-transit").canonicalize().unwrap())
    );
}
