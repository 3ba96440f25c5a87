//! Installed packs: install, uninstall, load and list (RUNTIME §3, DESIGN "The store").
//!
//! Install takes a pack the caller read without following symlinks and checked
//! ([`CheckedPack`]; `hcp_runtime::install` lints it), pins every program the pack may run
//! ([`bins`]) and writes those very bytes, plus the install record ([`record`]), into
//! `staging/<id>.<random>/`. One `rename` (first install) or
//! one `renameat2(RENAME_EXCHANGE)` (reinstall) then puts the staged directory in place,
//! and the old copy is removed. All of it happens under [`StoreLock`]. A process killed at
//! any instant leaves `packs/<id>` wholly old or wholly new; what it leaves in `staging/`
//! is removed by the next writer.
//!
//! Readers take no lock: [`load`] opens `packs/<id>` once and reads every file relative to
//! that descriptor, then checks each file against the record's digests, so a reader that
//! races a reinstall still sees one install, never a mix.
//!
//! Activation (`skills/<id>/SKILL.md`, `state/active/<id>`) lives in [`crate::skill`].

use crate::error::StoreError;
use crate::home::{Home, StoreDir};
use crate::lock::StoreLock;
use hcp_model::Code;
use std::path::PathBuf;

pub mod bins;
pub(crate) mod fsops;
mod install;
pub mod interpreter;
pub mod openapi;
mod read;
pub mod record;

pub use bins::BinLookup;
pub use install::{
    CheckedPack, InstallOptions, InstallStep, Installed, ParseRefusal, Pending, Removed, install,
    uninstall, uninstall_with,
};
pub use read::{
    InstalledPack, PackListing, activation, active_ids, damaged_markers, installed_ids, is_active,
    list, load, parse_id,
};
pub use record::{InstallRecord, PackSummaryFields, PinnedBin, PinnedFile, PinnedInterpreter};

/// Why a pack operation was refused or failed. Every variant has a stable code
/// ([`PackError::code`]).
#[derive(Debug, thiserror::Error)]
pub enum PackError {
    /// `bad_pack_dir`: the source directory cannot be read as a pack directory (absent,
    /// not a directory, a symlink); `hcp` says of it what `hcp lint` says
    /// (`hcp_lint::bad_pack_dir`).
    #[error("cannot read pack directory `{path}`")]
    Unreadable {
        /// The directory as given.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// `already_installed`: the id is installed and `--force` was not given.
    #[error("pack `{id}` is already installed")]
    AlreadyInstalled {
        /// The pack id.
        id: String,
    },
    /// `not_installed`: no installed pack has this id (or the text is not a pack id).
    #[error("pack `{id}` is not installed")]
    NotInstalled {
        /// The id as given.
        id: String,
    },
    /// `bin_missing`: a program the pack runs cannot be found, is not a regular file or is
    /// not executable.
    #[error("program `{program}` cannot be pinned: {reason}")]
    BinMissing {
        /// The program as the manifest writes it.
        program: String,
        /// Why, lowercase.
        reason: String,
    },
    /// `unsafe_path` or `symlink_in_pack`: a relative program leaves the pack directory or
    /// crosses a symlink; `hcp_bin_reserved`: a program of a pack other than the bootstrap
    /// pack is the running `hcp` (install policy, `hcp_runtime::install`).
    #[error("program `{program}` is refused: {reason}")]
    BinUnsafe {
        /// The program as the manifest writes it.
        program: String,
        /// `unsafe_path`, `symlink_in_pack` or `hcp_bin_reserved`.
        code: Code,
        /// Why, lowercase.
        reason: String,
    },
    /// A store failure (`store_unusable`, `store_io`, `store_damaged`).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// `bad_openapi` or `unknown_operation`: a `kind: openapi` pack's document cannot be
    /// used (RUNTIME §1.3).
    #[error(transparent)]
    Openapi(Box<openapi::OpenapiRefusal>),
    /// `family_claimed`: the pack names a `binding.family` another installed pack uses,
    /// and the owner did not join it (`--join-family FAMILY`, RUNTIME §8).
    #[error("the binding family `{family}` is used by the installed pack `{holder}`")]
    FamilyClaimed {
        /// The family.
        family: String,
        /// The installed pack that uses it (the first in id order).
        holder: String,
    },
    /// `usage`: `--join-family FAMILY` names a family the pack does not declare.
    #[error("`--join-family {given}` names a family the pack does not declare ({declared})")]
    FamilyNotDeclared {
        /// The family given.
        given: String,
        /// What the pack declares: `binding.family` `X`, or that it declares none.
        declared: String,
    },
    /// `skill_collision`, `skill_export_unusable` or `bad_config`: a skill cannot be
    /// exported where `config.json` says (RUNTIME §10); nothing was changed.
    #[error(transparent)]
    Export(#[from] crate::skill::ExportError),
}

impl PackError {
    /// The stable snake_case code.
    pub fn code(&self) -> Code {
        match self {
            Self::Unreadable { .. } => Code::BadPackDir,
            Self::AlreadyInstalled { .. } => Code::AlreadyInstalled,
            Self::NotInstalled { .. } => Code::NotInstalled,
            Self::BinMissing { .. } => Code::BinMissing,
            Self::BinUnsafe { code, .. } => *code,
            Self::Store(e) => e.code(),
            Self::Export(e) => e.code(),
            Self::Openapi(e) => e.code(),
            Self::FamilyClaimed { .. } => Code::FamilyClaimed,
            Self::FamilyNotDeclared { .. } => Code::Usage,
        }
    }
}

/// `packs/<id>`.
pub fn pack_dir(home: &Home, id: &str) -> PathBuf {
    home.dir(StoreDir::Packs).join(id)
}

/// Checks that the home can be written before anything is changed: creates it when absent,
/// refuses a non-directory and a directory this process may not write. The write check is
/// `access(2)` with `W_OK`, which also fails for root on a read-only mount or an immutable
/// directory (`chattr +i`).
///
/// # Errors
/// [`StoreError::Unusable`] naming the home and why.
pub fn ensure_writable(home: &Home) -> Result<(), StoreError> {
    let root = home.root();
    match std::fs::symlink_metadata(root) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => match std::fs::metadata(root) {
            Ok(m) if m.is_dir() => {}
            _ => {
                return Err(StoreError::Unusable {
                    path: root.to_path_buf(),
                    reason: "it is not a directory".into(),
                });
            }
        },
        Err(_) => {
            std::fs::create_dir_all(root).map_err(|e| StoreError::Unusable {
                path: root.to_path_buf(),
                reason: format!("cannot create it: {e}"),
            })?;
        }
    }
    fsops::access_writable(root).map_err(|e| StoreError::Unusable {
        path: root.to_path_buf(),
        reason: format!("it is not writable: {e}"),
    })
}

/// Removes what other stores keep for pack `id` when it is uninstalled, under the same
/// lock, before the pack directory goes (RUNTIME §3, "uninstall removes pack, skill and the
/// pack's bindings"). This is the hook for any later per-pack state.
///
/// Bindings are kept per binding family (RUNTIME §8): the family's credentials go only when
/// no other installed pack shares the family, so uninstalling one pack of a family does not
/// log the others out. Grants are left alone: they name packs, and a grant for a pack that
/// is installed again later applies again, subject to the rug-pull guard.
fn remove_pack_state(home: &Home, _lock: &StoreLock, id: &str) -> Result<(), StoreError> {
    // Grants on the pack go with it: a different pack installed later under the same id
    // starts with none (the rug-pull guard; `*` grants stay, they name every pack). First,
    // since a damaged grant file refuses the uninstall before anything is removed.
    if let Ok(pid) = hcp_model::PackId::parse(id) {
        crate::grant::remove_pack(home, _lock, &pid)?;
    }
    let family = match read::load(home, id) {
        Ok(p) => p.manifest.family().to_owned(),
        Err(_) => id.to_owned(),
    };
    let shared = read::installed_ids(home)?
        .iter()
        .filter(|o| o.as_str() != id)
        .any(|o| read::load(home, o.as_str()).is_ok_and(|p| p.manifest.family() == family));
    if !shared && crate::binding::safe_component(&family) {
        crate::binding::remove_family(home, _lock, &family)?;
    }
    // Stimuli recorded for the pack (`binding.degraded`) go with it.
    crate::stimulus::remove_pack(home, id)?;
    Ok(())
}

#[cfg(test)]
mod tests;
