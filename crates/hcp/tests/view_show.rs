//! `hcp show ID.VERB --view` (RUNTIME §5.1) through the built `hcp`: one line per path of
//! the view with its mode, the network and the limits, from the plan the call's child would
//! mount; snapshotted for a `personal` verb of a principal, a `brain` verb of a project and a
//! `local` write verb with protected names, with the operator's paths; `--json`; bad input.
//! Lines that depend on the machine (its system directories' symlinks, what `/etc` covers,
//! the targets of `/etc`'s symlinks) are left out of the snapshots and checked apart.

#![allow(clippy::unwrap_used)]

mod common;

use common::World;
use serde_json::{Value, json};

fn world() -> World {
    common::example_bins();
    let w = World::new();
    for p in ["transit", "mail", "git"] {
        let out = w.run(&[
            "install",
            "--activate",
            &common::gold_pack(p).display().to_string(),
        ]);
        assert!(out.status.success(), "{}", w.render(&out));
    }
    w
}

/// The output without the machine's own lines, the temporary paths filtered.
fn stable(w: &World, out: &std::process::Output) -> String {
    let raw = format!(
        "exit: {}\n--- stdout\n{}--- stderr\n{}",
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The built bins' directory first: it lies in the checkout, or wherever the build puts it.
    let text = w.filter(&raw.replace(&common::bin_dir().display().to_string(), "[BIN]"));
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| {
            !l.ends_with("(system)")
                && !l.ends_with("(not readable by every user)")
                && !l.ends_with("(target of a symlink of /etc)")
                && !l.starts_with("sandbox ")
        })
        .collect();
    // The view is in path order, and where the built bins' directory sorts depends on where
    // the checkout lies: its lines go last in the view, just before `network`.
    let (pinned, rest): (Vec<&str>, Vec<&str>) =
        kept.into_iter().partition(|l| l.ends_with("(pinned bin)"));
    let mut lines = Vec::new();
    for l in rest {
        if l.starts_with("network ") {
            lines.extend(pinned.iter().copied());
        }
        lines.push(l);
    }
    lines.iter().map(|l| format!("{l}\n")).collect()
}

#[test]
fn a_personal_verb_of_a_principal_sees_its_home_and_the_operators_paths() {
    let w = world();
    let (ro, rw) = (w.root().join("shared-ro"), w.root().join("shared-rw"));
    for d in [&ro, &rw] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::create_dir_all(&w.hcp_home).unwrap();
    std::fs::write(
        w.hcp_home.join("config.json"),
        json!({"packs": {"transit": {"read": [ro], "write": [rw]}}}).to_string(),
    )
    .unwrap();
    let out = w.run(&["show", "transit.find", "--view", "--principal", "agent-1"]);
    assert_eq!(out.status.code(), Some(0), "{}", w.render(&out));
    insta::assert_snapshot!("show_view_personal", stable(&w, &out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    // The machine's own lines are there too.
    assert!(text.contains("  ro         /usr  (system)"), "{text}");
    assert!(text.contains("masked     /etc/shadow"), "{text}");
    // A read verb's tenant home is read-only; a write verb's read-write.
    assert!(
        text.contains("  ro         /home/hcp ← ")
            && text.contains("(the tenant home of a read verb)"),
        "{text}"
    );
}

#[test]
fn a_brain_verb_is_a_projects_and_a_local_write_verb_lists_its_protected_names() {
    let w = world();
    let out = w.run(&["show", "mail.notes.create", "--view", "--project", "apollo"]);
    assert_eq!(out.status.code(), Some(0), "{}", w.render(&out));
    insta::assert_snapshot!("show_view_brain", stable(&w, &out));
    // The verb key alone, as `hcp exec` takes it, shows the same view.
    let short = w.run(&["show", "notes.create", "--view", "--project", "apollo"]);
    assert_eq!(short.status.code(), Some(0), "{}", w.render(&short));
    assert_eq!(stable(&w, &short), stable(&w, &out));
    for name in [".git/hooks", ".envrc"] {
        let p = w.work.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        if name.ends_with("hooks") {
            std::fs::create_dir_all(&p).unwrap();
        } else {
            std::fs::write(&p, "x").unwrap();
        }
    }
    let out = w.run(&["show", "git.add", "--view"]);
    assert_eq!(out.status.code(), Some(0), "{}", w.render(&out));
    insta::assert_snapshot!("show_view_local_write", stable(&w, &out));
    // A read verb's workdir is read-only, and has no protected names to list.
    let out = w.run(&["show", "git.status", "--view"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.contains(&format!(
            "  ro         {}  (the workdir of a read verb)",
            w.work.display()
        )) && !text.contains("protected name"),
        "{text}"
    );
}

#[test]
fn json_holds_the_same_facts() {
    let w = world();
    let out = w.run(&[
        "show",
        "transit.find",
        "--view",
        "--principal",
        "agent-1",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", w.render(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["land"], "personal");
    assert_eq!(v["principal"], "agent-1");
    assert_eq!(v["network"]["mode"], "deny");
    assert_eq!(v["limits"]["tmp_bytes"], 64 << 20);
    let home = v["view"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["path"] == "/home/hcp")
        .unwrap();
    // `transit.find` is a read verb: its tenant home is read-only.
    assert_eq!(home["mode"]["kind"], "read_only");
    assert_eq!(
        home["source"],
        json!(w.hcp_home.join("homes/transit/principal/agent-1"))
    );
    // Nothing was made for the listing: the home is made by the first call.
    assert!(!w.hcp_home.join("homes/transit/principal/agent-1").exists());
}

#[test]
fn bad_input_is_refused() {
    let w = world();
    for (name, args, status, code) in [
        (
            "not_pack_verb",
            vec!["show", "transit", "--view"],
            66,
            "unknown_verb",
        ),
        (
            "unknown_verb",
            vec!["show", "transit.nope", "--view"],
            66,
            "unknown_verb",
        ),
        (
            "unknown_pack",
            vec!["show", "nope.find", "--view"],
            66,
            "not_installed",
        ),
        (
            "brain_without_project",
            vec!["show", "mail.notes.create", "--view"],
            77,
            "project_required",
        ),
        (
            "bad_principal",
            vec!["show", "transit.find", "--view", "--principal", "a/b"],
            2,
            "bad_principal",
        ),
    ] {
        let out = w.run(&args);
        let text = w.render(&out);
        assert_eq!(out.status.code(), Some(status), "{name}: {text}");
        assert!(text.contains(&format!("code: {code}")), "{name}: {text}");
    }
    // Usage: --principal without --view, both flags.
    for args in [
        vec!["show", "transit", "--principal", "a"],
        vec![
            "show",
            "transit.find",
            "--view",
            "--principal",
            "a",
            "--project",
            "p",
        ],
    ] {
        let out = w.run(&args);
        assert_eq!(out.status.code(), Some(2), "{}", w.render(&out));
    }
    // Owner only.
    let out = w.run(&["session", "start", "--principal", "agent-1"]);
    let tok = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let out = w
        .hcp()
        .env("HCP_SESSION", &tok)
        .args(["show", "transit.find", "--view"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(77), "{}", w.render(&out));
}
