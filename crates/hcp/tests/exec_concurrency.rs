//! Concurrent `hcp exec` processes (RUNTIME §3, §6): 8 callers × 200 execs of a trivial
//! verb against one store give 1,600 audit records in one linear chain, and `hcp audit
//! verify` is clean.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod exec_common;

use exec_common::*;
use pretty_assertions::assert_eq;
use serde_json::json;
use std::collections::BTreeSet;

const CALLERS: usize = 8;
const PER_CALLER: usize = 200;

#[test]
fn eight_processes_times_two_hundred_execs_keep_one_chain() {
    let w = world(&["probe"]);
    let tok = session(&w, "agent-1", &[]);
    grant(&w, "agent-1", "probe", &["verb.exec.read"]);
    let started = std::time::Instant::now();
    std::thread::scope(|s| {
        for caller in 0..CALLERS {
            let w = &w;
            let tok = tok.as_str();
            s.spawn(move || {
                for i in 0..PER_CALLER {
                    // Alternate owner and agent, allowed runs and refusals.
                    let mut c = w.hcp();
                    c.args(["exec", "probe.exit", "0"]);
                    if i % 2 == 1 {
                        c.env("HCP_SESSION", tok);
                    }
                    if i % 10 == 9 {
                        c.args(["--tenant", "x"]);
                    }
                    let out = c.output().unwrap();
                    let want = if i % 10 == 9 { 65 } else { 0 };
                    assert_eq!(
                        status(&out),
                        want,
                        "caller {caller} call {i}: {}",
                        w.render(&out)
                    );
                }
            });
        }
    });
    let elapsed = started.elapsed();
    eprintln!("{} execs in {elapsed:?}", CALLERS * PER_CALLER);
    let recs = audit_calls(&w);
    assert_eq!(recs.len(), CALLERS * PER_CALLER);
    let ids: BTreeSet<&str> = recs.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), recs.len(), "ids are unique");
    let denied = recs
        .iter()
        .filter(|r| r["decision"] == json!("deny"))
        .count();
    assert_eq!(denied, CALLERS * PER_CALLER / 10);
    let agent = recs
        .iter()
        .filter(|r| r["principal"] == json!("agent-1"))
        .count();
    assert_eq!(agent, CALLERS * PER_CALLER / 2);
    let line = assert_audit_clean(&w);
    // The acts of authority (the store's `init`, the install, the session start, the
    // grant) all came before the calls: concurrent calls record none (nothing changed).
    let acts = authority_records(&w);
    let first_call = audit_records(&w)[0]["seq"].as_u64().unwrap();
    assert!(
        acts.iter().all(|a| a["seq"].as_u64().unwrap() < first_call),
        "{acts:?}"
    );
    assert_eq!(acts[0]["act"], json!("init"));
    // An allowed call is an intent and an outcome, a refusal one record; each act but
    // `init` is its intent and its `act made`.
    let records = 2 * (CALLERS * PER_CALLER - denied)
        + denied
        + acts.len()
        + exec_common::act_completions(&w).len();
    assert!(line.contains(&format!("{records} records")), "{line}");
}
