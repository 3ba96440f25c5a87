//! The PostgreSQL state backend against a real server (`.ci/pg-start`): one fresh schema
//! per test on the shared server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use hcp_model::{Capability, PackId};
use hcp_state_pg::{
    Admission, AdmitError, AdmitRefusal, ApprovalRequest, ApprovalState, CounterTake, Cursor,
    GrantCheck, MachineId, PgError, PgState, SCHEMA_VERSION, SnapshotQuery, StateConfig,
    chain_hash,
};
use hcp_store::approval::Call;
use hcp_store::counter::{Limits, Verdict};
use hcp_store::grant::{GrantStatus, PackScope};
use hcp_store::session::{BadSession, PrincipalId};
use pretty_assertions::assert_eq;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::time::Duration;
use support::{fresh, machine, psql, session, t};

fn fields(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => unreachable!(),
    }
}

fn p(s: &str) -> PrincipalId {
    PrincipalId::parse(s).unwrap()
}

fn pack(s: &str) -> PackId {
    PackId::parse(s).unwrap()
}

#[test]
fn migrate_creates_then_reports_current_and_connect_checks_the_version() {
    let Some(url) = support::url() else { return };
    let cfg = StateConfig::new(&url).with_schema(support::schema_name("migrate"));
    let m = MachineId::generate().unwrap();
    let e = PgState::connect(&cfg, m.clone()).unwrap_err();
    assert_eq!(e.code(), "state_unavailable");
    assert!(matches!(e, PgError::Schema { found: None, .. }), "{e:?}");
    assert!(e.hint().unwrap().contains("hcp state migrate"));

    let one = PgState::migrate_to(&cfg, 1).unwrap();
    assert_eq!((one.from, one.to, one.applied.len()), (None, 1, 1));
    assert!(one.created_schema);
    let e = PgState::connect(&cfg, m.clone()).unwrap_err();
    assert!(
        matches!(
            e,
            PgError::Schema {
                found: Some(1),
                expected: SCHEMA_VERSION
            }
        ),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        format!("the state database's schema is version 1, older than this hcp's {SCHEMA_VERSION}")
    );

    let two = PgState::migrate(&cfg).unwrap();
    assert_eq!((two.from, two.to), (Some(1), SCHEMA_VERSION));
    assert_eq!(
        two.applied.iter().map(|a| a.0).collect::<Vec<_>>(),
        (2..=SCHEMA_VERSION).collect::<Vec<_>>()
    );
    let lines = two.lines(cfg.schema_name());
    assert_eq!(lines.len(), two.applied.len() + 1, "{lines:?}");
    let again = PgState::migrate(&cfg).unwrap();
    assert!(again.applied.is_empty());
    assert_eq!(
        again.lines("x"),
        vec![format!("schema `x` is current (version {SCHEMA_VERSION})")]
    );
    let s = PgState::connect(&cfg, m).unwrap();
    let info = s.info().unwrap();
    assert_eq!(info.schema_version, SCHEMA_VERSION);
    assert!(
        info.server_version
            .starts_with(|c: char| c.is_ascii_digit())
    );

    // A newer schema (a newer hcp migrated it): refused, and never downgraded.
    psql(
        &url,
        &format!(
            "INSERT INTO {}.schema_version (version, description) VALUES (99, 'future')",
            cfg.schema_name()
        ),
    );
    // The open connection checked the version when it opened; a new one refuses.
    assert!(s.session_list().is_ok());
    let e = PgState::connect(&cfg, MachineId::generate().unwrap()).unwrap_err();
    assert!(
        matches!(
            e,
            PgError::Schema {
                found: Some(99),
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.hint().unwrap().contains("upgrade hcp"));
    assert!(matches!(
        PgState::migrate(&cfg).unwrap_err(),
        PgError::Schema {
            found: Some(99),
            ..
        }
    ));
}

#[test]
fn sessions_are_stored_hashed_resolved_and_ended_fleet_wide() {
    let Some(cfg) = fresh("sessions") else { return };
    let a = machine(&cfg);
    let b = machine(&cfg);
    let (token, s) = session("alice", t(0));
    let stored = a.session_insert(&s).unwrap();
    assert_eq!(stored, s);
    // Started on A, valid on B.
    assert_eq!(b.session_resolve(token.as_str(), t(1)).unwrap(), s);
    assert_eq!(b.session_list().unwrap(), vec![s.clone()]);
    let reason = |r: Result<_, hcp_state_pg::SessionLookupError>| match r {
        Err(hcp_state_pg::SessionLookupError::Bad(b)) => b,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        reason(b.session_resolve("nope", t(1))),
        BadSession::Malformed
    );
    assert_eq!(
        reason(b.session_resolve(&format!("hcps_{}", "0".repeat(64)), t(1))),
        BadSession::Unknown
    );
    assert_eq!(
        reason(b.session_resolve(token.as_str(), t(3600))),
        BadSession::Expired {
            expires_at: s.expires_at
        }
    );
    // The token itself is nowhere in the database.
    let url = std::env::var("HCP_TEST_PG_URL").unwrap();
    let out = std::process::Command::new("psql")
        .args([
            url.as_str(),
            "-qAtc",
            &format!(
                "SELECT count(*) FROM {}.sessions WHERE token_sha256 LIKE '%{}%'",
                cfg.schema_name(),
                &token.as_str()[5..]
            ),
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "0");

    // Ended on B: refused on A at once; a second end changes nothing.
    let (ended, changed) = b.session_end(token.as_str(), t(10)).unwrap();
    assert!(changed);
    assert_eq!(ended.ended_at, Some(t(10)));
    assert_eq!(
        reason(a.session_resolve(token.as_str(), t(11))),
        BadSession::Ended { ended_at: t(10) }
    );
    let (_, changed) = a.session_end(token.as_str(), t(12)).unwrap();
    assert!(!changed);
    let (_, s2) = session("alice", t(20));
    let (_, s3) = session("bob", t(21));
    a.session_insert(&s2).unwrap();
    a.session_insert(&s3).unwrap();
    let ended = b.session_end_principal(&p("alice"), t(30)).unwrap();
    assert_eq!(ended.len(), 1);
    assert_eq!(ended[0].token_sha256, s2.token_sha256);
}

#[test]
fn grants_revokes_and_the_fleet_wide_rug_pull_guard() {
    use Capability::*;
    let Some(cfg) = fresh("grants") else { return };
    let a = machine(&cfg);
    let b = machine(&cfg);
    let alice = p("alice");
    let mail = pack("mail");
    a.grant(
        &alice,
        &PackScope::Pack(mail.clone()),
        &[VerbExecRead, VerbExecWrite],
        t(0),
    )
    .unwrap();
    a.grant(&alice, &PackScope::All, &[SenseEnable], t(1))
        .unwrap();
    let held = b.grants_held(&alice, &mail).unwrap();
    assert_eq!(held.len(), 3);
    assert_eq!(
        b.grant_status(&alice, &mail, VerbExecRead).unwrap(),
        GrantStatus::Held { granted_at: t(0) }
    );
    // Machine B installs the pack first: no change. Machine A installs other content.
    assert_eq!(b.pack_installed(&mail, "sha256:one", t(2)).unwrap(), None);
    assert_eq!(b.pack_installed(&mail, "sha256:one", t(3)).unwrap(), None);
    assert_eq!(
        a.pack_installed(&mail, "sha256:two", t(5)).unwrap(),
        Some(t(5))
    );
    assert_eq!(
        b.grant_status(&alice, &mail, VerbExecRead).unwrap(),
        GrantStatus::Suspended {
            granted_at: t(0),
            content_changed_at: t(5)
        }
    );
    // Granting again on B lifts it everywhere.
    b.grant(
        &alice,
        &PackScope::Pack(mail.clone()),
        &[VerbExecRead],
        t(6),
    )
    .unwrap();
    assert_eq!(
        a.grant_status(&alice, &mail, VerbExecRead).unwrap(),
        GrantStatus::Held { granted_at: t(6) }
    );
    // An earlier change than the known one changes nothing.
    assert_eq!(a.pack_content_changed(&mail, t(4)).unwrap(), t(5));
    let removed = b
        .revoke(&alice, &PackScope::Pack(mail.clone()), &[VerbExecWrite])
        .unwrap();
    assert_eq!(removed.len(), 1);
    assert_eq!(
        a.grant_status(&alice, &mail, VerbExecWrite).unwrap(),
        GrantStatus::Missing
    );
    assert_eq!(a.grants_list().unwrap().len(), 2);
    assert_eq!(a.revoke(&alice, &PackScope::All, &[]).unwrap().len(), 1);
    assert_eq!(a.grants_remove_pack(&mail).unwrap(), 1);
    assert!(a.grants_list().unwrap().is_empty());
}

/// The call `r` is of, as the lookups take it.
fn call(r: &ApprovalRequest) -> Call<'_> {
    Call {
        tool: &r.tool,
        principal: (&r.principal, &r.principal_digest),
        args_digest: &r.args_digest,
        policy_hash: &r.policy_hash,
        escalation: r.escalation,
    }
}

fn request(tool: &str) -> ApprovalRequest {
    ApprovalRequest {
        tool: tool.into(),
        principal: "alice".into(),
        principal_digest: "sha256:pd".into(),
        args_digest: "sha256:args".into(),
        policy_hash: "sha256:policy".into(),
        summary: BTreeMap::from([("to".to_owned(), "bob".to_owned())]),
        escalation: false,
        window_s: Some(60),
        session: None,
        project: None,
    }
}

#[test]
fn approvals_pending_approved_taken_once_and_expired() {
    let Some(cfg) = fresh("approvals") else {
        return;
    };
    let a = machine(&cfg);
    let b = machine(&cfg);
    let r = request("mail.mail.send");
    let first = a.approval_request(&r, t(0)).unwrap();
    assert_eq!(
        b.approval_request(&r, t(1)).unwrap().id,
        first.id,
        "one per call"
    );
    assert_eq!(first.state(t(1)), ApprovalState::Pending);
    let lookup = |s: &PgState, now| s.approval_lookup(&call(&r), now).unwrap();
    assert!(lookup(&a, t(2)).is_none());
    let approved = b.approve(&first.id, t(3)).unwrap();
    assert_eq!(approved.state(t(4)), ApprovalState::Approved);
    assert_eq!(lookup(&a, t(4)).unwrap().id, first.id);
    assert_eq!(lookup(&a, t(63)), None, "the window is 60 s");
    // An answer is given once (the file store's semantics): approving again is refused.
    assert_eq!(
        b.approve(&first.id, t(5)).unwrap_err().code(),
        "approval_decided"
    );
    assert_eq!(
        b.deny(&first.id, t(5)).unwrap_err().code(),
        "not_an_escalation"
    );
    assert_eq!(
        a.approve("apr_nope", t(5)).unwrap_err().code(),
        "unknown_approval"
    );
    assert_eq!(
        a.approve("apr_00000000000000000000", t(5))
            .unwrap_err()
            .code(),
        "unknown_approval"
    );
    // Denied escalation.
    let mut esc = request("ledger.ledger.post");
    esc.escalation = true;
    let e = a.approval_request(&esc, t(0)).unwrap();
    assert_eq!(
        b.deny(&e.id, t(1)).unwrap().state(t(2)),
        ApprovalState::Denied
    );
    assert_eq!(
        a.approve(&e.id, t(2)).unwrap_err().code(),
        "approval_decided"
    );
    let list = a.approvals_list().unwrap();
    assert_eq!(list.len(), 2);
    assert!(list.iter().all(|x| x.machine == a.machine().as_str()));
}

fn intent(principal: &str) -> Map<String, Value> {
    fields(
        json!({"kind": "intent", "principal": principal, "verb_key": "say", "decision": "allow"}),
    )
}

#[test]
fn admit_takes_slots_and_the_approval_with_the_intent_or_nothing() {
    use Capability::*;
    let Some(cfg) = fresh("admit") else { return };
    let a = machine(&cfg);
    let (_tok, s) = session("alice", t(0));
    a.session_insert(&s).unwrap();
    let alice = p("alice");
    let probe = pack("probe");
    a.grant(
        &alice,
        &PackScope::Pack(probe.clone()),
        &[VerbExecRead],
        t(0),
    )
    .unwrap();
    let limits = Limits {
        rate_limit: Some(2),
        budget: Some(3),
        window_ms: 60_000,
    };
    let body = intent("alice");
    let adm = |now_s: i64, counters: &[CounterTake<'_>]| -> Result<_, AdmitError> {
        a.admit(&Admission {
            now: t(now_s),
            principal: "alice",
            session: Some(&s.token_sha256),
            grant: Some(GrantCheck {
                pack: &probe,
                capabilities: &[VerbExecRead],
            }),
            counters,
            approvals: &[],
            intent: &body,
        })
    };
    let take = |now_s: i64| CounterTake {
        identity: "alice",
        tool: "probe.say",
        limits,
        now_ms: u64::try_from(t(now_s).as_millisecond()).unwrap(),
    };
    let ok1 = adm(1, &[take(1)]).unwrap();
    assert_eq!(ok1.seq, 1);
    adm(2, &[take(2)]).unwrap();
    let refused = |r: Result<hcp_state_pg::Admitted, AdmitError>| match r {
        Err(AdmitError::Refused(r)) => r,
        other => panic!("{other:?}"),
    };
    let r = refused(adm(3, &[take(3)]));
    assert_eq!(r.code(), "rate_limit");
    assert_eq!(
        a.counter_check(
            "alice",
            "probe.say",
            limits,
            u64::try_from(t(3).as_millisecond()).unwrap()
        )
        .unwrap(),
        Verdict::RateLimit
    );
    // The window rolls; the budget (3) then ends it for good.
    adm(62, &[take(62)]).unwrap();
    let r = refused(adm(200, &[take(200)]));
    assert_eq!(
        r,
        AdmitRefusal::Budget {
            tool: "probe.say".into()
        }
    );
    // Refusals spent nothing and wrote nothing: 3 intents on the chain.
    let report = a.audit_verify().unwrap();
    assert!(report.is_sound(), "{report:?}");
    assert_eq!(report.records(), 3);
    assert_eq!(report.chains[0].interrupted.len(), 3);

    // Approval: taken by exactly one admit, and an admit that finds none spends no slot.
    let r = request("probe.say");
    let apr = a.approval_request(&r, t(300)).unwrap();
    a.approve(&apr.id, t(301)).unwrap();
    let with_approval = |now_s| {
        a.admit(&Admission {
            now: t(now_s),
            principal: "alice",
            session: Some(&s.token_sha256),
            grant: None,
            counters: &[],
            approvals: &[hcp_state_pg::ApprovalTake {
                tool: "probe.say",
                principal_digest: "sha256:pd",
                args_digest: "sha256:args",
                policy_hash: "sha256:policy",
                escalation: false,
            }],
            intent: &body,
        })
    };
    let got = with_approval(302).unwrap();
    assert_eq!(got.approval_ids, vec![apr.id.clone()]);
    assert_eq!(
        refused(with_approval(303)),
        AdmitRefusal::ApprovalGone {
            tool: "probe.say".into()
        }
    );
    let taken = a.approvals_list().unwrap().pop().unwrap();
    assert_eq!(taken.state(t(304)), ApprovalState::Taken);
    assert_eq!(taken.taken_machine.as_deref(), Some(a.machine().as_str()));

    // Revoke and session end: in force on the next admit.
    a.revoke(&alice, &PackScope::Pack(probe.clone()), &[])
        .unwrap();
    assert_eq!(
        refused(adm(400, &[])),
        AdmitRefusal::MissingGrant {
            capability: "verb.exec.read".into()
        }
    );
    a.grant(&alice, &PackScope::All, &[VerbExecRead], t(401))
        .unwrap();
    adm(402, &[]).unwrap();
    a.pack_content_changed(&probe, t(403)).unwrap();
    assert_eq!(
        refused(adm(404, &[])),
        AdmitRefusal::Suspended {
            capability: "verb.exec.read".into(),
            content_changed_at: t(403)
        }
    );
    a.grant(&alice, &PackScope::All, &[VerbExecRead], t(405))
        .unwrap();
    adm(406, &[]).unwrap();
    // Every capability the gate checked is re-checked: one missing refuses.
    let two = a.admit(&Admission {
        now: t(406),
        principal: "alice",
        session: Some(&s.token_sha256),
        grant: Some(GrantCheck {
            pack: &probe,
            capabilities: &[VerbExecRead, PackConnect],
        }),
        counters: &[],
        approvals: &[],
        intent: &body,
    });
    assert_eq!(
        refused(two),
        AdmitRefusal::MissingGrant {
            capability: "pack.connect".into()
        }
    );
    a.session_end(_tok.as_str(), t(407)).unwrap();
    assert_eq!(
        refused(adm(408, &[])),
        AdmitRefusal::Session(BadSession::Ended { ended_at: t(407) })
    );
    // A reserved field is refused before anything is sent.
    let bad = fields(json!({"seq": 1}));
    let e = a
        .admit(&Admission {
            now: t(500),
            principal: "owner",
            session: None,
            grant: None,
            counters: &[],
            approvals: &[],
            intent: &bad,
        })
        .unwrap_err();
    assert_eq!(e.code(), "audit_bad_entry");
}

#[test]
fn chains_per_machine_verify_tail_and_follow() {
    let Some(cfg) = fresh("audit") else { return };
    let a = machine(&cfg);
    let b = machine(&cfg);
    let mut cursor = a.audit_cursor_end().unwrap();
    let owner = fields(json!({"kind": "intent", "principal": "owner"}));
    let i1 = a
        .admit(&Admission {
            now: t(1),
            principal: "owner",
            session: None,
            grant: None,
            counters: &[],
            approvals: &[],
            intent: &owner,
        })
        .unwrap();
    let out = fields(json!({"kind": "outcome", "intent": i1.audit_id, "exit_code": 0}));
    let o1 = a.record_outcome(&out, t(2)).unwrap();
    assert_eq!((i1.seq, o1.seq), (1, 2));
    let refusal = fields(json!({"kind": "refusal", "code": "missing_grant"}));
    let r1 = b.record(&refusal, t(3)).unwrap();
    assert_eq!(r1.seq, 1, "each machine has its own chain");

    let got = b
        .audit_follow(&mut cursor, Duration::from_millis(10))
        .unwrap();
    assert_eq!(got.len(), 3);
    assert!(
        b.audit_follow(&mut cursor, Duration::from_millis(10))
            .unwrap()
            .is_empty()
    );
    // A record appended while a follower waits wakes it (LISTEN/NOTIFY).
    std::thread::scope(|sc| {
        let h = sc.spawn(|| {
            b.audit_follow(&mut cursor, Duration::from_secs(20))
                .unwrap()
        });
        a.record(&refusal, t(4)).unwrap();
        let woke = h.join().unwrap();
        assert_eq!(woke.len(), 1);
    });

    let tail = a.audit_tail(2).unwrap();
    assert_eq!(tail.len(), 2);
    let last = tail[1].to_json();
    assert_eq!(last["machine"], a.machine().as_str());
    assert_eq!(last["seq"], 3);
    assert_eq!(
        tail[1].hash,
        chain_hash(
            &tail[1].prev,
            3,
            &String::from_utf8(hcp_store::audit::canonical_json(&Value::Object(
                tail[1].body.clone()
            )))
            .unwrap()
        )
    );
    let report = a.audit_verify().unwrap();
    assert!(report.is_sound(), "{report:?}");
    assert_eq!(report.chains.len(), 2);
    assert!(report.chains.iter().all(|c| c.interrupted.is_empty()));
    let _ = Cursor::start();
}

#[test]
fn a_record_edited_cut_or_moved_by_hand_is_named() {
    let Some(cfg) = fresh("tamper") else { return };
    let url = std::env::var("HCP_TEST_PG_URL").unwrap();
    let schema = cfg.schema_name().to_owned();
    let a = machine(&cfg);
    let m = a.machine().as_str().to_owned();
    let rec = fields(json!({"kind": "refusal", "principal": "alice"}));
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(a.record(&rec, t(i)).unwrap().id);
    }
    assert!(a.audit_verify().unwrap().is_sound());
    let fault = |a: &PgState| a.audit_verify().unwrap().chains[0].fault.clone().unwrap();

    psql(
        &url,
        &format!(
            "UPDATE {schema}.audit_record SET body = replace(body, 'alice', 'mallory') WHERE machine = '{m}' AND seq = 3"
        ),
    );
    let f = fault(&a);
    assert_eq!(
        (f.code.as_str(), f.seq, f.id.as_deref()),
        ("hash_mismatch", Some(3), Some(ids[2].as_str()))
    );
    assert!(f.reason.contains(&m), "{}", f.reason);
    psql(
        &url,
        &format!(
            "UPDATE {schema}.audit_record SET body = replace(body, 'mallory', 'alice') WHERE machine = '{m}' AND seq = 3"
        ),
    );
    assert!(a.audit_verify().unwrap().is_sound());

    psql(
        &url,
        &format!("DELETE FROM {schema}.audit_record WHERE machine = '{m}' AND seq = 2"),
    );
    let f = fault(&a);
    assert_eq!((f.code.as_str(), f.seq), ("prev_mismatch", Some(3)));

    let b = machine(&cfg);
    b.record(&rec, t(9)).unwrap();
    psql(
        &url,
        &format!(
            "DELETE FROM {schema}.audit_record WHERE machine = '{}' AND seq = 1",
            b.machine()
        ),
    );
    let r = b.audit_verify().unwrap();
    let fb = r
        .chains
        .iter()
        .find(|c| c.machine == b.machine().as_str())
        .unwrap();
    assert_eq!(fb.fault.as_ref().unwrap().code.as_str(), "missing_log");

    let c = machine(&cfg);
    for i in 0..3 {
        c.record(&rec, t(i)).unwrap();
    }
    psql(
        &url,
        &format!(
            "DELETE FROM {schema}.audit_record WHERE machine = '{}' AND seq = 3",
            c.machine()
        ),
    );
    let r = c.audit_verify().unwrap();
    let fc = r
        .chains
        .iter()
        .find(|x| x.machine == c.machine().as_str())
        .unwrap();
    assert_eq!(fc.fault.as_ref().unwrap().code.as_str(), "truncated");
    assert_eq!(fc.records, 2);
}

#[test]
fn unreachable_refused_and_missing_databases_are_state_unavailable() {
    let Some(url) = support::url() else { return };
    let m = MachineId::generate().unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (u, failure) in [
        (
            format!(
                "host={} dbname=postgres user=postgres",
                dir.path().display()
            ),
            "unreachable",
        ),
        (format!("{url} dbname=hcp_no_such_db"), "no_database"),
        (format!("{url} user=hcp_no_such_role"), "credentials"),
        (
            format!("{url} user=hcp_no_such_role password=wrong"),
            "credentials",
        ),
    ] {
        let e = PgState::connect(&StateConfig::new(&u), m.clone()).unwrap_err();
        assert_eq!(e.code(), "state_unavailable", "{u}: {e}");
        assert_eq!(e.failure().map(|f| f.as_str()), Some(failure), "{u}: {e:?}");
        assert!(e.hint().is_some());
    }
    let e = PgState::connect(&StateConfig::new("postgresql://h/x?sslmode=bogus"), m).unwrap_err();
    assert_eq!(e.code(), "bad_config");
}

#[test]
fn the_digest_secret_is_one_per_fleet_and_two_approvals_are_taken_together() {
    let Some(cfg) = fresh("secret") else { return };
    let a = machine(&cfg);
    let b = machine(&cfg);
    let key = a.digest_secret().unwrap();
    assert_eq!(key, b.digest_secret().unwrap());
    assert_ne!(key, [0u8; 32]);
    let other = fresh("secret2").unwrap();
    assert_ne!(
        machine(&other).digest_secret().unwrap(),
        key,
        "one per database schema"
    );

    // Two keys of one admit: both taken, or neither.
    let mut r1 = request("probe.one");
    r1.principal = "owner".into();
    let mut r2 = request("probe.two");
    r2.principal = "owner".into();
    let x1 = a.approval_request(&r1, t(0)).unwrap();
    let x2 = a.approval_request(&r2, t(0)).unwrap();
    a.approve(&x1.id, t(1)).unwrap();
    let take = |tool| hcp_state_pg::ApprovalTake {
        tool,
        principal_digest: "sha256:pd",
        args_digest: "sha256:args",
        policy_hash: "sha256:policy",
        escalation: false,
    };
    let keys = [take("probe.one"), take("probe.two")];
    let body = intent("owner");
    let adm = |now| {
        a.admit(&Admission {
            now: t(now),
            principal: "owner",
            session: None,
            grant: None,
            counters: &[],
            approvals: &keys,
            intent: &body,
        })
    };
    match adm(2) {
        Err(AdmitError::Refused(AdmitRefusal::ApprovalGone { tool })) => {
            assert_eq!(tool, "probe.two")
        }
        other => panic!("{other:?}"),
    }
    assert!(
        a.approvals_list()
            .unwrap()
            .iter()
            .all(|x| x.taken_at.is_none())
    );
    a.approve(&x2.id, t(3)).unwrap();
    let got = adm(4).unwrap();
    assert_eq!(got.approval_ids, vec![x1.id, x2.id]);
}

#[test]
fn verify_while_another_machine_appends_is_sound() {
    let Some(cfg) = fresh("verify_race") else {
        return;
    };
    let a = machine(&cfg);
    let b = machine(&cfg);
    let rec = fields(json!({"kind": "refusal", "principal": "alice"}));
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..300 {
                a.record(&rec, t(i)).unwrap();
            }
            done.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        let mut rounds = 0;
        while !done.load(std::sync::atomic::Ordering::SeqCst) || rounds == 0 {
            let r = b.audit_verify().unwrap();
            assert!(r.is_sound(), "{r:?}");
            rounds += 1;
        }
    });
    assert_eq!(b.audit_verify().unwrap().records(), 300);
}

#[test]
fn a_machine_role_appends_to_the_audit_but_cannot_rewrite_it() {
    let Some(url) = support::url() else { return };
    let cfg = support::fresh_on(&url, "roles");
    let schema = cfg.schema_name().to_owned();
    let role = format!("hcp_{}", &schema[schema.len() - 12..]);
    psql(&url, &format!("CREATE ROLE {role} LOGIN PASSWORD 'pw'"));
    for g in hcp_state_pg::schema::grant_statements(&schema, &role).unwrap() {
        psql(&url, &g);
    }
    assert!(hcp_state_pg::schema::grant_statements(&schema, "x; DROP").is_err());
    let as_role = StateConfig::new(format!("{url} user={role} password=pw")).with_schema(&schema);
    let m = PgState::connect(&as_role, MachineId::generate().unwrap()).unwrap();
    let (tok, s) = session("alice", t(0));
    m.session_insert(&s).unwrap();
    let body = intent("alice");
    m.admit(&Admission {
        now: t(1),
        principal: "alice",
        session: Some(&s.token_sha256),
        grant: None,
        counters: &[CounterTake {
            identity: "alice",
            tool: "probe.say",
            limits: Limits {
                rate_limit: Some(5),
                budget: Some(5),
                window_ms: 60_000,
            },
            now_ms: 1_000,
        }],
        approvals: &[],
        intent: &body,
    })
    .unwrap();
    m.record_outcome(&fields(json!({"kind": "outcome"})), t(2))
        .unwrap();
    m.session_end(tok.as_str(), t(3)).unwrap();
    assert!(m.audit_verify().unwrap().is_sound());
    for sql in [
        format!("UPDATE {schema}.audit_record SET body = '{{}}'"),
        format!("DELETE FROM {schema}.audit_record"),
        format!("TRUNCATE {schema}.audit_record"),
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
    psql(&url, &format!("DROP OWNED BY {role}; DROP ROLE {role}"));
}

#[test]
fn one_round_trip_snapshot_agrees_with_the_single_reads() {
    use Capability::*;
    let Some(cfg) = fresh("snapshot") else { return };
    let a = machine(&cfg);
    let (tok, s) = session("alice", t(0));
    a.session_insert(&s).unwrap();
    let alice = p("alice");
    let probe = pack("probe");
    a.grant(
        &alice,
        &PackScope::Pack(probe.clone()),
        &[VerbExecRead],
        t(1),
    )
    .unwrap();
    a.grant(&alice, &PackScope::All, &[VerbExecWrite], t(3))
        .unwrap();
    a.pack_content_changed(&probe, t(2)).unwrap();
    let limits = Limits {
        rate_limit: Some(1),
        budget: Some(5),
        window_ms: 60_000,
    };
    let body = intent("alice");
    let now_ms = 1_000_000u64;
    a.admit(&Admission {
        now: t(4),
        principal: "alice",
        session: Some(&s.token_sha256),
        grant: None,
        counters: &[CounterTake {
            identity: "alice",
            tool: "probe.say",
            limits,
            now_ms,
        }],
        approvals: &[],
        intent: &body,
    })
    .unwrap();
    let r = request("probe.say");
    let apr = a.approval_request(&r, t(5)).unwrap();
    a.approve(&apr.id, t(6)).unwrap();

    let caps = [VerbExecRead, VerbExecWrite, PackConnect];
    let counters = [
        ("alice", "probe.say", limits),
        ("alice", "probe.other", limits),
    ];
    let approvals = [
        (
            "probe.say",
            "sha256:pd",
            "sha256:args",
            "sha256:policy",
            false,
        ),
        (
            "probe.say",
            "sha256:pd",
            "sha256:other",
            "sha256:policy",
            false,
        ),
        (
            "probe.say",
            "sha256:pd",
            "sha256:args",
            "sha256:policy",
            true,
        ),
    ];
    let q = SnapshotQuery {
        token: Some(tok.as_str()),
        pack: &probe,
        capabilities: &caps,
        counters: &counters,
        now_ms: now_ms + 1,
        approvals: &approvals,
        now: t(7),
    };
    let snap = a.snapshot(&q).unwrap();
    assert_eq!(snap.session, Some(Ok(s.clone())));
    assert_eq!(
        snap.grants,
        caps.iter()
            .map(|&c| a.grant_status(&alice, &probe, c).unwrap())
            .collect::<Vec<_>>()
    );
    assert!(matches!(snap.grants[0], GrantStatus::Suspended { .. }));
    assert!(matches!(snap.grants[1], GrantStatus::Held { .. }));
    assert_eq!(snap.grants[2], GrantStatus::Missing);
    assert_eq!(snap.content_changed_at, Some(t(2)));
    assert_eq!(snap.counters, vec![Verdict::RateLimit, Verdict::Ok]);
    assert_eq!(
        snap.counters[0],
        a.counter_check("alice", "probe.say", limits, now_ms + 1)
            .unwrap()
    );
    assert_eq!(
        snap.approvals,
        vec![Some(apr.id.clone()), None, None],
        "an approved confirmation is no escalation's"
    );

    // Refused tokens, and the owner.
    for (token, want) in [
        ("nope".to_owned(), BadSession::Malformed),
        (format!("hcps_{}", "0".repeat(64)), BadSession::Unknown),
    ] {
        let snap = a
            .snapshot(&SnapshotQuery {
                token: Some(&token),
                ..q
            })
            .unwrap();
        assert_eq!(snap.session, Some(Err(want)));
        assert!(snap.grants.iter().all(|g| *g == GrantStatus::Missing));
    }
    a.session_end(tok.as_str(), t(8)).unwrap();
    let snap = a.snapshot(&SnapshotQuery { now: t(9), ..q }).unwrap();
    assert_eq!(
        snap.session,
        Some(Err(BadSession::Ended { ended_at: t(8) }))
    );
    let owner = a.snapshot(&SnapshotQuery { token: None, ..q }).unwrap();
    assert_eq!(owner.session, None);
    assert!(owner.grants.is_empty());
    assert_eq!(owner.approvals, vec![None, None, None]);
}

/// A session lookup as text: the session, or the error's code and message.
fn shown(r: &Result<hcp_store::session::Session, hcp_state_pg::SessionLookupError>) -> String {
    match r {
        Ok(s) => format!("{s:?}"),
        Err(e) => format!("{}: {e}", e.code()),
    }
}

#[test]
fn a_calls_reads_in_one_statement_answer_as_the_separate_reads_do() {
    use Capability::*;
    let Some(cfg) = fresh("reads") else { return };
    let a = machine(&cfg);
    let notes = pack("notes");
    let (live, s1) = session("agent-1", t(0));
    a.session_insert(&s1).unwrap();
    let (bare, mut s2) = session("agent-2", t(1));
    s2.workdir = None;
    a.session_insert(&s2).unwrap();
    let (ended, s3) = session("agent-3", t(2));
    a.session_insert(&s3).unwrap();
    a.session_end(ended.as_str(), t(3)).unwrap();
    a.grant(
        &p("agent-1"),
        &PackScope::Pack(notes.clone()),
        &[VerbExecRead],
        t(4),
    )
    .unwrap();
    a.grant(
        &p("agent-1"),
        &PackScope::All,
        &[VerbExecWrite, SenseEnable],
        t(5),
    )
    .unwrap();
    a.grant(
        &p("agent-1"),
        &PackScope::Pack(pack("mail")),
        &[PackConnect],
        t(6),
    )
    .unwrap();
    a.grant(
        &p("agent-2"),
        &PackScope::Pack(notes.clone()),
        &[VerbExecRead],
        t(7),
    )
    .unwrap();
    let unknown = hcp_store::session::Token::generate().unwrap();

    // Live, without a working directory, ended, expired (an hour after), unknown,
    // malformed, and no token (the owner); with the pack and without.
    let tokens: [(Option<&str>, i64); 7] = [
        (Some(live.as_str()), 10),
        (Some(bare.as_str()), 10),
        (Some(ended.as_str()), 10),
        (Some(live.as_str()), 3_600),
        (Some(unknown.as_str()), 10),
        (Some("hcp_not-a-token"), 10),
        (None, 10),
    ];
    for (token, at) in tokens {
        for pk in [Some(&notes), None] {
            let now = t(at);
            let got = a.call_reads(token, pk, now);
            let case = format!("token {token:?} at {at}, pack {pk:?}");
            let want = token.map(|tk| a.session_resolve(tk, now));
            assert_eq!(
                got.session.as_ref().map(shown),
                want.as_ref().map(shown),
                "{case}"
            );
            let want_grants = match (&want, pk) {
                (Some(Ok(s)), Some(pk)) => a.grants_held(&s.principal, pk).unwrap(),
                _ => Vec::new(),
            };
            assert_eq!(got.grants.unwrap(), want_grants, "{case}");
        }
    }
    // The live session with the pack: its own grant and the `*` ones, not `mail`'s.
    let r = a.call_reads(Some(live.as_str()), Some(&notes), t(10));
    let held: Vec<(Capability, String)> = r
        .grants
        .unwrap()
        .into_iter()
        .map(|h| (h.capability, h.scope.to_string()))
        .collect();
    assert_eq!(
        held,
        vec![
            (SenseEnable, "*".to_owned()),
            (VerbExecRead, "notes".to_owned()),
            (VerbExecWrite, "*".to_owned()),
        ]
    );
}

#[test]
fn a_calls_reads_check_a_new_connections_schema_in_the_same_statement() {
    let Some(url) = support::url() else { return };
    let notes = pack("notes");
    let (token, _) = session("agent-1", t(0));
    let refused = |state: &PgState, found: Option<i32>| {
        for (tk, pk) in [
            (Some(token.as_str()), Some(&notes)),
            (None, Some(&notes)),
            (None, None),
        ] {
            let r = state.call_reads(tk, pk, t(1));
            let e = r.grants.unwrap_err();
            assert!(
                matches!(&e, PgError::Schema { found: f, expected } if *f == found && *expected == SCHEMA_VERSION),
                "{e:?}"
            );
            assert_eq!(e.code(), "state_unavailable");
            match r.session {
                None => assert!(tk.is_none()),
                Some(s) => assert_eq!(s.unwrap_err().code(), "state_unavailable"),
            }
        }
    };

    // No schema at all (the statement fails; the check on its own names it); one version
    // behind and one ahead (the statement runs: its version column refuses it).
    let cfg = StateConfig::new(&url).with_schema(support::schema_name("reads_v"));
    let state = PgState::open(&cfg, MachineId::generate().unwrap()).unwrap();
    refused(&state, None);
    PgState::migrate_to(&cfg, SCHEMA_VERSION - 1).unwrap();
    refused(&state, Some(SCHEMA_VERSION - 1));
    PgState::migrate(&cfg).unwrap();
    let ok = state.call_reads(Some(token.as_str()), Some(&notes), t(1));
    assert_eq!(ok.session.unwrap().unwrap_err().code(), "bad_session");
    assert_eq!(ok.grants.unwrap(), vec![]);
    let schema = cfg.schema_name();
    psql(
        &url,
        &format!(
            "INSERT INTO {schema}.schema_version (version, description) VALUES ({}, 'later')",
            SCHEMA_VERSION + 1
        ),
    );
    // Every call's reads check the version: the open connection (a long-lived process)
    // and a new one (another machine) are refused alike.
    refused(&state, Some(SCHEMA_VERSION + 1));
    let other = PgState::open(&cfg, MachineId::generate().unwrap()).unwrap();
    refused(&other, Some(SCHEMA_VERSION + 1));
}

#[test]
fn a_column_the_client_cannot_decode_is_damage_not_an_unreachable_server() {
    let Some(cfg) = fresh("undecodable") else {
        return;
    };
    let a = machine(&cfg);
    let (token, s) = session("agent-1", t(0));
    a.session_insert(&s).unwrap();
    let url = support::url().unwrap();
    let schema = cfg.schema_name();
    psql(
        &url,
        &format!("UPDATE {schema}.sessions SET projects = '{{NULL}}'"),
    );
    let r = a.call_reads(Some(token.as_str()), Some(&pack("notes")), t(1));
    let e = match r.session.unwrap().unwrap_err() {
        hcp_state_pg::SessionLookupError::State(e) => e,
        other => panic!("{other:?}"),
    };
    assert_eq!(e.failure(), Some(hcp_state_pg::Failure::Damaged), "{e:?}");
    assert_eq!(e.code(), "state_unavailable");
    assert!(!e.hint().unwrap().contains("running"), "{:?}", e.hint());
}
