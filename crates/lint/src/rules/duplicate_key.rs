//! `duplicate_key` (error): the same key twice in one JSON object.
//!
//! ## What it does
//! Reports a key that appears twice in one object, at any depth of `surface.json` or
//! `policy.json`, at the second occurrence.
//!
//! ## Why is this bad?
//! JSON parsers disagree on which of two equal keys wins: most keep the last, some the
//! first, some refuse. A policy that says `"confirm": true` and then `"confirm": false`
//! means whatever the reader decides, so hcp refuses it.
//!
//! ## Example
//! ```json
//! {
//!   "surface_id": "ledger",
//!   "version": 1,
//!   "verbs": {
//!     "post": { "operation": "write", "privacy": { "land": "personal" }, "confirm": true },
//!     "post": { "operation": "read", "privacy": { "land": "personal" } }
//!   }
//! }
//! ```

use crate::context::Ctx;
use crate::diagnostic::Diagnostic;
use hcp_model::{ParseCode, ParseError};

/// The rule's code.
pub(crate) const CODE: hcp_model::Code = hcp_model::Code::DuplicateKey;

pub(crate) fn run(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    super::parse_failure(cx, ParseCode::DuplicateKey, hint, out);
}

fn hint(_: &ParseError) -> Option<String> {
    Some("keep one of the two: parsers disagree on which one wins".into())
}
