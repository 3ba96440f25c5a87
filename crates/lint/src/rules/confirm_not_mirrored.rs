//! `confirm_not_mirrored` (warning): a confirmed write whose command has no `--confirm`
//! or `--apply` flag.
//!
//! ## What it does
//! For each policy verb with `"confirm": true`, looks at the command the verb runs (its
//! `cli`, else `wrap.argv_template`) and warns when no element is `--confirm` or `--apply`
//! (or `--confirm=…`, `--apply=…`).
//!
//! ## Why is this bad?
//! A pack SHOULD mirror `confirm` on the CLI face (seeds §4.5.4): the runtime's gate
//! stops the call until the caller says `--confirm`, and a CLI that also asks for the flag
//! keeps the same guarantee when someone runs it by hand, outside the runtime.
//!
//! ## Example
//! ```json
//! "post": { "description": "Post an entry.", "cli": ["ledger", "post", "{{amount}}"] }
//! ```
//! with `"post": { "operation": "write", …, "confirm": true }`. Write
//! `"cli": ["ledger", "post", "{{amount}}", "--confirm"]`.

use crate::context::{Ctx, in_policy, tick};
use crate::diagnostic::Diagnostic;

fn mirrors(el: &str) -> bool {
    ["--confirm", "--apply"]
        .iter()
        .any(|f| el == *f || el.strip_prefix(f).is_some_and(|r| r.starts_with('=')))
}

pub(crate) fn run(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let (Some((m, _)), Some((p, text))) = (cx.manifest(), cx.policy()) else {
        return;
    };
    for (key, entry) in &p.verbs {
        // On a read, `confirm` is already the error `confirm_on_read`.
        if !entry.needs_confirm() || entry.operation != hcp_model::Operation::Write {
            continue;
        }
        let Some(spec) = m.verbs.get(key) else {
            continue;
        };
        let elements: &[String] = match (&spec.cli, m.wrap.as_ref().and_then(|w| w.argv_template.as_ref())) {
            (Some(cli), _) => cli,
            (None, Some(t)) => t,
            (None, None) => &[],
        };
        if !elements.iter().any(|e| mirrors(e)) {
            out.push(
                in_policy(
                    Diagnostic::warning(
                        "confirm_not_mirrored",
                        format!("verb {} needs confirmation, but its command has no `--confirm` or `--apply`", tick(key)),
                    ),
                    text,
                    &["verbs", key, "confirm"],
                )
                .hint("add the CLI's own `--confirm` (or `--apply`) flag to the verb's `cli` (seeds §4.5.4)"),
            );
        }
    }
}
