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

use crate::Runtime;
use crate::refusal::Refusal;
use hcp_model::{ArgValue, Capability, Code, PackId};
use hcp_state_pg::{MachineId, MigrateReport, PgState, SCHEMA_VERSION, ServerInfo};
use hcp_store::approval::{Approval, ApprovalError};
use hcp_store::audit::checkpoint::Checkpoint;
use hcp_store::audit::{Appended, AuditError, AuditReport, Entry, Outcome};
use hcp_store::config::{ConfigError, StateConfig};
use hcp_store::counter::{Limits, Verdict};
use hcp_store::grant::{Grant, HeldCapability, PackScope};
use hcp_store::home::StoreDir;
use hcp_store::session::{NewSession, PrincipalId, Session, SessionError, Token};
use hcp_store::state::{Admission, AdmitError, Admitted, ApprovalKey, ApprovalRequest, State};
use hcp_store::{Home, StoreError};
use jiff::Timestamp;
use serde::Serialize;
use std::path::PathBuf;
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
        config: hcp_state_pg::StateConfig,
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
            Self::Unusable(u) => u.backend,
        }
    }
}

/// Chooses the backend of `home` and makes its state (see the module docs).
/// `file` makes the file state (the runtime gives it its crash-test seam).
pub(crate) fn choose(
    home: &Home,
    file: impl FnOnce() -> Arc<dyn State>,
) -> (Backend, Arc<dyn State>) {
    let backend = match StateConfig::load(home.root()) {
        Ok(None) => return (Backend::File, file()),
        Ok(Some(cfg)) => postgres(home, &cfg),
        Err(e) => Backend::Unusable(Unusable::config("unknown", &e)),
    };
    let state: Arc<dyn State> = match &backend {
        Backend::Postgres { state, .. } => state.clone(),
        Backend::Unusable(u) => Arc::new(u.clone()),
        Backend::File => file(),
    };
    (backend, state)
}

fn postgres(home: &Home, cfg: &StateConfig) -> Backend {
    let pg = pg_config(cfg);
    let machine = match MachineId::load_or_create(&home.dir(StoreDir::State)) {
        Ok(m) => m,
        Err(e) => return Backend::Unusable(Unusable::of(hcp_state_pg::store_error(e))),
    };
    match PgState::open(&pg, machine) {
        Ok(state) => Backend::Postgres {
            state: Arc::new(state),
            config: pg,
        },
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

/// The PostgreSQL backend's configuration from `config.json`'s.
pub fn pg_config(cfg: &StateConfig) -> hcp_state_pg::StateConfig {
    let c = hcp_state_pg::StateConfig::new(cfg.url.clone());
    match &cfg.schema {
        Some(s) => c.with_schema(s.clone()),
        None => c,
    }
}

/// A backend that cannot be used: every method answers its error.
#[derive(Debug, Clone)]
pub struct Unusable {
    backend: &'static str,
    why: Why,
}

#[derive(Debug, Clone)]
enum Why {
    Config {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    Io {
        action: &'static str,
        path: PathBuf,
        kind: std::io::ErrorKind,
        text: String,
    },
    Unavailable {
        reason: String,
        hint: Option<String>,
    },
}

impl Unusable {
    fn config(backend: &'static str, e: &ConfigError) -> Self {
        let why = match e {
            ConfigError::Invalid {
                path,
                line,
                column,
                message,
            } => Why::Config {
                path: path.clone(),
                line: *line,
                column: *column,
                message: message.clone(),
            },
            ConfigError::Io { path, source } => Why::Io {
                action: "read",
                path: path.clone(),
                kind: source.kind(),
                text: source.to_string(),
            },
        };
        Self { backend, why }
    }

    fn of(e: StoreError) -> Self {
        let why = match e {
            StoreError::Io {
                action,
                path,
                source,
            } => Why::Io {
                action,
                path,
                kind: source.kind(),
                text: source.to_string(),
            },
            StoreError::Config(c) => return Self::config(hcp_state_pg::BACKEND, &c),
            other => Why::Unavailable {
                hint: other.hint().map(str::to_owned),
                reason: other.to_string(),
            },
        };
        Self {
            backend: hcp_state_pg::BACKEND,
            why,
        }
    }

    /// The error every method answers.
    pub fn error(&self) -> StoreError {
        match &self.why {
            Why::Config {
                path,
                line,
                column,
                message,
            } => StoreError::Config(Box::new(ConfigError::Invalid {
                path: path.clone(),
                line: *line,
                column: *column,
                message: message.clone(),
            })),
            Why::Io {
                action,
                path,
                kind,
                text,
            } => StoreError::Io {
                action,
                path: path.clone(),
                source: std::io::Error::new(*kind, text.clone()),
            },
            Why::Unavailable { reason, hint } => StoreError::StateUnavailable {
                backend: self.backend.to_owned(),
                reason: reason.clone(),
                hint: hint.clone(),
            },
        }
    }

    fn session(&self) -> SessionError {
        SessionError::Store(self.error())
    }

    fn audit(&self) -> AuditError {
        AuditError::Store(self.error())
    }
}

impl State for Unusable {
    fn backend(&self) -> &'static str {
        self.backend
    }
    fn session_start(
        &self,
        _: &NewSession,
        _: Timestamp,
    ) -> Result<(Token, Session), SessionError> {
        Err(self.session())
    }
    fn session_resolve(&self, _: &str, _: Timestamp) -> Result<Session, SessionError> {
        Err(self.session())
    }
    fn session_end(&self, _: &str, _: Timestamp) -> Result<(Session, bool), SessionError> {
        Err(self.session())
    }
    fn session_end_principal(
        &self,
        _: &PrincipalId,
        _: Timestamp,
    ) -> Result<Vec<Session>, SessionError> {
        Err(self.session())
    }
    fn session_list(&self) -> Result<Vec<Session>, StoreError> {
        Err(self.error())
    }
    fn grants_held(&self, _: &PrincipalId, _: &PackId) -> Result<Vec<HeldCapability>, StoreError> {
        Err(self.error())
    }
    fn grant(
        &self,
        _: &PrincipalId,
        _: &PackScope,
        _: &[Capability],
        _: Timestamp,
    ) -> Result<Vec<Grant>, StoreError> {
        Err(self.error())
    }
    fn revoke(
        &self,
        _: &PrincipalId,
        _: &PackScope,
        _: &[Capability],
    ) -> Result<Vec<Grant>, StoreError> {
        Err(self.error())
    }
    fn grants_list(&self) -> Result<Vec<Grant>, StoreError> {
        Err(self.error())
    }
    fn pack_content_changed(&self, _: &PackId, _: Timestamp) -> Result<(), StoreError> {
        Err(self.error())
    }
    fn pack_removed(&self, _: &PackId) -> Result<(), StoreError> {
        Err(self.error())
    }
    fn approval_request(&self, _: &ApprovalRequest, _: Timestamp) -> Result<Approval, StoreError> {
        Err(self.error())
    }
    fn approval_lookup(
        &self,
        _: &ApprovalKey,
        _: Timestamp,
    ) -> Result<Option<Approval>, StoreError> {
        Err(self.error())
    }
    fn approvals_list(&self) -> Result<Vec<Approval>, StoreError> {
        Err(self.error())
    }
    fn approve(&self, _: &str, _: Timestamp) -> Result<Approval, ApprovalError> {
        Err(ApprovalError::Store(self.error()))
    }
    fn args_digest(&self, _: &[(&str, &ArgValue)]) -> Result<String, StoreError> {
        Err(self.error())
    }
    fn counter_check(&self, _: &str, _: &str, _: Limits, _: u64) -> Result<Verdict, StoreError> {
        Err(self.error())
    }
    fn admit(&self, _: &Admission<'_>) -> Result<Admitted, AdmitError> {
        Err(AdmitError::State(self.error()))
    }
    fn record(&self, _: &Entry) -> Result<Appended, AuditError> {
        Err(self.audit())
    }
    fn audit_ready(&self) -> Result<(), AuditError> {
        Err(self.audit())
    }
    fn record_outcome(&self, _: &Outcome) -> Result<Appended, AuditError> {
        Err(self.audit())
    }
    fn audit_verify(&self, _: Option<&Checkpoint>) -> Result<AuditReport, AuditError> {
        Err(self.audit())
    }
    fn audit_tail(&self, _: usize) -> Result<(Vec<Vec<u8>>, u64), AuditError> {
        Err(self.audit())
    }
    fn audit_follow(&self, _: usize) -> Result<Box<dyn hcp_store::audit::AuditFollow>, AuditError> {
        Err(self.audit())
    }
    fn audit_checkpoint(&self, _: u64, _: &str, _: Timestamp) -> Result<Checkpoint, AuditError> {
        Err(self.audit())
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
fn pg_refusal(e: hcp_state_pg::PgError) -> Refusal {
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

/// The state backend as `hcp doctor` shows it (RUNTIME §9).
#[derive(Debug, Serialize)]
pub struct StateHealth {
    /// `file`, `postgresql` (or what `config.json` asked for when it cannot be used).
    pub backend: &'static str,
    /// The URL without its password.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The PostgreSQL schema.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// This store's machine id in the fleet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    /// The server's version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_version: Option<String>,
    /// The schema's version in the database.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema_version: Option<i32>,
    /// The schema version this hcp reads and writes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected_schema_version: Option<i32>,
    /// Whether the connection is encrypted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<bool>,
    /// Whether the backend answers (the file backend always does).
    pub reachable: bool,
    /// Why it cannot be used, with its code and hint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<StateProblem>,
}

/// Why the state backend cannot be used.
#[derive(Debug, Serialize)]
pub struct StateProblem {
    /// The code (`state_unavailable`, `bad_config` …).
    pub code: Code,
    /// What is wrong.
    pub message: String,
    /// What to do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl From<Refusal> for StateProblem {
    fn from(r: Refusal) -> Self {
        Self {
            code: r.code,
            message: r.message,
            hint: r.hint,
        }
    }
}

/// Examines the state backend of `rt`: its name, and for PostgreSQL the server's and the
/// schema's versions and whether it answers (one connection, one round trip).
pub fn health(rt: &Runtime) -> StateHealth {
    let mut h = StateHealth {
        backend: rt.backend().name(),
        url: None,
        schema: None,
        machine: None,
        server_version: None,
        schema_version: None,
        expected_schema_version: None,
        tls: None,
        reachable: true,
        error: None,
    };
    match rt.backend() {
        Backend::File => {}
        Backend::Unusable(u) => {
            h.reachable = false;
            h.error = Some(Refusal::store(&u.error()).into());
        }
        Backend::Postgres { state, config } => {
            h.url = Some(config.redacted_url());
            h.schema = Some(state.schema_name().to_owned());
            h.machine = Some(state.machine().as_str().to_owned());
            h.expected_schema_version = Some(SCHEMA_VERSION);
            match server_info(state, config) {
                Ok(i) => {
                    h.server_version = Some(i.server_version);
                    h.schema_version = Some(i.schema_version);
                    h.tls = Some(i.tls);
                    if i.schema_version != SCHEMA_VERSION {
                        h.error = Some(
                            pg_refusal(hcp_state_pg::PgError::Schema {
                                found: Some(i.schema_version).filter(|v| *v > 0),
                                expected: SCHEMA_VERSION,
                            })
                            .into(),
                        );
                    }
                }
                Err(e) => {
                    h.reachable = !matches!(e, hcp_state_pg::PgError::Unavailable { .. });
                    h.error = Some(pg_refusal(e).into());
                }
            }
        }
    }
    h
}

/// The server's facts; a schema of another version still shows the server's version
/// (read on a connection of its own, which does not check the schema).
fn server_info(
    state: &PgState,
    config: &hcp_state_pg::StateConfig,
) -> Result<ServerInfo, hcp_state_pg::PgError> {
    match state.info() {
        Err(hcp_state_pg::PgError::Schema { .. }) => PgState::probe(config),
        other => other,
    }
}
