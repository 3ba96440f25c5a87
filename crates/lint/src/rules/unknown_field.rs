//! `unknown_field` (error): a field the format does not define.
//!
//! ## What it does
//! Reports a key that `surface.json` or `policy.json` does not
//! define, at any level — a misspelt `"confrim"`, a `"lands"` inside `privacy`.
//!
//! ## Why is this bad?
//! Unknown fields MUST fail parse. A misspelt `confirm` that was silently
//! ignored would turn a gated write into one that runs without confirmation.
//!
//! ## Example
//! ```json
//! "mail.send": { "operation": "write", "privacy": { "lands": "local" }, "confrim": true }
//! ```

use crate::context::Ctx;
use crate::diagnostic::Diagnostic;
use hcp_model::{ParseCode, ParseError};

/// The rule's code.
pub(crate) const CODE: hcp_model::Code = hcp_model::Code::UnknownField;

pub(crate) fn run(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    super::parse_failure(cx, ParseCode::UnknownField, hint, out);
}

fn hint(_: &ParseError) -> Option<String> {
    Some(
        "check the spelling: parsing is strict and refuses fields the format does not define"
            .into(),
    )
}
