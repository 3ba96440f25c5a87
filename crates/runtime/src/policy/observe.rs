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

use super::{DryApprovals, DryLimits, RuntimePolicy, escalate};
use crate::record::Facts;
use hcp_model::{ArgValue, Code};
use hcp_store::config::{PolicyMode, RuntimeConfig};
use hcp_store::session::Session;
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

/// Decides `tool` with `values` for `session` under `rp` as step 7 would, with nothing
/// spent, asked for or run: counters read, approvals looked up, no escalation tier asked
/// (one configured would pause the call: `requires_confirmation`), no resolver run.
#[allow(clippy::too_many_arguments)]
pub fn observe(
    state: &dyn State,
    rp: &RuntimePolicy,
    session: &Session,
    tool: &str,
    values: &BTreeMap<String, ArgValue>,
    cli_face: bool,
    now: Timestamp,
    config: &RuntimeConfig,
) -> Observed {
    let principal = super::principal_of(session);
    let call = super::histos_call(rp, tool, values, cli_face);
    let limits = DryLimits {
        state,
        failed: std::sync::atomic::AtomicBool::new(false),
        checked: std::sync::Mutex::new(Vec::new()),
    };
    let tier = escalate::ApprovalTier::new(state, rp.hash(), now);
    let approvals = DryApprovals {
        state,
        policy_hash: rp.hash(),
        now,
        found: std::cell::RefCell::new(None),
        tier: &tier,
    };
    let ctx = histos::Context {
        limits: Some(&limits),
        now_ms: u64::try_from(now.as_millisecond()).unwrap_or(0),
        tier: None,
        confirm: Some(&approvals),
        mode: histos::Mode::Observe,
        consume_limits: false,
    };
    let d = Engine::pre(&rp.policy, Some(&principal), None, &call, &ctx);
    match d.effect {
        Effect::Allow => Observed::Pass,
        Effect::RequireConfirmation => Observed::WouldRefuse(Code::RequiresConfirmation),
        _ => {
            if limits.failed.load(std::sync::atomic::Ordering::Relaxed) {
                return Observed::WouldRefuse(Code::LimitStoreUnavailable);
            }
            let code = crate::refusal::code_of(d.rule.as_str());
            match code {
                Code::NoEscalationTier if config.escalation.is_some() => {
                    Observed::WouldRefuse(Code::RequiresConfirmation)
                }
                Code::NoResourceResolver if config.resolvers.get(tool).is_some() => {
                    Observed::Unchecked("resource")
                }
                c => Observed::WouldRefuse(c),
            }
        }
    }
}

/// Step 7's hook: under `"policy_mode": "observe"` (and a policy and a session to
/// observe), observes the call, notes `policy_mode`, `policy_hash` and `would_refuse` (or
/// `observe_unchecked`) in its record, and answers `None`, so that no later step applies
/// the policy; otherwise answers `policy` as it is.
#[allow(clippy::too_many_arguments)]
pub fn apply(
    policy: Option<RuntimePolicy>,
    config: Option<&RuntimeConfig>,
    state: &dyn State,
    session: Option<&Session>,
    tool: &str,
    values: &BTreeMap<String, ArgValue>,
    cli_face: bool,
    now: Timestamp,
    facts: &mut Facts,
) -> Option<RuntimePolicy> {
    observe_calls(policy, config, session, facts, |rp, s, c| {
        observe(state, rp, s, tool, values, cli_face, now, c)
    })
}

/// The common part of [`apply`] and [`apply_refs`]: `first` observes what the record is
/// of and answers the first thing to note.
fn observe_calls(
    policy: Option<RuntimePolicy>,
    config: Option<&RuntimeConfig>,
    session: Option<&Session>,
    facts: &mut Facts,
    first: impl FnOnce(&RuntimePolicy, &Session, &RuntimeConfig) -> Observed,
) -> Option<RuntimePolicy> {
    let (Some(rp), Some(s), Some(c)) = (policy.as_ref(), session, config) else {
        return policy;
    };
    if c.policy_mode != PolicyMode::Observe {
        return policy;
    }
    let e = &mut facts.audit_extra;
    e.insert("policy_mode".into(), "observe".into());
    e.insert("policy_hash".into(), rp.hash().into());
    match first(rp, s, c) {
        Observed::Pass => {}
        Observed::WouldRefuse(code) => {
            e.insert("would_refuse".into(), code.as_str().into());
        }
        Observed::Unchecked(what) => {
            e.insert("observe_unchecked".into(), what.into());
        }
    }
    None
}

/// [`apply`] for `hcp sense` of `refs` of pack `pack_id` (tools `PACK_ID.REF`, no
/// arguments): the first ref the policy would refuse is the record's `would_refuse`.
#[allow(clippy::too_many_arguments)]
pub fn apply_refs(
    policy: Option<RuntimePolicy>,
    config: Option<&RuntimeConfig>,
    state: &dyn State,
    session: Option<&Session>,
    pack_id: &str,
    refs: &[String],
    now: Timestamp,
    facts: &mut Facts,
) -> Option<RuntimePolicy> {
    let none = BTreeMap::new();
    observe_calls(policy, config, session, facts, |rp, s, c| {
        refs.iter()
            .map(|r| {
                observe(
                    state,
                    rp,
                    s,
                    &format!("{pack_id}.{r}"),
                    &none,
                    false,
                    now,
                    c,
                )
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
