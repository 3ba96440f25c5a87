//! `hcp policy check|hash|decide` through the built binary (RUNTIME §7): the Histos
//! conformance corpus (invalid-policy, canonicalization, decisions) and the bad inputs of
//! the runtime-policy issue (an alias bomb, a 50 MB policy, `rate_limit: 10.0`, a binding
//! from an argument, a role that inherits itself, a tool name with a space, disguised
//! canaries, card numbers split or typed as integers).
//!
//! The corpus is the one vendored at `tests/histos-conformance/conformance/` (or
//! `HISTOS_CONFORMANCE_DIR`), found and checked against its pins by `corpus::locate`; it
//! is required (a missing or modified corpus fails, it never skips).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::World;
use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

/// A generous bound for "refused quickly": far above what the refusals take, far below
/// what expanding an alias bomb or parsing 50 MB would.
const QUICK: Duration = Duration::from_secs(10);

#[path = "../../../tests/histos-conformance/corpus.rs"]
mod corpus;

/// The conformance corpus directory, its pins checked.
fn corpus() -> PathBuf {
    corpus::locate().unwrap_or_else(|e| panic!("{e}"))
}

/// The fixtures of one corpus directory, sorted by name: (stem, parsed JSON).
fn fixtures(sub: &str) -> Vec<(String, Value)> {
    let dir = corpus().join(sub);
    let mut out: Vec<(String, Value)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read `{}`: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
            (stem, serde_json::from_str(&text).unwrap())
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The case names the manifest lists for one corpus, to prove every one of them ran.
fn manifest_cases(corpus_name: &str) -> Vec<String> {
    let m: Value =
        serde_json::from_str(&std::fs::read_to_string(corpus().join("manifest.json")).unwrap())
            .unwrap();
    let mut files: Vec<String> = Vec::new();
    collect_files(&m, corpus_name, &mut files);
    files.sort();
    files
}

/// Finds every `"file": "<corpus>/<name>.json"` entry anywhere in the manifest.
fn collect_files(v: &Value, corpus_name: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(o) => {
            if let Some(Value::String(f)) = o.get("file")
                && let Some(name) = f
                    .strip_prefix(&format!("{corpus_name}/"))
                    .and_then(|n| n.strip_suffix(".json"))
                && !out.iter().any(|x| x == name)
            {
                out.push(name.to_owned());
            }
            for x in o.values() {
                collect_files(x, corpus_name, out);
            }
        }
        Value::Array(a) => {
            for x in a {
                collect_files(x, corpus_name, out);
            }
        }
        _ => {}
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Writes `body` as `name` in the world's temporary root and returns the path.
fn put(w: &World, name: &str, body: &str) -> PathBuf {
    let p = w.root().join("policies").join(name);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, body).unwrap();
    p
}

/// `hcp policy check FILE`.
fn check(w: &World, file: &Path) -> Output {
    w.run(&["policy", "check", &file.display().to_string()])
}

/// `hcp policy check --json FILE`: the output and its object.
fn check_json(w: &World, file: &Path) -> (Output, Value) {
    let out = w.run(&["policy", "check", "--json", &file.display().to_string()]);
    let v = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", w.render(&out)));
    (out, v)
}

/// `hcp policy hash FILE`: the hash, asserting success.
fn hash(w: &World, file: &Path) -> String {
    let out = w.run(&["policy", "hash", &file.display().to_string()]);
    assert!(out.status.success(), "{}", w.render(&out));
    let h = text(&out.stdout).trim().to_owned();
    assert!(
        h.starts_with("sha256:") && h.len() == 71,
        "not a content hash: {h:?}"
    );
    h
}

/// `hcp policy decide FILE` with `input` on stdin.
fn decide_raw(w: &World, file: &Path, input: &[u8]) -> Output {
    let mut c = std::process::Command::new(common::hcp_bin());
    c.env_clear()
        .env("HOME", &w.home)
        .env("HCP_HOME", &w.hcp_home)
        .env("PATH", w.path_var())
        .env("LANG", "C")
        .current_dir(&w.work)
        .args(["policy", "decide", &file.display().to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    // hcp may refuse (a policy that does not load) before it reads stdin: a broken pipe
    // here is not the test's concern, the answer is.
    let _ = child.stdin.take().unwrap().write_all(input);
    child.wait_with_output().unwrap()
}

/// `hcp policy decide FILE` with `input`: the decision object, asserting exit 0.
fn decide(w: &World, file: &Path, input: &Value) -> Value {
    let out = decide_raw(w, file, input.to_string().as_bytes());
    assert!(out.status.success(), "decide {input}:\n{}", w.render(&out));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("decide printed no JSON ({e}):\n{}", w.render(&out)))
}

/// Asserts `out` is a refusal of `hcp policy check` with `code` (exit 1, code on stderr).
fn assert_check_refused(w: &World, out: &Output, code: &str) {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}", w.render(out));
    assert!(
        err.contains(&format!("code: {code}")),
        "expected POLICY code `{code}`:\n{}",
        w.render(out)
    );
    assert!(out.stdout.is_empty(), "{}", w.render(out));
}

// ---------------------------------------------------------------- invalid-policy corpus

#[test]
fn check_refuses_every_invalid_policy_fixture_with_its_code() {
    let w = World::new();
    let cases = fixtures("invalid-policy");
    assert!(!cases.is_empty(), "the invalid-policy corpus is empty");
    let listed = manifest_cases("invalid-policy");
    let names: Vec<&str> = cases.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(
        listed, names,
        "the manifest and the directory disagree: a listed case would not run"
    );
    for (name, fx) in &cases {
        let code = fx["expect"]["code"].as_str().unwrap();
        let file = put(&w, &format!("{name}.json"), &fx["document"].to_string());
        // text face: exit 1, `code: …` on stderr, and where (the file and the location)
        let out = check(&w, &file);
        assert_check_refused(&w, &out, code);
        assert!(
            text(&out.stderr).contains(&format!("{name}.json")),
            "{name}: the refusal names the file:\n{}",
            w.render(&out)
        );
        // JSON face: the same code, and where in the document
        let (out, v) = check_json(&w, &file);
        assert_eq!(out.status.code(), Some(1), "{name}: {v}");
        assert_eq!(v["ok"], json!(false), "{name}: {v}");
        assert_eq!(v["code"], json!(code), "{name}: {v}");
        // the same document as YAML (JSON is YAML) is refused the same way
        let yaml = put(&w, &format!("{name}.yaml"), &fx["document"].to_string());
        assert_check_refused(&w, &check(&w, &yaml), code);
        // and `hash` / `decide` refuse to work on it
        let out = w.run(&["policy", "hash", &file.display().to_string()]);
        assert_check_refused(&w, &out, code);
        let out = decide_raw(
            &w,
            &file,
            br#"{"principal": {"role": "r"}, "call": {"tool": "t", "args": {}}}"#,
        );
        assert_check_refused(&w, &out, code);
    }
}

#[test]
fn check_names_where_a_fixture_is_wrong() {
    let w = World::new();
    let cases = fixtures("invalid-policy");
    let (_, fx) = cases
        .iter()
        .find(|(n, _)| n == "binding-from-an-argument")
        .expect("fixture binding-from-an-argument");
    let file = put(
        &w,
        "binding-from-an-argument.json",
        &fx["document"].to_string(),
    );
    let (_, v) = check_json(&w, &file);
    assert_eq!(v["location"], json!("tools.t.bind.tenant_id"), "{v}");
    let out = check(&w, &file);
    insta::assert_snapshot!("check_binding_from_an_argument", w.render(&out));
}

#[test]
fn check_accepts_a_valid_policy() {
    let w = World::new();
    let file = put(
        &w,
        "ok.yaml",
        "schema_version: histos.policy/0.1\ntools:\n  pack.verb:\n    args: {x: {type: string}}\nroles:\n  r: {allow: [pack.verb]}\n",
    );
    let out = check(&w, &file);
    assert_eq!(out.status.code(), Some(0), "{}", w.render(&out));
    assert!(text(&out.stdout).contains("is valid"), "{}", w.render(&out));
    let (out, v) = check_json(&w, &file);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(v["ok"], json!(true), "{v}");
    assert_eq!(v["tools"], json!(1), "{v}");
    assert_eq!(v["roles"], json!(1), "{v}");
    assert_eq!(v["content_hash"], json!(hash(&w, &file)), "{v}");
}

#[test]
fn check_of_a_missing_file_is_not_found() {
    let w = World::new();
    let out = check(&w, &w.root().join("nope.json"));
    assert_check_refused(&w, &out, "not_found");
}

// ---------------------------------------------------------------- canonicalization corpus

/// The golden `content_hash` of each canonicalization fixture (HISTOS-ENGINE §3.4,
/// computed by the reference engine).
const GOLDEN: [(&str, &str); 7] = [
    (
        "defaults-normalize-away",
        "sha256:d438922f982ffd664af03faf2b85a1a3160251fdf3dbf5b4d9ebb08afdf18c10",
    ),
    (
        "key-order-is-irrelevant",
        "sha256:a235a1554f4fddc7d34f034375c413c98d718cd8b707ac6d4d2c46adc107f38a",
    ),
    (
        "metadata-does-not-affect-the-hash",
        "sha256:d438922f982ffd664af03faf2b85a1a3160251fdf3dbf5b4d9ebb08afdf18c10",
    ),
    (
        "numeric-spelling-is-irrelevant",
        "sha256:8be2177a9c8454eb193de418aa01dcbd1c32741608384c99dd5122c0b7ba3c73",
    ),
    (
        "owns-sugar-equals-its-expansion",
        "sha256:95166f5f0701f28571aa52b0ffaff0761cbb6751aaf9b1d0c78a07e6f6f6c2b8",
    ),
    (
        "requires-does-not-affect-the-hash",
        "sha256:d438922f982ffd664af03faf2b85a1a3160251fdf3dbf5b4d9ebb08afdf18c10",
    ),
    (
        "yaml-and-json-agree",
        "sha256:bfefad4b0dd2bc659b8adccabd9fb6823db6f4ccee051974f413d99a84614fef",
    ),
];

#[test]
fn hash_agrees_within_every_canonicalization_fixture_and_with_the_golden_hashes() {
    let w = World::new();
    let cases = fixtures("canonicalization");
    let names: Vec<&str> = cases.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(manifest_cases("canonicalization"), names);
    for (name, fx) in &cases {
        let docs = fx["documents"].as_array().unwrap();
        assert!(docs.len() >= 2, "{name}: a fixture compares documents");
        let hashes: Vec<String> = docs
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let ext = match d["format"].as_str().unwrap() {
                    "json" => "json",
                    "yaml" => "yaml",
                    other => panic!("{name}: unknown format {other}"),
                };
                let file = put(
                    &w,
                    &format!("{name}-{i}.{ext}"),
                    d["text"].as_str().unwrap(),
                );
                // `check` agrees with `hash`
                let (_, v) = check_json(&w, &file);
                let h = hash(&w, &file);
                assert_eq!(v["content_hash"], json!(h), "{name}[{i}]: {v}");
                h
            })
            .collect();
        assert!(
            hashes.iter().all(|h| *h == hashes[0]),
            "{name}: the documents hash differently: {hashes:?}"
        );
        let golden = GOLDEN
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("{name}: no golden hash known for this fixture"))
            .1;
        assert_eq!(
            hashes[0], golden,
            "{name}: not the reference's content_hash"
        );
    }
    assert_eq!(cases.len(), GOLDEN.len(), "a golden hash has no fixture");
}

#[test]
fn hash_moves_when_a_decision_changes_and_not_for_metadata() {
    let w = World::new();
    let base = "schema_version: histos.policy/0.1\ntools:\n  t:\n    args: {n: {type: integer, maximum: 5}}\n";
    let a = hash(&w, &put(&w, "a.yaml", base));
    let renamed = hash(
        &w,
        &put(
            &w,
            "b.yaml",
            &format!("policy_id: other\nversion: '7'\n{base}"),
        ),
    );
    assert_eq!(a, renamed, "metadata is not hashed");
    let raised = hash(
        &w,
        &put(&w, "c.yaml", &base.replace("maximum: 5", "maximum: 6")),
    );
    assert_ne!(a, raised, "a different bound is a different policy");
}

// ---------------------------------------------------------------- decisions corpus

/// The decision input of a fixture: its principal, resource (when present) and call.
fn decision_input(fx: &Value) -> Value {
    let mut input = serde_json::Map::new();
    for k in ["principal", "resource", "call"] {
        if let Some(v) = fx.get(k) {
            input.insert(k.into(), v.clone());
        }
    }
    Value::Object(input)
}

/// Asserts the decision against the fixture's `expect` (effect, rule, field, bound_args).
fn assert_decision(name: &str, got: &Value, expect: &Value) {
    assert_eq!(got["effect"], expect["effect"], "{name}: {got}");
    assert_eq!(got["rule"], expect["rule"], "{name}: {got}");
    if let Some(f) = expect.get("field") {
        assert_eq!(&got["field"], f, "{name}: {got}");
    }
    if let Some(b) = expect.get("bound_args").and_then(Value::as_object) {
        for (k, v) in b {
            assert_eq!(&got["bound_args"][k], v, "{name}: bound `{k}`: {got}");
        }
    }
}

/// The decision fixtures whose `principal` is JSON `null`: see
/// `decide_answers_no_principal_for_a_null_principal`.
fn null_principal(fx: &Value) -> bool {
    fx.get("principal").is_some_and(Value::is_null)
}

#[test]
fn decide_matches_every_decision_fixture() {
    let w = World::new();
    let cases = fixtures("decisions");
    let names: Vec<&str> = cases.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(manifest_cases("decisions"), names);
    let mut ran = 0;
    for (name, fx) in &cases {
        if null_principal(fx) {
            continue; // its own (ignored, bug) test below
        }
        let file = put(&w, &format!("{name}.json"), &fx["policy"].to_string());
        let got = decide(&w, &file, &decision_input(fx));
        assert_decision(name, &got, &fx["expect"]);
        ran += 1;
    }
    assert!(ran >= 17, "only {ran} decision fixtures ran");
}

#[test]
fn decide_answers_no_principal_for_a_null_principal() {
    let w = World::new();
    let cases = fixtures("decisions");
    let mut seen = 0;
    for (name, fx) in cases.iter().filter(|(_, fx)| null_principal(fx)) {
        let file = put(&w, &format!("{name}.json"), &fx["policy"].to_string());
        let got = decide(&w, &file, &decision_input(fx));
        assert_decision(name, &got, &fx["expect"]);
        seen += 1;
    }
    assert!(seen > 0, "the corpus has a null-principal fixture");
}

#[test]
fn decide_without_a_principal_key_is_no_principal() {
    let w = World::new();
    let file = put(
        &w,
        "p.json",
        &json!({"tools": {"t": {"args": {}}}, "roles": {"r": {"allow": ["t"]}}}).to_string(),
    );
    let got = decide(&w, &file, &json!({"call": {"tool": "t", "args": {}}}));
    assert_eq!(got["effect"], json!("deny"), "{got}");
    assert_eq!(got["rule"], json!("no_principal"), "{got}");
}

#[test]
fn decide_refuses_malformed_input() {
    let w = World::new();
    let file = put(
        &w,
        "p.json",
        &json!({"tools": {"t": {"args": {}}}, "roles": {"r": {"allow": ["t"]}}}).to_string(),
    );
    for bad in [
        &b"not json"[..],
        br#"[1]"#,
        br#"{"principal": {"role": "r"}}"#,
        br#"{"principal": {"role": "r"}, "call": {"tool": "t", "args": {}}, "extra": 1}"#,
        br#"{"principal": {"role": "r"}, "call": {"tool": "t", "args": {}, "args": {}}}"#,
        br#"{"principal": {"role": 7}, "call": {"tool": "t", "args": {}}}"#,
    ] {
        let out = decide_raw(&w, &file, bad);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{}:\n{}",
            text(bad),
            w.render(&out)
        );
        assert!(
            text(&out.stderr).contains("bad_input"),
            "{}",
            w.render(&out)
        );
        assert!(out.stdout.is_empty());
    }
}

// ---------------------------------------------------------------- the issue's bad inputs

#[test]
fn a_yaml_alias_bomb_is_refused_quickly() {
    let w = World::new();
    // nine levels of ten aliases each: 10^9 nodes once expanded
    let mut y = String::from(
        "schema_version: histos.policy/0.1\ntools:\n  t:\n    args:\n      x:\n        type: any\n        enum:\n",
    );
    y.push_str("          - &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for i in 1..10 {
        let refs = vec![format!("*a{}", i - 1); 10].join(", ");
        y.push_str(&format!("          - &a{i} [{refs}]\n"));
    }
    let file = put(&w, "bomb.yaml", &y);
    let t = Instant::now();
    let out = check(&w, &file);
    let took = t.elapsed();
    assert_check_refused(&w, &out, "policy_too_large");
    assert!(took < QUICK, "the alias bomb took {took:?}");
    // a small, honest use of anchors still loads
    let ok = "schema_version: histos.policy/0.1\ntools:\n  a: &c\n    args: {x: {type: string}}\n  b: *c\n";
    let out = check(&w, &put(&w, "anchors.yaml", ok));
    assert_eq!(out.status.code(), Some(0), "{}", w.render(&out));
}

#[test]
fn a_50_mb_policy_is_refused_quickly() {
    let w = World::new();
    for ext in ["json", "yaml"] {
        let p = w.root().join(format!("big.{ext}"));
        let mut f = std::io::BufWriter::new(std::fs::File::create(&p).unwrap());
        f.write_all(b"{\"schema_version\": \"histos.policy/0.1\", \"policy_id\": \"")
            .unwrap();
        let chunk = [b'x'; 1 << 16];
        for _ in 0..(50 * 1024 * 1024 / chunk.len()) {
            f.write_all(&chunk).unwrap();
        }
        f.write_all(b"\", \"tools\": {}}").unwrap();
        f.flush().unwrap();
        drop(f);
        assert!(std::fs::metadata(&p).unwrap().len() > 50 * 1024 * 1024);
        let t = Instant::now();
        let out = check(&w, &p);
        let took = t.elapsed();
        assert_check_refused(&w, &out, "policy_too_large");
        assert!(took < QUICK, "the 50 MB policy took {took:?}");
        std::fs::remove_file(&p).unwrap();
    }
}

#[test]
fn rate_limit_written_as_a_float_is_refused() {
    let w = World::new();
    for (name, body) in [
        (
            "rl.json",
            r#"{"schema_version": "histos.policy/0.1", "tools": {"t": {"args": {}, "rate_limit": 10.0}}}"#,
        ),
        (
            "rl.yaml",
            "schema_version: histos.policy/0.1\ntools:\n  t:\n    args: {}\n    rate_limit: 10.0\n",
        ),
        (
            "budget.json",
            r#"{"tools": {"t": {"args": {}, "budget": 3.0}}}"#,
        ),
        (
            "expires.json",
            r#"{"tools": {"t": {"args": {}, "confirmation": {"required": true, "expires_in": 60.0}}}}"#,
        ),
    ] {
        let out = check(&w, &put(&w, name, body));
        assert_check_refused(&w, &out, "invalid_contract");
    }
    // the integer spelling loads
    let out = check(
        &w,
        &put(
            &w,
            "rl-int.yaml",
            "tools:\n  t:\n    args: {}\n    rate_limit: 10\n",
        ),
    );
    assert_eq!(out.status.code(), Some(0), "{}", w.render(&out));
}

#[test]
fn a_binding_from_an_argument_is_refused() {
    let w = World::new();
    for (name, body) in [
        (
            "bind.yaml",
            "tools:\n  t:\n    args: {x: {type: string}}\n    bind: {x: \"args.y\"}\n",
        ),
        (
            "bind.json",
            r#"{"tools": {"t": {"args": {"x": {}}, "bind": {"x": "args.y"}}}}"#,
        ),
        (
            "bind-nested.yaml",
            "tools:\n  t:\n    args: {x: {type: string}}\n    bind: {x: principal.a.b}\n",
        ),
        (
            "bind-number.yaml",
            "tools:\n  t:\n    args: {x: {type: string}}\n    bind: {x: 7}\n",
        ),
    ] {
        let out = check(&w, &put(&w, name, body));
        assert_check_refused(&w, &out, "invalid_binding");
    }
}

#[test]
fn a_role_that_inherits_itself_loads_and_decides_without_looping() {
    // HISTOS-ENGINE §8: inheritance is cycle-safe at evaluation; the reference loads such a
    // policy, and refusing it would be an extra refusal (a divergence).
    let w = World::new();
    let file = put(
        &w,
        "self.yaml",
        "tools:\n  t:\n    args: {}\n  u:\n    args: {}\n  v:\n    args: {}\nroles:\n  r: {inherits: r, allow: [t]}\n  a: {inherits: b, allow: [u]}\n  b: {inherits: a}\n",
    );
    let t = Instant::now();
    let out = check(&w, &file);
    assert_eq!(out.status.code(), Some(0), "{}", w.render(&out));
    let call = |role: &str, tool: &str| {
        decide(
            &w,
            &file,
            &json!({"principal": {"role": role}, "call": {"tool": tool, "args": {}}}),
        )
    };
    assert_eq!(call("r", "t")["rule"], json!("allow"));
    assert_eq!(call("r", "u")["rule"], json!("rbac"));
    // a two-role cycle: each gets the other's grants, and nothing else
    assert_eq!(call("b", "u")["rule"], json!("allow"));
    assert_eq!(call("a", "u")["rule"], json!("allow"));
    assert_eq!(call("b", "v")["rule"], json!("rbac"));
    assert!(t.elapsed() < QUICK * 2, "a cycle took {:?}", t.elapsed());
}

#[test]
fn a_tool_name_with_a_space_is_refused() {
    let w = World::new();
    for (name, body) in [
        (
            "space.json",
            r#"{"tools": {"my tool": {"args": {}}}}"#.to_owned(),
        ),
        (
            "space.yaml",
            "tools:\n  \"pack.my verb\":\n    args: {}\n".to_owned(),
        ),
        ("lead.json", r#"{"tools": {" t": {"args": {}}}}"#.to_owned()),
    ] {
        let out = check(&w, &put(&w, name, &body));
        assert_check_refused(&w, &out, "policy_invalid");
    }
}

/// A policy with one tool `send(body)` (and `pair(first, second)`, `num(n: integer)`),
/// granted to role `r`, with canary `CANARY-7f3a-DO-NOT-LEAK`.
fn scan_policy(w: &World) -> PathBuf {
    put(
        w,
        "scan.json",
        &json!({
            "schema_version": "histos.policy/0.1",
            "canaries": ["CANARY-7f3a-DO-NOT-LEAK"],
            "tools": {
                "send": {"args": {"body": {"type": "string"}}},
                "pair": {"args": {"first": {"type": "string"}, "second": {"type": "string"}}},
                "num": {"args": {"n": {"type": "integer"}}},
                "lax": {"args": {"n": {"type": "integer"}}, "deny_secret_args": false}
            },
            "roles": {"r": {"allow": ["send", "pair", "num", "lax"]}}
        })
        .to_string(),
    )
}

fn call_r(w: &World, file: &Path, tool: &str, args: Value) -> Value {
    decide(
        w,
        file,
        &json!({"principal": {"role": "r", "identity": "agent"}, "call": {"tool": tool, "args": args}}),
    )
}

#[test]
fn a_canary_hidden_with_full_width_letters_or_zero_width_characters_is_denied() {
    let w = World::new();
    let file = scan_policy(&w);
    for body in [
        "here it is: CANARY-7f3a-DO-NOT-LEAK",
        // full-width letters and digits (NFKC folds them)
        "\u{ff23}\u{ff21}\u{ff2e}\u{ff21}\u{ff32}\u{ff39}-\u{ff17}f3a-DO-NOT-LEAK",
        // zero-width space, joiner, BOM and a soft hyphen inside the token
        "CAN\u{200b}ARY-7f3a\u{200d}-DO-NOT\u{feff}-LE\u{ad}AK",
        // spaced out and lower-cased
        "c a n a r y 7 f 3 a do not leak",
    ] {
        let got = call_r(&w, &file, "send", json!({ "body": body }));
        assert_eq!(
            (got["effect"].as_str(), got["rule"].as_str()),
            (Some("deny"), Some("canary_exfil")),
            "{body:?}: {got}"
        );
    }
    // near misses pass
    for body in ["CANARY-7f3b-DO-NOT-LEAK", "a canary, do not leak"] {
        let got = call_r(&w, &file, "send", json!({ "body": body }));
        assert_eq!(got["rule"], json!("allow"), "{body:?}: {got}");
    }
}

#[test]
fn a_card_number_split_across_two_arguments_is_denied() {
    // HISTOS-ENGINE §4: the arguments are scanned as one blob joined by single spaces, so
    // a PAN split across two string arguments is a space-grouped PAN, and is detected.
    let w = World::new();
    let file = scan_policy(&w);
    let got = call_r(
        &w,
        &file,
        "pair",
        json!({"first": "4111 1111", "second": "1111 1111"}),
    );
    assert_eq!(
        (got["effect"].as_str(), got["rule"].as_str()),
        (Some("deny"), Some("secret_detected")),
        "{got}"
    );
    // halves that do not form a Luhn-valid PAN pass
    let got = call_r(
        &w,
        &file,
        "pair",
        json!({"first": "4111 1111", "second": "1111 1112"}),
    );
    assert_eq!(got["rule"], json!("allow"), "{got}");
}

#[test]
fn an_integer_argument_that_is_a_valid_card_number_is_denied() {
    let w = World::new();
    let file = scan_policy(&w);
    let got = call_r(&w, &file, "num", json!({"n": 4111111111111111u64}));
    assert_eq!(
        (got["effect"].as_str(), got["rule"].as_str()),
        (Some("deny"), Some("secret_detected")),
        "{got}"
    );
    // Mastercard, Amex
    for n in [5555555555554444u64, 378282246310005] {
        let got = call_r(&w, &file, "num", json!({ "n": n }));
        assert_eq!(got["rule"], json!("secret_detected"), "{n}: {got}");
    }
    // Luhn-invalid: not a secret
    let got = call_r(&w, &file, "num", json!({"n": 4111111111111112u64}));
    assert_eq!(got["rule"], json!("allow"), "{got}");
    // `deny_secret_args: false` turns the denial off for that tool
    let got = call_r(&w, &file, "lax", json!({"n": 4111111111111111u64}));
    assert_eq!(got["rule"], json!("allow"), "{got}");
}

#[test]
fn decide_counts_limits_in_memory_only() {
    // `hcp policy decide` is a dry run: its counters live for one invocation, so a
    // `rate_limit: 1` tool allows every separate decide.
    let w = World::new();
    let file = put(
        &w,
        "rl.yaml",
        "tools:\n  t:\n    args: {}\n    rate_limit: 1\n    budget: 1\nroles:\n  r: {allow: [t]}\n",
    );
    for _ in 0..3 {
        let got = decide(
            &w,
            &file,
            &json!({"principal": {"role": "r", "identity": "p"}, "call": {"tool": "t", "args": {}}}),
        );
        assert_eq!(got["rule"], json!("allow"), "{got}");
    }
    assert!(
        !w.hcp_home.join("state").join("counters").exists(),
        "decide wrote counters to the store"
    );
}

#[test]
fn loading_is_strict_in_both_formats() {
    // HISTOS-ENGINE §2 and §3.5: what a strict loader refuses, and with which code.
    let w = World::new();
    for (i, (ext, body, code)) in [
        (
            "yaml",
            "tools:\n  t:\n    args: {}\n    confirmation: {required: yes}\n",
            "invalid_field",
        ),
        (
            "yaml",
            "tools:\n  t:\n    args: {}\n  t:\n    args: {}\n",
            "duplicate_key",
        ),
        (
            "json",
            r#"{"tools": {"t": {"args": {}}, "t": {"args": {}}}}"#,
            "duplicate_key",
        ),
        (
            "yaml",
            "created_at: 2026-01-01\ntools: {}\n",
            "policy_invalid",
        ),
        ("yaml", "- a\n- b\n", "not_an_object"),
        ("json", "[1]", "not_an_object"),
        ("yaml", "", "unparseable"),
        (
            "json",
            r#"{"tools": {"t": {"args": {"n": {"type": "integer", "maximum": NaN}}}}}"#,
            "unparseable",
        ),
        (
            "yaml",
            "tools:\n  t:\n    args: {n: {type: integer, maximum: .inf}}\n",
            "invalid_field",
        ),
        (
            "yaml",
            "tools:\n  t:\n    args: {n: {type: integer, minimum: 5, maximum: 1}}\n",
            "invalid_field",
        ),
        ("yaml", "canaries: [short]\ntools: {}\n", "invalid_canary"),
        (
            "yaml",
            "tools:\n  t:\n    args: {}\n    escalate: true\n",
            "not_a_mapping",
        ),
        (
            "yaml",
            "tools:\n  t:\n    args: {}\n    rate_limit: 0\n",
            "invalid_contract",
        ),
        (
            "yaml",
            "tools:\n  t:\n    args: {}\n    rate_limit: true\n",
            "invalid_contract",
        ),
        (
            "yaml",
            "tools:\n  t:\n    args: {x: {pattern: '^(a+)+$'}}\n",
            "unsafe_pattern",
        ),
        ("json", r#"{"tools": {}, "permissions": {}}"#, "unknown_key"),
    ]
    .into_iter()
    .enumerate()
    {
        let file = put(&w, &format!("strict-{i}.{ext}"), body);
        let out = check(&w, &file);
        assert_check_refused(&w, &out, code);
    }
    // YAML 1.1 scalars as the reference reads them: `012` is octal 10
    let a = hash(
        &w,
        &put(
            &w,
            "ten.yaml",
            "tools:\n  t:\n    args: {n: {type: integer, maximum: 10}}\n",
        ),
    );
    let b = hash(
        &w,
        &put(
            &w,
            "octal.yaml",
            "tools:\n  t:\n    args: {n: {type: integer, maximum: 012}}\n",
        ),
    );
    assert_eq!(a, b);
}
