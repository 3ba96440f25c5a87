//! `pass_through_present` (warning): the manifest keeps the bootstrap `pass_through`.
//!
//! ## What it does
//! Warns when `surface.json` has a `pass_through` field.
//!
//! ## Why is this bad?
//! `pass_through` (an allow-list of raw subcommands) is a bootstrap, to be promoted to
//! named verbs. Named verbs are what policy, grants,
//! audit and the skill can speak about; a pass-through is a whole binary behind one name.
//!
//! ## Example
//! ```json
//! "pass_through": { "allowedSubcommands": ["log", "show", "diff"] }
//! ```
//! Declare `log`, `show` and `diff` as verbs instead.

use crate::context::{Ctx, in_manifest};
use crate::diagnostic::Diagnostic;

/// The rule's code.
pub(crate) const CODE: hcp_model::Code = hcp_model::Code::PassThroughPresent;

pub(crate) fn run(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let Some((m, text)) = cx.manifest() else {
        return;
    };
    if m.pass_through.is_some() {
        out.push(
            in_manifest(
                Diagnostic::warning(CODE, "the manifest has `pass_through`"),
                text,
                &["pass_through"],
            )
            .hint("`pass_through` is bootstrap only; promote the commands to named verbs"),
        );
    }
}
