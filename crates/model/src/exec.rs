//! The exec envelope and result of RUNTIME §5 (the JSON face of `hcp exec`).

use crate::strict::StrictMap;
use serde::{Deserialize, Serialize};

/// A call as the JSON face receives it. Strict: unknown fields and repeated keys are
/// refused (`bad_envelope`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Envelope {
    /// The pack; when absent, `verb_key` is resolved across active packs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pack_id: Option<String>,
    /// The verb key (or `PACK.VERB` when `pack_id` is absent).
    pub verb_key: String,
    /// Argument values by name (required; `{}` for none).
    pub args: StrictMap<ArgValue>,
}

/// An argument value: a string, a number or a boolean (RUNTIME §5). Rendered into argv as
/// its JSON text without quotes for numbers and booleans.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ArgValue {
    /// A boolean.
    Bool(bool),
    /// A number, kept as written.
    Number(serde_json::Number),
    /// A string.
    String(String),
}

impl ArgValue {
    /// The text that goes into argv.
    pub fn to_arg(&self) -> String {
        match self {
            Self::Bool(b) => b.to_string(),
            Self::Number(n) => n.to_string(),
            Self::String(s) => s.clone(),
        }
    }

    /// Whether the value is `true` (or `"true"`, which only the CLI face produces), as the
    /// confirm gate reads it (§4.5.2).
    pub fn is_true(&self) -> bool {
        matches!(self, Self::Bool(true)) || matches!(self, Self::String(s) if s == "true")
    }
}

/// The answer of `hcp exec` (RUNTIME §5): a run (`ok` follows the child's exit) or a
/// refusal (`ok: false` with `error` and `code`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecResult {
    /// Whether the gate allowed the call and the child exited 0.
    pub ok: bool,
    /// The resolved pack, when resolution got that far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pack_id: Option<String>,
    /// The resolved verb key, when resolution got that far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verb_key: Option<String>,
    /// `read` or `write`, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    /// The land, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub land: Option<String>,
    /// The refusal message (`confirm required` for the confirm gate, §4.5.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The stable refusal code (of [`crate::code`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<crate::Code>,
    /// A hint for the caller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// The child's exit status (a signal `n` is `128 + n`), on a run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The child's stdout, capped: its text, or base64 of its bytes when they are not
    /// UTF-8 (then the result also holds `"stdout_encoding": "base64"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout: Option<String>,
    /// The child's stderr, lossily UTF-8, capped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
    /// stdout parsed as JSON when it is JSON, else `null`.
    #[serde(default)]
    pub data: serde_json::Value,
    /// Whether either stream hit its cap.
    #[serde(default)]
    pub truncated: bool,
    /// Wall time of the whole call, milliseconds.
    #[serde(default)]
    pub duration_ms: u64,
    /// The audit record of this decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit_id: Option<String>,
    /// Extra facts (the sandbox state, an approval id), by name.
    #[serde(default, flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}
