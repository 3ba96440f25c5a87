//! Every way of loading a policy answers the same, and the same as it always did: several
//! thousand policies made by mutating a valid one (a key removed, renamed or added, a
//! value of another type, a duplicate key, a cut or an edited byte), each loaded from a
//! parsed document, from JSON text and, for byte edits, from YAML text. The outcome of
//! each (its `content_hash`, or the POLICY code, message and location of its refusal)
//! is compared across the paths and with a recorded digest in
//! `tests/data/load-mutations.txt`, so a change of the loader or of either reader that
//! moves any answer, or the order in which a policy's errors are found, fails here.
//!
//! Re-record (only when an answer is meant to change, and say why in the commit):
//! `HISTOS_BLESS=1 cargo test -p histos --test load_mutations`; `HISTOS_MUTANTS_DUMP=FILE`
//! writes every outcome in full.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::path::PathBuf;

use histos::{Map, Policy, PolicyError, Value};
use sha2::{Digest, Sha256};

/// Mutants of the parsed document (1–3 mutations each).
const VALUE_MUTANTS: u64 = 2400;
/// Byte-level mutants of the JSON text.
const JSON_TEXT_MUTANTS: u64 = 700;
/// Byte-level mutants of the YAML text.
const YAML_TEXT_MUTANTS: u64 = 300;

/// xorshift64*: a small deterministic generator (the same mutants on every machine).
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03)
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

fn bench_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("benches")
}

/// The base policy: two tools of the bench policy (every section and field keyword),
/// one that uses the remaining forms (`owns` as a mapping, `where` with list values and
/// both operands, `expires_in`, `$allow_extra`, `item_enum`, `nullable`, exclusive
/// minimum, big and float bounds), its roles and canaries.
fn base() -> Value {
    let text = std::fs::read_to_string(bench_dir().join("policy-12-tools.json")).unwrap();
    let Value::Map(mut top) = histos::json::parse(&text).unwrap() else {
        panic!("not a map")
    };
    let Some(Value::Map(tools)) = top.remove("tools") else {
        panic!("no tools")
    };
    let mut kept: Map = tools
        .iter()
        .filter(|(k, _)| *k == "acme-pack.mail.send" || *k == "acme-pack.crm.update")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let extra = histos::json::parse(
        r#"{"access": "write", "sensitivity": "critical",
            "args": {"$allow_extra": true,
                     "who": {"type": "string", "nullable": true, "required": false},
                     "ids": {"type": "array", "item_type": "integer", "item_enum": [1, 2, 3],
                             "min_items": 1, "minimum": -5, "exclusive_maximum": 1e3},
                     "n": {"type": "integer", "exclusive_minimum": 0, "maximum": 123456789012345678901234567890},
                     "any": {"type": "any"}, "obj": {"type": "object", "required": false},
                     "flag": {"type": "boolean", "enum": [true]}},
            "returns": {"$allow_extra": false, "x": {"type": "number", "minimum": 0.5}},
            "resource": {"owns": {"field": "tenant", "principal_attr": "tenant_id"},
                         "where": [{"field": "tags", "op": "not_in", "value": ["a", "b"]},
                                   {"field": "size", "op": "le", "value": 10.5},
                                   {"field": "owner", "op": "eq", "principal_attr": "identity"}]},
            "confirmation": {"required": true, "expires_in": 300},
            "escalate": {"required": false},
            "deny_secret_args": false,
            "output": {"project": false, "strict": true, "on_violation": "deny",
                       "scan_canary": false, "redact_secrets": false}}"#,
    )
    .unwrap();
    kept.insert("extra_tool", extra);
    top.insert("tools", Value::Map(kept));
    let roles = histos::json::parse(
        r#"{"viewer": {"allow": ["acme-pack.mail.send"]},
            "agent": {"inherits": "viewer", "allow": ["acme-pack.crm.update", "extra_tool"]},
            "admin": {"inherits": "agent"}}"#,
    )
    .unwrap();
    top.insert("roles", roles);
    Value::Map(top)
}

/// One step of a path into a document.
#[derive(Clone)]
enum Step {
    Key(String),
    Index(usize),
}

fn paths(v: &Value, cur: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
    out.push(cur.clone());
    match v {
        Value::Map(m) => {
            for (k, x) in m.iter() {
                cur.push(Step::Key(k.clone()));
                paths(x, cur, out);
                cur.pop();
            }
        }
        Value::List(l) => {
            for (i, x) in l.iter().enumerate() {
                cur.push(Step::Index(i));
                paths(x, cur, out);
                cur.pop();
            }
        }
        _ => {}
    }
}

fn at<'a>(v: &'a mut Value, path: &[Step]) -> &'a mut Value {
    let mut cur = v;
    for s in path {
        cur = match (s, cur) {
            (Step::Key(k), Value::Map(m)) => m
                .iter_mut()
                .find(|(kk, _)| *kk == k)
                .map(|(_, x)| x)
                .unwrap(),
            (Step::Index(i), Value::List(l)) => &mut l[*i],
            _ => panic!("bad path"),
        };
    }
    cur
}

fn json_map(text: &str) -> Value {
    histos::json::parse(text).unwrap()
}

/// Values a mutation may put anywhere.
fn palette() -> Vec<Value> {
    let mut v = vec![
        Value::Null,
        Value::Bool(true),
        Value::Bool(false),
        Value::Int(0),
        Value::Int(1),
        Value::Int(-1),
        Value::Int(7),
        Value::Int(100_000),
        Value::Float(1.0),
        Value::Float(0.5),
        Value::Float(-2.5),
        Value::Float(f64::INFINITY),
        Value::BigInt("123456789012345678901234567890".into()),
        Value::BigInt("-98765432109876543210".into()),
        Value::List(vec![]),
        Value::List(vec![Value::Str("a".into())]),
        Value::List(vec![Value::Int(1), Value::Int(1)]),
        Value::List(vec![Value::Str("a".into()), Value::Str("a".into())]),
        Value::List(vec![Value::Map(Map::new())]),
        Value::List(vec![Value::Float(f64::INFINITY)]),
        Value::Map(Map::new()),
        json_map(r#"{"required": true}"#),
        json_map(r#"{"required": "yes"}"#),
        json_map(r#"{"type": "string"}"#),
        json_map(r#"{"type": "integer", "minimum": 5, "maximum": 1}"#),
        json_map(r#"{"field": "x", "op": "eq", "value": 1}"#),
        json_map(r#"{"field": "x", "op": "eq"}"#),
        json_map(r#"{"field": "x", "principal_attr": "y"}"#),
        json_map(r#"{"allow": ["t"], "inherits": "r"}"#),
        json_map(r#"{"features": ["rbac", "rbac"]}"#),
        json_map(r#"{"json_schema": {}}"#),
    ];
    for s in [
        "",
        "x",
        "read",
        "write",
        "low",
        "critical",
        "string",
        "integer",
        "array",
        "any",
        "number",
        "boolean",
        "object",
        "pii",
        "secret",
        "deny",
        "allow",
        "redact_all",
        "eq",
        "in",
        "not_in",
        "gt",
        "bogus",
        "principal.tenant_id",
        "principal.",
        "principal.a.b",
        "args.x",
        "histos.policy/0.1",
        "histos.policy/0.2",
        "rbac",
        "canary-token-1",
        "short",
        "(a+)+$",
        "(a|aa)*b",
        "(?<=a+)b",
        "(?<=ab)c",
        "(\\w+)\\1",
        "[",
        "^[a-z]{1,8}$",
        "a\"b\\c\nd",
        "é😀\u{7}",
        "acme-pack.mail.send",
        "viewer",
        "1bad name",
    ] {
        v.push(Value::Str(s.into()));
    }
    v
}

/// Keys a mutation may add or rename to.
const KEYS: [&str; 44] = [
    "zzz",
    "maxLength",
    "max_lenght",
    "limits",
    "confirm",
    "description",
    "properties",
    "json_schema",
    "$allow_extra",
    "required",
    "type",
    "items",
    "value",
    "principal_attr",
    "field",
    "op",
    "owns",
    "where",
    "allow",
    "inherits",
    "expires_in",
    "on_violation",
    "tools",
    "roles",
    "requires",
    "features",
    "canaries",
    "policy_id",
    "created_at",
    "version",
    "schema_version",
    "1",
    "",
    "a b",
    "tenant_id",
    "pattern",
    "enum",
    "minimum",
    "bind",
    "resource",
    "output",
    "args",
    "returns",
    "permissions",
];

fn mutate(doc: &mut Value, rng: &mut Rng, pal: &[Value]) {
    let mut all = Vec::new();
    paths(doc, &mut Vec::new(), &mut all);
    let path = rng.pick(&all).clone();
    let target = at(doc, &path);
    match rng.below(8) {
        // Another value in place.
        0..=2 => *target = rng.pick(pal).clone(),
        // A key added, or renamed, or removed (on a mapping).
        3 | 4 => {
            if let Value::Map(m) = target {
                let keys: Vec<String> = m.keys().cloned().collect();
                let k = (*rng.pick(&KEYS)).to_string();
                if keys.is_empty() || rng.below(2) == 0 {
                    // Insert at a random position.
                    let pos = rng.below(keys.len() + 1);
                    let val = rng.pick(pal).clone();
                    let mut out = Map::new();
                    for (i, (kk, vv)) in m.iter().enumerate() {
                        if i == pos {
                            out.insert(k.clone(), val.clone());
                        }
                        out.insert(kk.clone(), vv.clone());
                    }
                    out.insert(k, val);
                    *m = out;
                } else {
                    let victim = rng.pick(&keys).clone();
                    if rng.below(2) == 0 {
                        m.remove(&victim);
                    } else {
                        *m = m
                            .iter()
                            .map(|(kk, vv)| {
                                let kk = if *kk == victim { k.clone() } else { kk.clone() };
                                (kk, vv.clone())
                            })
                            .collect();
                    }
                }
            } else {
                *target = rng.pick(pal).clone();
            }
        }
        // A list element added, removed or repeated.
        5 => {
            if let Value::List(l) = target {
                match rng.below(3) {
                    0 if !l.is_empty() => {
                        let i = rng.below(l.len());
                        l.remove(i);
                    }
                    1 if !l.is_empty() => {
                        let i = rng.below(l.len());
                        let x = l[i].clone();
                        l.push(x);
                    }
                    _ => l.push(rng.pick(pal).clone()),
                }
            } else {
                *target = rng.pick(pal).clone();
            }
        }
        // A string swapped for a meaningful one.
        _ => {
            let strs: Vec<&Value> = pal.iter().filter(|v| v.as_str().is_some()).collect();
            *target = (*rng.pick(&strs)).clone();
        }
    }
}

/// JSON text of a value: pretty (2-space) or compact.
fn to_json(v: &Value, pretty: bool, depth: usize, out: &mut String) {
    let nl = |out: &mut String, d: usize| {
        if pretty {
            out.push('\n');
            for _ in 0..d {
                out.push_str("  ");
            }
        }
    };
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Value::BigInt(s) => out.push_str(s),
        Value::Float(f) if f.is_infinite() => {
            out.push_str(if *f > 0.0 { "1e400" } else { "-1e400" })
        }
        Value::Float(f) => {
            let _ = write!(out, "{f:?}");
        }
        Value::Str(s) => out.push_str(&serde_json::to_string(s).unwrap()),
        Value::Timestamp(s) => out.push_str(&serde_json::to_string(&**s).unwrap()),
        Value::List(l) => {
            out.push('[');
            for (i, x) in l.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                nl(out, depth + 1);
                to_json(x, pretty, depth + 1, out);
            }
            if !l.is_empty() {
                nl(out, depth);
            }
            out.push(']');
        }
        Value::Map(m) => {
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                nl(out, depth + 1);
                out.push_str(&serde_json::to_string(k).unwrap());
                out.push_str(if pretty { ": " } else { ":" });
                to_json(x, pretty, depth + 1, out);
            }
            if !m.is_empty() {
                nl(out, depth);
            }
            out.push('}');
        }
    }
}

fn outcome(r: Result<Policy, PolicyError>) -> String {
    match r {
        Ok(p) => format!("ok {}", p.content_hash()),
        Err(e) => format!(
            "err {} {} @ {}",
            e.code,
            e.message,
            e.location.as_deref().unwrap_or("-")
        ),
    }
}

fn digest(s: &str) -> String {
    hex::encode(&Sha256::digest(s.as_bytes())[..4])
}

/// A char boundary at or after `i`.
fn boundary(t: &str, mut i: usize) -> usize {
    while !t.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// A byte-level edit of `text`: cut, delete, insert, or a line repeated.
fn edit_text(text: &str, rng: &mut Rng) -> String {
    let i = boundary(text, rng.below(text.len()));
    match rng.below(4) {
        0 => text[..i].to_string(),
        1 => {
            let j = boundary(text, (i + 1).min(text.len()));
            format!("{}{}", &text[..i], &text[j..])
        }
        2 => {
            let ins = *rng.pick(&[
                "{", "}", "[", "]", ",", ":", "\"", "\\", " ", "0", "-", "e", ".", "x", "\n", "\t",
                "&a ", "*a", "<<: ", "- ", "#", "'", "!!str ", "~", "\u{0}",
            ]);
            format!("{}{ins}{}", &text[..i], &text[i..])
        }
        _ => {
            // Repeat the line holding byte `i` (a duplicate key, most of the time).
            let start = text[..i].rfind('\n').map_or(0, |p| p + 1);
            let end = text[i..].find('\n').map_or(text.len(), |p| i + p + 1);
            let line = &text[start..end];
            format!("{}{line}{}", &text[..end], &text[end..])
        }
    }
}

fn golden_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/load-mutations.txt")
}

#[test]
fn every_mutant_loads_the_same_on_every_path_as_recorded() {
    let base = base();
    let base_json = {
        let mut s = String::new();
        to_json(&base, true, 0, &mut s);
        s
    };
    assert!(
        Policy::load_json(&base_json).is_ok(),
        "the base policy must load"
    );
    let yaml = std::fs::read_to_string(bench_dir().join("policy-12-tools.yaml")).unwrap();
    let pal = palette();
    let mut lines = Vec::new();
    let mut mismatches = Vec::new();
    let (mut ok, mut refused) = (0usize, 0usize);
    for i in 0..VALUE_MUTANTS {
        let mut rng = Rng::new(i);
        let mut doc = base.clone();
        for _ in 0..=rng.below(3) {
            mutate(&mut doc, &mut rng, &pal);
        }
        let mut text = String::new();
        to_json(&doc, rng.below(4) != 0, 0, &mut text);
        let from_doc = outcome(Policy::from_document(doc));
        let from_text = outcome(Policy::load_json(&text));
        if from_doc != from_text {
            mismatches.push(format!(
                "value mutant {i}: document `{from_doc}` vs JSON text `{from_text}`"
            ));
        }
        if from_text.starts_with("ok ") {
            ok += 1;
        } else {
            refused += 1;
        }
        lines.push((format!("v{i}"), from_text));
    }
    for i in 0..JSON_TEXT_MUTANTS {
        let mut rng = Rng::new(1_000_000 + i);
        let mut text = base_json.clone();
        for _ in 0..=rng.below(2) {
            text = edit_text(&text, &mut rng);
        }
        lines.push((format!("j{i}"), outcome(Policy::load_json(&text))));
    }
    for i in 0..YAML_TEXT_MUTANTS {
        let mut rng = Rng::new(2_000_000 + i);
        let text = edit_text(&yaml, &mut rng);
        lines.push((format!("y{i}"), outcome(Policy::load_yaml(&text))));
    }
    assert!(
        ok > 100 && refused > 1000,
        "the mutants must both load and fail: {ok} loaded, {refused} refused"
    );
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    let now: String = lines
        .iter()
        .map(|(id, o)| format!("{id} {}\n", digest(o)))
        .collect();
    if let Some(dump) = std::env::var_os("HISTOS_MUTANTS_DUMP") {
        let full: String = lines.iter().map(|(id, o)| format!("{id} {o}\n")).collect();
        std::fs::write(dump, full).unwrap();
    }
    if std::env::var_os("HISTOS_BLESS").is_some() {
        std::fs::create_dir_all(golden_path().parent().unwrap()).unwrap();
        std::fs::write(golden_path(), &now).unwrap();
        return;
    }
    let recorded = std::fs::read_to_string(golden_path())
        .expect("tests/data/load-mutations.txt (record with HISTOS_BLESS=1)");
    let differ: Vec<String> = recorded
        .lines()
        .zip(now.lines())
        .zip(&lines)
        .filter(|((a, b), _)| a != b)
        .map(|((a, b), (_, o))| format!("recorded `{a}`, now `{b}`: {o}"))
        .collect();
    assert!(
        differ.is_empty() && recorded.lines().count() == now.lines().count(),
        "{} of {} outcomes moved:\n{}",
        differ.len(),
        lines.len(),
        differ.join("\n")
    );
}
