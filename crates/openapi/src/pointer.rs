//! JSON pointers (RFC 6901) and local `$ref` resolution over an untyped document.

use crate::error::BadOpenapi;
use serde_json::Value;

/// The most `$ref`s followed in one chain before it is called a loop; a longer chain of
/// distinct references is refused too (no real document needs it).
pub(crate) const MAX_REF_CHAIN: usize = 64;

/// Escapes one reference token: `~` → `~0`, `/` → `~1`.
pub(crate) fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// `base` + `/` + escaped `token`.
pub(crate) fn join(base: &str, token: &str) -> String {
    format!("{base}/{}", escape(token))
}

/// The value at `pointer` in `doc`.
pub(crate) fn get<'a>(doc: &'a Value, pointer: &str) -> Option<&'a Value> {
    doc.pointer(pointer)
}

/// The JSON pointer a local `$ref` names (`#/components/schemas/Task` →
/// `/components/schemas/Task`), percent-decoded as a URI fragment.
///
/// # Errors
/// [`BadOpenapi`] at `at` for a reference that is not local (another file or a URL: hcp
/// reads one document) or not a valid fragment.
pub(crate) fn local_target(reference: &str, at: &str) -> Result<String, BadOpenapi> {
    let Some(fragment) = reference.strip_prefix('#') else {
        return Err(BadOpenapi::at(
            at,
            format!(
                "`$ref` `{}` points outside the document; hcp reads one self-contained document (bundle it first)",
                shorten(reference)
            ),
        ));
    };
    let decoded = percent_encoding::percent_decode_str(fragment)
        .decode_utf8()
        .map_err(|_| BadOpenapi::at(at, "`$ref` is not valid UTF-8 once percent-decoded"))?;
    if !decoded.is_empty() && !decoded.starts_with('/') {
        return Err(BadOpenapi::at(
            at,
            format!(
                "`$ref` `{}` is not a JSON pointer (anchors are not supported)",
                shorten(reference)
            ),
        ));
    }
    Ok(decoded.into_owned())
}

/// Follows `$ref` from `value` (found at `at`) until a value without `$ref`, returning it
/// and its pointer.
///
/// # Errors
/// [`BadOpenapi`] for a loop (`A → B → A`), a chain longer than [`MAX_REF_CHAIN`], a
/// reference that is not a string, not local, or names nothing.
pub(crate) fn resolve<'a>(
    doc: &'a Value,
    mut value: &'a Value,
    at: &str,
) -> Result<(&'a Value, String), BadOpenapi> {
    let mut here = at.to_owned();
    let mut seen: Vec<String> = Vec::new();
    while let Some(r) = value.as_object().and_then(|o| o.get("$ref")) {
        let ref_at = join(&here, "$ref");
        let Some(r) = r.as_str() else {
            return Err(BadOpenapi::at(ref_at, "`$ref` is not a string"));
        };
        let target = local_target(r, &ref_at)?;
        if seen.contains(&target) || target == at {
            return Err(BadOpenapi::at(
                at,
                format!("`$ref` loop: `{}` leads back to itself", shorten(r)),
            ));
        }
        if seen.len() >= MAX_REF_CHAIN {
            return Err(BadOpenapi::at(
                at,
                format!("more than {MAX_REF_CHAIN} `$ref`s in one chain"),
            ));
        }
        value = get(doc, &target).ok_or_else(|| {
            BadOpenapi::at(
                ref_at.clone(),
                format!("`$ref` `{}` names nothing in the document", shorten(r)),
            )
        })?;
        seen.push(target.clone());
        here = target;
    }
    Ok((value, here))
}

/// A user value for a message: at most 120 characters, control characters escaped.
pub(crate) fn shorten(s: &str) -> String {
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i == 120 {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn tokens_are_escaped_and_refs_decoded() {
        assert_eq!(join("/paths", "/tasks/{id}"), "/paths/~1tasks~1{id}");
        assert_eq!(
            local_target("#/paths/~1a~1%7Bid%7D", "").unwrap(),
            "/paths/~1a~1{id}"
        );
        assert!(local_target("other.yaml#/x", "/p").is_err());
    }

    #[test]
    fn chains_resolve_and_loops_are_refused() {
        let doc = json!({"a": {"$ref": "#/b"}, "b": {"$ref": "#/c"}, "c": {"type": "string"},
                         "x": {"$ref": "#/y"}, "y": {"$ref": "#/x"}, "s": {"$ref": "#/s"}});
        let (v, p) = resolve(&doc, &doc["a"], "/a").unwrap();
        assert_eq!((v, p.as_str()), (&json!({"type": "string"}), "/c"));
        let e = resolve(&doc, &doc["x"], "/x").unwrap_err();
        assert_eq!(e.pointer, "/x");
        assert!(e.message.contains("loop"), "{}", e.message);
        assert!(resolve(&doc, &doc["s"], "/s").is_err());
        let doc = json!({"a": {"$ref": "#/nope"}});
        assert_eq!(
            resolve(&doc, &doc["a"], "/a").unwrap_err().pointer,
            "/a/$ref"
        );
    }
}
