//! `content_hash`: the type-tagged canonical JSON of the policy's typed model
//! (HISTOS-ENGINE §3).

use sha2::{Digest, Sha256};

use crate::model::{Constraint, Field, Policy, Schema, Tool};
use crate::value::{Value, canonical_number};

/// `"sha256:" + hex(SHA-256(canonical_json(fingerprint)))` (HISTOS-ENGINE §3).
pub(crate) fn content_hash(p: &Policy) -> String {
    let out = canonical_text(p);
    format!("sha256:{}", hex::encode(Sha256::digest(out.as_bytes())))
}

/// The canonical encoding text of the policy fingerprint (HISTOS-ENGINE §3.1, §3.3),
/// streamed from the typed model without building an intermediate tree.
pub fn canonical_text(p: &Policy) -> String {
    // About 600 bytes per field and 1,000 per tool: grown once, not by doubling.
    let fields: usize = p
        .tools
        .iter()
        .map(|t| {
            t.args.as_ref().map_or(0, |s| s.fields.len())
                + t.returns.as_ref().map_or(0, |s| s.fields.len())
        })
        .sum();
    let mut out = String::with_capacity(1024 + 1024 * p.tools.len() + 640 * fields);
    let top = [
        (
            "canaries",
            E::SortedStrs(p.canaries.iter().map(String::as_str).collect()),
        ),
        ("permissions", E::Permissions(&p.roles)),
        ("role_inherits", E::Inherits(&p.roles)),
        ("schema_version", E::Str(&p.schema_version)),
        ("tools", E::Tools(&p.tools)),
    ];
    dict_sorted(&mut out, &top);
    out
}

/// The canonical text `contract_sha256` covers: `{"args", "returns"}` as schema
/// fingerprints (HISTOS-ENGINE §11).
pub(crate) fn contract_text(args: Option<&Schema>, returns: Option<&Schema>) -> String {
    let mut out = String::with_capacity(1024);
    dict_sorted(
        &mut out,
        &[("args", E::Schema(args)), ("returns", E::Schema(returns))],
    );
    out
}

/// One fingerprint value to encode.
enum E<'a> {
    Null,
    Bool(bool),
    Str(&'a str),
    U(Option<u64>),
    OptV(&'a Option<Value>),
    OptStr(Option<&'a str>),
    Schema(Option<&'a Schema>),
    Field(&'a Field),
    Constraint(&'a Constraint),
    Constraints(&'a [Constraint]),
    Bindings(&'a [(String, String)]),
    Tools(&'a [Tool]),
    Tool(&'a Tool),
    Permissions(&'a [crate::model::Role]),
    Inherits(&'a [crate::model::Role]),
    SortedStrs(Vec<&'a str>),
}

#[inline]
fn needs_escape(s: &str) -> bool {
    s.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20)
}

/// The §3.3 pair order: code-point order of `json_escape(key) + "\"]"`.
fn key_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    if !needs_escape(a) && !needs_escape(b) {
        // No escapes: compare the common prefix, then the next byte against the `"`
        // that follows the shorter key.
        let (x, y) = (a.as_bytes(), b.as_bytes());
        let n = x.len().min(y.len());
        return match x[..n].cmp(&y[..n]) {
            std::cmp::Ordering::Equal => match x.len().cmp(&y.len()) {
                std::cmp::Ordering::Equal => std::cmp::Ordering::Equal,
                std::cmp::Ordering::Less => b'"'.cmp(&y[n]),
                std::cmp::Ordering::Greater => x[n].cmp(&b'"'),
            },
            o => o,
        };
    }
    let (mut ea, mut eb) = (String::new(), String::new());
    json_escape(a, &mut ea);
    json_escape(b, &mut eb);
    ea[1..]
        .bytes()
        .chain(*b"]")
        .cmp(eb[1..].bytes().chain(*b"]"))
}

/// A dict whose keys are dynamic: sorted by the §3.3 rule first.
fn dict(out: &mut String, entries: &mut [(&str, E<'_>)]) {
    entries.sort_by(|a, b| key_cmp(a.0, b.0));
    dict_entries(out, entries, true);
}

/// A dict whose fixed keys are already written in §3.3 order.
fn dict_sorted(out: &mut String, entries: &[(&str, E<'_>)]) {
    debug_assert!(entries.windows(2).all(|w| key_cmp(w[0].0, w[1].0).is_lt()));
    debug_assert!(entries.iter().all(|(k, _)| !needs_escape(k)));
    dict_entries(out, entries, false);
}

/// The entries of a dict in the given order; `escape` for keys that may need it (the
/// fingerprint's fixed keys never do).
fn dict_entries(out: &mut String, entries: &[(&str, E<'_>)], escape: bool) {
    out.push_str("[\"d\",[");
    for (i, (k, v)) in entries.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("[[\"s\",");
        if escape {
            json_escape(k, out);
        } else {
            out.push('"');
            out.push_str(k);
            out.push('"');
        }
        out.push_str("],");
        put(v, out);
        out.push(']');
    }
    out.push_str("]]");
}

fn list<'a>(out: &mut String, items: impl Iterator<Item = E<'a>>) {
    out.push_str("[\"l\",[");
    for (i, v) in items.enumerate() {
        if i > 0 {
            out.push(',');
        }
        put(&v, out);
    }
    out.push_str("]]");
}

fn put(e: &E<'_>, out: &mut String) {
    match e {
        E::Null => out.push_str("[\"n\",null]"),
        E::Bool(b) => encode(&Value::Bool(*b), out),
        E::Str(s) => {
            out.push_str("[\"s\",");
            json_escape(s, out);
            out.push(']');
        }
        E::U(None) | E::OptV(None) | E::OptStr(None) | E::Schema(None) => put(&E::Null, out),
        E::U(Some(n)) => {
            out.push_str("[\"f\",\"");
            out.push_str(&n.to_string());
            out.push_str("\"]");
        }
        E::OptV(Some(v)) => encode(v, out),
        E::OptStr(Some(s)) => put(&E::Str(s), out),
        E::Schema(Some(sc)) => {
            let mut fields: Vec<(&str, E<'_>)> = sc
                .fields
                .iter()
                .map(|f| (f.name.as_str(), E::Field(f)))
                .collect();
            out.push_str("[\"d\",[[[\"s\",\"allow_extra\"],");
            put(&E::Bool(sc.allow_extra), out);
            out.push_str("],[[\"s\",\"fields\"],");
            dict(out, &mut fields);
            out.push_str("]]]");
        }
        E::Field(f) => field(f, out),
        E::Constraint(c) => {
            let m = [
                ("field", E::Str(&c.field)),
                ("op", E::Str(c.op.as_str())),
                ("principal_attr", E::OptStr(c.principal_attr.as_deref())),
                ("value", E::OptV(&c.value)),
            ];
            dict_sorted(out, &m);
        }
        E::Constraints(cs) => list(out, cs.iter().map(E::Constraint)),
        E::Bindings(bs) => {
            out.push_str("[\"l\",[");
            for (i, (f, a)) in bs.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str("[\"l\",[");
                put(&E::Str(f), out);
                out.push(',');
                put(&E::Str(a), out);
                out.push_str("]]");
            }
            out.push_str("]]");
        }
        E::Tools(ts) => {
            let mut m: Vec<(&str, E<'_>)> =
                ts.iter().map(|t| (t.name.as_str(), E::Tool(t))).collect();
            dict(out, &mut m);
        }
        E::Tool(t) => {
            let m = [
                ("access", E::Str(&t.access)),
                ("args", E::Schema(t.args.as_ref())),
                ("bindings", E::Bindings(&t.bindings)),
                ("budget", E::U(t.budget)),
                ("confirmation_expires_in", E::U(t.confirmation_expires_in)),
                ("constraints", E::Constraints(&t.constraints)),
                ("deny_secret_args", E::Bool(t.deny_secret_args)),
                (
                    "on_output_violation",
                    E::Str(t.on_output_violation.as_str()),
                ),
                ("project_output", E::Bool(t.project_output)),
                ("rate_limit", E::U(t.rate_limit)),
                ("redact_secret_output", E::Bool(t.redact_secret_output)),
                ("requires_confirmation", E::Bool(t.requires_confirmation)),
                ("requires_escalation", E::Bool(t.requires_escalation)),
                ("returns", E::Schema(t.returns.as_ref())),
                ("scan_output_for_canary", E::Bool(t.scan_output_for_canary)),
                ("sensitivity", E::Str(&t.sensitivity)),
                ("strict_returns", E::Bool(t.strict_returns)),
            ];
            dict_sorted(out, &m);
        }
        E::Permissions(roles) => {
            let mut m: Vec<(&str, E<'_>)> = roles
                .iter()
                .map(|r| {
                    (
                        r.name.as_str(),
                        E::SortedStrs(r.allow.iter().map(String::as_str).collect()),
                    )
                })
                .collect();
            dict(out, &mut m);
        }
        E::Inherits(roles) => {
            let mut m: Vec<(&str, E<'_>)> = roles
                .iter()
                .filter_map(|r| r.inherits.as_deref().map(|i| (r.name.as_str(), E::Str(i))))
                .collect();
            dict(out, &mut m);
        }
        E::SortedStrs(v) => {
            let mut v = v.clone();
            v.sort_unstable();
            list(out, v.into_iter().map(E::Str));
        }
    }
}

/// `[["s","KEY"],` — the opening of a fixed key's pair.
macro_rules! key {
    ($k:literal) => {
        concat!("[[\"s\",\"", $k, "\"],")
    };
}

/// The whole pair of a fixed key whose value is `$v` (an encoded constant).
macro_rules! pair {
    ($k:literal, $v:literal) => {
        concat!("[[\"s\",\"", $k, "\"],", $v, "]")
    };
}

/// A pair whose value is null, or the encoded value.
macro_rules! opt_value {
    ($out:ident, $k:literal, $v:expr) => {
        match $v {
            None => $out.push_str(pair!($k, "[\"n\",null]")),
            Some(v) => {
                $out.push_str(key!($k));
                encode(v, $out);
                $out.push(']');
            }
        }
    };
}

macro_rules! opt_str {
    ($out:ident, $k:literal, $v:expr) => {
        match $v {
            None => $out.push_str(pair!($k, "[\"n\",null]")),
            Some(s) => {
                $out.push_str(key!($k));
                $out.push_str("[\"s\",");
                json_escape(s, $out);
                $out.push_str("]]");
            }
        }
    };
}

macro_rules! opt_count {
    ($out:ident, $k:literal, $v:expr) => {
        match $v {
            None => $out.push_str(pair!($k, "[\"n\",null]")),
            Some(n) => {
                $out.push_str(key!($k));
                $out.push_str("[\"f\",\"");
                push_u64(n, $out);
                $out.push_str("\"]]");
            }
        }
    };
}

macro_rules! flag {
    ($out:ident, $k:literal, $v:expr) => {
        $out.push_str(if $v {
            pair!($k, "[\"b\",true]")
        } else {
            pair!($k, "[\"b\",false]")
        })
    };
}

fn push_u64(mut n: u64, out: &mut String) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    // ASCII digits only.
    out.push_str(std::str::from_utf8(&buf[i..]).unwrap_or("0"));
}

/// One field's 18 keys in the §3.3 order, each pair written from compile-time pieces
/// (the hot part of the canonical text: one field per argument and return value).
fn field(f: &Field, out: &mut String) {
    let list =
        |l: &Option<Vec<Value>>, out: &mut String, k: &'static str, null: &'static str| match l {
            None => out.push_str(null),
            Some(items) => {
                out.push_str(k);
                out.push_str("[\"l\",[");
                for (i, x) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    encode(x, out);
                }
                out.push_str("]]]");
            }
        };
    out.push_str("[\"d\",[");
    list(
        &f.enum_values,
        out,
        key!("enum"),
        pair!("enum", "[\"n\",null]"),
    );
    out.push(',');
    opt_value!(out, "exclusive_maximum", f.exclusive_maximum.as_ref());
    out.push(',');
    opt_value!(out, "exclusive_minimum", f.exclusive_minimum.as_ref());
    out.push(',');
    list(
        &f.item_enum,
        out,
        key!("item_enum"),
        pair!("item_enum", "[\"n\",null]"),
    );
    out.push(',');
    opt_str!(out, "item_type", f.item_type.map(|t| t.as_str()));
    out.push(',');
    opt_count!(out, "max_items", f.max_items);
    out.push(',');
    opt_count!(out, "max_length", f.max_length);
    out.push(',');
    opt_value!(out, "maximum", f.maximum.as_ref());
    out.push(',');
    opt_count!(out, "min_items", f.min_items);
    out.push(',');
    opt_count!(out, "min_length", f.min_length);
    out.push(',');
    opt_value!(out, "minimum", f.minimum.as_ref());
    out.push(',');
    opt_value!(out, "multiple_of", f.multiple_of.as_ref());
    out.push(',');
    flag!(out, "nullable", f.nullable);
    out.push(',');
    opt_str!(out, "pattern", f.pattern.as_ref().map(|p| p.source()));
    out.push(',');
    flag!(out, "required", f.required);
    out.push(',');
    opt_str!(out, "sensitive", f.sensitive.map(|x| x.as_str()));
    out.push(',');
    out.push_str(key!("type"));
    out.push_str("[\"s\",");
    json_escape(f.ty.as_str(), out);
    out.push_str("]],");
    flag!(out, "unique_items", f.unique_items);
    out.push_str("]]");
}

/// Python `json.dumps(ensure_ascii=False)` string escaping, quotes included.
pub(crate) fn json_escape(s: &str, out: &mut String) {
    out.push('"');
    let mut rest = s;
    while let Some(i) = rest
        .bytes()
        .position(|c| c < 0x20 || c == b'"' || c == b'\\')
    {
        // The byte found is ASCII, so `i` and `i + 1` are char boundaries.
        out.push_str(&rest[..i]);
        match rest.as_bytes()[i] {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x08 => out.push_str("\\b"),
            0x0c => out.push_str("\\f"),
            c => out.push_str(&format!("\\u{c:04x}")),
        }
        rest = &rest[i + 1..];
    }
    out.push_str(rest);
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
