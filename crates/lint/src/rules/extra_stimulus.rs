//! `extra_stimulus` (error): a policy stimulus entry no trigger declares.
//!
//! ## What it does
//! Reports every key of the policy's `stimuli` that is not the `ref` of a manifest
//! `stimulusTriggers` entry.
//!
//! ## Why is this bad?
//! Like `extra_verb`: a policy entry with nothing behind it is a rename or a copy that
//! went half-way.
//!
//! ## Example
//! ```json
//! "stimuli": { "new_item": { "operation": "read", "privacy": { "land": "personal" } } }
//! ```
//! in a pack without `stimulusTriggers`.

use crate::context::{Ctx, in_policy, tick};
use crate::diagnostic::Diagnostic;

/// The rule's code.
pub(crate) const CODE: hcp_model::Code = hcp_model::Code::ExtraStimulus;

pub(crate) fn run(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let (Some((m, _)), Some((p, text))) = (cx.manifest(), cx.policy()) else {
        return;
    };
    for key in p.stimuli.keys() {
        if !m.stimulus_triggers.iter().any(|t| &t.reference == key) {
            out.push(
                in_policy(
                    Diagnostic::error(CODE,
                        format!(
                            "stimulus entry {} is not the `ref` of a manifest trigger",
                            tick(key)
                        ),
                    ),
                    text,
                    &["stimuli", key],
                )
                .hint(
                    "remove the entry, or declare the trigger in `stimulusTriggers` (docs/packs.md)",
                ),
            );
        }
    }
}
