//! Exec overhead of confinement, measured pairwise: each round runs `/bin/true` through
//! `hcp_adapter::run` once per variant, in a rotating order, so that load from other
//! processes on the machine falls on every variant alike. Prints the median and the 90th
//! percentile of each variant and the median of the per-round differences against the
//! baseline: the same spawn unconfined but for the resource limits (RUNTIME §5.4's goal: a
//! confined call of any land adds at most 0.40 ms over it).
//!
//! Each `view_*` variant includes what a call does per exec for it: building its
//! confinement ([`Confinement::for_call`]: the view's plan, the cgroups) and the child's
//! namespaces, mounts and filters.
//!
//! `cargo bench -p hcp-adapter --bench confine_pairs [-- ROUNDS]` (default 2000 rounds);
//! `PREP=1` times the parent's preparation alone.

#![allow(clippy::unwrap_used)]

use hcp_adapter::{
    CallPolicy, CallSandbox, ChildEnv, Confinement, EtcIndex, Invocation, Limits, Network,
    ResourceLimits, pin_bin, run, scan_etc, verify_bin,
};
use hcp_model::Land;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// (name, land, owner, network, write verb).
const VARIANTS: [(&str, Option<Land>, bool, Network, bool); 9] = [
    ("limits only", None, false, Network::Deny, false),
    (
        "view personal deny",
        Some(Land::Personal),
        false,
        Network::Deny,
        false,
    ),
    (
        "view brain deny",
        Some(Land::Brain),
        false,
        Network::Deny,
        false,
    ),
    (
        "view local read deny",
        Some(Land::Local),
        false,
        Network::Deny,
        false,
    ),
    (
        "view local write deny",
        Some(Land::Local),
        false,
        Network::Deny,
        true,
    ),
    (
        "view personal host",
        Some(Land::Personal),
        false,
        Network::Host,
        false,
    ),
    (
        "view personal allow (netns)",
        Some(Land::Personal),
        false,
        Network::Allow,
        false,
    ),
    (
        "view personal owner",
        Some(Land::Personal),
        true,
        Network::Deny,
        false,
    ),
    ("none", None, true, Network::Deny, false),
];

fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(2000);
    let bin = verify_bin(&pin_bin(Path::new("/bin/true")).unwrap()).unwrap();
    let env = ChildEnv::from_parent(std::env::vars_os());
    let world = tempfile::tempdir().unwrap();
    let work = world.path().join("work");
    let hcp_home = world.path().join("hcp");
    let tenant = world.path().join("tenant");
    for d in [&work, &tenant, &hcp_home.join("state")] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::create_dir_all(work.join(".git/hooks")).unwrap();
    let homes: Vec<PathBuf> = std::env::var_os("HOME")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    let etc: EtcIndex = scan_etc();
    let protect: Vec<String> = hcp_adapter::PROTECTED_IN_WORKDIR
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    let limits = ResourceLimits {
        cpu_seconds: 60,
        address_space_bytes: 4 << 30,
        open_files: 1024,
        file_size_bytes: 1 << 30,
        processes: 1024,
        tmp_bytes: 64 << 20,
        memory_bytes: 2 << 30,
    };
    let call = |land: Land, owner: bool, network: Network, writes: bool| {
        Confinement::for_call(
            &CallSandbox {
                land,
                caller: if owner {
                    hcp_model::principal::Kind::Owner
                } else {
                    hcp_model::principal::Kind::Session
                },
                writes,
                workdir: &work,
                tenant_home: Some(&tenant),
                bin: bin.path(),
                interpreters: &[],
                hcp_home: &hcp_home,
                bootstrap: None,
                homes: &homes,
                read: &[],
                write: &[],
                protect_in_workdir: &protect,
                etc: &etc,
            },
            &CallPolicy {
                require: false,
                network,
                limits,
                cgroup: None,
            },
        )
        .unwrap()
        .0
    };
    if std::env::var_os("PREP").is_some() {
        for (name, land, owner, net, writes) in VARIANTS {
            let Some(land) = land else { continue };
            let s = Instant::now();
            for _ in 0..500 {
                drop(call(land, owner, net, writes));
            }
            println!(
                "prep {name}: {:.3} ms",
                s.elapsed().as_secs_f64() * 1e3 / 500.0
            );
        }
        return;
    }
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
        assert_eq!(out.exit_code, 0, "{}", String::from_utf8_lossy(&out.stderr));
    };
    let one = |v: usize| -> Duration {
        let (_, land, owner, net, writes) = VARIANTS[v];
        let start = Instant::now();
        match land {
            None if owner => run_with(None, &work),
            None => run_with(Some(&Confinement::with_limits(&limits)), &work),
            Some(land) => {
                let c = call(land, owner, net, writes);
                let cwd = c.view().map_or(work.clone(), |v| v.home().to_owned());
                run_with(Some(&c), &cwd);
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
    let k = hcp_adapter::KernelSupport::probe();
    println!(
        "landlock: {:?}, processes: {}, pids cgroup: {:?}, memory cgroup: {:?}, uid {}, rounds: {rounds}",
        k.landlock,
        k.processes.describe(),
        k.pids_cgroup,
        k.memory_cgroup,
        // SAFETY: geteuid cannot fail.
        unsafe { libc::geteuid() }
    );
    println!("| variant | median | p90 |");
    println!("|---|---|---|");
    for (v, (name, ..)) in VARIANTS.iter().enumerate() {
        let mut t = times[v].clone();
        t.sort();
        println!(
            "| {name} | {:.3} ms | {:.3} ms |",
            ms(t[t.len() / 2]),
            ms(t[t.len() * 9 / 10])
        );
    }
    println!();
    println!("| pair | median of per-round differences |");
    println!("|---|---|");
    for a in 1..VARIANTS.len() {
        let mut diff: Vec<f64> = times[a]
            .iter()
            .zip(&times[0])
            .map(|(x, y)| ms(*x) - ms(*y))
            .collect();
        diff.sort_by(f64::total_cmp);
        println!(
            "| {} − {} | {:+.3} ms |",
            VARIANTS[a].0,
            VARIANTS[0].0,
            diff[diff.len() / 2]
        );
    }
}
