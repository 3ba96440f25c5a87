//! What a call's child got (RUNTIME §5.4 "Where a mechanism is missing"): the result's and
//! the audit record's `sandbox` field, `{"filesystem", "processes", "privileges", "memory",
//! "network": {"mode", "enforced", "refused"}}`, each part `"enforced"` or the reason it
//! was not.

use crate::limits::ResourceLimits;
use serde::{Serialize, Serializer};

/// Whether one part of the confinement holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// The kernel enforces it for this call.
    Enforced,
    /// Not enforced, and why (lowercase, no final period).
    NotEnforced(String),
}

impl Status {
    /// `"enforced"` or the reason.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Enforced => "enforced",
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

/// The network part of the `sandbox` field (RUNTIME §5.4): `{"mode", "enforced",
/// "refused"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NetworkField {
    /// `deny`, `host` or `allow`.
    pub mode: &'static str,
    /// `true`, or why the mode is not enforced as it says.
    #[serde(serialize_with = "enforced_or_reason")]
    pub enforced: Status,
    /// Destinations the egress proxy refused, `[{"dest", "port", "count"}]` (filled by the
    /// proxy; empty here).
    pub refused: Vec<serde_json::Value>,
}

fn enforced_or_reason<S: Serializer>(st: &Status, s: S) -> Result<S::Ok, S::Error> {
    match st {
        Status::Enforced => s.serialize_bool(true),
        Status::NotEnforced(r) => s.serialize_str(r),
    }
}

/// The `sandbox` field of a call's result and audit record (RUNTIME §5.4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SandboxField {
    /// The view (RUNTIME §5.1): the call's own mount namespace and root.
    pub filesystem: Status,
    /// No descendant outlives the call, also when `hcp` is killed, and a fork bomb is
    /// bounded (also as root).
    pub processes: Status,
    /// Empty capability sets and `no_new_privs` (RUNTIME §5.4).
    pub privileges: Status,
    /// One memory bound for all the call's processes (a memory cgroup), or
    /// `per_process: REASON`.
    pub memory: Status,
    /// The network mode and what holds of it.
    pub network: NetworkField,
}

/// How a child was confined, for the exec result and the audit record (`sandbox`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SandboxReport {
    /// `view` or `unconfined`.
    pub mode: SandboxMode,
    /// Each part, enforced or why not.
    #[serde(flatten)]
    pub field: SandboxField,
    /// The resource limits the child gets.
    pub limits: ResourceLimits,
    /// Why the child has no view, when it has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Whether the child got a view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxMode {
    /// The view of RUNTIME §5.1.
    View,
    /// No view (the owner's call where the kernel has no namespaces, `sandbox.require`
    /// off): the host's filesystem and the limits.
    Unconfined,
}

impl SandboxReport {
    /// A one-word summary: `view` or `unconfined`.
    pub fn summary(&self) -> &'static str {
        match self.mode {
            SandboxMode::View => "view",
            SandboxMode::Unconfined => "unconfined",
        }
    }

    /// The `sandbox` field as JSON.
    pub fn field_json(&self) -> serde_json::Value {
        serde_json::to_value(&self.field).unwrap_or(serde_json::Value::Null)
    }
}
