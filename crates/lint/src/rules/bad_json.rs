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

/// A hint for every failure: the specific ones first, then one for each kind (the text
/// ends early, is not UTF-8, is not JSON, or a value has the wrong shape).
fn hint(e: &ParseError) -> Option<String> {
    let last = e.path.rsplit('.').next().unwrap_or("");
    let m = e.message.as_str();
    let h = if m.contains("trailing comma") {
            "JSON allows no comma after the last member of an object or array"
        } else if last == "confirm" {
            "`confirm` is `true` or `false`, without quotes"
        } else if m.starts_with("missing field") {
            "add the field; see the schema in `schemas/`"
        } else if m.contains("trailing characters") {
            "a pack file holds exactly one JSON object"
        } else if m.starts_with("EOF while parsing") {
            "the file ends inside a value: close each `{`, `[` and `\"` it opens"
        } else if m.contains("UTF-8") {
            "save the file as UTF-8"
        } else if ["invalid type", "invalid value", "invalid length"]
            .iter()
            .any(|p| m.starts_with(p))
        {
            "each field's type and an example: docs/packs.md"
        } else {
            "a pack file is one JSON object: keys and strings in double quotes, `true`, `false` and `null` in lower case, no comments"
        };
    Some(h.to_owned())
}
