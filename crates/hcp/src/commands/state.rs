//! `hcp state migrate [--json]` (RUNTIME §9), owner only: creates or upgrades the schema of
//! the fleet's PostgreSQL database (`hcp_runtime::backend::migrate`) and says what it did.

use super::session::{print, require_owner};
use crate::error::{CliError, CliResult};
use crate::exit;

/// Subcommands of `hcp state`.
#[derive(Debug, clap::Subcommand)]
pub enum StateCommand {
    /// Create or upgrade the schema of the state database named by `config.json`'s
    /// `state` (each missing migration in its own transaction), and say what was done.
    Migrate(MigrateArgs),
}

/// Arguments of `hcp state migrate`.
#[derive(Debug, clap::Args)]
pub struct MigrateArgs {
    /// Print what was done as one JSON object.
    #[arg(long)]
    json: bool,
}

/// Runs `hcp state …`.
pub fn run(c: StateCommand) -> CliResult {
    require_owner("state")?;
    let rt = super::exec::runtime()?;
    match c {
        StateCommand::Migrate(a) => {
            let done = hcp_runtime::backend::migrate(&rt).map_err(|r| {
                let e = CliError::new(r.code, r.message);
                match r.hint {
                    Some(h) => e.hint(h),
                    None => e,
                }
            })?;
            // The act of authority (RUNTIME §6) is recorded once the schema it is recorded
            // in exists: the first migration makes the fleet's trail itself. A record that
            // cannot be made fails the command (74); the migration stays (it is
            // idempotent, and the next `hcp state migrate` records nothing new).
            if !done.applied.is_empty() {
                // Made already: its intent and its completion follow each other.
                let made = super::authority::record(
                    &rt,
                    "state migrate",
                    serde_json::json!({
                        "backend": done.backend,
                        "schema": done.schema,
                        "from": done.from,
                        "to": done.to,
                        "applied": done.applied.iter().map(|m| m.version).collect::<Vec<_>>(),
                    }),
                )?;
                let _ = made.settle(Ok::<(), std::convert::Infallible>(()), |e| match *e {});
            }
            if a.json {
                print(&format!("{}\n", serde_json::json!(done)));
            } else {
                print(
                    &done
                        .lines
                        .iter()
                        .map(|l| format!("{l}\n"))
                        .collect::<String>(),
                );
            }
            Ok(exit::OK)
        }
    }
}
