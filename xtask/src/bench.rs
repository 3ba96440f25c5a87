//! `cargo xtask bench <name>`: the benchmarks whose figures go to BENCHMARKS.md.
//!
//! One module per benchmark: `gate` ([`crate::bench_gate`], the Histos engine in process),
//! `store` ([`crate::bench_store`], the real `hcp` on a store of many packs) and `exec`
//! ([`crate::bench_exec`], `hcp exec` against its bin and a spawn floor), `openapi`
//! ([`crate::bench_openapi`], `hcp exec` of an openapi verb against a loopback server),
//! `agent` ([`crate::bench_agent`], an agent's call against the owner's), `mcp`
//! ([`crate::bench_mcp`], a tool call over Streamable HTTP against one over stdio),
//! `export` ([`crate::bench_export`], `hcp audit export --otlp` to a local collector) and
//! `egress` ([`crate::bench_egress`], network by destination against `host` and `deny`).

use crate::{
    bench_agent, bench_egress, bench_exec, bench_export, bench_gate, bench_mcp, bench_openapi,
    bench_store,
};
use clap::Subcommand;

/// Arguments of `cargo xtask bench`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    which: Which,
}

#[derive(Debug, Subcommand)]
enum Which {
    /// Histos decisions per second over the conformance corpus, and policy load + hash;
    /// with `--reference DIR`, the reference engine's in the same run.
    Gate(bench_gate::Args),
    /// Wall time of the real `hcp` (list, show, install, activate) on a store of many packs.
    Store(bench_store::Args),
    /// `hcp exec` on a trivial verb against the bin alone and a minimal spawn-and-wait
    /// program, with 1 and with many installed packs; peak RSS.
    Exec(bench_exec::Args),
    /// `hcp exec` of a `kind: openapi` verb against a loopback server, pairwise with a CLI
    /// verb (and `curl` of the same request) in one run.
    Openapi(bench_openapi::Args),
    /// An agent's call (session, grants, runtime policy, counters) against the owner's
    /// call of the same verb on the same store, with 1 and many packs, JSON and YAML policy.
    Agent(bench_agent::Args),
    /// One tool call over `hcp mcp --http` against the same call over stdio, pairwise in
    /// one run.
    Mcp(bench_mcp::Args),
    /// `hcp audit export --otlp` of a trail to a local collector: records per second.
    Export(bench_export::Args),
    /// Network by destination: an HTTPS request through the egress proxy against the
    /// same from a `host` pack, and the start of a call with destinations against a
    /// `deny` call, pairwise in one run.
    Egress(bench_egress::Args),
}

/// Runs the chosen benchmark.
///
/// # Errors
/// The benchmark's.
pub fn run(a: Args) -> anyhow::Result<()> {
    match a.which {
        Which::Gate(g) => {
            if cfg!(debug_assertions) {
                // `cargo xtask` builds xtask unoptimised; the engine's speed is measured
                // optimised, so run the same benchmark from a release build of xtask.
                let mut args = vec!["bench".to_string(), "gate".to_string()];
                args.extend(g.to_argv());
                return rerun_release(&args);
            }
            bench_gate::run(&g)
        }
        Which::Store(s) => bench_store::run(s),
        Which::Exec(e) => bench_exec::run(&e),
        Which::Openapi(o) => bench_openapi::run(&o),
        Which::Agent(a) => bench_agent::run(&a),
        Which::Mcp(m) => bench_mcp::run(&m),
        Which::Export(e) => bench_export::run(&e),
        Which::Egress(e) => bench_egress::run(&e),
    }
}

/// Runs `cargo run --release -p xtask -- ARGS` and passes its status on.
fn rerun_release(args: &[String]) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut c = std::process::Command::new(cargo);
    c.args(["run", "--quiet", "--release", "-p", "xtask", "--"])
        .args(args);
    let status = c
        .status()
        .context("cannot run `cargo run --release -p xtask`")?;
    anyhow::ensure!(status.success(), "the release benchmark failed ({status})");
    Ok(())
}
