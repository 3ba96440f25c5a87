//! `cli_bin_mismatch` (error): a verb's program cannot be determined, or `cli[0]` differs
//! from `cliBin`.
//!
//! ## What it does
//! For a `wrap` pack: checks that there is a `wrap` object, that every verb's and
//! trigger's `cli` is non-empty and starts with `cliBin`, and, when `cliBin` is absent,
//! that all of them start with the same name. For a `composite` pack: checks that every
//! verb has a non-empty `cli`, whose first element is the program it runs.
//!
//! ## Why is this bad?
//! `cliBin` is the CLI face the skill teaches (`transit find …`), while `wrap.bin` is what
//! actually runs. A verb whose `cli[0]` names another program documents one CLI and runs
//! another; a verb with no program cannot run at all.
//!
//! ## Example
//! ```json
//! "cliBin": "transit",
//! "verbs": { "find": { "description": "Resolve a place.", "cli": ["tram", "find", "{{query}}"] } }
//! ```

use crate::context::{Ctx, in_manifest, in_manifest_at, tick, written};
use crate::diagnostic::Diagnostic;
use hcp_model::Kind;

/// The rule's code.
pub(crate) const CODE: hcp_model::Code = hcp_model::Code::CliBinMismatch;

pub(crate) fn run(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let Some((m, text)) = cx.manifest() else {
        return;
    };
    let err = |msg: String| Diagnostic::error(CODE, msg);
    match m.kind {
        Kind::Openapi => return,
        Kind::Wrap if m.wrap.is_none() => out.push(
            in_manifest(
                err("a `wrap` pack has no `wrap` object".into()),
                text,
                &["kind"],
            )
            .hint("add `\"wrap\": { \"bin\": \"…\" }` naming the program every verb runs"),
        ),
        Kind::Composite => {
            for (key, v) in &m.verbs {
                if v.cli.is_none() {
                    out.push(
                        in_manifest(
                            err(format!(
                                "verb {} of a `composite` pack has no `cli`",
                                tick(key)
                            )),
                            text,
                            &["verbs", key],
                        )
                        .hint("a composite verb's `cli[0]` is the program it runs"),
                    );
                }
            }
        }
        Kind::Wrap => {}
    }
    let mut first_name: Option<&str> = None;
    for w in written(m).iter().filter(|w| w.has_program) {
        let Some(name) = w.elements.first() else {
            out.push(in_manifest_at(
                err(format!("{}: `cli` is empty", w.owner)),
                text,
                &w.path,
            ));
            continue;
        };
        if m.kind != Kind::Wrap {
            continue;
        }
        match (&m.cli_bin, first_name) {
            (Some(cb), _) if name != cb => out.push(
                in_manifest_at(
                    err(format!(
                        "{}: `cli[0]` is {}, but `cliBin` is {}",
                        w.owner,
                        tick(name),
                        tick(cb)
                    )),
                    text,
                    &w.element_path(0),
                )
                .hint("every `cli` of a `wrap` pack starts with `cliBin`; `wrap.bin` is what runs"),
            ),
            (None, Some(first)) if name != first => out.push(
                in_manifest_at(
                    err(format!(
                        "{}: `cli[0]` is {}, but an earlier verb's is {}",
                        w.owner,
                        tick(name),
                        tick(first)
                    )),
                    text,
                    &w.element_path(0),
                )
                .hint("a `wrap` pack has one CLI face; set `cliBin` and start every `cli` with it"),
            ),
            (None, None) => first_name = Some(name),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::{POLICY, SKILL, SURFACE, edit, found, lint};
    use pretty_assertions::assert_eq;

    #[test]
    fn without_cli_bin_every_cli_starts_with_the_same_name() {
        let s = edit(SURFACE, "  \"cliBin\": \"sample\",\n", "");
        assert_eq!(found(&lint(&s, POLICY, SKILL)), vec![]);
        let s = edit(&s, "[\"sample\", \"add\"", "[\"other\", \"add\"");
        assert_eq!(
            found(&lint(&s, POLICY, SKILL)),
            vec![("cli_bin_mismatch", Some("surface.json"), 10)]
        );
    }

    #[test]
    fn a_wrap_pack_needs_wrap_and_non_empty_cli() {
        let s = edit(
            SURFACE,
            "  \"wrap\": { \"bin\": \"hcp-example-sample\" },\n",
            "",
        );
        assert_eq!(
            found(&lint(&s, POLICY, SKILL)),
            vec![("cli_bin_mismatch", Some("surface.json"), 4)]
        );
        let s = edit(SURFACE, "[\"sample\", \"status\"]", "[]");
        assert_eq!(
            found(&lint(&s, POLICY, SKILL)),
            vec![("cli_bin_mismatch", Some("surface.json"), 13)]
        );
    }
}
