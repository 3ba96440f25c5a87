//! Step 3 of RUNTIME §5: the arguments of a call against the verb's template
//! ([`check_args`]), or against the operation of a `kind: openapi` verb
//! ([`check_operation_args`], RUNTIME §1.3).

use crate::code::Code;
use hcp_model::ArgValue;
use hcp_model::manifest::{CommandPlan, arguments};
use hcp_model::template::{Element, TENANT_NAMES};
use std::collections::BTreeMap;

/// Argument names the runtime reads itself rather than passing to the verb (§4.5.2).
pub const CONFIRM_NAMES: [&str; 2] = ["confirm", "apply"];

/// The longest value one argv element may carry, in bytes: Linux refuses a longer
/// element at `execve` (`MAX_ARG_STRLEN`, 128 KiB with its NUL).
pub const MAX_ARG_BYTES: usize = 128 * 1024 - 1;

/// The most bytes all values of one call may carry together (1 MiB), well under the
/// kernel's limit on argv and environment together.
pub const MAX_ARGS_TOTAL_BYTES: usize = 1024 * 1024;

/// A refusal of step 3: code, message, hint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgRefusal {
    /// The code (`tenant_in_args`, `arg_unknown`, `arg_invalid`, `arg_missing`,
    /// `arg_looks_like_flag`).
    pub code: Code,
    /// Lowercase message naming the argument.
    pub message: String,
    /// How to fix it.
    pub hint: Option<String>,
}

fn refuse(code: Code, message: String, hint: Option<String>) -> ArgRefusal {
    ArgRefusal {
        code,
        message,
        hint,
    }
}

/// The hint of `arg_missing` for argument `name` of a verb taking `takes` (in the order
/// positional words are given to them): on the CLI face, the flag and the positional form;
/// on the JSON and MCP faces, the argument to add.
fn missing_hint<'a>(name: &str, takes: impl Iterator<Item = &'a str>, cli_face: bool) -> String {
    if cli_face {
        let order: Vec<String> = takes.map(|n| format!("`{n}`")).collect();
        format!(
            "pass `--{name} VALUE`, or give every value as a word in the verb's order: {}",
            order.join(" ")
        )
    } else {
        format!("give `{name}` in the call's arguments")
    }
}

/// Checks `args` against `plan` in this order: tenant-bearing names (§4.3.2), unknown
/// names, values holding NUL, `confirm`/`apply` values, missing required arguments, and
/// flag-looking positional values (RUNTIME §1.2). Returns the values the verb takes
/// (without `confirm`/`apply`) and whether the call confirms (§4.5.2).
///
/// # Errors
/// The first [`ArgRefusal`] met.
pub fn check_args<'a>(
    plan: &CommandPlan,
    args: impl IntoIterator<Item = (&'a String, &'a ArgValue)> + Clone,
    cli_face: bool,
) -> Result<(BTreeMap<String, ArgValue>, bool), ArgRefusal> {
    let takes = arguments(plan);
    for (name, _) in args.clone() {
        if TENANT_NAMES.contains(&name.as_str()) {
            return Err(tenant_refusal(name));
        }
    }
    for (name, _) in args.clone() {
        if CONFIRM_NAMES.contains(&name.as_str()) {
            continue;
        }
        if !takes.iter().any(|(n, _)| n == name) {
            let accepted: Vec<String> = takes.iter().map(|(n, _)| format!("`{n}`")).collect();
            let hint = if accepted.is_empty() {
                "this verb takes no arguments".to_string()
            } else {
                format!("this verb takes {}", accepted.join(", "))
            };
            let message = if name.starts_with("_extra_") {
                // The CLI face's name for a positional value no argument takes.
                "more values than the verb takes arguments".to_string()
            } else {
                format!("unknown argument `{name}`")
            };
            return Err(refuse(Code::ArgUnknown, message, Some(hint)));
        }
    }
    let mut values = BTreeMap::new();
    let mut confirmed = false;
    let mut total = 0usize;
    for (name, value) in args.clone() {
        common_value_checks(name, value, &mut total, true)?;
        if CONFIRM_NAMES.contains(&name.as_str()) {
            confirmed |= confirm_value(name, value, cli_face)?;
            continue;
        }
        values.insert(name.clone(), value.clone());
    }
    for (name, required) in &takes {
        if *required && !values.contains_key(name) {
            return Err(refuse(
                Code::ArgMissing,
                format!("missing required argument `{name}`"),
                Some(missing_hint(
                    name,
                    takes.iter().map(|(n, _)| n.as_str()),
                    cli_face,
                )),
            ));
        }
    }
    for el in &plan.args {
        if let Element::Arg {
            name,
            prefix: None,
            after_double_dash: false,
            ..
        } = el
            && let Some(v) = values.get(name)
            && v.to_arg().starts_with('-')
        {
            return Err(refuse(
                Code::ArgLooksLikeFlag,
                format!("argument `{name}` starts with `-` and would be read as an option"),
                Some("pass a value that does not start with `-`".into()),
            ));
        }
    }
    Ok((values, confirmed))
}

fn tenant_refusal(name: &str) -> ArgRefusal {
    refuse(
        Code::TenantInArgs,
        format!("argument `{name}` would select the tenant; the tenant comes from the session"),
        Some("start a session with `--project` (the owner runs `hcp session start`)".into()),
    )
}

/// The checks of one value every verb gets: no NUL, a number that passes exactly, and
/// sizes (`argv`: one value must fit one argv element; the call's values together at most
/// [`MAX_ARGS_TOTAL_BYTES`], counted in `total`).
fn common_value_checks(
    name: &str,
    value: &ArgValue,
    total: &mut usize,
    argv: bool,
) -> Result<(), ArgRefusal> {
    if let ArgValue::String(s) = value
        && s.contains('\0')
    {
        return Err(refuse(
            Code::ArgInvalid,
            format!("argument `{name}` holds a NUL byte"),
            None,
        ));
    }
    // A JSON number that is no 64-bit integer arrives as a double: past 2^53 its
    // digits are no longer the ones sent, so the CLI would get another number.
    if let ArgValue::Number(n) = value
        && n.as_i64().is_none()
        && n.as_u64().is_none()
        && n.as_f64()
            .is_some_and(|f| f.abs() >= 9_007_199_254_740_992.0)
    {
        return Err(refuse(
            Code::ArgInvalid,
            format!("argument `{name}` is a number too large to pass exactly"),
            Some("send it as a string".into()),
        ));
    }
    if let ArgValue::String(s) = value {
        *total += s.len();
        if argv && s.len() > MAX_ARG_BYTES {
            return Err(refuse(
                Code::ArgInvalid,
                format!(
                    "argument `{name}` is {} bytes; one value may hold at most {MAX_ARG_BYTES}",
                    s.len()
                ),
                Some("pass large content through a file in the working directory".into()),
            ));
        }
        if *total > MAX_ARGS_TOTAL_BYTES {
            return Err(refuse(
                Code::ArgInvalid,
                format!(
                    "the values of this call hold more than {MAX_ARGS_TOTAL_BYTES} bytes together"
                ),
                None,
            ));
        }
    }
    Ok(())
}

/// Whether a `confirm`/`apply` value confirms: the boolean, or on the CLI face the string
/// `"true"`/`"false"` (§4.5.2).
fn confirm_value(name: &str, value: &ArgValue, cli_face: bool) -> Result<bool, ArgRefusal> {
    match value {
        ArgValue::Bool(b) => Ok(*b),
        ArgValue::String(s) if cli_face && s == "true" => Ok(true),
        ArgValue::String(s) if cli_face && s == "false" => Ok(false),
        _ => Err(refuse(
            Code::ArgInvalid,
            format!("argument `{name}` must be the boolean `true` or `false`"),
            None,
        )),
    }
}

/// Checks `args` against the operation `op` of a `kind: openapi` verb (RUNTIME §1.3), in
/// the order [`check_args`] follows: tenant-bearing names (§4.3.2), names that are not
/// arguments of the operation, values holding NUL, numbers too large to pass exactly,
/// `confirm`/`apply` values, the call's total size; then the document's rules
/// ([`hcp_openapi::check`]: missing required arguments, types, enums, bounds, lengths,
/// patterns, a path value that could leave its segment, a header value with control
/// characters). Nothing is sent before this passes. There is no flag-looking check: a
/// value never reaches a command line. Returns the values as given (the request coerces
/// them to the document's types) and whether the call confirms.
///
/// # Errors
/// The first [`ArgRefusal`] met.
pub fn check_operation_args<'a>(
    op: &hcp_openapi::Operation,
    args: impl IntoIterator<Item = (&'a String, &'a ArgValue)> + Clone,
    cli_face: bool,
) -> Result<(BTreeMap<String, ArgValue>, bool), ArgRefusal> {
    for (name, _) in args.clone() {
        if TENANT_NAMES.contains(&name.as_str()) {
            return Err(tenant_refusal(name));
        }
    }
    for (name, _) in args.clone() {
        if CONFIRM_NAMES.contains(&name.as_str()) || op.argument(name).is_some() {
            continue;
        }
        let accepted: Vec<String> = op.args.iter().map(|a| format!("`{}`", a.name)).collect();
        let hint = if accepted.is_empty() {
            "this verb takes no arguments".to_string()
        } else {
            format!("this verb takes {}", accepted.join(", "))
        };
        let message = if name.starts_with("_extra_") {
            "more values than the verb takes arguments".to_string()
        } else {
            let mut m = format!(
                "unknown argument `{name}`: operation `{}` has no such parameter or body property",
                op.id
            );
            if let Some(d) = op
                .dropped
                .iter()
                .find(|d| hcp_openapi::arg_name(&d.wire) == *name)
            {
                m.push_str(&format!(
                    " ({} `{}` is not passed: {})",
                    d.location, d.wire, d.why
                ));
            }
            m
        };
        return Err(refuse(Code::ArgUnknown, message, Some(hint)));
    }
    let mut values = BTreeMap::new();
    let mut confirmed = false;
    let mut total = 0usize;
    for (name, value) in args.clone() {
        common_value_checks(name, value, &mut total, false)?;
        if CONFIRM_NAMES.contains(&name.as_str()) {
            confirmed |= confirm_value(name, value, cli_face)?;
            continue;
        }
        values.insert(name.clone(), value.clone());
    }
    let json: serde_json::Map<String, serde_json::Value> = values
        .iter()
        .map(|(k, v)| (k.clone(), arg_json(v)))
        .collect();
    if let Err(r) = hcp_openapi::check(op, &json) {
        let code = r.code;
        let hint = match (code, r.argument.as_deref().and_then(|a| op.argument(a))) {
            (Code::ArgMissing, Some(a)) => Some(missing_hint(
                &a.name,
                op.positional().iter().map(|a| a.name.as_str()),
                cli_face,
            )),
            _ => None,
        };
        return Err(refuse(code, r.message, hint));
    }
    Ok((values, confirmed))
}

/// An argument value as the JSON value the HTTP request is built from.
pub fn arg_json(v: &ArgValue) -> serde_json::Value {
    match v {
        ArgValue::Bool(b) => serde_json::Value::Bool(*b),
        ArgValue::Number(n) => serde_json::Value::Number(n.clone()),
        ArgValue::String(s) => serde_json::Value::String(s.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hcp_model::template::parse_template;
    use pretty_assertions::assert_eq;

    fn plan(t: &[&str]) -> CommandPlan {
        CommandPlan {
            program: "x".into(),
            args: parse_template(t).unwrap(),
        }
    }

    fn s(v: &str) -> ArgValue {
        ArgValue::String(v.into())
    }

    fn run(
        p: &CommandPlan,
        a: &[(&str, ArgValue)],
    ) -> Result<(BTreeMap<String, ArgValue>, bool), Code> {
        let owned: Vec<(String, ArgValue)> =
            a.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        check_args(p, owned.iter().map(|(k, v)| (k, v)), true).map_err(|r| r.code)
    }

    #[test]
    fn order_and_codes() {
        let p = plan(&["log", "{{rev}}", "--max={{n?}}", "--", "{{path?}}"]);
        assert_eq!(run(&p, &[("rev", s("main"))]).unwrap().0.len(), 1);
        assert_eq!(
            run(&p, &[("project_id", s("p")), ("zzz", s("x"))]).unwrap_err(),
            Code::TenantInArgs
        );
        assert_eq!(
            run(&p, &[("rev", s("a")), ("zzz", s("x"))]).unwrap_err(),
            Code::ArgUnknown
        );
        assert_eq!(
            run(&p, &[("rev", s("a\0b"))]).unwrap_err(),
            Code::ArgInvalid
        );
        assert_eq!(run(&p, &[("n", s("3"))]).unwrap_err(), Code::ArgMissing);
        assert_eq!(
            run(&p, &[("rev", s("--output=x"))]).unwrap_err(),
            Code::ArgLooksLikeFlag
        );
        assert_eq!(
            run(&p, &[("rev", ArgValue::Number((-5).into()))]).unwrap_err(),
            Code::ArgLooksLikeFlag
        );
        // after `--`, and bound to a flag, a leading dash is harmless
        assert!(run(&p, &[("rev", s("a")), ("path", s("-weird"))]).is_ok());
        assert!(run(&p, &[("rev", s("a")), ("n", s("-1"))]).is_ok());
    }

    #[test]
    fn the_string_true_confirms_only_on_the_cli_face() {
        let p = plan(&["post"]);
        let args = [("confirm".to_string(), s("true"))];
        let json_face = check_args(&p, args.iter().map(|(k, v)| (k, v)), false);
        assert_eq!(json_face.unwrap_err().code, Code::ArgInvalid);
        let args = [("confirm".to_string(), ArgValue::Bool(true))];
        assert!(
            check_args(&p, args.iter().map(|(k, v)| (k, v)), false)
                .unwrap()
                .1
        );
    }

    #[test]
    fn oversized_values_are_refused() {
        let p = plan(&["say", "{{text}}"]);
        assert!(run(&p, &[("text", s(&"x".repeat(MAX_ARG_BYTES)))]).is_ok());
        // Integers are exact; a double past 2^53 is not.
        let num = |t: &str| ArgValue::Number(serde_json::from_str(t).unwrap());
        assert!(run(&p, &[("text", num("18446744073709551615"))]).is_ok());
        assert!(run(&p, &[("text", num("1.5"))]).is_ok());
        assert_eq!(
            run(&p, &[("text", num("18446744073709551616"))]).unwrap_err(),
            Code::ArgInvalid
        );
        assert_eq!(
            run(&p, &[("text", num("1e300"))]).unwrap_err(),
            Code::ArgInvalid
        );
        assert_eq!(
            run(&p, &[("text", s(&"x".repeat(MAX_ARG_BYTES + 1)))]).unwrap_err(),
            Code::ArgInvalid
        );
    }

    #[test]
    fn confirm_values() {
        let p = plan(&["post"]);
        assert_eq!(
            run(&p, &[("confirm", ArgValue::Bool(true))]).unwrap().1,
            true
        );
        assert_eq!(run(&p, &[("apply", s("true"))]).unwrap().1, true);
        assert_eq!(run(&p, &[("confirm", s("false"))]).unwrap().1, false);
        assert_eq!(
            run(&p, &[("confirm", s("yes"))]).unwrap_err(),
            Code::ArgInvalid
        );
        assert!(run(&p, &[]).unwrap().0.is_empty());
    }

    #[test]
    fn hostile_values_pass_the_gate_as_data() {
        let p = plan(&["say", "{{text}}"]);
        for v in [
            "a b",
            "'\"",
            "; touch X",
            "&& touch X",
            "$(touch X)",
            "`touch X`",
            "a\nb",
        ] {
            assert!(run(&p, &[("text", s(v))]).is_ok(), "{v}");
        }
    }
}
