//! `hcp exec` (RUNTIME §5): the main job.
use crate::error::CliResult;

pub mod face;

/// Arguments of `hcp exec`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `hcp exec`.
pub fn run(_a: Args) -> CliResult {
    Err(super::not_built("exec"))
}
