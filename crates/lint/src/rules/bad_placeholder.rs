//! `bad_placeholder` (error): a malformed `{{placeholder}}` in a command template.
//!
//! ## What it does
//! Parses every element of every verb's and trigger's `cli` and of `wrap.argv_template`
//! by the rules of the argv template language (docs/packs.md, "Placeholders") and
//! reports: unbalanced braces, a name outside
//! `^[a-z_][a-z0-9_]*$`, a placeholder inside a larger string other than the one partial
//! form `--flag={{name}}`, two placeholders in one element, an unknown session value
//! (`{{@home}}`), a placeholder as the program or CLI name (`cli[0]`), and
//! `{{@workdir}}` in a verb or trigger of `personal` or `brain` land (its own `cli`, or the
//! `wrap.argv_template` it runs).
//!
//! ## Why is this bad?
//! Arguments are substituted as whole argv elements and never re-parsed, which is what
//! keeps a value with spaces, quotes or `$()` from becoming code. A template like
//! `"--name {{name}}"` or `"{{a}}{{b}}"` would need splitting or joining, which hcp refuses
//! to do; a placeholder as the program would let a caller choose what runs. A `personal` or
//! `brain` call has no working directory of the caller's (it starts in its tenant
//! home and `HCP_WORKDIR` is not set), so `{{@workdir}}` there names nothing the call may see.
//!
//! ## Example
//! ```json
//! "cli": ["transit", "find", "--query {{query}}", "{{Limit}}"]
//! ```
//! Write `"--query={{query}}"` (or `"--query", "{{query}}"`) and `"{{limit}}"`.

use crate::context::{Ctx, in_manifest_at, tick, written};
use crate::diagnostic::Diagnostic;
use hcp_model::template::{Element, SessionVar, TemplateError, parse_element};
use hcp_model::{Kind, Land};

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
                    .hint("a placeholder is a whole element `{{name}}` or `{{name?}}`, or `--flag={{name}}` (docs/packs.md)"),
                );
            }
        }
    }
    workdir_outside_local(cx, out);
}

/// One command array a verb or trigger runs, with its land.
struct Place<'m> {
    /// For messages: ``verb `find` ``.
    owner: String,
    land: Land,
    /// Its JSON path in `surface.json`.
    path: Vec<String>,
    elements: &'m [String],
    /// 1 when `elements[0]` is the program or CLI name.
    skip: usize,
}

/// `{{@workdir}}` in a verb or trigger whose land is not `local`.
fn workdir_outside_local(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let (Some((m, text)), Some((policy, _))) = (cx.manifest(), cx.policy()) else {
        return;
    };
    let template = m
        .wrap
        .as_ref()
        .filter(|_| m.kind == Kind::Wrap)
        .and_then(|w| w.argv_template.as_ref());
    let mut places: Vec<Place<'_>> = Vec::new();
    for (key, spec) in &m.verbs {
        let Some(entry) = policy.verbs.get(key) else {
            continue;
        };
        let owner = format!("verb {}", tick(key));
        match (&spec.cli, template) {
            (Some(cli), _) => places.push(Place {
                owner,
                land: entry.privacy.land,
                path: vec!["verbs".into(), key.clone(), "cli".into()],
                elements: cli,
                skip: 1,
            }),
            (None, Some(t)) => places.push(Place {
                owner,
                land: entry.privacy.land,
                path: vec!["wrap".into(), "argv_template".into()],
                elements: t,
                skip: 0,
            }),
            (None, None) => {}
        }
    }
    for (i, t) in m.stimulus_triggers.iter().enumerate() {
        let (Some(cli), Some(entry)) = (&t.cli, policy.stimuli.get(&t.reference)) else {
            continue;
        };
        places.push(Place {
            owner: format!("trigger {}", tick(&t.reference)),
            land: entry.privacy.land,
            path: vec!["stimulusTriggers".into(), i.to_string(), "cli".into()],
            elements: cli,
            skip: 1,
        });
    }
    for Place {
        owner,
        land,
        path,
        elements,
        skip,
    } in places
    {
        if land == Land::Local {
            continue;
        }
        for (i, el) in elements.iter().enumerate().skip(skip) {
            if !matches!(
                parse_element(el),
                Ok(Element::Session {
                    var: SessionVar::Workdir,
                    ..
                })
            ) {
                continue;
            }
            let mut at = path.clone();
            at.push(i.to_string());
            out.push(
                in_manifest_at(
                    Diagnostic::error(CODE,
                        format!(
                            "{owner}: `{{{{@workdir}}}}` in a `{}` verb, which has no working directory",
                            land.as_str()
                        ),
                    ),
                    text,
                    &at,
                )
                .hint("a `personal` or `brain` call starts in its tenant home; use `{{@workdir}}` in `local` land only (docs/packs.md)"),
            );
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

    #[test]
    fn workdir_only_in_local_land() {
        let s = edit(
            SURFACE,
            "[\"sample\", \"status\"]",
            "[\"sample\", \"status\", \"--dir={{@workdir}}\"]",
        );
        assert_eq!(
            found(&lint(&s, POLICY, SKILL)),
            vec![("bad_placeholder", Some("surface.json"), 13)]
        );
        let p = edit(
            POLICY,
            "\"status\": { \"operation\": \"read\",  \"privacy\": { \"land\": \"personal\" } }",
            "\"status\": { \"operation\": \"read\",  \"privacy\": { \"land\": \"local\" } }",
        );
        assert_eq!(found(&lint(&s, &p, SKILL)), vec![]);
        let brain = edit(
            POLICY,
            "\"status\": { \"operation\": \"read\",  \"privacy\": { \"land\": \"personal\" } }",
            "\"status\": { \"operation\": \"read\",  \"privacy\": { \"land\": \"brain\" } }",
        );
        assert_eq!(found(&lint(&s, &brain, SKILL)).len(), 1);
        // Through `wrap.argv_template`, for each verb without its own `cli`.
        let s = edit(
            SURFACE,
            "\"wrap\": { \"bin\": \"hcp-example-sample\" }",
            "\"wrap\": { \"bin\": \"hcp-example-sample\", \"argv_template\": [\"{{verb}}\", \"{{@workdir}}\"] }",
        );
        let s = edit(&s, ", \"cli\": [\"sample\", \"status\"]", "");
        assert_eq!(
            found(&lint(&s, POLICY, SKILL)),
            vec![("bad_placeholder", Some("surface.json"), 7)]
        );
    }
}
