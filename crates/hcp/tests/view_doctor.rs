//! `hcp doctor`'s view part (RUNTIME §5.1–§5.4) through the built `hcp`: every
//! operator-given socket, every pack with the `host` network, every write path, the age of
//! the `/etc` index and `--refresh`, the ignored keys of earlier configurations, the
//! quarantine.

#![allow(clippy::unwrap_used)]

mod common;

use common::World;
use serde_json::{Value, json};

fn doctor(w: &World, args: &[&str]) -> (String, Value) {
    let mut all = vec!["doctor"];
    all.extend_from_slice(args);
    let text = w.run(&all);
    let mut j = all.clone();
    j.push("--json");
    let out = w.run(&j);
    (
        String::from_utf8_lossy(&text.stdout).into_owned(),
        serde_json::from_slice(&out.stdout).unwrap(),
    )
}

#[test]
fn what_the_operator_gave_calls_is_named() {
    let w = World::new();
    let out = w.run(&[
        "install",
        &common::gold_pack("transit").display().to_string(),
    ]);
    assert!(out.status.success(), "{}", w.render(&out));
    let (rw, sock) = (w.root().join("shared"), w.root().join("db.sock"));
    std::fs::create_dir_all(&rw).unwrap();
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    std::fs::write(
        w.hcp_home.join("config.json"),
        json!({
            "sandbox": {"protect": ["~/.password-store"]},
            "packs": {"transit": {"write": [rw, sock], "network": "host"}}
        })
        .to_string(),
    )
    .unwrap();
    let (text, v) = doctor(&w, &[]);
    let view = &v["view"];
    assert_eq!(view["sockets"], json!([{"pack": "transit", "path": sock}]));
    assert_eq!(view["host_network"], json!(["transit"]));
    assert_eq!(
        view["write_paths"],
        json!([{"pack": "transit", "path": rw}, {"pack": "transit", "path": sock}])
    );
    assert_eq!(view["ignored_keys"], json!(["sandbox.protect"]));
    for line in [
        "view (what calls are given)".to_owned(),
        "  host network          `transit`".to_owned(),
        format!(
            "  socket                `{}` to `transit`: every pathname socket of its view is reachable",
            sock.display()
        ),
        format!("  write path            `{}` to `transit`", rw.display()),
        "  ignored key           `sandbox.protect`".to_owned(),
        "  quarantine            empty".to_owned(),
    ] {
        assert!(text.lines().any(|l| l == line), "missing `{line}`:\n{text}");
    }
}

#[test]
fn the_etc_index_is_dated_and_refresh_scans_again() {
    let w = World::new();
    let out = w.run(&[
        "install",
        &common::gold_pack("transit").display().to_string(),
    ]);
    assert!(out.status.success(), "{}", w.render(&out));
    let (_, v) = doctor(&w, &[]);
    let first = v["view"]["etc_index"]["scanned_at"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(v["view"]["etc_index"]["this_boot"], true);
    let (text, v) = doctor(&w, &["--refresh"]);
    let again = v["view"]["etc_index"]["scanned_at"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(again > first, "{first} then {again}");
    assert!(
        text.contains("`hcp doctor --refresh` scans again"),
        "{text}"
    );
    // --refresh writes the store: owner only.
    let out = w.run(&["session", "start", "--principal", "agent-1"]);
    let tok = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let out = w
        .hcp()
        .env("HCP_SESSION", &tok)
        .args(["doctor", "--refresh"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(77), "{}", w.render(&out));
    // Without an index yet, doctor says so and makes none.
    let w = World::new();
    let (text, v) = doctor(&w, &[]);
    assert!(v["view"]["etc_index"]["scanned_at"].is_null());
    assert!(text.contains("none yet"), "{text}");
    assert!(!w.hcp_home.exists());
}

#[test]
fn a_mount_beneath_a_path_of_a_view_is_named_by_doctor_and_show() {
    if unsafe_euid() != 0 {
        common::skip::skip("making a mount needs root");
        return;
    }
    let w = World::new();
    let out = w.run(&[
        "install",
        &common::gold_pack("transit").display().to_string(),
    ]);
    assert!(out.status.success(), "{}", w.render(&out));
    let ro = w.root().join("shared");
    std::fs::create_dir_all(ro.join("snapshot")).unwrap();
    std::fs::write(
        w.hcp_home.join("config.json"),
        json!({"packs": {"transit": {"read": [ro]}}}).to_string(),
    )
    .unwrap();
    // The mount is made in a mount namespace of its own, which the `hcp` run in it sees.
    for args in [
        vec!["doctor", "--json"],
        vec!["show", "transit.find", "--view", "--json"],
    ] {
        let mut c = std::process::Command::new("/usr/bin/unshare");
        c.args(["--mount", "--propagation", "private", "/bin/sh", "-c"])
            .arg(r#"mount -t tmpfs none "$0" && exec "$@""#)
            .arg(ro.join("snapshot"))
            .arg(common::hcp_bin())
            .args(&args)
            .env_clear()
            .env("HOME", &w.home)
            .env("HCP_HOME", &w.hcp_home)
            .env("PATH", w.path_var())
            .current_dir(&w.work);
        let out = c.output().unwrap();
        let v: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", w.render(&out)));
        let beneath = if args[0] == "doctor" {
            &v["view"]["mounts_beneath"]
        } else {
            &v["mounts_beneath"]
        };
        assert!(
            beneath
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["mount_point"] == json!(ro.join("snapshot"))),
            "{args:?}: {beneath}"
        );
    }
}

fn unsafe_euid() -> u32 {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() }
}
