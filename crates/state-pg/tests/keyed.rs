//! Keyed chains and the witness of a fleet (RUNTIME §6, §9): each machine's records keyed
//! by its own store's chain key, the hash computed by the machine on the head it knows,
//! and `audit_witness` taking its checkpoints.
//!
//! Needs `HCP_TEST_PG_URL` (`eval "$(.ci/pg-start)"`); without it each test says
//! `skipped:` (a failure under `CI=true`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use hcp_state_pg::{MachineId, PgState, StateConfig, WitnessChoice};
use hcp_store::audit::{Actor, Authority, Fault};
use hcp_store::state::State;
use hcp_store::{Home, made};
use serde_json::{Map, Value, json};
use std::path::Path;

fn fields(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => unreachable!(),
    }
}

/// A machine's own store (its chain key and checkpoint key) at `dir`.
fn local(dir: &Path) -> Home {
    made::init(dir, Actor::owner(), None).unwrap();
    Home::open(dir).unwrap()
}

fn machine_of(cfg: &StateConfig, id: &MachineId, home: &Home, witness: WitnessChoice) -> PgState {
    PgState::connect(cfg, id.clone())
        .unwrap()
        .with_local(home)
        .unwrap()
        .with_witness(witness)
}

fn refusal(i: u64) -> Map<String, Value> {
    fields(json!({"kind": "refusal", "principal": "agent", "verb_key": "say", "n": i}))
}

fn act(n: u64) -> Authority {
    Authority {
        act: "grant".into(),
        actor: Actor::owner(),
        changed: json!({"principal": "agent", "n": n}),
        intent: false,
    }
}

fn first_fault(r: &hcp_store::audit::AuditReport) -> Option<Fault> {
    r.first_broken()
        .and_then(|c| c.report.broken.as_ref())
        .map(|b| b.fault)
}

#[test]
fn each_machine_keys_its_chain_and_checks_only_its_own_keyed_hashes() {
    let Some(cfg) = support::fresh("keyed") else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let (ha, hb) = (local(&d.path().join("a")), local(&d.path().join("b")));
    let (ia, ib) = (
        MachineId::generate().unwrap(),
        MachineId::generate().unwrap(),
    );
    let a = machine_of(&cfg, &ia, &ha, WitnessChoice::None);
    let b = machine_of(&cfg, &ib, &hb, WitnessChoice::None);
    for i in 0..3 {
        let r = a.record(&refusal(i), support::t(1)).unwrap();
        assert!(r.hash.starts_with("hmac-sha256:"), "{r:?}");
        b.record(&refusal(i), support::t(1)).unwrap();
    }
    let r = State::audit_verify(&a, None).unwrap();
    assert!(r.is_clean(), "{r:?}");
    let chain = |r: &hcp_store::audit::AuditReport, m: &MachineId| {
        r.chains
            .iter()
            .find(|c| c.machine.as_deref() == Some(m.as_str()))
            .unwrap()
            .report
            .chain
    };
    use hcp_store::audit::ChainCheck;
    assert_eq!(chain(&r, &ia), ChainCheck::Checked);
    assert_eq!(chain(&r, &ib), ChainCheck::NotChecked);
    // A's body edited: A names it, B cannot (it lacks A's key) but sees it sound.
    let url = std::env::var("HCP_TEST_PG_URL").unwrap();
    let schema = cfg.schema.as_deref().unwrap();
    support::psql(
        &url,
        &format!(
            "UPDATE {schema}.audit_record SET body = replace(body, '\"n\":1', '\"n\":7') WHERE machine = '{}' AND seq = 2",
            ia.as_str()
        ),
    );
    let r = State::audit_verify(&a, None).unwrap();
    assert_eq!(first_fault(&r), Some(Fault::HashMismatch), "{r:?}");
    assert!(State::audit_verify(&b, None).unwrap().is_clean());
}

#[test]
fn two_processes_of_one_machine_recompute_on_the_head_the_other_moved() {
    let Some(cfg) = support::fresh("stale") else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let home = local(&d.path().join("m"));
    let id = MachineId::generate().unwrap();
    let one = machine_of(&cfg, &id, &home, WitnessChoice::None);
    let two = machine_of(&cfg, &id, &home, WitnessChoice::None);
    for i in 0..10 {
        let s = if i % 2 == 0 { &one } else { &two };
        let r = s.record(&refusal(i), support::t(1)).unwrap();
        assert_eq!(r.seq, i + 1);
    }
    std::thread::scope(|s| {
        for st in [&one, &two] {
            s.spawn(move || {
                for i in 0..50 {
                    st.record_outcome(&refusal(100 + i), support::t(2)).unwrap();
                }
            });
        }
    });
    let r = State::audit_verify(&one, None).unwrap();
    assert!(r.is_clean(), "{r:?}");
    assert_eq!(r.records(), 110);
}

#[test]
fn the_state_witness_takes_acts_and_catches_a_rewritten_chain() {
    let Some(cfg) = support::fresh("witness") else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let home = local(&d.path().join("m"));
    let id = MachineId::generate().unwrap();
    let m = machine_of(&cfg, &id, &home, WitnessChoice::State);
    for i in 0..3 {
        m.record(&refusal(i), support::t(1)).unwrap();
    }
    m.record_authority(&act(1)).unwrap();
    m.record(&refusal(9), support::t(1)).unwrap();
    let r = State::audit_verify(&m, None).unwrap();
    assert!(r.is_clean(), "{r:?}");
    let c = &r.chains[0].report;
    assert_eq!(
        c.against.as_ref().map(|a| (a.count, a.past)),
        Some((4, 1)),
        "{c:?}"
    );
    // The owner of the database cuts the chain and its head back (the machines' role
    // cannot): behind the witnessed checkpoint.
    let url = std::env::var("HCP_TEST_PG_URL").unwrap();
    let schema = cfg.schema.as_deref().unwrap();
    support::psql(
        &url,
        &format!(
            "DELETE FROM {schema}.audit_record WHERE machine = '{0}' AND seq > 2;
             UPDATE {schema}.audit_chain c SET seq = 2, hash = r.hash FROM {schema}.audit_record r
             WHERE c.machine = '{0}' AND r.machine = '{0}' AND r.seq = 2",
            id.as_str()
        ),
    );
    let r = State::audit_verify(&m, None).unwrap();
    assert_eq!(first_fault(&r), Some(Fault::Rollback), "{r:?}");
    // A checkpoint of the machine signed by another key: forged.
    let dd = tempfile::tempdir().unwrap();
    let other = machine_of(
        &cfg,
        &id,
        &local(&dd.path().join("x")),
        WitnessChoice::State,
    );
    let forged = other.chain_checkpoint(99, "x", support::t(5)).unwrap();
    support::psql(
        &url,
        &format!(
            "INSERT INTO {schema}.audit_witness (machine, store, count, head, key, checkpoint) VALUES ('{}', '{}', 99, 'x', '{}', '{}')",
            id.as_str(),
            forged.store.clone().unwrap(),
            forged.key,
            forged.to_line().trim_end()
        ),
    );
    let r = State::audit_verify(&m, None).unwrap();
    assert_eq!(first_fault(&r), Some(Fault::CheckpointMismatch), "{r:?}");
}

#[test]
fn an_unusable_witness_refuses_acts_not_records_and_the_hundredth_record_is_witnessed() {
    let Some(cfg) = support::fresh("witness100") else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let home = local(&d.path().join("m"));
    let id = MachineId::generate().unwrap();
    let missing = d.path().join("no-such-dir");
    let m = machine_of(&cfg, &id, &home, WitnessChoice::Dir(missing.clone()));
    let e = m.record_authority(&act(1)).unwrap_err();
    assert_eq!(e.code(), "witness_unavailable", "{e}");
    m.record(&refusal(1), support::t(1)).unwrap();
    assert_eq!(
        State::audit_verify(&m, None).unwrap().records(),
        1,
        "not recorded"
    );
    std::fs::create_dir(&missing).unwrap();
    let m = machine_of(&cfg, &id, &home, WitnessChoice::Dir(missing.clone()));
    for i in 1..99 {
        m.record(&refusal(i), support::t(1)).unwrap();
        assert!(m.witness_after_call().unwrap().is_none());
    }
    m.record(&refusal(99), support::t(1)).unwrap();
    let c = m.witness_after_call().unwrap().unwrap();
    assert_eq!((c.count, c.machine.as_deref()), (100, Some(id.as_str())));
    let r = State::audit_verify(&m, None).unwrap();
    assert!(r.is_clean(), "{r:?}");
    assert_eq!(r.chains[0].report.checkpoint, Some(100));
}

#[test]
fn a_machine_role_may_insert_checkpoints_and_never_rewrite_them() {
    let Some(url) = support::url() else { return };
    let cfg = support::fresh_on(&url, "wrole");
    let schema = cfg.schema.clone().unwrap();
    let role = format!("hcpw_{}", &schema[schema.len() - 12..]);
    support::psql(&url, &format!("CREATE ROLE {role} LOGIN PASSWORD 'pw'"));
    for g in hcp_state_pg::schema::grant_statements(&schema, &role).unwrap() {
        support::psql(&url, &g);
    }
    let as_role = StateConfig::new(format!("{url} user={role} password=pw")).with_schema(&schema);
    let d = tempfile::tempdir().unwrap();
    let home = local(&d.path().join("m"));
    let m = machine_of(
        &as_role,
        &MachineId::generate().unwrap(),
        &home,
        WitnessChoice::State,
    );
    m.record_authority(&act(1)).unwrap();
    assert!(State::audit_verify(&m, None).unwrap().is_clean());
    for sql in [
        format!("UPDATE {schema}.audit_witness SET count = 0"),
        format!("DELETE FROM {schema}.audit_witness"),
        format!("TRUNCATE {schema}.audit_witness"),
    ] {
        let out = std::process::Command::new("psql")
            .args([
                format!("{url} user={role} password=pw"),
                "-qAtc".into(),
                sql.clone(),
            ])
            .env("PGPASSWORD", "pw")
            .output()
            .unwrap();
        assert!(!out.status.success(), "{sql}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("permission denied"),
            "{sql}"
        );
    }
}
