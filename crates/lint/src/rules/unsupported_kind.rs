//! `unsupported_kind` (warning): a `kind` this runtime parses but does not execute.
//!
//! ## What it does
//! Warns when the manifest's `kind` is one this runtime reads and lints but whose verbs
//! it does not run. Every kind (`wrap`, `composite`, `openapi`) runs today: `wrap` and `composite` run a
//! program, `openapi` sends one HTTP request per call, so nothing raises it now;
//! the code stays for a kind a later manifest version adds before the runtime runs it.
//!
//! ## Why is this bad?
//! Such a pack installs, and then each call answers `kind_unsupported`.
//!
//! ## Example
//! A manifest of a newer version whose `kind` this runtime knows by name only.

use crate::context::Ctx;
use crate::diagnostic::Diagnostic;
use hcp_model::Kind;

/// The rule's code.
pub(crate) const CODE: hcp_model::Code = hcp_model::Code::UnsupportedKind;

pub(crate) fn run(cx: &Ctx<'_>, _out: &mut Vec<Diagnostic>) {
    let Some((m, _)) = cx.manifest() else {
        return;
    };
    match m.kind {
        Kind::Wrap | Kind::Composite | Kind::Openapi => {}
    }
}
