//! `cargo xtask test [--ci] [-- ARGS…]`: the whole suite with what CI starts around it.
//!
//! As `.ci/run` does, and in its order: a throw-away PostgreSQL server with TLS and a
//! pgbouncer in front (`.ci/pg-start --tls --pool`, for the fleet tests), the checkout
//! made reachable by an ordinary user and the view's setup (`.ci/view-setup`: user
//! namespaces for `nobody`, a delegated cgroup), the MCP inspector CI installed when it is
//! there; then `cargo test --workspace ARGS…` with their environment, the run's one
//! summary line of skipped tests, and everything it started stopped again (the cgroup
//! removed, the server and pooler stopped), also when the suite fails or is interrupted.
//! `--ci` sets `CI=true`, under which a skipped test fails.
//!
//! It installs nothing: `.ci/run` installs the tools; what is missing here is said by the
//! script that needs it, and the tests that need it say `skipped:`.

use anyhow::{Context, bail};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Arguments of `cargo xtask test`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run as CI does: `CI=true`, under which a test whose tool or server is missing fails.
    #[arg(long)]
    ci: bool,
    /// Start no PostgreSQL server (the fleet tests then say `skipped:`).
    #[arg(long)]
    no_pg: bool,
    /// Arguments after `--` go to `cargo test --workspace`.
    #[arg(last = true)]
    cargo_args: Vec<OsString>,
}

/// What was started, stopped on drop in reverse order.
struct Started {
    root: PathBuf,
    pg_dir: Option<String>,
    cgroup: Option<String>,
}

impl Drop for Started {
    fn drop(&mut self) {
        if let Some(cg) = self.cgroup.take() {
            eprintln!("xtask test: .ci/view-setup --undo {cg}");
            let _ = Command::new(self.root.join(".ci/view-setup"))
                .arg("--undo")
                .arg(&cg)
                .current_dir(&self.root)
                .status();
        }
        if let Some(dir) = self.pg_dir.take() {
            eprintln!("xtask test: .ci/pg-stop {dir}");
            let _ = Command::new(self.root.join(".ci/pg-stop"))
                .arg(&dir)
                .current_dir(&self.root)
                .status();
        }
    }
}

/// Runs `script ARGS` under bash with `eval` and returns the `HCP_TEST_*` variables it
/// exported (its `export NAME=…` lines, shell-quoted, are read by bash itself).
fn eval_exports(
    root: &Path,
    script: &str,
    args: &[&str],
) -> anyhow::Result<BTreeMap<String, String>> {
    let mut line = format!("out=\"$({script}");
    for a in args {
        line.push(' ');
        line.push_str(a);
    }
    line.push_str(")\" || exit $?; eval \"$out\"; env -0");
    let out = Command::new("bash")
        .args(["-c", &line])
        .current_dir(root)
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("cannot run bash for `{script}`"))?;
    if !out.status.success() {
        bail!("`{script}` failed ({})", out.status);
    }
    Ok(out
        .stdout
        .split(|b| *b == 0)
        .filter_map(|kv| std::str::from_utf8(kv).ok())
        .filter_map(|kv| kv.split_once('='))
        .filter(|(k, _)| k.starts_with("HCP_TEST_"))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect())
}

extern "C" fn on_interrupt(_: libc::c_int) {}

/// Lets an interrupt (Ctrl-C) end the suite, which gets it too, while this process lives
/// on to stop what it started. A handler, not `SIG_IGN`: an ignored signal would stay
/// ignored in the children, a handler is reset by `exec`.
fn outlive_interrupts() {
    // SAFETY: installs a handler that does nothing (async-signal-safe) for SIGINT and
    // SIGTERM; `sa` is zeroed and then filled as sigaction(2) documents.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_interrupt as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut());
        libc::sigaction(libc::SIGTERM, &sa, std::ptr::null_mut());
    }
}

/// Runs `cargo xtask test`.
///
/// # Errors
/// When a service cannot be started, cargo cannot be run, or the suite fails.
pub fn run(a: &Args, root: &Path) -> anyhow::Result<()> {
    outlive_interrupts();
    let mut env: BTreeMap<String, String> = BTreeMap::new();
    let mut started = Started {
        root: root.to_owned(),
        pg_dir: None,
        cgroup: None,
    };
    if !a.no_pg {
        eprintln!("xtask test: .ci/pg-start --tls --pool (the fleet tests' server)");
        let vars = eval_exports(root, ".ci/pg-start", &["--tls", "--pool"])?;
        started.pg_dir = vars.get("HCP_TEST_PG_DIR").cloned();
        env.extend(vars);
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        // As `.ci/run`: the tests run hcp as `nobody` too, who must pass every directory
        // above the checkout (search only).
        let mut d = root.to_owned();
        while d.parent().is_some() {
            eprintln!("xtask test: chmod o+x {}", d.display());
            let _ = Command::new("chmod").arg("o+x").arg(&d).status();
            d.pop();
        }
    }
    eprintln!("xtask test: .ci/view-setup (user namespaces for nobody, a delegated cgroup)");
    let pid = std::process::id().to_string();
    let vars = eval_exports(root, ".ci/view-setup", &["--pid", &pid])?;
    started.cgroup = vars
        .get("HCP_TEST_CGROUP")
        .cloned()
        .filter(|c| !c.is_empty());
    env.extend(vars);
    if let Some(home) = std::env::var_os("HOME") {
        let inspector =
            PathBuf::from(home).join(".cache/hcp-ci/inspector/node_modules/.bin/mcp-inspector");
        if inspector.is_file() && std::env::var_os("HCP_TEST_INSPECTOR").is_none() {
            env.insert(
                "HCP_TEST_INSPECTOR".into(),
                inspector.to_string_lossy().into_owned(),
            );
        }
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let mut cmd = Command::new(&cargo);
    cmd.args(["test", "--workspace"])
        .args(&a.cargo_args)
        .current_dir(root)
        .envs(&env);
    if a.ci {
        cmd.env("CI", "true");
    }
    eprintln!(
        "xtask test: cargo test --workspace{}{}",
        if a.ci { " (CI=true)" } else { "" },
        a.cargo_args
            .iter()
            .map(|s| format!(" {}", s.to_string_lossy()))
            .collect::<String>()
    );
    let mut child = cmd.spawn().context("cannot run cargo")?;
    // The test binaries record their skips under their parent's pid: this `cargo test`.
    let run = child.id();
    let status = child.wait().context("waiting for cargo")?;
    let skips = hcp_examples::skipped::of_run(run);
    eprintln!("\n{}", hcp_examples::skipped::summary(&skips));
    if let Some(f) = hcp_examples::skipped::file() {
        let _ = std::fs::remove_file(f);
    }
    drop(started);
    if !status.success() {
        bail!("the suite failed ({status})");
    }
    Ok(())
}
