//! `cargo xtask bench mcp`: one tool call over `hcp mcp --http` (Streamable HTTP, a
//! session token as the bearer) against the same call over `hcp mcp` on stdio, pairwise in
//! one run (RUNTIME §10; goal: HTTP ≤ 1.3× stdio).
//!
//! It builds `hcp` and the example bins in release (unless `--no-build`) and makes one
//! scratch `HCP_HOME` with the gold `echo` pack and one session (`--workdir` the scratch
//! working directory, granted `verb.exec.read` on `echo`). Both servers run as that
//! session: stdio with `HCP_SESSION`, HTTP with the token in `Authorization`. Each round
//! calls `echo.echo.say` once on each, in alternating order; both speak revision
//! 2026-07-28 (stateless requests, the same `_meta`). The HTTP client keeps one
//! connection open (keep-alive), as an SDK's does. Wall time from writing the request to
//! reading its whole answer. Figures: median, p10, p90 in milliseconds, and the ratio of
//! the medians HTTP / stdio.

use anyhow::{Context, Result, bail, ensure};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// Arguments of `cargo xtask bench mcp`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Timed rounds (each calls once over each transport).
    #[arg(long, default_value_t = 300)]
    pub runs: usize,
    /// Use the release binaries already in the target directory instead of building.
    #[arg(long)]
    pub no_build: bool,
}

/// Warm-up rounds before timing.
const WARMUP: usize = 10;

/// A child stopped when dropped.
struct Stop(Child);

impl Drop for Stop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs the benchmark and prints a Markdown table.
///
/// # Errors
/// When a build, a store step, a server or a call fails.
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
        ensure!(st.success(), "`cargo build --release` failed");
    }
    let scratch = std::env::temp_dir().join(format!("hcp-bench-mcp-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    let result = measure(args, &root, &release, &scratch);
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

fn call_params(id: u64) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "echo.echo.say", "arguments": { "text": "hi" },
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": { "name": "bench", "version": "0" }
        }
    }})
}

fn measure(args: &Args, root: &Path, release: &Path, scratch: &Path) -> Result<()> {
    let home = scratch.join("home");
    let work = scratch.join("work");
    std::fs::create_dir_all(&work)?;
    let mut path = std::ffi::OsString::from(release.as_os_str());
    if let Some(p) = std::env::var_os("PATH") {
        path.push(":");
        path.push(p);
    }
    let hcp = release.join("hcp");
    let cmd = |a: &[&str]| {
        let mut c = Command::new(&hcp);
        c.args(a)
            .current_dir(&work)
            .env_clear()
            .env("PATH", &path)
            .env("HOME", scratch)
            .env("HCP_HOME", &home)
            .env("LANG", "C.UTF-8");
        c
    };
    let ok = |a: &[&str]| -> Result<String> {
        let out = cmd(a).stdin(Stdio::null()).output()?;
        ensure!(
            out.status.success(),
            "`hcp {}` failed: {}",
            a.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    let echo = root.join("packs/echo");
    ok(&["install", &echo.to_string_lossy(), "--activate"])?;
    let token = ok(&[
        "session",
        "start",
        "--principal",
        "bench",
        "--workdir",
        &work.to_string_lossy(),
    ])?;
    ok(&["grant", "bench", "echo", "verb.exec.read"])?;

    // stdio
    let mut stdio = cmd(&["mcp"]);
    stdio
        .env("HCP_SESSION", &token)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = stdio.spawn().context("cannot start `hcp mcp`")?;
    let mut stdin = child.stdin.take().context("no stdin")?;
    let mut stdout = BufReader::new(child.stdout.take().context("no stdout")?);
    let _stdio = Stop(child);
    // HTTP
    let mut http = cmd(&["mcp", "--http", "127.0.0.1:0"]);
    http.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = http.spawn().context("cannot start `hcp mcp --http`")?;
    let mut err = BufReader::new(child.stderr.take().context("no stderr")?);
    let mut line = String::new();
    err.read_line(&mut line)?;
    let addr = line
        .trim()
        .strip_prefix("hcp mcp: listening on http://")
        .and_then(|r| r.strip_suffix("/mcp"))
        .with_context(|| format!("unexpected first line `{line}`"))?
        .to_owned();
    let _http = Stop(child);
    let mut conn = TcpStream::connect(&addr)?;
    conn.set_nodelay(true)?;

    let mut id = 0u64;
    let mut over_stdio = |id: u64| -> Result<Duration> {
        let t = Instant::now();
        stdio_call(&mut stdin, &mut stdout, id)?;
        Ok(t.elapsed())
    };
    let mut over_http = |id: u64| -> Result<Duration> {
        let t = Instant::now();
        http_call(&mut conn, &addr, &token, id)?;
        Ok(t.elapsed())
    };
    let (mut s_ms, mut h_ms) = (Vec::new(), Vec::new());
    for round in 0..WARMUP + args.runs {
        id += 2;
        let (s, h) = if round % 2 == 0 {
            let s = over_stdio(id)?;
            (s, over_http(id + 1)?)
        } else {
            let h = over_http(id + 1)?;
            (over_stdio(id)?, h)
        };
        if round >= WARMUP {
            s_ms.push(s.as_secs_f64() * 1000.0);
            h_ms.push(h.as_secs_f64() * 1000.0);
        }
    }
    let q = |xs: &mut Vec<f64>, p: f64| {
        xs.sort_by(f64::total_cmp);
        xs[((xs.len() as f64 - 1.0) * p).round() as usize]
    };
    println!(
        "{} rounds after {WARMUP} warm-up, load average {}",
        args.runs,
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    println!("| transport | median | p10 | p90 |\n|---|---|---|---|");
    let (sm, hm) = (q(&mut s_ms, 0.5), q(&mut h_ms, 0.5));
    println!(
        "| stdio | {sm:.3} ms | {:.3} ms | {:.3} ms |",
        q(&mut s_ms, 0.1),
        q(&mut s_ms, 0.9)
    );
    println!(
        "| Streamable HTTP | {hm:.3} ms | {:.3} ms | {:.3} ms |",
        q(&mut h_ms, 0.1),
        q(&mut h_ms, 0.9)
    );
    println!("HTTP / stdio, medians: {:.2}× (goal ≤ 1.3×)", hm / sm);
    Ok(())
}

fn stdio_call(stdin: &mut ChildStdin, stdout: &mut BufReader<ChildStdout>, id: u64) -> Result<()> {
    writeln!(stdin, "{}", call_params(id))?;
    stdin.flush()?;
    let mut line = String::new();
    loop {
        line.clear();
        ensure!(stdout.read_line(&mut line)? > 0, "`hcp mcp` closed stdout");
        let v: Value = serde_json::from_str(&line)?;
        if v["id"] == json!(id) {
            ensure!(
                v["result"]["isError"] == json!(false),
                "the call failed: {v}"
            );
            return Ok(());
        }
    }
}

fn http_call(conn: &mut TcpStream, addr: &str, token: &str, id: u64) -> Result<()> {
    let body = call_params(id).to_string();
    let req = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: echo.echo.say\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(req.as_bytes())?;
    // Headers, then a body of Content-Length bytes or chunks.
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        ensure!(conn.read(&mut b)? == 1, "the server closed the connection");
        head.push(b[0]);
    }
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    ensure!(head.starts_with("http/1.1 200"), "answered {head}");
    let body = if let Some(n) = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|n| n.trim().parse::<usize>().ok())
    {
        let mut body = vec![0u8; n];
        conn.read_exact(&mut body)?;
        body
    } else if head.contains("transfer-encoding: chunked") {
        let mut body = Vec::new();
        loop {
            let mut size = Vec::new();
            while !size.ends_with(b"\r\n") {
                ensure!(conn.read(&mut b)? == 1, "closed mid-chunk");
                size.push(b[0]);
            }
            let n = usize::from_str_radix(String::from_utf8_lossy(&size).trim(), 16)?;
            let mut chunk = vec![0u8; n + 2];
            conn.read_exact(&mut chunk)?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
        body
    } else {
        bail!("an answer with neither length nor chunks: {head}");
    };
    let text = String::from_utf8_lossy(&body);
    let json = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .next_back()
        .map_or(text.as_ref(), str::trim);
    let v: Value = serde_json::from_str(json)?;
    ensure!(
        v["result"]["isError"] == json!(false),
        "the call failed: {v}"
    );
    Ok(())
}
