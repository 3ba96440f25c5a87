//! One operation of a document compiled into what a verb needs (RUNTIME §1.3): its
//! arguments (path, query and header parameters, then the top-level properties of its
//! JSON request body), its request shape and where the credential goes.
//!
//! Refused for the operation (`bad_openapi`, with the pointer), though not for the
//! document: a parameter or body property whose argument name another one already has;
//! a required parameter hcp cannot send (in a cookie, an object in a query, path or
//! header, a `style` other than `simple` for path and header or `form`,
//! `spaceDelimited`, `pipeDelimited` for query); a required request body that is not a
//! JSON object; a body on `GET`, `HEAD`, `OPTIONS` or `TRACE`; servers of its own that
//! differ from the document's; a security requirement hcp cannot meet (it places a
//! credential as `Authorization: Bearer …` for an `http` `bearer` scheme, or in the named
//! header for an `apiKey` scheme `in: header`); a required argument whose name is one
//! the runtime keeps (`confirm`, `apply`, `json`, `timeout`) or one that selects the
//! tenant (`project`, `tenant`, `principal`, `workdir`, `session`, …: the tenant comes
//! from the session, RUNTIME §4).
//!
//! Dropped, and listed in [`Operation::dropped`]: the optional ones of those, the header
//! parameters `Accept`, `Content-Type` and `Authorization` (OpenAPI says they are
//! ignored), a header parameter the credential's header overrides, `readOnly` body
//! properties.

use crate::error::BadOpenapi;
use crate::load::{Document, OpSite};
use crate::pointer::{self, join, shorten};
use crate::schema::{self, JsonType, Schema};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// An HTTP method of an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Method {
    /// `GET`.
    Get,
    /// `PUT`.
    Put,
    /// `POST`.
    Post,
    /// `DELETE`.
    Delete,
    /// `OPTIONS`.
    Options,
    /// `HEAD`.
    Head,
    /// `PATCH`.
    Patch,
    /// `TRACE`.
    Trace,
}

impl Method {
    /// The method token (`GET`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "GET",
            Self::Put => "PUT",
            Self::Post => "POST",
            Self::Delete => "DELETE",
            Self::Options => "OPTIONS",
            Self::Head => "HEAD",
            Self::Patch => "PATCH",
            Self::Trace => "TRACE",
        }
    }

    fn bodiless(self) -> bool {
        matches!(self, Self::Get | Self::Head | Self::Options | Self::Trace)
    }
}

/// Where an argument goes in the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ArgIn {
    /// A `{name}` segment of the path.
    Path,
    /// The query string.
    Query,
    /// A request header.
    Header,
    /// A top-level property of the JSON request body.
    Body,
}

impl ArgIn {
    /// `path`, `query`, `header` or `body`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Path => "path",
            Self::Query => "query",
            Self::Header => "header",
            Self::Body => "body",
        }
    }
}

/// How an array in the query is written (OpenAPI `style` and `explode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueryStyle {
    /// `name=a&name=b` (`form`, `explode: true`, the default).
    #[default]
    FormExploded,
    /// `name=a,b` (`form`, `explode: false`).
    Form,
    /// `name=a%20b`.
    SpaceDelimited,
    /// `name=a|b`.
    PipeDelimited,
}

/// One argument of a verb: a parameter or a body property.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArgSpec {
    /// The argument's name (`^[a-z_][a-z0-9_]*$`): the document's name when it already has
    /// that form, else its snake_case (`userId` → `user_id`, `X-Request-Id` →
    /// `x_request_id`).
    pub name: String,
    /// The parameter's or property's name as the document writes it (what is sent).
    pub wire: String,
    /// Where it goes.
    #[serde(rename = "in")]
    pub location: ArgIn,
    /// Whether a call must give it.
    pub required: bool,
    /// Its schema (type, enum, bounds …).
    pub schema: Schema,
    /// The parameter's description (else its schema's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// For a query parameter: how an array is written.
    #[serde(default, skip_serializing_if = "is_default_style")]
    pub style: QueryStyle,
    /// The parameter is `content`-typed (`application/json`): its value is sent as JSON
    /// text.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub json: bool,
}

fn is_default_style(s: &QueryStyle) -> bool {
    *s == QueryStyle::FormExploded
}

/// A parameter or property of the document that is not an argument, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dropped {
    /// Its name as the document writes it.
    pub wire: String,
    /// Where it would have gone (`cookie` included).
    #[serde(rename = "in")]
    pub location: String,
    /// Why hcp does not pass it, lowercase.
    pub why: String,
}

/// Where the credential goes (RUNTIME §1.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Auth {
    /// No credential is sent.
    None,
    /// `Authorization: Bearer <credential>` (`type: http`, `scheme: bearer`).
    Bearer {
        /// The security scheme's name in the document.
        scheme: String,
    },
    /// `<header>: <credential>` (`type: apiKey`, `in: header`).
    ApiKeyHeader {
        /// The security scheme's name in the document.
        scheme: String,
        /// The header name.
        header: String,
    },
}

/// The operation's security, as hcp meets it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Security {
    /// Where the credential goes.
    pub auth: Auth,
    /// Whether the document also allows the call without one (an empty requirement
    /// `{}`): then a call without a credential is sent without it.
    pub optional: bool,
}

/// The JSON request body of an operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Body {
    /// The media type sent as `Content-Type` (`application/json`).
    pub content_type: String,
    /// Whether the document requires a body: then `{}` is sent when no body argument is
    /// given.
    pub required: bool,
}

/// One operation, compiled: what exec needs to validate a call and build its request.
/// It is a value (serializable), so it can be kept beside the pinned document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Operation {
    /// The `operationId`.
    pub id: String,
    /// The HTTP method.
    pub method: Method,
    /// The path template as the document writes it (`/tasks/{taskId}`).
    pub path: String,
    /// `summary`, else `description`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The arguments, in order: path, query and header parameters as the document lists
    /// them, then body properties by name.
    pub args: Vec<ArgSpec>,
    /// The JSON body, when the operation takes one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Body>,
    /// Where the credential goes.
    pub security: Security,
    /// What is not an argument.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<Dropped>,
    /// JSON pointer of the operation object in the document.
    pub pointer: String,
}

/// Argument names the runtime keeps for itself (RUNTIME §1.2).
pub const RESERVED_NAMES: [&str; 4] = ["confirm", "apply", "json", "timeout"];
/// Argument names that would select the tenant, which comes from the session (RUNTIME §4).
pub const TENANT_NAMES: [&str; 8] = [
    "project",
    "project_id",
    "tenant",
    "tenant_id",
    "principal",
    "principal_id",
    "workdir",
    "session",
];

impl Operation {
    /// The verb's arguments (RUNTIME §1.3), in order.
    pub fn arguments(&self) -> &[ArgSpec] {
        &self.args
    }

    /// The argument named `name`.
    pub fn argument(&self, name: &str) -> Option<&ArgSpec> {
        self.args.iter().find(|a| a.name == name)
    }

    /// The arguments as one JSON Schema 2020-12 object (what `hcp mcp` shows as a tool's
    /// `inputSchema`): `properties` by argument name, `required`,
    /// `additionalProperties: false`.
    pub fn input_schema(&self) -> Value {
        let mut props = Map::new();
        let mut required = Vec::new();
        for a in &self.args {
            let mut s = a.schema.to_json_schema();
            if let (Some(d), Value::Object(o)) = (&a.description, &mut s) {
                o.insert("description".into(), d.clone().into());
            }
            props.insert(a.name.clone(), s);
            if a.required {
                required.push(Value::from(a.name.as_str()));
            }
        }
        let mut o = Map::new();
        o.insert("type".into(), "object".into());
        o.insert("properties".into(), Value::Object(props));
        if !required.is_empty() {
            o.insert("required".into(), Value::Array(required));
        }
        o.insert("additionalProperties".into(), false.into());
        Value::Object(o)
    }
}

/// An argument name of `wire`: itself when it is `^[a-z_][a-z0-9_]*$`, else its
/// snake_case.
pub fn arg_name(wire: &str) -> String {
    let mut out = String::new();
    let mut prev_word = false;
    for c in wire.chars() {
        if c.is_ascii_uppercase() {
            if prev_word && !out.ends_with('_') {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
            prev_word = false;
        } else if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' {
            out.push(c);
            prev_word = c != '_';
        } else {
            if !out.is_empty() && !out.ends_with('_') {
                out.push('_');
            }
            prev_word = false;
        }
    }
    while out.ends_with('_') && out.len() > 1 {
        out.pop();
    }
    if out.is_empty() || out == "_" {
        return "arg".into();
    }
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

struct Cx<'a> {
    doc: &'a Document,
    args: Vec<(ArgSpec, String)>,
    dropped: Vec<Dropped>,
}

impl Cx<'_> {
    /// Adds an argument, or drops/refuses it by its name.
    fn add(&mut self, a: ArgSpec, at: String) -> Result<(), BadOpenapi> {
        let why = if RESERVED_NAMES.contains(&a.name.as_str()) {
            Some(format!(
                "its argument name `{}` is kept by the runtime",
                a.name
            ))
        } else if TENANT_NAMES.contains(&a.name.as_str()) {
            Some(format!(
                "its argument name `{}` would select the tenant, which comes from the session",
                a.name
            ))
        } else {
            None
        };
        if let Some(why) = why {
            if a.required {
                return Err(BadOpenapi::at(
                    at,
                    format!(
                        "required {} `{}`: {why}",
                        a.location.as_str(),
                        shorten(&a.wire)
                    ),
                ));
            }
            self.dropped.push(Dropped {
                wire: a.wire,
                location: a.location.as_str().into(),
                why,
            });
            return Ok(());
        }
        if let Some((other, other_at)) = self.args.iter().find(|(o, _)| o.name == a.name) {
            return Err(BadOpenapi::at(
                at,
                format!(
                    "{} `{}` and {} `{}` (at `{other_at}`) would both be argument `{}`",
                    a.location.as_str(),
                    shorten(&a.wire),
                    other.location.as_str(),
                    shorten(&other.wire),
                    a.name
                ),
            ));
        }
        self.args.push((a, at));
        Ok(())
    }

    /// Drops an optional parameter, refuses a required one.
    fn cannot(
        &mut self,
        required: bool,
        wire: &str,
        location: &str,
        at: &str,
        why: String,
    ) -> Result<(), BadOpenapi> {
        if required {
            return Err(BadOpenapi::at(
                at,
                format!("required {location} parameter `{}`: {why}", shorten(wire)),
            ));
        }
        self.dropped.push(Dropped {
            wire: wire.to_owned(),
            location: location.to_owned(),
            why,
        });
        Ok(())
    }
}

pub(crate) fn compile(doc: &Document, id: &str, site: &OpSite) -> Result<Operation, BadOpenapi> {
    let v = &doc.value;
    let op = v
        .pointer(&site.op)
        .and_then(Value::as_object)
        .ok_or_else(|| BadOpenapi::at(&site.op, "the operation is not an object"))?;
    for base in [&site.item, &site.op] {
        let at = join(base, "servers");
        if let Some(own) = v.pointer(&at)
            && Some(own) != v.get("servers")
        {
            return Err(BadOpenapi::at(
                at,
                "servers of its own: hcp sends every request of a pack to the document's first server",
            ));
        }
    }
    let mut cx = Cx {
        doc,
        args: Vec::new(),
        dropped: Vec::new(),
    };
    // Parameters: the path item's, overridden by the operation's of the same name and `in`.
    let mut params: Vec<(String, &Map<String, Value>)> = Vec::new();
    for base in [&site.item, &site.op] {
        let list_at = join(base, "parameters");
        let Some(list) = v.pointer(&list_at) else {
            continue;
        };
        let Some(list) = list.as_array() else {
            return Err(BadOpenapi::at(list_at, "`parameters` is not an array"));
        };
        for (i, p) in list.iter().enumerate() {
            let p_at = format!("{list_at}/{i}");
            let (p, _) = pointer::resolve(v, p, &p_at)?;
            let Some(p) = p.as_object() else {
                return Err(BadOpenapi::at(p_at, "a parameter is not an object"));
            };
            let key = |p: &Map<String, Value>| {
                (
                    p.get("name").and_then(Value::as_str).map(str::to_owned),
                    p.get("in").and_then(Value::as_str).map(str::to_owned),
                )
            };
            let k = key(p);
            params.retain(|(_, q)| key(q) != k);
            params.push((p_at, p));
        }
    }
    for (at, p) in params {
        parameter(&mut cx, &at, p, site)?;
    }
    // Every `{name}` of the path template must be a path parameter.
    for seg in template_names(&site.path) {
        if !cx
            .args
            .iter()
            .any(|(a, _)| a.location == ArgIn::Path && a.wire == seg)
        {
            return Err(BadOpenapi::at(
                &site.op,
                format!(
                    "path `{}` has `{{{}}}` but the operation declares no such path parameter",
                    shorten(&site.path),
                    shorten(&seg)
                ),
            ));
        }
    }
    let body = request_body(&mut cx, op, site)?;
    let security = security(doc, op, site)?;
    // The credential's header wins over a parameter of the same name.
    if let Auth::ApiKeyHeader { header, .. } = &security.auth {
        let mut kept = Vec::new();
        for (a, at) in std::mem::take(&mut cx.args) {
            if a.location == ArgIn::Header && a.wire.eq_ignore_ascii_case(header) {
                cx.dropped.push(Dropped {
                    wire: a.wire,
                    location: "header".into(),
                    why: "the credential goes in this header".into(),
                });
            } else {
                kept.push((a, at));
            }
        }
        cx.args = kept;
    }
    let summary = ["summary", "description"]
        .iter()
        .find_map(|k| op.get(*k).and_then(Value::as_str))
        .map(str::to_owned);
    Ok(Operation {
        id: id.to_owned(),
        method: site.method,
        path: site.path.clone(),
        summary,
        args: cx.args.into_iter().map(|(a, _)| a).collect(),
        body,
        security,
        dropped: cx.dropped,
        pointer: site.op.clone(),
    })
}

/// The `{name}`s of a path template, in order.
pub(crate) fn template_names(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = path;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        out.push(rest[open + 1..open + close].to_owned());
        rest = &rest[open + close + 1..];
    }
    out
}

fn parameter(
    cx: &mut Cx<'_>,
    at: &str,
    p: &Map<String, Value>,
    site: &OpSite,
) -> Result<(), BadOpenapi> {
    let d: &Document = cx.doc;
    let (doc, version) = (&d.value, d.version);
    let Some(name) = p.get("name").and_then(Value::as_str) else {
        return Err(BadOpenapi::at(at, "a parameter has no `name` string"));
    };
    let Some(location) = p.get("in").and_then(Value::as_str) else {
        return Err(BadOpenapi::at(at, "a parameter has no `in` string"));
    };
    let required = p.get("required") == Some(&Value::Bool(true));
    let loc = match location {
        "path" => ArgIn::Path,
        "query" => ArgIn::Query,
        "header" => ArgIn::Header,
        "cookie" => {
            return cx.cannot(required, name, "cookie", at, "hcp sends no cookies".into());
        }
        other => {
            return Err(BadOpenapi::at(
                join(at, "in"),
                format!("parameter location `{}` is not OpenAPI's", shorten(other)),
            ));
        }
    };
    if loc == ArgIn::Path && !required {
        return Err(BadOpenapi::at(
            join(at, "required"),
            format!(
                "path parameter `{}` must be `required: true`",
                shorten(name)
            ),
        ));
    }
    if loc == ArgIn::Path && !site.path.contains(&format!("{{{name}}}")) {
        return Err(BadOpenapi::at(
            at,
            format!(
                "path parameter `{}` does not appear in path `{}`",
                shorten(name),
                shorten(&site.path)
            ),
        ));
    }
    if loc == ArgIn::Header
        && ["accept", "content-type", "authorization"].contains(&name.to_ascii_lowercase().as_str())
    {
        cx.dropped.push(Dropped {
            wire: name.to_owned(),
            location: "header".into(),
            why: "OpenAPI ignores this header parameter".into(),
        });
        return Ok(());
    }
    // The schema: `schema`, or `content` with one media type.
    let (schema_v, schema_at, json) = if let Some(s) = p.get("schema") {
        (s, join(at, "schema"), false)
    } else if let Some(Value::Object(content)) = p.get("content") {
        let Some((media, m)) = content.iter().next() else {
            return Err(BadOpenapi::at(join(at, "content"), "`content` is empty"));
        };
        if !is_json(media) {
            return cx.cannot(
                required,
                name,
                location,
                at,
                format!("its content type `{}` is not JSON", shorten(media)),
            );
        }
        let m_at = join(&join(at, "content"), media);
        match m.get("schema") {
            Some(s) => (s, join(&m_at, "schema"), true),
            None => (&Value::Bool(true), m_at, true),
        }
    } else {
        (&Value::Bool(true), at.to_owned(), false)
    };
    let schema = schema::compile(doc, schema_v, &schema_at, version, 0)?;
    let object = !json && schema.types.contains(&JsonType::Object);
    if object {
        return cx.cannot(
            required,
            name,
            location,
            at,
            "hcp does not serialize object parameters".into(),
        );
    }
    let style = p.get("style").and_then(Value::as_str);
    let explode = p.get("explode").and_then(Value::as_bool);
    let qstyle = match (loc, style) {
        (ArgIn::Path | ArgIn::Header | ArgIn::Body, None | Some("simple")) => {
            QueryStyle::FormExploded
        }
        (ArgIn::Query, None | Some("form")) => {
            if explode == Some(false) {
                QueryStyle::Form
            } else {
                QueryStyle::FormExploded
            }
        }
        (ArgIn::Query, Some("spaceDelimited")) => QueryStyle::SpaceDelimited,
        (ArgIn::Query, Some("pipeDelimited")) => QueryStyle::PipeDelimited,
        (_, Some(other)) => {
            return cx.cannot(
                required,
                name,
                location,
                at,
                format!("hcp does not write style `{}`", shorten(other)),
            );
        }
    };
    let description = p
        .get("description")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| schema.description.clone());
    cx.add(
        ArgSpec {
            name: arg_name(name),
            wire: name.to_owned(),
            location: loc,
            required,
            schema,
            description,
            style: qstyle,
            json,
        },
        at.to_owned(),
    )
}

fn is_json(media: &str) -> bool {
    let m = media
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    m == "application/json" || m.ends_with("+json") || m == "*/*"
}

fn request_body(
    cx: &mut Cx<'_>,
    op: &Map<String, Value>,
    site: &OpSite,
) -> Result<Option<Body>, BadOpenapi> {
    let d: &Document = cx.doc;
    let doc = &d.value;
    let Some(rb) = op.get("requestBody") else {
        return Ok(None);
    };
    let rb_at = join(&site.op, "requestBody");
    let (rb, rb_ptr) = pointer::resolve(doc, rb, &rb_at)?;
    let required = rb.get("required") == Some(&Value::Bool(true));
    if site.method.bodiless() {
        if !required {
            cx.dropped.push(Dropped {
                wire: "requestBody".into(),
                location: "body".into(),
                why: format!("hcp sends no body with {}", site.method.as_str()),
            });
            return Ok(None);
        }
        return Err(BadOpenapi::at(
            rb_at,
            format!("hcp sends no body with {}", site.method.as_str()),
        ));
    }
    let content_at = join(&rb_ptr, "content");
    let Some(content) = rb.get("content").and_then(Value::as_object) else {
        return Err(BadOpenapi::at(
            content_at,
            "a request body has no `content` object",
        ));
    };
    // Prefer `application/json`, then any JSON type.
    let chosen = content
        .iter()
        .find(|(m, _)| m.split(';').next().unwrap_or("").trim() == "application/json")
        .or_else(|| content.iter().find(|(m, _)| is_json(m) && *m != "*/*"));
    let Some((media, m)) = chosen else {
        let why = "the request body is not JSON (hcp sends `application/json` bodies only)";
        if required {
            return Err(BadOpenapi::at(content_at, why));
        }
        cx.dropped.push(Dropped {
            wire: "requestBody".into(),
            location: "body".into(),
            why: why.into(),
        });
        return Ok(None);
    };
    let m_at = join(&content_at, media);
    let schema = match m.get("schema") {
        Some(s) => schema::compile(doc, s, &join(&m_at, "schema"), d.version, 0)?,
        None => Schema::default(),
    };
    // The top-level properties: the schema's own and those of its `allOf` parts.
    let mut props: Vec<(String, Schema)> = Vec::new();
    let mut req: Vec<String> = Vec::new();
    let mut objectish = schema.types.contains(&JsonType::Object) || !schema.properties.is_empty();
    let mut gather = |s: &Schema| {
        for (k, ps) in &s.properties {
            if !props.iter().any(|(n, _)| n == k) {
                props.push((k.clone(), ps.clone()));
            }
        }
        req.extend(s.required.iter().cloned());
    };
    gather(&schema);
    for part in &schema.all_of {
        objectish |= part.types.contains(&JsonType::Object) || !part.properties.is_empty();
        gather(part);
    }
    let not_object = !objectish || !schema.one_of.is_empty() || !schema.any_of.is_empty();
    if not_object {
        let why = "the request body is not one JSON object with named properties";
        if required {
            return Err(BadOpenapi::at(join(&m_at, "schema"), why));
        }
        cx.dropped.push(Dropped {
            wire: "requestBody".into(),
            location: "body".into(),
            why: why.into(),
        });
        return Ok(None);
    }
    props.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, ps) in props {
        let p_at = join(&join(&join(&m_at, "schema"), "properties"), &name);
        if ps.read_only {
            cx.dropped.push(Dropped {
                wire: name,
                location: "body".into(),
                why: "it is `readOnly`".into(),
            });
            continue;
        }
        let description = ps.description.clone();
        cx.add(
            ArgSpec {
                name: arg_name(&name),
                required: req.contains(&name),
                wire: name,
                location: ArgIn::Body,
                schema: ps,
                description,
                style: QueryStyle::default(),
                json: false,
            },
            p_at,
        )?;
    }
    Ok(Some(Body {
        content_type: media.split(';').next().unwrap_or(media).trim().to_owned(),
        required,
    }))
}

fn security(
    doc: &Document,
    op: &Map<String, Value>,
    site: &OpSite,
) -> Result<Security, BadOpenapi> {
    let v = &doc.value;
    let (reqs, at) = match op.get("security") {
        Some(s) => (s, join(&site.op, "security")),
        None => match v.get("security") {
            Some(s) => (s, "/security".to_owned()),
            None => {
                return Ok(Security {
                    auth: Auth::None,
                    optional: true,
                });
            }
        },
    };
    let Some(reqs) = reqs.as_array() else {
        return Err(BadOpenapi::at(at, "`security` is not an array"));
    };
    if reqs.is_empty() {
        return Ok(Security {
            auth: Auth::None,
            optional: true,
        });
    }
    let optional = reqs
        .iter()
        .any(|r| r.as_object().is_some_and(Map::is_empty));
    let mut reasons = Vec::new();
    for (i, r) in reqs.iter().enumerate() {
        let Some(r) = r.as_object() else {
            return Err(BadOpenapi::at(
                format!("{at}/{i}"),
                "a security requirement is not an object",
            ));
        };
        if r.len() != 1 {
            if !r.is_empty() {
                reasons.push("a requirement of several schemes at once".to_owned());
            }
            continue;
        }
        let Some(name) = r.keys().next() else {
            continue;
        };
        let s_at = join("/components/securitySchemes", name);
        let Some(s) = v.pointer(&s_at) else {
            return Err(BadOpenapi::at(
                format!("{at}/{i}"),
                format!("security scheme `{}` is not defined", shorten(name)),
            ));
        };
        let (s, _) = pointer::resolve(v, s, &s_at)?;
        let kind = s.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "http"
                if s.get("scheme")
                    .and_then(Value::as_str)
                    .is_some_and(|x| x.eq_ignore_ascii_case("bearer")) =>
            {
                return Ok(Security {
                    auth: Auth::Bearer {
                        scheme: name.clone(),
                    },
                    optional,
                });
            }
            "apiKey" if s.get("in").and_then(Value::as_str) == Some("header") => {
                let Some(header) = s.get("name").and_then(Value::as_str) else {
                    return Err(BadOpenapi::at(s_at, "an `apiKey` scheme has no `name`"));
                };
                let valid = !header.is_empty()
                    && header
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
                if !valid {
                    return Err(BadOpenapi::at(
                        join(&s_at, "name"),
                        format!("`{}` is not a header name", shorten(header)),
                    ));
                }
                return Ok(Security {
                    auth: Auth::ApiKeyHeader {
                        scheme: name.clone(),
                        header: header.to_owned(),
                    },
                    optional,
                });
            }
            _ => {
                let detail = match kind {
                    "apiKey" => format!(
                        "`apiKey` in `{}`",
                        s.get("in").and_then(Value::as_str).unwrap_or("?")
                    ),
                    "http" => format!(
                        "`http` scheme `{}`",
                        s.get("scheme").and_then(Value::as_str).unwrap_or("?")
                    ),
                    other => format!("type `{}`", shorten(other)),
                };
                reasons.push(format!("`{}` ({detail})", shorten(name)));
            }
        }
    }
    if optional {
        return Ok(Security {
            auth: Auth::None,
            optional: true,
        });
    }
    Err(BadOpenapi::at(
        at,
        format!(
            "no security requirement hcp can meet: {}; hcp places a credential as `Authorization: Bearer` (`http` `bearer`) or in a header (`apiKey` `in: header`)",
            reasons.join(", ")
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn argument_names_are_snake_case() {
        for (wire, name) in [
            ("limit", "limit"),
            ("userId", "user_id"),
            ("X-Request-Id", "x_request_id"),
            ("page[size]", "page_size"),
            ("2fa", "_2fa"),
            ("--", "arg"),
            ("task_id", "task_id"),
        ] {
            assert_eq!(arg_name(wire), name, "{wire}");
        }
    }
}
