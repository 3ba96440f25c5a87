//! `skill_missing_section` (warning): `HARNESS.md` lacks a title, a hot-path table or an
//! anti-patterns section.
//!
//! ## What it does
//! Looks for a `# ` title line, a Markdown table (a header row and a `|---|` separator
//! row: the hot path), and a heading that mentions anti-patterns. Warns once for each
//! that is missing.
//!
//! ## Why is this bad?
//! The skill teaches an agent the pack in one screen. Without the table the agent guesses command forms;
//! without anti-patterns it repeats the mistakes the author already knows about.
//!
//! ## Example
//! ```md
//! # HCP — Transit
//!
//! ## Hot path
//!
//! | Command | CLI |
//! |---------|-----|
//! | `find`  | `transit find "Central" --json` |
//!
//! ## Anti-patterns
//!
//! - Polling `plan` in a tight loop
//! ```

use crate::context::Ctx;
use crate::diagnostic::Diagnostic;

/// The rule's code.
pub(crate) const CODE: hcp_model::Code = hcp_model::Code::SkillMissingSection;

fn is_table_separator(line: &str) -> bool {
    let t = line.trim();
    t.contains('|')
        && t.contains('-')
        && t.chars().all(|c| matches!(c, '|' | '-' | ':' | ' ' | '\t'))
}

fn is_anti_patterns_heading(line: &str) -> bool {
    let t = line.trim_start();
    if !t.starts_with('#') {
        return false;
    }
    let lower = t.to_lowercase();
    ["anti-pattern", "antipattern", "anti pattern"]
        .iter()
        .any(|w| lower.contains(w))
}

pub(crate) fn run(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let Some(skill) = &cx.skill else {
        return;
    };
    let lines: Vec<&str> = skill.lines().collect();
    let mut missing = Vec::new();
    if !lines.iter().any(|l| l.starts_with("# ")) {
        missing.push((
            "`HARNESS.md` has no `# ` title",
            "start with a title such as `# HCP — Transit`, then a one-paragraph lead",
        ));
    }
    if !lines.iter().any(|l| is_table_separator(l)) {
        missing.push((
            "`HARNESS.md` has no hot-path table",
            "add a `## Hot path` table of the common commands and their CLI forms",
        ));
    }
    if !lines.iter().any(|l| is_anti_patterns_heading(l)) {
        missing.push((
            "`HARNESS.md` has no anti-patterns section",
            "add a `## Anti-patterns` list of what not to do",
        ));
    }
    for (message, hint) in missing {
        out.push(
            Diagnostic::warning(CODE, message)
                .in_file(hcp_model::SKILL_FILE)
                .hint(hint),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::{is_anti_patterns_heading, is_table_separator};
    use crate::testing::{POLICY, SKILL, SURFACE, edit, lint};
    use pretty_assertions::assert_eq;

    #[test]
    fn sections_are_recognised_in_their_usual_spellings() {
        for sep in ["|---|---|", "| :-- | --: |", "  |------|", "--- | ---"] {
            assert!(is_table_separator(sep), "{sep}");
        }
        assert!(!is_table_separator("| a | b |"));
        assert!(!is_table_separator("---"));
        for h in [
            "## Anti-patterns",
            "### Antipatterns",
            "## Anti patterns to avoid",
        ] {
            assert!(is_anti_patterns_heading(h), "{h}");
        }
        assert!(!is_anti_patterns_heading("- anti-pattern: polling"));
    }

    #[test]
    fn each_missing_section_is_one_warning() {
        let s = edit(SKILL, "# HCP — Sample\n", "HCP — Sample\n");
        let s = edit(&s, "## Anti-patterns", "## Do not");
        let msgs: Vec<String> = lint(SURFACE, POLICY, &s)
            .into_iter()
            .map(|d| format!("{}: {}", d.code, d.message))
            .collect();
        assert_eq!(
            msgs,
            vec![
                "skill_missing_section: `HARNESS.md` has no `# ` title".to_string(),
                "skill_missing_section: `HARNESS.md` has no anti-patterns section".to_string(),
            ]
        );
    }
}
