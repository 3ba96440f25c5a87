//! `hcp lint DIR…` (RUNTIME §2).
use crate::error::CliResult;

/// Arguments of `hcp lint`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `hcp lint`.
pub fn run(_a: Args) -> CliResult {
    Err(super::not_built("lint"))
}
