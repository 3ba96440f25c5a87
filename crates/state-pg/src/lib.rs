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
mod export;
mod grant;
mod keyed;
mod machine;
mod reads;
pub mod schema;
mod session;
mod snapshot;
mod sql;
mod state;
mod time;
mod tls;

pub use admit::{
    Admission, AdmitError, AdmitRefusal, Admitted, ApprovalTake, CounterTake, GrantCheck,
};
pub use approval::{Approval, ApprovalError, ApprovalRequest, ApprovalState};
pub use audit::{
    AuditError, ChainReport, Cursor, Fault, INTENT_LINK_FIELD, KIND_FIELD, KIND_INTENT,
    KIND_OUTCOME, OpenIntent, PgAppended, PgRecord, RESERVED_FIELDS, VerifyReport, body_from_entry,
    chain_hash,
};
pub use config::{
    CONNECT_TIMEOUT_S, DEFAULT_SCHEMA, LOCK_TIMEOUT_MS, PgConfig, STATEMENT_TIMEOUT_MS,
    StateConfig, check,
};
pub use error::{Failure, PgError, PgResult};
pub use keyed::{WitnessChoice, keyed_chain_hash};
pub use machine::{MACHINE_ID_FILE, MachineId};
pub use reads::PgCallReads;
pub use schema::{MigrateReport, SCHEMA_VERSION};
pub use session::SessionLookupError;
pub use snapshot::{CallSnapshot, SnapshotQuery};
pub use state::{BACKEND, store_error};

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
    conn: Mutex<Option<Live>>,
    secret: std::sync::OnceLock<[u8; 32]>,
    /// The last slow failure to connect and when, answered again without a new attempt
    /// for [`RETRY_AFTER`] (a call touches the state several times; a host that does not
    /// answer would make each wait for the connect time limit).
    failed: Mutex<Option<(std::time::Instant, Remembered)>>,
    /// This machine's own store: its chain key, checkpoint key and id ([`keyed`]).
    local: Option<keyed::Local>,
    /// The head of this machine's chain as last seen (seq, hash): what the next record's
    /// keyed hash is computed on.
    head: Mutex<Option<(u64, String)>>,
    /// Where checkpoints are witnessed.
    witness: WitnessChoice,
    /// A record of this process's was a multiple of 100 in its chain.
    due: std::sync::atomic::AtomicBool,
}

/// An open connection, and whether the schema's version was checked on it yet: a new
/// connection's check rides on its first statement when that statement can carry it
/// ([`PgState::call_reads`]), else it is a round trip of its own before the first one.
struct Live {
    client: postgres::Client,
    checked: bool,
}

/// How long a slow failure to connect is answered again before the next attempt.
pub const RETRY_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// A failure to connect that took at least this long is remembered for [`RETRY_AFTER`].
pub const SLOW_FAILURE: std::time::Duration = std::time::Duration::from_millis(250);

/// A connection failure, kept to answer it again.
#[derive(Debug, Clone)]
enum Remembered {
    Unavailable(Failure, String),
    Schema(Option<i32>, i32),
}

impl Remembered {
    fn of(e: &PgError) -> Option<Self> {
        match e {
            PgError::Unavailable {
                failure, reason, ..
            } => Some(Self::Unavailable(*failure, reason.clone())),
            PgError::Schema { found, expected } => Some(Self::Schema(*found, *expected)),
            _ => None,
        }
    }

    fn error(&self) -> PgError {
        match self {
            Self::Unavailable(f, r) => PgError::unavailable(*f, r.clone()),
            Self::Schema(found, expected) => PgError::Schema {
                found: *found,
                expected: *expected,
            },
        }
    }
}

/// The same failure again (a [`PgError`] holds its cause once): for each part of a call's
/// reads that one statement answered.
pub(crate) fn again(e: &PgError) -> PgError {
    Remembered::of(e).map_or_else(
        || PgError::unavailable(Failure::Server, e.to_string()),
        |r| r.error(),
    )
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
        let live = state.reconnect(true)?;
        *state.lock()? = Some(live);
        Ok(state)
    }

    /// The state of `cfg` as `machine`, connecting on first use (so a process that needs
    /// no state never connects). The configuration is checked now; the server, the
    /// credentials and the schema's version when the first step runs.
    ///
    /// # Errors
    /// [`PgError::Config`] for a bad `state`.
    pub fn open(cfg: &StateConfig, machine: MachineId) -> PgResult<Self> {
        Self::unchecked(cfg, machine)
    }

    fn unchecked(cfg: &StateConfig, machine: MachineId) -> PgResult<Self> {
        Ok(Self {
            failed: Mutex::new(None),
            target: config::target(cfg)?,
            schema: cfg.checked_schema()?.to_owned(),
            url: cfg.redacted_url(),
            machine,
            conn: Mutex::new(None),
            secret: std::sync::OnceLock::new(),
            local: None,
            head: Mutex::new(None),
            witness: WitnessChoice::None,
            due: std::sync::atomic::AtomicBool::new(false),
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
        schema::migrate_to(
            &mut client,
            cfg.checked_schema()?,
            target.min(SCHEMA_VERSION),
        )
    }

    /// The server's facts on a connection of its own that does not check the schema's
    /// version (`schema_version` 0 when there is no schema): what `hcp doctor` shows of
    /// a database this hcp cannot use yet.
    ///
    /// # Errors
    /// [`PgError::Config`], [`PgError::Unavailable`].
    pub fn probe(cfg: &StateConfig) -> PgResult<ServerInfo> {
        let t = config::target(cfg)?;
        let schema = cfg.checked_schema()?;
        let mut client = config::open(&t)?;
        let server_version: String = client
            .query_typed_one("SELECT current_setting('server_version')", &[])?
            .try_get(0)?;
        Ok(ServerInfo {
            url: cfg.redacted_url(),
            schema: schema.to_owned(),
            server_version,
            schema_version: schema::version(&mut client, schema)?.unwrap_or(0),
            tls: t.tls.is_some(),
        })
    }

    /// Another state of the same database and machine with a connection of its own
    /// (opened on first use): what a follower of the audit uses, so that it does not
    /// hold this one's.
    pub fn detached(&self) -> Self {
        Self {
            target: self.target.clone(),
            schema: self.schema.clone(),
            url: self.url.clone(),
            machine: self.machine.clone(),
            conn: Mutex::new(None),
            secret: std::sync::OnceLock::new(),
            failed: Mutex::new(None),
            local: self.local.clone(),
            head: Mutex::new(None),
            witness: self.witness.clone(),
            due: std::sync::atomic::AtomicBool::new(false),
        }
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

    /// A new connection; with `check`, its schema checked and the fleet's secret read
    /// with it (one round trip after the start-up). A failure is remembered for
    /// [`RETRY_AFTER`].
    fn reconnect(&self, check: bool) -> PgResult<Live> {
        let mut failed = self.failed.lock().map_err(|_| {
            PgError::unavailable(Failure::ConnectionLost, "a call panicked mid-way")
        })?;
        if let Some((at, why)) = failed.as_ref()
            && at.elapsed() < RETRY_AFTER
        {
            return Err(why.error());
        }
        let started = std::time::Instant::now();
        let attempt = config::open(&self.target).and_then(|mut client| {
            if check {
                self.check(&mut client)?;
            }
            Ok(client)
        });
        match attempt {
            Ok(client) => {
                *failed = None;
                Ok(Live {
                    client,
                    checked: check,
                })
            }
            Err(e) => {
                // Only a slow failure (a host that does not answer) is worth not repeating;
                // a quick one (no socket, refused) is tried again at once.
                *failed = Remembered::of(&e)
                    .filter(|_| started.elapsed() >= SLOW_FAILURE)
                    .map(|r| (std::time::Instant::now(), r));
                Err(e)
            }
        }
    }

    /// The schema's version checked on `client`, the fleet's secret kept (one round trip).
    fn check(&self, client: &mut postgres::Client) -> PgResult<()> {
        if let Some(s) = schema::check_reading_secret(client, &self.schema)? {
            let _ = self.secret.set(s);
        }
        Ok(())
    }

    /// What a statement that carries the schema check ([`PgState::with_first`]) found:
    /// the version must be [`SCHEMA_VERSION`]; the secret is kept (a missing one is said
    /// by [`PgState::digest_secret`]).
    ///
    /// # Errors
    /// [`PgError::Schema`] for any other version.
    pub(crate) fn checked_by(&self, version: Option<i32>, secret: Option<Vec<u8>>) -> PgResult<()> {
        if version != Some(SCHEMA_VERSION) {
            return Err(PgError::Schema {
                found: version,
                expected: SCHEMA_VERSION,
            });
        }
        if let Some(s) = secret.and_then(|s| <[u8; 32]>::try_from(s).ok()) {
            let _ = self.secret.set(s);
        }
        Ok(())
    }

    fn lock(&self) -> PgResult<MutexGuard<'_, Option<Live>>> {
        self.conn
            .lock()
            .map_err(|_| PgError::unavailable(Failure::ConnectionLost, "a call panicked mid-way"))
    }

    /// Runs `f` on the connection, opening it again first when it broke (and checking a
    /// new connection's schema before `f`). A call is never retried: a step whose answer
    /// was lost may have committed, and only the caller knows whether repeating it is
    /// safe.
    pub(crate) fn with<T: Send>(
        &self,
        f: impl FnOnce(&mut conn::Conn<'_>) -> PgResult<T> + Send,
    ) -> PgResult<T> {
        self.run(true, f)
    }

    /// As [`PgState::with`], for a read-only statement that carries the schema check
    /// itself: `f` must check what its statement read with [`PgState::checked_by`]
    /// before it uses anything else, so a new connection runs no check of its own. When
    /// that statement fails on a connection not checked yet (a schema of another version
    /// may lack what it reads), the check runs on its own and its error, if any, is the
    /// answer.
    pub(crate) fn with_first<T: Send>(
        &self,
        f: impl FnOnce(&mut conn::Conn<'_>) -> PgResult<T> + Send,
    ) -> PgResult<T> {
        self.run(false, f)
    }

    /// The client blocks on an async runtime of its own, which tokio refuses on a thread
    /// inside another (an `hcp mcp` server's): there the step runs on a thread of its own,
    /// and this one waits for it.
    fn run<T: Send>(
        &self,
        check_first: bool,
        f: impl FnOnce(&mut conn::Conn<'_>) -> PgResult<T> + Send,
    ) -> PgResult<T> {
        if tokio::runtime::Handle::try_current().is_err() {
            return self.run_here(check_first, f);
        }
        std::thread::scope(|s| {
            s.spawn(|| self.run_here(check_first, f))
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p))
        })
    }

    fn run_here<T>(
        &self,
        check_first: bool,
        f: impl FnOnce(&mut conn::Conn<'_>) -> PgResult<T>,
    ) -> PgResult<T> {
        let mut guard = self.lock()?;
        if guard.as_ref().is_none_or(|l| l.client.is_closed()) {
            *guard = None;
            *guard = Some(self.reconnect(check_first)?);
        }
        let Some(live) = guard.as_mut() else {
            return Err(PgError::unavailable(
                Failure::ConnectionLost,
                "no connection",
            ));
        };
        if check_first && !live.checked {
            if let Err(e) = self.check(&mut live.client) {
                *guard = None;
                return Err(e);
            }
            live.checked = true;
        }
        let unchecked = !live.checked;
        let mut out = f(&mut conn::Conn {
            client: &mut live.client,
            schema: &self.schema,
        });
        if unchecked {
            match &out {
                Ok(_) => live.checked = true,
                Err(_) if !live.client.is_closed() => {
                    if let Err(e) = self.check(&mut live.client) {
                        out = Err(e);
                    }
                }
                Err(_) => {}
            }
        }
        // After any failure the connection is opened again by the next call: one the
        // server ended (a restart, a terminated backend) is not always seen as closed yet.
        if out.is_err() || live.client.is_closed() {
            *guard = None;
        }
        out
    }
}
