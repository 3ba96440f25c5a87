//! What a call's child got (RUNTIME §5 "Confinement of every land"): the result's and
//! the audit record's `sandbox` field, `{"filesystem", "network", "processes"}`, each
//! `"enforced"` or the reason it was not.

use crate::limits::ResourceLimits;
use serde::{Serialize, Serializer};

/// Whether one part of the confinement holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// The kernel enforces it for this call.
    Enforced,
    /// Nothing to enforce: the configuration allows it (`network: allow`).
    Allowed,
    /// Not enforced, and why (lowercase, no final period).
    NotEnforced(String),
}

impl Status {
    /// `"enforced"`, `"allowed"` or the reason.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Enforced => "enforced",
            Self::Allowed => "allowed",
            Self::NotEnforced(r) => r,
        }
    }

    /// Whether it is [`Status::Enforced`].
    pub fn is_enforced(&self) -> bool {
        *self == Self::Enforced
    }
}

impl Serialize for Status {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// The `sandbox` field of a call's result and audit record (RUNTIME §5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SandboxField {
    /// The filesystem rules: Landlock, and the protected paths hidden.
    pub filesystem: Status,
    /// `network: deny` (`"enforced"`), `allow` (`"allowed"`), or why a denial is not.
    pub network: Status,
    /// No descendant outlives the call, also when `hcp` is killed, and the process
    /// limit binds (also as root).
    pub processes: Status,
}

/// How a child was confined, for the exec result and the audit record (`sandbox`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SandboxReport {
    /// `landlock` or `unconfined`.
    pub mode: SandboxMode,
    /// The Landlock ABI used (0 when unconfined).
    pub abi: u32,
    /// Filesystem, network and processes, each enforced or why not.
    #[serde(flatten)]
    pub field: SandboxField,
    /// Signals and abstract UNIX sockets scoped to the call (Landlock ABI ≥ 6).
    pub scoped: bool,
    /// The resource limits the child gets.
    pub limits: ResourceLimits,
    /// Why the child is unconfined, when it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Whether Landlock confined the child.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxMode {
    /// A Landlock ruleset was applied.
    Landlock,
    /// No Landlock: only the working directory and the limits.
    Unconfined,
}

impl SandboxReport {
    /// The one-word summary the result and the audit record carried as `sandbox`
    /// before the [`SandboxField`]: `landlock abi N` or `unconfined`.
    pub fn summary(&self) -> String {
        match self.mode {
            SandboxMode::Landlock => format!("landlock abi {}", self.abi),
            SandboxMode::Unconfined => "unconfined".to_owned(),
        }
    }

    /// The `sandbox` field as JSON: `{"filesystem", "network", "processes"}`.
    pub fn field_json(&self) -> serde_json::Value {
        serde_json::to_value(&self.field).unwrap_or(serde_json::Value::Null)
    }
}
