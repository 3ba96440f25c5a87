//! `hcp session …`.
use crate::error::CliResult;

/// Subcommands of `hcp session`.
#[derive(Debug, clap::Subcommand)]
pub enum SessionCommand {}

/// Runs `hcp session …`.
pub fn run(c: SessionCommand) -> CliResult {
    match c {}
}
