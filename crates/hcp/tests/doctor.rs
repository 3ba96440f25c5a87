//! `hcp doctor [--json]`: store health, what the kernel enforces, the limits, and whether
//! the installed packs' bins still match their pins.

#![allow(clippy::unwrap_used)]

mod common;

use common::World;
use hcp_adapter::LandlockSupport;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::path::PathBuf;

/// The sandbox and limits sections depend on the kernel and the user: they are checked
/// against the kernel in [`the_sandbox_section_tells_the_kernel`], not snapshotted.
fn stable(w: &World, text: &str) -> String {
    let text = hide_digests(&w.filter(text));
    // The disk's free space is this machine's.
    let text: String = text
        .lines()
        .map(|l| match l.split_once(" kept beside the trail, ") {
            Some((head, _)) => format!("{head} kept beside the trail, [FREE] free on its disk\n"),
            None => format!("{l}\n"),
        })
        .collect();
    let (head, rest) = text.split_once("sandbox (every call)\n").unwrap();
    let (_, tail) = rest.split_once("packs\n").unwrap();
    // Notes say what this kernel offers less of: not part of the snapshot either.
    let tail: String = tail
        .lines()
        .filter(|l| !l.starts_with("note: "))
        .map(|l| format!("{l}\n"))
        .collect();
    format!("{head}[sandbox and limits]\npacks\n{tail}")
}

/// `sha256:<64 hex>` as `sha256:[HASH]`: a rebuilt example bin has another digest.
fn hide_digests(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("sha256:") {
        let (head, tail) = rest.split_at(i + "sha256:".len());
        out.push_str(head);
        let hex = tail.bytes().take_while(u8::is_ascii_hexdigit).count();
        if hex == 64 {
            out.push_str("[HASH]");
            rest = &tail[64..];
        } else {
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

fn doctor_json(w: &World) -> (i32, Value) {
    let o = w.run(&["doctor", "--json"]);
    (
        o.status.code().unwrap(),
        serde_json::from_slice(&o.stdout).unwrap(),
    )
}

#[test]
fn a_new_store_is_healthy() {
    let w = World::with_store();
    let o = w.run(&["doctor"]);
    assert_eq!(o.status.code(), Some(0));
    let text = format!(
        "exit: 0\n--- stdout\n{}--- stderr\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    insta::assert_snapshot!(stable(&w, &text));
}

#[test]
fn a_missing_store_is_reported_and_not_made() {
    let w = World::new();
    let o = w.run(&["doctor"]);
    assert_eq!(o.status.code(), Some(1), "{}", w.render(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("no store at") && text.contains("hcp init"),
        "{text}"
    );
    let (code, v) = doctor_json(&w);
    assert_eq!(code, 1);
    assert_eq!(
        (&v["ok"], &v["store"]["exists"], &v["store"]["code"]),
        (&json!(false), &json!(false), &json!("no_store"))
    );
    // Doctor reads; it does not create the store.
    assert!(!w.hcp_home.exists());
}

#[test]
fn the_sandbox_section_tells_the_kernel() {
    let w = World::with_store();
    let (code, v) = doctor_json(&w);
    assert_eq!(code, 0);
    let k = hcp_adapter::KernelSupport::probe();
    let support = k.landlock;
    let abi = support.abi();
    let used = abi.min(hcp_adapter::TESTED_LANDLOCK_ABI);
    let view = k.view_missing().is_none();
    let verdict = if view && k.seccomp {
        "confined"
    } else {
        "unconfined"
    };
    assert_eq!(
        v["sandbox"],
        json!({
            "landlock": if abi > 0 { "available" } else if support == LandlockSupport::NotEnabled { "not_enabled" } else { "not_implemented" },
            "landlock_abi": abi,
            "used_abi": used,
            "filesystem": view,
            "hidden_paths": if view { "view" } else { "none" },
            "seccomp": k.seccomp,
            "network": "deny",
            "network_deny_enforceable": k.seccomp,
            "scoped": used >= 6,
            "processes": k.processes.describe(),
            "descendants_end_with_killed_hcp": k.processes.survives_sigkill_of_hcp(),
            "fork_bombs": match k.fork_bombs() {
                hcp_adapter::Status::Enforced => "bounded".to_owned(),
                other => other.as_str().to_owned(),
            },
            "require": false,
            "calls": verdict,
            "local_verbs": verdict,
        })
    );
    // This machine (CI and development) has every mechanism.
    if common::skip::in_ci() {
        assert_eq!(v["sandbox"]["fork_bombs"], "bounded", "{v:#}");
        assert_eq!(
            v["sandbox"]["descendants_end_with_killed_hcp"], true,
            "{v:#}"
        );
        assert_eq!(v["sandbox"]["seccomp"], true, "{v:#}");
    }
    let names: Vec<&str> = v["limits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "cpu_seconds",
            "address_space_bytes",
            "open_files",
            "file_size_bytes",
            "processes",
            "tmp_bytes",
            "memory_bytes"
        ]
    );
    assert_eq!(v["limits"][0]["configured"], json!(60));
    assert_eq!(
        v["limits"][4]["enforced"],
        json!(!hcp_adapter::running_as_root() || matches!(k.pids_cgroup, Ok(Some(_))))
    );
}

#[test]
fn the_configuration_is_read_and_a_bad_one_is_a_problem() {
    let w = World::with_store();
    std::fs::create_dir_all(&w.hcp_home).unwrap();
    let config = w.hcp_home.join("config.json");
    std::fs::write(
        &config,
        r#"{"sandbox": {"require": true, "network": "deny"}, "limits": {"processes": 64}}"#,
    )
    .unwrap();
    let (code, v) = doctor_json(&w);
    let k = hcp_adapter::KernelSupport::probe();
    let ok = k.seccomp && k.view_missing().is_none();
    assert_eq!(code, if ok { 0 } else { 1 }, "{v:#}");
    assert_eq!(
        v["sandbox"]["calls"],
        json!(if ok { "confined" } else { "refused" })
    );
    assert_eq!(v["sandbox"]["network"], json!("deny"));
    assert_eq!(v["sandbox"]["require"], json!(true));
    assert_eq!(v["limits"][4]["configured"], json!(64));

    std::fs::write(&config, "{\n  \"limits\": {\"cpu_secs\": 5}\n}\n").unwrap();
    let o = w.run(&["doctor"]);
    assert_eq!(o.status.code(), Some(1));
    insta::assert_snapshot!(
        "bad_config",
        stable(&w, &String::from_utf8_lossy(&o.stdout))
    );
}

#[test]
fn a_bin_that_changed_or_vanished_is_reported() {
    let bins = common::example_bins();
    let w = World::with_store();
    // The echo pack, with its CLI pinned from a copy this test may change.
    let own = w.root().join("own-bin");
    std::fs::create_dir_all(&own).unwrap();
    let copy: PathBuf = own.join("hcp-example-echo");
    std::fs::copy(bins.join("hcp-example-echo"), &copy).unwrap();
    let src = w.copy_pack("echo");
    let o = w
        .hcp()
        .env("PATH", format!("{}:{}", own.display(), w.path_var()))
        .args(["install", src.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", w.render(&o));

    let (code, v) = doctor_json(&w);
    assert_eq!(code, 0, "{v:#}");
    let bins_of = |v: &Value| -> Vec<(String, String)> {
        v["packs"][0]["bins"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| {
                (
                    b["program"].as_str().unwrap().to_owned(),
                    b["status"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    assert_eq!(
        bins_of(&v),
        [
            ("hcp-example-echo".to_owned(), "ok".to_owned()),
            ("ls".to_owned(), "ok".to_owned())
        ]
    );

    let mut bytes = std::fs::read(&copy).unwrap();
    bytes.push(0);
    std::fs::write(&copy, bytes).unwrap();
    let (code, v) = doctor_json(&w);
    assert_eq!(code, 1);
    assert_eq!(bins_of(&v)[0].1, "changed");
    let o = w.run(&["doctor"]);
    insta::assert_snapshot!(
        "bin_changed",
        stable(&w, &String::from_utf8_lossy(&o.stdout))
    );

    std::fs::remove_file(&copy).unwrap();
    let (code, v) = doctor_json(&w);
    assert_eq!(code, 1);
    assert_eq!(bins_of(&v)[0].1, "missing");
}

#[test]
fn a_keyed_trail_whose_chain_key_is_gone_or_unreadable_is_a_fault_for_verify_and_doctor() {
    let w = World::with_store();
    let key = w.hcp_home.join("audit/chain.key");
    let saved = std::fs::read(&key).unwrap();
    for how in ["removed", "a directory"] {
        std::fs::remove_file(&key).unwrap();
        if how == "a directory" {
            std::fs::create_dir(&key).unwrap();
        }
        let o = w.run(&["audit", "verify", "--json"]);
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(
            (o.status.code(), &v["broken"]["fault"]),
            (Some(1), &json!("missing_chain_key")),
            "{how}: {v}"
        );
        let (code, d) = doctor_json(&w);
        assert_eq!((code, &d["ok"]), (1, &json!(false)), "{how}: {d}");
        assert!(d.to_string().contains("missing_chain_key"), "{how}: {d}");
        if how == "a directory" {
            std::fs::remove_dir(&key).unwrap();
        }
        std::fs::write(&key, &saved).unwrap();
    }
    assert_eq!(w.run(&["audit", "verify"]).status.code(), Some(0));
}
