//! `hcp sense`: built by its own change.
use crate::error::CliResult;

/// Arguments of `hcp sense`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `hcp sense`.
pub fn run(_a: Args) -> CliResult {
    Err(super::not_built("sense"))
}
