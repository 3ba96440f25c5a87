//! The store's index of `/etc` (RUNTIME §5.1, the `/etc` row): which entries of `/etc`
//! every view covers and which of its symlinks' targets it binds
//! ([`hcp_adapter::scan_etc`]), kept in `state/view-index.json` so that a call does not
//! walk `/etc`.
//!
//! ```json
//! {"format": 1, "boot_id": "…", "scanned_at": "2026-12-01T20:00:00Z",
//!  "etc": {"covered": [{"path": "/etc/shadow", "dir": false}, …],
//!          "links": [{"link": "/etc/resolv.conf", "target": "/run/…", "dir": false}]}}
//! ```
//!
//! It is made again by every `install`, by `hcp doctor --refresh` and `hcp init`
//! ([`refresh_view_index`]), and by the first call of a boot: a call whose index names
//! another boot, or that finds none or a damaged one, or whose `/etc` changed where the
//! index looks (`hcp_adapter::EtcIndex::is_current`: a handful of `statx`), scans `/etc`
//! before it runs ([`view_index`]) and writes what it found (best effort: a store it
//! cannot write still gets the fresh scan).

use hcp_adapter::EtcIndex;
use hcp_store::Home;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The index's file, relative to the store.
pub const VIEW_INDEX_FILE: &str = "state/view-index.json";

/// The version of the file's format this hcp writes and reads.
const FORMAT: u32 = 1;

/// The stored index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ViewIndex {
    /// [`FORMAT`].
    pub format: u32,
    /// The kernel's boot id when the scan was made (`/proc/sys/kernel/random/boot_id`).
    pub boot_id: String,
    /// When the scan was made (RFC 3339, UTC).
    pub scanned_at: String,
    /// What the scan found.
    pub etc: EtcIndex,
}

/// This boot's id, read once per process (`""` where the kernel has none): the audit
/// trail's ([`hcp_store::audit::Boot::current`]), so a call reads the kernel's file once.
pub fn boot_id() -> &'static str {
    static BOOT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BOOT.get_or_init(|| hcp_store::audit::Boot::current().id)
}

/// The index file of the store at `home`.
pub fn path(home: &Home) -> PathBuf {
    home.root().join(VIEW_INDEX_FILE)
}

/// Scans `/etc` now and writes the index into the store (RUNTIME §5.1: at `init`, each
/// `install`, `hcp doctor --refresh`).
///
/// # Errors
/// The store's I/O error when the file cannot be written (the scan itself cannot fail).
pub fn refresh_view_index(home: &Home) -> Result<ViewIndex, hcp_store::StoreError> {
    let index = ViewIndex {
        format: FORMAT,
        boot_id: boot_id().to_owned(),
        scanned_at: jiff::Timestamp::now().to_string(),
        etc: hcp_adapter::scan_etc(),
    };
    let bytes = serde_json::to_vec(&index).unwrap_or_default();
    hcp_store::atomic::write_atomic(&path(home), &bytes)?;
    Ok(index)
}

/// The stored index as it is, or why it cannot be used (for `hcp doctor`: how old it is).
///
/// # Errors
/// Lowercase: missing, unreadable, damaged, another format.
pub fn stored(home: &Home) -> Result<ViewIndex, String> {
    let p = path(home);
    let bytes = hcp_store::atomic::read_record(&p)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("`{}`: it does not exist", p.display()))?;
    let index: ViewIndex =
        serde_json::from_slice(&bytes).map_err(|e| format!("`{}` is damaged: {e}", p.display()))?;
    if index.format != FORMAT {
        return Err(format!(
            "`{}` is of format {}, this hcp reads {FORMAT}",
            p.display(),
            index.format
        ));
    }
    Ok(index)
}

/// The index a call's view uses: the stored one when it was made in this boot and `/etc`
/// and the directories holding its covered entries have not changed since
/// ([`EtcIndex::is_current`]: an entry added beside a covered one, a new file at the top of
/// `/etc`), else a fresh scan, written into the store when it can be (RUNTIME §5.1: "the
/// first call of a boot").
pub fn view_index(home: &Home) -> EtcIndex {
    match stored(home) {
        Ok(i) if i.boot_id == boot_id() && i.etc.is_current() => i.etc,
        _ => match refresh_view_index(home) {
            Ok(i) => i.etc,
            Err(_) => hcp_adapter::scan_etc(),
        },
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_index_is_refreshed_when_missing_damaged_or_of_another_boot() {
        let d = tempfile::tempdir().unwrap();
        let home = Home::open(d.path()).unwrap();
        assert!(stored(&home).is_err());
        let etc = view_index(&home);
        let first = stored(&home).unwrap();
        assert_eq!(first.etc, etc);
        assert_eq!(first.boot_id, boot_id());
        // Another boot's index is scanned again.
        let mut old = first.clone();
        old.boot_id = "another-boot".into();
        old.etc.covered.clear();
        std::fs::write(path(&home), serde_json::to_vec(&old).unwrap()).unwrap();
        assert_eq!(view_index(&home), etc);
        assert_eq!(stored(&home).unwrap().boot_id, boot_id());
        // This boot's index is used as it is.
        let mut same = stored(&home).unwrap();
        same.etc.covered.clear();
        std::fs::write(path(&home), serde_json::to_vec(&same).unwrap()).unwrap();
        assert!(view_index(&home).covered.is_empty());
        std::fs::write(path(&home), b"{not json").unwrap();
        assert!(stored(&home).unwrap_err().contains("damaged"));
        assert_eq!(view_index(&home), etc);
    }
}
