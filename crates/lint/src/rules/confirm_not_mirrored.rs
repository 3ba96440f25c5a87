//! `confirm_not_mirrored` (warning): a confirmed write whose command has no `--confirm`
//! or `--apply` flag, although the program it runs takes one.
//!
//! ## What it does
//! For each policy verb with `"confirm": true`, looks at the command the verb runs (its
//! `cli`, else `wrap.argv_template`) and warns when no element is `--confirm` or `--apply`
//! (or `--confirm=…`, `--apply=…`) while another verb of the pack passes such a flag to
//! the same program. Lint cannot know every CLI's flags: the pack's own commands are what
//! shows that the program takes one. A program no verb passes such a flag to (`cp`, `mv`,
//! most CLIs) is not asked for a flag it lacks; the runtime's confirm gate holds the call
//! either way. A `kind: openapi` verb runs no command, so it is not checked.
//!
//! ## Why is this bad?
//! A pack SHOULD mirror `confirm` on the CLI face: the runtime's gate
//! stops the call until the caller says `--confirm`, and a CLI that also asks for the flag
//! keeps the same guarantee when someone runs it by hand, outside the runtime. A pack that
//! passes the flag to one confirmed write of a program and not to another has most
//! likely forgotten it.
//!
//! ## Example
//! ```json
//! "post":   { "description": "Post an entry.",   "cli": ["ledger", "post", "--confirm", "{{amount}}"] },
//! "delete": { "description": "Delete an entry.", "cli": ["ledger", "delete", "{{id}}"] }
//! ```
//! with both `"confirm": true` in `policy.json`. Write
//! `"cli": ["ledger", "delete", "--confirm", "{{id}}"]`.

use crate::context::{Ctx, in_policy, tick};
use crate::diagnostic::Diagnostic;

/// The rule's code.
pub(crate) const CODE: hcp_model::Code = hcp_model::Code::ConfirmNotMirrored;

fn mirrors(el: &str) -> bool {
    ["--confirm", "--apply"]
        .iter()
        .any(|f| el == *f || el.strip_prefix(f).is_some_and(|r| r.starts_with('=')))
}

/// The program a verb's command runs, as lint knows it: `cli[0]` of a `composite` verb;
/// the pack's one bin for every other kind (`wrap`: every verb runs `wrap.bin`).
fn program<'a>(m: &'a hcp_model::Manifest, spec: &'a hcp_model::VerbSpec) -> &'a str {
    match m.kind {
        hcp_model::Kind::Composite => spec.cli.as_ref().and_then(|c| c.first()).map_or("", |s| s.as_str()),
        _ => "",
    }
}

pub(crate) fn run(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let (Some((m, _)), Some((p, text))) = (cx.manifest(), cx.policy()) else {
        return;
    };
    // An HTTP request has no CLI flag to mirror the confirm gate with.
    if m.kind == hcp_model::Kind::Openapi {
        return;
    }
    let template = m.wrap.as_ref().and_then(|w| w.argv_template.as_ref());
    let elements = |spec: &hcp_model::VerbSpec| -> Vec<String> {
        match (&spec.cli, template) {
            (Some(cli), _) => cli.clone(),
            (None, Some(t)) => t.clone(),
            (None, None) => Vec::new(),
        }
    };
    // The programs some verb of the pack passes `--confirm` or `--apply` to: those are
    // known to take the flag.
    let takes_flag: std::collections::BTreeSet<&str> = m
        .verbs
        .iter()
        .map(|(_, spec)| spec)
        .filter(|spec| elements(spec).iter().any(|e| mirrors(e)))
        .map(|spec| program(m, spec))
        .collect();
    for (key, entry) in &p.verbs {
        // On a read, `confirm` is already the error `confirm_on_read`.
        if !entry.needs_confirm() || entry.operation != hcp_model::Operation::Write {
            continue;
        }
        let Some(spec) = m.verbs.get(key) else {
            continue;
        };
        let prog = program(m, spec);
        if !takes_flag.contains(prog) || elements(spec).iter().any(|e| mirrors(e)) {
            continue;
        }
        out.push(
            in_policy(
                Diagnostic::warning(CODE,
                    format!("verb {} needs confirmation, but its command has no `--confirm` or `--apply`, which another verb passes to the same program", tick(key)),
                ),
                text,
                &["verbs", key, "confirm"],
            )
            .hint("add the CLI's own `--confirm` (or `--apply`) flag to the verb's `cli`, as the pack's other confirmed commands do (docs/packs.md)"),
        );
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

    /// The valid pack with `add` confirm-gated too, its command passing `--confirm`.
    fn both_confirmed() -> (String, String) {
        let s = edit(
            SURFACE,
            "\"cli\": [\"sample\", \"add\", \"--\", \"{{title}}\"]",
            "\"cli\": [\"sample\", \"add\", \"--confirm\", \"--\", \"{{title}}\"]",
        );
        let p = edit(
            POLICY,
            "\"add\":    { \"operation\": \"write\", \"privacy\": { \"land\": \"personal\" } }",
            "\"add\":    { \"operation\": \"write\", \"privacy\": { \"land\": \"personal\" }, \"confirm\": true }",
        );
        (s, p)
    }

    #[test]
    fn a_verb_without_cli_is_judged_by_argv_template() {
        let (s, p) = both_confirmed();
        let s = edit(
            &s,
            "\"remove\": { \"description\": \"Remove an item.\", \"cli\": [\"sample\", \"remove\", \"--confirm\", \"--\", \"{{id}}\"] }",
            "\"remove\": { \"description\": \"Remove an item.\" }",
        );
        assert_eq!(
            found(&lint(&s, &p, SKILL)),
            vec![("confirm_not_mirrored", Some("policy.json"), 8)]
        );
        let s = edit(
            &s,
            "\"wrap\": { \"bin\": \"hcp-example-sample\" }",
            "\"wrap\": { \"bin\": \"hcp-example-sample\", \"argv_template\": [\"{{verb}}\", \"--apply\"] }",
        );
        assert_eq!(found(&lint(&s, &p, SKILL)), vec![]);
    }

    /// `cp` takes no `--confirm`: a pack whose commands never pass one is not asked for it.
    #[test]
    fn a_program_no_verb_passes_the_flag_to_is_not_asked_for_it() {
        let s = edit(
            SURFACE,
            "\"cli\": [\"sample\", \"remove\", \"--confirm\", \"--\", \"{{id}}\"]",
            "\"cli\": [\"sample\", \"remove\", \"--\", \"{{id}}\"]",
        );
        assert_eq!(found(&lint(&s, POLICY, SKILL)), vec![]);
    }

    /// In a composite pack each verb's `cli[0]` is its own program: a flag one program
    /// takes says nothing of another.
    #[test]
    fn a_composite_pack_is_judged_per_program() {
        let (s, p) = both_confirmed();
        let s = edit(&s, "\"kind\": \"wrap\"", "\"kind\": \"composite\"");
        let s = edit(&s, "  \"cliBin\": \"sample\",\n", "");
        let s = edit(
            &s,
            "\"cli\": [\"sample\", \"remove\", \"--confirm\", \"--\", \"{{id}}\"]",
            "\"cli\": [\"cp\", \"--\", \"{{id}}\", \"/tmp/x\"]",
        );
        assert_eq!(
            found(&lint(&s, &p, SKILL))
                .into_iter()
                .filter(|f| f.0 == "confirm_not_mirrored")
                .collect::<Vec<_>>(),
            vec![]
        );
    }
}
