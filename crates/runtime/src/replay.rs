//! `hcp policy replay CANDIDATE` (RUNTIME §11): the recorded calls decided again under a
//! candidate runtime policy, from what the trail keeps — the principal, project, session
//! role, attributes and `can_view` (RUNTIME §6) — never from what it does not.
//!
//! A call's arguments are kept only as a keyed digest, so a rule that reads them (the
//! argument contract, canaries, secrets) is decided only where that needs no guess:
//!
//! - a call recorded with no arguments (its digest is the digest of none) is decided in
//!   full, with none;
//! - a call the policy in force passed through its argument checks (allowed, or refused
//!   by a later rule: a limit, an escalation, a confirmation), decided again by a
//!   candidate whose tool checks its arguments exactly as that policy's tool does (the
//!   same `args`, bindings, resource constraints and secret screen, the same canaries),
//!   passes them again;
//! - any other call that gets that far is **undecidable**, and so is a tool with resource
//!   constraints (a resolver's resource is not in the trail). Nothing is guessed.
//!
//! The steps before the arguments (bindings, `unknown_tool`, `rbac`, `no_arg_schema`) need
//! only the principal's facts and are always decided; `rate_limit` and `budget` are
//! counted over the replayed calls in their order; a `confirmation` or an escalation the
//! candidate asks for pauses the call (`requires_confirmation`). Calls the gate refused
//! before the runtime policy (RUNTIME §5 steps 1–6) and the owner's calls (no session,
//! RUNTIME §7) are not the policy's to change: they are counted apart.
//!
//! [`note_session`] is the other half: the session facts each record of a session's call
//! keeps for this.

use hcp_model::facts::SessionRecord;
use hcp_model::{CallFacts, Code, Principal, Step};
use histos::{Context, Effect, Engine, LimitKey, LimitSpec, LimitStore, LimitVerdict, Policy};
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Notes the facts of `principal`'s session that the runtime policy reads among a call's
/// facts (RUNTIME §6: `session`, the session's id; `role`; `attributes`; `can_view`), for
/// replay. Nothing for the owner's calls.
pub fn note_session(facts: &mut CallFacts, principal: &Principal) {
    let Some(s) = &principal.session else {
        return;
    };
    facts.session = Some(SessionRecord {
        id: s.token_sha256.clone(),
        role: s.role.clone(),
        attributes: s.attributes.clone(),
        can_view: s.can_view.clone(),
    });
}

/// What the candidate makes of a call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// It would pass the runtime policy.
    Allow,
    /// It would be refused (or paused: `requires_confirmation`) with this code.
    Refuse {
        /// The code (`rbac`, `unknown_tool`, `rate_limit` …).
        code: Code,
    },
    /// The trail does not keep what the decision needs.
    Undecidable {
        /// What is missing, lowercase.
        reason: String,
    },
}

/// How a recorded call compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// Allowed then (by the runtime policy), refused now.
    NowRefused,
    /// Refused by the runtime policy then, allowed now.
    NowAllowed,
    /// The same answer.
    Unchanged,
    /// Not decidable from the trail.
    Undecidable,
    /// Not the runtime policy's to decide: the owner's call, or refused before it.
    NotGoverned,
}

/// One recorded call and its replay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Replayed {
    /// The call's record id (its `audit_id` for an allowed call).
    pub id: String,
    /// When it was made.
    pub ts: String,
    /// `PACK.VERB`.
    pub tool: String,
    /// Who made it.
    pub principal: String,
    /// What happened then: `allow`, or the refusal's code.
    pub then: String,
    /// The `content_hash` of the policy in force then, if there was one.
    pub policy_hash: Option<String>,
    /// What the candidate makes of it.
    pub now: Verdict,
    /// The comparison.
    pub change: Change,
}

/// What a replay needs besides the records.
pub struct Inputs<'a> {
    /// The candidate.
    pub candidate: &'a Policy,
    /// The runtime policy in force, if any (its argument checks may be carried over).
    pub current: Option<&'a Policy>,
    /// The keyed digest of no arguments (a call recorded with it had none).
    pub empty_args_digest: &'a str,
    /// Whether `config.json` wires an escalation tier (`"escalation": "approvals"`).
    pub escalation_tier: bool,
}

fn str_of<'a>(m: &'a Map<String, Value>, k: &str) -> Option<&'a str> {
    m.get(k).and_then(Value::as_str)
}

/// The Histos principal a record keeps; `None` when it keeps no session facts.
pub fn principal_of_record(m: &Map<String, Value>) -> Option<histos::Principal> {
    str_of(m, "session")?;
    let mut attributes = histos::Map::new();
    if let Some(Value::Object(a)) = m.get("attributes") {
        for (k, v) in a {
            attributes.insert(k.clone(), histos::Value::from(v.clone()));
        }
    }
    let can_view = match m.get("can_view") {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    };
    Some(histos::Principal {
        role: str_of(m, "role").unwrap_or_default().to_owned(),
        identity: str_of(m, "principal").map(str::to_owned),
        attributes,
        can_view,
    })
}

/// The parts of a tool (and its policy) that read a call's arguments: equal parts check
/// the same arguments the same way.
fn argument_checks(p: &Policy, t: &histos::model::Tool) -> String {
    format!(
        "{:?}|{:?}|{:?}|{}|{:?}",
        t.args, t.bindings, t.constraints, t.deny_secret_args, p.canaries
    )
}

/// Codes of rules the engine applies after the argument checks: a call refused with one
/// of them passed its arguments.
fn past_arguments(code: &str) -> bool {
    matches!(
        code,
        "rate_limit"
            | "budget"
            | "limit_store_capacity"
            | "requires_confirmation"
            | "no_escalation_tier"
            | "escalation_denied"
            | "confirm_error"
    ) || Code::parse(code).is_some_and(|c| c.step() > Step::RuntimePolicy)
}

/// Replays `records` (in chain order, any kinds: only calls are decided) under `inp`.
pub fn replay(records: &[Map<String, Value>], inp: &Inputs<'_>) -> Vec<Replayed> {
    let limits = histos::MemoryLimitStore::new(crate::policy::RATE_WINDOW_MS, 1_000_000);
    let mut out = Vec::new();
    for m in records {
        let kind = str_of(m, "kind");
        if !matches!(kind, Some("intent" | "refusal")) {
            continue;
        }
        let (Some(pack), Some(verb)) = (str_of(m, "pack_id"), str_of(m, "verb_key")) else {
            continue;
        };
        let tool = format!("{pack}.{verb}");
        let principal = str_of(m, "principal").unwrap_or("unknown").to_owned();
        let then = match kind {
            Some("intent") => "allow".to_owned(),
            _ => str_of(m, "code").unwrap_or("refused").to_owned(),
        };
        let policy_hash = str_of(m, "policy_hash").map(str::to_owned);
        let mut r = Replayed {
            id: str_of(m, "id").unwrap_or_default().to_owned(),
            ts: str_of(m, "ts").unwrap_or_default().to_owned(),
            tool: tool.clone(),
            principal: principal.clone(),
            then: then.clone(),
            policy_hash: policy_hash.clone(),
            now: Verdict::Allow,
            change: Change::NotGoverned,
        };
        let before_policy =
            then != "allow" && Code::parse(&then).is_some_and(|c| c.step() < Step::RuntimePolicy);
        if principal == "owner" || before_policy {
            r.now = Verdict::Undecidable {
                reason: if principal == "owner" {
                    "the owner's calls answer to the packs' policies alone".into()
                } else {
                    format!("refused before the runtime policy (`{then}`)")
                },
            };
            out.push(r);
            continue;
        }
        r.now = decide(m, &tool, inp, &limits);
        r.change = match (&r.now, then.as_str()) {
            (Verdict::Undecidable { .. }, _) => Change::Undecidable,
            (Verdict::Allow, "allow") => Change::Unchanged,
            (Verdict::Allow, code) if past_policy(code) => Change::Unchanged,
            (Verdict::Allow, _) => Change::NowAllowed,
            (Verdict::Refuse { .. }, "allow") => Change::NowRefused,
            (Verdict::Refuse { .. }, _) => Change::Unchanged,
        };
        out.push(r);
    }
    out
}

/// A refusal after the runtime policy (binding, preparation, admission): the policy let
/// it through then, and a candidate that lets it through changes nothing.
fn past_policy(code: &str) -> bool {
    Code::parse(code).is_some_and(|c| c.step() > Step::RuntimePolicy)
}

fn refuse(code: Code) -> Verdict {
    Verdict::Refuse { code }
}

fn ms_of(m: &Map<String, Value>) -> u64 {
    str_of(m, "ts")
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .and_then(|t| u64::try_from(t.as_millisecond()).ok())
        .unwrap_or(0)
}

fn decide(
    m: &Map<String, Value>,
    tool_name: &str,
    inp: &Inputs<'_>,
    limits: &histos::MemoryLimitStore,
) -> Verdict {
    if str_of(m, "verb_key") == Some("*") {
        return Verdict::Undecidable {
            reason: "a sense of every stimulus is decided per stimulus".into(),
        };
    }
    let Some(principal) = principal_of_record(m) else {
        return Verdict::Undecidable {
            reason: "the record keeps no session facts (written before hcp kept them)".into(),
        };
    };
    let p = inp.candidate;
    let Some(tool) = p.tool(tool_name) else {
        return refuse(Code::UnknownTool);
    };
    for (_, attr) in &tool.bindings {
        if !principal.attributes.contains_key(attr) {
            return refuse(Code::ArgBindingUnresolved);
        }
    }
    if !p.allows(&principal.role, tool_name) {
        return refuse(Code::Rbac);
    }
    if tool.args.is_none() {
        return refuse(Code::NoArgSchema);
    }
    if !tool.constraints.is_empty() {
        return Verdict::Undecidable {
            reason:
                "its resource constraints need a resolver's resource, which the trail does not keep"
                    .into(),
        };
    }
    let now_ms = ms_of(m);
    if str_of(m, "args_digest") == Some(inp.empty_args_digest) {
        // No arguments: the engine decides the whole chain.
        return decide_whole((tool_name, &principal, now_ms), inp, limits);
    }
    decide_past_arguments(m, (tool, tool_name, &principal, now_ms), inp, limits)
}

/// A recorded call without arguments: the engine decides the whole chain, counting limits
/// over the replay.
fn decide_whole(
    (tool_name, principal, now_ms): (&str, &histos::Principal, u64),
    inp: &Inputs<'_>,
    limits: &histos::MemoryLimitStore,
) -> Verdict {
    let ctx = Context {
        limits: Some(limits as &dyn LimitStore),
        now_ms,
        consume_limits: true,
        ..Default::default()
    };
    let call = histos::Call {
        tool: tool_name.to_owned(),
        args: histos::Map::new(),
    };
    let d = Engine::pre(inp.candidate, Some(principal), None, &call, &ctx);
    match d.effect {
        Effect::Allow => Verdict::Allow,
        Effect::RequireConfirmation => refuse(Code::RequiresConfirmation),
        _ if d.rule == histos::Rule::NoEscalationTier && inp.escalation_tier => {
            refuse(Code::RequiresConfirmation)
        }
        _ => refuse(Code::try_from(d.rule).unwrap_or(Code::InternalError)),
    }
}

/// A recorded call with arguments, which the trail keeps only as a keyed digest: its
/// argument checks are carried over only from the policy in force, when the candidate
/// checks them alike; then limits (counted over the replay), escalation, confirmation.
fn decide_past_arguments(
    m: &Map<String, Value>,
    (tool, tool_name, principal, now_ms): (&histos::model::Tool, &str, &histos::Principal, u64),
    inp: &Inputs<'_>,
    limits: &histos::MemoryLimitStore,
) -> Verdict {
    let p = inp.candidate;
    // Arguments unknown: carried over only from the policy in force, checking them alike.
    let then = str_of(m, "code");
    let passed_then = str_of(m, "kind") == Some("intent") || then.is_some_and(past_arguments);
    let same = inp.current.is_some_and(|cur| {
        str_of(m, "policy_hash") == Some(cur.content_hash())
            && cur
                .tool(tool_name)
                .is_some_and(|t0| argument_checks(cur, t0) == argument_checks(p, tool))
    });
    if !(passed_then && same) {
        return Verdict::Undecidable {
            reason: if passed_then {
                "its argument checks differ from those it passed (or it was decided under another policy), and the trail keeps only a keyed digest of its arguments".into()
            } else {
                "it needs the call's arguments, and the trail keeps only their keyed digest".into()
            },
        };
    }
    // Past the arguments: limits (counted over the replay), escalation, confirmation.
    let spec = LimitSpec {
        rate_limit: tool.rate_limit,
        budget: tool.budget,
    };
    if spec.rate_limit.is_some() || spec.budget.is_some() {
        let key = LimitKey {
            identity: principal.identity_or_anonymous(),
            tool: &tool.name,
        };
        match limits.check(key, spec, now_ms) {
            LimitVerdict::Ok => {}
            LimitVerdict::Budget => return refuse(Code::Budget),
            LimitVerdict::RateLimit => return refuse(Code::RateLimit),
            LimitVerdict::Capacity => return refuse(Code::LimitStoreCapacity),
        }
    }
    if tool.requires_escalation {
        return refuse(if inp.escalation_tier {
            Code::RequiresConfirmation
        } else {
            Code::NoEscalationTier
        });
    }
    if tool.requires_confirmation {
        return refuse(Code::RequiresConfirmation);
    }
    if spec.rate_limit.is_some() || spec.budget.is_some() {
        let key = LimitKey {
            identity: principal.identity_or_anonymous(),
            tool: &tool.name,
        };
        let _ = limits.try_consume(key, spec, now_ms);
    }
    Verdict::Allow
}

/// Calls of one kind of change, grouped by tool, principal and code or reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Group {
    /// `PACK.VERB`.
    pub tool: String,
    /// The principal.
    pub principal: String,
    /// The candidate's code (a refusal), the code of then (now allowed), or the reason
    /// (undecidable).
    pub why: String,
    /// How many calls.
    pub count: usize,
    /// Their record ids, oldest first (at most 20).
    pub ids: Vec<String>,
}

/// `replayed` grouped by change, then tool, principal and why.
pub fn groups(replayed: &[Replayed]) -> BTreeMap<Change, Vec<Group>> {
    let mut by: BTreeMap<(Change, String, String, String), Vec<String>> = BTreeMap::new();
    for r in replayed {
        let why = match (&r.now, r.change) {
            (Verdict::Undecidable { reason }, _) => reason.clone(),
            (_, Change::NowAllowed) => format!("was `{}`", r.then),
            (Verdict::Refuse { code }, _) => code.as_str().to_owned(),
            (Verdict::Allow, _) => "allow".into(),
        };
        by.entry((r.change, r.tool.clone(), r.principal.clone(), why))
            .or_default()
            .push(r.id.clone());
    }
    let mut out: BTreeMap<Change, Vec<Group>> = BTreeMap::new();
    for ((change, tool, principal, why), ids) in by {
        out.entry(change).or_default().push(Group {
            tool,
            principal,
            why,
            count: ids.len(),
            ids: ids.into_iter().take(20).collect(),
        });
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn policy(text: &str) -> Policy {
        Policy::load_yaml(text).unwrap()
    }

    fn rec(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    fn call(
        kind: &str,
        code: Option<&str>,
        role: &str,
        digest: &str,
        hash: &str,
    ) -> Map<String, Value> {
        rec(json!({
            "kind": kind, "id": format!("id-{role}-{kind}"), "ts": "2026-01-01T00:00:00.000Z",
            "principal": "agent", "pack_id": "p", "verb_key": "v", "code": code,
            "session": "sha256:s", "role": role, "attributes": {}, "can_view": [],
            "args_digest": digest, "policy_hash": hash,
        }))
    }

    const CURRENT: &str = "schema_version: histos.policy/0.1
tools:
  p.v:
    args:
      x: {type: string}
roles:
  agent:
    allow: [p.v]
";

    #[test]
    fn rbac_is_decided_from_the_facts_and_arguments_are_never_guessed() {
        let current = policy(CURRENT);
        let narrowed = policy(&CURRENT.replace("allow: [p.v]", "allow: []"));
        let other_args =
            policy(&CURRENT.replace("x: {type: string}", "x: {type: string, max_length: 1}"));
        let h = current.content_hash().to_owned();
        let records = [
            call("intent", None, "agent", "hmac-sha256:aa", &h),
            call("refusal", Some("rbac"), "guest", "hmac-sha256:aa", &h),
        ];
        let inp = |c| Inputs {
            candidate: c,
            current: Some(&current),
            empty_args_digest: "hmac-sha256:empty",
            escalation_tier: false,
        };
        let r = replay(&records, &inp(&narrowed));
        assert_eq!(
            (r[0].change, r[0].now.clone()),
            (Change::NowRefused, Verdict::Refuse { code: Code::Rbac })
        );
        assert_eq!(r[1].change, Change::Unchanged);
        // Same argument checks: the allowed call passes again.
        let r = replay(&records, &inp(&current));
        assert_eq!(r[0].change, Change::Unchanged);
        // Other argument checks: undecidable, never guessed.
        let r = replay(&records, &inp(&other_args));
        assert_eq!(r[0].change, Change::Undecidable);
        // Allowing the guest: it never passed the argument checks, so undecidable too.
        let open = policy(&CURRENT.replace(
            "  agent:\n    allow: [p.v]",
            "  agent:\n    allow: [p.v]\n  guest:\n    allow: [p.v]",
        ));
        let r = replay(&records, &inp(&open));
        assert_eq!(r[1].change, Change::Undecidable);
        // With no arguments recorded, the whole chain is decided: `x` is required...
        let mut empty = records[1].clone();
        empty.insert("args_digest".into(), json!("hmac-sha256:empty"));
        let r = replay(std::slice::from_ref(&empty), &inp(&open));
        assert_eq!(
            (r[0].change, r[0].now.clone()),
            (
                Change::Unchanged,
                Verdict::Refuse {
                    code: Code::ArgSchema
                }
            )
        );
        // ... and once optional, the guest's call would pass.
        let optional = policy(&CURRENT.replace(
            "x: {type: string}\nroles:\n  agent:\n    allow: [p.v]",
            "x: {type: string, required: false}\nroles:\n  agent:\n    allow: [p.v]\n  guest:\n    allow: [p.v]",
        ));
        let r = replay(&[empty], &inp(&optional));
        assert_eq!(
            (r[0].change, r[0].now.clone()),
            (Change::NowAllowed, Verdict::Allow)
        );
    }

    #[test]
    fn limits_count_over_the_replay_and_calls_before_the_policy_are_apart() {
        let current = policy(CURRENT);
        let limited = policy(&CURRENT.replace(
            "      x: {type: string}\n",
            "      x: {type: string}\n    budget: 2\n",
        ));
        let h = current.content_hash().to_owned();
        let mut records: Vec<_> = (0..3)
            .map(|i| {
                let mut c = call("intent", None, "agent", "hmac-sha256:aa", &h);
                c.insert("id".into(), json!(format!("c{i}")));
                c
            })
            .collect();
        records.push(call("refusal", Some("missing_grant"), "agent", "x", &h));
        let inp = Inputs {
            candidate: &limited,
            current: Some(&current),
            empty_args_digest: "hmac-sha256:empty",
            escalation_tier: false,
        };
        let r = replay(&records, &inp);
        let changes: Vec<Change> = r.iter().map(|x| x.change).collect();
        assert_eq!(
            changes,
            [
                Change::Unchanged,
                Change::Unchanged,
                Change::NowRefused,
                Change::NotGoverned
            ]
        );
        assert_eq!(r[2].now, Verdict::Refuse { code: Code::Budget });
    }
}
