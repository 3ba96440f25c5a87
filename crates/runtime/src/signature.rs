//! The cheap signature of what the owner last changed in the store (install, reinstall,
//! activate, deactivate, uninstall, an edit of the runtime policy): what `hcp mcp` watches
//! to know when its tool list changed.

use hcp_store::Home;
use hcp_store::pack::{self, InstallRecord};

/// What the owner last did to one active pack, as its install record says: `(pack id,
/// installed_at, files_digest)`. Empty strings when the record cannot be read.
pub type RecordMark = (String, String, String);

/// The signature of the tool set: the active pack ids, each with its install record's
/// `installed_at` and `files_digest`, sorted by id, and the stamp of the operator's
/// runtime policy file. It changes when the owner installs, reinstalls, activates,
/// deactivates or uninstalls, or edits the runtime policy; it does not change when a
/// pack's files or bin change under it without a reinstall (that pack is refused at call
/// time with `store_damaged` or `bin_changed`, never re-listed).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Signature {
    /// The active packs' record marks.
    pub packs: Vec<RecordMark>,
    /// `NAME:LEN:MTIME_NS` of `$HCP_HOME/policy.json` or `policy.yaml`, when one exists.
    pub policy: Option<String>,
}

fn policy_stamp(home: &Home) -> Option<String> {
    crate::policy::POLICY_FILES.iter().find_map(|name| {
        let m = std::fs::metadata(home.root().join(name)).ok()?;
        let mtime = m
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        Some(format!("{name}:{}:{mtime}", m.len()))
    })
}

impl Signature {
    /// Reads the signature: one listing of `state/active/` and one small record file per
    /// active pack (no manifest is parsed, no pack file hashed).
    ///
    /// # Errors
    /// The store's, as text, when `state/active/` cannot be read.
    pub fn read(home: &Home) -> Result<Self, String> {
        let policy = policy_stamp(home);
        let ids = pack::active_ids(home).map_err(|e| e.to_string())?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            let path = pack::pack_dir(home, id.as_str())
                .join(pack::record::RECORD_DIR)
                .join(pack::record::RECORD_FILE);
            let mark = hcp_store::atomic::read_record(&path)
                .ok()
                .flatten()
                .and_then(|b| InstallRecord::from_bytes(&b, &path).ok())
                .map(|r| (r.installed_at, r.files_digest))
                .unwrap_or_default();
            out.push((id.to_string(), mark.0, mark.1));
        }
        Ok(Self { packs: out, policy })
    }
}
