//! The one error type of the adapter, with the stable codes of RUNTIME §5 (the table of
//! `hcp-model` gives each its exit status).

use hcp_model::Code;
use std::io;
use std::path::PathBuf;

/// Why the adapter refused or failed to run a command.
///
/// Every variant has a stable [`code`](AdapterError::code) (harnesses match on it), whose
/// [`Code::exit_status`] is the `hcp exec` status RUNTIME §5 gives it.
/// A timeout is not an error: it is [`Outcome::timed_out`](crate::Outcome::timed_out).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdapterError {
    /// `bin_missing` (exit 127): the pinned bin does not exist (or its pinned path is not
    /// absolute).
    #[error("pinned bin `{path}` is missing")]
    BinMissing {
        /// The pinned path.
        path: PathBuf,
        /// The failure that showed it, when there is one.
        #[source]
        source: Option<io::Error>,
    },
    /// `bin_not_executable` (exit 126): the pinned path is not a regular file, has no
    /// execute bit, or the kernel refused to execute it.
    #[error("pinned bin `{path}` is not an executable file: {reason}")]
    BinNotExecutable {
        /// The pinned path.
        path: PathBuf,
        /// What is wrong, lowercase.
        reason: String,
        /// The failure that showed it, when there is one.
        #[source]
        source: Option<io::Error>,
    },
    /// `bin_changed` (exit 126): the bin's sha256 is no longer the one pinned at install
    /// (RUNTIME §3); re-install the pack to accept the new bin.
    #[error("pinned bin `{path}` changed since install (sha256 `{actual}`, pinned `{pinned}`)")]
    BinChanged {
        /// The pinned path.
        path: PathBuf,
        /// The pinned digest, `sha256:<hex>`.
        pinned: String,
        /// The digest found now, `sha256:<hex>`.
        actual: String,
    },
    /// `arg_missing` (exit 65): a required placeholder has no value.
    #[error("argument `{name}` is required")]
    ArgMissing {
        /// The placeholder name.
        name: String,
    },
    /// `arg_invalid` (exit 65): a value holds NUL, which no argv element can carry.
    #[error("argument `{name}` holds a NUL byte")]
    ArgInvalid {
        /// The placeholder name (`@workdir` style for session values).
        name: String,
    },
    /// `arg_invalid` (exit 65): the arguments do not fit one `execve`: an element longer
    /// than the kernel's 131,071 bytes (`MAX_ARG_STRLEN` less its NUL), or argv and the
    /// environment together above `sysconf(_SC_ARG_MAX)` (a quarter of the stack limit).
    #[error("{message}")]
    ArgTooLong {
        /// What is too long, by how much (lowercase, no final period).
        message: String,
    },
    /// `arg_looks_like_flag` (exit 65): a value bound to a positional element starts with
    /// `-` and no literal `--` precedes it in the template (RUNTIME §1.2).
    #[error("argument `{name}` starts with `-` and would be read as an option")]
    ArgLooksLikeFlag {
        /// The placeholder name.
        name: String,
    },
    /// `project_required` (exit 77): the template uses `{{@project_id}}` and the session
    /// names no project (RUNTIME §1.2, §5 step 5).
    #[error("this verb needs a project in the session (`{{{{@project_id}}}}`)")]
    ProjectRequired,
    /// `env_refused` (exit 126): an environment entry the adapter will not pass: an
    /// `agent_env` name the runtime owns or that injects code (see
    /// [`agent_env_refusal`](crate::agent_env_refusal)), a malformed name, or a NUL in a
    /// name or value. Not in RUNTIME §5's list: the command cannot run as packed.
    #[error("environment variable `{name}` refused: {reason}")]
    EnvRefused {
        /// The variable name (lossily UTF-8).
        name: String,
        /// Why, lowercase.
        reason: &'static str,
    },
    /// `spawn_failed` (exit 126): the process could not be started (working directory
    /// missing, out of processes or memory, pidfd or pipe failure).
    #[error("cannot start `{program}`: {reason}")]
    SpawnFailed {
        /// The pinned path.
        program: PathBuf,
        /// What failed, lowercase.
        reason: String,
        /// The cause.
        #[source]
        source: Option<io::Error>,
    },
    /// `sandbox_unavailable` (exit 77): a `local` verb cannot be confined as the
    /// configuration asks (no Landlock with `sandbox.require`, a network denial the
    /// kernel cannot enforce) or its working directory is `/` or holds a protected path
    /// (RUNTIME §5 "The child").
    #[error("sandbox unavailable: {reason}")]
    SandboxUnavailable {
        /// Why, lowercase.
        reason: String,
    },
    /// `sandbox_failed` (exit 126): preparing the confinement failed (a path of the
    /// sandbox cannot be opened, the kernel refused the ruleset, the private temporary
    /// directory cannot be made or removed).
    #[error("cannot prepare the sandbox: {reason}{}", path_suffix(path))]
    SandboxFailed {
        /// The path concerned, empty when none.
        path: PathBuf,
        /// What failed, lowercase.
        reason: String,
        /// The cause.
        #[source]
        source: Option<io::Error>,
    },
    /// `supervise_failed` (exit 70): waiting on or reading from a started child failed.
    /// The child's process group was killed before this was returned. Not in RUNTIME §5's
    /// list (an internal error).
    #[error("lost track of the child: {reason}")]
    SuperviseFailed {
        /// What failed, lowercase.
        reason: &'static str,
        /// The cause.
        #[source]
        source: io::Error,
    },
}

impl AdapterError {
    /// The stable code (RUNTIME §5); its [`Code::exit_status`] is the status `hcp exec`
    /// answers with: 127 `bin_missing`; 126 `bin_not_executable`, `bin_changed`,
    /// `env_refused`, `spawn_failed`, `sandbox_failed`; 65 `arg_*`; 77
    /// `project_required`, `sandbox_unavailable`; 70 `supervise_failed`.
    pub fn code(&self) -> Code {
        match self {
            Self::BinMissing { .. } => Code::BinMissing,
            Self::BinNotExecutable { .. } => Code::BinNotExecutable,
            Self::BinChanged { .. } => Code::BinChanged,
            Self::ArgMissing { .. } => Code::ArgMissing,
            Self::ArgInvalid { .. } | Self::ArgTooLong { .. } => Code::ArgInvalid,
            Self::ArgLooksLikeFlag { .. } => Code::ArgLooksLikeFlag,
            Self::ProjectRequired => Code::ProjectRequired,
            Self::EnvRefused { .. } => Code::EnvRefused,
            Self::SpawnFailed { .. } => Code::SpawnFailed,
            Self::SuperviseFailed { .. } => Code::SuperviseFailed,
            Self::SandboxUnavailable { .. } => Code::SandboxUnavailable,
            Self::SandboxFailed { .. } => Code::SandboxFailed,
        }
    }
}

/// ` at `PATH`` when the path is not empty.
fn path_suffix(path: &std::path::Path) -> String {
    if path.as_os_str().is_empty() {
        String::new()
    } else {
        format!(" at `{}`", path.display())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_statuses() {
        let e = AdapterError::BinMissing {
            path: "/x".into(),
            source: None,
        };
        assert_eq!((e.code(), e.code().exit_status()), (Code::BinMissing, 127));
        let e = AdapterError::ArgLooksLikeFlag { name: "q".into() };
        assert_eq!(
            (e.code(), e.code().exit_status()),
            (Code::ArgLooksLikeFlag, 65)
        );
        assert_eq!(
            e.to_string(),
            "argument `q` starts with `-` and would be read as an option"
        );
        assert_eq!(
            AdapterError::ProjectRequired.to_string(),
            "this verb needs a project in the session (`{{@project_id}}`)"
        );
    }
}
