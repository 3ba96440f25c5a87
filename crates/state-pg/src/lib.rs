//! The PostgreSQL backend of hcp's shared state (RUNTIME §9): a fleet of machines on one
//! database shares sessions, grants and their suspensions, approvals, rate-limit and
//! budget counters, and the audit, which holds one hash chain per machine.
//!
//! What this crate owns: the schema and its migrations ([`schema`]), the connection
//! (libpq URL forms, TLS through rustls: [`StateConfig`]), the machine id
//! ([`MachineId`]), and every read and write of that state ([`PgState`]), among them the
//! one spending step [`PgState::admit`]. What it does not own: packs, pins, skills and
//! bindings (credentials never leave the machine; they stay in `$HCP_HOME`), the
//! validation of what a session may hold (`hcp-store`), and the decisions (`hcp-gate`,
//! the runtime policy). It never falls back to local files: every failure to reach or
//! use the database is [`PgError`] with code `state_unavailable` (exit 74).
//!
//! # Transactions
//! Every step is one transaction, most of them one statement and one round trip:
//! [`PgState::admit`] runs the server-side function `hcp_admit`, which under row locks
//! (READ COMMITTED, no SERIALIZABLE retries) re-checks the session, the grant and its
//! suspension, takes each counter slot and the approval, and appends the call's intent
//! record to this machine's chain, all or nothing; [`PgState::record`] appends a refusal
//! (durable before it returns) and [`PgState::record_outcome`] a call's outcome (committed
//! without waiting for the WAL flush). The crate README gives the schema, the chain
//! formula and the lock order.

#![deny(missing_docs)]

mod admit;
mod approval;
mod audit;
mod config;
mod conn;
mod conninfo;
mod counter;
mod error;
mod grant;
mod machine;
pub mod schema;
mod session;
mod snapshot;
mod sql;
mod time;
mod tls;

pub use admit::{
    Admission, AdmitError, AdmitRefusal, Admitted, ApprovalTake, CounterTake, GrantCheck,
};
pub use approval::{Approval, ApprovalError, ApprovalRequest, ApprovalState};
pub use audit::{
    AuditError, ChainReport, Cursor, Fault, INTENT_LINK_FIELD, KIND_FIELD, KIND_INTENT,
    KIND_OUTCOME, PgAppended, PgRecord, RESERVED_FIELDS, VerifyReport, body_from_entry, chain_hash,
};
pub use config::{
    CONNECT_TIMEOUT_S, DEFAULT_SCHEMA, LOCK_TIMEOUT_MS, STATEMENT_TIMEOUT_MS, StateConfig,
};
pub use error::{EXIT_STATE_UNAVAILABLE, Failure, PgError, PgResult, STATE_UNAVAILABLE};
pub use machine::{MACHINE_ID_FILE, MachineId};
pub use schema::{MigrateReport, SCHEMA_VERSION};
pub use session::SessionLookupError;
pub use snapshot::{CallSnapshot, SnapshotQuery};

use std::sync::{Mutex, MutexGuard};

/// What `hcp doctor` shows of the backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerInfo {
    /// The URL, without its password.
    pub url: String,
    /// The schema (namespace) of hcp's tables.
    pub schema: String,
    /// The server's `server_version` (`15.18 (Debian …)`).
    pub server_version: String,
    /// The schema's version ([`SCHEMA_VERSION`] once connected).
    pub schema_version: i32,
    /// Whether the connection is encrypted (TLS).
    pub tls: bool,
}

/// The shared state of one machine of a fleet: one connection (opened by
/// [`PgState::connect`], opened again on the next call after it broke), this machine's
/// id, and the checked configuration. `Send + Sync`: calls from several threads take
/// turns on the connection.
pub struct PgState {
    target: config::Target,
    schema: String,
    url: String,
    machine: MachineId,
    conn: Mutex<Option<postgres::Client>>,
    secret: std::sync::OnceLock<[u8; 32]>,
}

impl std::fmt::Debug for PgState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgState")
            .field("url", &self.url)
            .field("schema", &self.schema)
            .field("machine", &self.machine)
            .finish_non_exhaustive()
    }
}

impl PgState {
    /// Connects as `machine` and checks the schema's version (one round trip after the
    /// connection's start-up).
    ///
    /// # Errors
    /// [`PgError::Config`] for a bad `state`; [`PgError::Unavailable`] when the server
    /// cannot be reached or refuses the credentials; [`PgError::Schema`] when the schema is
    /// absent, older or newer than [`SCHEMA_VERSION`].
    pub fn connect(cfg: &StateConfig, machine: MachineId) -> PgResult<Self> {
        let state = Self::unchecked(cfg, machine)?;
        {
            let mut guard = state.lock()?;
            let mut client = config::open(&state.target)?;
            schema::check(&mut client, &state.schema)?;
            *guard = Some(client);
        }
        Ok(state)
    }

    fn unchecked(cfg: &StateConfig, machine: MachineId) -> PgResult<Self> {
        Ok(Self {
            target: config::target(cfg)?,
            schema: cfg.schema()?.to_owned(),
            url: cfg.redacted_url(),
            machine,
            conn: Mutex::new(None),
            secret: std::sync::OnceLock::new(),
        })
    }

    /// Creates or upgrades the schema of `cfg` to [`SCHEMA_VERSION`] (`hcp state migrate`).
    ///
    /// # Errors
    /// As [`schema::migrate_to`].
    pub fn migrate(cfg: &StateConfig) -> PgResult<MigrateReport> {
        Self::migrate_to(cfg, SCHEMA_VERSION)
    }

    /// Creates or upgrades the schema of `cfg` to `target` only: a staged upgrade, and
    /// how tests make a database one version behind.
    ///
    /// # Errors
    /// As [`schema::migrate_to`].
    pub fn migrate_to(cfg: &StateConfig, target: i32) -> PgResult<MigrateReport> {
        let t = config::target(cfg)?;
        let mut client = config::open(&t)?;
        schema::migrate_to(&mut client, cfg.schema()?, target.min(SCHEMA_VERSION))
    }

    /// This machine's id.
    pub fn machine(&self) -> &MachineId {
        &self.machine
    }

    /// The schema (namespace) of hcp's tables.
    pub fn schema_name(&self) -> &str {
        &self.schema
    }

    /// The server's version and the schema's, for `hcp doctor` (one round trip).
    ///
    /// # Errors
    /// [`PgError`].
    pub fn info(&self) -> PgResult<ServerInfo> {
        let tls = self.target.tls.is_some();
        self.with(|c| {
            let row = c.query_typed_one(
                "SELECT current_setting('server_version'), (SELECT max(version) FROM @.schema_version)",
                &[],
            )?;
            Ok(ServerInfo {
                url: self.url.clone(),
                schema: self.schema.clone(),
                server_version: row.try_get(0)?,
                schema_version: row.try_get::<_, Option<i32>>(1)?.unwrap_or(0),
                tls,
            })
        })
    }

    /// The fleet's secret key of the audit's argument digests (HMAC-SHA-256), 32 bytes,
    /// made by the first migration: one per fleet, since approvals are bound to an
    /// argument digest and taken on any machine. Read once per `PgState` (it never
    /// changes). Never written to the audit or logs.
    ///
    /// # Errors
    /// [`PgError`]; a missing or malformed secret is [`Failure::Damaged`].
    pub fn digest_secret(&self) -> PgResult<[u8; 32]> {
        if let Some(s) = self.secret.get() {
            return Ok(*s);
        }
        let secret = self.with(|c| {
            let row = c.query_typed_opt(
                "SELECT value FROM @.fleet_secret WHERE name = 'args_digest'",
                &[],
            )?;
            let value: Vec<u8> = match row {
                Some(r) => r.try_get(0)?,
                None => return Err(PgError::damaged("the fleet's digest secret is missing")),
            };
            value
                .try_into()
                .map_err(|_| PgError::damaged("the fleet's digest secret is not 32 bytes"))
        })?;
        Ok(*self.secret.get_or_init(|| secret))
    }

    fn lock(&self) -> PgResult<MutexGuard<'_, Option<postgres::Client>>> {
        self.conn
            .lock()
            .map_err(|_| PgError::unavailable(Failure::ConnectionLost, "a call panicked mid-way"))
    }

    /// Runs `f` on the connection, opening it again first when it broke. A call is never
    /// retried: a step whose answer was lost may have committed, and only the caller
    /// knows whether repeating it is safe.
    pub(crate) fn with<T>(
        &self,
        f: impl FnOnce(&mut conn::Conn<'_>) -> PgResult<T>,
    ) -> PgResult<T> {
        let mut guard = self.lock()?;
        if guard.as_ref().is_none_or(postgres::Client::is_closed) {
            *guard = None;
            let mut client = config::open(&self.target)?;
            schema::check(&mut client, &self.schema)?;
            *guard = Some(client);
        }
        let Some(client) = guard.as_mut() else {
            return Err(PgError::unavailable(
                Failure::ConnectionLost,
                "no connection",
            ));
        };
        let out = f(&mut conn::Conn {
            client: &mut *client,
            schema: &self.schema,
        });
        // After any failure the connection is opened again by the next call: one the
        // server ended (a restart, a terminated backend) is not always seen as closed yet.
        if out.is_err() || client.is_closed() {
            *guard = None;
        }
        out
    }
}
