//! The install record, `packs/<id>/.hcp/record.json` (RUNTIME §3, DESIGN "The store").

use crate::error::{StoreError, StoreResult};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The directory inside an installed pack that holds hcp's own files.
pub const RECORD_DIR: &str = ".hcp";
/// The install record's file name inside [`RECORD_DIR`].
pub const RECORD_FILE: &str = "record.json";

/// What install pinned for one pack: the digests of its three files and of every program
/// it may run (RUNTIME §3, "Install pins what it will run").
///
/// Written once per install inside the staged copy, so it is swapped into place together
/// with the files it describes: a reader never sees a record of one install beside the
/// files of another.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstallRecord {
    /// The pack id (= the directory name under `packs/`).
    pub pack_id: String,
    /// When this copy was installed, RFC 3339 in UTC.
    pub installed_at: String,
    /// The absolute, canonical path of the source directory it was installed from.
    pub source: PathBuf,
    /// Each of the three files by name → `sha256:<64 hex>` of its bytes.
    pub files: BTreeMap<String, String>,
    /// `sha256:<64 hex>` over the three file digests, see [`files_digest`].
    pub files_digest: String,
    /// Every program the pack may run, pinned by absolute path and digest, in the order of
    /// [`hcp_model::Manifest::programs`].
    pub bins: Vec<PinnedBin>,
    /// When a reinstall last changed `files_digest`, RFC 3339; `null` when the content is
    /// the one first installed. Non-owner grants made before it are suspended for this
    /// pack (the rug-pull guard).
    pub content_changed_at: Option<String>,
    /// What `hcp list` shows, copied from the manifest so that listing reads only the
    /// records.
    pub summary: PackSummaryFields,
    /// The pinned OpenAPI document of a `kind: openapi` pack (RUNTIME §1.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub openapi: Option<super::openapi::PinnedDocument>,
    /// Principal id → how many of its grants cover this pack (its own and its `*`
    /// grants; RUNTIME §4 "Fault isolation"). A principal whose grant file holds fewer
    /// (or is missing) has a damaged grant file, never "no grants". Kept by
    /// [`crate::grant`] under the store lock; absent in the records of an hcp before grant
    /// files were kept one per principal.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub grants: BTreeMap<String, u32>,
}

/// Manifest facts copied into the record for listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackSummaryFields {
    /// The manifest `name`.
    pub name: String,
    /// The manifest `kind` (`wrap`, `composite`, `openapi`).
    pub kind: String,
    /// The number of verbs.
    pub verb_count: usize,
}

/// A pinned program.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PinnedBin {
    /// The program as the manifest writes it (`hcp-example-transit`, `bin/tool`).
    pub program: String,
    /// The absolute path it resolved to at install.
    pub path: PathBuf,
    /// `sha256:<64 hex>` of the file's bytes at install.
    pub sha256: String,
    /// A script's interpreter as install resolved it (RUNTIME §5.1, see
    /// [`super::interpreter`]); absent for a program that is not a script, and in the
    /// records of an hcp before interpreters were pinned (a call of such a script is then
    /// refused until the pack is installed again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interpreter: Option<PinnedInterpreter>,
}

/// What runs a script bin (RUNTIME §5.1): the program a call executes and the arguments
/// it gets before the call's own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PinnedInterpreter {
    /// The script's `#!` line without `#!` (`/usr/bin/env python3`), for messages.
    pub line: String,
    /// The arguments of the program that runs, before the call's own: its `argv[0]`, the
    /// `#!` line's argument, the script's path (`["python3", "/opt/t/bin/tool"]`).
    pub argv: Vec<String>,
    /// The files that run, each pinned: the script's interpreter first, the program a
    /// call executes last (more than one when an interpreter is itself a script).
    pub files: Vec<PinnedFile>,
}

/// A file pinned by path and digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PinnedFile {
    /// The absolute, resolved path.
    pub path: PathBuf,
    /// `sha256:<64 hex>` of its bytes at install.
    pub sha256: String,
}

impl InstallRecord {
    /// The pin of `program` (as written in the manifest), when install pinned it.
    pub fn bin(&self, program: &str) -> Option<&PinnedBin> {
        self.bins.iter().find(|b| b.program == program)
    }

    /// Parses a record's bytes without checking its MAC (`mac` is skipped); `path` names
    /// the file in the error. For what is not trusted with authority (a cache's key, a
    /// sign of the store's version); a reader that acts on a record uses
    /// [`InstallRecord::open`].
    ///
    /// # Errors
    /// [`StoreError::Damaged`] when the bytes are not a record.
    pub fn from_bytes(bytes: &[u8], path: &Path) -> StoreResult<Self> {
        let damaged = |e: serde_json::Error| StoreError::Damaged {
            path: path.to_path_buf(),
            reason: e.to_string(),
        };
        let mut v: serde_json::Value = serde_json::from_slice(bytes).map_err(damaged)?;
        if let Some(m) = v.as_object_mut() {
            m.remove(crate::stamp::MAC_FIELD);
        }
        serde_json::from_value(v).map_err(damaged)
    }

    /// Reads the install record of pack `id` from `path` (its `bytes`), its keyed MAC
    /// checked first (RUNTIME §3, [`crate::stamp::records`]): one HMAC.
    ///
    /// # Errors
    /// [`StoreError::Damaged`] when the bytes are not a record, or its MAC is missing (in a
    /// store whose records are keyed) or does not hold (edited, or copied from another
    /// pack); [`StoreError::Io`] naming the chain key when it cannot be read.
    pub fn open(home: &crate::Home, id: &str, path: &Path, bytes: &[u8]) -> StoreResult<Self> {
        let v = crate::stamp::records::open_record(home, id, path, bytes)?;
        serde_json::from_value(v).map_err(|e| StoreError::Damaged {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })
    }

    /// The record as pretty JSON with a trailing newline and its keyed MAC, bound to
    /// `packs/<pack_id>/.hcp/record.json` wherever it is written (`path`, named in errors).
    ///
    /// # Errors
    /// [`StoreError::Io`] naming the chain key when it cannot be read (no record is written
    /// without its MAC).
    pub fn seal(&self, home: &crate::Home, path: &Path) -> StoreResult<Vec<u8>> {
        crate::stamp::records::seal_record(home, &self.pack_id, path, self)
    }

    /// [`InstallRecord::seal`], and the MAC it gave the record (what the state ledger
    /// keeps for it, `crate::ledger`).
    ///
    /// # Errors
    /// As [`InstallRecord::seal`].
    pub fn seal_mac(&self, home: &crate::Home, path: &Path) -> StoreResult<(Vec<u8>, String)> {
        crate::stamp::records::seal_record_mac(home, &self.pack_id, path, self)
    }

    /// The record as pretty JSON with a trailing newline, without its MAC (a store whose
    /// records are keyed refuses it: see [`InstallRecord::seal`]).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec_pretty(self).unwrap_or_default();
        v.push(b'\n');
        v
    }
}

pub use crate::digest::sha256_tagged;

/// The digest over a pack's three file digests: sha256 of the lines
/// `<name> <digest>\n` for `surface.json`, `policy.json`, `HARNESS.md` in that order
/// ([`hcp_model::PACK_FILES`]), tagged `sha256:`. Two installs have the same
/// `files_digest` exactly when the three files are byte-for-byte the same.
pub fn files_digest(files: &BTreeMap<String, String>) -> String {
    let mut h = Sha256::new();
    for name in hcp_model::PACK_FILES {
        let d = files.get(name).map(String::as_str).unwrap_or("");
        h.update(name.as_bytes());
        h.update(b" ");
        h.update(d.as_bytes());
        h.update(b"\n");
    }
    format!("sha256:{}", hex::encode(h.finalize()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn digest_is_tagged_and_stable() {
        assert_eq!(
            sha256_tagged(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        let mut a = BTreeMap::new();
        for n in hcp_model::PACK_FILES {
            a.insert(n.to_owned(), sha256_tagged(n.as_bytes()));
        }
        let mut b = a.clone();
        assert_eq!(files_digest(&a), files_digest(&b));
        b.insert("HARNESS.md".into(), sha256_tagged(b"changed"));
        assert_ne!(files_digest(&a), files_digest(&b));
    }
}
