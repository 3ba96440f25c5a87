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
        /// What the operator can do (`hcp state migrate`, check the URL …), lowercase.
        hint: Option<String>,
    },
    /// `config.json` does not parse, or its `state` cannot be used (code `bad_config`):
    /// the state backend cannot be chosen, so no state is read or written.
    #[error(transparent)]
    Config(Box<crate::config::ConfigError>),
    /// A state file that does not parse: the store was edited by hand or is damaged.
    #[error("state file `{path}` is damaged: {reason}")]
    Damaged {
        /// The file.
        path: PathBuf,
        /// The parse error.
        reason: String,
    },
    /// `HCP_HOME` names no store (RUNTIME §4, code `no_store`, 66): it is missing, or a
    /// directory without the marker `store.json`. Nothing was created.
    #[error("no store at `{}`: {reason}", .path.display())]
    NoStore {
        /// The path `HCP_HOME` (or the platform data directory) names.
        path: PathBuf,
        /// Why, lowercase.
        reason: String,
        /// What `hcp init` would do there (make the store, or refuse a directory of other
        /// files: [`crate::made::foreign_entries`]).
        hint: String,
    },
    /// `hcp init` (or `hcp install` into a home that is no store) of a directory that holds
    /// files of its own (code `store_unusable`, 74): a store is made only in a missing or
    /// empty directory, or one holding only what an operator writes before it
    /// ([`crate::made::foreign_entries`]), so no one's files end up inside a store. Nothing
    /// was written.
    #[error("`{}` is not a store and holds files of its own ({}); no store is made among them", .path.display(), crate::made::name_some(.entries))]
    Occupied {
        /// The directory.
        path: PathBuf,
        /// Its entries that are not a store's, sorted.
        entries: Vec<String>,
    },
    /// The audit witness cannot take a checkpoint (`witness_unavailable`, 74).
    #[error(transparent)]
    Witness(Box<crate::audit::witness::WitnessError>),
    /// The audit trail refused (a trail that does not match its anchor while a store is
    /// made or migrated): `audit_unavailable` or the fault's code.
    #[error(transparent)]
    Audit(Box<crate::audit::AuditError>),
}

impl StoreError {
    /// The stable code of RUNTIME's store errors: `store_unusable`, `store_io`,
    /// `store_damaged`, `state_unavailable`.
    pub fn code(&self) -> Code {
        match self {
            Self::Unusable { .. } | Self::Occupied { .. } => Code::StoreUnusable,
            Self::Io { .. } => Code::StoreIo,
            Self::Damaged { .. } => Code::StoreDamaged,
            Self::StateUnavailable { .. } => Code::StateUnavailable,
            Self::Config(e) => e.code(),
            Self::NoStore { .. } => Code::NoStore,
            Self::Witness(_) => Code::WitnessUnavailable,
            Self::Audit(e) => e.code(),
        }
    }

    /// What the operator can do about it, when there is something to say.
    pub fn hint(&self) -> Option<&str> {
        match self {
            Self::StateUnavailable { hint, .. } => hint.as_deref(),
            // A fleet's `state` that cannot be used refuses every command that needs
            // state; `hcp config` is not one of them (it records in the store's own trail).
            Self::Config(e)
                if matches!(&**e, crate::config::ConfigError::Invalid { message, .. }
                    if message.starts_with("`state")) =>
            {
                Some(
                    "`hcp config set state.url URL` replaces it, or `hcp config unset state` makes the state the files of this store again (both work while it is refused); `hcp doctor` checks it",
                )
            }
            Self::Config(_) => Some("fix `config.json` in the store; `hcp doctor` checks it"),
            Self::NoStore { hint, .. } => Some(hint),
            Self::Occupied { .. } => Some(
                "set `HCP_HOME` to your store, or to a new or empty directory and run `hcp init` there",
            ),
            Self::Witness(e) => Some(e.hint()),
            Self::Audit(e) => e.hint(),
            _ => None,
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
