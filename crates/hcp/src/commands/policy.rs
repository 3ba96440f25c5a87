//! `hcp policy`: built by its own change.
use crate::error::CliResult;

/// Arguments of `hcp policy`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `hcp policy`.
pub fn run(_a: Args) -> CliResult {
    Err(super::not_built("policy"))
}
