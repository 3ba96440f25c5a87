//! `symlink_in_pack` (error): a symbolic link inside the pack.
//!
//! ## What it does
//! Reports every entry of the pack directory, at any depth, that is a symbolic link,
//! whatever it points to — `/etc/passwd`, a sibling file, nothing at all.
//!
//! ## Why is this bad?
//! Install follows no symlink: what is linted must be what is installed, and
//! a link can change its target between the two, or point outside the pack (a `HARNESS.md`
//! that is really `~/.ssh/id_rsa`). Even a link to a sibling is refused, so that the rule
//! has no exception to get wrong.
//!
//! ## Example
//! ```text
//! packs/transit/
//!   surface.json
//!   policy.json
//!   HARNESS.md -> ../../docs/transit.md
//! ```
//! Copy the file in instead of linking it.

use crate::context::{Ctx, tick};
use crate::diagnostic::Diagnostic;
use crate::source::EntryKind;

/// The rule's code.
pub(crate) const CODE: hcp_model::Code = hcp_model::Code::SymlinkInPack;

pub(crate) fn run(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    for e in cx
        .source
        .entries
        .iter()
        .filter(|e| e.kind == EntryKind::Symlink)
    {
        out.push(
            Diagnostic::error(CODE,
                format!("{} is a symbolic link", tick(&e.rel)),
            )
            .in_file(e.rel.clone())
            .hint("replace the link with a regular file: install follows no symlink"),
        );
    }
}
