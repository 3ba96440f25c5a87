//! The two refusals of this crate: a document (or one of its operations) hcp cannot use,
//! and a call whose arguments the document does not allow.

use hcp_model::Code;

/// `bad_openapi` (RUNTIME §1.3): the document, or the part of it an operation needs, is
/// refused. `pointer` is the RFC 6901 JSON pointer of the fault in the document (`""` for
/// the document as a whole, `/paths/~1tasks/get/parameters/0` for one parameter).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} (at `{}`)", display_pointer(.pointer))]
pub struct BadOpenapi {
    /// JSON pointer of the fault (RFC 6901); empty for the whole document.
    pub pointer: String,
    /// Lowercase, user values in backticks.
    pub message: String,
}

fn display_pointer(p: &str) -> &str {
    if p.is_empty() { "/" } else { p }
}

impl BadOpenapi {
    /// A refusal at `pointer`.
    pub fn at(pointer: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            pointer: pointer.into(),
            message: message.into(),
        }
    }

    /// The stable code, `bad_openapi`.
    pub fn code(&self) -> Code {
        Code::BadOpenapi
    }
}

/// Why an operation cannot be used for a verb.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OperationError {
    /// `unknown_operation`: no operation of the document has this `operationId`.
    #[error("the document has no operation `{0}`")]
    Unknown(String),
    /// `bad_openapi`: the operation exists but hcp cannot call it (a cookie parameter it
    /// needs, a body that is not a JSON object, a security scheme it cannot place …).
    #[error(transparent)]
    Bad(#[from] BadOpenapi),
}

impl OperationError {
    /// The stable code: `unknown_operation` or `bad_openapi`.
    pub fn code(&self) -> Code {
        match self {
            Self::Unknown(_) => Code::UnknownOperation,
            Self::Bad(b) => b.code(),
        }
    }
}

/// A call refused before anything is sent ([`crate::plan`]). Messages name the argument
/// and the rule, never the value (a value may be a secret the caller mistyped).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Refusal {
    /// The stable code: the argument codes of RUNTIME §5 step 3 (`arg_unknown`,
    /// `arg_missing`, `arg_invalid`), `binding_required` (step 8: the operation's security
    /// scheme needs a credential and none was given) or `bad_openapi` (no server to send
    /// to: the document names none that is absolute and the operator set none).
    pub code: Code,
    /// The argument concerned, when one is.
    pub argument: Option<String>,
    /// Lowercase, user values in backticks.
    pub message: String,
}

impl Refusal {
    pub(crate) fn arg(code: Code, name: &str, message: impl Into<String>) -> Self {
        Self {
            code,
            argument: Some(name.to_owned()),
            message: message.into(),
        }
    }
}
