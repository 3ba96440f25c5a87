//! Everything the gate and the dry pre-gate read for one call, in one statement and one
//! round trip (issue 14: as few round trips per call as the contract allows): the session,
//! the grants of the capabilities asked and the pack's last content change, each
//! counter's verdict, and each approval found. Spends nothing; [`crate::PgState::admit`]
//! re-checks all of it under locks.

use crate::PgState;
use crate::counter::MAX_RECENT;
use crate::error::{PgError, PgResult};
use crate::session::{check_live, from_row};
use crate::time::Ts;
use hcp_model::{Capability, PackId};
use hcp_store::counter::{Limits, Verdict};
use hcp_store::grant::{GrantStatus, HeldCapability, PackScope, status};
use hcp_store::session::{BadSession, Session, Timestamp, is_token_shape, token_digest};
use postgres::types::Type;

/// What one call asks to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotQuery<'a> {
    /// The `HCP_SESSION` value; `None` for the owner.
    pub token: Option<&'a str>,
    /// The pack of the call.
    pub pack: &'a PackId,
    /// The capabilities to look up (for the session's principal).
    pub capabilities: &'a [Capability],
    /// Counters: identity, tool, limits.
    pub counters: &'a [(&'a str, &'a str, Limits)],
    /// The callers' time for the counters, in milliseconds since the Unix epoch.
    pub now_ms: u64,
    /// Approvals: tool, principal digest, args digest, policy hash, and whether it is
    /// the escalation (else the confirmation) of the call (principal: the session's).
    pub approvals: &'a [(&'a str, &'a str, &'a str, &'a str, bool)],
    /// The call's time (session expiry, approval windows).
    pub now: Timestamp,
}

/// What [`PgState::snapshot`] read.
#[derive(Debug, Clone, PartialEq)]
pub struct CallSnapshot {
    /// The session, or why its token is refused; `None` for the owner.
    pub session: Option<Result<Session, BadSession>>,
    /// Per capability asked, in order: the grant decision with the rug-pull guard.
    pub grants: Vec<GrantStatus>,
    /// The pack's last content change the fleet knows of.
    pub content_changed_at: Option<Timestamp>,
    /// Per counter, in order.
    pub counters: Vec<Verdict>,
    /// Per approval, in order: the id of an approved, unused one, if any.
    pub approvals: Vec<Option<String>>,
}

const SQL: &str =
    "SELECT * FROM @.hcp_snapshot($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)";

impl PgState {
    /// Reads what one call needs (see the module docs) in one round trip. For the owner
    /// (`token: None`), grants are not looked up (the owner holds every capability) and
    /// approvals are the owner's.
    ///
    /// # Errors
    /// [`PgError`].
    pub fn snapshot(&self, q: &SnapshotQuery<'_>) -> PgResult<CallSnapshot> {
        let shaped = q.token.filter(|t| is_token_shape(t));
        let digest = shaped.map(|t| format!("sha256:{}", token_digest(t)));
        let caps: Vec<&str> = if q.token.is_some() {
            q.capabilities.iter().map(|c| c.as_str()).collect()
        } else {
            Vec::new()
        };
        let identities: Vec<&str> = q.counters.iter().map(|c| c.0).collect();
        let tools: Vec<&str> = q.counters.iter().map(|c| c.1).collect();
        let windows: Vec<i64> = q
            .counters
            .iter()
            .map(|c| i64::try_from(c.2.window_ms).unwrap_or(i64::MAX))
            .collect();
        let now_ms = i64::try_from(q.now_ms).unwrap_or(i64::MAX);
        let a_tools: Vec<&str> = q.approvals.iter().map(|a| a.0).collect();
        let a_pd: Vec<&str> = q.approvals.iter().map(|a| a.1).collect();
        let a_args: Vec<&str> = q.approvals.iter().map(|a| a.2).collect();
        let a_policy: Vec<&str> = q.approvals.iter().map(|a| a.3).collect();
        let a_escalation: Vec<bool> = q.approvals.iter().map(|a| a.4).collect();
        let now = Ts(Ts::micros(q.now));
        // The principal when no session row matched: the owner's reserved id, or for a
        // refused token one that no principal has.
        let fallback = if q.token.is_some() {
            ""
        } else {
            hcp_store::session::OWNER
        };
        let row = self.with(|c| {
            Ok(c.query_typed_one(
                SQL,
                &[
                    (&digest, Type::TEXT),
                    (&q.pack.as_str(), Type::TEXT),
                    (&caps, Type::TEXT_ARRAY),
                    (&identities, Type::TEXT_ARRAY),
                    (&tools, Type::TEXT_ARRAY),
                    (&windows, Type::INT8_ARRAY),
                    (&now_ms, Type::INT8),
                    (&now, Type::TIMESTAMPTZ),
                    (&a_tools, Type::TEXT_ARRAY),
                    (&a_pd, Type::TEXT_ARRAY),
                    (&a_args, Type::TEXT_ARRAY),
                    (&a_policy, Type::TEXT_ARRAY),
                    (&fallback, Type::TEXT),
                    (&a_escalation, Type::BOOL_ARRAY),
                ],
            )?)
        })?;
        let found: Option<String> = row.try_get(0).map_err(PgError::from)?;
        let session = match q.token {
            None => None,
            Some(_) if shaped.is_none() => Some(Err(BadSession::Malformed)),
            Some(_) if found.is_none() => Some(Err(BadSession::Unknown)),
            Some(_) => {
                let s = from_row(&row)?;
                Some(check_live(&s, q.now).map(|()| s))
            }
        };
        let changed = row
            .try_get::<_, Option<Ts>>(11)
            .map_err(PgError::from)?
            .map(|t| t.0);
        let granted: Vec<Option<Ts>> = row
            .try_get::<_, Option<Vec<Option<Ts>>>>(10)
            .map_err(PgError::from)?
            .unwrap_or_default();
        let grants = granted
            .iter()
            .zip(q.capabilities)
            .map(|(g, &cap)| {
                let held: Vec<HeldCapability> = g
                    .map(|t| HeldCapability {
                        capability: cap,
                        scope: PackScope::Pack(q.pack.clone()),
                        granted_at: t.0,
                    })
                    .into_iter()
                    .collect();
                status(&held, cap, changed)
            })
            .collect();
        let totals: Vec<i64> = row
            .try_get::<_, Option<Vec<i64>>>(12)
            .map_err(PgError::from)?
            .unwrap_or_default();
        let in_window: Vec<i64> = row
            .try_get::<_, Option<Vec<i64>>>(13)
            .map_err(PgError::from)?
            .unwrap_or_default();
        let counters = q
            .counters
            .iter()
            .zip(totals.iter().zip(&in_window))
            .map(|(c, (&total, &n))| {
                let (total, n) = (
                    u64::try_from(total).unwrap_or(0),
                    u64::try_from(n).unwrap_or(0),
                );
                if c.2.budget.is_some_and(|b| total >= b) {
                    Verdict::Budget
                } else if c.2.rate_limit.is_some_and(|r| n >= r.min(MAX_RECENT)) {
                    Verdict::RateLimit
                } else {
                    Verdict::Ok
                }
            })
            .collect();
        let approvals = row
            .try_get::<_, Option<Vec<Option<String>>>>(14)
            .map_err(PgError::from)?
            .unwrap_or_default();
        Ok(CallSnapshot {
            session,
            grants,
            content_changed_at: changed,
            counters,
            approvals,
        })
    }
}
