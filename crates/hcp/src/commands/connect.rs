//! `hcp connect`: built by its own change.
use crate::error::CliResult;

/// Arguments of `hcp connect`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `hcp connect`.
pub fn run(_a: Args) -> CliResult {
    Err(super::not_built("connect"))
}
