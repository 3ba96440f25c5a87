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
//! call, takes the approval it uses, and makes the call's `intent` record durable — all
//! or nothing: when it fails, nothing was spent and nothing runs. Everything that can
//! refuse a call without spending runs before it.
//!
//! # Audit (RUNTIME §6)
//!
//! A refusal is one record ([`State::record`]). An allowed call is two: its `intent`,
//! written by [`State::admit`] before anything runs, and its `outcome`
//! ([`State::record_outcome`]) when it ends, whatever the end (a run, a timeout, a
//! cancel, a spawn that failed after admission). A call without outcome is
//! `interrupted` (hcp was killed), never damage.

use crate::StoreError;
use crate::approval::{self, Approval, ApprovalError};
use crate::audit::checkpoint::Checkpoint;
use crate::audit::witness::{Held, Witness};
use crate::audit::{
    self, Against, Appended, AuditError, AuditFollow, AuditLog, AuditReport, Authority,
    CheckpointSource, DigestKey, Entry, Intent, Outcome, StepHook,
};
use crate::counter::{Counters, Limits, Verdict};
use crate::grant::{self, Grant, Grants, HeldCapability, PackScope};
use crate::home::Home;
use crate::pack::InstalledPack;
use crate::session::{self, BadSession, NewSession, PrincipalId, Session, SessionError, Token};
use hcp_model::{ArgValue, Capability, Code, PackId};
use jiff::Timestamp;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

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
    /// The session's short id the call was made under (shown by `hcp approvals`; the
    /// key's principal digest is what binds it, RUNTIME §7).
    pub session: Option<String>,
    /// The call's project (shown by `hcp approvals`; bound through the key likewise).
    pub project: Option<String>,
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
    /// The call's `intent` record (RUNTIME §6), made durable by the admission.
    pub intent: &'a Intent,
    /// The counter slots to take, each re-checked.
    pub counters: &'a [CounterSlot],
    /// The approvals to take, as the dry pre-gate found them (one per tool that needed
    /// confirmation; a call of one verb has at most one).
    pub approvals: &'a [ApprovalKey],
    /// The call's time.
    pub now: Timestamp,
}

/// An admitted call: its durable intent record and what it spent.
#[derive(Debug, Clone, PartialEq)]
pub struct Admitted {
    /// The intent record. Its `id` is the call's `audit_id`, which its outcome names
    /// ([`Outcome::intent`]).
    pub intent: Appended,
    /// The approvals taken, in the order of [`Admission::approvals`].
    pub approval_ids: Vec<String>,
}

impl Admitted {
    /// The call's `audit_id`: its intent record's `id`.
    pub fn audit_id(&self) -> &str {
        &self.intent.id
    }
}

/// Why a call is not admitted. Nothing was spent and no intent was written: the call does
/// not run.
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
    /// The approval was used by another call since the dry check, or expired
    /// (`requires_confirmation`).
    #[error("the approval of this call was used by another call")]
    ApprovalGone,
    /// The session ended or expired since the snapshot (`bad_session`). A backend that
    /// re-checks the session at admission answers it (the file backend relies on its
    /// snapshot).
    #[error(transparent)]
    Session(BadSession),
    /// A grant the gate found was revoked, or suspended by a change of the pack's
    /// content, since the snapshot (`missing_grant`).
    #[error("the grant of `{capability}` was revoked or suspended since the call was checked")]
    Grant {
        /// The capability (`verb.exec.read` …).
        capability: String,
    },
    /// The call's intent record cannot be made durable (`audit_unavailable`, or the
    /// record's own code: [`AuditError::code`]).
    #[error("the audit trail cannot be written")]
    Audit(#[source] AuditError),
    /// The backend failed (unreachable: `state_unavailable`; or the store's code).
    #[error("the state backend failed")]
    State(#[source] StoreError),
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
            Self::Session(_) => Code::BadSession,
            Self::Grant { .. } => Code::MissingGrant,
            Self::Audit(e) => e.code(),
            Self::State(e) => e.code(),
        }
    }
}

/// What [`State::call_reads`] read, each part as found.
#[derive(Debug)]
pub struct CallReads {
    /// The session of the token; `None` when the call gave none (the owner).
    pub session: Option<Result<Session, SessionError>>,
    /// What the session's principal holds on the pack, its own grants and the `*`
    /// ones: empty for the owner, for a refused session and when no pack was given.
    pub grants: Result<Vec<HeldCapability>, StoreError>,
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

    /// Stores a session [`crate::session::prepare`] made (its token and session), so that
    /// its start can be recorded, with its id, before it is stored (RUNTIME §6: `session
    /// start` is an act of authority).
    ///
    /// # Errors
    /// [`SessionError`]: the store's.
    fn session_start_prepared(
        &self,
        prepared: (Token, Session),
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

    /// [`State::session_end`] of the session whose `token_sha256` is given (`sha256:` and
    /// 64 hex digits), for `hcp session end ID` (the id `session list` shows).
    ///
    /// # Errors
    /// [`SessionError::Bad`] (`bad_session`) for no such session; [`SessionError::Store`].
    fn session_end_digest(
        &self,
        token_sha256: &str,
        now: Timestamp,
    ) -> Result<(Session, bool), SessionError>;

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

    /// The state a call reads before its gate (RUNTIME §5 steps 2–4, and the sessions
    /// whose working directories the child's confinement hides): the session of `token`
    /// (`None`: no token, the owner), what its principal holds on `pack`, and, when
    /// `pack` is given (the call's target resolved), every session's working directory.
    /// Spends and writes nothing.
    ///
    /// The default asks [`State::session_resolve`], [`State::grants_held`] and
    /// [`State::session_list`] in turn; a backend across a network answers in one round
    /// trip. Each part keeps its own failure (see [`CallReads`]).
    fn call_reads(&self, token: Option<&str>, pack: Option<&PackId>, now: Timestamp) -> CallReads {
        let session = token.map(|t| self.session_resolve(t, now));
        let grants = match (&session, pack) {
            (Some(Ok(s)), Some(p)) => self.grants_held(&s.principal, p),
            _ => Ok(Vec::new()),
        };
        CallReads { session, grants }
    }

    /// [`State::call_reads`] for a call whose target pack is already loaded: `pack` is
    /// the loaded pack, whose install record a backend keeping its grant counts there
    /// (the file store) takes as read instead of reading it again. The default asks
    /// [`State::call_reads`] with the pack's id.
    fn call_reads_loaded(
        &self,
        token: Option<&str>,
        pack: Option<&InstalledPack>,
        now: Timestamp,
    ) -> CallReads {
        self.call_reads(token, pack.map(|p| &p.id), now)
    }

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

    /// Records that `pack`, with files digest `files_digest`, was installed on this
    /// machine at `now`; `changed_at` is the install record's `content_changed_at` (set
    /// when a reinstall here changed the content). Returns the pack's content change as
    /// the state knows it. A backend shared by a fleet also notices a pack installed here
    /// with other content than another machine's, and suspends the grants fleet-wide
    /// (RUNTIME §3, §9). Called on every install, so that it is idempotent: a repeat
    /// records nothing new. The default records `changed_at` through
    /// [`State::pack_content_changed`].
    ///
    /// # Errors
    /// [`StoreError`].
    fn pack_installed(
        &self,
        pack: &PackId,
        files_digest: &str,
        changed_at: Option<Timestamp>,
        now: Timestamp,
    ) -> Result<Option<Timestamp>, StoreError> {
        let _ = (files_digest, now);
        if let Some(at) = changed_at {
            self.pack_content_changed(pack, at)?;
        }
        Ok(changed_at)
    }

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

    /// Admits a call: re-checks and takes every counter slot of `a`, takes its approvals
    /// and makes its intent record durable (RUNTIME §6: before the child starts). All or
    /// nothing: when it fails, nothing was spent and the call must not run. A backend that
    /// keeps sessions and grants for several machines re-checks them too.
    ///
    /// # Errors
    /// [`AdmitError`]; then nothing was spent.
    fn admit(&self, a: &Admission<'_>) -> Result<Admitted, AdmitError>;

    // Audit (RUNTIME §6).

    /// Appends a one-record decision, durable on return: a refusal (`deny`), or an
    /// allowed decision that runs nothing (a binding stored or removed: an `event`).
    ///
    /// # Errors
    /// [`AuditError`].
    fn record(&self, entry: &Entry) -> Result<Appended, AuditError>;

    /// Appends the `outcome` of an admitted call (RUNTIME §6): what became of it (exit
    /// code, duration, byte counts, `truncated`, a code for a timeout, a cancel, a spawn
    /// that failed after admission …), naming its intent. It need not be durable on its
    /// own: the next durable record carries it (a crash before that leaves the call
    /// `interrupted`, never a broken chain).
    ///
    /// # Errors
    /// [`AuditError`].
    fn record_outcome(&self, outcome: &Outcome) -> Result<Appended, AuditError>;

    /// Whether a record could be appended now: a cheap look before a call is prepared,
    /// so that a call that could not be recorded stops early. [`State::admit`] makes
    /// every check again.
    ///
    /// # Errors
    /// [`AuditError`].
    fn audit_ready(&self) -> Result<(), AuditError>;

    /// Walks every chain the backend keeps (the file store: one; a database: one per
    /// machine) and names the first fault of each; with `checkpoint`, also whether the
    /// chain extends it.
    ///
    /// # Errors
    /// [`AuditError`] when the records cannot be read; [`AuditError::Unsupported`] for a
    /// checkpoint the backend cannot check.
    fn audit_verify(&self, checkpoint: Option<&Checkpoint>) -> Result<AuditReport, AuditError>;

    /// [`State::audit_verify`] against every checkpoint of `held`, from `source` (`hcp
    /// audit verify --checkpoint FILE` with a witness's file of them, or `--witness DIR`
    /// with a witness's directory). The default checks the newest.
    ///
    /// # Errors
    /// As [`State::audit_verify`].
    fn audit_verify_held(
        &self,
        held: &Held,
        source: CheckpointSource,
    ) -> Result<AuditReport, AuditError> {
        let _ = source;
        self.audit_verify(held.newest())
    }

    /// The last `n` records, oldest first, each one JSON object (the file store: the line
    /// as stored), and the length in bytes of a torn last line (0 when there is none).
    ///
    /// # Errors
    /// [`AuditError`] when the records cannot be read.
    fn audit_tail(&self, n: usize) -> Result<(Vec<Vec<u8>>, u64), AuditError>;

    /// A reader of the records appended from now on, after the last `n`
    /// (`hcp audit tail --follow`).
    ///
    /// # Errors
    /// [`AuditError`] when the records cannot be read; [`AuditError::Unsupported`] by
    /// default.
    fn audit_follow(&self, n: usize) -> Result<Box<dyn AuditFollow>, AuditError> {
        let _ = n;
        Err(AuditError::Unsupported {
            backend: self.backend(),
            what: "following the audit records",
        })
    }

    /// At most `max` records after `from` (one position per chain; a chain it does not
    /// name is read from its start), each verified, oldest first within each chain, and
    /// the first that does not verify (`hcp audit export`, RUNTIME §11). Takes no lock
    /// on the trail and writes nothing.
    ///
    /// # Errors
    /// [`AuditError`] when the records cannot be read; [`AuditError::Unsupported`] by
    /// default.
    fn audit_read(
        &self,
        from: &[audit::ChainPos],
        max: usize,
    ) -> Result<audit::ReadBatch, AuditError> {
        let _ = (from, max);
        Err(AuditError::Unsupported {
            backend: self.backend(),
            what: "reading the audit records from a position",
        })
    }

    /// Signs a checkpoint of `count` records ending with `head` at `now` (`hcp audit
    /// checkpoint`); the caller verified the chain first.
    ///
    /// # Errors
    /// [`AuditError`] when the key cannot be read or made; [`AuditError::Unsupported`]
    /// by default.
    fn audit_checkpoint(
        &self,
        count: u64,
        head: &str,
        now: Timestamp,
    ) -> Result<Checkpoint, AuditError> {
        let _ = (count, head, now);
        Err(AuditError::Unsupported {
            backend: self.backend(),
            what: "signed checkpoints",
        })
    }

    // Acts of authority and the witness (RUNTIME §6).

    /// Records an act of authority (RUNTIME §6) — `init`, `install`, `grant`, `session
    /// start` … — and has the witness (`audit.witness`) take a checkpoint of the act's own
    /// record (its `seq` and `hash`, whatever another process appended meanwhile). The one path every act of authority goes through, in this order:
    /// the command checks the act, calls this, and makes the change only when it returns
    /// `Ok`; an act that cannot be recorded, or witnessed, does not happen (74). The
    /// witness is looked at first (a probe of the file it appends to), so a witness that
    /// cannot take a checkpoint refuses the act before its record is written; one that
    /// fails after the record was written has an [`crate::audit::ACT_FAILED`] record
    /// appended naming the act's `seq` and `witness_unavailable`, so the trail never
    /// states an act that did not happen, and never holds an act without a record.
    ///
    /// # Errors
    /// [`AuditError::Witness`] (`witness_unavailable`, 74); any other [`AuditError`]
    /// (`audit_unavailable`, `state_unavailable`).
    fn record_authority(&self, act: &Authority) -> Result<Appended, AuditError>;

    /// Whether an act of authority could be witnessed now: the look
    /// [`State::record_authority`] makes first, for a command to make before anything of
    /// the act (or of what it notices, `hcp_runtime::authority::note_files`) is written.
    /// `Ok` without a witness.
    ///
    /// # Errors
    /// [`AuditError::Witness`] (`witness_unavailable`, 74).
    fn authority_ready(&self) -> Result<(), AuditError> {
        Ok(())
    }

    /// Records an act noticed at a call rather than made by a command — a changed runtime
    /// policy or `config.json` (RUNTIME §6) — as [`State::record_authority`] does, except
    /// that the witness never refuses it: the record is made durable (an error here
    /// refuses the call, as any call whose audit fails), then the witness is asked for a
    /// checkpoint, and a witness that cannot take one (`witness_unavailable`) leaves the
    /// checkpoint to the next act of authority or the next 100th call. A witness refuses
    /// acts of authority, never calls.
    ///
    /// The default is [`State::record_authority`] (stricter: a witness that fails
    /// refuses).
    ///
    /// # Errors
    /// Any [`AuditError`] but [`AuditError::Witness`] (`audit_unavailable`,
    /// `state_unavailable`).
    fn record_noticed(&self, act: &Authority) -> Result<Appended, AuditError> {
        self.record_authority(act)
    }

    /// Holds the lock that orders acts of authority and changes of the witness
    /// ([`crate::audit::ActsLock`], RUNTIME §6) until the answer is dropped: a command that
    /// changes the witness holds it from its record to the write of `config.json`, so no
    /// act between sees the two disagree. Take it after the store lock. `None` (the
    /// default): the backend orders its acts otherwise.
    ///
    /// # Errors
    /// [`AuditError`] when the lock cannot be taken.
    fn hold_acts(&self) -> Result<Option<crate::audit::ActsLock>, AuditError> {
        Ok(None)
    }

    /// Records `act`, a change of the witness itself (`hcp config set` / `unset
    /// audit.witness`), witnessed by the new `witness` rather than the configured one, and
    /// the record naming the new witness (RUNTIME §6). The default is
    /// [`State::record_authority`].
    ///
    /// # Errors
    /// As [`State::record_authority`].
    fn record_witness_change(
        &self,
        act: &Authority,
        witness: Option<Arc<dyn Witness>>,
    ) -> Result<Appended, AuditError> {
        let _ = witness;
        self.record_authority(act)
    }

    /// The store's chain key, when this backend holds it already (read once per process,
    /// [`AuditLog`]'s; a machine's own for a database backend), for the MACs of the
    /// store's own stamps (`hcp_runtime::authority::note_files`). `None` when it cannot be
    /// read: the caller reads `audit/chain.key` itself, or treats what it guards as
    /// unknown.
    fn stamp_key(&self) -> Option<crate::audit::ChainKey> {
        None
    }

    /// After a call has answered (off the call path): when one of the records this
    /// process appended is a multiple of 100 in its chain, has the witness take a
    /// checkpoint. `Ok(None)` when none is due or no witness is configured.
    ///
    /// # Errors
    /// [`AuditError`]; the call has answered already, so callers report it and go on.
    fn witness_after_call(&self) -> Result<Option<Checkpoint>, AuditError> {
        Ok(None)
    }

    /// The witness, as `hcp doctor` names it (`directory /srv/w`, `state`); `None` when
    /// none is configured.
    fn audit_witness(&self) -> Option<String> {
        None
    }

    /// The witness the trail's last `witness` record names (RUNTIME §6), as the runtime
    /// names it; `None` when it names none (or the backend does not keep it): `hcp config
    /// unset audit.witness` records the change even when `config.json` names none any
    /// more, so that acts refused for a witness removed by hand can go on.
    ///
    /// # Errors
    /// [`AuditError`] when the trail cannot be read.
    fn trail_witness(&self) -> Result<Option<String>, AuditError> {
        Ok(None)
    }

    /// This machine's id in a fleet, whose chain of the audit is its own (RUNTIME §9);
    /// `None` for the file store's one trail.
    fn machine(&self) -> Option<String> {
        None
    }
}

/// The embedded backend: `$HCP_HOME`'s state files, as [`crate::session`],
/// [`crate::grant`], [`crate::approval`], [`crate::counter`] and [`crate::audit`] keep
/// them. Its audit is write-ahead: [`State::admit`] is [`AuditLog::admit`] (the intent
/// record is the spend of its counter slots and approval), [`State::record_outcome`] is
/// [`AuditLog::outcome`]. The argument digest is keyed by the store's [`DigestKey`],
/// read once per `FileState`.
#[derive(Clone)]
pub struct FileState {
    home: Home,
    log: AuditLog,
    key: Arc<OnceLock<DigestKey>>,
    witness: Option<Arc<dyn Witness>>,
    /// Whether the witness is `config.json`'s, read again by each act under the lock that
    /// orders acts ([`FileState::with_configured_witness`]).
    follow_config: bool,
    /// A record this process appended was a multiple of 100 (a checkpoint is due).
    due: Arc<AtomicBool>,
}

/// The time of an appended record.
/// Notes in the state ledger ([`crate::ledger`]) the `.used` markers the admission wrote
/// for `ids`, under the store lock, after the intent (the trail's lock is released: the
/// store lock is never taken under it). Best effort: a marker the ledger misses refuses
/// nothing (a spent approval stays spent); one it holds cannot be removed to spend it
/// again.
fn note_spent(home: &Home, ids: &[String]) {
    let Ok(lock) = crate::StoreLock::acquire(home) else {
        return;
    };
    let changes: Vec<(std::path::PathBuf, Option<String>)> = ids
        .iter()
        .filter_map(|id| {
            let p = approval::used_marker(home, id);
            let b = crate::atomic::read_record(&p).ok()??;
            Some((p, Some(crate::ledger::marker_digest(&b))))
        })
        .collect();
    let refs: Vec<(&std::path::Path, Option<String>)> = changes
        .iter()
        .map(|(p, v)| (p.as_path(), v.clone()))
        .collect();
    let _ = crate::ledger::note(home, &lock, &refs);
}

fn act_time(a: &Appended) -> Timestamp {
    a.ts
}

impl std::fmt::Debug for FileState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileState")
            .field("home", &self.home.root())
            .finish_non_exhaustive()
    }
}

impl FileState {
    /// The state of `home`. Does no I/O.
    pub fn new(home: &Home) -> Self {
        Self {
            home: home.clone(),
            log: AuditLog::new(home),
            key: Arc::new(OnceLock::new()),
            witness: None,
            follow_config: false,
            due: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Has `witness` take the trail's checkpoints (`audit.witness`, RUNTIME §6).
    pub fn with_witness(mut self, witness: Arc<dyn Witness>) -> Self {
        self.witness = Some(witness);
        self
    }

    /// Replaces the audit trail's settings (crash tests, a small reserve, a failing
    /// write): `f` gets the trail and answers the one to use.
    pub fn with_audit_log(mut self, f: impl FnOnce(AuditLog) -> AuditLog) -> Self {
        self.log = f(self.log);
        self
    }

    /// Has the witness `config.json` names take the trail's checkpoints (`audit.witness`,
    /// RUNTIME §6): `witness`, as this process read it at its start, for what it reads;
    /// each act of authority, each checkpoint and `hcp audit verify` read `config.json`
    /// again ([`crate::audit::witness::of_config`]), an act under the lock that orders
    /// acts ([`crate::audit::ActsLock`]), so an act never uses a witness that another
    /// process's recorded act has moved from since this process started.
    pub fn with_configured_witness(mut self, witness: Option<Arc<dyn Witness>>) -> Self {
        self.witness = witness;
        self.follow_config = true;
        self
    }

    /// The witness, if one is configured (as this process read it at its start).
    pub fn witness(&self) -> Option<&Arc<dyn Witness>> {
        self.witness.as_ref()
    }

    /// The witness to use now: with [`FileState::with_configured_witness`], the one
    /// `config.json` names now (a `config.json` that does not parse: a witness that
    /// refuses, [`crate::audit::witness::UnknownWitness`]; one that now names a fleet's
    /// `state`: the one this process started with); else the one given.
    fn witness_now(&self) -> Option<Arc<dyn Witness>> {
        if !self.follow_config {
            return self.witness.clone();
        }
        match crate::config::StateConfig::load_with_witness(self.home.root()) {
            Ok((None, w)) => crate::audit::witness::of_config(w),
            Ok((Some(_), _)) => self.witness.clone(),
            Err(e) => Some(Arc::new(crate::audit::witness::UnknownWitness {
                why: e.to_string(),
            })),
        }
    }

    /// `witness`'s [`Witness::ready_for`] this store (its id from `store.json`), then
    /// [`AuditLog::check_named`]: the witness must be the one the trail's last
    /// `witness` record names, when it names one.
    fn ready_with(&self, witness: Option<&Arc<dyn Witness>>) -> Result<(), AuditError> {
        if let Some(w) = witness {
            let store = crate::made::Marker::read(self.home.root())
                .ok()
                .flatten()
                .map(|m| m.store_id);
            w.ready_for(store.as_deref())?;
        }
        let configured = witness.map(|w| w.describe());
        self.log.check_named(configured.as_deref())
    }

    fn note(&self, a: &Appended) {
        if a.seq
            .is_multiple_of(crate::audit::witness::CALLS_PER_CHECKPOINT)
        {
            self.due.store(true, Ordering::Relaxed);
        }
    }

    /// What the trail is checked against by default (RUNTIME §6): the witness's newest
    /// checkpoint; without a witness, the store's own last one; a verifier that cannot
    /// read the chain key (the bootstrap pack's child) and cannot reach the witness checks
    /// the store's last one too.
    ///
    /// With it, what the witness holds, when it could be read (even empty).
    fn default_against(&self, witness: Option<&Arc<dyn Witness>>) -> (Against, Option<Held>) {
        let last = || match crate::audit::checkpoint::last(&self.log) {
            Ok(Some(c)) => Against::Checkpoint(c, CheckpointSource::Last),
            Ok(None) => Against::Nothing,
            Err(e) => Against::Forged(CheckpointSource::Last, e.to_string()),
        };
        let Some(w) = witness else {
            return (last(), None);
        };
        let source = CheckpointSource::Witness(w.describe());
        let store = match crate::made::Marker::read(self.home.root()) {
            Ok(Some(m)) => m.store_id,
            _ => return (last(), None),
        };
        match w.held(&store, None) {
            // A witness that holds nothing yet, and no line of it: the store's own last.
            Ok(h) if h.checkpoints.is_empty() && h.forged.is_none() && h.torn.is_empty() => {
                (last(), Some(h))
            }
            Ok(h) => (Against::Held(h.clone(), source), Some(h)),
            // A witness outside this view (the bootstrap pack's child), or not known
            // because `config.json` does not parse (which is reported where it is read):
            // the store's own last checkpoint.
            Err(_) if !self.log_key_readable() => (last(), None),
            Err(crate::audit::witness::WitnessError::Config(_)) => (last(), None),
            Err(e) => (Against::Unavailable(source, e.to_string()), None),
        }
    }

    /// What each witness the trail named before the configured one holds (RUNTIME §6), by
    /// the name the trail gives it: read from its directory (`directory DIR`); one whose
    /// directory or file of this store is gone was retired. Nothing for a verifier that
    /// cannot read the chain key (the bootstrap pack's child sees no witness).
    fn earlier_witnesses(
        &self,
        r: &crate::audit::VerifyReport,
        witness: Option<&Arc<dyn Witness>>,
    ) -> std::collections::BTreeMap<String, Earlier> {
        let mut out = std::collections::BTreeMap::new();
        if !self.log_key_readable() {
            return out;
        }
        let configured = witness.map(|w| w.describe());
        let Ok(Some(store)) =
            crate::made::Marker::read(self.home.root()).map(|m| m.map(|m| m.store_id))
        else {
            return out;
        };
        for name in r.witness_named.iter().filter_map(|n| n.witness.as_ref()) {
            if Some(name) == configured.as_ref() || out.contains_key(name) {
                continue;
            }
            let Some(dir) = name.strip_prefix("directory ") else {
                out.insert(
                    name.clone(),
                    Earlier::Gone("it is not a directory, so it cannot be read from here".into()),
                );
                continue;
            };
            let w = crate::audit::witness::DirWitness::new(dir);
            let file = w.file(&store);
            let e = match w.held(&store, None) {
                Err(_) if !std::path::Path::new(dir).exists() => {
                    Earlier::Gone(format!("its directory `{dir}` is gone"))
                }
                Ok(h)
                    if h.checkpoints.is_empty()
                        && h.forged.is_none()
                        && h.torn.is_empty()
                        && !file.exists() =>
                {
                    Earlier::Gone(format!("its file `{}` is gone", file.display()))
                }
                Ok(h) => Earlier::Held(h),
                Err(e) => Earlier::Unreadable(e.to_string()),
            };
            out.insert(name.clone(), e);
        }
        out
    }

    /// Holds the configuration and the witnesses to what the trail says of its witness
    /// (RUNTIME §6). A trail whose last [`crate::audit::WITNESS_ACT`] record names a
    /// witness must still have that witness configured. Each witness the trail named — the
    /// configured one and each before it, over the part of the trail it witnessed (from
    /// the first record naming it to the record naming the next) — must hold the
    /// checkpoint of each record naming it (its first of this store), one at least as new
    /// as every act of authority it took a checkpoint of, and the checkpoint of each such
    /// act's own record (interrupted acts and the newest of each part left out: a kill may
    /// have stopped their checkpoint). A witness removed from `config.json` is
    /// `witness_unavailable`, as is an earlier one that cannot be read; checkpoints removed
    /// from a witness (its file emptied or cut; for the configured one, deleted too) are
    /// `checkpoint_mismatch`. An earlier witness whose directory or file is gone was
    /// retired by the act that named the next: a note
    /// ([`crate::audit::VerifyReport::retired_witnesses`]), not a fault — when it held the
    /// trail's checkpoints first (an act of its part was made while it was the witness), or
    /// was named by an act hcp was killed in before its first checkpoint (a crash: noted
    /// so); one that never held them otherwise was not retired (`witness_unavailable`).
    fn witness_faults(
        &self,
        r: &mut crate::audit::VerifyReport,
        held: Option<&Held>,
        earlier: &std::collections::BTreeMap<String, Earlier>,
        witness: Option<&Arc<dyn Witness>>,
    ) {
        let Some(last) = r.witness_named.last().cloned() else {
            return;
        };
        let fail = |r: &mut crate::audit::VerifyReport, fault, line, detail: String| {
            r.broken = Some(crate::audit::Broken {
                fault,
                line,
                id: None,
                expected: None,
                found: None,
                detail,
            });
        };
        let configured = witness.map(|w| w.describe());
        if let Some(named) = &last.witness {
            match &configured {
                None => {
                    return fail(
                        r,
                        crate::audit::Fault::WitnessUnavailable,
                        0,
                        format!(
                            "`config.json` names no `audit.witness`, while record {} of the trail says its checkpoints go to the witness ({named}): the witness was removed from the configuration without `hcp config unset audit.witness`",
                            last.seq
                        ),
                    );
                }
                Some(c) if c != named && held.is_some() => {
                    return fail(
                        r,
                        crate::audit::Fault::WitnessUnavailable,
                        0,
                        format!(
                            "`config.json` names the witness ({c}), while record {} of the trail says its checkpoints go to the witness ({named}): the witness was changed without `hcp config set audit.witness`",
                            last.seq
                        ),
                    );
                }
                Some(_) => {}
            }
        }
        // The parts of the trail: each run of records naming one witness.
        let mut runs: Vec<(Option<String>, Vec<crate::audit::WitnessNamed>)> = Vec::new();
        for n in &r.witness_named {
            match runs.last_mut() {
                Some((w, run)) if *w == n.witness => run.push(n.clone()),
                _ => runs.push((n.witness.clone(), vec![n.clone()])),
            }
        }
        let total = runs.len();
        for (i, (named, run)) in runs.iter().enumerate() {
            let Some(named) = named else {
                continue;
            };
            let current = i + 1 == total;
            let until = runs.get(i + 1).map(|(_, next)| next[0].seq);
            let h = if Some(named) == configured.as_ref() {
                // A witness this process cannot read (the bootstrap pack's child sees the
                // store without it; a `config.json` that does not parse): nothing more
                // to hold it to.
                match held {
                    Some(h) => h,
                    None => continue,
                }
            } else {
                match earlier.get(named) {
                    Some(Earlier::Held(h)) => h,
                    Some(Earlier::Gone(why)) => {
                        // Retired only after it held the trail's checkpoints: an act of
                        // its part (the one that named it included, the one that named
                        // the next left out, witnessed by that one) was made while it was
                        // the witness, so it took that act's checkpoint.
                        let from = run[0].seq;
                        let end = until.unwrap_or(u64::MAX);
                        let held_once = r
                            .witnessed_acts
                            .iter()
                            .any(|&a| a + 1 >= from && a < end && Some(a + 1) != until);
                        // Named by an act that hcp was killed in before its checkpoint
                        // (an intent without completion): a crash, noted, not a fault.
                        let interrupted = r.interrupted_acts.iter().any(|i| i.seq + 1 == from);
                        if !held_once && !interrupted {
                            let part = match until {
                                Some(u) => format!("from record {from} to record {u}"),
                                None => format!("from record {from}"),
                            };
                            return fail(
                                r,
                                crate::audit::Fault::WitnessUnavailable,
                                0,
                                format!(
                                    "the witness ({named}), which the trail names {part}, holds no checkpoint of this store ({why}), and no act of that part of the trail was made while it was the witness: it never held this trail's checkpoints, so it was not retired (a witness is retired only by the recorded act that names the next one, after it held them)"
                                ),
                            );
                        }
                        let why = if held_once {
                            why.clone()
                        } else {
                            format!(
                                "{why}; it never held this trail's checkpoints: the act that named it, record {}, was interrupted before its first",
                                from - 1
                            )
                        };
                        r.retired_witnesses.push(crate::audit::RetiredWitness {
                            witness: named.clone(),
                            from: run[0].seq,
                            until: until.unwrap_or(0),
                            why,
                        });
                        continue;
                    }
                    Some(Earlier::Unreadable(why)) => {
                        return fail(
                            r,
                            crate::audit::Fault::WitnessUnavailable,
                            0,
                            format!(
                                "the witness ({named}), which the trail names from record {}, cannot be read: {why}",
                                run[0].seq
                            ),
                        );
                    }
                    None => continue,
                }
            };
            let who = match until {
                Some(u) if !current => format!(
                    "the witness ({named}), the trail's from record {} to record {u},",
                    run[0].seq
                ),
                _ => format!("the witness ({named})"),
            };
            if let Some(detail) = part_fault(r, &who, run, until, h, current) {
                return fail(r, crate::audit::Fault::CheckpointMismatch, 0, detail);
            }
        }
    }

    fn log_key_readable(&self) -> bool {
        std::fs::File::open(self.log.dir().join(crate::audit::CHAIN_KEY_FILE)).is_ok()
    }

    /// Calls `hook` at each step of the audit trail's write path (crash tests:
    /// [`crate::audit::abort_hook`]).
    pub fn with_step_hook(mut self, hook: StepHook) -> Self {
        self.log = self.log.step_hook(hook);
        self
    }

    /// The home.
    pub fn home(&self) -> &Home {
        &self.home
    }

    /// The audit trail.
    pub fn audit_log(&self) -> &AuditLog {
        &self.log
    }

    fn digest_key(&self) -> Result<&DigestKey, StoreError> {
        if let Some(k) = self.key.get() {
            return Ok(k);
        }
        let k = DigestKey::load_or_create(&self.home)?;
        Ok(self.key.get_or_init(|| k))
    }
}

/// What a witness the trail named before the configured one holds, for `hcp audit
/// verify` (RUNTIME §6).
#[derive(Debug, Clone)]
enum Earlier {
    /// What it holds.
    Held(Held),
    /// Its checkpoints are gone (why): retired.
    Gone(String),
    /// It cannot be read (why).
    Unreadable(String),
}

/// The first checkpoint `held`, the witness `who`, is missing of the part of the trail
/// `run` (the records naming it, in a row) opens and `until` (the record naming the next
/// witness) ends; `current`: the part runs to the trail's end. See
/// `FileState::witness_faults`.
fn part_fault(
    r: &crate::audit::VerifyReport,
    who: &str,
    run: &[crate::audit::WitnessNamed],
    until: Option<u64>,
    held: &Held,
    current: bool,
) -> Option<String> {
    let end = until.unwrap_or(u64::MAX);
    let acts_in = |from: u64, to: u64| {
        r.witnessed_acts
            .iter()
            .filter(|&&s| s > from && s < to)
            .count()
    };
    let renamed = |act: u64| r.witness_named.iter().any(|n| n.seq == act + 1);
    let newest = held.newest().map_or(0, |c| c.count);
    for (i, n) in run.iter().enumerate() {
        let kept = held
            .checkpoints
            .iter()
            .any(|(_, c)| c.count == n.seq && c.head == n.hash);
        // hcp killed between the record and its checkpoint: the next act names the
        // witness again (one act between the two), or nothing was witnessed since (but
        // the act that named the next witness, witnessed by that one).
        let crashed = match run.get(i + 1) {
            Some(next) => acts_in(n.seq, next.seq) <= 1,
            None if current => held.checkpoints.is_empty() && acts_in(n.seq, u64::MAX) == 0,
            None => !r
                .witnessed_acts
                .iter()
                .any(|&s| s > n.seq && s < end && !renamed(s)),
        };
        if !kept && !crashed {
            return Some(format!(
                "{who} holds no checkpoint of record {}, the record that names it as this trail's witness: checkpoints were removed from it (its file deleted, emptied or cut)",
                n.seq
            ));
        }
    }
    // Every act of authority it witnessed but the newest (whose checkpoint a kill may
    // have stopped) must be covered by its newest checkpoint.
    let since = run.first().map_or(0, |n| n.seq);
    let mut acts: Vec<u64> = r
        .witnessed_acts
        .iter()
        .copied()
        .filter(|&s| s > since && s < end)
        .collect();
    acts.pop();
    if let Some(&act) = acts.last()
        && newest < act
    {
        return Some(format!(
            "the newest checkpoint {who} holds names {newest} records, and it took one of the act of authority at record {act} when it was made: checkpoints were removed from it (its file cut)"
        ));
    }
    // Each of them had a checkpoint of its own record taken when it was made: its `count`
    // is the act's record (the intent's; the best-effort one after `act made` is never
    // required), or, for an act that named a witness, the `witness` record right after
    // it, whose checkpoint is held to above.
    let counts: std::collections::BTreeSet<u64> =
        held.checkpoints.iter().map(|(_, c)| c.count).collect();
    acts.iter()
        .find(|&&act| !counts.contains(&act) && !renamed(act))
        .map(|act| {
            format!(
                "{who} holds no checkpoint of the act of authority at record {act}, taken when it was made: checkpoints were removed from it (lines of its file deleted or cut)"
            )
        })
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

    fn session_start_prepared(
        &self,
        prepared: (Token, Session),
    ) -> Result<(Token, Session), SessionError> {
        session::start_prepared(&self.home, prepared)
    }

    fn session_resolve(&self, token: &str, now: Timestamp) -> Result<Session, SessionError> {
        session::resolve(&self.home, token, now)
    }

    fn session_end(&self, token: &str, now: Timestamp) -> Result<(Session, bool), SessionError> {
        session::end(&self.home, token, now)
    }

    fn session_end_digest(
        &self,
        token_sha256: &str,
        now: Timestamp,
    ) -> Result<(Session, bool), SessionError> {
        session::end_digest(&self.home, token_sha256, now)
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

    fn call_reads_loaded(
        &self,
        token: Option<&str>,
        pack: Option<&InstalledPack>,
        now: Timestamp,
    ) -> CallReads {
        let session = token.map(|t| self.session_resolve(t, now));
        let grants = match (&session, pack) {
            (Some(Ok(s)), Some(p)) => {
                grant::held_counted(&self.home, &s.principal, &p.id, Some(&p.record))
            }
            _ => Ok(Vec::new()),
        };
        CallReads { session, grants }
    }

    fn grants_held(
        &self,
        principal: &PrincipalId,
        pack: &PackId,
    ) -> Result<Vec<HeldCapability>, StoreError> {
        grant::held_checked(&self.home, principal, pack)
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

    /// Every sound grant file's grants; a damaged one is left out (`hcp doctor` and
    /// [`crate::damage::scan`] list it), so one damaged file hides nobody else's grants.
    fn grants_list(&self) -> Result<Vec<Grant>, StoreError> {
        Ok(Grants::load_all(&self.home)?.0.all().to_vec())
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
        approval::request_in(
            &self.home,
            &request.key.call(),
            request.summary.clone(),
            request.window_s,
            (request.session.clone(), request.project.clone()),
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

    /// The approvals, with the spends of the trail's intents brought into their caches
    /// first (best effort: a trail that cannot be written leaves the caches as they are).
    fn approvals_list(&self) -> Result<Vec<Approval>, StoreError> {
        let _ = self.log.reconcile();
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

    /// HMAC-SHA-256 with the store's secret (`audit/digest.secret`, made on first use).
    fn args_digest(&self, args: &[(&str, &ArgValue)]) -> Result<String, StoreError> {
        Ok(self.digest_key()?.args_digest(args.iter().copied()))
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

    /// [`AuditLog::admit`]: under the trail's lock, the counters are re-checked at the
    /// intent's time, the approvals (found again by their binding) re-checked, and the
    /// intent naming them written and synced: the one durable step. The session and the
    /// grant are those of the call's snapshot (one machine: nothing but the owner's own
    /// commands ends them between the snapshot and this step).
    fn admit(&self, a: &Admission<'_>) -> Result<Admitted, AdmitError> {
        let mut approvals = Vec::with_capacity(a.approvals.len());
        for k in a.approvals {
            let found =
                approval::lookup(&self.home, &k.call(), a.now).map_err(AdmitError::State)?;
            let Some(found) = found else {
                return Err(AdmitError::ApprovalGone);
            };
            approvals.push(audit::ApprovalSpend {
                id: found.id,
                tool: k.tool.clone(),
                principal: k.principal.clone(),
                principal_digest: k.principal_digest.clone(),
                args_digest: k.args_digest.clone(),
                policy_hash: k.policy_hash.clone(),
            });
        }
        let approval_ids: Vec<String> = approvals.iter().map(|x| x.id.clone()).collect();
        let admission = audit::Admission {
            intent: a.intent.clone(),
            counters: a
                .counters
                .iter()
                .map(|c| audit::CounterSpend {
                    identity: c.identity.clone(),
                    tool: c.tool.clone(),
                    limits: c.limits,
                })
                .collect(),
            approvals,
        };
        match self.log.admit(&admission) {
            Ok(x) => {
                let intent: Appended = x.into();
                self.note(&intent);
                if !approval_ids.is_empty() {
                    note_spent(&self.home, &approval_ids);
                }
                Ok(Admitted {
                    intent,
                    approval_ids,
                })
            }
            Err(audit::AdmitError::Limit { tool, verdict, .. }) => {
                Err(AdmitError::Limit { tool, verdict })
            }
            Err(audit::AdmitError::Approval { .. }) => Err(AdmitError::ApprovalGone),
            Err(audit::AdmitError::Unavailable(e)) => Err(AdmitError::Audit(e)),
        }
    }

    fn record(&self, entry: &Entry) -> Result<Appended, AuditError> {
        let a = self.log.append(entry)?;
        self.note(&a);
        Ok(a)
    }

    fn record_outcome(&self, outcome: &Outcome) -> Result<Appended, AuditError> {
        let a = self.log.outcome(outcome)?;
        self.note(&a);
        Ok(a)
    }

    /// [`AuditLog::append_authority`] (synced), then [`AuditLog::witness_act`]; the
    /// witness is asked first whether it can take a checkpoint at all, and whether it
    /// holds what the trail says it took ([`AuditLog::check_witnessed`]).
    ///
    /// All of it under the lock that orders acts ([`crate::audit::ActsLock`]), with the
    /// witness `config.json` names now ([`FileState::with_configured_witness`]).
    fn record_authority(&self, act: &Authority) -> Result<Appended, AuditError> {
        let _acts = self.log.lock_acts()?;
        let witness = self.witness_now();
        self.ready_with(witness.as_ref())?;
        if let Some(w) = &witness {
            self.log.check_witnessed(w.as_ref())?;
        }
        let a = self.log.append_authority(act)?;
        if let Some(w) = &witness
            && let Err(e) = self.log.witness_act(w.as_ref(), &a)
        {
            // Recorded, then refused: the trail says so (best effort; a trail that cannot
            // take even this shows the act as recorded, docs/DESIGN.md).
            let _ = self
                .log
                .append_authority(&act.failed(a.seq, e.code().as_str()));
            return Err(e);
        }
        Ok(a)
    }

    /// Records `act` witnessed by `witness` instead of the configured one, then the
    /// [`crate::audit::WITNESS_ACT`] record naming it, whose checkpoint is the new
    /// witness's first (`None`: no witness from now on). The configured witness is not
    /// asked: a witness that is gone does not lock out the act that replaces it.
    fn record_witness_change(
        &self,
        act: &Authority,
        witness: Option<Arc<dyn Witness>>,
    ) -> Result<Appended, AuditError> {
        // The caller holds the lock until `config.json` names the new witness
        // ([`State::hold_acts`]); taken here too for a caller that does not.
        let _acts = self.log.lock_acts()?;
        if let Some(w) = &witness {
            let store = crate::made::Marker::read(self.home.root())
                .ok()
                .flatten()
                .map(|m| m.store_id);
            w.ready_for(store.as_deref())?;
            self.log.check_witnessed(w.as_ref())?;
        }
        let a = self.log.append_authority(act)?;
        if let Err(e) = self.log.witness_named(witness.as_deref(), act_time(&a)) {
            let _ = self
                .log
                .append_authority(&act.failed(a.seq, e.code().as_str()));
            return Err(e);
        }
        Ok(a)
    }

    fn stamp_key(&self) -> Option<crate::audit::ChainKey> {
        self.log.chain_key().ok()
    }

    /// [`FileState::ready_with`] the witness `config.json` names now.
    fn authority_ready(&self) -> Result<(), AuditError> {
        self.ready_with(self.witness_now().as_ref())
    }

    fn hold_acts(&self) -> Result<Option<crate::audit::ActsLock>, AuditError> {
        self.log.lock_acts().map(Some)
    }

    fn trail_witness(&self) -> Result<Option<String>, AuditError> {
        Ok(self.log.witnessed()?.witness)
    }

    fn record_noticed(&self, act: &Authority) -> Result<Appended, AuditError> {
        let _acts = self.log.lock_acts()?;
        let a = self.log.append_authority(act)?;
        if let Some(w) = &self.witness_now() {
            match self.log.witness(w.as_ref(), act_time(&a)) {
                // Never refused for the witness: the checkpoint is left to the next act.
                Ok(_) | Err(AuditError::Witness(_) | AuditError::Behind { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(a)
    }

    fn witness_after_call(&self) -> Result<Option<Checkpoint>, AuditError> {
        if self.witness_now().is_none() || !self.due.swap(false, Ordering::Relaxed) {
            return Ok(None);
        }
        let _acts = self.log.lock_acts()?;
        match self.witness_now() {
            Some(w) => self.log.witness(w.as_ref(), Timestamp::now()).map(Some),
            None => Ok(None),
        }
    }

    fn audit_witness(&self) -> Option<String> {
        self.witness_now().map(|w| w.describe())
    }
    /// [`AuditLog::probe_writable`]: the trail and its anchor open for writing (no lock;
    /// the admission checks the rest).
    fn audit_ready(&self) -> Result<(), AuditError> {
        self.log.probe_writable()
    }

    /// Against `checkpoint` when given, else against the witness's newest checkpoint (or
    /// the store's own last one).
    fn audit_verify(&self, checkpoint: Option<&Checkpoint>) -> Result<AuditReport, AuditError> {
        let r = match checkpoint {
            Some(c) => self.log.verify_against(c)?,
            None => {
                let witness = self.witness_now();
                let (against, held) = self.default_against(witness.as_ref());
                let mut r = self.log.verify_with(&against)?;
                // The witnesses the trail named before the configured one: the trail is
                // walked again against their checkpoints too (only a trail that moved its
                // witness pays for a second walk).
                let earlier = self.earlier_witnesses(&r, witness.as_ref());
                let mut sets: Vec<(Held, CheckpointSource)> = match &against {
                    Against::Held(h, src) => vec![(h.clone(), src.clone())],
                    Against::Checkpoint(c, src) => vec![(
                        Held {
                            checkpoints: vec![(0, c.clone())],
                            ..Held::default()
                        },
                        src.clone(),
                    )],
                    _ => Vec::new(),
                };
                let current = sets.len();
                for (name, e) in &earlier {
                    if let Earlier::Held(h) = e
                        && (!h.checkpoints.is_empty() || h.forged.is_some() || !h.torn.is_empty())
                    {
                        sets.push((h.clone(), CheckpointSource::Witness(name.clone())));
                    }
                }
                if r.broken.is_none() && sets.len() > current {
                    r = self.log.verify_with(&Against::Witnesses(sets))?;
                }
                if r.broken.is_none() {
                    self.witness_faults(&mut r, held.as_ref(), &earlier, witness.as_ref());
                }
                r
            }
        };
        Ok(AuditReport::single(r))
    }

    fn audit_verify_held(
        &self,
        held: &Held,
        source: CheckpointSource,
    ) -> Result<AuditReport, AuditError> {
        Ok(AuditReport::single(
            self.log.verify_with(&Against::Held(held.clone(), source))?,
        ))
    }

    fn audit_tail(&self, n: usize) -> Result<(Vec<Vec<u8>>, u64), AuditError> {
        self.log.tail_lines(n)
    }

    fn audit_follow(&self, n: usize) -> Result<Box<dyn AuditFollow>, AuditError> {
        Ok(Box::new(self.log.follow_records(n)?))
    }

    fn audit_read(
        &self,
        from: &[audit::ChainPos],
        max: usize,
    ) -> Result<audit::ReadBatch, AuditError> {
        let start = audit::ChainPos::start(None);
        let from = from.iter().find(|p| p.machine.is_none()).unwrap_or(&start);
        self.log.read_after(from, max)
    }

    fn audit_checkpoint(
        &self,
        count: u64,
        head: &str,
        now: Timestamp,
    ) -> Result<Checkpoint, AuditError> {
        Ok(audit::checkpoint::sign(&self.log, count, head, now)?)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use hcp_model::{Land, Operation};

    fn intent(state: &dyn State) -> Intent {
        Intent {
            principal: "agent".into(),
            project: None,
            pack_id: "p".into(),
            verb_key: "v".into(),
            operation: Operation::Read,
            land: Some(Land::Personal),
            args_digest: state.args_digest(&[]).unwrap(),
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
        crate::made::init(d.path(), crate::audit::Actor::owner(), None).unwrap();
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
        let e = intent(state.as_ref());
        assert!(e.args_digest.starts_with("hmac-sha256:"), "a keyed digest");
        // A pending approval that nobody granted: admission refuses and spends the slot not.
        let request = ApprovalRequest {
            key: key(),
            summary: BTreeMap::new(),
            window_s: Some(60),
            session: None,
            project: None,
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
        let admitted = state.admit(&adm).unwrap();
        assert_eq!(admitted.approval_ids, vec![a.id.clone()]);
        // The intent is written and names its spends; the call is interrupted until its
        // outcome comes.
        let v = state.audit_verify(None).unwrap();
        assert!(v.is_clean());
        assert_eq!(v.interrupted(), 1);
        let outcome = Outcome {
            intent: admitted.audit_id().to_owned(),
            principal: "agent".into(),
            pack_id: "p".into(),
            verb_key: "v".into(),
            code: None,
            exit_code: Some(0),
            duration_ms: 1,
            stdout_bytes: 2,
            stderr_bytes: 0,
            truncated: false,
            extra: BTreeMap::new(),
        };
        state.record_outcome(&outcome).unwrap();
        let v = state.audit_verify(None).unwrap();
        assert_eq!((v.is_clean(), v.interrupted(), v.records()), (true, 0, 3));
        let (lines, torn) = state.audit_tail(2).unwrap();
        assert_eq!(torn, 0);
        let first: serde_json::Value = serde_json::from_slice(&lines[0]).unwrap();
        assert_eq!(first["kind"], "intent");
        assert_eq!(first["spends"]["approvals"][0], a.id.as_str());
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

    #[test]
    fn a_witness_the_trail_names_that_never_held_its_checkpoints_is_not_retired() {
        use crate::audit::witness::DirWitness;
        use crate::audit::{Actor, Authority, Fault, WITNESS_ACT};
        let d = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        crate::made::init(d.path(), Actor::owner(), None).unwrap();
        let home = Home::open(d.path()).unwrap();
        let next = DirWitness::new(b.path());
        let state = FileState::new(&home).with_witness(Arc::new(next.clone()));
        let log = state.audit_log();
        // A record naming a witness whose directory never existed, after no act that named
        // it (no hcp writes one so: whoever holds the keys could), then the move to B.
        let noticed = Authority::new("config changed", Actor::owner(), serde_json::json!({}));
        log.append_authority(&noticed).unwrap();
        let never = serde_json::json!({"witness": "directory /nonexistent/witness"});
        log.append_authority(&Authority::new(WITNESS_ACT, Actor::owner(), never))
            .unwrap();
        log.witness_named(Some(&next), t(1)).unwrap();
        let r = state.audit_verify(None).unwrap();
        let report = &r.chains[0].report;
        let broken = report.broken.clone().unwrap();
        assert_eq!(broken.fault, Fault::WitnessUnavailable, "{}", broken.detail);
        assert!(
            broken.detail.contains("directory /nonexistent/witness")
                && broken.detail.contains("so it was not retired"),
            "{}",
            broken.detail
        );
        assert!(report.retired_witnesses.is_empty());
    }
}
