//! The code table: every stable code of hcp (RUNTIME §2–§10), the step that raises it and
//! the exit status it means, declared once.
//!
//! Harnesses match on codes, never on messages. Each [`Code`] has
//!
//! - [`Code::as_str`]: its snake_case spelling, the API;
//! - [`Code::step`]: where in RUNTIME §5's order (or outside a call) it is raised;
//! - [`Code::exit_status`]: the status a **call** (`hcp exec`, `hcp connect`, `hcp sense`,
//!   `hcp mcp`'s tools) answers with (RUNTIME §5);
//! - [`Code::command_exit_status`]: the status an **owner command** (`install`, `lint`,
//!   `session`, `grant`, `approve`, `policy check`, `audit verify` …) answers with; the
//!   same as in a call except where RUNTIME says otherwise (a bin that cannot be pinned at
//!   install is 1, at exec 127; a usage error is 2 outside `exec`, 64 inside).
//!
//! The table also holds the decision codes of the Histos engine that refuse a call
//! (RUNTIME §7: `unknown_tool`, `rbac`, `rate_limit` …) and its POLICY load codes, so a
//! refusal of the runtime policy is a [`Code`] like any other; the engine keeps its own
//! table (`histos::Rule`, `histos::PolicyCode`, `histos::lock::LockCode`), and the
//! exhaustive conversions of `code::histos` (feature `histos`) bring each into this one. A few spellings serve two places with one meaning for a harness
//! (`duplicate_key` in a pack file and in the runtime policy; `write_stimulus` at lint and
//! at sense; `unparseable` in the policy and the audit trail): one entry each.
//!
//! Exit statuses are the constants of [`exit`]; no other file spells one.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

mod hint;
#[cfg(feature = "histos")]
pub mod histos;

/// The exit statuses of `hcp` (RUNTIME §2, §5; DESIGN "Exit statuses"), by name.
pub mod exit {
    /// Success.
    pub const OK: u8 = 0;
    /// Refused outside a call: lint errors, already installed, a bin that cannot be
    /// pinned at install, `connect_failed`, a broken audit trail.
    pub const REFUSED: u8 = 1;
    /// A usage error outside `exec` (clap's own status).
    pub const USAGE: u8 = 2;
    /// `exec` usage (`EX_USAGE`).
    pub const EX_USAGE: u8 = 64;
    /// Bad arguments or envelope (`EX_DATAERR`).
    pub const EX_DATAERR: u8 = 65;
    /// Unknown or inactive pack or verb (`EX_NOINPUT`).
    pub const EX_NOINPUT: u8 = 66;
    /// An internal failure while supervising a child (`EX_SOFTWARE`).
    pub const EX_SOFTWARE: u8 = 70;
    /// The store, state or audit cannot be used (`EX_IOERR`).
    pub const EX_IOERR: u8 = 74;
    /// Refused by the gate (`EX_NOPERM`).
    pub const EX_NOPERM: u8 = 77;
    /// `config.json` does not parse (`EX_CONFIG`).
    pub const EX_CONFIG: u8 = 78;
    /// The verb ran past its timeout.
    pub const TIMEOUT: u8 = 124;
    /// The bin is not executable or changed since install.
    pub const NOT_EXECUTABLE: u8 = 126;
    /// The bin is missing.
    pub const NOT_FOUND: u8 = 127;
    /// The call was abandoned (128 + SIGINT).
    pub const CANCELLED: u8 = 130;
    /// The call was ended together, its memory bound reached (128 + SIGKILL, the status a
    /// child killed by the kernel's OOM killer has).
    pub const KILLED: u8 = 137;
}

/// Where a code is raised: the steps of RUNTIME §5 for a call, in order, then the places
/// outside a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// Before the call is read: the command line, the envelope, an MCP request.
    Input,
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
    /// 7: the operator's runtime policy (RUNTIME §7), its rules and its loading.
    RuntimePolicy,
    /// 8: binding mint (and the connect verb's own rules).
    Binding,
    /// 9a: child preparation: configuration, sandbox plan, environment, argv, the bin.
    Prepare,
    /// 9b: admission, the one step that spends (counter slots, the approval, the intent
    /// record).
    Admit,
    /// 9c: the child ran: timeout, cancel, a failed connect verb.
    Run,
    /// After the run: the output controls.
    PostGate,
    /// The store or the state backend, at any step.
    Store,
    /// Lint and install of a pack (RUNTIME §2, §3).
    Pack,
    /// An owner command's own refusals (sessions, approvals, owner-only).
    Command,
    /// Reading and verifying the audit trail (RUNTIME §6).
    Audit,
}

impl Step {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Input => "input",
            Self::Target => "target",
            Self::Principal => "principal",
            Self::Arguments => "arguments",
            Self::Grant => "grant",
            Self::Land => "land",
            Self::Confirm => "confirm",
            Self::RuntimePolicy => "runtime_policy",
            Self::Binding => "binding",
            Self::Prepare => "prepare",
            Self::Admit => "admit",
            Self::Run => "run",
            Self::PostGate => "post_gate",
            Self::Store => "store",
            Self::Pack => "pack",
            Self::Command => "command",
            Self::Audit => "audit",
        }
    }
}

macro_rules! codes {
    ($($v:ident => $s:literal, $step:ident, $call:ident, $cmd:ident, $d:literal;)*) => {
        /// A stable code (see the module docs). Serialized as its snake_case string.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Code {
            $(#[doc = $d] $v,)*
        }

        impl Code {
            /// Every code, in table order.
            pub const ALL: &'static [Code] = &[$(Code::$v,)*];

            /// The snake_case code.
            pub fn as_str(self) -> &'static str {
                match self { $(Self::$v => $s,)* }
            }

            /// Where it is raised.
            pub fn step(self) -> Step {
                match self { $(Self::$v => Step::$step,)* }
            }

            /// The exit status of a call refused (or ended) with this code (RUNTIME §5).
            pub fn exit_status(self) -> u8 {
                match self { $(Self::$v => exit::$call,)* }
            }

            /// The exit status of an owner command refused with this code.
            pub fn command_exit_status(self) -> u8 {
                match self { $(Self::$v => exit::$cmd,)* }
            }

            /// What the code means, one sentence (its line of the table; the generated
            /// `docs/packs.md` shows it).
            pub fn summary(self) -> &'static str {
                match self { $(Self::$v => $d,)* }
            }

            /// The code spelled `text`, if it is one.
            pub fn parse(text: &str) -> Option<Code> {
                match text { $($s => Some(Self::$v),)* _ => None }
            }
        }
    };
}

codes! {
    // Input: before a call is read.
    Usage => "usage", Input, EX_USAGE, USAGE, "A usage error on the command line.";
    BadEnvelope => "bad_envelope", Input, EX_DATAERR, EX_DATAERR, "The envelope is not JSON, has an unknown field or a wrong type.";
    RequestTooLarge => "request_too_large", Input, EX_DATAERR, EX_DATAERR, "An MCP request larger than hcp reads.";
    McpFailed => "mcp_failed", Input, REFUSED, REFUSED, "The MCP server cannot start or the client never completed `initialize`.";
    BadInput => "bad_input", Input, USAGE, USAGE, "`hcp policy decide` input that is not a call.";

    // 1: target.
    UnknownVerb => "unknown_verb", Target, EX_NOINPUT, EX_NOINPUT, "No active verb matches the target.";
    AmbiguousVerb => "ambiguous_verb", Target, EX_NOINPUT, EX_NOINPUT, "A bare verb key matches verbs of several active packs.";
    PackInactive => "pack_inactive", Target, EX_NOINPUT, EX_NOINPUT, "The pack is installed but not active.";
    TransportNotOffered => "transport_not_offered", Target, EX_NOINPUT, EX_NOINPUT, "The pack does not offer the face the call came through (`transports`).";
    KindUnsupported => "kind_unsupported", Target, EX_NOINPUT, EX_NOINPUT, "The pack's kind is not executed by this runtime.";
    PassThroughUnsupported => "pass_through_unsupported", Target, EX_NOINPUT, EX_NOINPUT, "A `pass_through` subcommand: exec never runs it.";
    NotInstalled => "not_installed", Target, EX_NOINPUT, EX_NOINPUT, "No installed pack has this id.";
    PackUnreadable => "pack_unreadable", Target, EX_NOINPUT, EX_NOINPUT, "A file of a pack directory cannot be read or written (`hcp pack promote`).";
    NotConnectable => "not_connectable", Target, EX_NOINPUT, EX_NOINPUT, "The pack has no `user` binding or no connect verb.";
    UnknownStimulus => "unknown_stimulus", Target, EX_NOINPUT, EX_NOINPUT, "The pack declares no such stimulus.";
    WriteStimulus => "write_stimulus", Target, EX_NOPERM, REFUSED, "A stimulus whose policy entry is not `read` (lint error; sense refuses it too).";

    // 2: principal.
    BadSession => "bad_session", Principal, EX_NOPERM, REFUSED, "`HCP_SESSION` is present but malformed, unknown, expired or ended.";
    ControlPlane => "control_plane", Principal, EX_NOPERM, EX_NOPERM, "A control-plane pack called by a non-owner principal.";
    NestedCall => "nested_call", Principal, EX_NOPERM, EX_NOPERM, "`hcp` without a session from inside a non-owner call.";

    // 3: arguments.
    ArgUnknown => "arg_unknown", Arguments, EX_DATAERR, EX_DATAERR, "An argument the verb does not take.";
    ArgMissing => "arg_missing", Arguments, EX_DATAERR, EX_DATAERR, "A required argument is absent.";
    ArgInvalid => "arg_invalid", Arguments, EX_DATAERR, EX_DATAERR, "A value that cannot be passed (a NUL byte, too long, an inexact number).";
    ArgLooksLikeFlag => "arg_looks_like_flag", Arguments, EX_DATAERR, EX_DATAERR, "A positional value starting with `-` without a literal `--` before it.";
    TenantInArgs => "tenant_in_args", Arguments, EX_DATAERR, EX_DATAERR, "An argument that would select the tenant (RUNTIME §4).";

    // 4: grants.
    MissingGrant => "missing_grant", Grant, EX_NOPERM, EX_NOPERM, "The principal lacks the capability, or its grant is suspended (rug-pull guard).";

    // 5: land.
    ProjectRequired => "project_required", Land, EX_NOPERM, EX_NOPERM, "A `brain` verb without a project.";
    NotProjectMember => "not_project_member", Land, EX_NOPERM, EX_NOPERM, "A `brain` verb for a project the session is not a member of.";
    WorkdirRequired => "workdir_required", Land, EX_NOPERM, EX_NOPERM, "A `local` verb over `hcp mcp --http` from a session without `--workdir` (RUNTIME §10).";

    // 6: confirm.
    ConfirmRequired => "confirm_required", Confirm, EX_NOPERM, EX_NOPERM, "The confirm gate (§4.5.3); the message is exactly `confirm required`.";

    // 7: the runtime policy: hcp's own.
    PolicyConflict => "policy_conflict", RuntimePolicy, EX_NOPERM, REFUSED, "Both `policy.json` and `policy.yaml` are in the store.";
    LimitStoreUnavailable => "limit_store_unavailable", RuntimePolicy, EX_NOPERM, EX_NOPERM, "The call counters cannot be read or written.";
    ToolDrift => "tool_drift", RuntimePolicy, EX_NOPERM, EX_NOPERM, "A verb no longer matches its entry in `tools.lock.json`, or has none.";
    // 7: the tool lock `tools.lock.json` (histos::lock::LockCode, and hcp's `lock_stale`).
    LockUnparseable => "lock_unparseable", RuntimePolicy, EX_NOPERM, REFUSED, "`tools.lock.json` is not JSON (or not UTF-8, or cannot be read).";
    LockDuplicateKey => "lock_duplicate_key", RuntimePolicy, EX_NOPERM, REFUSED, "`tools.lock.json` repeats a key.";
    LockUnsupportedVersion => "lock_unsupported_version", RuntimePolicy, EX_NOPERM, REFUSED, "`tools.lock.json` has a `lock_version` newer than this hcp reads.";
    LockInvalid => "lock_invalid", RuntimePolicy, EX_NOPERM, REFUSED, "`tools.lock.json` is JSON but not a tool lock.";
    LockTooLarge => "lock_too_large", RuntimePolicy, EX_NOPERM, REFUSED, "`tools.lock.json` is larger than hcp reads.";
    LockNotFound => "lock_not_found", RuntimePolicy, EX_NOPERM, REFUSED, "There is no `tools.lock.json` to check.";
    LockStale => "lock_stale", RuntimePolicy, EX_NOPERM, REFUSED, "`tools.lock.json` names a verb that no longer exists or is no longer active.";
    // 7: the resource resolvers of `config.json` (the `received` of a `resolver_error`).
    ResolverNotRead => "resolver_not_read", RuntimePolicy, EX_NOPERM, EX_NOPERM, "A resolver verb that is not a `read`.";
    ResolverOutputInvalid => "resolver_output_invalid", RuntimePolicy, EX_NOPERM, EX_NOPERM, "A resolver verb's stdout that is not a JSON object, null or an empty value.";
    ResolverFailed => "resolver_failed", RuntimePolicy, EX_NOPERM, EX_NOPERM, "A resolver verb that exited non-zero.";
    // 7: the Histos engine's refusals (histos::Rule).
    UnknownTool => "unknown_tool", RuntimePolicy, EX_NOPERM, EX_NOPERM, "The runtime policy has no contract for the tool.";
    NoArgSchema => "no_arg_schema", RuntimePolicy, EX_NOPERM, EX_NOPERM, "The tool's contract has no `args` block.";
    NoPrincipal => "no_principal", RuntimePolicy, EX_NOPERM, EX_NOPERM, "No trusted principal is bound.";
    Rbac => "rbac", RuntimePolicy, EX_NOPERM, EX_NOPERM, "The role has no grant for the tool.";
    ArgSchema => "arg_schema", RuntimePolicy, EX_NOPERM, EX_NOPERM, "Argument validation or the input budget failed.";
    ArgBindingUnresolved => "arg_binding_unresolved", RuntimePolicy, EX_NOPERM, EX_NOPERM, "A bound attribute is missing on the principal, or a bound value cannot be passed.";
    ResourceConstraint => "resource_constraint", RuntimePolicy, EX_NOPERM, EX_NOPERM, "A resource constraint failed.";
    NoResourceResolver => "no_resource_resolver", RuntimePolicy, EX_NOPERM, EX_NOPERM, "Constraints exist and no resolver is wired.";
    ResourceNotFound => "resource_not_found", RuntimePolicy, EX_NOPERM, EX_NOPERM, "The resolver found no resource.";
    ResolverError => "resolver_error", RuntimePolicy, EX_NOPERM, EX_NOPERM, "The resolver failed.";
    CanaryExfil => "canary_exfil", RuntimePolicy, EX_NOPERM, EX_NOPERM, "A canary token is in the arguments.";
    SecretDetected => "secret_detected", RuntimePolicy, EX_NOPERM, EX_NOPERM, "A checksum-verified secret is in the arguments.";
    InjectionPattern => "injection_pattern", RuntimePolicy, EX_NOPERM, EX_NOPERM, "An optional content rule: injection.";
    ExfiltrationPattern => "exfiltration_pattern", RuntimePolicy, EX_NOPERM, EX_NOPERM, "An optional content rule: exfiltration.";
    RateLimit => "rate_limit", RuntimePolicy, EX_NOPERM, EX_NOPERM, "Calls in the window reached `rate_limit`.";
    Budget => "budget", RuntimePolicy, EX_NOPERM, EX_NOPERM, "The budget is spent.";
    LimitStoreCapacity => "limit_store_capacity", RuntimePolicy, EX_NOPERM, EX_NOPERM, "The limit store cannot track another key.";
    RequiresConfirmation => "requires_confirmation", RuntimePolicy, EX_NOPERM, EX_NOPERM, "The tool needs an approval the agent cannot give itself; an `approval_id` is pending.";
    ConfirmError => "confirm_error", RuntimePolicy, EX_NOPERM, EX_NOPERM, "The approvals could not be read.";
    EscalationDenied => "escalation_denied", RuntimePolicy, EX_NOPERM, EX_NOPERM, "The escalation tier refused the call.";
    EscalationError => "escalation_error", RuntimePolicy, EX_NOPERM, EX_NOPERM, "The escalation tier failed.";
    NoEscalationTier => "no_escalation_tier", RuntimePolicy, EX_NOPERM, EX_NOPERM, "Escalation is required and no tier is wired.";
    InternalError => "internal_error", RuntimePolicy, EX_NOPERM, REFUSED, "An internal failure (fail closed).";
    ConfirmSuspended => "confirm_suspended", RuntimePolicy, EX_NOPERM, EX_NOPERM, "Confirmation suspended by the host.";
    ConfirmCancelled => "confirm_cancelled", RuntimePolicy, EX_NOPERM, EX_NOPERM, "Cancelled while awaiting confirmation.";
    PreCancelled => "pre_cancelled", RuntimePolicy, EX_NOPERM, EX_NOPERM, "Cancelled during a pre-gate callback.";
    UnnameableArgs => "unnameable_args", RuntimePolicy, EX_NOPERM, EX_NOPERM, "Positional arguments that cannot be named.";
    UninspectableOutput => "uninspectable_output", RuntimePolicy, EX_NOPERM, EX_NOPERM, "An output that cannot be inspected.";
    // 7: a runtime policy that does not load (histos::PolicyCode).
    DuplicateKey => "duplicate_key", RuntimePolicy, EX_NOPERM, REFUSED, "A repeated key: in a pack file (lint) or in the runtime policy.";
    InvalidBinding => "invalid_binding", RuntimePolicy, EX_NOPERM, REFUSED, "A policy `bind` that is not `principal.<attr>`.";
    InvalidGrant => "invalid_grant", RuntimePolicy, EX_NOPERM, REFUSED, "A policy role grant that is not a string.";
    NotAnObject => "not_an_object", RuntimePolicy, EX_NOPERM, REFUSED, "The policy's top level is not a mapping.";
    NotFound => "not_found", RuntimePolicy, EX_NOPERM, REFUSED, "The policy file does not exist.";
    ToolsNotAMapping => "tools_not_a_mapping", RuntimePolicy, EX_NOPERM, REFUSED, "The policy's `tools` is not a mapping.";
    UnknownKey => "unknown_key", RuntimePolicy, EX_NOPERM, REFUSED, "A key the policy format does not define.";
    Unparseable => "unparseable", RuntimePolicy, EX_NOPERM, REFUSED, "Malformed policy JSON or YAML; in the audit trail, a line that is not a record.";
    UnsafePattern => "unsafe_pattern", RuntimePolicy, EX_NOPERM, REFUSED, "A policy pattern refused by the ReDoS screen.";
    UnsupportedFeature => "unsupported_feature", RuntimePolicy, EX_NOPERM, REFUSED, "The policy requires a feature this engine lacks.";
    UnsupportedVersion => "unsupported_version", RuntimePolicy, EX_NOPERM, REFUSED, "The policy's `schema_version` is not `histos.policy/0.1`.";
    PolicyInvalid => "policy_invalid", RuntimePolicy, EX_NOPERM, REFUSED, "Any other invalid policy.";
    InvalidField => "invalid_field", RuntimePolicy, EX_NOPERM, REFUSED, "An invalid field definition in the policy.";
    InvalidContract => "invalid_contract", RuntimePolicy, EX_NOPERM, REFUSED, "An invalid limit in the policy.";
    InvalidCanary => "invalid_canary", RuntimePolicy, EX_NOPERM, REFUSED, "An invalid canary in the policy.";
    MissingKey => "missing_key", RuntimePolicy, EX_NOPERM, REFUSED, "A required policy key is missing.";
    NotAList => "not_a_list", RuntimePolicy, EX_NOPERM, REFUSED, "A policy value that must be a list is not.";
    NotAMapping => "not_a_mapping", RuntimePolicy, EX_NOPERM, REFUSED, "A policy value that must be a mapping is not.";
    PolicyTooLarge => "policy_too_large", RuntimePolicy, EX_NOPERM, REFUSED, "The policy exceeds a size limit.";
    InvalidImport => "invalid_import", RuntimePolicy, EX_NOPERM, REFUSED, "A policy import that cannot be used.";

    // 8: binding.
    BindingRequired => "binding_required", Binding, EX_NOPERM, EX_NOPERM, "The principal has no usable credential for the pack (RUNTIME §8).";
    BindingInsecure => "binding_insecure", Binding, EX_NOPERM, EX_NOPERM, "The credential file is readable or writable by others.";
    ConnectOnly => "connect_only", Binding, EX_NOPERM, EX_NOPERM, "A session runs the connect verb only through `hcp connect`.";
    ConnectOutputInvalid => "connect_output_invalid", Binding, EX_DATAERR, EX_DATAERR, "The connect verb did not print one credential object.";

    // 9a: child preparation.
    BadConfig => "bad_config", Prepare, EX_CONFIG, EX_CONFIG, "`config.json` does not parse.";
    SandboxUnavailable => "sandbox_unavailable", Prepare, EX_NOPERM, EX_NOPERM, "The call cannot be confined as the configuration or land requires.";
    SandboxFailed => "sandbox_failed", Prepare, NOT_EXECUTABLE, NOT_EXECUTABLE, "Preparing the confinement failed.";
    BinMissing => "bin_missing", Prepare, NOT_FOUND, REFUSED, "The bin is not found (at install: cannot be pinned).";
    BinNotExecutable => "bin_not_executable", Prepare, NOT_EXECUTABLE, NOT_EXECUTABLE, "The pinned path is not a regular executable file.";
    BinChanged => "bin_changed", Prepare, NOT_EXECUTABLE, NOT_EXECUTABLE, "The bin changed since install.";
    EnvRefused => "env_refused", Prepare, NOT_EXECUTABLE, NOT_EXECUTABLE, "An environment entry the adapter will not pass.";
    SpawnFailed => "spawn_failed", Prepare, NOT_EXECUTABLE, NOT_EXECUTABLE, "The process could not be started.";

    // 9b: admission.
    AuditUnavailable => "audit_unavailable", Admit, EX_IOERR, EX_IOERR, "The call's audit record cannot be made durable, so nothing runs.";

    // 9c: the run.
    Timeout => "timeout", Run, TIMEOUT, TIMEOUT, "The verb ran past its timeout.";
    Cancelled => "cancelled", Run, CANCELLED, CANCELLED, "The caller abandoned the call; its process group was ended.";
    MemoryExceeded => "memory_exceeded", Run, KILLED, KILLED, "The call's processes together reached `limits.memory_bytes`; the whole call was ended.";
    SuperviseFailed => "supervise_failed", Run, EX_SOFTWARE, EX_SOFTWARE, "Waiting on or reading from a started child failed.";
    ConnectFailed => "connect_failed", Run, REFUSED, REFUSED, "The connect verb exited non-zero; nothing was stored.";

    // After the run.
    OutputWithheld => "output_withheld", PostGate, EX_NOPERM, EX_NOPERM, "The runtime policy withheld the verb's output.";

    // The store and the state backend.
    StoreUnusable => "store_unusable", Store, EX_IOERR, EX_IOERR, "The home is a file or cannot be written.";
    StoreIo => "store_io", Store, EX_IOERR, EX_IOERR, "An I/O failure in the store.";
    StoreDamaged => "store_damaged", Store, EX_IOERR, EX_IOERR, "A state file that does not parse.";
    StateUnavailable => "state_unavailable", Store, EX_IOERR, EX_IOERR, "The state backend cannot be reached or refuses (RUNTIME §9).";
    AuditDamaged => "audit_damaged", Store, EX_IOERR, REFUSED, "The audit trail's last record is damaged; appends refuse.";
    AuditBadEntry => "audit_bad_entry", Store, EX_IOERR, EX_IOERR, "An audit entry names a field the store writes itself.";

    // Lint and install (RUNTIME §2, §3).
    LintFailed => "lint_failed", Pack, REFUSED, REFUSED, "Lint found errors; nothing was installed.";
    AlreadyInstalled => "already_installed", Pack, REFUSED, REFUSED, "The pack is installed and `--force` was not given.";
    FamilyClaimed => "family_claimed", Pack, REFUSED, REFUSED, "The pack names a `binding.family` another installed pack uses; the owner joins it with `hcp install DIR --join-family FAMILY` (RUNTIME §8).";
    BadPackDir => "bad_pack_dir", Pack, USAGE, USAGE, "A directory named as a pack that is none at all (absent, not a directory, a symlink): `hcp lint`, `hcp install` and `hcp pack promote` say the same of it.";
    MissingFile => "missing_file", Pack, REFUSED, REFUSED, "A pack file is missing.";
    BadJson => "bad_json", Pack, REFUSED, REFUSED, "A pack file is not JSON of the right shape.";
    UnknownField => "unknown_field", Pack, REFUSED, REFUSED, "A field the pack format does not define.";
    BadPackId => "bad_pack_id", Pack, USAGE, USAGE, "A text that is not a pack id.";
    SurfaceIdMismatch => "surface_id_mismatch", Pack, REFUSED, REFUSED, "The policy's `surface_id` is not the manifest's id.";
    BadVersion => "bad_version", Pack, REFUSED, REFUSED, "An unsupported version field.";
    BadLand => "bad_land", Pack, REFUSED, REFUSED, "A land other than `personal`, `brain`, `local`.";
    BadOperation => "bad_operation", Pack, REFUSED, REFUSED, "An operation other than `read`, `write`.";
    MissingVerb => "missing_verb", Pack, REFUSED, REFUSED, "A verb with no policy entry.";
    ExtraVerb => "extra_verb", Pack, REFUSED, REFUSED, "A policy entry with no verb.";
    MissingStimulus => "missing_stimulus", Pack, REFUSED, REFUSED, "A stimulus with no policy entry.";
    ExtraStimulus => "extra_stimulus", Pack, REFUSED, REFUSED, "A policy entry with no stimulus.";
    ConfirmOnRead => "confirm_on_read", Pack, REFUSED, REFUSED, "`confirm` on a read.";
    ConnectNotWrite => "connect_not_write", Pack, REFUSED, REFUSED, "A connect verb that is not a write.";
    CliBinMismatch => "cli_bin_mismatch", Pack, REFUSED, REFUSED, "A verb's `cli[0]` is not `cliBin`.";
    BadPlaceholder => "bad_placeholder", Pack, REFUSED, REFUSED, "A placeholder that does not parse.";
    ReservedPlaceholder => "reserved_placeholder", Pack, REFUSED, REFUSED, "A placeholder name the runtime reserves.";
    ExecWrapperBin => "exec_wrapper_bin", Pack, REFUSED, REFUSED, "The program is a shell or runs its arguments as a command.";
    HcpBinReserved => "hcp_bin_reserved", Pack, REFUSED, REFUSED, "A pack other than the bootstrap pack `hcp-cli` whose bin is `hcp` (RUNTIME §5.1).";
    SecretFile => "secret_file", Pack, REFUSED, REFUSED, "A secret in the pack directory.";
    SymlinkInPack => "symlink_in_pack", Pack, REFUSED, REFUSED, "A symlink in the pack directory.";
    UnsafePath => "unsafe_path", Pack, REFUSED, REFUSED, "A path that leaves the pack directory.";
    BadBinding => "bad_binding", Pack, REFUSED, REFUSED, "`mothership` outside the control plane, or the reverse.";
    BadOpenapi => "bad_openapi", Pack, EX_NOINPUT, REFUSED, "An OpenAPI document install cannot use; in a call, a `kind: openapi` verb with no server to send to, or whose server no connection could be made to (nothing was sent).";
    UnknownOperation => "unknown_operation", Pack, REFUSED, REFUSED, "An `operation` that is no `operationId` of the document.";
    NothingToPromote => "nothing_to_promote", Pack, REFUSED, REFUSED, "`hcp pack promote` of a pack without `pass_through`, or whose program cannot be told.";
    SkillCollision => "skill_collision", Pack, REFUSED, REFUSED, "A skill of the same name that hcp did not write.";
    SkillExportUnusable => "skill_export_unusable", Pack, REFUSED, REFUSED, "A `skills.export` folder that cannot be used.";
    ConfirmNotMirrored => "confirm_not_mirrored", Pack, REFUSED, REFUSED, "Warning: `confirm` not mirrored in the skill.";
    VerbCount => "verb_count", Pack, REFUSED, REFUSED, "Warning: verbs outside 5–12.";
    SkillTooLong => "skill_too_long", Pack, REFUSED, REFUSED, "Warning: a skill longer than one screen.";
    SkillMissingSection => "skill_missing_section", Pack, REFUSED, REFUSED, "Warning: a skill without a required section.";
    AbsolutePathInSkill => "absolute_path_in_skill", Pack, REFUSED, REFUSED, "Warning: an absolute path in the skill.";
    ExtraFile => "extra_file", Pack, REFUSED, REFUSED, "Warning: a file beside the three.";
    PassThroughPresent => "pass_through_present", Pack, REFUSED, REFUSED, "Warning: a `pass_through` block.";
    UnsupportedKind => "unsupported_kind", Pack, REFUSED, REFUSED, "Warning: a kind this runtime does not execute.";
    CodeRunningCli => "code_running_cli", Pack, REFUSED, REFUSED, "Warning: a bin known to run commands from its arguments.";

    // Owner commands.
    OwnerOnly => "owner_only", Command, EX_NOPERM, EX_NOPERM, "An owner-only command called with `HCP_SESSION` set.";
    BadPrincipal => "bad_principal", Command, USAGE, USAGE, "A principal id outside the allowed charset, or a reserved one.";
    BadValue => "bad_value", Command, EX_USAGE, USAGE, "A role, project, `can_view` class or attribute that is not allowed; in a call, an `HCP_PROJECT` that is not a project name.";
    BadWorkdir => "bad_workdir", Command, EX_USAGE, EX_USAGE, "A working directory that may not be one (RUNTIME §4 `--workdir`): a session's, or a `local` call's current directory.";
    BadConfigKey => "bad_config_key", Command, EX_USAGE, EX_USAGE, "`hcp config` given a key `config.json` does not have, or a value its key does not take (RUNTIME §3): nothing written.";
    BadSeed => "bad_seed", Command, USAGE, USAGE, "`hcp home --seed` of a path that is not a directory that can be copied, or that would replace a name the home holds.";
    BadTtl => "bad_ttl", Command, USAGE, USAGE, "A time to live that does not parse or is out of range.";
    BadCapability => "bad_capability", Command, USAGE, USAGE, "A capability hcp does not know.";
    UnknownApproval => "unknown_approval", Command, EX_NOINPUT, EX_NOINPUT, "No approval has this id.";
    ApprovalUsed => "approval_used", Command, REFUSED, REFUSED, "The approval was used already (single use).";
    ApprovalExpired => "approval_expired", Command, REFUSED, REFUSED, "The approval has expired.";
    ApprovalDecided => "approval_decided", Command, REFUSED, REFUSED, "The owner answered the approval already (approved or denied).";
    NotAnEscalation => "not_an_escalation", Command, REFUSED, REFUSED, "`hcp deny` of a confirmation: only an escalation can be denied.";

    // Reading the audit trail (RUNTIME §6).
    HashMismatch => "hash_mismatch", Audit, REFUSED, REFUSED, "A record whose hash does not match its content.";
    PrevMismatch => "prev_mismatch", Audit, REFUSED, REFUSED, "A record whose `prev` is not the previous record's hash.";
    TornTail => "torn_tail", Audit, REFUSED, REFUSED, "The last line has no newline: a write was cut short.";
    Truncated => "truncated", Audit, REFUSED, REFUSED, "Records were cut from the end of the trail.";
    MissingLog => "missing_log", Audit, REFUSED, REFUSED, "The trail is gone while its anchor says it held records.";
    CheckpointMismatch => "checkpoint_mismatch", Audit, REFUSED, REFUSED, "The trail does not extend a signed checkpoint.";
    SeqMismatch => "seq_mismatch", Audit, REFUSED, REFUSED, "A record whose `seq` is not its position in the chain.";
    MissingAnchor => "missing_anchor", Audit, REFUSED, REFUSED, "The anchor beside a trail that has records is gone.";
    AnchorMismatch => "anchor_mismatch", Audit, REFUSED, REFUSED, "The anchor's count or head is not the trail's.";
    BadAnchor => "bad_anchor", Audit, REFUSED, REFUSED, "The anchor does not parse or fails its checksum.";
    OrphanOutcome => "orphan_outcome", Audit, REFUSED, REFUSED, "An outcome record whose intent is not in the trail.";
    DuplicateOutcome => "duplicate_outcome", Audit, REFUSED, REFUSED, "Two outcome records for one intent.";
    ApprovalSpentTwice => "approval_spent_twice", Audit, REFUSED, REFUSED, "Two intent records spend one approval: it was spent again after its spend was undone (a store put back).";
    MachineMismatch => "machine_mismatch", Audit, REFUSED, REFUSED, "A record in one machine's chain that names another machine (RUNTIME §9).";
    BadCheckpoint => "bad_checkpoint", Audit, USAGE, USAGE, "A checkpoint file that cannot be read, is not a checkpoint, or whose signature fails.";

    // Stores made on purpose, the keyed chain and its witnesses (RUNTIME §4, §5.4, §6).
    NoStore => "no_store", Store, EX_NOINPUT, EX_NOINPUT, "`HCP_HOME` names no store (missing, or without its marker `store.json`): `hcp init` makes one.";
    WitnessUnavailable => "witness_unavailable", Store, EX_IOERR, EX_IOERR, "The audit witness (`audit.witness`) cannot take a checkpoint, so no act of authority happens.";
    OutcomeDeferred => "outcome_deferred", Run, EX_IOERR, EX_IOERR, "A mark on a result, not a refusal: the verb ran and its outcome record could not be written (an I/O error); the call answers with the child's own status.";
    Rollback => "rollback", Audit, REFUSED, REFUSED, "The trail holds fewer records than its newest witnessed checkpoint: it was rolled back (a store restored from an older copy).";
    MissingChainKey => "missing_chain_key", Audit, REFUSED, REFUSED, "The store's chain key `audit/chain.key` is gone while its marker or keyed anchor says it was made.";
    ExportFailed => "export_failed", Audit, REFUSED, REFUSED, "`hcp audit export`: the collector refused the spans for good (an HTTP status other than 429 and 5xx), or did not take them within the tries of a one-shot export (RUNTIME §11).";
    BadSince => "bad_since", Command, USAGE, USAGE, "`hcp policy replay --since`: a time that is neither RFC 3339 nor a duration such as `24h` (RUNTIME §11).";
}

impl Code {
    /// Whether the runtime policy (RUNTIME §7) raises this code.
    pub fn is_runtime_policy(self) -> bool {
        self.step() == Step::RuntimePolicy
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for Code {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Code {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl From<Code> for String {
    fn from(c: Code) -> Self {
        c.as_str().to_owned()
    }
}

impl Serialize for Code {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Code {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Code::parse(&s).ok_or_else(|| serde::de::Error::custom(format!("unknown code `{s}`")))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn spellings_are_unique_snake_case_and_parse_back() {
        let mut seen = std::collections::BTreeSet::new();
        for c in Code::ALL {
            let s = c.as_str();
            assert!(seen.insert(s), "`{s}` twice");
            assert!(
                s.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') && !s.starts_with('_'),
                "{s}"
            );
            assert_eq!(Code::parse(s), Some(*c));
            let json = serde_json::to_string(c).unwrap();
            assert_eq!(serde_json::from_str::<Code>(&json).unwrap(), *c);
        }
        assert_eq!(Code::parse("no_such_code"), None);
    }

    #[test]
    fn statuses_follow_runtime_section_5() {
        use exit::*;
        let cases = [
            (Code::Usage, EX_USAGE, USAGE),
            (Code::BadWorkdir, EX_USAGE, EX_USAGE),
            (Code::BadConfigKey, EX_USAGE, EX_USAGE),
            (Code::ArgInvalid, EX_DATAERR, EX_DATAERR),
            (Code::UnknownVerb, EX_NOINPUT, EX_NOINPUT),
            (Code::StoreIo, EX_IOERR, EX_IOERR),
            (Code::MissingGrant, EX_NOPERM, EX_NOPERM),
            (Code::RateLimit, EX_NOPERM, EX_NOPERM),
            (Code::BadConfig, EX_CONFIG, EX_CONFIG),
            (Code::Timeout, TIMEOUT, TIMEOUT),
            (Code::BinChanged, NOT_EXECUTABLE, NOT_EXECUTABLE),
            (Code::BinMissing, NOT_FOUND, REFUSED),
            (Code::Cancelled, CANCELLED, CANCELLED),
            (Code::MemoryExceeded, KILLED, KILLED),
            (Code::AuditUnavailable, EX_IOERR, EX_IOERR),
            (Code::StateUnavailable, EX_IOERR, EX_IOERR),
            (Code::NestedCall, EX_NOPERM, EX_NOPERM),
        ];
        for (c, call, cmd) in cases {
            assert_eq!(
                (c.exit_status(), c.command_exit_status()),
                (call, cmd),
                "{c}"
            );
        }
    }

    #[test]
    fn the_codes_runtime_md_names_are_declared() {
        for s in [
            "nested_call",
            "audit_unavailable",
            "state_unavailable",
            "tool_drift",
            "skill_collision",
            "bad_openapi",
            "unknown_operation",
            "pass_through_unsupported",
            "escalation_denied",
            "resolver_error",
            "resource_not_found",
            "hash_mismatch",
            "prev_mismatch",
            "truncated",
            "missing_log",
            "checkpoint_mismatch",
            "no_escalation_tier",
            "no_resource_resolver",
            "requires_confirmation",
            "unknown_tool",
        ] {
            assert!(Code::parse(s).is_some(), "{s}");
        }
    }
}
