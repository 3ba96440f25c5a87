//! `unknown_operation` (error): a verb of a `kind: openapi` pack names no operation of
//! its document.
//!
//! ## What it does
//! Reports each verb of a `kind: openapi` pack without `operation`, and, when the
//! document is a file beside the pack, each verb whose `operation` is not an
//! `operationId` of that document. Install, which also reads a document at a URL, checks
//! the same.
//!
//! ## Why is this bad?
//! A verb of an openapi pack is exactly one operation of the API: its
//! arguments, their types and bounds, and the request it sends all come from that
//! operation. Without one there is nothing to call, and install refuses the pack.
//!
//! ## Example
//! ```json
//! "verbs": { "list": { "description": "List tasks.", "operation": "listTask" } }
//! ```
//! where the document's operation is `listTasks`.

use crate::context::{Ctx, in_manifest, tick};
use crate::diagnostic::Diagnostic;
use hcp_model::Kind;

/// The rule's code.
pub(crate) const CODE: hcp_model::Code = hcp_model::Code::UnknownOperation;

pub(crate) fn run(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let Some((m, text)) = cx.manifest() else {
        return;
    };
    if m.kind != Kind::Openapi {
        return;
    }
    let doc = cx.document.as_ref().and_then(|l| l.doc.as_ref().ok());
    for (key, v) in &m.verbs {
        let Some(id) = &v.operation else {
            out.push(
                in_manifest(
                    Diagnostic::error(CODE,
                        format!("verb {} names no `operation`", tick(key)),
                    ),
                    text,
                    &["verbs", key],
                )
                .hint("add `\"operation\": \"<operationId>\"` naming the operation it calls"),
            );
            continue;
        };
        let Some(doc) = doc else { continue };
        if doc.has_operation(id) {
            continue;
        }
        let close: Vec<String> = doc
            .operation_ids()
            .filter(|o| o.eq_ignore_ascii_case(id) || o.contains(id.as_str()) || id.contains(o))
            .take(3)
            .map(tick)
            .collect();
        let hint = if close.is_empty() {
            let all: Vec<String> = doc.operation_ids().take(8).map(tick).collect();
            format!("its operations: {}", all.join(", "))
        } else {
            format!("did you mean {}?", close.join(" or "))
        };
        out.push(
            in_manifest(
                Diagnostic::error(CODE,
                    format!(
                        "verb {}: the document has no operation {}",
                        tick(key),
                        tick(id)
                    ),
                ),
                text,
                &["verbs", key, "operation"],
            )
            .hint(hint),
        );
    }
}
