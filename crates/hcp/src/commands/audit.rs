//! `hcp audit …`.
use crate::error::CliResult;

/// Subcommands of `hcp audit`.
#[derive(Debug, clap::Subcommand)]
pub enum AuditCommand {}

/// Runs `hcp audit …`.
pub fn run(c: AuditCommand) -> CliResult {
    match c {}
}
