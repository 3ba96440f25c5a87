//! `unsafe_path` (error): an entry whose name holds `..`, a control character or an
//! absolute path; a program path that install refuses.
//!
//! ## What it does
//! Reports an entry of the pack directory, at any depth, whose name contains `..`, a NUL
//! or another control character (a newline, an escape), a backslash, or starts with `/`;
//! a pack too deep or too large to walk whole (more than `MAX_DEPTH` levels or
//! `MAX_ENTRIES` entries), whose unseen part cannot be checked; and a program path
//! (`wrap.bin`, a composite verb's `cli[0]`) that is absolute or holds a `..` component,
//! by the rule install applies (`hcp_model::program_path_problem`).
//!
//! ## Why is this bad?
//! Names like these are how path traversal and output forgery start: a `..` that some
//! later tool joins into a path climbs out of the store, a newline in a name forges a line
//! of lint output, a backslash is a separator elsewhere. No pack needs one.
//!
//! ## Example
//! ```text
//! packs/transit/
//!   surface.json  policy.json  HARNESS.md
//!   ..hidden
//! ```

use crate::context::{Ctx, program_findings, tick};
use crate::diagnostic::Diagnostic;

/// The rule's code.
pub(crate) const CODE: hcp_model::Code = hcp_model::Code::UnsafePath;

/// Why a name (one path segment) is unsafe, or `None`.
pub(crate) fn why_unsafe(name: &str) -> Option<&'static str> {
    if name.contains("..") {
        Some("holds `..`")
    } else if name.contains('\0') {
        Some("holds a NUL")
    } else if name.chars().any(char::is_control) {
        Some("holds a control character")
    } else if name.starts_with('/') {
        Some("is an absolute path")
    } else if name.contains('\\') {
        Some("holds a backslash")
    } else {
        None
    }
}

pub(crate) fn run(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    if cx.source.truncated {
        out.push(
            Diagnostic::error(CODE,
                format!(
                    "the pack is deeper than {} levels or holds more than {} entries; what lies beyond was not checked",
                    crate::source::MAX_DEPTH,
                    crate::source::MAX_ENTRIES
                ),
            )
            .hint("a pack is three files; move everything else out"),
        );
    }
    program_findings(
        cx,
        Diagnostic::error,
        CODE,
        "name a path inside the pack directory (`bin/tool`) or a bare command looked up on `PATH`",
        |program, _| {
            hcp_model::program_path_problem(program).map(|why| format!("program {}: {why}", tick(program)))
        },
        out,
    );
    for e in &cx.source.entries {
        let name = e.rel.rsplit('/').next().unwrap_or(&e.rel);
        if let Some(why) = why_unsafe(name) {
            out.push(
                Diagnostic::error(CODE, format!("entry {} {why}", tick(&e.rel)))
                    .in_file(e.rel.clone())
                    .hint("rename or remove it; a pack holds only its three files"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::why_unsafe;

    #[test]
    fn names() {
        for bad in [
            "..",
            "a..b",
            "..env",
            "a\0b",
            "a\nb",
            "/etc",
            "a\\b",
            "\u{1b}[31m",
        ] {
            assert!(why_unsafe(bad).is_some(), "{bad:?}");
        }
        for ok in ["README.md", ".hidden", "a.b.c", "families", "é"] {
            assert_eq!(why_unsafe(ok), None, "{ok:?}");
        }
    }
}
