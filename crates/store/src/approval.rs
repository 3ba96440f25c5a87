//! Out-of-band approvals of the runtime policy's `confirmation` and `escalate` (RUNTIME
//! §7): a call the policy pauses is recorded as a pending approval; the owner grants it
//! with `hcp approve ID`; the same call (same tool, same arguments, same principal, same
//! policy) then passes once, within the approval's window. A pending escalation (an
//! approval marked [`Approval::escalation`], asked for by a tool's `escalate` when
//! `config.json` says `"escalation": "approvals"`) may instead be denied with `hcp deny
//! ID`: the same call is then refused (`escalation_denied`) for the approval's window.
//!
//! ```text
//! state/approvals/<id>.json
//! ```
//!
//! Every change is made under the store lock, so an approval is used at most once even
//! when concurrent processes present the same call. Each file carries the keyed MAC of
//! its content and name ([`crate::stamp`]): one edited by hand (marked approved, a denial
//! removed) approves nothing, and refuses the call it names (`store_damaged`).

use crate::error::{StoreError, StoreResult};
use crate::home::{Home, StoreDir};
use crate::lock::StoreLock;
use hcp_model::Code;
use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// How long an approval stays usable after the owner grants it when the policy names no
/// `expires_in`, in seconds (5 minutes).
pub const DEFAULT_WINDOW_S: u64 = 300;
/// How long a request waits for the owner before it is dropped from the list, in seconds
/// (24 hours).
pub const PENDING_TTL_S: i64 = 24 * 3600;

/// One approval, pending, granted or used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Approval {
    /// `apr_` and 20 hex digits.
    pub id: String,
    /// The tool (`PACK.VERB`).
    pub tool: String,
    /// The principal whose call it is.
    pub principal: String,
    /// A digest of the principal's other facts the approval is bound to (role,
    /// attributes, `can_view`), so another session of the same id cannot use it.
    #[serde(default)]
    pub principal_digest: String,
    /// The digest of the call's (bound) arguments.
    pub args_digest: String,
    /// The runtime policy's `content_hash` when the call was paused.
    pub policy_hash: String,
    /// Whether this answers the tool's `escalate` (the owner as the semantic tier) rather
    /// than its `confirmation`. The two are separate approvals of the same call.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub escalation: bool,
    /// Argument name → a short preview of its value, for the owner to review.
    pub summary: BTreeMap<String, String>,
    /// When the call was paused.
    pub requested_at: Timestamp,
    /// How long the approval is usable after it is granted, in seconds.
    pub window_s: u64,
    /// When the owner granted it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_at: Option<Timestamp>,
    /// When the call used it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_at: Option<Timestamp>,
    /// When the owner denied it (escalations only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denied_at: Option<Timestamp>,
    /// The short id of the session the call was made under (RUNTIME §7: an approval is
    /// bound to its session and project, through [`Approval::principal_digest`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The call's project (`HCP_PROJECT`, else the session's first project).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
}

fn window_end(at: Timestamp, window_s: u64) -> Timestamp {
    at.saturating_add(SignedDuration::from_secs(
        i64::try_from(window_s).unwrap_or(i64::MAX / 2),
    ))
    .unwrap_or(at)
}

impl Approval {
    /// `pending`, `approved`, `used`, `denied` or `expired` at `now`. A denial is
    /// `denied` within the approval's window after it was given, then `expired`.
    pub fn state(&self, now: Timestamp) -> &'static str {
        if self.used_at.is_some() {
            "used"
        } else if let Some(at) = self.denied_at {
            if now >= window_end(at, self.window_s) {
                "expired"
            } else {
                "denied"
            }
        } else if let Some(at) = self.approved_at {
            if now >= window_end(at, self.window_s) {
                "expired"
            } else {
                "approved"
            }
        } else if now >= self.requested_at + SignedDuration::from_secs(PENDING_TTL_S) {
            "expired"
        } else {
            "pending"
        }
    }

    /// `escalation` or `confirmation`: what the approval answers.
    pub fn kind(&self) -> &'static str {
        if self.escalation {
            "escalation"
        } else {
            "confirmation"
        }
    }

    /// Whether the approval is of this call: tool, principal, arguments and policy (its
    /// kind aside; an approval's id fixes that).
    pub(crate) fn matches(
        &self,
        tool: &str,
        principal: (&str, &str),
        args_digest: &str,
        policy_hash: &str,
    ) -> bool {
        self.tool == tool
            && self.principal == principal.0
            && self.principal_digest == principal.1
            && self.args_digest == args_digest
            && self.policy_hash == policy_hash
    }

    /// Whether the approval is of exactly this call, of the same kind.
    fn is_call(&self, call: &Call<'_>) -> bool {
        self.matches(
            call.tool,
            call.principal,
            call.args_digest,
            call.policy_hash,
        ) && self.escalation == call.escalation
    }
}

/// The call an approval is bound to, as this module's functions take it: tool, principal
/// (its id and the digest of its other facts), the digest of the bound arguments, the
/// policy's `content_hash`, and whether it is the call's escalation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call<'a> {
    /// The tool, `PACK_ID.VERB_KEY`.
    pub tool: &'a str,
    /// The principal id and the digest of its role, attributes and `can_view`.
    pub principal: (&'a str, &'a str),
    /// The digest of the bound arguments.
    pub args_digest: &'a str,
    /// The runtime policy's `content_hash`.
    pub policy_hash: &'a str,
    /// Whether the approval answers `escalate` (else `confirmation`).
    pub escalation: bool,
}

/// Why `hcp approve` refuses.
#[derive(Debug, thiserror::Error)]
pub enum ApprovalError {
    /// No such id.
    #[error("no approval `{0}`")]
    Unknown(String),
    /// It was used already (single use).
    #[error("approval `{0}` was used already")]
    Used(String),
    /// Too late.
    #[error("approval `{0}` has expired")]
    Expired(String),
    /// The owner answered it already (approved or denied): an answer is given once.
    #[error("approval `{id}` was {state} already")]
    Decided {
        /// The approval.
        id: String,
        /// `approved` or `denied`.
        state: &'static str,
    },
    /// `hcp deny` of a confirmation: only an escalation can be denied (a confirmation the
    /// owner does not grant expires unused).
    #[error(
        "approval `{0}` is a confirmation, not an escalation; only an escalation can be denied"
    )]
    NotAnEscalation(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ApprovalError {
    /// `unknown_approval`, `approval_used`, `approval_expired`, `approval_decided`,
    /// `not_an_escalation`, or the store's code.
    pub fn code(&self) -> Code {
        match self {
            Self::Unknown(_) => Code::UnknownApproval,
            Self::Used(_) => Code::ApprovalUsed,
            Self::Expired(_) => Code::ApprovalExpired,
            Self::Decided { .. } => Code::ApprovalDecided,
            Self::NotAnEscalation(_) => Code::NotAnEscalation,
            Self::Store(e) => e.code(),
        }
    }
}

fn dir(home: &Home) -> PathBuf {
    home.dir(StoreDir::State).join("approvals")
}

/// The marker that an intent record took approval `id`: `state/approvals/<id>.used`,
/// written by `hcp_store::audit::admit` (a cache of the audit trail, which is the truth).
/// [`list`] and [`get`] read it as `used_at`; [`approve`] and [`request`] never write it.
pub(crate) fn used_marker(home: &Home, id: &str) -> PathBuf {
    dir(home).join(format!("{id}.used"))
}

/// The marker's content.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct UsedMarker {
    /// The intent record's `id`.
    pub(crate) intent: String,
    /// When the call took it.
    pub(crate) at: Timestamp,
}

fn with_marker(home: &Home, mut a: Approval) -> Approval {
    if a.used_at.is_none()
        && let Ok(Some(b)) = crate::atomic::read_record(&used_marker(home, &a.id))
    {
        a.used_at = Some(
            serde_json::from_slice::<UsedMarker>(&b)
                .map(|m| m.at)
                .unwrap_or(a.requested_at),
        );
    }
    a
}

/// One approval file as read: sound (its MAC holds), or damaged, with the approval it
/// names when it parses (which call it was for, not to be believed otherwise).
#[derive(Debug)]
enum Read {
    Sound(Approval),
    Damaged {
        path: PathBuf,
        reason: String,
        names: Option<Approval>,
    },
}

/// Reads the approval file at `path` (named `<id>.json`), its MAC checked ([`crate::stamp`]);
/// `None` when there is none.
fn read_path(home: &Home, path: &std::path::Path, id: &str) -> StoreResult<Option<Read>> {
    let bytes = match crate::atomic::read_record(path) {
        Ok(Some(b)) => b,
        Ok(None) => return Ok(None),
        Err(StoreError::Damaged { reason, .. }) => {
            return Ok(Some(Read::Damaged {
                path: path.to_path_buf(),
                reason,
                names: None,
            }));
        }
        Err(e) => return Err(e),
    };
    let damaged = |reason: String, names: Option<Approval>| {
        Ok(Some(Read::Damaged {
            path: path.to_path_buf(),
            reason,
            names,
        }))
    };
    let opened = match crate::stamp::read::<Approval>(home, path, &bytes) {
        Ok(o) => o,
        Err(StoreError::Damaged { reason, .. }) => return damaged(reason, None),
        Err(e) => return Err(e),
    };
    let parsed = serde_json::from_value::<Approval>(opened.value);
    match (opened.fault, parsed) {
        (Some(reason), p) => damaged(reason, p.ok()),
        (None, Err(e)) => damaged(e.to_string(), None),
        (None, Ok(a)) if a.id != id => damaged(
            format!("it holds approval `{}`, but it is the file of `{id}`", a.id),
            Some(a),
        ),
        (None, Ok(a)) => match spent_marker_gone(home, &a) {
            Some(reason) => damaged(reason, Some(a)),
            None => Ok(Some(Read::Sound(a))),
        },
    }
}

/// Why approval `a` cannot be believed although its file holds: the state ledger
/// ([`crate::ledger`]) says a call spent it, and its `.used` marker is gone (removed by
/// hand, which would let it be spent again). `None` when its marker is there or was never
/// written, or the store keeps no ledger yet.
fn spent_marker_gone(home: &Home, a: &Approval) -> Option<String> {
    let marker = used_marker(home, &a.id);
    if a.used_at.is_some() || std::fs::symlink_metadata(&marker).is_ok() {
        return None;
    }
    match crate::ledger::holds(home, &marker) {
        Ok(Ok(Some(true))) => Some(format!(
            "a call spent it, and its marker `{}.used` was removed (hcp's ledger `state/ledger.json` holds it)",
            a.id
        )),
        Ok(Ok(_)) => None,
        Ok(Err(why)) => Some(why),
        Err(e) => Some(e.to_string()),
    }
}

/// Approval `id`, with its use marker read; `None` when there is none.
///
/// # Errors
/// [`StoreError`] when it cannot be read, does not parse, or its MAC is missing or does
/// not hold (`store_damaged`).
pub fn get(home: &Home, id: &str) -> StoreResult<Option<Approval>> {
    if !valid_id(id) {
        return Ok(None);
    }
    match read_path(home, &dir(home).join(format!("{id}.json")), id)? {
        None => Ok(None),
        Some(Read::Sound(a)) => Ok(Some(with_marker(home, a))),
        Some(Read::Damaged { path, reason, .. }) => Err(StoreError::Damaged { path, reason }),
    }
}

fn valid_id(id: &str) -> bool {
    id.strip_prefix("apr_")
        .is_some_and(|h| h.len() == 20 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Writes the approval with its MAC ([`crate::stamp`]) and notes it in the state ledger,
/// under the store lock the caller holds.
fn save(home: &Home, lock: &StoreLock, a: &Approval) -> StoreResult<()> {
    let path = dir(home).join(format!("{}.json", a.id));
    crate::stamp::write(home, lock, &path, a)
}

/// Every approval file of the store (`apr_<20 hex>.json`), read, in no order.
///
/// # Errors
/// [`StoreError::Io`] when the directory cannot be read.
fn scan(home: &Home) -> StoreResult<Vec<Read>> {
    let d = dir(home);
    let rd = match std::fs::read_dir(&d) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StoreError::io("read", &d, e)),
    };
    let mut out = Vec::new();
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(id) = name
            .to_str()
            .and_then(|n| n.strip_suffix(".json"))
            .filter(|n| valid_id(n))
        else {
            continue;
        };
        let path = e.path();
        match read_path(home, &path, id) {
            Ok(Some(r)) => out.push(r),
            Ok(None) => {}
            Err(e) => out.push(Read::Damaged {
                path,
                reason: e.to_string(),
                names: None,
            }),
        }
    }
    Ok(out)
}

/// Every approval, oldest first. Damaged files are skipped ([`damaged`] lists them; a call
/// one of them names is refused by [`lookup`] and [`denial`]).
///
/// # Errors
/// [`StoreError::Io`] when the directory cannot be read.
pub fn list(home: &Home) -> StoreResult<Vec<Approval>> {
    let mut out: Vec<Approval> = scan(home)?
        .into_iter()
        .filter_map(|r| match r {
            Read::Sound(a) => Some(with_marker(home, a)),
            Read::Damaged { .. } => None,
        })
        .collect();
    out.sort_by(|a, b| a.requested_at.cmp(&b.requested_at).then(a.id.cmp(&b.id)));
    Ok(out)
}

/// The damaged approval files (RUNTIME §4 "Fault isolation"): one that does not parse, or
/// whose MAC is missing or does not hold, by path, with the reason.
///
/// # Errors
/// [`StoreError::Io`] when the directory cannot be read.
pub fn damaged(home: &Home) -> StoreResult<Vec<(PathBuf, String)>> {
    let mut out: Vec<(PathBuf, String)> = scan(home)?
        .into_iter()
        .filter_map(|r| match r {
            Read::Damaged { path, reason, .. } => Some((path, reason)),
            Read::Sound(_) => None,
        })
        .collect();
    out.sort();
    Ok(out)
}

/// Records a paused call, or returns the pending request of the same call.
///
/// # Errors
/// [`StoreError`] when the store cannot be written.
pub fn request(
    home: &Home,
    call: &Call<'_>,
    summary: BTreeMap<String, String>,
    window_s: Option<u64>,
    now: Timestamp,
) -> StoreResult<Approval> {
    request_in(home, call, summary, window_s, (None, None), now)
}

/// [`request`], naming the call's session (its short id) and project, which `hcp
/// approvals` shows (RUNTIME §7; what binds the approval to them is the principal digest
/// of `call`).
///
/// # Errors
/// As [`request`].
pub fn request_in(
    home: &Home,
    call: &Call<'_>,
    summary: BTreeMap<String, String>,
    window_s: Option<u64>,
    (session, project): (Option<String>, Option<String>),
    now: Timestamp,
) -> StoreResult<Approval> {
    let lock = StoreLock::acquire(home)?;
    if let Some(a) = list(home)?
        .into_iter()
        .find(|a| a.is_call(call) && a.state(now) == "pending")
    {
        return Ok(a);
    }
    let mut raw = [0u8; 10];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut raw))
        .map_err(|e| StoreError::io("read", "/dev/urandom", e))?;
    let a = Approval {
        id: format!("apr_{}", hex::encode(raw)),
        tool: call.tool.to_owned(),
        principal: call.principal.0.to_owned(),
        principal_digest: call.principal.1.to_owned(),
        args_digest: call.args_digest.to_owned(),
        policy_hash: call.policy_hash.to_owned(),
        escalation: call.escalation,
        summary,
        requested_at: now,
        window_s: window_s.unwrap_or(DEFAULT_WINDOW_S),
        approved_at: None,
        used_at: None,
        denied_at: None,
        session,
        project,
    };
    save(home, &lock, &a)?;
    Ok(a)
}

/// Uses a granted, unused, unexpired approval of exactly this call, if there is one:
/// marks it used (single use) and returns it.
///
/// # Errors
/// [`StoreError`] when the store cannot be read or written (callers fail closed).
pub fn take(home: &Home, call: &Call<'_>, now: Timestamp) -> StoreResult<Option<Approval>> {
    let d = dir(home);
    if !d.exists() {
        return Ok(None);
    }
    let lock = StoreLock::acquire(home)?;
    let Some(mut a) = list(home)?
        .into_iter()
        .find(|a| a.is_call(call) && a.state(now) == "approved")
    else {
        return Ok(None);
    };
    a.used_at = Some(now);
    save(home, &lock, &a)?;
    Ok(Some(a))
}

/// Looks up a granted, unused, unexpired approval of exactly this call without using it
/// (the dry pre-gate of RUNTIME §7: nothing is spent until the call is admitted). Takes no
/// lock.
///
/// # Errors
/// [`StoreError`] when the store cannot be read (callers fail closed).
pub fn lookup(home: &Home, call: &Call<'_>, now: Timestamp) -> StoreResult<Option<Approval>> {
    find(home, call, now, "approved")
}

/// Looks up a denial of exactly this call still in force (denied within the approval's
/// window). Takes no lock and changes nothing.
///
/// # Errors
/// [`StoreError`] when the store cannot be read (callers fail closed).
pub fn denial(home: &Home, call: &Call<'_>, now: Timestamp) -> StoreResult<Option<Approval>> {
    find(home, call, now, "denied")
}

/// The approval of `call` in `state` at `now`. A damaged file that names the call (its
/// MAC does not hold: edited by hand, an approval marked approved or a denial removed)
/// refuses it (`store_damaged`, naming the file), never approves it; damaged files that
/// name other calls refuse nobody else.
fn find(
    home: &Home,
    call: &Call<'_>,
    now: Timestamp,
    state: &str,
) -> StoreResult<Option<Approval>> {
    if !dir(home).exists() {
        return Ok(None);
    }
    let mut found = None;
    for r in scan(home)? {
        match r {
            Read::Damaged {
                path,
                reason,
                names: Some(a),
            } if a.is_call(call) => return Err(StoreError::Damaged { path, reason }),
            Read::Sound(a) if a.is_call(call) => {
                let a = with_marker(home, a);
                if a.state(now) == state
                    && found.as_ref().is_none_or(|f: &Approval| {
                        (a.requested_at, &a.id) < (f.requested_at, &f.id)
                    })
                {
                    found = Some(a);
                }
            }
            _ => {}
        }
    }
    Ok(found)
}

/// Undoes a [`take`] whose call was not admitted after all (the step after it failed):
/// clears `used_at` of approval `id`, under the store lock.
///
/// # Errors
/// [`StoreError`] when the store cannot be read or written.
pub fn restore(home: &Home, id: &str) -> StoreResult<()> {
    if !valid_id(id) {
        return Ok(());
    }
    let lock = StoreLock::acquire(home)?;
    let path = dir(home).join(format!("{id}.json"));
    let bytes = crate::atomic::read_record(&path)?.ok_or_else(|| {
        StoreError::io(
            "read",
            &path,
            std::io::Error::from(std::io::ErrorKind::NotFound),
        )
    })?;
    let mut a: Approval = crate::stamp::open(home, &path, &bytes)?;
    a.used_at = None;
    save(home, &lock, &a)
}

/// Reads approval `id` under the store lock the caller holds.
fn read_one(home: &Home, id: &str) -> Result<Approval, ApprovalError> {
    if !valid_id(id) {
        return Err(ApprovalError::Unknown(id.to_owned()));
    }
    match read_path(home, &dir(home).join(format!("{id}.json")), id)? {
        None => Err(ApprovalError::Unknown(id.to_owned())),
        // A call that took it is named by its use marker (written with the intent record).
        Some(Read::Sound(a)) => Ok(with_marker(home, a)),
        Some(Read::Damaged { path, reason, .. }) => {
            Err(StoreError::Damaged { path, reason }.into())
        }
    }
}

/// Why a pending approval cannot be answered now: used, expired, or answered already.
fn not_pending(a: &Approval, now: Timestamp) -> Option<ApprovalError> {
    match a.state(now) {
        "pending" => None,
        "used" => Some(ApprovalError::Used(a.id.clone())),
        "approved" => Some(ApprovalError::Decided {
            id: a.id.clone(),
            state: "approved",
        }),
        "denied" => Some(ApprovalError::Decided {
            id: a.id.clone(),
            state: "denied",
        }),
        _ => Some(ApprovalError::Expired(a.id.clone())),
    }
}

/// Grants pending approval `id` (the caller checked the owner). An approval is answered
/// once: approving it again, or after a denial, is refused.
///
/// # Errors
/// [`ApprovalError`]: unknown, used, expired, decided already, or the store's.
pub fn approve(home: &Home, id: &str, now: Timestamp) -> Result<Approval, ApprovalError> {
    if !valid_id(id) {
        return Err(ApprovalError::Unknown(id.to_owned()));
    }
    let lock = StoreLock::acquire(home)?;
    let mut a = read_one(home, id)?;
    if let Some(e) = not_pending(&a, now) {
        return Err(e);
    }
    a.approved_at = Some(now);
    save(home, &lock, &a)?;
    Ok(a)
}

/// Denies pending escalation `id` (the caller checked the owner): the same call is
/// refused (`escalation_denied`) for the approval's window.
///
/// # Errors
/// [`ApprovalError`]: unknown, not an escalation, used, expired, decided already, or the
/// store's.
pub fn deny(home: &Home, id: &str, now: Timestamp) -> Result<Approval, ApprovalError> {
    if !valid_id(id) {
        return Err(ApprovalError::Unknown(id.to_owned()));
    }
    let lock = StoreLock::acquire(home)?;
    let mut a = read_one(home, id)?;
    if !a.escalation {
        return Err(ApprovalError::NotAnEscalation(a.id));
    }
    if let Some(e) = not_pending(&a, now) {
        return Err(e);
    }
    a.denied_at = Some(now);
    save(home, &lock, &a)?;
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    /// A store (its chain key keys the approval files).
    fn store() -> (tempfile::TempDir, Home) {
        let d = tempfile::tempdir().unwrap();
        crate::made::init(d.path(), crate::audit::Actor::owner(), None).unwrap();
        let h = Home::open(d.path()).unwrap();
        (d, h)
    }

    fn call<'a>(principal: &'a str, args: &'a str, policy: &'a str) -> Call<'a> {
        Call {
            tool: "mail.mail.send",
            principal: (principal, ""),
            args_digest: args,
            policy_hash: policy,
            escalation: false,
        }
    }

    #[test]
    fn single_use_bound_to_the_call() {
        let (_d, home) = store();
        let c = call("agent", "sha256:a", "sha256:p");
        let a = request(&home, &c, BTreeMap::new(), Some(60), t(0)).unwrap();
        // the same call asks again: the same request
        assert_eq!(
            request(&home, &c, BTreeMap::new(), Some(60), t(1))
                .unwrap()
                .id,
            a.id
        );
        // not approved yet
        assert!(take(&home, &c, t(2)).unwrap().is_none());
        approve(&home, &a.id, t(3)).unwrap();
        // other arguments, another principal, another policy, the escalation: no
        for other in [
            call("agent", "sha256:b", "sha256:p"),
            call("other", "sha256:a", "sha256:p"),
            call("agent", "sha256:a", "sha256:q"),
            Call {
                escalation: true,
                ..c
            },
        ] {
            assert!(take(&home, &other, t(4)).unwrap().is_none(), "{other:?}");
        }
        // the call itself: once
        assert!(take(&home, &c, t(5)).unwrap().is_some());
        assert!(take(&home, &c, t(6)).unwrap().is_none());
        assert_eq!(
            approve(&home, &a.id, t(7)).unwrap_err().code(),
            "approval_used"
        );
        assert_eq!(
            approve(&home, "apr_nope", t(7)).unwrap_err().code(),
            "unknown_approval"
        );
    }

    #[test]
    fn approvals_expire() {
        let (_d, home) = store();
        let c = call("p", "d", "h");
        let a = request(&home, &c, BTreeMap::new(), Some(10), t(0)).unwrap();
        approve(&home, &a.id, t(1)).unwrap();
        assert!(take(&home, &c, t(20)).unwrap().is_none());
        assert_eq!(a.state(t(PENDING_TTL_S + 1)), "expired");
        // approved after it expired
        let b = request(&home, &c, BTreeMap::new(), Some(10), t(30)).unwrap();
        assert_eq!(
            approve(&home, &b.id, t(30 + PENDING_TTL_S))
                .unwrap_err()
                .code(),
            "approval_expired"
        );
    }

    #[test]
    fn an_answer_is_given_once() {
        let (_d, home) = store();
        let c = call("p", "d", "h");
        let a = request(&home, &c, BTreeMap::new(), None, t(0)).unwrap();
        approve(&home, &a.id, t(1)).unwrap();
        let e = approve(&home, &a.id, t(2)).unwrap_err();
        assert_eq!(e.code(), "approval_decided");
        assert_eq!(
            e.to_string(),
            format!("approval `{}` was approved already", a.id)
        );
        // a confirmation cannot be denied
        assert_eq!(
            deny(&home, &a.id, t(2)).unwrap_err().code(),
            "not_an_escalation"
        );
    }

    #[test]
    fn an_escalation_is_denied_for_its_window_then_asked_anew() {
        let (_d, home) = store();
        let c = Call {
            escalation: true,
            ..call("p", "d", "h")
        };
        let a = request(&home, &c, BTreeMap::new(), Some(60), t(0)).unwrap();
        assert!(a.escalation && a.kind() == "escalation");
        // the confirmation of the same call is another approval
        let confirm = request(&home, &call("p", "d", "h"), BTreeMap::new(), None, t(0)).unwrap();
        assert_ne!(confirm.id, a.id);
        let denied = deny(&home, &a.id, t(1)).unwrap();
        assert_eq!(denied.state(t(2)), "denied");
        assert_eq!(denial(&home, &c, t(2)).unwrap().unwrap().id, a.id);
        assert!(lookup(&home, &c, t(2)).unwrap().is_none());
        for again in [approve(&home, &a.id, t(3)), deny(&home, &a.id, t(3))] {
            assert_eq!(again.unwrap_err().code(), "approval_decided");
        }
        // after the window the denial lapses; the call asks anew
        assert!(denial(&home, &c, t(61)).unwrap().is_none());
        assert_eq!(denied.state(t(61)), "expired");
        let b = request(&home, &c, BTreeMap::new(), Some(60), t(61)).unwrap();
        assert_ne!(b.id, a.id);
    }
}
