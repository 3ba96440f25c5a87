//! A JSON Schema (as schemars writes it) read as a list of documented fields, for the
//! generated references `docs/packs.md` and `docs/config.md`.
//!
//! Each field is one dotted path (`binding.mode`, `verbs.VERB_KEY.cli`,
//! `stimulusTriggers[].ref`) with its type, whether it is required, its default, its
//! documentation (the model's doc comment, which schemars copies into `description`) and
//! an example: the value at that path in an example file that the model itself parses. A
//! field of the schema without an example is an error, so a field added to the model
//! cannot be left out of its reference.

use anyhow::{Context, bail};
use serde_json::{Map, Value};
use std::sync::LazyLock;

/// One documented field.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// The dotted path: object keys joined by `.`, a map's key as the upper-case name the
    /// caller gives it, an array's item as `[]`.
    pub path: String,
    /// The type, in words (`string`, `array of string`, `map of VERB_KEY → object`,
    /// `"deny" | "host" | object`).
    pub ty: String,
    /// Whether the enclosing object requires it.
    pub required: bool,
    /// The default the model fills in when it is absent, if the schema names one.
    pub default: Option<Value>,
    /// The documentation, cleaned for a reader of the repository.
    pub doc: String,
    /// For a choice of constants: each value with its documentation.
    pub values: Vec<(String, String)>,
    /// The value at this path in the example file (`None` for a path listed as
    /// `unexampled`).
    pub example: Option<Value>,
}

/// How to name a map's key, and the order of the example file's text.
pub struct Names<'a> {
    /// The key of a map at a path (`verbs` → `VERB_KEY`).
    pub key_name: &'a dyn Fn(&str) -> &'static str,
    /// The example file's text: an object's fields are listed in the order their names
    /// first appear in it (a JSON value keeps no order; the file does).
    pub order: &'a str,
}

impl Names<'_> {
    fn key_name(&self, path: &str) -> &'static str {
        (self.key_name)(path)
    }

    fn rank(&self, name: &str) -> usize {
        self.order
            .find(&format!("\"{name}\":"))
            .unwrap_or(usize::MAX)
    }
}

/// The fields of `schema`, depth first, each object's in the order of the example file.
/// `example` is that file's text, which the model parses; `unexampled` lists the paths
/// that may lack an example.
///
/// # Errors
/// The paths that have no example in `example`, or a `$ref` the schema does not define.
pub fn fields(
    schema: &Value,
    key_name: &dyn Fn(&str) -> &'static str,
    example: &str,
    unexampled: &[&str],
) -> anyhow::Result<Vec<Field>> {
    let names = Names {
        key_name,
        order: example,
    };
    let key_name = &names;
    let example: Value = serde_json::from_str(example).context("reading the example")?;
    let example = &example;
    let mut out = Vec::new();
    let mut missing = Vec::new();
    walk(
        schema,
        schema,
        "",
        Some(example),
        key_name,
        &mut out,
        &mut missing,
    )?;
    missing.retain(|p| !unexampled.contains(&p.as_str()));
    if !missing.is_empty() {
        bail!(
            "no example for {}: add one to the example file",
            missing.join(", ")
        );
    }
    Ok(out)
}

/// `s` with `$ref` followed and nullable wrappers unwrapped, as `hcp config set` reads
/// a key's schema too ([`hcp_store::config::schema::resolve`]).
fn resolve(root: &Value, s: &Value) -> anyhow::Result<Value> {
    Ok(hcp_store::config::schema::resolve(root, s)?)
}

/// The constants of a choice (`oneOf` of `const`s, or `enum`), with their documentation.
fn choices(s: &Value) -> Vec<(String, String)> {
    if let Some(e) = s.get("enum").and_then(Value::as_array) {
        return e.iter().map(|v| (v.to_string(), String::new())).collect();
    }
    s.get("oneOf")
        .and_then(Value::as_array)
        .map(|alts| {
            alts.iter()
                .filter_map(|a| {
                    a.get("const").map(|c| {
                        let d = clean(a["description"].as_str().unwrap_or(""));
                        let echo = format!("`{c}`: ");
                        let d = d.strip_prefix(&echo).map_or(d.clone(), capitalise);
                        (c.to_string(), d)
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The type of `s` in words.
fn type_of(root: &Value, s: &Value, key: &str) -> anyhow::Result<String> {
    let r = resolve(root, s)?;
    if let Some(alts) = r.get("oneOf").and_then(Value::as_array) {
        let words: Vec<String> = alts
            .iter()
            .map(|a| match a.get("const") {
                Some(c) => Ok(format!("`{c}`")),
                None => type_of(root, a, key),
            })
            .collect::<anyhow::Result<_>>()?;
        return Ok(words.join(" \\| "));
    }
    if let Some(e) = r.get("enum").and_then(Value::as_array) {
        let words: Vec<String> = e.iter().map(|v| format!("`{v}`")).collect();
        return Ok(words.join(" \\| "));
    }
    Ok(match r.get("type").and_then(Value::as_str) {
        Some("array") => format!("array of {}", type_of(root, &r["items"], key)?),
        Some("object") | None if r.get("properties").is_some() => "object".into(),
        Some("object") => match r.get("additionalProperties") {
            Some(ap) if ap.is_object() => {
                format!("map of {key} → {}", type_of(root, ap, key)?)
            }
            _ => "object".into(),
        },
        Some("integer") => "integer".into(),
        Some(t) => t.to_owned(),
        None => "any JSON value".into(),
    })
}

/// The example value at the next step of a path. A map's value is all its values merged
/// (the first that has a key gives it), so that each key of the value type can be
/// exampled by any entry.
fn step(example: Option<&Value>, seg: Seg<'_>) -> Option<Value> {
    match seg {
        Seg::Key(k) => example?.get(k).cloned(),
        Seg::MapValue => {
            let values: Vec<&Value> = example?.as_object()?.values().collect();
            if values.iter().all(|v| v.is_object()) && !values.is_empty() {
                let mut merged = Map::new();
                for v in values.iter().filter_map(|v| v.as_object()) {
                    for (k, x) in v {
                        merged.entry(k.clone()).or_insert_with(|| x.clone());
                    }
                }
                Some(Value::Object(merged))
            } else {
                values.first().map(|v| (*v).clone())
            }
        }
        Seg::Item => example?.as_array()?.first().cloned(),
    }
}

#[derive(Clone, Copy)]
enum Seg<'a> {
    Key(&'a str),
    MapValue,
    Item,
}

#[allow(clippy::too_many_arguments)]
fn walk(
    root: &Value,
    node: &Value,
    path: &str,
    example: Option<&Value>,
    key_name: &Names<'_>,
    out: &mut Vec<Field>,
    missing: &mut Vec<String>,
) -> anyhow::Result<()> {
    let r = resolve(root, node)?;
    let props: Option<&Map<String, Value>> = r.get("properties").and_then(Value::as_object);
    if let Some(props) = props {
        let required: Vec<&str> = r["required"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut props: Vec<(&String, &Value)> = props.iter().collect();
        props.sort_by_key(|(name, _)| key_name.rank(name));
        for (name, prop) in props {
            let p = if path.is_empty() {
                name.clone()
            } else {
                format!("{path}.{name}")
            };
            let ex = step(example, Seg::Key(name));
            let pr = resolve(root, prop)?;
            let key = key_name.key_name(&p);
            let doc = prop
                .get("description")
                .or_else(|| pr.get("description"))
                .and_then(Value::as_str)
                .unwrap_or("");
            if ex.is_none() {
                missing.push(p.clone());
            }
            {
                out.push(Field {
                    path: p.clone(),
                    ty: type_of(root, prop, key)?,
                    required: required.contains(&name.as_str()),
                    default: prop.get("default").or_else(|| pr.get("default")).cloned(),
                    doc: clean(doc),
                    values: choices(&pr),
                    example: ex.clone(),
                });
            }
            children(root, &pr, &p, ex.as_ref(), key_name, out, missing)?;
        }
    }
    Ok(())
}

/// The fields under a map's values or an array's items.
fn children(
    root: &Value,
    r: &Value,
    path: &str,
    example: Option<&Value>,
    key_name: &Names<'_>,
    out: &mut Vec<Field>,
    missing: &mut Vec<String>,
) -> anyhow::Result<()> {
    match r.get("type").and_then(Value::as_str) {
        Some("object") if r.get("properties").is_none() => {
            if let Some(ap) = r.get("additionalProperties").filter(|a| a.is_object()) {
                let p = format!("{path}.{}", key_name.key_name(path));
                walk(
                    root,
                    ap,
                    &p,
                    step(example, Seg::MapValue).as_ref(),
                    key_name,
                    out,
                    missing,
                )?;
            }
        }
        Some("array") => {
            walk(
                root,
                &r["items"],
                &format!("{path}[]"),
                step(example, Seg::Item).as_ref(),
                key_name,
                out,
                missing,
            )?;
        }
        _ => walk(root, r, path, example, key_name, out, missing)?,
    }
    Ok(())
}

static RUST_CONST: LazyLock<regex::Regex> = LazyLock::new(|| {
    #[allow(clippy::unwrap_used)]
    regex::Regex::new(
        r"(?: \(\[?`(?:[A-Z][A-Z0-9_]+|hcp_[A-Za-z0-9_:]+)`\]?\)|,? \[?`(?:[A-Z][A-Z0-9_]+|hcp_[A-Za-z0-9_:]+)`\]?)",
    )
    .unwrap()
});
static LEAD: LazyLock<regex::Regex> = LazyLock::new(|| {
    #[allow(clippy::unwrap_used)]
    regex::Regex::new(r"^`[A-Za-z_.]+`(?: \((default [^)]*)\))?: ").unwrap()
});
static RUST_LINK: LazyLock<regex::Regex> = LazyLock::new(|| {
    #[allow(clippy::unwrap_used)]
    regex::Regex::new(r"\[`([^`\]]+)`\](?:\([^)]*\))?").unwrap()
});
/// A section of the contract or the seeds: `RUNTIME §5.1`, `seeds §4.5.1`, `§5.1–§5.4`,
/// `RUNTIME §5 "Confinement of every land"`.
const SECTION: &str = r#"(?:RUNTIME|seeds) §[0-9.]*[0-9](?:[–-]§?[0-9.]*[0-9])?(?: "[^"]*")?"#;

static SPEC_PAREN: LazyLock<regex::Regex> = LazyLock::new(|| {
    #[allow(clippy::unwrap_used)]
    regex::Regex::new(&format!(
        r"[ \t]*\((?:(?:{SECTION}|§[0-9.]*[0-9](?:[–-]§?[0-9.]*[0-9])?)(?:, )?)+\)"
    ))
    .unwrap()
});
static SPEC_LEAD: LazyLock<regex::Regex> = LazyLock::new(|| {
    #[allow(clippy::unwrap_used)]
    regex::Regex::new(&format!(r"{SECTION}: ")).unwrap()
});
static SPEC_REF: LazyLock<regex::Regex> = LazyLock::new(|| {
    #[allow(clippy::unwrap_used)]
    regex::Regex::new(&format!(r",?[ \t]*{SECTION}")).unwrap()
});

/// A bare section (`§4.4.5`, `§4.4.1–2`) first in a parenthesis beside other words.
static BARE_LEAD: LazyLock<regex::Regex> = LazyLock::new(|| {
    #[allow(clippy::unwrap_used)]
    regex::Regex::new(r"§[0-9][0-9.]*(?:[–-]§?[0-9][0-9.]*)?(?:, |: )").unwrap()
});
/// A bare section elsewhere.
static BARE: LazyLock<regex::Regex> = LazyLock::new(|| {
    #[allow(clippy::unwrap_used)]
    regex::Regex::new(r"(?:,? ?§[0-9][0-9.]*(?:[–-]§?[0-9][0-9.]*)?)").unwrap()
});

/// `text` without references to the contract or the seeds, which a user of the
/// repository does not have; lines and fences are kept.
pub fn strip_spec(text: &str) -> String {
    let text = SPEC_PAREN.replace_all(text, "");
    let text = SPEC_LEAD.replace_all(&text, "");
    let text = SPEC_REF.replace_all(&text, "");
    let text = BARE_LEAD.replace_all(&text, "");
    let text = BARE.replace_all(&text, "");
    text.replace("( ", "(")
        .replace(" )", ")")
        .replace(" ()", "")
}

/// Documentation for a reader of the repository: one line a paragraph, Rust links as
/// plain code, and no reference to the contract or the seeds.
pub fn clean(doc: &str) -> String {
    let paragraphs: Vec<String> = doc
        .split("\n\n")
        .map(|p| p.split('\n').map(str::trim).collect::<Vec<_>>().join(" "))
        .collect();
    let text = paragraphs.join("\n\n");
    let text = RUST_CONST.replace_all(&text, "");
    let text = RUST_LINK.replace_all(&text, "`$1`");
    let text = strip_spec(&text);
    let text = text.trim();
    // "`key` (default X): what it does" → "What it does. Default X."
    match LEAD.captures(text) {
        Some(c) => {
            let rest = &text[c[0].len()..];
            let mut out = capitalise(rest);
            if let Some(d) = c.get(1) {
                out = format!("{}. {}.", out.trim_end_matches('.'), capitalise(d.as_str()));
            }
            out
        }
        None => text.to_owned(),
    }
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// One field as Markdown: a heading, a line of facts, the documentation, the values of
/// a choice and the example.
pub fn render(f: &Field, required_word: bool) -> String {
    let mut out = format!("### `{}`\n\n{}", f.path, f.ty);
    if required_word {
        out.push_str(if f.required {
            " · required"
        } else {
            " · optional"
        });
    }
    if let Some(d) = &f.default {
        out.push_str(&format!(" · default `{}`", compact(d)));
    }
    out.push_str("\n\n");
    if !f.doc.is_empty() {
        out.push_str(&f.doc);
        out.push_str("\n\n");
    }
    let documented: Vec<&(String, String)> =
        f.values.iter().filter(|(_, d)| !d.is_empty()).collect();
    if !documented.is_empty() {
        for (v, d) in documented {
            out.push_str(&format!("- `{v}`: {d}\n"));
        }
        out.push('\n');
    }
    let Some(example) = &f.example else {
        return out;
    };
    let ex = compact(example);
    if ex.len() <= 80 {
        out.push_str(&format!("Example: `{ex}`\n\n"));
    } else {
        out.push_str(&format!("Example:\n\n```json\n{ex}\n```\n\n"));
    }
    out
}

/// A value on one line, with a space after `,` and `:` as people write JSON.
pub fn compact(v: &Value) -> String {
    match v {
        Value::Array(a) => {
            let items: Vec<String> = a.iter().map(compact).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(m) => {
            let items: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{}: {}", Value::String(k.clone()), compact(v)))
                .collect();
            format!("{{{}}}", items.join(", "))
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn clean_drops_the_contract_and_rust_links() {
        assert_eq!(
            clean("The thing (RUNTIME §1.3).\nSee [`Foo::bar`] and\n[`X`](crate::X)."),
            "The thing. See `Foo::bar` and `X`."
        );
        assert_eq!(
            clean("a (lint `bad_pack_id`, RUNTIME §2) b"),
            "a (lint `bad_pack_id`) b"
        );
        assert_eq!(
            strip_spec("x (seeds §4.5.1: only writes)\ny (RUNTIME §5.1–§5.4), z"),
            "x (only writes)\ny, z"
        );
        assert_eq!(
            strip_spec("the land (RUNTIME §5 \"Confinement of every land\", §7)."),
            "the land."
        );
        assert_eq!(
            clean("Must equal `id` (§4.4.5, lint `x`). One per key (§4.4.1–2)."),
            "Must equal `id` (lint `x`). One per key."
        );
    }

    #[test]
    fn a_field_without_an_example_is_an_error() {
        let schema: Value = serde_json::json!({
            "type": "object",
            "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
            "required": ["a"]
        });
        let e = fields(&schema, &|_| "KEY", r#"{"a": "x"}"#, &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("no example for b"), "{e}");
        let f = fields(&schema, &|_| "KEY", r#"{"a": "x"}"#, &["b"]).unwrap();
        assert_eq!(f.len(), 2);
        assert!(f[0].required && !f[1].required);
        assert_eq!(f[1].example, None);
    }
}
