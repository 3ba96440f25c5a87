//! `missing_stimulus` (error): a stimulus trigger without a policy entry.
//!
//! ## What it does
//! Reports every `ref` of the manifest's `stimulusTriggers` that is not a key of the
//! policy's `stimuli`.
//!
//! ## Why is this bad?
//! Delivering a trigger's events is gated like a verb (`sense.enable`); without an
//! entry the runtime cannot say which land the events belong to.
//!
//! ## Example
//! ```json
//! "stimulusTriggers": [{ "ref": "new_item" }]
//! ```
//! with `"stimuli": {}` in `policy.json`.

use crate::context::{Ctx, in_manifest, tick};
use crate::diagnostic::Diagnostic;

/// The rule's code.
pub(crate) const CODE: hcp_model::Code = hcp_model::Code::MissingStimulus;

pub(crate) fn run(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let (Some((m, text)), Some((p, _))) = (cx.manifest(), cx.policy()) else {
        return;
    };
    for (i, t) in m.stimulus_triggers.iter().enumerate() {
        if !p.stimuli.contains_key(&t.reference) {
            let index = i.to_string();
            out.push(
                in_manifest(
                    Diagnostic::error(CODE,
                        format!(
                            "stimulus trigger {} has no entry in `policy.json` `stimuli`",
                            tick(&t.reference)
                        ),
                    ),
                    text,
                    &["stimulusTriggers", &index, "ref"],
                )
                .hint("add a `read` entry for it under `stimuli` (docs/packs.md)"),
            );
        }
    }
}
