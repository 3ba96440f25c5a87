//! Which state backend a call runs against (RUNTIME §9), chosen once per process from
//! `config.json`'s `"state"`: absent, the files of `$HCP_HOME` ([`FileState`]); present, the
//! fleet's PostgreSQL database ([`PgState`], connected on first use). Packs, pins, skills
//! and bindings stay in `$HCP_HOME` either way.
//!
//! When the backend cannot be used — a `state` that does not parse, a `config.json` that
//! does not parse and may hold a `state`, a machine id that cannot be made — the runtime's
//! state is [`Unusable`]: every method answers that error (`bad_config` 78, `store_io`
//! 74), so every call and command that needs state refuses with it, and none falls back
//! to the files. A database that cannot be reached, refuses the credentials or has
//! another schema version answers `state_unavailable` (74) from the first step that
//! touches it. Commands that need no state (`lint`, `list`, `show`) are unaffected.
//!
//! [`FileState`]: hcp_store::state::FileState

mod health;
mod unusable;

pub use health::{StateHealth, StateProblem, health};
pub use unusable::Unusable;

use crate::Runtime;
use crate::refusal::Refusal;
use hcp_state_pg::WitnessChoice;
use hcp_state_pg::{MachineId, MigrateReport, PgConfig, PgState};
use hcp_store::audit::AuditError;
use hcp_store::audit::witness::Witness;
use hcp_store::config::{ConfigError, RuntimeConfig, StateConfig, WitnessConfig};
use hcp_store::home::StoreDir;
use hcp_store::state::State;
use hcp_store::{Home, StoreError};
use serde::Serialize;
use std::sync::Arc;

/// The backend a runtime chose.
#[derive(Debug, Clone)]
pub enum Backend {
    /// The files of `$HCP_HOME`.
    File,
    /// The fleet's PostgreSQL database.
    Postgres {
        /// The connection (opened on first use).
        state: Arc<PgState>,
        /// The configuration it was made from.
        config: StateConfig,
    },
    /// None can be used; every state method answers this.
    Unusable(Unusable),
}

impl Backend {
    /// `file`, `postgresql`, or for an unusable one the backend `config.json` asked for
    /// (`unknown` when it cannot be read).
    pub fn name(&self) -> &'static str {
        match self {
            Self::File => "file",
            Self::Postgres { .. } => hcp_state_pg::BACKEND,
            Self::Unusable(u) => u.backend(),
        }
    }
}

/// Chooses the backend of `home` and makes its state (see the module docs).
/// `file` makes the file state (the runtime gives it its crash-test seam).
/// Also gives the whole `config.json` from the same read, when it loads
/// ([`StateConfig::load_with_config`]).
pub(crate) fn choose(
    home: &Home,
    file: impl FnOnce(Option<Arc<dyn Witness>>) -> Arc<dyn State>,
) -> (Backend, Arc<dyn State>, Option<RuntimeConfig>) {
    let (chosen, config) = StateConfig::load_with_config(home.root());
    let backend = match chosen {
        Ok((None, w)) => return (Backend::File, file(file_witness(w)), config),
        Ok((Some(cfg), w)) => postgres(
            home,
            &cfg,
            match w {
                Ok(Some(WitnessConfig::State)) => WitnessChoice::State,
                Ok(Some(WitnessConfig::Dir(d))) => WitnessChoice::Dir(d),
                Ok(None) => WitnessChoice::None,
                Err(e) => WitnessChoice::Unknown(e.to_string()),
            },
        ),
        Err(e) => Backend::Unusable(Unusable::config("unknown", &e)),
    };
    let state: Arc<dyn State> = match &backend {
        Backend::Postgres { state, .. } => state.clone(),
        Backend::Unusable(u) => Arc::new(u.clone()),
        Backend::File => file(None),
    };
    (backend, state, config)
}

/// Why the `state` of `cfg` cannot be used, checked as a call checks it but without
/// connecting (`hcp_state_pg::check`): what `hcp config set` refuses before it writes a
/// `state` every later call would refuse (RUNTIME §3, §9). The reason names no password.
///
/// # Errors
/// The reason, lowercase.
pub fn check_state(cfg: &StateConfig) -> Result<(), String> {
    hcp_state_pg::check(cfg).map_err(|e| match e {
        hcp_state_pg::PgError::Config { reason } => reason,
        other => other.to_string(),
    })
}

/// What [`shown_state`] shows for a URL that does not parse (its password, if it holds
/// one, cannot be found in it).
pub const UNREADABLE_URL: &str = "(unreadable)";

/// `state` as `hcp config get` shows it: the URL without its password, and the schema
/// (the default when none is named).
pub fn shown_state(cfg: &StateConfig) -> serde_json::Value {
    serde_json::json!({"url": cfg.redacted_url(), "schema": cfg.schema_name()})
}

/// The witness of a file store ([`hcp_store::audit::witness::of_config`]).
pub(crate) fn file_witness(w: hcp_store::config::WitnessChoice) -> Option<Arc<dyn Witness>> {
    hcp_store::audit::witness::of_config(w)
}

fn postgres(home: &Home, cfg: &StateConfig, witness: WitnessChoice) -> Backend {
    let machine = match MachineId::load_or_create(&home.dir(StoreDir::State)) {
        Ok(m) => m,
        Err(e) => return Backend::Unusable(Unusable::of(hcp_state_pg::store_error(e))),
    };
    // This machine's chain is keyed by its own store's chain key (RUNTIME §6, §9).
    match PgState::open(cfg, machine).map(|s| s.with_local(home).map(|s| s.with_witness(witness))) {
        Ok(Ok(state)) => Backend::Postgres {
            state: Arc::new(state),
            config: cfg.clone(),
        },
        Ok(Err(e)) => Backend::Unusable(Unusable::of(e)),
        Err(e) => {
            // The URL does not parse: `bad_config` at `state.url`'s place.
            let reason = match e {
                hcp_state_pg::PgError::Config { reason } => reason,
                other => other.to_string(),
            };
            let e = ConfigError::Invalid {
                path: hcp_store::config::RuntimeConfig::path(home.root()),
                line: cfg.url_at.line,
                column: cfg.url_at.column,
                message: format!("`state.url`: {reason}"),
            };
            Backend::Unusable(Unusable::config(hcp_state_pg::BACKEND, &e))
        }
    }
}

/// Whether the state of `rt` can be used now: always for the files; for PostgreSQL the
/// connection is opened and its schema checked (no round trip once it is). Steps that
/// write the store first and then tell the state (install, uninstall) call it before
/// they write anything.
///
/// # Errors
/// The backend's: `state_unavailable`, `bad_config`, `store_io`.
pub fn ready(rt: &Runtime) -> Result<(), StoreError> {
    match rt.backend() {
        Backend::File => Ok(()),
        Backend::Unusable(u) => Err(u.error()),
        Backend::Postgres { state, .. } => state.audit_ready().map_err(|e| match e {
            AuditError::Store(s) => s,
            other => StoreError::StateUnavailable {
                backend: hcp_state_pg::BACKEND.into(),
                reason: other.to_string(),
                hint: None,
            },
        }),
    }
}

/// As [`ready`], for a step whose first use of the state is the snapshot's
/// [`State::call_reads`](hcp_store::State::call_reads): a database is not asked here,
/// since those reads open its connection and check its schema in their own round trip
/// (a failure there refuses the call as `state_unavailable` before any step).
///
/// # Errors
/// [`ready`]'s for a state that could not be set up (`bad_config`, `store_io`).
pub fn ready_to_read(rt: &Runtime) -> Result<(), StoreError> {
    match rt.backend() {
        Backend::File | Backend::Postgres { .. } => Ok(()),
        Backend::Unusable(u) => Err(u.error()),
    }
}

/// What `hcp state migrate` did (RUNTIME §9).
#[derive(Debug, Serialize)]
pub struct Migrated {
    /// `postgresql`, or `file` (nothing to migrate).
    pub backend: &'static str,
    /// The URL without its password.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The PostgreSQL schema.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// The version before (`null`: there was no schema).
    pub from: Option<i32>,
    /// The version now.
    pub to: Option<i32>,
    /// Whether the schema (namespace) itself was created.
    pub created_schema: bool,
    /// The migrations applied, in order.
    pub applied: Vec<AppliedMigration>,
    /// What it did, one line each.
    pub lines: Vec<String>,
}

/// One migration applied.
#[derive(Debug, Serialize)]
pub struct AppliedMigration {
    /// Its version.
    pub version: i32,
    /// What it made.
    pub description: String,
}

/// A PostgreSQL failure as a refusal with its code and hint.
pub(crate) fn pg_refusal(e: hcp_state_pg::PgError) -> Refusal {
    Refusal::store(&hcp_state_pg::store_error(e))
}

/// `hcp state migrate`: creates or upgrades the schema of the fleet's database to this
/// hcp's version, each missing migration in its own transaction under an advisory lock
/// (two machines migrating at once apply each once). With the file backend there is
/// nothing to migrate.
///
/// # Errors
/// The backend's refusal: `bad_config`, `state_unavailable` (a newer schema is never
/// downgraded).
pub fn migrate(rt: &Runtime) -> Result<Migrated, Refusal> {
    let (state, config) = match rt.backend() {
        Backend::File => {
            return Ok(Migrated {
                backend: "file",
                url: None,
                schema: None,
                from: None,
                to: None,
                created_schema: false,
                applied: Vec::new(),
                lines: vec![
                    "the state is the files of this store (config.json names no `state`): nothing to migrate"
                        .into(),
                ],
            });
        }
        Backend::Unusable(u) => return Err(Refusal::store(&u.error())),
        Backend::Postgres { state, config } => (state, config),
    };
    let r: MigrateReport = PgState::migrate(config).map_err(pg_refusal)?;
    let schema = state.schema_name().to_owned();
    Ok(Migrated {
        backend: hcp_state_pg::BACKEND,
        url: Some(config.redacted_url()),
        lines: r.lines(&schema),
        schema: Some(schema),
        from: r.from,
        to: Some(r.to),
        created_schema: r.created_schema,
        applied: r
            .applied
            .into_iter()
            .map(|(version, description)| AppliedMigration {
                version,
                description,
            })
            .collect(),
    })
}
