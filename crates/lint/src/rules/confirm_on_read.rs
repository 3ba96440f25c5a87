//! `confirm_on_read` (error): `confirm` on an entry that is not a write.
//!
//! ## What it does
//! Reports a `confirm` field, `true` or `false`, on a policy entry (verb or stimulus)
//! whose `operation` is `read` (confirm MAY be set only on writes).
//!
//! ## Why is this bad?
//! A read that "needs confirmation" says the author believes it has an effect worth
//! stopping: then it is a write, and it should need `verb.exec.write`. Left as a read, any
//! principal with read grants could run it once confirmed.
//!
//! ## Example
//! ```json
//! "ledger.balance": { "operation": "read", "privacy": { "land": "personal" }, "confirm": true }
//! ```

use crate::context::{Ctx, in_policy, tick};
use crate::diagnostic::Diagnostic;
use hcp_model::Operation;

/// The rule's code.
pub(crate) const CODE: hcp_model::Code = hcp_model::Code::ConfirmOnRead;

pub(crate) fn run(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let Some((p, text)) = cx.policy() else {
        return;
    };
    for (section, map) in [("verbs", &p.verbs), ("stimuli", &p.stimuli)] {
        for (key, entry) in map {
            if entry.operation == Operation::Read && entry.confirm.is_some() {
                out.push(
                    in_policy(
                        Diagnostic::error(CODE,
                            format!("{} is a `read`; `confirm` may be set only on writes", tick(key)),
                        ),
                        text,
                        &[section, key, "confirm"],
                    )
                    .hint("remove `confirm`, or make the entry a `write` if it changes state (docs/packs.md)"),
                );
            }
        }
    }
}
