//! What a new user meets walking README.md, driven through the built binary: each mistake
//! answered with its stable code and a hint naming the next command, the store as it was.
//! A pack directory that is none, a `HCP_HOME` that is a directory of other files, a grant
//! on a pack that is not installed, a typo'd target of `hcp show`, and the hint of a call's
//! refusal naming the call's pack. (An `openapi` verb whose server cannot be reached:
//! `openapi_exec.rs`.)

#![allow(clippy::unwrap_used)]

mod common;

use common::World;
use serde_json::Value;
use std::process::Output;

macro_rules! snap {
    ($name:expr, $text:expr) => {
        insta::with_settings!({ prepend_module_to_snapshot => true }, {
            insta::assert_snapshot!($name, $text);
        })
    };
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn s(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

/// The names in `dir`, sorted.
fn names(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn lint_install_and_promote_say_the_same_of_a_directory_that_is_no_pack() {
    let w = World::new();
    std::fs::write(w.work.join("a-file"), "x").unwrap();
    for (dir, said) in [
        ("no-such-pack", "error: `no-such-pack` does not exist"),
        ("a-file", "error: `a-file` is not a directory"),
    ] {
        let lint = w.run(&["lint", dir]);
        let install = w.run(&["install", dir]);
        let promote = w.run(&["pack", "promote", dir]);
        for (what, o) in [("install", &install), ("pack promote", &promote)] {
            assert_eq!(
                w.render(o),
                w.render(&lint),
                "`hcp {what} {dir}` says what `hcp lint {dir}` says"
            );
        }
        assert_eq!(code(&lint), 2, "{}", w.render(&lint));
        assert!(stderr(&lint).starts_with(said), "{}", w.render(&lint));
        assert!(stderr(&lint).contains("code: bad_pack_dir"));
        assert!(!w.hcp_home.exists(), "a refused install made a store");
    }
    snap!(
        "no_such_pack_dir",
        w.render(&w.run(&["install", "no-such-pack"]))
    );
    // With a store, install says the same.
    w.init();
    let o = w.run(&["install", "no-such-pack"]);
    assert_eq!(w.render(&o), w.render(&w.run(&["lint", "no-such-pack"])));
}

#[test]
fn init_makes_no_store_among_files_of_their_own() {
    let w = World::new();
    std::fs::create_dir_all(&w.hcp_home).unwrap();
    std::fs::write(w.hcp_home.join("notes.txt"), "mine").unwrap();
    std::fs::create_dir(w.hcp_home.join("src")).unwrap();
    // Every command that needs a store says what `hcp init` would do there.
    let o = w.run(&["list"]);
    assert_eq!(code(&o), 66, "{}", w.render(&o));
    snap!("no_store_among_files", w.render(&o));
    // And `hcp init` does it: it refuses, and writes nothing.
    let o = w.run(&["init"]);
    snap!("init_among_files", w.render(&o));
    assert_eq!(code(&o), 74);
    assert_eq!(names(&w.hcp_home), ["notes.txt", "src"]);
    // Nor does an install make one there.
    let o = w.run(&["install", s(&common::gold_pack("echo"))]);
    assert_eq!(code(&o), 74, "{}", w.render(&o));
    assert!(
        stderr(&o).contains("code: store_unusable"),
        "{}",
        w.render(&o)
    );
    assert_eq!(names(&w.hcp_home), ["notes.txt", "src"]);
}

#[test]
fn init_makes_the_store_in_an_empty_directory_or_beside_its_config() {
    let w = World::new();
    std::fs::create_dir_all(&w.hcp_home).unwrap();
    let o = w.run(&["list"]);
    assert_eq!(code(&o), 66);
    assert!(
        stderr(&o).contains("hint: `hcp init` makes a store in it;"),
        "{}",
        w.render(&o)
    );
    let config = r#"{"packs": {"tasks": {"server": "http://127.0.0.1:9/v1"}}}"#;
    std::fs::write(w.hcp_home.join("config.json"), config).unwrap();
    let o = w.run(&["list"]);
    assert!(
        stderr(&o).contains("hint: `hcp init` makes a store in it, keeping its `config.json`;"),
        "{}",
        w.render(&o)
    );
    w.init();
    assert_eq!(
        std::fs::read_to_string(w.hcp_home.join("config.json")).unwrap(),
        config
    );
    let o = w.run(&["list"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
}

#[test]
fn a_grant_on_a_pack_that_is_not_installed_is_refused_with_the_nearest_ids() {
    let w = World::with_store();
    let o = w.run(&["install", s(&common::gold_pack("transit"))]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let trail = std::fs::read(w.hcp_home.join("audit/audit.jsonl")).unwrap();
    let o = w.run(&["grant", "agent", "trnsit", "verb.exec.read"]);
    snap!("grant_not_installed", w.render(&o));
    assert_eq!(code(&o), 66);
    // Nothing granted, nothing recorded.
    assert_eq!(
        std::fs::read(w.hcp_home.join("audit/audit.jsonl")).unwrap(),
        trail
    );
    let v: Value = serde_json::from_slice(&w.run(&["grant", "--list", "--json"]).stdout).unwrap();
    assert_eq!(v, serde_json::json!([]));
    // An installed pack, and `*`, are granted.
    for pack in ["transit", "*"] {
        let o = w.run(&["grant", "agent", pack, "verb.exec.read"]);
        assert_eq!(code(&o), 0, "{pack}: {}", w.render(&o));
    }
    // Every owner command that names a pack says the same of a typo.
    for cmd in ["uninstall", "activate", "deactivate", "connect"] {
        let o = w.run(&[cmd, "trnsit"]);
        assert_eq!(code(&o), 66, "{cmd}: {}", w.render(&o));
        assert!(
            stderr(&o).contains("hint: did you mean `transit`?"),
            "{cmd}: {}",
            w.render(&o)
        );
    }
    // A revoke of a pack no longer installed still takes its grants back.
    assert_eq!(code(&w.run(&["uninstall", "transit"])), 0);
    let o = w.run(&["revoke", "agent", "transit"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
}

#[test]
fn show_of_a_typo_says_did_you_mean_as_exec_does() {
    let w = World::with_store();
    let o = w.run(&["install", s(&common::gold_pack("transit"))]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    // `hcp exec` of a typo: its "did you mean".
    let o = w.run(&["exec", "transit.fnd", "x"]);
    assert!(
        stderr(&o).contains("did you mean `transit.find`?"),
        "{}",
        w.render(&o)
    );
    // `hcp show PACK.VERB --view` of the same typo, of an inactive pack too.
    let o = w.run(&["show", "transit.fnd", "--view"]);
    snap!("show_view_typo", w.render(&o));
    assert_eq!(code(&o), 66);
    // `hcp show` of a typo'd pack id.
    let o = w.run(&["show", "trnsit"]);
    snap!("show_pack_typo", w.render(&o));
    assert_eq!(code(&o), 66);
    // `hcp show PACK.VERB` without `--view`: it is a verb, and how to see it.
    let o = w.run(&["show", "transit.find"]);
    snap!("show_verb_without_view", w.render(&o));
    assert_eq!(code(&o), 66);
}

#[test]
fn a_call_refusal_hint_names_the_calls_pack() {
    common::example_bins();
    let w = World::with_store();
    let o = w.run(&["install", "--activate", s(&common::gold_pack("transit"))]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let o = w
        .hcp()
        .args(["exec", "--envelope", "-"])
        .write_stdin(r#"{"pack_id": "transit", "verb_key": "find", "args": {"query": "a\u0000b"}}"#)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (code(&o), &v["code"], &v["hint"]),
        (
            65,
            &serde_json::json!("arg_invalid"),
            &serde_json::json!("see the verb's arguments with `hcp show transit`")
        ),
        "{}",
        w.render(&o)
    );
}
