//! `cargo xtask bench agent`: an agent's call against the owner's call of the same verb on
//! the same store (issue 14's goal: the ratio of medians ≤ 1.10).
//!
//! Four stores, each with the `probe` pack (one `personal`-land verb `probe.say` running
//! `hcp-example-echo say --json -- hi`), a session of principal `bench-agent` with role
//! `agent`, a grant of `verb.exec.read` on `probe`, and a runtime policy: the 12-tool
//! benchmark policy of `crates/histos/benches/` plus `probe.say` (13 tools, `rate_limit`
//! on the verb, allowed to role `agent`):
//!
//! * `1 pack, JSON`: `policy.json`;
//! * `1 pack, YAML`: the same policy as `policy.yaml`;
//! * `N packs, JSON` and `N packs, YAML`: the same with `--packs` more active packs.
//!
//! On each store two arms: `owner` (`hcp exec probe.say hi`, no session: the runtime
//! policy does not govern the owner, no session or grant is read) and `agent` (the same
//! with `HCP_SESSION`: session, grants, policy (its compiled cache), the tool lock when
//! present, the counter, the intent naming the counter slot it spends). Each round runs
//! every arm once in a shuffled order; the ratio is taken of the medians (and of the mean
//! CPU time) of the two arms of one store, measured in the same rounds. A last row,
//! `sync`, times in process one `write` + `fdatasync` of 500 bytes beside the stores: what
//! the disk charges for the durable intent both arms write.
//!
//! With `--baseline BIN` (another build of hcp, e.g. main's), a fifth store of 1 pack and
//! the JSON policy is made by that build, and its owner and agent arms run in the same
//! rounds: the report then gives this build's agent call (and owner call) over the
//! baseline's, medians and CPU, so the agent's call is measured against main in one run.
//!
//! Before timing, every arm's output is checked to be the bin's own; after timing, `hcp
//! audit verify` must pass on every store (each with the build that made it).

use crate::bench_exec::{self, Rng, Setup, Stats, WARMUP, load_average, stats, timed};
use anyhow::{Context, Result, ensure};
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Arguments of `cargo xtask bench agent`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Timed runs of each arm.
    #[arg(long, default_value_t = 150)]
    pub runs: usize,
    /// Packs installed beside `probe` in the larger stores.
    #[arg(long, default_value_t = 1000)]
    pub packs: usize,
    /// Print one line of JSON after the table.
    #[arg(long)]
    pub json: bool,
    /// Keep the scratch directory (the stores and the session token) and print its path,
    /// for profiling.
    #[arg(long)]
    pub keep: bool,
    /// Use the release binaries already in the target directory instead of building.
    #[arg(long)]
    pub no_build: bool,
    /// Another build of hcp (e.g. main's release `hcp`): its own store of 1 pack with the
    /// JSON policy, its owner and agent arms in the same rounds, and the ratios of this
    /// build to it.
    #[arg(long, value_name = "BIN")]
    pub baseline: Option<PathBuf>,
}

/// The verb and its value.
const EXEC_ARGS: [&str; 3] = ["exec", "probe.say", "hi"];
/// The principal of the session.
const AGENT: &str = "bench-agent";

/// One store of the benchmark.
struct Store {
    label: String,
    key: &'static str,
    home: PathBuf,
    /// The hcp that made it and runs its arms (this build, or the `--baseline`).
    bin: PathBuf,
}

/// Runs the benchmark and prints a Markdown table (and a JSON line with `--json`).
///
/// # Errors
/// When a build fails, a store cannot be made, any run fails or `hcp audit verify` fails.
pub fn run(args: &Args) -> Result<()> {
    ensure!(args.runs >= 10, "`--runs` must be at least 10");
    let root = bench_exec::workspace_root();
    let release = bench_exec::release_dir()?;
    if !args.no_build {
        bench_exec::build(&root, &release)?;
    }
    let scratch = std::env::temp_dir().join(format!("hcp-bench-agent-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    let work = scratch.join("work");
    let home = scratch.join("user");
    for d in [&work, &home] {
        std::fs::create_dir_all(d).with_context(|| format!("cannot create `{}`", d.display()))?;
    }
    let mut path_var = OsString::from(release.as_os_str());
    path_var.push(":/usr/local/bin:/usr/bin:/bin");
    let s = Setup {
        hcp: release.join("hcp"),
        baseline: args
            .baseline
            .as_ref()
            .map(|b| std::fs::canonicalize(b).unwrap_or_else(|_| b.clone())),
        bin: release.join("hcp-example-echo"),
        floor: release.join("spawn-floor"),
        floor_static: release.join("spawn-floor-static"),
        durable: release.join("durable-floor"),
        durable_static: release.join("durable-floor-static"),
        record: scratch.join("durable-floor.jsonl"),
        path_var,
        home,
        work,
    };
    let result = measure(args, &root, &scratch, &s);
    if args.keep {
        eprintln!("kept `{}`", scratch.display());
    } else {
        let _ = std::fs::remove_dir_all(&scratch);
    }
    result
}

/// The `probe` pack: one `personal`-land read verb `say` wrapping the echo bin.
fn write_probe(root: &Path) -> Result<PathBuf> {
    let dir = root.join("probe");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create `{}`", dir.display()))?;
    let files = [
        (
            "surface.json",
            r#"{"id": "probe", "name": "Probe", "kind": "composite", "binding": {"mode": "local"}, "verbs": {"say": {"description": "Print the text.", "cli": ["hcp-example-echo", "say", "--json", "--", "{{text}}"]}}}"#,
        ),
        (
            "policy.json",
            r#"{"surface_id": "probe", "version": 1, "verbs": {"say": {"operation": "read", "privacy": {"land": "personal"}}}}"#,
        ),
        (
            "HARNESS.md",
            "# Probe\n\nA pack for benchmarks.\n\n## Hot path\n\n| a | b |\n|---|---|\n| x | y |\n\n## Anti-patterns\n\n- none\n",
        ),
    ];
    for (name, text) in files {
        std::fs::write(dir.join(name), text)
            .with_context(|| format!("cannot write `{}`", dir.join(name).display()))?;
    }
    Ok(dir)
}

/// The tool `probe.say` in JSON and in YAML (a `rate_limit` no run reaches).
const PROBE_TOOL_JSON: &str = r#"{"access": "read", "args": {"text": {"type": "string", "min_length": 1, "max_length": 256}}, "rate_limit": 100000}"#;
const PROBE_TOOL_YAML: &str = "  probe.say:\n    access: \"read\"\n    args:\n      text:\n        type: \"string\"\n        min_length: 1\n        max_length: 256\n    rate_limit: 100000\n";

/// The 12-tool benchmark policy plus `probe.say`, as (JSON, YAML) text.
fn policies(root: &Path) -> Result<(String, String)> {
    let dir = root.join("crates/histos/benches");
    let json_path = dir.join("policy-12-tools.json");
    let text = std::fs::read_to_string(&json_path)
        .with_context(|| format!("cannot read `{}`", json_path.display()))?;
    let mut v: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("`{}` is not JSON", json_path.display()))?;
    let tool: serde_json::Value = serde_json::from_str(PROBE_TOOL_JSON)?;
    v["tools"]
        .as_object_mut()
        .context("the policy has no tools")?
        .insert("probe.say".into(), tool);
    v["roles"]["agent"]["allow"]
        .as_array_mut()
        .context("the policy has no role `agent`")?
        .push("probe.say".into());
    let json = serde_json::to_string_pretty(&v)?;

    let yaml_path = dir.join("policy-12-tools.yaml");
    let yaml = std::fs::read_to_string(&yaml_path)
        .with_context(|| format!("cannot read `{}`", yaml_path.display()))?;
    let tools = "\ntools:\n";
    let at = yaml
        .find(tools)
        .context("the YAML policy has no `tools:`")?
        + tools.len();
    let mut out = String::with_capacity(yaml.len() + 256);
    out.push_str(&yaml[..at]);
    out.push_str(PROBE_TOOL_YAML);
    out.push_str(&yaml[at..]);
    let agent = "\n  agent:\n    inherits: \"viewer\"\n    allow:\n";
    let at = out
        .find(agent)
        .context("the YAML policy has no role `agent`")?
        + agent.len();
    out.insert_str(at, "      - \"probe.say\"\n");
    Ok((json, out))
}

/// Makes one store with `hcp` (this build or the baseline): `probe` (and `extra` fixture
/// packs), the session, the grant. Answers the session token.
fn make_store(
    (s, hcp): (&Setup, &Path),
    home: &Path,
    probe: &Path,
    src: &Path,
    extra: usize,
) -> Result<String> {
    let probe = probe.to_str().context("non-UTF-8 path")?;
    s.hcp_ok_of(hcp, home, &["install", probe, "--activate"])?;
    for i in 0..extra {
        let dir = bench_exec::write_fixture(src, &format!("bench-{i:04}"))?;
        let dir = dir.to_str().context("non-UTF-8 path")?;
        s.hcp_ok_of(hcp, home, &["install", dir, "--activate"])?;
        if (i + 1) % 250 == 0 {
            eprintln!("  {} packs installed", i + 1);
        }
    }
    let token = s.hcp_ok_of(
        hcp,
        home,
        &[
            "session",
            "start",
            "--principal",
            AGENT,
            "--role",
            "agent",
            "--ttl",
            "7d",
        ],
    )?;
    let token = String::from_utf8(token)
        .context("the token is not UTF-8")?
        .trim()
        .to_owned();
    s.hcp_ok_of(hcp, home, &["grant", AGENT, "probe", "verb.exec.read"])?;
    Ok(token)
}

/// `cp -a FROM TO`: the larger store once more, for its YAML twin.
fn copy_store(from: &Path, to: &Path) -> Result<()> {
    let status = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .context("cannot run `cp -a`")?;
    ensure!(status.success(), "`cp -a` of the store failed");
    Ok(())
}

fn measure(args: &Args, root: &Path, scratch: &Path, s: &Setup) -> Result<()> {
    for p in [&s.hcp, &s.bin] {
        ensure!(p.is_file(), "`{}` is missing: build it first", p.display());
    }
    let src = scratch.join("src");
    let probe = write_probe(&src)?;
    let (json, yaml) = policies(root)?;
    let many = args.packs + 1;
    let mut stores = vec![
        Store {
            label: "1 pack, JSON policy".into(),
            key: "one_json",
            home: scratch.join("home-1-json"),
            bin: s.hcp.clone(),
        },
        Store {
            label: "1 pack, YAML policy".into(),
            key: "one_yaml",
            home: scratch.join("home-1-yaml"),
            bin: s.hcp.clone(),
        },
        Store {
            label: format!("{many} packs, JSON policy"),
            key: "many_json",
            home: scratch.join(format!("home-{many}-json")),
            bin: s.hcp.clone(),
        },
        Store {
            label: format!("{many} packs, YAML policy"),
            key: "many_yaml",
            home: scratch.join(format!("home-{many}-yaml")),
            bin: s.hcp.clone(),
        },
    ];
    eprintln!("store of 1 pack: `{}`", stores[0].home.display());
    let token_one = make_store((s, &s.hcp), &stores[0].home, &probe, &src, 0)?;
    copy_store(&stores[0].home, &stores[1].home)?;
    eprintln!("store of {many} packs: `{}`", stores[2].home.display());
    let token_many = make_store((s, &s.hcp), &stores[2].home, &probe, &src, args.packs)?;
    copy_store(&stores[2].home, &stores[3].home)?;
    let mut tokens = vec![&token_one, &token_one, &token_many, &token_many];
    let token_base;
    if let Some(b) = &s.baseline {
        ensure!(b.is_file(), "`--baseline {}` is not a file", b.display());
        let home = scratch.join("home-1-json-baseline");
        eprintln!("baseline store of 1 pack: `{}`", home.display());
        token_base = make_store((s, b), &home, &probe, &src, 0)?;
        stores.push(Store {
            label: "1 pack, JSON policy, baseline".into(),
            key: "baseline_one_json",
            home,
            bin: b.clone(),
        });
        tokens.push(&token_base);
    }
    for (i, st) in stores.iter().enumerate() {
        let (name, text) = if i.is_multiple_of(2) {
            ("policy.json", &json)
        } else {
            ("policy.yaml", &yaml)
        };
        let path = st.home.join(name);
        std::fs::write(&path, text)
            .with_context(|| format!("cannot write `{}`", path.display()))?;
    }
    if args.keep {
        let t = scratch.join("tokens");
        std::fs::write(&t, format!("1 {token_one}\n{many} {token_many}\n"))
            .with_context(|| format!("cannot write `{}`", t.display()))?;
    }
    // Arm 2i is the owner on store i, 2i + 1 the agent.
    let command = |arm: usize| {
        let st = &stores[arm / 2];
        let mut c = s.hcp_of(&st.bin, &st.home, &EXEC_ARGS);
        if !arm.is_multiple_of(2) {
            c.env("HCP_SESSION", tokens[arm / 2]);
        }
        c
    };
    let arms = stores.len() * 2;
    let label = |arm: usize| {
        format!(
            "{}, {}",
            if arm.is_multiple_of(2) {
                "owner"
            } else {
                "agent"
            },
            stores[arm / 2].label
        )
    };

    // The agent's output must be the owner's, and the bin's own.
    let bare = s
        .command(&s.bin)
        .args(["say", "--json", "--", "hi"])
        .output()
        .context("cannot run the bin")?;
    for arm in 0..arms {
        let out = command(arm)
            .output()
            .with_context(|| format!("cannot run {}", label(arm)))?;
        ensure!(
            out.status.success() && out.stdout == bare.stdout,
            "{}: `hcp exec` printed {:?} ({}), the bin {:?}; stderr: {}",
            label(arm),
            String::from_utf8_lossy(&out.stdout),
            out.status,
            String::from_utf8_lossy(&bare.stdout),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    // Warm up: the pins keep their stat fingerprint once the bin's ctime is old enough,
    // and each policy's compiled cache is written by its first call.
    for _ in 0..WARMUP {
        for arm in 0..arms {
            timed(command(arm)).with_context(|| label(arm))?;
        }
    }

    let sync_path = scratch.join("sync.jsonl");
    let mut sync_file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&sync_path)
        .with_context(|| format!("cannot open `{}`", sync_path.display()))?;
    let sync_line = [b'x'; 499];
    let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(args.runs); arms + 1];
    let mut cpu: Vec<Vec<Duration>> = vec![Vec::with_capacity(args.runs); arms + 1];
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64 | 1);
    let mut rng = Rng(seed ^ 0x9e37_79b9_7f4a_7c15);
    let mut order: Vec<usize> = (0..=arms).collect();
    eprintln!("{} interleaved rounds…", args.runs);
    let load_before = load_average();
    for _ in 0..args.runs {
        rng.shuffle(&mut order);
        for &i in &order {
            if i == arms {
                let t = Instant::now();
                sync_file.write_all(&sync_line)?;
                sync_file.write_all(b"\n")?;
                sync_file.sync_data()?;
                times[i].push(t.elapsed());
                cpu[i].push(Duration::ZERO);
                continue;
            }
            let (wall, _, used) = timed(command(i)).with_context(|| label(i))?;
            times[i].push(wall);
            cpu[i].push(used);
        }
    }
    let load_after = load_average();
    for st in &stores {
        s.hcp_ok_of(&st.bin, &st.home, &["audit", "verify"])?;
    }
    let st: Vec<Stats> = times
        .iter_mut()
        .zip(&cpu)
        .map(|(t, c)| stats(t, c))
        .collect();

    println!(
        "load average before / after: {load_before} / {load_after}; {} rounds",
        args.runs
    );
    println!();
    println!("| arm | median ms | p10 | p90 | min | CPU ms, mean |");
    println!("|---|---|---|---|---|---|");
    for (i, x) in st.iter().enumerate() {
        let name = if i == arms {
            "disk alone: `write` + `fdatasync` of 500 bytes (in process)".to_owned()
        } else {
            label(i)
        };
        let cpu = if i == arms {
            "—".to_owned()
        } else {
            format!("{:.2}", x.cpu)
        };
        println!(
            "| {name} | {:.3} | {:.3} | {:.3} | {:.3} | {cpu} |",
            x.median, x.p10, x.p90, x.min
        );
    }
    println!();
    println!("| store | agent ÷ owner, medians | p10s | CPU | agent − owner, ms (median) |");
    println!("|---|---|---|---|---|");
    let mut json_out = serde_json::Map::new();
    for (k, store) in stores.iter().enumerate() {
        let (o, a) = (st[2 * k], st[2 * k + 1]);
        let ratio = a.median / o.median;
        println!(
            "| {} | **{:.2}×** | {:.2}× | {:.2}× | {:.3} |",
            store.label,
            ratio,
            a.p10 / o.p10,
            a.cpu / o.cpu,
            a.median - o.median
        );
        json_out.insert(
            store.key.into(),
            serde_json::json!({
                "owner_median_ms": o.median, "agent_median_ms": a.median,
                "owner_cpu_ms": o.cpu, "agent_cpu_ms": a.cpu, "ratio": ratio,
                "ratio_p10": a.p10 / o.p10, "ratio_cpu": a.cpu / o.cpu,
            }),
        );
    }
    if s.baseline.is_some() {
        // The last store is the baseline's twin of the first (1 pack, JSON policy).
        let b = stores.len() - 1;
        let (o, a, bo, ba) = (st[0], st[1], st[2 * b], st[2 * b + 1]);
        println!();
        println!("| this build ÷ baseline, 1 pack, JSON policy | medians | p10s | CPU |");
        println!("|---|---|---|---|");
        for (name, x, y) in [("owner", o, bo), ("agent", a, ba)] {
            println!(
                "| {name} | **{:.3}×** | {:.3}× | {:.3}× |",
                x.median / y.median,
                x.p10 / y.p10,
                x.cpu / y.cpu
            );
        }
        json_out.insert(
            "to_baseline".into(),
            serde_json::json!({
                "owner_ratio": o.median / bo.median, "agent_ratio": a.median / ba.median,
                "owner_ratio_cpu": o.cpu / bo.cpu, "agent_ratio_cpu": a.cpu / ba.cpu,
            }),
        );
    }
    json_out.insert("sync_median_ms".into(), st[arms].median.into());
    if args.json {
        println!("{}", serde_json::Value::Object(json_out));
    }
    Ok(())
}
