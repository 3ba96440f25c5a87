//! One call's state steps, the file store against PostgreSQL, pairwise in one run:
//!
//! - `file`: `hcp-store`'s counter take (flock, read, atomic write) and two durable audit
//!   appends (the intent, then the outcome) in a home on disk;
//! - `postgres`: [`PgState::admit`] (session and grant re-checked, one budget slot, the
//!   intent) then [`PgState::record`] (the outcome), over the open connection;
//! - `postgres_snapshot_admit_outcome`: the same after [`PgState::snapshot`] (the session,
//!   grant, counter and approval reads of the gate in one round trip): a call's state steps;
//! - `postgres_connect`: the same on a new connection each time (what a fresh `hcp exec`
//!   process pays: start-up, authentication, the schema check);
//! - `pool_connect`: the same through pgbouncer on a Unix socket (`HCP_TEST_PG_POOL_URL`,
//!   `.ci/pg-start --pool`).
//!
//! - `file_8_callers`, `postgres_8_callers`: 8 callers of one machine at once, each with
//!   its own connection; the time is that of one round in which each caller makes one call.
//!
//! Needs `HCP_TEST_PG_URL` (`eval "$(.ci/pg-start)"`, a Unix socket); without it only
//! `file` runs. `cargo bench -p hcp-state-pg --bench admit`.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use criterion::{Criterion, criterion_group, criterion_main};
use hcp_model::{Capability, PackId};
use hcp_state_pg::{
    Admission, CounterTake, GrantCheck, MachineId, PgState, SnapshotQuery, StateConfig,
};
use hcp_store::Home;
use hcp_store::audit::{AuditLog, Decision, Entry};
use hcp_store::counter::{Counters, Limits};
use hcp_store::grant::PackScope;
use hcp_store::session::{PrincipalId, Session, Timestamp, Token, token_digest};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

/// Callers at once in the `*_8_callers` cases (one machine).
const CALLERS: usize = 8;

const LIMITS: Limits = Limits {
    rate_limit: None,
    budget: Some(u64::MAX / 2),
    window_ms: 60_000,
};

fn entry(kind: &str) -> Entry {
    Entry {
        principal: "agent".into(),
        project: None,
        pack_id: Some("probe".into()),
        verb_key: "say".into(),
        operation: None,
        land: None,
        decision: Decision::Allow,
        code: None,
        args_digest: "sha256:0000".into(),
        exit_code: Some(0),
        duration_ms: 1,
        extra: BTreeMap::from([("kind".to_owned(), Value::String(kind.into()))]),
    }
}

fn fields(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

fn now_ms() -> u64 {
    u64::try_from(Timestamp::now().as_millisecond()).unwrap()
}

struct Pg {
    cfg: StateConfig,
    state: PgState,
    session: String,
    token: String,
}

fn pg() -> Option<Pg> {
    let Ok(url) = std::env::var("HCP_TEST_PG_URL") else {
        eprintln!(
            "skipped: postgres benches: HCP_TEST_PG_URL is not set (eval \"$(.ci/pg-start)\")"
        );
        return None;
    };
    let mut raw = [0u8; 6];
    std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom").unwrap(), &mut raw).unwrap();
    let cfg = StateConfig::new(url).with_schema(format!("bench_{}", hex::encode(raw)));
    PgState::migrate(&cfg).unwrap();
    let state = PgState::connect(&cfg, MachineId::generate().unwrap()).unwrap();
    let now = Timestamp::now();
    let token = Token::generate().unwrap();
    let s = Session {
        token_sha256: format!("sha256:{}", token_digest(token.as_str())),
        principal: PrincipalId::parse("agent").unwrap(),
        role: None,
        projects: vec![],
        attributes: BTreeMap::new(),
        can_view: vec![],
        workdir: None,
        created_at: now,
        expires_at: now + jiff::SignedDuration::from_hours(24),
        ended_at: None,
    };
    state.session_insert(&s).unwrap();
    state
        .grant(
            &PrincipalId::parse("agent").unwrap(),
            &PackScope::Pack(PackId::parse("probe").unwrap()),
            &[Capability::VerbExecRead],
            now,
        )
        .unwrap();
    Some(Pg {
        cfg,
        state,
        session: s.token_sha256,
        token: token.as_str().to_owned(),
    })
}

fn admit_outcome(state: &PgState, session: &str, pack: &PackId, intent: &Map<String, Value>) {
    let takes = [CounterTake {
        identity: "agent",
        tool: "probe.say",
        limits: LIMITS,
        now_ms: now_ms(),
    }];
    let a = state
        .admit(&Admission {
            now: Timestamp::now(),
            principal: "agent",
            session: Some(session),
            grant: Some(GrantCheck {
                pack,
                capabilities: &[Capability::VerbExecRead],
            }),
            counters: &takes,
            approvals: &[],
            intent,
        })
        .unwrap();
    let outcome = fields(json!({"kind": "outcome", "intent": a.audit_id, "exit_code": 0}));
    state.record_outcome(&outcome, Timestamp::now()).unwrap();
}

/// Rounds of the interleaved comparison.
const ROUNDS: usize = 300;

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// The cases interleaved round by round (each round runs every case once, in turn), so
/// that a load that drifts during the run weighs on all of them alike; prints each
/// median and its ratio to `file`.
fn pairwise(home: &Home, p: Option<&Pg>) {
    let counters = Counters::new(home);
    let log = AuditLog::new(home);
    let (intent_e, outcome_e) = (entry("intent"), entry("outcome"));
    let pack = PackId::parse("probe").unwrap();
    let intent = fields(json!({"kind": "intent", "principal": "agent", "verb_key": "say"}));
    let pool = std::env::var("HCP_TEST_PG_POOL_URL").ok().and_then(|u| {
        let cfg = StateConfig::new(u).with_schema(p?.cfg.schema_name());
        Some(cfg)
    });
    let mut names = vec!["file"];
    if p.is_some() {
        names.extend(["postgres", "postgres_snapshot", "postgres_connect"]);
        if pool.is_some() {
            names.push("pool_connect");
        }
    }
    let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(ROUNDS); names.len()];
    for _ in 0..ROUNDS {
        let t = std::time::Instant::now();
        counters
            .try_consume("agent", "probe.say", LIMITS, now_ms())
            .unwrap();
        log.append(&intent_e).unwrap();
        log.append(&outcome_e).unwrap();
        times[0].push(t.elapsed());
        let Some(p) = p else { continue };
        let t = std::time::Instant::now();
        admit_outcome(&p.state, &p.session, &pack, &intent);
        times[1].push(t.elapsed());
        let t = std::time::Instant::now();
        p.state
            .snapshot(&SnapshotQuery {
                token: Some(&p.token),
                pack: &pack,
                capabilities: &[Capability::VerbExecRead],
                counters: &[("agent", "probe.say", LIMITS)],
                now_ms: now_ms(),
                approvals: &[],
                now: Timestamp::now(),
            })
            .unwrap();
        admit_outcome(&p.state, &p.session, &pack, &intent);
        times[2].push(t.elapsed());
        let t = std::time::Instant::now();
        let s = PgState::connect(&p.cfg, p.state.machine().clone()).unwrap();
        admit_outcome(&s, &p.session, &pack, &intent);
        times[3].push(t.elapsed());
        if let Some(cfg) = &pool {
            let t = std::time::Instant::now();
            let s = PgState::connect(cfg, p.state.machine().clone()).unwrap();
            admit_outcome(&s, &p.session, &pack, &intent);
            times[4].push(t.elapsed());
        }
    }
    let medians: Vec<Duration> = times.iter_mut().map(|v| median(v)).collect();
    println!("pairwise, {ROUNDS} interleaved rounds (median, ratio to file):");
    for (n, m) in names.iter().zip(&medians) {
        println!(
            "  {n:<20} {:>8.3} ms  {:>5.2}x",
            m.as_secs_f64() * 1e3,
            m.as_secs_f64() / medians[0].as_secs_f64()
        );
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("admit_outcome");
    g.measurement_time(Duration::from_secs(5));
    g.sample_size(50);

    // A home on the same disk as the server's data directory (both under /tmp here).
    let dir = tempfile::tempdir().unwrap();
    let home = Home::open(dir.path().join("hcp")).unwrap();
    let counters = Counters::new(&home);
    let log = AuditLog::new(&home);
    let (intent_e, outcome_e) = (entry("intent"), entry("outcome"));
    g.bench_function("file", |b| {
        b.iter(|| {
            counters
                .try_consume("agent", "probe.say", LIMITS, now_ms())
                .unwrap();
            log.append(&intent_e).unwrap();
            log.append(&outcome_e).unwrap();
        });
    });

    // 8 callers at once on one machine: each round, every caller makes one call.
    g.bench_function("file_8_callers", |b| {
        b.iter_custom(|iters| {
            let start = std::time::Instant::now();
            std::thread::scope(|s| {
                for _ in 0..CALLERS {
                    s.spawn(|| {
                        let counters = Counters::new(&home);
                        let log = AuditLog::new(&home);
                        for _ in 0..iters {
                            counters
                                .try_consume("agent", "probe.say", LIMITS, now_ms())
                                .unwrap();
                            log.append(&intent_e).unwrap();
                            log.append(&outcome_e).unwrap();
                        }
                    });
                }
            });
            start.elapsed()
        });
    });

    let pg = pg();
    pairwise(&home, pg.as_ref());

    if let Some(p) = pg {
        let pack = PackId::parse("probe").unwrap();
        let intent = fields(json!({"kind": "intent", "principal": "agent", "verb_key": "say"}));
        g.bench_function("postgres", |b| {
            b.iter(|| admit_outcome(&p.state, &p.session, &pack, &intent));
        });
        g.bench_function("postgres_snapshot_admit_outcome", |b| {
            let caps = [Capability::VerbExecRead];
            let counters = [("agent", "probe.say", LIMITS)];
            b.iter(|| {
                let snap = p
                    .state
                    .snapshot(&SnapshotQuery {
                        token: Some(&p.token),
                        pack: &pack,
                        capabilities: &caps,
                        counters: &counters,
                        now_ms: now_ms(),
                        approvals: &[],
                        now: Timestamp::now(),
                    })
                    .unwrap();
                assert!(matches!(snap.session, Some(Ok(_))));
                admit_outcome(&p.state, &p.session, &pack, &intent);
            });
        });
        g.bench_function("postgres_connect", |b| {
            b.iter(|| {
                let s = PgState::connect(&p.cfg, p.state.machine().clone()).unwrap();
                admit_outcome(&s, &p.session, &pack, &intent);
            });
        });
        if let Ok(pool) = std::env::var("HCP_TEST_PG_POOL_URL") {
            let cfg = StateConfig::new(pool).with_schema(p.cfg.schema_name());
            g.bench_function("pool_connect", |b| {
                b.iter(|| {
                    let s = PgState::connect(&cfg, p.state.machine().clone()).unwrap();
                    admit_outcome(&s, &p.session, &pack, &intent);
                });
            });
        } else {
            eprintln!(
                "skipped: pool_connect: HCP_TEST_PG_POOL_URL is not set (.ci/pg-start --pool)"
            );
        }
        let callers: Vec<PgState> = (0..CALLERS)
            .map(|_| PgState::connect(&p.cfg, p.state.machine().clone()).unwrap())
            .collect();
        g.bench_function("postgres_8_callers", |b| {
            b.iter_custom(|iters| {
                let start = std::time::Instant::now();
                std::thread::scope(|s| {
                    for c in &callers {
                        let (session, pack, intent) = (&p.session, &pack, &intent);
                        s.spawn(move || {
                            for _ in 0..iters {
                                admit_outcome(c, session, pack, intent);
                            }
                        });
                    }
                });
                start.elapsed()
            });
        });
        g.bench_function("connect_only", |b| {
            b.iter(|| PgState::connect(&p.cfg, p.state.machine().clone()).unwrap());
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
