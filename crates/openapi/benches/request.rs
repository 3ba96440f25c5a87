//! One `kind: openapi` request against the example API on a loopback port (RUNTIME §1.3),
//! never a timed test. Run with `cargo bench -p hcp-openapi --bench request`; figures go
//! to BENCHMARKS.md.
//!
//! - `plan/listTasks`: argument checks and request building, no I/O;
//! - `send/listTasks`: plan + [`hcp_openapi::send`] with a cancel descriptor, as `hcp exec`
//!   calls it (a fresh agent, the process-wide cancel watch, the body read under the cap);
//! - `send_without_cancel/listTasks`: the same without a cancel descriptor;
//! - `baseline/ureq_get`: the same GET with a bare `ureq` agent on the calling thread,
//!   also without keep-alive, as the floor that `send` adds its bounds to.
//!
//! The two network figures are measured in one run, back to back, so their ratio holds on
//! a loaded machine.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use criterion::{Criterion, criterion_group, criterion_main};
use hcp_examples::api::{ApiServer, TASKS_DOCUMENT};
use hcp_openapi::{Credential, Document, HttpOutcome, Limits, ServerUrl, plan, send};
use serde_json::{Map, Value, json};
use std::hint::black_box;
use std::io::Read;

fn bench(c: &mut Criterion) {
    let server = ApiServer::start(0).unwrap();
    let doc = Document::parse(TASKS_DOCUMENT.as_bytes()).unwrap();
    let op = doc.operation("listTasks").unwrap();
    let base = ServerUrl::parse(&format!("{}/v1", server.origin())).unwrap();
    let token = Credential::new("tok-bench").unwrap();
    let args: Map<String, Value> = json!({"status": "open", "limit": "10"})
        .as_object()
        .cloned()
        .unwrap();
    let (cancel_r, _cancel_w) = std::io::pipe().unwrap();
    let limits = Limits::default();

    c.bench_function("plan/listTasks", |b| {
        b.iter(|| plan(black_box(&op), &base, black_box(&args), Some(&token)).unwrap())
    });

    let mut g = c.benchmark_group("loopback");
    g.bench_function("send/listTasks", |b| {
        b.iter(|| {
            let p = plan(&op, &base, &args, Some(&token)).unwrap();
            match send(&p, &limits, Some(std::os::fd::AsFd::as_fd(&cancel_r))) {
                HttpOutcome::Answered(a) => assert_eq!(a.http_status, Some(200)),
                other => panic!("{other:?}"),
            }
        })
    });
    g.bench_function("send_without_cancel/listTasks", |b| {
        b.iter(|| {
            let p = plan(&op, &base, &args, Some(&token)).unwrap();
            match send(&p, &limits, None) {
                HttpOutcome::Answered(a) => assert_eq!(a.http_status, Some(200)),
                other => panic!("{other:?}"),
            }
        })
    });
    let url = format!("{}/v1/tasks?status=open&limit=10", server.origin());
    g.bench_function("baseline/ureq_get", |b| {
        b.iter(|| {
            let agent: ureq::Agent = ureq::Agent::config_builder()
                .max_idle_connections(0)
                .build()
                .into();
            let mut r = agent
                .get(&url)
                .header("Authorization", "Bearer tok-bench")
                .call()
                .unwrap();
            let mut body = Vec::new();
            r.body_mut().as_reader().read_to_end(&mut body).unwrap();
            black_box(body);
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
