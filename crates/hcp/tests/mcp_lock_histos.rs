//! Tool locks outside tools can check (RUNTIME §7, issue 28): the Histos reference's
//! `histos import --kind mcp` over `hcp mcp`'s `tools/list` computes, for every tool, the
//! `schema_sha256`, `description_sha256` and `contract_sha256` that `hcp policy lock`
//! wrote, and `histos drift` over the same listing and hcp's lock finds no drift.
//!
//! The reference is a checkout of the public Histos project (Python 3.12 or later, with
//! PyYAML), which this repository does not carry: `HCP_TEST_HISTOS_REF` names it, as
//! `cargo xtask bench gate --reference DIR` takes it, and `HCP_TEST_HISTOS_PYTHON` the
//! interpreter (else the first of `python3.13`, `python3.12`, `python3` that is 3.12 or
//! later and imports `yaml`). Without the checkout the test says `skipped:`, in CI too:
//! the reference is not on PyPI, so CI cannot have it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod mcp_common;

use mcp_common::{Raw, world_with};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;

/// An interpreter that can run the reference, or why none can.
fn reference_python() -> Result<String, String> {
    let candidates: Vec<String> = match std::env::var("HCP_TEST_HISTOS_PYTHON") {
        Ok(p) if !p.is_empty() => vec![p],
        _ => ["python3.13", "python3.12", "python3"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect(),
    };
    let probe = "import sys, yaml; sys.exit(0 if sys.version_info >= (3, 12) else 3)";
    for p in &candidates {
        if let Ok(o) = Command::new(p).args(["-c", probe]).output()
            && o.status.success()
        {
            return Ok(p.clone());
        }
    }
    Err(format!(
        "no Python 3.12 or later with PyYAML among {candidates:?} (set HCP_TEST_HISTOS_PYTHON)"
    ))
}

fn histos(python: &str, reference: &Path, args: &[&str]) -> std::process::Output {
    Command::new(python)
        .args([
            "-c",
            "import sys; from histos.cli import main; sys.exit(main())",
        ])
        .args(args)
        .env("PYTHONPATH", reference.join("src"))
        .output()
        .unwrap()
}

const HASHES: [&str; 3] = ["schema_sha256", "description_sha256", "contract_sha256"];

#[test]
fn the_reference_computes_the_locks_hashes_from_the_listing() {
    let reference = match std::env::var_os("HCP_TEST_HISTOS_REF") {
        Some(r) if !r.is_empty() => PathBuf::from(r),
        _ => {
            return common::skip::skip_everywhere(
                "HCP_TEST_HISTOS_REF names no checkout of the Histos reference (it is not on PyPI, so CI has none)",
            );
        }
    };
    let python = match reference_python() {
        Ok(p) => p,
        Err(why) => return common::skip::skip(&why),
    };
    // The gold packs that offer `mcp`: every verb the lock covers is listed.
    let w = world_with(&["transit", "echo", "ledger"]);
    let out = w.run(&["policy", "lock"]);
    assert!(out.status.success(), "{}", w.render(&out));
    let lock: Value =
        serde_json::from_slice(&std::fs::read(w.hcp_home.join("tools.lock.json")).unwrap())
            .unwrap();

    let mut s = Raw::start(&w, None);
    let listed = s.request("tools/list", json!({}));
    assert!(s.finish().success());
    let tools_json = w.root().join("tools.json");
    std::fs::write(&tools_json, listed["result"].to_string()).unwrap();

    let policy = w.root().join("imported.policy.json");
    let out = histos(
        &python,
        &reference,
        &[
            "import",
            tools_json.to_str().unwrap(),
            "--kind",
            "mcp",
            "--out",
            policy.to_str().unwrap(),
        ],
    );
    assert!(
        out.status.success(),
        "histos import: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let theirs: Value =
        serde_json::from_slice(&std::fs::read(w.root().join("imported.policy.lock.json")).unwrap())
            .unwrap();
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.len() >= 10, "{names:?}");
    let ours_names: Vec<&String> = lock["tools"].as_object().unwrap().keys().collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(
        ours_names.iter().map(|n| n.as_str()).collect::<Vec<_>>(),
        sorted,
        "the lock covers exactly the tools listed"
    );
    for name in &names {
        for h in HASHES {
            assert_eq!(
                lock["tools"][name][h], theirs["tools"][name][h],
                "{name}: {h} differs between hcp's lock and the reference's import of tools/list"
            );
        }
    }
    let out = histos(
        &python,
        &reference,
        &[
            "drift",
            policy.to_str().unwrap(),
            "--source",
            tools_json.to_str().unwrap(),
            "--kind",
            "mcp",
            "--lock",
            w.hcp_home.join("tools.lock.json").to_str().unwrap(),
        ],
    );
    assert!(
        out.status.success(),
        "histos drift over hcp's listing and lock: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
