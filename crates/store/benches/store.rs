//! Store benchmarks (never a timed test): lint of one pack, install of one pack, and
//! listing a store of 1,000 installed packs. Run with
//! `cargo bench -p hcp-store --bench store`; figures go to BENCHMARKS.md.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use criterion::{Criterion, criterion_group, criterion_main};
use hcp_store::Home;
use hcp_store::pack::{self, BinLookup, CheckedPack, InstallOptions};
use std::hint::black_box;
use std::path::{Path, PathBuf};

/// Writes a lint-clean composite pack `id` (programs: bare `cat` and `true`) under `root`.
fn write_pack(root: &Path, id: &str) -> PathBuf {
    let dir = root.join(id);
    std::fs::create_dir_all(&dir).unwrap();
    let verbs = ["list", "show", "count", "add", "wipe"];
    let surface_verbs: Vec<String> = verbs
        .iter()
        .map(|v| {
            format!(r#""{id}.{v}": {{"description": "{v}", "cli": ["cat", "--", "{{{{file}}}}"]}}"#)
        })
        .collect();
    let policy_verbs: Vec<String> = verbs
        .iter()
        .map(|v| format!(r#""{id}.{v}": {{"operation": "read", "privacy": {{"land": "local"}}}}"#))
        .collect();
    std::fs::write(
        dir.join("surface.json"),
        format!(
            r#"{{"id": "{id}", "name": "Bench {id}", "kind": "composite", "binding": {{"mode": "local"}}, "verbs": {{{}}}}}"#,
            surface_verbs.join(",\n")
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("policy.json"),
        format!(
            r#"{{"surface_id": "{id}", "version": 1, "verbs": {{{}}}}}"#,
            policy_verbs.join(",\n")
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("HARNESS.md"),
        "# Bench\n\nA pack for benchmarks.\n\n## Hot path\n\n| a | b |\n|---|---|\n| x | y |\n\n## Anti-patterns\n\n- none\n",
    )
    .unwrap();
    dir
}

/// The pack in `dir` as install takes it (read and parsed; lint is the runtime's).
fn checked(dir: &Path) -> CheckedPack {
    let files = hcp_model::PACK_FILES.map(|n| std::fs::read(dir.join(n)).unwrap());
    CheckedPack::parse(files, dir.canonicalize().unwrap()).unwrap()
}

fn lookup() -> BinLookup {
    BinLookup {
        path: Some("/usr/local/bin:/usr/bin:/bin".into()),
        cwd: PathBuf::from("/"),
    }
}

fn benches(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let one = write_pack(&src, "one");

    c.bench_function("lint one pack (read_pack + check)", |b| {
        b.iter(|| {
            let s = hcp_lint::read_pack(black_box(&one)).unwrap();
            black_box(hcp_lint::check(&s))
        })
    });

    let home = Home::open(tmp.path().join("home-install")).unwrap();
    let opts = InstallOptions {
        force: true,
        lookup: lookup(),
        ..InstallOptions::default()
    };
    let one_checked = checked(&one);
    c.bench_function("install one pack (--force, fsync'd)", |b| {
        b.iter(|| black_box(pack::install(&home, &one_checked, &opts).unwrap()))
    });

    let big = Home::open(tmp.path().join("home-1000")).unwrap();
    let opts = InstallOptions {
        lookup: lookup(),
        ..InstallOptions::default()
    };
    for i in 0..1000 {
        let d = write_pack(&src, &format!("pack-{i:04}"));
        pack::install(&big, &checked(&d), &opts).unwrap();
    }
    c.bench_function("list 1000 installed packs (library)", |b| {
        b.iter(|| {
            let l = pack::list(black_box(&big)).unwrap();
            assert_eq!(l.len(), 1000);
            black_box(l)
        })
    });
    c.bench_function("load one pack of 1000 (exec's read)", |b| {
        b.iter(|| black_box(pack::load(&big, "pack-0500").unwrap()))
    });
}

criterion_group! {
    name = store;
    config = Criterion::default().sample_size(30);
    targets = benches
}
criterion_main!(store);
