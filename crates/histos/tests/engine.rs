//! Behaviour of the loader, the pre-gate and the post-gate on the edge cases the
//! reference pins down (HISTOS-ENGINE §2–§8).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::borrow::Cow;
use std::time::Instant;

use histos::engine::Args;
use histos::{
    Call, Confirmer, Context, Effect, Engine, EscalationTier, Map, MemoryLimitStore, Mode, Policy,
    PolicyCode, Principal, ResolveError, ResourceResolver, Rule, Value,
};
use pretty_assertions::assert_eq;

fn json(v: serde_json::Value) -> Value {
    Value::from(v)
}

fn load(v: serde_json::Value) -> Result<Policy, histos::PolicyError> {
    Policy::load_json(&v.to_string())
}

fn code(v: serde_json::Value) -> PolicyCode {
    load(v).expect_err("must be refused").code
}

fn args(v: serde_json::Value) -> Map {
    match json(v) {
        Value::Map(m) => m,
        _ => panic!("args must be an object"),
    }
}

fn call(tool: &str, a: serde_json::Value) -> Call {
    Call {
        tool: tool.into(),
        args: args(a),
    }
}

fn send_policy(extra: serde_json::Value) -> Policy {
    let mut p = serde_json::json!({
        "schema_version": "histos.policy/0.1",
        "tools": {"send": {"args": {"body": {"type": "string"}, "to": {"type": "string", "required": false},
                                     "n": {"type": "integer", "required": false}}}},
        "roles": {"r": {"allow": ["send"]}},
        "canaries": ["CANARY-7f3a-DO-NOT-LEAK"]
    });
    if let (Some(t), serde_json::Value::Object(e)) = (p["tools"]["send"].as_object_mut(), extra) {
        t.extend(e);
    }
    load(p).unwrap()
}

fn pre(p: &Policy, c: &Call) -> histos::Decision {
    let store = MemoryLimitStore::default();
    let ctx = Context {
        limits: Some(&store),
        ..Default::default()
    };
    Engine::pre(p, Some(&Principal::new("r")), None, c, &ctx)
}

// ---------------------------------------------------------------- loading

#[test]
fn unknown_keys_are_refused_at_every_level() {
    let base = |tool: serde_json::Value| serde_json::json!({"schema_version": "histos.policy/0.1", "tools": {"t": tool}});
    for tool in [
        serde_json::json!({"args": {}, "bogus": 1}),
        serde_json::json!({"args": {"x": {"type": "string", "maxlen": 3}}}),
        serde_json::json!({"args": {}, "output": {"project": true, "mask": true}}),
        serde_json::json!({"args": {}, "confirmation": {"required": true, "who": "x"}}),
        serde_json::json!({"args": {}, "escalate": {"required": true, "tier": "x"}}),
        serde_json::json!({"args": {}, "resource": {"where": [{"field": "a", "op": "eq", "value": 1, "x": 2}]}}),
    ] {
        assert_eq!(code(base(tool.clone())), PolicyCode::UnknownKey, "{tool}");
    }
    assert_eq!(
        code(serde_json::json!({"tools": {}, "requires": {"features": [], "engines": []}})),
        PolicyCode::UnknownKey
    );
}

#[test]
fn duplicate_keys_are_refused_in_json_and_yaml() {
    let e = Policy::load_json(r#"{"tools": {"t": {"args": {}}, "t": {"args": {}}}}"#).unwrap_err();
    assert_eq!(e.code, PolicyCode::DuplicateKey);
    let e = Policy::load_yaml("tools:\n  t: {args: {}}\n  t: {args: {}}\n").unwrap_err();
    assert_eq!(e.code, PolicyCode::DuplicateKey);
}

#[test]
fn only_true_and_false_are_booleans_in_yaml() {
    for word in ["yes", "no", "on", "off", "y", "n"] {
        let y = format!("tools:\n  t:\n    args: {{}}\n    deny_secret_args: {word}\n");
        assert_eq!(
            Policy::load_yaml(&y).unwrap_err().code,
            PolicyCode::InvalidField,
            "{word}"
        );
    }
    let y = "tools:\n  t:\n    args: {}\n    deny_secret_args: False\n";
    assert!(
        !Policy::load_yaml(y)
            .unwrap()
            .tool("t")
            .unwrap()
            .deny_secret_args
    );
}

#[test]
fn yaml_1_1_integers_hash_like_their_values() {
    let a = Policy::load_yaml(
        "tools:\n  t:\n    args:\n      x: {type: integer, maximum: 0x1f, minimum: 012}\n",
    )
    .unwrap();
    let b = load(serde_json::json!({"tools": {"t": {"args": {"x": {"type": "integer", "maximum": 31, "minimum": 10}}}}}))
        .unwrap();
    assert_eq!(a.content_hash(), b.content_hash());
    // `1e3` is a string in YAML 1.1, so it is not a number bound.
    let e = Policy::load_yaml("tools:\n  t:\n    args:\n      x: {type: integer, maximum: 1e3}\n")
        .unwrap_err();
    assert_eq!(e.code, PolicyCode::InvalidField);
    // A YAML date is not a string.
    let e = Policy::load_yaml("created_at: 2026-01-01\ntools: {}\n").unwrap_err();
    assert_eq!(e.code, PolicyCode::PolicyInvalid);
}

#[test]
fn version_features_and_limits() {
    assert_eq!(
        code(serde_json::json!({"schema_version": "histos.policy/0.2"})),
        PolicyCode::UnsupportedVersion
    );
    assert_eq!(
        code(serde_json::json!({"requires": {"features": ["taint_labels"]}})),
        PolicyCode::UnsupportedFeature
    );
    assert!(load(serde_json::json!({"requires": {"features": histos::FEATURES}})).is_ok());
    assert_eq!(
        code(serde_json::json!({"tools": {"t": {"args": {}, "rate_limit": 10.0}}})),
        PolicyCode::InvalidContract
    );
    assert_eq!(
        code(serde_json::json!({"tools": {"t": {"args": {}, "budget": 0}}})),
        PolicyCode::InvalidContract
    );
    assert_eq!(
        code(serde_json::json!({"tools": {"t": {"args": {}, "rate_limit": true}}})),
        PolicyCode::InvalidContract
    );
}

#[test]
fn bindings_are_principal_attributes_only() {
    for b in [
        serde_json::json!("args.y"),
        serde_json::json!("principal.a ?? args.b"),
        serde_json::json!(5),
    ] {
        let p = serde_json::json!({"tools": {"t": {"args": {}, "bind": {"x": b}}}});
        assert_eq!(code(p), PolicyCode::InvalidBinding, "{b}");
    }
}

#[test]
fn tool_names_with_dots_work_and_spaces_are_refused() {
    assert_eq!(
        code(serde_json::json!({"tools": {"send mail": {"args": {}}}})),
        PolicyCode::PolicyInvalid
    );
    let p = load(serde_json::json!({
        "tools": {"acme-mail.send_v2": {"args": {"to": {"type": "string"}}}},
        "roles": {"agent": {"allow": ["acme-mail.send_v2"]}}
    }))
    .unwrap();
    let d = Engine::pre(
        &p,
        Some(&Principal::new("agent")),
        None,
        &call("acme-mail.send_v2", serde_json::json!({"to": "x"})),
        &Context::default(),
    );
    assert_eq!((d.effect, d.rule), (Effect::Allow, Rule::Allow));
}

#[test]
fn a_role_that_inherits_itself_loads_and_terminates() {
    let p = load(serde_json::json!({
        "tools": {"a": {"args": {}}, "b": {"args": {}}},
        "roles": {"loop": {"inherits": "loop", "allow": ["a"]},
                  "x": {"inherits": "y", "allow": ["a"]}, "y": {"inherits": "x", "allow": ["b"]}}
    }))
    .unwrap();
    assert!(p.allows("loop", "a"));
    assert!(!p.allows("loop", "b"));
    assert!(p.allows("x", "b"));
    assert!(p.allows("y", "a"));
}

#[test]
fn a_yaml_alias_bomb_is_refused_as_too_large() {
    let mut y = String::from("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for i in 1..12 {
        let p = i - 1;
        y.push_str(&format!(
            "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
        ));
    }
    y.push_str("tools: {}\n");
    let t = Instant::now();
    assert_eq!(
        Policy::load_yaml(&y).unwrap_err().code,
        PolicyCode::PolicyTooLarge
    );
    assert!(t.elapsed().as_secs() < 2);
}

#[test]
fn a_50_mb_policy_is_refused_by_size_without_reading_it() {
    let dir = std::env::temp_dir().join(format!("histos-big-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("policy.json");
    std::fs::File::create(&path)
        .unwrap()
        .set_len(50 * 1024 * 1024)
        .unwrap();
    let t = Instant::now();
    let e = Policy::load_path(&path).unwrap_err();
    assert_eq!(e.code, PolicyCode::PolicyTooLarge);
    assert!(t.elapsed().as_millis() < 500, "took {:?}", t.elapsed());
    let big = format!(
        "{{\"tools\": {{}}, \"version\": \"{}\"}}",
        "x".repeat(histos::MAX_POLICY_BYTES)
    );
    assert_eq!(
        Policy::load_json(&big).unwrap_err().code,
        PolicyCode::PolicyTooLarge
    );
    assert_eq!(
        Policy::load_path(&dir.join("missing.yaml"))
            .unwrap_err()
            .code,
        PolicyCode::NotFound
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_12_tool_bench_policy_hashes_alike_in_json_and_yaml() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("benches");
    let j = Policy::load_path(&dir.join("policy-12-tools.json")).unwrap();
    let y = Policy::load_path(&dir.join("policy-12-tools.yaml")).unwrap();
    assert_eq!(j.tools.len(), 12);
    assert_eq!(j.content_hash(), y.content_hash());
}

// ---------------------------------------------------------------- pre-gate

#[test]
fn canaries_hidden_by_full_width_letters_or_zero_width_characters_are_denied() {
    let p = send_policy(serde_json::json!({}));
    for body in [
        "here it is: CANARY-7f3a-DO-NOT-LEAK",
        "ＣＡＮＡＲＹ７ｆ３ａＤＯＮＯＴＬＥＡＫ",
        "CAN\u{200b}ARY-7f3a-DO-\u{2060}NOT-LEAK",
        "c a n a r y 7f3a do not leak",
    ] {
        let d = pre(&p, &call("send", serde_json::json!({"body": body})));
        assert_eq!(d.rule, Rule::CanaryExfil, "{body:?}");
    }
    // Split across two arguments: joined by a space, a separator the normaliser drops.
    let d = pre(
        &p,
        &call(
            "send",
            serde_json::json!({"body": "CANARY-7f3a", "to": "DO-NOT-LEAK"}),
        ),
    );
    assert_eq!(d.rule, Rule::CanaryExfil);
    let d = pre(
        &p,
        &call("send", serde_json::json!({"body": "nothing here"})),
    );
    assert_eq!(d.rule, Rule::Allow);
}

#[test]
fn card_numbers_are_found_across_arguments_and_in_integers() {
    let p = send_policy(serde_json::json!({}));
    let d = pre(
        &p,
        &call(
            "send",
            serde_json::json!({"body": "4111 1111", "to": "1111 1111"}),
        ),
    );
    assert_eq!(
        (d.rule, d.received.as_deref()),
        (Rule::SecretDetected, Some("pan"))
    );
    // The reference renders non-string leaves with str(): an integer card number is a PAN.
    let d = pre(
        &p,
        &call(
            "send",
            serde_json::json!({"body": "x", "n": 4111111111111111_i64}),
        ),
    );
    assert_eq!(d.rule, Rule::SecretDetected);
    // Luhn-invalid: allowed.
    let d = pre(
        &p,
        &call("send", serde_json::json!({"body": "4111111111111112"})),
    );
    assert_eq!(d.rule, Rule::Allow);
    let d = pre(
        &p,
        &call(
            "send",
            serde_json::json!({"body": "iban GB82WEST12345698765432"}),
        ),
    );
    assert_eq!(d.received.as_deref(), Some("iban"));
    let d = pre(
        &p,
        &call(
            "send",
            serde_json::json!({"body": "eyJhbGciOiJIUzI1NiJ9.eyJzIjoxfQ.c2ln"}),
        ),
    );
    assert_eq!(d.received.as_deref(), Some("jwt"));
    // deny_secret_args: false turns the denial off for that tool.
    let p = send_policy(serde_json::json!({"deny_secret_args": false}));
    let d = pre(
        &p,
        &call("send", serde_json::json!({"body": "4111111111111111"})),
    );
    assert_eq!(d.rule, Rule::Allow);
}

#[test]
fn argument_contract_is_closed_and_typed() {
    let p = send_policy(serde_json::json!({}));
    let d = pre(
        &p,
        &call("send", serde_json::json!({"body": "x", "cc": "y"})),
    );
    assert_eq!((d.rule, d.field.as_deref()), (Rule::ArgSchema, Some("cc")));
    let d = pre(&p, &call("send", serde_json::json!({"body": 5})));
    assert_eq!(
        (d.rule, d.field.as_deref()),
        (Rule::ArgSchema, Some("body"))
    );
    let d = pre(
        &p,
        &call("send", serde_json::json!({"body": "x", "n": 7.0})),
    );
    assert_eq!((d.rule, d.field.as_deref()), (Rule::ArgSchema, Some("n")));
    let d = pre(&p, &call("send", serde_json::json!({})));
    assert_eq!(d.reason, "body: required but missing");
    let p = load(serde_json::json!({
        "tools": {"t": {"args": {
            "tags": {"type": "array", "item_type": "string", "max_length": 3, "unique_items": true},
            "amount": {"type": "number", "multiple_of": 0.01, "exclusive_maximum": 10},
            "code": {"type": "string", "pattern": "^[A-Z]{3}$", "required": false}}}},
        "roles": {"r": {"allow": ["t"]}}
    }))
    .unwrap();
    let d = pre(
        &p,
        &call(
            "t",
            serde_json::json!({"tags": ["ab", "abcd"], "amount": 1.25}),
        ),
    );
    assert_eq!(d.field.as_deref(), Some("tags[1]"));
    let d = pre(
        &p,
        &call(
            "t",
            serde_json::json!({"tags": ["ab", "ab"], "amount": 1.25}),
        ),
    );
    assert_eq!(d.field.as_deref(), Some("tags"));
    let d = pre(
        &p,
        &call("t", serde_json::json!({"tags": [], "amount": 10})),
    );
    assert_eq!(d.field.as_deref(), Some("amount"));
    let d = pre(
        &p,
        &call("t", serde_json::json!({"tags": [], "amount": 1.005})),
    );
    assert_eq!(d.field.as_deref(), Some("amount"));
    let d = pre(
        &p,
        &call(
            "t",
            serde_json::json!({"tags": [], "amount": 9.99, "code": "ABCD"}),
        ),
    );
    assert_eq!(d.field.as_deref(), Some("code"));
    let d = pre(
        &p,
        &call(
            "t",
            serde_json::json!({"tags": ["a"], "amount": 9.99, "code": "ABC"}),
        ),
    );
    assert_eq!(d.rule, Rule::Allow);
}

#[test]
fn limits_are_checked_read_only_and_consumed_on_allow() {
    let p = send_policy(serde_json::json!({"rate_limit": 2, "budget": 3}));
    let store = MemoryLimitStore::new(60_000, 100);
    let mut ctx = Context {
        limits: Some(&store),
        consume_limits: true,
        ..Default::default()
    };
    let who = Principal {
        identity: Some("u1".into()),
        ..Principal::new("r")
    };
    let c = call("send", serde_json::json!({"body": "x"}));
    // A denied call consumes nothing.
    let bad = call("send", serde_json::json!({"body": 1}));
    for _ in 0..5 {
        assert_eq!(
            Engine::pre(&p, Some(&who), None, &bad, &ctx).rule,
            Rule::ArgSchema
        );
    }
    assert_eq!(
        Engine::pre(&p, Some(&who), None, &c, &ctx).rule,
        Rule::Allow
    );
    assert_eq!(
        Engine::pre(&p, Some(&who), None, &c, &ctx).rule,
        Rule::Allow
    );
    assert_eq!(
        Engine::pre(&p, Some(&who), None, &c, &ctx).rule,
        Rule::RateLimit
    );
    // Another identity has its own counters.
    let other = Principal {
        identity: Some("u2".into()),
        ..Principal::new("r")
    };
    assert_eq!(
        Engine::pre(&p, Some(&other), None, &c, &ctx).rule,
        Rule::Allow
    );
    ctx.now_ms = 120_000;
    assert_eq!(
        Engine::pre(&p, Some(&who), None, &c, &ctx).rule,
        Rule::Allow
    );
    assert_eq!(
        Engine::pre(&p, Some(&who), None, &c, &ctx).rule,
        Rule::Budget
    );
    // No store wired for a tool with limits: fail closed.
    let d = Engine::pre(&p, Some(&who), None, &c, &Context::default());
    assert_eq!(d.effect, Effect::Deny);
}

struct Tier(Result<bool, String>);
impl EscalationTier for Tier {
    fn judge(&self, _: &str, _: &Args<'_>, _: &Principal) -> Result<histos::Escalation, String> {
        self.0.clone().map(histos::Escalation::from)
    }
}

struct Yes;
impl Confirmer for Yes {
    fn confirm(&self, _: &str, _: &Args<'_>, _: &Principal) -> Result<bool, String> {
        Ok(true)
    }
}

#[test]
fn escalation_and_confirmation() {
    let p = send_policy(serde_json::json!({"escalate": {"required": true}}));
    let c = call("send", serde_json::json!({"body": "x"}));
    let who = Principal::new("r");
    let run = |ctx: &Context<'_>| Engine::pre(&p, Some(&who), None, &c, ctx);
    let d = run(&Context::default());
    assert_eq!(
        (d.effect, d.rule, d.escalate),
        (Effect::Deny, Rule::NoEscalationTier, true)
    );
    let t = Tier(Ok(true));
    let d = run(&Context {
        tier: Some(&t),
        ..Default::default()
    });
    assert_eq!(
        (d.effect, d.rule, d.escalate),
        (Effect::Allow, Rule::Escalated, true)
    );
    let t = Tier(Ok(false));
    assert_eq!(
        run(&Context {
            tier: Some(&t),
            ..Default::default()
        })
        .rule,
        Rule::EscalationDenied
    );
    let t = Tier(Err("boom".into()));
    assert_eq!(
        run(&Context {
            tier: Some(&t),
            ..Default::default()
        })
        .rule,
        Rule::EscalationError
    );

    let p = send_policy(serde_json::json!({"confirmation": {"required": true, "expires_in": 300}}));
    let d = Engine::pre(&p, Some(&who), None, &c, &Context::default());
    assert_eq!(
        (d.effect, d.rule),
        (Effect::RequireConfirmation, Rule::RequiresConfirmation)
    );
    assert_eq!(
        d.expected.as_deref(),
        Some("an approval granted within 300s")
    );
    let d = Engine::pre(
        &p,
        Some(&who),
        None,
        &c,
        &Context {
            confirm: Some(&Yes),
            ..Default::default()
        },
    );
    assert_eq!((d.effect, d.rule), (Effect::Allow, Rule::Confirmed));
}

struct Res(Result<Option<Map>, ResolveError>);
impl ResourceResolver for Res {
    fn resolve<'r>(&'r self, _: &str, _: &Args<'_>) -> Result<Option<Cow<'r, Map>>, ResolveError> {
        self.0.clone().map(|o| o.map(Cow::Owned))
    }
}

#[test]
fn resource_conditions_use_python_operator_semantics() {
    let p = load(serde_json::json!({
        "tools": {"t": {"args": {"id": {"type": "string"}}, "resource": {
            "owns": {"field": "tenant", "principal_attr": "tenant_id"},
            "where": [{"field": "org", "op": "in", "principal_attr": "org"},
                      {"field": "amount", "op": "le", "value": 100}]}}},
        "roles": {"r": {"allow": ["t"]}}
    }))
    .unwrap();
    let who = Principal {
        attributes: args(serde_json::json!({"tenant_id": "acme", "org": "acme-corp"})),
        ..Principal::new("r")
    };
    let c = call("t", serde_json::json!({"id": "1"}));
    let run = |r: Res| Engine::pre(&p, Some(&who), Some(&r), &c, &Context::default());
    let ok = args(serde_json::json!({"tenant": "acme", "org": "acme", "amount": 5}));
    assert_eq!(run(Res(Ok(Some(ok)))).rule, Rule::Allow);
    let d = run(Res(Ok(Some(args(
        serde_json::json!({"tenant": "evil", "org": "acme", "amount": 5}),
    )))));
    assert_eq!(
        (
            d.rule,
            d.field.as_deref(),
            d.expected.as_deref(),
            d.received.as_deref()
        ),
        (
            Rule::ResourceConstraint,
            Some("tenant"),
            Some("principal.tenant_id"),
            Some("resource.tenant")
        )
    );
    let d = run(Res(Ok(Some(args(
        serde_json::json!({"tenant": "acme", "org": "acme", "amount": "5"}),
    )))));
    assert_eq!(
        (d.rule, d.field.as_deref()),
        (Rule::ResourceConstraint, Some("amount"))
    );
    assert_eq!(run(Res(Ok(None))).expected.as_deref(), Some("<present>"));
    assert_eq!(
        run(Res(Err(ResolveError::NotFound))).rule,
        Rule::ResourceNotFound
    );
    assert_eq!(
        run(Res(Err(ResolveError::Failed("db".into())))).rule,
        Rule::ResolverError
    );
}

#[test]
fn observe_mode_decides_the_same_but_does_not_enforce() {
    let p = send_policy(serde_json::json!({}));
    let c = call("send", serde_json::json!({"body": "x"}));
    let ctx = Context {
        mode: Mode::Observe,
        ..Default::default()
    };
    let d = Engine::pre(&p, Some(&Principal::new("nobody")), None, &c, &ctx);
    assert_eq!(
        (d.effect, d.rule, d.enforced),
        (Effect::Deny, Rule::Rbac, false)
    );
    assert_eq!(
        Engine::pre(&p, None, None, &c, &ctx).rule,
        Rule::NoPrincipal
    );
}

#[test]
fn binding_overwrites_and_reports_rebound_arguments() {
    let p = load(serde_json::json!({
        "tools": {"t": {"args": {"tenant_id": {"type": "string"}}, "bind": {"tenant_id": "principal.tenant_id"}}},
        "roles": {"r": {"allow": ["t"]}}
    }))
    .unwrap();
    let who = Principal {
        attributes: args(serde_json::json!({"tenant_id": "acme"})),
        ..Principal::new("r")
    };
    let d = Engine::pre(
        &p,
        Some(&who),
        None,
        &call("t", serde_json::json!({"tenant_id": "evil"})),
        &Context::default(),
    );
    assert_eq!(d.rule, Rule::Allow);
    assert_eq!(
        d.bound_args,
        vec![("tenant_id".to_string(), Value::Str("acme".into()))]
    );
    assert_eq!(d.rebound_args, vec!["tenant_id".to_string()]);
    // A bound argument the caller did not send is supplied.
    let d = Engine::pre(
        &p,
        Some(&who),
        None,
        &call("t", serde_json::json!({})),
        &Context::default(),
    );
    assert_eq!((d.rule, d.rebound_args.len()), (Rule::Allow, 1));
}

// ---------------------------------------------------------------- post-gate

fn out_policy() -> Policy {
    load(serde_json::json!({
        "tools": {"t": {"args": {}, "returns": {
            "id": {"type": "string"}, "email": {"type": "string", "sensitive": "pii"},
            "note": {"type": "string", "required": false}},
            "output": {"project": true}}},
        "roles": {"r": {"allow": ["t"]}},
        "canaries": ["CANARY-7f3a-DO-NOT-LEAK"]
    }))
    .unwrap()
}

#[test]
fn post_gate_projects_redacts_sensitive_fields_canaries_and_secrets() {
    let p = out_policy();
    let who = Principal::new("r");
    let out = json(
        serde_json::json!({"id": "1", "email": "a@b.c", "note": "card 4111111111111111 CANARY-7f3a-DO-NOT-LEAK", "internal": "x"}),
    );
    let o = Engine::post(&p, Some(&who), "t", out.clone(), &Context::default());
    assert_eq!(o.decision.rule, Rule::PostRedaction);
    assert_eq!(
        o.decision.redactions,
        vec![
            "drop:internal",
            "canary:CANARY-7f3a-DO-NOT-LEAK",
            "field:email",
            "secret:pan"
        ]
    );
    assert_eq!(
        o.value,
        Some(json(
            serde_json::json!({"id": "1", "email": "[REDACTED]", "note": "card [REDACTED-SECRET] [REDACTED-CANARY]"})
        ))
    );
    // can_view pii keeps the email.
    let viewer = Principal {
        can_view: vec!["pii".into()],
        ..Principal::new("r")
    };
    let o = Engine::post(
        &p,
        Some(&viewer),
        "t",
        json(serde_json::json!({"id": "1", "email": "a@b.c"})),
        &Context::default(),
    );
    assert_eq!(
        (o.decision.effect, o.value.unwrap()),
        (
            Effect::Allow,
            json(serde_json::json!({"id": "1", "email": "a@b.c"}))
        )
    );
    // A canary split across fields drops the whole value.
    let o = Engine::post(
        &p,
        Some(&viewer),
        "t",
        json(serde_json::json!({"id": "CANARY-7f3a", "note": "DO-NOT-LEAK"})),
        &Context::default(),
    );
    assert_eq!(o.value, Some(Value::Str("[REDACTED]".into())));
    assert!(
        o.decision
            .redactions
            .contains(&"output:redacted_all".to_string())
    );
    // Observe mode records the decision and returns the original.
    let ctx = Context {
        mode: Mode::Observe,
        ..Default::default()
    };
    let o = Engine::post(&p, Some(&who), "t", out.clone(), &ctx);
    assert_eq!(
        (o.decision.effect, o.decision.enforced, o.value),
        (Effect::Redact, false, Some(out))
    );
}

#[test]
fn strict_returns_follow_on_violation() {
    let mk = |on: &str| {
        load(
            serde_json::json!({"tools": {"t": {"args": {}, "returns": {"id": {"type": "integer"}},
            "output": {"strict": true, "on_violation": on}}}}),
        )
        .unwrap()
    };
    let bad = json(serde_json::json!({"id": "x"}));
    let o = Engine::post(&mk("deny"), None, "t", bad.clone(), &Context::default());
    assert_eq!(
        (o.decision.effect, o.decision.rule, o.value),
        (Effect::Deny, Rule::OutputSchema, None)
    );
    let o = Engine::post(
        &mk("redact_all"),
        None,
        "t",
        bad.clone(),
        &Context::default(),
    );
    assert_eq!(
        (o.decision.effect, o.decision.rule),
        (Effect::Redact, Rule::OutputSchema)
    );
    let o = Engine::post(&mk("allow"), None, "t", bad.clone(), &Context::default());
    assert_eq!((o.decision.effect, o.value), (Effect::Allow, Some(bad)));
    let o = Engine::post(
        &mk("deny"),
        None,
        "t",
        json(serde_json::json!([{"id": 1}, {"id": 2}])),
        &Context::default(),
    );
    assert_eq!(o.decision.effect, Effect::Allow);
}

#[test]
fn policies_and_stores_can_be_shared_across_threads() {
    fn shared<T: Send + Sync>() {}
    shared::<Policy>();
    shared::<MemoryLimitStore>();
    shared::<histos::Decision>();
}

#[test]
fn unique_items_is_linear_for_scalars_and_bounded_for_containers() {
    let p = load(serde_json::json!({
        "tools": {"t": {"args": {"xs": {"type": "array", "unique_items": true}}}},
        "roles": {"r": {"allow": ["t"]}}
    }))
    .unwrap();
    // Strings, so the joined blob (under the 1 MiB input budget) holds no card-like runs.
    let big: Vec<String> = (0..100_000).map(|i| format!("k{i}")).collect();
    let t = Instant::now();
    assert_eq!(
        pre(&p, &call("t", serde_json::json!({"xs": big}))).rule,
        Rule::Allow
    );
    assert!(t.elapsed().as_secs() < 5);
    // 1, 1.0 and true are one value to Python.
    for xs in [
        serde_json::json!([1, 1.0]),
        serde_json::json!([true, 1]),
        serde_json::json!([[1], [1.0]]),
    ] {
        assert_eq!(
            pre(&p, &call("t", serde_json::json!({"xs": xs}))).rule,
            Rule::ArgSchema
        );
    }
    let many: Vec<serde_json::Value> = (0..600).map(|i| serde_json::json!([i])).collect();
    assert_eq!(
        pre(&p, &call("t", serde_json::json!({"xs": many}))).rule,
        Rule::ArgSchema
    );
}
