//! `hcp_store::state::State` for [`PgState`]: the runtime's one view of the state, over
//! the database of a fleet (RUNTIME §9). Each method is one of the crate's steps; what
//! this module adds is the translation of values and errors: every [`PgError`] becomes
//! `StoreError::StateUnavailable` (`state_unavailable`, 74) with its hint, never a
//! fall-back to the files of `$HCP_HOME`.

use crate::admit::{self, ApprovalTake, CounterTake, GrantCheck};
use crate::approval::{self, ApprovalError as PgApprovalError};
use crate::audit::{self, AuditError as PgAuditError, body_from_entry};
use crate::error::PgError;
use crate::session::SessionLookupError;
use crate::{PgAppended, PgState};
use hcp_model::{ArgValue, Capability, PackId};
use hcp_store::StoreError;
use hcp_store::approval::{Approval, ApprovalError};
use hcp_store::audit::checkpoint::Checkpoint;
use hcp_store::audit::witness::Newest;
use hcp_store::audit::{
    Appended, AuditError, AuditFollow, AuditReport, Authority, Broken, ChainCheck, ChainVerify,
    CheckpointNote, CheckpointSource, DigestKey, Entry, Fault, GENESIS, Interrupted,
    InterruptedAct, Outcome, VerifyReport,
};
use hcp_store::config::ConfigError;
use hcp_store::counter::{Limits, Verdict};
use hcp_store::grant::{Grant, HeldCapability, PackScope};
use hcp_store::session::{NewSession, PrincipalId, Session, SessionError, Token};
use hcp_store::state::{
    Admission, AdmitError, Admitted, ApprovalKey, ApprovalRequest, CallReads, State,
};
use jiff::Timestamp;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The backend's name in messages and `hcp doctor`.
pub const BACKEND: &str = "postgresql";

/// A [`PgError`] as the store's error: `state_unavailable` with the failure's hint;
/// `store_io` for the machine id file; `bad_config` for a `state` that does not parse.
pub fn store_error(e: PgError) -> StoreError {
    let hint = e.hint();
    match e {
        PgError::Io {
            action,
            path,
            source,
        } => StoreError::Io {
            action,
            path,
            source,
        },
        PgError::Config { reason } => StoreError::Config(Box::new(ConfigError::Invalid {
            path: hcp_store::config::CONFIG_FILE.into(),
            line: 0,
            column: 0,
            message: format!("`state`: {reason}"),
        })),
        PgError::Unavailable { reason, .. } => StoreError::StateUnavailable {
            backend: BACKEND.into(),
            reason,
            hint,
        },
        e @ PgError::Schema { .. } => StoreError::StateUnavailable {
            backend: BACKEND.into(),
            reason: e.to_string(),
            hint,
        },
    }
}

fn session_error(e: SessionLookupError) -> SessionError {
    match e {
        SessionLookupError::Bad(b) => SessionError::Bad(b),
        SessionLookupError::State(e) => SessionError::Store(store_error(e)),
    }
}

fn audit_error(e: PgAuditError) -> AuditError {
    match e {
        PgAuditError::ReservedField { key } => AuditError::ReservedField { key },
        PgAuditError::State(e) => AuditError::Store(store_error(e)),
    }
}

/// A database approval as the store's value (`taken_at` is the store's `used_at`).
pub fn approval(a: approval::Approval) -> Approval {
    Approval {
        id: a.id,
        tool: a.tool,
        principal: a.principal,
        principal_digest: a.principal_digest,
        args_digest: a.args_digest,
        policy_hash: a.policy_hash,
        summary: a.summary,
        escalation: a.escalation,
        requested_at: a.requested_at,
        window_s: a.window_s,
        approved_at: a.approved_at,
        used_at: a.taken_at,
        denied_at: a.denied_at,
        session: a.session,
        project: a.project,
    }
}

/// The database's refusal of approve or deny as the store's (the same codes).
fn approval_error(e: PgApprovalError) -> ApprovalError {
    match e {
        PgApprovalError::Unknown(id) => ApprovalError::Unknown(id),
        PgApprovalError::Used(id) => ApprovalError::Used(id),
        PgApprovalError::Expired(id) => ApprovalError::Expired(id),
        PgApprovalError::Decided { id, state } => ApprovalError::Decided { id, state },
        PgApprovalError::NotAnEscalation(id) => ApprovalError::NotAnEscalation(id),
        PgApprovalError::State(e) => ApprovalError::Store(store_error(e)),
    }
}

fn appended(a: PgAppended) -> Appended {
    Appended {
        id: a.id,
        seq: a.seq,
        ts: a.ts,
        hash: a.hash,
        repair: None,
    }
}

/// The record body of an [`Entry`] with its kind, as the file store names it: a denied
/// entry is a `refusal`, an allowed one an `event`.
fn entry_body(entry: &Entry, kind: &str) -> Map<String, Value> {
    let mut m = body_from_entry(entry);
    m.insert(audit::KIND_FIELD.into(), Value::String(kind.into()));
    m
}

fn entry_kind(entry: &Entry) -> &'static str {
    match entry.decision {
        hcp_store::audit::Decision::Deny => "refusal",
        hcp_store::audit::Decision::Allow => "event",
    }
}

impl State for PgState {
    fn backend(&self) -> &'static str {
        BACKEND
    }

    fn session_start(
        &self,
        new: &NewSession,
        now: Timestamp,
    ) -> Result<(Token, Session), SessionError> {
        self.session_start_prepared(hcp_store::session::prepare(new, now)?)
    }

    fn session_start_prepared(
        &self,
        (token, session): (Token, Session),
    ) -> Result<(Token, Session), SessionError> {
        let stored = self
            .session_insert(&session)
            .map_err(|e| SessionError::Store(store_error(e)))?;
        Ok((token, stored))
    }

    fn session_resolve(&self, token: &str, now: Timestamp) -> Result<Session, SessionError> {
        PgState::session_resolve(self, token, now).map_err(session_error)
    }

    fn session_end(&self, token: &str, now: Timestamp) -> Result<(Session, bool), SessionError> {
        PgState::session_end(self, token, now).map_err(session_error)
    }

    fn session_end_digest(
        &self,
        token_sha256: &str,
        now: Timestamp,
    ) -> Result<(Session, bool), SessionError> {
        PgState::session_end_digest(self, token_sha256, now).map_err(session_error)
    }

    fn session_end_principal(
        &self,
        principal: &PrincipalId,
        now: Timestamp,
    ) -> Result<Vec<Session>, SessionError> {
        PgState::session_end_principal(self, principal, now)
            .map_err(|e| SessionError::Store(store_error(e)))
    }

    fn session_list(&self) -> Result<Vec<Session>, StoreError> {
        PgState::session_list(self).map_err(store_error)
    }

    fn call_reads(&self, token: Option<&str>, pack: Option<&PackId>, now: Timestamp) -> CallReads {
        let r = PgState::call_reads(self, token, pack, now);
        CallReads {
            session: r.session.map(|s| s.map_err(session_error)),
            grants: r.grants.map_err(store_error),
        }
    }

    fn grants_held(
        &self,
        principal: &PrincipalId,
        pack: &PackId,
    ) -> Result<Vec<HeldCapability>, StoreError> {
        PgState::grants_held(self, principal, pack).map_err(store_error)
    }

    fn grant(
        &self,
        principal: &PrincipalId,
        scope: &PackScope,
        capabilities: &[Capability],
        now: Timestamp,
    ) -> Result<Vec<Grant>, StoreError> {
        PgState::grant(self, principal, scope, capabilities, now).map_err(store_error)
    }

    fn revoke(
        &self,
        principal: &PrincipalId,
        scope: &PackScope,
        capabilities: &[Capability],
    ) -> Result<Vec<Grant>, StoreError> {
        PgState::revoke(self, principal, scope, capabilities).map_err(store_error)
    }

    fn grants_list(&self) -> Result<Vec<Grant>, StoreError> {
        PgState::grants_list(self).map_err(store_error)
    }

    fn pack_content_changed(&self, pack: &PackId, at: Timestamp) -> Result<(), StoreError> {
        PgState::pack_content_changed(self, pack, at)
            .map(drop)
            .map_err(store_error)
    }

    fn pack_installed(
        &self,
        pack: &PackId,
        files_digest: &str,
        changed_at: Option<Timestamp>,
        now: Timestamp,
    ) -> Result<Option<Timestamp>, StoreError> {
        if let Some(at) = changed_at {
            PgState::pack_content_changed(self, pack, at).map_err(store_error)?;
        }
        PgState::pack_installed(self, pack, files_digest, now).map_err(store_error)
    }

    /// One machine's uninstall does not delete the grants of the fleet (other machines
    /// may still run the pack): it records a content change, which suspends the non-owner
    /// grants on the pack everywhere until the owner grants again.
    fn pack_removed(&self, pack: &PackId) -> Result<(), StoreError> {
        PgState::pack_content_changed(self, pack, Timestamp::now())
            .map(drop)
            .map_err(store_error)
    }

    fn approval_request(
        &self,
        request: &ApprovalRequest,
        now: Timestamp,
    ) -> Result<Approval, StoreError> {
        let k = &request.key;
        let r = approval::ApprovalRequest {
            tool: k.tool.clone(),
            principal: k.principal.clone(),
            principal_digest: k.principal_digest.clone(),
            args_digest: k.args_digest.clone(),
            policy_hash: k.policy_hash.clone(),
            summary: request.summary.clone(),
            escalation: k.escalation,
            window_s: request.window_s,
            session: request.session.clone(),
            project: request.project.clone(),
        };
        PgState::approval_request(self, &r, now)
            .map(approval)
            .map_err(store_error)
    }

    fn approval_lookup(
        &self,
        key: &ApprovalKey,
        now: Timestamp,
    ) -> Result<Option<Approval>, StoreError> {
        PgState::approval_lookup(self, &key.call(), now)
            .map(|a| a.map(approval))
            .map_err(store_error)
    }

    fn approvals_list(&self) -> Result<Vec<Approval>, StoreError> {
        PgState::approvals_list(self)
            .map(|v| v.into_iter().map(approval).collect())
            .map_err(store_error)
    }

    fn approve(&self, id: &str, now: Timestamp) -> Result<Approval, ApprovalError> {
        PgState::approve(self, id, now)
            .map(approval)
            .map_err(approval_error)
    }

    fn deny(&self, id: &str, now: Timestamp) -> Result<Approval, ApprovalError> {
        PgState::deny(self, id, now)
            .map(approval)
            .map_err(approval_error)
    }

    fn denial_lookup(
        &self,
        key: &ApprovalKey,
        now: Timestamp,
    ) -> Result<Option<Approval>, StoreError> {
        PgState::denial_lookup(self, &key.call(), now)
            .map(|a| a.map(approval))
            .map_err(store_error)
    }

    /// The keyed digest under the fleet's secret (read with the connection's first round
    /// trip), so an approval bound on one machine matches the same call on another.
    fn args_digest(&self, args: &[(&str, &ArgValue)]) -> Result<String, StoreError> {
        let key = DigestKey::from_bytes(self.digest_secret().map_err(store_error)?);
        Ok(key.args_digest(args.iter().copied()))
    }

    fn counter_check(
        &self,
        identity: &str,
        tool: &str,
        limits: Limits,
        now_ms: u64,
    ) -> Result<Verdict, StoreError> {
        PgState::counter_check(self, identity, tool, limits, now_ms).map_err(store_error)
    }

    /// One statement (`hcp_admit`): the session and every capability re-checked with the
    /// pack's fleet-wide suspension, each counter slot and the approvals taken, the
    /// intent record appended to this machine's chain; all or nothing.
    fn admit(&self, a: &Admission<'_>) -> Result<Admitted, AdmitError> {
        let counters: Vec<CounterTake<'_>> = a
            .counters
            .iter()
            .map(|c| CounterTake {
                identity: &c.identity,
                tool: &c.tool,
                limits: c.limits,
                now_ms: c.now_ms,
            })
            .collect();
        let approvals: Vec<ApprovalTake<'_>> = a
            .approvals
            .iter()
            .map(|k| ApprovalTake {
                tool: &k.tool,
                principal_digest: &k.principal_digest,
                args_digest: &k.args_digest,
                policy_hash: &k.policy_hash,
                escalation: k.escalation,
            })
            .collect();
        let mut intent = a.intent.to_fields().map_err(AdmitError::Audit)?;
        intent.insert(
            audit::KIND_FIELD.into(),
            Value::String(audit::KIND_INTENT.into()),
        );
        let adm = admit::Admission {
            now: a.now,
            principal: &a.intent.principal,
            session: a.session,
            grant: a.session.map(|_| GrantCheck {
                pack: a.pack,
                capabilities: a.capabilities,
            }),
            counters: &counters,
            approvals: &approvals,
            intent: &intent,
        };
        match PgState::admit(self, &adm) {
            Ok(done) => Ok(Admitted {
                approval_ids: done.approval_ids,
                intent: Appended {
                    id: done.audit_id,
                    seq: done.seq,
                    ts: done.ts,
                    hash: done.hash,
                    repair: None,
                },
            }),
            Err(admit::AdmitError::Refused(r)) => Err(refusal(r)),
            Err(admit::AdmitError::Audit(e)) => Err(AdmitError::Audit(audit_error(e))),
            Err(admit::AdmitError::State(e)) => Err(AdmitError::State(store_error(e))),
        }
    }

    fn record(&self, entry: &Entry) -> Result<Appended, AuditError> {
        PgState::record(
            self,
            &entry_body(entry, entry_kind(entry)),
            Timestamp::now(),
        )
        .map(appended)
        .map_err(audit_error)
    }

    /// Committed without waiting for the server's WAL flush (the next durable commit
    /// carries it; a server crash before one leaves the call `interrupted`).
    fn record_outcome(&self, outcome: &Outcome) -> Result<Appended, AuditError> {
        let mut fields = outcome.to_fields()?;
        fields.insert(
            audit::KIND_FIELD.into(),
            Value::String(audit::KIND_OUTCOME.into()),
        );
        PgState::record_outcome(self, &fields, Timestamp::now())
            .map(appended)
            .map_err(audit_error)
    }

    /// A record of kind `authority` on this machine's chain, durable when it returns, then
    /// the witness's checkpoint of that chain (the witness asked first).
    fn record_authority(&self, act: &Authority) -> Result<Appended, AuditError> {
        self.witness_ready()?;
        let mut fields = act.to_fields();
        fields.insert(audit::KIND_FIELD.into(), Value::String("authority".into()));
        let a = PgState::record(self, &fields, Timestamp::now()).map_err(audit_error)?;
        if self.witness_name().is_some() {
            let taken = self
                .chain_checkpoint(a.seq, &a.hash, a.ts)
                .and_then(|c| self.witness_take(&c).map_err(AuditError::from));
            if let Err(e) = taken {
                // Recorded, then refused: the trail says so (RUNTIME §6, docs/DESIGN.md).
                let mut failed = act.failed(a.seq, e.code().as_str()).to_fields();
                failed.insert(audit::KIND_FIELD.into(), Value::String("authority".into()));
                let _ = PgState::record(self, &failed, Timestamp::now());
                return Err(e);
            }
        }
        Ok(appended(a))
    }

    fn authority_ready(&self) -> Result<(), AuditError> {
        Ok(self.witness_ready()?)
    }

    fn stamp_key(&self) -> Option<hcp_store::audit::ChainKey> {
        PgState::chain_key(self).cloned()
    }

    /// A noticed act (a changed runtime policy or `config.json`) on this machine's chain,
    /// durable when it returns; the witness's checkpoint is then asked for, and a witness
    /// that cannot take it leaves it to the next act of authority or 100th call.
    fn record_noticed(&self, act: &Authority) -> Result<Appended, AuditError> {
        let mut fields = act.to_fields();
        fields.insert(audit::KIND_FIELD.into(), Value::String("authority".into()));
        let a = PgState::record(self, &fields, Timestamp::now()).map_err(audit_error)?;
        if self.witness_name().is_some() {
            let c = self.chain_checkpoint(a.seq, &a.hash, a.ts)?;
            // A witness never refuses a call (RUNTIME §6).
            let _ = self.witness_take(&c);
        }
        Ok(appended(a))
    }

    /// The checkpoint of this machine's chain at its head, when one of this process's
    /// records was a multiple of 100 and a witness is configured.
    fn witness_after_call(&self) -> Result<Option<Checkpoint>, AuditError> {
        if self.witness_name().is_none() || !self.take_due() {
            return Ok(None);
        }
        let Some((seq, hash)) = self.head_guess() else {
            return Ok(None);
        };
        let c = self.chain_checkpoint(seq, &hash, Timestamp::now())?;
        self.witness_take(&c)?;
        Ok(Some(c))
    }

    fn audit_witness(&self) -> Option<String> {
        self.witness_name()
    }

    fn machine(&self) -> Option<String> {
        Some(PgState::machine(self).as_str().to_owned())
    }

    /// A checkpoint of this machine's chain (RUNTIME §6, docs/DESIGN.md "Checkpoints of a
    /// fleet"): the caller verified the chains first and names this machine's count and
    /// head.
    fn audit_checkpoint(
        &self,
        count: u64,
        head: &str,
        now: Timestamp,
    ) -> Result<Checkpoint, AuditError> {
        self.chain_checkpoint(count, head, now)
    }

    /// The connection is open and its schema checked (no round trip when it is).
    fn audit_ready(&self) -> Result<(), AuditError> {
        self.with(|_| Ok(()))
            .map_err(|e| AuditError::Store(store_error(e)))
    }

    /// Every machine's chain, read in one snapshot. A signed checkpoint covers one
    /// file trail; it is not offered for a fleet's chains.
    /// Every machine's chain, read in one snapshot, each against the checkpoint of its
    /// machine: `checkpoint` when given (a checkpoint of one machine's chain), else the
    /// witness's newest.
    fn audit_verify(&self, checkpoint: Option<&Checkpoint>) -> Result<AuditReport, AuditError> {
        let mut against: BTreeMap<String, (u64, String)> = BTreeMap::new();
        let mut faults: BTreeMap<String, (Fault, String)> = BTreeMap::new();
        let mut source = CheckpointSource::File;
        match checkpoint {
            Some(c) => {
                let Some(m) = &c.machine else {
                    return Err(AuditError::Unsupported {
                        backend: BACKEND,
                        what: "checking a checkpoint of a file store's trail",
                    });
                };
                if m == self.machine().as_str() {
                    let ours = self.chain_checkpoint(0, GENESIS, Timestamp::now())?.key;
                    if ours != c.key {
                        faults.insert(
                            m.clone(),
                            (
                                Fault::CheckpointMismatch,
                                "the checkpoint was signed by another key than this machine's"
                                    .into(),
                            ),
                        );
                    }
                }
                against.insert(m.clone(), (c.count, c.head.clone()));
            }
            None => {
                if let Some(name) = self.witness_name() {
                    source = CheckpointSource::Witness(name);
                    match self.witness_newest() {
                        Ok(found) => {
                            for (m, n) in found {
                                match n {
                                    Newest::Checkpoint(c) => {
                                        against.insert(m, (c.count, c.head));
                                    }
                                    Newest::Forged { reason } => {
                                        faults.insert(m, (Fault::CheckpointMismatch, reason));
                                    }
                                    Newest::None => {}
                                }
                            }
                        }
                        Err(e) => {
                            faults.insert(
                                self.machine().as_str().to_owned(),
                                (Fault::WitnessUnavailable, e.to_string()),
                            );
                        }
                    }
                }
            }
        }
        let r = PgState::audit_verify_against(self, &against)
            .map_err(|e| AuditError::Store(store_error(e)))?;
        let mut report = audit_report(&r, &source);
        let broken = |fault, detail| Broken {
            fault,
            line: 0,
            id: None,
            expected: None,
            found: None,
            detail,
        };
        for c in &mut report.chains {
            if let Some(m) = &c.machine
                && let Some((fault, detail)) = faults.remove(m)
                && c.report.broken.is_none()
            {
                c.report.broken = Some(broken(fault, detail));
            }
        }
        // A fault of a machine with no chain (a witness of a machine whose records are gone).
        for (m, (fault, detail)) in faults {
            report.chains.push(ChainVerify {
                machine: Some(m),
                report: VerifyReport {
                    broken: Some(broken(fault, detail)),
                    ..VerifyReport::default()
                },
            });
        }
        Ok(report)
    }

    /// The last `n` records of the fleet, by arrival, each with `machine`, `seq`, `prev`
    /// and `hash`.
    fn audit_tail(&self, n: usize) -> Result<(Vec<Vec<u8>>, u64), AuditError> {
        let records =
            PgState::audit_tail(self, n).map_err(|e| AuditError::Store(store_error(e)))?;
        Ok((records.iter().map(record_bytes).collect(), 0))
    }

    fn audit_read(
        &self,
        from: &[hcp_store::audit::ChainPos],
        max: usize,
    ) -> Result<hcp_store::audit::ReadBatch, AuditError> {
        PgState::audit_read(self, from, max).map_err(|e| AuditError::Store(store_error(e)))
    }

    /// A follower on a connection of its own (LISTEN on the schema's channel).
    fn audit_follow(&self, n: usize) -> Result<Box<dyn AuditFollow>, AuditError> {
        let state = self.detached();
        let cursor = state
            .audit_cursor_end()
            .map_err(|e| AuditError::Store(store_error(e)))?;
        // The last `n` as of the cursor: what arrives after it is the follow's.
        let first = PgState::audit_tail(&state, n)
            .map_err(|e| AuditError::Store(store_error(e)))?
            .into_iter()
            .filter(|r| r.seq <= cursor.seen(&r.machine))
            .map(|r| record_bytes(&r))
            .collect();
        Ok(Box::new(Follow {
            state,
            cursor,
            first: Some(first),
        }))
    }
}

/// `hcp audit tail --follow` on the database.
struct Follow {
    state: PgState,
    cursor: crate::Cursor,
    first: Option<Vec<Vec<u8>>>,
}

impl AuditFollow for Follow {
    fn next(
        &mut self,
        wait: std::time::Duration,
        _wake: &[std::os::fd::BorrowedFd<'_>],
    ) -> Result<Vec<Vec<u8>>, AuditError> {
        if let Some(first) = self.first.take() {
            return Ok(first);
        }
        let got = self
            .state
            .audit_follow(&mut self.cursor, wait)
            .map_err(|e| AuditError::Store(store_error(e)))?;
        Ok(got.iter().map(record_bytes).collect())
    }
}

fn record_bytes(r: &crate::PgRecord) -> Vec<u8> {
    hcp_store::audit::canonical_json(&r.to_json())
}

/// Every machine's chain as the store's report: one [`ChainVerify`] per machine, `line`
/// meaning `seq`.
fn audit_report(r: &audit::VerifyReport, source: &CheckpointSource) -> AuditReport {
    AuditReport {
        chains: r
            .chains
            .iter()
            .map(|c| ChainVerify {
                machine: Some(c.machine.clone()),
                report: VerifyReport {
                    records: c.records,
                    head: c.head.clone().unwrap_or_else(|| GENESIS.to_owned()),
                    interrupted: c
                        .interrupted
                        .iter()
                        .map(|o| Interrupted {
                            line: o.seq,
                            seq: Some(o.seq),
                            id: o.id.clone(),
                            ts: o.ts.clone(),
                            principal: o.principal.clone(),
                            pack_id: o.pack_id.clone(),
                            verb_key: o.verb_key.clone(),
                        })
                        .collect(),
                    interrupted_acts: c
                        .interrupted_acts
                        .iter()
                        .map(|a| InterruptedAct {
                            line: a.seq,
                            seq: a.seq,
                            id: a.id.clone(),
                            ts: a.ts.clone(),
                            act: a.act.clone(),
                            actor: a.actor.clone(),
                        })
                        .collect(),
                    broken: c.fault.as_ref().map(|f| Broken {
                        fault: f.code,
                        line: f.seq.unwrap_or(0),
                        id: f.id.clone(),
                        expected: None,
                        found: None,
                        detail: f.reason.clone(),
                    }),
                    chain: if c.not_checked {
                        ChainCheck::NotChecked
                    } else if c.keyed {
                        ChainCheck::Checked
                    } else {
                        ChainCheck::Legacy
                    },
                    checkpoint: c.checkpoint.map(|(n, _)| n),
                    against: c.checkpoint.map(|(count, past)| CheckpointNote {
                        source: source.clone(),
                        count,
                        time: String::new(),
                        past,
                    }),
                    ..VerifyReport::default()
                },
            })
            .collect(),
    }
}

fn refusal(r: admit::AdmitRefusal) -> AdmitError {
    use admit::AdmitRefusal as R;
    match r {
        R::Session(b) => AdmitError::Session(b),
        R::MissingGrant { capability } | R::Suspended { capability, .. } => {
            AdmitError::Grant { capability }
        }
        R::Budget { tool } => AdmitError::Limit {
            tool,
            verdict: Verdict::Budget,
        },
        R::RateLimit { tool } => AdmitError::Limit {
            tool,
            verdict: Verdict::RateLimit,
        },
        R::ApprovalGone { .. } => AdmitError::ApprovalGone,
    }
}
