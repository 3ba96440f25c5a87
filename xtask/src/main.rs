//! `cargo xtask`: chores of the hcp workspace (STYLE.md §14).
//!
//! One module per subcommand: [`generate`] writes the files derived from the code
//! (`docs/rules.md`, `docs/packs.md`, `docs/config.md`, `schemas/*.schema.json`) or, with
//! `--check`, fails when a committed one is stale; [`test`] runs the suite with what CI
//! starts around it. To add a chore (`demo`, `bench`): write `src/<name>.rs` with an `Args`
//! struct and a `run(&Args) -> anyhow::Result<()>`, then add a variant to [`Command`] and
//! a match arm in [`main`].

mod bench;
mod bench_agent;
mod bench_egress;
mod bench_exec;
mod bench_exec_state;
mod bench_export;
mod bench_gate;
mod bench_mcp;
mod bench_openapi;
mod bench_store;
mod demo;
mod docs_config;
mod docs_links;
mod docs_packs;
mod generate;
mod schema_doc;
mod test;

use clap::{Parser, Subcommand};
use std::path::PathBuf;

/// The command line of `cargo xtask`.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", about = "Chores of the hcp workspace")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Write docs/rules.md, docs/packs.md, docs/config.md and the JSON Schemas of
    /// surface.json and policy.json.
    Generate(generate::Args),
    /// Build, install the gold packs into a fresh store and run a scripted agent.
    Demo(demo::Args),
    /// Run a benchmark (`gate`, `store`, `exec`, `agent`); figures go to BENCHMARKS.md.
    Bench(bench::Args),
    /// Run the whole suite with what CI starts (PostgreSQL with TLS and pgbouncer, the
    /// view's setup), print the skipped tests, stop it all.
    Test(test::Args),
}

/// The workspace root (the parent of `xtask/`).
fn repo_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map_or(manifest.clone(), PathBuf::from)
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Generate(a) => generate::run(&a, &repo_root()),
        Command::Demo(a) => demo::run(&a, &repo_root()),
        Command::Bench(a) => bench::run(a),
        Command::Test(a) => test::run(&a, &repo_root()),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            for cause in e.chain().skip(1) {
                eprintln!("  Caused by: {cause}");
            }
            std::process::ExitCode::FAILURE
        }
    }
}
