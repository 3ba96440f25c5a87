//! `cargo xtask bench exec --state postgres`: what the fleet's PostgreSQL state (RUNTIME
//! §9) adds to `hcp exec` against the file store, pairwise in one run.
//!
//! Every arm is `hcp exec echo.say hi` as a session principal holding `verb.exec.read`
//! on `echo` (the agent's call: the session, the grant, the intent and the outcome are
//! state), on a store of its own:
//!
//! * `file`: the embedded file store;
//! * `pg_direct`: `config.json` names the server's Unix socket: each `hcp` opens its own
//!   connection (PostgreSQL starts a backend process for it);
//! * `pg_pool`: the same database through pgbouncer on a Unix socket (transaction
//!   pooling), as `.ci/pg-start --pool` makes it: the connection hcp opens is the
//!   pooler's, which keeps the server's connections open;
//! * `bare`: the bin alone, for scale.
//!
//! The arms run interleaved (each round every arm once, in a shuffled order). Each round
//! also measures the floor of a connection per process: PostgreSQL's own connection
//! start with one `SELECT 1`, direct and through pgbouncer, as `pgbench -C` reports it
//! (its "average connection time", `pgbench` of the server's binaries; skipped when it
//! is not found). Then the
//! parallel figure: rounds of 8 `hcp` processes started at once on one store ("8 callers
//! on one machine") for each backend, and 8 on each of two stores of one database (two
//! machines); each round is timed from the first spawn to the last exit.
//!
//! The server is `HCP_TEST_PG_URL` / `HCP_TEST_PG_POOL_URL` when both are set (as
//! `eval "$(.ci/pg-start --pool)"` sets them), else a throw-away one started with
//! `.ci/pg-start --pool` and stopped at the end. After timing, `hcp audit verify` must
//! pass on every store.

use crate::bench_exec::{self, Args, Rng, Stats, stats, timed};
use anyhow::{Context, Result, ensure};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Parallel callers per machine.
const CALLERS: usize = 8;
/// Warm-up runs of each arm.
const WARMUP: usize = 20;

/// The server the benchmark runs against.
struct Server {
    direct: String,
    pool: String,
    /// The server's binaries (`pgbench`), when known.
    bin: Option<PathBuf>,
    /// The directory of a server this run started (stopped at the end).
    started: Option<PathBuf>,
}

impl Server {
    fn get(root: &Path) -> Result<Self> {
        if let (Ok(d), Ok(p)) = (
            std::env::var("HCP_TEST_PG_URL"),
            std::env::var("HCP_TEST_PG_POOL_URL"),
        ) && !d.is_empty()
            && !p.is_empty()
        {
            return Ok(Self {
                direct: d,
                pool: p,
                bin: std::env::var_os("HCP_TEST_PG_BIN").map(PathBuf::from),
                started: None,
            });
        }
        eprintln!("starting a throw-away server: .ci/pg-start --pool");
        let out = Command::new(root.join(".ci/pg-start"))
            .args(["--pool", "--quiet"])
            .output()
            .context("cannot run `.ci/pg-start`")?;
        ensure!(
            out.status.success(),
            "`.ci/pg-start --pool` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        let vars = exports(&String::from_utf8_lossy(&out.stdout));
        let get = |k: &str| {
            vars.get(k)
                .cloned()
                .with_context(|| format!("`.ci/pg-start` printed no {k}"))
        };
        Ok(Self {
            direct: get("HCP_TEST_PG_URL")?,
            pool: get("HCP_TEST_PG_POOL_URL")?,
            bin: vars.get("HCP_TEST_PG_BIN").map(PathBuf::from),
            started: Some(get("HCP_TEST_PG_DIR")?.into()),
        })
    }

    fn stop(&self, root: &Path) {
        if let Some(dir) = &self.started {
            let _ = Command::new(root.join(".ci/pg-stop")).arg(dir).status();
        }
    }
}

/// `pgbench -C`'s "average connection time" (ms) over `n` connections to `url`, each
/// running one `SELECT 1`; `None` when pgbench cannot run.
fn connection_start(bin: &Path, script: &Path, url: &str, n: usize) -> Option<f64> {
    let out = Command::new(bin.join("pgbench"))
        .args(["-n", "-C", "-t", &n.to_string(), "-f"])
        .arg(script)
        .arg(url)
        .stdin(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("average connection time = "))
        .and_then(|v| v.trim_end_matches(" ms").trim().parse().ok())
}

/// `export NAME=VALUE` lines as `printf %q` prints them (backslash escapes only).
fn exports(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some((k, v)) = line.strip_prefix("export ").and_then(|r| r.split_once('=')) else {
            continue;
        };
        let mut value = String::new();
        let mut chars = v.chars();
        while let Some(c) = chars.next() {
            if c == '\\' {
                value.extend(chars.next());
            } else {
                value.push(c);
            }
        }
        out.insert(k.to_owned(), value);
    }
    out
}

/// One store and the session token its calls run as.
struct Store {
    home: PathBuf,
    token: String,
}

/// How every `hcp` and bin of the run is started.
struct Runner {
    hcp: PathBuf,
    bin: PathBuf,
    path_var: OsString,
    user_home: PathBuf,
    work: PathBuf,
}

impl Runner {
    fn command(&self, program: &Path) -> Command {
        let mut c = Command::new(program);
        c.env_clear()
            .env("PATH", &self.path_var)
            .env("HOME", &self.user_home)
            .current_dir(&self.work)
            .stdin(Stdio::null());
        c
    }

    fn hcp(&self, home: &Path, args: &[&str]) -> Command {
        let mut c = self.command(&self.hcp);
        c.env("HCP_HOME", home).args(args);
        c
    }

    fn ok(&self, home: &Path, args: &[&str]) -> Result<String> {
        let out = self
            .hcp(home, args)
            .output()
            .with_context(|| format!("cannot run `hcp {}`", args.join(" ")))?;
        ensure!(
            out.status.success(),
            "`hcp {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The agent's call on `store`.
    fn exec(&self, store: &Store) -> Command {
        let mut c = self.hcp(&store.home, &["exec", "echo.say", "hi"]);
        c.env("HCP_SESSION", &store.token);
        c
    }
}

/// A store at `home` with `config.json` naming `state` (none: the files), `echo`
/// installed and active.
fn make_store(r: &Runner, home: &Path, state: Option<(&str, &str)>, echo: &Path) -> Result<()> {
    std::fs::create_dir_all(home).with_context(|| format!("cannot create `{}`", home.display()))?;
    if let Some((url, schema)) = state {
        let cfg = serde_json::json!({"state": {"url": url, "schema": schema}});
        std::fs::write(home.join("config.json"), cfg.to_string())
            .context("cannot write config.json")?;
    }
    let echo = echo.to_str().context("non-UTF-8 path")?;
    r.ok(home, &["install", echo, "--activate"])?;
    Ok(())
}

fn session(r: &Runner, home: &Path) -> Result<String> {
    let token = r.ok(home, &["session", "start", "--principal", "bench-agent"])?;
    r.ok(home, &["grant", "bench-agent", "echo", "verb.exec.read"])?;
    Ok(token.trim().to_owned())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arm {
    Bare,
    File,
    PgDirect,
    PgPool,
}

const ARMS: [Arm; 4] = [Arm::Bare, Arm::File, Arm::PgDirect, Arm::PgPool];

impl Arm {
    fn label(self) -> &'static str {
        match self {
            Arm::Bare => "bin alone (`hcp-example-echo say --json -- hi`)",
            Arm::File => "`hcp exec echo.say hi` as a session, file store",
            Arm::PgDirect => "the same, PostgreSQL over its Unix socket (a connection per call)",
            Arm::PgPool => "the same, PostgreSQL through pgbouncer on a Unix socket",
        }
    }

    fn key(self) -> &'static str {
        match self {
            Arm::Bare => "bare",
            Arm::File => "file",
            Arm::PgDirect => "pg_direct",
            Arm::PgPool => "pg_pool",
        }
    }
}

/// The parallel arms: a label, and the stores whose callers start at once.
const PARALLEL: [(&str, &str); 4] = [
    ("file", "8 callers, file store"),
    ("pg_direct", "8 callers, PostgreSQL direct"),
    ("pg_pool", "8 callers, PostgreSQL through pgbouncer"),
    (
        "pg_pool_2",
        "2 machines × 8 callers, PostgreSQL through pgbouncer",
    ),
];

/// Starts every command at once and waits for all; the wall time of the round.
fn round(cmds: Vec<Command>) -> Result<Duration> {
    let t = Instant::now();
    let mut children = Vec::with_capacity(cmds.len());
    for mut c in cmds {
        c.stdout(Stdio::null()).stderr(Stdio::piped());
        children.push(c.spawn().context("cannot spawn")?);
    }
    for c in children {
        let out = c.wait_with_output().context("cannot wait")?;
        ensure!(
            out.status.success(),
            "a parallel call failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(t.elapsed())
}

/// Runs the benchmark (see the module docs).
///
/// # Errors
/// When a build, the server, a store or any run fails.
pub fn run(args: &Args) -> Result<()> {
    ensure!(args.runs >= 10, "`--runs` must be at least 10");
    let root = bench_exec::workspace_root();
    let release = bench_exec::release_dir()?;
    if !args.no_build {
        bench_exec::build(&root, &release)?;
    }
    let server = Server::get(&root)?;
    let scratch = std::env::temp_dir().join(format!("hcp-bench-state-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    let result = measure(args, &root, &release, &scratch, &server);
    server.stop(&root);
    if args.keep {
        eprintln!("kept `{}`", scratch.display());
    } else {
        let _ = std::fs::remove_dir_all(&scratch);
    }
    result
}

fn measure(
    args: &Args,
    root: &Path,
    release: &Path,
    scratch: &Path,
    server: &Server,
) -> Result<()> {
    let mut path_var = OsString::from(release.as_os_str());
    path_var.push(":/usr/local/bin:/usr/bin:/bin");
    let r = Runner {
        hcp: release.join("hcp"),
        bin: release.join("hcp-example-echo"),
        path_var,
        user_home: scratch.join("user"),
        work: scratch.join("work"),
    };
    for d in [&r.user_home, &r.work] {
        std::fs::create_dir_all(d).with_context(|| format!("cannot create `{}`", d.display()))?;
    }
    let echo = root.join("packs/echo");
    let schema = format!("bench_{}", std::process::id());
    let file = scratch.join("file");
    let direct = scratch.join("pg-direct");
    let pool = scratch.join("pg-pool");
    let pool2 = scratch.join("pg-pool-2");
    make_store(&r, &file, None, &echo)?;
    // The first machine creates the schema; the others are more machines of its fleet.
    std::fs::create_dir_all(&direct).context("cannot create the store")?;
    std::fs::write(
        direct.join("config.json"),
        serde_json::json!({"state": {"url": server.direct, "schema": schema}}).to_string(),
    )
    .context("cannot write config.json")?;
    r.ok(&direct, &["init"])?;
    eprintln!("{}", r.ok(&direct, &["state", "migrate"])?.trim());
    make_store(&r, &direct, Some((&server.direct, &schema)), &echo)?;
    make_store(&r, &pool, Some((&server.pool, &schema)), &echo)?;
    make_store(&r, &pool2, Some((&server.pool, &schema)), &echo)?;
    // One session of the fleet serves its three machines.
    let fleet_token = session(&r, &direct)?;
    let stores = [
        Store {
            token: session(&r, &file)?,
            home: file,
        },
        Store {
            home: direct,
            token: fleet_token.clone(),
        },
        Store {
            home: pool,
            token: fleet_token.clone(),
        },
        Store {
            home: pool2,
            token: fleet_token,
        },
    ];
    let command = |arm: Arm| -> Command {
        match arm {
            Arm::Bare => {
                let mut c = r.command(&r.bin);
                c.args(["say", "--json", "--", "hi"]);
                c
            }
            Arm::File => r.exec(&stores[0]),
            Arm::PgDirect => r.exec(&stores[1]),
            Arm::PgPool => r.exec(&stores[2]),
        }
    };
    for _ in 0..WARMUP {
        for arm in ARMS {
            timed(command(arm)).with_context(|| arm.label())?;
        }
    }
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64 | 1);
    let mut rng = Rng(seed ^ 0x9e37_79b9_7f4a_7c15);
    let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(args.runs); ARMS.len()];
    let mut cpu: Vec<Vec<Duration>> = vec![Vec::with_capacity(args.runs); ARMS.len()];
    let mut order: Vec<usize> = (0..ARMS.len()).collect();
    let script = scratch.join("select-1.sql");
    std::fs::write(&script, "SELECT 1;\n").context("cannot write the pgbench script")?;
    let pgbench = server
        .bin
        .clone()
        .filter(|b| connection_start(b, &script, &server.direct, 1).is_some());
    if pgbench.is_none() {
        eprintln!("no pgbench of the server: the connection-start floor is not measured");
    }
    let mut floors: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    eprintln!("{} interleaved rounds…", args.runs);
    let load_before = load_average();
    for _ in 0..args.runs {
        rng.shuffle(&mut order);
        for &i in &order {
            let (wall, _, used) = timed(command(ARMS[i])).with_context(|| ARMS[i].label())?;
            times[i].push(wall);
            cpu[i].push(used);
        }
        if let Some(b) = &pgbench {
            for (f, url) in floors.iter_mut().zip([&server.direct, &server.pool]) {
                f.extend(connection_start(b, &script, url, 3));
            }
        }
    }
    let rounds = (args.runs / 10).max(10);
    eprintln!("{rounds} rounds of parallel callers…");
    let mut par: Vec<Vec<Duration>> = vec![Vec::with_capacity(rounds); PARALLEL.len()];
    let mut porder: Vec<usize> = (0..PARALLEL.len()).collect();
    for _ in 0..rounds {
        rng.shuffle(&mut porder);
        for &i in &porder {
            let on: Vec<&Store> = match i {
                0 => vec![&stores[0]],
                1 => vec![&stores[1]],
                2 => vec![&stores[2]],
                _ => vec![&stores[2], &stores[3]],
            };
            let cmds = on
                .iter()
                .flat_map(|s| (0..CALLERS).map(|_| r.exec(s)))
                .collect();
            par[i].push(round(cmds).with_context(|| PARALLEL[i].1)?);
        }
    }
    let load_after = load_average();
    for s in &stores[..2] {
        r.ok(&s.home, &["audit", "verify"])?;
    }
    let st: Vec<Stats> = times
        .iter_mut()
        .zip(&cpu)
        .map(|(t, c)| stats(t, c))
        .collect();
    let none = vec![Duration::ZERO; rounds];
    let pst: Vec<Stats> = par.iter_mut().map(|t| stats(t, &none)).collect();
    let floors = floors.map(|mut v| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    });
    report(
        args,
        &st,
        &pst,
        &floors,
        rounds,
        (&load_before, &load_after),
    );
    Ok(())
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}

fn report(
    args: &Args,
    st: &[Stats],
    pst: &[Stats],
    floors: &[Option<f64>; 2],
    rounds: usize,
    load: (&str, &str),
) {
    let mut lines = String::new();
    macro_rules! line {
        ($($t:tt)*) => {{
            lines.push_str(&format!($($t)*));
            lines.push('\n');
        }};
    }
    line!(
        "\nwall time per call, {} interleaved rounds (ms); load average {} → {}\n",
        args.runs,
        load.0,
        load.1
    );
    line!("| arm | median | p10 | p90 | min | CPU, mean |");
    line!("|---|---|---|---|---|---|");
    for (i, arm) in ARMS.iter().enumerate() {
        let x = st[i];
        line!(
            "| {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |",
            arm.label(),
            x.median,
            x.p10,
            x.p90,
            x.min,
            x.cpu
        );
    }
    let (file, direct, pool) = (st[1], st[2], st[3]);
    let mark = |ok: bool| if ok { "met" } else { "missed" };
    let add_direct = direct.median - file.median;
    let add_pool = pool.median - file.median;
    line!("");
    line!(
        "- PostgreSQL direct − file store (medians): {add_direct:.3} ms (goal ≤ 1.5 ms: {}); at p10: {:.3} ms",
        mark(add_direct <= 1.5),
        direct.p10 - file.p10
    );
    line!(
        "- PostgreSQL through pgbouncer − file store (medians): {add_pool:.3} ms (goal ≤ 1.5 ms: {}); at p10: {:.3} ms",
        mark(add_pool <= 1.5),
        pool.p10 - file.p10
    );
    line!(
        "- ratios to the file store (medians): direct {:.3}, pgbouncer {:.3}",
        direct.median / file.median,
        pool.median / file.median
    );
    if let [Some(d), Some(p)] = floors {
        line!(
            "- floor of a connection per process (`pgbench -C`, one `SELECT 1`, median of the rounds' \"average connection time\"): direct {d:.3} ms, pgbouncer {p:.3} ms"
        );
    }
    line!("\nparallel callers: wall time of a round, all started at once, {rounds} rounds (ms)\n");
    line!("| callers | median | p10 | p90 | calls/s (median round) |");
    line!("|---|---|---|---|---|");
    for (i, (key, label)) in PARALLEL.iter().enumerate() {
        let n = if *key == "pg_pool_2" {
            2 * CALLERS
        } else {
            CALLERS
        };
        let x = pst[i];
        line!(
            "| {label} | {:.3} | {:.3} | {:.3} | {:.0} |",
            x.median,
            x.p10,
            x.p90,
            n as f64 / (x.median / 1000.0)
        );
    }
    let mut out: Box<dyn Write> = if args.json {
        Box::new(std::io::stderr().lock())
    } else {
        Box::new(std::io::stdout().lock())
    };
    let _ = out.write_all(lines.as_bytes());
    let _ = out.flush();
    if args.json {
        let row = |x: &Stats| {
            serde_json::json!({"median_ms": x.median, "p10_ms": x.p10, "p90_ms": x.p90,
                               "min_ms": x.min, "cpu_mean_ms": x.cpu})
        };
        let mut arms = serde_json::Map::new();
        for (i, a) in ARMS.iter().enumerate() {
            arms.insert(a.key().into(), row(&st[i]));
        }
        let mut parallel = serde_json::Map::new();
        for (i, (key, _)) in PARALLEL.iter().enumerate() {
            parallel.insert((*key).into(), row(&pst[i]));
        }
        println!(
            "{}",
            serde_json::json!({
                "bench": "exec_state",
                "runs": args.runs,
                "arms": arms,
                "parallel": parallel,
                "callers_per_machine": CALLERS,
                "pg_direct_over_file_ms": add_direct,
                "pg_pool_over_file_ms": add_pool,
                "connection_start_ms": {"direct": floors[0], "pgbouncer": floors[1]},
                "load_before": load.0,
                "load_after": load.1,
            })
        );
    }
}
