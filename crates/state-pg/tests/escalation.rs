//! Escalations and confirmations on the PostgreSQL backend, with the file store's
//! semantics (RUNTIME §7): two separate approvals of one call, a denial that stands for
//! the approval's window, an answer given once, and schema version 3 brought forward from
//! a version 2 database. Against a real server (`.ci/pg-start`), one fresh schema per test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use hcp_state_pg::{
    Admission, AdmitError, AdmitRefusal, ApprovalState, ApprovalTake, MachineId, PgError, PgState,
    SCHEMA_VERSION, StateConfig,
};
use hcp_store::state::{ApprovalKey, ApprovalRequest, State};
use pretty_assertions::assert_eq;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use support::{fresh, machine, psql, t};

fn key(escalation: bool) -> ApprovalKey {
    ApprovalKey {
        tool: "ledger.ledger.post".into(),
        principal: "owner".into(),
        principal_digest: "sha256:pd".into(),
        args_digest: "sha256:args".into(),
        policy_hash: "sha256:policy".into(),
        escalation,
    }
}

/// The request of `key` through the `State` trait, usable 60 s once answered.
fn ask(s: &PgState, key: &ApprovalKey, now: i64) -> hcp_store::approval::Approval {
    State::approval_request(
        s,
        &ApprovalRequest {
            key: key.clone(),
            summary: BTreeMap::from([("amount".to_owned(), "12".to_owned())]),
            window_s: Some(60),
            session: None,
            project: None,
        },
        t(now),
    )
    .unwrap()
}

fn take(k: &ApprovalKey) -> ApprovalTake<'_> {
    ApprovalTake {
        tool: &k.tool,
        principal_digest: &k.principal_digest,
        args_digest: &k.args_digest,
        policy_hash: &k.policy_hash,
        escalation: k.escalation,
    }
}

fn intent() -> Map<String, Value> {
    match json!({"kind": "intent", "principal": "owner", "verb_key": "ledger.post",
                 "decision": "allow"})
    {
        Value::Object(m) => m,
        _ => unreachable!(),
    }
}

/// The owner's admit of `takes` at `now`: the ids taken, or the refusal.
fn admit(s: &PgState, takes: &[ApprovalTake<'_>], now: i64) -> Result<Vec<String>, AdmitError> {
    let body = intent();
    s.admit(&Admission {
        now: t(now),
        principal: "owner",
        session: None,
        grant: None,
        counters: &[],
        approvals: takes,
        intent: &body,
    })
    .map(|a| a.approval_ids)
}

fn gone(r: Result<Vec<String>, AdmitError>) {
    match r {
        Err(AdmitError::Refused(AdmitRefusal::ApprovalGone { tool })) => {
            assert_eq!(tool, "ledger.ledger.post");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_escalation_and_a_confirmation_of_one_call_are_separate_approvals() {
    let Some(cfg) = fresh("esc_two") else { return };
    let (a, b) = (machine(&cfg), machine(&cfg));
    let (esc, conf) = (key(true), key(false));
    let e = ask(&a, &esc, 0);
    let c = ask(&a, &conf, 0);
    assert_ne!(e.id, c.id, "two approvals of one call");
    assert_eq!((e.escalation, c.escalation), (true, false));
    assert_eq!((e.kind(), c.kind()), ("escalation", "confirmation"));
    // Each kind's pending request is found again, from any machine.
    assert_eq!(ask(&b, &esc, 1).id, e.id);
    assert_eq!(ask(&b, &conf, 1).id, c.id);

    // The confirmation approved: it does not stand in for the escalation.
    State::approve(&b, &c.id, t(2)).unwrap();
    let lookup = |k: &ApprovalKey, now| State::approval_lookup(&a, k, t(now)).unwrap();
    assert_eq!(lookup(&conf, 3).map(|x| x.id), Some(c.id.clone()));
    assert_eq!(lookup(&esc, 3), None);
    gone(admit(&a, &[take(&esc), take(&conf)], 3));
    gone(admit(&a, &[take(&esc)], 3));
    assert_eq!(
        lookup(&conf, 3).map(|x| x.id),
        Some(c.id.clone()),
        "nothing taken"
    );

    // Both approved: one admit takes both, each of its kind, in the order asked.
    State::approve(&b, &e.id, t(4)).unwrap();
    assert_eq!(
        admit(&a, &[take(&esc), take(&conf)], 5).unwrap(),
        vec![e.id.clone(), c.id.clone()]
    );
    assert_eq!((lookup(&esc, 6), lookup(&conf, 6)), (None, None));
    let list = State::approvals_list(&a).unwrap();
    assert_eq!(list.len(), 2);
    assert!(list.iter().all(|x| x.state(t(6)) == "used"), "{list:?}");
    let escalations: Vec<&str> = list
        .iter()
        .filter(|x| x.escalation)
        .map(|x| x.id.as_str())
        .collect();
    assert_eq!(escalations, vec![e.id.as_str()]);
}

#[test]
fn a_denied_escalation_cannot_be_approved_and_an_answer_is_given_once() {
    let Some(cfg) = fresh("esc_deny") else { return };
    let (a, b) = (machine(&cfg), machine(&cfg));
    let esc = key(true);
    let e = ask(&a, &esc, 0);
    let denied = State::deny(&b, &e.id, t(1)).unwrap();
    assert_eq!((denied.denied_at, denied.approved_at), (Some(t(1)), None));
    assert_eq!(denied.state(t(2)), "denied");
    assert_eq!(
        a.approvals_list().unwrap()[0].state(t(2)),
        ApprovalState::Denied
    );

    let code = |r: Result<hcp_store::approval::Approval, hcp_store::approval::ApprovalError>| {
        r.unwrap_err().code().as_str()
    };
    assert_eq!(code(State::approve(&a, &e.id, t(2))), "approval_decided");
    assert_eq!(
        State::approve(&a, &e.id, t(2)).unwrap_err().to_string(),
        format!("approval `{}` was denied already", e.id)
    );
    assert_eq!(code(State::deny(&a, &e.id, t(2))), "approval_decided");
    // Nothing changed: still denied, never approved, and nothing to take.
    let row = State::approvals_list(&a).unwrap().pop().unwrap();
    assert_eq!((row.approved_at, row.denied_at), (None, Some(t(1))));
    assert_eq!(State::approval_lookup(&a, &esc, t(3)).unwrap(), None);
    gone(admit(&a, &[take(&esc)], 3));

    // An approved escalation cannot be denied, nor approved again; once taken, it is
    // used.
    let other = ApprovalKey {
        args_digest: "sha256:other".into(),
        ..key(true)
    };
    let o = ask(&a, &other, 10);
    State::approve(&b, &o.id, t(11)).unwrap();
    assert_eq!(code(State::deny(&a, &o.id, t(12))), "approval_decided");
    assert_eq!(code(State::approve(&a, &o.id, t(12))), "approval_decided");
    assert_eq!(admit(&a, &[take(&other)], 12).unwrap(), vec![o.id.clone()]);
    assert_eq!(code(State::deny(&a, &o.id, t(13))), "approval_used");
    assert_eq!(code(State::approve(&a, &o.id, t(13))), "approval_used");
    // Unknown ids.
    assert_eq!(code(State::deny(&a, "apr_nope", t(13))), "unknown_approval");
    assert_eq!(
        code(State::deny(&a, "apr_00000000000000000000", t(13))),
        "unknown_approval"
    );
}

#[test]
fn denying_a_confirmation_is_refused_and_changes_nothing() {
    let Some(cfg) = fresh("esc_conf") else { return };
    let a = machine(&cfg);
    let conf = key(false);
    let c = ask(&a, &conf, 0);
    let e = State::deny(&a, &c.id, t(1)).unwrap_err();
    assert_eq!(e.code().as_str(), "not_an_escalation");
    assert_eq!(
        e.to_string(),
        format!(
            "approval `{}` is a confirmation, not an escalation; only an escalation can be denied",
            c.id
        )
    );
    // The crate's own answer is the same.
    assert_eq!(a.deny(&c.id, t(1)).unwrap_err().code(), "not_an_escalation");
    let row = State::approvals_list(&a).unwrap().pop().unwrap();
    assert_eq!((row.denied_at, row.state(t(2))), (None, "pending"));
    assert_eq!(State::denial_lookup(&a, &conf, t(2)).unwrap(), None);
    // Still the owner's to approve.
    State::approve(&a, &c.id, t(3)).unwrap();
    assert_eq!(admit(&a, &[take(&conf)], 4).unwrap(), vec![c.id]);
}

#[test]
fn a_denial_is_found_within_its_window_and_not_after() {
    let Some(cfg) = fresh("esc_window") else {
        return;
    };
    let (a, b) = (machine(&cfg), machine(&cfg));
    let esc = key(true);
    let e = ask(&a, &esc, 0);
    let found = |s: &PgState, k: &ApprovalKey, now| {
        State::denial_lookup(s, k, t(now)).unwrap().map(|x| x.id)
    };
    assert_eq!(found(&a, &esc, 0), None, "pending is no denial");
    State::deny(&a, &e.id, t(10)).unwrap();
    // On every machine, for exactly this call and kind, while now < denied_at + 60 s.
    assert_eq!(found(&b, &esc, 10), Some(e.id.clone()));
    assert_eq!(found(&b, &esc, 69), Some(e.id.clone()));
    assert_eq!(found(&b, &esc, 70), None, "the window is 60 s");
    assert_eq!(found(&a, &key(false), 11), None, "a confirmation's key");
    let other = ApprovalKey {
        args_digest: "sha256:other".into(),
        ..key(true)
    };
    assert_eq!(found(&a, &other, 11), None, "other arguments");
    let mut policy = key(true);
    policy.policy_hash = "sha256:new".into();
    assert_eq!(found(&a, &policy, 11), None, "another policy");
    // The lookup spends and changes nothing; after the window the denial has expired.
    let row = a.approvals_list().unwrap().pop().unwrap();
    assert_eq!(row.denied_at, Some(t(10)));
    assert_eq!(row.state(t(69)), ApprovalState::Denied);
    assert_eq!(row.state(t(70)), ApprovalState::Expired);
    let code = |r: Result<hcp_store::approval::Approval, hcp_store::approval::ApprovalError>| {
        r.unwrap_err().code().as_str()
    };
    assert_eq!(code(State::approve(&a, &e.id, t(70))), "approval_expired");
    assert_eq!(code(State::deny(&a, &e.id, t(70))), "approval_expired");
    // After it, the same call asks afresh: a new pending escalation.
    let again = ask(&b, &esc, 71);
    assert_ne!(again.id, e.id);
    assert_eq!(again.state(t(72)), "pending");
}

#[test]
fn a_version_2_database_is_refused_then_migrated_to_3_keeping_its_approvals() {
    let Some(url) = support::url() else { return };
    let cfg = StateConfig::new(&url).with_schema(support::schema_name("v2"));
    let schema = cfg.schema_name().to_owned();
    let two = PgState::migrate_to(&cfg, 2).unwrap();
    assert_eq!((two.from, two.to), (None, 2));
    // An approved confirmation as an hcp of version 2 wrote it (no `escalation` given).
    psql(
        &url,
        &format!(
            "INSERT INTO {schema}.approvals (id, tool, principal, principal_digest, args_digest,
                 policy_hash, summary, requested_at, window_s, approved_at, machine)
             VALUES ('apr_0123456789abcdef0123', 'ledger.ledger.post', 'owner', 'sha256:pd',
                 'sha256:args', 'sha256:policy', '{{}}', to_timestamp({}), 600,
                 to_timestamp({}), 'm_old')",
            t(0).as_second(),
            t(1).as_second()
        ),
    );

    // This hcp refuses the database behind it, and says how to bring it forward.
    let e = PgState::connect(&cfg, MachineId::generate().unwrap()).unwrap_err();
    assert!(
        matches!(
            e,
            PgError::Schema {
                found: Some(2),
                expected: SCHEMA_VERSION
            }
        ),
        "{e:?}"
    );
    assert_eq!(e.code(), "state_unavailable");
    assert_eq!(
        e.to_string(),
        format!("the state database's schema is version 2, older than this hcp's {SCHEMA_VERSION}")
    );
    assert!(e.hint().unwrap().contains("hcp state migrate"));

    let three = PgState::migrate_to(&cfg, 3).unwrap();
    assert_eq!((three.from, three.to), (Some(2), 3));
    assert_eq!(
        three.lines(&schema),
        vec![
            "applied migration 3: approvals of a kind: hcp_snapshot and hcp_admit match \
             escalation or confirmation"
                .to_owned(),
            format!("schema `{schema}` is at version 3 (was 2)"),
        ]
    );
    let current = PgState::migrate(&cfg).unwrap();
    assert_eq!((current.from, current.to), (Some(3), SCHEMA_VERSION));

    // The old approval is a confirmation: found and taken as one, never as an escalation.
    let a = machine(&cfg);
    let (esc, conf) = (key(true), key(false));
    assert_eq!(State::approval_lookup(&a, &esc, t(2)).unwrap(), None);
    let old = State::approval_lookup(&a, &conf, t(2)).unwrap().unwrap();
    assert_eq!(
        (old.id.as_str(), old.escalation),
        ("apr_0123456789abcdef0123", false)
    );
    gone(admit(&a, &[take(&esc)], 2));
    assert_eq!(admit(&a, &[take(&conf)], 2).unwrap(), vec![old.id]);

    // Version 2's functions were replaced, not overloaded: a machine role's grants name
    // `hcp_admit` unambiguously, and that role admits.
    let role = format!("hcp_{}", &schema[schema.len() - 12..]);
    psql(&url, &format!("CREATE ROLE {role} LOGIN PASSWORD 'pw'"));
    for g in hcp_state_pg::schema::grant_statements(&schema, &role).unwrap() {
        psql(&url, &g);
    }
    let as_role = StateConfig::new(format!("{url} user={role} password=pw")).with_schema(&schema);
    let m = PgState::connect(&as_role, MachineId::generate().unwrap()).unwrap();
    let e = ask(&m, &esc, 3);
    State::approve(&m, &e.id, t(4)).unwrap();
    assert_eq!(admit(&m, &[take(&esc)], 5).unwrap(), vec![e.id]);
}
