//! Nothing single-use is spent before every check that can refuse without spending has
//! passed (issue 11, "Bad input"): a bad `config.json`, an unwritable audit, a changed bin
//! leave the approval and the rate-limit slot usable; admission refuses what another call
//! took since the dry check.

use super::{World, code, s};
use crate::Runtime;
use hcp_model::PackId;
use hcp_model::{ArgValue, Capability};
use hcp_store::StoreError;
use hcp_store::approval::{Approval, ApprovalError};
use hcp_store::audit::checkpoint::Checkpoint;
use hcp_store::audit::{Appended, AuditError, AuditReport, Entry, Outcome};
use hcp_store::counter::{Counters, Limits, Verdict};
use hcp_store::grant::{Grant, HeldCapability, PackScope};
use hcp_store::session::{NewSession, PrincipalId, Session, SessionError, Token};
use hcp_store::state::{
    Admission, AdmitError, Admitted, ApprovalKey, ApprovalRequest, FileState, State,
};
use jiff::Timestamp;
use pretty_assertions::assert_eq;
use std::sync::Arc;

const POLICY: &str = "schema_version: histos.policy/0.1\ntools:\n  tp.say:\n    args: {text: {type: string}}\n    rate_limit: 1\n  tp.put:\n    access: write\n    args: {text: {type: string}}\n    confirmation: {required: true, expires_in: 300}\nroles:\n  agent:\n    allow: [tp.say, tp.put]\n";

fn agent(w: &World) -> crate::Caller {
    w.policy(POLICY);
    let a = w.session("agent", Some("agent"), &[]);
    w.grant(
        "agent",
        "tp",
        &[Capability::VerbExecRead, Capability::VerbExecWrite],
    );
    a
}

fn put(w: &World, c: &crate::Caller) -> crate::Answer {
    w.exec(
        c,
        "tp.put",
        &[("text", s("x")), ("confirm", ArgValue::Bool(true))],
    )
}

/// A pending approval of `tp.put`, granted by the owner.
fn approved(w: &World, c: &crate::Caller) -> String {
    let a = put(w, c);
    assert_eq!(code(&a), (Some("requires_confirmation"), 77));
    let id = a.result.extra["approval_id"].as_str().unwrap().to_owned();
    w.rt.state().approve(&id, Timestamp::now()).unwrap();
    id
}

#[test]
fn a_bad_config_burns_neither_the_approval_nor_the_rate_limit_slot() {
    let w = World::new();
    let c = agent(&w);
    let id = approved(&w, &c);
    w.config(Some("{\"limits\": {\"cpu_seconds\": 0}}"));
    assert_eq!(code(&put(&w, &c)), (Some("bad_config"), 78));
    assert_eq!(code(&w.say(&c, "x")), (Some("bad_config"), 78));
    w.config(None);
    // both still usable, once
    let a = put(&w, &c);
    assert_eq!(code(&a), (None, 0));
    assert_eq!(w.last_record()["approval_id"], serde_json::json!(id));
    assert_eq!(code(&put(&w, &c)), (Some("requires_confirmation"), 77));
    assert_eq!(code(&w.say(&c, "x")), (None, 0));
    assert_eq!(code(&w.say(&c, "x")), (Some("rate_limit"), 77));
}

#[test]
fn an_unwritable_audit_burns_neither_the_approval_nor_the_slot() {
    let w = World::new();
    let c = agent(&w);
    approved(&w, &c);
    // the trail's path is a directory: no process, root included, can append to it
    let trail = w.home().root().join("audit/audit.jsonl");
    let kept = w.home().root().join("audit/kept.jsonl");
    std::fs::rename(&trail, &kept).unwrap();
    std::fs::create_dir(&trail).unwrap();
    assert_eq!(code(&put(&w, &c)), (Some("audit_unavailable"), 74));
    assert_eq!(code(&w.say(&c, "x")), (Some("audit_unavailable"), 74));
    std::fs::remove_dir(&trail).unwrap();
    std::fs::rename(&kept, &trail).unwrap();
    assert_eq!(code(&put(&w, &c)), (None, 0));
    assert_eq!(code(&w.say(&c, "x")), (None, 0));
    assert_eq!(code(&w.say(&c, "x")), (Some("rate_limit"), 77));
}

#[test]
fn a_changed_bin_burns_neither_the_approval_nor_the_slot() {
    let w = World::new();
    let c = agent(&w);
    approved(&w, &c);
    let bin = w.root.join("src/tp/bin/tp");
    let pinned = std::fs::read(&bin).unwrap();
    std::fs::write(&bin, b"#!/bin/sh\n").unwrap();
    assert_eq!(code(&put(&w, &c)), (Some("bin_changed"), 126));
    assert_eq!(code(&w.say(&c, "x")), (Some("bin_changed"), 126));
    std::fs::write(&bin, pinned).unwrap();
    assert_eq!(code(&put(&w, &c)), (None, 0));
    assert_eq!(code(&w.say(&c, "x")), (None, 0));
}

/// The file state, but another call takes the counter slot of every admission just
/// before it is made (a race the dry check cannot see).
#[derive(Debug)]
struct Racing(FileState);

impl State for Racing {
    fn backend(&self) -> &'static str {
        "racing"
    }
    fn session_start(
        &self,
        n: &NewSession,
        t: Timestamp,
    ) -> Result<(Token, Session), SessionError> {
        self.0.session_start(n, t)
    }
    fn session_start_prepared(
        &self,
        p: (Token, Session),
    ) -> Result<(Token, Session), SessionError> {
        self.0.session_start_prepared(p)
    }
    fn session_resolve(&self, k: &str, t: Timestamp) -> Result<Session, SessionError> {
        self.0.session_resolve(k, t)
    }
    fn session_end(&self, k: &str, t: Timestamp) -> Result<(Session, bool), SessionError> {
        self.0.session_end(k, t)
    }
    fn session_end_digest(&self, k: &str, t: Timestamp) -> Result<(Session, bool), SessionError> {
        self.0.session_end_digest(k, t)
    }
    fn session_end_principal(
        &self,
        p: &PrincipalId,
        t: Timestamp,
    ) -> Result<Vec<Session>, SessionError> {
        self.0.session_end_principal(p, t)
    }
    fn session_list(&self) -> Result<Vec<Session>, StoreError> {
        self.0.session_list()
    }
    fn grants_held(&self, p: &PrincipalId, k: &PackId) -> Result<Vec<HeldCapability>, StoreError> {
        self.0.grants_held(p, k)
    }
    fn grant(
        &self,
        p: &PrincipalId,
        s: &PackScope,
        c: &[Capability],
        t: Timestamp,
    ) -> Result<Vec<Grant>, StoreError> {
        self.0.grant(p, s, c, t)
    }
    fn revoke(
        &self,
        p: &PrincipalId,
        s: &PackScope,
        c: &[Capability],
    ) -> Result<Vec<Grant>, StoreError> {
        self.0.revoke(p, s, c)
    }
    fn grants_list(&self) -> Result<Vec<Grant>, StoreError> {
        self.0.grants_list()
    }
    fn pack_content_changed(&self, p: &PackId, t: Timestamp) -> Result<(), StoreError> {
        self.0.pack_content_changed(p, t)
    }
    fn pack_removed(&self, p: &PackId) -> Result<(), StoreError> {
        self.0.pack_removed(p)
    }
    fn approval_request(&self, r: &ApprovalRequest, t: Timestamp) -> Result<Approval, StoreError> {
        self.0.approval_request(r, t)
    }
    fn approval_lookup(
        &self,
        k: &ApprovalKey,
        t: Timestamp,
    ) -> Result<Option<Approval>, StoreError> {
        self.0.approval_lookup(k, t)
    }
    fn approvals_list(&self) -> Result<Vec<Approval>, StoreError> {
        self.0.approvals_list()
    }
    fn approve(&self, id: &str, t: Timestamp) -> Result<Approval, ApprovalError> {
        self.0.approve(id, t)
    }
    fn deny(&self, id: &str, t: Timestamp) -> Result<Approval, ApprovalError> {
        self.0.deny(id, t)
    }
    fn denial_lookup(&self, k: &ApprovalKey, t: Timestamp) -> Result<Option<Approval>, StoreError> {
        self.0.denial_lookup(k, t)
    }
    fn args_digest(&self, a: &[(&str, &ArgValue)]) -> Result<String, StoreError> {
        self.0.args_digest(a)
    }
    fn counter_check(&self, i: &str, t: &str, l: Limits, n: u64) -> Result<Verdict, StoreError> {
        self.0.counter_check(i, t, l, n)
    }
    fn admit(&self, a: &Admission<'_>) -> Result<Admitted, AdmitError> {
        let c = Counters::new(self.0.home());
        for slot in a.counters {
            let _ = c.try_consume(&slot.identity, &slot.tool, slot.limits, slot.now_ms);
        }
        self.0.admit(a)
    }
    fn record(&self, e: &Entry) -> Result<Appended, AuditError> {
        self.0.record(e)
    }
    fn record_authority(&self, a: &hcp_store::audit::Authority) -> Result<Appended, AuditError> {
        self.0.record_authority(a)
    }
    fn record_noticed(&self, a: &hcp_store::audit::Authority) -> Result<Appended, AuditError> {
        self.0.record_noticed(a)
    }
    fn audit_ready(&self) -> Result<(), AuditError> {
        self.0.audit_ready()
    }
    fn record_outcome(&self, o: &Outcome) -> Result<Appended, AuditError> {
        self.0.record_outcome(o)
    }
    fn audit_verify(&self, c: Option<&Checkpoint>) -> Result<AuditReport, AuditError> {
        self.0.audit_verify(c)
    }
    fn audit_tail(&self, n: usize) -> Result<(Vec<Vec<u8>>, u64), AuditError> {
        self.0.audit_tail(n)
    }
}

#[test]
fn admission_refuses_a_slot_taken_since_the_dry_check_as_the_dry_check_would() {
    let w = World::new();
    let c = agent(&w);
    let racing = Runtime::with_state(w.home().clone(), Arc::new(Racing(FileState::new(w.home()))));
    let call = crate::Call {
        pack_id: None,
        target: "tp.say".into(),
        args: crate::CallArgs::Named(vec![("text".into(), s("x"))]),
        face: crate::Face::Json,
        timeout: None,
    };
    let a = crate::pipeline::run(
        &racing,
        &c,
        crate::pipeline::Subject::Verb(call),
        crate::pipeline::Mode::Exec(None),
    );
    assert_eq!(code(&a), (Some("rate_limit"), 77));
    let r = w.last_record();
    assert_eq!(
        (&r["decision"], &r["code"], &r["rule"]),
        (
            &serde_json::json!("deny"),
            &serde_json::json!("rate_limit"),
            &serde_json::json!("rate_limit")
        )
    );
}
