//! `hcp audit export --otlp URL [--follow]` (RUNTIME §11): the trail as OpenTelemetry
//! spans over OTLP/HTTP (`hcp_export`), until the end of the trail, or with `--follow`
//! until SIGINT or SIGTERM. Progress goes to stderr, the totals to stdout.

use super::follow::signal_fd;
use crate::error::{CliError, CliResult};
use crate::exit;
use hcp_export::{Event, ExportError, Options, Stop};
use hcp_runtime::Runtime;
use std::os::fd::AsFd;
use std::time::Duration;

/// Arguments of `hcp audit export`.
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// The collector's OTLP/HTTP traces endpoint, such as `http://127.0.0.1:4318/v1/traces`.
    #[arg(long, value_name = "URL")]
    otlp: String,
    /// After the end of the trail, keep sending new records as they come, until SIGINT
    /// or SIGTERM.
    #[arg(long, short = 'f')]
    follow: bool,
    /// Records read and sent per request (1–4096).
    #[arg(long, value_name = "N", default_value_t = 512,
          value_parser = clap::value_parser!(u16).range(1..=4096))]
    batch: u16,
    /// How long a call may go without an outcome before its span is sent as `interrupted`
    /// (`30s`, `15m`, `1h`).
    #[arg(long, value_name = "DUR", default_value = "1h")]
    interrupted_after: String,
    /// The time-out of one request (`10s`).
    #[arg(long, value_name = "DUR", default_value = "10s")]
    timeout: String,
    /// Tries of one request before an export without `--follow` gives up (`--follow`
    /// tries until it is stopped).
    #[arg(long, value_name = "N", default_value_t = 8,
          value_parser = clap::value_parser!(u32).range(1..))]
    tries: u32,
    /// Print the totals as a JSON object.
    #[arg(long)]
    json: bool,
}

fn parse_duration(flag: &str, text: &str) -> Result<Duration, CliError> {
    if text == "0s" || text == "0" {
        return Ok(Duration::ZERO);
    }
    let d = hcp_store::session::parse_ttl(text).map_err(|e| {
        CliError::new(hcp_model::Code::Usage, format!("`--{flag} {text}`: {e}"))
            .hint("a whole number and a unit: `30s`, `15m`, `1h`")
    })?;
    Ok(Duration::from_secs(u64::try_from(d.as_secs()).unwrap_or(0)))
}

fn instance(rt: &Runtime) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    format!("{}:{}", host.trim(), rt.home().root().display())
}

fn progress(e: &Event) {
    match e {
        Event::Resumed { records, repeat } => {
            eprintln!("resuming after {records} exported records");
            if let Some(s) = repeat {
                eprintln!(
                    "note: the batch in flight when the last export stopped ({} records, {} spans) is sent again: the collector may hold those spans already, with the same span ids",
                    s.records, s.spans
                );
            }
        }
        Event::Sent {
            rejected: r @ 1.., ..
        } => eprintln!("warning: the collector dropped {r} spans of a batch it took"),
        Event::Sent { .. } => {}
        Event::Retry { reason, wait } => {
            eprintln!("{reason}; trying again in {:.1} s", wait.as_secs_f64())
        }
    }
}

fn export_error(e: &ExportError) -> CliError {
    let err = CliError::new(e.code(), e.to_string());
    match e.hint() {
        Some(h) => err.hint(h),
        None => err,
    }
}

/// Runs `hcp audit export`.
pub fn run(rt: &Runtime, a: ExportArgs) -> CliResult {
    let mut o = Options::new(a.otlp);
    o.follow = a.follow;
    o.batch = usize::from(a.batch);
    o.interrupted_after = parse_duration("interrupted-after", &a.interrupted_after)?;
    o.timeout = parse_duration("timeout", &a.timeout)?.max(Duration::from_millis(100));
    o.tries = a.tries;
    o.instance = instance(rt);
    let signals = signal_fd().map_err(|e| {
        CliError::new(
            hcp_model::Code::StoreIo,
            format!("cannot watch for signals: {e}"),
        )
    })?;
    let report = hcp_export::run(
        rt.state(),
        rt.home(),
        &o,
        Stop::on(signals.as_fd()),
        &mut progress,
    )
    .map_err(|e| export_error(&e))?;
    let line = format!(
        "exported {} records as {} spans to `{}` in {} requests ({} records in all); {} calls held until their outcome comes",
        report.records, report.spans, o.url, report.batches, report.total, report.held
    );
    if a.json {
        super::super::session::print(&format!(
            "{}\n",
            serde_json::json!({
                "url": o.url, "records": report.records, "spans": report.spans,
                "requests": report.batches, "retries": report.retries, "total": report.total,
                "held": report.held, "rejected": report.rejected,
                "fault": report.fault,
            })
        ));
    } else {
        super::super::session::print(&format!("{line}\n"));
    }
    match report.fault {
        Some(f) => Err(export_error(&ExportError::Damaged(f))),
        None => Ok(exit::OK),
    }
}
