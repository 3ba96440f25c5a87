//! The CLI face of `hcp exec` (RUNTIME §5): `TARGET [VALUE…] [--NAME VALUE…] [--confirm |
//! --apply] [--json] [--timeout SECS] [--]`.
//!
//! Parsing is in two phases: [`parse`] splits the words before the target is resolved;
//! the runtime (`hcp_runtime::Words::assign`) then gives positional values to the verb's
//! arguments, in template order, once the verb is known.

use hcp_runtime::Words;

/// A CLI-face call, split but not yet matched to a verb.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Parsed {
    /// The target (`PACK.VERB` or a verb key).
    pub target: String,
    /// The verb's words.
    pub words: Words,
    /// `--json`.
    pub json: bool,
    /// `--timeout SECS`, in seconds.
    pub timeout: Option<f64>,
}

/// A usage error of the CLI face (exit 64).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError(pub String);

/// Splits the words after `hcp exec`.
///
/// # Errors
/// [`UsageError`] for a missing target, a `--NAME` without a value, a bad `--timeout`, or a
/// name given twice.
pub fn parse(words: &[String], json: bool, timeout: Option<f64>) -> Result<Parsed, UsageError> {
    let mut out = Parsed {
        json,
        timeout,
        ..Parsed::default()
    };
    let mut it = words.iter();
    let mut only_values = false;
    while let Some(w) = it.next() {
        if only_values {
            out.words.positional.push(w.clone());
            continue;
        }
        if w == "--" {
            only_values = true;
            continue;
        }
        let Some(flag) = w.strip_prefix("--").filter(|f| !f.is_empty()) else {
            if out.target.is_empty() {
                out.target = w.clone();
            } else {
                out.words.positional.push(w.clone());
            }
            continue;
        };
        let (name, inline) = match flag.split_once('=') {
            Some((n, v)) => (n.replace('-', "_"), Some(v.to_owned())),
            None => (flag.replace('-', "_"), None),
        };
        match name.as_str() {
            "json" if inline.is_none() => out.json = true,
            "confirm" | "apply" if inline.is_none() => out.words.confirm = Some("true".into()),
            _ => {
                let value = match inline {
                    Some(v) => v,
                    None => it
                        .next()
                        .cloned()
                        .ok_or_else(|| UsageError(format!("`--{flag}` needs a value")))?,
                };
                if name == "timeout" {
                    out.timeout = Some(parse_timeout(&value)?);
                } else if name == "confirm" || name == "apply" {
                    out.words.confirm = Some(value);
                } else {
                    if out.words.named.iter().any(|(n, _)| *n == name) {
                        return Err(UsageError(format!("argument `{name}` is given twice")));
                    }
                    out.words.named.push((name, value));
                }
            }
        }
    }
    if out.target.is_empty() {
        return Err(UsageError("no target: `hcp exec PACK.VERB [ARGS…]`".into()));
    }
    Ok(out)
}

/// Parses `--timeout SECS`: a positive, finite number of seconds, at most one day.
///
/// # Errors
/// [`UsageError`] naming the value.
pub fn parse_timeout(v: &str) -> Result<f64, UsageError> {
    match v.parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 && s <= 86_400.0 => Ok(s),
        _ => Err(UsageError(format!(
            "`--timeout {v}`: give a number of seconds above 0 and at most 86400"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hcp_model::ArgValue;
    use pretty_assertions::assert_eq;

    fn p(words: &[&str]) -> Result<Parsed, UsageError> {
        parse(
            &words.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            false,
            None,
        )
    }

    fn s(v: &str) -> ArgValue {
        ArgValue::String(v.into())
    }

    #[test]
    fn named_positional_and_runtime_flags() {
        let w = p(&[
            "transit.plan",
            "A",
            "--to",
            "B",
            "--json",
            "--timeout=2.5",
            "--confirm",
        ])
        .unwrap();
        assert_eq!(w.target, "transit.plan");
        assert!(w.json);
        assert_eq!(w.timeout, Some(2.5));
        assert_eq!(
            w.words.assign(&["from".into(), "to".into()]),
            vec![
                ("to".into(), s("B")),
                ("from".into(), s("A")),
                ("confirm".into(), s("true"))
            ]
        );
    }

    #[test]
    fn double_dash_makes_everything_a_value() {
        let w = p(&["git.log", "--", "--output=x", "--json"]).unwrap();
        assert_eq!(w.words.positional, vec!["--output=x", "--json"]);
        assert!(!w.json);
        let a = w.words.assign(&["rev".into()]);
        assert_eq!(
            a,
            vec![
                ("rev".into(), s("--output=x")),
                ("_extra_2".into(), s("--json"))
            ]
        );
    }

    #[test]
    fn dashes_in_names_read_as_underscores() {
        let w = p(&["x.y", "--option-id", "o1"]).unwrap();
        assert_eq!(
            w.words.named,
            vec![("option_id".to_string(), "o1".to_string())]
        );
    }

    #[test]
    fn usage_errors() {
        assert!(p(&[]).is_err());
        assert!(p(&["--json"]).is_err());
        assert!(p(&["x.y", "--to"]).is_err());
        assert!(p(&["x.y", "--a", "1", "--a", "2"]).is_err());
        for bad in ["0", "-1", "nan", "inf", "abc", "100000"] {
            assert!(p(&["x.y", "--timeout", bad]).is_err(), "{bad}");
        }
    }
}
