//! The crate's one error type, and how a PostgreSQL failure becomes `state_unavailable`.

use hcp_model::Code;
use postgres::error::SqlState;
use std::path::PathBuf;

/// Why the database could not be used, for messages and hints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// Nothing answers at the address (no socket, connection refused, host unknown).
    Unreachable,
    /// The connection or a statement took longer than its time limit.
    Timeout,
    /// The server refused the role or its password.
    Credentials,
    /// A connection pooler in front of the server (pgbouncer) cannot log in to the server
    /// itself (`server_login_retry`, `server login failed`), or refused the role it was
    /// given: the pooler answers, and a login fails behind it or at it.
    PoolLogin,
    /// A connection pooler (pgbouncer) got no server connection in time
    /// (`query_wait_timeout`): the server is down, or the pooler cannot log in to it.
    PoolWait,
    /// The database named in the URL does not exist.
    NoDatabase,
    /// TLS could not be set up or the server's certificate was refused.
    Tls,
    /// The server is starting, shutting down or in recovery.
    ServerDown,
    /// The connection broke in the middle of a call (the server stopped or was killed).
    ConnectionLost,
    /// The server answered with an error this code does not expect.
    Server,
    /// A row of hcp's tables that does not decode (edited by hand, or another program).
    Damaged,
}

impl Failure {
    /// A short lowercase word for the failure: `unreachable`, `timeout`, `credentials`,
    /// `pool_login`, `pool_wait`, `no_database`, `tls`, `server_down`, `connection_lost`,
    /// `server`, `damaged`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unreachable => "unreachable",
            Self::Timeout => "timeout",
            Self::Credentials => "credentials",
            Self::PoolLogin => "pool_login",
            Self::PoolWait => "pool_wait",
            Self::NoDatabase => "no_database",
            Self::Tls => "tls",
            Self::ServerDown => "server_down",
            Self::ConnectionLost => "connection_lost",
            Self::Server => "server",
            Self::Damaged => "damaged",
        }
    }
}

/// What can go wrong in the PostgreSQL state backend. Every variant but
/// [`PgError::Config`] and [`PgError::Io`] has the code `state_unavailable` (RUNTIME §9,
/// exit 74); none is
/// ever answered by falling back to the files of `$HCP_HOME`.
#[derive(Debug, thiserror::Error)]
pub enum PgError {
    /// `config.json`'s `state` does not parse: a URL that is not a PostgreSQL connection
    /// string, an unknown `sslmode`, a bad schema name (code `bad_config`, exit 78).
    #[error("`state` in config.json is not usable: {reason}")]
    Config {
        /// Why, lowercase.
        reason: String,
    },
    /// The database cannot be reached or used (code `state_unavailable`).
    #[error("the state database is unavailable: {reason}")]
    Unavailable {
        /// What kind of failure.
        failure: Failure,
        /// Why, lowercase, without the password.
        reason: String,
        /// The client's error, when there is one.
        #[source]
        source: Option<Box<postgres::Error>>,
    },
    /// The database's schema is absent, older or newer than this hcp's (code
    /// `state_unavailable`, hint `hcp state migrate`).
    #[error("{}", schema_message(*.found, *.expected))]
    Schema {
        /// The version found; `None` when there is no schema at all.
        found: Option<i32>,
        /// The version this hcp reads and writes ([`crate::SCHEMA_VERSION`]).
        expected: i32,
    },
    /// The machine id file in `$HCP_HOME` cannot be read or made (code `store_io`).
    #[error("cannot {action} the machine id `{path}`")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

fn schema_message(found: Option<i32>, expected: i32) -> String {
    match found {
        None => "the state database has no hcp schema".to_owned(),
        Some(v) if v < expected => {
            format!("the state database's schema is version {v}, older than this hcp's {expected}")
        }
        Some(v) => {
            format!("the state database's schema is version {v}, newer than this hcp's {expected}")
        }
    }
}

impl PgError {
    /// The stable code: `state_unavailable`, `bad_config` ([`PgError::Config`]) or
    /// `store_io` ([`PgError::Io`]).
    pub fn code(&self) -> Code {
        match self {
            Self::Config { .. } => Code::BadConfig,
            Self::Io { .. } => Code::StoreIo,
            Self::Unavailable { .. } | Self::Schema { .. } => Code::StateUnavailable,
        }
    }

    /// The failure's kind, for [`PgError::Unavailable`].
    pub fn failure(&self) -> Option<Failure> {
        match self {
            Self::Unavailable { failure, .. } => Some(*failure),
            _ => None,
        }
    }

    /// A hint for the operator, lowercase.
    pub fn hint(&self) -> Option<String> {
        Some(match self {
            Self::Config { .. } => {
                "`state.url` takes a `postgresql://…` URL or `host=… dbname=…` key words".into()
            }
            Self::Schema { found, expected } => match found {
                Some(v) if v > expected => {
                    "this hcp is older than the database's schema: upgrade hcp on this machine"
                        .into()
                }
                _ => "run `hcp state migrate` (as the owner) to create or upgrade it".into(),
            },
            Self::Unavailable { failure, .. } => match failure {
                Failure::Unreachable | Failure::ServerDown | Failure::ConnectionLost => {
                    "is the server running? check `state.url` in config.json (`hcp config get \
                     state`; `hcp config set state.url URL` works while the state is \
                     unavailable, and `hcp config unset state` makes the state this \
                     store's files again); hcp never falls back to local state on its own"
                        .into()
                }
                Failure::Credentials => {
                    "check the role and password of `state.url` in config.json (`hcp config \
                     set state.url URL` works while the state is unavailable)"
                        .into()
                }
                Failure::PoolLogin => {
                    "the connection pooler answered, and a login failed at it or behind it: \
                     check the pooler's own login to the server (pgbouncer: the password of \
                     its `[databases]` entry, `auth_file` or `auth_user`, and the server's \
                     `pg_hba.conf` for that role), then the role and password of `state.url`, \
                     which the pooler checks; the pooler tries the server again after \
                     `server_login_retry` seconds"
                        .into()
                }
                Failure::PoolWait => "the connection pooler got no server connection within its \
                     `query_wait_timeout`: is the server running, and can the pooler log in \
                     to it? (pgbouncer's log says `server_login_retry` or `login failed` when \
                     it cannot: check the password of its `[databases]` entry, `auth_file` or \
                     `auth_user`); hcp never falls back to local state"
                    .into(),
                Failure::NoDatabase => "create the database, then run `hcp state migrate`".into(),
                Failure::Tls => "check `sslmode` and `sslrootcert` of `state.url`".into(),
                Failure::Timeout => "the database is slow or a lock is held too long".into(),
                Failure::Damaged => {
                    "a row of hcp's tables was changed outside hcp; `hcp audit verify` checks \
                     the audit"
                        .into()
                }
                Failure::Server => return None,
            },
            Self::Io { .. } => return None,
        })
    }

    /// A [`PgError::Unavailable`] without a client error.
    pub fn unavailable(failure: Failure, reason: impl Into<String>) -> Self {
        Self::Unavailable {
            failure,
            reason: reason.into(),
            source: None,
        }
    }

    /// A [`PgError::Unavailable`] for a row that does not decode.
    pub fn damaged(reason: impl Into<String>) -> Self {
        Self::unavailable(Failure::Damaged, reason)
    }
}

/// Classifies a client error of a connection attempt or a statement.
pub(crate) fn classify(e: &postgres::Error) -> Failure {
    // pgbouncer reports its own failed login to the server as a protocol error (08P01)
    // whose message alone says what it is: "server login has been failing, …
    // (server_login_retry)", or "server login failed: …".
    if let Some(db) = e.as_db_error()
        && let Some(f) = pooler(db.code(), db.message())
    {
        return f;
    }
    if let Some(code) = e.code() {
        return match code {
            c if *c == SqlState::INVALID_PASSWORD
                || *c == SqlState::INVALID_AUTHORIZATION_SPECIFICATION =>
            {
                Failure::Credentials
            }
            c if *c == SqlState::INVALID_CATALOG_NAME => Failure::NoDatabase,
            c if *c == SqlState::ADMIN_SHUTDOWN
                || *c == SqlState::CRASH_SHUTDOWN
                || *c == SqlState::CANNOT_CONNECT_NOW
                || *c == SqlState::TOO_MANY_CONNECTIONS =>
            {
                Failure::ServerDown
            }
            c if *c == SqlState::QUERY_CANCELED || *c == SqlState::LOCK_NOT_AVAILABLE => {
                Failure::Timeout
            }
            c if c.code().starts_with("08") => Failure::ConnectionLost,
            _ => Failure::Server,
        };
    }
    if e.is_closed() {
        return Failure::ConnectionLost;
    }
    let text = describe(e);
    // A column the client cannot decode (a NULL in an array, a time out of range): a
    // row changed outside hcp, not a server that went away.
    if text.contains("error deserializing column") {
        return Failure::Damaged;
    }
    if text.contains("password") || text.contains("authentication") {
        Failure::Credentials
    } else if text.contains("timeout") || text.contains("timed out") {
        Failure::Timeout
    } else if text.contains("tls") || text.contains("certificate") || text.contains("ssl") {
        Failure::Tls
    } else if text.contains("error connecting") || text.contains("connection refused") {
        Failure::Unreachable
    } else {
        Failure::ConnectionLost
    }
}

/// A connection pooler's own report (pgbouncer's are protocol errors, 08P01, told apart by
/// their words): it cannot log in to the server (`server_login_retry`, `server login
/// failed`, or a password refused, which the server itself reports as 28P01), or it got no
/// server connection in time (`query_wait_timeout`).
fn pooler(code: &SqlState, message: &str) -> Option<Failure> {
    let m = message.to_lowercase();
    if m.contains("server_login_retry") || m.starts_with("server login") {
        Some(Failure::PoolLogin)
    } else if m.contains("query_wait_timeout") {
        Some(Failure::PoolWait)
    } else if *code == SqlState::PROTOCOL_VIOLATION && m.contains("authentication failed") {
        Some(Failure::PoolLogin)
    } else {
        None
    }
}

/// The message of a client error, lowercase, with its cause chain.
pub(crate) fn describe(e: &postgres::Error) -> String {
    let mut out = e.to_string();
    if let Some(db) = e.as_db_error() {
        out = format!("{} ({})", db.message(), db.code().code());
    } else {
        let mut src = std::error::Error::source(e);
        while let Some(s) = src {
            out.push_str(": ");
            out.push_str(&s.to_string());
            src = s.source();
        }
    }
    out.to_lowercase()
}

impl From<postgres::Error> for PgError {
    fn from(e: postgres::Error) -> Self {
        let failure = classify(&e);
        Self::Unavailable {
            failure,
            reason: describe(&e),
            source: Some(Box::new(e)),
        }
    }
}

/// A result of this crate.
pub type PgResult<T> = Result<T, PgError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pooler_that_cannot_log_in_is_named_with_what_to_check() {
        let pv = SqlState::PROTOCOL_VIOLATION;
        for m in [
            "server login has been failing, try again later (server_login_retry)",
            "server login has been failing, cached error: password authentication failed for user \"hcp\" (server_login_retry)",
            "server login failed: FATAL password authentication failed",
            "password authentication failed for user \"hcp\"",
        ] {
            assert_eq!(pooler(&pv, m), Some(Failure::PoolLogin), "{m}");
        }
        assert_eq!(pooler(&pv, "query_wait_timeout"), Some(Failure::PoolWait));
        // The server's own refusal of a password is the credentials of `state.url`.
        assert_eq!(
            pooler(
                &SqlState::INVALID_PASSWORD,
                "password authentication failed for user \"hcp\""
            ),
            None
        );
        for f in [Failure::PoolLogin, Failure::PoolWait] {
            let hint = PgError::unavailable(f, "x").hint().unwrap_or_default();
            assert!(hint.contains("pooler") && hint.contains("log"), "{hint}");
        }
    }
}
