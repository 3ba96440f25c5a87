//! `cargo xtask bench openapi`: `hcp exec` of a `kind: openapi` verb against a loopback
//! server, pairwise with `hcp exec` of a CLI verb in the same run (RUNTIME §1.3).
//!
//! It builds `hcp` and the example bins in release (unless `--no-build`), starts
//! `hcp-example-api` on a loopback port, and makes one scratch `HCP_HOME` holding the gold
//! `echo` pack and the gold `tasks` pack (`packs.tasks.server` in `config.json` pointing
//! at the example API, the owner's binding from `hcp connect tasks`). Then rounds, each
//! running every arm once in a shuffled order:
//!
//! * `cli`: `hcp exec echo.say hi` (a child, confined as shipped);
//! * `openapi`: `hcp exec tasks.list --limit 10` (one `GET /v1/tasks?limit=10` with the
//!   bearer token, answered `200`);
//! * `curl` (when `curl` is on `PATH`): the same request by `curl`, a floor for "a process
//!   that sends one HTTP request".
//!
//! With `--baseline BIN` (another build of hcp, e.g. main's release `hcp`), a second store
//! made by that build (the same two packs, from `--baseline-packs DIR` when its gold packs
//! differ, the same server) adds the arms `baseline cli` and `baseline openapi`, and the
//! ratios of this build's medians to the baseline's. The openapi verb runs no child, so
//! its ratio is the call's own work (gate, pipeline, audit) without the child's view.
//!
//! Every arm's output is checked once before timing; `hcp audit verify` must pass after.
//! Wall time from before the spawn to the return of the wait. Figures: median, p10, p90,
//! in milliseconds, and the ratio of the medians `openapi` / `cli`.

use anyhow::{Context, Result, bail, ensure};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Arguments of `cargo xtask bench openapi`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Timed rounds (each runs every arm once).
    #[arg(long, default_value_t = 200)]
    pub runs: usize,
    /// Use the release binaries already in the target directory instead of building.
    #[arg(long)]
    pub no_build: bool,
    /// Another `hcp` binary (say, the release build of `main`) to interleave on a store of
    /// its own.
    #[arg(long)]
    pub baseline: Option<PathBuf>,
    /// The gold packs the `--baseline` installs (its own checkout's `packs/`); this
    /// checkout's by default.
    #[arg(long, requires = "baseline")]
    pub baseline_packs: Option<PathBuf>,
}

/// What one arm runs: a fresh command each time.
pub(crate) type Arm<'a> = Box<dyn Fn() -> Command + 'a>;

/// Warm-up rounds before timing.
const WARMUP: usize = 10;

/// The example API, stopped (its stdin closed, then waited for) when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        drop(self.0.stdin.take());
        let _ = self.0.wait();
    }
}

/// Runs the benchmark and prints a Markdown table.
///
/// # Errors
/// When a build, the server, a store step or an arm fails.
pub fn run(args: &Args) -> Result<()> {
    ensure!(args.runs >= 10, "`--runs` must be at least 10");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let release = crate::bench_exec::release_dir()?;
    if !args.no_build {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let st = Command::new(cargo)
            .args(["build", "--release", "-p", "hcp", "-p", "hcp-examples"])
            .current_dir(&root)
            .status()
            .context("cannot run `cargo build --release`")?;
        ensure!(
            st.success(),
            "`cargo build --release -p hcp -p hcp-examples` failed"
        );
    }
    let hcp = release.join("hcp");
    ensure!(hcp.is_file(), "no `{}`", hcp.display());
    let scratch = tempfile_dir()?;
    let result = measure(args, &root, &release, &scratch);
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

fn tempfile_dir() -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("hcp-bench-openapi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create `{}`", dir.display()))?;
    Ok(dir)
}

fn measure(args: &Args, root: &Path, release: &Path, scratch: &Path) -> Result<()> {
    let home = scratch.join("home");
    let work = scratch.join("work");
    std::fs::create_dir_all(&work).context("cannot create the working directory")?;
    let path = match std::env::var_os("PATH") {
        Some(p) => {
            let mut all = std::ffi::OsString::from(release.as_os_str());
            all.push(":");
            all.push(p);
            all
        }
        None => release.as_os_str().to_owned(),
    };
    let cmd_in = |store: &Path, program: &Path, a: &[&str]| {
        let mut c = Command::new(program);
        c.args(a)
            .current_dir(&work)
            .env_clear()
            .env("PATH", &path)
            .env("HOME", scratch)
            .env("HCP_HOME", store)
            .env("LANG", "C.UTF-8");
        c
    };
    let cmd = |program: &Path, a: &[&str]| cmd_in(&home, program, a);
    let hcp = release.join("hcp");
    let ok_in = |store: &Path, bin: &Path, a: &[&str]| -> Result<Vec<u8>> {
        let out = cmd_in(store, bin, a)
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("cannot run `{}`", bin.display()))?;
        ensure!(
            out.status.success(),
            "`{} {}` failed: {}",
            bin.display(),
            a.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(out.stdout)
    };
    let ok = |a: &[&str]| ok_in(&home, &hcp, a);

    // Stopped by closing its stdin (`Server`'s drop).
    let mut child = cmd(&release.join("hcp-example-api"), &["--until-stdin-closes"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("cannot start `hcp-example-api`")?;
    let mut origin = String::new();
    if let Some(o) = child.stdout.take() {
        std::io::BufReader::new(o)
            .read_line(&mut origin)
            .context("cannot read the example API's origin")?;
    }
    let _server = Server(child);
    let origin = origin.trim().to_owned();
    if !origin.starts_with("http://127.0.0.1:") {
        bail!("`hcp-example-api` printed `{origin}`, not its origin");
    }
    let config =
        serde_json::json!({"packs": {"tasks": {"server": format!("{origin}/v1")}}}).to_string();
    let fill = |store: &Path, bin: &Path, packs: &Path| -> Result<()> {
        std::fs::create_dir_all(store).context("cannot create HCP_HOME")?;
        std::fs::write(store.join("config.json"), &config).context("cannot write config.json")?;
        for pack in ["echo", "tasks"] {
            let dir = packs.join(pack).display().to_string();
            ok_in(store, bin, &["install", "--activate", &dir])?;
        }
        ok_in(store, bin, &["connect", "tasks", "--user", "bench"])?;
        Ok(())
    };
    fill(&home, &hcp, &root.join("packs"))?;
    let base_home = scratch.join("home-baseline");
    if let Some(b) = &args.baseline {
        ensure!(b.is_file(), "`--baseline {}` is not a file", b.display());
        let packs = args
            .baseline_packs
            .clone()
            .unwrap_or_else(|| root.join("packs"));
        fill(&base_home, b, &packs)?;
    }
    // The example API's token of a user (what `createToken` answered `connect`).
    let token = "tok-bench";

    let cli = ["exec", "echo.say", "hi"];
    let api = ["exec", "tasks.list", "--limit", "10"];
    let url = format!("{origin}/v1/tasks?limit=10");
    let auth = format!("Authorization: Bearer {token}");
    let curl = which("curl");
    // Checked once: the CLI verb prints its text, the openapi verb the API's answer.
    ensure!(String::from_utf8_lossy(&ok(&cli)?).contains("hi"));
    let list = ok(&api)?;
    ensure!(
        String::from_utf8_lossy(&list).trim_start().starts_with('['),
        "`hcp exec tasks.list` printed `{}`",
        String::from_utf8_lossy(&list)
    );
    let curl_args = ["-sS", "--fail", "-H", auth.as_str(), url.as_str()];
    if let Some(c) = &curl {
        let out = cmd(c, &curl_args).output().context("cannot run curl")?;
        ensure!(out.status.success() && out.stdout.starts_with(b"["));
    }

    let mut arms: Vec<(&str, Arm<'_>)> = vec![
        ("cli", Box::new(|| cmd(&hcp, &cli))),
        ("openapi", Box::new(|| cmd(&hcp, &api))),
    ];
    if let Some(c) = curl.clone() {
        arms.push(("curl", Box::new(move || cmd(&c, &curl_args))));
    }
    if let Some(b) = &args.baseline {
        ensure!(String::from_utf8_lossy(&ok_in(&base_home, b, &cli)?).contains("hi"));
        ensure!(
            String::from_utf8_lossy(&ok_in(&base_home, b, &api)?)
                .trim_start()
                .starts_with('['),
            "the baseline's `hcp exec tasks.list` did not print the list"
        );
        let base_home = base_home.as_path();
        arms.push(("baseline cli", Box::new(move || cmd_in(base_home, b, &cli))));
        arms.push((
            "baseline openapi",
            Box::new(move || cmd_in(base_home, b, &api)),
        ));
    }
    let load_before = load_average();
    let mut times = shuffled_rounds(&arms, WARMUP, args.runs)?;
    let load_after = load_average();
    ok(&["audit", "verify"])?;
    if let Some(b) = &args.baseline {
        ok_in(&base_home, b, &["audit", "verify"])?;
    }

    println!(
        "{} rounds after {WARMUP} warm-up, shuffled order each round; load average {load_before} → {load_after}",
        args.runs
    );
    println!();
    println!("| arm | median ms | p10 | p90 |");
    println!("|---|---|---|---|");
    let mut medians = Vec::new();
    for ((name, _), t) in arms.iter().zip(times.iter_mut()) {
        t.sort();
        let at = |q: usize| ms(t[(t.len() * q / 100).min(t.len() - 1)]);
        let label = match *name {
            "cli" => "`hcp exec echo.say hi` (CLI verb, a confined child)".to_owned(),
            "openapi" => "`hcp exec tasks.list --limit 10` (openapi verb, loopback)".to_owned(),
            "curl" => "`curl` of the same request (floor)".to_owned(),
            "baseline cli" => "baseline: `--baseline` hcp, `exec echo.say hi`".to_owned(),
            _ => "baseline: `--baseline` hcp, `exec tasks.list --limit 10`".to_owned(),
        };
        println!(
            "| {label} | {:.3} | {:.3} | {:.3} |",
            at(50),
            at(10),
            at(90)
        );
        medians.push(at(50));
    }
    println!();
    println!(
        "openapi / cli, medians: {:.2} (openapi − cli: {:+.3} ms)",
        medians[1] / medians[0],
        medians[1] - medians[0]
    );
    let at = |name: &str| {
        arms.iter()
            .position(|(n, _)| *n == name)
            .map(|i| medians[i])
    };
    if let Some(c) = at("curl") {
        println!("openapi − curl, medians: {:+.3} ms", medians[1] - c);
    }
    if let (Some(bc), Some(bo)) = (at("baseline cli"), at("baseline openapi")) {
        println!(
            "this build / baseline, medians: openapi verb {:.3}× ({:+.3} ms), CLI verb {:.3}× ({:+.3} ms)",
            medians[1] / bo,
            medians[1] - bo,
            medians[0] / bc,
            medians[0] - bc
        );
    }
    Ok(())
}

/// Runs every arm once per round, in a shuffled order each round (a fixed xorshift seeded
/// by the process id), `warmup` rounds untimed then `runs` timed: each arm's wall times.
///
/// # Errors
/// The first arm that cannot be spawned or does not exit 0, with its name and round.
pub(crate) fn shuffled_rounds(
    arms: &[(&str, Arm<'_>)],
    warmup: usize,
    runs: usize,
) -> Result<Vec<Vec<Duration>>> {
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); arms.len()];
    let mut order: Vec<usize> = (0..arms.len()).collect();
    let mut rng = 0x9e37_79b9_7f4a_7c15_u64 ^ u64::from(std::process::id());
    for round in 0..warmup + runs {
        for i in (1..order.len()).rev() {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let j = usize::try_from(rng % (i as u64 + 1)).unwrap_or(0);
            order.swap(i, j);
        }
        for &i in &order {
            let d = timed(arms[i].1())
                .with_context(|| format!("arm `{}`, round {round}", arms[i].0))?;
            if round >= warmup {
                times[i].push(d);
            }
        }
    }
    Ok(times)
}

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// One run: its wall time; it must exit 0.
pub(crate) fn timed(mut c: Command) -> Result<Duration> {
    c.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let t = Instant::now();
    let st = c.status().context("cannot spawn")?;
    let d = t.elapsed();
    ensure!(st.success(), "exited with {st}");
    Ok(d)
}

pub(crate) fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|f| f.is_file())
    })
}

pub(crate) fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}
