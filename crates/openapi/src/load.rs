//! Loading a document: size, syntax, version, `$ref`s, `operationId`s and servers
//! (RUNTIME §1.3, "refuses what it cannot use").

use crate::error::{BadOpenapi, OperationError};
use crate::operation::{self, Method, Operation};
use crate::pointer::{self, join, shorten};
use crate::server::ServerUrl;
use serde_json::Value;
use std::collections::BTreeMap;

/// The largest document read, in bytes: 16 MiB. Large enough for the biggest public API
/// descriptions (GitHub's REST description is about 11 MB of JSON), small enough that
/// install never holds more than a few times that in memory. A larger document is refused
/// (`bad_openapi`) without being parsed.
pub const MAX_DOCUMENT_BYTES: usize = 16 * 1024 * 1024;

/// The OpenAPI version line of a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Version {
    /// `openapi: 3.0.x`: JSON Schema draft 4-like schemas (`nullable`, boolean
    /// `exclusiveMinimum`).
    #[serde(rename = "3.0")]
    V3_0,
    /// `openapi: 3.1.x`: JSON Schema 2020-12 (`type` arrays, numeric `exclusiveMinimum`).
    #[serde(rename = "3.1")]
    V3_1,
}

/// Where an operation sits in the document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OpSite {
    /// The HTTP method.
    pub method: Method,
    /// The path template as written (`/tasks/{taskId}`).
    pub path: String,
    /// Pointer of the path item (`/paths/~1tasks~1{taskId}`), after `$ref` resolution.
    pub item: String,
    /// Pointer of the operation object.
    pub op: String,
}

/// A loaded OpenAPI 3.0 or 3.1 document that passed the document-wide checks of
/// [`Document::parse`]. Operations are compiled on demand ([`Document::operation`]), so
/// a fault in an operation no verb uses does not refuse the document.
#[derive(Debug, Clone)]
pub struct Document {
    pub(crate) value: Value,
    pub(crate) version: Version,
    pub(crate) sites: BTreeMap<String, OpSite>,
}

const METHODS: [(&str, Method); 8] = [
    ("get", Method::Get),
    ("put", Method::Put),
    ("post", Method::Post),
    ("delete", Method::Delete),
    ("options", Method::Options),
    ("head", Method::Head),
    ("patch", Method::Patch),
    ("trace", Method::Trace),
];

/// Keys whose values are data, not description: `$ref` inside them is not a reference.
const DATA_KEYS: [&str; 5] = ["example", "examples", "default", "enum", "const"];

impl Document {
    /// Loads a document from its bytes: JSON (when the first character is `{`) or YAML.
    ///
    /// Refused, each with the JSON pointer of the fault: more than
    /// [`MAX_DOCUMENT_BYTES`]; not JSON or YAML, or a repeated key; not an object; no
    /// `openapi` field or one that is not `3.0.x` / `3.1.x` (a Swagger 2.0 document is
    /// named as such); a `$ref` that points outside the document, names nothing or
    /// loops; two operations with one `operationId`; a server URL (after its variables'
    /// defaults) whose scheme is not `http` or `https`.
    ///
    /// # Errors
    /// [`BadOpenapi`] for the first fault found.
    pub fn parse(bytes: &[u8]) -> Result<Self, BadOpenapi> {
        if bytes.len() > MAX_DOCUMENT_BYTES {
            return Err(BadOpenapi::at(
                "",
                format!(
                    "the document is {} bytes, more than the {} bytes (16 MiB) hcp reads",
                    bytes.len(),
                    MAX_DOCUMENT_BYTES
                ),
            ));
        }
        let text = std::str::from_utf8(bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes))
            .map_err(|e| {
                BadOpenapi::at(
                    "",
                    format!("the document is not UTF-8 (byte {})", e.valid_up_to()),
                )
            })?;
        let value = if text.trim_start().starts_with('{') {
            hcp_model::parse_strict::<hcp_model::StrictValue>(text)
                .map_err(|e| {
                    BadOpenapi::at(
                        "",
                        format!(
                            "not JSON: {} at line {} column {}",
                            e.message, e.line, e.column
                        ),
                    )
                })?
                .0
        } else {
            serde_saphyr::from_str::<hcp_model::StrictValue>(text)
                .map_err(|e| {
                    let first = e.to_string();
                    let first = first.lines().next().unwrap_or("").to_owned();
                    BadOpenapi::at("", format!("neither JSON nor YAML: {}", shorten(&first)))
                })?
                .0
        };
        Self::from_value(value)
    }

    /// [`Document::parse`] for a value already in memory (no size check).
    ///
    /// # Errors
    /// [`BadOpenapi`] for the first fault found.
    pub fn from_value(value: Value) -> Result<Self, BadOpenapi> {
        let Some(root) = value.as_object() else {
            return Err(BadOpenapi::at("", "the document is not an object"));
        };
        let version = match root.get("openapi") {
            Some(Value::String(v)) if v == "3.0" || v.starts_with("3.0.") => Version::V3_0,
            Some(Value::String(v)) if v == "3.1" || v.starts_with("3.1.") => Version::V3_1,
            Some(Value::String(v)) => {
                return Err(BadOpenapi::at(
                    "/openapi",
                    format!(
                        "OpenAPI `{}` is not 3.0 or 3.1, the versions hcp reads",
                        shorten(v)
                    ),
                ));
            }
            Some(_) => return Err(BadOpenapi::at("/openapi", "`openapi` is not a string")),
            None if root.contains_key("swagger") => {
                return Err(BadOpenapi::at(
                    "/swagger",
                    "this is a Swagger 2.0 document, not OpenAPI 3; convert it to OpenAPI 3.0 or 3.1",
                ));
            }
            None => {
                return Err(BadOpenapi::at(
                    "",
                    "not an OpenAPI 3 document: it has no `openapi` field",
                ));
            }
        };
        check_refs(&value, &value, "")?;
        let sites = index_operations(&value)?;
        for (ptr, _) in server_lists(&value, &sites) {
            check_servers(&value, &ptr)?;
        }
        Ok(Self {
            value,
            version,
            sites,
        })
    }

    /// The document's version line.
    pub fn version(&self) -> Version {
        self.version
    }

    /// Every `operationId`, sorted.
    pub fn operation_ids(&self) -> impl Iterator<Item = &str> {
        self.sites.keys().map(String::as_str)
    }

    /// Whether an operation has this `operationId`.
    pub fn has_operation(&self, id: &str) -> bool {
        self.sites.contains_key(id)
    }

    /// Compiles operation `id` into the arguments, request shape and credential placement
    /// of a verb (RUNTIME §1.3).
    ///
    /// # Errors
    /// [`OperationError::Unknown`] when no operation has that id; [`OperationError::Bad`]
    /// with the pointer of what hcp cannot call (see [`crate::operation`]).
    pub fn operation(&self, id: &str) -> Result<Operation, OperationError> {
        let site = self
            .sites
            .get(id)
            .ok_or_else(|| OperationError::Unknown(id.to_owned()))?;
        Ok(operation::compile(self, id, site)?)
    }

    /// The document's first server (`servers[0].url`, variables replaced by their
    /// defaults), resolved against `base` (where the document was fetched from) when it is
    /// relative. `None` when the document names no server, or only a relative one and
    /// there is no `base`: the operator must then set the pack's `server`.
    ///
    /// # Errors
    /// [`BadOpenapi`] at `/servers/0/url` for a URL that does not parse or whose scheme is
    /// not `http`/`https` once resolved.
    pub fn server(&self, base: Option<&url::Url>) -> Result<Option<ServerUrl>, BadOpenapi> {
        let raw = match self.value.pointer("/servers/0/url") {
            Some(Value::String(_)) => substitute(&self.value, "/servers/0")?,
            // No `servers`: OpenAPI's default is `/`, relative to the document.
            _ => "/".to_owned(),
        };
        let at = "/servers/0/url";
        match url::Url::parse(&raw) {
            Ok(u) => ServerUrl::from_url(u, at).map(Some),
            Err(url::ParseError::RelativeUrlWithoutBase) => match base {
                Some(b) => {
                    let joined = b.join(&raw).map_err(|e| {
                        BadOpenapi::at(at, format!("server URL `{}`: {e}", shorten(&raw)))
                    })?;
                    ServerUrl::from_url(joined, at).map(Some)
                }
                None => Ok(None),
            },
            Err(e) => Err(BadOpenapi::at(
                at,
                format!("server URL `{}`: {e}", shorten(&raw)),
            )),
        }
    }

    /// The document as a JSON value.
    pub fn value(&self) -> &Value {
        &self.value
    }
}

/// Walks every object for `$ref`, skipping data (`example`, `default`, `enum`, `const`,
/// extensions `x-…`), and refuses what [`pointer::resolve`] refuses.
fn check_refs(doc: &Value, v: &Value, at: &str) -> Result<(), BadOpenapi> {
    match v {
        Value::Object(o) => {
            if o.contains_key("$ref") {
                pointer::resolve(doc, v, at)?;
            }
            for (k, child) in o {
                if k == "$ref" || DATA_KEYS.contains(&k.as_str()) || k.starts_with("x-") {
                    continue;
                }
                // `properties`, `paths`, `components/*` are maps whose keys are names: a
                // property named `example` is still a schema.
                let names = matches!(
                    k.as_str(),
                    "properties"
                        | "patternProperties"
                        | "paths"
                        | "schemas"
                        | "parameters"
                        | "responses"
                        | "requestBodies"
                        | "headers"
                        | "securitySchemes"
                        | "links"
                        | "callbacks"
                        | "pathItems"
                        | "content"
                        | "variables"
                        | "encoding"
                        | "webhooks"
                        | "$defs"
                        | "definitions"
                );
                let child_at = join(at, k);
                if names && let Value::Object(m) = child {
                    for (name, grand) in m {
                        check_refs(doc, grand, &join(&child_at, name))?;
                    }
                } else {
                    check_refs(doc, child, &child_at)?;
                }
            }
            Ok(())
        }
        Value::Array(a) => {
            for (i, child) in a.iter().enumerate() {
                check_refs(doc, child, &format!("{at}/{i}"))?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn index_operations(doc: &Value) -> Result<BTreeMap<String, OpSite>, BadOpenapi> {
    let mut sites: BTreeMap<String, OpSite> = BTreeMap::new();
    let paths = match doc.get("paths") {
        None => return Ok(sites),
        Some(Value::Object(p)) => p,
        Some(_) => return Err(BadOpenapi::at("/paths", "`paths` is not an object")),
    };
    for (path, item) in paths {
        let item_at = join("/paths", path);
        if !path.starts_with('/') {
            return Err(BadOpenapi::at(
                item_at,
                format!("path `{}` does not start with `/`", shorten(path)),
            ));
        }
        let (item, item_ptr) = pointer::resolve(doc, item, &item_at)?;
        let Some(item) = item.as_object() else {
            return Err(BadOpenapi::at(item_at, "a path item is not an object"));
        };
        for (name, method) in METHODS {
            let Some(op) = item.get(name) else { continue };
            let op_at = join(&item_ptr, name);
            let Some(op) = op.as_object() else {
                return Err(BadOpenapi::at(op_at, "an operation is not an object"));
            };
            let Some(id) = op.get("operationId") else {
                continue;
            };
            let Some(id) = id.as_str() else {
                return Err(BadOpenapi::at(
                    join(&op_at, "operationId"),
                    "`operationId` is not a string",
                ));
            };
            if let Some(first) = sites.get(id) {
                return Err(BadOpenapi::at(
                    join(&op_at, "operationId"),
                    format!(
                        "two operations have `operationId` `{}`: this one and `{}`",
                        shorten(id),
                        first.op
                    ),
                ));
            }
            sites.insert(
                id.to_owned(),
                OpSite {
                    method,
                    path: path.clone(),
                    item: item_ptr.clone(),
                    op: op_at,
                },
            );
        }
    }
    Ok(sites)
}

/// Pointers of every `servers` list: the document's, each path item's and operation's.
fn server_lists<'a>(
    doc: &'a Value,
    sites: &'a BTreeMap<String, OpSite>,
) -> Vec<(String, &'a Value)> {
    let mut out = Vec::new();
    if let Some(s) = doc.get("servers") {
        out.push(("/servers".to_owned(), s));
    }
    for site in sites.values() {
        for base in [&site.item, &site.op] {
            let p = join(base, "servers");
            if let Some(s) = doc.pointer(&p)
                && !out.iter().any(|(q, _)| *q == p)
            {
                out.push((p, s));
            }
        }
    }
    out
}

fn check_servers(doc: &Value, list_at: &str) -> Result<(), BadOpenapi> {
    let Some(list) = doc.pointer(list_at) else {
        return Ok(());
    };
    let Some(list) = list.as_array() else {
        return Err(BadOpenapi::at(list_at, "`servers` is not an array"));
    };
    for i in 0..list.len() {
        let at = format!("{list_at}/{i}");
        let raw = substitute(doc, &at)?;
        let url_at = join(&at, "url");
        match url::Url::parse(&raw) {
            Ok(u) => {
                ServerUrl::from_url(u, &url_at)?;
            }
            Err(url::ParseError::RelativeUrlWithoutBase) => {}
            Err(e) => {
                return Err(BadOpenapi::at(
                    url_at,
                    format!("server URL `{}`: {e}", shorten(&raw)),
                ));
            }
        }
    }
    Ok(())
}

/// A server object's `url` with `{name}` replaced by `variables.name.default`.
fn substitute(doc: &Value, server_at: &str) -> Result<String, BadOpenapi> {
    let url_at = join(server_at, "url");
    let Some(url) = doc.pointer(&url_at).and_then(Value::as_str) else {
        return Err(BadOpenapi::at(url_at, "a server has no `url` string"));
    };
    let mut out = String::new();
    let mut rest = url;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let Some(close) = rest[open..].find('}') else {
            return Err(BadOpenapi::at(url_at, "a server URL has an unclosed `{`"));
        };
        let name = &rest[open + 1..open + close];
        let var_at = join(&join(&join(server_at, "variables"), name), "default");
        let Some(default) = doc.pointer(&var_at).and_then(Value::as_str) else {
            return Err(BadOpenapi::at(
                url_at,
                format!(
                    "server variable `{}` has no string `default`",
                    shorten(name)
                ),
            ));
        };
        out.push_str(default);
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}
