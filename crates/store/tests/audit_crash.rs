//! Crash campaigns of the audit trail's write path (RUNTIME §6): a driver process (this
//! test binary, run as `driver`) admits calls and records their outcomes while the test
//! kills it with SIGKILL, at named points of the write path and at random instants.
//! After every kill `verify` must be sound, the interrupted calls must be exactly the
//! ones the driver had started and not finished, no counter slot or approval may be
//! spent without an intent, and every intent must count.
//!
//! The driver reports on stdout, one line each: `admitted ID` once `admit` returned
//! (the intent is durable, the child would start now), `done ID` once the outcome is
//! written, `refused CODE` when an admission is refused. The test reads those lines
//! through a pipe; nothing is synchronised by sleeping (random delays only choose where
//! a kill lands).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use hcp_model::{Land, Operation};
use hcp_store::Home;
use hcp_store::approval;
use hcp_store::audit::{
    self, Admission, ApprovalSpend, AuditLog, CounterSpend, DigestKey, Intent, Kind, Outcome,
    TailLine,
};
use hcp_store::counter::{Counters, Limits, Verdict};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const DRIVER_HOME: &str = "HCP_TEST_AUDIT_DRIVER_HOME";
const DRIVER_CALLS: &str = "HCP_TEST_AUDIT_DRIVER_CALLS";
const DRIVER_WHO: &str = "HCP_TEST_AUDIT_DRIVER_WHO";
const DRIVER_KILL_AT: &str = "HCP_TEST_AUDIT_DRIVER_KILL_AT";
const DRIVER_APPROVAL: &str = "HCP_TEST_AUDIT_DRIVER_APPROVAL";
const TOOL: &str = "transit.find";
/// The budget of the campaign's counter: larger than the calls it makes, so every
/// admission should pass and each intent must count exactly once.
const BUDGET: u64 = 100_000;

/// The steps a kill is aimed at (with their occurrence in a driver's life).
const STEPS: [&str; 7] = [
    "locked",
    "intent_written",
    "intent_synced",
    "caches_updated",
    "anchor_written",
    "outcome_written",
    "recovered",
];

fn limits() -> Limits {
    Limits {
        rate_limit: None,
        budget: Some(BUDGET),
        window_ms: 60_000,
    }
}

/// The driver. Does nothing in a normal test run.
#[test]
fn driver() {
    let Some(home) = std::env::var_os(DRIVER_HOME) else {
        return;
    };
    let calls: u64 = std::env::var(DRIVER_CALLS).unwrap().parse().unwrap();
    let who = std::env::var(DRIVER_WHO).unwrap_or_else(|_| "agent".into());
    let home = Home::open(home).unwrap();
    let mut log = AuditLog::new(&home);
    if let Ok(at) = std::env::var(DRIVER_KILL_AT) {
        // `STEP:N`: SIGKILL at the Nth time the write path reaches STEP (the seam a debug
        // hcp maps `HCP_TEST_ABORT_AT` to).
        log = log.step_hook(audit::abort_hook(&at).unwrap());
    }
    let key = DigestKey::load_or_create(&home).unwrap();
    let mut approval = std::env::var(DRIVER_APPROVAL).ok().map(|id| ApprovalSpend {
        id,
        tool: TOOL.into(),
        principal: who.clone(),
        principal_digest: "pd".into(),
        args_digest: "ad".into(),
        policy_hash: "ph".into(),
    });
    let mut out = std::io::stdout().lock();
    for i in 0..calls {
        let a = Admission {
            intent: Intent {
                principal: who.clone(),
                project: None,
                pack_id: "transit".into(),
                verb_key: "find".into(),
                operation: Operation::Read,
                land: Some(Land::Local),
                args_digest: key.args_digest([]),
                extra: BTreeMap::from([("n".into(), i.into())]),
            },
            counters: vec![CounterSpend {
                identity: who.clone(),
                tool: TOOL.into(),
                limits: limits(),
            }],
            // The first call of a driver given an approval takes it.
            approvals: approval.take().into_iter().collect(),
        };
        let admitted = match log.admit(&a) {
            Ok(x) => x,
            Err(e) => {
                writeln!(out, "refused {}: {e}", e.code()).unwrap();
                out.flush().unwrap();
                continue;
            }
        };
        writeln!(out, "admitted {}", admitted.id).unwrap();
        out.flush().unwrap();
        log.outcome(&Outcome {
            intent: admitted.id.clone(),
            principal: who.clone(),
            pack_id: "transit".into(),
            verb_key: "find".into(),
            code: None,
            exit_code: Some(0),
            duration_ms: 1,
            stdout_bytes: 3,
            stderr_bytes: 0,
            truncated: false,
            extra: BTreeMap::new(),
        })
        .unwrap();
        writeln!(out, "done {}", admitted.id).unwrap();
        out.flush().unwrap();
    }
}

fn spawn_driver(
    home: &std::path::Path,
    calls: u64,
    who: &str,
    kill_at: Option<&str>,
    approval: Option<&str>,
) -> Child {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args([
        "--exact",
        "driver",
        "--test-threads",
        "1",
        "--nocapture",
        "--quiet",
    ])
    .env(DRIVER_HOME, home)
    .env(DRIVER_CALLS, calls.to_string())
    .env(DRIVER_WHO, who)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    if let Some(k) = kill_at {
        c.env(DRIVER_KILL_AT, k);
    }
    if let Some(a) = approval {
        c.env(DRIVER_APPROVAL, a);
    }
    c.spawn().unwrap()
}

/// A small xorshift generator, seeded from the clock (printed, so a failure can be
/// replayed with `HCP_TEST_SEED`).
struct Rng(u64);

impl Rng {
    fn new() -> Self {
        let seed = std::env::var("HCP_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
                    | 1
            });
        eprintln!("seed {seed} (HCP_TEST_SEED replays it)");
        Self(seed)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn sigkill(pid: u32) {
    // SAFETY: a signal to our own child, which we have not reaped yet.
    unsafe {
        libc::kill(pid as libc::pid_t, libc::SIGKILL);
    }
}

/// What drivers reported.
#[derive(Default)]
struct Reports {
    admitted: BTreeSet<String>,
    done: BTreeSet<String>,
}

impl Reports {
    fn read_line(&mut self, line: &str) {
        if let Some(id) = line.strip_prefix("admitted ") {
            self.admitted.insert(id.to_owned());
        } else if let Some(id) = line.strip_prefix("done ") {
            self.done.insert(id.to_owned());
        } else if let Some(code) = line.strip_prefix("refused ") {
            panic!("an admission was refused: {code}");
        }
    }
}

/// The trail's intents and outcomes, and the intents that spend the counter of `who`.
type Census = (
    BTreeSet<String>,
    BTreeSet<String>,
    BTreeMap<String, u64>,
    BTreeMap<String, u64>,
);

/// Intents, outcomes (by intent), counter spends by principal, approvals by intents.
fn census(log: &AuditLog) -> Census {
    let (lines, _) = log.tail(usize::MAX).unwrap();
    let (mut intents, mut outcomes, mut spends) =
        (BTreeSet::new(), BTreeSet::new(), BTreeMap::new());
    let mut approvals = BTreeMap::new();
    for l in lines {
        let TailLine::Record(r) = l else {
            panic!("a line that is not a record")
        };
        match r.kind() {
            Kind::Intent => {
                intents.insert(r.id.clone());
                if let Some(sp) = r.extra.get("spends") {
                    *spends.entry(r.principal.clone().unwrap()).or_insert(0) += 1;
                    for a in sp["approvals"].as_array().into_iter().flatten() {
                        *approvals.entry(a.as_str().unwrap().to_owned()).or_insert(0) += 1;
                    }
                }
            }
            Kind::Outcome => {
                outcomes.insert(r.intent.clone().unwrap());
            }
            _ => {}
        }
    }
    (intents, outcomes, spends, approvals)
}

/// Everything that must hold after any number of kills.
fn check_invariants(home: &Home, reports: &Reports, in_flight_allowed: usize, granted: &[String]) {
    let log = AuditLog::new(home);
    let r = log.verify().unwrap();
    assert!(r.is_clean(), "verify after a kill: {:?}", r.broken);
    let (intents, outcomes, spends, taken) = census(&log);
    // No lost record of a call that ran; no lost outcome that was reported.
    assert!(
        reports.admitted.is_subset(&intents),
        "an admitted call has no intent record"
    );
    assert!(
        reports.done.is_subset(&outcomes),
        "a finished call has no outcome record"
    );
    // Interrupted = intents without outcome: the calls started and not finished, plus at
    // most one per killed driver that died between its intent and its report.
    let interrupted: BTreeSet<String> = r.interrupted.iter().map(|i| i.id.clone()).collect();
    let expected: BTreeSet<String> = intents.difference(&outcomes).cloned().collect();
    assert_eq!(interrupted, expected);
    // A call reported started and not finished may have its outcome (the driver died
    // after writing it); an interrupted call the driver never reported died between its
    // intent and its report: at most one per kill.
    let unreported: Vec<&String> = interrupted
        .iter()
        .filter(|id| !reports.admitted.contains(*id))
        .collect();
    assert!(
        unreported.len() <= in_flight_allowed,
        "{} interrupted calls were never reported, after {in_flight_allowed} kills",
        unreported.len()
    );
    // Every intent counts, exactly once, once the caches are brought up to date.
    log.reconcile().unwrap();
    let counters = Counters::new(home);
    for (who, n) in &spends {
        let budget = Limits {
            rate_limit: None,
            budget: Some(*n),
            window_ms: 1,
        };
        let above = Limits {
            budget: Some(n + 1),
            ..budget
        };
        assert_eq!(
            counters.check(who, TOOL, budget, 0).unwrap(),
            Verdict::Budget,
            "{who}: fewer than {n} counted"
        );
        assert_eq!(
            counters.check(who, TOOL, above, 0).unwrap(),
            Verdict::Ok,
            "{who}: more than {n} counted"
        );
    }
    // An approval is used exactly when one intent names it, never by two.
    for id in granted {
        let n = taken.get(id).copied().unwrap_or(0);
        assert!(n <= 1, "approval `{id}` taken by {n} intents");
        let used = approval::get(home, id).unwrap().unwrap().used_at.is_some();
        assert_eq!(
            used,
            n == 1,
            "approval `{id}`: used {used}, named by {n} intents"
        );
    }
}

#[test]
fn a_hundred_kills_at_every_point_never_leave_damage_or_a_wrong_count() {
    let d = tempfile::tempdir().unwrap();
    hcp_store::made::init(
        &d.path().join("hcp"),
        hcp_store::audit::Actor::owner(),
        None,
    )
    .unwrap();
    let home = Home::open(d.path().join("hcp")).unwrap();
    let mut rng = Rng::new();
    let mut reports = Reports::default();
    let started = Instant::now();
    let mut killed = 0;
    let mut granted = Vec::new();
    for run in 0..100u64 {
        let calls = 1 + rng.below(4);
        // Half the runs die at a named point, half at a random instant.
        let kill_at = (run % 2 == 0).then(|| {
            let step = STEPS[rng.below(STEPS.len() as u64) as usize];
            format!("{step}:{}", 1 + rng.below(calls))
        });
        // Every fifth run starts on a torn tail (a write cut short, as a power cut can
        // leave one): the driver's first append recovers it, and may be killed doing so.
        if run % 5 == 1 {
            let log = AuditLog::new(&home);
            if log.path().exists() {
                let torn = br#"{"args_digest":"hmac-sha256:0123","decision":"al"#;
                let cut = 1 + rng.below(torn.len() as u64 - 1) as usize;
                std::fs::OpenOptions::new()
                    .append(true)
                    .open(log.path())
                    .unwrap()
                    .write_all(&torn[..cut])
                    .unwrap();
                let r = log.verify().unwrap();
                assert!(
                    r.is_clean() && r.torn_tail.is_some(),
                    "a torn tail is not damage"
                );
            }
        }
        // Every fourth run's first call takes an approval the owner granted.
        let approval = (run % 4 == 3).then(|| {
            let now = jiff::Timestamp::now();
            let a = approval::request(
                &home,
                &approval::Call {
                    tool: TOOL,
                    principal: ("agent", "pd"),
                    args_digest: "ad",
                    policy_hash: "ph",
                    escalation: false,
                },
                BTreeMap::new(),
                Some(600),
                now,
            )
            .unwrap();
            approval::approve(&home, &a.id, now).unwrap();
            a.id
        });
        if let Some(a) = &approval {
            granted.push(a.clone());
        }
        let mut child = spawn_driver(
            home.root(),
            calls,
            "agent",
            kill_at.as_deref(),
            approval.as_deref(),
        );
        let out = BufReader::new(child.stdout.take().unwrap());
        let lines_before_kill = rng.below(2 * calls + 1);
        let mut read = 0;
        let mut lines = out.lines();
        if kill_at.is_none() {
            for l in lines.by_ref() {
                reports.read_line(&l.unwrap());
                read += 1;
                if read >= lines_before_kill {
                    break;
                }
            }
            std::thread::sleep(Duration::from_micros(rng.below(3000)));
            sigkill(child.id());
        }
        for l in lines {
            reports.read_line(&l.unwrap());
        }
        let status = child.wait().unwrap();
        if std::os::unix::process::ExitStatusExt::signal(&status) == Some(libc::SIGKILL) {
            killed += 1;
        }
        check_invariants(&home, &reports, killed, &granted);
    }
    assert!(killed >= 40, "only {killed} of 100 runs were killed");
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "the campaign is bounded in time"
    );
    // Torn tails were left and recovered along the way, and none of it is damage.
    let r = AuditLog::new(&home).verify().unwrap();
    eprintln!(
        "100 runs, {killed} killed, {} records, {} interrupted, {} recoveries, {:.1} s",
        r.records,
        r.interrupted.len(),
        r.repairs.len(),
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn eight_processes_times_two_hundred_calls_with_random_kills_keep_one_chain() {
    const PROCS: u64 = 8;
    const CALLS: u64 = 200;
    let d = tempfile::tempdir().unwrap();
    hcp_store::made::init(
        &d.path().join("hcp"),
        hcp_store::audit::Actor::owner(),
        None,
    )
    .unwrap();
    let home = Home::open(d.path().join("hcp")).unwrap();
    let seed = Rng::new().next();
    let started = Instant::now();
    let results: Vec<(Reports, usize)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..PROCS)
            .map(|p| {
                let home = home.root().to_path_buf();
                s.spawn(move || {
                    let mut rng = Rng(seed ^ (p + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
                    let mut reports = Reports::default();
                    let mut kills = 0;
                    let who = format!("agent-{p}");
                    while (reports.done.len() as u64) < CALLS {
                        let left = CALLS - reports.done.len() as u64;
                        let mut child = spawn_driver(&home, left, &who, None, None);
                        let out = BufReader::new(child.stdout.take().unwrap());
                        // Kill about one driver life in three, after a random number of lines.
                        let kill_after = (rng.below(2) == 0).then(|| 1 + rng.below(40));
                        let mut n = 0;
                        let mut killed = false;
                        for l in out.lines() {
                            let Ok(l) = l else { break };
                            reports.read_line(&l);
                            n += 1;
                            if kill_after == Some(n) {
                                std::thread::sleep(Duration::from_micros(rng.below(2000)));
                                sigkill(child.id());
                                killed = true;
                            }
                        }
                        child.wait().unwrap();
                        kills += usize::from(killed);
                        // A call admitted but not finished before the kill stays interrupted:
                        // count it as done for the loop (it ran), not again.
                        let unfinished: Vec<String> = reports
                            .admitted
                            .difference(&reports.done)
                            .cloned()
                            .collect();
                        for id in unfinished {
                            reports.done.insert(format!("interrupted {id}"));
                        }
                    }
                    (reports, kills)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut all = Reports::default();
    let mut kills = 0;
    for (r, k) in results {
        all.admitted.extend(r.admitted);
        all.done.extend(
            r.done
                .into_iter()
                .filter(|d| !d.starts_with("interrupted ")),
        );
        kills += k;
    }
    check_invariants(&home, &all, kills, &[]);
    let r = AuditLog::new(&home).verify().unwrap();
    let (intents, ..) = census(&AuditLog::new(&home));
    assert!(
        intents.len() as u64 >= PROCS * CALLS,
        "{} intents",
        intents.len()
    );
    eprintln!(
        "{PROCS} processes x {CALLS} calls: {kills} kills, {} records, {} interrupted, {:.1} s",
        r.records,
        r.interrupted.len(),
        started.elapsed().as_secs_f64()
    );
}
