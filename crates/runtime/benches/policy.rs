//! The runtime policy's per-call costs (RUNTIME §7, issue 14), never a timed test: what a
//! session call pays to get its runtime policy — parsed, screened and hashed from source,
//! or read back from the compiled cache — and to check its verb against a tool lock. Run
//! with `cargo bench -p hcp-runtime --bench policy`; figures go to BENCHMARKS.md.
//!
//! The policies are the engine's 12-tool bench policy (`crates/histos/benches`), as JSON
//! and as YAML, in a store of their own. The lock is that of 6 packs of 5 verbs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use criterion::{Criterion, criterion_group, criterion_main};
use hcp_runtime::Runtime;
use hcp_runtime::policy::{CacheUse, contracts, lock, source};
use hcp_store::Home;
use hcp_store::pack::{self, BinLookup, InstallOptions};
use std::hint::black_box;
use std::path::{Path, PathBuf};

fn histos_bench(name: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../histos/benches")
            .join(name),
    )
    .unwrap()
}

/// A store holding `text` as `policy.EXT`, its compiled entry written.
fn store(dir: &Path, ext: &str, text: &str) -> Home {
    let home = Home::open(dir.join(format!("home-{ext}"))).unwrap();
    std::fs::create_dir_all(home.root()).unwrap();
    std::fs::write(home.root().join(format!("policy.{ext}")), text).unwrap();
    let rp = source::load(&home).unwrap().unwrap();
    assert_eq!(rp.cache, CacheUse::Written);
    assert_eq!(source::load(&home).unwrap().unwrap().cache, CacheUse::Hit);
    home
}

fn load(c: &mut Criterion) {
    let d = tempfile::tempdir().unwrap();
    let mut g = c.benchmark_group("runtime_policy_load");
    for (ext, file) in [
        ("json", "policy-12-tools.json"),
        ("yaml", "policy-12-tools.yaml"),
    ] {
        let home = store(d.path(), ext, &histos_bench(file));
        g.bench_function(format!("{ext}_compiled_cache"), |b| {
            b.iter(|| black_box(source::load(&home).unwrap()))
        });
        g.bench_function(format!("{ext}_from_source"), |b| {
            b.iter(|| black_box(source::load_uncached(&home).unwrap()))
        });
    }
    g.finish();
}

/// Writes a lint-clean composite pack `id` of 5 read verbs (program: bare `cat`).
fn write_pack(root: &Path, id: &str) -> PathBuf {
    let dir = root.join(id);
    std::fs::create_dir_all(&dir).unwrap();
    let verbs = ["list", "show", "count", "find", "peek"];
    let sv: Vec<String> = verbs
        .iter()
        .map(|v| {
            format!(
                r#""{v}": {{"description": "{v} things.", "cli": ["cat", "--", "{{{{file}}}}"]}}"#
            )
        })
        .collect();
    let pv: Vec<String> = verbs
        .iter()
        .map(|v| format!(r#""{v}": {{"operation": "read", "privacy": {{"land": "local"}}}}"#))
        .collect();
    std::fs::write(
        dir.join("surface.json"),
        format!(
            r#"{{"id": "{id}", "name": "Bench", "kind": "composite", "binding": {{"mode": "local"}}, "verbs": {{{}}}}}"#,
            sv.join(",")
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("policy.json"),
        format!(
            r#"{{"surface_id": "{id}", "version": 1, "verbs": {{{}}}}}"#,
            pv.join(",")
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("HARNESS.md"),
        "# Bench\n\nBench.\n\n## Hot path\n\n| verb | does |\n|---|---|\n| list | lists |\n\n## Anti-patterns\n\n- none\n",
    )
    .unwrap();
    dir
}

fn tool_lock(c: &mut Criterion) {
    let d = tempfile::tempdir().unwrap();
    let rt = Runtime::open(Home::open(d.path().join("home")).unwrap());
    let opts = InstallOptions {
        activate: true,
        lookup: BinLookup {
            path: Some("/usr/bin:/bin".into()),
            cwd: "/".into(),
        },
        ..InstallOptions::default()
    };
    for i in 0..6 {
        let dir = write_pack(d.path(), &format!("p{i}"));
        hcp_runtime::install::install(&rt, &dir, &opts).unwrap();
    }
    let packs = contracts::active_packs(rt.home(), &[]).unwrap();
    let sources = lock::sources(&packs).unwrap();
    lock::write(rt.home(), &lock::build(&sources, None)).unwrap();
    let p3 = pack::load(rt.home(), "p3").unwrap();
    let mut g = c.benchmark_group("tool_lock");
    assert!(lock::read(rt.home()).unwrap().is_some());
    g.bench_function("read_30_verbs_indexed", |b| {
        b.iter(|| black_box(lock::read(rt.home()).unwrap()))
    });
    let path = lock::lock_path(rt.home());
    g.bench_function("read_30_verbs_parsed", |b| {
        b.iter(|| black_box(histos::lock::Lock::load_path(&path).unwrap()))
    });
    let l = lock::read(rt.home()).unwrap().unwrap();
    g.bench_function("check_one_call", |b| {
        b.iter(|| lock::check_call(&l, &p3, "find").unwrap())
    });
    g.finish();
}

criterion_group!(benches, load, tool_lock);
criterion_main!(benches);
