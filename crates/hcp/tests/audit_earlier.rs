//! Stores of an earlier version and stores that only look like one (RUNTIME §4 "Stores
//! are made on purpose", §6 "`verify` writes nothing"), through the built `hcp`:
//!
//! - `hcp audit verify`, `hcp audit tail` and `hcp doctor` write nothing — not on a store
//!   of an earlier version (checked read-only as one, its migration left to the next
//!   command that uses the store), not on a store of this version, not on a damaged one:
//!   every file's bytes, mode and times are the same after them;
//! - a store of this version whose `audit/` and `store.json` were removed is `missing_log`
//!   (verify exits 1, doctor names it, every command that uses the store refuses it), never
//!   migrated as an earlier one: what it still holds (the grant files, the install
//!   record's grant count) no earlier version wrote. The store is left exactly as it was.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::code;
mod exec_common;

use common::World;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

fn code_line(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr)
        .lines()
        .find_map(|l| l.trim().strip_prefix("code: ").map(str::to_owned))
        .unwrap_or_default()
}

/// Every entry under `root` (not followed): its kind, mode, size, modification and change
/// times, and a regular file's SHA-256.
fn snapshot(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(p) = todo.pop() {
        let m = std::fs::symlink_metadata(&p).unwrap();
        let content = if m.is_file() {
            hex::encode(Sha256::digest(std::fs::read(&p).unwrap()))
        } else if m.is_dir() {
            for e in std::fs::read_dir(&p).unwrap() {
                todo.push(e.unwrap().path());
            }
            "dir".to_owned()
        } else {
            "other".to_owned()
        };
        out.insert(
            p.strip_prefix(root).unwrap().display().to_string(),
            format!(
                "{content} mode {:o} size {} mtime {}.{} ctime {}.{}",
                m.mode(),
                m.size(),
                m.mtime(),
                m.mtime_nsec(),
                m.ctime(),
                m.ctime_nsec()
            ),
        );
    }
    out
}

/// The read-only commands: `audit verify` (text, JSON), `audit tail` (text, JSON),
/// `doctor` (text, JSON). The outputs of `audit verify --json` and `doctor --json` with
/// their exit statuses.
fn read_only_commands(w: &World) -> ((i32, Value), (i32, Value)) {
    for args in [
        &["audit", "verify"][..],
        &["audit", "tail"],
        &["audit", "tail", "--json", "-n", "3"],
        &["doctor"],
    ] {
        w.run(args);
    }
    let o = w.run(&["audit", "verify", "--json"]);
    let verify = (code(&o), serde_json::from_slice(&o.stdout).unwrap());
    let o = w.run(&["doctor", "--json"]);
    let doctor = (code(&o), serde_json::from_slice(&o.stdout).unwrap());
    (verify, doctor)
}

/// Plain SHA-256 of a record's canonical JSON without `hash` (the format before keyed
/// chains, docs/DESIGN.md "The keyed chain").
fn plain_hash(m: &serde_json::Map<String, Value>) -> String {
    let mut m = m.clone();
    m.remove("hash");
    format!(
        "sha256:{}",
        hex::encode(Sha256::digest(hcp_store::audit::canonical_json(
            &Value::Object(m)
        )))
    )
}

/// A store as an earlier hcp left it: a pack directory, a trail of `n` plain SHA-256
/// refusals with `seq` and `kind` under an FNV-checked anchor, no chain key, no marker.
fn earlier_store(root: &Path, n: u64) {
    let audit = root.join("audit");
    std::fs::create_dir_all(&audit).unwrap();
    std::fs::create_dir_all(root.join("packs")).unwrap();
    std::fs::create_dir_all(root.join("state")).unwrap();
    let mut prev = hcp_store::audit::GENESIS.to_owned();
    let mut text = Vec::new();
    for i in 1..=n {
        let mut m = serde_json::Map::new();
        for (k, v) in [
            ("ts", json!("2026-01-01T00:00:00.000Z")),
            ("id", json!(format!("old-{i}"))),
            ("seq", json!(i)),
            ("kind", json!("refusal")),
            ("principal", json!("owner")),
            ("verb_key", json!("x")),
            ("decision", json!("deny")),
            ("prev", json!(prev)),
        ] {
            m.insert(k.into(), v);
        }
        let h = plain_hash(&m);
        m.insert("hash".into(), h.clone().into());
        text.extend_from_slice(&hcp_store::audit::canonical_json(&Value::Object(m)));
        text.push(b'\n');
        prev = h;
    }
    std::fs::write(audit.join("audit.jsonl"), &text).unwrap();
    let mut a = hcp_store::audit::Anchor::empty("");
    let p = hcp_store::audit::Point {
        count: n,
        head: prev,
        end: text.len() as u64,
    };
    a.point = p.clone();
    a.durable = p;
    std::fs::write(
        audit.join("audit.anchor"),
        hcp_store::audit::legacy_bytes(&a),
    )
    .unwrap();
}

/// A store of this version with a pack installed, a grant and a session.
fn used_store() -> World {
    let w = exec_common::world(&["echo"]);
    exec_common::grant(&w, "alice", "echo", &["verb.exec.read"]);
    exec_common::session(&w, "alice", &[]);
    let o = w.run(&["exec", "echo.say", "hi"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    w
}

#[test]
fn verify_tail_and_doctor_write_nothing_on_an_earlier_a_current_or_a_damaged_store() {
    // A store of an earlier version: checked as one, read-only.
    let w = World::new();
    earlier_store(&w.hcp_home, 4);
    let before = snapshot(&w.hcp_home);
    let ((c, v), (dc, d)) = read_only_commands(&w);
    assert_eq!(snapshot(&w.hcp_home), before, "earlier: nothing written");
    assert_eq!(
        (c, &v["ok"], &v["chain"], &v["keyed"], &v["records"]),
        (0, &json!(true), &json!("legacy"), &json!(false), &json!(4)),
        "{v}"
    );
    assert_eq!(d["store"]["audit"]["earlier_version"], json!(true), "{d}");
    assert_eq!(d["store"]["audit"]["sound"], json!(true), "{d}");
    let _ = dc;
    let o = w.run(&["audit", "verify"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.starts_with("earlier-version trail: 4 records, plain SHA-256, intact")
            && text.contains(
                "it gains its keys with a `migrate` record at the next command that uses the store"
            ),
        "{text}"
    );
    // The next command that uses the store migrates it.
    let o = w.run(&["audit", "checkpoint"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    assert!(w.hcp_home.join("store.json").is_file());
    let o = w.run(&["audit", "verify", "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (code(&o), &v["chain"], &v["keyed"], &v["keyed_from"]),
        (0, &json!("checked"), &json!(true), &json!(5)),
        "{v}"
    );

    // A store of this version, used.
    let w = used_store();
    let before = snapshot(&w.hcp_home);
    let ((c, v), _) = read_only_commands(&w);
    assert_eq!(snapshot(&w.hcp_home), before, "current: nothing written");
    assert_eq!((c, &v["keyed"]), (0, &json!(true)), "{v}");

    // A damaged one: a record edited.
    let log = w.hcp_home.join("audit/audit.jsonl");
    let text = std::fs::read_to_string(&log).unwrap();
    std::fs::write(&log, text.replacen("\"alice\"", "\"mallory\"", 1)).unwrap();
    let before = snapshot(&w.hcp_home);
    let ((c, v), (dc, _)) = read_only_commands(&w);
    assert_eq!(snapshot(&w.hcp_home), before, "damaged: nothing written");
    assert_eq!(
        (c, dc, &v["broken"]["fault"]),
        (1, 1, &json!("hash_mismatch")),
        "{v}"
    );
}

#[test]
fn a_store_whose_trail_and_marker_were_removed_is_missing_log_never_an_earlier_version() {
    let w = used_store();
    for f in ["audit", "store.json"] {
        let p = w.hcp_home.join(f);
        if p.is_dir() {
            std::fs::remove_dir_all(&p).unwrap();
        } else {
            std::fs::remove_file(&p).unwrap();
        }
    }
    // With the keyed stamps' file (every call writes it), then (each removed too) with the
    // grant files, then with the install record's grant count.
    for round in ["authority files", "grant files", "install record"] {
        if round == "grant files" {
            std::fs::remove_file(w.hcp_home.join("state/authority-files.json")).unwrap();
        }
        if round == "install record" {
            std::fs::remove_dir_all(w.hcp_home.join("state/grants")).unwrap();
        }
        let before = snapshot(&w.hcp_home);
        let ((c, v), (dc, d)) = read_only_commands(&w);
        assert_eq!(
            (c, &v["ok"], &v["broken"]["fault"]),
            (1, &json!(false), &json!("missing_log")),
            "{round}: {v}"
        );
        let detail = v["broken"]["detail"].as_str().unwrap();
        let named = match round {
            "authority files" => "state/authority-files.json",
            "grant files" => "state/grants",
            _ => "record.json",
        };
        assert!(detail.contains(named), "{round}: {detail}");
        assert_eq!(dc, 1, "{round}: {d}");
        assert!(d.to_string().contains("missing_log"), "{round}: {d}");
        // Every command that uses the store refuses it, `init` included.
        for args in [
            &["exec", "echo.say", "hi"][..],
            &["grant", "bob", "echo", "verb.exec.read"],
            &["session", "start", "--principal", "bob"],
            &["audit", "checkpoint"],
            &["init"],
        ] {
            let o = w.run(args);
            assert_eq!(
                (code(&o), code_line(&o).as_str()),
                (74, "audit_unavailable"),
                "{round}: {args:?}: {}",
                w.render(&o)
            );
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(err.contains("missing_log"), "{round}: {args:?}: {err}");
        }
        assert_eq!(snapshot(&w.hcp_home), before, "{round}: left as it was");
    }
}

#[test]
fn a_wiped_store_whose_only_sign_is_a_sessions_mac_is_missing_log() {
    let w = used_store();
    // Everything else that tells this version's store from an earlier one removed: the
    // marker and `audit/` (trail and keys), the keyed stamps' file, the grant files, the
    // install record's grant count. What is left is the session file and its `mac`.
    std::fs::remove_dir_all(w.hcp_home.join("audit")).unwrap();
    std::fs::remove_file(w.hcp_home.join("store.json")).unwrap();
    std::fs::remove_file(w.hcp_home.join("state/authority-files.json")).unwrap();
    std::fs::remove_dir_all(w.hcp_home.join("state/grants")).unwrap();
    let record = w.hcp_home.join("packs/echo/.hcp/record.json");
    let mut r: Value = serde_json::from_str(&std::fs::read_to_string(&record).unwrap()).unwrap();
    r.as_object_mut().unwrap().remove("grants");
    std::fs::write(&record, r.to_string()).unwrap();
    let sessions: Vec<_> = std::fs::read_dir(w.hcp_home.join("state/sessions"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(!sessions.is_empty(), "the used store has a session");
    let before = snapshot(&w.hcp_home);
    let ((c, v), (dc, d)) = read_only_commands(&w);
    assert_eq!(
        (c, &v["ok"], &v["broken"]["fault"]),
        (1, &json!(false), &json!("missing_log")),
        "{v}"
    );
    let detail = v["broken"]["detail"].as_str().unwrap();
    assert!(
        detail.contains("state/sessions/") && detail.contains("keyed MAC"),
        "{detail}"
    );
    assert_eq!(dc, 1, "{d}");
    for args in [
        &["exec", "echo.say", "hi"][..],
        &["session", "start", "--principal", "bob"],
        &["init"],
    ] {
        let o = w.run(args);
        assert_eq!(
            (code(&o), code_line(&o).as_str()),
            (74, "audit_unavailable"),
            "{args:?}: {}",
            w.render(&o)
        );
    }
    assert_eq!(snapshot(&w.hcp_home), before, "left as it was");
}
