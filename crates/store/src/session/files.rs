//! Sessions on disk: `state/sessions/<sha256 of token, hex>.json`, one file each,
//! replaced whole under the store lock; validation of what `hcp session start` asks for
//! ([`prepare`], no I/O but the random token and the working directory's check).

use super::*;
use crate::error::{StoreError, StoreResult};
use crate::home::{Home, StoreDir};
use crate::lock::StoreLock;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

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

/// Validates `new` and makes the session and its token (shown once, never stored), at
/// `now`, without writing anything: what every state backend shares of `hcp session
/// start`. Reads only the random source and the working directory's metadata.
///
/// # Errors
/// [`SessionError::BadPrincipal`], [`SessionError::BadValue`],
/// [`SessionError::BadWorkdir`], [`SessionError::BadTtl`] for bad input;
/// [`SessionError::Entropy`] when the random source cannot be read.
pub fn prepare(new: &NewSession, now: Timestamp) -> Result<(Token, Session), SessionError> {
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
    Ok((token, session))
}

/// Starts a session (RUNTIME §4): [`prepare`], then writes the session under the store
/// lock, and returns the token (shown once, never stored) with the session.
///
/// # Errors
/// As [`prepare`]; [`SessionError::Store`] when it cannot be written.
pub fn start(
    home: &Home,
    new: &NewSession,
    now: Timestamp,
) -> Result<(Token, Session), SessionError> {
    start_prepared(home, prepare(new, now)?)
}

/// Writes a session [`prepare`] made, under the store lock (the second half of
/// [`start`]).
///
/// # Errors
/// [`SessionError::Store`] when it cannot be written.
pub fn start_prepared(
    home: &Home,
    (token, session): (Token, Session),
) -> Result<(Token, Session), SessionError> {
    let digest = token_digest(token.as_str());
    let lock = StoreLock::acquire(home)?;
    write_session(home, &lock, &digest, &session)?;
    Ok((token, session))
}

/// Writes the session with its MAC ([`crate::stamp`]) and notes it in the state ledger,
/// under the store lock the caller holds.
fn write_session(home: &Home, lock: &StoreLock, digest: &str, s: &Session) -> StoreResult<()> {
    let path = session_path(home, digest);
    crate::stamp::write(home, lock, &path, s)
}

/// Reads a session file, its MAC checked before anything of it is believed (one HMAC).
fn read_session(home: &Home, path: &Path, digest: &str) -> StoreResult<Option<Session>> {
    let Some(bytes) = crate::atomic::read_record(path)? else {
        return Ok(None);
    };
    let damaged = |reason: String| StoreError::Damaged {
        path: path.to_path_buf(),
        reason,
    };
    let s: Session = crate::stamp::open(home, path, &bytes)?;
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
        read_session(home, &session_path(home, &digest), &digest)?.ok_or(BadSession::Unknown)?;
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
    end_digest(home, &format!("sha256:{}", token_digest(token)), now)
}

/// [`end`] of the session whose `token_sha256` is `token_sha256` (`sha256:` and 64 hex
/// digits): what `hcp session end ID` ends once it found the session `session list`
/// shows as `ID`.
///
/// # Errors
/// [`BadSession::Unknown`] for no such session (or a value of another shape);
/// [`SessionError::Store`].
pub fn end_digest(
    home: &Home,
    token_sha256: &str,
    now: Timestamp,
) -> Result<(Session, bool), SessionError> {
    let digest = token_sha256
        .strip_prefix("sha256:")
        .filter(|d| d.len() == 64 && d.bytes().all(|b| b.is_ascii_hexdigit()))
        .ok_or(BadSession::Unknown)?;
    let path = session_path(home, digest);
    let lock = StoreLock::acquire(home)?;
    let mut s = read_session(home, &path, digest)?.ok_or(BadSession::Unknown)?;
    if s.ended_at.is_some() {
        return Ok((s, false));
    }
    s.ended_at = Some(now);
    write_session(home, &lock, digest, &s)?;
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
    let lock = StoreLock::acquire(home)?;
    let mut ended = Vec::new();
    for mut s in list(home)? {
        if &s.principal == principal && s.ended_at.is_none() {
            s.ended_at = Some(now);
            let digest = s
                .token_sha256
                .strip_prefix("sha256:")
                .unwrap_or(&s.token_sha256)
                .to_owned();
            write_session(home, &lock, &digest, &s)?;
            ended.push(s);
        }
    }
    Ok(ended)
}

/// Every stored session, oldest first (then by principal). An absent directory is no
/// session. Files other than `<64 hex>.json` (temporary files of a writer) are skipped, and
/// so is a damaged session file (RUNTIME §4 "Fault isolation": it names no principal it
/// could be held against; [`damaged`] lists it, and its own token is refused
/// `store_damaged` by [`resolve`]).
///
/// # Errors
/// [`StoreError::Io`] when the directory cannot be read.
pub fn list(home: &Home) -> StoreResult<Vec<Session>> {
    let mut out: Vec<Session> = scan(home)?
        .into_iter()
        .filter_map(|(_, r)| r.ok())
        .collect();
    out.sort_by(|a, b| {
        (a.created_at, a.principal.as_str()).cmp(&(b.created_at, b.principal.as_str()))
    });
    Ok(out)
}

/// The session files that cannot be read or do not parse, by path, with the reason, in
/// file-name order.
///
/// # Errors
/// [`StoreError::Io`] when the directory cannot be read.
pub fn damaged(home: &Home) -> StoreResult<Vec<(PathBuf, String)>> {
    let mut out: Vec<(PathBuf, String)> = scan(home)?
        .into_iter()
        .filter_map(|(p, r)| {
            r.err().map(|e| match e {
                StoreError::Damaged { reason, .. } => (p, reason),
                other => (p, other.to_string()),
            })
        })
        .collect();
    out.sort();
    Ok(out)
}

/// Removes the session file `path` (one [`damaged`] listed), under the store lock, when
/// it is still damaged: what `hcp session end ID` does to end a session whose file does
/// not read (RUNTIME §4 "Fault isolation"). Its token, refused `store_damaged` while the
/// file was there, is then unknown (`bad_session`): refused either way. `Ok(false)`: the
/// file is gone, or it reads as a session now (it is then left as it is).
///
/// # Errors
/// [`StoreError::Io`] when it cannot be removed; the store lock's.
pub fn remove_damaged(home: &Home, path: &Path) -> StoreResult<bool> {
    let stem = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(".json"))
        .filter(|s| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()));
    let Some(stem) = stem else {
        return Ok(false);
    };
    if path.parent() != Some(sessions_dir(home).as_path()) {
        return Ok(false);
    }
    let _lock = StoreLock::acquire(home)?;
    match read_session(home, path, stem) {
        Ok(_) => Ok(false),
        Err(_) => match std::fs::remove_file(path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(StoreError::io("remove", path, e)),
        },
    }
}

/// Each `<64 hex>.json` of the sessions directory, read.
fn scan(home: &Home) -> StoreResult<Vec<(PathBuf, StoreResult<Session>)>> {
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
        let path = entry.path();
        match read_session(home, &path, stem) {
            Ok(Some(s)) => out.push((path, Ok(s))),
            Ok(None) => {}
            Err(e) => out.push((path, Err(e))),
        }
    }
    Ok(out)
}
