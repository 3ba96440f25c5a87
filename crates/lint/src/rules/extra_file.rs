//! `extra_file` (warning): an entry beside the three pack files.
//!
//! ## What it does
//! Warns about each top-level entry of the pack directory other than `surface.json`,
//! `policy.json` and `HARNESS.md` — a binary, a `families/` folder, a `README.md` — once
//! per entry (a directory is reported once, not file by file). A `.git` directory is
//! ignored, and so are entries that `secret_file`, `symlink_in_pack` or `unsafe_path`
//! already refuse, and the OpenAPI document `openapi.spec` names (install reads it and
//! keeps it in the store). Also warns when the pack holds so many entries that the walk stopped.
//!
//! ## Why is this bad?
//! Install copies only the three files, so anything else is silently left behind — a
//! wrapped binary the pack seems to ship, a second Markdown file the author thought the
//! agent would read. What stays out of a pack: a whole binary, a
//! `families/` directory (family is a manifest field), extra Markdown for scale.
//!
//! ## Example
//! ```text
//! packs/mail/
//!   surface.json  policy.json  HARNESS.md
//!   families/work.json
//!   ADVANCED.md
//! ```

use crate::context::{Ctx, tick};
use crate::diagnostic::Diagnostic;
use crate::source::EntryKind;

/// The rule's code.
pub(crate) const CODE: hcp_model::Code = hcp_model::Code::ExtraFile;

pub(crate) fn run(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let document_top = cx
        .source
        .document
        .as_ref()
        .map(|d| d.rel.split('/').next().unwrap_or(""));
    for e in &cx.source.entries {
        if document_top == Some(e.rel.as_str()) && e.kind != EntryKind::Symlink {
            continue;
        }
        if e.rel.contains('/')
            || hcp_model::PACK_FILES.contains(&e.rel.as_str())
            || e.rel == ".git"
            || e.kind == EntryKind::Symlink
            || super::secret_file::is_secret(&e.rel, e.kind == EntryKind::Dir)
            || super::unsafe_path::why_unsafe(&e.rel).is_some()
        {
            continue;
        }
        let what = match e.kind {
            EntryKind::Dir => "directory",
            EntryKind::File => "file",
            _ => "entry",
        };
        let d = Diagnostic::warning(CODE,
            format!("{what} {} is not one of the three pack files", tick(&e.rel)),
        )
        .in_file(e.rel.clone());
        let d = if e.rel == "families" {
            d.hint("a family is the manifest field `binding.family`, not a folder")
        } else if e.rel.to_lowercase().ends_with(".md") {
            d.hint("a pack has one skill, `HARNESS.md`; a capability scales by adding packs")
        } else {
            d.hint("install copies only `surface.json`, `policy.json` and `HARNESS.md`; keep the rest out of the pack")
        };
        out.push(d);
    }
}

#[cfg(test)]
mod tests {
    use crate::source::EntryKind;
    use crate::testing::{POLICY, SKILL, SURFACE, found, source};
    use pretty_assertions::assert_eq;

    #[test]
    fn git_nested_entries_and_refused_entries_are_not_repeated() {
        let src = source(
            SURFACE,
            POLICY,
            SKILL,
            &[
                (".git", EntryKind::Dir),
                ("bin", EntryKind::Dir),
                ("bin/tool", EntryKind::File),
                (".env", EntryKind::File),
                ("link", EntryKind::Symlink),
            ],
        );
        let r = crate::check(&src);
        assert_eq!(
            found(&r.diagnostics),
            vec![
                ("secret_file", Some(".env"), 0),
                ("extra_file", Some("bin"), 0),
                ("symlink_in_pack", Some("link"), 0),
            ]
        );
    }
}
