//! `hcp doctor`'s view of the state backend (RUNTIME §9).

use super::{Backend, pg_refusal};
use crate::Runtime;
use crate::refusal::Refusal;
use hcp_model::Code;
use hcp_state_pg::{PgConfig, PgState, SCHEMA_VERSION, ServerInfo};
use serde::Serialize;

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

impl StateHealth {
    /// The lines `hcp doctor` prints for it, the first one `state`.
    pub fn lines(&self) -> Vec<String> {
        let mut v = vec![
            "state".to_owned(),
            format!("  backend               {}", self.backend),
        ];
        if let Some(u) = &self.url {
            v.push(format!(
                "  database              `{u}`, schema `{}`",
                self.schema.as_deref().unwrap_or("-")
            ));
        }
        if let Some(m) = &self.machine {
            v.push(format!("  machine               {m}"));
        }
        if let Some(sv) = &self.server_version {
            v.push(format!(
                "  server                postgresql {sv}{}",
                if self.tls == Some(true) { ", tls" } else { "" }
            ));
        }
        if let (Some(found), Some(want)) = (self.schema_version, self.expected_schema_version) {
            v.push(format!(
                "  schema version        {found} (this hcp: {want})"
            ));
        }
        v.push(format!(
            "  reachable             {}",
            match &self.error {
                None => "yes".to_owned(),
                Some(e) if self.reachable => format!("yes, but {} ({})", e.message, e.code),
                Some(e) => format!("no: {} ({})", e.message, e.code),
            }
        ));
        if let Some(h) = self.error.as_ref().and_then(|e| e.hint.as_ref()) {
            v.push(format!("  hint                  {h}"));
        }
        v
    }
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
    config: &hcp_store::config::StateConfig,
) -> Result<ServerInfo, hcp_state_pg::PgError> {
    match state.info() {
        Err(hcp_state_pg::PgError::Schema { .. }) => PgState::probe(config),
        other => other,
    }
}
