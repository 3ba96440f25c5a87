//! The one spending step (RUNTIME §9; the write-ahead audit of §6): in one transaction
//! — one statement, `hcp_admit`, one round trip — re-check the session and the grant
//! with its suspension, take every counter slot and the approval, and append the call's
//! `intent` record to this machine's chain. All or nothing: when it refuses or fails,
//! nothing was spent and nothing may run.

use crate::PgState;
use crate::audit::{self, Stamped};
use crate::error::PgError;
use crate::time::Ts;
use hcp_model::{Capability, Code, PackId};
use hcp_store::counter::Limits;
use hcp_store::session::{BadSession, Timestamp};
use postgres::types::Type;
use serde_json::{Map, Value};

/// The grants the gate found, re-checked at admit (with the pack's suspension).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrantCheck<'a> {
    /// The pack of the call.
    pub pack: &'a PackId,
    /// Every capability step 4 checked (the operation's; and `pack.connect` for a connect
    /// verb, `sense.enable` for sense).
    pub capabilities: &'a [Capability],
}

/// A counter slot to take: the runtime policy's `rate_limit` and `budget` of one tool
/// for one identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CounterTake<'a> {
    /// The principal's identity (the Histos principal id).
    pub identity: &'a str,
    /// The tool (`PACK.VERB`).
    pub tool: &'a str,
    /// Its limits (window in milliseconds).
    pub limits: Limits,
    /// The caller's time, in milliseconds since the Unix epoch.
    pub now_ms: u64,
}

/// The approval a paused call now spends: what it is bound to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApprovalTake<'a> {
    /// The tool (`PACK.VERB`).
    pub tool: &'a str,
    /// The digest of the principal's other facts.
    pub principal_digest: &'a str,
    /// The digest of the bound arguments.
    pub args_digest: &'a str,
    /// The runtime policy's `content_hash`.
    pub policy_hash: &'a str,
    /// Whether the approval to take answers the tool's `escalate` (else its
    /// `confirmation`): only an approval of that kind is taken.
    pub escalation: bool,
}

/// Everything one call spends, and its intent record.
#[derive(Debug, Clone, PartialEq)]
pub struct Admission<'a> {
    /// The time of the call (session expiry, approval windows, the record's `ts`).
    pub now: Timestamp,
    /// The principal id (`owner` for the caller without a session).
    pub principal: &'a str,
    /// The session's `token_sha256` (`sha256:…`); `None` for the owner.
    pub session: Option<&'a str>,
    /// The grant to re-check; `None` for the owner.
    pub grant: Option<GrantCheck<'a>>,
    /// The counter slots to take (none for the owner).
    pub counters: &'a [CounterTake<'a>],
    /// The approvals to take, when the runtime policy asked for them (a sense of several
    /// refs may take several).
    pub approvals: &'a [ApprovalTake<'a>],
    /// The intent record's fields (without `ts`, `id`, `machine`: admit stamps them).
    pub intent: &'a Map<String, Value>,
}

/// What admit did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admitted {
    /// The intent record's `id` (the exec result's `audit_id`).
    pub audit_id: String,
    /// The intent record's `ts`.
    pub ts: Timestamp,
    /// Its place in this machine's chain (from 1).
    pub seq: u64,
    /// Its hash, the chain's new head.
    pub hash: String,
    /// The approvals it took, in the order of [`Admission::approvals`].
    pub approval_ids: Vec<String>,
}

/// Why admit refused: something changed since the dry pre-gate. Nothing was spent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdmitRefusal {
    /// The session was ended, expired or is unknown (code `bad_session`).
    #[error(transparent)]
    Session(BadSession),
    /// The grant was revoked (code `missing_grant`).
    #[error("the grant of `{capability}` was revoked")]
    MissingGrant {
        /// The capability.
        capability: String,
    },
    /// The pack's content changed after the grant (code `missing_grant`).
    #[error("the grant of `{capability}` is suspended: the pack's content changed at `{}`", hcp_store::session::format_ts(*.content_changed_at))]
    Suspended {
        /// The capability.
        capability: String,
        /// When the pack's content changed.
        content_changed_at: Timestamp,
    },
    /// A budget is spent (code `budget`).
    #[error("the budget of `{tool}` is spent")]
    Budget {
        /// The tool.
        tool: String,
    },
    /// A rate window is full (code `rate_limit`).
    #[error("the rate limit of `{tool}` is reached")]
    RateLimit {
        /// The tool.
        tool: String,
    },
    /// The approval was taken by another call, denied or expired (code
    /// `requires_confirmation`: the call needs a new one).
    #[error("the approval of `{tool}` is no longer usable")]
    ApprovalGone {
        /// The tool.
        tool: String,
    },
}

impl AdmitRefusal {
    /// `bad_session`, `missing_grant`, `budget`, `rate_limit`, `requires_confirmation`.
    pub fn code(&self) -> Code {
        match self {
            Self::Session(_) => hcp_store::session::BAD_SESSION,
            Self::MissingGrant { .. } | Self::Suspended { .. } => Code::MissingGrant,
            Self::Budget { .. } => Code::Budget,
            Self::RateLimit { .. } => Code::RateLimit,
            Self::ApprovalGone { .. } => Code::RequiresConfirmation,
        }
    }
}

/// Why admit did not admit.
#[derive(Debug, thiserror::Error)]
pub enum AdmitError {
    /// A re-check refused (exit 77 for all of them).
    #[error(transparent)]
    Refused(#[from] AdmitRefusal),
    /// The intent record's fields hold a reserved key (code `audit_bad_entry`).
    #[error(transparent)]
    Audit(#[from] audit::AuditError),
    /// The database failed: nothing was spent, nothing may run (`state_unavailable`).
    #[error(transparent)]
    State(#[from] PgError),
}

impl AdmitError {
    /// The refusal's, the audit's or the database's code.
    pub fn code(&self) -> Code {
        match self {
            Self::Refused(r) => r.code(),
            Self::Audit(e) => e.code(),
            Self::State(e) => e.code(),
        }
    }
}

fn opt_i64(v: Option<u64>) -> Option<i64> {
    v.map(|n| i64::try_from(n).unwrap_or(i64::MAX))
}

impl PgState {
    /// The spending step: see the module docs. Counter keys are taken in sorted order
    /// (the lock order that keeps concurrent admits free of deadlocks).
    ///
    /// # Errors
    /// [`AdmitError::Refused`] when a re-check fails; [`AdmitError::Audit`] for a reserved
    /// field; [`AdmitError::State`] when the database fails (the transaction is then
    /// rolled back by the server).
    pub fn admit(&self, a: &Admission<'_>) -> Result<Admitted, AdmitError> {
        let Stamped { ts, id, body } = audit::stamp(self.machine(), a.intent, a.now)?;
        let mut takes: Vec<&CounterTake<'_>> = a.counters.iter().collect();
        takes.sort_by_key(|t| (t.identity, t.tool));
        takes.dedup_by_key(|t| (t.identity, t.tool));
        let identities: Vec<&str> = takes.iter().map(|t| t.identity).collect();
        let tools: Vec<&str> = takes.iter().map(|t| t.tool).collect();
        let rates: Vec<Option<i64>> = takes.iter().map(|t| opt_i64(t.limits.rate_limit)).collect();
        let budgets: Vec<Option<i64>> = takes.iter().map(|t| opt_i64(t.limits.budget)).collect();
        let windows: Vec<i64> = takes
            .iter()
            .map(|t| i64::try_from(t.limits.window_ms).unwrap_or(i64::MAX))
            .collect();
        let now_ms = takes
            .first()
            .map_or(0, |t| i64::try_from(t.now_ms).unwrap_or(i64::MAX));
        let now = Ts(Ts::micros(a.now));
        let pack = a.grant.map(|g| g.pack.as_str());
        let capabilities: Option<Vec<&str>> = a
            .grant
            .map(|g| g.capabilities.iter().map(|c| c.as_str()).collect());
        let apr = a.approvals;
        let a_tools: Vec<&str> = apr.iter().map(|x| x.tool).collect();
        let a_pd: Vec<&str> = apr.iter().map(|x| x.principal_digest).collect();
        let a_args: Vec<&str> = apr.iter().map(|x| x.args_digest).collect();
        let a_policy: Vec<&str> = apr.iter().map(|x| x.policy_hash).collect();
        let a_escalation: Vec<bool> = apr.iter().map(|x| x.escalation).collect();
        let row = self.with(|c| {
            Ok(c.query_typed_one(
                "SELECT o_status, o_detail, o_at, o_seq, o_hash, o_approvals FROM @.hcp_admit(
                     $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17,
                     $18)",
                &[
                    (&self.machine().as_str(), Type::TEXT),
                    (&body, Type::TEXT),
                    (&now, Type::TIMESTAMPTZ),
                    (&a.session, Type::TEXT),
                    (&a.principal, Type::TEXT),
                    (&pack, Type::TEXT),
                    (&capabilities, Type::TEXT_ARRAY),
                    (&identities, Type::TEXT_ARRAY),
                    (&tools, Type::TEXT_ARRAY),
                    (&rates, Type::INT8_ARRAY),
                    (&budgets, Type::INT8_ARRAY),
                    (&windows, Type::INT8_ARRAY),
                    (&now_ms, Type::INT8),
                    (&a_tools, Type::TEXT_ARRAY),
                    (&a_pd, Type::TEXT_ARRAY),
                    (&a_args, Type::TEXT_ARRAY),
                    (&a_policy, Type::TEXT_ARRAY),
                    (&a_escalation, Type::BOOL_ARRAY),
                ],
            )?)
        })?;
        let status: String = row.try_get(0).map_err(PgError::from)?;
        let detail: Option<String> = row.try_get(1).map_err(PgError::from)?;
        let at: Option<Ts> = row.try_get(2).map_err(PgError::from)?;
        let detail = detail.unwrap_or_default();
        let refusal = match status.as_str() {
            "admitted" => None,
            "bad_session" => Some(AdmitRefusal::Session(match (detail.as_str(), at) {
                ("ended", Some(t)) => BadSession::Ended { ended_at: t.0 },
                ("expired", Some(t)) => BadSession::Expired { expires_at: t.0 },
                _ => BadSession::Unknown,
            })),
            "missing_grant" => Some(AdmitRefusal::MissingGrant { capability: detail }),
            "suspended" => Some(match at {
                Some(t) => AdmitRefusal::Suspended {
                    capability: detail,
                    content_changed_at: t.0,
                },
                None => AdmitRefusal::MissingGrant { capability: detail },
            }),
            "budget" => Some(AdmitRefusal::Budget { tool: detail }),
            "rate_limit" => Some(AdmitRefusal::RateLimit { tool: detail }),
            "approval_gone" => Some(AdmitRefusal::ApprovalGone { tool: detail }),
            other => {
                return Err(PgError::damaged(format!("hcp_admit answered `{other}`")).into());
            }
        };
        if let Some(r) = refusal {
            return Err(r.into());
        }
        let seq: i64 = row.try_get(3).map_err(PgError::from)?;
        Ok(Admitted {
            audit_id: id,
            ts,
            seq: u64::try_from(seq).unwrap_or(0),
            hash: row.try_get(4).map_err(PgError::from)?,
            approval_ids: row
                .try_get::<_, Option<Vec<String>>>(5)
                .map_err(PgError::from)?
                .unwrap_or_default(),
        })
    }
}
