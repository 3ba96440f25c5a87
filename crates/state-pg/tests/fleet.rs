//! A fleet on one PostgreSQL (RUNTIME §9), with real processes: two "machines" (two homes,
//! two machine ids) × 4 processes of the driver (`src/bin/driver.rs`) each, against the
//! server of `.ci/pg-start` (and private servers for the tests that stop or change one).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use hcp_model::{Capability, PackId};
use hcp_state_pg::{ApprovalRequest, MachineId, PgState, StateConfig};
use hcp_store::grant::PackScope;
use hcp_store::session::PrincipalId;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use support::{fresh, fresh_on, machine, session, t};

const MACHINES: usize = 2;
const PER_MACHINE: usize = 4;

struct Driver {
    child: Child,
    stdin: Option<ChildStdin>,
    out: BufReader<ChildStdout>,
    lines: Vec<String>,
}

impl Driver {
    fn spawn(cfg: &StateConfig, home: &Path, session: &str, extra: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_hcp-state-pg-driver"))
            .args(["--url", &cfg.url, "--schema", cfg.schema_name()])
            .arg("--home")
            .arg(home)
            .args(["--session", session, "--pack", "probe", "--wait"])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let out = BufReader::new(child.stdout.take().unwrap());
        Self {
            child,
            stdin,
            out,
            lines: Vec::new(),
        }
    }

    /// The next line of output (blocking on the pipe).
    fn line(&mut self) -> String {
        let mut l = String::new();
        self.out.read_line(&mut l).unwrap();
        let l = l.trim_end().to_owned();
        self.lines.push(l.clone());
        l
    }

    fn go(&mut self) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(b"go\n").unwrap();
        stdin.flush().unwrap();
    }

    /// Reads to `done` and returns the exit code and every line.
    fn exit(mut self) -> (Option<i32>, Vec<String>) {
        self.stdin = None;
        while self.line() != "done" {}
        (self.child.wait().unwrap().code(), self.lines)
    }

    /// Reads to `done`, checks a clean exit.
    fn finish(self) -> Vec<String> {
        let (code, lines) = self.exit();
        assert_eq!(code, Some(0), "{lines:?}");
        lines
    }
}

/// A fleet test's state: a session of `agent` holding `verb.exec.read` on `probe`.
struct Fleet {
    cfg: StateConfig,
    homes: Vec<tempfile::TempDir>,
    session: String,
    token: String,
    owner: PgState,
}

fn fleet(cfg: StateConfig) -> Fleet {
    let owner = machine(&cfg);
    let now = hcp_store::session::Timestamp::now();
    let (token, s) = session("agent", now);
    owner.session_insert(&s).unwrap();
    owner
        .grant(
            &PrincipalId::parse("agent").unwrap(),
            &PackScope::Pack(PackId::parse("probe").unwrap()),
            &[Capability::VerbExecRead],
            now,
        )
        .unwrap();
    Fleet {
        cfg,
        homes: (0..MACHINES)
            .map(|_| tempfile::tempdir().unwrap())
            .collect(),
        session: s.token_sha256,
        token: token.as_str().to_owned(),
        owner,
    }
}

impl Fleet {
    /// Starts 2 machines × 4 drivers, waits until each is connected, then lets them go at
    /// once.
    fn run(&self, extra: &[&str]) -> Vec<Vec<String>> {
        let mut ds: Vec<Driver> = (0..MACHINES * PER_MACHINE)
            .map(|i| {
                Driver::spawn(
                    &self.cfg,
                    self.homes[i % MACHINES].path(),
                    &self.session,
                    extra,
                )
            })
            .collect();
        for d in &mut ds {
            assert_eq!(d.line(), "ready");
        }
        for d in &mut ds {
            d.go();
        }
        ds.into_iter().map(Driver::finish).collect()
    }
}

fn count(outs: &[Vec<String>], prefix: &str) -> usize {
    outs.iter()
        .flatten()
        .filter(|l| l.starts_with(prefix))
        .count()
}

#[test]
fn two_machines_share_one_rate_limit_and_one_budget_exactly() {
    let Some(cfg) = fresh("fleet_counters") else {
        return;
    };
    exact_counters(cfg);
}

/// The same through pgbouncer in transaction pooling (`.ci/pg-start --pool`), as an
/// operator would run it on each machine to avoid a server process start per call.
#[test]
fn the_same_through_a_connection_pooler() {
    if support::url().is_none() {
        return;
    }
    let Ok(pool) = std::env::var("HCP_TEST_PG_POOL_URL") else {
        support::skip("HCP_TEST_PG_POOL_URL is not set: `eval \"$(.ci/pg-start --pool)\"`");
        return;
    };
    exact_counters(fresh_on(&pool, "fleet_pool"));
}

fn exact_counters(cfg: StateConfig) {
    let f = fleet(cfg);
    let t0: u64 = 1_900_000_000_000;
    let phase = |now_ms: u64| {
        let now = now_ms.to_string();
        f.run(&[
            "--count", "15", "--rate", "50", "--budget", "80", "--now-ms", &now,
        ])
    };
    // 8 × 15 = 120 attempts in one window: exactly 50 across both machines.
    let one = phase(t0);
    assert_eq!(count(&one, "admitted"), 50, "{one:?}");
    assert_eq!(count(&one, "refused rate_limit"), 70);
    // Both machines took part.
    let by_machine: Vec<usize> = (0..MACHINES)
        .map(|m| {
            one.iter()
                .enumerate()
                .filter(|(i, _)| i % MACHINES == m)
                .map(|(_, o)| o.iter().filter(|l| l.starts_with("admitted")).count())
                .sum()
        })
        .collect();
    assert!(by_machine.iter().all(|&n| n > 0), "{by_machine:?}");
    // The next window: the budget's 30 remaining, then nothing, ever.
    let two = phase(t0 + 61_000);
    assert_eq!(count(&two, "admitted"), 30, "{two:?}");
    assert_eq!(count(&two, "refused budget"), 90);
    let three = phase(t0 + 122_000);
    assert_eq!(count(&three, "admitted"), 0);
    let (total, _) = f
        .owner
        .counter_read("agent", "probe.say", 60_000, t0)
        .unwrap();
    assert_eq!(total, 80);
    let report = f.owner.audit_verify().unwrap();
    assert!(report.is_sound(), "{report:?}");
    // Every admitted call has its intent and outcome; refusals wrote nothing.
    assert_eq!(report.records(), 160);
    assert!(report.chains.iter().all(|c| c.interrupted.is_empty()));
    assert_eq!(report.chains.len(), MACHINES);
}

#[test]
fn an_approval_given_once_is_taken_once_across_the_fleet() {
    let Some(cfg) = fresh("fleet_approval") else {
        return;
    };
    let f = fleet(cfg);
    let a = f
        .owner
        .approval_request(
            &ApprovalRequest {
                tool: "probe.say".into(),
                principal: "agent".into(),
                principal_digest: "sha256:pd".into(),
                args_digest: "sha256:args".into(),
                policy_hash: "sha256:policy".into(),
                summary: BTreeMap::new(),
                escalation: false,
                window_s: Some(600),
                session: None,
                project: None,
            },
            hcp_store::session::Timestamp::now(),
        )
        .unwrap();
    f.owner
        .approve(&a.id, hcp_store::session::Timestamp::now())
        .unwrap();
    let outs = f.run(&["--count", "1", "--approval"]);
    assert_eq!(count(&outs, "admitted"), 1, "{outs:?}");
    assert_eq!(count(&outs, "refused requires_confirmation"), 7);
    let taken = f.owner.approvals_list().unwrap().pop().unwrap();
    assert!(taken.taken_at.is_some());
    assert!(f.owner.audit_verify().unwrap().is_sound());
}

#[test]
fn no_admit_on_machine_b_after_a_revoke_on_machine_a_commits() {
    let Some(cfg) = fresh("fleet_revoke") else {
        return;
    };
    let f = fleet(cfg);
    let schema = f.cfg.schema_name().to_owned();
    // Machine B loops until refused.
    let mut b = Driver::spawn(&f.cfg, f.homes[1].path(), &f.session, &["--count", "0"]);
    assert_eq!(b.line(), "ready");
    b.go();
    for _ in 0..5 {
        assert!(b.line().starts_with("admitted"));
    }
    let b_machine = MachineId::load_or_create(&f.homes[1].path().join("state")).unwrap();
    // Machine A revokes; in the same transaction a marker lands on B's chain, so every
    // intent B committed after the revoke would come after the marker.
    support::psql(
        &f.cfg.url,
        &format!(
            "BEGIN; SET LOCAL search_path = {schema};
             DELETE FROM grants WHERE principal = 'agent' AND pack = 'probe';
             SELECT hcp_append('{b_machine}', '{{\"kind\":\"marker\",\"machine\":\"{b_machine}\"}}');
             COMMIT;"
        ),
    );
    let lines = b.finish();
    let admitted = lines.iter().filter(|l| l.starts_with("admitted")).count();
    assert_eq!(lines.iter().rev().nth(1).unwrap(), "refused missing_grant");
    let tail = f.owner.audit_tail(100_000).unwrap();
    let b_records: Vec<_> = tail
        .iter()
        .filter(|r| r.machine == b_machine.as_str())
        .collect();
    let marker = b_records
        .iter()
        .find(|r| r.kind() == Some("marker"))
        .unwrap()
        .seq;
    let late: Vec<_> = b_records
        .iter()
        .filter(|r| r.kind() == Some("intent") && r.seq > marker)
        .collect();
    assert!(late.is_empty(), "intents after the revoke: {late:?}");
    let before = b_records
        .iter()
        .filter(|r| r.kind() == Some("intent") && r.seq < marker)
        .count();
    assert_eq!(before, admitted);
    // Through the API: granted again on A, B admits; revoked on A, B's next call (a new
    // process) is refused; a session ended on A likewise.
    let agent = PrincipalId::parse("agent").unwrap();
    let probe = PackScope::Pack(PackId::parse("probe").unwrap());
    let now = hcp_store::session::Timestamp::now;
    f.owner
        .grant(&agent, &probe, &[Capability::VerbExecRead], now())
        .unwrap();
    let once = |extra: &[&str]| {
        let mut d = Driver::spawn(&f.cfg, f.homes[1].path(), &f.session, extra);
        assert_eq!(d.line(), "ready");
        d.go();
        d.finish()[1].clone()
    };
    assert!(once(&["--count", "1"]).starts_with("admitted"));
    f.owner.revoke(&agent, &probe, &[]).unwrap();
    assert_eq!(once(&["--count", "1"]), "refused missing_grant");
    f.owner
        .grant(&agent, &probe, &[Capability::VerbExecRead], now())
        .unwrap();
    assert!(once(&["--count", "1"]).starts_with("admitted"));
    f.owner.session_end(&f.token, now()).unwrap();
    assert_eq!(once(&["--count", "1"]), "refused bad_session");
    assert!(f.owner.audit_verify().unwrap().is_sound());
}

#[test]
fn server_stopped_restarted_repassworded_and_a_schema_behind_give_the_right_code() {
    let Some(server) = support::Server::start(false) else {
        return;
    };
    // A role with a password, as an operator would use.
    server.psql("CREATE ROLE hcp_fleet LOGIN PASSWORD 'one'; GRANT CREATE ON DATABASE postgres TO hcp_fleet;");
    let url = format!(
        "{} user=hcp_fleet password=one",
        server.url.replace("user=postgres", "")
    );
    let cfg = fresh_on(&url, "fleet_outage");
    let f = fleet(cfg);
    let mut ds: Vec<Driver> = (0..MACHINES * PER_MACHINE)
        .map(|i| {
            Driver::spawn(
                &f.cfg,
                f.homes[i % MACHINES].path(),
                &f.session,
                &["--count", "40", "--budget", "1000000", "--pause-on-error"],
            )
        })
        .collect();
    for d in &mut ds {
        assert_eq!(d.line(), "ready");
    }
    for d in &mut ds {
        d.go();
    }
    for d in &mut ds {
        for _ in 0..3 {
            assert!(d.line().starts_with("admitted"));
        }
    }
    // Stopped mid-run: every driver sees state_unavailable, none hangs.
    server.ctl("stop");
    for d in &mut ds {
        loop {
            let l = d.line();
            if l.starts_with("error") {
                assert_eq!(l, "error state_unavailable");
                break;
            }
            assert!(l.starts_with("admitted"), "{l}");
        }
    }
    // Restarted: they carry on (the next call connects again).
    server.ctl("start");
    for d in &mut ds {
        d.go();
    }
    let outs: Vec<Vec<String>> = ds.into_iter().map(Driver::finish).collect();
    let admitted = count(&outs, "admitted");
    let errors = count(&outs, "error");
    assert_eq!(errors, 8, "{outs:?}");
    assert_eq!(admitted + errors, 8 * 40);
    let after = machine(&f.cfg);
    let report = after.audit_verify().unwrap();
    assert!(report.is_sound(), "{report:?}");
    // Nothing half-written: each slot counted has its intent, and each intent its slot.
    // A call whose answer was lost with the server may have committed: then it is an
    // intent without outcome (interrupted), and it counts.
    let intents = after
        .audit_tail(100_000)
        .unwrap()
        .iter()
        .filter(|r| r.kind() == Some("intent"))
        .count() as u64;
    let (total, _) = after.counter_read("agent", "probe.say", 60_000, 0).unwrap();
    assert_eq!(total, intents, "{report:?}");
    assert!(intents >= admitted as u64 && intents <= (admitted + errors) as u64);

    // The password changed: a new connection is refused with state_unavailable.
    server.psql("ALTER ROLE hcp_fleet PASSWORD 'two'");
    let e = PgState::connect(&f.cfg, MachineId::generate().unwrap()).unwrap_err();
    assert_eq!(e.code(), "state_unavailable");
    assert_eq!(e.failure().unwrap().as_str(), "credentials");
    let d = Driver::spawn(&f.cfg, f.homes[0].path(), &f.session, &["--count", "1"]);
    assert_eq!(
        d.exit(),
        (
            Some(74),
            vec!["error state_unavailable".to_owned(), "done".to_owned()]
        )
    );

    // A schema one version behind: refused (74) until migrated; nothing was written.
    let behind = StateConfig::new(&server.url).with_schema(support::schema_name("behind"));
    PgState::migrate_to(&behind, hcp_state_pg::SCHEMA_VERSION - 1).unwrap();
    let e = PgState::connect(&behind, MachineId::generate().unwrap()).unwrap_err();
    assert_eq!(e.code(), "state_unavailable");
    assert!(e.hint().unwrap().contains("hcp state migrate"));
    let d = Driver::spawn(&behind, f.homes[0].path(), &f.session, &["--count", "1"]);
    assert_eq!(d.exit().0, Some(74));
    let report = PgState::migrate(&behind).unwrap();
    assert_eq!(report.applied.len(), 1);
    let s = machine(&behind);
    assert!(s.audit_verify().unwrap().chains.is_empty());
    let _ = t(0);
}

#[test]
fn a_server_crash_mid_run_leaves_every_chain_sound_and_every_slot_with_its_intent() {
    let Some(server) = support::Server::start(false) else {
        return;
    };
    let cfg = fresh_on(&server.url, "fleet_crash");
    let f = fleet(cfg);
    let mut ds: Vec<Driver> = (0..MACHINES * PER_MACHINE)
        .map(|i| {
            Driver::spawn(
                &f.cfg,
                f.homes[i % MACHINES].path(),
                &f.session,
                &["--count", "30", "--budget", "1000000", "--pause-on-error"],
            )
        })
        .collect();
    for d in &mut ds {
        assert_eq!(d.line(), "ready");
    }
    for d in &mut ds {
        d.go();
    }
    for d in &mut ds {
        for _ in 0..3 {
            assert!(d.line().starts_with("admitted"));
        }
    }
    // An immediate shutdown: no checkpoint, outcomes not yet flushed are lost.
    server.ctl("crash");
    for d in &mut ds {
        while !d.line().starts_with("error") {}
    }
    server.ctl("start");
    for d in &mut ds {
        d.go();
    }
    let outs: Vec<Vec<String>> = ds.into_iter().map(Driver::finish).collect();
    let admitted = count(&outs, "admitted") as u64;
    let errors = count(&outs, "error") as u64;
    let after = machine(&f.cfg);
    let report = after.audit_verify().unwrap();
    assert!(report.is_sound(), "{report:?}");
    let intents = after
        .audit_tail(100_000)
        .unwrap()
        .iter()
        .filter(|r| r.kind() == Some("intent"))
        .count() as u64;
    let (total, _) = after.counter_read("agent", "probe.say", 60_000, 0).unwrap();
    assert_eq!(
        total, intents,
        "every slot has its intent, every intent its slot"
    );
    assert!(intents >= admitted && intents <= admitted + errors);
    // Calls without an outcome: at most the one in flight per driver, and the last
    // outcome each wrote before the crash (each admit's flush carries the outcomes before it).
    let interrupted: usize = report.chains.iter().map(|c| c.interrupted.len()).sum();
    assert!(interrupted <= 2 * MACHINES * PER_MACHINE, "{interrupted}");
}
