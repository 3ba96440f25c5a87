//! One tool contract (HISTOS-ENGINE §2b): access, limits, confirmation, escalation,
//! output rules, `bind` and `resource`.

use std::collections::HashMap;

use crate::error::{PolicyCode as C, PolicyError};
use crate::model::*;
use crate::pattern::Pattern;
use crate::value::{Map, NON_STRING_KEY_PREFIX, Value};

use super::field::load_schema;
use super::{Loc, check_keys, err};

fn bool_field(
    m: &Map,
    key: &str,
    default: bool,
    code: C,
    loc: &Loc<'_>,
) -> Result<bool, PolicyError> {
    match m.get(key) {
        None => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(err(
            code,
            format!("`{key}` must be true or false"),
            &loc.key(key),
        )),
    }
}

fn positive_int(v: Option<&Value>, loc: &Loc<'_>) -> Result<Option<u64>, PolicyError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Int(i)) if *i >= 1 => Ok(Some(*i as u64)),
        Some(Value::BigInt(s)) if !s.starts_with('-') => Ok(Some(u64::MAX)),
        Some(_) => Err(err(
            C::InvalidContract,
            "must be a positive integer (`10`, not `10.0`)",
            loc,
        )),
    }
}

pub(super) fn load_tool(
    name: &str,
    body: &Value,
    loc: &Loc<'_>,
    patterns: &mut HashMap<String, Pattern>,
) -> Result<Tool, PolicyError> {
    let Value::Map(m) = body else {
        return Err(err(C::NotAMapping, "a tool must be a mapping", loc));
    };
    check_keys(
        m,
        &[
            "access",
            "args",
            "bind",
            "budget",
            "confirmation",
            "deny_secret_args",
            "escalate",
            "output",
            "rate_limit",
            "resource",
            "returns",
            "sensitivity",
        ],
        loc,
    )?;
    let access = match m.get("access") {
        None => "read".to_string(),
        Some(Value::Str(s)) if s == "read" || s == "write" => s.clone(),
        Some(_) => {
            return Err(err(
                C::PolicyInvalid,
                "`access` must be `read` or `write`",
                &loc.key("access"),
            ));
        }
    };
    let sensitivity = match m.get("sensitivity") {
        None => "low".to_string(),
        Some(Value::Str(s)) if ["low", "medium", "high", "critical"].contains(&s.as_str()) => {
            s.clone()
        }
        Some(_) => {
            return Err(err(
                C::InvalidField,
                "`sensitivity` must be low, medium, high or critical",
                &loc.key("sensitivity"),
            ));
        }
    };
    let rate_limit = positive_int(m.get("rate_limit"), &loc.key("rate_limit"))?;
    let budget = positive_int(m.get("budget"), &loc.key("budget"))?;
    let args = load_schema(m.get("args"), &loc.key("args"), patterns)?;
    let returns = load_schema(m.get("returns"), &loc.key("returns"), patterns)?;
    let (requires_confirmation, confirmation_expires_in) = match m.get("confirmation") {
        None => (false, None),
        Some(v) => {
            let l = loc.key("confirmation");
            let Value::Map(c) = v else {
                return Err(err(C::NotAMapping, "`confirmation` must be a mapping", &l));
            };
            check_keys(c, &["required", "expires_in"], &l)?;
            if !c.contains_key("required") {
                return Err(err(
                    C::MissingKey,
                    "`confirmation.required` is required",
                    &l,
                ));
            }
            let req = bool_field(c, "required", false, C::InvalidField, &l)?;
            (
                req,
                positive_int(c.get("expires_in"), &l.key("expires_in"))?,
            )
        }
    };
    let requires_escalation = match m.get("escalate") {
        None => false,
        Some(v) => {
            let l = loc.key("escalate");
            let Value::Map(c) = v else {
                return Err(err(C::NotAMapping, "`escalate` must be a mapping", &l));
            };
            check_keys(c, &["required"], &l)?;
            if !c.contains_key("required") {
                return Err(err(C::MissingKey, "`escalate.required` is required", &l));
            }
            bool_field(c, "required", false, C::InvalidField, &l)?
        }
    };
    let (mut project, mut strict, mut on_violation, mut scan_canary, mut redact_secrets) =
        (false, false, OnViolation::RedactAll, true, true);
    if let Some(v) = m.get("output") {
        let l = loc.key("output");
        let Value::Map(o) = v else {
            return Err(err(C::NotAMapping, "`output` must be a mapping", &l));
        };
        check_keys(
            o,
            &[
                "project",
                "strict",
                "on_violation",
                "scan_canary",
                "redact_secrets",
            ],
            &l,
        )?;
        project = bool_field(o, "project", false, C::InvalidField, &l)?;
        strict = bool_field(o, "strict", false, C::InvalidField, &l)?;
        scan_canary = bool_field(o, "scan_canary", true, C::InvalidField, &l)?;
        redact_secrets = bool_field(o, "redact_secrets", true, C::InvalidField, &l)?;
        on_violation = match o.get("on_violation") {
            None => OnViolation::RedactAll,
            Some(Value::Str(s)) if s == "redact_all" => OnViolation::RedactAll,
            Some(Value::Str(s)) if s == "deny" => OnViolation::Deny,
            Some(Value::Str(s)) if s == "allow" => OnViolation::Allow,
            Some(_) => {
                return Err(err(
                    C::PolicyInvalid,
                    "`on_violation` must be redact_all, deny or allow",
                    &l.key("on_violation"),
                ));
            }
        };
    }
    let deny_secret_args = bool_field(m, "deny_secret_args", true, C::InvalidField, loc)?;
    let bindings = load_bind(m.get("bind"), &loc.key("bind"))?;
    let constraints = load_resource(m.get("resource"), &loc.key("resource"))?;
    Ok(Tool {
        name: name.to_string(),
        args,
        returns,
        access,
        sensitivity,
        rate_limit,
        budget,
        requires_confirmation,
        confirmation_expires_in,
        requires_escalation,
        constraints,
        bindings,
        scan_output_for_canary: scan_canary,
        deny_secret_args,
        redact_secret_output: redact_secrets,
        project_output: project,
        strict_returns: strict,
        on_output_violation: on_violation,
    })
}

/// `principal\.[A-Za-z_][A-Za-z0-9_]*`, fully; returns the attribute.
fn binding_attr(s: &str) -> Option<&str> {
    let a = s.strip_prefix("principal.")?;
    let b = a.as_bytes();
    (!b.is_empty()
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'_'))
    .then_some(a)
}

fn load_bind(v: Option<&Value>, loc: &Loc<'_>) -> Result<Vec<(String, String)>, PolicyError> {
    let m = match v {
        None => return Ok(Vec::new()),
        Some(Value::Map(m)) => m,
        Some(_) => return Err(err(C::InvalidBinding, "`bind` must be a mapping", loc)),
    };
    let mut out = Vec::new();
    for (arg, src) in m.iter() {
        let attr = src.as_str().and_then(binding_attr).ok_or_else(|| {
            err(
                C::InvalidBinding,
                "a binding must be exactly `principal.<attr>`",
                &loc.key(arg),
            )
        })?;
        out.push((arg.clone(), attr.to_string()));
    }
    Ok(out)
}

pub(super) fn is_json_value(v: &Value) -> bool {
    match v {
        Value::Float(f) => f.is_finite(),
        Value::Timestamp(_) => false,
        Value::List(l) => l.iter().all(is_json_value),
        Value::Map(m) => m
            .iter()
            .all(|(k, v)| !k.starts_with(NON_STRING_KEY_PREFIX) && is_json_value(v)),
        _ => true,
    }
}

fn load_resource(v: Option<&Value>, loc: &Loc<'_>) -> Result<Vec<Constraint>, PolicyError> {
    let m = match v {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Map(m)) => m,
        Some(_) => return Err(err(C::NotAMapping, "`resource` must be a mapping", loc)),
    };
    check_keys(m, &["owns", "where"], loc)?;
    let mut out = Vec::new();
    match m.get("owns") {
        None => {}
        Some(Value::Str(s)) => out.push(Constraint {
            field: s.clone(),
            op: Op::Eq,
            value: None,
            principal_attr: Some(s.clone()),
        }),
        Some(Value::Map(o)) => {
            let l = loc.key("owns");
            for k in ["field", "principal_attr"] {
                if !o.contains_key(k) {
                    return Err(err(C::MissingKey, format!("`owns.{k}` is required"), &l));
                }
            }
            check_keys(o, &["field", "principal_attr"], &l)?;
            let (Some(Value::Str(f)), Some(Value::Str(a))) =
                (o.get("field"), o.get("principal_attr"))
            else {
                return Err(err(C::PolicyInvalid, "`owns` names must be strings", &l));
            };
            out.push(Constraint {
                field: f.clone(),
                op: Op::Eq,
                value: None,
                principal_attr: Some(a.clone()),
            });
        }
        Some(_) => {
            return Err(err(
                C::PolicyInvalid,
                "`owns` must be a string or a mapping",
                &loc.key("owns"),
            ));
        }
    }
    match m.get("where") {
        None => {}
        Some(Value::List(items)) => {
            let wloc = loc.key("where");
            for (i, it) in items.iter().enumerate() {
                let l = wloc.index(i);
                let Value::Map(c) = it else {
                    return Err(err(C::NotAMapping, "a condition must be a mapping", &l));
                };
                check_keys(c, &["field", "op", "value", "principal_attr"], &l)?;
                for k in ["field", "op"] {
                    if !c.contains_key(k) {
                        return Err(err(C::MissingKey, format!("`{k}` is required"), &l));
                    }
                }
                let Some(Value::Str(field)) = c.get("field") else {
                    return Err(err(C::PolicyInvalid, "`field` must be a string", &l));
                };
                let op = match c.get("op").and_then(Value::as_str) {
                    Some("eq") => Op::Eq,
                    Some("ne") => Op::Ne,
                    Some("in") => Op::In,
                    Some("not_in") => Op::NotIn,
                    Some("le") => Op::Le,
                    Some("lt") => Op::Lt,
                    Some("ge") => Op::Ge,
                    Some("gt") => Op::Gt,
                    _ => {
                        return Err(err(
                            C::PolicyInvalid,
                            "`op` must be one of eq, ne, in, not_in, le, lt, ge, gt",
                            &l,
                        ));
                    }
                };
                let (value, attr) = match (c.get("value"), c.get("principal_attr")) {
                    (Some(v), None) => {
                        if !is_json_value(v) {
                            return Err(err(C::PolicyInvalid, "`value` must be a JSON value", &l));
                        }
                        (Some(v.clone()), None)
                    }
                    (None, Some(Value::Str(a))) => (None, Some(a.clone())),
                    _ => {
                        return Err(err(
                            C::PolicyInvalid,
                            "a condition takes exactly one of `value` and a string `principal_attr`",
                            &l,
                        ));
                    }
                };
                out.push(Constraint {
                    field: field.clone(),
                    op,
                    value,
                    principal_attr: attr,
                });
            }
        }
        Some(_) => {
            return Err(err(
                C::NotAList,
                "`where` must be a list",
                &loc.key("where"),
            ));
        }
    }
    Ok(out)
}
