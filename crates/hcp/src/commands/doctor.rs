//! `hcp doctor`: built by its own change.
use crate::error::CliResult;

/// Arguments of `hcp doctor`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `hcp doctor`.
pub fn run(_a: Args) -> CliResult {
    Err(super::not_built("doctor"))
}
