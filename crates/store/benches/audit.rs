//! Audit append cost (RUNTIME §6): one record appended to a trail of 10,000 records, with
//! `sync_data` (the default, durable) and without, beside a bare `write` + `sync_data` of
//! the same line (the disk's own cost). Also a full `verify` of that trail.
//!
//! `cargo bench -p hcp-store --bench audit` (needs `[[bench]] name = "audit"`,
//! `harness = false` in this crate's Cargo.toml). Figures: BENCHMARKS.md.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use criterion::{Criterion, criterion_group, criterion_main};
use hcp_model::{ArgValue, Land, Operation};
use hcp_store::Home;
use hcp_store::audit::{AuditLog, Decision, Entry, args_digest};
use std::collections::BTreeMap;
use std::hint::black_box;
use std::io::Write;

const PREFILL: u64 = 10_000;

fn entry(i: u64) -> Entry {
    let v = ArgValue::String(format!("value {i}"));
    Entry {
        principal: "alice".into(),
        project: Some("p1".into()),
        pack_id: Some("transit".into()),
        verb_key: "transit.status".into(),
        operation: Some(Operation::Read),
        land: Some(Land::Personal),
        decision: Decision::Allow,
        code: None,
        args_digest: args_digest([("stop", &v)]),
        exit_code: Some(0),
        duration_ms: i % 100,
        extra: BTreeMap::new(),
    }
}

/// A home in a temporary directory under the target directory's filesystem (the
/// system temporary directory may be a tmpfs, where `sync_data` costs nothing).
fn prefilled() -> (tempfile::TempDir, AuditLog) {
    let base = std::env::var_os("HCP_BENCH_DIR").map_or_else(std::env::temp_dir, Into::into);
    let d = tempfile::tempdir_in(base).unwrap_or_else(|e| panic!("temporary directory: {e}"));
    let home = Home::open(d.path().join("hcp")).unwrap_or_else(|e| panic!("{e}"));
    let log = AuditLog::new(&home).durable(false);
    for i in 0..PREFILL {
        log.append(&entry(i)).unwrap_or_else(|e| panic!("{e}"));
    }
    (d, log)
}

fn append(c: &mut Criterion) {
    let mut g = c.benchmark_group("audit_append");
    for (name, durable) in [("sync_data", true), ("no_sync", false)] {
        let (_d, log) = prefilled();
        let log = log.durable(durable);
        let mut i = PREFILL;
        g.bench_function(name, |b| {
            b.iter(|| {
                i += 1;
                black_box(log.append(&entry(i)).unwrap_or_else(|e| panic!("{e}")))
            })
        });
    }
    // Baseline: the same line length written with `O_APPEND` and `sync_data`, without the
    // lock, the tail scan or the hashing: what the disk alone costs.
    let (d, log) = prefilled();
    let line = std::fs::read_to_string(log.path())
        .unwrap()
        .lines()
        .next()
        .map(|l| format!("{l}\n"))
        .unwrap();
    let raw = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(d.path().join("raw.jsonl"))
        .unwrap();
    g.bench_function("baseline_write_sync_data", |b| {
        b.iter(|| {
            (&raw).write_all(line.as_bytes()).unwrap();
            raw.sync_data().unwrap();
        })
    });
    g.finish();
}

fn verify(c: &mut Criterion) {
    let (_d, log) = prefilled();
    c.bench_function("audit_verify_10k", |b| {
        b.iter(|| {
            let r = log.verify().unwrap_or_else(|e| panic!("{e}"));
            assert!(r.is_clean());
            black_box(r)
        })
    });
}

criterion_group!(benches, append, verify);
criterion_main!(benches);
