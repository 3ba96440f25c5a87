//! `hcp init` (RUNTIME §4 "Stores are made on purpose"): makes the store `HCP_HOME` (or
//! the platform data directory) names — its marker `store.json`, its keys and its first
//! record `init` — whole, under a temporary name renamed into place. A directory that is
//! a store already is left as it is; one of an earlier version is migrated.

use crate::error::{CliError, CliResult};
use crate::exit;
use hcp_store::audit::Actor;
use hcp_store::made::{self, Made};

/// Arguments of `hcp init`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `hcp init`. Owner only: a session makes no store.
pub fn run(_a: Args) -> CliResult {
    super::session::require_owner("init")?;
    let root = super::session::home_root()?;
    let witness = made::witness_of(&root).map_err(|e| super::session::store_error(&e))?;
    let made = make(&root, witness.as_deref())?;
    match made {
        Made::New { store_id } => out!("made the store `{}` (id {store_id})", root.display()),
        Made::Already { store_id } => {
            out!(
                "`{}` is a store already (id {store_id}); nothing changed",
                root.display()
            );
        }
        Made::Migrated { store_id, records } => out!(
            "migrated the store `{}` (id {store_id}) to this version: its marker and keys made, its {records} records kept under a keyed chain",
            root.display()
        ),
    }
    Ok(exit::OK)
}

/// Makes the store at `root` with the reserve the crash-test seam asks for (debug builds,
/// `HCP_TEST_RESERVE_BYTES`), else the store's own.
fn make(
    root: &std::path::Path,
    witness: Option<&dyn hcp_store::audit::witness::Witness>,
) -> Result<Made, CliError> {
    let reserve = hcp_runtime::seam::Seam::from_env()
        .reserve_bytes()
        .unwrap_or(hcp_store::audit::reserve::RESERVE_BYTES);
    made::init_with_reserve(root, Actor::owner(), witness, reserve)
        .map_err(|e| super::session::store_error(&e))
}

/// `hcp install DIR` into a home that is not a store yet makes one first (RUNTIME §4:
/// only `init` and `install` make a store) — unless the pack would be refused by lint, so
/// that bad input leaves no store behind (the install then reports lint's errors).
///
/// # Errors
/// The store's.
pub(crate) fn open_or_init_for(dir: &std::path::Path) -> Result<hcp_store::Home, CliError> {
    let root = super::session::home_root()?;
    match made::open(&root) {
        Err(hcp_store::StoreError::NoStore { .. }) => {
            let lint_fails = hcp_lint::read_pack(dir)
                .map(|src| hcp_lint::check(&src).has_errors())
                .unwrap_or(true);
            if lint_fails {
                // Nothing is written for a pack that does not pass: the install says why.
                return hcp_store::Home::open(&root).map_err(|e| super::session::store_error(&e));
            }
            let witness = made::witness_of(&root).map_err(|e| super::session::store_error(&e))?;
            make(&root, witness.as_deref())?;
            made::open(&root).map_err(|e| super::session::store_error(&e))
        }
        other => other.map_err(|e| super::session::store_error(&e)),
    }
}
