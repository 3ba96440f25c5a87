//! From a call's arguments to one HTTP request, refused before anything is sent when the
//! arguments do not fit the operation (RUNTIME §1.3, §5 step 3).

use crate::error::Refusal;
use crate::operation::{ArgIn, ArgSpec, Auth, Method, Operation, QueryStyle};
use crate::pointer::shorten;
use crate::server::{ServerUrl, origin_of};
use hcp_model::Code;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use serde_json::{Map, Value};
use std::fmt;

/// What is percent-encoded in a path segment or a query name or value: everything but
/// RFC 3986's unreserved characters (`A-Z a-z 0-9 - . _ ~`), so no value can add a `/`,
/// `?`, `#`, `&`, `=` or `+` of its own.
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// How many rounds of percent-decoding a path value is inspected through (`%252F` is
/// `/` after two): a server that decodes more often than that is not protected.
const DECODE_ROUNDS: usize = 4;

/// The credential of the binding (RUNTIME §8), as it goes into a header. Its `Debug` and
/// `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Credential(String);

impl Credential {
    /// A credential from its text.
    ///
    /// # Errors
    /// `None` when it is empty or holds a character a header value cannot carry (control
    /// characters, non-ASCII).
    pub fn new(text: impl Into<String>) -> Option<Self> {
        let t = text.into();
        (!t.is_empty() && t.bytes().all(|b| (0x20..0x7f).contains(&b))).then_some(Self(t))
    }

    /// The credential of a binding object (the JSON a connect verb printed): its `token`
    /// field, else its only string field. `None` when neither exists or the value cannot
    /// be a header value.
    pub fn from_binding(binding: &Map<String, Value>) -> Option<Self> {
        if let Some(Value::String(t)) = binding.get("token") {
            return Self::new(t.clone());
        }
        let mut strings = binding.values().filter_map(Value::as_str);
        match (strings.next(), strings.next()) {
            (Some(only), None) => Self::new(only),
            _ => None,
        }
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Credential([redacted])")
    }
}

/// One request header.
#[derive(Clone, PartialEq, Eq)]
pub struct Header {
    /// The header name as sent.
    pub name: String,
    /// The value as sent.
    pub value: String,
    /// Whether the value is the credential (never shown).
    pub secret: bool,
}

impl fmt::Debug for Header {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = if self.secret {
            "[redacted]"
        } else {
            &self.value
        };
        write!(f, "{}: {v}", self.name)
    }
}

/// One request, fully built and not yet sent ([`crate::send`] sends it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestPlan {
    /// The operation's id.
    pub operation: String,
    /// The method.
    pub method: Method,
    /// The absolute URL, percent-encoded.
    pub url: String,
    /// The one origin the request may reach (`scheme://host:port`).
    pub origin: String,
    /// Headers beyond the client's own (`Host`, `User-Agent`, `Content-Length`).
    pub headers: Vec<Header>,
    /// The JSON body.
    pub body: Option<Vec<u8>>,
}

/// A call's arguments as [`check`] accepted them: each given argument of the operation
/// with its value coerced to the schema's type (`"5"` → 5), in the operation's order.
#[derive(Debug, Clone, PartialEq)]
pub struct Checked<'a> {
    values: Vec<(&'a ArgSpec, Value)>,
}

impl Checked<'_> {
    /// The checked values by argument name, in the operation's order.
    pub fn values(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.values.iter().map(|(a, v)| (a.name.as_str(), v))
    }
}

/// Checks a call's arguments against `op` (RUNTIME §1.3, §5 step 3), without building a
/// request: what the gate runs at step 3, and [`plan`] runs again on the values that reach
/// it.
///
/// Values may be typed (the JSON face, MCP) or strings (the CLI face: `"5"` is the integer
/// 5 where the schema wants an integer, JSON text an array or object). Refused, in this
/// order: an argument that is not one of the operation's (`arg_unknown`); a required one
/// absent (`arg_missing`); a value outside its type, enum, bounds, length, pattern or item
/// rules, a value holding NUL, a path value that could leave its segment (`/`, `\`, `.`,
/// `..`, empty, or any of these after up to four rounds of percent-decoding, as in `%2F..`
/// or `%252e%252e`), a header value holding a control or non-ASCII character
/// (`arg_invalid`).
///
/// # Errors
/// The first [`Refusal`].
pub fn check<'a>(op: &'a Operation, args: &Map<String, Value>) -> Result<Checked<'a>, Refusal> {
    for name in args.keys() {
        if op.argument(name).is_none() {
            let mut message = format!(
                "`{}` is not an argument of operation `{}`",
                shorten(name),
                op.id
            );
            if let Some(d) = op
                .dropped
                .iter()
                .find(|d| crate::arg_name(&d.wire) == *name)
            {
                message.push_str(&format!(
                    " ({} `{}` is not passed: {})",
                    d.location, d.wire, d.why
                ));
            }
            return Err(Refusal::arg(Code::ArgUnknown, name, message));
        }
    }
    for a in &op.args {
        if a.required && !args.contains_key(&a.name) {
            return Err(Refusal::arg(
                Code::ArgMissing,
                &a.name,
                format!("missing required argument `{}`", a.name),
            ));
        }
    }
    let mut values: Vec<(&ArgSpec, Value)> = Vec::new();
    for a in &op.args {
        let Some(v) = args.get(&a.name) else { continue };
        let v = a.schema.coerce(v.clone());
        if let Err(why) = a.schema.check(&v) {
            return Err(Refusal::arg(
                Code::ArgInvalid,
                &a.name,
                format!("argument `{}` {why}", a.name),
            ));
        }
        if holds_nul(&v) {
            return Err(Refusal::arg(
                Code::ArgInvalid,
                &a.name,
                format!("argument `{}` holds a NUL character", a.name),
            ));
        }
        match a.location {
            ArgIn::Path => {
                if let Some(why) = leaves_segment(&text_of(a, &v, ",")) {
                    return Err(Refusal::arg(
                        Code::ArgInvalid,
                        &a.name,
                        format!("path argument `{}` {why}", a.name),
                    ));
                }
            }
            ArgIn::Header => {
                if !text_of(a, &v, ",")
                    .bytes()
                    .all(|b| b == b'\t' || (0x20..0x7f).contains(&b))
                {
                    return Err(Refusal::arg(
                        Code::ArgInvalid,
                        &a.name,
                        format!(
                            "header argument `{}` holds a control or non-ASCII character",
                            a.name
                        ),
                    ));
                }
            }
            ArgIn::Query | ArgIn::Body => {}
        }
        values.push((a, v));
    }
    Ok(Checked { values })
}

/// Checks a call's arguments against `op` ([`check`]) and builds its request to `server`,
/// with the credential where the operation's security scheme says (RUNTIME §1.3).
///
/// Refused before anything is sent: what [`check`] refuses; a credential the operation
/// requires and was not given (`binding_required`).
///
/// # Errors
/// The first [`Refusal`].
pub fn plan(
    op: &Operation,
    server: &ServerUrl,
    args: &Map<String, Value>,
    credential: Option<&Credential>,
) -> Result<RequestPlan, Refusal> {
    let values = check(op, args)?.values;

    // Path.
    let base = server.url();
    let mut path = base.path().trim_end_matches('/').to_owned();
    let mut rest = op.path.as_str();
    while let Some(open) = rest.find('{') {
        path.push_str(&rest[..open]);
        let close = rest[open..].find('}').map_or(rest.len(), |c| open + c);
        let wire = &rest[open + 1..close];
        let (a, v) = values
            .iter()
            .find(|(a, _)| a.location == ArgIn::Path && a.wire == wire)
            .ok_or_else(|| {
                Refusal::arg(
                    Code::ArgMissing,
                    wire,
                    format!("missing path argument `{}`", shorten(wire)),
                )
            })?;
        let text = text_of(a, v, ",");
        path.extend(utf8_percent_encode(&text, COMPONENT));
        rest = rest.get(close + 1..).unwrap_or("");
    }
    path.push_str(rest);
    let mut url = base.clone();
    url.set_path(&path);

    // Query.
    let mut query: Vec<String> = Vec::new();
    for (a, v) in values.iter().filter(|(a, _)| a.location == ArgIn::Query) {
        let key: String = utf8_percent_encode(&a.wire, COMPONENT).collect();
        let enc = |s: &str| utf8_percent_encode(s, COMPONENT).collect::<String>();
        match (v, a.style) {
            (Value::Array(items), QueryStyle::FormExploded) if !a.json => {
                for i in items {
                    query.push(format!("{key}={}", enc(&scalar_text(i))));
                }
            }
            _ => {
                let sep = match a.style {
                    QueryStyle::SpaceDelimited => " ",
                    QueryStyle::PipeDelimited => "|",
                    _ => ",",
                };
                query.push(format!("{key}={}", enc(&text_of(a, v, sep))));
            }
        }
    }
    let query = query.join("&");
    url.set_query((!query.is_empty()).then_some(query.as_str()));
    if origin_of(&url) != server.origin()
        || !url.path().starts_with(base.path().trim_end_matches('/'))
    {
        return Err(Refusal {
            code: Code::ArgInvalid,
            argument: None,
            message: "the request would leave the server's origin or path".into(),
        });
    }

    // Headers.
    let mut headers = vec![Header {
        name: "Accept".into(),
        value: "application/json, */*;q=0.5".into(),
        secret: false,
    }];
    for (a, v) in values.iter().filter(|(a, _)| a.location == ArgIn::Header) {
        let text = text_of(a, v, ",");
        headers.push(Header {
            name: a.wire.clone(),
            value: text,
            secret: false,
        });
    }
    match (&op.security.auth, credential) {
        (Auth::None, _) => {}
        (Auth::Bearer { .. }, Some(c)) => headers.push(Header {
            name: "Authorization".into(),
            value: format!("Bearer {}", c.expose()),
            secret: true,
        }),
        (Auth::ApiKeyHeader { header, .. }, Some(c)) => headers.push(Header {
            name: header.clone(),
            value: c.expose().to_owned(),
            secret: true,
        }),
        (Auth::Bearer { scheme } | Auth::ApiKeyHeader { scheme, .. }, None) => {
            if !op.security.optional {
                return Err(Refusal {
                    code: Code::BindingRequired,
                    argument: None,
                    message: format!(
                        "operation `{}` needs a credential (security scheme `{}`)",
                        op.id,
                        shorten(scheme)
                    ),
                });
            }
        }
    }

    // Body.
    let mut body = None;
    if let Some(b) = &op.body {
        let props: Map<String, Value> = values
            .iter()
            .filter(|(a, _)| a.location == ArgIn::Body)
            .map(|(a, v)| (a.wire.clone(), v.clone()))
            .collect();
        if !props.is_empty() || b.required {
            body = Some(serde_json::to_vec(&Value::Object(props)).unwrap_or_default());
            headers.push(Header {
                name: "Content-Type".into(),
                value: b.content_type.clone(),
                secret: false,
            });
        }
    }
    Ok(RequestPlan {
        operation: op.id.clone(),
        method: op.method,
        url: url.to_string(),
        origin: server.origin(),
        headers,
        body,
    })
}

fn holds_nul(v: &Value) -> bool {
    match v {
        Value::String(s) => s.contains('\0'),
        Value::Array(a) => a.iter().any(holds_nul),
        Value::Object(o) => o.iter().any(|(k, v)| k.contains('\0') || holds_nul(v)),
        _ => false,
    }
}

fn scalar_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// A parameter value as text: JSON for a `content`-typed parameter, items joined by `sep`
/// for an array, the scalar's text otherwise.
fn text_of(a: &ArgSpec, v: &Value, sep: &str) -> String {
    if a.json {
        return v.to_string();
    }
    match v {
        Value::Array(items) => items.iter().map(scalar_text).collect::<Vec<_>>().join(sep),
        other => scalar_text(other),
    }
}

/// Why a path value could leave its segment, if it could.
fn leaves_segment(text: &str) -> Option<&'static str> {
    if text.is_empty() {
        return Some("is empty, which would leave an empty path segment");
    }
    let mut cur = text.to_owned();
    for _ in 0..=DECODE_ROUNDS {
        if cur.contains('/') || cur.contains('\\') {
            return Some("holds a path separator (`/` or `\\`), perhaps percent-encoded");
        }
        if cur == "." || cur == ".." {
            return Some("is `.` or `..`, perhaps percent-encoded");
        }
        if cur.chars().any(char::is_control) {
            return Some("holds a control character, perhaps percent-encoded");
        }
        let next = percent_decode_str(&cur).decode_utf8_lossy().into_owned();
        if next == cur {
            break;
        }
        cur = next;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn traversal_in_any_encoding_is_caught() {
        for bad in [
            "../etc",
            "..",
            ".",
            "a/b",
            "a\\b",
            "%2F..",
            "..%2f",
            "%2e%2e",
            "%252e%252e",
            "%25252F",
            "",
            "a\nb",
            "%0a",
        ] {
            assert!(leaves_segment(bad).is_some(), "{bad:?}");
        }
        for ok in ["task-1", "a.b", "...", "100%", "x%2", "é"] {
            assert_eq!(leaves_segment(ok), None, "{ok:?}");
        }
    }

    #[test]
    fn credential_is_never_shown() {
        let c = Credential::new("s3cret").unwrap();
        assert_eq!(format!("{c:?}"), "Credential([redacted])");
        let h = Header {
            name: "Authorization".into(),
            value: "Bearer s3cret".into(),
            secret: true,
        };
        assert_eq!(format!("{h:?}"), "Authorization: [redacted]");
        assert!(Credential::new("a\r\nX-Evil: 1").is_none());
        let b: Map<String, Value> = serde_json::from_str(r#"{"token": "t", "user": "u"}"#).unwrap();
        assert_eq!(Credential::from_binding(&b).unwrap().expose(), "t");
    }
}
