//! The snapshot of a call: every read of the store and the state, up front, before any
//! decision. Each part keeps its own failure; the pipeline reports it at the step where
//! RUNTIME §5 checks it, so the order of refusals is the contract's whatever the order
//! of reads (a broken `config.json` is still refused after the gate, a missing grant
//! before a bad runtime policy).

use crate::Runtime;
use crate::call::Caller;
use crate::policy::{self, PolicyRefusal, RuntimePolicy};
use crate::refusal::Refusal;
use hcp_model::{Principal, SessionFacts};
use hcp_store::StoreError;
use hcp_store::binding::{self, Credential, MintError};
use hcp_store::config::{ConfigError, RuntimeConfig};
use hcp_store::grant::HeldCapability;
use hcp_store::pack::{self, InstalledPack};
use hcp_store::session::{Session, SessionError};
use hcp_store::state::CallReads;
use jiff::Timestamp;

/// What a call reads, each part as found.
#[derive(Debug)]
pub struct Snapshot {
    /// The call's time, at which everything was read (sessions' expiry, windows).
    pub now: Timestamp,
    /// Who calls: the owner without `HCP_SESSION`, else the session's principal
    /// ([`principal_of`]); the session's failure when it cannot be used.
    pub principal: Result<Principal, SessionError>,
    /// The pack and verb key (or stimulus ref) the call names.
    pub target: Result<(InstalledPack, String), Refusal>,
    /// Whether that pack is active.
    pub active: bool,
    /// The session principal's grants on the pack (empty for the owner).
    pub grants: Result<Vec<HeldCapability>, Refusal>,
    /// The operator's runtime policy, when there is one.
    pub policy: Result<Option<RuntimePolicy>, PolicyRefusal>,
    /// The tool lock `tools.lock.json`, read for a session principal only (the owner's
    /// calls are not checked against it): `None` for the owner.
    pub lock: Option<Result<Option<histos::lock::Lock>, PolicyRefusal>>,
    /// `config.json`.
    pub config: Result<RuntimeConfig, ConfigError>,
    /// The principal's credential, for a `user` pack's verb other than its connect verb.
    pub credential: Option<Result<Credential, MintError>>,
    /// The compiled operation of a `kind: openapi` pack's verb, from the pinned copy
    /// install kept (RUNTIME §1.3); `None` for other kinds, stimuli and a target that did
    /// not resolve.
    pub operation: Option<Result<hcp_openapi::Operation, Refusal>>,
    /// The state's failure to answer at all (`state_unavailable`, RUNTIME §9), from any
    /// part of [`State::call_reads`](hcp_store::State::call_reads): the call is refused
    /// before any step, as when the state cannot be reached.
    pub unavailable: Option<Refusal>,
}

/// What the call names, as the snapshot reads it: a verb to resolve (through a face, or
/// `hcp connect`'s connect verb), or an installed pack as it is, active or not, with the
/// key its records name (`hcp sense`: a stimulus ref, `*` for all; `hcp disconnect`: the
/// connect verb).
#[derive(Debug, Clone, Copy)]
pub enum Reads<'a> {
    /// `pack_id` (when the face names it apart) and the target.
    Verb {
        /// The pack, when named apart.
        pack_id: Option<&'a str>,
        /// `PACK.VERB` or a verb key.
        target: &'a str,
    },
    /// A pack and a key of it.
    Pack {
        /// The pack.
        pack_id: &'a str,
        /// The stimulus ref (or `*`), or the connect verb.
        key: &'a str,
    },
}

impl Snapshot {
    /// Reads everything a call of `subject` by `caller` may need, at `now`.
    pub fn load(rt: &Runtime, caller: &Caller, subject: Reads<'_>, now: Timestamp) -> Self {
        let home = rt.home();
        let mut target = match subject {
            Reads::Verb { pack_id, target } => crate::target::resolve(home, pack_id, target),
            Reads::Pack { pack_id, key } => pack::load(home, pack_id)
                .map(|p| (p, key.to_owned()))
                .map_err(|e| crate::refusal::pack_refusal(&e)),
        };
        let active = match target.as_ref().map(|(p, _)| activation(home, caller, p)) {
            Ok(Ok(a)) => a,
            Ok(Err(e)) => {
                target = Err(Refusal::store(&e));
                false
            }
            Err(_) => false,
        };
        let operation = match (&target, subject) {
            (Ok((p, key)), Reads::Verb { .. }) if p.manifest.kind == hcp_model::Kind::Openapi => {
                Some(
                    pack::openapi::pinned_operation(p, key)
                        .map_err(|e| crate::refusal::pack_refusal(&e)),
                )
            }
            _ => None,
        };
        // The state's part in one request (one round trip for a database).
        let token = caller.session_token.as_ref().map(|t| t.to_string_lossy());
        let reads = rt.state().call_reads_loaded(
            token.as_deref(),
            target.as_ref().ok().map(|(p, _)| p),
            now,
        );
        let unavailable = unavailable(&reads);
        let principal = match reads.session {
            None => Ok(Principal::owner(caller.project.clone())),
            Some(s) => s.map(|s| principal_of(s, caller.project.clone())),
        };
        let grants = reads.grants.map_err(|e| Refusal::store(&e));
        let who = principal.as_ref().ok().map(|p| p.id.as_str());
        let credential = match (&target, who, subject) {
            (Ok((p, key)), Some(who), _)
                if p.manifest.binding.mode == hcp_model::BindingMode::User
                    && p.manifest.connect_verb() != Some(key.as_str()) =>
            {
                Some(binding::load(home, who, p.manifest.family(), now))
            }
            _ => None,
        };
        let lock = principal
            .as_ref()
            .is_ok_and(|p| !p.is_owner())
            .then(|| policy::lock::read(home));
        // A runtime policy gone with the stamp that kept its digest refuses the sessions'
        // calls, never the owner's (`authority::policy_lost`).
        let policy = match policy::load(home) {
            Ok(None) if principal.as_ref().is_ok_and(|p| !p.is_owner()) => {
                crate::authority::policy_lost(rt).map_or(Ok(None), |e| {
                    Err(policy::PolicyRefusal::new(e.code(), e.to_string()).with_hint(
                        "the owner puts the runtime policy back (`hcp doctor` names it); to run without one, put it back, then remove it",
                    ))
                })
            }
            r => r,
        };
        Self {
            now,
            operation,
            principal,
            target,
            active,
            grants,
            policy,
            lock,
            config: rt
                .take_config()
                .map_or_else(|| RuntimeConfig::load(home.root()), Ok),
            credential,
            unavailable,
        }
    }

    /// Refuses this call at the runtime policy's step when it is a session's (the
    /// owner's goes on) with `e`: the store's keyed record of the runtime policy and
    /// `config.json` is damaged, so a change of theirs may be missing from the trail
    /// ([`crate::authority::note_files_for_call`]).
    pub fn refuse_sessions(&mut self, e: &hcp_store::StoreError) {
        if self.principal.as_ref().is_ok_and(|p| !p.is_owner()) {
            self.policy = Err(policy::PolicyRefusal::new(e.code(), e.to_string()).with_hint(
                "the owner removes it (`hcp doctor` names it); the next call records the runtime policy and `config.json` afresh",
            ));
        }
    }

    /// The principal a refusal is recorded under: `owner` without a session, the
    /// session's principal when its token is valid, `unknown` otherwise.
    pub fn principal_label(&self) -> String {
        match &self.principal {
            Ok(p) => p.id.clone(),
            Err(_) => "unknown".into(),
        }
    }
}

/// The principal of a call made under `session` for `project` (`HCP_PROJECT`): the one
/// place a [`Principal`] is made of a session (the owner's is [`Principal::owner`]).
pub fn principal_of(session: Session, project: Option<String>) -> Principal {
    let facts = SessionFacts {
        token_sha256: session.token_sha256,
        role: session.role,
        projects: session.projects,
        attributes: session.attributes,
        can_view: session.can_view,
        workdir: session.workdir,
    };
    Principal::of_session(session.principal.as_str().to_owned(), facts, project)
}

/// The first part of `reads` the state could not answer (`state_unavailable`).
fn unavailable(reads: &CallReads) -> Option<Refusal> {
    let session = match &reads.session {
        Some(Err(SessionError::Store(e))) => Some(e),
        _ => None,
    };
    let grants = reads.grants.as_ref().err();
    [session, grants]
        .into_iter()
        .flatten()
        .find(|e| matches!(e, StoreError::StateUnavailable { .. }))
        .map(Refusal::store)
}

/// Whether `pack` is active for `caller`. A marker the state ledger does not vouch for
/// refuses that pack alone (`store_damaged`). A ledger that cannot be believed at all
/// (missing or damaged) vouches for no marker: a principal's call is refused, but the
/// owner's is not — the owner holds the authority a marker stands for, and one damaged
/// file never stops the owner's calls (RUNTIME §4 "Fault isolation").
///
/// # Errors
/// As [`pack::activation`], but for the owner's call under an unusable ledger.
fn activation(
    home: &hcp_store::Home,
    caller: &Caller,
    pack: &hcp_store::pack::InstalledPack,
) -> Result<bool, hcp_store::StoreError> {
    match pack::activation(home, pack.id.as_str()) {
        Err(_) if caller.session_token.is_none() && hcp_store::ledger::unusable(home).is_some() => {
            Ok(true)
        }
        r => r,
    }
}
