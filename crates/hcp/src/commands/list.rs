//! `hcp list`.
use crate::error::CliResult;

/// Arguments of `hcp list`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `hcp list`.
pub fn run(_a: Args) -> CliResult {
    Err(super::not_built("list"))
}
