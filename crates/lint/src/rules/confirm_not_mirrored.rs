//! `confirm_not_mirrored` (warning): a confirmed write whose command has no `--confirm`
//! or `--apply` flag.
//!
//! ## What it does
//! For each policy verb with `"confirm": true`, looks at the command the verb runs (its
//! `cli`, else `wrap.argv_template`) and warns when no element is `--confirm` or `--apply`
//! (or `--confirm=…`, `--apply=…`). A `kind: openapi` verb runs no command, so it is not
//! checked.
//!
//! ## Why is this bad?
//! A pack SHOULD mirror `confirm` on the CLI face (seeds §4.5.4): the runtime's gate
//! stops the call until the caller says `--confirm`, and a CLI that also asks for the flag
//! keeps the same guarantee when someone runs it by hand, outside the runtime.
//!
//! ## Example
//! ```json
//! "post": { "description": "Post an entry.", "cli": ["ledger", "post", "{{amount}}"] }
//! ```
//! with `"post": { "operation": "write", …, "confirm": true }`. Write
//! `"cli": ["ledger", "post", "{{amount}}", "--confirm"]`.

use crate::context::{Ctx, in_policy, tick};
use crate::diagnostic::Diagnostic;

/// The rule's code.
pub(crate) const CODE: hcp_model::Code = hcp_model::Code::ConfirmNotMirrored;

fn mirrors(el: &str) -> bool {
    ["--confirm", "--apply"]
        .iter()
        .any(|f| el == *f || el.strip_prefix(f).is_some_and(|r| r.starts_with('=')))
}

pub(crate) fn run(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let (Some((m, _)), Some((p, text))) = (cx.manifest(), cx.policy()) else {
        return;
    };
    // An HTTP request has no CLI flag to mirror the confirm gate with.
    if m.kind == hcp_model::Kind::Openapi {
        return;
    }
    for (key, entry) in &p.verbs {
        // On a read, `confirm` is already the error `confirm_on_read`.
        if !entry.needs_confirm() || entry.operation != hcp_model::Operation::Write {
            continue;
        }
        let Some(spec) = m.verbs.get(key) else {
            continue;
        };
        let elements: &[String] = match (
            &spec.cli,
            m.wrap.as_ref().and_then(|w| w.argv_template.as_ref()),
        ) {
            (Some(cli), _) => cli,
            (None, Some(t)) => t,
            (None, None) => &[],
        };
        if !elements.iter().any(|e| mirrors(e)) {
            out.push(
                in_policy(
                    Diagnostic::warning(CODE,
                        format!("verb {} needs confirmation, but its command has no `--confirm` or `--apply`", tick(key)),
                    ),
                    text,
                    &["verbs", key, "confirm"],
                )
                .hint("add the CLI's own `--confirm` (or `--apply`) flag to the verb's `cli` (docs/packs.md)"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::mirrors;
    use crate::testing::{POLICY, SKILL, SURFACE, edit, found, lint};
    use pretty_assertions::assert_eq;

    #[test]
    fn flags_that_mirror() {
        for yes in ["--confirm", "--apply", "--apply=true", "--confirm={{c?}}"] {
            assert!(mirrors(yes), "{yes}");
        }
        for no in ["--confirmed", "confirm", "-y", "--yes"] {
            assert!(!mirrors(no), "{no}");
        }
    }

    #[test]
    fn a_verb_without_cli_is_judged_by_argv_template() {
        let s = edit(
            SURFACE,
            "\"remove\": { \"description\": \"Remove an item.\", \"cli\": [\"sample\", \"remove\", \"--confirm\", \"--\", \"{{id}}\"] }",
            "\"remove\": { \"description\": \"Remove an item.\" }",
        );
        assert_eq!(
            found(&lint(&s, POLICY, SKILL)),
            vec![("confirm_not_mirrored", Some("policy.json"), 8)]
        );
        let s = edit(
            &s,
            "\"wrap\": { \"bin\": \"hcp-example-sample\" }",
            "\"wrap\": { \"bin\": \"hcp-example-sample\", \"argv_template\": [\"{{verb}}\", \"--apply\"] }",
        );
        assert_eq!(found(&lint(&s, POLICY, SKILL)), vec![]);
    }
}
