//! The state of a runtime whose backend cannot be used: every method answers why.

use hcp_model::{ArgValue, Capability, PackId};
use hcp_store::StoreError;
use hcp_store::approval::{Approval, ApprovalError};
use hcp_store::audit::checkpoint::Checkpoint;
use hcp_store::audit::{Appended, AuditError, AuditReport, Entry, Outcome};
use hcp_store::config::ConfigError;
use hcp_store::counter::{Limits, Verdict};
use hcp_store::grant::{Grant, HeldCapability, PackScope};
use hcp_store::session::{NewSession, PrincipalId, Session, SessionError, Token};
use hcp_store::state::{Admission, AdmitError, Admitted, ApprovalKey, ApprovalRequest, State};
use jiff::Timestamp;
use std::path::PathBuf;

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
    pub(crate) fn config(backend: &'static str, e: &ConfigError) -> Self {
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

    pub(crate) fn of(e: StoreError) -> Self {
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
    fn session_start_prepared(
        &self,
        _: (Token, Session),
    ) -> Result<(Token, Session), SessionError> {
        Err(self.session())
    }
    fn session_resolve(&self, _: &str, _: Timestamp) -> Result<Session, SessionError> {
        Err(self.session())
    }
    fn session_end(&self, _: &str, _: Timestamp) -> Result<(Session, bool), SessionError> {
        Err(self.session())
    }
    fn session_end_digest(&self, _: &str, _: Timestamp) -> Result<(Session, bool), SessionError> {
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
    fn deny(&self, _: &str, _: Timestamp) -> Result<Approval, ApprovalError> {
        Err(ApprovalError::Store(self.error()))
    }
    fn denial_lookup(&self, _: &ApprovalKey, _: Timestamp) -> Result<Option<Approval>, StoreError> {
        Err(self.error())
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
    fn record_authority(&self, _: &hcp_store::audit::Authority) -> Result<Appended, AuditError> {
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
