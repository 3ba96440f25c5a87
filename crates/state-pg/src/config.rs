//! `config.json`'s `"state": {"url": …, "schema": …}` and how it becomes a connection.

use crate::conninfo;
use crate::error::{PgError, PgResult};
use crate::tls::{self, Roots, Verify};
use postgres::config::{Host, SslMode};
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

/// The default PostgreSQL schema (namespace) of hcp's tables.
pub use hcp_store::config::DEFAULT_SCHEMA;

/// `config.json`'s `state` object (RUNTIME §9): the store's, the one type of it.
pub use hcp_store::config::StateConfig;

/// Time limit of a connection attempt when the URL names none, in seconds.
pub const CONNECT_TIMEOUT_S: u64 = 5;

/// Time limit of one statement, in milliseconds (`statement_timeout`), unless the URL's
/// `options` set another.
pub const STATEMENT_TIMEOUT_MS: u64 = 10_000;

/// How long a statement waits for a row lock, in milliseconds (`lock_timeout`).
pub const LOCK_TIMEOUT_MS: u64 = 5_000;

/// What the PostgreSQL backend reads of a [`StateConfig`].
pub trait PgConfig {
    /// The Unix sockets the URL names (`host=/path` with its `port`, a `host` query
    /// parameter, each host of a list): `DIR/.s.PGSQL.PORT`, what a call's child must not
    /// reach, since the database behind them is the fleet's state (RUNTIME §5, §9). Empty
    /// for a URL that does not parse (such a state refuses every call) or names only TCP
    /// hosts.
    fn sockets(&self) -> Vec<PathBuf>;

    /// The schema name, checked.
    ///
    /// # Errors
    /// [`PgError::Config`] for a name outside `^[a-z_][a-z0-9_]{0,62}$` or one that
    /// starts with `pg_`.
    fn checked_schema(&self) -> PgResult<&str>;

    /// The URL without its password, for messages and `hcp doctor`.
    fn redacted_url(&self) -> String;
}

impl PgConfig for StateConfig {
    fn sockets(&self) -> Vec<PathBuf> {
        let Ok(split) = conninfo::split(&self.url) else {
            return Vec::new();
        };
        let Ok(config) = postgres::Config::from_str(&split.rest) else {
            return Vec::new();
        };
        let ports = config.get_ports();
        config
            .get_hosts()
            .iter()
            .enumerate()
            .filter_map(|(i, h)| match h {
                Host::Unix(dir) => {
                    // libpq's rule: one port for every host, or one port per host.
                    let port = match ports {
                        [] => 5432,
                        [one] => *one,
                        many => many.get(i).copied().unwrap_or(5432),
                    };
                    Some(dir.join(format!(".s.PGSQL.{port}")))
                }
                Host::Tcp(_) => None,
            })
            .collect()
    }

    fn checked_schema(&self) -> PgResult<&str> {
        let s = self.schema_name();
        if hcp_store::config::valid_schema_name(s) {
            Ok(s)
        } else {
            Err(PgError::Config {
                reason: format!(
                    "schema `{s}` must match `^[a-z_][a-z0-9_]{{0,62}}$` and not start with `pg_`"
                ),
            })
        }
    }

    fn redacted_url(&self) -> String {
        conninfo::redact(&self.url)
    }
}

/// A parsed connection: the client's configuration and how TLS is done.
#[derive(Clone)]
pub(crate) struct Target {
    pub config: postgres::Config,
    /// `None`: no TLS (`disable`, or every host a Unix socket).
    pub tls: Option<Verify>,
}

/// The two forms of a connection string, named in every refusal of one that does not parse.
const FORMS: &str = "libpq's URL `postgresql://USER@HOST/DB` or its key words `host=/path/to/socket dbname=DB user=USER`";

fn bad(reason: impl Into<String>) -> PgError {
    PgError::Config {
        reason: reason.into(),
    }
}

fn home_root_cert() -> Option<PathBuf> {
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".postgresql/root.crt"))
}

/// Parses `cfg` into a [`Target`], adding hcp's defaults: `connect_timeout`,
/// `application_name=hcp`, and the startup options `statement_timeout`, `lock_timeout`
/// (sent with the startup message: no round trip).
pub(crate) fn target(cfg: &StateConfig) -> PgResult<Target> {
    cfg.checked_schema()?;
    let split = conninfo::split(&cfg.url).map_err(|reason| {
        bad(format!(
            "{reason}: a PostgreSQL connection string is {FORMS}"
        ))
    })?;
    let mut config = postgres::Config::from_str(&split.rest).map_err(|e| {
        bad(format!(
            "`{}` is not a PostgreSQL connection string ({FORMS}): {e}",
            cfg.redacted_url()
        ))
    })?;
    if config.get_hosts().is_empty() {
        return Err(bad(format!(
            "`{}` names no host (`host=/path/to/socket` or `postgresql://HOST/…`)",
            cfg.redacted_url()
        )));
    }
    let roots = match split.sslrootcert.as_deref() {
        Some("system") => Some(Roots::System),
        Some(path) => Some(Roots::File(PathBuf::from(path))),
        None => None,
    };
    let default_roots = || {
        roots
            .clone()
            .or_else(|| home_root_cert().map(Roots::File))
            .ok_or_else(|| bad("`verify-ca`/`verify-full` needs `sslrootcert`"))
    };
    let (mode, verify) = match split.sslmode.as_deref().unwrap_or("prefer") {
        "disable" => (SslMode::Disable, None),
        "allow" | "prefer" => (SslMode::Prefer, Some(Verify::None)),
        "require" => (
            SslMode::Require,
            Some(roots.clone().map_or(Verify::None, Verify::Chain)),
        ),
        "verify-ca" => (SslMode::Require, Some(Verify::Chain(default_roots()?))),
        "verify-full" => (SslMode::Require, Some(Verify::Full(default_roots()?))),
        other => {
            return Err(bad(format!(
                "sslmode `{other}` is not one of disable, allow, prefer, require, verify-ca, \
                 verify-full"
            )));
        }
    };
    let all_unix = config
        .get_hosts()
        .iter()
        .all(|h| matches!(h, Host::Unix(_)));
    let tls = if all_unix { None } else { verify };
    config.ssl_mode(if tls.is_none() {
        SslMode::Disable
    } else {
        mode
    });
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(CONNECT_TIMEOUT_S));
    }
    if config.get_application_name().is_none() {
        config.application_name("hcp");
    }
    // Ours first so that the URL's own `-c statement_timeout=…` wins. No `search_path`:
    // every query names its schema (a pooler may drop these options).
    let mut options =
        format!("-c statement_timeout={STATEMENT_TIMEOUT_MS} -c lock_timeout={LOCK_TIMEOUT_MS}");
    if let Some(theirs) = config.get_options() {
        options.push(' ');
        options.push_str(theirs);
    }
    config.options(&options);
    Ok(Target { config, tls })
}

/// Whether `cfg` is a `state` the backend can use, without connecting: the same parse a
/// call makes of it ([`target`]: the connection string, its host, `sslmode` and
/// `sslrootcert`, the schema name), so that `hcp config set` refuses what every later
/// call would refuse (RUNTIME §3, §9).
///
/// # Errors
/// [`PgError::Config`] naming what is wrong (the URL without its password).
pub fn check(cfg: &StateConfig) -> PgResult<()> {
    target(cfg).map(|_| ())
}

/// Opens a connection to `target`.
pub(crate) fn open(target: &Target) -> PgResult<postgres::Client> {
    match &target.tls {
        None => Ok(target.config.connect(postgres::NoTls)?),
        Some(verify) => {
            let rustls = tls::client_config(verify)
                .map_err(|reason| PgError::unavailable(crate::error::Failure::Tls, reason))?;
            let connector = tokio_postgres_rustls::MakeRustlsConnect::new(rustls);
            Ok(target.config.connect(connector)?)
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn t(url: &str) -> PgResult<Target> {
        target(&StateConfig::new(url))
    }

    #[test]
    fn the_sockets_of_a_url() {
        let sockets = |u: &str| StateConfig::new(u).sockets();
        assert_eq!(
            sockets("host=/run/pg port=6432 dbname=x"),
            vec![PathBuf::from("/run/pg/.s.PGSQL.6432")]
        );
        assert_eq!(
            sockets("postgresql:///hcp?host=/var/run/postgresql"),
            vec![PathBuf::from("/var/run/postgresql/.s.PGSQL.5432")]
        );
        assert_eq!(
            sockets("host=/a,db.example,/b port=1,2,3 dbname=x"),
            vec![
                PathBuf::from("/a/.s.PGSQL.1"),
                PathBuf::from("/b/.s.PGSQL.3")
            ]
        );
        assert!(sockets("postgresql://db.example/x").is_empty());
        assert!(sockets("not a url").is_empty());
    }

    #[test]
    fn unix_sockets_never_use_tls_and_tcp_prefers_it() {
        let u = t("host=/run/pg dbname=x").unwrap();
        assert!(u.tls.is_none());
        assert_eq!(u.config.get_ssl_mode(), SslMode::Disable);
        let u = t("host=/run/pg sslmode=verify-full sslrootcert=/x.pem").unwrap();
        assert!(u.tls.is_none());
        let n = t("postgresql://db.example/x").unwrap();
        assert_eq!(n.tls, Some(Verify::None));
        assert_eq!(n.config.get_ssl_mode(), SslMode::Prefer);
        let r = t("postgresql://db.example/x?sslmode=require").unwrap();
        assert_eq!(r.tls, Some(Verify::None));
        assert_eq!(r.config.get_ssl_mode(), SslMode::Require);
        let r = t("postgresql://db.example/x?sslmode=require&sslrootcert=/ca.pem").unwrap();
        assert_eq!(r.tls, Some(Verify::Chain(Roots::File("/ca.pem".into()))));
        let f = t("postgresql://db.example/x?sslmode=verify-full&sslrootcert=system").unwrap();
        assert_eq!(f.tls, Some(Verify::Full(Roots::System)));
        let d = t("postgresql://db.example/x?sslmode=disable").unwrap();
        assert!(d.tls.is_none());
    }

    #[test]
    fn defaults_and_options_are_added() {
        let u = t("host=/run/pg options='-c statement_timeout=1'").unwrap();
        assert_eq!(
            u.config.get_options(),
            Some("-c statement_timeout=10000 -c lock_timeout=5000 -c statement_timeout=1")
        );
        assert_eq!(u.config.get_application_name(), Some("hcp"));
        assert_eq!(
            u.config.get_connect_timeout(),
            Some(&Duration::from_secs(CONNECT_TIMEOUT_S))
        );
    }

    #[test]
    fn check_refuses_what_a_call_refuses() {
        assert!(check(&StateConfig::new("host=/run/pg dbname=x")).is_ok());
        let e = check(&StateConfig::new("notaurl")).err().unwrap();
        assert_eq!(e.code(), "bad_config");
        let e = check(&StateConfig::new("postgresql://u:secret@h/x?sslmode=nope"))
            .err()
            .unwrap();
        assert!(!e.to_string().contains("secret"), "{e}");
    }

    #[test]
    fn bad_configurations_are_bad_config() {
        for url in [
            "postgresql://h/x?sslmode=verify-everything",
            "host=/run/pg nonsense=1",
            "dbname=x",
            "host='/unterminated",
        ] {
            let e = t(url).err().unwrap();
            assert_eq!(e.code(), "bad_config", "{url}");
        }
        let e = target(&StateConfig::new("host=/s").with_schema("Bad-Name"))
            .err()
            .unwrap();
        assert_eq!(e.code(), "bad_config");
        assert!(
            StateConfig::new("x")
                .with_schema("pg_x")
                .checked_schema()
                .is_err()
        );
    }
}
