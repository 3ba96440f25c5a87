//! `cargo xtask bench gate`: how fast the Histos engine decides (crate `histos`).
//!
//! Measures, single-threaded and in process:
//! * pre-gate decisions per second over every fixture of the conformance corpus's
//!   `decisions/` directory (policies loaded and calls prepared beforehand; median of
//!   several timed runs, each over many rounds of all fixtures);
//! * load + `content_hash` time of a 12-tool policy, as JSON and as YAML
//!   (`crates/histos/benches/policy-12-tools.{json,yaml}`; median per load).
//!
//! Wall-clock figures are reported with the same measure over the thread's on-CPU time
//! (`CLOCK_THREAD_CPUTIME_ID`), which a loaded shared machine distorts less.
//!
//! With `--reference DIR` (a checkout of the public Histos reference engine, which this
//! repository does not carry), the same measures are taken of the reference in the same
//! run, alternating with ours ([`ROUNDS`] rounds), by a small Python timing snippet that
//! imports the reference from `DIR/src` (Python 3.12 or later, and PyYAML): its pre-gate
//! over the same fixtures (bindings applied as its conformance suite does) and its
//! `load_policy` + `validate` of the same policy files; and, when `DIR/policies/` holds
//! the gallery's `05-mcp-surface` policy, both engines' load of that one too. The ratios
//! are printed.
//!
//! The corpus is the one vendored at `tests/histos-conformance/conformance/` (or
//! `HISTOS_CONFORMANCE_DIR`), its pins checked. With `--json` one line of JSON is printed, with at least
//! `decisions_per_sec` (the median).

use std::borrow::Cow;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use histos::engine::Args as CallArgs;
use histos::{
    Call, Context, Engine, Map, MemoryLimitStore, Policy, Principal, ResolveError,
    ResourceResolver, Value,
};

/// Timed runs per measurement; the median is reported.
const RUNS: usize = 7;
/// Rounds of (ours, the reference's) when a reference is given; medians are compared.
const ROUNDS: usize = 3;

/// Arguments of `cargo xtask bench gate`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Args {
    /// Print one line of JSON (with `decisions_per_sec`).
    #[arg(long)]
    pub json: bool,
    /// A checkout of the Histos reference engine to measure in the same run.
    #[arg(long, value_name = "DIR")]
    pub reference: Option<PathBuf>,
    /// The Python (3.12 or later, with PyYAML) that runs the reference.
    #[arg(long, value_name = "PATH", default_value = "python3")]
    pub python: String,
}

impl Args {
    /// The arguments again, as a command line (to re-run from a release build).
    pub fn to_argv(&self) -> Vec<String> {
        let mut v = Vec::new();
        if self.json {
            v.push("--json".to_string());
        }
        if let Some(r) = &self.reference {
            v.push("--reference".to_string());
            v.push(r.display().to_string());
        }
        v.push("--python".to_string());
        v.push(self.python.clone());
        v
    }
}
/// Target wall time of one timed decision run.
const RUN_TARGET: Duration = Duration::from_millis(250);

struct Fixed(Map);

impl ResourceResolver for Fixed {
    fn resolve<'r>(
        &'r self,
        _tool: &str,
        _args: &CallArgs<'_>,
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

#[path = "../../tests/histos-conformance/corpus.rs"]
mod corpus;

fn corpus_dir() -> anyhow::Result<PathBuf> {
    corpus::locate().map_err(anyhow::Error::msg)
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

/// On-CPU time of the current thread in seconds (`CLOCK_THREAD_CPUTIME_ID`, exact to
/// the nanosecond, unlike the scheduler-tick granularity of `/proc/…/schedstat`), so a
/// shared, loaded machine does not count other processes' time against us.
fn thread_cpu_secs() -> Option<f64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    (rc == 0).then(|| ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9)
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

/// The reference's side of the measurement: a Python snippet run as
/// `python -c SNIPPET REFERENCE_DIR CORPUS_DIR [JSON YAML]…`. It prints one JSON line:
/// `{"decisions_per_sec", "decisions_per_cpu_sec", "loads_us": [[json, json_cpu, yaml,
/// yaml_cpu], …]}` (wall-clock and this thread's CPU time, medians).
const REFERENCE_SNIPPET: &str = r#"
import glob, json, os, sys, time
if sys.version_info < (3, 12):
    sys.exit("the Histos reference needs Python 3.12 or later; pass --python PATH")
ref, corpus, files = sys.argv[1], sys.argv[2], sys.argv[3:]
sys.path.insert(0, os.path.join(ref, "src"))
import yaml  # PyYAML: the reference's YAML reader
from histos import Gate, GateRequest, Principal, load_bundle, load_policy
cases = []
for f in sorted(glob.glob(os.path.join(corpus, "decisions", "*.json"))):
    c = json.load(open(f, encoding="utf-8"))
    res = c.get("resource")
    resolver = (lambda r: (lambda tool, args: dict(r)))(res) if res is not None else None
    gate = Gate(load_bundle(c["policy"]), resource_resolver=resolver)
    spec = c.get("principal")
    p = None if spec is None else Principal(role=spec["role"], identity=spec.get("identity"),
        attributes=spec.get("attributes", {}), can_view=frozenset(spec.get("can_view", [])))
    tool, args = c["call"]["tool"], c["call"]["args"]
    wrapped = gate.wrap(lambda **k: None, name=tool) if p is None else None
    cases.append((gate, p, tool, args, wrapped))
def one_round():
    for gate, p, tool, args, wrapped in cases:
        if p is None:  # no principal bound: the wrapper decides, as in the reference's suite
            try:
                wrapped(**args)
            except Exception:
                pass
            continue
        a = dict(args)
        gate._apply_bindings(tool, p, a) or gate.engine.pre(GateRequest(tool, a, p))
t, n = time.perf_counter(), 0
while time.perf_counter() - t < 0.3:
    one_round(); n += 1
rates, cpu_rates = [], []
for _ in range(5):
    t, c = time.perf_counter(), time.thread_time()
    for _ in range(n):
        one_round()
    rates.append(n * len(cases) / (time.perf_counter() - t))
    cpu_rates.append(n * len(cases) / max(time.thread_time() - c, 1e-9))
def med(xs):
    return sorted(xs)[len(xs) // 2]
def load_us(path):
    load_policy(path).validate()
    xs, cs = [], []
    for _ in range(7):
        t, c = time.perf_counter(), time.thread_time()
        for _ in range(10):
            load_policy(path).validate()
        xs.append((time.perf_counter() - t) / 10 * 1e6)
        cs.append((time.thread_time() - c) / 10 * 1e6)
    return [med(xs), med(cs)]
loads = [load_us(files[i]) + load_us(files[i + 1]) for i in range(0, len(files), 2)]
print(json.dumps({"decisions_per_sec": med(rates), "decisions_per_cpu_sec": med(cpu_rates), "loads_us": loads}))
"#;

/// One policy measured as JSON and as YAML.
struct PolicyPair {
    label: &'static str,
    json: PathBuf,
    yaml: PathBuf,
}

/// One policy's load: JSON µs, YAML µs, their on-CPU µs, and the content hash.
type Load = (f64, f64, Option<f64>, Option<f64>, String);

/// Our figures of one round.
struct Ours {
    dps: f64,
    runs: Vec<f64>,
    cpu_dps: Option<f64>,
    /// Per policy: (JSON µs, YAML µs, JSON on-CPU µs, YAML on-CPU µs, hash).
    loads: Vec<Load>,
    /// Per policy: µs to read the compiled form back (digest of the source included).
    cached: Vec<f64>,
}

/// Median µs to digest `text` and read its compiled form back (the policy cache's hit).
fn cached_time(text: &str, p: &Policy) -> anyhow::Result<f64> {
    let d = histos::cache::source_digest(text.as_bytes());
    let bytes = p.to_cache_bytes(&d);
    let mut wall = Vec::new();
    for _ in 0..RUNS {
        let iters = 200;
        let t = Instant::now();
        for _ in 0..iters {
            let d = histos::cache::source_digest(black_box(text.as_bytes()));
            black_box(Policy::from_cache_bytes(black_box(&bytes), &d)?);
        }
        wall.push(t.elapsed().as_secs_f64() * 1e6 / f64::from(iters));
    }
    Ok(median(wall))
}

fn measure_ours(cases: &[Case], policies: &[PolicyPair]) -> anyhow::Result<Ours> {
    let measured = decisions_per_sec(cases);
    let runs: Vec<f64> = measured.iter().map(|m| m.0).collect();
    let cpu_runs: Vec<f64> = measured.iter().filter_map(|m| m.1).collect();
    let cpu_dps = (cpu_runs.len() == measured.len()).then(|| median(cpu_runs));
    let mut loads = Vec::new();
    let mut cached = Vec::new();
    for p in policies {
        let j = std::fs::read_to_string(&p.json)
            .with_context(|| format!("reading `{}`", p.json.display()))?;
        let y = std::fs::read_to_string(&p.yaml)
            .with_context(|| format!("reading `{}`", p.yaml.display()))?;
        let (ju, jc, jh) = load_time(&j, Policy::load_json)?;
        let (yu, yc, yh) = load_time(&y, Policy::load_yaml)?;
        if jh != yh {
            bail!(
                "the JSON and YAML `{}` policies hash differently: {jh} vs {yh}",
                p.label
            );
        }
        loads.push((ju, yu, jc, yc, jh));
        cached.push(cached_time(&j, &Policy::load_json(&j)?)?);
    }
    Ok(Ours {
        dps: median(runs.clone()),
        runs,
        cpu_dps,
        loads,
        cached,
    })
}

/// The reference's figures of one round.
struct Theirs {
    dps: f64,
    cpu_dps: f64,
    /// Per policy: JSON µs, JSON on-CPU µs, YAML µs, YAML on-CPU µs.
    loads: Vec<[f64; 4]>,
}

fn measure_reference(
    a: &Args,
    reference: &Path,
    corpus: &Path,
    policies: &[PolicyPair],
) -> anyhow::Result<Theirs> {
    let mut c = std::process::Command::new(&a.python);
    c.arg("-c")
        .arg(REFERENCE_SNIPPET)
        .arg(reference)
        .arg(corpus);
    for p in policies {
        c.arg(&p.json).arg(&p.yaml);
    }
    let out = c
        .output()
        .with_context(|| format!("cannot run `{}`", a.python))?;
    if !out.status.success() {
        bail!(
            "the reference measurement failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("the reference measurement printed no JSON")?;
    let f = |x: &serde_json::Value| x.as_f64().unwrap_or(f64::NAN);
    let loads = v["loads_us"]
        .as_array()
        .context("no loads_us")?
        .iter()
        .map(|p| [f(&p[0]), f(&p[1]), f(&p[2]), f(&p[3])])
        .collect();
    Ok(Theirs {
        dps: f(&v["decisions_per_sec"]),
        cpu_dps: f(&v["decisions_per_cpu_sec"]),
        loads,
    })
}

fn r1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// Runs the benchmark and prints the figures (one JSON line with `--json`).
///
/// # Errors
/// When the corpus, a policy or the reference cannot be found, loaded or run.
pub fn run(a: &Args) -> anyhow::Result<()> {
    if cfg!(debug_assertions) {
        eprintln!(
            "warning: bench gate is running an unoptimised build; figures are not representative \
             (hint: `cargo run --release -p xtask -- bench gate`)"
        );
    }
    let dir = corpus_dir()?;
    let cases = load_cases(&dir)?;
    let bench_dir = find_up("crates/histos/benches").context("crates/histos/benches not found")?;
    let mut policies = vec![PolicyPair {
        label: "bench 12-tool",
        json: bench_dir.join("policy-12-tools.json"),
        yaml: bench_dir.join("policy-12-tools.yaml"),
    }];
    if let Some(r) = &a.reference {
        let g = r.join("policies/05-mcp-surface.policy.json");
        if g.exists() {
            policies.push(PolicyPair {
                label: "gallery 05-mcp-surface",
                json: g,
                yaml: r.join("policies/05-mcp-surface.policy.yaml"),
            });
        }
    }
    let rounds = if a.reference.is_some() { ROUNDS } else { 1 };
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for _ in 0..rounds {
        ours.push(measure_ours(&cases, &policies)?);
        if let Some(r) = &a.reference {
            theirs.push(measure_reference(a, r, &dir, &policies)?);
        }
    }
    let med = |f: &dyn Fn(&Ours) -> f64| median(ours.iter().map(f).collect());
    let dps = med(&|o| o.dps);
    let runs = ours.last().map(|o| o.runs.clone()).unwrap_or_default();
    let cpu_dps = ours
        .iter()
        .map(|o| o.cpu_dps)
        .collect::<Option<Vec<f64>>>()
        .map(median);
    let hash = ours[0].loads[0].4.clone();
    let mut per_policy = Vec::new();
    for (i, p) in policies.iter().enumerate() {
        let ju = med(&|o| o.loads[i].0);
        let yu = med(&|o| o.loads[i].1);
        let jc = ours
            .iter()
            .map(|o| o.loads[i].2)
            .collect::<Option<Vec<f64>>>()
            .map(median);
        let yc = ours
            .iter()
            .map(|o| o.loads[i].3)
            .collect::<Option<Vec<f64>>>()
            .map(median);
        let reference: Option<[f64; 4]> = (!theirs.is_empty()).then(|| {
            let m = |k: usize| median(theirs.iter().map(|t| t.loads[i][k]).collect());
            [m(0), m(1), m(2), m(3)]
        });
        let cu = med(&|o| o.cached[i]);
        per_policy.push((p.label, ju, yu, jc, yc, reference, cu));
    }
    let ref_dps = (!theirs.is_empty()).then(|| median(theirs.iter().map(|t| t.dps).collect()));
    let ref_cpu_dps =
        (!theirs.is_empty()).then(|| median(theirs.iter().map(|t| t.cpu_dps).collect()));
    if a.json {
        let loads: Vec<serde_json::Value> = per_policy
            .iter()
            .map(|(label, ju, yu, jc, yc, r, cu)| {
                serde_json::json!({
                    "policy": label,
                    "load_hash_json_us": r1(*ju),
                    "load_hash_yaml_us": r1(*yu),
                    "load_hash_json_cpu_us": jc.map(r1),
                    "load_hash_yaml_cpu_us": yc.map(r1),
                    "reference_json_us": r.map(|r| r1(r[0])),
                    "reference_json_cpu_us": r.map(|r| r1(r[1])),
                    "reference_yaml_us": r.map(|r| r1(r[2])),
                    "reference_yaml_cpu_us": r.map(|r| r1(r[3])),
                    "ratio_json": r.map(|r| r1(r[0] / ju)),
                    "ratio_yaml": r.map(|r| r1(r[2] / yu)),
                    "ratio_json_cpu": r.zip(*jc).map(|(r, c)| r1(r[1] / c)),
                    "ratio_yaml_cpu": r.zip(*yc).map(|(r, c)| r1(r[3] / c)),
                    "cached_load_us": r1(*cu),
                })
            })
            .collect();
        let line = serde_json::json!({
            "decisions_per_sec": dps.round(),
            "decisions_per_sec_runs": runs.iter().map(|r| r.round()).collect::<Vec<_>>(),
            "ns_per_decision": r1(1e9 / dps),
            "decisions_per_cpu_sec": cpu_dps.map(f64::round),
            "decision_fixtures": cases.len(),
            "load_hash_json_us": r1(per_policy[0].1),
            "load_hash_yaml_us": r1(per_policy[0].2),
            "loads": loads,
            "reference_decisions_per_sec": ref_dps.map(f64::round),
            "ratio_decisions": ref_dps.map(|r| r1(dps / r)),
            "reference_decisions_per_cpu_sec": ref_cpu_dps.map(f64::round),
            "ratio_decisions_cpu": ref_cpu_dps.zip(cpu_dps).map(|(r, c)| r1(c / r)),
            "rounds": rounds,
            "policy_12_tools_hash": hash,
            "optimized": !cfg!(debug_assertions),
        });
        println!("{line}");
        return Ok(());
    }
    println!(
        "histos pre-gate: {dps:.0} decisions/s (median of {RUNS} runs over {} fixtures; {:.1} ns each)",
        cases.len(),
        1e9 / dps
    );
    if let Some(c) = cpu_dps {
        println!(
            "histos pre-gate: {c:.0} decisions per on-CPU second (this thread's scheduled time)"
        );
    }
    if let (Some(r), Some(rc)) = (ref_dps, ref_cpu_dps) {
        println!(
            "reference pre-gate: {r:.0} decisions/s, {rc:.0} per on-CPU second; ratio {:.1}x wall, {} on-CPU (medians of {rounds} alternating rounds)",
            dps / r,
            cpu_dps.map_or("-".to_string(), |c| format!("{:.1}x", c / rc))
        );
    }
    for (label, ju, yu, jc, yc, r, cu) in &per_policy {
        println!("histos {label} policy load+hash: JSON {ju:.1} µs, YAML {yu:.1} µs");
        println!(
            "histos {label} policy from the compiled cache (source digest included): {cu:.1} µs"
        );
        if let (Some(j), Some(y)) = (jc, yc) {
            println!("histos {label} policy load+hash on-CPU: JSON {j:.1} µs, YAML {y:.1} µs");
        }
        if let Some([rj, rjc, ry, ryc]) = r {
            println!(
                "reference {label} load_policy+validate: JSON {rj:.1} µs ({rjc:.1} on-CPU), YAML {ry:.1} µs ({ryc:.1} on-CPU); ratio JSON {:.1}x, YAML {:.1}x",
                rj / ju,
                ry / yu
            );
            if let (Some(j), Some(y)) = (jc, yc) {
                println!(
                    "ratio on-CPU {label}: JSON {:.1}x, YAML {:.1}x",
                    rjc / j,
                    ryc / y
                );
            }
        }
    }
    println!("12-tool policy content_hash: {hash}");
    Ok(())
}
