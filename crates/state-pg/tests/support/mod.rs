//! What the PostgreSQL tests share: the server from `.ci/pg-start` (`HCP_TEST_PG_URL`),
//! a fresh schema per test, private servers for the tests that stop or reconfigure one,
//! and fixtures.
//!
//! Without a server a test prints `skipped: <reason>` straight to stderr (so a plain
//! `cargo test` shows it) and returns; under `CI=true` it fails instead.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use hcp_state_pg::{MachineId, PgState, StateConfig};
use hcp_store::session::{PrincipalId, Session, Timestamp, Token, token_digest};
use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Says why a test does not run, as `skipped: TEST: REASON` straight to stderr (which a
/// plain `cargo test` shows; `eprintln!` alone would be captured), like the workspace's
/// other skips; under `CI=true` that is a failure.
pub fn skip(reason: &str) {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("a test");
    assert!(
        !std::env::var("CI").is_ok_and(|v| v == "true"),
        "CI=true and {test} cannot run: {reason}"
    );
    let _ = writeln!(std::io::stderr().lock(), "skipped: {test}: {reason}");
    hcp_examples::skipped::record(test, reason);
}

/// The shared test server's URL, or `None` (after [`skip`]).
pub fn url() -> Option<String> {
    match std::env::var("HCP_TEST_PG_URL") {
        Ok(u) if !u.is_empty() => Some(u),
        _ => {
            skip("HCP_TEST_PG_URL is not set: start a server with `eval \"$(.ci/pg-start)\"`");
            None
        }
    }
}

fn random_hex(n: usize) -> String {
    let mut raw = vec![0u8; n];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut raw))
        .unwrap();
    hex::encode(raw)
}

/// A schema name no other test uses.
pub fn schema_name(tag: &str) -> String {
    format!("t_{tag}_{}", random_hex(6))
}

/// A migrated schema of its own on `url`.
pub fn fresh_on(url: &str, tag: &str) -> StateConfig {
    let cfg = StateConfig::new(url).with_schema(schema_name(tag));
    PgState::migrate(&cfg).unwrap();
    cfg
}

/// A migrated schema of its own on the shared server, or `None` (skipped).
pub fn fresh(tag: &str) -> Option<StateConfig> {
    url().map(|u| fresh_on(&u, tag))
}

/// A state connected as a new machine.
pub fn machine(cfg: &StateConfig) -> PgState {
    PgState::connect(cfg, MachineId::generate().unwrap()).unwrap()
}

/// A time from a second offset.
pub fn t(s: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + s).unwrap()
}

/// A session of `principal` started at `now` for an hour, and its token.
pub fn session(principal: &str, now: Timestamp) -> (Token, Session) {
    let token = Token::generate().unwrap();
    let s = Session {
        token_sha256: format!("sha256:{}", token_digest(token.as_str())),
        principal: PrincipalId::parse(principal).unwrap(),
        role: Some("clerk".into()),
        projects: vec!["p1".into()],
        attributes: BTreeMap::from([("team".to_owned(), "blue".to_owned())]),
        can_view: vec![],
        workdir: Some(std::ffi::OsStr::from_bytes(b"/srv/sandbox/\xff").into()),
        created_at: now,
        expires_at: now + jiff::SignedDuration::from_hours(1),
        ended_at: None,
    };
    (token, s)
}

/// A private server of `.ci/pg-start` (for tests that stop, restart or reconfigure it);
/// stopped and removed on drop.
pub struct Server {
    pub dir: PathBuf,
    pub url: String,
    pub tls_port: Option<u16>,
    pub ca: Option<PathBuf>,
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../.ci")
        .join(name)
}

impl Server {
    /// Starts one, or `None` (skipped) when the server binaries are missing.
    pub fn start(tls: bool) -> Option<Self> {
        url()?;
        let mut cmd = Command::new(script("pg-start"));
        cmd.arg("--quiet");
        if tls {
            cmd.arg("--tls");
        }
        let out = cmd.output().unwrap();
        if !out.status.success() {
            skip(&format!(
                "a private server did not start: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
            return None;
        }
        let vars = parse_exports(&String::from_utf8(out.stdout).unwrap());
        Some(Self {
            dir: vars["HCP_TEST_PG_DIR"].clone().into(),
            url: vars["HCP_TEST_PG_URL"].clone(),
            tls_port: vars.get("HCP_TEST_PG_TLS_PORT").map(|p| p.parse().unwrap()),
            ca: vars.get("HCP_TEST_PG_CA").map(PathBuf::from),
        })
    }

    /// `ctl stop` / `ctl start`.
    pub fn ctl(&self, what: &str) {
        let st = Command::new(self.dir.join("ctl"))
            .arg(what)
            .status()
            .unwrap();
        assert!(st.success(), "ctl {what}");
    }

    /// Runs SQL as the trusted superuser over the socket.
    pub fn psql(&self, sql: &str) {
        psql(&self.url, sql);
    }
}

/// Runs SQL with `psql` (the distribution's client) against `url`.
pub fn psql(url: &str, sql: &str) {
    let out = Command::new("psql")
        .args([url, "-v", "ON_ERROR_STOP=1", "-qAtc", sql])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "psql {sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new(script("pg-stop")).arg(&self.dir).status();
    }
}

/// `export NAME=VALUE` lines as printed by `printf %q` (backslash escapes only).
fn parse_exports(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("export ") else {
            continue;
        };
        let Some((k, v)) = rest.split_once('=') else {
            continue;
        };
        let mut value = String::new();
        let mut chars = v.chars();
        while let Some(c) = chars.next() {
            if c == '\\' {
                if let Some(n) = chars.next() {
                    value.push(n);
                }
            } else {
                value.push(c);
            }
        }
        out.insert(k.to_owned(), value);
    }
    out
}
