//! Audit cost (RUNTIME §6), on a trail already holding 10,000 records, in the system's
//! temporary directory (or `HCP_BENCH_DIR`; put it on the disk you mean to measure: a
//! tmpfs makes every sync free):
//!
//! * `audit_call/*`: what one allowed call costs the audit. `event_synced` is one synced
//!   record after the run (the path before write-ahead); `intent_outcome` is the
//!   write-ahead pair as shipped (intent synced, outcome not); `intent_outcome_counter`
//!   the same with one counter slot taken (an agent under a `rate_limit`);
//!   `intent_outcome_both_synced` what a second sync would add; `floor_append_sync` the
//!   disk alone: open, `write` of 256 bytes with `O_APPEND`, `fdatasync`, close.
//! * `audit_call_no_sync/*`: the same calls without syncs: what hcp's own work costs (the
//!   lock, the anchor, encoding, hashing, the writes), before write-ahead
//!   (`ensure_writable` + one record) and with it (`probe_writable` + `admit` + `outcome`).
//! * `audit_verify_10k`: a full `verify` walk.
//!
//! `cargo bench -p hcp-store --bench audit`. Figures: BENCHMARKS.md.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use criterion::{Criterion, criterion_group, criterion_main};
use hcp_model::{ArgValue, Land, Operation};
use hcp_store::Home;
use hcp_store::audit::{
    Admission, AuditLog, CounterSpend, Decision, DigestKey, Entry, Intent, Outcome,
};
use hcp_store::counter::Limits;
use std::collections::BTreeMap;
use std::hint::black_box;
use std::io::Write;
use std::time::Duration;

const PREFILL: u64 = 10_000;

fn key() -> DigestKey {
    DigestKey::from_bytes([9; 32])
}

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
        args_digest: key().args_digest([("stop", &v)]),
        exit_code: Some(0),
        duration_ms: i % 100,
        extra: BTreeMap::new(),
    }
}

fn admission(counter: bool) -> Admission {
    let v = ArgValue::String("Central".into());
    Admission {
        intent: Intent {
            principal: "alice".into(),
            project: None,
            pack_id: "transit".into(),
            verb_key: "status".into(),
            operation: Operation::Read,
            land: Some(Land::Personal),
            args_digest: key().args_digest([("stop", &v)]),
            extra: BTreeMap::from([("sandbox".into(), "landlock abi 6".into())]),
        },
        counters: if counter {
            vec![CounterSpend {
                identity: "alice".into(),
                tool: "transit.status".into(),
                limits: Limits {
                    rate_limit: Some(100),
                    budget: None,
                    window_ms: 1,
                },
            }]
        } else {
            vec![]
        },
        approvals: vec![],
    }
}

fn outcome(intent: String) -> Outcome {
    Outcome {
        intent,
        principal: "alice".into(),
        pack_id: "transit".into(),
        verb_key: "status".into(),
        code: None,
        exit_code: Some(0),
        duration_ms: 2,
        stdout_bytes: 120,
        stderr_bytes: 0,
        truncated: false,
        extra: BTreeMap::new(),
    }
}

fn base() -> std::path::PathBuf {
    std::env::var_os("HCP_BENCH_DIR").map_or_else(std::env::temp_dir, Into::into)
}

fn prefilled() -> (tempfile::TempDir, AuditLog) {
    let d = tempfile::tempdir_in(base()).unwrap_or_else(|e| panic!("temporary directory: {e}"));
    let home = Home::open(d.path().join("hcp")).unwrap_or_else(|e| panic!("{e}"));
    let log = AuditLog::new(&home).durable(false);
    for i in 0..PREFILL {
        log.append(&entry(i)).unwrap_or_else(|e| panic!("{e}"));
    }
    (d, AuditLog::new(&home))
}

fn call(c: &mut Criterion) {
    let mut g = c.benchmark_group("audit_call");
    g.sample_size(30).measurement_time(Duration::from_secs(4));
    let (_d1, log) = prefilled();
    let mut i = PREFILL;
    g.bench_function("event_synced", |b| {
        b.iter(|| {
            i += 1;
            black_box(log.append(&entry(i)).unwrap())
        })
    });
    let (_d2, log) = prefilled();
    for (name, counter) in [("intent_outcome", false), ("intent_outcome_counter", true)] {
        let a = admission(counter);
        g.bench_function(name, |b| {
            b.iter(|| {
                let x = log.admit(&a).unwrap();
                black_box(log.outcome(&outcome(x.id)).unwrap())
            })
        });
    }
    let (_d3, log) = prefilled();
    let a = admission(false);
    g.bench_function("intent_outcome_both_synced", |b| {
        b.iter(|| {
            let x = log.admit(&a).unwrap();
            log.outcome(&outcome(x.id)).unwrap();
            // The second sync an outcome would cost.
            std::fs::File::open(log.path())
                .unwrap()
                .sync_data()
                .unwrap();
        })
    });
    let raw = base().join(format!("hcp-bench-floor-{}.jsonl", std::process::id()));
    let line = [b'x'; 255];
    g.bench_function("floor_append_sync", |b| {
        b.iter(|| {
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(&raw)
                .unwrap();
            f.write_all(&line).unwrap();
            f.write_all(b"\n").unwrap();
            f.sync_data().unwrap();
        })
    });
    let _ = std::fs::remove_file(&raw);
    g.finish();
    // Everything but the disk: what one call costs the audit in CPU and system calls, the
    // way exec calls it before write-ahead (`ensure_writable` before the spawn, one record
    // after) and with it (`probe_writable`, `admit` before the spawn, `outcome` after).
    let mut g = c.benchmark_group("audit_call_no_sync");
    let (_d4, log) = prefilled();
    let log = log.durable(false);
    let mut i = PREFILL;
    g.bench_function("before_write_ahead", |b| {
        b.iter(|| {
            i += 1;
            log.ensure_writable().unwrap();
            black_box(log.append(&entry(i)).unwrap())
        })
    });
    for (name, counter) in [("write_ahead", false), ("write_ahead_counter", true)] {
        let a = admission(counter);
        g.bench_function(name, |b| {
            b.iter(|| {
                log.probe_writable().unwrap();
                let x = log.admit(&a).unwrap();
                black_box(log.outcome(&outcome(x.id)).unwrap())
            })
        });
    }
    g.finish();
}

fn verify(c: &mut Criterion) {
    let (_d, log) = prefilled();
    let mut g = c.benchmark_group("audit_verify");
    g.sample_size(10);
    g.bench_function("audit_verify_10k", |b| {
        b.iter(|| {
            let r = log.verify().unwrap_or_else(|e| panic!("{e}"));
            assert!(r.is_clean());
            black_box(r)
        })
    });
    g.finish();
}

criterion_group!(benches, call, verify);
criterion_main!(benches);
