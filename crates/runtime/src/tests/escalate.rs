//! Escalation through the owner's approval queue (RUNTIME §7, issue 16): with
//! `"escalation": "approvals"`, a tool's `escalate` is answered by `hcp approve` /
//! `hcp deny`, never by the agent; without it the answer stays `no_escalation_tier`.

use super::{World, code, s};
use crate::Answer;
use hcp_model::{ArgValue, Capability};
use jiff::Timestamp;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

const POLICY: &str = "schema_version: histos.policy/0.1
tools:
  tp.say:
    args: {text: {type: string}}
    escalate: {required: true}
  tp.put:
    access: write
    args: {text: {type: string}}
    escalate: {required: true}
    confirmation: {required: true, expires_in: 600}
roles:
  agent:
    allow: [tp.say, tp.put]
";

fn world(wired: bool) -> (World, crate::Caller) {
    let w = World::new();
    w.policy(POLICY);
    if wired {
        w.config(Some(r#"{"escalation": "approvals"}"#));
    }
    let c = w.session("agent", Some("agent"), &[]);
    w.grant(
        "agent",
        "tp",
        &[Capability::VerbExecRead, Capability::VerbExecWrite],
    );
    (w, c)
}

fn pending(a: &Answer) -> String {
    assert_eq!(
        code(a),
        (Some("requires_confirmation"), 77),
        "{:?}",
        a.result
    );
    a.result.extra["approval_id"].as_str().unwrap().to_owned()
}

fn approval(w: &World, id: &str) -> hcp_store::approval::Approval {
    w.rt.state()
        .approvals_list()
        .unwrap()
        .into_iter()
        .find(|a| a.id == id)
        .unwrap()
}

/// Rewrites a field of approval `id`'s file (a test technique, not a sleep).
fn backdate(w: &World, id: &str, field: &str) {
    let p = w
        .home()
        .root()
        .join("state/approvals")
        .join(format!("{id}.json"));
    let mut v: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    v[field] = json!("2000-01-01T00:00:00Z");
    // hcp would refuse a file edited by hand: written with its MAC and noted in the state
    // ledger, as hcp does.
    let lock = hcp_store::StoreLock::acquire(w.home()).unwrap();
    hcp_store::stamp::write(w.home(), &lock, &p, &v).unwrap();
}

fn now() -> Timestamp {
    Timestamp::now()
}

#[test]
fn without_a_tier_escalate_is_no_escalation_tier() {
    let (w, c) = world(false);
    let a = w.say(&c, "x");
    assert_eq!(code(&a), (Some("no_escalation_tier"), 77));
    assert!(
        a.result
            .hint
            .as_deref()
            .unwrap_or("")
            .contains("\"escalation\": \"approvals\""),
        "{:?}",
        a.result.hint
    );
    assert!(w.rt.state().approvals_list().unwrap().is_empty());
}

#[test]
fn the_owner_approves_an_escalation_and_the_call_passes_once() {
    let (w, c) = world(true);
    let id = pending(&w.say(&c, "x"));
    let ap = approval(&w, &id);
    assert!(ap.escalation, "marked as an escalation: {ap:?}");
    assert_eq!((ap.kind(), ap.state(now())), ("escalation", "pending"));
    // asking again is the same request; the agent cannot answer it
    assert_eq!(pending(&w.say(&c, "x")), id);
    w.rt.state().approve(&id, now()).unwrap();
    let a = w.say(&c, "x");
    assert_eq!(code(&a), (None, 0), "{:?}", a.result);
    let r = w.last_record();
    assert_eq!(
        (&r["rule"], &r["approval_id"]),
        (&json!("escalated"), &json!(id))
    );
    // single use: the next call asks anew
    assert_ne!(pending(&w.say(&c, "x")), id);
}

#[test]
fn the_owner_denies_an_escalation() {
    let (w, c) = world(true);
    let id = pending(&w.say(&c, "x"));
    w.rt.state().deny(&id, now()).unwrap();
    for _ in 0..2 {
        let a = w.say(&c, "x");
        assert_eq!(code(&a), (Some("escalation_denied"), 77));
        assert_eq!(w.last_record()["code"], json!("escalation_denied"));
    }
    // answered once: neither a second deny nor an approve after it
    for e in [
        w.rt.state().deny(&id, now()).unwrap_err(),
        w.rt.state().approve(&id, now()).unwrap_err(),
    ] {
        assert_eq!(e.code(), "approval_decided");
    }
    // another call (other arguments) is not denied
    let other = pending(&w.say(&c, "y"));
    assert_ne!(other, id);
    // once the denial lapses, the call asks again
    backdate(&w, &id, "denied_at");
    assert_ne!(pending(&w.say(&c, "x")), id);
}

#[test]
fn an_escalation_approved_after_it_expired_is_refused() {
    let (w, c) = world(true);
    let id = pending(&w.say(&c, "x"));
    backdate(&w, &id, "requested_at");
    assert_eq!(
        w.rt.state().approve(&id, now()).unwrap_err().code(),
        "approval_expired"
    );
    // and an approval whose window passed before the call is not used
    let id2 = pending(&w.say(&c, "x"));
    assert_ne!(id2, id);
    w.rt.state().approve(&id2, now()).unwrap();
    backdate(&w, &id2, "approved_at");
    let id3 = pending(&w.say(&c, "x"));
    assert_ne!(id3, id2);
}

#[test]
fn an_escalation_approved_twice_is_refused_and_passes_once() {
    let (w, c) = world(true);
    let id = pending(&w.say(&c, "x"));
    w.rt.state().approve(&id, now()).unwrap();
    assert_eq!(
        w.rt.state().approve(&id, now()).unwrap_err().code(),
        "approval_decided"
    );
    assert_eq!(code(&w.say(&c, "x")), (None, 0));
    assert_eq!(
        w.rt.state().approve(&id, now()).unwrap_err().code(),
        "approval_used"
    );
    assert_ne!(pending(&w.say(&c, "x")), id);
}

#[test]
fn an_escalation_approved_for_other_arguments_does_not_pass() {
    let (w, c) = world(true);
    let id = pending(&w.say(&c, "a"));
    w.rt.state().approve(&id, now()).unwrap();
    let other = pending(&w.say(&c, "b"));
    assert_ne!(other, id);
    // another principal does not get it either
    let them = w.session("other", Some("agent"), &[]);
    w.grant("other", "tp", &[Capability::VerbExecRead]);
    assert_ne!(pending(&w.say(&them, "a")), id);
    // the approved call itself still passes
    assert_eq!(code(&w.say(&c, "a")), (None, 0));
}

#[test]
fn escalation_and_confirmation_are_two_answers() {
    let (w, c) = world(true);
    let put = |w: &World| {
        w.exec(
            &c,
            "tp.put",
            &[("text", s("x")), ("confirm", ArgValue::Bool(true))],
        )
    };
    let esc = pending(&put(&w));
    assert!(approval(&w, &esc).escalation);
    w.rt.state().approve(&esc, now()).unwrap();
    // the escalation answered, the confirmation is asked
    let conf = pending(&put(&w));
    assert_ne!(conf, esc);
    assert!(!approval(&w, &conf).escalation);
    // a confirmation cannot be denied
    assert_eq!(
        w.rt.state().deny(&conf, now()).unwrap_err().code(),
        "not_an_escalation"
    );
    w.rt.state().approve(&conf, now()).unwrap();
    let a = put(&w);
    assert_eq!(code(&a), (None, 0), "{:?}", a.result);
    assert_eq!(approval(&w, &esc).state(now()), "used");
    assert_eq!(approval(&w, &conf).state(now()), "used");
    // a granted confirmation never stands in for a pending escalation
    let esc2 = pending(&put(&w));
    w.rt.state().approve(&esc2, now()).unwrap();
    let conf2 = pending(&put(&w));
    w.rt.state().approve(&conf2, now()).unwrap();
    backdate(&w, &esc2, "approved_at");
    let esc3 = pending(&put(&w));
    assert!(approval(&w, &esc3).escalation);
    assert_eq!(approval(&w, &conf2).state(now()), "approved");
}
