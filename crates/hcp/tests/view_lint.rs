//! Issue 23, "only the bootstrap pack sees the store" (RUNTIME §2, §5.1): through the built
//! `hcp`, a pack other than `hcp-cli` whose bin is `hcp` is refused by lint and by
//! install (`hcp_bin_reserved`), also when its bin is the running `hcp` under another name;
//! the store is left as it was. `{{@workdir}}` outside `local` land and interpreters told
//! to run modules or code are lint's too.

#![allow(clippy::unwrap_used)]

mod common;

use common::World;
use std::path::{Path, PathBuf};

/// A copy of the gold `transit` pack whose `wrap.bin` is `bin`.
fn transit_with_bin(w: &World, bin: &str) -> PathBuf {
    let dir = w.copy_pack("transit");
    let s = std::fs::read_to_string(dir.join("surface.json")).unwrap();
    let s = s.replace(
        "\"bin\": \"hcp-example-transit\"",
        &format!("\"bin\": \"{bin}\""),
    );
    std::fs::write(dir.join("surface.json"), s).unwrap();
    dir
}

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn store_listing(w: &World) -> Vec<PathBuf> {
    fn walk(p: &Path, out: &mut Vec<PathBuf>) {
        if let Ok(rd) = std::fs::read_dir(p) {
            for e in rd.flatten() {
                out.push(e.path());
                walk(&e.path(), out);
            }
        }
    }
    let mut out = Vec::new();
    walk(&w.hcp_home, &mut out);
    out.sort();
    out
}

#[test]
fn a_pack_whose_bin_is_hcp_is_refused_by_lint_and_install() {
    let w = World::new();
    for bin in ["hcp", "/usr/local/bin/hcp"] {
        let dir = transit_with_bin(&w, bin);
        let d = dir.display().to_string();
        let out = w.run(&["lint", &d]);
        assert_eq!(out.status.code(), Some(1), "{}", w.render(&out));
        assert!(
            text(&out).contains("error[hcp_bin_reserved]"),
            "{}",
            w.render(&out)
        );
        let before = store_listing(&w);
        let out = w.run(&["install", &d]);
        assert_eq!(out.status.code(), Some(1), "{}", w.render(&out));
        let t = text(&out);
        assert!(
            t.contains("error[hcp_bin_reserved]") && t.contains("code: lint_failed"),
            "{}",
            w.render(&out)
        );
        assert_eq!(store_listing(&w), before, "nothing written");
    }
}

#[test]
fn the_running_hcp_under_another_name_is_refused_at_install() {
    let w = World::new();
    let bins = w.root().join("bins");
    std::fs::create_dir_all(&bins).unwrap();
    let mut names = vec!["hcp-admin-link"];
    std::os::unix::fs::symlink(common::hcp_bin(), bins.join("hcp-admin-link")).unwrap();
    // A hard link needs the same filesystem as the build's output.
    if std::fs::hard_link(common::hcp_bin(), bins.join("hcp-admin-hard")).is_ok() {
        names.push("hcp-admin-hard");
    }
    for name in names {
        let dir = transit_with_bin(&w, name);
        let out = w.run(&["lint", &dir.display().to_string()]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "lint cannot see it: {}",
            w.render(&out)
        );
        let before = store_listing(&w);
        let out = w
            .hcp()
            .env("PATH", format!("{}:{}", bins.display(), w.path_var()))
            .args(["install", &dir.display().to_string()])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{name}: {}", w.render(&out));
        let t = text(&out);
        assert!(
            t.contains("code: hcp_bin_reserved") && t.contains("the running `hcp`"),
            "{name}: {}",
            w.render(&out)
        );
        assert_eq!(store_listing(&w), before, "{name}: nothing written");
    }
}

#[test]
fn the_bootstrap_pack_still_installs_and_its_id_alone_is_not_enough() {
    let w = World::new();
    let out = w.run(&[
        "install",
        &common::gold_pack("hcp-cli").display().to_string(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", w.render(&out));
    // `hcp-cli` with another binding is not the bootstrap pack.
    let dir = w.copy_pack("hcp-cli");
    let s = std::fs::read_to_string(dir.join("surface.json")).unwrap();
    std::fs::write(
        dir.join("surface.json"),
        s.replace("\"mode\": \"local\"", "\"mode\": \"public\""),
    )
    .unwrap();
    let out = w.run(&["lint", &dir.display().to_string()]);
    assert_eq!(out.status.code(), Some(1), "{}", w.render(&out));
    assert!(
        text(&out).contains("error[hcp_bin_reserved]"),
        "{}",
        w.render(&out)
    );
}

#[test]
fn workdir_outside_local_land_is_a_bad_placeholder() {
    let w = World::new();
    let dir = w.copy_pack("transit");
    let s = std::fs::read_to_string(dir.join("surface.json")).unwrap();
    let s = s.replacen(
        "\"{{query}}\", \"--json\"",
        "\"{{query}}\", \"--json\", \"{{@workdir}}\"",
        1,
    );
    std::fs::write(dir.join("surface.json"), s).unwrap();
    let out = w.run(&["lint", &dir.display().to_string()]);
    assert_eq!(out.status.code(), Some(1), "{}", w.render(&out));
    let t = text(&out);
    assert!(
        t.contains("error[bad_placeholder]") && t.contains("`{{@workdir}}` in a `personal` verb"),
        "{}",
        w.render(&out)
    );
}
