//! `unsupported_kind` (warning): `kind: openapi`, which this runtime does not execute.
//!
//! ## What it does
//! Warns when the manifest's `kind` is `openapi`.
//!
//! ## Why is this bad?
//! An `openapi` pack is parsed and linted, but `hcp exec` answers `kind_unsupported` for
//! each of its verbs (RUNTIME §1.1): it installs, and then nothing runs.
//!
//! ## Example
//! ```json
//! { "id": "weather", "kind": "openapi", "openapi": "https://api.example.com/openapi.json" }
//! ```

use crate::context::{Ctx, in_manifest};
use crate::diagnostic::Diagnostic;
use hcp_model::Kind;

pub(crate) fn run(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let Some((m, text)) = cx.manifest() else {
        return;
    };
    if m.kind == Kind::Openapi {
        out.push(
            in_manifest(
                Diagnostic::warning(
                    "unsupported_kind",
                    "kind `openapi` is not executed by this runtime",
                ),
                text,
                &["kind"],
            )
            .hint(
                "exec answers `kind_unsupported`; wrap the API's CLI with `kind: wrap` to run it",
            ),
        );
    }
}
