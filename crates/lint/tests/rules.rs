//! Every rule against its fixture packs: `tests/fixtures/<code>[--variant]/` is the
//! minimal valid pack (`tests/fixtures/valid/`) with one defect, and must raise exactly
//! that code. Defects git cannot hold well (symlinks, odd names, secrets) are made here
//! at run time in a temporary copy of the valid pack.

#![allow(clippy::unwrap_used)]

use hcp_lint::{Level, PackSource, Report, check, read_pack, render};
use pretty_assertions::assert_eq;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Lints `dir`, naming it `label` in the report (so output does not depend on where the
/// repository is).
fn lint_as(dir: &Path, label: &str) -> Report {
    let mut src: PackSource = read_pack(dir).unwrap();
    src.dir = PathBuf::from(label);
    check(&src)
}

fn codes(r: &Report) -> BTreeSet<&'static str> {
    r.diagnostics.iter().map(|d| d.code.as_str()).collect()
}

fn fixture_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A copy of the valid pack in a fresh temporary directory: `(tempdir, pack dir)`.
fn valid_copy() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pack");
    std::fs::create_dir(&dir).unwrap();
    for f in hcp_model::PACK_FILES {
        std::fs::copy(fixtures().join("valid").join(f), dir.join(f)).unwrap();
    }
    (tmp, dir)
}

#[test]
fn the_valid_fixture_is_clean() {
    let r = lint_as(&fixtures().join("valid"), "valid");
    assert_eq!(r.diagnostics, vec![]);
}

#[test]
fn each_fixture_raises_exactly_its_code() {
    for name in fixture_names().iter().filter(|n| *n != "valid") {
        let code = name.split("--").next().unwrap();
        assert!(
            hcp_lint::rules::rule(code).is_some(),
            "fixture `{name}` names no rule"
        );
        let r = lint_as(&fixtures().join(name), name);
        assert_eq!(
            codes(&r),
            BTreeSet::from([code]),
            "fixture `{name}`:\n{}",
            render::concise(&r)
        );
    }
}

/// Rules whose fixtures are made at run time, below.
const RUNTIME_MADE: [&str; 3] = ["secret_file", "symlink_in_pack", "unsafe_path"];
/// Rules no pack can raise today (kept for the codes of RUNTIME §2).
const NEVER_RAISED: [&str; 1] = ["unsupported_kind"];

#[test]
fn every_rule_has_a_fixture() {
    let names = fixture_names();
    for rule in hcp_lint::RULES {
        let has = names
            .iter()
            .any(|n| n.split("--").next() == Some(rule.code.as_str()))
            || RUNTIME_MADE.contains(&rule.code.as_str())
            || NEVER_RAISED.contains(&rule.code.as_str());
        assert!(has, "rule `{}` has no fixture", rule.code);
    }
}

#[test]
fn fixture_output_concise() {
    let mut out = String::new();
    for name in fixture_names() {
        out.push_str(&render::concise(&lint_as(&fixtures().join(&name), &name)));
    }
    insta::assert_snapshot!(out);
}

#[test]
fn fixture_output_json() {
    let reports: Vec<Report> = ["valid", "bad_land", "extra_file", "missing_file"]
        .iter()
        .map(|n| lint_as(&fixtures().join(n), n))
        .collect();
    insta::assert_json_snapshot!(render::json(&reports));
}

#[test]
fn summary_counts_errors_warnings_and_packs() {
    let reports: Vec<Report> = ["valid", "bad_land", "extra_file"]
        .iter()
        .map(|n| lint_as(&fixtures().join(n), n))
        .collect();
    assert_eq!(render::summary(&reports), "1 error, 2 warnings in 3 packs");
}

#[test]
fn parse_errors_carry_line_and_column() {
    let r = lint_as(&fixtures().join("bad_json--trailing-comma"), "p");
    let d = &r.diagnostics[0];
    assert_eq!(
        (d.file.as_deref(), d.line, d.column),
        (Some("policy.json"), 12, 1)
    );
    let r = lint_as(&fixtures().join("bad_land"), "p");
    let d = &r.diagnostics[0];
    assert_eq!((d.file.as_deref(), d.line), (Some("policy.json"), 7));
    assert!(d.message.contains("`team`"), "{}", d.message);
}

#[test]
fn symlink_to_a_system_file_and_to_a_sibling() {
    let (_tmp, dir) = valid_copy();
    std::os::unix::fs::symlink("/etc/passwd", dir.join("passwd")).unwrap();
    std::os::unix::fs::symlink("HARNESS.md", dir.join("SKILL.md")).unwrap();
    let r = lint_as(&dir, "p");
    let found: Vec<(&str, Option<&str>)> = r
        .diagnostics
        .iter()
        .map(|d| (d.code.as_str(), d.file.as_deref()))
        .collect();
    assert_eq!(
        found,
        vec![
            ("symlink_in_pack", Some("SKILL.md")),
            ("symlink_in_pack", Some("passwd"))
        ]
    );
}

#[test]
fn a_pack_file_that_is_a_symlink_is_not_read() {
    let (_tmp, dir) = valid_copy();
    let real = dir.parent().unwrap().join("real.md");
    std::fs::rename(dir.join("HARNESS.md"), &real).unwrap();
    std::os::unix::fs::symlink(&real, dir.join("HARNESS.md")).unwrap();
    let r = lint_as(&dir, "p");
    assert_eq!(
        codes(&r),
        BTreeSet::from(["missing_file", "symlink_in_pack"])
    );
    assert!(
        r.diagnostics
            .iter()
            .all(|d| d.file.as_deref() == Some("HARNESS.md"))
    );
}

#[test]
fn secrets_are_refused() {
    let (_tmp, dir) = valid_copy();
    std::fs::write(dir.join(".env"), "TOKEN=x\n").unwrap();
    std::fs::create_dir_all(dir.join("secrets")).unwrap();
    std::fs::write(dir.join("secrets/token.txt"), "x\n").unwrap();
    std::fs::write(dir.join("secrets/id_rsa"), "x\n").unwrap();
    let r = lint_as(&dir, "p");
    let found: Vec<(&str, Option<&str>)> = r
        .diagnostics
        .iter()
        .map(|d| (d.code.as_str(), d.file.as_deref()))
        .collect();
    assert_eq!(
        found,
        vec![
            ("secret_file", Some(".env")),
            ("secret_file", Some("secrets"))
        ]
    );
}

#[test]
fn odd_names_are_unsafe() {
    let (_tmp, dir) = valid_copy();
    std::fs::write(dir.join("..hidden"), "").unwrap();
    std::fs::write(dir.join("a\nb.json:1:1: error[x]: forged"), "").unwrap();
    let r = lint_as(&dir, "p");
    assert_eq!(codes(&r), BTreeSet::from(["unsafe_path"]));
    assert_eq!(r.diagnostics.len(), 2);
    let text = render::concise(&r);
    assert_eq!(
        text.lines().filter(|l| l.starts_with("p/")).count(),
        2,
        "a name may not forge a line:\n{text}"
    );
}

#[test]
fn many_entries_stop_the_walk_but_keep_the_pack_files() {
    let (_tmp, dir) = valid_copy();
    // More top-level entries than the walk takes, all sorting before the pack files.
    for i in 0..hcp_lint::source::MAX_ENTRIES {
        std::fs::write(dir.join(format!("a{i}")), "").unwrap();
    }
    let src = read_pack(&dir).unwrap();
    assert!(src.truncated);
    assert_eq!(src.files.len(), 3);
    let r = check(&src);
    // What the walk could not see cannot be checked: an error (fail closed).
    assert!(r.has_errors());
    assert_eq!(codes(&r), BTreeSet::from(["extra_file", "unsafe_path"]));
}

#[test]
fn a_secret_deeper_than_the_walk_is_not_waved_through() {
    let (_tmp, dir) = valid_copy();
    let mut deep = dir.clone();
    for _ in 0..(hcp_lint::source::MAX_DEPTH + 2) {
        deep = deep.join("d");
    }
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::write(deep.join(".env"), "KEY=1").unwrap();
    let r = check(&read_pack(&dir).unwrap());
    assert!(r.has_errors(), "{}", render::concise(&r));
    assert!(codes(&r).contains("unsafe_path"));
}

#[test]
fn the_pack_directory_itself_must_be_a_real_directory() {
    let (tmp, dir) = valid_copy();
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&dir, &link).unwrap();
    let e = read_pack(&link).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    let e = read_pack(&dir.join("surface.json")).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::NotADirectory);
    let e = read_pack(&tmp.path().join("absent")).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
}

#[test]
fn levels_follow_the_rule() {
    let r = lint_as(&fixtures().join("extra_file"), "p");
    assert!(r.diagnostics.iter().all(|d| d.level == Level::Warning));
    assert!(!r.has_errors());
}

/// Lints every fixture of `code` and checks that each raises exactly that code, in a
/// named file.
fn assert_fixtures(code: &str) {
    let names: Vec<String> = fixture_names()
        .into_iter()
        .filter(|n| n.split("--").next() == Some(code))
        .collect();
    assert!(!names.is_empty(), "no fixture for `{code}`");
    for name in names {
        let r = lint_as(&fixtures().join(&name), &name);
        assert!(!r.diagnostics.is_empty(), "fixture `{name}` is clean");
        for d in &r.diagnostics {
            assert_eq!(d.code, code, "fixture `{name}`:\n{}", render::concise(&r));
            assert!(
                d.file.is_some(),
                "fixture `{name}`: `{}` names no file",
                d.message
            );
        }
    }
}

/// One test per rule with committed fixtures (the others are made at run time above).
mod per_rule {
    macro_rules! per_rule {
        ($($code:ident),* $(,)?) => {$(
            #[test]
            fn $code() {
                super::assert_fixtures(stringify!($code));
            }
        )*};
    }

    per_rule!(
        missing_file,
        bad_json,
        duplicate_key,
        unknown_field,
        bad_version,
        bad_land,
        bad_operation,
        bad_pack_id,
        surface_id_mismatch,
        missing_verb,
        extra_verb,
        missing_stimulus,
        extra_stimulus,
        write_stimulus,
        confirm_on_read,
        connect_not_write,
        cli_bin_mismatch,
        bad_placeholder,
        reserved_placeholder,
        exec_wrapper_bin,
        hcp_bin_reserved,
        code_running_cli,
        bad_binding,
        confirm_not_mirrored,
        verb_count,
        skill_too_long,
        skill_missing_section,
        absolute_path_in_skill,
        extra_file,
        pass_through_present,
        bad_openapi,
        unknown_operation,
    );
}
