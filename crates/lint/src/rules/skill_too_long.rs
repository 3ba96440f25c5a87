//! `skill_too_long` (warning): `HARNESS.md` is longer than one screen (60 lines).
//!
//! ## What it does
//! Counts the lines of `HARNESS.md` and warns past 60, pointing at line 61.
//!
//! ## Why is this bad?
//! The skill is one screen of teaching: a lead, a hot-path table,
//! examples, anti-patterns. Every line is read into the agent's context on each use;
//! reference material belongs in the CLI's own `--help`.
//!
//! ## Example
//! A `HARNESS.md` that pastes the CLI's whole manual page.

use crate::context::Ctx;
use crate::diagnostic::Diagnostic;

/// The rule's code.
pub(crate) const CODE: hcp_model::Code = hcp_model::Code::SkillTooLong;

/// The most lines a skill should have.
pub const MAX_SKILL_LINES: usize = 60;

pub(crate) fn run(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let Some(skill) = &cx.skill else {
        return;
    };
    let n = skill.lines().count();
    if n > MAX_SKILL_LINES {
        out.push(
            Diagnostic::warning(CODE,
                format!("`HARNESS.md` has {n} lines; one screen is {MAX_SKILL_LINES}"),
            )
            .in_file(hcp_model::SKILL_FILE)
            .at(MAX_SKILL_LINES + 1, 1)
            .hint("keep the lead, the hot-path table and the anti-patterns; leave reference material to the CLI's `--help`"),
        );
    }
}
