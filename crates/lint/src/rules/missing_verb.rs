//! `missing_verb` (error): a manifest verb without a policy entry.
//!
//! ## What it does
//! Reports every `verb_key` of the manifest's `verbs` that is not a key of the policy's
//! `verbs`.
//!
//! ## Why is this bad?
//! Without a policy entry the runtime does not know whether the verb reads or writes, on
//! which land, or whether it needs confirmation. Failing closed means refusing the pack.
//!
//! ## Example
//! The manifest declares `mail.send`; `policy.json` has only `mail.list`.

use crate::context::{Ctx, in_manifest, tick};
use crate::diagnostic::Diagnostic;

/// The rule's code.
pub(crate) const CODE: hcp_model::Code = hcp_model::Code::MissingVerb;

pub(crate) fn run(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let (Some((m, text)), Some((p, _))) = (cx.manifest(), cx.policy()) else {
        return;
    };
    for key in m.verbs.keys() {
        if !p.verbs.contains_key(key) {
            out.push(
                in_manifest(
                    Diagnostic::error(CODE,
                        format!("verb {} has no entry in `policy.json` `verbs`", tick(key)),
                    ),
                    text,
                    &["verbs", key],
                )
                .hint("add an entry with its `operation` and `privacy.land` (docs/packs.md)"),
            );
        }
    }
}
