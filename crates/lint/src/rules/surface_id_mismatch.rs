//! `surface_id_mismatch` (error): the policy's `surface_id` differs from the manifest `id`.
//!
//! ## What it does
//! Compares `policy.json`'s `surface_id` with `surface.json`'s `id`, exactly.
//!
//! ## Why is this bad?
//! A policy copied from another pack and not updated would govern the wrong pack's verbs:
//! the two files must say they belong together.
//!
//! ## Example
//! ```json
//! { "surface_id": "mail", "version": 1, "verbs": {} }
//! ```
//! in a pack whose manifest says `"id": "ledger"`.

use crate::context::{Ctx, in_policy, tick};
use crate::diagnostic::Diagnostic;

/// The rule's code.
pub(crate) const CODE: hcp_model::Code = hcp_model::Code::SurfaceIdMismatch;

pub(crate) fn run(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let (Some((m, _)), Some((p, text))) = (cx.manifest(), cx.policy()) else {
        return;
    };
    if p.surface_id != m.id {
        out.push(
            in_policy(
                Diagnostic::error(CODE,
                    format!(
                        "`surface_id` is {}, but the manifest `id` is {}",
                        tick(&p.surface_id),
                        tick(&m.id)
                    ),
                ),
                text,
                &["surface_id"],
            )
            .hint(format!(
                "set `\"surface_id\": \"{}\"` (docs/packs.md)",
                m.id.escape_default()
            )),
        );
    }
}
