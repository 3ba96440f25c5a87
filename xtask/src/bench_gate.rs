//! `cargo xtask bench gate`: how fast the Histos engine decides (crate `histos`).
//!
//! Measures, single-threaded and in process:
//! * pre-gate decisions per second over every fixture of the conformance corpus's
//!   `decisions/` directory (policies loaded and calls prepared beforehand; median of
//!   several timed runs, each over many rounds of all fixtures);
//! * load + `content_hash` time of a 12-tool policy, as JSON and as YAML
//!   (`crates/histos/benches/policy-12-tools.{json,yaml}`; median per load).
//!
//! Wall-clock figures are reported with, where Linux exposes it, the same measure over
//! the thread's on-CPU time (`/proc/thread-self/schedstat`), which a loaded shared
//! machine distorts less.
//!
//! The corpus is found at `shared/histos/conformance/` beside the repository (or
//! `HISTOS_CONFORMANCE_DIR`). With `--json` one line of JSON is printed, with at least
//! `decisions_per_sec` (the median).

use std::borrow::Cow;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use histos::engine::Args;
use histos::{
    Call, Context, Engine, Map, MemoryLimitStore, Policy, Principal, ResolveError,
    ResourceResolver, Value,
};

/// Timed runs per measurement; the median is reported.
const RUNS: usize = 7;
/// Target wall time of one timed decision run.
const RUN_TARGET: Duration = Duration::from_millis(250);

struct Fixed(Map);

impl ResourceResolver for Fixed {
    fn resolve<'r>(
        &'r self,
        _tool: &str,
        _args: &Args<'_>,
    ) -> Result<Option<Cow<'r, Map>>, ResolveError> {
        Ok(Some(Cow::Borrowed(&self.0)))
    }
}

struct Case {
    policy: Policy,
    principal: Option<Principal>,
    resource: Option<Fixed>,
    call: Call,
}

fn find_up(rel: &str) -> Option<PathBuf> {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest
        .ancestors()
        .map(|a| a.join(rel))
        .find(|p| p.exists())
}

fn corpus_dir() -> anyhow::Result<PathBuf> {
    if let Some(d) = std::env::var_os("HISTOS_CONFORMANCE_DIR") {
        return Ok(PathBuf::from(d));
    }
    find_up("shared/histos/conformance")
        .context("the Histos conformance corpus (`shared/histos/conformance` beside the repository) is required")
}

fn map_of(v: Option<&Value>) -> Map {
    v.and_then(Value::as_map).cloned().unwrap_or_default()
}

fn load_cases(dir: &Path) -> anyhow::Result<Vec<Case>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("decisions"))
        .with_context(|| format!("reading `{}`", dir.join("decisions").display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut cases = Vec::new();
    for f in files {
        let text =
            std::fs::read_to_string(&f).with_context(|| format!("reading `{}`", f.display()))?;
        let Value::Map(fx) = histos::json::parse(&text)? else {
            bail!("`{}` is not an object", f.display())
        };
        let policy = Policy::from_document(fx.get("policy").cloned().unwrap_or(Value::Null))?;
        let principal = fx
            .get("principal")
            .and_then(Value::as_map)
            .map(|m| Principal {
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
                can_view: Vec::new(),
            });
        let resource = fx
            .get("resource")
            .and_then(Value::as_map)
            .cloned()
            .map(Fixed);
        let call_m = map_of(fx.get("call"));
        let call = Call {
            tool: call_m
                .get("tool")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            args: map_of(call_m.get("args")),
        };
        cases.push(Case {
            policy,
            principal,
            resource,
            call,
        });
    }
    if cases.is_empty() {
        bail!("no decision fixtures found");
    }
    Ok(cases)
}

fn round(cases: &[Case], ctx: &Context<'_>) -> usize {
    for c in cases {
        let d = Engine::pre(
            &c.policy,
            c.principal.as_ref(),
            c.resource.as_ref().map(|r| r as &dyn ResourceResolver),
            black_box(&c.call),
            ctx,
        );
        black_box(&d);
    }
    cases.len()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// On-CPU time of the current thread in seconds (Linux `/proc/thread-self/schedstat`),
/// so a shared, loaded machine does not count other processes' time against us.
fn thread_cpu_secs() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: f64 = s.split_whitespace().next()?.parse().ok()?;
    Some(ns / 1e9)
}

/// Per run: (decisions per wall second, decisions per on-CPU second if known).
fn decisions_per_sec(cases: &[Case]) -> Vec<(f64, Option<f64>)> {
    let store = MemoryLimitStore::default();
    let ctx = Context {
        limits: Some(&store),
        ..Default::default()
    };
    // Warm up and calibrate the number of rounds per run.
    let start = Instant::now();
    let mut rounds = 0u64;
    while start.elapsed() < Duration::from_millis(100) {
        round(cases, &ctx);
        rounds += 1;
    }
    let per_round = start.elapsed().as_secs_f64() / rounds as f64;
    let rounds = ((RUN_TARGET.as_secs_f64() / per_round) as u64).max(1);
    (0..RUNS)
        .map(|_| {
            let cpu0 = thread_cpu_secs();
            let t = Instant::now();
            let mut n = 0usize;
            for _ in 0..rounds {
                n += round(cases, &ctx);
            }
            let wall = n as f64 / t.elapsed().as_secs_f64();
            let cpu = match (cpu0, thread_cpu_secs()) {
                (Some(a), Some(b)) if b > a => Some(n as f64 / (b - a)),
                _ => None,
            };
            (wall, cpu)
        })
        .collect()
}

/// Median microseconds per load+hash: (wall, on-CPU if known).
fn load_time(
    text: &str,
    load: fn(&str) -> Result<Policy, histos::PolicyError>,
) -> anyhow::Result<(f64, Option<f64>, String)> {
    let hash = load(text)?.content_hash().to_string();
    let (mut wall, mut cpu) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        let iters = 50;
        let c0 = thread_cpu_secs();
        let t = Instant::now();
        for _ in 0..iters {
            black_box(load(black_box(text))?);
        }
        wall.push(t.elapsed().as_secs_f64() * 1e6 / f64::from(iters));
        if let (Some(a), Some(b)) = (c0, thread_cpu_secs()) {
            cpu.push((b - a) * 1e6 / f64::from(iters));
        }
    }
    let cpu = (cpu.len() == RUNS).then(|| median(cpu));
    Ok((median(wall), cpu, hash))
}

/// Runs the benchmark and prints the figures (one JSON line with `json`).
///
/// # Errors
/// When the corpus or the 12-tool policy cannot be found or loaded.
pub fn run(json: bool) -> anyhow::Result<()> {
    if cfg!(debug_assertions) {
        eprintln!(
            "warning: bench gate is running an unoptimised build; figures are not representative \
             (hint: `cargo run --release -p xtask -- bench gate`)"
        );
    }
    let dir = corpus_dir()?;
    let cases = load_cases(&dir)?;
    let measured = decisions_per_sec(&cases);
    let runs: Vec<f64> = measured.iter().map(|m| m.0).collect();
    let dps = median(runs.clone());
    let cpu_runs: Vec<f64> = measured.iter().filter_map(|m| m.1).collect();
    let cpu_dps = (cpu_runs.len() == measured.len()).then(|| median(cpu_runs));
    let bench_dir = find_up("crates/histos/benches").context("crates/histos/benches not found")?;
    let json_text = std::fs::read_to_string(bench_dir.join("policy-12-tools.json"))?;
    let yaml_text = std::fs::read_to_string(bench_dir.join("policy-12-tools.yaml"))?;
    let (json_us, json_cpu_us, json_hash) = load_time(&json_text, Policy::load_json)?;
    let (yaml_us, yaml_cpu_us, yaml_hash) = load_time(&yaml_text, Policy::load_yaml)?;
    if json_hash != yaml_hash {
        bail!("the JSON and YAML 12-tool policies hash differently: {json_hash} vs {yaml_hash}");
    }
    if json {
        let line = serde_json::json!({
            "decisions_per_sec": dps.round(),
            "decisions_per_sec_runs": runs.iter().map(|r| r.round()).collect::<Vec<_>>(),
            "ns_per_decision": (1e9 / dps * 10.0).round() / 10.0,
            "decisions_per_cpu_sec": cpu_dps.map(f64::round),
            "decision_fixtures": cases.len(),
            "load_hash_json_us": (json_us * 10.0).round() / 10.0,
            "load_hash_yaml_us": (yaml_us * 10.0).round() / 10.0,
            "load_hash_json_cpu_us": json_cpu_us.map(|u| (u * 10.0).round() / 10.0),
            "load_hash_yaml_cpu_us": yaml_cpu_us.map(|u| (u * 10.0).round() / 10.0),
            "policy_12_tools_hash": json_hash,
            "optimized": !cfg!(debug_assertions),
        });
        println!("{line}");
    } else {
        println!(
            "histos pre-gate: {:.0} decisions/s (median of {RUNS} runs over {} fixtures; {:.1} ns each)",
            dps,
            cases.len(),
            1e9 / dps
        );
        if let Some(c) = cpu_dps {
            println!(
                "histos pre-gate: {c:.0} decisions per on-CPU second (this thread's scheduled time)"
            );
        }
        println!(
            "histos 12-tool policy load+hash: JSON {json_us:.1} µs, YAML {yaml_us:.1} µs ({json_hash})"
        );
        if let (Some(j), Some(y)) = (json_cpu_us, yaml_cpu_us) {
            println!("histos 12-tool policy load+hash on-CPU: JSON {j:.1} µs, YAML {y:.1} µs");
        }
    }
    Ok(())
}
