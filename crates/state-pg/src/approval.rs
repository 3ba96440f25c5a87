//! Approvals of the runtime policy's `confirmation` and `escalate` (RUNTIME §7, §9): a
//! paused call is a pending approval, bound to tool, principal (id and the digest of its
//! other facts), argument digest and policy hash; the owner approves (or, for an
//! escalation, denies) it once on any machine; the same call then passes once, wherever
//! it comes from ([`crate::PgState::admit`] takes it under a row lock).

use crate::PgState;
use crate::error::{PgError, PgResult};
use crate::time::Ts;
use hcp_model::Code;
use hcp_store::approval::Call;
use hcp_store::session::Timestamp;
use jiff::SignedDuration;
use postgres::types::Type;
use std::collections::BTreeMap;
use std::io::Read;

/// How long an approval stays usable once approved when the policy names no
/// `expires_in`, in seconds (as the file store).
pub const DEFAULT_WINDOW_S: u64 = hcp_store::approval::DEFAULT_WINDOW_S;

/// How long a request waits for the owner, in seconds (as the file store).
pub const PENDING_TTL_S: i64 = hcp_store::approval::PENDING_TTL_S;

/// Where an approval stands at a given time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalState {
    /// Waiting for the owner.
    Pending,
    /// Approved and not yet used: the same call passes once.
    Approved,
    /// Used by a call (single use).
    Taken,
    /// Denied by the owner (an escalation: `escalation_denied`), within its window.
    Denied,
    /// Past its window (approved or denied) or its wait (pending).
    Expired,
}

impl ApprovalState {
    /// `pending`, `approved`, `taken`, `denied`, `expired`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Taken => "taken",
            Self::Denied => "denied",
            Self::Expired => "expired",
        }
    }
}

/// One approval as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    /// `apr_` and 20 hex digits.
    pub id: String,
    /// The tool (`PACK.VERB`).
    pub tool: String,
    /// The principal id whose call it is.
    pub principal: String,
    /// The digest of the principal's other facts (role, attributes, `can_view`).
    pub principal_digest: String,
    /// The digest of the call's bound arguments.
    pub args_digest: String,
    /// The runtime policy's `content_hash` when the call was paused.
    pub policy_hash: String,
    /// Argument name → a short preview, for the owner.
    pub summary: BTreeMap<String, String>,
    /// An escalation (`escalate`), answered by approve or deny, rather than a
    /// confirmation.
    pub escalation: bool,
    /// When the call was paused.
    pub requested_at: Timestamp,
    /// How long it is usable once approved, in seconds.
    pub window_s: u64,
    /// When the owner approved it.
    pub approved_at: Option<Timestamp>,
    /// When the owner denied it.
    pub denied_at: Option<Timestamp>,
    /// When a call took it.
    pub taken_at: Option<Timestamp>,
    /// Which machine's call took it.
    pub taken_machine: Option<String>,
    /// The machine where the call was paused.
    pub machine: String,
    /// The short id of the call's session (schema version 6; `None` before).
    pub session: Option<String>,
    /// The call's project (schema version 6; `None` before).
    pub project: Option<String>,
}

impl Approval {
    /// The state at `now`, as the file store's: taken; then denied or expired (a denial
    /// stands for the approval's window after it was given); then approved or expired;
    /// then pending or expired.
    pub fn state(&self, now: Timestamp) -> ApprovalState {
        let within = |at: Timestamp| {
            let window =
                SignedDuration::from_secs(i64::try_from(self.window_s).unwrap_or(i64::MAX / 2));
            at.checked_add(window).is_ok_and(|end| now < end)
        };
        if self.taken_at.is_some() {
            ApprovalState::Taken
        } else if let Some(at) = self.denied_at {
            if within(at) {
                ApprovalState::Denied
            } else {
                ApprovalState::Expired
            }
        } else if let Some(at) = self.approved_at {
            if within(at) {
                ApprovalState::Approved
            } else {
                ApprovalState::Expired
            }
        } else if now >= self.requested_at + SignedDuration::from_secs(PENDING_TTL_S) {
            ApprovalState::Expired
        } else {
            ApprovalState::Pending
        }
    }
}

/// A call to pause: what the approval is bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRequest {
    /// The tool (`PACK.VERB`).
    pub tool: String,
    /// The principal id.
    pub principal: String,
    /// The digest of the principal's other facts.
    pub principal_digest: String,
    /// The digest of the bound arguments.
    pub args_digest: String,
    /// The runtime policy's `content_hash`.
    pub policy_hash: String,
    /// Argument previews for the owner.
    pub summary: BTreeMap<String, String>,
    /// Whether it is an escalation.
    pub escalation: bool,
    /// The window once approved, in seconds (the file store's default, 300 s, when `None`).
    pub window_s: Option<u64>,
    /// The short id of the call's session (shown; the principal digest binds it).
    pub session: Option<String>,
    /// The call's project (shown; the principal digest binds it).
    pub project: Option<String>,
}

/// Why approve or deny refuses.
#[derive(Debug, thiserror::Error)]
pub enum ApprovalError {
    /// No such id (code `unknown_approval`).
    #[error("no approval `{0}`")]
    Unknown(String),
    /// Used already (code `approval_used`).
    #[error("approval `{0}` was used already")]
    Used(String),
    /// Too late (code `approval_expired`).
    #[error("approval `{0}` has expired")]
    Expired(String),
    /// Answered already: approved or denied (code `approval_decided`). An answer is
    /// given once.
    #[error("approval `{id}` was {state} already")]
    Decided {
        /// The id.
        id: String,
        /// `approved` or `denied`.
        state: &'static str,
    },
    /// Denying a confirmation: only an escalation can be denied (code
    /// `not_an_escalation`).
    #[error(
        "approval `{0}` is a confirmation, not an escalation; only an escalation can be denied"
    )]
    NotAnEscalation(String),
    /// The database failed.
    #[error(transparent)]
    State(#[from] PgError),
}

impl ApprovalError {
    /// `unknown_approval`, `approval_used`, `approval_expired`, `approval_decided`,
    /// `not_an_escalation`, or the database's code.
    pub fn code(&self) -> Code {
        match self {
            Self::Unknown(_) => Code::UnknownApproval,
            Self::Used(_) => Code::ApprovalUsed,
            Self::Expired(_) => Code::ApprovalExpired,
            Self::Decided { .. } => Code::ApprovalDecided,
            Self::NotAnEscalation(_) => Code::NotAnEscalation,
            Self::State(e) => e.code(),
        }
    }
}

const COLUMNS: &str = "id, tool, principal, principal_digest, args_digest, policy_hash, summary, \
                       escalation, requested_at, window_s, approved_at, denied_at, taken_at, \
                       taken_machine, machine, session, project";

fn from_row(row: &postgres::Row) -> PgResult<Approval> {
    let summary: serde_json::Value = row.try_get(6)?;
    let summary = serde_json::from_value(summary)
        .map_err(|e| PgError::damaged(format!("approval row: summary: {e}")))?;
    let opt = |i: usize| -> PgResult<Option<Timestamp>> {
        Ok(row.try_get::<_, Option<Ts>>(i)?.map(|t| t.0))
    };
    Ok(Approval {
        id: row.try_get(0)?,
        tool: row.try_get(1)?,
        principal: row.try_get(2)?,
        principal_digest: row.try_get(3)?,
        args_digest: row.try_get(4)?,
        policy_hash: row.try_get(5)?,
        summary,
        escalation: row.try_get(7)?,
        requested_at: row.try_get::<_, Ts>(8)?.0,
        window_s: u64::try_from(row.try_get::<_, i64>(9)?).unwrap_or(0),
        approved_at: opt(10)?,
        denied_at: opt(11)?,
        taken_at: opt(12)?,
        taken_machine: row.try_get(13)?,
        machine: row.try_get(14)?,
        session: row.try_get(15)?,
        project: row.try_get(16)?,
    })
}

fn valid_id(id: &str) -> bool {
    id.strip_prefix("apr_")
        .is_some_and(|h| h.len() == 20 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn new_id() -> PgResult<String> {
    let mut raw = [0u8; 10];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut raw))
        .map_err(|source| PgError::Io {
            action: "read",
            path: "/dev/urandom".into(),
            source,
        })?;
    Ok(format!("apr_{}", hex::encode(raw)))
}

impl PgState {
    /// Records a paused call, or returns the pending request of the same call (one per
    /// call fleet-wide: requests of one call are serialised by an advisory lock).
    ///
    /// # Errors
    /// [`PgError`].
    pub fn approval_request(&self, r: &ApprovalRequest, now: Timestamp) -> PgResult<Approval> {
        let id = new_id()?;
        let summary = serde_json::to_value(&r.summary)
            .map_err(|e| PgError::damaged(format!("approval summary: {e}")))?;
        let window = i64::try_from(r.window_s.unwrap_or(DEFAULT_WINDOW_S)).unwrap_or(i64::MAX);
        let now = Ts(Ts::micros(now));
        let pending_since = Ts(now.0 - SignedDuration::from_secs(PENDING_TTL_S));
        self.with(|c| {
            let mut tx = c.transaction()?;
            tx.execute_typed(
                "SELECT pg_advisory_xact_lock(hashtextextended($1 || $2 || $3 || $4 || $5, 7))",
                &[
                    (&r.tool, Type::TEXT),
                    (&r.principal, Type::TEXT),
                    (&r.principal_digest, Type::TEXT),
                    (&r.args_digest, Type::TEXT),
                    (&r.policy_hash, Type::TEXT),
                ],
            )?;
            let found = tx.query_typed_opt(
                &format!(
                    "SELECT {COLUMNS} FROM @.approvals
                     WHERE tool = $1 AND principal = $2 AND principal_digest = $3
                       AND args_digest = $4 AND policy_hash = $5 AND escalation = $6
                       AND approved_at IS NULL AND denied_at IS NULL AND taken_at IS NULL
                       AND requested_at > $7
                     ORDER BY requested_at, id LIMIT 1"
                ),
                &[
                    (&r.tool, Type::TEXT),
                    (&r.principal, Type::TEXT),
                    (&r.principal_digest, Type::TEXT),
                    (&r.args_digest, Type::TEXT),
                    (&r.policy_hash, Type::TEXT),
                    (&r.escalation, Type::BOOL),
                    (&pending_since, Type::TIMESTAMPTZ),
                ],
            )?;
            let a = match found {
                Some(row) => from_row(&row)?,
                None => from_row(&tx.query_typed_one(
                    &format!(
                        "INSERT INTO @.approvals (id, tool, principal, principal_digest, args_digest,
                             policy_hash, summary, escalation, requested_at, window_s, machine,
                             session, project)
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
                         RETURNING {COLUMNS}"
                    ),
                    &[
                        (&id, Type::TEXT),
                        (&r.tool, Type::TEXT),
                        (&r.principal, Type::TEXT),
                        (&r.principal_digest, Type::TEXT),
                        (&r.args_digest, Type::TEXT),
                        (&r.policy_hash, Type::TEXT),
                        (&summary, Type::JSONB),
                        (&r.escalation, Type::BOOL),
                        (&now, Type::TIMESTAMPTZ),
                        (&window, Type::INT8),
                        (&self.machine().as_str(), Type::TEXT),
                        (&r.session, Type::TEXT),
                        (&r.project, Type::TEXT),
                    ],
                )?)?,
            };
            tx.commit()?;
            Ok(a)
        })
    }

    /// The approved, unused, unexpired approval of exactly this call (of its kind:
    /// escalation or confirmation), if any, spending nothing (the dry pre-gate). One
    /// round trip.
    ///
    /// # Errors
    /// [`PgError`].
    pub fn approval_lookup(&self, call: &Call<'_>, now: Timestamp) -> PgResult<Option<Approval>> {
        self.find(
            call,
            now,
            "approved_at IS NOT NULL AND taken_at IS NULL AND denied_at IS NULL
             AND $7 < approved_at + make_interval(secs => window_s)
             ORDER BY approved_at, id",
        )
    }

    /// A denial of exactly this call (of its kind) still in force — denied, not taken,
    /// `now` within the approval's window after the denial — the latest, if any. Spends
    /// and changes nothing. One round trip.
    ///
    /// # Errors
    /// [`PgError`].
    pub fn denial_lookup(&self, call: &Call<'_>, now: Timestamp) -> PgResult<Option<Approval>> {
        self.find(
            call,
            now,
            "denied_at IS NOT NULL AND taken_at IS NULL
             AND $7 < denied_at + make_interval(secs => window_s)
             ORDER BY denied_at DESC, id",
        )
    }

    fn find(&self, call: &Call<'_>, now: Timestamp, when: &str) -> PgResult<Option<Approval>> {
        let now = Ts(Ts::micros(now));
        self.with(|c| {
            c.query_typed_opt(
                &format!(
                    "SELECT {COLUMNS} FROM @.approvals
                     WHERE tool = $1 AND principal = $2 AND principal_digest = $3
                       AND args_digest = $4 AND policy_hash = $5 AND escalation = $6
                       AND {when} LIMIT 1"
                ),
                &[
                    (&call.tool, Type::TEXT),
                    (&call.principal.0, Type::TEXT),
                    (&call.principal.1, Type::TEXT),
                    (&call.args_digest, Type::TEXT),
                    (&call.policy_hash, Type::TEXT),
                    (&call.escalation, Type::BOOL),
                    (&now, Type::TIMESTAMPTZ),
                ],
            )?
            .map(|r| from_row(&r))
            .transpose()
        })
    }

    /// Every approval of the fleet, oldest first.
    ///
    /// # Errors
    /// [`PgError`].
    pub fn approvals_list(&self) -> PgResult<Vec<Approval>> {
        self.with(|c| {
            let rows = c.query_typed(
                &format!("SELECT {COLUMNS} FROM @.approvals ORDER BY requested_at, id"),
                &[],
            )?;
            rows.iter().map(from_row).collect()
        })
    }

    /// The owner approves pending `id` at `now`. An approval is answered once: approving
    /// it again, or after a denial, is refused.
    ///
    /// # Errors
    /// [`ApprovalError`]: unknown, used, expired, decided already, or the database's.
    pub fn approve(&self, id: &str, now: Timestamp) -> Result<Approval, ApprovalError> {
        self.decide(id, now, true)
    }

    /// The owner denies pending escalation `id` at `now`: the same call is then refused
    /// (`escalation_denied`) for the approval's window ([`PgState::denial_lookup`]).
    ///
    /// # Errors
    /// [`ApprovalError`]: unknown, a confirmation ([`ApprovalError::NotAnEscalation`]),
    /// used, expired, decided already, or the database's.
    pub fn deny(&self, id: &str, now: Timestamp) -> Result<Approval, ApprovalError> {
        self.decide(id, now, false)
    }

    fn decide(&self, id: &str, now: Timestamp, approve: bool) -> Result<Approval, ApprovalError> {
        if !valid_id(id) {
            return Err(ApprovalError::Unknown(id.to_owned()));
        }
        let at = Ts(Ts::micros(now));
        self.with(|c| {
            let mut tx = c.transaction()?;
            let row = tx.query_typed_opt(
                &format!("SELECT {COLUMNS} FROM @.approvals WHERE id = $1 FOR UPDATE"),
                &[(&id, Type::TEXT)],
            )?;
            let Some(row) = row else {
                return Ok(Err(ApprovalError::Unknown(id.to_owned())));
            };
            let a = from_row(&row)?;
            let refusal = if !approve && !a.escalation {
                Some(ApprovalError::NotAnEscalation(a.id.clone()))
            } else {
                match a.state(now) {
                    ApprovalState::Pending => None,
                    ApprovalState::Taken => Some(ApprovalError::Used(a.id.clone())),
                    ApprovalState::Expired => Some(ApprovalError::Expired(a.id.clone())),
                    ApprovalState::Approved => Some(ApprovalError::Decided {
                        id: a.id.clone(),
                        state: "approved",
                    }),
                    ApprovalState::Denied => Some(ApprovalError::Decided {
                        id: a.id.clone(),
                        state: "denied",
                    }),
                }
            };
            if let Some(e) = refusal {
                return Ok(Err(e));
            }
            let column = if approve { "approved_at" } else { "denied_at" };
            let row = tx.query_typed_one(
                &format!("UPDATE @.approvals SET {column} = $2 WHERE id = $1 RETURNING {COLUMNS}"),
                &[(&id, Type::TEXT), (&at, Type::TIMESTAMPTZ)],
            )?;
            let a = from_row(&row)?;
            tx.commit()?;
            Ok(Ok(a))
        })?
    }
}
