//! Exec overhead of confinement, measured pairwise: each round runs `/bin/true` through
//! `hcp_adapter::run` once per variant, in a rotating order, so that load from other
//! processes on the machine falls on every variant alike. Prints the median and the 90th
//! percentile of each variant and the median of the per-round differences against
//! `none`.
//!
//! `cargo bench -p hcp-adapter --bench confine_pairs [-- ROUNDS]` (default 2000 rounds)

#![allow(clippy::unwrap_used)]

use hcp_adapter::{
    ChildEnv, Confinement, Invocation, LandlockSupport, Limits, Network, PrivateTmp,
    ResourceLimits, SandboxPaths, SandboxPolicy, pin_bin, run, verify_bin,
};
use std::path::Path;
use std::time::{Duration, Instant};

const VARIANTS: [&str; 5] = [
    "none",
    "limits",
    "landlock_and_limits",
    "landlock_limits_private_tmp",
    "landlock_limits_private_tmp_in_system_tmp",
];

fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(2000);
    let bin = verify_bin(&pin_bin(Path::new("/bin/true")).unwrap()).unwrap();
    let env = ChildEnv::from_parent(std::env::vars_os());
    let work = tempfile::tempdir().unwrap();
    let limits = ResourceLimits {
        cpu_seconds: 60,
        address_space_bytes: 4 << 30,
        open_files: 1024,
        file_size_bytes: 1 << 30,
        processes: 1024,
    };
    let policy = SandboxPolicy {
        require: true,
        network: Network::Allow,
        limits,
    };
    let shared_tmp = PrivateTmp::create_in(&std::env::temp_dir()).unwrap();
    let sandbox = |tmpdir: &Path| {
        Confinement::for_local_land(
            &SandboxPaths {
                workdir: work.path(),
                tmpdir,
                bin: bin.path(),
                extra_ro: &[],
                protected: &[],
                not_above: &[],
            },
            &policy,
        )
        .unwrap()
        .0
    };
    let run_with = |confine: Option<&Confinement>| {
        let out = run(&Invocation {
            bin: &bin,
            argv0: "true".into(),
            args: Vec::new(),
            env: &env,
            cwd: work.path().to_owned(),
            limits: Limits::default(),
            confine,
            cancel: None,
        })
        .unwrap();
        assert_eq!(out.exit_code, 0);
    };
    // Each variant includes what exec does per call for it: building the confinement.
    let one = |v: usize| -> Duration {
        let start = Instant::now();
        match v {
            0 => run_with(None),
            1 => run_with(Some(&Confinement::with_limits(&limits))),
            2 => run_with(Some(&sandbox(shared_tmp.path()))),
            // As `hcp exec` does: the private TMPDIR on tmpfs when there is one.
            3 => {
                let t = PrivateTmp::create_in(&PrivateTmp::default_base()).unwrap();
                run_with(Some(&sandbox(t.path())));
                t.remove().unwrap();
            }
            // For comparison: in the system temporary directory, whatever it is on.
            _ => {
                let t = PrivateTmp::create_in(&std::env::temp_dir()).unwrap();
                run_with(Some(&sandbox(t.path())));
                t.remove().unwrap();
            }
        }
        start.elapsed()
    };
    for v in 0..VARIANTS.len() {
        for _ in 0..50 {
            one(v); // warm up
        }
    }
    let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(rounds); VARIANTS.len()];
    for r in 0..rounds {
        for k in 0..VARIANTS.len() {
            let v = (r + k) % VARIANTS.len();
            times[v].push(one(v));
        }
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!("landlock: {:?}, rounds: {rounds}", LandlockSupport::probe());
    println!("| variant | median | p90 | median of per-round difference to `none` |");
    println!("|---|---|---|---|");
    for (v, name) in VARIANTS.iter().enumerate() {
        let mut t = times[v].clone();
        t.sort();
        let mut diff: Vec<f64> = times[v]
            .iter()
            .zip(&times[0])
            .map(|(a, b)| ms(*a) - ms(*b))
            .collect();
        diff.sort_by(f64::total_cmp);
        println!(
            "| {name} | {:.3} ms | {:.3} ms | {:+.3} ms |",
            ms(t[t.len() / 2]),
            ms(t[t.len() * 9 / 10]),
            diff[diff.len() / 2]
        );
    }
}
