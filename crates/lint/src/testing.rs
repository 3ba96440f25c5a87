//! Helpers for the rules' unit tests: the valid fixture pack in memory, changed by text
//! replacement, and linted without touching the disk.

use crate::source::{EntryKind, PackEntry, PackSource};
use crate::{Diagnostic, check};

pub(crate) const SURFACE: &str = include_str!("../tests/fixtures/valid/surface.json");
pub(crate) const POLICY: &str = include_str!("../tests/fixtures/valid/policy.json");
pub(crate) const SKILL: &str = include_str!("../tests/fixtures/valid/HARNESS.md");

/// `text` with `from` replaced by `to` once; panics when `from` is absent, so a test
/// cannot silently lint the unchanged pack.
pub(crate) fn edit(text: &str, from: &str, to: &str) -> String {
    assert!(text.contains(from), "`{from}` is not in the text");
    text.replacen(from, to, 1)
}

/// A pack source with the three files and the extra `entries`.
pub(crate) fn source(
    surface: &str,
    policy: &str,
    skill: &str,
    extra: &[(&str, EntryKind)],
) -> PackSource {
    let files = vec![
        ("surface.json".to_owned(), surface.as_bytes().to_vec()),
        ("policy.json".to_owned(), policy.as_bytes().to_vec()),
        ("HARNESS.md".to_owned(), skill.as_bytes().to_vec()),
    ];
    let mut entries: Vec<PackEntry> = files
        .iter()
        .map(|(n, b)| PackEntry {
            rel: n.clone(),
            kind: EntryKind::File,
            size: b.len() as u64,
        })
        .collect();
    for (rel, kind) in extra {
        entries.push(PackEntry {
            rel: (*rel).to_owned(),
            kind: *kind,
            size: 0,
        });
    }
    entries.sort_by(|a, b| a.rel.cmp(&b.rel));
    PackSource {
        dir: "p".into(),
        entries,
        files,
        truncated: false,
        document: None,
    }
}

/// The findings for the three texts.
pub(crate) fn lint(surface: &str, policy: &str, skill: &str) -> Vec<Diagnostic> {
    check(&source(surface, policy, skill, &[])).diagnostics
}

/// `(code, file, line)` of each finding.
pub(crate) fn found(ds: &[Diagnostic]) -> Vec<(&'static str, Option<&str>, usize)> {
    ds.iter()
        .map(|d| (d.code.as_str(), d.file.as_deref(), d.line))
        .collect()
}
