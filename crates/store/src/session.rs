//! Principals and their sessions (RUNTIME §4).
//!
//! With no session the caller is the owner ([`OWNER`]). The owner starts a session for
//! another principal with [`start`]; the answer is a bearer [`Token`] (`hcps_` + 64
//! lowercase hex digits, 256 bits from the operating system's random source) that a
//! harness passes to its agent as `HCP_SESSION`. The token itself is never stored: the
//! session lives in `state/sessions/<sha256 of token, hex>.json` and holds that digest
//! again as `token_sha256`, so possession of the store does not give a usable token.
//!
//! [`resolve`] is what the gate uses: a present token that is malformed, unknown, expired
//! or ended is refused with one stable code, `bad_session` ([`BAD_SESSION`]), and the
//! reason ([`BadSession`]) says which. A bad token never falls back to the owner.
//!
//! Times are passed in (`now`) so that expiry is tested without a clock.

use crate::atomic::write_atomic;
use crate::error::{StoreError, StoreResult};
use crate::home::{Home, StoreDir};
use crate::lock::StoreLock;
use hcp_model::Code;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

pub use jiff::{SignedDuration, Timestamp};

/// The reserved principal id of the caller without a session (RUNTIME §4: "the local
/// user, holding every grant"). It cannot be given a session or a grant.
pub const OWNER: &str = "owner";

/// The stable code of every refused session token (RUNTIME §4, §5 exit 77).
pub const BAD_SESSION: Code = Code::BadSession;

/// The prefix of a session token.
pub const TOKEN_PREFIX: &str = "hcps_";

/// Random bytes in a token (256 bits), written as twice as many hex digits.
pub const TOKEN_BYTES: usize = 32;

/// The time to live of a session when `--ttl` is not given: 8 hours.
pub const DEFAULT_TTL: SignedDuration = SignedDuration::from_hours(8);

/// The shortest time to live: 1 second.
pub const MIN_TTL: SignedDuration = SignedDuration::from_secs(1);

/// The longest time to live: 365 days.
pub const MAX_TTL: SignedDuration = SignedDuration::from_hours(365 * 24);

/// The longest principal id, role, project or `can_view` class, in bytes.
pub const MAX_NAME_LEN: usize = 128;

/// The longest attribute value, in bytes.
pub const MAX_ATTR_VALUE_LEN: usize = 1024;

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

/// Formats a time as RFC 3339 UTC with milliseconds: `2026-11-29T20:34:17.123Z`.
pub fn format_ts(t: Timestamp) -> String {
    format!("{t:.3}")
}

/// Serde for [`Timestamp`] as [`format_ts`] text (the store's one time format).
pub(crate) mod serde_ts {
    use super::{Timestamp, format_ts};
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub fn serialize<S: Serializer>(t: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format_ts(*t))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Timestamp, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(D::Error::custom)
    }

    /// The same for `Option<Timestamp>` (`null` when absent).
    pub mod option {
        use super::*;

        pub fn serialize<S: Serializer>(t: &Option<Timestamp>, s: S) -> Result<S::Ok, S::Error> {
            match t {
                Some(t) => s.serialize_str(&format_ts(*t)),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Timestamp>, D::Error> {
            Option::<String>::deserialize(d)?
                .map(|s| s.parse().map_err(D::Error::custom))
                .transpose()
        }
    }
}

/// Checks a name (principal id, role, project, `can_view` class) against
/// `^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$`.
///
/// # Errors
/// A lowercase reason.
pub fn validate_name(s: &str) -> Result<(), String> {
    let Some(first) = s.chars().next() else {
        return Err("it is empty".into());
    };
    if s.len() > MAX_NAME_LEN {
        return Err(format!("it is longer than {MAX_NAME_LEN} bytes"));
    }
    if !first.is_ascii_alphanumeric() {
        return Err("it must start with an ASCII letter or digit".into());
    }
    if let Some(c) = s
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '@' | '-')))
    {
        return Err(format!(
            "it holds {c:?}; only ASCII letters, digits, `.`, `_`, `@` and `-` are allowed"
        ));
    }
    Ok(())
}

/// A validated principal id: [`validate_name`]'s charset, and never the reserved
/// [`OWNER`] (compared case-insensitively, so `Owner` cannot pose as the owner either).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct PrincipalId(String);

impl PrincipalId {
    /// Validates `id`.
    ///
    /// # Errors
    /// [`SessionError::BadPrincipal`] for a bad charset or the reserved `owner`.
    pub fn parse(id: &str) -> Result<Self, SessionError> {
        let bad = |reason: String| SessionError::BadPrincipal {
            id: id.to_owned(),
            reason,
        };
        validate_name(id).map_err(bad)?;
        if id.eq_ignore_ascii_case(OWNER) {
            return Err(bad(format!(
                "`{OWNER}` is the reserved id of the caller without a session"
            )));
        }
        Ok(Self(id.to_owned()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for PrincipalId {
    type Error = String;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(&value).map_err(|e| e.to_string())
    }
}

impl From<PrincipalId> for String {
    fn from(value: PrincipalId) -> Self {
        value.0
    }
}

impl fmt::Display for PrincipalId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Parses a time to live: a whole number and one unit, `s`, `m`, `h` or `d` (`30s`,
/// `15m`, `8h`, `7d`), from [`MIN_TTL`] to [`MAX_TTL`].
///
/// # Errors
/// [`SessionError::BadTtl`].
pub fn parse_ttl(text: &str) -> Result<SignedDuration, SessionError> {
    let bad = |reason: &str| SessionError::BadTtl {
        value: text.to_owned(),
        reason: reason.to_owned(),
    };
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| bad("it needs a unit: `s`, `m`, `h` or `d` (e.g. `8h`)"))?;
    let (digits, unit) = text.split_at(split);
    if digits.is_empty() {
        return Err(bad("it must start with a whole number (e.g. `8h`)"));
    }
    let per_unit: i64 = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(bad("the unit must be `s`, `m`, `h` or `d`")),
    };
    let ttl = digits
        .parse::<i64>()
        .ok()
        .and_then(|n| n.checked_mul(per_unit))
        .map(SignedDuration::from_secs)
        .filter(|d| *d <= MAX_TTL)
        .ok_or_else(|| bad("it is longer than 365 days"))?;
    if ttl < MIN_TTL {
        return Err(bad("it must be at least 1 second"));
    }
    Ok(ttl)
}

/// A session token, the secret a harness hands its agent. Its [`Debug`](fmt::Debug) form
/// hides the value; [`Token::as_str`] is the only way to the text.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// A fresh token: [`TOKEN_PREFIX`] and [`TOKEN_BYTES`] bytes of `/dev/urandom` in hex.
    ///
    /// # Errors
    /// [`SessionError::Entropy`] when the random source cannot be read.
    pub fn generate() -> Result<Self, SessionError> {
        let mut bytes = [0u8; TOKEN_BYTES];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut bytes))
            .map_err(SessionError::Entropy)?;
        Ok(Self(format!("{TOKEN_PREFIX}{}", hex::encode(bytes))))
    }

    /// The token's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(hcps_…)")
    }
}

/// Whether `text` has a token's shape: [`TOKEN_PREFIX`] then 64 lowercase hex digits.
pub fn is_token_shape(text: &str) -> bool {
    text.strip_prefix(TOKEN_PREFIX).is_some_and(|h| {
        h.len() == 2 * TOKEN_BYTES && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

/// The sha256 of a token's text, in lowercase hex: the session's file stem.
pub fn token_digest(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
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

/// The directory of session files.
pub fn sessions_dir(home: &Home) -> PathBuf {
    home.dir(StoreDir::State).join("sessions")
}

fn session_path(home: &Home, digest_hex: &str) -> PathBuf {
    sessions_dir(home).join(format!("{digest_hex}.json"))
}

fn names(what: &'static str, values: &[String]) -> Result<Vec<String>, SessionError> {
    let mut out: Vec<String> = Vec::new();
    for v in values {
        validate_name(v).map_err(|reason| SessionError::BadValue {
            what,
            value: v.clone(),
            reason,
        })?;
        if !out.contains(v) {
            out.push(v.clone());
        }
    }
    Ok(out)
}

fn attributes(pairs: &[String]) -> Result<BTreeMap<String, String>, SessionError> {
    let mut out = BTreeMap::new();
    for pair in pairs {
        let bad = |reason: &str| SessionError::BadValue {
            what: "attr",
            value: pair.clone(),
            reason: reason.to_owned(),
        };
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| bad("it must be `KEY=VALUE`"))?;
        let key_ok = k
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && k.len() <= 64
            && k.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
        if !key_ok {
            return Err(bad("the key must match `^[A-Za-z_][A-Za-z0-9_.-]{0,63}$`"));
        }
        if v.len() > MAX_ATTR_VALUE_LEN || v.chars().any(char::is_control) {
            return Err(bad(
                "the value must be at most 1024 bytes without control characters",
            ));
        }
        if out.insert(k.to_owned(), v.to_owned()).is_some() {
            return Err(bad("the key is given twice"));
        }
    }
    Ok(out)
}

fn workdir(dir: &Path) -> Result<PathBuf, SessionError> {
    let bad = |reason: String| SessionError::BadWorkdir {
        path: dir.to_path_buf(),
        reason,
    };
    let canonical = std::fs::canonicalize(dir).map_err(|e| {
        bad(match e.kind() {
            std::io::ErrorKind::NotFound => "it does not exist".into(),
            std::io::ErrorKind::PermissionDenied => "permission denied".into(),
            _ => format!("it cannot be resolved: {}", e.to_string().to_lowercase()),
        })
    })?;
    if !canonical.is_dir() {
        return Err(bad("it is not a directory".into()));
    }
    Ok(canonical)
}

/// Starts a session (RUNTIME §4): validates `new`, makes a token, writes the session under
/// the store lock, and returns the token (shown once, never stored) with the session.
///
/// # Errors
/// [`SessionError::BadPrincipal`], [`SessionError::BadValue`],
/// [`SessionError::BadWorkdir`], [`SessionError::BadTtl`] for bad input;
/// [`SessionError::Entropy`] and [`SessionError::Store`] for the system.
pub fn start(
    home: &Home,
    new: &NewSession,
    now: Timestamp,
) -> Result<(Token, Session), SessionError> {
    let principal = PrincipalId::parse(&new.principal)?;
    let role = match &new.role {
        Some(r) => names("role", std::slice::from_ref(r))?.into_iter().next(),
        None => None,
    };
    let projects = names("project", &new.projects)?;
    let can_view = names("can_view", &new.can_view)?;
    let attributes = attributes(&new.attributes)?;
    let workdir = new.workdir.as_deref().map(workdir).transpose()?;
    let ttl = new.ttl.unwrap_or(DEFAULT_TTL);
    if !(MIN_TTL..=MAX_TTL).contains(&ttl) {
        return Err(SessionError::BadTtl {
            value: format!("{}s", ttl.as_secs()),
            reason: "it must be from 1 second to 365 days".into(),
        });
    }
    let expires_at = now.checked_add(ttl).map_err(|e| SessionError::BadTtl {
        value: format!("{}s", ttl.as_secs()),
        reason: format!("{e}"),
    })?;
    let token = Token::generate()?;
    let digest = token_digest(token.as_str());
    let session = Session {
        token_sha256: format!("sha256:{digest}"),
        principal,
        role,
        projects,
        attributes,
        can_view,
        workdir,
        created_at: now,
        expires_at,
        ended_at: None,
    };
    let _lock = StoreLock::acquire(home)?;
    write_session(home, &digest, &session)?;
    Ok((token, session))
}

fn write_session(home: &Home, digest: &str, s: &Session) -> StoreResult<()> {
    let mut bytes = serde_json::to_vec_pretty(s).map_err(|e| StoreError::Damaged {
        path: session_path(home, digest),
        reason: format!("cannot encode the session: {e}"),
    })?;
    bytes.push(b'\n');
    write_atomic(&session_path(home, digest), &bytes)
}

fn read_session(path: &Path, digest: &str) -> StoreResult<Option<Session>> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StoreError::io("read", path, e)),
    };
    let damaged = |reason: String| StoreError::Damaged {
        path: path.to_path_buf(),
        reason,
    };
    let s: Session = serde_json::from_slice(&bytes).map_err(|e| damaged(e.to_string()))?;
    if s.token_sha256 != format!("sha256:{digest}") {
        return Err(damaged(
            "its `token_sha256` does not match its file name".into(),
        ));
    }
    Ok(Some(s))
}

/// Resolves a present `HCP_SESSION` value to its session (RUNTIME §4, §5 step 2).
///
/// The check order is: shape, existence, ended, expired (`now >= expires_at`). A bad
/// token is never the owner: every refusal is [`SessionError::Bad`] with code
/// `bad_session`. Reads one small file; takes no lock.
///
/// # Errors
/// [`SessionError::Bad`] ([`BadSession::Malformed`], [`BadSession::Unknown`],
/// [`BadSession::Ended`], [`BadSession::Expired`]); [`SessionError::Store`] when the file
/// cannot be read or is damaged.
pub fn resolve(home: &Home, token: &str, now: Timestamp) -> Result<Session, SessionError> {
    if !is_token_shape(token) {
        return Err(BadSession::Malformed.into());
    }
    let digest = token_digest(token);
    let session =
        read_session(&session_path(home, &digest), &digest)?.ok_or(BadSession::Unknown)?;
    if let Some(ended_at) = session.ended_at {
        return Err(BadSession::Ended { ended_at }.into());
    }
    if now >= session.expires_at {
        return Err(BadSession::Expired {
            expires_at: session.expires_at,
        }
        .into());
    }
    Ok(session)
}

/// Ends the session of `token` at `now`, under the store lock. Ending an ended session
/// changes nothing; the flag in the answer says whether this call ended it.
///
/// # Errors
/// [`BadSession::Malformed`] or [`BadSession::Unknown`] as [`SessionError::Bad`];
/// [`SessionError::Store`].
pub fn end(home: &Home, token: &str, now: Timestamp) -> Result<(Session, bool), SessionError> {
    if !is_token_shape(token) {
        return Err(BadSession::Malformed.into());
    }
    let digest = token_digest(token);
    let path = session_path(home, &digest);
    let _lock = StoreLock::acquire(home)?;
    let mut s = read_session(&path, &digest)?.ok_or(BadSession::Unknown)?;
    if s.ended_at.is_some() {
        return Ok((s, false));
    }
    s.ended_at = Some(now);
    write_session(home, &digest, &s)?;
    Ok((s, true))
}

/// Ends every session of `principal` that is not ended yet (expired ones included), under
/// the store lock, and returns those it ended, oldest first.
///
/// # Errors
/// [`SessionError::Store`].
pub fn end_principal(
    home: &Home,
    principal: &PrincipalId,
    now: Timestamp,
) -> Result<Vec<Session>, SessionError> {
    let _lock = StoreLock::acquire(home)?;
    let mut ended = Vec::new();
    for mut s in list(home)? {
        if &s.principal == principal && s.ended_at.is_none() {
            s.ended_at = Some(now);
            let digest = s
                .token_sha256
                .strip_prefix("sha256:")
                .unwrap_or(&s.token_sha256)
                .to_owned();
            write_session(home, &digest, &s)?;
            ended.push(s);
        }
    }
    Ok(ended)
}

/// Every stored session, oldest first (then by principal). An absent directory is no
/// session. Files other than `<64 hex>.json` (temporary files of a writer) are skipped.
///
/// # Errors
/// [`StoreError::Io`] when the directory or a file cannot be read,
/// [`StoreError::Damaged`] when a session file does not parse.
pub fn list(home: &Home) -> StoreResult<Vec<Session>> {
    let dir = sessions_dir(home);
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StoreError::io("read", &dir, e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| StoreError::io("read", &dir, e))?;
        let name = entry.file_name();
        let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(".json")) else {
            continue;
        };
        if stem.len() != 64 || !stem.bytes().all(|b| b.is_ascii_hexdigit()) {
            continue;
        }
        if let Some(s) = read_session(&entry.path(), stem)? {
            out.push(s);
        }
    }
    out.sort_by(|a, b| {
        (a.created_at, a.principal.as_str()).cmp(&(b.created_at, b.principal.as_str()))
    });
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::result_large_err)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn home() -> (tempfile::TempDir, Home) {
        let d = tempfile::tempdir().unwrap();
        let h = Home::open(d.path().join("hcp")).unwrap();
        (d, h)
    }

    fn alice() -> NewSession {
        NewSession {
            principal: "alice".into(),
            ..NewSession::default()
        }
    }

    #[test]
    fn principal_ids_are_conservative_and_owner_is_reserved() {
        for ok in [
            "alice",
            "a",
            "bot-1",
            "x.y_z@example.com",
            "7",
            &"a".repeat(128),
        ] {
            assert!(PrincipalId::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "-a",
            ".a",
            "a b",
            "a/b",
            "a:b",
            "ä",
            "a\n",
            &"a".repeat(129),
            "owner",
            "OWNER",
            "Owner",
        ] {
            let e = PrincipalId::parse(bad).unwrap_err();
            assert_eq!(e.code(), "bad_principal", "{bad}");
        }
    }

    #[test]
    fn ttl_units_and_bounds() {
        assert_eq!(parse_ttl("30s").unwrap(), SignedDuration::from_secs(30));
        assert_eq!(parse_ttl("15m").unwrap(), SignedDuration::from_mins(15));
        assert_eq!(parse_ttl("8h").unwrap(), SignedDuration::from_hours(8));
        assert_eq!(parse_ttl("7d").unwrap(), SignedDuration::from_hours(7 * 24));
        assert_eq!(parse_ttl("1s").unwrap(), MIN_TTL);
        assert_eq!(parse_ttl("365d").unwrap(), MAX_TTL);
        for bad in [
            "",
            "8",
            "h",
            "0s",
            "-1s",
            "1.5h",
            "8H",
            "8 h",
            "366d",
            "1w",
            "99999999999999999999d",
        ] {
            assert_eq!(parse_ttl(bad).unwrap_err().code(), "bad_ttl", "{bad}");
        }
    }

    #[test]
    fn tokens_have_their_shape_and_are_distinct() {
        let a = Token::generate().unwrap();
        let b = Token::generate().unwrap();
        assert!(is_token_shape(a.as_str()), "{}", a.as_str());
        assert_ne!(a, b);
        assert_eq!(format!("{a:?}"), "Token(hcps_…)");
        for bad in [
            "",
            "hcps_",
            &format!("hcps_{}", "A".repeat(64)),
            &format!("hcps_{}", "a".repeat(63)),
            &format!("hcps_{}", "a".repeat(65)),
            &format!("hcpx_{}", "a".repeat(64)),
            &format!(" hcps_{}", "a".repeat(64)),
        ] {
            assert!(!is_token_shape(bad), "{bad}");
        }
    }

    #[test]
    fn start_stores_only_the_digest_and_resolve_finds_it() {
        let (_d, h) = home();
        let now = t("2026-01-01T00:00:00Z");
        let wd = tempfile::tempdir().unwrap();
        let new = NewSession {
            principal: "alice".into(),
            role: Some("analyst".into()),
            projects: vec!["p1".into(), "p2".into(), "p1".into()],
            attributes: vec!["team=blue".into(), "region=eu west".into()],
            can_view: vec!["pii".into()],
            workdir: Some(wd.path().to_path_buf()),
            ttl: Some(SignedDuration::from_mins(15)),
        };
        let (token, s) = start(&h, &new, now).unwrap();
        let digest = token_digest(token.as_str());
        let file = sessions_dir(&h).join(format!("{digest}.json"));
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(!text.contains(token.as_str()));
        assert_eq!(
            s,
            Session {
                token_sha256: format!("sha256:{digest}"),
                principal: PrincipalId::parse("alice").unwrap(),
                role: Some("analyst".into()),
                projects: vec!["p1".into(), "p2".into()],
                attributes: [
                    ("region".to_owned(), "eu west".to_owned()),
                    ("team".to_owned(), "blue".to_owned())
                ]
                .into(),
                can_view: vec!["pii".into()],
                workdir: Some(wd.path().canonicalize().unwrap()),
                created_at: now,
                expires_at: t("2026-01-01T00:15:00Z"),
                ended_at: None,
            }
        );
        assert_eq!(s.project(), Some("p1"));
        assert_eq!(resolve(&h, token.as_str(), now).unwrap(), s);
        assert_eq!(list(&h).unwrap(), vec![s]);
    }

    #[test]
    fn bad_tokens_are_distinct_reasons_of_one_code() {
        let (_d, h) = home();
        let now = t("2026-01-01T00:00:00Z");
        let ttl = Some(SignedDuration::from_secs(1));
        let (live, _) = start(&h, &NewSession { ttl, ..alice() }, now).unwrap();
        let (ended, _) = start(&h, &alice(), now).unwrap();
        let end_time = t("2026-01-01T00:00:00.5Z");
        end(&h, ended.as_str(), end_time).unwrap();
        let unknown = format!("hcps_{}", "0".repeat(64));

        let reason = |tok: &str, at: &str| match resolve(&h, tok, t(at)) {
            Err(SessionError::Bad(b)) => {
                assert_eq!(SessionError::Bad(b.clone()).code(), BAD_SESSION);
                Ok(b)
            }
            Err(e) => panic!("{tok}: {e}"),
            Ok(s) => Err(s),
        };
        assert_eq!(
            reason("garbage", "2026-01-01T00:00:00Z"),
            Ok(BadSession::Malformed)
        );
        assert_eq!(
            reason("", "2026-01-01T00:00:00Z"),
            Ok(BadSession::Malformed)
        );
        assert_eq!(
            reason(&unknown, "2026-01-01T00:00:00Z"),
            Ok(BadSession::Unknown)
        );
        assert_eq!(
            reason(ended.as_str(), "2026-01-01T00:00:00.6Z"),
            Ok(BadSession::Ended { ended_at: end_time })
        );
        // Valid until the last instant before `expires_at`, refused from it on.
        assert!(reason(live.as_str(), "2026-01-01T00:00:00.999Z").is_err());
        assert_eq!(
            reason(live.as_str(), "2026-01-01T00:00:01Z"),
            Ok(BadSession::Expired {
                expires_at: t("2026-01-01T00:00:01Z")
            })
        );
        assert_eq!(
            BadSession::Expired {
                expires_at: t("2026-01-01T00:00:01Z")
            }
            .to_string(),
            "the session expired at `2026-01-01T00:00:01.000Z`"
        );
    }

    #[test]
    fn a_session_file_under_another_name_is_damaged_not_valid() {
        let (_d, h) = home();
        let now = t("2026-01-01T00:00:00Z");
        let (token, _) = start(&h, &alice(), now).unwrap();
        let other = format!("hcps_{}", "1".repeat(64));
        let from = sessions_dir(&h).join(format!("{}.json", token_digest(token.as_str())));
        let to = sessions_dir(&h).join(format!("{}.json", token_digest(&other)));
        std::fs::copy(from, to).unwrap();
        assert_eq!(
            resolve(&h, &other, now).unwrap_err().code(),
            "store_damaged"
        );
    }

    #[test]
    fn end_is_idempotent_and_end_principal_ends_only_theirs() {
        let (_d, h) = home();
        let now = t("2026-01-01T00:00:00Z");
        let (a1, _) = start(&h, &alice(), now).unwrap();
        let (a2, _) = start(&h, &alice(), t("2026-01-01T00:00:01Z")).unwrap();
        let bob = NewSession {
            principal: "bob".into(),
            ..NewSession::default()
        };
        let (b, _) = start(&h, &bob, now).unwrap();
        let later = t("2026-01-01T01:00:00Z");
        let (s, changed) = end(&h, a1.as_str(), later).unwrap();
        assert!(changed);
        assert_eq!(s.state(later), SessionState::Ended);
        assert!(!end(&h, a1.as_str(), t("2026-01-01T02:00:00Z")).unwrap().1);
        let alice_id = PrincipalId::parse("alice").unwrap();
        let ended = end_principal(&h, &alice_id, later).unwrap();
        assert_eq!(ended.len(), 1);
        assert!(resolve(&h, a2.as_str(), later).is_err());
        assert!(resolve(&h, b.as_str(), later).is_ok());
        assert_eq!(
            end(&h, "nope", later).unwrap_err().code(),
            BAD_SESSION,
            "a malformed token cannot be ended"
        );
    }

    #[test]
    fn start_refuses_bad_input() {
        let (_d, h) = home();
        let now = t("2026-01-01T00:00:00Z");
        let file = tempfile::NamedTempFile::new().unwrap();
        let cases: Vec<(NewSession, &str)> = vec![
            (
                NewSession {
                    principal: "owner".into(),
                    ..alice()
                },
                "bad_principal",
            ),
            (
                NewSession {
                    role: Some("a b".into()),
                    ..alice()
                },
                "bad_value",
            ),
            (
                NewSession {
                    projects: vec!["../x".into()],
                    ..alice()
                },
                "bad_value",
            ),
            (
                NewSession {
                    attributes: vec!["noequals".into()],
                    ..alice()
                },
                "bad_value",
            ),
            (
                NewSession {
                    attributes: vec!["k=1".into(), "k=2".into()],
                    ..alice()
                },
                "bad_value",
            ),
            (
                NewSession {
                    attributes: vec!["k=a\u{7}".into()],
                    ..alice()
                },
                "bad_value",
            ),
            (
                NewSession {
                    workdir: Some("/definitely/not/here".into()),
                    ..alice()
                },
                "bad_workdir",
            ),
            (
                NewSession {
                    workdir: Some(file.path().to_path_buf()),
                    ..alice()
                },
                "bad_workdir",
            ),
        ];
        for (new, code) in cases {
            assert_eq!(start(&h, &new, now).unwrap_err().code(), code, "{new:?}");
        }
        assert_eq!(list(&h).unwrap(), vec![]);
    }
}
