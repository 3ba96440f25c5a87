//! Refusal codes and the step that raises each (RUNTIME §5).

use serde::Serialize;
use std::fmt;

/// A step of the order of checks of RUNTIME §5.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// 1: resolve the target; the pack must be installed and active.
    Target,
    /// 2: the principal from the session, or the owner.
    Principal,
    /// 3: arguments.
    Arguments,
    /// 4: grants.
    Grant,
    /// 5: land obligations.
    Land,
    /// 6: the confirm gate (§4.5).
    Confirm,
    /// 7: the operator's runtime policy (RUNTIME §7).
    RuntimePolicy,
    /// 8: binding mint.
    Binding,
    /// 9: the adapter.
    Adapter,
}

/// A stable refusal code (RUNTIME §2–§5). Harnesses match on these, not on messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Code {
    /// No active verb matches the target.
    UnknownVerb,
    /// A bare verb key matches verbs of several active packs.
    AmbiguousVerb,
    /// The pack is installed but not active.
    PackInactive,
    /// The pack does not offer the face the call came through (`transports`).
    TransportNotOffered,
    /// `kind: openapi` is not executed.
    KindUnsupported,
    /// A control-plane pack called by a non-owner principal (Pack concept, "Planes").
    ControlPlane,
    /// `HCP_SESSION` is present but garbage, unknown, expired or ended.
    BadSession,
    /// An argument the verb does not take.
    ArgUnknown,
    /// A required argument is absent.
    ArgMissing,
    /// A value that cannot be passed (a NUL byte).
    ArgInvalid,
    /// A positional value starting with `-` without a literal `--` before it.
    ArgLooksLikeFlag,
    /// An argument named `project_id`, `tenant`, `tenant_id` or `principal` (§4.3.2).
    TenantInArgs,
    /// The principal lacks the capability, or its grant is suspended (rug-pull guard).
    MissingGrant,
    /// A `brain` verb without a project.
    ProjectRequired,
    /// A `brain` verb for a project the session is not a member of.
    NotProjectMember,
    /// The confirm gate (§4.5.3); the error text is exactly `confirm required`.
    ConfirmRequired,
    /// The principal has no usable credential for the pack (RUNTIME §8).
    BindingRequired,
    /// The envelope is not JSON, has an unknown field or a wrong type.
    BadEnvelope,
}

impl Code {
    /// The snake_case code.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::UnknownVerb => "unknown_verb",
            Self::AmbiguousVerb => "ambiguous_verb",
            Self::PackInactive => "pack_inactive",
            Self::TransportNotOffered => "transport_not_offered",
            Self::KindUnsupported => "kind_unsupported",
            Self::ControlPlane => "control_plane",
            Self::BadSession => "bad_session",
            Self::ArgUnknown => "arg_unknown",
            Self::ArgMissing => "arg_missing",
            Self::ArgInvalid => "arg_invalid",
            Self::ArgLooksLikeFlag => "arg_looks_like_flag",
            Self::TenantInArgs => "tenant_in_args",
            Self::MissingGrant => "missing_grant",
            Self::ProjectRequired => "project_required",
            Self::NotProjectMember => "not_project_member",
            Self::ConfirmRequired => "confirm_required",
            Self::BindingRequired => "binding_required",
            Self::BadEnvelope => "bad_envelope",
        }
    }

    /// The exit status of RUNTIME §5: 65 for argument and envelope refusals, 66 for an
    /// unknown, inactive or unrunnable target, 77 for the gate's refusals.
    pub fn exit_status(self) -> u8 {
        match self {
            Self::ArgUnknown
            | Self::ArgMissing
            | Self::ArgInvalid
            | Self::ArgLooksLikeFlag
            | Self::TenantInArgs
            | Self::BadEnvelope => 65,
            Self::UnknownVerb
            | Self::AmbiguousVerb
            | Self::PackInactive
            | Self::TransportNotOffered
            | Self::KindUnsupported => 66,
            Self::ControlPlane
            | Self::BadSession
            | Self::MissingGrant
            | Self::ProjectRequired
            | Self::NotProjectMember
            | Self::ConfirmRequired
            | Self::BindingRequired => 77,
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
