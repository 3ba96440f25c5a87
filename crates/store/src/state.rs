//! The state of RUNTIME §4, §6, §7 and §9 behind one trait: sessions, grants and their
//! suspensions, approvals, call counters and the audit records.
//!
//! [`State`] is what the runtime (`hcp-runtime`) calls; a backend implements it. Two are
//! planned: [`FileState`], the embedded default over `$HCP_HOME` (this crate's modules
//! [`crate::session`], [`crate::grant`], [`crate::approval`], [`crate::counter`],
//! [`crate::audit`]), and a PostgreSQL backend (`hcp-state-pg`) for a fleet. Packs, pins,
//! skills and bindings are not state: they stay in `$HCP_HOME` on every machine.
//!
//! The trait is object safe (`&dyn State`, `Arc<dyn State>`) and speaks only in the value
//! types of `hcp-model` and this crate ([`Session`], [`Grant`], [`HeldCapability`],
//! [`Approval`], [`Entry`], [`Limits`], [`Verdict`] …). Failures are [`StoreError`]s; a
//! backend that cannot be reached answers [`StoreError::StateUnavailable`]
//! (`state_unavailable`, 74), never a fall-back to another backend.
//!
//! # Spending
//!
//! Reads ([`State::counter_check`], [`State::approval_lookup`]) spend nothing. The one
//! spending step is [`State::admit`]: it re-checks and takes every counter slot of the
//! call, takes the approval it uses, and (once the audit trail is write-ahead) makes the
//! call's intent record durable — all or nothing: when it fails, nothing was spent and
//! nothing runs. Everything that can refuse a call without spending runs before it.

use crate::StoreError;
use crate::approval::{self, Approval, ApprovalError};
use crate::audit::{Appended, AuditError, AuditLog, Entry, TailLine, VerifyReport};
use crate::counter::{Counters, Limits, Verdict};
use crate::grant::{self, Grant, Grants, HeldCapability, PackScope};
use crate::home::Home;
use crate::session::{self, NewSession, PrincipalId, Session, SessionError, Token};
use hcp_model::{ArgValue, Capability, Code, PackId};
use jiff::Timestamp;
use std::collections::BTreeMap;

/// The call an approval is bound to (RUNTIME §7): tool, principal (its id and a digest of
/// its other facts), the digest of the bound arguments and the policy's `content_hash`;
/// and whether it answers the call's `escalate` rather than its `confirmation` (two
/// separate approvals of the same call).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalKey {
    /// The tool, `PACK_ID.VERB_KEY`.
    pub tool: String,
    /// The principal id.
    pub principal: String,
    /// A digest of the principal's role, attributes and `can_view`.
    pub principal_digest: String,
    /// The digest of the call's arguments after binding.
    pub args_digest: String,
    /// The runtime policy's `content_hash`.
    pub policy_hash: String,
    /// Whether the approval answers the tool's `escalate` (the owner's approval queue as
    /// the semantic tier, `"escalation": "approvals"`), not its `confirmation`.
    pub escalation: bool,
}

impl ApprovalKey {
    /// The key as [`crate::approval`]'s functions take it.
    pub fn call(&self) -> approval::Call<'_> {
        approval::Call {
            tool: &self.tool,
            principal: (&self.principal, &self.principal_digest),
            args_digest: &self.args_digest,
            policy_hash: &self.policy_hash,
            escalation: self.escalation,
        }
    }
}

/// A call paused for confirmation, to be recorded as a pending approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRequest {
    /// The call.
    pub key: ApprovalKey,
    /// Argument name → a short preview of its value, for the owner to review.
    pub summary: BTreeMap<String, String>,
    /// How long the approval is usable once granted, in seconds (`None`: the default).
    pub window_s: Option<u64>,
}

/// One counter slot a call takes: `rate_limit` and `budget` of one tool for one identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterSlot {
    /// The principal identity.
    pub identity: String,
    /// The tool.
    pub tool: String,
    /// Its limits.
    pub limits: Limits,
    /// The call's time, in milliseconds since the Unix epoch (the counters' clock).
    pub now_ms: u64,
}

/// What [`State::admit`] spends for one call, and what it may re-check atomically (a
/// backend shared by several machines re-checks the session and the grant in the same
/// transaction, so a revoke or a session end is in force on the next call everywhere).
#[derive(Debug, Clone, Copy)]
pub struct Admission<'a> {
    /// `sha256:` and the hex digest of the session's token (its `token_sha256`); `None`
    /// for the owner.
    pub session: Option<&'a str>,
    /// The pack of the call.
    pub pack: &'a PackId,
    /// The capabilities the gate checked for a session principal (none for the owner).
    pub capabilities: &'a [Capability],
    /// The call, as its audit record says it (the intent record, once the audit trail is
    /// write-ahead; today's file backend writes one record after the run instead).
    pub intent: &'a Entry,
    /// The counter slots to take, each re-checked.
    pub counters: &'a [CounterSlot],
    /// The approvals to take, as the dry pre-gate found them (one per tool that needed
    /// confirmation; a call of one verb has at most one).
    pub approvals: &'a [ApprovalKey],
    /// The call's time.
    pub now: Timestamp,
}

/// What an admitted call spent.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Admitted {
    /// The approvals taken, in the order of [`Admission::approvals`].
    pub approval_ids: Vec<String>,
    /// The intent record, when the backend writes one at admission.
    pub intent: Option<Appended>,
}

/// Why a call is not admitted. Nothing was spent.
#[derive(Debug, thiserror::Error)]
pub enum AdmitError {
    /// A counter slot was taken by another call since the dry check (`rate_limit`,
    /// `budget`).
    #[error("the call counters of `{tool}` are spent ({})", limit_word(*.verdict))]
    Limit {
        /// The tool.
        tool: String,
        /// What refused.
        verdict: Verdict,
    },
    /// The approval was used by another call since the dry check
    /// (`requires_confirmation`).
    #[error("the approval of this call was used by another call")]
    ApprovalGone,
    /// The counters cannot be read or written (`limit_store_unavailable`).
    #[error("the call counters cannot be read or written")]
    Counter(#[source] StoreError),
    /// The approvals cannot be read or written (`confirm_error`).
    #[error("the approvals cannot be read or written")]
    Approval(#[source] StoreError),
    /// The call's record cannot be made durable (`audit_unavailable`).
    #[error("the audit trail cannot be written")]
    Audit(#[source] AuditError),
}

fn limit_word(v: Verdict) -> &'static str {
    match v {
        Verdict::Budget => "budget",
        _ => "rate_limit",
    }
}

impl AdmitError {
    /// The stable code.
    pub fn code(&self) -> Code {
        match self {
            Self::Limit {
                verdict: Verdict::Budget,
                ..
            } => Code::Budget,
            Self::Limit { .. } => Code::RateLimit,
            Self::ApprovalGone => Code::RequiresConfirmation,
            Self::Counter(_) => Code::LimitStoreUnavailable,
            Self::Approval(_) => Code::ConfirmError,
            Self::Audit(_) => Code::AuditUnavailable,
        }
    }
}

/// Sessions, grants, approvals, counters and the audit records of one store (see the
/// module docs). Chosen once per call; every method is one step of RUNTIME §4–§7.
pub trait State: Send + Sync + std::fmt::Debug {
    /// The backend's name (`file`, `postgresql`).
    fn backend(&self) -> &'static str;

    // Sessions (RUNTIME §4).

    /// Starts a session: validates `new`, makes a token, stores the session.
    ///
    /// # Errors
    /// [`SessionError`]: bad input, or the store's.
    fn session_start(
        &self,
        new: &NewSession,
        now: Timestamp,
    ) -> Result<(Token, Session), SessionError>;

    /// Resolves a present `HCP_SESSION` token to its session (RUNTIME §5 step 2).
    ///
    /// # Errors
    /// [`SessionError::Bad`] (`bad_session`) for a malformed, unknown, ended or expired
    /// token; [`SessionError::Store`].
    fn session_resolve(&self, token: &str, now: Timestamp) -> Result<Session, SessionError>;

    /// Ends the session of `token`; the flag says whether this call ended it.
    ///
    /// # Errors
    /// [`SessionError`].
    fn session_end(&self, token: &str, now: Timestamp) -> Result<(Session, bool), SessionError>;

    /// Ends every session of `principal` not ended yet; returns those it ended.
    ///
    /// # Errors
    /// [`SessionError`].
    fn session_end_principal(
        &self,
        principal: &PrincipalId,
        now: Timestamp,
    ) -> Result<Vec<Session>, SessionError>;

    /// Every session, oldest first.
    ///
    /// # Errors
    /// [`StoreError`].
    fn session_list(&self) -> Result<Vec<Session>, StoreError>;

    // Grants (RUNTIME §4) and the rug-pull guard (§3).

    /// What `principal` holds on `pack`: its own grants and the `*` grants.
    ///
    /// # Errors
    /// [`StoreError`].
    fn grants_held(
        &self,
        principal: &PrincipalId,
        pack: &PackId,
    ) -> Result<Vec<HeldCapability>, StoreError>;

    /// Grants (or renews) `capabilities` to `principal` on `scope`.
    ///
    /// # Errors
    /// [`StoreError`].
    fn grant(
        &self,
        principal: &PrincipalId,
        scope: &PackScope,
        capabilities: &[Capability],
        now: Timestamp,
    ) -> Result<Vec<Grant>, StoreError>;

    /// Takes `capabilities` back (all of them when empty) from `principal` on `scope`.
    ///
    /// # Errors
    /// [`StoreError`].
    fn revoke(
        &self,
        principal: &PrincipalId,
        scope: &PackScope,
        capabilities: &[Capability],
    ) -> Result<Vec<Grant>, StoreError>;

    /// Every grant, by principal, pack and capability.
    ///
    /// # Errors
    /// [`StoreError`].
    fn grants_list(&self) -> Result<Vec<Grant>, StoreError>;

    /// Records that a reinstall changed `pack`'s content at `at`: the grants of non-owner
    /// principals made before it are suspended (RUNTIME §3). The file backend keeps this
    /// time in the pack's install record and does nothing here.
    ///
    /// # Errors
    /// [`StoreError`].
    fn pack_content_changed(&self, pack: &PackId, at: Timestamp) -> Result<(), StoreError>;

    /// Drops what the state keeps for an uninstalled `pack` (its grants; `*` grants stay).
    /// The file backend does this inside the uninstall, under the store lock, and does
    /// nothing here.
    ///
    /// # Errors
    /// [`StoreError`].
    fn pack_removed(&self, pack: &PackId) -> Result<(), StoreError>;

    // Approvals (RUNTIME §7).

    /// Records a paused call as a pending approval, or returns the pending request of the
    /// same call.
    ///
    /// # Errors
    /// [`StoreError`].
    fn approval_request(
        &self,
        request: &ApprovalRequest,
        now: Timestamp,
    ) -> Result<Approval, StoreError>;

    /// A granted, unused, unexpired approval of exactly this call, if there is one. Spends
    /// nothing.
    ///
    /// # Errors
    /// [`StoreError`].
    fn approval_lookup(
        &self,
        key: &ApprovalKey,
        now: Timestamp,
    ) -> Result<Option<Approval>, StoreError>;

    /// Every approval, oldest first.
    ///
    /// # Errors
    /// [`StoreError`].
    fn approvals_list(&self) -> Result<Vec<Approval>, StoreError>;

    /// Grants pending approval `id` (the caller checked the owner). An approval is
    /// answered once: approving it again, or after a denial, is refused.
    ///
    /// # Errors
    /// [`ApprovalError`]: unknown, used, expired, answered already (`approval_decided`),
    /// or the store's.
    fn approve(&self, id: &str, now: Timestamp) -> Result<Approval, ApprovalError>;

    /// Denies pending escalation `id` (the caller checked the owner): the same call is
    /// then refused (`escalation_denied`) within the approval's window.
    ///
    /// # Errors
    /// [`ApprovalError`]: unknown, a confirmation (`not_an_escalation`), used, expired,
    /// answered already, or the store's.
    fn deny(&self, id: &str, now: Timestamp) -> Result<Approval, ApprovalError>;

    /// A denial of exactly this call still in force, if there is one. Spends nothing.
    ///
    /// # Errors
    /// [`StoreError`].
    fn denial_lookup(
        &self,
        key: &ApprovalKey,
        now: Timestamp,
    ) -> Result<Option<Approval>, StoreError>;

    // Counters (RUNTIME §7).

    /// The digest of a call's arguments (RUNTIME §6): the audit record's `args_digest` and
    /// what an approval is bound to, so one backend's key serves both (a fleet shares
    /// one, since an approval is taken on any machine). `args` in any order.
    ///
    /// # Errors
    /// [`StoreError`] when the backend's key cannot be read.
    fn args_digest(&self, args: &[(&str, &ArgValue)]) -> Result<String, StoreError>;

    /// Whether a call of `tool` by `identity` at `now_ms` is within `limits`. Spends
    /// nothing.
    ///
    /// # Errors
    /// [`StoreError`] (callers fail closed).
    fn counter_check(
        &self,
        identity: &str,
        tool: &str,
        limits: Limits,
        now_ms: u64,
    ) -> Result<Verdict, StoreError>;

    // Admission: the one spending step.

    /// Admits a call: re-checks and takes every counter slot of `a`, takes its approval
    /// and makes its intent record durable (once the audit is write-ahead). All or
    /// nothing.
    ///
    /// # Errors
    /// [`AdmitError`]; then nothing was spent.
    fn admit(&self, a: &Admission<'_>) -> Result<Admitted, AdmitError>;

    // Audit (RUNTIME §6).

    /// Appends one record: a refusal, or a call's outcome.
    ///
    /// # Errors
    /// [`AuditError`].
    fn record(&self, entry: &Entry) -> Result<Appended, AuditError>;

    /// Whether a record could be appended now, checked before a call is prepared so that
    /// nothing single-use is spent on a call that could not be recorded.
    ///
    /// # Errors
    /// [`AuditError`].
    fn audit_ready(&self) -> Result<(), AuditError>;

    /// Walks the chain and names the first broken record.
    ///
    /// # Errors
    /// [`AuditError`] when the trail cannot be read.
    fn audit_verify(&self) -> Result<VerifyReport, AuditError>;

    /// The last `n` records, oldest first, and the length of a torn tail in bytes.
    ///
    /// # Errors
    /// [`AuditError`] when the trail cannot be read.
    fn audit_tail(&self, n: usize) -> Result<(Vec<TailLine>, u64), AuditError>;
}

/// The embedded backend: `$HCP_HOME`'s state files, as [`crate::session`],
/// [`crate::grant`], [`crate::approval`], [`crate::counter`] and [`crate::audit`] keep
/// them.
#[derive(Debug, Clone)]
pub struct FileState {
    home: Home,
}

impl FileState {
    /// The state of `home`. Does no I/O.
    pub fn new(home: &Home) -> Self {
        Self { home: home.clone() }
    }

    /// The home.
    pub fn home(&self) -> &Home {
        &self.home
    }
}

impl State for FileState {
    fn backend(&self) -> &'static str {
        "file"
    }

    fn session_start(
        &self,
        new: &NewSession,
        now: Timestamp,
    ) -> Result<(Token, Session), SessionError> {
        session::start(&self.home, new, now)
    }

    fn session_resolve(&self, token: &str, now: Timestamp) -> Result<Session, SessionError> {
        session::resolve(&self.home, token, now)
    }

    fn session_end(&self, token: &str, now: Timestamp) -> Result<(Session, bool), SessionError> {
        session::end(&self.home, token, now)
    }

    fn session_end_principal(
        &self,
        principal: &PrincipalId,
        now: Timestamp,
    ) -> Result<Vec<Session>, SessionError> {
        session::end_principal(&self.home, principal, now)
    }

    fn session_list(&self) -> Result<Vec<Session>, StoreError> {
        session::list(&self.home)
    }

    fn grants_held(
        &self,
        principal: &PrincipalId,
        pack: &PackId,
    ) -> Result<Vec<HeldCapability>, StoreError> {
        Ok(Grants::load(&self.home)?.held(principal, pack))
    }

    fn grant(
        &self,
        principal: &PrincipalId,
        scope: &PackScope,
        capabilities: &[Capability],
        now: Timestamp,
    ) -> Result<Vec<Grant>, StoreError> {
        grant::grant(&self.home, principal, scope, capabilities, now)
    }

    fn revoke(
        &self,
        principal: &PrincipalId,
        scope: &PackScope,
        capabilities: &[Capability],
    ) -> Result<Vec<Grant>, StoreError> {
        grant::revoke(&self.home, principal, scope, capabilities)
    }

    fn grants_list(&self) -> Result<Vec<Grant>, StoreError> {
        Ok(Grants::load(&self.home)?.all().to_vec())
    }

    fn pack_content_changed(&self, _pack: &PackId, _at: Timestamp) -> Result<(), StoreError> {
        Ok(())
    }

    fn pack_removed(&self, _pack: &PackId) -> Result<(), StoreError> {
        Ok(())
    }

    fn approval_request(
        &self,
        request: &ApprovalRequest,
        now: Timestamp,
    ) -> Result<Approval, StoreError> {
        approval::request(
            &self.home,
            &request.key.call(),
            request.summary.clone(),
            request.window_s,
            now,
        )
    }

    fn approval_lookup(
        &self,
        key: &ApprovalKey,
        now: Timestamp,
    ) -> Result<Option<Approval>, StoreError> {
        approval::lookup(&self.home, &key.call(), now)
    }

    fn approvals_list(&self) -> Result<Vec<Approval>, StoreError> {
        approval::list(&self.home)
    }

    fn approve(&self, id: &str, now: Timestamp) -> Result<Approval, ApprovalError> {
        approval::approve(&self.home, id, now)
    }

    fn deny(&self, id: &str, now: Timestamp) -> Result<Approval, ApprovalError> {
        approval::deny(&self.home, id, now)
    }

    fn denial_lookup(
        &self,
        key: &ApprovalKey,
        now: Timestamp,
    ) -> Result<Option<Approval>, StoreError> {
        approval::denial(&self.home, &key.call(), now)
    }

    /// Today the unkeyed `sha256:` digest ([`crate::audit::args_digest`]); the keyed one
    /// (a per-store secret) replaces it with the write-ahead audit.
    fn args_digest(&self, args: &[(&str, &ArgValue)]) -> Result<String, StoreError> {
        Ok(crate::audit::args_digest(args.iter().copied()))
    }

    fn counter_check(
        &self,
        identity: &str,
        tool: &str,
        limits: Limits,
        now_ms: u64,
    ) -> Result<Verdict, StoreError> {
        Counters::new(&self.home).check(identity, tool, limits, now_ms)
    }

    /// The file backend's admission: the trail must open for append; every counter slot is
    /// held under its key's lock (in a fixed order) and re-checked; then the approval is
    /// taken under the store lock; then the slots are written. A failure before the last
    /// step spends nothing; a counter that cannot be written after the approval was taken
    /// gives the approval back. (Until the audit trail is write-ahead, a crash between the
    /// approval and the counters can leave the approval used: the intent record will name
    /// what a call spends.)
    fn admit(&self, a: &Admission<'_>) -> Result<Admitted, AdmitError> {
        AuditLog::new(&self.home)
            .ensure_writable()
            .map_err(AdmitError::Audit)?;
        let counters = Counters::new(&self.home);
        let mut order: Vec<&CounterSlot> = a.counters.iter().collect();
        order.sort_by(|x, y| (&x.identity, &x.tool).cmp(&(&y.identity, &y.tool)));
        order.dedup_by(|x, y| x.identity == y.identity && x.tool == y.tool);
        let mut held = Vec::with_capacity(order.len());
        for slot in order {
            match counters
                .hold(&slot.identity, &slot.tool, slot.limits, slot.now_ms)
                .map_err(AdmitError::Counter)?
            {
                Ok(h) => held.push(h),
                Err(verdict) => {
                    return Err(AdmitError::Limit {
                        tool: slot.tool.clone(),
                        verdict,
                    });
                }
            }
        }
        let mut admitted = Admitted::default();
        let give_back = |ids: &[String]| {
            for id in ids {
                let _ = approval::restore(&self.home, id);
            }
        };
        for k in a.approvals {
            let taken = approval::take(&self.home, &k.call(), a.now);
            match taken {
                Ok(Some(t)) => admitted.approval_ids.push(t.id),
                Ok(None) => {
                    give_back(&admitted.approval_ids);
                    return Err(AdmitError::ApprovalGone);
                }
                Err(e) => {
                    give_back(&admitted.approval_ids);
                    return Err(AdmitError::Approval(e));
                }
            }
        }
        for h in held {
            if let Err(e) = h.commit() {
                give_back(&admitted.approval_ids);
                return Err(AdmitError::Counter(e));
            }
        }
        Ok(admitted)
    }

    fn record(&self, entry: &Entry) -> Result<Appended, AuditError> {
        AuditLog::new(&self.home).append(entry)
    }

    fn audit_ready(&self) -> Result<(), AuditError> {
        AuditLog::new(&self.home).ensure_writable()
    }

    fn audit_verify(&self) -> Result<VerifyReport, AuditError> {
        AuditLog::new(&self.home).verify()
    }

    fn audit_tail(&self, n: usize) -> Result<(Vec<TailLine>, u64), AuditError> {
        AuditLog::new(&self.home).tail(n)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::audit::Decision;

    fn entry() -> Entry {
        Entry {
            principal: "agent".into(),
            project: None,
            pack_id: Some("p".into()),
            verb_key: "v".into(),
            operation: None,
            land: None,
            decision: Decision::Allow,
            code: None,
            args_digest: crate::audit::args_digest(std::iter::empty()),
            exit_code: None,
            duration_ms: 0,
            extra: BTreeMap::new(),
        }
    }

    fn key() -> ApprovalKey {
        ApprovalKey {
            tool: "p.v".into(),
            principal: "agent".into(),
            principal_digest: "d".into(),
            args_digest: "a".into(),
            policy_hash: "h".into(),
            escalation: false,
        }
    }

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    #[test]
    fn the_state_is_object_safe_and_admit_spends_all_or_nothing() {
        let d = tempfile::tempdir().unwrap();
        let home = Home::open(d.path()).unwrap();
        let state: std::sync::Arc<dyn State> = std::sync::Arc::new(FileState::new(&home));
        let limits = Limits {
            rate_limit: Some(1),
            budget: None,
            window_ms: 60_000,
        };
        let slot = CounterSlot {
            identity: "agent".into(),
            tool: "p.v".into(),
            limits,
            now_ms: 1_000,
        };
        let e = entry();
        // A pending approval that nobody granted: admission refuses and spends the slot not.
        let request = ApprovalRequest {
            key: key(),
            summary: BTreeMap::new(),
            window_s: Some(60),
        };
        let a = state.approval_request(&request, t(0)).unwrap();
        let pack = PackId::parse("p").unwrap();
        let adm = Admission {
            session: Some("sha256:00"),
            pack: &pack,
            capabilities: &[Capability::VerbExecRead],
            intent: &e,
            counters: std::slice::from_ref(&slot),
            approvals: std::slice::from_ref(&request.key),
            now: t(1),
        };
        assert_eq!(
            state.admit(&adm).unwrap_err().code(),
            Code::RequiresConfirmation
        );
        assert_eq!(
            state.counter_check("agent", "p.v", limits, 1_000).unwrap(),
            Verdict::Ok
        );
        // Granted: the lookup spends nothing, admission takes both.
        state.approve(&a.id, t(2)).unwrap();
        assert!(state.approval_lookup(&key(), t(3)).unwrap().is_some());
        assert!(state.approval_lookup(&key(), t(3)).unwrap().is_some());
        assert_eq!(state.admit(&adm).unwrap().approval_ids, vec![a.id.clone()]);
        assert_eq!(
            state.counter_check("agent", "p.v", limits, 1_000).unwrap(),
            Verdict::RateLimit
        );
        assert!(state.approval_lookup(&key(), t(4)).unwrap().is_none());
        // A spent slot refuses admission before the approval is looked at.
        let again = Admission {
            approvals: &[],
            ..adm
        };
        assert_eq!(state.admit(&again).unwrap_err().code(), Code::RateLimit);
    }
}
