//! Observe mode (RUNTIME §11): `"policy_mode": "observe"` in `config.json` runs the
//! runtime policy without enforcing it. A call it would refuse runs, and its intent
//! records `would_refuse: CODE`, the first refusal it would have made. The policy has no
//! effect at all: no `bind`, no output control, no counter spent, no approval taken or
//! asked for, no resolver run (a tool whose resource constraints a configured resolver
//! would answer records `observe_unchecked: "resource"` instead of a guess). The steps
//! of RUNTIME §4 before it (session, grants, land, confirm) are never observed only;
//! nor are the tool lock and a policy that does not load, which still refuse.
//!
//! [`apply`] is the one hook step 7 calls.

use super::{DryApprovals, DryLimits, PolicyCall, RuntimePolicy, escalate};
use hcp_gate::Face;
use hcp_model::facts::PolicyMode as Mode;
use hcp_model::{CallFacts, Code, Principal};
use hcp_store::config::{PolicyMode, RuntimeConfig};
use hcp_store::state::State;
use histos::{Effect, Engine};
use jiff::Timestamp;
use std::collections::BTreeMap;

/// What observing one call found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observed {
    /// The policy would let it through.
    Pass,
    /// The first refusal the policy would have made.
    WouldRefuse(Code),
    /// Not decided: it needs what observe mode does not run (a resolver's resource).
    Unchecked(&'static str),
}

/// Decides `call` under `rp` as step 7 would, with nothing spent, asked for or run:
/// counters read, approvals looked up, no escalation tier asked (one configured would
/// pause the call: `requires_confirmation`), no resolver run.
pub fn observe(
    state: &dyn State,
    rp: &RuntimePolicy,
    call: &PolicyCall<'_>,
    config: &RuntimeConfig,
) -> Observed {
    let principal = super::principal_of(call.principal);
    let typed = super::histos_call(rp, call);
    let limits = DryLimits {
        state,
        failed: std::sync::atomic::AtomicBool::new(false),
        why: std::sync::Mutex::new(None),
        checked: std::sync::Mutex::new(Vec::new()),
    };
    let tenant = super::Tenant::of(call.principal);
    let tier = escalate::ApprovalTier::new(state, rp.hash(), call.now, &tenant);
    let approvals = DryApprovals {
        state,
        policy_hash: rp.hash(),
        now: call.now,
        found: std::cell::RefCell::new(None),
        tier: &tier,
        tenant: &tenant,
    };
    let ctx = histos::Context {
        limits: Some(&limits),
        now_ms: u64::try_from(call.now.as_millisecond()).unwrap_or(0),
        tier: None,
        confirm: Some(&approvals),
        mode: histos::Mode::Observe,
        consume_limits: false,
    };
    let d = Engine::pre(&rp.policy, Some(&principal), None, &typed, &ctx);
    match d.effect {
        Effect::Allow => Observed::Pass,
        Effect::RequireConfirmation => Observed::WouldRefuse(Code::RequiresConfirmation),
        _ => {
            if limits.failed.load(std::sync::atomic::Ordering::Relaxed) {
                return Observed::WouldRefuse(Code::LimitStoreUnavailable);
            }
            match Code::try_from(d.rule).unwrap_or(Code::InternalError) {
                Code::NoEscalationTier if config.escalation.is_some() => {
                    Observed::WouldRefuse(Code::RequiresConfirmation)
                }
                Code::NoResourceResolver if config.resolvers.get(call.tool).is_some() => {
                    Observed::Unchecked("resource")
                }
                c => Observed::WouldRefuse(c),
            }
        }
    }
}

/// Step 7's hook: under `"policy_mode": "observe"` (and a policy and a session to
/// observe), observes `call`, notes `policy_mode`, `policy_hash` and `would_refuse` (or
/// `observe_unchecked`) among its facts, and answers `None`, so that no later step
/// applies the policy; otherwise answers `policy` as it is.
pub fn apply(
    (policy, config): (Option<RuntimePolicy>, Option<&RuntimeConfig>),
    state: &dyn State,
    call: &PolicyCall<'_>,
    facts: &mut CallFacts,
) -> Option<RuntimePolicy> {
    observe_calls((policy, config), call.principal, facts, |rp, c| {
        observe(state, rp, call, c)
    })
}

/// The common part of [`apply`] and [`apply_refs`]: `first` observes what the record is
/// of and answers the first thing to note.
fn observe_calls(
    (policy, config): (Option<RuntimePolicy>, Option<&RuntimeConfig>),
    principal: &Principal,
    facts: &mut CallFacts,
    first: impl FnOnce(&RuntimePolicy, &RuntimeConfig) -> Observed,
) -> Option<RuntimePolicy> {
    let (Some(rp), Some(c)) = (policy.as_ref(), config) else {
        return policy;
    };
    if principal.is_owner() || c.policy_mode != PolicyMode::Observe {
        return policy;
    }
    facts.policy_mode = Some(Mode::Observe);
    facts.policy_hash = Some(rp.hash().to_owned());
    match first(rp, c) {
        Observed::Pass => {}
        Observed::WouldRefuse(code) => facts.would_refuse = Some(code),
        Observed::Unchecked(what) => facts.observe_unchecked = Some(what),
    }
    None
}

/// [`apply`] for `hcp sense` of `refs` of pack `pack_id` (tools `PACK_ID.REF`, no
/// arguments) by `principal` at `now`: the first ref the policy would refuse is the
/// record's `would_refuse`.
pub fn apply_refs(
    (policy, config): (Option<RuntimePolicy>, Option<&RuntimeConfig>),
    state: &dyn State,
    (principal, pack_id, refs, now): (&Principal, &str, &[String], Timestamp),
    facts: &mut CallFacts,
) -> Option<RuntimePolicy> {
    let none = BTreeMap::new();
    observe_calls((policy, config), principal, facts, |rp, c| {
        refs.iter()
            .map(|r| {
                let tool = format!("{pack_id}.{r}");
                let call = PolicyCall {
                    principal,
                    tool: &tool,
                    values: &none,
                    face: Face::Json,
                    now,
                };
                observe(state, rp, &call, c)
            })
            .find(|o| *o != Observed::Pass)
            .unwrap_or(Observed::Pass)
    })
}

/// Whether `config.json` of `home` says `"policy_mode": "observe"` (a file that does not
/// parse says nothing: enforced).
pub fn observing(home: &hcp_store::Home) -> bool {
    RuntimeConfig::load(home.root()).is_ok_and(|c| c.policy_mode == PolicyMode::Observe)
}
