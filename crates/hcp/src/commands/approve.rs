//! `hcp approve`: built by its own change.
use crate::error::CliResult;

/// Arguments of `hcp approve`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `hcp approve`.
pub fn run(_a: Args) -> CliResult {
    Err(super::not_built("approve"))
}
