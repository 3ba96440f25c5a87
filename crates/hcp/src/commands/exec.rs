//! `hcp exec`.
use crate::error::CliResult;

/// Arguments of `hcp exec`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `hcp exec`.
pub fn run(_a: Args) -> CliResult {
    Err(super::not_built("exec"))
}
