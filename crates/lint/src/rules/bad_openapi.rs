//! `bad_openapi` (error): the OpenAPI document, or how the manifest uses it, is refused.
//!
//! ## What it does
//! For `kind: openapi`: reports a manifest without `openapi.spec`; a `spec` that is
//! neither an `https://`/`http://` URL nor a relative path inside the pack; a document
//! beside the pack that is missing, a symbolic link, larger than 16 MiB, or that hcp
//! refuses — not OpenAPI 3.0 or 3.1, a `$ref` that loops, names nothing or points outside
//! the document, two operations with one `operationId`, a server URL whose scheme is not
//! `http` or `https` — at the JSON pointer of the fault; a verb whose operation hcp
//! cannot call (a required cookie parameter, a body that is not a JSON object, a security
//! scheme it cannot place …); a verb with `cli`. For the other kinds: an `openapi` field,
//! or a verb with `operation`. A document at a URL is checked by install, which reads it.
//!
//! ## Why is this bad?
//! Install reads the document and refuses what it cannot use: the pack
//! would not install. A verb's arguments, types and bounds come from the document, so a
//! document hcp cannot read leaves the gate nothing to check calls against.
//!
//! ## Example
//! ```json
//! { "kind": "openapi", "openapi": { "spec": "swagger.json" } }
//! ```
//! where `swagger.json` says `"swagger": "2.0"`: convert it to OpenAPI 3 first.

use crate::context::{Ctx, DocFault, in_manifest, tick};
use crate::diagnostic::Diagnostic;
use hcp_model::Kind;

/// The rule's code.
pub(crate) const CODE: hcp_model::Code = hcp_model::Code::BadOpenapi;

pub(crate) fn run(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let Some((m, text)) = cx.manifest() else {
        return;
    };
    let err = |msg: String| Diagnostic::error(CODE, msg);
    if m.kind != Kind::Openapi {
        if m.openapi.is_some() {
            out.push(
                in_manifest(
                    err("`openapi` is only for `kind: openapi`".into()),
                    text,
                    &["openapi"],
                )
                .hint("remove it, or make the pack `kind: openapi`"),
            );
        }
        for (key, v) in &m.verbs {
            if v.operation.is_some() {
                out.push(in_manifest(
                    err(format!(
                        "verb {} has `operation`, which only a `kind: openapi` verb has",
                        tick(key)
                    )),
                    text,
                    &["verbs", key, "operation"],
                ));
            }
        }
        return;
    }
    let Some(spec) = &m.openapi else {
        out.push(
            in_manifest(
                err("a `kind: openapi` pack needs `openapi.spec`".into()),
                text,
                &["kind"],
            )
            .hint("name the document: `\"openapi\": {\"spec\": \"openapi.json\"}` or an `https://` URL"),
        );
        return;
    };
    if let Err(why) = spec.source() {
        out.push(in_manifest(err(why), text, &["openapi", "spec"]));
        return;
    }
    for (key, v) in &m.verbs {
        if v.cli.is_some() {
            out.push(
                in_manifest(
                    err(format!(
                        "verb {} of a `kind: openapi` pack has `cli`; it is an HTTP request",
                        tick(key)
                    )),
                    text,
                    &["verbs", key, "cli"],
                )
                .hint("give it `operation`: the `operationId` it calls"),
            );
        }
    }
    let Some(loaded) = &cx.document else {
        return;
    };
    let doc = match &loaded.doc {
        Ok(doc) => doc,
        Err(DocFault::Unreadable(why)) => {
            out.push(in_manifest(
                err(format!("document {}: {why}", tick(&loaded.rel))),
                text,
                &["openapi", "spec"],
            ));
            return;
        }
        Err(DocFault::Refused(b)) => {
            out.push(loaded.at(err(b.to_string()), &b.pointer));
            return;
        }
    };
    for (key, v) in &m.verbs {
        let Some(id) = &v.operation else { continue };
        if let Err(hcp_openapi::OperationError::Bad(b)) = doc.operation(id) {
            out.push(loaded.at(
                err(format!("verb {} (operation {}): {b}", tick(key), tick(id))),
                &b.pointer,
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::source::SpecDocument;
    use crate::testing::{POLICY, SKILL, source};
    use pretty_assertions::assert_eq;

    const SURFACE: &str = r#"{
  "id": "sample", "name": "Sample", "kind": "openapi",
  "binding": { "mode": "public" },
  "openapi": { "spec": "openapi.json" },
  "verbs": {
    "list":   { "description": "List items.",     "operation": "list" },
    "show":   { "description": "Show one item.",  "operation": "show" },
    "add":    { "description": "Add an item.",    "operation": "add" },
    "remove": { "description": "Remove an item.", "operation": "remove" },
    "status": { "description": "Service status.", "operation": "status" }
  }
}"#;

    fn lint_doc(doc: &str) -> Vec<(String, Option<String>, usize)> {
        let mut src = source(SURFACE, POLICY, SKILL, &[]);
        src.document = Some(SpecDocument {
            rel: "openapi.json".into(),
            bytes: Ok(doc.as_bytes().to_vec()),
        });
        crate::check(&src)
            .diagnostics
            .iter()
            .filter(|d| d.code == "bad_openapi")
            .map(|d| (d.message.clone(), d.file.clone(), d.line))
            .collect()
    }

    #[test]
    fn a_swagger_document_is_located_at_its_pointer() {
        let found = lint_doc("{\n  \"swagger\": \"2.0\"\n}");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].1.as_deref(), Some("openapi.json"));
        assert_eq!(found[0].2, 2);
        assert!(found[0].0.contains("(at `/swagger`)"), "{}", found[0].0);
    }
}
