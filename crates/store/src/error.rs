//! The store's one error type.

use hcp_model::Code;
use std::path::PathBuf;

/// What can go wrong in the store. Every variant that touches disk names the path.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The home cannot be used: it is a file, or cannot be created or written.
    #[error("store `{path}` is unusable: {reason}")]
    Unusable {
        /// The home or the directory inside it.
        path: PathBuf,
        /// Why, lowercase.
        reason: String,
    },
    /// An I/O failure on `path`.
    #[error("cannot {action} `{path}`")]
    Io {
        /// What was being done (`read`, `write`, `rename`, `lock`…).
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The state backend (RUNTIME §9) cannot be reached, refuses the credentials, or has
    /// another schema version (code `state_unavailable`). Never a reason to fall back to
    /// another backend.
    #[error("the state backend `{backend}` is unavailable: {reason}")]
    StateUnavailable {
        /// The backend (`file`, `postgresql`), never a URL with its password.
        backend: String,
        /// Why, lowercase.
        reason: String,
    },
    /// A state file that does not parse: the store was edited by hand or is damaged.
    #[error("state file `{path}` is damaged: {reason}")]
    Damaged {
        /// The file.
        path: PathBuf,
        /// The parse error.
        reason: String,
    },
}

impl StoreError {
    /// The stable code of RUNTIME's store errors: `store_unusable`, `store_io`,
    /// `store_damaged`, `state_unavailable`.
    pub fn code(&self) -> Code {
        match self {
            Self::Unusable { .. } => Code::StoreUnusable,
            Self::Io { .. } => Code::StoreIo,
            Self::Damaged { .. } => Code::StoreDamaged,
            Self::StateUnavailable { .. } => Code::StateUnavailable,
        }
    }

    /// An [`StoreError::Io`] for `path`.
    pub fn io(action: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

/// A store result.
pub type StoreResult<T> = Result<T, StoreError>;
