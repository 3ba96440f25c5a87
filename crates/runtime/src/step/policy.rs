//! Step 7 of RUNTIME §5: the tool lock (`tools.lock.json`), then the operator's runtime
//! policy (RUNTIME §7) for a session's call, **dry**: counters checked, approvals looked
//! up, a resolver's own call made; nothing spent — what the call would take is noted for
//! admission ([`Spend`]). A policy that does not load stops every call, the owner's too.

use super::Stop;
use super::target::Verb;
use crate::Runtime;
use crate::policy::resolve::{Runner, VerbResolver};
use crate::policy::{self, PolicyCall, PolicyPass, PolicyRefusal, RuntimePolicy, Wiring, observe};
use crate::record::Record;
use crate::refusal::Refusal;
use hcp_gate::Face;
use hcp_model::facts::Approval;
use hcp_model::{ArgValue, Code, Principal};
use hcp_store::config::{ConfigError, RuntimeConfig};
use hcp_store::state::{ApprovalKey, CounterSlot};
use histos::lock::Lock;
use jiff::Timestamp;
use std::collections::BTreeMap;
use std::time::Duration;

/// What a call takes at admission.
#[derive(Debug, Default)]
pub(crate) struct Spend {
    pub counters: Vec<CounterSlot>,
    pub approvals: Vec<ApprovalKey>,
}

impl Spend {
    fn take(&mut self, counters: Vec<CounterSlot>, approvals: Vec<(String, ApprovalKey)>) {
        self.counters.extend(counters);
        self.approvals.extend(approvals.into_iter().map(|(_, k)| k));
    }
}

/// What step 7 consults besides the policy and the principal: the runtime (the state),
/// how a resolver's call is made (as the same caller, within the call's timeout), the face
/// and the clock.
pub(crate) struct PolicyStep<'a> {
    pub rt: &'a Runtime,
    /// How a resolver's own call is made; `None` in a resolver's call, which resolves
    /// nothing itself (no loop): its tool's constraints, if any, are
    /// `no_resource_resolver`.
    pub runner: Option<&'a dyn Runner>,
    pub timeout: Option<Duration>,
    pub face: Face,
    pub now: Timestamp,
}

/// What step 7 reads, as the snapshot read it: the runtime policy, the tool lock (read
/// for a session's verb only) and `config.json`.
pub(crate) struct PolicyReads<'a> {
    pub policy: Result<Option<RuntimePolicy>, PolicyRefusal>,
    pub lock: Option<Result<Option<Lock>, PolicyRefusal>>,
    pub config: &'a Result<RuntimeConfig, ConfigError>,
}

/// What step 7 answered for a verb: its values after `bind`, what admission takes, and
/// the policy for the post-gate.
pub(crate) struct Policed {
    pub values: BTreeMap<String, ArgValue>,
    pub spend: Spend,
    pub policy: Option<RuntimePolicy>,
}

/// Step 7 for a verb: the tool lock, then, for a session, the runtime policy.
///
/// # Errors
/// The policy's or the lock's load code; `tool_drift`, `lock_stale`; `bad_config` when
/// `config.json` (its `resolvers`, `escalation`) does not parse; the rule's code.
pub(crate) fn verb(
    step: &PolicyStep<'_>,
    (verb, principal): (&Verb, &Principal),
    reads: PolicyReads<'_>,
    values: BTreeMap<String, ArgValue>,
    rec: &mut Record,
) -> Result<Policed, Stop> {
    let policy = reads.policy.map_err(refusal)?;
    let lock = match reads.lock {
        None | Some(Ok(None)) => None,
        Some(Ok(Some(l))) => Some(l),
        Some(Err(r)) => return Err(refusal(r).into()),
    };
    // A refusal of setting up names every step the call still needs (`crate::setup`).
    let setup = |rec: &mut Record, policy: Option<&RuntimePolicy>| {
        let subject = crate::setup::Subject {
            pack: &verb.pack,
            key: &verb.key,
            principal,
        };
        rec.facts.setup = crate::setup::steps(&subject, &[], policy, lock.as_ref());
    };
    if let Err(stop) = tool_lock(lock.as_ref(), verb, rec) {
        setup(rec, policy.as_ref());
        return Err(stop);
    }
    let tool = verb.tool();
    let observed = PolicyCall {
        principal,
        tool: &tool,
        values: &values,
        face: step.face,
        now: step.now,
    };
    let config = reads.config.as_ref().ok();
    let policy = observe::apply((policy, config), step.rt.state(), &observed, &mut rec.facts);
    let mut policed = Policed {
        values,
        spend: Spend::default(),
        policy: None,
    };
    if let Some(rp) = policy.as_ref().filter(|_| !principal.is_owner()) {
        let config = config_of(reads.config)?;
        let pass = match pre(step, config, rp, principal, &tool, &policed.values, rec) {
            Ok(p) => p,
            Err(stop) => {
                if matches!(stop.refusal().code, Code::UnknownTool | Code::Rbac) {
                    setup(rec, Some(rp));
                }
                return Err(stop);
            }
        };
        policed.values = pass.values;
        policed.spend.take(pass.counters, pass.approvals);
    }
    policed.policy = policy;
    Ok(policed)
}

/// Step 7 for a sense: for a session, the runtime policy of every ref (tool
/// `PACK_ID.REF`, no arguments).
///
/// # Errors
/// As [`verb`]'s, but for the lock, which a sense does not read.
pub(crate) fn stimuli(
    step: &PolicyStep<'_>,
    (pack_id, refs): (&str, &[String]),
    principal: &Principal,
    reads: PolicyReads<'_>,
    rec: &mut Record,
) -> Result<Spend, Stop> {
    let config = reads.config;
    let policy = reads.policy.map_err(refusal)?;
    let state = step.rt.state();
    let of = (principal, pack_id, refs, step.now);
    let policy = observe::apply_refs((policy, config.as_ref().ok()), state, of, &mut rec.facts);
    let mut spend = Spend::default();
    if let Some(rp) = policy.as_ref().filter(|_| !principal.is_owner()) {
        let config = config_of(config)?;
        let none = BTreeMap::new();
        for r in refs {
            let tool = format!("{pack_id}.{r}");
            let pass = pre(step, config, rp, principal, &tool, &none, rec)?;
            spend.take(pass.counters, pass.approvals);
        }
    }
    Ok(spend)
}

/// `config.json` for step 7 of a session call under a runtime policy: its `resolvers` and
/// `escalation` are what answer the policy, so a file that does not parse refuses here.
fn config_of(config: &Result<RuntimeConfig, ConfigError>) -> Result<&RuntimeConfig, Refusal> {
    config.as_ref().map_err(|e| {
        Refusal::new(e.code(), e.to_string())
            .hint("fix `config.json` in the store; every call is refused until it parses")
    })
}

/// The tool lock for a session's call of a verb: `tool_drift`, `lock_stale`
/// (`policy::lock`). `None`: not read (the owner), or the store has none.
fn tool_lock(lock: Option<&Lock>, verb: &Verb, rec: &mut Record) -> Result<(), Stop> {
    let Some(lock) = lock else {
        return Ok(());
    };
    policy::lock::check_call(lock, &verb.pack, &verb.key).map_err(|r| {
        rec.facts.rule = Some(r.code.as_str());
        refusal(r).into()
    })
}

/// The dry pre-gate for one tool of a session principal, its rule (and the approval it
/// would use or waits for, and its resolver's call) noted for the record.
fn pre(
    step: &PolicyStep<'_>,
    config: &RuntimeConfig,
    rp: &RuntimePolicy,
    principal: &Principal,
    tool: &str,
    values: &BTreeMap<String, ArgValue>,
    rec: &mut Record,
) -> Result<PolicyPass, Stop> {
    rec.facts.policy_hash = Some(rp.hash().to_owned());
    let resolver = match (step.runner, config.resolvers.get(tool)) {
        (Some(runner), Some(v)) => Some(VerbResolver::new(runner, step.rt.home(), v, step.timeout)),
        _ => None,
    };
    let wiring = Wiring {
        resolver: resolver
            .as_ref()
            .map(|r| r as &dyn histos::ResourceResolver),
        escalation: config.escalation,
    };
    let call = PolicyCall {
        principal,
        tool,
        values,
        face: step.face,
        now: step.now,
    };
    let out = policy::pre(step.rt.state(), rp, &call, wiring);
    if let Some(run) = resolver.as_ref().and_then(VerbResolver::run) {
        rec.facts.resolver = Some(run);
    }
    match out {
        Ok(pass) => {
            rec.facts.rule = Some(pass.rule);
            if let Some((id, _)) = pass.approvals.first() {
                rec.facts.approval = Some(Approval::Found(id.clone()));
            }
            Ok(pass)
        }
        Err(r) => {
            rec.facts.rule = Some(r.code.as_str());
            if let Some(id) = &r.approval_id {
                rec.facts.approval = Some(Approval::Pending(id.clone()));
            }
            Err(refusal(r).into())
        }
    }
}

/// A refusal of the runtime policy (RUNTIME §7).
fn refusal(r: PolicyRefusal) -> Refusal {
    Refusal {
        code: r.code,
        message: r.message,
        hint: r.hint,
    }
}
