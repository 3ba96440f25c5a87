//! The fast path of pin verification across calls: after a verify that had to hash the
//! bin, the stat fingerprint it vouched for is kept in `packs/<id>/.hcp/fingerprints.json`
//! so the next call checks a `stat` instead of hashing the file (see `hcp_adapter::pin`).
//!
//! An entry counts only for the exact pin (path and sha256) of the current install
//! record, so an entry left by an older install, or written while a reinstall swapped the
//! pack directory, is ignored. The file is replaced whole by rename; concurrent calls may
//! each write it and any of their writes is valid.

use hcp_adapter::{BinPin, StatFingerprint, VerifiedBin};
use hcp_store::pack::PinnedBin;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

const FILE: &str = ".hcp/fingerprints.json";

#[derive(Debug, Default, Serialize, Deserialize)]
struct Cache {
    entries: Vec<Entry>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Entry {
    path: PathBuf,
    sha256: String,
    fingerprint: StatFingerprint,
}

/// The fingerprint kept for `pin`, when there is one for exactly this pin.
pub fn cached(pack_dir: &Path, pin: &PinnedBin) -> Option<StatFingerprint> {
    let bytes = std::fs::read(pack_dir.join(FILE)).ok()?;
    let cache: Cache = serde_json::from_slice(&bytes).ok()?;
    cache
        .entries
        .into_iter()
        .find(|e| e.path == pin.path && e.sha256 == pin.sha256)
        .map(|e| e.fingerprint)
}

/// Keeps the fingerprint of a bin that was just hashed and matched `pin`. Best effort: a
/// failure only means the next call hashes again.
pub fn remember(pack_dir: &Path, pin: &BinPin, verified: &VerifiedBin) {
    let Some(fingerprint) = verified.refreshed() else {
        return;
    };
    let path = pack_dir.join(FILE);
    let mut cache: Cache = std::fs::read(&path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let sha256 = pin.sha256.to_string();
    cache.entries.retain(|e| e.path != pin.path);
    cache.entries.push(Entry {
        path: pin.path.clone(),
        sha256,
        fingerprint,
    });
    if let Ok(bytes) = serde_json::to_vec(&cache) {
        let _ = hcp_store::atomic::write_atomic(&path, &bytes);
    }
}
