//! Sessions in the database (RUNTIME §4, §9): valid on every machine of the fleet; an end
//! is in force on the next call everywhere. Only the token's digest is stored.

use crate::PgState;
use crate::error::{PgError, PgResult};
use crate::time::Ts;
use hcp_store::session::{
    BAD_SESSION, BadSession, PrincipalId, Session, Timestamp, is_token_shape, token_digest,
};
use postgres::types::Type;
use std::collections::BTreeMap;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

/// Why a session lookup or end failed.
#[derive(Debug, thiserror::Error)]
pub enum SessionLookupError {
    /// The token is refused (code `bad_session`).
    #[error(transparent)]
    Bad(#[from] BadSession),
    /// The database failed (code `state_unavailable`).
    #[error(transparent)]
    State(#[from] PgError),
}

impl SessionLookupError {
    /// `bad_session`, or the database's code.
    pub fn code(&self) -> hcp_model::Code {
        match self {
            Self::Bad(_) => BAD_SESSION,
            Self::State(e) => e.code(),
        }
    }
}

const COLUMNS: &str = "token_sha256, principal, role, projects, attributes, can_view, workdir, \
                       created_at, expires_at, ended_at";

pub(crate) fn from_row(row: &postgres::Row) -> PgResult<Session> {
    let damaged = |what: &str, e: String| PgError::damaged(format!("session row: {what}: {e}"));
    let principal: String = row.try_get(1)?;
    let attributes: serde_json::Value = row.try_get(4)?;
    let attributes: BTreeMap<String, String> =
        serde_json::from_value(attributes).map_err(|e| damaged("attributes", e.to_string()))?;
    Ok(Session {
        token_sha256: row.try_get(0)?,
        principal: PrincipalId::parse(&principal)
            .map_err(|e| damaged("principal", e.to_string()))?,
        role: row.try_get(2)?,
        projects: row.try_get(3)?,
        attributes,
        can_view: row.try_get(5)?,
        workdir: row
            .try_get::<_, Option<Vec<u8>>>(6)?
            .map(|b| PathBuf::from(std::ffi::OsString::from_vec(b))),
        created_at: row.try_get::<_, Ts>(7)?.0,
        expires_at: row.try_get::<_, Ts>(8)?.0,
        ended_at: row.try_get::<_, Option<Ts>>(9)?.map(|t| t.0),
    })
}

fn tagged(token: &str) -> String {
    format!("sha256:{}", token_digest(token))
}

impl PgState {
    /// Stores a session made (validated, its token drawn) by `hcp-store`, as started on
    /// this machine. Times are kept to the microsecond: the answer is the session as
    /// stored.
    ///
    /// # Errors
    /// [`PgError`]; a session with the same token digest is refused as unavailable
    /// (it cannot happen with 256-bit tokens).
    pub fn session_insert(&self, s: &Session) -> PgResult<Session> {
        let attributes = serde_json::to_value(&s.attributes)
            .map_err(|e| PgError::damaged(format!("session attributes: {e}")))?;
        // A path is bytes on Unix: kept exactly, whatever its encoding.
        let workdir = s
            .workdir
            .as_ref()
            .map(|p| p.as_os_str().as_bytes().to_vec());
        self.with(|c| {
            let row = c.query_typed_one(
                &format!(
                    "INSERT INTO @.sessions ({COLUMNS}, machine)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING {COLUMNS}"
                ),
                &[
                    (&s.token_sha256, Type::TEXT),
                    (&s.principal.as_str(), Type::TEXT),
                    (&s.role, Type::TEXT),
                    (&s.projects, Type::TEXT_ARRAY),
                    (&attributes, Type::JSONB),
                    (&s.can_view, Type::TEXT_ARRAY),
                    (&workdir, Type::BYTEA),
                    (&Ts(s.created_at), Type::TIMESTAMPTZ),
                    (&Ts(s.expires_at), Type::TIMESTAMPTZ),
                    (&s.ended_at.map(Ts), Type::TIMESTAMPTZ),
                    (&self.machine.as_str(), Type::TEXT),
                ],
            )?;
            from_row(&row)
        })
    }

    /// Resolves a present `HCP_SESSION` value (RUNTIME §4, §5 step 2): shape, existence,
    /// ended, expired (`now >= expires_at`), as the file store does. One round trip.
    ///
    /// # Errors
    /// [`SessionLookupError::Bad`] (`bad_session`), [`SessionLookupError::State`].
    pub fn session_resolve(
        &self,
        token: &str,
        now: Timestamp,
    ) -> Result<Session, SessionLookupError> {
        if !is_token_shape(token) {
            return Err(BadSession::Malformed.into());
        }
        let digest = tagged(token);
        let s = self
            .with(|c| {
                c.query_typed_opt(
                    &format!("SELECT {COLUMNS} FROM @.sessions WHERE token_sha256 = $1"),
                    &[(&digest, Type::TEXT)],
                )?
                .map(|r| from_row(&r))
                .transpose()
            })?
            .ok_or(BadSession::Unknown)?;
        check_live(&s, now)?;
        Ok(s)
    }

    /// Ends the session of `token` at `now`; ending an ended session changes nothing,
    /// and the flag says whether this call ended it.
    ///
    /// # Errors
    /// [`BadSession::Malformed`] / [`BadSession::Unknown`]; [`SessionLookupError::State`].
    pub fn session_end(
        &self,
        token: &str,
        now: Timestamp,
    ) -> Result<(Session, bool), SessionLookupError> {
        if !is_token_shape(token) {
            return Err(BadSession::Malformed.into());
        }
        self.session_end_digest(&tagged(token), now)
    }

    /// [`PgState::session_end`] of the session whose `token_sha256` is given (`sha256:`
    /// and 64 hex digits).
    ///
    /// # Errors
    /// [`BadSession::Unknown`]; the database's.
    pub fn session_end_digest(
        &self,
        digest: &str,
        now: Timestamp,
    ) -> Result<(Session, bool), SessionLookupError> {
        let (row, ended) = self.with(|c| {
            // One statement: end it if it is live, and read it back either way.
            let row = c.query_typed_opt(
                &format!(
                    "WITH ended AS (
                         UPDATE @.sessions SET ended_at = $2
                         WHERE token_sha256 = $1 AND ended_at IS NULL RETURNING {COLUMNS})
                     SELECT {COLUMNS}, true FROM ended
                     UNION ALL
                     SELECT {COLUMNS}, false FROM @.sessions
                     WHERE token_sha256 = $1 AND NOT EXISTS (SELECT 1 FROM ended)"
                ),
                &[
                    (&digest, Type::TEXT),
                    (&Ts(Ts::micros(now)), Type::TIMESTAMPTZ),
                ],
            )?;
            match row {
                Some(r) => Ok((Some(from_row(&r)?), r.try_get::<_, bool>(10)?)),
                None => Ok((None, false)),
            }
        })?;
        let s = row.ok_or(BadSession::Unknown)?;
        Ok((s, ended))
    }

    /// Ends every session of `principal` not ended yet, oldest first.
    ///
    /// # Errors
    /// [`PgError`].
    pub fn session_end_principal(
        &self,
        principal: &PrincipalId,
        now: Timestamp,
    ) -> PgResult<Vec<Session>> {
        self.with(|c| {
            let rows = c.query_typed(
                &format!(
                    "UPDATE @.sessions SET ended_at = $2 WHERE principal = $1 AND ended_at IS NULL
                     RETURNING {COLUMNS}"
                ),
                &[
                    (&principal.as_str(), Type::TEXT),
                    (&Ts(Ts::micros(now)), Type::TIMESTAMPTZ),
                ],
            )?;
            let mut out = rows.iter().map(from_row).collect::<PgResult<Vec<_>>>()?;
            sort(&mut out);
            Ok(out)
        })
    }

    /// Every session of the fleet, oldest first (then by principal).
    ///
    /// # Errors
    /// [`PgError`].
    pub fn session_list(&self) -> PgResult<Vec<Session>> {
        self.with(|c| {
            let rows = c.query_typed(&format!("SELECT {COLUMNS} FROM @.sessions"), &[])?;
            let mut out = rows.iter().map(from_row).collect::<PgResult<Vec<_>>>()?;
            sort(&mut out);
            Ok(out)
        })
    }
}

fn sort(v: &mut [Session]) {
    v.sort_by(|a, b| {
        (a.created_at, a.principal.as_str()).cmp(&(b.created_at, b.principal.as_str()))
    });
}

/// The file store's order of checks once the session is found: ended, then expired.
pub(crate) fn check_live(s: &Session, now: Timestamp) -> Result<(), BadSession> {
    if let Some(ended_at) = s.ended_at {
        return Err(BadSession::Ended { ended_at });
    }
    if now >= s.expires_at {
        return Err(BadSession::Expired {
            expires_at: s.expires_at,
        });
    }
    Ok(())
}
