//! `bad_version` (error): `version` (policy) or `hcp` (manifest) is not `1`.
//!
//! ## What it does
//! Reports a policy `version` that is not the number `1`, and a manifest `hcp`
//! protocol affinity that is present but not `1`.
//!
//! ## Why is this bad?
//! The version says which rules the file was written against. A runtime that read a
//! version-2 policy with version-1 rules could miss a restriction the author relied on.
//!
//! ## Example
//! ```json
//! { "surface_id": "transit", "version": "1", "verbs": {} }
//! ```
//! `"1"` is a string; write `1`.

use crate::context::{Ctx, in_manifest, in_policy};
use crate::diagnostic::Diagnostic;
use hcp_model::{ParseCode, ParseError};

/// The rule's code.
pub(crate) const CODE: hcp_model::Code = hcp_model::Code::BadVersion;

pub(crate) fn run(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    super::parse_failure(cx, ParseCode::BadVersion, hint, out);
    if let Some((p, text)) = cx.policy()
        && p.version != 1
    {
        out.push(
            in_policy(
                Diagnostic::error(CODE,
                    format!(
                        "policy `version` is `{}`; this runtime reads version `1`",
                        p.version
                    ),
                ),
                text,
                &["version"],
            )
            .hint("set `\"version\": 1`"),
        );
    }
    if let Some((m, text)) = cx.manifest()
        && let Some(v) = m.hcp.filter(|v| *v != 1)
    {
        out.push(
            in_manifest(
                Diagnostic::error(CODE,
                    format!("protocol affinity `hcp` is `{v}`; this runtime speaks HCP/1"),
                ),
                text,
                &["hcp"],
            )
            .hint("set `\"hcp\": 1`, or remove it"),
        );
    }
}

fn hint(_: &ParseError) -> Option<String> {
    Some("the version is the number `1`, without quotes".into())
}
