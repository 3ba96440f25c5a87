//! Exec overhead of confinement, measured pairwise: each round runs `/bin/true` once per
//! arm, in a rotating order, so that load from other processes on the machine falls on
//! every arm alike. Prints the median and the 90th percentile of each arm and the median of
//! the per-round differences against the baseline (`limits only`: the same spawn through
//! `hcp_adapter::run`, unconfined but for the resource limits; issue 23's goal: a confined
//! call of any land adds at most 0.40 ms over the same spawn unconfined, `none`), then the
//! view of each land beside the mechanisms' floor, as a table ready for BENCHMARKS.md.
//!
//! - `view …`: what a call does per exec for it: building its confinement
//!   ([`Confinement::for_call`]: the view's plan, the cgroups) and the child's namespaces,
//!   mounts and filters.
//! - `none`: `hcp_adapter::run` with no confinement at all (plain).
//! - `raw`: a bare `clone(CLONE_VM | CLONE_VFORK)` + `execve`, no pipes (the floor's child
//!   without its mechanisms).
//! - `floor …`: the mechanisms alone for the view of that land (see the `floor` module):
//!   mount, PID and IPC namespaces (and a user namespace for an ordinary user; a network
//!   namespace for `netns`), a tmpfs root, as many read-only binds of the same paths as the
//!   land's view makes, `pivot_root`, `execve` — raw system calls, nothing else.
//!
//! - `full floor …`: the floor with the rest of what the child is given, as system calls
//!   alone: its `/proc`, the limits, the parent-death signal, the capability sets emptied,
//!   `no_new_privs`, Landlock's scopes, hcp's seccomp program (see the `floor` module).
//!
//! Columns of the floor table: `floor − raw` is what the kernel's mechanisms cost alone;
//! `view − none` what the view costs over the same spawn unconfined; `above the floor`
//! their difference, what hcp adds (seccomp, Landlock, capabilities, limits, cgroups,
//! `/proc`, the plan, the signal reset). The last table sets the view beside the full
//! floor: `above the full floor` is what hcp's own code adds (the plan, the pipes and the
//! channel, the cgroup, the masks in `/proc`, the signal reset, reaping).
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

mod floor;

/// One arm of the bench.
#[derive(Clone, Copy)]
enum Arm {
    /// The spawn through `hcp_adapter::run` with the resource limits and nothing else.
    Limits,
    /// The spawn through `hcp_adapter::run`, nothing at all (`plain`).
    Plain,
    /// A call of the land: its confinement built and its child confined.
    View {
        land: Land,
        owner: bool,
        network: Network,
        writes: bool,
    },
    /// The bare `clone` + `execve` of the floor's child, no namespace, no mount.
    Raw,
    /// The mechanisms alone for the view of the land (see `floor`), with a network
    /// namespace when `netns`.
    Floor {
        land: Land,
        writes: bool,
        netns: bool,
    },
    /// The same with the rest of the child's mechanisms (`/proc`, limits, capabilities,
    /// `no_new_privs`, Landlock, seccomp: `floor::Floor::full_of_view`).
    Full { land: Land, writes: bool },
}

const fn view(land: Land, owner: bool, network: Network, writes: bool) -> Arm {
    Arm::View {
        land,
        owner,
        network,
        writes,
    }
}

const fn floor(land: Land, writes: bool, netns: bool) -> Arm {
    Arm::Floor {
        land,
        writes,
        netns,
    }
}

/// The arms, by name; the first is the baseline of the differences.
const ARMS: [(&str, Arm); 17] = [
    ("limits only", Arm::Limits),
    (
        "view personal deny",
        view(Land::Personal, false, Network::Deny, false),
    ),
    (
        "view brain deny",
        view(Land::Brain, false, Network::Deny, false),
    ),
    (
        "view local read deny",
        view(Land::Local, false, Network::Deny, false),
    ),
    (
        "view local write deny",
        view(Land::Local, false, Network::Deny, true),
    ),
    (
        "view personal host",
        view(Land::Personal, false, Network::Host, false),
    ),
    (
        "view personal allow (netns)",
        view(Land::Personal, false, Network::Allow, false),
    ),
    (
        "view personal owner",
        view(Land::Personal, true, Network::Deny, false),
    ),
    ("none", Arm::Plain),
    ("raw", Arm::Raw),
    ("floor personal", floor(Land::Personal, false, false)),
    ("floor brain", floor(Land::Brain, false, false)),
    ("floor local read", floor(Land::Local, false, false)),
    ("floor local write", floor(Land::Local, true, false)),
    ("floor personal netns", floor(Land::Personal, false, true)),
    (
        "full floor personal",
        Arm::Full {
            land: Land::Personal,
            writes: false,
        },
    ),
    (
        "full floor local write",
        Arm::Full {
            land: Land::Local,
            writes: true,
        },
    ),
];

/// (view arm, its full floor arm) of the full floor's table, by name.
const BESIDE_FULL: [(&str, &str); 2] = [
    ("view personal deny", "full floor personal"),
    ("view local write deny", "full floor local write"),
];

/// (view arm, its floor arm) of the floor table, by name.
const BESIDE: [(&str, &str); 7] = [
    ("view personal deny", "floor personal"),
    ("view brain deny", "floor brain"),
    ("view local read deny", "floor local read"),
    ("view local write deny", "floor local write"),
    ("view personal host", "floor personal"),
    ("view personal allow (netns)", "floor personal netns"),
    ("view personal owner", "floor personal"),
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
        for (name, arm) in ARMS {
            let Arm::View {
                land,
                owner,
                network,
                writes,
            } = arm
            else {
                continue;
            };
            let s = Instant::now();
            for _ in 0..500 {
                drop(call(land, owner, network, writes));
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
    // The floors' children, prepared once (the plan of a view of the land, as a call makes
    // it; the same host paths).
    let floor_base = world.path().join("floor-root");
    std::fs::create_dir_all(&floor_base).unwrap();
    let floors: Vec<Option<floor::Floor>> = ARMS
        .iter()
        .map(|(_, arm)| match *arm {
            Arm::Raw => Some(floor::Floor::raw(bin.path())),
            Arm::Floor {
                land,
                writes,
                netns,
            } => {
                let c = call(land, false, Network::Deny, writes);
                Some(floor::Floor::of_view(
                    c.view().unwrap(),
                    bin.path(),
                    &floor_base,
                    netns,
                ))
            }
            Arm::Full { land, writes } => {
                let c = call(land, false, Network::Deny, writes);
                Some(floor::Floor::full_of_view(
                    c.view().unwrap(),
                    bin.path(),
                    &floor_base,
                ))
            }
            _ => None,
        })
        .collect();
    let one = |v: usize| -> Duration {
        let start = Instant::now();
        match ARMS[v].1 {
            Arm::Plain => run_with(None, &work),
            Arm::Limits => run_with(Some(&Confinement::with_limits(&limits)), &work),
            Arm::View {
                land,
                owner,
                network,
                writes,
            } => {
                let c = call(land, owner, network, writes);
                let cwd = c.view().map_or(work.clone(), |v| v.home().to_owned());
                run_with(Some(&c), &cwd);
            }
            Arm::Raw | Arm::Floor { .. } | Arm::Full { .. } => floors[v].as_ref().unwrap().run(),
        }
        start.elapsed()
    };
    let warm = if rounds < 50 { 1 } else { 50 };
    for v in 0..ARMS.len() {
        for _ in 0..warm {
            one(v);
        }
    }
    let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(rounds); ARMS.len()];
    for r in 0..rounds {
        for k in 0..ARMS.len() {
            let v = (r + k) % ARMS.len();
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
    println!();
    println!("| variant | median | p90 | − {} |", ARMS[0].0);
    println!("|---|---|---|---|");
    let index = |name: &str| ARMS.iter().position(|(n, _)| *n == name).unwrap();
    // The median of the per-round differences a − b, in ms.
    let diff = |a: usize, b: usize| -> f64 {
        let mut d: Vec<f64> = times[a]
            .iter()
            .zip(&times[b])
            .map(|(x, y)| ms(*x) - ms(*y))
            .collect();
        d.sort_by(f64::total_cmp);
        d[d.len() / 2]
    };
    for (v, (name, _)) in ARMS.iter().enumerate() {
        let mut t = times[v].clone();
        t.sort();
        let against = if v == 0 {
            "—".to_owned()
        } else {
            format!("{:+.3} ms", diff(v, 0))
        };
        let binds = floors[v]
            .as_ref()
            .filter(|f| f.binds() > 0)
            .map_or(String::new(), |f| {
                format!(
                    " ({} binds; the view: {} mount calls)",
                    f.binds(),
                    f.view_mount_calls()
                )
            });
        println!(
            "| {name}{binds} | {:.3} ms | {:.3} ms | {against} |",
            ms(t[t.len() / 2]),
            ms(t[t.len() * 9 / 10])
        );
    }
    // The view beside the mechanisms' floor: what the kernel's mechanisms cost alone
    // (floor − raw), what the view costs over the same spawn unconfined (view − none), and
    // what hcp adds above the floor (the difference of the two).
    println!();
    println!(
        "| land | floor − raw (the mechanisms) | view − none (the view) | view − limits only | above the floor |"
    );
    println!("|---|---|---|---|---|");
    let (none, raw) = (index("none"), index("raw"));
    for (v, f) in BESIDE {
        let (v, f) = (index(v), index(f));
        let mechanisms = diff(f, raw);
        let the_view = diff(v, none);
        println!(
            "| {} | {mechanisms:+.3} ms | {the_view:+.3} ms | {:+.3} ms | {:+.3} ms |",
            ARMS[v].0.trim_start_matches("view "),
            diff(v, 0),
            the_view - mechanisms
        );
    }
    // The view beside the full floor: every mechanism of the child as system calls alone.
    println!();
    println!(
        "| land | full floor − raw (every mechanism) | view − none (the view) | above the full floor |"
    );
    println!("|---|---|---|---|");
    for (v, f) in BESIDE_FULL {
        let (v, f) = (index(v), index(f));
        let mechanisms = diff(f, raw);
        let the_view = diff(v, none);
        println!(
            "| {} | {mechanisms:+.3} ms | {the_view:+.3} ms | {:+.3} ms |",
            ARMS[v].0.trim_start_matches("view "),
            the_view - mechanisms
        );
    }
}
