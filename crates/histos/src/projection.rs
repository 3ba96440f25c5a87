//! JSON Schema → Histos tool contract, projection 0.1 (HISTOS-ENGINE §11,
//! `spec/json-schema-projection-0.1.md`; where the text is older than the corpus's
//! `projection/` fixtures, the fixtures decide), and the three lock hashes
//! `schema_sha256`, `description_sha256`, `contract_sha256`.
//!
//! The projection is deliberately a small, flat subset: per argument `type`, `required`,
//! `enum` (and `const`), string bounds, `pattern`, numeric bounds (the draft-4 boolean
//! `exclusiveMinimum`/`exclusiveMaximum` is dropped, never read as a number), `items`
//! (`type`, `enum` and the element's scalar bounds), `minItems`/`maxItems`/`uniqueItems`
//! and `x-sensitive`. `[T, "null"]` and `anyOf`/`oneOf` of one schema and `null` are `T`,
//! nullable, not required. `additionalProperties: true` opens the argument surface; it
//! is closed otherwise (unlike JSON Schema). A local `$ref` (`#/…`) is followed.
//! Annotations (`title`, `description`, `default`, `examples`, `format`, `$comment`, `x-`
//! keys) are ignored and never reach the contract.
//!
//! What cannot be carried is refused with `invalid_import` rather than dropped (a dropped
//! bound is a policy that reads as constrained and enforces nothing): combinators
//! (`allOf`, `not`, `if`/`then`/`else`, a union of two real types), `const` beside `enum`,
//! a remote, dangling, recursive or over-deep `$ref`, a malformed bound, an unknown
//! `type`, an element schema with its own `items`, an `x-sensitive` that is neither `pii`
//! nor `secret`, and more than [`MAX_PROPERTIES`] arguments. Every projected contract goes
//! through the policy loader's own field checks, so a pattern can also be refused as
//! `unsafe_pattern` and a contradictory bound as `invalid_field`.

use sha2::{Digest, Sha256};

use crate::error::{PolicyCode, PolicyError};
use crate::model::Schema;
use crate::value::{Map, Value, canonical_number};

/// The most arguments (properties) one tool's schema may declare.
pub const MAX_PROPERTIES: usize = 1_000;
/// The longest chain of `$ref`s followed for one schema.
const MAX_REF_DEPTH: usize = 8;

/// Which reader produced a tool source; it fixes the layout of the hashed `shape`
/// (`tool-lock-0.1.schema.json` `$defs/shape`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SourceKind {
    /// An MCP `tools/list` entry: `{name, description?, inputSchema, outputSchema?, …}`.
    Mcp,
    /// An OpenAI tool: `{type: "function", function: {name, description?, parameters}}`
    /// or the flat/legacy `{name, description?, parameters}`.
    OpenAi,
    /// An OpenAPI operation (its shape is built by the OpenAPI reader).
    OpenApi,
}

impl SourceKind {
    /// The lock file's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Mcp => "mcp",
            SourceKind::OpenAi => "openai",
            SourceKind::OpenApi => "openapi",
        }
    }

    /// The kind spelled `s`.
    pub fn parse(s: &str) -> Option<SourceKind> {
        Some(match s {
            "mcp" => SourceKind::Mcp,
            "openai" => SourceKind::OpenAi,
            "openapi" => SourceKind::OpenApi,
            _ => return None,
        })
    }
}

/// The projected half of a tool contract: argument and return schemas.
#[derive(Debug, Clone, Default)]
pub struct Contract {
    /// The argument schema (`None` when the source declares none).
    pub args: Option<Schema>,
    /// The return schema.
    pub returns: Option<Schema>,
}

/// One tool as its source declared it, with the contract projected from it.
#[derive(Debug, Clone)]
pub struct ToolSource {
    /// The tool's name as the source spells it.
    pub name: String,
    /// Which reader produced it.
    pub kind: SourceKind,
    /// The source's description; `None` when absent (absent ≠ empty).
    pub description: Option<String>,
    /// The per-kind `shape` that `schema_sha256` covers.
    pub shape: Value,
    /// The projected contract.
    pub contract: Contract,
}

fn bad(msg: impl Into<String>) -> PolicyError {
    PolicyError::new(PolicyCode::InvalidImport, msg)
}

/// `"sha256:" + hex(SHA-256(canonical_json(v, numbers_as_text)))`, the digest every lock
/// hash and `content_hash` use (HISTOS-ENGINE §3.3).
pub fn digest(v: &Value) -> String {
    let mut out = String::new();
    crate::hash::encode(v, &mut out);
    format!("sha256:{}", hex::encode(Sha256::digest(out.as_bytes())))
}

impl Contract {
    /// `contract_sha256`: the digest of `{"args": <schema fingerprint>, "returns": <…>}`
    /// with every field's 18 keys, numbers as text (the fixtures' encoding).
    pub fn contract_sha256(&self) -> String {
        let text = crate::hash::contract_text(self.args.as_ref(), self.returns.as_ref());
        format!("sha256:{}", hex::encode(Sha256::digest(text.as_bytes())))
    }

    /// The contract as the corpus's `expect.contract` shows it: `{args, returns}`, each
    /// `{allow_extra, fields: {name: {18 keys}}}` or null, numbers rendered as decimal
    /// strings.
    pub fn view(&self) -> Value {
        let mut m = Map::new();
        m.insert("args", schema_view(self.args.as_ref()));
        m.insert("returns", schema_view(self.returns.as_ref()));
        Value::Map(m)
    }
}

fn text_numbers(v: &Value) -> Value {
    match v {
        Value::Int(_) | Value::BigInt(_) | Value::Float(_) => {
            Value::Str(canonical_number(v).unwrap_or_default())
        }
        Value::List(l) => Value::List(l.iter().map(text_numbers).collect()),
        Value::Map(m) => Value::Map(
            m.iter()
                .map(|(k, v)| (k.clone(), text_numbers(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn schema_view(s: Option<&Schema>) -> Value {
    let Some(s) = s else { return Value::Null };
    let opt_u = |n: Option<u64>| n.map_or(Value::Null, |n| Value::Str(n.to_string()));
    let opt_v = |v: &Option<Value>| v.as_ref().map_or(Value::Null, text_numbers);
    let opt_l = |l: &Option<Vec<Value>>| {
        l.as_ref().map_or(Value::Null, |l| {
            Value::List(l.iter().map(text_numbers).collect())
        })
    };
    let opt_s = |s: Option<&str>| s.map_or(Value::Null, |s| Value::Str(s.to_string()));
    let mut fields = Map::new();
    for f in &s.fields {
        let mut m = Map::new();
        m.insert("type", Value::Str(f.ty.as_str().into()));
        m.insert("required", Value::Bool(f.required));
        m.insert("enum", opt_l(&f.enum_values));
        m.insert("max_length", opt_u(f.max_length));
        m.insert("min_length", opt_u(f.min_length));
        m.insert("pattern", opt_s(f.pattern.as_ref().map(|p| p.source())));
        m.insert("sensitive", opt_s(f.sensitive.map(|x| x.as_str())));
        m.insert("nullable", Value::Bool(f.nullable));
        m.insert("item_enum", opt_l(&f.item_enum));
        m.insert("item_type", opt_s(f.item_type.map(|t| t.as_str())));
        m.insert("max_items", opt_u(f.max_items));
        m.insert("min_items", opt_u(f.min_items));
        m.insert("unique_items", Value::Bool(f.unique_items));
        m.insert("minimum", opt_v(&f.minimum));
        m.insert("maximum", opt_v(&f.maximum));
        m.insert("exclusive_minimum", opt_v(&f.exclusive_minimum));
        m.insert("exclusive_maximum", opt_v(&f.exclusive_maximum));
        m.insert("multiple_of", opt_v(&f.multiple_of));
        fields.push_unchecked(f.name.clone(), Value::Map(m));
    }
    let mut m = Map::new();
    m.insert("allow_extra", Value::Bool(s.allow_extra));
    m.insert("fields", Value::Map(fields));
    Value::Map(m)
}

impl ToolSource {
    /// `schema_sha256`: the digest of the per-kind `shape`.
    pub fn schema_sha256(&self) -> String {
        digest(&self.shape)
    }

    /// `description_sha256`: the digest of the description, or of JSON null when absent.
    pub fn description_sha256(&self) -> String {
        digest(&self.description.clone().map_or(Value::Null, Value::Str))
    }

    /// `contract_sha256` of the projected contract.
    pub fn contract_sha256(&self) -> String {
        self.contract.contract_sha256()
    }
}

fn description_of(m: &Map, what: &str) -> Result<Option<String>, PolicyError> {
    match m.get("description") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Str(s)) => Ok(Some(s.clone())),
        Some(_) => Err(bad(format!(
            "{what}: `description` must be a string or null"
        ))),
    }
}

fn name_of(m: &Map, what: &str) -> Result<String, PolicyError> {
    match m.get("name") {
        Some(Value::Str(s)) if !s.is_empty() && !s.chars().any(char::is_control) => Ok(s.clone()),
        Some(Value::Str(_)) => Err(bad(format!(
            "{what}: the tool name is empty or holds a control character"
        ))),
        _ => Err(bad(format!("{what}: the tool has no string `name`"))),
    }
}

fn schema_member<'a>(m: &'a Map, key: &str, name: &str) -> Result<Option<&'a Value>, PolicyError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v @ Value::Map(_)) => Ok(Some(v)),
        Some(_) => Err(bad(format!(
            "tool `{name}`: `{key}` must be a schema object"
        ))),
    }
}

/// Projects one MCP tool definition (`{name, description?, inputSchema, outputSchema?,
/// …}`). The shape is `{input, output, rest}`, `rest` being every other field of the
/// definition (null when there is none).
///
/// # Errors
/// `invalid_import` (see the module text), or the loader's field codes.
pub fn from_mcp(tool: &Value) -> Result<ToolSource, PolicyError> {
    let Value::Map(m) = tool else {
        return Err(bad("an MCP tool definition must be an object"));
    };
    let name = name_of(m, "MCP tool")?;
    let description = description_of(m, &format!("tool `{name}`"))?;
    let input = schema_member(m, "inputSchema", &name)?;
    let output = schema_member(m, "outputSchema", &name)?;
    let mut rest = Map::new();
    let mut keys: Vec<&String> = m
        .keys()
        .filter(|k| {
            !matches!(
                k.as_str(),
                "name" | "description" | "inputSchema" | "outputSchema"
            )
        })
        .collect();
    keys.sort();
    for k in keys {
        rest.push_unchecked(k.clone(), m.get(k).cloned().unwrap_or(Value::Null));
    }
    let mut shape = Map::new();
    shape.insert("input", input.cloned().unwrap_or(Value::Null));
    shape.insert("output", output.cloned().unwrap_or(Value::Null));
    shape.insert(
        "rest",
        if rest.is_empty() {
            Value::Null
        } else {
            Value::Map(rest)
        },
    );
    let contract = Contract {
        args: input.map(|s| project(s, &name, "args")).transpose()?,
        returns: output.map(|s| project(s, &name, "returns")).transpose()?,
    };
    Ok(ToolSource {
        name,
        kind: SourceKind::Mcp,
        description,
        shape: Value::Map(shape),
        contract,
    })
}

/// Projects one OpenAI tool (`{type: "function", function: {…}}`, or the flat and legacy
/// `{name, description?, parameters}`). The shape is `{input, output: null, rest:
/// {container, definition}}`.
///
/// # Errors
/// `invalid_import`, or the loader's field codes.
pub fn from_openai(tool: &Value) -> Result<ToolSource, PolicyError> {
    let Value::Map(outer) = tool else {
        return Err(bad("an OpenAI tool definition must be an object"));
    };
    if let Some(t) = outer.get("type")
        && t.as_str() != Some("function")
    {
        return Err(bad("an OpenAI tool must be of type `function`"));
    }
    let (body, wrapped) = match outer.get("function") {
        None => (outer, false),
        Some(Value::Map(f)) => (f, true),
        Some(_) => return Err(bad("an OpenAI tool's `function` must be an object")),
    };
    let name = name_of(body, "OpenAI tool")?;
    let description = description_of(body, &format!("tool `{name}`"))?;
    let params = schema_member(body, "parameters", &name)?;
    let sorted_rest = |m: &Map, skip: &[&str]| -> Value {
        let mut keys: Vec<&String> = m.keys().filter(|k| !skip.contains(&k.as_str())).collect();
        keys.sort();
        let mut r = Map::new();
        for k in keys {
            r.push_unchecked(k.clone(), m.get(k).cloned().unwrap_or(Value::Null));
        }
        if r.is_empty() {
            Value::Null
        } else {
            Value::Map(r)
        }
    };
    let container = if wrapped {
        match sorted_rest(outer, &["function"]) {
            Value::Null => Value::Map(Map::new()),
            v => v,
        }
    } else {
        Value::Null
    };
    let definition = sorted_rest(body, &["name", "description", "parameters"]);
    let mut rest = Map::new();
    rest.insert("container", container);
    rest.insert("definition", definition);
    let mut shape = Map::new();
    shape.insert("input", params.cloned().unwrap_or(Value::Null));
    shape.insert("output", Value::Null);
    shape.insert("rest", Value::Map(rest));
    let contract = Contract {
        args: params.map(|s| project(s, &name, "args")).transpose()?,
        returns: None,
    };
    Ok(ToolSource {
        name,
        kind: SourceKind::OpenAi,
        description,
        shape: Value::Map(shape),
        contract,
    })
}

/// Reads a tool listing of `kind`: `{"tools": [...]}` (an MCP `tools/list` result, or
/// OpenAI `tools`/`functions`) or a bare list. Every tool must project; a name given
/// twice is refused.
///
/// # Errors
/// `invalid_import` for a malformed listing, else the first tool's error.
pub fn read_listing(kind: SourceKind, listing: &Value) -> Result<Vec<ToolSource>, PolicyError> {
    let list = match listing {
        Value::List(l) => l,
        Value::Map(m) => match m.get("tools").or_else(|| m.get("functions")) {
            Some(Value::List(l)) => l,
            _ => {
                return Err(bad(
                    "a tool listing is a list, or an object with a `tools` list",
                ));
            }
        },
        _ => {
            return Err(bad(
                "a tool listing is a list, or an object with a `tools` list",
            ));
        }
    };
    let mut out: Vec<ToolSource> = Vec::with_capacity(list.len());
    for t in list {
        let s = match kind {
            SourceKind::Mcp => from_mcp(t)?,
            SourceKind::OpenAi => from_openai(t)?,
            SourceKind::OpenApi => {
                return Err(bad("OpenAPI documents are read by the OpenAPI reader"));
            }
        };
        if out.iter().any(|o| o.name == s.name) {
            return Err(bad(format!("tool `{}` is declared twice", s.name)));
        }
        out.push(s);
    }
    Ok(out)
}

/// Projects a JSON Schema argument (or return) object into a [`Schema`], checked by the
/// policy loader's own field rules. `name` and `what` (`args` / `returns`) only label
/// errors.
///
/// # Errors
/// `invalid_import`, or the loader's field codes (`invalid_field`, `unsafe_pattern`, …).
pub fn project(schema: &Value, name: &str, what: &str) -> Result<Schema, PolicyError> {
    let bundle = project_to_bundle(schema).map_err(|e| label(e, name, what))?;
    crate::load::schema_from_bundle(&bundle, what)
        .map_err(|e| label(e, name, what))?
        .ok_or_else(|| bad(format!("tool `{name}`: {what} projects to no schema")))
}

fn label(mut e: PolicyError, name: &str, what: &str) -> PolicyError {
    e.message = format!("tool `{name}` {what}: {}", e.message);
    e
}

/// Projects a JSON Schema object into the bundle vocabulary (`{field: {type, …},
/// "$allow_extra"?}`): the text `hcp policy init` writes and [`project`] loads.
///
/// # Errors
/// `invalid_import` for what the projection cannot carry.
pub fn project_to_bundle(schema: &Value) -> Result<Value, PolicyError> {
    let obj = resolve(schema, schema, "the argument object")?;
    let Value::Map(o) = obj.as_ref() else {
        return Err(bad("the argument schema must be an object"));
    };
    match o.get("type") {
        None => {}
        Some(Value::Str(t)) if t == "object" => {}
        Some(_) => return Err(bad("the argument schema must be of type `object`")),
    }
    refuse_unprojected(o, &OBJECT_REFUSED, "the argument object")?;
    let props = match o.get("properties") {
        None => Map::new(),
        Some(Value::Map(p)) => p.clone(),
        Some(_) => return Err(bad("`properties` must be an object")),
    };
    if props.len() > MAX_PROPERTIES {
        return Err(bad(format!(
            "{} arguments are more than the {MAX_PROPERTIES} a tool may declare",
            props.len()
        )));
    }
    let required: Vec<&str> = match o.get("required") {
        None => Vec::new(),
        Some(Value::List(l)) => l
            .iter()
            .map(|v| {
                v.as_str()
                    .ok_or_else(|| bad("`required` must be a list of property names"))
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(bad("`required` must be a list of property names")),
    };
    let mut out = Map::new();
    for (k, prop) in props.iter() {
        let f = field(prop, required.contains(&k.as_str()), schema, k)?;
        out.push_unchecked(k.clone(), Value::Map(f));
    }
    if o.get("additionalProperties") == Some(&Value::Bool(true)) {
        out.push_unchecked("$allow_extra".into(), Value::Bool(true));
    }
    Ok(Value::Map(out))
}

/// Assertion keywords a flat field cannot hold: refused by name.
const REFUSED: [&str; 26] = [
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "$dynamicRef",
    "$recursiveRef",
    "extends",
    "disallow",
    "patternProperties",
    "unevaluatedProperties",
    "propertyNames",
    "dependencies",
    "dependentSchemas",
    "dependentRequired",
    "minProperties",
    "maxProperties",
    "prefixItems",
    "additionalItems",
    "unevaluatedItems",
    "contains",
    "minContains",
    "maxContains",
    "divisibleBy",
];
/// At the argument object: the same (its `properties`/`required` are the contract).
const OBJECT_REFUSED: [&str; 26] = REFUSED;

fn refuse_unprojected(m: &Map, refused: &[&str], what: &str) -> Result<(), PolicyError> {
    let mut hit: Vec<&str> = m
        .keys()
        .map(String::as_str)
        .filter(|k| refused.contains(k))
        .collect();
    if hit.is_empty() {
        return Ok(());
    }
    hit.sort_unstable();
    Err(bad(format!(
        "{what} declares {}, which the projection does not carry; dropping it would give a \
         contract weaker than its source, so the tool is refused (write it by hand in the policy)",
        hit.join(", ")
    )))
}

/// Follows local `$ref`s from `node` (against `root`), composing the keywords written
/// beside a reference with its target: both must hold, so a bound present in both keeps
/// the tighter value and any other disagreement is refused.
fn resolve<'a>(
    node: &'a Value,
    root: &'a Value,
    what: &str,
) -> Result<std::borrow::Cow<'a, Value>, PolicyError> {
    use std::borrow::Cow;
    let mut cur: Cow<'a, Value> = Cow::Borrowed(node);
    let mut seen: Vec<String> = Vec::new();
    loop {
        let Value::Map(m) = cur.as_ref() else {
            return Ok(cur);
        };
        let Some(r) = m.get("$ref") else {
            return Ok(cur);
        };
        let Some(ptr) = r.as_str().and_then(|s| s.strip_prefix('#')) else {
            return Err(bad(format!(
                "{what}: `$ref` {} is not a pointer into this document (nothing is fetched)",
                short(r)
            )));
        };
        if seen.iter().any(|s| s == ptr) || seen.len() >= MAX_REF_DEPTH {
            return Err(bad(format!(
                "{what}: `$ref` `#{ptr}` is recursive or more than {MAX_REF_DEPTH} deep"
            )));
        }
        seen.push(ptr.to_string());
        let target = pointer(root, ptr).ok_or_else(|| {
            bad(format!(
                "{what}: `$ref` `#{ptr}` names nothing in this document"
            ))
        })?;
        let Value::Map(t) = target else {
            return Err(bad(format!(
                "{what}: `$ref` `#{ptr}` is not a schema object"
            )));
        };
        let mut merged = t.clone();
        for (k, v) in m.iter() {
            if k == "$ref" || ANNOTATIONS.contains(&k.as_str()) {
                continue;
            }
            match merged.get(k) {
                None => merged.push_unchecked(k.clone(), v.clone()),
                Some(w) if w == v => {}
                Some(w) => {
                    let tighter = tighter(k, w, v).ok_or_else(|| {
                        bad(format!(
                            "{what}: `{k}` beside `$ref` `#{ptr}` disagrees with its target"
                        ))
                    })?;
                    merged.insert(k.clone(), tighter);
                }
            }
        }
        cur = Cow::Owned(Value::Map(merged));
    }
}

fn tighter(k: &str, a: &Value, b: &Value) -> Option<Value> {
    let (x, y) = (a.as_f64()?, b.as_f64()?);
    let low = matches!(k, "maxLength" | "maxItems" | "maximum" | "exclusiveMaximum");
    let high = matches!(k, "minLength" | "minItems" | "minimum" | "exclusiveMinimum");
    if matches!(a, Value::Bool(_)) || matches!(b, Value::Bool(_)) {
        return None;
    }
    match (low, high) {
        (true, _) => Some(if x <= y { a.clone() } else { b.clone() }),
        (_, true) => Some(if x >= y { a.clone() } else { b.clone() }),
        _ => None,
    }
}

/// A JSON pointer (RFC 6901, the part after `#`) into `root`.
fn pointer<'a>(root: &'a Value, ptr: &str) -> Option<&'a Value> {
    if ptr.is_empty() {
        return Some(root);
    }
    let mut cur = root;
    for raw in ptr.strip_prefix('/')?.split('/') {
        let part = raw.replace("~1", "/").replace("~0", "~");
        cur = match cur {
            Value::Map(m) => m.get(&part)?,
            Value::List(l) => l.get(part.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(cur)
}

fn short(v: &Value) -> String {
    let s = match v {
        Value::Str(s) => format!("`{s}`"),
        other => format!("of type {}", other.type_name()),
    };
    s.chars().take(80).collect()
}

/// Keywords that assert nothing about a value.
const ANNOTATIONS: [&str; 9] = [
    "title",
    "description",
    "default",
    "examples",
    "format",
    "$comment",
    "readOnly",
    "writeOnly",
    "deprecated",
];

const JS_TYPES: [&str; 6] = ["string", "integer", "number", "boolean", "array", "object"];

/// `type` → (bundle type, nullable). Absent is `any`.
fn js_type(t: Option<&Value>, what: &str) -> Result<(&'static str, bool), PolicyError> {
    let one = |s: &str| -> Result<&'static str, PolicyError> {
        JS_TYPES
            .iter()
            .copied()
            .find(|t| *t == s)
            .ok_or_else(|| bad(format!("{what}: unknown type `{s}`")))
    };
    match t {
        None => Ok(("any", false)),
        Some(Value::Str(s)) if s == "null" => Ok(("null", true)),
        Some(Value::Str(s)) => Ok((one(s)?, false)),
        Some(Value::List(l)) => {
            let mut nullable = false;
            let mut concrete: Vec<&str> = Vec::new();
            for x in l {
                match x.as_str() {
                    Some("null") => nullable = true,
                    Some(s) => concrete.push(one(s)?),
                    None => return Err(bad(format!("{what}: `type` lists a non-string"))),
                }
            }
            match concrete.as_slice() {
                [] => Ok(("null", true)),
                [t] => Ok((one(t)?, nullable)),
                _ => Err(bad(format!(
                    "{what}: a union of types ({}) has no single field to project onto",
                    concrete.join(", ")
                ))),
            }
        }
        Some(_) => Err(bad(format!("{what}: `type` must be a string or a list"))),
    }
}

/// `anyOf`/`oneOf` of one schema and `{type: null}`: that schema, nullable.
fn collapse_null_union(m: &Map, root: &Value, what: &str) -> Result<(Map, bool), PolicyError> {
    for comb in ["anyOf", "oneOf"] {
        let Some(Value::List(branches)) = m.get(comb) else {
            continue;
        };
        let mut concrete: Vec<Map> = Vec::new();
        let mut nulls = 0;
        for b in branches {
            let r = resolve(b, root, what)?;
            match r.as_ref() {
                Value::Map(bm) if bm.get("type").and_then(Value::as_str) == Some("null") => {
                    nulls += 1
                }
                Value::Map(bm) => concrete.push(bm.clone()),
                _ => return Ok((m.clone(), false)),
            }
        }
        if nulls > 0 && concrete.len() == 1 {
            let mut out = concrete.remove(0);
            for (k, v) in m.iter() {
                if k != comb && out.get(k).is_none() {
                    out.push_unchecked(k.clone(), v.clone());
                }
            }
            return Ok((out, true));
        }
    }
    Ok((m.clone(), false))
}

fn fold_const(mut m: Map, what: &str) -> Result<Map, PolicyError> {
    let Some(c) = m.remove("const") else {
        return Ok(m);
    };
    if m.contains_key("enum") {
        return Err(bad(format!(
            "{what}: both `const` and `enum`; write one of them"
        )));
    }
    if !m.contains_key("type") {
        let t = match &c {
            Value::Bool(_) => Some("boolean"),
            Value::Int(_) | Value::BigInt(_) => Some("integer"),
            Value::Float(_) => Some("number"),
            Value::Str(_) => Some("string"),
            Value::List(_) => Some("array"),
            Value::Map(_) => Some("object"),
            _ => None,
        };
        if let Some(t) = t {
            m.push_unchecked("type".into(), Value::Str(t.into()));
        }
    }
    m.push_unchecked("enum".into(), Value::List(vec![c]));
    Ok(m)
}

fn count(k: &str, v: &Value, what: &str) -> Result<Value, PolicyError> {
    match v {
        Value::Int(i) if *i >= 0 => Ok(Value::Int(*i)),
        Value::BigInt(s) if !s.starts_with('-') => Ok(v.clone()),
        Value::Float(f) if f.is_finite() && *f >= 0.0 && f.fract() == 0.0 && *f < 9e15 => {
            Ok(Value::Int(*f as i64))
        }
        _ => Err(bad(format!(
            "{what}: `{k}` must be a non-negative whole number"
        ))),
    }
}

fn number(k: &str, v: &Value, what: &str) -> Result<Option<Value>, PolicyError> {
    match v {
        Value::Bool(_) if matches!(k, "exclusiveMinimum" | "exclusiveMaximum") => Ok(None),
        Value::Int(_) | Value::BigInt(_) => Ok(Some(v.clone())),
        Value::Float(f) if f.is_finite() => Ok(Some(v.clone())),
        _ => Err(bad(format!("{what}: `{k}` must be a finite number"))),
    }
}

fn value_fits(ty: &str, v: &Value) -> bool {
    match ty {
        "string" => matches!(v, Value::Str(_)),
        "integer" => v.is_integer() || matches!(v, Value::Float(f) if f.fract() == 0.0),
        "number" => v.is_number(),
        "boolean" => matches!(v, Value::Bool(_)),
        "array" => matches!(v, Value::List(_)),
        "object" => matches!(v, Value::Map(_)),
        _ => true,
    }
}

fn enum_of(v: &Value, ty: &str, nullable: bool, what: &str) -> Result<Value, PolicyError> {
    let Value::List(l) = v else {
        return Err(bad(format!("{what}: `enum` must be a non-empty list")));
    };
    if l.is_empty() {
        return Err(bad(format!("{what}: `enum` must be a non-empty list")));
    }
    for x in l {
        let allowed_null = matches!(x, Value::Null) && nullable;
        if !allowed_null && !value_fits(ty, x) {
            return Err(bad(format!(
                "{what}: an `enum` member of type {} contradicts type `{ty}`; no call could pass",
                x.type_name()
            )));
        }
    }
    Ok(v.clone())
}

const SCALAR_BOUNDS: [(&str, &str); 8] = [
    ("minLength", "min_length"),
    ("maxLength", "max_length"),
    ("pattern", "pattern"),
    ("minimum", "minimum"),
    ("maximum", "maximum"),
    ("exclusiveMinimum", "exclusive_minimum"),
    ("exclusiveMaximum", "exclusive_maximum"),
    ("multipleOf", "multiple_of"),
];

/// One property → one bundle field.
fn field(prop: &Value, listed: bool, root: &Value, name: &str) -> Result<Map, PolicyError> {
    let what = format!("argument `{name}`");
    let r = resolve(prop, root, &what)?;
    let Value::Map(m) = r.as_ref() else {
        return Err(bad(format!("{what} must be a schema object")));
    };
    let (m, optional) = collapse_null_union(m, root, &what)?;
    let m = fold_const(m, &what)?;
    refuse_unprojected(&m, &REFUSED, &what)?;
    let (mut ty, mut nullable) = js_type(m.get("type"), &what)?;
    nullable |= optional;
    let mut out = Map::new();
    let null_only = ty == "null";
    if null_only {
        ty = "any";
    }
    out.push_unchecked("type".into(), Value::Str(ty.into()));
    out.push_unchecked("required".into(), Value::Bool(listed && !nullable));
    if nullable {
        out.push_unchecked("nullable".into(), Value::Bool(true));
    }
    match m.get("enum") {
        Some(e) => {
            out.push_unchecked("enum".into(), enum_of(e, ty, nullable, &what)?);
        }
        None if null_only => {
            out.push_unchecked("enum".into(), Value::List(vec![Value::Null]));
        }
        None => {}
    }
    // The element schema.
    let mut items = Map::new();
    if let Some(raw) = m.get("items") {
        if ty != "array" {
            return Err(bad(format!(
                "{what}: `items` on a field that is not an array"
            )));
        }
        let ri = resolve(raw, root, &what)?;
        let Value::Map(im) = ri.as_ref() else {
            return Err(bad(format!("{what}: `items` must be a schema object")));
        };
        let (im, item_nullable) = collapse_null_union(im, root, &what)?;
        let im = fold_const(im, &format!("{what} items"))?;
        let mut refused: Vec<&str> = REFUSED.to_vec();
        refused.extend(["items", "minItems", "maxItems", "uniqueItems"]);
        refuse_unprojected(&im, &refused, &format!("{what} items"))?;
        let (ity, _) = js_type(im.get("type"), &format!("{what} items"))?;
        if ity == "array" {
            return Err(bad(format!("{what}: arrays of arrays are not projected")));
        }
        if ity != "any" && ity != "null" && !item_nullable {
            out.push_unchecked("item_type".into(), Value::Str(ity.into()));
        }
        if let Some(e) = im.get("enum") {
            let ety = if item_nullable || ity == "null" {
                "any"
            } else {
                ity
            };
            out.push_unchecked("item_enum".into(), enum_of(e, ety, true, &what)?);
        } else if ity == "null" {
            out.push_unchecked("item_enum".into(), Value::List(vec![Value::Null]));
        }
        items = im;
    }
    for (js, ours) in SCALAR_BOUNDS {
        let v = m.get(js).or_else(|| items.get(js));
        let Some(v) = v else { continue };
        let pv = match js {
            "minLength" | "maxLength" => Some(count(js, v, &what)?),
            "pattern" => match v {
                Value::Str(_) => Some(v.clone()),
                _ => return Err(bad(format!("{what}: `pattern` must be a string"))),
            },
            _ => number(js, v, &what)?,
        };
        if let Some(pv) = pv {
            out.push_unchecked(ours.into(), pv);
        }
    }
    for (js, ours) in [("minItems", "min_items"), ("maxItems", "max_items")] {
        if let Some(v) = m.get(js) {
            out.push_unchecked(ours.into(), count(js, v, &what)?);
        }
    }
    if let Some(v) = m.get("uniqueItems") {
        match v {
            Value::Bool(true) if ty == "array" => {
                out.push_unchecked("unique_items".into(), Value::Bool(true))
            }
            Value::Bool(_) => {}
            _ => return Err(bad(format!("{what}: `uniqueItems` must be true or false"))),
        }
    }
    let mut sensitive = sensitivity(&m, &what)?;
    if let Some(e) = sensitivity(&items, &what)?
        && (sensitive.is_none() || e == "secret")
    {
        sensitive = Some(e);
    }
    if let Some(s) = sensitive {
        out.push_unchecked("sensitive".into(), Value::Str(s.into()));
    }
    Ok(out)
}

/// `x-sensitive`: `pii` or `secret`; a near-miss spelling or another value is refused
/// (it would import as unredacted, which nothing downstream can tell apart).
fn sensitivity(m: &Map, what: &str) -> Result<Option<&'static str>, PolicyError> {
    for k in m.keys() {
        let folded: String = k.to_lowercase().replace('_', "-");
        if k != "x-sensitive"
            && (folded == "x-sensitive"
                || matches!(
                    folded.as_str(),
                    "x-sensitivity" | "x-sensitiv" | "x-pii" | "x-secret"
                ))
        {
            return Err(bad(format!(
                "{what}: `{k}` is not the marker; it is spelled exactly `x-sensitive`"
            )));
        }
    }
    match m.get("x-sensitive") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Str(s)) if s == "pii" => Ok(Some("pii")),
        Some(Value::Str(s)) if s == "secret" => Ok(Some("secret")),
        Some(_) => Err(bad(format!(
            "{what}: `x-sensitive` must be `pii` or `secret`"
        ))),
    }
}
