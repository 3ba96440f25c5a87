//! `hcp-example-ledger`: strict values, the confirm mirror, and a dry run that persists
//! nothing (seeds §4.2.4).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{assert_error, files, ok_json, run, stdout};
use serde_json::json;
use std::path::Path;

fn ledger(dir: &Path, args: &[&str]) -> std::process::Output {
    run("ledger", dir, args)
}

fn journal(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("ledger.jsonl")).unwrap()
}

#[test]
fn post_appends_and_balance_sums() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let v = ok_json(&ledger(
        d,
        &[
            "post",
            "--confirm",
            "--json",
            "--",
            "assets:cash",
            "12.5",
            "coffee beans",
        ],
    ));
    assert_eq!(
        v,
        json!({
            "posted": { "seq": 1, "account": "assets:cash", "amount": "12.50",
                        "amount_cents": 1250, "memo": "coffee beans" },
            "balance": "12.50",
        })
    );
    ok_json(&ledger(
        d,
        &[
            "post",
            "--confirm",
            "--json",
            "--",
            "assets:cash",
            "-3.20",
            "refund",
        ],
    ));
    ok_json(&ledger(
        d,
        &[
            "post",
            "--confirm",
            "--json",
            "--",
            "expenses:food",
            "7",
            "lunch",
        ],
    ));
    assert_eq!(journal(d).lines().count(), 3);

    let b = ok_json(&ledger(d, &["balance", "--json"]));
    assert_eq!(
        b["accounts"],
        json!([
            { "account": "assets:cash", "balance": "9.30", "balance_cents": 930 },
            { "account": "expenses:food", "balance": "7.00", "balance_cents": 700 },
        ])
    );
    assert_eq!(b["total"], "16.30");
    assert_eq!(b["entries"], 3);
    let one = ok_json(&ledger(d, &["balance", "--json", "--", "expenses:food"]));
    assert_eq!(one["total_cents"], 700);

    let l = ok_json(&ledger(
        d,
        &["list", "--json", "--account=assets:cash", "--limit=1"],
    ));
    assert_eq!(l["entries"].as_array().unwrap().len(), 1);
    assert_eq!(l["entries"][0]["seq"], 2);
    assert_eq!(l["entries"][0]["memo"], "refund");
    let all = ok_json(&ledger(d, &["list", "--json"]));
    assert_eq!(all["entries"].as_array().unwrap().len(), 3);
}

#[test]
fn post_without_confirm_is_refused_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let out = ledger(d, &["post", "--json", "--", "assets:cash", "1", "x"]);
    assert_error(&out, 3, "without --confirm");
    assert!(files(d).is_empty(), "{:?}", files(d));
}

#[test]
fn dry_run_persists_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // On an empty directory: no journal is created.
    let v = ok_json(&ledger(
        d,
        &[
            "post",
            "--dry-run",
            "--json",
            "--",
            "assets:cash",
            "5",
            "preview",
        ],
    ));
    assert_eq!(v["dry_run"], true);
    assert_eq!(v["would_post"]["seq"], 1);
    assert_eq!(v["balance_after"], "5.00");
    assert!(files(d).is_empty(), "{:?}", files(d));

    // On an existing journal: byte-for-byte unchanged, even with --confirm beside it.
    ok_json(&ledger(
        d,
        &[
            "post",
            "--confirm",
            "--json",
            "--",
            "assets:cash",
            "10",
            "first",
        ],
    ));
    let before = journal(d);
    let modified = std::fs::metadata(d.join("ledger.jsonl"))
        .unwrap()
        .modified()
        .unwrap();
    for args in [
        &[
            "post",
            "--dry-run",
            "--json",
            "--",
            "assets:cash",
            "-2.5",
            "preview",
        ][..],
        &[
            "post",
            "--dry-run",
            "--confirm",
            "--json",
            "--",
            "assets:cash",
            "1",
            "both",
        ],
        &["post", "--dry-run", "--", "assets:cash", "1", "text"],
    ] {
        let out = ledger(d, args);
        assert!(out.status.success(), "{args:?}");
    }
    let v = ok_json(&ledger(
        d,
        &[
            "post",
            "--dry-run",
            "--json",
            "--",
            "assets:cash",
            "-2.5",
            "preview",
        ],
    ));
    assert_eq!(v["would_post"]["seq"], 2);
    assert_eq!(v["balance_after"], "7.50");
    assert_eq!(journal(d), before);
    assert_eq!(
        std::fs::metadata(d.join("ledger.jsonl"))
            .unwrap()
            .modified()
            .unwrap(),
        modified
    );
    assert_eq!(files(d), ["ledger.jsonl"]);
    let text = stdout(&ledger(
        d,
        &["post", "--dry-run", "--", "assets:cash", "1", "t"],
    ));
    assert!(text.contains("nothing was written"), "{text}");
}

#[test]
fn validate_reads_only_and_reports_every_problem() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let v = ok_json(&ledger(
        d,
        &["validate", "--json", "--", "assets:cash", "0.05", "tip"],
    ));
    assert_eq!(v["valid"], true);
    assert_eq!(v["entry"]["amount_cents"], 5);
    let out = ledger(d, &["validate", "--json", "--", "Assets", "1.234", ""]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["valid"], false);
    assert_eq!(v["errors"].as_array().unwrap().len(), 3);
    assert!(files(d).is_empty());
}

#[test]
fn values_are_validated_strictly() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    for amount in [
        "0", "+1", "1.", ".5", "1.234", "1e3", "1,000", "01", "12 ", "-0.00",
    ] {
        let out = ledger(d, &["post", "--confirm", "--", "assets:cash", amount, "m"]);
        assert_error(&out, 1, "amount");
    }
    for account in ["Assets", "a b", "a::b", "../x", ""] {
        let out = ledger(d, &["post", "--confirm", "--", account, "1", "m"]);
        assert_error(&out, 1, "account");
    }
    let long = "m".repeat(201);
    for memo in ["", "   ", "two\nlines", long.as_str()] {
        let out = ledger(d, &["post", "--confirm", "--", "assets:cash", "1", memo]);
        assert_error(&out, 1, "memo");
    }
    // A negative amount without `--` reads as an unknown option.
    let out = ledger(d, &["post", "--confirm", "assets:cash", "-1", "m"]);
    assert_error(&out, 2, "unknown option `-1`");
    assert!(files(d).is_empty());
}

#[test]
fn a_damaged_journal_stops_every_command() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("ledger.jsonl"), "{\"seq\":1}\n").unwrap();
    assert_error(&ledger(d, &["balance"]), 1, "damaged at line 1");
    assert_error(
        &ledger(d, &["post", "--confirm", "--", "assets:cash", "1", "m"]),
        1,
        "damaged",
    );
    assert_eq!(journal(d), "{\"seq\":1}\n");
}

#[test]
fn concurrent_posts_get_distinct_sequence_numbers() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let children: Vec<_> = (0..8)
        .map(|i| {
            common::cmd("ledger", d)
                .args(["post", "--confirm", "--json", "--", "assets:cash", "1"])
                .arg(format!("post {i}"))
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let seqs: Vec<u64> = journal(d)
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(seqs, (1..=8).collect::<Vec<_>>());
    let b = ok_json(&ledger(d, &["balance", "--json"]));
    assert_eq!(b["total"], "8.00");
}
