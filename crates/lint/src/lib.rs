//! Pack checks of RUNTIME §2.
//!
//! This crate owns the lint rules and their diagnostics. [`read_pack`] takes a pack
//! directory into memory without following any symlink ([`PackSource`]); [`check`] is a
//! pure function from that source to a [`Report`]. Install (`hcp-store`) lints and then
//! copies the very bytes it linted, so what was checked is what gets installed.
//!
//! It does not install, run or resolve anything.

#![deny(missing_docs)]

pub mod diagnostic;
pub mod source;

pub use diagnostic::{Diagnostic, Level, Report};
pub use source::{EntryKind, PackEntry, PackSource, read_pack};

/// Runs every rule over `source` (RUNTIME §2).
pub fn check(source: &PackSource) -> Report {
    let mut report = Report::new(source.dir.clone());
    for name in hcp_model::PACK_FILES {
        if source.file(name).is_none() {
            report.push(
                Diagnostic::error("missing_file", format!("the pack has no `{name}`"))
                    .in_file(name),
            );
        }
    }
    report
}
