//! `cargo xtask bench store`: wall time of the real `hcp` binary on a store of many
//! installed packs (`hcp list`, `hcp show`, `hcp install --force`). Each figure is the
//! median (and 90th percentile) over `--runs` processes, so it includes process start; the
//! CPU column (user + system time of the children, from `/proc/self/stat`, averaged over
//! the runs) is the steadier figure on a loaded machine.
//! The in-process figures are the criterion benches of `hcp-store`
//! (`cargo bench -p hcp-store --bench store`); both go to BENCHMARKS.md.

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Arguments of `cargo xtask bench store`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Installed packs in the measured store.
    #[arg(long, default_value_t = 1000)]
    pub packs: usize,
    /// Timed runs of each command.
    #[arg(long, default_value_t = 30)]
    pub runs: usize,
    /// The `hcp` binary to measure (default: `cargo build --release -p hcp`, then its
    /// binary in the target directory).
    #[arg(long)]
    pub hcp: Option<PathBuf>,
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

fn release_hcp() -> Result<PathBuf> {
    let root = workspace_root();
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["build", "--release", "-p", "hcp"])
        .current_dir(&root)
        .status()
        .context("cannot run `cargo build --release -p hcp`")?;
    if !status.success() {
        bail!("`cargo build --release -p hcp` failed");
    }
    Ok(crate::bench_exec::release_dir()?.join("hcp"))
}

/// A lint-clean composite pack `id` with five verbs whose programs are `cat` and `true`.
fn write_pack(root: &Path, id: &str) -> Result<PathBuf> {
    let dir = root.join(id);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create `{}`", dir.display()))?;
    let verbs = ["list", "show", "count", "add", "wipe"];
    let surface: Vec<String> = verbs
        .iter()
        .map(|v| {
            format!(r#""{id}.{v}": {{"description": "{v}", "cli": ["cat", "--", "{{{{file}}}}"]}}"#)
        })
        .collect();
    let policy: Vec<String> = verbs
        .iter()
        .map(|v| format!(r#""{id}.{v}": {{"operation": "read", "privacy": {{"land": "local"}}}}"#))
        .collect();
    let files = [
        (
            "surface.json",
            format!(
                r#"{{"id": "{id}", "name": "Bench {id}", "kind": "composite", "binding": {{"mode": "local"}}, "verbs": {{{}}}}}"#,
                surface.join(",\n")
            ),
        ),
        (
            "policy.json",
            format!(
                r#"{{"surface_id": "{id}", "version": 1, "verbs": {{{}}}}}"#,
                policy.join(",\n")
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

/// User + system time of this process's waited-for children (`cutime` + `cstime` of
/// `/proc/self/stat`, in clock ticks of 1/100 s, the fixed `USER_HZ` of Linux).
fn children_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name; cutime and cstime are fields 16 and 17.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = f.get(13)?.parse::<u64>().ok()? + f.get(14)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

struct Bench {
    hcp: PathBuf,
    home: PathBuf,
}

impl Bench {
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.hcp);
        c.args(args)
            .env("HCP_HOME", &self.home)
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        c
    }

    fn run_ok(&self, args: &[&str]) -> Result<Duration> {
        let t = Instant::now();
        let out = self.cmd(args).output()?;
        let d = t.elapsed();
        if !out.status.success() {
            bail!(
                "`hcp {}` failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(d)
    }

    fn measure(&self, label: &str, args: &[&str], runs: usize) -> Result<()> {
        self.run_ok(args)?; // warm the page cache
        let mut times = Vec::with_capacity(runs);
        let cpu0 = children_cpu();
        for _ in 0..runs {
            times.push(self.run_ok(args)?);
        }
        let cpu = match (cpu0, children_cpu()) {
            (Some(a), Some(b)) => format!("{:.2}", (b - a).as_secs_f64() * 1000.0 / runs as f64),
            _ => "n/a".to_owned(),
        };
        times.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let median = times[times.len() / 2];
        let p90 = times[(times.len() * 9 / 10).min(times.len() - 1)];
        println!(
            "| {label} | {:.2} | {:.2} | {:.2} | {cpu} |",
            ms(median),
            ms(p90),
            ms(times[0])
        );
        Ok(())
    }
}

/// Runs the store benchmark and prints a Markdown table (milliseconds).
///
/// # Errors
/// When the binary cannot be built or a command fails.
pub fn run(args: Args) -> Result<()> {
    if args.runs == 0 {
        bail!("`--runs` must be at least 1");
    }
    let hcp = match args.hcp {
        Some(h) => h,
        None => release_hcp()?,
    };
    let scratch = std::env::temp_dir().join(format!("hcp-bench-store-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    let b = Bench {
        hcp,
        home: scratch.join("home"),
    };
    let result = (|| -> Result<()> {
        let src = scratch.join("src");
        eprintln!(
            "installing {} packs into `{}`…",
            args.packs,
            b.home.display()
        );
        for i in 0..args.packs {
            let dir = write_pack(&src, &format!("pack-{i:04}"))?;
            b.run_ok(&["install", dir.to_str().context("non-UTF-8 path")?])?;
        }
        for i in (0..args.packs).step_by(2) {
            b.run_ok(&["activate", &format!("pack-{i:04}")])?;
        }
        let extra = write_pack(&src, "extra")?;
        let extra = extra.to_str().context("non-UTF-8 path")?.to_owned();
        b.run_ok(&["install", &extra])?;
        let n = args.packs;
        println!(
            "\n`hcp` wall time per process, {} runs, store of {} packs (ms)\n",
            args.runs,
            n + 1
        );
        println!("| command | median | p90 | min | cpu |");
        println!("|---|---|---|---|---|");
        b.measure(
            &format!("`hcp list` ({} packs)", n + 1),
            &["list"],
            args.runs,
        )?;
        b.measure(
            &format!("`hcp list --json` ({} packs)", n + 1),
            &["list", "--json"],
            args.runs,
        )?;
        b.measure(
            "`hcp show ID --json`",
            &["show", "extra", "--json"],
            args.runs,
        )?;
        b.measure(
            "`hcp install --force DIR`",
            &["install", "--force", &extra],
            args.runs,
        )?;
        b.measure("`hcp activate ID`", &["activate", "extra"], args.runs)?;
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&scratch);
    result
}
