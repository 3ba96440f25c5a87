//! Exec overhead of confinement, measured pairwise: each round runs `/bin/true` through
//! `hcp_adapter::run` once per variant, in a rotating order, so that load from other
//! processes on the machine falls on every variant alike. Prints the median and the 90th
//! percentile of each variant and the median of the per-round differences against a
//! baseline variant.
//!
//! The variants named `main_*` are the confinement `hcp exec` applied before
//! `Confinement::for_call` (still in the library: `for_local_land`, `with_limits`);
//! `call_*` are `for_call`, which every land gets from now on. Each includes what a call
//! does per exec for it: building the confinement and, where it has one, making and
//! removing the private `TMPDIR` (tmpfs).
//!
//! `cargo bench -p hcp-adapter --bench confine_pairs [-- ROUNDS]` (default 2000 rounds)

#![allow(clippy::unwrap_used)]

use hcp_adapter::{
    CallPolicy, CallSandbox, ChildEnv, Confinement, Invocation, KernelSupport, Limits, Network,
    PrivateTmp, ResourceLimits, SandboxPaths, SandboxPolicy, pin_bin, run, verify_bin,
};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const VARIANTS: [&str; 7] = [
    "none",
    "main_personal (limits)",
    "call_personal",
    "main_local (landlock, limits, private tmp)",
    "call_local",
    "call_personal_owner",
    "call_personal_without_pids_cgroup",
];

/// (variant, baseline) pairs whose per-round differences are printed.
const PAIRS: [(usize, usize); 5] = [(2, 1), (4, 3), (5, 1), (2, 6), (1, 0)];

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
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(hcp_home.join("state")).unwrap();
    let homes: Vec<PathBuf> = std::env::var_os("HOME")
        .map(PathBuf::from)
        .into_iter()
        .collect();
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
    let call_policy = CallPolicy {
        require: true,
        network: None,
        limits,
    };
    let main_local = |tmpdir: &Path| {
        Confinement::for_local_land(
            &SandboxPaths {
                workdir: &work,
                tmpdir,
                bin: bin.path(),
                extra_ro: &[],
                protected: std::slice::from_ref(&hcp_home),
                not_above: &homes,
            },
            &policy,
        )
        .unwrap()
        .0
    };
    let mut no_cgroup = KernelSupport::probe();
    no_cgroup.pids_cgroup = Ok(None);
    let call_with = |support: &KernelSupport, land, owner, tmpdir: &Path| {
        Confinement::for_call_with(
            support,
            &CallSandbox {
                land,
                owner,
                workdir: &work,
                tmpdir,
                bin: bin.path(),
                hcp_home: &hcp_home,
                bootstrap: None,
                homes: &homes,
                not_above: &homes,
                other_sandboxes: &[],
                protect: &[],
                read: &[],
                write: &[],
                extra_ro: &[],
            },
            &call_policy,
        )
        .unwrap()
        .0
    };
    // As `for_call` does: what the kernel offers is asked on every call.
    let call = |land, owner, tmpdir: &Path| call_with(&KernelSupport::probe(), land, owner, tmpdir);
    if std::env::var_os("PREP").is_some() {
        let t = PrivateTmp::create_in(&PrivateTmp::default_base()).unwrap();
        let time = |name: &str, f: &mut dyn FnMut()| {
            let s = Instant::now();
            for _ in 0..500 {
                f();
            }
            println!(
                "prep {name}: {:.3} ms",
                s.elapsed().as_secs_f64() * 1e3 / 500.0
            );
        };
        time("probe", &mut || drop(KernelSupport::probe()));
        time("personal", &mut || {
            drop(call(hcp_model::Land::Personal, false, t.path()))
        });
        time("local", &mut || {
            drop(call(hcp_model::Land::Local, false, t.path()))
        });
        time("main_local", &mut || drop(main_local(t.path())));
        return;
    }
    let run_with = |confine: Option<&Confinement>| {
        let out = run(&Invocation {
            bin: &bin,
            argv0: "true".into(),
            args: Vec::new(),
            env: &env,
            cwd: work.clone(),
            limits: Limits::default(),
            confine,
            cancel: None,
        })
        .unwrap();
        assert_eq!(out.exit_code, 0, "{}", String::from_utf8_lossy(&out.stderr));
    };
    let with_tmp = |f: &dyn Fn(&Path) -> Confinement| {
        let t = PrivateTmp::create_in(&PrivateTmp::default_base()).unwrap();
        run_with(Some(&f(t.path())));
        t.remove().unwrap();
    };
    let one = |v: usize| -> Duration {
        let start = Instant::now();
        match v {
            0 => run_with(None),
            1 => run_with(Some(&Confinement::with_limits(&limits))),
            2 => with_tmp(&|t| call(hcp_model::Land::Personal, false, t)),
            3 => with_tmp(&|t| main_local(t)),
            4 => with_tmp(&|t| call(hcp_model::Land::Local, false, t)),
            5 => with_tmp(&|t| call(hcp_model::Land::Personal, true, t)),
            _ => with_tmp(&|t| call_with(&no_cgroup, hcp_model::Land::Personal, false, t)),
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
    let k = KernelSupport::probe();
    println!(
        "landlock: {:?}, processes: {}, pids cgroup: {:?}, uid {}, rounds: {rounds}",
        k.landlock,
        k.processes.describe(),
        k.pids_cgroup,
        // SAFETY: geteuid cannot fail.
        unsafe { libc::geteuid() }
    );
    println!("| variant | median | p90 |");
    println!("|---|---|---|");
    for (v, name) in VARIANTS.iter().enumerate() {
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
    for (a, b) in PAIRS {
        let mut diff: Vec<f64> = times[a]
            .iter()
            .zip(&times[b])
            .map(|(x, y)| ms(*x) - ms(*y))
            .collect();
        diff.sort_by(f64::total_cmp);
        println!(
            "| {} − {} | {:+.3} ms |",
            VARIANTS[a],
            VARIANTS[b],
            diff[diff.len() / 2]
        );
    }
}
