//! `hcp-runtime`: the orchestration of RUNTIME §5 for every face — `hcp exec` (the CLI
//! face and the JSON envelope), `hcp mcp`'s tools, `hcp connect`, `hcp disconnect` and
//! `hcp sense` — and the install policy (lint before the store).
//!
//! One call, one path: [`pipeline::run`] takes a [`pipeline::Subject`] (a verb, a pack's
//! stimuli, a pack's binding) in a [`pipeline::Mode`] (a run, a run the person answered,
//! connect, disconnect) through the steps, one file each under `src/step/`, in the
//! contract's order:
//!
//! ```text
//!  face (hcp binary: clap, envelope, MCP request)        Subject + Mode + Caller
//!    │
//!  0 snapshot ........ snapshot.rs       every read up front: session (→ the one
//!    │                                   Principal), pack, active, grants, runtime
//!    │                                   policy, tool lock, config.json, binding
//!  1 target .......... step/target.rs    PACK.VERB / verb key / stimuli    unknown_verb 66
//!  2 principal ....... step/principal.rs session or owner                  bad_session 77
//!  3–6 gate .......... step/gate.rs      hcp-gate (pure): arguments, grant (rug-pull),
//!    │                                   land, confirm                    65, 77
//!  7 runtime policy .. step/policy.rs    tool lock; Histos pre-gate, DRY: counters
//!    │                                   checked, approval looked up, nothing spent  77
//!  8 binding ......... step/binding.rs   connect_only, credential, binding.degraded
//!  9a prepare ........ step/prepare.rs   prepare::child (bin, argv, env layers,
//!    │                                   confinement) for the verb and each trigger;
//!    │                                   http.rs for a kind: openapi verb; audit ready
//!  9b admit .......... step/admit.rs     THE spending step: counter slots, approval and
//!    │                                   the durable intent record: all or nothing
//!  9c run ............ step/run.rs       hcp-adapter / the request / the sense relay
//!  post-gate ......... step/post.rs      credential redaction (redact.rs), signal,
//!    │                                   output controls                  output_withheld
//!  outcome ........... step/outcome.rs   the outcome record (RUNTIME §6) and the answer;
//!    │                                   a stop's one refusal record, or after
//!    │                                   admission its outcome
//!  binding act ....... step/bind.rs      disconnect's removal; connect's decision records
//! ```
//!
//! Each step answers its result or a `Stop` (recorded, or not: the trail or the state
//! cannot take a record). What a call learned goes into one typed
//! [`hcp_model::CallFacts`], flattened into its records and its result in one place; see
//! this crate's README for how to add a fact. Step 7's resource resolvers call back into
//! the pipeline through the [`policy::resolve::Runner`] it is handed (no import circle).
//!
//! This crate owns the order; the checks themselves live in the libraries: `hcp-gate`
//! (pure steps 1–6), `histos` (the engine of step 7), `hcp-store` (the disk and the
//! [`State`]), `hcp-adapter` (processes). It does no printing: answers are values
//! ([`call::Answer`]) that the `hcp` binary prints. Every code is one of the table in
//! `hcp-model` ([`hcp_model::code`]).

#![deny(missing_docs)]
#![warn(clippy::too_many_lines)]

pub mod authority;
pub mod backend;
pub mod call;
pub mod caller;
pub mod confirm;
pub mod connect;
pub mod decide;
mod degraded;
pub mod doctor;
pub mod egress;
pub mod home;
pub mod http;
pub mod install;
pub mod mcp;
pub mod pins;
pub mod pipeline;
pub mod policy;
pub mod prepare;
pub mod quarantine;
pub mod record;
pub mod redact;
pub mod refusal;
pub mod replay;
pub mod schema;
pub mod seam;
pub mod sense;
mod setup;
pub mod signature;
pub mod snapshot;
mod step;
pub mod target;
pub mod tool;
pub mod trail;
pub mod view_health;
pub mod view_index;
pub mod view_plan;
pub mod workdir;

#[cfg(test)]
mod tests;

pub use call::{Answer, Call, CallArgs, Caller, Words};
pub use hcp_gate::Face;
pub use refusal::Refusal;

use hcp_store::Home;
use hcp_store::config::RuntimeConfig;
use hcp_store::state::{FileState, State};
use std::sync::{Arc, Mutex};

pub use backend::Backend;

/// A store and its state backend: what every call runs against.
#[derive(Debug, Clone)]
pub struct Runtime {
    home: Home,
    state: Arc<dyn State>,
    backend: Backend,
    seam: seam::Seam,
    /// `config.json` as [`Runtime::open_for_call`] read it, for the call's snapshot to
    /// take (once); empty for a runtime that serves many calls.
    first_config: Arc<Mutex<Option<RuntimeConfig>>>,
}

impl Runtime {
    /// The runtime of `home`, with the state backend `config.json`'s `"state"` names
    /// (RUNTIME §9): the files of `home` when it names none, the fleet's PostgreSQL
    /// database (connected on first use) when it does, and when it cannot be used a
    /// backend whose every step refuses with why ([`backend`]); never a fall-back from one
    /// to the other. Reads `config.json` (and for PostgreSQL the machine id) once.
    pub fn open(home: Home) -> Self {
        Self::open_keeping(home, false)
    }

    /// [`Runtime::open`] for a process that makes one call (`hcp exec`): the
    /// `config.json` read to choose the backend is also the one the call's snapshot
    /// uses, when it loaded: the gate, the view and the limits see one read. A file that does
    /// not load is read again by the snapshot, which reports it.
    pub fn open_for_call(home: Home) -> Self {
        Self::open_keeping(home, true)
    }

    fn open_keeping(home: Home, keep: bool) -> Self {
        let seam = seam::Seam::from_env();
        let (backend, state, config) =
            backend::choose(&home, |witness| Arc::new(file_state(&home, &seam, witness)));
        Self {
            home,
            state,
            backend,
            seam,
            first_config: Arc::new(Mutex::new(config.filter(|_| keep))),
        }
    }

    /// The `config.json` [`Runtime::open_for_call`] read, taken by the first caller;
    /// `None` afterwards and for any other runtime (the caller reads the file).
    pub(crate) fn take_config(&self) -> Option<RuntimeConfig> {
        self.first_config.lock().map_or(None, |mut c| c.take())
    }

    /// After a call has answered (RUNTIME §6, off the call path): the witness's
    /// checkpoint when one of this call's records was a multiple of 100. A failure is
    /// reported on stderr by the caller; the call's answer stands.
    ///
    /// # Errors
    /// The witness's or the trail's.
    pub fn after_answer(&self) -> Result<(), hcp_store::audit::AuditError> {
        self.state.witness_after_call().map(|_| ())
    }

    /// The runtime of `home` whose state is the files of `home`, whatever `config.json`'s
    /// `state` names: the machine's own trail (`$HCP_HOME/audit`, which `hcp init` made),
    /// for an act of `hcp config` when the fleet's state cannot be used, so that the
    /// command that repairs `state` is not locked out by it (RUNTIME §6, §9). Never a
    /// call's state: nothing but that act is read or written through it. Its witness is
    /// `audit.witness`'s directory when it names one (`"state"` is the fleet's, which
    /// witnesses the fleet's chains).
    pub fn own_trail(home: Home) -> Self {
        let seam = seam::Seam::from_env();
        let witness = backend::file_witness(
            hcp_store::config::WitnessConfig::load(home.root()).map_err(Box::new),
        );
        let state = Arc::new(file_state(&home, &seam, witness));
        Self {
            home,
            state,
            backend: Backend::File,
            seam,
            first_config: Arc::default(),
        }
    }

    /// The runtime of `home` with `state` as its backend.
    pub fn with_state(home: Home, state: Arc<dyn State>) -> Self {
        Self {
            home,
            state,
            backend: Backend::File,
            seam: seam::Seam::from_env(),
            first_config: Arc::default(),
        }
    }

    /// The crash-test seam (debug builds: `HCP_TEST_ABORT_AT`).
    pub(crate) fn seam(&self) -> &seam::Seam {
        &self.seam
    }

    /// The store.
    pub fn home(&self) -> &Home {
        &self.home
    }

    /// The state backend.
    pub fn state(&self) -> &dyn State {
        self.state.as_ref()
    }

    /// Which backend was chosen, for `hcp doctor` and `hcp state migrate`.
    pub fn backend(&self) -> &Backend {
        &self.backend
    }
}

/// The embedded file state of `home` with its witness, its audit trail given the
/// crash-test seam's hook when the seam names a step of the trail's write path.
fn file_state(
    home: &Home,
    seam: &seam::Seam,
    witness: Option<Arc<dyn hcp_store::audit::witness::Witness>>,
) -> FileState {
    let state = FileState::new(home)
        .with_audit_log(|l| seam.audit_log(l))
        .with_configured_witness(witness);
    match seam.store_hook() {
        Some(hook) => state.with_step_hook(hook),
        None => state,
    }
}
