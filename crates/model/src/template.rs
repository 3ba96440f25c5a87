//! The argv template language of RUNTIME §1.2.
//!
//! A template is a list of elements. An element is a literal, a whole-element placeholder
//! (`{{name}}`, optional `{{name?}}`), the one allowed partial form `--flag={{name}}`, a
//! session-bound value (`{{@principal_id}}`, `{{@project_id}}`, `{{@workdir}}`) or the verb
//! key (`{{verb}}`). Nothing else may hold `{{` or `}}`. Substitution (in `hcp-adapter`)
//! replaces whole elements only and never re-parses them.

use serde::Serialize;
use std::fmt;

/// Placeholder names the runtime keeps for itself (RUNTIME §1.2).
pub const RESERVED_NAMES: [&str; 4] = ["confirm", "apply", "json", "timeout"];

/// Argument names that would select the tenant (seeds §4.3.2, RUNTIME §4): refused as
/// arguments (`tenant_in_args`) and so refused as placeholder names.
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

/// A value the runtime fills from the principal's session, never from arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionVar {
    /// `{{@principal_id}}`.
    PrincipalId,
    /// `{{@project_id}}`.
    ProjectId,
    /// `{{@workdir}}`: the sandbox working directory.
    Workdir,
}

impl SessionVar {
    fn parse(name: &str) -> Option<Self> {
        match name {
            "principal_id" => Some(Self::PrincipalId),
            "project_id" => Some(Self::ProjectId),
            "workdir" => Some(Self::Workdir),
            _ => None,
        }
    }
}

/// One element of a parsed template.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Element {
    /// Passed as it is.
    Literal {
        /// The text.
        text: String,
    },
    /// Filled from the call's argument `name`.
    Arg {
        /// The argument name, `^[a-z_][a-z0-9_]*$`.
        name: String,
        /// `{{name?}}`: the element is dropped when the argument is absent.
        optional: bool,
        /// `--flag=` before the placeholder, or `None` for a whole element.
        prefix: Option<String>,
        /// Whether a literal `--` stands earlier in the template, so a value starting with
        /// `-` cannot be read as an option (RUNTIME §1.2, `arg_looks_like_flag`).
        after_double_dash: bool,
    },
    /// Filled from the session.
    Session {
        /// Which value.
        var: SessionVar,
        /// `--flag=` before the placeholder, or `None`.
        prefix: Option<String>,
    },
    /// `{{verb}}`: the verb key.
    Verb,
}

impl Element {
    /// The argument this element takes, with whether it is optional.
    pub fn arg(&self) -> Option<(&str, bool)> {
        match self {
            Self::Arg { name, optional, .. } => Some((name, *optional)),
            _ => None,
        }
    }
}

/// Why a template element is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// `bad_placeholder`: malformed braces, a bad name, a placeholder inside a larger
    /// string other than `--flag={{name}}`, an unknown `@` value.
    #[error("{0}")]
    BadPlaceholder(String),
    /// `reserved_placeholder`: a name the runtime keeps (`confirm`, `apply`, `json`,
    /// `timeout`) or a tenant-bearing name ([`TENANT_NAMES`]).
    #[error("{0}")]
    Reserved(String),
}

impl TemplateError {
    /// The lint code: `bad_placeholder` or `reserved_placeholder`.
    pub fn code(&self) -> crate::Code {
        match self {
            Self::BadPlaceholder(_) => crate::Code::BadPlaceholder,
            Self::Reserved(_) => crate::Code::ReservedPlaceholder,
        }
    }
}

/// Whether `name` is a valid placeholder name, `^[a-z_][a-z0-9_]*$`.
pub fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

fn valid_flag_prefix(prefix: &str) -> bool {
    let Some(body) = prefix.strip_suffix('=') else {
        return false;
    };
    let Some(flag) = body.strip_prefix("--").or_else(|| body.strip_prefix('-')) else {
        return false;
    };
    let mut chars = flag.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Parses a whole template (a verb's `cli[1..]`, or `wrap.argv_template`).
///
/// # Errors
/// The first element's [`TemplateError`], with its index.
pub fn parse_template<S: AsRef<str>>(
    elements: &[S],
) -> Result<Vec<Element>, (usize, TemplateError)> {
    let mut out = Vec::with_capacity(elements.len());
    let mut after_dd = false;
    for (i, e) in elements.iter().enumerate() {
        let mut el = parse_element(e.as_ref()).map_err(|err| (i, err))?;
        if let Element::Arg {
            after_double_dash, ..
        } = &mut el
        {
            *after_double_dash = after_dd;
        }
        if matches!(&el, Element::Literal { text } if text == "--") {
            after_dd = true;
        }
        out.push(el);
    }
    Ok(out)
}

/// Parses one template element.
///
/// # Errors
/// [`TemplateError`] as documented there.
pub fn parse_element(text: &str) -> Result<Element, TemplateError> {
    let Some(open) = text.find("{{") else {
        if text.contains("}}") {
            return Err(TemplateError::BadPlaceholder(format!(
                "`{text}` holds `}}}}` without `{{{{`"
            )));
        }
        return Ok(Element::Literal {
            text: text.to_owned(),
        });
    };
    let prefix = &text[..open];
    let rest = &text[open + 2..];
    let Some(inner) = rest.strip_suffix("}}") else {
        return Err(TemplateError::BadPlaceholder(format!(
            "`{text}`: a placeholder must end the element (`{{{{name}}}}` or `--flag={{{{name}}}}`)"
        )));
    };
    if inner.contains("{{") || inner.contains("}}") {
        return Err(TemplateError::BadPlaceholder(format!(
            "`{text}` holds more than one placeholder"
        )));
    }
    let prefix = if prefix.is_empty() {
        None
    } else if valid_flag_prefix(prefix) {
        Some(prefix.to_owned())
    } else {
        return Err(TemplateError::BadPlaceholder(format!(
            "`{text}`: a placeholder is a whole element; the only partial form is `--flag={{{{name}}}}`"
        )));
    };
    if let Some(var) = inner.strip_prefix('@') {
        return match SessionVar::parse(var) {
            Some(var) => Ok(Element::Session { var, prefix }),
            None => Err(TemplateError::BadPlaceholder(format!(
                "`{{{{@{var}}}}}` is not a session value; use `@principal_id`, `@project_id` or `@workdir`"
            ))),
        };
    }
    let (name, optional) = match inner.strip_suffix('?') {
        Some(n) => (n, true),
        None => (inner, false),
    };
    if name == "verb" {
        if optional || prefix.is_some() {
            return Err(TemplateError::BadPlaceholder(format!(
                "`{text}`: `{{{{verb}}}}` is a whole, required element"
            )));
        }
        return Ok(Element::Verb);
    }
    if !valid_name(name) {
        return Err(TemplateError::BadPlaceholder(format!(
            "placeholder name `{name}` must match `^[a-z_][a-z0-9_]*$`"
        )));
    }
    if RESERVED_NAMES.contains(&name) {
        return Err(TemplateError::Reserved(format!(
            "placeholder `{name}` is reserved for the runtime (`confirm`, `apply`, `json`, `timeout`)"
        )));
    }
    if TENANT_NAMES.contains(&name) {
        return Err(TemplateError::Reserved(format!(
            "placeholder `{name}` would let an argument select the tenant; use `{{{{@project_id}}}}` or `{{{{@principal_id}}}}`"
        )));
    }
    Ok(Element::Arg {
        name: name.to_owned(),
        optional,
        prefix,
        after_double_dash: false,
    })
}

impl fmt::Display for Element {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Literal { text } => f.write_str(text),
            Self::Arg {
                name,
                optional,
                prefix,
                ..
            } => write!(
                f,
                "{}{{{{{name}{}}}}}",
                prefix.as_deref().unwrap_or(""),
                if *optional { "?" } else { "" }
            ),
            Self::Session { var, prefix } => {
                let v = match var {
                    SessionVar::PrincipalId => "principal_id",
                    SessionVar::ProjectId => "project_id",
                    SessionVar::Workdir => "workdir",
                };
                write!(f, "{}{{{{@{v}}}}}", prefix.as_deref().unwrap_or(""))
            }
            Self::Verb => f.write_str("{{verb}}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn elements() {
        assert_eq!(
            parse_element("find").unwrap(),
            Element::Literal {
                text: "find".into()
            }
        );
        assert_eq!(
            parse_element("{{query}}").unwrap(),
            Element::Arg {
                name: "query".into(),
                optional: false,
                prefix: None,
                after_double_dash: false
            }
        );
        assert_eq!(
            parse_element("--limit={{n?}}").unwrap(),
            Element::Arg {
                name: "n".into(),
                optional: true,
                prefix: Some("--limit=".into()),
                after_double_dash: false
            }
        );
        assert_eq!(
            parse_element("{{@workdir}}").unwrap(),
            Element::Session {
                var: SessionVar::Workdir,
                prefix: None
            }
        );
        assert_eq!(parse_element("{{verb}}").unwrap(), Element::Verb);
    }

    #[test]
    fn refusals() {
        for bad in [
            "a{{x}}",
            "{{x}}b",
            "{{X}}",
            "{{}}",
            "{{a}}{{b}}",
            "}}",
            "{{x",
            "{{@home}}",
            "-- {{x}}",
            "--f ={{x}}",
        ] {
            assert_eq!(
                parse_element(bad).unwrap_err().code(),
                "bad_placeholder",
                "{bad}"
            );
        }
        for bad in [
            "{{confirm}}",
            "{{json?}}",
            "{{project_id}}",
            "--t={{tenant}}",
        ] {
            assert_eq!(
                parse_element(bad).unwrap_err().code(),
                "reserved_placeholder",
                "{bad}"
            );
        }
    }

    #[test]
    fn double_dash_marks_later_args() {
        let t = parse_template(&["log", "{{a}}", "--", "{{b}}"]).unwrap();
        assert!(matches!(
            t[1],
            Element::Arg {
                after_double_dash: false,
                ..
            }
        ));
        assert!(matches!(
            t[3],
            Element::Arg {
                after_double_dash: true,
                ..
            }
        ));
    }
}
