//! What a call reads of the state before its gate (RUNTIME §5 steps 2–4), in one
//! statement and one round trip: the session of its token, what that session's principal
//! holds on the call's pack, and every session's working directory (the child's confinement
//! hides other principals'). On a connection just opened, the same statement also reads
//! the schema's version and the fleet's digest secret, so the version check costs no
//! round trip of its own (see [`PgState::with_first`]).
//!
//! It spends nothing and locks nothing: [`PgState::admit`] re-checks the session and the
//! grant under locks when the call spends.

use crate::PgState;
use crate::error::{PgError, PgResult};
use crate::session::{SessionLookupError, check_live, from_row};
use crate::time::Ts;
use hcp_model::{Capability, PackId};
use hcp_store::grant::{HeldCapability, PackScope};
use hcp_store::session::{BadSession, Session, Timestamp, is_token_shape, token_digest};
use postgres::types::Type;
use std::str::FromStr;

/// What [`PgState::call_reads`] read, each part as found.
#[derive(Debug)]
pub struct PgCallReads {
    /// The session of the token; `None` when the call gave none (the owner).
    pub session: Option<Result<Session, SessionLookupError>>,
    /// The session principal's own grants on the pack and its `*` grants, by capability
    /// then pack: empty for the owner, for a refused session and without a pack.
    pub grants: PgResult<Vec<HeldCapability>>,
}

/// Columns 0–9: the session (as `session::COLUMNS`), NULL when no row matches; 10: the
/// schema's version; 11: the digest secret; 12–14: the grants (pack, capability,
/// granted_at; NULL: none); 15–16: the head of this machine's chain (seq, hash; NULL: it
/// has none yet), on which its next record's keyed hash is computed (`keyed`). `$1` the
/// token's tagged digest (NULL: none), `$2` the pack (NULL: none), `$3` this machine. Only tables of schema version 1:
/// on a schema of another version it still runs, and its version column refuses it.
const SQL: &str = "SELECT s.token_sha256, s.principal, s.role, s.projects, s.attributes,
       s.can_view, s.workdir, s.created_at, s.expires_at, s.ended_at,
       (SELECT max(v.version) FROM @.schema_version v),
       (SELECT f.value FROM @.fleet_secret f WHERE f.name = 'args_digest'),
       g.packs, g.capabilities, g.times,
       (SELECT c.seq FROM @.audit_chain c WHERE c.machine = $3),
       (SELECT c.hash FROM @.audit_chain c WHERE c.machine = $3)
FROM (SELECT 1) AS one
LEFT JOIN @.sessions s ON s.token_sha256 = $1
LEFT JOIN LATERAL (
    SELECT array_agg(x.pack ORDER BY x.capability, x.pack) AS packs,
           array_agg(x.capability ORDER BY x.capability, x.pack) AS capabilities,
           array_agg(x.granted_at ORDER BY x.capability, x.pack) AS times
    FROM @.grants x
    WHERE x.principal = s.principal AND $2::text IS NOT NULL
      AND (x.pack = $2 OR x.pack = '*')) g ON true";

fn damaged(what: &str, e: impl std::fmt::Display) -> PgError {
    PgError::damaged(format!("{what}: {e}"))
}

/// The parts of one row as found.
struct Found {
    session: Option<Session>,
    grants: Vec<HeldCapability>,
}

fn decode(row: &postgres::Row) -> PgResult<Found> {
    let session = match row.try_get::<_, Option<String>>(0)? {
        None => None,
        Some(_) => Some(from_row(row)?),
    };
    let packs: Vec<String> = row.try_get::<_, Option<_>>(12)?.unwrap_or_default();
    let caps: Vec<String> = row.try_get::<_, Option<_>>(13)?.unwrap_or_default();
    let times: Vec<Ts> = row.try_get::<_, Option<_>>(14)?.unwrap_or_default();
    if packs.len() != caps.len() || caps.len() != times.len() {
        return Err(PgError::damaged("the grants' columns differ in length"));
    }
    let grants = packs
        .iter()
        .zip(&caps)
        .zip(&times)
        .map(|((pack, cap), at)| {
            Ok(HeldCapability {
                capability: Capability::from_str(cap)
                    .map_err(|e| damaged("grant row: capability", e))?,
                scope: PackScope::parse(pack).map_err(|e| damaged("grant row: pack", e))?,
                granted_at: at.0,
            })
        })
        .collect::<PgResult<Vec<_>>>()?;
    Ok(Found { session, grants })
}

impl PgState {
    /// Reads the session of `token`, what its principal holds on `pack` (its own grants
    /// and the `*` ones), in one
    /// statement (see the module docs). A token of the wrong shape is refused without
    /// being looked up; a database failure is the failure of every part. Spends nothing.
    pub fn call_reads(
        &self,
        token: Option<&str>,
        pack: Option<&PackId>,
        now: Timestamp,
    ) -> PgCallReads {
        let shaped = token.filter(|t| is_token_shape(t));
        let mut out = PgCallReads {
            session: token.map(|_| Err(BadSession::Malformed.into())),
            grants: Ok(Vec::new()),
        };
        // Asked even when there is nothing to read (the owner naming no installed pack):
        // the statement is also the connection's first, which checks the schema, so a
        // state that cannot be used refuses every call before any step (RUNTIME §9).
        let digest = shaped.map(|t| format!("sha256:{}", token_digest(t)));
        let pack_id = pack.map(PackId::as_str);
        let found = self.with_first(|c| {
            let machine = self.machine().as_str();
            let row = c.query_typed_one(
                SQL,
                &[
                    (&digest, Type::TEXT),
                    (&pack_id, Type::TEXT),
                    (&machine, Type::TEXT),
                ],
            )?;
            // Every call's reads check the version they return, not only a new
            // connection's: a long-lived process (`hcp mcp`) sees a schema that moved.
            self.checked_by(row.try_get(10)?, row.try_get(11)?)?;
            let seq: Option<i64> = row.try_get(15)?;
            let hash: Option<String> = row.try_get(16)?;
            match (seq, hash) {
                (Some(s), Some(h)) => self.set_head(u64::try_from(s).unwrap_or(0), h),
                // No head row yet: the server makes it as seq 0 with the genesis hash.
                _ => self.set_head(0, hcp_store::audit::GENESIS.to_owned()),
            }
            decode(&row)
        });
        let found = match found {
            Ok(f) => f,
            Err(e) => {
                out.grants = Err(crate::again(&e));
                if shaped.is_some() {
                    out.session = Some(Err(e.into()));
                }
                return out;
            }
        };
        if shaped.is_some() {
            let session = found
                .session
                .ok_or(BadSession::Unknown)
                .and_then(|s| check_live(&s, now).map(|()| s));
            if session.is_ok() {
                out.grants = Ok(found.grants);
            }
            out.session = Some(session.map_err(SessionLookupError::from));
        }
        out
    }
}
