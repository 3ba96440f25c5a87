//! `hcp home` (RUNTIME §5.2) through the built `hcp`: the path of a tenant home, seeding it
//! with a directory of the owner's, removing it, `hcp uninstall --purge`; the bad inputs
//! (an unknown pack, an id that is not one, both or neither of `--principal` and
//! `--project`, a seed that is missing, a file, a symlink, or that would replace a name),
//! each with its code and exit status and the store as it was; owner only.

#![allow(clippy::unwrap_used)]

mod common;

use common::World;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

fn installed() -> World {
    let w = World::new();
    let out = w.run(&[
        "install",
        &common::gold_pack("transit").display().to_string(),
    ]);
    assert!(out.status.success(), "{}", w.render(&out));
    w
}

fn listing(p: &Path) -> Vec<(PathBuf, String)> {
    fn walk(p: &Path, out: &mut Vec<(PathBuf, String)>) {
        let Ok(rd) = std::fs::read_dir(p) else { return };
        for e in rd.flatten() {
            let path = e.path();
            let m = std::fs::symlink_metadata(&path).unwrap();
            let what = if m.is_file() {
                std::fs::read_to_string(&path).unwrap_or_default()
            } else {
                format!("{:o}", m.permissions().mode())
            };
            out.push((path.clone(), what));
            if m.is_dir() {
                walk(&path, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(p, &mut out);
    out.sort();
    out
}

#[test]
fn the_path_of_a_home_is_printed_and_made_owner_only() {
    let w = installed();
    for (flag, id, want) in [
        ("--principal", "agent-1", "homes/transit/principal/agent-1"),
        ("--principal", "owner", "homes/transit/principal/owner"),
        ("--project", "apollo", "homes/transit/project/apollo"),
    ] {
        let out = w.run(&["home", "transit", flag, id]);
        assert_eq!(out.status.code(), Some(0), "{}", w.render(&out));
        let printed = String::from_utf8(out.stdout).unwrap();
        assert_eq!(printed, format!("{}\n", w.hcp_home.join(want).display()));
        let mode = std::fs::metadata(w.hcp_home.join(want))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700, "{want}");
    }
}

#[test]
fn a_seed_copies_the_owners_directory_and_rm_and_purge_remove() {
    let w = installed();
    let seed = w.home.join(".config-to-seed");
    std::fs::create_dir_all(seed.join(".config/gh")).unwrap();
    std::fs::write(
        seed.join(".config/gh/hosts.yml"),
        "github.com: {token: x}\n",
    )
    .unwrap();
    std::fs::set_permissions(
        seed.join(".config/gh/hosts.yml"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    std::os::unix::fs::symlink(w.home.join(".ssh/id_ed25519"), seed.join("key-link")).unwrap();
    let out = w.run(&[
        "home",
        "transit",
        "--principal",
        "owner",
        "--seed",
        &seed.display().to_string(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", w.render(&out));
    insta::assert_snapshot!("home_seed", w.render(&out));
    let home = w.hcp_home.join("homes/transit/principal/owner");
    assert_eq!(
        std::fs::read_to_string(home.join(".config/gh/hosts.yml")).unwrap(),
        "github.com: {token: x}\n"
    );
    let mode = std::fs::metadata(home.join(".config/gh/hosts.yml"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    // A link is copied as a link, never followed.
    assert_eq!(
        std::fs::read_link(home.join("key-link")).unwrap(),
        w.home.join(".ssh/id_ed25519")
    );
    let out = w.run(&["home", "rm", "transit", "--principal", "owner"]);
    assert_eq!(out.status.code(), Some(0), "{}", w.render(&out));
    assert!(!home.exists());
    // uninstall --purge removes every home of the pack, and the pack.
    for id in ["a", "b"] {
        assert!(
            w.run(&["home", "transit", "--principal", id])
                .status
                .success()
        );
    }
    let out = w.run(&["uninstall", "transit", "--purge"]);
    assert_eq!(out.status.code(), Some(0), "{}", w.render(&out));
    insta::assert_snapshot!("uninstall_purge", w.render(&out));
    assert!(!w.hcp_home.join("homes/transit").exists());
    // Without --purge the homes stay.
    let out = w.run(&[
        "install",
        &common::gold_pack("transit").display().to_string(),
    ]);
    assert!(out.status.success());
    assert!(
        w.run(&["home", "transit", "--principal", "a"])
            .status
            .success()
    );
    assert!(w.run(&["uninstall", "transit"]).status.success());
    assert!(w.hcp_home.join("homes/transit/principal/a").is_dir());
}

#[test]
fn bad_input_is_refused_with_its_code_and_the_store_as_it_was() {
    let w = installed();
    let seed = w.home.join("seed");
    std::fs::create_dir_all(&seed).unwrap();
    std::fs::write(seed.join(".netrc"), "machine x\n").unwrap();
    std::fs::write(w.home.join("a-file"), "x").unwrap();
    std::os::unix::fs::symlink(&seed, w.home.join("seed-link")).unwrap();
    // A home that already holds `.netrc`.
    let out = w.run(&[
        "home",
        "transit",
        "--principal",
        "full",
        "--seed",
        &seed.display().to_string(),
    ]);
    assert!(out.status.success());
    let before = listing(&w.hcp_home);
    let s = |p: &str| w.home.join(p).display().to_string();
    let cases: Vec<(&str, Vec<String>, i32, &str)> = vec![
        (
            "unknown_pack",
            vec![
                "home".into(),
                "nope".into(),
                "--principal".into(),
                "a".into(),
            ],
            66,
            "not_installed",
        ),
        (
            "bad_principal",
            vec![
                "home".into(),
                "transit".into(),
                "--principal".into(),
                "a/../b".into(),
            ],
            2,
            "bad_principal",
        ),
        (
            "bad_project",
            vec![
                "home".into(),
                "transit".into(),
                "--project".into(),
                ".hidden".into(),
            ],
            2,
            "bad_value",
        ),
        (
            "both_flags",
            vec![
                "home".into(),
                "transit".into(),
                "--principal".into(),
                "a".into(),
                "--project".into(),
                "p".into(),
            ],
            2,
            "",
        ),
        ("neither_flag", vec!["home".into(), "transit".into()], 2, ""),
        (
            "seed_missing",
            vec![
                "home".into(),
                "transit".into(),
                "--principal".into(),
                "a".into(),
                "--seed".into(),
                s("absent"),
            ],
            2,
            "bad_seed",
        ),
        (
            "seed_file",
            vec![
                "home".into(),
                "transit".into(),
                "--principal".into(),
                "a".into(),
                "--seed".into(),
                s("a-file"),
            ],
            2,
            "bad_seed",
        ),
        (
            "seed_symlink",
            vec![
                "home".into(),
                "transit".into(),
                "--principal".into(),
                "a".into(),
                "--seed".into(),
                s("seed-link"),
            ],
            2,
            "bad_seed",
        ),
        (
            "seed_conflict",
            vec![
                "home".into(),
                "transit".into(),
                "--principal".into(),
                "full".into(),
                "--seed".into(),
                s("seed"),
            ],
            2,
            "bad_seed",
        ),
        (
            "rm_unknown_pack",
            vec![
                "home".into(),
                "rm".into(),
                "nope".into(),
                "--project".into(),
                "p".into(),
            ],
            66,
            "not_installed",
        ),
    ];
    for (name, args, status, code) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = w.run(&args);
        let text = w.render(&out);
        assert_eq!(out.status.code(), Some(status), "{name}: {text}");
        if !code.is_empty() {
            assert!(text.contains(&format!("code: {code}")), "{name}: {text}");
        }
        insta::assert_snapshot!(format!("home_{name}"), text);
        assert_eq!(listing(&w.hcp_home), before, "{name}: the store changed");
    }
}

#[test]
fn a_session_may_not_touch_homes() {
    let w = installed();
    let out = w.run(&["session", "start", "--principal", "agent-1"]);
    let tok = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    for args in [
        vec!["home", "transit", "--principal", "agent-1"],
        vec!["home", "rm", "transit", "--principal", "agent-1"],
    ] {
        let out = w
            .hcp()
            .env("HCP_SESSION", &tok)
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(77), "{}", w.render(&out));
        assert!(w.render(&out).contains("owner_only"));
    }
}
