//! Compiling one operation of a document into an [`Operation`] (see [`crate::operation`]
//! for what is refused and what is dropped).

use crate::error::BadOpenapi;
use crate::load::{Document, OpSite};
use crate::operation::{
    ArgIn, ArgSpec, Auth, Body, Dropped, Operation, QueryStyle, RESERVED_NAMES, Security,
    TENANT_NAMES, arg_name,
};
use crate::pointer::{self, join, shorten};
use crate::schema::{self, JsonType, Schema};
use serde_json::{Map, Value};

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
