//! `connect_not_write` (error): the connect verb is not a write.
//!
//! ## What it does
//! Finds the pack's connect verb (`binding.connect`, else a verb keyed `connect`, else
//! the first key ending in `.connect`) and reports it when its policy entry is a `read`.
//!
//! ## Why is this bad?
//! A command that establishes or refreshes a binding MUST be `write`: it
//! stores a credential, and it is gated by `pack.connect` on top of the write grant.
//!
//! ## Example
//! ```json
//! "mail.connect": { "operation": "read", "privacy": { "land": "personal" } }
//! ```

use crate::context::{Ctx, in_policy, tick};
use crate::diagnostic::Diagnostic;
use hcp_model::Operation;

/// The rule's code.
pub(crate) const CODE: hcp_model::Code = hcp_model::Code::ConnectNotWrite;

pub(crate) fn run(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let (Some((m, _)), Some((p, text))) = (cx.manifest(), cx.policy()) else {
        return;
    };
    let Some(key) = m.connect_verb() else {
        return;
    };
    let Some(entry) = p.verbs.get(key) else {
        return;
    };
    if entry.operation != Operation::Write {
        out.push(
            in_policy(
                Diagnostic::error(CODE,
                    format!(
                        "connect verb {} is a `{}`; it must be a `write`",
                        tick(key),
                        entry.operation
                    ),
                ),
                text,
                &["verbs", key, "operation"],
            )
            .hint("a command that establishes a binding changes state (docs/packs.md)"),
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::{POLICY, SKILL, SURFACE, edit, found, lint};
    use pretty_assertions::assert_eq;

    #[test]
    fn the_verb_named_by_binding_connect_must_be_a_write() {
        let s = edit(
            SURFACE,
            "\"mode\": \"public\"",
            "\"mode\": \"user\", \"connect\": \"status\"",
        );
        assert_eq!(
            found(&lint(&s, POLICY, SKILL)),
            vec![("connect_not_write", Some("policy.json"), 9)]
        );
        let s = edit(
            SURFACE,
            "\"mode\": \"public\"",
            "\"mode\": \"user\", \"connect\": \"add\"",
        );
        assert_eq!(found(&lint(&s, POLICY, SKILL)), vec![]);
    }
}
