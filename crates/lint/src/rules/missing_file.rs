//! `missing_file` (error): a pack file is missing or cannot be read.
//!
//! ## What it does
//! Checks that `surface.json`, `policy.json` and `HARNESS.md` are all present at the top of
//! the pack directory, under exactly those case-sensitive names, as regular files of at
//! most 1 MiB that could be read.
//!
//! ## Why is this bad?
//! A pack is exactly those three files; install refuses a pack
//! without one of them. A symlink or a directory under one of the names is not a file the
//! runtime will read: install follows no symlink.
//!
//! ## Example
//! ```text
//! packs/transit/
//!   surface.json
//!   Policy.json     <- wrong case: `policy.json` is missing
//!   HARNESS.md
//! ```

use crate::context::Ctx;
use crate::diagnostic::Diagnostic;
use crate::source::{EntryKind, MAX_FILE_BYTES};

/// The rule's code.
pub(crate) const CODE: hcp_model::Code = hcp_model::Code::MissingFile;

pub(crate) fn run(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    for name in hcp_model::PACK_FILES {
        if cx.source.file(name).is_some() {
            continue;
        }
        let entry = cx.source.entries.iter().find(|e| e.rel == name);
        let d = match entry {
            None => {
                let d = Diagnostic::error(CODE, format!("the pack has no `{name}`"));
                let other_case = cx
                    .source
                    .entries
                    .iter()
                    .find(|e| !e.rel.contains('/') && e.rel.eq_ignore_ascii_case(name));
                match other_case {
                    Some(e) => d.hint(format!(
                        "found `{}`: the names of the pack files are exact and case-sensitive",
                        e.rel
                    )),
                    None => d.hint(format!(
                        "a pack is one directory with `surface.json`, `policy.json` and `HARNESS.md`; add `{name}`"
                    )),
                }
            }
            Some(e) => match e.kind {
                EntryKind::Symlink => Diagnostic::error(CODE,
                    format!("`{name}` is a symlink, not a regular file"),
                )
                .hint("replace the link with the file itself: install follows no symlink"),
                EntryKind::Dir => Diagnostic::error(CODE,
                    format!("`{name}` is a directory, not a regular file"),
                ),
                EntryKind::Other => {
                    Diagnostic::error(CODE, format!("`{name}` is not a regular file"))
                }
                EntryKind::File if e.size > MAX_FILE_BYTES => Diagnostic::error(CODE,
                    format!(
                        "`{name}` is {} bytes; a pack file is at most {MAX_FILE_BYTES} bytes",
                        e.size
                    ),
                ),
                EntryKind::File => {
                    Diagnostic::error(CODE, format!("`{name}` could not be read"))
                        .hint("check the file's permissions")
                }
            },
        };
        out.push(d.in_file(name));
    }
}

#[cfg(test)]
mod tests {
    use crate::source::EntryKind;
    use crate::testing::{POLICY, SKILL, SURFACE, source};
    use pretty_assertions::assert_eq;

    #[test]
    fn a_wrongly_cased_name_is_pointed_at() {
        let mut src = source(SURFACE, POLICY, SKILL, &[]);
        src.files.retain(|(n, _)| n != "policy.json");
        for e in &mut src.entries {
            if e.rel == "policy.json" {
                e.rel = "Policy.json".into();
            }
        }
        let r = crate::check(&src);
        let d = &r.diagnostics[0];
        assert_eq!(
            (d.code.as_str(), d.file.as_deref()),
            ("missing_file", Some("policy.json"))
        );
        assert_eq!(
            d.hint.as_deref(),
            Some("found `Policy.json`: the names of the pack files are exact and case-sensitive")
        );
    }

    #[test]
    fn a_directory_under_a_pack_file_name_is_not_a_file() {
        let mut src = source(SURFACE, POLICY, SKILL, &[]);
        src.files.retain(|(n, _)| n != "HARNESS.md");
        for e in &mut src.entries {
            if e.rel == "HARNESS.md" {
                e.kind = EntryKind::Dir;
            }
        }
        let msgs: Vec<String> = crate::check(&src)
            .diagnostics
            .into_iter()
            .map(|d| d.message)
            .collect();
        assert_eq!(
            msgs,
            vec!["`HARNESS.md` is a directory, not a regular file".to_string()]
        );
    }
}
