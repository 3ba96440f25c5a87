//! `cargo xtask bench <name>`: the benchmarks whose figures go to BENCHMARKS.md.
//!
//! One module per benchmark: `gate` ([`crate::bench_gate`], the Histos engine in process),
//! `store` ([`crate::bench_store`], the real `hcp` on a store of many packs) and `exec`
//! ([`crate::bench_exec`], `hcp exec` against its bin and a spawn floor).

use crate::{bench_exec, bench_gate, bench_store};
use clap::Subcommand;

/// Arguments of `cargo xtask bench`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    which: Which,
}

#[derive(Debug, Subcommand)]
enum Which {
    /// Histos decisions per second over the conformance corpus, and policy load + hash.
    Gate {
        /// Print one line of JSON (with `decisions_per_sec`).
        #[arg(long)]
        json: bool,
    },
    /// Wall time of the real `hcp` (list, show, install, activate) on a store of many packs.
    Store(bench_store::Args),
    /// `hcp exec` on a trivial verb against the bin alone and a minimal spawn-and-wait
    /// program, with 1 and with many installed packs; peak RSS.
    Exec(bench_exec::Args),
}

/// Runs the chosen benchmark.
///
/// # Errors
/// The benchmark's.
pub fn run(a: Args) -> anyhow::Result<()> {
    match a.which {
        Which::Gate { json } => bench_gate::run(json),
        Which::Store(s) => bench_store::run(s),
        Which::Exec(e) => bench_exec::run(&e),
    }
}
