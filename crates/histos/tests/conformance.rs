//! Runs the Histos conformance corpus at level `portable` (decisions, invalid-policy,
//! projection, canonicalization) against this engine, per `manifest.json`: the corpora
//! are those the manifest's `portable` level names, every fixture's sha256 is verified,
//! every case must run and pass, and a case that does not run (a skip) is a failure.
//!
//! The corpus is vendored at `tests/histos-conformance/conformance/`
//! (`HISTOS_CONFORMANCE_DIR` names another copy) and found by `corpus::locate`, which
//! also checks every pin.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::path::PathBuf;

use std::borrow::Cow;

use histos::engine::Args;
use histos::projection::{self, SourceKind};
use histos::{
    Call, Context, Engine, Map, MemoryLimitStore, Policy, Principal, ResolveError,
    ResourceResolver, Value,
};
use sha2::{Digest, Sha256};

/// The corpora this runner can run; the manifest's `portable` level must name no other.
const RUNNABLE: [&str; 4] = [
    "decisions",
    "invalid-policy",
    "projection",
    "canonicalization",
];

#[path = "../../../tests/histos-conformance/corpus.rs"]
mod corpus;

fn corpus_dir() -> PathBuf {
    corpus::locate().unwrap_or_else(|e| panic!("{e}"))
}

struct Echo(Map);

impl ResourceResolver for Echo {
    fn resolve<'r>(
        &'r self,
        _tool: &str,
        _args: &Args<'_>,
    ) -> Result<Option<Cow<'r, Map>>, ResolveError> {
        Ok(Some(Cow::Borrowed(&self.0)))
    }
}

fn map_of(v: Option<&Value>) -> Map {
    v.and_then(Value::as_map).cloned().unwrap_or_default()
}

fn principal_of(v: &Value) -> Option<Principal> {
    let m = v.as_map()?;
    Some(Principal {
        role: m
            .get("role")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        identity: m
            .get("identity")
            .and_then(Value::as_str)
            .map(str::to_string),
        attributes: map_of(m.get("attributes")),
        can_view: match m.get("can_view") {
            Some(Value::List(l)) => l
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
            _ => Vec::new(),
        },
    })
}

fn run_decision(fx: &Map) -> Result<(), String> {
    let policy = Policy::from_document(fx.get("policy").cloned().ok_or("no policy")?)
        .map_err(|e| format!("policy refused: {e}"))?;
    let principal = fx.get("principal").and_then(principal_of);
    let resolver = match fx.get("resource") {
        Some(Value::Map(m)) => Some(Echo(m.clone())),
        _ => None,
    };
    let call_v = fx.get("call").and_then(Value::as_map).ok_or("no call")?;
    let call = Call {
        tool: call_v
            .get("tool")
            .and_then(Value::as_str)
            .ok_or("no tool")?
            .to_string(),
        args: map_of(call_v.get("args")),
    };
    let store = MemoryLimitStore::default();
    let ctx = Context {
        limits: Some(&store),
        consume_limits: true,
        ..Default::default()
    };
    let d = Engine::pre(
        &policy,
        principal.as_ref(),
        resolver.as_ref().map(|r| r as &dyn ResourceResolver),
        &call,
        &ctx,
    );
    let expect = fx
        .get("expect")
        .and_then(Value::as_map)
        .ok_or("no expect")?;
    let want_effect = expect
        .get("effect")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let want_rule = expect
        .get("rule")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if d.effect.as_str() != want_effect || d.rule.as_str() != want_rule {
        return Err(format!(
            "expected {want_effect}/{want_rule}, got {}/{} ({})",
            d.effect.as_str(),
            d.rule.as_str(),
            d.reason
        ));
    }
    if let Some(f) = expect.get("field").and_then(Value::as_str)
        && d.field.as_deref() != Some(f)
    {
        return Err(format!("expected field {f}, got {:?}", d.field));
    }
    if let Some(Value::Map(b)) = expect.get("bound_args") {
        for (k, want) in b.iter() {
            let got = d
                .bound_args
                .iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v)
                .or_else(|| call.args.get(k));
            if got != Some(want) {
                return Err(format!("bound arg {k}: expected {want:?}, got {got:?}"));
            }
        }
    }
    Ok(())
}

fn run_invalid(fx: &Map) -> Result<(), String> {
    let want = fx
        .get("expect")
        .and_then(Value::as_map)
        .and_then(|e| e.get("code"))
        .and_then(Value::as_str)
        .ok_or("no expect.code")?;
    match Policy::from_document(fx.get("document").cloned().ok_or("no document")?) {
        Ok(_) => Err(format!("loaded, expected {want}")),
        Err(e) if e.code.as_str() == want => Ok(()),
        Err(e) => Err(format!("expected {want}, got {e}")),
    }
}

fn run_projection(fx: &Map) -> Result<(), String> {
    let kind = match fx.get("kind").and_then(Value::as_str) {
        Some(k) => SourceKind::parse(k).ok_or(format!("unknown kind {k}"))?,
        None => return Err("no kind".into()),
    };
    let source = fx.get("source").ok_or("no source")?;
    let tools = projection::read_listing(kind, source).map_err(|e| format!("refused: {e}"))?;
    let [tool] = tools.as_slice() else {
        return Err(format!("expected one tool, got {}", tools.len()));
    };
    let expect = fx
        .get("expect")
        .and_then(Value::as_map)
        .ok_or("no expect")?;
    let want = serde_json::Value::from(expect.get("contract").ok_or("no expect.contract")?);
    let got = serde_json::Value::from(&tool.contract.view());
    if want != got {
        return Err(format!("contract differs:\n want {want}\n  got {got}"));
    }
    for (key, got) in [
        ("schema_sha256", tool.schema_sha256()),
        ("description_sha256", tool.description_sha256()),
        ("contract_sha256", tool.contract_sha256()),
    ] {
        let want = expect
            .get(key)
            .and_then(Value::as_str)
            .ok_or(format!("no {key}"))?;
        if want != got {
            return Err(format!("{key}: expected {want}, got {got}"));
        }
    }
    Ok(())
}

fn run_canonical(fx: &Map) -> Result<(), String> {
    let Some(Value::List(docs)) = fx.get("documents") else {
        return Err("no documents".into());
    };
    if docs.len() < 2 {
        return Err("fewer than two documents".into());
    }
    let mut hashes = Vec::new();
    for d in docs {
        let m = d.as_map().ok_or("document is not an object")?;
        let text = m.get("text").and_then(Value::as_str).ok_or("no text")?;
        let p = match m.get("format").and_then(Value::as_str) {
            Some("json") => Policy::load_json(text),
            Some("yaml") => Policy::load_yaml(text),
            other => return Err(format!("unknown format {other:?}")),
        }
        .map_err(|e| format!("refused: {e}"))?;
        hashes.push(p.content_hash().to_string());
    }
    if hashes.iter().all(|h| *h == hashes[0]) {
        Ok(())
    } else {
        Err(format!("hashes differ: {hashes:?}"))
    }
}

#[test]
fn conformance_corpus() {
    let dir = corpus_dir();
    let manifest_path = dir.join("manifest.json");
    let manifest_text = std::fs::read_to_string(&manifest_path).unwrap_or_else(|e| {
        panic!(
            "the Histos conformance corpus is required but `{}` cannot be read ({e}); \
             restore tests/histos-conformance or set HISTOS_CONFORMANCE_DIR",
            manifest_path.display()
        )
    });
    let manifest: serde_json::Value =
        serde_json::from_str(&manifest_text).expect("manifest.json parses");
    let version = manifest["corpus_version"]
        .as_str()
        .expect("corpus_version")
        .to_string();
    let portable: Vec<String> = manifest["levels"]["portable"]["corpora"]
        .as_array()
        .expect("manifest names the corpora of level `portable`")
        .iter()
        .map(|c| c.as_str().expect("corpus name").to_string())
        .collect();
    for c in &portable {
        assert!(
            RUNNABLE.contains(&c.as_str()),
            "level `portable` names corpus `{c}`, which this runner cannot run: that is a skip, \
             and a skip is a failure"
        );
    }
    let mut total = 0usize;
    let mut passed = 0usize;
    let mut failures = Vec::new();
    for corpus in portable.iter().map(String::as_str) {
        let cases = manifest["corpora"][corpus]["cases"]
            .as_array()
            .unwrap_or_else(|| panic!("manifest lists no {corpus} cases"));
        assert!(!cases.is_empty(), "{corpus}: no cases");
        for case in cases {
            total += 1;
            let name = case["case"].as_str().unwrap_or("?");
            let file = case["file"].as_str().expect("case file");
            let want_sha = case["sha256"].as_str().expect("case sha256");
            let bytes = match std::fs::read(dir.join(file)) {
                Ok(b) => b,
                Err(e) => {
                    failures.push(format!("{corpus}/{name}: cannot read fixture: {e}"));
                    continue;
                }
            };
            let got_sha = hex::encode(Sha256::digest(&bytes));
            if got_sha != want_sha {
                failures.push(format!(
                    "{corpus}/{name}: fixture sha256 {got_sha} != manifest {want_sha}"
                ));
                continue;
            }
            let text = String::from_utf8(bytes).expect("fixture is UTF-8");
            let fx = match histos::json::parse(&text) {
                Ok(Value::Map(m)) => m,
                other => {
                    failures.push(format!(
                        "{corpus}/{name}: fixture does not parse: {other:?}"
                    ));
                    continue;
                }
            };
            let r = match corpus {
                "decisions" => run_decision(&fx),
                "invalid-policy" => run_invalid(&fx),
                "projection" => run_projection(&fx),
                "canonicalization" => run_canonical(&fx),
                other => Err(format!("corpus {other} cannot be run")),
            };
            match r {
                Ok(()) => passed += 1,
                Err(e) => failures.push(format!("{corpus}/{name}: {e}")),
            }
        }
    }
    // Written to stdout itself, not through `println!`, so the test harness does not
    // capture it: the line is in every log, passing or not.
    {
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "histos conformance {version}: {passed}/{total}");
        let _ = out.flush();
    }
    assert!(
        failures.is_empty(),
        "conformance failures:\n{}",
        failures.join("\n")
    );
    assert_eq!(passed, total);
    let want_total = manifest["totals"]["all"]
        .as_u64()
        .expect("manifest totals.all");
    assert_eq!(
        total as u64, want_total,
        "the manifest counts {want_total} cases and {total} ran: every listed case must run"
    );
}

/// A copy of the corpus with one fixture changed by a byte, or one fixture more, is
/// refused by the helper every reader uses, naming the fixture.
#[test]
fn a_modified_or_unlisted_fixture_is_refused() {
    let src = corpus_dir();
    let copy = std::env::temp_dir().join(format!("histos-corpus-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&copy);
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let to = copy.join(path.file_name().unwrap());
        if path.is_dir() {
            std::fs::create_dir_all(&to).unwrap();
            for f in std::fs::read_dir(&path).unwrap() {
                let f = f.unwrap().path();
                std::fs::copy(&f, to.join(f.file_name().unwrap())).unwrap();
            }
        } else {
            std::fs::create_dir_all(&copy).unwrap();
            std::fs::copy(&path, &to).unwrap();
        }
    }
    corpus::verify(&copy).unwrap();
    let fixture = copy.join("decisions/no-principal-denies.json");
    let original = std::fs::read(&fixture).unwrap();
    let mut changed = original.clone();
    changed.push(b'\n');
    std::fs::write(&fixture, &changed).unwrap();
    let e = corpus::verify(&copy).unwrap_err();
    assert!(
        e.contains("no-principal-denies.json") && e.contains("sha256"),
        "{e}"
    );
    std::fs::write(&fixture, &original).unwrap();
    std::fs::write(copy.join("decisions/extra.json"), &original).unwrap();
    let e = corpus::verify(&copy).unwrap_err();
    assert!(e.contains("extra.json") && e.contains("not pinned"), "{e}");
    std::fs::remove_dir_all(&copy).unwrap();
}
