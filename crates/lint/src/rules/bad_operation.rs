//! `bad_operation` (error): an operation other than `read`, `write`.
//!
//! ## What it does
//! Reports an `operation` in `policy.json` that is not `read` or `write`.
//!
//! ## Why is this bad?
//! The operation picks the grant a call needs (`verb.exec.read` or `verb.exec.write`). A `delete` or `admin` operation has no grant behind it; it is a write.
//!
//! ## Example
//! ```json
//! "mail.purge": { "operation": "delete", "privacy": { "land": "personal" } }
//! ```

use crate::context::Ctx;
use crate::diagnostic::Diagnostic;
use hcp_model::{ParseCode, ParseError};

/// The rule's code.
pub(crate) const CODE: hcp_model::Code = hcp_model::Code::BadOperation;

pub(crate) fn run(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    super::parse_failure(cx, ParseCode::BadOperation, hint, out);
}

fn hint(_: &ParseError) -> Option<String> {
    Some(
        "an operation is `read` or `write`; anything that changes state is `write` (docs/packs.md)"
            .into(),
    )
}
