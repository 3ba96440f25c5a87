//! `hcp grant` and `hcp revoke` (RUNTIME §4).
use crate::error::CliResult;

/// Arguments of `hcp grant`.
#[derive(Debug, clap::Args)]
pub struct GrantArgs {}

/// Arguments of `hcp revoke`.
#[derive(Debug, clap::Args)]
pub struct RevokeArgs {}

/// Runs `hcp grant`.
pub fn run_grant(_a: GrantArgs) -> CliResult {
    Err(super::not_built("grant"))
}

/// Runs `hcp revoke`.
pub fn run_revoke(_a: RevokeArgs) -> CliResult {
    Err(super::not_built("revoke"))
}
