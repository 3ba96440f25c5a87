//! The compiled policy cache decides as the policy's source does, over the whole Histos
//! conformance corpus, end to end through the runtime's one loader
//! (`hcp_runtime::policy::load`): every decision fixture's policy is written into a store,
//! loaded once from source (the entry is written) and once from the cache (a hit), and
//! every call is decided with each; every canonicalization document hashes alike; and
//! no invalid policy loads from a store whose cache holds a valid one.
//!
//! The corpus is the one vendored at `tests/histos-conformance/conformance/` (or
//! `HISTOS_CONFORMANCE_DIR`), found and checked against its pins by `corpus::locate`; it
//! is required (a missing or modified corpus fails).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use hcp_runtime::policy::{CacheUse, source};
use hcp_store::Home;
use histos::{Map, Value};
use std::path::PathBuf;

#[path = "../../../tests/histos-conformance/corpus.rs"]
mod corpus;

fn corpus() -> PathBuf {
    corpus::locate().unwrap_or_else(|e| panic!("{e}"))
}

fn fixtures(sub: &str) -> Vec<(String, Map)> {
    let dir = corpus().join(sub);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|f| {
            let Value::Map(m) = histos::json::parse(&std::fs::read_to_string(&f).unwrap()).unwrap()
            else {
                panic!("{}", f.display())
            };
            (f.file_stem().unwrap().to_string_lossy().into_owned(), m)
        })
        .collect()
}

/// A fresh store holding `text` as its runtime policy `name`.
fn store(name: &str, text: &str) -> (tempfile::TempDir, Home) {
    let d = tempfile::tempdir().unwrap();
    let home = Home::open(d.path().join("home")).unwrap();
    std::fs::create_dir_all(home.root()).unwrap();
    std::fs::write(home.root().join(name), text).unwrap();
    (d, home)
}

fn json_text(v: &Value) -> String {
    serde_json::Value::from(v).to_string()
}

#[test]
fn decisions_are_equal_with_and_without_the_cache_over_the_corpus() {
    let mut decided = 0;
    for (name, fx) in fixtures("decisions") {
        let (_d, home) = store("policy.json", &json_text(fx.get("policy").unwrap()));
        let first = source::load(&home).unwrap().unwrap();
        assert_eq!(first.cache, CacheUse::Written, "{name}");
        let cached = source::load(&home).unwrap().unwrap();
        assert_eq!(cached.cache, CacheUse::Hit, "{name}");
        let plain = source::load_uncached(&home).unwrap().unwrap();
        assert_eq!(cached.hash(), plain.hash(), "{name}");
        let from_cache = hcp_runtime::decide::decide(&cached.policy, &fx).unwrap();
        let from_source = hcp_runtime::decide::decide(&plain.policy, &fx).unwrap();
        assert_eq!(from_cache, from_source, "{name}");
        // and the corpus's own expectation holds through the loader
        let expect = serde_json::Value::from(fx.get("expect").unwrap());
        assert_eq!(from_cache["effect"], expect["effect"], "{name}");
        assert_eq!(from_cache["rule"], expect["rule"], "{name}");
        decided += 1;
    }
    let mut hashed = 0;
    for (name, fx) in fixtures("canonicalization") {
        let Some(Value::List(docs)) = fx.get("documents") else {
            panic!("{name}")
        };
        for d in docs {
            let m = d.as_map().unwrap();
            let text = m.get("text").and_then(Value::as_str).unwrap();
            let file = match m.get("format").and_then(Value::as_str) {
                Some("json") => "policy.json",
                _ => "policy.yaml",
            };
            let (_d, home) = store(file, text);
            let written = source::load(&home).unwrap().unwrap();
            let hit = source::load(&home).unwrap().unwrap();
            assert_eq!(hit.cache, CacheUse::Hit, "{name}");
            let plain = source::load_uncached(&home).unwrap().unwrap();
            assert_eq!(written.hash(), plain.hash(), "{name}");
            assert_eq!(hit.hash(), plain.hash(), "{name}");
            hashed += 1;
        }
    }
    assert!(decided >= 18 && hashed >= 10, "{decided} {hashed}");
    eprintln!("compiled cache = source: {decided} decisions, {hashed} documents");
}

#[test]
fn no_invalid_policy_loads_from_a_store_whose_cache_holds_a_valid_one() {
    let valid = "{\"schema_version\": \"histos.policy/0.1\", \"tools\": {\"t\": {\"args\": {}}}, \"roles\": {}}";
    let mut n = 0;
    for (name, fx) in fixtures("invalid-policy") {
        let (_d, home) = store("policy.json", valid);
        assert!(source::load(&home).unwrap().is_some());
        std::fs::write(
            home.root().join("policy.json"),
            json_text(fx.get("document").unwrap()),
        )
        .unwrap();
        let want = serde_json::Value::from(fx.get("expect").unwrap())["code"].clone();
        let cached = source::load(&home).unwrap_err();
        let plain = source::load_uncached(&home).unwrap_err();
        assert_eq!(cached.code, plain.code, "{name}");
        assert_eq!(serde_json::json!(cached.code.as_str()), want, "{name}");
        n += 1;
    }
    assert!(n >= 10, "{n}");
}
