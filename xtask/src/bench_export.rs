//! `cargo xtask bench export`: the throughput of `hcp audit export --otlp` (RUNTIME §11),
//! records per second from a store of `--records` records (refusals, two spans each) to a
//! local collector, one export process per run, its cursor removed between runs.
//!
//! The collector is a sink in this process (HTTP/1.1 on loopback: it reads each request
//! whole and answers 200 with an empty OTLP response, decoding nothing), so the figure is
//! the exporter's — reading and verifying records, building spans, encoding protobuf,
//! writing its cursor twice per batch — and not a collector's; `--collector URL` measures
//! against a real one instead (an OpenTelemetry Collector's `otlphttp` receiver).
//! Goal (issue 28): ≥ 20,000 records/s.

use anyhow::{Context, Result, bail};
use hcp_store::Home;
use hcp_store::audit::{AuditLog, Decision, Entry};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// Arguments of `cargo xtask bench export`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Records in the exported trail.
    #[arg(long, default_value_t = 100_000)]
    pub records: usize,
    /// `--batch` of the export (records per request).
    #[arg(long, default_value_t = 512)]
    pub batch: usize,
    /// Timed exports of the whole trail.
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// A collector's OTLP/HTTP traces endpoint to send to instead of the in-process sink.
    #[arg(long)]
    pub collector: Option<String>,
    /// The `hcp` binary (default: `cargo build --release -p hcp`, then its binary).
    #[arg(long)]
    pub hcp: Option<PathBuf>,
}

/// A sink on 127.0.0.1 that answers every request 200; its URL and the bytes it took.
fn sink() -> Result<(String, std::sync::Arc<std::sync::atomic::AtomicU64>)> {
    let listener = TcpListener::bind("127.0.0.1:0").context("cannot listen on loopback")?;
    let url = format!("http://{}/v1/traces", listener.local_addr()?);
    let taken = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counter = taken.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let counter = counter.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(match stream.try_clone() {
                    Ok(s) => s,
                    Err(_) => return,
                });
                let mut stream = stream;
                loop {
                    let mut length = 0usize;
                    let mut line = String::new();
                    loop {
                        line.clear();
                        match reader.read_line(&mut line) {
                            Ok(0) | Err(_) => return,
                            Ok(_) => {}
                        }
                        let l = line.trim_end();
                        if l.is_empty() {
                            break;
                        }
                        if let Some((k, v)) = l.split_once(':')
                            && k.eq_ignore_ascii_case("content-length")
                        {
                            length = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0u8; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    counter.fetch_add(length as u64, std::sync::atomic::Ordering::Relaxed);
                    let answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n";
                    if stream.write_all(answer).is_err() {
                        return;
                    }
                }
            });
        }
    });
    Ok((url, taken))
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Runs the benchmark.
///
/// # Errors
/// When the build, the store or an export fails.
pub fn run(a: &Args) -> Result<()> {
    let hcp = match &a.hcp {
        Some(p) => p.clone(),
        None => {
            let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .parent()
                .map(std::path::Path::to_path_buf)
                .unwrap_or_else(|| PathBuf::from("."));
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let status = Command::new(cargo)
                .args(["build", "--release", "-p", "hcp"])
                .current_dir(&root)
                .status()
                .context("cannot run `cargo build --release -p hcp`")?;
            if !status.success() {
                bail!("`cargo build --release -p hcp` failed");
            }
            crate::bench_exec::release_dir()?.join("hcp")
        }
    };
    let tmp = std::env::temp_dir().join(format!("hcp-bench-export-{}", std::process::id()));
    let store = tmp.join("store");
    std::fs::create_dir_all(&tmp)?;
    // The store is made as a user makes one: `hcp init` writes its marker, the chain key the
    // records are keyed with and the first record.
    let made = Command::new(&hcp)
        .env("HCP_HOME", &store)
        .arg("init")
        .status()
        .context("cannot run hcp init")?;
    if !made.success() {
        bail!("hcp init failed for {}", store.display());
    }
    let log = AuditLog::new(&Home::open(&store)?).durable(false);
    for i in 0..a.records {
        log.append(&Entry {
            principal: format!("agent-{}", i % 16),
            project: Some("bench".into()),
            pack_id: Some("bench".into()),
            verb_key: "call".into(),
            operation: None,
            land: None,
            decision: Decision::Deny,
            code: Some(hcp_model::Code::MissingGrant),
            args_digest: format!("hmac-sha256:{i:064x}"),
            exit_code: None,
            duration_ms: 1,
            extra: BTreeMap::new(),
        })
        .map_err(|e| anyhow::anyhow!("cannot append a record: {e}"))?;
    }
    let (url, taken) = match &a.collector {
        Some(u) => (u.clone(), std::sync::Arc::default()),
        None => sink()?,
    };
    let mut times = Vec::new();
    for _ in 0..a.runs {
        let _ = std::fs::remove_dir_all(store.join("state/export"));
        let start = Instant::now();
        let out = Command::new(&hcp)
            .env_clear()
            .env("HCP_HOME", &store)
            .env("PATH", "/usr/bin:/bin")
            .args([
                "audit",
                "export",
                "--otlp",
                &url,
                "--batch",
                &a.batch.to_string(),
            ])
            .output()
            .context("cannot run hcp audit export")?;
        let took = start.elapsed();
        if !out.status.success() {
            bail!(
                "hcp audit export failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        times.push(took);
    }
    let m = median(times.clone());
    let rate = a.records as f64 / m.as_secs_f64();
    println!(
        "hcp audit export: {} records ({} spans) in batches of {}, {} runs: median {:.3} s, {:.0} records/s (goal ≥ 20,000); fastest {:.3} s",
        a.records,
        2 * a.records,
        a.batch,
        a.runs,
        m.as_secs_f64(),
        rate,
        times
            .iter()
            .min()
            .copied()
            .unwrap_or_default()
            .as_secs_f64()
    );
    if a.collector.is_none() {
        println!(
            "  the sink took {:.1} MB of protobuf per run",
            taken.load(std::sync::atomic::Ordering::Relaxed) as f64 / a.runs as f64 / 1e6
        );
    }
    let _ = std::fs::remove_dir_all(&tmp);
    Ok(())
}
