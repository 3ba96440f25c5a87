//! What the steps of [`crate::pipeline`] conclude: the refusals they raise, what a call
//! spends at admission, and the small facts they derive (the gate's principal, the
//! capabilities step 4 checked, the pack's content change).

use crate::Runtime;
use crate::call::Caller;
use crate::pipeline::{SenseAdmitted, SenseRefused};
use crate::policy::{self, PolicyPass, PolicyRefusal, RuntimePolicy, resolve};
use crate::record::Facts;
use crate::redact::Redactor;
use crate::refusal::Refusal;
use hcp_gate::{Face, GrantView};
use hcp_model::facts::Approval;
use hcp_model::principal::Kind;
use hcp_model::{Capability, Code};
use hcp_model::{Principal, SessionFacts};
use hcp_store::audit::Decision as Logged;
use hcp_store::binding::MintError;
use hcp_store::config::{ConfigError, RuntimeConfig};
use hcp_store::pack::InstalledPack;
use hcp_store::session::{Session, SessionError};
use hcp_store::state::Admission;
use hcp_store::state::{AdmitError, ApprovalKey, CounterSlot};
use histos::lock::Lock;
use jiff::Timestamp;
use serde_json::Value;

/// Why the pipeline stopped before answering with a run, and whether to record it.
pub(crate) struct Stop {
    pub refusal: Refusal,
    pub recorded: bool,
}

pub(crate) fn stop(refusal: Refusal) -> Stop {
    Stop {
        refusal,
        recorded: true,
    }
}

/// What a call takes at admission.
#[derive(Debug, Default)]
pub(crate) struct Spend {
    pub counters: Vec<CounterSlot>,
    pub approvals: Vec<ApprovalKey>,
}

impl Spend {
    pub fn take(&mut self, counters: Vec<CounterSlot>, approvals: Vec<(String, ApprovalKey)>) {
        self.counters.extend(counters);
        self.approvals.extend(approvals.into_iter().map(|(_, k)| k));
    }
}

/// What step 7 consults besides the policy and the session: the runtime (the state, and
/// the resolvers' own calls), the caller (a resolver runs as the same principal), the
/// call's timeout (a resolver's too), `config.json` (`resolvers`, `escalation`), the
/// face and the clock.
pub(crate) struct PolicyStep<'a> {
    pub rt: &'a Runtime,
    pub caller: &'a Caller,
    pub timeout: Option<std::time::Duration>,
    pub config: &'a RuntimeConfig,
    pub face: Face,
    pub now: Timestamp,
}

/// `config.json` for step 7 of a session call under a runtime policy: its `resolvers` and
/// `escalation` are what answer the policy, so a file that does not parse refuses here.
pub(crate) fn policy_config(
    config: &Result<RuntimeConfig, ConfigError>,
) -> Result<&RuntimeConfig, Refusal> {
    config.as_ref().map_err(|e| {
        Refusal::new(e.code(), e.to_string())
            .hint("fix `config.json` in the store; every call is refused until it parses")
    })
}

/// Step 7's tool lock for a session's call of a verb: `tool_drift`, `lock_stale`, or the
/// lock's own code when it does not read (`policy::lock`).
pub(crate) fn tool_lock(
    lock: Option<Result<Option<Lock>, PolicyRefusal>>,
    pack: &InstalledPack,
    verb_key: &str,
    facts: &mut Facts,
) -> Result<(), Stop> {
    let lock = match lock {
        None | Some(Ok(None)) => return Ok(()),
        Some(Ok(Some(l))) => l,
        Some(Err(r)) => return Err(stop(policy_refusal(r))),
    };
    policy::lock::check_call(&lock, pack, verb_key).map_err(|r| {
        facts.learned.rule = Some(r.code.as_str());
        stop(policy_refusal(r))
    })
}

/// Step 7 for one tool of a session principal: the dry pre-gate, its rule (and the
/// approvals it would use, and its resolver's call) noted for the record.
pub(crate) fn runtime_policy_pre(
    step: &PolicyStep<'_>,
    rp: &RuntimePolicy,
    principal: &Principal,
    tool: &str,
    values: &std::collections::BTreeMap<String, hcp_model::ArgValue>,
    facts: &mut Facts,
) -> Result<PolicyPass, Stop> {
    facts.learned.policy_hash = Some(rp.hash().to_owned());
    // A resolver's own call resolves nothing (no loop): its tool's constraints, if any,
    // are `no_resource_resolver`.
    let resolver = if resolve::resolving() {
        None
    } else {
        step.config
            .resolvers
            .get(tool)
            .map(|v| resolve::VerbResolver::new(step.rt, step.caller, v, step.timeout))
    };
    let wiring = policy::Wiring {
        resolver: resolver
            .as_ref()
            .map(|r| r as &dyn histos::ResourceResolver),
        escalation: step.config.escalation,
    };
    let call = policy::PolicyCall {
        principal,
        tool,
        values,
        face: step.face,
        now: step.now,
    };
    let out = policy::pre(step.rt.state(), rp, &call, wiring);
    if let Some(run) = resolver.as_ref().and_then(resolve::VerbResolver::run) {
        facts.learned.resolver = Some(run);
    }
    match out {
        Ok(pass) => {
            facts.learned.rule = Some(pass.rule);
            if let Some((id, _)) = pass.approvals.first() {
                facts.learned.approval = Some(Approval::Found(id.clone()));
            }
            Ok(pass)
        }
        Err(r) => {
            facts.learned.rule = Some(r.code.as_str());
            if let Some(id) = &r.approval_id {
                facts.learned.approval = Some(Approval::Pending(id.clone()));
            }
            Err(stop(policy_refusal(r)))
        }
    }
}

/// The capabilities step 4 required of a session principal: the operation's, and
/// `pack.connect` for the connect verb; none for the owner.
pub(crate) fn checked_capabilities(
    pack: &InstalledPack,
    key: &str,
    operation: hcp_model::Operation,
    principal: &Principal,
) -> Vec<Capability> {
    if principal.is_owner() {
        return Vec::new();
    }
    let mut caps = vec![Capability::for_operation(operation)];
    if pack.manifest.connect_verb() == Some(key) {
        caps.push(Capability::PackConnect);
    }
    caps
}

/// The principal of a call made under `session` for `project` (`HCP_PROJECT`): the one
/// place a [`Principal`] is made of a session (the owner's is [`Principal::owner`]).
pub fn principal_of(session: Session, project: Option<String>) -> Principal {
    let facts = SessionFacts {
        token_sha256: session.token_sha256,
        role: session.role,
        projects: session.projects,
        attributes: session.attributes,
        can_view: session.can_view,
        workdir: session.workdir,
    };
    Principal::of_session(session.principal.as_str().to_owned(), facts, project)
}

pub(crate) fn grants_view(
    grants: Result<Vec<hcp_store::grant::HeldCapability>, Refusal>,
) -> Result<GrantView, Refusal> {
    Ok(GrantView {
        held: grants?
            .into_iter()
            .map(|h| (h.capability, h.granted_at))
            .collect(),
    })
}

/// The pack's `content_changed_at`, for the rug-pull guard.
pub(crate) fn content_changed_at(pack: &InstalledPack) -> Result<Option<Timestamp>, Refusal> {
    match pack.record.content_changed_at.as_deref() {
        None => Ok(None),
        Some(t) => t.parse::<Timestamp>().map(Some).map_err(|_| {
            Refusal::new(
                Code::StoreDamaged,
                format!(
                    "install record of `{}` has a bad `content_changed_at`",
                    pack.id
                ),
            )
        }),
    }
}

/// A session that cannot be used: `bad_session`, or the store's failure.
pub(crate) fn session_refusal(e: SessionError) -> Refusal {
    match e {
        SessionError::Bad(b) => Refusal::new(Code::BadSession, format!("bad session: {b}"))
            .hint("the owner starts a new session with `hcp session start`"),
        SessionError::Store(s) => Refusal::store(&s),
        other => Refusal::new(other.code(), other.to_string()),
    }
}

/// A refusal of the runtime policy (RUNTIME §7).
pub(crate) fn policy_refusal(r: PolicyRefusal) -> Refusal {
    Refusal {
        code: r.code,
        message: r.message,
        hint: r.hint,
    }
}

/// The record of a call that stopped (RUNTIME §6): the outcome of an admitted call (its
/// code the stop's, nothing ran or the run failed: a spawn refused after admission, a
/// changed bin), else the refusal's one record when the stop is recorded. Answers the
/// call's `audit_id` (an admitted call's is its intent's, whatever became of the outcome).
pub(crate) fn stop_record(rt: &Runtime, facts: &mut Facts, s: &Stop) -> Option<String> {
    if let Some(o) = facts.outcome(Some(s.refusal.code), None, (0, 0), false) {
        let _ = rt.state().record_outcome(&o);
        return Some(o.intent);
    }
    if !s.recorded {
        return None;
    }
    let entry = facts.entry(Logged::Deny, Some(s.refusal.code), None);
    rt.state().record(&entry).ok().map(|a| a.id)
}

/// The outcome record of an admitted call that ran (RUNTIME §6): `code` when the run did
/// not end on its own (`timeout`, `cancelled`, `output_withheld`), the exit code, the
/// bytes read from each stream and whether either was cut. Answers the call's `audit_id`
/// (its intent's `id`). Written without a sync of its own: the next durable record
/// carries it.
pub(crate) fn record_outcome(
    rt: &Runtime,
    facts: &mut Facts,
    code: Option<Code>,
    run: &hcp_adapter::Outcome,
    duration_ms: u64,
) -> Result<String, Stop> {
    let bytes = (run.stdout_total, run.stderr_total);
    let Some(mut o) = facts.outcome(code, Some(run.exit_code), bytes, run.truncated()) else {
        return Err(Stop {
            refusal: Refusal::new(Code::InternalError, "a run without an admission"),
            recorded: false,
        });
    };
    o.duration_ms = duration_ms;
    match rt.state().record_outcome(&o) {
        Ok(_) => Ok(o.intent),
        Err(e) => Err(Stop {
            // The child ran; say so, and say the audit failed (its intent stands: the
            // call shows as interrupted).
            refusal: Refusal::new(
                e.code(),
                format!("the verb ran, but its outcome record could not be written: {e}"),
            ),
            recorded: false,
        }),
    }
}

/// A call admission refused: nothing was spent. Recorded unless the audit or the state
/// backend is what failed.
pub(crate) fn admit_stop(e: AdmitError, tool: &str, facts: &mut Facts) -> Stop {
    let code = e.code();
    if code.is_runtime_policy() {
        facts.learned.rule = Some(code.as_str());
    }
    let message = match &e {
        AdmitError::Limit { .. } => format!(
            "the runtime policy refuses `{tool}`: another call took the last of its `{code}` since it was checked"
        ),
        AdmitError::ApprovalGone => format!(
            "the approval of this call of `{tool}` was used by another call since it was looked up"
        ),
        AdmitError::Audit(inner) => {
            format!("the audit trail cannot be written, so nothing runs: {inner}")
        }
        AdmitError::State(inner) => format!("{inner}, so nothing runs"),
        AdmitError::Session(b) => format!("bad session: {b}"),
        other => format!("{other}; the call is refused"),
    };
    let hint = match &e {
        AdmitError::Audit(inner) => inner.hint().map(str::to_owned),
        AdmitError::State(inner) => inner.hint().map(str::to_owned),
        _ => None,
    };
    Stop {
        recorded: !matches!(e, AdmitError::Audit(_) | AdmitError::State(_)),
        refusal: Refusal {
            code,
            message,
            hint,
        },
    }
}

/// Binding mint failed (step 8): record `binding.degraded` where the pack declares it (for
/// `hcp sense` to deliver; best effort: the refusal stands either way), and refuse.
pub(crate) fn mint_refusal(
    rt: &Runtime,
    pack: &InstalledPack,
    principal: &str,
    key: &str,
    e: &MintError,
    now: Timestamp,
) -> Refusal {
    let _ = crate::degraded::record(rt.home(), pack, principal, key, e, now);
    let hint = if e.code() == Code::BindingInsecure {
        format!(
            "others may read it: `hcp disconnect {0}` then `hcp connect {0}` writes it 0600 again",
            pack.id
        )
    } else {
        format!("run `hcp connect {}` to establish the binding", pack.id)
    };
    Refusal::new(e.code(), e.to_string()).hint(hint)
}

/// The name and meaning of a signal that ended a child, for the answer.
pub(crate) fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGKILL => {
            "SIGKILL (killed: after the timeout's grace, the CPU-time limit's hard stop, or from outside)"
        }
        libc::SIGTERM => "SIGTERM (the timeout)",
        libc::SIGXCPU => "SIGXCPU (the CPU-time limit)",
        libc::SIGXFSZ => "SIGXFSZ (the file-size limit)",
        libc::SIGSEGV => "SIGSEGV (a crash, or the address-space limit)",
        libc::SIGABRT => "SIGABRT (the program aborted)",
        libc::SIGPIPE => "SIGPIPE",
        _ => "a signal",
    }
}

/// What sense admits.
pub(crate) struct SenseCall {
    pub pack: InstalledPack,
    pub principal: Principal,
    pub refs: Vec<String>,
    pub triggers: Vec<crate::sense::Planned>,
    pub secret: Option<serde_json::Map<String, Value>>,
    pub unbound: Option<Code>,
}

/// Sense's admission (step 9b) and its allow record.
pub(crate) fn admit_sense(
    rt: &Runtime,
    c: SenseCall,
    spend: &Spend,
    mut facts: Facts,
    now: Timestamp,
) -> Result<SenseAdmitted, SenseRefused> {
    let SenseCall {
        pack,
        principal,
        refs,
        triggers,
        secret,
        unbound,
    } = c;
    if let Err(e) = rt.state().audit_ready() {
        return Err(SenseRefused {
            refusal: Refusal::new(
                Code::AuditUnavailable,
                format!("the audit trail cannot be written, so nothing runs: {e}"),
            ),
        });
    }
    let intent = facts.intent();
    let tool = format!("{}.{}", pack.id, refs.join(","));
    let capabilities = match principal.kind() {
        Kind::Owner => Vec::new(),
        Kind::Session => vec![Capability::SenseEnable],
    };
    match rt.state().admit(&Admission {
        session: principal.session_id(),
        pack: &pack.id,
        capabilities: &capabilities,
        intent: &intent,
        counters: &spend.counters,
        approvals: &spend.approvals,
        now,
    }) {
        Ok(a) => {
            if let Some(id) = a.approval_ids.first() {
                facts.learned.approval = Some(Approval::Taken(id.clone()));
            }
            facts.admitted(a.intent.id, intent);
        }
        Err(e) => {
            let s = admit_stop(e, &tool, &mut facts);
            if s.recorded {
                let entry = facts.entry(Logged::Deny, Some(s.refusal.code), None);
                let _ = rt.state().record(&entry);
            }
            return Err(SenseRefused { refusal: s.refusal });
        }
    }
    rt.seam().reach(crate::seam::Point::Admitted);
    Ok(SenseAdmitted {
        audit: crate::sense_audit::SenseAudit::new(facts),
        unbound,
        principal: principal.id.clone(),
        redactor: secret.as_ref().map(Redactor::new).unwrap_or_default(),
        pack,
        refs,
        triggers,
    })
}
