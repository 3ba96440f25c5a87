//! `hcp sense PACK [REF]` (RUNTIME §8): relays a pack's stimuli as JSON lines
//! `{"pack_id", "ref", "event"}` on stdout, as they arrive, until stopped. The runtime
//! admits the call through the same steps as exec (`hcp_runtime::pipeline::sense`: the
//! gate, the runtime policy, binding mint, each decision audited) and relays
//! (`hcp_runtime::sense::relay`); this module reads the command line, arms the signals and
//! hands the relay hcp's stdout and stderr.

use super::exec::{caller, runtime};
use crate::error::{CliError, CliResult};
use hcp_runtime::sense::Sinks;
use std::io::Write;
use std::os::fd::AsFd;

/// Arguments of `hcp sense`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Prints one JSON line {\"pack_id\", \"ref\", \"event\"} per event, as it \
                  arrives, until SIGINT/SIGTERM, a closed stdout, `--count`, or the end of \
                  every trigger it runs. Without REF: every stimulus the pack declares."
)]
pub struct Args {
    /// The pack id.
    pack: String,
    /// The stimulus ref (`new_item`, `binding.degraded` …); all of the pack's when omitted.
    #[arg(value_name = "REF")]
    reference: Option<String>,
    /// Stop after relaying this many events.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    count: Option<u64>,
}

/// Runs `hcp sense`.
pub fn run(a: Args) -> CliResult {
    let rt = runtime()?;
    let caller = caller()?;
    let mut admitted = hcp_runtime::pipeline::sense(&rt, &caller, &a.pack, a.reference.as_deref())
        .map_err(|r| CliError::from(r.refusal))?;
    if let Some(code) = admitted.unbound {
        let _ = writeln!(
            std::io::stderr().lock(),
            "hcp: sense: the triggers of `{}` cannot run ({code}); relaying recorded stimuli only",
            admitted.pack.id
        );
    }
    let signals = crate::signals::arm()?;
    let stdout = std::io::stdout();
    let sinks = Sinks {
        events: &mut std::io::stdout(),
        notes: &mut std::io::stderr(),
        stop: signals.read.as_fd(),
        events_fd: Some(stdout.as_fd()),
    };
    // The relay, then the sense's outcome record (its intent was written at admission).
    let status =
        hcp_runtime::sense::run(&rt, &mut admitted, a.count, sinks).map_err(CliError::from);
    super::exec::after_answer(&rt);
    status
}
