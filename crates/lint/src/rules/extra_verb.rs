//! `extra_verb` (error): a policy verb entry the manifest does not declare.
//!
//! ## What it does
//! Reports every key of the policy's `verbs` that is not a `verb_key` of the manifest.
//!
//! ## Why is this bad?
//! An entry for a verb that does not exist is usually a rename that reached one file but
//! not the other: the renamed verb then has no policy at all, or the policy states rules
//! for a command nobody can see.
//!
//! ## Example
//! `policy.json` has `mail.remove`; the manifest renamed it to `mail.delete`.

use crate::context::{Ctx, in_policy, tick};
use crate::diagnostic::Diagnostic;

/// The rule's code.
pub(crate) const CODE: hcp_model::Code = hcp_model::Code::ExtraVerb;

pub(crate) fn run(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let (Some((m, _)), Some((p, text))) = (cx.manifest(), cx.policy()) else {
        return;
    };
    for key in p.verbs.keys() {
        if !m.verbs.contains_key(key) {
            out.push(
                in_policy(
                    Diagnostic::error(CODE,
                        format!("policy entry {} is not a verb of the manifest", tick(key)),
                    ),
                    text,
                    &["verbs", key],
                )
                .hint("remove the entry, or declare the verb in `surface.json` (docs/packs.md)"),
            );
        }
    }
}
