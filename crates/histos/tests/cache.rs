//! The compiled policy cache: equal decisions with and without it over the whole
//! conformance corpus, and every damaged, foreign or mismatched entry refused.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::borrow::Cow;
use std::path::PathBuf;

use histos::cache::{CacheError, FORMAT_VERSION, source_digest};
use histos::engine::Args;
use histos::{
    Call, Context, Engine, Map, MemoryLimitStore, Policy, Principal, ResolveError,
    ResourceResolver, Value,
};

#[path = "../../../tests/histos-conformance/corpus.rs"]
mod corpus;

fn corpus_dir() -> PathBuf {
    corpus::locate().unwrap_or_else(|e| panic!("{e}"))
}

fn fixtures(corpus: &str) -> Vec<(String, Map)> {
    let dir = corpus_dir().join(corpus);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| {
            panic!(
                "the conformance corpus is required at {}: {e}",
                dir.display()
            )
        })
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    files
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(&f).unwrap();
            let Value::Map(m) = histos::json::parse(&text).unwrap() else {
                panic!()
            };
            (f.display().to_string(), m)
        })
        .collect()
}

/// Through the cache: serialize, then read back with the same source digest.
fn through_cache(p: &Policy, source: &[u8]) -> Policy {
    let d = source_digest(source);
    let bytes = p.to_cache_bytes(&d);
    let back = Policy::from_cache_bytes(&bytes, &d).unwrap();
    assert_eq!(
        back.to_cache_bytes(&d),
        bytes,
        "the compiled form is stable"
    );
    back
}

struct Echo(Map);
impl ResourceResolver for Echo {
    fn resolve<'r>(&'r self, _: &str, _: &Args<'_>) -> Result<Option<Cow<'r, Map>>, ResolveError> {
        Ok(Some(Cow::Borrowed(&self.0)))
    }
}

fn decide(p: &Policy, fx: &Map) -> histos::Decision {
    let principal = fx
        .get("principal")
        .and_then(Value::as_map)
        .map(|m| Principal {
            role: m
                .get("role")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .into(),
            identity: m
                .get("identity")
                .and_then(Value::as_str)
                .map(str::to_string),
            attributes: m
                .get("attributes")
                .and_then(Value::as_map)
                .cloned()
                .unwrap_or_default(),
            can_view: Vec::new(),
        });
    let resolver = fx
        .get("resource")
        .and_then(Value::as_map)
        .cloned()
        .map(Echo);
    let c = fx.get("call").and_then(Value::as_map).unwrap();
    let call = Call {
        tool: c.get("tool").and_then(Value::as_str).unwrap().into(),
        args: c
            .get("args")
            .and_then(Value::as_map)
            .cloned()
            .unwrap_or_default(),
    };
    let store = MemoryLimitStore::default();
    let ctx = Context {
        limits: Some(&store),
        consume_limits: true,
        ..Default::default()
    };
    Engine::pre(
        p,
        principal.as_ref(),
        resolver.as_ref().map(|r| r as &dyn ResourceResolver),
        &call,
        &ctx,
    )
}

#[test]
fn decisions_and_hashes_are_equal_with_and_without_the_cache_over_the_corpus() {
    let mut n = 0;
    for (name, fx) in fixtures("decisions") {
        let doc = fx.get("policy").cloned().unwrap();
        let source = serde_json::Value::from(&doc).to_string();
        let p = Policy::load_json(&source).unwrap();
        let c = through_cache(&p, source.as_bytes());
        assert_eq!(c.content_hash(), p.content_hash(), "{name}");
        assert_eq!(decide(&c, &fx), decide(&p, &fx), "{name}");
        n += 1;
    }
    for (name, fx) in fixtures("canonicalization") {
        let Some(Value::List(docs)) = fx.get("documents") else {
            panic!()
        };
        for d in docs {
            let m = d.as_map().unwrap();
            let text = m.get("text").and_then(Value::as_str).unwrap();
            let p = match m.get("format").and_then(Value::as_str) {
                Some("json") => Policy::load_json(text),
                _ => Policy::load_yaml(text),
            }
            .unwrap();
            assert_eq!(
                through_cache(&p, text.as_bytes()).content_hash(),
                p.content_hash(),
                "{name}"
            );
            n += 1;
        }
    }
    // A policy that does not load has no compiled form: the host refuses with its
    // POLICY code, whatever a cache holds (the key is the new source's digest).
    for (name, fx) in fixtures("invalid-policy") {
        assert!(
            Policy::from_document(fx.get("document").cloned().unwrap()).is_err(),
            "{name}"
        );
    }
    assert!(n >= 25);
}

#[test]
fn patterns_bounds_and_grants_decide_alike_from_the_cache() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("benches");
    for f in ["policy-12-tools.json", "policy-12-tools.yaml"] {
        let text = std::fs::read_to_string(dir.join(f)).unwrap();
        let p = if f.ends_with(".json") {
            Policy::load_json(&text)
        } else {
            Policy::load_yaml(&text)
        }
        .unwrap();
        let c = through_cache(&p, text.as_bytes());
        assert_eq!(c.content_hash(), p.content_hash());
        let tool = &p.tools[0];
        for role in p
            .roles
            .iter()
            .map(|r| r.name.clone())
            .chain(["nobody".to_string()])
        {
            for q in ["hello world", "bad;chars", ""] {
                let mut args = Map::new();
                args.insert("tenant_id", Value::Str("t1".into()));
                args.insert("query", Value::Str(q.into()));
                let call = Call {
                    tool: tool.name.clone(),
                    args,
                };
                let who = Principal::new(role.clone());
                let ctx = Context::default();
                assert_eq!(
                    Engine::pre(&c, Some(&who), None, &call, &ctx),
                    Engine::pre(&p, Some(&who), None, &call, &ctx),
                    "{f} {role} {q}"
                );
            }
        }
    }
}

fn sample() -> (Policy, [u8; 32], Vec<u8>) {
    let text = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("benches/policy-12-tools.json"),
    )
    .unwrap();
    let p = Policy::load_json(&text).unwrap();
    let d = source_digest(text.as_bytes());
    let bytes = p.to_cache_bytes(&d);
    (p, d, bytes)
}

#[test]
fn a_truncated_entry_is_refused_at_every_length() {
    let (_, d, bytes) = sample();
    for n in 0..bytes.len() {
        match Policy::from_cache_bytes(&bytes[..n], &d) {
            Err(CacheError::Truncated | CacheError::Corrupted(_)) => {}
            other => panic!("cut at {n}: {other:?}"),
        }
    }
}

#[test]
fn a_corrupted_entry_is_refused() {
    let (_, d, bytes) = sample();
    let header = 8 + 4 + 1 + env!("CARGO_PKG_VERSION").len();
    for i in (header..bytes.len()).step_by(7) {
        let mut b = bytes.clone();
        b[i] ^= 0x20;
        assert!(
            Policy::from_cache_bytes(&b, &d).is_err(),
            "byte {i} flipped"
        );
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(Policy::from_cache_bytes(&longer, &d).is_err());
    assert_eq!(
        Policy::from_cache_bytes(b"{\"tools\": {}}", &d).unwrap_err(),
        CacheError::NotACache
    );
}

#[test]
fn an_entry_of_another_version_or_source_is_refused() {
    let (_, d, bytes) = sample();
    let mut other_format = bytes.clone();
    other_format[8..12].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
    assert!(
        matches!(Policy::from_cache_bytes(&other_format, &d), Err(CacheError::OtherVersion { format, .. }) if format == FORMAT_VERSION + 1)
    );
    let mut other_engine = bytes.clone();
    let v = 8 + 4 + 1;
    other_engine[v] = other_engine[v].wrapping_add(1);
    let e = Policy::from_cache_bytes(&other_engine, &d).unwrap_err();
    assert!(matches!(e, CacheError::OtherVersion { .. }), "{e}");
    assert_eq!(e.reason(), "cache_other_version");
    let other = source_digest(b"another policy");
    assert_eq!(
        Policy::from_cache_bytes(&bytes, &other).unwrap_err(),
        CacheError::OtherSource
    );
}
