//! Principals and their sessions (RUNTIME §4).
//!
//! With no session the caller is the owner ([`OWNER`]). The owner starts a session for
//! another principal with [`start`]; the answer is a bearer [`Token`] (`hcps_` + 64
//! lowercase hex digits, 256 bits from the operating system's random source) that a
//! harness passes to its agent as `HCP_SESSION`. The token itself is never stored: the
//! session lives in `state/sessions/<sha256 of token, hex>.json` and holds that digest
//! again as `token_sha256`, so possession of the store does not give a usable token. The
//! file carries the keyed MAC of its content and name ([`crate::stamp`]): one edited by hand
//! (its expiry pushed out, its projects changed) is damaged, refused `store_damaged`.
//!
//! [`resolve`] is what the gate uses: a present token that is malformed, unknown, expired
//! or ended is refused with one stable code, `bad_session` ([`BAD_SESSION`]), and the
//! reason ([`BadSession`]) says which. A bad token never falls back to the owner.
//!
//! Times are passed in (`now`) so that expiry is tested without a clock.

use crate::error::StoreError;
use hcp_model::Code;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

mod files;
mod principal;
mod time;
mod token;

pub use files::{
    damaged, end, end_digest, end_principal, list, prepare, remove_damaged, resolve, sessions_dir,
    start, start_prepared,
};
pub use jiff::{SignedDuration, Timestamp};
pub use principal::{MAX_ATTR_VALUE_LEN, MAX_NAME_LEN, OWNER, PrincipalId, validate_name};
pub(crate) use time::serde_ts;
pub use time::{DEFAULT_TTL, MAX_TTL, MIN_TTL, format_ts, parse_ttl};
pub use token::{TOKEN_BYTES, TOKEN_PREFIX, Token, is_token_shape, token_digest};

/// The stable code of every refused session token (RUNTIME §4, §5 exit 77).
pub const BAD_SESSION: Code = Code::BadSession;

/// Why a present session token is refused. All four map to [`BAD_SESSION`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadSession {
    /// Not of the token's shape (`hcps_` + 64 lowercase hex digits), empty included.
    #[error("the session token is malformed")]
    Malformed,
    /// Well-formed, but no session has this token.
    #[error("the session token is unknown")]
    Unknown,
    /// The session's time to live has passed.
    #[error("the session expired at `{}`", format_ts(*.expires_at))]
    Expired {
        /// When it expired.
        expires_at: Timestamp,
    },
    /// The session was ended with `hcp session end`.
    #[error("the session was ended at `{}`", format_ts(*.ended_at))]
    Ended {
        /// When it was ended.
        ended_at: Timestamp,
    },
}

impl BadSession {
    /// A short machine word for the reason: `malformed`, `unknown`, `expired`, `ended`.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Malformed => "malformed",
            Self::Unknown => "unknown",
            Self::Expired { .. } => "expired",
            Self::Ended { .. } => "ended",
        }
    }
}

/// What can go wrong with sessions.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// A present token that is refused (code `bad_session`).
    #[error(transparent)]
    Bad(#[from] BadSession),
    /// A principal id outside the allowed charset, or the reserved `owner` (code
    /// `bad_principal`).
    #[error("principal id `{id}` is not allowed: {reason}")]
    BadPrincipal {
        /// The id as given.
        id: String,
        /// Why, lowercase.
        reason: String,
    },
    /// A role, project, `can_view` class or attribute that is not allowed (code
    /// `bad_value`).
    #[error("{what} `{value}` is not allowed: {reason}")]
    BadValue {
        /// Which option (`role`, `project`, `can_view`, `attr`).
        what: &'static str,
        /// The value as given.
        value: String,
        /// Why, lowercase.
        reason: String,
    },
    /// The working directory does not exist or is not a directory (code `bad_workdir`).
    #[error("workdir `{path}` cannot be used: {reason}")]
    BadWorkdir {
        /// The path as given.
        path: PathBuf,
        /// Why, lowercase.
        reason: String,
    },
    /// A time to live that does not parse or is out of range (code `bad_ttl`).
    #[error("ttl `{value}` is not allowed: {reason}")]
    BadTtl {
        /// The text as given.
        value: String,
        /// Why, lowercase.
        reason: String,
    },
    /// The operating system's random source could not be read (code `store_io`).
    #[error("cannot read random bytes for a session token")]
    Entropy(#[source] std::io::Error),
    /// The store failed (its own codes).
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl SessionError {
    /// The stable code: `bad_session`, `bad_principal`, `bad_value`, `bad_workdir`,
    /// `bad_ttl`, or the store's (`store_io`, `store_damaged`, `store_unusable`).
    pub fn code(&self) -> Code {
        match self {
            Self::Bad(_) => BAD_SESSION,
            Self::BadPrincipal { .. } => Code::BadPrincipal,
            Self::BadValue { .. } => Code::BadValue,
            Self::BadWorkdir { .. } => Code::BadWorkdir,
            Self::BadTtl { .. } => Code::BadTtl,
            Self::Entropy(_) => Code::StoreIo,
            Self::Store(e) => e.code(),
        }
    }
}

/// `active`, `expired` or `ended` at a given time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SessionState {
    /// Usable.
    Active,
    /// Past its `expires_at`, not ended.
    Expired,
    /// Ended by the owner (whether or not it had expired).
    Ended,
}

impl SessionState {
    /// The word: `active`, `expired`, `ended`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Expired => "expired",
            Self::Ended => "ended",
        }
    }
}

/// One session as stored in `state/sessions/<digest>.json` (RUNTIME §4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Session {
    /// `sha256:` and the hex digest of the token (equal to the file stem).
    pub token_sha256: String,
    /// Who the session speaks for.
    pub principal: PrincipalId,
    /// The principal's role for the runtime policy (RUNTIME §7), if any.
    pub role: Option<String>,
    /// Projects the principal is a member of, in the order given; the first is the
    /// session's project for `brain` land (RUNTIME §5 step 5).
    pub projects: Vec<String>,
    /// Attributes for the runtime policy's `bind` (RUNTIME §7), key → value.
    pub attributes: BTreeMap<String, String>,
    /// Data classes the principal may see (RUNTIME §7 projection).
    pub can_view: Vec<String>,
    /// The sandbox working directory for `local` land: absolute and canonical, checked to
    /// be a directory when the session started. `None`: the caller's current directory.
    pub workdir: Option<PathBuf>,
    /// When the session started.
    #[serde(with = "serde_ts")]
    pub created_at: Timestamp,
    /// When it stops being usable.
    #[serde(with = "serde_ts")]
    pub expires_at: Timestamp,
    /// When the owner ended it, if they did.
    #[serde(with = "serde_ts::option")]
    pub ended_at: Option<Timestamp>,
}

impl Session {
    /// The session's state at `now`. Ended wins over expired.
    pub fn state(&self, now: Timestamp) -> SessionState {
        if self.ended_at.is_some() {
            SessionState::Ended
        } else if now >= self.expires_at {
            SessionState::Expired
        } else {
            SessionState::Active
        }
    }

    /// A short, non-secret handle for listings: the first 12 hex digits of the token's
    /// digest.
    pub fn short_id(&self) -> &str {
        let hex = self
            .token_sha256
            .strip_prefix("sha256:")
            .unwrap_or(&self.token_sha256);
        hex.get(..12).unwrap_or(hex)
    }

    /// The session's project for `brain` land: the first of [`Session::projects`].
    pub fn project(&self) -> Option<&str> {
        self.projects.first().map(String::as_str)
    }
}

/// What `hcp session start` asks for, before validation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewSession {
    /// The principal id (validated by [`PrincipalId::parse`]).
    pub principal: String,
    /// `--role`.
    pub role: Option<String>,
    /// `--project`, repeatable; duplicates are dropped, order kept.
    pub projects: Vec<String>,
    /// `--attr KEY=VALUE`, repeatable; a repeated key is refused.
    pub attributes: Vec<String>,
    /// `--can-view CLASS`, repeatable; duplicates are dropped, order kept.
    pub can_view: Vec<String>,
    /// `--workdir`: must exist and be a directory; stored canonical.
    pub workdir: Option<PathBuf>,
    /// `--ttl`; [`DEFAULT_TTL`] when `None`.
    pub ttl: Option<SignedDuration>,
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::result_large_err)]
mod tests;
