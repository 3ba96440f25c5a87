//! `hcp sense PACK [REF]` (RUNTIME §8): relays a pack's stimuli as JSON lines
//! `{"pack_id", "ref", "event"}` on stdout, as they arrive, until stopped. The runtime
//! admits the call through the same steps as exec and relays it (`hcp_runtime::pipeline`
//! with the subject `Stimuli`: the gate, the runtime policy, binding mint, each decision
//! audited, then the relay and its outcome); this module reads the command line, arms the
//! signals (which stop the relay) and hands it hcp's stdout and stderr.

use super::exec::{caller, runtime};
use crate::error::{CliError, CliResult};
use hcp_runtime::pipeline::{self, Mode, Stimuli, Subject};
use hcp_runtime::sense::Sinks;
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
    let signals = crate::signals::arm()?;
    let stdout = std::io::stdout();
    let stimuli = Stimuli {
        pack_id: &a.pack,
        reference: a.reference.as_deref(),
        count: a.count,
        sinks: Sinks {
            events: &mut std::io::stdout(),
            notes: &mut std::io::stderr(),
            events_fd: Some(stdout.as_fd()),
        },
    };
    let stop = Mode::Exec(Some(signals.read.as_fd()));
    let answer = pipeline::run(&rt, &caller, Subject::Stimuli(stimuli), stop);
    let r = answer.result;
    match (r.code, r.error) {
        (Some(code), error) => {
            let e = CliError::call(code, error.unwrap_or_default());
            Err(match r.hint {
                Some(h) => e.hint(h),
                None => e,
            })
        }
        (None, _) => Ok(answer.exit),
    }
}
