//! `verb_count` (warning): fewer than 5 or more than 12 verbs.
//!
//! ## What it does
//! Counts the manifest's `verbs` and warns outside 5 to 12.
//!
//! ## Why is this bad?
//! A pack names 5 to 12 commands (Pack concept, "What stays out"): fewer usually means
//! the capability is split too thin, more means a whole binary was wrapped. A capability
//! scales by adding packs, never by growing one, and the skill must fit one screen.
//!
//! ## Example
//! A `git` pack with 40 verbs: split it into `git-history`, `git-branch`, …

use crate::context::{Ctx, in_manifest};
use crate::diagnostic::Diagnostic;

/// The rule's code.
pub(crate) const CODE: hcp_model::Code = hcp_model::Code::VerbCount;

/// The fewest verbs a pack should have.
pub const MIN_VERBS: usize = 5;
/// The most verbs a pack should have.
pub const MAX_VERBS: usize = 12;

pub(crate) fn run(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let Some((m, text)) = cx.manifest() else {
        return;
    };
    let n = m.verbs.len();
    if (MIN_VERBS..=MAX_VERBS).contains(&n) {
        return;
    }
    let hint = if n < MIN_VERBS {
        "a pack names 5 to 12 commands; fold a thin pack into a related one, or add the commands its users need"
    } else {
        "a pack names 5 to 12 commands; split the capability into several packs"
    };
    out.push(
        in_manifest(
            Diagnostic::warning(CODE,
                format!(
                    "the pack has {n} verb{}; 5 to 12 are expected",
                    if n == 1 { "" } else { "s" }
                ),
            ),
            text,
            &["verbs"],
        )
        .hint(hint),
    );
}

#[cfg(test)]
mod tests {
    use crate::testing::{POLICY, SKILL, SURFACE, edit, found, lint};
    use pretty_assertions::assert_eq;

    #[test]
    fn more_than_twelve_verbs_warn() {
        let mut verbs = String::new();
        let mut entries = String::new();
        for i in 0..8 {
            verbs.push_str(&format!(
                "\"v{i}\": {{ \"description\": \"V.\", \"cli\": [\"sample\", \"v{i}\"] }},\n    "
            ));
            entries.push_str(&format!(
                "\"v{i}\": {{ \"operation\": \"read\", \"privacy\": {{ \"land\": \"local\" }} }},\n    "
            ));
        }
        let s = edit(SURFACE, "\"list\":   {", &format!("{verbs}\"list\":   {{"));
        let p = edit(POLICY, "\"list\":   {", &format!("{entries}\"list\":   {{"));
        assert_eq!(
            found(&lint(&s, &p, SKILL)),
            vec![("verb_count", Some("surface.json"), 8)]
        );
    }
}
