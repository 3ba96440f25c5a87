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

use crate::schema::Schema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub(crate) use crate::compile::compile;

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

    pub(crate) fn bodiless(self) -> bool {
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

/// Argument names the runtime keeps (RUNTIME §1.2) and those that would select the tenant
/// (RUNTIME §4), as the model defines them.
pub use hcp_model::template::{RESERVED_NAMES, TENANT_NAMES};

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
