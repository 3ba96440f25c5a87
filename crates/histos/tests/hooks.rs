//! The host's seams of HISTOS-ENGINE §5–§6: a resource resolver whose failures map to
//! `resource_not_found` / `resolver_error`, and an escalation tier that approves, denies,
//! fails or has not answered yet — and the answer when neither is wired.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::borrow::Cow;
use std::cell::{Cell, RefCell};

use histos::engine::Args;
use histos::{
    Call, Context, Effect, Engine, Escalation, EscalationTier, Map, Policy, Principal,
    ResolveError, ResourceResolver, Rule, Value,
};
use serde_json::json;

fn policy(extra: serde_json::Value) -> Policy {
    let mut tool = json!({
        "args": {"id": {"type": "string", "max_length": 8}, "tenant": {"type": "string", "required": false}},
        "bind": {"tenant": "principal.tenant"}
    });
    for (k, v) in extra.as_object().unwrap() {
        tool[k] = v.clone();
    }
    Policy::load_json(&json!({"tools": {"t": tool}, "roles": {"r": {"allow": ["t"]}}}).to_string())
        .unwrap()
}

fn who() -> Principal {
    as_role("r")
}

/// A principal of `role` holding the bound attribute.
fn as_role(role: &str) -> Principal {
    let mut p = Principal::new(role);
    p.attributes.insert("tenant", Value::Str("acme".into()));
    p
}

fn call(id: &str) -> Call {
    let mut args = Map::new();
    args.insert("id", Value::Str(id.into()));
    args.insert("tenant", Value::Str("evil".into()));
    Call {
        tool: "t".into(),
        args,
    }
}

/// A resolver that answers `answer` and records what it was asked.
struct Resolver {
    answer: Result<Option<Map>, ResolveError>,
    calls: Cell<usize>,
    saw_tenant: RefCell<Option<Value>>,
}

impl Resolver {
    fn new(answer: Result<Option<Map>, ResolveError>) -> Self {
        Resolver {
            answer,
            calls: Cell::new(0),
            saw_tenant: RefCell::new(None),
        }
    }
}

impl ResourceResolver for Resolver {
    fn resolve<'r>(
        &'r self,
        tool: &str,
        args: &Args<'_>,
    ) -> Result<Option<Cow<'r, Map>>, ResolveError> {
        assert_eq!(tool, "t");
        self.calls.set(self.calls.get() + 1);
        *self.saw_tenant.borrow_mut() = args.get("tenant").cloned();
        self.answer.clone().map(|o| o.map(Cow::Owned))
    }
}

fn owned() -> serde_json::Value {
    json!({"resource": {"owns": "tenant"}})
}

fn decide(
    p: &Policy,
    r: Option<&dyn ResourceResolver>,
    c: &Call,
    ctx: &Context<'_>,
) -> histos::Decision {
    Engine::pre(p, Some(&who()), r, c, ctx)
}

#[test]
fn resolver_answers_map_to_their_codes() {
    let p = policy(owned());
    let ctx = Context::default();
    let acme: Map = [("tenant".to_string(), Value::Str("acme".into()))]
        .into_iter()
        .collect();
    let r = Resolver::new(Ok(Some(acme)));
    let d = decide(&p, Some(&r), &call("x"), &ctx);
    assert_eq!((d.effect, d.rule), (Effect::Allow, Rule::Allow));
    assert_eq!(
        *r.saw_tenant.borrow(),
        Some(Value::Str("acme".into())),
        "the resolver sees the bound arguments"
    );
    let r = Resolver::new(Err(ResolveError::NotFound));
    assert_eq!(
        decide(&p, Some(&r), &call("x"), &ctx).rule,
        Rule::ResourceNotFound
    );
    let r = Resolver::new(Err(ResolveError::Failed("timed out after 5 s".into())));
    let d = decide(&p, Some(&r), &call("x"), &ctx);
    assert_eq!((d.effect, d.rule), (Effect::Deny, Rule::ResolverError));
    assert!(d.reason.contains("timed out"));
    let r = Resolver::new(Err(ResolveError::Refused {
        code: "missing_grant".into(),
        message: "no grant".into(),
    }));
    let d = decide(&p, Some(&r), &call("x"), &ctx);
    assert_eq!(d.rule, Rule::ResolverError);
    assert_eq!(d.received.as_deref(), Some("missing_grant"));
    // A falsy answer is an empty resource: the ownership field is missing.
    let r = Resolver::new(Ok(None));
    let d = decide(&p, Some(&r), &call("x"), &ctx);
    assert_eq!(
        (d.rule, d.received.as_deref()),
        (Rule::ResourceConstraint, Some("<missing>"))
    );
    // No resolver wired.
    assert_eq!(
        decide(&p, None, &call("x"), &ctx).rule,
        Rule::NoResourceResolver
    );
}

#[test]
fn the_resolver_runs_only_after_the_argument_checks_passed() {
    let p = policy(owned());
    let r = Resolver::new(Err(ResolveError::NotFound));
    let d = decide(&p, Some(&r), &call("far-too-long-id"), &Context::default());
    assert_eq!(d.rule, Rule::ArgSchema);
    let d = Engine::pre(
        &p,
        Some(&as_role("nobody")),
        Some(&r),
        &call("x"),
        &Context::default(),
    );
    assert_eq!(d.rule, Rule::Rbac);
    assert_eq!(r.calls.get(), 0);
}

#[test]
fn a_resolvers_json_output_becomes_the_resource() {
    let m = ResolveError::resource_from_json("{\"tenant\": \"acme\"}\n").unwrap();
    assert_eq!(m.get("tenant"), Some(&Value::Str("acme".into())));
    for falsy in ["null", "false", "0", "\"\"", "[]", "{}"] {
        assert!(
            ResolveError::resource_from_json(falsy).unwrap().is_empty(),
            "{falsy}"
        );
    }
    for bad in ["[1]", "\"x\"", "not json", "{\"a\": 1, \"a\": 2}", ""] {
        assert!(
            matches!(
                ResolveError::resource_from_json(bad),
                Err(ResolveError::Failed(_))
            ),
            "{bad}"
        );
    }
}

/// A tier that answers `answer` and counts its calls.
struct Tier {
    answer: Result<Escalation, String>,
    calls: Cell<usize>,
}

impl EscalationTier for Tier {
    fn judge(
        &self,
        tool: &str,
        args: &Args<'_>,
        principal: &Principal,
    ) -> Result<Escalation, String> {
        assert_eq!((tool, principal.role.as_str()), ("t", "r"));
        assert_eq!(args.get("tenant"), Some(&Value::Str("acme".into())));
        self.calls.set(self.calls.get() + 1);
        self.answer.clone()
    }
}

fn tier(answer: Result<Escalation, String>) -> Tier {
    Tier {
        answer,
        calls: Cell::new(0),
    }
}

#[test]
fn escalation_is_approved_denied_failed_pending_or_not_wired() {
    let p = policy(json!({"escalate": {"required": true}}));
    let run = |t: Option<&Tier>| {
        let ctx = Context {
            tier: t.map(|t| t as &dyn EscalationTier),
            ..Default::default()
        };
        decide(&p, None, &call("x"), &ctx)
    };
    let d = run(None);
    assert_eq!(
        (d.effect, d.rule, d.escalate),
        (Effect::Deny, Rule::NoEscalationTier, true)
    );
    let d = run(Some(&tier(Ok(Escalation::Approved))));
    assert_eq!(
        (d.effect, d.rule, d.escalate),
        (Effect::Allow, Rule::Escalated, true)
    );
    let d = run(Some(&tier(Ok(Escalation::Denied))));
    assert_eq!(
        (d.effect, d.rule, d.escalate),
        (Effect::Deny, Rule::EscalationDenied, true)
    );
    let d = run(Some(&tier(Err("queue unreadable".into()))));
    assert_eq!(
        (d.effect, d.rule, d.escalate),
        (Effect::Deny, Rule::EscalationError, true)
    );
    let d = run(Some(&tier(Ok(Escalation::Pending))));
    assert_eq!(
        (d.effect, d.rule, d.escalate),
        (
            Effect::RequireConfirmation,
            Rule::RequiresConfirmation,
            true
        )
    );
    assert!(!d.is_allow());
}

#[test]
fn machine_checks_win_over_escalation_and_confirmation_follows_it() {
    let p = policy(json!({"escalate": {"required": true}}));
    let t = tier(Ok(Escalation::Approved));
    let ctx = Context {
        tier: Some(&t),
        ..Default::default()
    };
    assert_eq!(
        decide(&p, None, &call("far-too-long-id"), &ctx).rule,
        Rule::ArgSchema
    );
    let d = Engine::pre(&p, Some(&as_role("nobody")), None, &call("x"), &ctx);
    assert_eq!(d.rule, Rule::Rbac);
    assert_eq!(
        t.calls.get(),
        0,
        "the tier is not asked about a call the machine refuses"
    );
    let p = policy(json!({"escalate": {"required": true}, "confirmation": {"required": true}}));
    let d = decide(&p, None, &call("x"), &ctx);
    assert_eq!(
        (d.effect, d.rule, d.escalate),
        (
            Effect::RequireConfirmation,
            Rule::RequiresConfirmation,
            true
        )
    );
    assert_eq!(t.calls.get(), 1);
}
