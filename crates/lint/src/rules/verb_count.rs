//! `verb_count` (warning): fewer than 5 or more than 12 commands.
//!
//! ## What it does
//! Counts the commands the pack names — its manifest's `verbs`, and the stimulus triggers
//! that run a command of their own (a `cli`) — and warns outside 5 to 12. A trigger
//! without a command (`binding.degraded`, which the runtime emits) is not one.
//!
//! ## Why is this bad?
//! A pack names 5 to 12 commands: fewer usually means
//! the capability is split too thin, more means a whole binary was wrapped. A capability
//! scales by adding packs, never by growing one, and the skill must fit one screen. A
//! trigger's command is one of the pack's commands: the gold `mail` pack names
//! four verbs and a `new_item` watch.
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
    let verbs = m.verbs.len();
    let triggers = m.stimulus_triggers.iter().filter(|t| t.cli.is_some()).count();
    let n = verbs + triggers;
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
                if triggers == 0 {
                    format!(
                        "the pack has {n} verb{}; 5 to 12 are expected",
                        if n == 1 { "" } else { "s" }
                    )
                } else {
                    format!(
                        "the pack names {n} commands ({verbs} verbs, {triggers} trigger commands); 5 to 12 are expected"
                    )
                },
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

    /// A trigger's command is one of the pack's commands; a trigger without one is not.
    #[test]
    fn trigger_commands_count() {
        let four = edit(
            SURFACE,
            ",\n    \"status\": { \"description\": \"Service status.\", \"cli\": [\"sample\", \"status\"] }",
            "",
        );
        let p = edit(
            POLICY,
            ",\n    \"status\": { \"operation\": \"read\",  \"privacy\": { \"land\": \"personal\" } }",
            "",
        );
        assert_eq!(
            found(&lint(&four, &p, SKILL)),
            vec![("verb_count", Some("surface.json"), 8)]
        );
        let with = |cli: &str| {
            edit(
                &four,
                "\n  }\n}",
                &format!("\n  }},\n  \"stimulusTriggers\": [{{ \"ref\": \"changed\"{cli} }}]\n}}"),
            )
        };
        let p = edit(
            &p,
            "\"stimuli\": {}",
            "\"stimuli\": { \"changed\": { \"operation\": \"read\", \"privacy\": { \"land\": \"personal\" } } }",
        );
        assert_eq!(
            found(&lint(&with(", \"cli\": [\"sample\", \"watch\"]"), &p, SKILL)),
            vec![]
        );
        assert_eq!(
            found(&lint(&with(""), &p, SKILL)),
            vec![("verb_count", Some("surface.json"), 8)]
        );
    }
}
