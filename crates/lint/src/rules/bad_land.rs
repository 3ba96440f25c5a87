//! `bad_land` (error): a land token other than `personal`, `brain`, `local`.
//!
//! ## What it does
//! Reports a `privacy.land` in `policy.json` that is not one of the three tokens
//! `personal`, `brain`, `local`.
//!
//! ## Why is this bad?
//! Runtimes MUST reject any other land token: the land decides whose data a
//! command may touch, and a token the runtime does not know has no enforcement behind it.
//!
//! ## Example
//! ```json
//! "notes.create": { "operation": "write", "privacy": { "land": "team" } }
//! ```
//! Use `brain` for shared project context.

use crate::context::Ctx;
use crate::diagnostic::Diagnostic;
use hcp_model::{ParseCode, ParseError};

/// The rule's code.
pub(crate) const CODE: hcp_model::Code = hcp_model::Code::BadLand;

pub(crate) fn run(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    super::parse_failure(cx, ParseCode::BadLand, hint, out);
}

fn hint(_: &ParseError) -> Option<String> {
    Some("a land is `personal`, `brain` (shared project context) or `local` (docs/packs.md)".into())
}
