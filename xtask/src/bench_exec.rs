//! `cargo xtask bench exec`: what `hcp exec` adds to running the bin it wraps.
//!
//! Eight arms, interleaved in one run (each round runs every arm once, in a shuffled
//! order, so that load from other processes falls on all of them alike):
//!
//! * `bare`: the wrapped bin run directly (`hcp-example-echo say --json -- hi`);
//! * `floor`: `spawn-floor` (`xtask/src/bin/spawn-floor.rs`, built optimised by plain
//!   `rustc`, so dynamically linked and position-independent) running that
//!   bin: the least any program that starts a bin and waits for it can cost;
//! * `floor_static`: the same program linked as `hcp` is on x86_64 Linux (static, non-PIE,
//!   `.cargo/config.toml`), the least a launcher built like hcp can cost;
//! * `floor_durable`: `durable-floor` (`xtask/src/bin/durable-floor.rs`, plain `rustc`)
//!   appending one 256-byte record with `fdatasync` to a file beside the stores, then
//!   running the bin: the floor of a durably audited exec (RUNTIME §6 writes the intent
//!   durably before the child starts), the reference of the 1.35× goal (issue 23; with the
//!   view's own floor it is measured beside it by `confine_pairs`);
//! * `floor_durable_static`: the same linked as hcp is;
//! * `hcp`: `hcp exec echo.say hi` on a store holding only the `echo` gold pack (and the
//!   one below): a `local`-land verb, whose child hcp confines to its sandbox;
//! * `hcp_personal`: `hcp exec benchp.say hi`, the same bin as a `personal`-land verb
//!   of a fixture pack in that store, for the record;
//! * `hcp_many`: the same on a store holding `echo` and `--packs` more active packs;
//! * `baseline` (with `--baseline PATH`): `PATH exec echo.say hi`, another build of hcp
//!   (an older commit's release `hcp`) on its own store holding only `echo`, installed by
//!   that build, so a change is measured against its base in the same interleaved run.
//!
//! A last row, `sync`, times in process what the disk charges for one durable audit
//! append at that moment: `write` of a 500-byte line with `O_APPEND`, then `fdatasync`, to
//! a file beside the stores. On a contended disk it is most of `hcp exec`'s time.
//!
//! Every run is one process started by this benchmark with stdin and stdout on
//! `/dev/null`, timed from just before the spawn to the return of `wait4(2)`, whose
//! rusage also gives its CPU time (user + system, with the children it waited for): on a
//! loaded machine a steadier figure than wall time, though it leaves out time spent
//! waiting for the disk. The owner runs the verb, so no session or grant is read, and
//! the audit trail is durable (`sync_data` per append), as shipped.
//!
//! Peak RSS: `ru_maxrss` of a process also counts the memory of the process that spawned
//! it, as it was when it called `execve` (and `posix_spawn` shares this benchmark's
//! memory until then), so the timed runs cannot tell it. It is taken in a separate pass
//! through GNU time (`/usr/bin/time -f %M`, a small process that forks), which bounds it
//! by time's own ~2 MiB; without GNU time the table says so and gives the upper bound
//! from the timed runs. Before timing, each arm is warmed up and `hcp exec`'s output is
//! checked to be the bin's own; after timing, `hcp audit verify` must pass on both
//! stores. Figures: median, 10th and 90th percentile and minimum, in milliseconds.

use anyhow::{Context, Result, bail, ensure};
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Arguments of `cargo xtask bench exec`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Timed runs of each arm.
    #[arg(long, default_value_t = 300)]
    pub runs: usize,
    /// Packs installed beside `echo` in the second store.
    #[arg(long, default_value_t = 1000)]
    pub packs: usize,
    /// Print one line of JSON after the table.
    #[arg(long)]
    pub json: bool,
    /// Keep the scratch directory (the two stores) and print its path, for profiling.
    #[arg(long)]
    pub keep: bool,
    /// Use the release binaries already in the target directory instead of building.
    #[arg(long)]
    pub no_build: bool,
    /// Another `hcp` binary (say, the release build of `main`) to interleave as the
    /// `baseline` arm, on its own store of one pack.
    #[arg(long, value_name = "PATH")]
    pub baseline: Option<PathBuf>,
    /// The state backend to measure against the file store: `postgres` runs
    /// `crate::bench_exec_state` (the server of `HCP_TEST_PG_URL` and
    /// `HCP_TEST_PG_POOL_URL`, else a throw-away one from `.ci/pg-start --pool`).
    #[arg(long, value_enum, default_value_t = StateArg::File)]
    pub state: StateArg,
}

/// `--state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StateArg {
    /// The file store alone (the arms above).
    File,
    /// The fleet's PostgreSQL state against the file store, pairwise.
    Postgres,
}

/// Warm-up runs of each arm before timing.
pub(crate) const WARMUP: usize = 20;

pub(crate) fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// Where `cargo build --release` puts the bins: the `release` directory beside the
/// profile directory this program runs from (`cargo xtask` is `cargo run`, built under
/// the same configuration), so `target/release/`, or `target/<tuple>/release/` when the
/// configuration names a target (`.cargo/config.toml`).
///
/// # Errors
/// When the path of the running program is unknown.
pub fn release_dir() -> Result<PathBuf> {
    let profile = crate::demo::profile_dir()?;
    let target = profile
        .parent()
        .context("the profile directory has no parent")?;
    Ok(target.join("release"))
}

/// Builds `hcp` and the example bins in release, and the two floors with the same rustc.
pub(crate) fn build(root: &Path, release: &Path) -> Result<()> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(&cargo)
        .args(["build", "--release", "-p", "hcp", "-p", "hcp-examples"])
        .current_dir(root)
        .status()
        .context("cannot run `cargo build --release`")?;
    ensure!(
        status.success(),
        "`cargo build --release -p hcp -p hcp-examples` failed"
    );
    std::fs::create_dir_all(release)
        .with_context(|| format!("cannot create `{}`", release.display()))?;
    // Each floor as plain `rustc` links it, and linked the way `.cargo/config.toml` links
    // `hcp` on x86_64 Linux: static and not position-independent.
    let statik = [
        "-C",
        "target-feature=+crt-static",
        "-C",
        "relocation-model=static",
    ];
    for (src, out) in [
        ("spawn-floor", "spawn-floor"),
        ("durable-floor", "durable-floor"),
    ] {
        build_floor(root, src, &release.join(out), &[])?;
        build_floor(root, src, &release.join(format!("{out}-static")), &statik)?;
    }
    Ok(())
}

/// Compiles `xtask/src/bin/SRC.rs` optimised with plain `rustc` into `out`, with `extra`
/// flags.
fn build_floor(root: &Path, src: &str, out: &Path, extra: &[&str]) -> Result<()> {
    let status = Command::new("rustc")
        .args([
            "--edition",
            "2024",
            "-C",
            "opt-level=3",
            "-C",
            "panic=abort",
            "-C",
            "codegen-units=1",
            "-C",
            "strip=symbols",
        ])
        .args(extra)
        .arg("-o")
        .arg(out)
        .arg(root.join(format!("xtask/src/bin/{src}.rs")))
        .status()
        .context("cannot run `rustc` for the floor")?;
    ensure!(status.success(), "building `{}` failed", out.display());
    Ok(())
}

/// A lint-clean composite pack `id` with one verb, `ID.say`, wrapping the same bin as
/// `echo.say`, in `local` land.
pub(crate) fn write_fixture(root: &Path, id: &str) -> Result<PathBuf> {
    write_fixture_in(root, id, "local")
}

/// [`write_fixture`] with the verb in `land`.
fn write_fixture_in(root: &Path, id: &str, land: &str) -> Result<PathBuf> {
    let dir = root.join(id);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create `{}`", dir.display()))?;
    let files = [
        (
            "surface.json",
            format!(
                r#"{{"id": "{id}", "name": "Bench {id}", "kind": "composite", "binding": {{"mode": "local"}}, "verbs": {{"{id}.say": {{"description": "Print the text.", "cli": ["hcp-example-echo", "say", "--json", "--", "{{{{text}}}}"]}}}}}}"#
            ),
        ),
        (
            "policy.json",
            format!(
                r#"{{"surface_id": "{id}", "version": 1, "verbs": {{"{id}.say": {{"operation": "read", "privacy": {{"land": "{land}"}}}}}}}}"#
            ),
        ),
        (
            "HARNESS.md",
            "# Bench\n\nA pack for benchmarks.\n\n## Hot path\n\n| a | b |\n|---|---|\n| x | y |\n\n## Anti-patterns\n\n- none\n".to_owned(),
        ),
    ];
    for (name, text) in files {
        std::fs::write(dir.join(name), text)
            .with_context(|| format!("cannot write `{}`", dir.join(name).display()))?;
    }
    Ok(dir)
}

/// The fixed environment of every run, so that no arm sees more than another.
pub(crate) struct Setup {
    pub(crate) hcp: PathBuf,
    /// The `--baseline` hcp, when given.
    pub(crate) baseline: Option<PathBuf>,
    pub(crate) bin: PathBuf,
    pub(crate) floor: PathBuf,
    pub(crate) floor_static: PathBuf,
    pub(crate) durable: PathBuf,
    pub(crate) durable_static: PathBuf,
    /// The file the durable floors append to (beside the stores, on their disk).
    pub(crate) record: PathBuf,
    pub(crate) path_var: OsString,
    /// `HOME` of every run, apart from `work`: a sandbox may not hold the caller's home.
    pub(crate) home: PathBuf,
    /// The working directory of every run.
    pub(crate) work: PathBuf,
}

impl Setup {
    pub(crate) fn command(&self, program: &Path) -> Command {
        let mut c = Command::new(program);
        c.env_clear()
            .env("PATH", &self.path_var)
            .env("HOME", &self.home)
            .current_dir(&self.work)
            .stdin(Stdio::null());
        c
    }

    pub(crate) fn hcp(&self, home: &Path, args: &[&str]) -> Command {
        self.hcp_of(&self.hcp, home, args)
    }

    pub(crate) fn hcp_of(&self, bin: &Path, home: &Path, args: &[&str]) -> Command {
        let mut c = self.command(bin);
        c.env("HCP_HOME", home).args(args);
        c
    }

    pub(crate) fn hcp_ok(&self, home: &Path, args: &[&str]) -> Result<Vec<u8>> {
        self.hcp_ok_of(&self.hcp, home, args)
    }

    pub(crate) fn hcp_ok_of(&self, bin: &Path, home: &Path, args: &[&str]) -> Result<Vec<u8>> {
        let out = self
            .hcp_of(bin, home, args)
            .output()
            .with_context(|| format!("cannot run `hcp {}`", args.join(" ")))?;
        if !out.status.success() {
            bail!(
                "`hcp {}` failed ({}): {}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(out.stdout)
    }
}

/// The arms, in the order of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arm {
    Bare,
    Floor,
    FloorStatic,
    FloorDurable,
    FloorDurableStatic,
    Hcp,
    HcpMany,
    HcpPersonal,
    Baseline,
}

const ARMS: [Arm; 8] = [
    Arm::Bare,
    Arm::Floor,
    Arm::FloorStatic,
    Arm::FloorDurable,
    Arm::FloorDurableStatic,
    Arm::Hcp,
    Arm::HcpMany,
    Arm::HcpPersonal,
];
/// The bin's arguments after its path: the call `hcp exec echo.say hi` makes.
const BIN_ARGS: [&str; 4] = ["say", "--json", "--", "hi"];
/// The verb and its value.
const EXEC_ARGS: [&str; 3] = ["exec", "echo.say", "hi"];
/// The same bin and value as a `personal`-land verb.
const EXEC_PERSONAL_ARGS: [&str; 3] = ["exec", "benchp.say", "hi"];

struct Stores {
    one: PathBuf,
    many: PathBuf,
    /// The baseline's store of one pack.
    base: PathBuf,
}

impl Arm {
    fn label(self, packs: usize) -> String {
        match self {
            Arm::Bare => "bin alone (`hcp-example-echo say --json -- hi`)".into(),
            Arm::Floor => "floor: `spawn-floor` + bin".into(),
            Arm::FloorStatic => {
                "floor linked as hcp is (static, non-PIE): `spawn-floor-static` + bin".into()
            }
            Arm::FloorDurable => {
                "durable floor: `durable-floor` (256-byte record + `fdatasync`) + bin".into()
            }
            Arm::FloorDurableStatic => {
                "durable floor linked as hcp is: `durable-floor-static` + bin".into()
            }
            Arm::Hcp => "`hcp exec echo.say hi`, 1 pack installed".into(),
            Arm::HcpMany => format!("`hcp exec echo.say hi`, {} packs installed", packs + 1),
            Arm::HcpPersonal => "`hcp exec benchp.say hi` (`personal` land), 2 packs".into(),
            Arm::Baseline => "baseline: `--baseline` hcp, `exec echo.say hi`, 1 pack".into(),
        }
    }

    fn key(self) -> &'static str {
        match self {
            Arm::Bare => "bare",
            Arm::Floor => "floor",
            Arm::FloorStatic => "floor_static",
            Arm::FloorDurable => "floor_durable",
            Arm::FloorDurableStatic => "floor_durable_static",
            Arm::Hcp => "hcp",
            Arm::HcpMany => "hcp_many",
            Arm::HcpPersonal => "hcp_personal",
            Arm::Baseline => "baseline",
        }
    }

    fn command(self, s: &Setup, stores: &Stores) -> Command {
        match self {
            Arm::Bare => {
                let mut c = s.command(&s.bin);
                c.args(BIN_ARGS);
                c
            }
            Arm::Floor => {
                let mut c = s.command(&s.floor);
                c.arg(&s.bin).args(BIN_ARGS);
                c
            }
            Arm::FloorStatic => {
                let mut c = s.command(&s.floor_static);
                c.arg(&s.bin).args(BIN_ARGS);
                c
            }
            Arm::FloorDurable => {
                let mut c = s.command(&s.durable);
                c.arg(&s.record).arg(&s.bin).args(BIN_ARGS);
                c
            }
            Arm::FloorDurableStatic => {
                let mut c = s.command(&s.durable_static);
                c.arg(&s.record).arg(&s.bin).args(BIN_ARGS);
                c
            }
            Arm::Hcp => s.hcp(&stores.one, &EXEC_ARGS),
            Arm::HcpMany => s.hcp(&stores.many, &EXEC_ARGS),
            Arm::HcpPersonal => s.hcp(&stores.one, &EXEC_PERSONAL_ARGS),
            Arm::Baseline => s.hcp_of(
                s.baseline.as_deref().unwrap_or(&s.hcp),
                &stores.base,
                &EXEC_ARGS,
            ),
        }
    }
}

/// One timed run: wall time, `ru_maxrss` in KiB, and CPU time (user + system, of the
/// process and the children it waited for).
pub(crate) fn timed(mut cmd: Command) -> Result<(Duration, i64, Duration)> {
    cmd.stdout(Stdio::null()).stderr(Stdio::null());
    let t = Instant::now();
    let child = cmd.spawn().context("cannot spawn")?;
    let pid = libc::pid_t::try_from(child.id()).context("pid out of range")?;
    let mut status: libc::c_int = 0;
    // SAFETY: `rusage` is plain old data; zeroed is a valid value for it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own unreaped child; both pointers are to live locals. `Child`
    // is dropped without waiting, so nothing reaps it twice.
    let r = loop {
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == -1 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        break r;
    };
    let wall = t.elapsed();
    drop(child);
    ensure!(
        r == pid,
        "wait4 failed: {}",
        std::io::Error::last_os_error()
    );
    ensure!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "exited with wait status {status:#x}"
    );
    let tv = |t: libc::timeval| {
        Duration::from_secs(u64::try_from(t.tv_sec).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t.tv_usec).unwrap_or(0))
    };
    Ok((
        wall,
        usage.ru_maxrss,
        tv(usage.ru_utime) + tv(usage.ru_stime),
    ))
}

/// A small xorshift generator for the order of arms in each round.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub(crate) fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = usize::try_from(self.next() % (i as u64 + 1)).unwrap_or(0);
            v.swap(i, j);
        }
    }
}

/// Median, p10, p90 and minimum wall time of one arm, and its mean CPU time, in
/// milliseconds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stats {
    pub(crate) cpu: f64,
    pub(crate) median: f64,
    pub(crate) p10: f64,
    pub(crate) p90: f64,
    pub(crate) min: f64,
}

pub(crate) fn stats(times: &mut [Duration], cpu: &[Duration]) -> Stats {
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let at = |q: usize| ms(times[(times.len() * q / 100).min(times.len() - 1)]);
    let n = times.len();
    let median = if n % 2 == 1 {
        ms(times[n / 2])
    } else {
        (ms(times[n / 2 - 1]) + ms(times[n / 2])) / 2.0
    };
    let cpu_total: Duration = cpu.iter().sum();
    Stats {
        cpu: ms(cpu_total) / cpu.len().max(1) as f64,
        median,
        p10: at(10),
        p90: at(90),
        min: ms(times[0]),
    }
}

/// Installs the `echo` gold pack (active) into `home`, and `extra` fixture packs.
fn fill_store(s: &Setup, home: &Path, echo: &Path, src: &Path, extra: usize) -> Result<()> {
    let echo = echo.to_str().context("non-UTF-8 path")?;
    s.hcp_ok(home, &["install", echo, "--activate"])?;
    for i in 0..extra {
        let dir = write_fixture(src, &format!("bench-{i:04}"))?;
        let dir = dir.to_str().context("non-UTF-8 path")?;
        s.hcp_ok(home, &["install", dir, "--activate"])?;
        if (i + 1) % 250 == 0 {
            eprintln!("  {} packs installed", i + 1);
        }
    }
    Ok(())
}

/// Runs the exec benchmark and prints a Markdown table (and a JSON line with `--json`).
///
/// # Errors
/// When a build fails, a store cannot be filled, any run fails or `hcp exec`'s output
/// differs from the bin's.
pub fn run(args: &Args) -> Result<()> {
    if args.state == StateArg::Postgres {
        return crate::bench_exec_state::run(args);
    }
    ensure!(args.runs >= 10, "`--runs` must be at least 10");
    let root = workspace_root();
    let release = release_dir()?;
    if !args.no_build {
        build(&root, &release)?;
    }
    let scratch = std::env::temp_dir().join(format!("hcp-bench-exec-{}", std::process::id()));
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

fn measure(args: &Args, root: &Path, scratch: &Path, s: &Setup) -> Result<()> {
    for p in [
        &s.hcp,
        &s.bin,
        &s.floor,
        &s.floor_static,
        &s.durable,
        &s.durable_static,
    ]
    .into_iter()
    .chain(s.baseline.as_ref())
    {
        ensure!(p.is_file(), "`{}` is missing: build it first", p.display());
    }
    let arms: Vec<Arm> = ARMS
        .iter()
        .copied()
        .chain(s.baseline.is_some().then_some(Arm::Baseline))
        .collect();
    let stores = Stores {
        one: scratch.join("home-1"),
        many: scratch.join(format!("home-{}", args.packs + 1)),
        base: scratch.join("home-baseline"),
    };
    let echo = root.join("packs/echo");
    let src = scratch.join("src");
    eprintln!("store of 1 pack: `{}`", stores.one.display());
    fill_store(s, &stores.one, &echo, &src, 0)?;
    let personal = write_fixture_in(&src, "benchp", "personal")?;
    let personal = personal.to_str().context("non-UTF-8 path")?;
    s.hcp_ok(&stores.one, &["install", personal, "--activate"])?;
    if let Some(b) = &s.baseline {
        // The baseline's own store of one pack, installed by the baseline.
        eprintln!("baseline store of 1 pack: `{}`", stores.base.display());
        let e = echo.to_str().context("non-UTF-8 path")?;
        s.hcp_ok_of(b, &stores.base, &["install", e, "--activate"])?;
    }
    eprintln!(
        "store of {} packs: `{}` (one `hcp install --activate` each)",
        args.packs + 1,
        stores.many.display()
    );
    fill_store(s, &stores.many, &echo, &src, args.packs)?;

    // The output must be the bin's own, byte for byte.
    let bare = s
        .command(&s.bin)
        .args(BIN_ARGS)
        .output()
        .context("cannot run the bin")?;
    let via = s.hcp_ok(&stores.one, &EXEC_ARGS)?;
    ensure!(
        bare.status.success() && bare.stdout == via,
        "`hcp exec` printed {:?}, the bin {:?}",
        String::from_utf8_lossy(&via),
        String::from_utf8_lossy(&bare.stdout)
    );
    // Warm up; the first exec hashes the bin and keeps its stat fingerprint once the
    // bin's ctime is old enough (see `hcp_adapter::pin`), so later ones take the fast path.
    for attempt in 0..3 {
        for _ in 0..WARMUP {
            for &arm in &arms {
                timed(arm.command(s, &stores)).with_context(|| arm.label(args.packs))?;
            }
        }
        let mut homes = vec![&stores.one, &stores.many];
        if s.baseline.is_some() {
            homes.push(&stores.base);
        }
        let cached = homes
            .iter()
            .all(|h| h.join("packs/echo/.hcp/fingerprints.json").is_file())
            && stores
                .one
                .join("packs/benchp/.hcp/fingerprints.json")
                .is_file();
        if cached {
            break;
        }
        if attempt == 2 {
            eprintln!("warning: no fingerprint kept; every exec hashes the bin");
        } else {
            std::thread::sleep(Duration::from_millis(2100));
        }
    }

    let sync_path = scratch.join("sync.jsonl");
    let mut sync_file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&sync_path)
        .with_context(|| format!("cannot open `{}`", sync_path.display()))?;
    let sync_line = [b'x'; 499];
    let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(args.runs); arms.len() + 1];
    let mut cpu: Vec<Vec<Duration>> = vec![Vec::with_capacity(args.runs); arms.len() + 1];
    let mut bound: Vec<i64> = vec![0; arms.len()];
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64 | 1);
    let mut rng = Rng(seed ^ 0x9e37_79b9_7f4a_7c15);
    let mut order: Vec<usize> = (0..=arms.len()).collect();
    eprintln!("{} interleaved rounds…", args.runs);
    let load_before = load_average();
    for _ in 0..args.runs {
        rng.shuffle(&mut order);
        for &i in &order {
            let Some(&arm) = arms.get(i) else {
                let t = Instant::now();
                sync_file.write_all(&sync_line)?;
                sync_file.write_all(b"\n")?;
                sync_file.sync_data()?;
                times[i].push(t.elapsed());
                cpu[i].push(Duration::ZERO);
                continue;
            };
            let (wall, maxrss, used) =
                timed(arm.command(s, &stores)).with_context(|| arm.label(args.packs))?;
            times[i].push(wall);
            cpu[i].push(used);
            bound[i] = bound[i].max(maxrss);
        }
    }
    let load_after = load_average();
    for home in [&stores.one, &stores.many] {
        s.hcp_ok(home, &["audit", "verify"])?;
    }
    if let Some(b) = &s.baseline {
        s.hcp_ok_of(b, &stores.base, &["audit", "verify"])?;
    }
    let rss = peak_rss(s, &arms, &stores, scratch)?;
    let st: Vec<Stats> = times
        .iter_mut()
        .zip(&cpu)
        .map(|(t, c)| stats(t, c))
        .collect();
    let r = Report {
        arms,
        st,
        rss_exact: rss.is_some(),
        rss: rss.unwrap_or(bound),
        load: (load_before, load_after),
    };
    report(args, &r);
    Ok(())
}

/// Runs of each arm under GNU time for the peak RSS pass.
const RSS_RUNS: usize = 10;

/// The peak RSS of each arm in KiB, through GNU time; `None` without it.
fn peak_rss(s: &Setup, arms: &[Arm], stores: &Stores, scratch: &Path) -> Result<Option<Vec<i64>>> {
    let time = Path::new("/usr/bin/time");
    if !time.is_file() {
        eprintln!("warning: no GNU time (`/usr/bin/time`): peak RSS is an upper bound");
        return Ok(None);
    }
    let out = scratch.join("rss.txt");
    let mut peaks = vec![0i64; arms.len()];
    for (i, arm) in arms.iter().enumerate() {
        for _ in 0..RSS_RUNS {
            let inner = arm.command(s, stores);
            let mut c = s.command(time);
            c.arg("-f").arg("%M").arg("-o").arg(&out);
            c.arg(inner.get_program()).args(inner.get_args());
            for (k, v) in inner.get_envs() {
                if let Some(v) = v {
                    c.env(k, v);
                }
            }
            timed(c).with_context(|| format!("{} under GNU time", arm.label(0)))?;
            let text = std::fs::read_to_string(&out)
                .with_context(|| format!("cannot read `{}`", out.display()))?;
            let kib: i64 = text
                .lines()
                .last()
                .unwrap_or("")
                .trim()
                .parse()
                .with_context(|| format!("GNU time printed {text:?}"))?;
            peaks[i] = peaks[i].max(kib);
        }
    }
    Ok(Some(peaks))
}

pub(crate) fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}

/// What one run of the benchmark found.
struct Report {
    /// The arms measured, in table order.
    arms: Vec<Arm>,
    /// One per arm, then the in-process `sync` row.
    st: Vec<Stats>,
    /// Peak RSS of each arm, KiB.
    rss: Vec<i64>,
    /// Whether `rss` was measured through GNU time (else: upper bounds).
    rss_exact: bool,
    /// The 1-minute load average before and after the timed rounds.
    load: (String, String),
}

/// Writes the table, on stdout, or on stderr with `--json` (stdout then holds only the
/// JSON line).
fn report(args: &Args, r: &Report) {
    let st = &r.st;
    let [
        bare,
        floor,
        floor_static,
        durable,
        durable_static,
        hcp,
        many,
        personal,
    ] = [st[0], st[1], st[2], st[3], st[4], st[5], st[6], st[7]];
    let sync = st[r.arms.len()];
    let base = r
        .arms
        .iter()
        .position(|a| *a == Arm::Baseline)
        .map(|i| st[i]);
    let mut out: Box<dyn Write> = if args.json {
        Box::new(std::io::stderr().lock())
    } else {
        Box::new(std::io::stdout().lock())
    };
    let mut lines = String::new();
    macro_rules! line {
        ($($t:tt)*) => {{
            lines.push_str(&format!($($t)*));
            lines.push('\n');
        }};
    }
    let rss_note = if r.rss_exact { "" } else { "≤ " };
    line!(
        "\nwall time per run, {} interleaved rounds (ms); load average {} → {}\n",
        args.runs,
        r.load.0,
        r.load.1
    );
    line!("| arm | median | p10 | p90 | min | CPU, mean | peak RSS (KiB) |");
    line!("|---|---|---|---|---|---|---|");
    for (i, arm) in r.arms.iter().enumerate() {
        let x = st[i];
        line!(
            "| {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {rss_note}{} |",
            arm.label(args.packs),
            x.median,
            x.p10,
            x.p90,
            x.min,
            x.cpu,
            r.rss[i]
        );
    }
    line!(
        "| disk alone: `write` + `fdatasync` of a 500-byte line (in process) | {:.3} | {:.3} | {:.3} | {:.3} | | |",
        sync.median,
        sync.p10,
        sync.p90,
        sync.min
    );
    let ratio_floor = hcp.median / floor.median;
    let over_bare = hcp.median - bare.median;
    let ratio_packs = many.median / hcp.median;
    let peak_kib = r.rss[5].max(r.rss[6]);
    let ratio_floor_static = hcp.median / floor_static.median;
    let peak_mib = peak_kib as f64 / 1024.0;
    let mark = |ok: bool| if ok { "met" } else { "missed" };
    let ratio_durable = hcp.median / durable.median;
    let ratio_durable_static = hcp.median / durable_static.median;
    line!("");
    line!(
        "- hcp exec / durable floor (medians): {ratio_durable:.3} (goal ≤ 1.35: {}); p10: {:.3}",
        mark(ratio_durable <= 1.35),
        hcp.p10 / durable.p10
    );
    line!(
        "- hcp exec / durable floor linked as hcp is (medians): {ratio_durable_static:.3}; p10: {:.3}",
        hcp.p10 / durable_static.p10
    );
    line!(
        "- hcp exec of a `personal`-land verb / durable floor (medians): {:.3}; / hcp exec of the `local` one: {:.3} (what confining the child to its sandbox costs)",
        personal.median / durable.median,
        hcp.median / personal.median
    );
    line!(
        "- hcp exec − durable floor (medians): {:.3} ms; by CPU time: {:.3} ms",
        hcp.median - durable.median,
        hcp.cpu - durable.cpu
    );
    line!(
        "- hcp exec / floor (medians): {ratio_floor:.3} (goal ≤ 1.2: {})",
        mark(ratio_floor <= 1.2)
    );
    line!(
        "- hcp exec / floor linked as hcp is (medians): {ratio_floor_static:.3} (goal ≤ 1.2: {})",
        mark(ratio_floor_static <= 1.2)
    );
    line!(
        "- fdatasync alone / floor (medians): {:.3}, / floor linked as hcp is: {:.3} (the durable append's share before hcp does anything)",
        sync.median / floor.median,
        sync.median / floor_static.median
    );
    line!(
        "- hcp exec − bin alone (medians): {over_bare:.3} ms (goal ≤ 1.5 ms: {})",
        mark(over_bare <= 1.5)
    );
    line!(
        "- hcp exec − floor − fdatasync (medians): {:.3} ms (what hcp adds besides the durable append)",
        hcp.median - floor.median - sync.median
    );
    line!(
        "- the same at p10 (the least disturbed runs): hcp / floor {:.3}, hcp − bin {:.3} ms, {} packs / 1 pack {:.3}",
        hcp.p10 / floor.p10,
        hcp.p10 - bare.p10,
        args.packs + 1,
        many.p10 / hcp.p10
    );
    line!(
        "- CPU time (mean): hcp exec − floor {:.3} ms; {} packs / 1 pack {:.3}",
        hcp.cpu - floor.cpu,
        args.packs + 1,
        many.cpu / hcp.cpu
    );
    line!(
        "- hcp exec, {} packs / 1 pack (medians): {ratio_packs:.3} (goal ≤ 1.05: {})",
        args.packs + 1,
        mark(ratio_packs <= 1.05)
    );
    line!(
        "- peak RSS of hcp exec: {rss_note}{peak_mib:.2} MiB (goal ≤ 8 MB: {})",
        mark(peak_kib as f64 * 1024.0 <= 8e6)
    );
    if let Some(b) = base {
        line!(
            "- hcp exec / baseline (medians): {:.3}; at p10: {:.3}; CPU time (mean): {:.3} ms vs {:.3} ms",
            hcp.median / b.median,
            hcp.p10 / b.p10,
            hcp.cpu,
            b.cpu
        );
    }
    let _ = out.write_all(lines.as_bytes());
    let _ = out.flush();
    if args.json {
        let row = |x: &Stats| {
            serde_json::json!({
                "median_ms": x.median, "p10_ms": x.p10, "p90_ms": x.p90, "min_ms": x.min,
                "cpu_mean_ms": x.cpu,
            })
        };
        let mut arms = serde_json::Map::new();
        for (i, a) in r.arms.iter().enumerate() {
            let mut v = row(&st[i]);
            v["peak_rss_kib"] = r.rss[i].into();
            arms.insert(a.key().into(), v);
        }
        arms.insert("sync".into(), row(&sync));
        let line = serde_json::json!({
            "bench": "exec",
            "runs": args.runs,
            "packs": args.packs + 1,
            "arms": arms,
            "ratio_hcp_to_floor": ratio_floor,
            "ratio_hcp_to_durable_floor": ratio_durable,
            "ratio_hcp_to_durable_floor_static": ratio_durable_static,
            "ratio_personal_to_durable_floor": personal.median / durable.median,
            "ratio_hcp_to_floor_static": ratio_floor_static,
            "hcp_over_bare_ms": over_bare,
            "ratio_many_to_one": ratio_packs,
            "ratio_hcp_to_baseline": base.map(|b| hcp.median / b.median),
            "peak_rss_kib": peak_kib,
            "peak_rss_exact": r.rss_exact,
            "load_before": r.load.0,
            "load_after": r.load.1,
        });
        println!("{line}");
    }
}
