//! One module per subcommand; [`Cli`] is the whole command line.

use crate::error::CliResult;
use clap::{Parser, Subcommand};

/// The command line of `hcp`.
#[derive(Debug, Parser)]
#[command(name = "hcp", version, about = "Run Harness Context Protocol packs through a fail-closed gate", long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> CliResult {
    match cli.command {}
}
