//! Argv rendering: RUNTIME §1.2 substitution over a parsed template.
//!
//! Each template element becomes at most one argv element. A value is copied in whole:
//! never split on spaces, joined with a neighbour or re-parsed, and no shell ever sees it.

use crate::AdapterError;
use hcp_model::exec::ArgValue;
use hcp_model::strict::StrictMap;
use hcp_model::template::{Element, SessionVar};
use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// The session-bound values of `{{@principal_id}}`, `{{@project_id}}` and `{{@workdir}}`
/// (RUNTIME §1.2), filled by the runtime, never from arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionValues {
    /// The calling principal (`owner` without a session).
    pub principal_id: String,
    /// The session's project, when it names one.
    pub project_id: Option<String>,
    /// The working directory of the call: the sandbox for `local` land (absolute).
    pub workdir: PathBuf,
}

/// Where [`render`] looks up argument values by placeholder name.
///
/// Implemented for the maps the runtime holds arguments in.
pub trait ArgSource {
    /// The value of argument `name`, when the call gives one.
    fn arg(&self, name: &str) -> Option<&ArgValue>;
}

impl ArgSource for BTreeMap<String, ArgValue> {
    fn arg(&self, name: &str) -> Option<&ArgValue> {
        self.get(name)
    }
}

impl<S: std::hash::BuildHasher> ArgSource for HashMap<String, ArgValue, S> {
    fn arg(&self, name: &str) -> Option<&ArgValue> {
        self.get(name)
    }
}

impl ArgSource for StrictMap<ArgValue> {
    fn arg(&self, name: &str) -> Option<&ArgValue> {
        self.get(name)
    }
}

/// Renders the argv after the program (argv\[1..\]) of a verb (RUNTIME §1.2).
///
/// - `{{name}}` becomes the value of argument `name` as one element; `--flag={{name}}`
///   becomes `--flag=` followed by the value, as one element.
/// - `{{name?}}` is dropped when the argument is absent.
/// - `{{@principal_id}}`, `{{@project_id}}`, `{{@workdir}}` come from `session`.
/// - `{{verb}}` is `verb_key`.
///
/// The gate checks arguments first; these checks are repeated here so that the adapter
/// is safe on its own.
///
/// # Errors
/// - [`AdapterError::ArgMissing`] (`arg_missing`): a required argument is absent;
/// - [`AdapterError::ArgInvalid`] (`arg_invalid`): a value (or a session value) holds NUL;
/// - [`AdapterError::ArgLooksLikeFlag`] (`arg_looks_like_flag`): a value bound to a
///   whole (positional) element starts with `-` and no literal `--` element precedes it;
/// - [`AdapterError::ProjectRequired`] (`project_required`): `{{@project_id}}` with no
///   project in the session.
pub fn render<A: ArgSource + ?Sized>(
    args: &[Element],
    values: &A,
    session: &SessionValues,
    verb_key: &str,
) -> Result<Vec<OsString>, AdapterError> {
    let mut out = Vec::with_capacity(args.len());
    // Recomputed here rather than trusted from the parsed template.
    let mut seen_double_dash = false;
    for el in args {
        match el {
            Element::Literal { text } => {
                if text == "--" {
                    seen_double_dash = true;
                }
                out.push(OsString::from(text));
            }
            Element::Verb => out.push(OsString::from(verb_key)),
            Element::Arg {
                name,
                optional,
                prefix,
                ..
            } => {
                let Some(value) = values.arg(name) else {
                    if *optional {
                        continue;
                    }
                    return Err(AdapterError::ArgMissing { name: name.clone() });
                };
                let text = value.to_arg();
                // The literal `--` actually seen decides, not the template's own mark.
                out.push(element(
                    name,
                    prefix.as_deref(),
                    text.as_bytes(),
                    seen_double_dash,
                )?);
            }
            Element::Session { var, prefix } => {
                let (name, bytes): (&str, &[u8]) = match var {
                    SessionVar::PrincipalId => ("@principal_id", session.principal_id.as_bytes()),
                    SessionVar::ProjectId => match &session.project_id {
                        Some(p) => ("@project_id", p.as_bytes()),
                        None => return Err(AdapterError::ProjectRequired),
                    },
                    SessionVar::Workdir => ("@workdir", session.workdir.as_os_str().as_bytes()),
                };
                out.push(element(name, prefix.as_deref(), bytes, seen_double_dash)?);
            }
        }
    }
    Ok(out)
}

/// The longest argv element the kernel takes, in bytes without its NUL
/// (`MAX_ARG_STRLEN`, 32 pages, less one).
pub const MAX_ELEMENT_BYTES: usize = 32 * 4096 - 1;

/// One argv element from a value, with the defensive checks of RUNTIME §1.2.
fn element(
    name: &str,
    prefix: Option<&str>,
    value: &[u8],
    after_double_dash: bool,
) -> Result<OsString, AdapterError> {
    if value.contains(&0) {
        return Err(AdapterError::ArgInvalid {
            name: name.to_owned(),
        });
    }
    match prefix {
        None => {
            if value.len() > MAX_ELEMENT_BYTES {
                return Err(AdapterError::ArgTooLong {
                    message: format!(
                        "argument `{name}` is {} bytes; one argv element may hold at most {MAX_ELEMENT_BYTES}",
                        value.len()
                    ),
                });
            }
            if value.first() == Some(&b'-') && !after_double_dash {
                return Err(AdapterError::ArgLooksLikeFlag {
                    name: name.to_owned(),
                });
            }
            Ok(OsStr::from_bytes(value).to_owned())
        }
        Some(p) => {
            let bytes = p.len() + value.len();
            if bytes > MAX_ELEMENT_BYTES {
                // The value alone fits (the gate checked it); with its prefix it does not.
                return Err(AdapterError::ArgTooLong {
                    message: format!(
                        "argument `{name}` with its prefix `{p}` is {bytes} bytes; one argv element may hold at most {MAX_ELEMENT_BYTES}"
                    ),
                });
            }
            let mut s = OsString::with_capacity(bytes);
            s.push(p);
            s.push(OsStr::from_bytes(value));
            Ok(s)
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use hcp_model::template::parse_template;
    use pretty_assertions::assert_eq;

    fn session() -> SessionValues {
        SessionValues {
            principal_id: "alice".into(),
            project_id: Some("apollo".into()),
            workdir: "/srv/sandbox".into(),
        }
    }

    fn vals(pairs: &[(&str, ArgValue)]) -> BTreeMap<String, ArgValue> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect()
    }

    fn s(v: &str) -> ArgValue {
        ArgValue::String(v.into())
    }

    fn run(t: &[&str], v: &BTreeMap<String, ArgValue>) -> Result<Vec<OsString>, AdapterError> {
        render(&parse_template(t).unwrap(), v, &session(), "mail.send")
    }

    #[test]
    fn whole_partial_optional_session_verb() {
        let v = vals(&[
            ("to", s("bob@example.com")),
            ("n", ArgValue::Number(5.into())),
            ("flag", ArgValue::Bool(true)),
        ]);
        let got = run(
            &[
                "{{verb}}",
                "{{to}}",
                "--limit={{n}}",
                "--dry={{flag}}",
                "{{cc?}}",
                "--bcc={{bcc?}}",
                "--as={{@principal_id}}",
                "{{@project_id}}",
                "--cwd={{@workdir}}",
            ],
            &v,
        )
        .unwrap();
        assert_eq!(
            got,
            [
                "mail.send",
                "bob@example.com",
                "--limit=5",
                "--dry=true",
                "--as=alice",
                "apollo",
                "--cwd=/srv/sandbox"
            ]
            .map(OsString::from)
        );
    }

    #[test]
    fn hostile_values_stay_one_element() {
        let hostile = [
            "two words",
            "it's \"quoted\"",
            "a; rm -rf /",
            "x && touch CANARY",
            "$(touch CANARY)",
            "`touch CANARY`",
            "line one\nline two",
            "{{other}}",
            "*",
            "",
            " -leading-space",
        ];
        for h in hostile {
            let v = vals(&[("q", s(h))]);
            let got = run(&["search", "{{q}}", "--also={{q}}"], &v).unwrap();
            assert_eq!(
                got,
                vec![
                    OsString::from("search"),
                    OsString::from(h),
                    OsString::from(format!("--also={h}"))
                ],
                "{h:?}"
            );
        }
    }

    #[test]
    fn defensive_refusals() {
        let v = vals(&[("q", s("a\0b"))]);
        assert_eq!(run(&["{{q}}"], &v).unwrap_err().code(), "arg_invalid");
        assert_eq!(run(&["--q={{q}}"], &v).unwrap_err().code(), "arg_invalid");

        let v = vals(&[("q", s("--upload-pack=evil"))]);
        assert_eq!(
            run(&["{{q}}"], &v).unwrap_err().code(),
            "arg_looks_like_flag"
        );
        // A partial `--flag=` element and a value after a literal `--` are fine.
        assert_eq!(run(&["--q={{q}}"], &v).unwrap(), ["--q=--upload-pack=evil"]);
        assert_eq!(
            run(&["log", "--", "{{q}}"], &v).unwrap(),
            ["log", "--", "--upload-pack=evil"]
        );
        let v = vals(&[("q", ArgValue::Number((-5).into()))]);
        assert_eq!(
            run(&["{{q}}"], &v).unwrap_err().code(),
            "arg_looks_like_flag"
        );

        // A forged `after_double_dash` without a real `--` is not trusted.
        let forged = [Element::Arg {
            name: "q".into(),
            optional: false,
            prefix: None,
            after_double_dash: true,
        }];
        let v = vals(&[("q", s("-x"))]);
        assert_eq!(
            render(&forged, &v, &session(), "k").unwrap_err().code(),
            "arg_looks_like_flag"
        );

        assert_eq!(
            run(&["{{q}}"], &vals(&[])).unwrap_err().code(),
            "arg_missing"
        );
        assert_eq!(
            run(&["{{q?}}"], &vals(&[])).unwrap(),
            Vec::<OsString>::new()
        );
    }

    #[test]
    fn session_values() {
        let mut sess = session();
        sess.project_id = None;
        let t = parse_template(&["{{@project_id}}"]).unwrap();
        let e = render(&t, &vals(&[]), &sess, "k").unwrap_err();
        assert_eq!(e.code(), "project_required");

        sess.principal_id = "-rf".into();
        let t = parse_template(&["{{@principal_id}}"]).unwrap();
        let e = render(&t, &vals(&[]), &sess, "k").unwrap_err();
        assert_eq!(e.code(), "arg_looks_like_flag");
        let t = parse_template(&["--as={{@principal_id}}"]).unwrap();
        assert_eq!(render(&t, &vals(&[]), &sess, "k").unwrap(), ["--as=-rf"]);
    }
}
