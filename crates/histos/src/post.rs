//! The output post-gate (HISTOS-ENGINE §1e).

use crate::decision::{Decision, Effect, Rule};
use crate::detect::{self, push_unique};
use crate::engine::{Context, Engine, Mode, Principal};
use crate::model::{OnViolation, Policy, Schema, Tool};
use crate::validate;
use crate::value::{Map, Value};

/// Output budget: characters of textual leaves, and the same count of nodes.
pub const OUTPUT_BUDGET: usize = 4_194_304;
/// Replacement for a whole redacted output.
pub const REDACTED_ALL: &str = "[REDACTED]";
/// Replacement for a sensitive field value.
pub const REDACTED_FIELD: &str = "[REDACTED]";

/// A post-gate outcome: the decision and the value the caller may see (`None` when
/// denied).
#[derive(Debug, Clone, PartialEq)]
pub struct PostOutcome {
    /// `allow`, `redact` (`post_redaction` / `output_schema`) or `deny`.
    pub decision: Decision,
    /// The (possibly redacted) output; in observe mode, the original.
    pub value: Option<Value>,
}

fn size(v: &Value, chars: &mut usize, nodes: &mut usize) {
    *nodes += 1;
    match v {
        Value::Str(s) => *chars += s.chars().count(),
        Value::List(l) => l.iter().for_each(|x| size(x, chars, nodes)),
        Value::Map(m) => {
            for (k, x) in m.iter() {
                *chars += k.chars().count();
                size(x, chars, nodes);
            }
        }
        _ => {}
    }
}

fn strict_errors(schema: &Schema, v: &Value) -> bool {
    let ok_map = |m: &Map| {
        validate::validate(
            schema,
            m.len(),
            m.iter().map(|(k, v)| (k.as_str(), v)),
            |k| m.get(k),
        )
        .is_empty()
    };
    match v {
        Value::Map(m) => !ok_map(m),
        Value::List(items) => items.iter().any(|it| match it {
            Value::Map(m) => !ok_map(m),
            _ => true,
        }),
        _ => true,
    }
}

fn project(schema: &Schema, v: &mut Value, dropped: &mut Vec<String>) -> bool {
    match v {
        Value::Map(m) => {
            m.retain(|k, _| {
                let keep = schema.field(k).is_some();
                if !keep {
                    push_unique(dropped, format!("drop:{k}"));
                }
                keep
            });
            true
        }
        Value::List(items) => {
            let mut ok = true;
            for it in items.iter_mut() {
                match it {
                    Value::Map(_) => {
                        project(schema, it, dropped);
                    }
                    Value::Null => {}
                    _ => ok = false,
                }
            }
            ok
        }
        Value::Null => true,
        _ => false,
    }
}

fn canary_pass(policy: &Policy, v: &mut Value, found: &mut Vec<String>) {
    match v {
        Value::Str(s) => policy.canary_matcher.redact(s, found),
        Value::List(l) => l.iter_mut().for_each(|x| canary_pass(policy, x, found)),
        Value::Map(m) => {
            let entries: Vec<(String, Value)> = m
                .iter()
                .map(|(k, x)| {
                    let mut k = k.clone();
                    policy.canary_matcher.redact(&mut k, found);
                    let mut x = x.clone();
                    canary_pass(policy, &mut x, found);
                    (k, x)
                })
                .collect();
            *m = entries.into_iter().collect();
        }
        _ => {}
    }
}

/// All textual leaves (not keys) joined by single spaces (HISTOS-ENGINE §1e step 4).
fn text_join(v: &Value, out: &mut String) {
    match v {
        Value::Str(s) => {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(s);
        }
        Value::List(l) => l.iter().for_each(|x| text_join(x, out)),
        Value::Map(m) => m.iter().for_each(|(_, x)| text_join(x, out)),
        _ => {}
    }
}

fn sensitive_pass(schema: &Schema, can_view: &[String], v: &mut Value, found: &mut Vec<String>) {
    match v {
        Value::Map(m) => {
            for (k, x) in m.iter_mut() {
                if let Some(cls) = schema.field(k).and_then(|f| f.sensitive)
                    && !can_view.iter().any(|c| c == cls.as_str())
                {
                    *x = Value::Str(REDACTED_FIELD.to_string());
                    push_unique(found, format!("field:{k}"));
                    continue;
                }
                sensitive_pass(schema, can_view, x, found);
            }
        }
        Value::List(l) => l
            .iter_mut()
            .for_each(|x| sensitive_pass(schema, can_view, x, found)),
        _ => {}
    }
}

fn secret_pass(v: &mut Value, found: &mut Vec<String>) {
    match v {
        Value::Str(s) => detect::redact_secrets(s, found),
        Value::List(l) => l.iter_mut().for_each(|x| secret_pass(x, found)),
        Value::Map(m) => m.iter_mut().for_each(|(_, x)| secret_pass(x, found)),
        _ => {}
    }
}

fn violation(tool: &Tool, why: &str) -> Option<PostOutcome> {
    match tool.on_output_violation {
        OnViolation::Allow => None,
        OnViolation::Deny => Some(PostOutcome {
            decision: Decision::deny(Rule::OutputSchema, why.to_string()),
            value: None,
        }),
        OnViolation::RedactAll => {
            let mut d = Decision::new(Effect::Redact, Rule::OutputSchema, why.to_string());
            d.redactions.push("output:redacted_all".into());
            Some(PostOutcome {
                decision: d,
                value: Some(Value::Str(REDACTED_ALL.into())),
            })
        }
    }
}

impl Engine {
    /// The post-gate for a tool's returned `output` (HISTOS-ENGINE §1e): output budget,
    /// strict returns, projection, canary redaction, sensitive fields by `can_view`,
    /// secret redaction. A tool without a contract passes unchanged. In observe mode the
    /// decision is computed and recorded but the original value is returned.
    pub fn post(
        policy: &Policy,
        principal: Option<&Principal>,
        tool: &str,
        output: Value,
        ctx: &Context<'_>,
    ) -> PostOutcome {
        let observe = ctx.mode == Mode::Observe;
        let original = if observe { Some(output.clone()) } else { None };
        let mut out = Self::post_inner(policy, principal, tool, output);
        if observe {
            out.decision.enforced = false;
            out.value = original;
        }
        out
    }

    fn post_inner(
        policy: &Policy,
        principal: Option<&Principal>,
        tool: &str,
        mut v: Value,
    ) -> PostOutcome {
        let allow = |v| PostOutcome {
            decision: Decision::new(Effect::Allow, Rule::Allow, "ok"),
            value: Some(v),
        };
        let Some(t) = policy.tool(tool) else {
            return allow(v);
        };
        let can_view: &[String] = principal.map(|p| p.can_view.as_slice()).unwrap_or(&[]);
        let scans_canary = t.scan_output_for_canary && !policy.canary_matcher.is_empty();
        let has_sensitive = t
            .returns
            .as_ref()
            .is_some_and(|r| r.fields.iter().any(|f| f.sensitive.is_some()));
        let reads = (t.returns.is_some() && (t.strict_returns || t.project_output))
            || scans_canary
            || has_sensitive
            || t.redact_secret_output;
        // 1: budget.
        if reads {
            let (mut chars, mut nodes) = (0, 0);
            size(&v, &mut chars, &mut nodes);
            if chars > OUTPUT_BUDGET || nodes > OUTPUT_BUDGET {
                if t.on_output_violation == OnViolation::Deny {
                    return PostOutcome {
                        decision: Decision::deny(Rule::OutputSchema, "output exceeds the budget"),
                        value: None,
                    };
                }
                let mut d = Decision::new(
                    Effect::Redact,
                    Rule::PostRedaction,
                    "output exceeds the budget",
                );
                d.redactions.push("output:redacted_all".into());
                return PostOutcome {
                    decision: d,
                    value: Some(Value::Str(REDACTED_ALL.into())),
                };
            }
        }
        let mut red: Vec<String> = Vec::new();
        if let Some(returns) = &t.returns {
            // 2: strict.
            if t.strict_returns
                && strict_errors(returns, &v)
                && let Some(o) = violation(t, "output does not match the return contract")
            {
                return o;
            }
            // 3: projection.
            if t.project_output
                && !project(returns, &mut v, &mut red)
                && let Some(o) = violation(t, "output cannot be projected onto the return contract")
            {
                return o;
            }
        }
        // 4: canaries.
        if scans_canary {
            canary_pass(policy, &mut v, &mut red);
            let mut joined = String::new();
            text_join(&v, &mut joined);
            if policy.canary_matcher.normalized_hit(&joined) {
                red.push("output:redacted_all".into());
                let mut d = Decision::new(
                    Effect::Redact,
                    Rule::PostRedaction,
                    "a canary token spans output fields",
                );
                d.redactions = red;
                return PostOutcome {
                    decision: d,
                    value: Some(Value::Str(REDACTED_ALL.into())),
                };
            }
        }
        // 5: sensitive fields.
        if let Some(returns) = &t.returns
            && has_sensitive
        {
            sensitive_pass(returns, can_view, &mut v, &mut red);
        }
        // 6: secrets.
        if t.redact_secret_output {
            secret_pass(&mut v, &mut red);
        }
        if red.is_empty() {
            return allow(v);
        }
        let mut d = Decision::new(Effect::Redact, Rule::PostRedaction, "output redacted");
        d.redactions = red;
        PostOutcome {
            decision: d,
            value: Some(v),
        }
    }
}

impl Engine {
    /// Redaction of free text a tool produced besides its value — a failure message, a
    /// diagnostic stream — with the rules the reference applies to exception text
    /// (HISTOS-ENGINE §1e, "Exception redaction"): canaries (verbatim, then normalized; a
    /// normalized hit that survives replaces the whole text) and secrets. Projection,
    /// strict returns and sensitive fields do not apply. A tool without a contract passes
    /// unchanged. Returns the text the caller may see and the redaction labels.
    pub fn post_text(policy: &Policy, tool: &str, text: &str) -> (String, Vec<String>) {
        let Some(t) = policy.tool(tool) else {
            return (text.to_owned(), Vec::new());
        };
        let mut out = text.to_owned();
        let mut red = Vec::new();
        if t.scan_output_for_canary && !policy.canary_matcher.is_empty() {
            policy.canary_matcher.redact(&mut out, &mut red);
            if policy.canary_matcher.normalized_hit(&out) {
                red.push("output:redacted_all".into());
                return (REDACTED_ALL.into(), red);
            }
        }
        if t.redact_secret_output {
            detect::redact_secrets(&mut out, &mut red);
        }
        (out, red)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod post_text_tests {
    use super::*;

    #[test]
    fn text_redaction_covers_canaries_and_secrets() {
        let p = Policy::load_json(
            r#"{"schema_version": "histos.policy/0.1",
                "tools": {"t": {"access": "read", "args": {}}},
                "canaries": ["CANARY-7f3a"]}"#,
        )
        .unwrap();
        let (out, red) = Engine::post_text(&p, "t", "failed: CANARY-7f3a card 4111111111111111");
        assert!(
            !out.contains("CANARY-7f3a") && !out.contains("4111111111111111"),
            "{out}"
        );
        assert!(!red.is_empty());
        let (out, red) = Engine::post_text(&p, "t", "ＣＡＮＡＲＹ-7f3a");
        assert!(!out.contains("７f3a") && !out.contains("-7f3a"), "{out}");
        assert!(!red.is_empty());
        let (out, red) = Engine::post_text(&p, "other", "CANARY-7f3a");
        assert_eq!((out.as_str(), red.len()), ("CANARY-7f3a", 0));
    }
}
