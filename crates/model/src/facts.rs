//! What a call learned beyond the core fields of its records (RUNTIME §5, §6): one typed
//! [`CallFacts`], filled by the steps of the runtime as they learn each fact, and
//! flattened into the call's audit records ([`CallFacts::audit_fields`]: its refusal, its
//! `intent` and `outcome`, a binding event) and into its result object
//! ([`CallFacts::result_fields`]).
//!
//! Each field is written under one key, its name, in the destinations its documentation
//! names; a fact not learned (`None`) is written nowhere. An `outcome` carries the audit
//! fields that changed since its `intent` was written (the runtime keeps the intent's).
//!
//! To add a fact: a field here (documented: what, units, where it goes), a line in
//! [`CallFacts::audit_fields`] and/or [`CallFacts::result_fields`], and the step that
//! learns it sets it. Its key may not be a core field of the records (`hcp_store`'s
//! `CORE_FIELDS`); the store refuses one.

use crate::Code;
use serde::Serialize;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// The facts of one call. See the module docs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CallFacts {
    /// `face` (audit): the face of a call that is not a verb's (`hcp sense`).
    pub face: Option<RecordFace>,
    /// `transport` (audit): how an MCP call came, when not over stdio (`http`).
    pub transport: Option<Transport>,
    /// `policy_hash` (audit): the runtime policy's `content_hash` a session's call was
    /// decided under (RUNTIME §7).
    pub policy_hash: Option<String>,
    /// `rule` (audit): the runtime policy's rule (`allow`, `confirmed`, `escalated`) or
    /// the code it refused with, or the tool lock's code.
    pub rule: Option<&'static str>,
    /// `approval_id` (audit; the result too while the approval is pending): the approval
    /// the call uses or waits for.
    pub approval: Option<Approval>,
    /// `resolver` (audit and result): what the call of the tool's resource resolver did.
    pub resolver: Option<ResolverRun>,
    /// `confirm` (audit): who confirmed the call at the confirm gate, when the person did
    /// through the face.
    pub confirm: Option<Via>,
    /// `sandbox` (audit; the result too for one child): what the child's confinement
    /// holds (RUNTIME §5.4: `filesystem`, `network`, `processes` …).
    pub sandbox: Option<Sandbox>,
    /// `approved_by` (audit): who granted the approval the call took, when the person did
    /// through the face.
    pub approved_by: Option<Via>,
    /// `http_status` (audit and result): the HTTP status of a `kind: openapi` verb's
    /// answer, when a response head arrived.
    pub http_status: Option<u16>,
    /// `signal` (audit and result) and `signal_name` (result): the signal that ended the
    /// child, when it did not end on its own and not by the timeout or a cancel.
    pub signal: Option<Signal>,
    /// `post_rule` (audit): the runtime policy's output controls' rule (`allow`,
    /// `post_redaction`, `output_schema` …).
    pub post_rule: Option<&'static str>,
    /// `events` (audit): how many events a sense relayed.
    pub events: Option<u64>,
    /// `binding`, `family`, `run_audit_id` (audit): a binding decision's record.
    pub binding: Option<BindingAct>,
    /// `binding` and `binding_audit_id` (result): what `hcp connect` did with the
    /// credential.
    pub connected: Option<BindingResult>,
    /// `session`, `role`, `attributes`, `can_view` (audit): the session a call was made
    /// under, as `hcp policy replay` decides it again (RUNTIME §6, §11).
    pub session: Option<SessionRecord>,
    /// `policy_mode` (audit): the runtime policy was observed, not enforced (RUNTIME §11).
    pub policy_mode: Option<PolicyMode>,
    /// `would_refuse` (audit): the first refusal an observed runtime policy would have
    /// made.
    pub would_refuse: Option<Code>,
    /// `observe_unchecked` (audit): what an observed runtime policy could not decide
    /// (`resource`: a resolver observe mode does not run).
    pub observe_unchecked: Option<&'static str>,
    /// `socket_attempts` (audit): how many sockets the child tried to make under
    /// `network: deny` (RUNTIME §5.3).
    pub socket_attempts: Option<u32>,
    /// `hint` (result): what the run teaches the caller (the key of a `deny` network a
    /// socket was tried under, a destination the egress proxy refused).
    pub hint: Option<String>,
    /// `sandbox` (result): the result's `sandbox` when the run changed what it shows
    /// (a `/proc` the kernel refused, the egress proxy's refusals); the records keep what
    /// preparation found ([`CallFacts::sandbox`]).
    pub sandbox_after_run: Option<Map<String, Value>>,
    /// `connections` (audit): the egress proxy's connections (RUNTIME §5.5), by ref for a
    /// sense.
    pub connections: Option<Value>,
    /// `protected_created` (audit and result, each its own shape): the protected names a
    /// call created in its workdir, moved to the quarantine (RUNTIME §5.1).
    pub protected_created: Option<ProtectedCreated>,
    /// `outcome_deferred` (result): the verb ran and its outcome record could not be
    /// written (RUNTIME §6) — the audit's failure, `{"code", "message"}`; the trail shows
    /// the call interrupted.
    pub outcome_deferred: Option<Deferred>,
    /// `steps` (result): every step a session's refused call still needs before it can
    /// pass — a grant, the runtime policy, the tool lock — in the order to take them, all
    /// in one answer, whichever check refused first (the refusal's code stays that check's).
    /// Empty when the refusal is not one of setting up.
    pub setup: Vec<SetupStep>,
}

/// One step a call still needs ([`CallFacts::setup`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SetupStep {
    /// The code the call is (or would next be) refused with until this step is taken
    /// (`missing_grant`, `unknown_tool`, `rbac`, `tool_drift`, `lock_stale`).
    pub code: Code,
    /// What to do, in words.
    pub step: String,
    /// The command that does it, when one does (`hcp grant …`, `hcp policy lock`); `None`
    /// when it is an edit of a file.
    pub command: Option<String>,
}

/// Why a call's outcome record was not written ([`CallFacts::outcome_deferred`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deferred {
    /// The audit's code (`audit_unavailable`, `state_unavailable` …).
    pub code: Code,
    /// What happened, for a person.
    pub message: String,
}

/// The session of a call, as its record keeps it for a replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRecord {
    /// The session's id (`sha256:` of its token).
    pub id: String,
    /// Its role, if it has one.
    pub role: Option<String>,
    /// Its attributes.
    pub attributes: BTreeMap<String, String>,
    /// Its `can_view` classes.
    pub can_view: Vec<String>,
}

/// How the runtime policy governed a call (`policy_mode`), when not enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyMode {
    /// `observe`: decided and recorded, never enforced.
    Observe,
}

impl PolicyMode {
    /// `observe`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Observe => "observe",
        }
    }
}

/// The protected names a call created (`protected_created`): as the outcome records them
/// and as the result shows them.
#[derive(Debug, Clone, PartialEq)]
pub struct ProtectedCreated {
    /// The records' form.
    pub audit: Value,
    /// The result's form.
    pub result: Value,
}

/// The face a record names (`face`), for calls that are not a verb's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordFace {
    /// `hcp sense`.
    Sense,
}

impl RecordFace {
    /// `sense`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sense => "sense",
        }
    }
}

/// How an MCP call came (`transport`), when it did not come over stdio.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// `hcp mcp --http` (RUNTIME §10, Streamable HTTP).
    Http,
}

impl Transport {
    /// `http`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Http => "http",
        }
    }
}

/// Who answered for the person (`confirm`, `approved_by`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// The person, through the face's elicitation (RUNTIME §10).
    Elicitation,
}

impl Via {
    /// `elicitation`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Elicitation => "elicitation",
        }
    }
}

/// An approval of the runtime policy's `confirmation` or `escalate` (`approval_id`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approval {
    /// The dry pre-gate found it approved; admission takes it.
    Found(String),
    /// The call waits for it (`requires_confirmation`): the result names it too.
    Pending(String),
    /// Admission took it.
    Taken(String),
}

impl Approval {
    /// The approval's id.
    pub fn id(&self) -> &str {
        match self {
            Self::Found(id) | Self::Pending(id) | Self::Taken(id) => id,
        }
    }
}

/// What the call of a tool's resource resolver did (RUNTIME §7).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResolverRun {
    /// The resolver verb, `PACK.VERB`.
    pub verb: String,
    /// The audit id of its own record, when it ran or was refused through the pipeline.
    pub audit_id: Option<String>,
    /// Why it gave no resource, when it did not.
    pub code: Option<Code>,
}

/// A confinement's report (`sandbox`): the adapter's, as JSON.
#[derive(Debug, Clone, PartialEq)]
pub enum Sandbox {
    /// The one child of a verb.
    One(Value),
    /// Each trigger of a sense, by stimulus ref.
    ByRef(Map<String, Value>),
}

/// The signal that ended a child (`signal`, `signal_name`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signal {
    /// The signal number.
    pub number: i32,
    /// Its name and what likely sent it (`SIGXFSZ (the file-size limit)`).
    pub name: &'static str,
}

/// A binding decision of `hcp connect` or `hcp disconnect` (RUNTIME §8), recorded as an
/// event (or a refusal) of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindingAct {
    /// What became of the credential.
    pub outcome: BindingOutcome,
    /// The binding family, when the decision reached it.
    pub family: Option<String>,
    /// The record of the connect verb's run, when it ran.
    pub run_audit_id: Option<String>,
}

/// What became of a credential (`binding`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindingOutcome {
    /// Stored for the principal and family.
    Stored,
    /// Refused: not stored, or not removed.
    Refused,
    /// Removed.
    Removed,
    /// There was none to remove.
    Absent,
}

impl BindingOutcome {
    /// `stored`, `refused`, `removed`, `absent`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stored => "stored",
            Self::Refused => "refused",
            Self::Removed => "removed",
            Self::Absent => "absent",
        }
    }
}

/// What `hcp connect` answers of the credential (never the credential).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindingResult {
    /// `binding_audit_id`: the binding decision's record, when it was written.
    pub audit_id: Option<String>,
    /// `binding`: for whom and which family it was stored, when it was.
    pub stored: Option<Stored>,
}

/// A stored credential, as the result names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Stored {
    /// The principal.
    pub principal: String,
    /// The binding family.
    pub family: String,
    /// When it expires (RFC 3339), if it does.
    pub expires_at: Option<String>,
}

fn text(s: &str) -> Value {
    Value::String(s.to_owned())
}

impl CallFacts {
    /// The fields these facts add to an audit record, by key.
    pub fn audit_fields(&self) -> BTreeMap<String, Value> {
        let mut m = BTreeMap::new();
        let mut put = |k: &str, v: Value| {
            m.insert(k.to_owned(), v);
        };
        if let Some(f) = self.face {
            put("face", text(f.as_str()));
        }
        if let Some(t) = self.transport {
            put("transport", text(t.as_str()));
        }
        if let Some(h) = &self.policy_hash {
            put("policy_hash", text(h));
        }
        if let Some(r) = self.rule {
            put("rule", text(r));
        }
        if let Some(a) = &self.approval {
            put("approval_id", text(a.id()));
        }
        if let Some(r) = &self.resolver {
            put("resolver", resolver(r));
        }
        if let Some(c) = self.confirm {
            put("confirm", text(c.as_str()));
        }
        match &self.sandbox {
            Some(Sandbox::One(v)) => put("sandbox", v.clone()),
            Some(Sandbox::ByRef(m)) => put("sandbox", Value::Object(m.clone())),
            None => {}
        }
        if let Some(a) = self.approved_by {
            put("approved_by", text(a.as_str()));
        }
        if let Some(s) = self.http_status {
            put("http_status", Value::from(s));
        }
        if let Some(s) = self.signal {
            put("signal", Value::from(s.number));
        }
        if let Some(r) = self.post_rule {
            put("post_rule", text(r));
        }
        if let Some(n) = self.events {
            put("events", Value::from(n));
        }
        if let Some(s) = &self.session {
            put("session", text(&s.id));
            if let Some(r) = &s.role {
                put("role", text(r));
            }
            let attrs: Map<String, Value> = s
                .attributes
                .iter()
                .map(|(k, v)| (k.clone(), text(v)))
                .collect();
            put("attributes", Value::Object(attrs));
            put("can_view", s.can_view.iter().map(|c| text(c)).collect());
        }
        if let Some(m) = self.policy_mode {
            put("policy_mode", text(m.as_str()));
        }
        if let Some(c) = self.would_refuse {
            put("would_refuse", text(c.as_str()));
        }
        if let Some(u) = self.observe_unchecked {
            put("observe_unchecked", text(u));
        }
        if let Some(n) = self.socket_attempts {
            put("socket_attempts", Value::from(n));
        }
        if let Some(c) = &self.connections {
            put("connections", c.clone());
        }
        if let Some(p) = &self.protected_created {
            put("protected_created", p.audit.clone());
        }
        if let Some(b) = &self.binding {
            put("binding", text(b.outcome.as_str()));
            if let Some(f) = &b.family {
                put("family", text(f));
            }
            if let Some(r) = &b.run_audit_id {
                put("run_audit_id", text(r));
            }
        }
        m
    }

    /// The fields these facts add to the result object (RUNTIME §5), by key.
    pub fn result_fields(&self) -> Map<String, Value> {
        let mut m = Map::new();
        if let Some(Approval::Pending(id)) = &self.approval {
            m.insert("approval_id".into(), text(id));
        }
        if let Some(r) = &self.resolver {
            m.insert("resolver".into(), resolver(r));
        }
        match (&self.sandbox_after_run, &self.sandbox) {
            (Some(shown), _) => {
                m.insert("sandbox".into(), Value::Object(shown.clone()));
            }
            (None, Some(Sandbox::One(v))) => {
                m.insert("sandbox".into(), v.clone());
            }
            _ => {}
        }
        if let Some(h) = &self.hint {
            m.insert("hint".into(), text(h));
        }
        if let Some(p) = &self.protected_created {
            m.insert("protected_created".into(), p.result.clone());
        }
        if let Some(s) = self.http_status {
            m.insert("http_status".into(), Value::from(s));
        }
        if let Some(s) = self.signal {
            m.insert("signal".into(), Value::from(s.number));
            m.insert("signal_name".into(), text(s.name));
        }
        if let Some(c) = &self.connected {
            if let Some(s) = &c.stored {
                m.insert("binding".into(), json!(s));
            }
            m.insert("binding_audit_id".into(), json!(c.audit_id));
        }
        if !self.setup.is_empty() {
            m.insert("steps".into(), json!(self.setup));
        }
        if let Some(d) = &self.outcome_deferred {
            m.insert(
                "outcome_deferred".into(),
                json!({"code": d.code.as_str(), "message": d.message}),
            );
        }
        m
    }
}

impl CallFacts {
    /// The result's `sandbox` as the run changes it ([`CallFacts::sandbox_after_run`]),
    /// from what preparation found; an object (made empty when there was none).
    pub fn sandbox_after_run(&mut self) -> &mut Map<String, Value> {
        let found = match &self.sandbox {
            Some(Sandbox::One(Value::Object(m))) => Some(m),
            _ => None,
        };
        let found = found.cloned().unwrap_or_default();
        self.sandbox_after_run.get_or_insert(found)
    }
}

fn resolver(r: &ResolverRun) -> Value {
    json!({"verb": r.verb, "audit_id": r.audit_id, "code": r.code})
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn of(m: &BTreeMap<String, Value>) -> Value {
        Value::Object(m.clone().into_iter().collect())
    }

    #[test]
    fn nothing_learned_adds_nothing() {
        let f = CallFacts::default();
        assert!(f.audit_fields().is_empty());
        assert!(f.result_fields().is_empty());
    }

    #[test]
    fn each_fact_goes_where_its_documentation_says() {
        let f = CallFacts {
            face: Some(RecordFace::Sense),
            transport: Some(Transport::Http),
            policy_hash: Some("sha256:00".into()),
            rule: Some("allow"),
            approval: Some(Approval::Pending("apr_1".into())),
            resolver: Some(ResolverRun {
                verb: "rs.lookup".into(),
                audit_id: None,
                code: Some(Code::ResolverFailed),
            }),
            confirm: Some(Via::Elicitation),
            sandbox: Some(Sandbox::One(json!({"filesystem": "enforced"}))),
            approved_by: Some(Via::Elicitation),
            http_status: Some(404),
            signal: Some(Signal {
                number: 25,
                name: "SIGXFSZ (the file-size limit)",
            }),
            post_rule: Some("output_schema"),
            events: Some(3),
            binding: Some(BindingAct {
                outcome: BindingOutcome::Stored,
                family: Some("mail".into()),
                run_audit_id: Some("r1".into()),
            }),
            connected: Some(BindingResult {
                audit_id: None,
                stored: Some(Stored {
                    principal: "alice".into(),
                    family: "mail".into(),
                    expires_at: None,
                }),
            }),
            session: Some(SessionRecord {
                id: "sha256:ab".into(),
                role: Some("agent".into()),
                attributes: [("team".to_owned(), "red".to_owned())].into(),
                can_view: vec!["pii".into()],
            }),
            policy_mode: Some(PolicyMode::Observe),
            would_refuse: Some(Code::Rbac),
            observe_unchecked: Some("resource"),
            socket_attempts: Some(2),
            hint: Some("the network is `deny`".into()),
            sandbox_after_run: Some(
                [("filesystem".to_owned(), json!("enforced, without a /proc"))]
                    .into_iter()
                    .collect(),
            ),
            connections: Some(json!({"total": 0})),
            protected_created: Some(ProtectedCreated {
                audit: json!([".envrc"]),
                result: json!([{"name": ".envrc"}]),
            }),
            outcome_deferred: Some(Deferred {
                code: Code::AuditUnavailable,
                message: "the disk is full".into(),
            }),
            setup: vec![SetupStep {
                code: Code::MissingGrant,
                step: "grant it".into(),
                command: Some("hcp grant a p verb.exec.read".into()),
            }],
        };
        let resolver = json!({"verb": "rs.lookup", "audit_id": null, "code": "resolver_failed"});
        assert_eq!(
            of(&f.audit_fields()),
            json!({
                "face": "sense", "transport": "http", "policy_hash": "sha256:00", "rule": "allow",
                "approval_id": "apr_1", "resolver": resolver, "confirm": "elicitation",
                "sandbox": {"filesystem": "enforced"}, "approved_by": "elicitation",
                "http_status": 404, "signal": 25, "post_rule": "output_schema",
                "events": 3, "binding": "stored", "family": "mail", "run_audit_id": "r1",
                "session": "sha256:ab", "role": "agent", "attributes": {"team": "red"},
                "can_view": ["pii"], "policy_mode": "observe", "would_refuse": "rbac",
                "observe_unchecked": "resource", "socket_attempts": 2,
                "connections": {"total": 0}, "protected_created": [".envrc"],
            })
        );
        assert_eq!(
            Value::Object(f.result_fields()),
            json!({
                "approval_id": "apr_1", "resolver": resolver,
                "sandbox": {"filesystem": "enforced, without a /proc"}, "http_status": 404,
                "signal": 25, "hint": "the network is `deny`",
                "protected_created": [{"name": ".envrc"}],
                "signal_name": "SIGXFSZ (the file-size limit)",
                "binding": {"principal": "alice", "family": "mail", "expires_at": null},
                "binding_audit_id": null,
                "outcome_deferred": {"code": "audit_unavailable", "message": "the disk is full"},
                "steps": [{"code": "missing_grant", "step": "grant it", "command": "hcp grant a p verb.exec.read"}],
            })
        );
    }

    #[test]
    fn an_approval_found_or_taken_and_a_sense_sandbox_are_the_records_alone() {
        let mut by_ref = Map::new();
        by_ref.insert("lines".into(), json!({"filesystem": "enforced"}));
        for approval in [Approval::Found("a".into()), Approval::Taken("a".into())] {
            let f = CallFacts {
                approval: Some(approval),
                sandbox: Some(Sandbox::ByRef(by_ref.clone())),
                ..CallFacts::default()
            };
            assert_eq!(
                of(&f.audit_fields()),
                json!({"approval_id": "a", "sandbox": {"lines": {"filesystem": "enforced"}}})
            );
            assert!(f.result_fields().is_empty());
        }
    }
}
