//! `hcp show`.
use crate::error::CliResult;

/// Arguments of `hcp show`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `hcp show`.
pub fn run(_a: Args) -> CliResult {
    Err(super::not_built("show"))
}
