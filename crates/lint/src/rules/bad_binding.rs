//! `bad_binding` (error): a binding that does not fit the plane or names no usable
//! connect verb.
//!
//! ## What it does
//! Reports a `mothership` binding on a `runtime` pack, a `control` pack whose binding is
//! not `mothership`, a `binding.connect` that names no verb, and
//! a `user` binding with neither a connect verb nor a `binding.family` to share a login;
//! a `binding.family` that is not written like a pack id
//! with.
//!
//! ## Why is this bad?
//! `mothership` credentials are for the control plane only, and a control pack is never
//! activated for a non-owner principal: mixing the two hands operator power
//! to end users. A `user` binding that cannot be connected makes every verb fail with
//! `binding_required`.
//!
//! ## Example
//! ```json
//! { "id": "fleet", "plane": "runtime", "binding": { "mode": "mothership" } }
//! ```
//! Set `"plane": "control"`, or use a `user` binding.

use crate::context::{Ctx, in_manifest, tick};
use crate::diagnostic::Diagnostic;
use hcp_model::{BindingMode, Plane};

/// The rule's code.
pub(crate) const CODE: hcp_model::Code = hcp_model::Code::BadBinding;

pub(crate) fn run(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let Some((m, text)) = cx.manifest() else {
        return;
    };
    let err = |msg: &str| Diagnostic::error(CODE, msg.to_owned());
    match (m.plane, m.binding.mode) {
        (Plane::Runtime, BindingMode::Mothership) => out.push(
            in_manifest(err("a `mothership` binding on a `runtime` pack"), text, &["binding", "mode"])
                .hint("`mothership` is control plane only: set `\"plane\": \"control\"`, or use `user`, `local` or `public`"),
        ),
        (Plane::Control, mode) if mode != BindingMode::Mothership => out.push(
            in_manifest(err("a `control` pack whose binding is not `mothership`"), text, &["binding", "mode"])
                .hint("a control-plane pack binds with `mothership`; an end-user face is a separate `runtime` pack"),
        ),
        _ => {}
    }
    if let Some(f) = &m.binding.family
        && let Err(why) = hcp_model::validate_pack_id(f)
    {
        // A family names the login shared by packs (and the credential's file): the same
        // shape as a pack id.
        out.push(
            in_manifest(
                err(&format!(
                    "`binding.family` {} is not a valid family name: {why}",
                    tick(f)
                )),
                text,
                &["binding", "family"],
            )
            .hint("a family is written like a pack id: lowercase letters, digits and single `-`"),
        );
    }
    if let Some(c) = &m.binding.connect {
        if !m.verbs.contains_key(c) {
            out.push(
                in_manifest(
                    err(&format!(
                        "`binding.connect` names {}, which is not a verb",
                        tick(c)
                    )),
                    text,
                    &["binding", "connect"],
                )
                .hint("name the verb that establishes the binding"),
            );
        }
    } else if m.binding.mode == BindingMode::User
        && m.connect_verb().is_none()
        && m.binding.family.is_none()
    {
        out.push(
            in_manifest(err("a `user` binding without a connect verb"), text, &["binding", "mode"])
                .hint("add a `connect` verb (a `write`), name it in `binding.connect`, or share a login through `binding.family`"),
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::{POLICY, SKILL, SURFACE, edit, found, lint};
    use pretty_assertions::assert_eq;

    #[test]
    fn a_user_binding_needs_a_connect_verb_or_a_family() {
        let user = edit(SURFACE, "\"mode\": \"public\"", "\"mode\": \"user\"");
        assert_eq!(
            found(&lint(&user, POLICY, SKILL)),
            vec![("bad_binding", Some("surface.json"), 6)]
        );
        let family = edit(
            SURFACE,
            "\"mode\": \"public\"",
            "\"mode\": \"user\", \"family\": \"acme\"",
        );
        assert_eq!(found(&lint(&family, POLICY, SKILL)), vec![]);
        let named = edit(
            SURFACE,
            "\"mode\": \"public\"",
            "\"mode\": \"user\", \"connect\": \"add\"",
        );
        assert_eq!(found(&lint(&named, POLICY, SKILL)), vec![]);
    }

    #[test]
    fn mothership_on_the_control_plane_is_fine() {
        let s = edit(
            SURFACE,
            "\"binding\": { \"mode\": \"public\" }",
            "\"plane\": \"control\", \"binding\": { \"mode\": \"mothership\" }",
        );
        assert_eq!(found(&lint(&s, POLICY, SKILL)), vec![]);
    }
}
