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

/// A store `hcp install` made for itself, to be taken back when the install then fails:
/// bad input leaves the home as it was (RUNTIME §4).
pub(crate) struct Fresh {
    root: std::path::PathBuf,
    /// What the home held before (`None`: it did not exist).
    before: Option<std::collections::BTreeSet<std::ffi::OsString>>,
}

impl Fresh {
    /// The store this install made.
    pub(crate) fn root(&self) -> &std::path::Path {
        &self.root
    }

    /// Removes what was made: the whole home when it did not exist, else every top-level
    /// entry it did not hold before — unless a pack is installed in it by then. (A
    /// witness keeps the checkpoint it took: it is append-only.)
    pub(crate) fn undo(self) {
        // Under the store lock, and only while no pack is in it: another `hcp install`
        // may have used the store meanwhile, and what it installed stays.
        let Ok(home) = hcp_store::Home::open(&self.root) else {
            return;
        };
        let Ok(_lock) = hcp_store::StoreLock::acquire(&home) else {
            return;
        };
        let packs = home.dir(hcp_store::home::StoreDir::Packs);
        if std::fs::read_dir(&packs).is_ok_and(|mut d| d.next().is_some()) {
            return;
        }
        match self.before {
            None => {
                let _ = std::fs::remove_dir_all(&self.root);
            }
            Some(before) => {
                for e in std::fs::read_dir(&self.root)
                    .into_iter()
                    .flatten()
                    .flatten()
                {
                    if !before.contains(&e.file_name()) {
                        let p = e.path();
                        let _ = if p.is_dir() {
                            std::fs::remove_dir_all(&p)
                        } else {
                            std::fs::remove_file(&p)
                        };
                    }
                }
            }
        }
    }
}

/// `hcp install DIR` into a home that is not a store yet makes one first (RUNTIME §4:
/// only `init` and `install` make a store) — unless the pack would be refused by lint, so
/// that bad input leaves no store behind (the install then reports lint's errors). The
/// store made is answered with how to take it back ([`Fresh::undo`]) should the install
/// fail for another reason.
///
/// # Errors
/// The store's.
pub(crate) fn open_or_init_for(
    dir: &std::path::Path,
) -> Result<(hcp_store::Home, Option<Fresh>), CliError> {
    let root = super::session::home_root()?;
    match made::open(&root) {
        Err(hcp_store::StoreError::NoStore { .. }) => {
            let lint_fails = hcp_lint::read_pack(dir)
                .map(|src| hcp_lint::check(&src).has_errors())
                .unwrap_or(true);
            if lint_fails {
                // Nothing is written for a pack that does not pass: the install says why.
                let home =
                    hcp_store::Home::open(&root).map_err(|e| super::session::store_error(&e))?;
                return Ok((home, None));
            }
            let before = std::fs::read_dir(&root)
                .ok()
                .map(|d| d.flatten().map(|e| e.file_name()).collect());
            let witness = made::witness_of(&root).map_err(|e| super::session::store_error(&e))?;
            // Only a store this process made is taken back (another `hcp install` may
            // have made it first).
            let fresh = matches!(make(&root, witness.as_deref())?, Made::New { .. });
            let home = made::open(&root).map_err(|e| super::session::store_error(&e))?;
            Ok((home, fresh.then_some(Fresh { root, before })))
        }
        other => other
            .map(|h| (h, None))
            .map_err(|e| super::session::store_error(&e)),
    }
}
