//! `bad_json` (error): a pack file is not well-formed JSON of the right shape.
//!
//! ## What it does
//! Parses `surface.json` and `policy.json` strictly and reports syntax errors (a trailing
//! comma, a missing brace, text after the value, invalid UTF-8), values of the wrong type
//! (`"confirm": "yes"`) and missing required fields, with the line and column where
//! parsing stopped. The rules that need the file's content skip it until it parses.
//!
//! ## Why is this bad?
//! The runtime refuses what it cannot read exactly: both files are
//! validated strictly. A lenient reader that guessed — a string `"yes"` read as `true`, a trailing
//! comma ignored — would let two runtimes disagree about the same pack.
//!
//! ## Example
//! ```json
//! {
//!   "surface_id": "mail",
//!   "version": 1,
//!   "verbs": {
//!     "mail.send": { "operation": "write", "privacy": { "land": "personal" }, "confirm": "yes" },
//!   }
//! }
//! ```
//! `"yes"` is a string where a boolean is expected, and the comma after the entry is a
//! trailing comma.

use crate::context::Ctx;
use crate::diagnostic::Diagnostic;
use hcp_model::{ParseCode, ParseError};

/// The rule's code.
pub(crate) const CODE: hcp_model::Code = hcp_model::Code::BadJson;

pub(crate) fn run(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let start = out.len();
    super::parse_failure(cx, ParseCode::BadJson, hint, out);
    for d in &mut out[start..] {
        let shape = [
            "missing field",
            "invalid type",
            "invalid value",
            "invalid length",
        ]
        .iter()
        .any(|p| d.message.starts_with(p));
        if !shape && !d.message.contains("(at `") {
            d.message = format!("not valid JSON: {}", d.message);
        }
    }
}

fn hint(e: &ParseError) -> Option<String> {
    let last = e.path.rsplit('.').next().unwrap_or("");
    if e.message.contains("trailing comma") {
        Some("JSON allows no comma after the last member of an object or array".into())
    } else if last == "confirm" {
        Some("`confirm` is `true` or `false`, without quotes".into())
    } else if e.message.starts_with("missing field") {
        Some("add the field; see the schema in `schemas/`".into())
    } else if e.message.contains("trailing characters") {
        Some("a pack file holds exactly one JSON object".into())
    } else {
        None
    }
}
