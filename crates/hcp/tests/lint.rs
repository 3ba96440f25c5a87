//! `hcp lint` driven through the built binary: exit status, stdout and stderr of each bad
//! input of RUNTIME §2, snapshotted. Committed fixture packs live in
//! `crates/lint/tests/fixtures/` (the valid pack plus one defect each); symlinks, secrets
//! and odd names are made here at run time in the test's temporary directory.
//!
//! Commands run with the fixture or temporary directory as working directory and name the
//! packs relatively, so output holds no machine path.

#![allow(clippy::unwrap_used)]

mod common;

use common::World;
use std::path::{Path, PathBuf};
use std::process::Output;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../lint/tests/fixtures")
        .canonicalize()
        .unwrap()
}

/// `hcp` with a clean environment, run in `cwd` (lint needs no example bins on `PATH`).
fn hcp_in(w: &World, cwd: &Path, args: &[&str]) -> Output {
    assert_cmd::Command::new(common::hcp_bin())
        .env_clear()
        .env("HOME", &w.home)
        .env("HCP_HOME", &w.hcp_home)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("LANG", "C")
        .env("NO_COLOR", "1")
        .current_dir(cwd)
        .args(args)
        .output()
        .unwrap()
}

/// Exit code, stdout and stderr as one text, the world's temporary root as `[TMP]`.
fn render(w: &World, out: &Output) -> String {
    let text = format!(
        "exit: {}\n--- stdout\n{}--- stderr\n{}",
        out.status
            .code()
            .map_or("signal".to_string(), |c| c.to_string()),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    text.replace(&w.root().display().to_string(), "[TMP]")
}

/// `hcp lint ARGS` in the fixture directory.
fn lint_fixtures(args: &[&str]) -> (World, Output) {
    let w = World::new();
    let mut all = vec!["lint"];
    all.extend_from_slice(args);
    let out = hcp_in(&w, &fixtures(), &all);
    (w, out)
}

/// A copy of the valid fixture at `[TMP]/pack`, changed by `edit`, linted as `pack`.
fn lint_made(edit: impl FnOnce(&Path)) -> (World, Output) {
    let w = World::new();
    let dir = w.root().join("pack");
    std::fs::create_dir(&dir).unwrap();
    for f in ["surface.json", "policy.json", "HARNESS.md"] {
        std::fs::copy(fixtures().join("valid").join(f), dir.join(f)).unwrap();
    }
    edit(&dir);
    let out = hcp_in(&w, &w.root(), &["lint", "pack"]);
    (w, out)
}

/// The snapshot of linting one committed fixture, with its expected exit status.
fn case(fixture: &str, exit: i32) {
    let (w, out) = lint_fixtures(&[fixture]);
    assert_eq!(out.status.code(), Some(exit), "{}", render(&w, &out));
    insta::assert_snapshot!(fixture.replace("--", "__"), render(&w, &out));
}

#[test]
fn a_clean_pack_exits_0_and_says_so() {
    case("valid", 0);
}

#[test]
fn a_missing_pack_file_is_an_error() {
    case("missing_file", 1);
    case("missing_file--skill", 1);
    let (w, out) = lint_made(|d| std::fs::remove_file(d.join("surface.json")).unwrap());
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!("missing_surface", render(&w, &out));
}

#[test]
fn json_syntax_and_shape_errors_name_line_and_column() {
    case("bad_json", 1);
    case("bad_json--trailing-comma", 1);
    case("bad_json--confirm-yes", 1);
    case("bad_json--missing-field", 1);
}

#[test]
fn unknown_fields_and_repeated_keys_are_refused() {
    case("unknown_field", 1);
    case("unknown_field--lands", 1);
    case("unknown_field--surface", 1);
    case("duplicate_key", 1);
    case("duplicate_key--surface", 1);
}

#[test]
fn bad_tokens_are_refused() {
    case("bad_land", 1);
    case("bad_operation", 1);
    case("bad_version", 1);
    case("bad_version--string", 1);
    case("confirm_on_read", 1);
}

#[test]
fn coverage_errors() {
    case("missing_verb", 1);
    case("extra_verb", 1);
    case("missing_stimulus", 1);
    case("extra_stimulus", 1);
    case("write_stimulus", 1);
    case("surface_id_mismatch", 1);
    case("connect_not_write", 1);
}

#[test]
fn bad_pack_ids() {
    for v in ["uppercase", "dotdot", "slash", "long", "fullwidth"] {
        case(&format!("bad_pack_id--{v}"), 1);
    }
}

#[test]
fn exec_wrapper_bins_are_refused() {
    for v in ["sh", "bash", "env", "xargs", "python-c"] {
        case(&format!("exec_wrapper_bin--{v}"), 1);
    }
}

#[test]
fn command_shape_errors() {
    case("cli_bin_mismatch", 1);
    case("bad_placeholder", 1);
    case("bad_placeholder--partial", 1);
    case("reserved_placeholder", 1);
    case("reserved_placeholder--confirm", 1);
    case("bad_binding", 1);
    case("bad_binding--control", 1);
    case("bad_openapi", 1);
    case("unknown_operation", 1);
}

#[test]
fn warnings_alone_exit_0() {
    for f in [
        "confirm_not_mirrored",
        "verb_count",
        "skill_too_long",
        "skill_missing_section",
        "absolute_path_in_skill",
        "extra_file",
        "pass_through_present",
    ] {
        case(f, 0);
    }
}

#[test]
fn symlinks_inside_the_pack_are_refused() {
    let (w, out) = lint_made(|d| {
        std::os::unix::fs::symlink("/etc/passwd", d.join("passwd")).unwrap();
        std::os::unix::fs::symlink("HARNESS.md", d.join("README.md")).unwrap();
    });
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!("symlinks", render(&w, &out));
}

#[test]
fn secrets_are_refused() {
    let (w, out) = lint_made(|d| {
        std::fs::write(d.join(".env"), "TOKEN=x\n").unwrap();
        std::fs::create_dir(d.join("secrets")).unwrap();
        std::fs::write(d.join("secrets/token"), "x\n").unwrap();
    });
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!("secrets", render(&w, &out));
}

#[test]
fn an_entry_named_with_dot_dot_is_refused() {
    let (w, out) = lint_made(|d| std::fs::write(d.join("..surface.json"), "{}").unwrap());
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!("dot_dot_entry", render(&w, &out));
}

#[test]
fn several_packs_in_one_run_and_as_json() {
    let (w, out) = lint_fixtures(&["valid", "bad_land", "extra_file"]);
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!("several", render(&w, &out));
    let (_w, out) = lint_fixtures(&["--json", "valid", "bad_land", "extra_file"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stderr.is_empty());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    insta::assert_json_snapshot!("several_json", v);
    assert_eq!(v[1]["diagnostics"][0]["path"], "bad_land/policy.json");
    assert_eq!(v[1]["diagnostics"][0]["line"], 7);
    assert_eq!(v[2]["ok"], true);
}

#[test]
fn warnings_only_json_exits_0() {
    let (_w, out) = lint_fixtures(&["--json", "extra_file"]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["warnings"], 2);
}

#[test]
fn a_dir_that_does_not_exist_is_a_usage_error() {
    let (w, out) = lint_fixtures(&["valid", "no-such-pack"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "nothing is linted on a usage error");
    insta::assert_snapshot!("no_such_dir", render(&w, &out));
}

#[test]
fn a_bad_dir_with_json_is_a_json_refusal_on_stdout() {
    let (_w, out) = lint_fixtures(&["--json", "no-such-pack"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stderr.is_empty());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["code"], "bad_pack_dir");
    assert_eq!(v["message"], "`no-such-pack` does not exist");
}

#[test]
fn a_file_is_not_a_pack_dir() {
    let (w, out) = lint_fixtures(&["valid/surface.json"]);
    assert_eq!(out.status.code(), Some(2));
    insta::assert_snapshot!("not_a_dir", render(&w, &out));
}

#[test]
fn a_symlinked_pack_dir_is_refused() {
    let w = World::new();
    std::os::unix::fs::symlink(fixtures().join("valid"), w.root().join("link")).unwrap();
    let out = hcp_in(&w, &w.root(), &["lint", "link"]);
    assert_eq!(out.status.code(), Some(2));
    insta::assert_snapshot!("symlinked_dir", render(&w, &out));
}

#[test]
fn several_bad_dirs_are_all_named() {
    let (w, out) = lint_fixtures(&["nope-1", "valid/HARNESS.md"]);
    assert_eq!(out.status.code(), Some(2));
    insta::assert_snapshot!("several_bad_dirs", render(&w, &out));
}

#[test]
fn no_dir_is_a_usage_error() {
    let (_w, out) = lint_fixtures(&[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("<DIR>"));
}

/// The gold packs are the examples a newcomer copies: `hcp lint packs/*` finds nothing to
/// warn of, and each installs without a word on stderr.
#[test]
fn the_gold_packs_lint_and_install_without_a_warning() {
    common::example_bins();
    let w = World::new();
    let packs = common::repo_root().join("packs");
    let mut ids: Vec<String> = std::fs::read_dir(&packs)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    ids.sort();
    // The store made on purpose first (an install that makes one says so on stderr).
    w.init();
    let mut args = vec!["lint"];
    args.extend(ids.iter().map(String::as_str));
    let out = hcp_in(&w, &packs, &args);
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned()
        ),
        (Some(0), String::new()),
        "{}",
        render(&w, &out)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("0 errors, 0 warnings in {} packs\n", ids.len())
    );
    for id in &ids {
        let out = w.run(&[
            "install",
            "--activate",
            &packs.join(id).display().to_string(),
        ]);
        assert!(out.status.success(), "{id}: {}", w.render(&out));
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            "",
            "{id}: {}",
            w.render(&out)
        );
    }
}
