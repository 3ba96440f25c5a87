//! `kill -9` of `hcp exec` at every point of a call (RUNTIME §6, issue 13 "Bad input"):
//! before the intent is written, between the intent and the spawn, while the child runs,
//! between its exit and the outcome, around the anchor updates; named points through the
//! debug build's seam (`HCP_TEST_ABORT_AT`) and random instants from outside. After every
//! run `hcp audit verify` is sound (exit 0) and lists exactly the interrupted calls; no
//! counter slot and no approval is spent by a call without an intent, and every intent
//! counts; a call whose child ran (its marker file exists) has its intent.
//!
//! Random delays only choose where a kill lands; nothing is synchronised by sleeping (a
//! named point is reached by the process itself, an exit is waited for).
//!
//! Both campaigns run in CI (`cargo test --workspace`) and are bounded in time: every
//! `hcp` process they start is waited for with a deadline (`audit_common::wait_bounded`),
//! past which it is killed and the test fails, so a hang cannot stall the run; each
//! campaign prints how long it took.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod audit_common;
mod common;
mod exec_common;

use audit_common::{
    Census, Rng, interrupted, killed, mark_digest, policy_world, sigkill, spawn_exec, verify_in,
    wait_bounded,
};
use hcp_store::Home;
use hcp_store::approval;
use hcp_store::audit::AuditLog;
use hcp_store::counter::{Counters, Limits, Verdict};
use serde_json::Value;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// The named points, with what a kill there leaves of the call.
const POINTS: [(&str, After); 10] = [
    ("locked", After::Nothing),
    ("intent_written", After::Interrupted),
    ("intent_synced", After::Interrupted),
    ("caches_updated", After::Interrupted),
    ("anchor_written:1", After::Interrupted),
    ("admitted", After::Interrupted),
    ("child_running", After::Interrupted),
    ("child_exited", After::Interrupted),
    ("outcome_written", After::Closed),
    ("anchor_written:2", After::Closed),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum After {
    /// No intent: nothing was spent, nothing ran.
    Nothing,
    /// An intent without outcome.
    Interrupted,
    /// An intent and its outcome.
    Closed,
}

/// Asserts that every intent counts exactly once and that each approval is used exactly
/// when one intent names it.
fn check_spends(home: &Home, census: &Census, granted: &[String]) {
    AuditLog::new(home).reconcile().unwrap();
    let counters = Counters::new(home);
    for tool in ["walprobe.mark", "walprobe.markc"] {
        let n = census
            .spends
            .get(&format!("agent {tool}"))
            .copied()
            .unwrap_or(0);
        let exact = |budget| Limits {
            rate_limit: None,
            budget: Some(budget),
            window_ms: 1,
        };
        if n > 0 {
            assert_eq!(
                counters.check("agent", tool, exact(n), 0).unwrap(),
                Verdict::Budget,
                "{tool}: fewer than the {n} intents counted"
            );
        }
        assert_eq!(
            counters.check("agent", tool, exact(n + 1), 0).unwrap(),
            Verdict::Ok,
            "{tool}: more than the {n} intents counted"
        );
    }
    for id in granted {
        let named = census.approvals.get(id).copied().unwrap_or(0);
        assert!(named <= 1, "approval `{id}` taken by {named} intents");
        let used = approval::get(home, id).unwrap().unwrap().used_at.is_some();
        assert_eq!(
            used,
            named == 1,
            "approval `{id}`: used {used}, named {named}"
        );
    }
}

fn mkfifo(path: &std::path::Path) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid C string that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// Opens the FIFO for reading and closes it again: a writer blocked in its open goes on
/// (and fails to write), so an orphaned child does not hang.
fn release(path: &std::path::Path) {
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path);
}

#[test]
fn a_hundred_kills_of_hcp_exec_leave_a_sound_trail_and_exact_counts() {
    let (w, token) = policy_world();
    let home = Home::open(&w.hcp_home).unwrap();
    let mut rng = Rng::new();
    let started = Instant::now();
    // How long one call takes here, for the random kills to land anywhere in it.
    let t = Instant::now();
    let c = spawn_exec(
        &w,
        Some(&token),
        &["walprobe.mark", "--path", "warm", "--text", "x"],
        None,
    );
    let out = wait_bounded(c);
    assert!(out.status.success(), "{}", w.render(&out));
    let call_us = u64::try_from(t.elapsed().as_micros()).unwrap();
    let mut expected: BTreeSet<String> = BTreeSet::new();
    let mut granted = Vec::new();
    let (mut kills, mut named, mut random_kills) = (0, 0, 0);
    for run in 0..100u64 {
        let path = format!("m-{run}");
        let approval_run = run % 4 == 3;
        let verb = if approval_run {
            "walprobe.markc"
        } else {
            "walprobe.mark"
        };
        let args = [verb, "--path", path.as_str(), "--text", "x"];
        if approval_run {
            // Paused first, then granted by the owner: the killed call takes it.
            let out = wait_bounded(spawn_exec(&w, Some(&token), &args, None));
            let v: Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(v["code"], "requires_confirmation", "{}", w.render(&out));
            let id = v["approval_id"].as_str().unwrap().to_owned();
            let o = w.run(&["approve", &id]);
            assert!(o.status.success(), "{}", w.render(&o));
            granted.push(id);
        }
        let point = (run % 2 == 0).then(|| POINTS[(run as usize / 2) % POINTS.len()]);
        // A child killed "while it runs" must still run when the seam looks: its marker is
        // a FIFO, whose open blocks until a reader comes (the test, once hcp is dead).
        let fifo = point.is_some_and(|p| p.0 == "child_running");
        if fifo {
            mkfifo(&w.work.join(&path));
        }
        let before = Census::of(&w.hcp_home);
        let child = spawn_exec(&w, Some(&token), &args, point.map(|p| p.0));
        if point.is_none() {
            std::thread::sleep(Duration::from_micros(rng.below(call_us + call_us / 2)));
            sigkill(child.id());
        }
        let out = wait_bounded(child);
        let was_killed = killed(&out.status);
        kills += usize::from(was_killed);
        if fifo {
            release(&w.work.join(&path));
        }
        let census = Census::of(&w.hcp_home);
        let mine = census.with_digest(&mark_digest(&w, &path, "x"));
        assert!(
            mine.len() <= 1,
            "run {run}: {} intents of one call",
            mine.len()
        );
        assert_eq!(
            census.intents.len(),
            before.intents.len() + mine.len(),
            "run {run}: another intent appeared"
        );
        let state = match mine.first() {
            None => After::Nothing,
            Some(id) if census.closed.contains(id) => After::Closed,
            Some(_) => After::Interrupted,
        };
        if let Some((name, want)) = point {
            assert!(
                was_killed,
                "run {run}: `{name}` was not reached: {}",
                w.render(&out)
            );
            named += 1;
            assert_eq!(state, want, "run {run}: a kill at `{name}`");
        } else if was_killed {
            random_kills += 1;
        } else {
            // It ended before the kill: a whole call, answered with its intent's id.
            let v: Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(v["ok"], true, "run {run}: {v}");
            assert_eq!(
                Some(v["audit_id"].as_str().unwrap()),
                mine.first().map(String::as_str)
            );
            assert_eq!(state, After::Closed, "run {run}");
        }
        if state == After::Interrupted {
            expected.insert(mine[0].clone());
        }
        // The child ran only with an intent (a child orphaned by the kill may write its
        // marker later: checked again at the end).
        if w.work.join(&path).exists() {
            assert_ne!(
                state,
                After::Nothing,
                "run {run}: a call ran without an intent"
            );
        }
        let (code, report) = verify_in(&w, &w.hcp_home);
        assert_eq!(code, Some(0), "run {run}: verify after a kill: {report}");
        assert_eq!(
            interrupted(&report),
            expected,
            "run {run}: the interrupted calls"
        );
        assert_eq!(census.open(), expected, "run {run}");
    }
    let census = Census::of(&w.hcp_home);
    for run in 0..100u64 {
        if w.work.join(format!("m-{run}")).exists() {
            assert_eq!(
                census
                    .with_digest(&mark_digest(&w, &format!("m-{run}"), "x"))
                    .len(),
                1,
                "run {run} ran without an intent"
            );
        }
    }
    check_spends(&home, &census, &granted);
    assert!(kills >= 50, "only {kills} of 100 runs were killed");
    eprintln!(
        "100 runs: {named} killed at named points, {random_kills} at random instants, {} interrupted, {:.1} s",
        expected.len(),
        started.elapsed().as_secs_f64()
    );
}

/// One caller's part of the concurrent campaign: its calls reported done, the calls it
/// killed, and the paths of its calls.
struct Caller {
    done: Vec<String>,
    kills: usize,
    paths: Vec<String>,
}

#[test]
fn eight_processes_times_two_hundred_execs_with_random_kills_lose_no_call_that_ran() {
    const PROCS: u64 = 8;
    const CALLS: u64 = 200;
    let w = audit_common::world();
    let seed = Rng::new().next();
    let started = Instant::now();
    let callers: Vec<Caller> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..PROCS)
            .map(|p| {
                let w = &w;
                s.spawn(move || {
                    let mut rng = Rng(seed ^ (p + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
                    let mut me = Caller {
                        done: Vec::new(),
                        kills: 0,
                        paths: Vec::new(),
                    };
                    for i in 0..CALLS {
                        let path = format!("c-{p}-{i}");
                        let args = ["walprobe.mark", "--path", path.as_str(), "--text", "x"];
                        let child = spawn_exec(w, None, &args, None);
                        // About one call in eight is killed, at a random instant.
                        if rng.below(8) == 0 {
                            std::thread::sleep(Duration::from_micros(rng.below(40_000)));
                            sigkill(child.id());
                        }
                        let out = wait_bounded(child);
                        if killed(&out.status) {
                            me.kills += 1;
                        } else {
                            let v: Value = serde_json::from_slice(&out.stdout).unwrap();
                            assert_eq!(v["ok"], true, "{v}");
                            me.done.push(v["audit_id"].as_str().unwrap().to_owned());
                        }
                        me.paths.push(path);
                    }
                    me
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let kills: usize = callers.iter().map(|c| c.kills).sum();
    let (code, report) = verify_in(&w, &w.hcp_home);
    assert_eq!(code, Some(0), "one linear chain: {report}");
    let census = Census::of(&w.hcp_home);
    for c in &callers {
        for id in &c.done {
            assert!(
                census.intents.contains_key(id) && census.closed.contains(id),
                "a call answered as done has no intent and outcome: {id}"
            );
        }
        for path in &c.paths {
            if w.work.join(path).exists() {
                assert_eq!(
                    census.with_digest(&mark_digest(&w, path, "x")).len(),
                    1,
                    "`{path}` ran without exactly one intent"
                );
            }
        }
    }
    let open = census.open();
    assert_eq!(
        interrupted(&report),
        open,
        "interrupted = intents without outcome"
    );
    assert!(
        open.len() <= kills,
        "{} interrupted after {kills} kills",
        open.len()
    );
    let done: usize = callers.iter().map(|c| c.done.len()).sum();
    assert_eq!(done + kills, (PROCS * CALLS) as usize);
    eprintln!(
        "{PROCS} x {CALLS} execs: {kills} killed, {} records, {} interrupted, {:.1} s",
        report["records"],
        open.len(),
        started.elapsed().as_secs_f64()
    );
}
