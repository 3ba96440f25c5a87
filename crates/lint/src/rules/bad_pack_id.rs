//! `bad_pack_id` (error): the manifest `id` is not a valid pack id.
//!
//! ## What it does
//! Checks the manifest `id` against `^[a-z0-9]+(-[a-z0-9]+)*$` with at most 64 characters:
//! lowercase ASCII letters and digits in groups joined by single `-`.
//!
//! ## Why is this bad?
//! The id names a directory in the store (`packs/<id>/`), a skill (`skills/<id>/`, an Agent
//! Skills `name` of at most 64 characters) and the prefix of every `PACK.VERB`. An id with
//! `/` or `..` would escape the store; uppercase or full-width letters would make two ids
//! that look alike.
//!
//! ## Example
//! ```json
//! { "id": "../Transit", "name": "Transit", "kind": "wrap" }
//! ```
//! Use `transit`.

use crate::context::{Ctx, in_manifest, tick};
use crate::diagnostic::Diagnostic;

/// The rule's code.
pub(crate) const CODE: hcp_model::Code = hcp_model::Code::BadPackId;

pub(crate) fn run(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let Some((m, text)) = cx.manifest() else {
        return;
    };
    if hcp_model::validate_pack_id(&m.id).is_ok() {
        return;
    }
    let id = tick(&m.id);
    let chars = m.id.chars().count();
    let why = if m.id.is_empty() {
        "the pack id is empty".to_owned()
    } else if chars > hcp_model::id::MAX_PACK_ID_LEN {
        format!(
            "pack id {id} is {chars} characters long; at most {} are allowed",
            hcp_model::id::MAX_PACK_ID_LEN
        )
    } else if let Some(c) =
        m.id.chars()
            .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        format!(
            "pack id {id} holds {}; only lowercase ASCII letters, digits and `-` are allowed",
            tick(&c.to_string())
        )
    } else {
        format!("pack id {id} has a leading, trailing or doubled `-`")
    };
    {
        out.push(
            in_manifest(Diagnostic::error(CODE, why), text, &["id"])
                .hint("a pack id matches `^[a-z0-9]+(-[a-z0-9]+)*$`, at most 64 characters"),
        );
    }
}
