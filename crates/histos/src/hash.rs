//! `content_hash`: the type-tagged canonical JSON of the policy's typed model
//! (HISTOS-ENGINE §3).

use sha2::{Digest, Sha256};

use crate::model::{Constraint, Field, Policy, Schema, Tool};
use crate::value::{Map, Value, canonical_number};

/// `"sha256:" + hex(SHA-256(canonical_json(fingerprint)))` (HISTOS-ENGINE §3).
pub(crate) fn content_hash(p: &Policy) -> String {
    let fp = fingerprint(p);
    let mut out = String::with_capacity(1024);
    encode(&fp, &mut out);
    format!("sha256:{}", hex::encode(Sha256::digest(out.as_bytes())))
}

/// The canonical encoding text of the fingerprint (exposed for diagnostics and tests).
pub fn canonical_text(p: &Policy) -> String {
    let mut out = String::new();
    encode(&fingerprint(p), &mut out);
    out
}

fn s(v: &str) -> Value {
    Value::Str(v.to_string())
}

fn opt_u(v: Option<u64>) -> Value {
    v.map(|n| {
        i64::try_from(n)
            .map(Value::Int)
            .unwrap_or_else(|_| Value::BigInt(n.to_string().into()))
    })
    .unwrap_or(Value::Null)
}

fn opt_v(v: &Option<Value>) -> Value {
    v.clone().unwrap_or(Value::Null)
}

fn field_fp(f: &Field) -> Value {
    let mut m = Map::new();
    m.insert("type", s(f.ty.as_str()));
    m.insert("required", Value::Bool(f.required));
    m.insert(
        "enum",
        f.enum_values
            .clone()
            .map(Value::List)
            .unwrap_or(Value::Null),
    );
    m.insert("max_length", opt_u(f.max_length));
    m.insert("min_length", opt_u(f.min_length));
    m.insert(
        "pattern",
        f.pattern
            .as_ref()
            .map(|p| s(p.source()))
            .unwrap_or(Value::Null),
    );
    m.insert(
        "sensitive",
        f.sensitive.map(|x| s(x.as_str())).unwrap_or(Value::Null),
    );
    m.insert("nullable", Value::Bool(f.nullable));
    m.insert(
        "item_enum",
        f.item_enum.clone().map(Value::List).unwrap_or(Value::Null),
    );
    m.insert(
        "item_type",
        f.item_type.map(|t| s(t.as_str())).unwrap_or(Value::Null),
    );
    m.insert("max_items", opt_u(f.max_items));
    m.insert("min_items", opt_u(f.min_items));
    m.insert("unique_items", Value::Bool(f.unique_items));
    m.insert("minimum", opt_v(&f.minimum));
    m.insert("maximum", opt_v(&f.maximum));
    m.insert("exclusive_minimum", opt_v(&f.exclusive_minimum));
    m.insert("exclusive_maximum", opt_v(&f.exclusive_maximum));
    m.insert("multiple_of", opt_v(&f.multiple_of));
    Value::Map(m)
}

fn schema_fp(sc: &Option<Schema>) -> Value {
    match sc {
        None => Value::Null,
        Some(sc) => {
            let mut m = Map::new();
            m.insert("allow_extra", Value::Bool(sc.allow_extra));
            m.insert(
                "fields",
                Value::Map(
                    sc.fields
                        .iter()
                        .map(|f| (f.name.clone(), field_fp(f)))
                        .collect(),
                ),
            );
            Value::Map(m)
        }
    }
}

fn constraint_fp(c: &Constraint) -> Value {
    let mut m = Map::new();
    m.insert("field", s(&c.field));
    m.insert("op", s(c.op.as_str()));
    m.insert("value", opt_v(&c.value));
    m.insert(
        "principal_attr",
        c.principal_attr.as_deref().map(s).unwrap_or(Value::Null),
    );
    Value::Map(m)
}

fn tool_fp(t: &Tool) -> Value {
    let mut m = Map::new();
    m.insert("args", schema_fp(&t.args));
    m.insert("returns", schema_fp(&t.returns));
    m.insert("access", s(&t.access));
    m.insert("sensitivity", s(&t.sensitivity));
    m.insert("rate_limit", opt_u(t.rate_limit));
    m.insert("budget", opt_u(t.budget));
    m.insert(
        "requires_confirmation",
        Value::Bool(t.requires_confirmation),
    );
    m.insert("confirmation_expires_in", opt_u(t.confirmation_expires_in));
    m.insert("requires_escalation", Value::Bool(t.requires_escalation));
    m.insert(
        "constraints",
        Value::List(t.constraints.iter().map(constraint_fp).collect()),
    );
    m.insert(
        "bindings",
        Value::List(
            t.bindings
                .iter()
                .map(|(f, a)| Value::List(vec![s(f), s(a)]))
                .collect(),
        ),
    );
    m.insert(
        "scan_output_for_canary",
        Value::Bool(t.scan_output_for_canary),
    );
    m.insert("deny_secret_args", Value::Bool(t.deny_secret_args));
    m.insert("redact_secret_output", Value::Bool(t.redact_secret_output));
    m.insert("project_output", Value::Bool(t.project_output));
    m.insert("strict_returns", Value::Bool(t.strict_returns));
    m.insert("on_output_violation", s(t.on_output_violation.as_str()));
    Value::Map(m)
}

fn fingerprint(p: &Policy) -> Value {
    let mut top = Map::new();
    top.insert("schema_version", s(&p.schema_version));
    top.insert(
        "tools",
        Value::Map(
            p.tools
                .iter()
                .map(|t| (t.name.clone(), tool_fp(t)))
                .collect(),
        ),
    );
    top.insert(
        "permissions",
        Value::Map(
            p.roles
                .iter()
                .map(|r| {
                    let mut a = r.allow.clone();
                    a.sort();
                    (
                        r.name.clone(),
                        Value::List(a.into_iter().map(Value::Str).collect()),
                    )
                })
                .collect(),
        ),
    );
    top.insert(
        "role_inherits",
        Value::Map(
            p.roles
                .iter()
                .filter_map(|r| r.inherits.as_ref().map(|i| (r.name.clone(), s(i))))
                .collect(),
        ),
    );
    let mut c = p.canaries.clone();
    c.sort();
    top.insert(
        "canaries",
        Value::List(c.into_iter().map(Value::Str).collect()),
    );
    Value::Map(top)
}

/// Python `json.dumps(ensure_ascii=False)` string escaping, quotes included.
pub(crate) fn json_escape(s: &str, out: &mut String) {
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The type-tagged encoding of HISTOS-ENGINE §3.3 in hash mode (numbers as text).
pub(crate) fn encode(v: &Value, out: &mut String) {
    match v {
        Value::Bool(b) => out.push_str(if *b { "[\"b\",true]" } else { "[\"b\",false]" }),
        Value::Null => out.push_str("[\"n\",null]"),
        Value::Int(_) | Value::BigInt(_) | Value::Float(_) => {
            out.push_str("[\"f\",");
            json_escape(&canonical_number(v).unwrap_or_default(), out);
            out.push(']');
        }
        Value::Str(x) => {
            out.push_str("[\"s\",");
            json_escape(x, out);
            out.push(']');
        }
        Value::Timestamp(x) => {
            out.push_str("[\"s\",");
            json_escape(x, out);
            out.push(']');
        }
        Value::List(l) => {
            out.push_str("[\"l\",[");
            for (i, x) in l.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                encode(x, out);
            }
            out.push_str("]]");
        }
        Value::Map(m) => {
            let mut pairs: Vec<(String, &Value)> = m
                .iter()
                .map(|(k, v)| {
                    let mut ek = String::new();
                    json_escape(k, &mut ek);
                    (ek, v)
                })
                .collect();
            // Sort by the encoded key text `["s",<escaped>]`: common prefix, so compare
            // `<escaped-without-open-quote>"]` by code point (= UTF-8 byte order).
            pairs.sort_by(|a, b| {
                let ka = a.0[1..].bytes().chain(*b"]");
                let kb = b.0[1..].bytes().chain(*b"]");
                ka.cmp(kb)
            });
            out.push_str("[\"d\",[");
            for (i, (ek, v)) in pairs.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str("[[\"s\",");
                out.push_str(ek);
                out.push_str("],");
                encode(v, out);
                out.push(']');
            }
            out.push_str("]]");
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use crate::Policy;

    fn h(json: &str) -> String {
        Policy::load_json(json).unwrap().content_hash().to_string()
    }

    /// The golden hashes of HISTOS-ENGINE §3.4 (computed by the reference engine).
    #[test]
    fn golden_hashes() {
        let defaults = "sha256:d438922f982ffd664af03faf2b85a1a3160251fdf3dbf5b4d9ebb08afdf18c10";
        assert_eq!(
            h(
                r#"{"schema_version": "histos.policy/0.1", "tools": {"t": {"args": {}}}, "roles": {}}"#
            ),
            defaults
        );
        assert_eq!(
            h(
                r#"{"schema_version": "histos.policy/0.1", "tools": {"t": {"access": "read", "sensitivity": "low", "args": {}, "confirmation": {"required": false}, "output": {"project": false, "strict": false, "on_violation": "redact_all", "scan_canary": true, "redact_secrets": true}, "deny_secret_args": true}}, "roles": {}}"#
            ),
            defaults
        );
        assert_eq!(
            h(
                r#"{"schema_version": "histos.policy/0.1", "policy_id": "acme", "version": "42", "created_at": "2026-01-01T00:00:00Z", "tools": {"t": {"args": {}}}, "roles": {}}"#
            ),
            defaults
        );
        assert_eq!(
            h(
                r#"{"schema_version": "histos.policy/0.1", "requires": {"features": ["rbac", "arg_schema"]}, "tools": {"t": {"args": {}}}, "roles": {}}"#
            ),
            defaults
        );
        assert_eq!(
            h(
                r#"{"roles": {"r": {"allow": ["t"]}}, "tools": {"t": {"args": {}}}, "schema_version": "histos.policy/0.1"}"#
            ),
            "sha256:a235a1554f4fddc7d34f034375c413c98d718cd8b707ac6d4d2c46adc107f38a"
        );
        let numeric = "sha256:8be2177a9c8454eb193de418aa01dcbd1c32741608384c99dd5122c0b7ba3c73";
        assert_eq!(
            h(
                r#"{"schema_version": "histos.policy/0.1", "tools": {"make_refund": {"args": {"amount": {"type": "integer", "minimum": 1.0, "maximum": 500.0, "multiple_of": 1.0}}, "rate_limit": 10, "budget": 20}}, "roles": {}}"#
            ),
            numeric
        );
        let yaml = "schema_version: histos.policy/0.1\ntools:\n  make_refund:\n    args:\n      amount: { type: integer, minimum: 1.0, maximum: 500.00, multiple_of: 1 }\n    rate_limit: 10\n    budget: 20\nroles: {}\n";
        assert_eq!(Policy::load_yaml(yaml).unwrap().content_hash(), numeric);
        assert_eq!(
            h(
                r#"{"schema_version": "histos.policy/0.1", "tools": {"t": {"args": {}, "resource": {"owns": {"field": "tenant_id", "principal_attr": "tenant_id"}}}}, "roles": {}}"#
            ),
            "sha256:95166f5f0701f28571aa52b0ffaff0761cbb6751aaf9b1d0c78a07e6f6f6c2b8"
        );
        let agree = "sha256:bfefad4b0dd2bc659b8adccabd9fb6823db6f4ccee051974f413d99a84614fef";
        let y = "schema_version: histos.policy/0.1\nversion: '1'\ntools:\n  t:\n    args:\n      x: {type: integer, maximum: 5}\nroles:\n  r: {allow: [t]}\n";
        assert_eq!(Policy::load_yaml(y).unwrap().content_hash(), agree);
    }

    #[test]
    fn canonical_text_matches_the_documented_prefix() {
        let p = Policy::load_json(r#"{"schema_version": "histos.policy/0.1", "version": "1", "tools": {"t": {"args": {"x": {"type": "integer", "maximum": 5}}}}, "roles": {"r": {"allow": ["t"]}}}"#).unwrap();
        let t = super::canonical_text(&p);
        assert!(t.starts_with(r#"["d",[[["s","canaries"],["l",[]]],[["s","permissions"],["d",[[["s","r"],["l",[["s","t"]]]]]]],[["s","role_inherits"],["d",[]]],[["s","schema_version"],["s","histos.policy/0.1"]],[["s","tools"],"#));
        assert!(t.contains(r#"[["s","maximum"],["f","5"]]"#));
        assert!(t.contains(r#"[["s","required"],["b",true]]"#));
    }

    #[test]
    fn key_order_rule_puts_a_prefix_after_space_and_bang_extensions() {
        let mut m = crate::value::Map::new();
        for k in ["ab", "a\"", "a", "a!", "a "] {
            m.insert(k, crate::Value::Null);
        }
        let mut out = String::new();
        super::encode(&crate::Value::Map(m), &mut out);
        let order: Vec<usize> = ["\"a \"", "\"a!\"", "\"a\"]", "\"a\\\"\"", "\"ab\""]
            .iter()
            .map(|k| out.find(k).unwrap())
            .collect();
        let mut sorted = order.clone();
        sorted.sort();
        assert_eq!(order, sorted, "{out}");
    }
}
