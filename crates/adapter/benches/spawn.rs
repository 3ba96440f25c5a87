//! Spawn cost of `hcp_adapter::run` against a bare `std::process::Command`, measured in
//! the same run, plus the cost of the pinned-bin check with and without its fast path.
//!
//! `cargo bench -p hcp-adapter --bench spawn`

#![allow(clippy::unwrap_used)]

use criterion::{Criterion, criterion_group, criterion_main};
use hcp_adapter::{
    CallPolicy, CallSandbox, ChildEnv, Confinement, Invocation, Limits, Network, ResourceLimits,
    Sha256Digest, StatFingerprint, pin_bin, run, verify_bin,
};
use std::hint::black_box;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

fn spawn(c: &mut Criterion) {
    let mut g = c.benchmark_group("spawn_true");
    let pin = pin_bin(Path::new("/bin/true")).unwrap();
    let env = ChildEnv::from_parent(std::env::vars_os());

    g.bench_function("std_command_status", |b| {
        b.iter(|| {
            Command::new("/bin/true")
                .env_clear()
                .stdin(Stdio::null())
                .status()
                .unwrap()
        })
    });
    g.bench_function("std_command_piped_output", |b| {
        b.iter(|| {
            Command::new("/bin/true")
                .env_clear()
                .envs(env.iter())
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .process_group(0)
                .output()
                .unwrap()
        })
    });
    g.bench_function("adapter_verify_and_run", |b| {
        b.iter(|| {
            let bin = verify_bin(&pin).unwrap();
            let out = run(&Invocation {
                bin: &bin,
                argv0: "true".into(),
                args: Vec::new(),
                env: &env,
                cwd: "/".into(),
                limits: Limits::default(),
                confine: None,
                cancel: None,
                egress: None,
            })
            .unwrap();
            black_box(out.exit_code)
        })
    });
    g.finish();
}

fn verify(c: &mut Criterion) {
    // A 4 MiB bin: hashing it is the cost the fingerprint avoids.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big");
    std::fs::write(&path, vec![0x5a_u8; 4 * 1024 * 1024]).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let hashed = pin_bin(&path).unwrap();
    let meta = std::fs::metadata(&path).unwrap();
    // Forged as if the file had aged past the racy margin.
    let fast = hcp_adapter::BinPin {
        fingerprint: Some(StatFingerprint {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
            ctime_ns: meta.ctime() * 1_000_000_000 + meta.ctime_nsec(),
        }),
        sha256: Sha256Digest([0; 32]),
        ..hashed.clone()
    };
    let mut g = c.benchmark_group("verify_4mib");
    g.bench_function("hash", |b| b.iter(|| verify_bin(&hashed).unwrap()));
    g.bench_function("fingerprint", |b| b.iter(|| verify_bin(&fast).unwrap()));
    g.finish();
}

/// Exec overhead of confinement in one run: the same `/bin/true` through `run` with no
/// confinement, with resource limits only, and with a `personal` call's view (built per
/// call, as exec does). `confine_pairs` measures every land and mode pairwise.
fn confine(c: &mut Criterion) {
    let mut g = c.benchmark_group("confine_true");
    let bin = verify_bin(&pin_bin(Path::new("/bin/true")).unwrap()).unwrap();
    let env = ChildEnv::from_parent(std::env::vars_os());
    let world = tempfile::tempdir().unwrap();
    let tenant = world.path().join("tenant");
    std::fs::create_dir_all(&tenant).unwrap();
    let etc = hcp_adapter::scan_etc();
    let limits = ResourceLimits {
        cpu_seconds: 60,
        address_space_bytes: 4 << 30,
        open_files: 1024,
        file_size_bytes: 1 << 30,
        processes: 1024,
        tmp_bytes: 64 << 20,
        memory_bytes: 2 << 30,
    };
    let run_with = |confine: Option<&Confinement>, cwd: &Path| {
        let out = run(&Invocation {
            bin: &bin,
            argv0: "true".into(),
            args: Vec::new(),
            env: &env,
            cwd: cwd.to_owned(),
            limits: Limits::default(),
            confine,
            cancel: None,
            egress: None,
        })
        .unwrap();
        assert_eq!(out.exit_code, 0);
    };
    let view = || {
        let (c, report) = Confinement::for_call(
            &CallSandbox {
                land: hcp_model::Land::Personal,
                caller: hcp_model::principal::Kind::Session,
                writes: false,
                workdir: world.path(),
                tenant_home: Some(&tenant),
                bin: bin.path(),
                interpreters: &[],
                hcp_home: world.path(),
                bootstrap: None,
                homes: &[],
                read: &[],
                write: &[],
                protect_in_workdir: &[],
                etc: &etc,
            },
            &CallPolicy {
                require: false,
                network: Network::Deny,
                limits,
                cgroup: None,
            },
        )
        .unwrap();
        black_box(report);
        c
    };
    g.bench_function("none", |b| b.iter(|| run_with(None, world.path())));
    g.bench_function("limits", |b| {
        b.iter(|| run_with(Some(&Confinement::with_limits(&limits)), world.path()))
    });
    g.bench_function("view_personal", |b| {
        b.iter(|| run_with(Some(&view()), Path::new(hcp_adapter::VIEW_HOME)))
    });
    g.finish();
}

criterion_group!(benches, spawn, verify, confine);
criterion_main!(benches);
