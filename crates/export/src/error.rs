//! What can stop an export.

use hcp_model::Code;
use hcp_store::audit::{AuditError, ReadFault};
use std::path::PathBuf;

/// Why `hcp audit export` stopped short.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The trail or the state backend cannot be read.
    #[error(transparent)]
    Audit(#[from] AuditError),
    /// The store refused a write (the cursor).
    #[error(transparent)]
    Store(#[from] hcp_store::StoreError),
    /// The cursor file cannot be used.
    #[error("the export cursor `{}` cannot be used: {reason}", path.display())]
    Cursor {
        /// The file.
        path: PathBuf,
        /// Why, lowercase.
        reason: String,
    },
    /// The collector refused the spans for good, or never took them in a one-shot export.
    #[error("the collector `{url}` did not take the spans: {reason}")]
    Collector {
        /// The endpoint.
        url: String,
        /// What happened, lowercase.
        reason: String,
    },
    /// A record that does not verify: the export stopped before it.
    #[error(
        "record {} of the trail{}{} does not verify ({}): {}",
        .0.seq,
        .0.machine.as_ref().map(|m| format!(" of machine `{m}`")).unwrap_or_default(),
        .0.id.as_ref().map(|i| format!(" (`{i}`)")).unwrap_or_default(),
        .0.fault.as_str(),
        .0.detail
    )]
    Damaged(ReadFault),
}

impl ExportError {
    /// The stable code: the trail's fault (`hash_mismatch` …), `export_failed`,
    /// `store_damaged` for a cursor that cannot be used, or the store's or backend's.
    pub fn code(&self) -> Code {
        match self {
            Self::Audit(e) => e.code(),
            Self::Store(e) => e.code(),
            Self::Cursor { .. } => Code::StoreDamaged,
            Self::Collector { .. } => Code::ExportFailed,
            Self::Damaged(f) => f.fault.code(),
        }
    }

    /// What the owner can do.
    pub fn hint(&self) -> Option<String> {
        match self {
            Self::Audit(e) => e.hint().map(str::to_owned),
            Self::Store(e) => e.hint().map(str::to_owned),
            Self::Cursor { path, .. } => Some(format!(
                "remove `{}` to export the whole trail again (the collector gets every span a second time, with the same ids)",
                path.display()
            )),
            Self::Collector { .. } => Some(
                "check the URL (an OTLP/HTTP traces endpoint, such as `http://127.0.0.1:4318/v1/traces`) and the collector's log".into(),
            ),
            Self::Damaged(_) => Some(
                "`hcp audit verify` names the fault; the records before it were exported, and the export resumes there once the trail verifies".into(),
            ),
        }
    }
}
