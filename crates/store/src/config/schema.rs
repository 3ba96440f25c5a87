//! What a key of `config.json` takes, in the words of `docs/config.md`, which is generated
//! from the same JSON Schema (`RuntimeConfig`'s, schemars): the refusal of `hcp config set`
//! for a value of the wrong type names the type the key takes and its section there.
//!
//! The words follow the reference's: `integer`, `boolean`, `string`, `array of string`,
//! `map of PACK_ID → object`, `"deny" | "host" | object`; a map's key is named as the
//! reference names it ([`map_key_name`]), so `packs.mail.network` is the section
//! `packs.PACK_ID.network`. `xtask`'s tests check both against the generated file.

use super::RuntimeConfig;
use serde_json::Value;

/// The name `docs/config.md` gives the keys of the map at `path` (a dotted name of the
/// reference): `packs` → `PACK_ID`, `resolvers` → `TOOL`, any other `KEY`.
pub fn map_key_name(path: &str) -> &'static str {
    match path {
        "packs" => "PACK_ID",
        "resolvers" => "TOOL",
        _ => "KEY",
    }
}

/// A key as `docs/config.md` documents it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyDoc {
    /// The dotted name its section is headed with (`packs.PACK_ID.network`).
    pub name: String,
    /// The type it takes, in the reference's words (`integer`, `"deny" | "host" | object`).
    pub takes: String,
}

/// The reference's name and type of the key at `segments` (a key as `hcp config` reads
/// it: `["packs", "mail", "network"]`); `None` when the schema has no such key (a field of
/// one alternative of a choice, which the reference documents with its key).
pub fn key_doc(segments: &[String]) -> Option<KeyDoc> {
    let root = serde_json::to_value(schemars::schema_for!(RuntimeConfig)).ok()?;
    let mut node = root.clone();
    let mut name = String::new();
    for seg in segments {
        let here = resolve(&root, &node).ok()?;
        let props = here.get("properties").and_then(Value::as_object);
        let (next, part) = match props.and_then(|p| p.get(seg.as_str())) {
            Some(p) => (p.clone(), seg.clone()),
            None => match here.get("additionalProperties").filter(|a| a.is_object()) {
                Some(ap) if props.is_none() => (ap.clone(), map_key_name(&name).to_owned()),
                _ => return None,
            },
        };
        if !name.is_empty() {
            name.push('.');
        }
        name.push_str(&part);
        node = next;
    }
    if name.is_empty() {
        return None;
    }
    let takes = type_words(&root, &node, map_key_name(&name))?;
    Some(KeyDoc { name, takes })
}

/// Why [`resolve`] could not read a schema as the references read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResolveError {
    /// A `$ref` names a definition the schema's `$defs` lacks (the `$ref` as written).
    UnknownRef(String),
    /// `$ref`s and nullable wrappers nest deeper than eight levels: a cycle, in practice.
    Endless,
}

impl std::fmt::Display for ResolveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::UnknownRef(r) => write!(f, "the schema defines no `{r}`"),
            Self::Endless => f.write_str("a schema whose `$ref`s do not end"),
        }
    }
}

impl std::error::Error for ResolveError {}

/// `s` (a schema within `root`, as schemars writes it) with `$ref` followed (keeping the
/// referring schema's own keywords, its description among them) and `anyOf: [X, null]` /
/// `type: [T, "null"]` unwrapped: the schema of a field as the generated references
/// (`docs/config.md`, `docs/packs.md`) and `hcp config set`'s refusals read it.
///
/// # Errors
/// [`ResolveError`] for a `$ref` to a missing definition, or more than eight levels of
/// references and wrappers.
pub fn resolve(root: &Value, s: &Value) -> Result<Value, ResolveError> {
    let mut s = s.clone();
    for _ in 0..8 {
        if let Some(r) = s.get("$ref").and_then(Value::as_str) {
            let def = root
                .get("$defs")
                .and_then(|d| d.get(r.trim_start_matches("#/$defs/")))
                .ok_or_else(|| ResolveError::UnknownRef(r.to_owned()))?;
            let mut merged = def.clone();
            if let (Some(m), Some(own)) = (merged.as_object_mut(), s.as_object()) {
                for (k, v) in own.iter().filter(|(k, _)| *k != "$ref") {
                    m.insert(k.clone(), v.clone());
                }
            }
            s = merged;
            continue;
        }
        if let Some(any) = s.get("anyOf").and_then(Value::as_array) {
            let real: Vec<&Value> = any.iter().filter(|a| a["type"] != "null").collect();
            if real.len() == 1 && any.len() == 2 {
                let mut inner = real[0].clone();
                if let (Some(m), Some(own)) = (inner.as_object_mut(), s.as_object()) {
                    for (k, v) in own.iter().filter(|(k, _)| *k != "anyOf") {
                        m.insert(k.clone(), v.clone());
                    }
                }
                s = inner;
                continue;
            }
        }
        if let Some(ts) = s.get("type").and_then(Value::as_array) {
            let real: Vec<Value> = ts.iter().filter(|t| *t != "null").cloned().collect();
            if real.len() == 1 {
                s["type"] = real[0].clone();
                continue;
            }
        }
        return Ok(s);
    }
    Err(ResolveError::Endless)
}

/// The type of `s` in the reference's words; `key` names a map's keys.
fn type_words(root: &Value, s: &Value, key: &str) -> Option<String> {
    let r = resolve(root, s).ok()?;
    if let Some(alts) = r.get("oneOf").and_then(Value::as_array) {
        let words: Option<Vec<String>> = alts
            .iter()
            .map(|a| match a.get("const") {
                Some(c) => Some(format!("`{c}`")),
                None => type_words(root, a, key),
            })
            .collect();
        return Some(words?.join(" | "));
    }
    if let Some(e) = r.get("enum").and_then(Value::as_array) {
        let words: Vec<String> = e.iter().map(|v| format!("`{v}`")).collect();
        return Some(words.join(" | "));
    }
    Some(match r.get("type").and_then(Value::as_str) {
        Some("array") => format!("array of {}", type_words(root, &r["items"], key)?),
        Some("object") | None if r.get("properties").is_some() => "object".into(),
        Some("object") => match r.get("additionalProperties") {
            Some(ap) if ap.is_object() => format!("map of {key} → {}", type_words(root, ap, key)?),
            _ => "object".into(),
        },
        Some(t) => t.to_owned(),
        None => "any JSON value".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn doc(key: &str) -> Option<KeyDoc> {
        key_doc(&key.split('.').map(str::to_owned).collect::<Vec<_>>())
    }

    #[test]
    fn keys_are_named_and_typed_as_the_reference_does() {
        assert_eq!(
            doc("limits.cpu_seconds"),
            Some(KeyDoc {
                name: "limits.cpu_seconds".into(),
                takes: "integer".into()
            })
        );
        assert_eq!(
            doc("packs.mail.network"),
            Some(KeyDoc {
                name: "packs.PACK_ID.network".into(),
                takes: "`\"deny\"` | `\"host\"` | object".into()
            })
        );
        assert_eq!(
            doc("sandbox.require").map(|d| d.takes),
            Some("boolean".into())
        );
        assert_eq!(
            doc("sandbox.read").map(|d| d.takes),
            Some("array of string".into())
        );
        assert_eq!(doc("limits.nope"), None);
        assert_eq!(doc("sandbox.require.x"), None);
    }
}
