//! `hcp activate` and `hcp deactivate` (RUNTIME §3).
use crate::error::CliResult;

/// Arguments of `hcp activate`.
#[derive(Debug, clap::Args)]
pub struct ActivateArgs {}

/// Arguments of `hcp deactivate`.
#[derive(Debug, clap::Args)]
pub struct DeactivateArgs {}

/// Runs `hcp activate`.
pub fn run_activate(_a: ActivateArgs) -> CliResult {
    Err(super::not_built("activate"))
}

/// Runs `hcp deactivate`.
pub fn run_deactivate(_a: DeactivateArgs) -> CliResult {
    Err(super::not_built("deactivate"))
}
