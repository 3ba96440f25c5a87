//! `hcp pack promote DIR` (RUNTIME §1.3) through the built binary.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use assert_cmd::Command;
use pretty_assertions::assert_eq;
use std::path::{Path, PathBuf};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../lint/tests/fixtures/pass_through_present")
}

fn hcp(args: &[&str]) -> std::process::Output {
    Command::cargo_bin("hcp")
        .unwrap()
        .args(args)
        .env_remove("HCP_SESSION")
        .output()
        .unwrap()
}

#[test]
fn a_pass_through_pack_becomes_named_write_verbs_with_a_backup() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sample");
    std::fs::create_dir(&dir).unwrap();
    for f in ["policy.json", "HARNESS.md"] {
        std::fs::copy(fixture().join(f), dir.join(f)).unwrap();
    }
    let surface = std::fs::read_to_string(fixture().join("surface.json"))
        .unwrap()
        .replace("[\"list\", \"show\"]", "[\"log\", \"list\"]");
    std::fs::write(dir.join("surface.json"), &surface).unwrap();

    let out = hcp(&["pack", "promote", dir.to_str().unwrap()]);
    let stdout =
        String::from_utf8_lossy(&out.stdout).replace(&tmp.path().display().to_string(), "[TMP]");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    insta::assert_snapshot!("promote", stdout);
    // The old files are kept beside the pack, byte for byte.
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("sample.bak/surface.json")).unwrap(),
        surface
    );
    // The new pack lints clean of `pass_through_present` and of errors.
    let lint = hcp(&["lint", dir.to_str().unwrap()]);
    assert_eq!(lint.status.code(), Some(0));
    assert!(!String::from_utf8_lossy(&lint.stdout).contains("pass_through_present"));
    let m = hcp_model::parse_manifest(&std::fs::read_to_string(dir.join("surface.json")).unwrap())
        .unwrap();
    assert_eq!(
        m.verbs.get("log").unwrap().cli.as_deref().unwrap(),
        ["sample", "log", "--", "{{args?}}"]
    );

    // Promoting again: nothing left to promote, and nothing written.
    let again = hcp(&["pack", "promote", dir.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("nothing_to_promote"));
    assert!(!tmp.path().join("sample.bak.2").exists());
}
