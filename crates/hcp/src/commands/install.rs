//! `hcp install` and `hcp uninstall` (RUNTIME §3).
use crate::error::CliResult;

/// Arguments of `hcp install`.
#[derive(Debug, clap::Args)]
pub struct InstallArgs {}

/// Arguments of `hcp uninstall`.
#[derive(Debug, clap::Args)]
pub struct UninstallArgs {}

/// Runs `hcp install`.
pub fn run_install(_a: InstallArgs) -> CliResult {
    Err(super::not_built("install"))
}

/// Runs `hcp uninstall`.
pub fn run_uninstall(_a: UninstallArgs) -> CliResult {
    Err(super::not_built("uninstall"))
}
