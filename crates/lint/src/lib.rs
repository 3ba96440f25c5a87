//! Pack checks of RUNTIME §2.
//!
//! This crate owns the lint rules and their diagnostics. [`read_pack`] takes a pack
//! directory into memory without following any symlink ([`PackSource`]); [`check`] is a
//! pure function from that source to a [`Report`]; [`render`] turns reports into the
//! concise text form (`path:line:col: level[code]: message`) or JSON. Install
//! (`hcp-store`) lints and then copies the very bytes it linted, so what was checked is
//! what gets installed.
//!
//! The rules live one per module under [`rules`], each documented with what it checks,
//! why it matters and an example; [`rules::RULES`] lists them in the order they run, and
//! `docs/rules.md` is generated from their documentation (`cargo xtask generate`).
//!
//! [`promote`] rewrites a `pass_through` pack into named verbs (`hcp pack promote`).
//!
//! It does not install, run or resolve anything.

#![deny(missing_docs)]

mod context;
pub mod diagnostic;
pub mod promote;
pub mod render;
pub mod rules;
pub mod source;
#[cfg(test)]
mod testing;

pub use diagnostic::{Diagnostic, Level, Report};
pub use rules::{RULES, Rule};
pub use source::{
    BadPackDir, EntryKind, PackEntry, PackSource, SpecDocument, bad_pack_dir, read_pack,
};

/// Runs every rule of [`RULES`] over `source` (RUNTIME §2) and returns the findings sorted
/// by file (the pack as a whole, then `surface.json`, `policy.json`, `HARNESS.md`, then
/// other entries by name), line and column; findings at one place keep rule order.
///
/// A JSON file that does not parse is reported once (`bad_json`, `duplicate_key`, …) and
/// the rules that need its content skip it. Pure: no I/O.
pub fn check(source: &PackSource) -> Report {
    let cx = context::Ctx::new(source);
    let mut report = Report::new(source.dir.clone());
    for rule in RULES {
        let mut found = Vec::new();
        rule.run(&cx, &mut found);
        for mut d in found {
            d.code = rule.code;
            d.level = rule.level;
            report.push(d);
        }
    }
    report.diagnostics.sort_by(|a, b| {
        sort_key(a.file.as_deref())
            .cmp(&sort_key(b.file.as_deref()))
            .then(a.line.cmp(&b.line))
            .then(a.column.cmp(&b.column))
    });
    report
}

fn sort_key(file: Option<&str>) -> (usize, &str) {
    match file {
        None => (0, ""),
        Some(f) => match hcp_model::PACK_FILES.iter().position(|p| *p == f) {
            Some(i) => (1 + i, ""),
            None => (4, f),
        },
    }
}
