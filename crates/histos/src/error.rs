//! Load errors: the POLICY decision-code namespace (HISTOS-ENGINE §2c).

use std::fmt;

/// A POLICY code (`PolicyError.code`), HISTOS-ENGINE §2c. The published list plus the
/// codes the reference engine emits beyond it (`invalid_field`, `invalid_contract`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PolicyCode {
    /// A repeated mapping key, anywhere.
    DuplicateKey,
    /// A `bind` value that is not exactly `principal.<attr>`.
    InvalidBinding,
    /// A role grant that is not a string.
    InvalidGrant,
    /// The document's top level is not a mapping.
    NotAnObject,
    /// A policy path that does not exist (path loader only).
    NotFound,
    /// `tools` is not a mapping.
    ToolsNotAMapping,
    /// A key the format does not define.
    UnknownKey,
    /// Malformed JSON/YAML, an empty YAML document, JSON `NaN`/`Infinity`.
    Unparseable,
    /// A pattern refused by the ReDoS screen (HISTOS-ENGINE §2d).
    UnsafePattern,
    /// `requires.features` names a feature this engine does not implement.
    UnsupportedFeature,
    /// `schema_version` is not `histos.policy/0.1`.
    UnsupportedVersion,
    /// Any other invalid policy.
    PolicyInvalid,
    /// An invalid field definition (emitted by the reference, not in the published list).
    InvalidField,
    /// An invalid limit (`rate_limit`, `budget`, `expires_in`), e.g. `10.0`.
    InvalidContract,
    /// A canary that is not a string, shorter than 6 characters, or repeated.
    InvalidCanary,
    /// A required key is missing (`confirmation.required`, `where[].op`, …).
    MissingKey,
    /// A value that must be a list is not.
    NotAList,
    /// A value that must be a mapping is not.
    NotAMapping,
    /// The policy exceeds a size limit (bytes or expanded YAML nodes).
    PolicyTooLarge,
    /// A tool definition the JSON-Schema projection cannot carry (a combinator, a
    /// remote or recursive `$ref`, a malformed bound; HISTOS-ENGINE §11). Emitted by
    /// importers, never by the policy loader.
    InvalidImport,
}

impl PolicyCode {
    /// Every code, in the order above.
    pub const ALL: &'static [PolicyCode] = &[
        PolicyCode::DuplicateKey,
        PolicyCode::InvalidBinding,
        PolicyCode::InvalidGrant,
        PolicyCode::NotAnObject,
        PolicyCode::NotFound,
        PolicyCode::ToolsNotAMapping,
        PolicyCode::UnknownKey,
        PolicyCode::Unparseable,
        PolicyCode::UnsafePattern,
        PolicyCode::UnsupportedFeature,
        PolicyCode::UnsupportedVersion,
        PolicyCode::PolicyInvalid,
        PolicyCode::InvalidField,
        PolicyCode::InvalidContract,
        PolicyCode::InvalidCanary,
        PolicyCode::MissingKey,
        PolicyCode::NotAList,
        PolicyCode::NotAMapping,
        PolicyCode::PolicyTooLarge,
        PolicyCode::InvalidImport,
    ];

    /// The stable snake_case code.
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyCode::DuplicateKey => "duplicate_key",
            PolicyCode::InvalidBinding => "invalid_binding",
            PolicyCode::InvalidGrant => "invalid_grant",
            PolicyCode::NotAnObject => "not_an_object",
            PolicyCode::NotFound => "not_found",
            PolicyCode::ToolsNotAMapping => "tools_not_a_mapping",
            PolicyCode::UnknownKey => "unknown_key",
            PolicyCode::Unparseable => "unparseable",
            PolicyCode::UnsafePattern => "unsafe_pattern",
            PolicyCode::UnsupportedFeature => "unsupported_feature",
            PolicyCode::UnsupportedVersion => "unsupported_version",
            PolicyCode::PolicyInvalid => "policy_invalid",
            PolicyCode::InvalidField => "invalid_field",
            PolicyCode::InvalidContract => "invalid_contract",
            PolicyCode::InvalidCanary => "invalid_canary",
            PolicyCode::MissingKey => "missing_key",
            PolicyCode::NotAList => "not_a_list",
            PolicyCode::NotAMapping => "not_a_mapping",
            PolicyCode::PolicyTooLarge => "policy_too_large",
            PolicyCode::InvalidImport => "invalid_import",
        }
    }
}

impl fmt::Display for PolicyCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A policy that cannot be loaded (HISTOS-ENGINE §2): a code, a lowercase message and,
/// where known, a location (`tools.t.args.x.pattern`, or `line 3 column 5`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message} [{code}]{}", location.as_ref().map(|l| format!(" at `{l}`")).unwrap_or_default())]
pub struct PolicyError {
    /// The POLICY code harnesses match on.
    pub code: PolicyCode,
    /// A human-readable, lowercase explanation.
    pub message: String,
    /// Where in the document (dotted key path or line/column), when known.
    pub location: Option<String>,
}

impl PolicyError {
    /// A new error without a location.
    pub fn new(code: PolicyCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            location: None,
        }
    }

    /// Sets the location.
    pub fn at(mut self, location: impl Into<String>) -> Self {
        self.location = Some(location.into());
        self
    }
}
