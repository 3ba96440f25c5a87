//! The CLI face of `hcp exec` (RUNTIME §5): `TARGET [VALUE…] [--NAME VALUE…] [--confirm |
//! --apply] [--json] [--timeout SECS] [--]`.
//!
//! Parsing is in two phases: [`parse`] splits the words before the target is resolved;
//! [`Words::assign`] then gives positional values to the verb's arguments, in template
//! order, once the verb is known.

use hcp_model::ArgValue;

/// The words of a CLI-face call, split but not yet matched to a verb.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Words {
    /// The target (`PACK.VERB` or a verb key).
    pub target: String,
    /// `--NAME VALUE` and `--NAME=VALUE` pairs, names with `-` read as `_`, in order.
    pub named: Vec<(String, String)>,
    /// Values without a name, in order.
    pub positional: Vec<String>,
    /// `--confirm` or `--apply` was given (as `"true"`, §4.5.2).
    pub confirm: Option<String>,
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
pub fn parse(words: &[String], json: bool, timeout: Option<f64>) -> Result<Words, UsageError> {
    let mut out = Words {
        json,
        timeout,
        ..Words::default()
    };
    let mut it = words.iter();
    let mut only_values = false;
    while let Some(w) = it.next() {
        if only_values {
            out.positional.push(w.clone());
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
                out.positional.push(w.clone());
            }
            continue;
        };
        let (name, inline) = match flag.split_once('=') {
            Some((n, v)) => (n.replace('-', "_"), Some(v.to_owned())),
            None => (flag.replace('-', "_"), None),
        };
        match name.as_str() {
            "json" if inline.is_none() => out.json = true,
            "confirm" | "apply" if inline.is_none() => out.confirm = Some("true".into()),
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
                    out.confirm = Some(value);
                } else {
                    if out.named.iter().any(|(n, _)| *n == name) {
                        return Err(UsageError(format!("argument `{name}` is given twice")));
                    }
                    out.named.push((name, value));
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

impl Words {
    /// The call's arguments for a verb taking `takes` (names in template order): named
    /// values, then positional values given to the arguments not named, in order, then
    /// `confirm`. A positional value with no argument left to take it is kept under the
    /// name `_extra_N` (1-based), which the gate refuses as unknown.
    pub fn assign(&self, takes: &[String]) -> Vec<(String, ArgValue)> {
        let mut out: Vec<(String, ArgValue)> = self
            .named
            .iter()
            .map(|(n, v)| (n.clone(), ArgValue::String(v.clone())))
            .collect();
        let mut free = takes
            .iter()
            .filter(|t| !self.named.iter().any(|(n, _)| n == *t));
        for (i, v) in self.positional.iter().enumerate() {
            let name = free
                .next()
                .cloned()
                .unwrap_or_else(|| format!("_extra_{}", i + 1));
            out.push((name, ArgValue::String(v.clone())));
        }
        if let Some(c) = &self.confirm {
            out.push(("confirm".into(), ArgValue::String(c.clone())));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn p(words: &[&str]) -> Result<Words, UsageError> {
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
            w.assign(&["from".into(), "to".into()]),
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
        assert_eq!(w.positional, vec!["--output=x", "--json"]);
        assert!(!w.json);
        let a = w.assign(&["rev".into()]);
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
        assert_eq!(w.named, vec![("option_id".to_string(), "o1".to_string())]);
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
