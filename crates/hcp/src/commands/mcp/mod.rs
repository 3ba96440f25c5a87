//! `hcp mcp`: built by its own change.
use crate::error::CliResult;

/// Arguments of `hcp mcp`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `hcp mcp`.
pub fn run(_a: Args) -> CliResult {
    Err(super::not_built("mcp"))
}
