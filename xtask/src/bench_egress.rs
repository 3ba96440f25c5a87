//! `cargo xtask bench egress`: network by destination (RUNTIME §5.5), pairwise in one run.
//!
//! It builds `hcp` in release (unless `--no-build`), makes a certificate with `openssl`,
//! starts a loopback HTTPS file server (`python3`, the egress tests' own,
//! `crates/egress/tests/support/https_server.py`, HTTP/1.0: one connection per request)
//! and one scratch `HCP_HOME` with three copies of a `curl` pack that differ only in their
//! network (`config.json`): `fetch-host` (`"host"`), `fetch-allow` (`{"allow":
//! ["127.0.0.1:PORT"]}`: the server, named literally) and `fetch-deny` (`"deny"`). Then
//! rounds, each running every arm once in a shuffled order, owner calls:
//!
//! * `deny-start` / `allow-start`: `hcp exec fetch-…​.version` (`curl --version`, no
//!   request): what a call whose pack has destinations costs to start against a `deny`
//!   call (goal ≤ 0.5 ms; the network namespace alone is about 0.5 ms here);
//! * `host-1` / `allow-1`, `host-21` / `allow-21`: `hcp exec fetch-….get URL` fetching
//!   one file over HTTPS once, and 21 times in one `curl` (URL globbing, a connection
//!   each). The proxy's added time per request is
//!   `((allow-21 − allow-1) − (host-21 − host-1)) / 20` (goal ≤ 0.3 ms): the call's own
//!   start and the first request cancel out.
//!
//! Every arm's output is checked once before timing; `hcp audit verify` must pass after.
//! Figures: median, p10, p90 in milliseconds, and the differences of the medians.

use crate::bench_openapi::{Arm, load_average, ms, shuffled_rounds, which};
use anyhow::{Context, Result, bail, ensure};
use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// Arguments of `cargo xtask bench egress`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Timed rounds (each runs every arm once).
    #[arg(long, default_value_t = 100)]
    pub runs: usize,
    /// Use the release binaries already in the target directory instead of building.
    #[arg(long)]
    pub no_build: bool,
}

/// Warm-up rounds before timing.
const WARMUP: usize = 5;
/// Requests of the long arms.
const MANY: usize = 21;

/// The file server, killed when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs the benchmark and prints a Markdown table.
///
/// # Errors
/// When a build, a tool, the server, a store step or an arm fails.
pub fn run(args: &Args) -> Result<()> {
    ensure!(args.runs >= 10, "`--runs` must be at least 10");
    for tool in ["curl", "openssl", "python3"] {
        ensure!(which(tool).is_some(), "`{tool}` is needed on PATH");
    }
    let root = crate::repo_root();
    let release = crate::bench_exec::release_dir()?;
    if !args.no_build {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let st = Command::new(cargo)
            .args(["build", "--release", "-p", "hcp"])
            .current_dir(&root)
            .status()
            .context("cannot run `cargo build --release`")?;
        ensure!(st.success(), "`cargo build --release -p hcp` failed");
    }
    let scratch = std::env::temp_dir().join(format!("hcp-bench-egress-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)
        .with_context(|| format!("cannot create `{}`", scratch.display()))?;
    let result = measure(args, &root, &release, &scratch);
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

/// A `curl` pack named `id`: `get URL` and `version`.
fn write_pack(dir: &Path, id: &str, ca: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let ca = ca.display();
    std::fs::write(
        dir.join("surface.json"),
        format!(
            r#"{{"id": "{id}", "name": "Fetch", "kind": "wrap", "cliBin": "curl",
  "binding": {{"mode": "public"}}, "wrap": {{"bin": "curl"}},
  "verbs": {{
    "get": {{"description": "Fetch a URL.", "cli": ["curl", "-sS", "--fail", "--cacert", "{ca}", "--", "{{{{url}}}}"]}},
    "version": {{"description": "Print curl's version.", "cli": ["curl", "--version"]}} }} }}"#
        ),
    )?;
    std::fs::write(
        dir.join("policy.json"),
        format!(
            r#"{{"surface_id": "{id}", "version": 1, "stimuli": {{}}, "verbs": {{
  "get": {{"operation": "read", "privacy": {{"land": "personal"}}}},
  "version": {{"operation": "read", "privacy": {{"land": "personal"}}}} }} }}"#
        ),
    )?;
    std::fs::write(
        dir.join("HARNESS.md"),
        "# HCP — Fetch\n\nA pack of the egress benchmark.\n\n## Hot path\n\n\
         | Command | CLI |\n|---------|-----|\n| `get` | `curl URL` |\n\n\
         ## Anti-patterns\n\n- Installing it anywhere but a scratch store\n",
    )?;
    Ok(())
}

#[allow(clippy::too_many_lines)]
fn measure(args: &Args, root: &Path, release: &Path, scratch: &Path) -> Result<()> {
    let home = scratch.join("home");
    let certs = scratch.join("certs");
    let www = scratch.join("www");
    for d in [&home, &certs, &www] {
        std::fs::create_dir_all(d)?;
    }
    let (cert, key) = (certs.join("cert.pem"), certs.join("key.pem"));
    let st = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args(["-nodes", "-days", "2", "-subj", "/CN=hcp-bench"])
        .args(["-addext", "subjectAltName=IP:127.0.0.1"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .context("cannot run openssl")?;
    ensure!(st.success(), "openssl could not make a certificate");
    std::fs::write(www.join("hello.txt"), "hello through hcp\n")?;
    let script = root.join("crates/egress/tests/support/https_server.py");
    let mut child = Command::new("python3")
        .arg(&script)
        .arg(&cert)
        .arg(&key)
        .arg(&www)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("cannot start the HTTPS server")?;
    let mut line = String::new();
    if let Some(o) = child.stdout.take() {
        std::io::BufReader::new(o).read_line(&mut line)?;
    }
    let _server = Server(child);
    let port: u16 = line
        .trim()
        .parse()
        .with_context(|| format!("the HTTPS server printed `{line}`, not its port"))?;

    let path = std::env::var_os("PATH").unwrap_or_default();
    let hcp = release.join("hcp");
    let cmd = |a: &[&str]| {
        let mut c = Command::new(&hcp);
        c.args(a)
            .current_dir(scratch)
            .env_clear()
            .env("PATH", &path)
            .env("HOME", scratch)
            .env("HCP_HOME", &home)
            .env("LANG", "C.UTF-8");
        c
    };
    let ok = |a: &[&str]| -> Result<Vec<u8>> {
        let out = cmd(a)
            .stdin(Stdio::null())
            .output()
            .context("cannot run hcp")?;
        ensure!(
            out.status.success(),
            "`hcp {}` failed: {}{}",
            a.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(out.stdout)
    };
    let certs_dir = certs.display().to_string();
    let read = serde_json::json!([certs_dir]);
    std::fs::write(
        home.join("config.json"),
        serde_json::json!({"packs": {
            "fetch-host": {"network": "host", "read": read},
            "fetch-allow": {"network": {"allow": [format!("127.0.0.1:{port}")]}, "read": read},
            "fetch-deny": {"network": "deny", "read": read},
        }})
        .to_string(),
    )?;
    for id in ["fetch-host", "fetch-allow", "fetch-deny"] {
        let dir = scratch.join("packs").join(id);
        write_pack(&dir, id, &cert)?;
        ok(&["install", "--activate", &dir.display().to_string()])?;
    }
    let one = format!("https://127.0.0.1:{port}/hello.txt");
    let many = format!("https://127.0.0.1:{port}/hello.txt?[1-{MANY}]");
    let want_many = "hello through hcp\n".repeat(MANY);
    for pack in ["fetch-host", "fetch-allow"] {
        let got = ok(&["exec", &format!("{pack}.get"), &one])?;
        ensure!(
            got == b"hello through hcp\n",
            "`{pack}.get` printed `{}`",
            String::from_utf8_lossy(&got)
        );
        let got = ok(&["exec", &format!("{pack}.get"), &many])?;
        ensure!(
            got == want_many.as_bytes(),
            "`{pack}.get` ×{MANY} printed something else"
        );
    }
    for pack in ["fetch-deny", "fetch-allow"] {
        ensure!(
            String::from_utf8_lossy(&ok(&["exec", &format!("{pack}.version")])?)
                .starts_with("curl ")
        );
    }
    let denied = cmd(&["exec", "--json", "fetch-deny.get", &one]).output()?;
    if denied.status.success() {
        bail!("a `deny` pack fetched the URL: the benchmark's premise does not hold");
    }

    let arm_args: Vec<(&str, Vec<String>)> = vec![
        (
            "deny-start",
            vec!["exec".into(), "fetch-deny.version".into()],
        ),
        (
            "allow-start",
            vec!["exec".into(), "fetch-allow.version".into()],
        ),
        (
            "host-1",
            vec!["exec".into(), "fetch-host.get".into(), one.clone()],
        ),
        (
            "allow-1",
            vec!["exec".into(), "fetch-allow.get".into(), one.clone()],
        ),
        (
            "host-21",
            vec!["exec".into(), "fetch-host.get".into(), many.clone()],
        ),
        (
            "allow-21",
            vec!["exec".into(), "fetch-allow.get".into(), many.clone()],
        ),
    ];
    let arms: Vec<(&str, Arm<'_>)> = arm_args
        .iter()
        .map(|(name, a)| {
            let run: Arm<'_> = Box::new(|| {
                let a: Vec<&str> = a.iter().map(String::as_str).collect();
                cmd(&a)
            });
            (*name, run)
        })
        .collect();
    let load_before = load_average();
    let mut times = shuffled_rounds(&arms, WARMUP, args.runs)?;
    let load_after = load_average();
    ok(&["audit", "verify"])?;

    println!(
        "{} rounds after {WARMUP} warm-up, shuffled order each round; load average {load_before} → {load_after}",
        args.runs
    );
    println!();
    println!("| arm | median ms | p10 | p90 |");
    println!("|---|---|---|---|");
    let mut med = std::collections::BTreeMap::new();
    for ((name, a), t) in arm_args.iter().zip(times.iter_mut()) {
        t.sort();
        let at = |q: usize| ms(t[(t.len() * q / 100).min(t.len() - 1)]);
        println!(
            "| `{name}`: `hcp {}` | {:.3} | {:.3} | {:.3} |",
            a[..2].join(" "),
            at(50),
            at(10),
            at(90)
        );
        med.insert(*name, at(50));
    }
    println!();
    println!(
        "start: allow − deny, medians: {:+.3} ms (goal ≤ 0.5 ms)",
        med["allow-start"] - med["deny-start"]
    );
    let per_request =
        ((med["allow-21"] - med["allow-1"]) - (med["host-21"] - med["host-1"])) / (MANY - 1) as f64;
    println!(
        "one HTTPS request through the proxy, added per request: {per_request:+.3} ms (goal ≤ 0.3 ms)"
    );
    println!(
        "one call of one request: allow-1 − host-1, medians: {:+.3} ms",
        med["allow-1"] - med["host-1"]
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_python_server_is_where_the_benchmark_looks() {
        assert!(
            crate::repo_root()
                .join("crates/egress/tests/support/https_server.py")
                .is_file()
        );
    }
}
