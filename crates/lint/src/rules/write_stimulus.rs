//! `write_stimulus` (error): a stimulus entry whose operation is not `read`.
//!
//! ## What it does
//! Reports every entry of the policy's `stimuli` whose `operation` is `write`.
//!
//! ## Why is this bad?
//! Sense cannot write: a trigger relays events from upstream and is gated by
//! `sense.enable` alone. A "write" trigger would be a side effect that no write grant and
//! no confirm gate ever sees.
//!
//! ## Example
//! ```json
//! "stimuli": { "new_item": { "operation": "write", "privacy": { "land": "personal" } } }
//! ```

use crate::context::{Ctx, in_policy, tick};
use crate::diagnostic::Diagnostic;
use hcp_model::Operation;

/// The rule's code.
pub(crate) const CODE: hcp_model::Code = hcp_model::Code::WriteStimulus;

pub(crate) fn run(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let Some((p, text)) = cx.policy() else {
        return;
    };
    for (key, entry) in &p.stimuli {
        if entry.operation != Operation::Read {
            out.push(
                in_policy(
                    Diagnostic::error(CODE,
                        format!(
                            "stimulus {} is `{}`; a trigger's operation must be `read`",
                            tick(key),
                            entry.operation
                        ),
                    ),
                    text,
                    &["stimuli", key, "operation"],
                )
                .hint("sense cannot write (docs/packs.md); make the effect a write verb"),
            );
        }
    }
}
