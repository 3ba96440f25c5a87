//! `bad_placeholder` (error): a malformed `{{placeholder}}` in a command template.
//!
//! ## What it does
//! Parses every element of every verb's and trigger's `cli` and of `wrap.argv_template`
//! by the rules of RUNTIME §1.2 and reports: unbalanced braces, a name outside
//! `^[a-z_][a-z0-9_]*$`, a placeholder inside a larger string other than the one partial
//! form `--flag={{name}}`, two placeholders in one element, an unknown session value
//! (`{{@home}}`), and a placeholder as the program or CLI name (`cli[0]`).
//!
//! ## Why is this bad?
//! Arguments are substituted as whole argv elements and never re-parsed, which is what
//! keeps a value with spaces, quotes or `$()` from becoming code. A template like
//! `"--name {{name}}"` or `"{{a}}{{b}}"` would need splitting or joining, which hcp refuses
//! to do; a placeholder as the program would let a caller choose what runs.
//!
//! ## Example
//! ```json
//! "cli": ["transit", "find", "--query {{query}}", "{{Limit}}"]
//! ```
//! Write `"--query={{query}}"` (or `"--query", "{{query}}"`) and `"{{limit}}"`.

use crate::context::{Ctx, in_manifest_at, written};
use crate::diagnostic::Diagnostic;
use hcp_model::template::{TemplateError, parse_element};

/// The rule's code.
pub(crate) const CODE: hcp_model::Code = hcp_model::Code::BadPlaceholder;

pub(crate) fn run(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let Some((m, text)) = cx.manifest() else {
        return;
    };
    for w in written(m) {
        if w.has_program
            && let Some(first) = w.elements.first()
            && (first.contains("{{") || first.contains("}}"))
        {
            out.push(
                in_manifest_at(
                    Diagnostic::error(CODE,
                        format!("{}: `cli[0]` may not be a placeholder", w.owner),
                    ),
                    text,
                    &w.element_path(0),
                )
                .hint("the program (or CLI name) is fixed by the pack, never chosen by a caller"),
            );
        }
        for (i, el) in w.template() {
            if let Err(TemplateError::BadPlaceholder(why)) = parse_element(el) {
                out.push(
                    in_manifest_at(
                        Diagnostic::error(CODE, format!("{}: {why}", w.owner)),
                        text,
                        &w.element_path(i),
                    )
                    .hint("a placeholder is a whole element `{{name}}` or `{{name?}}`, or `--flag={{name}}` (RUNTIME §1.2)"),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::{POLICY, SKILL, SURFACE, edit, found, lint};
    use pretty_assertions::assert_eq;

    #[test]
    fn every_bad_element_is_reported_with_its_place() {
        let s = edit(
            SURFACE,
            "[\"sample\", \"status\"]",
            "[\"sample\", \"status\", \"a{{x}}\", \"{{@home}}\", \"{{ok}}\"]",
        );
        assert_eq!(
            found(&lint(&s, POLICY, SKILL)),
            vec![
                ("bad_placeholder", Some("surface.json"), 13),
                ("bad_placeholder", Some("surface.json"), 13)
            ]
        );
        let columns: Vec<usize> = lint(&s, POLICY, SKILL).iter().map(|d| d.column).collect();
        assert!(columns[0] < columns[1], "{columns:?}");
    }

    #[test]
    fn argv_template_and_the_program_are_checked() {
        let s = edit(
            SURFACE,
            "\"wrap\": { \"bin\": \"hcp-example-sample\" }",
            "\"wrap\": { \"bin\": \"hcp-example-sample\", \"argv_template\": [\"{{verb?}}\"] }",
        );
        assert_eq!(
            found(&lint(&s, POLICY, SKILL)),
            vec![("bad_placeholder", Some("surface.json"), 7)]
        );
        let s = edit(SURFACE, "\"cliBin\": \"sample\"", "\"cliBin\": \"{{bin}}\"");
        let s = s.replace("[\"sample\", ", "[\"{{bin}}\", ");
        let codes: Vec<&str> = lint(&s, POLICY, SKILL).iter().map(|d| d.code.as_str()).collect();
        assert_eq!(codes, vec!["bad_placeholder"; 5]);
    }
}
