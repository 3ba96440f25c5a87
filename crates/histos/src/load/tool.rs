//! One tool contract (HISTOS-ENGINE §2b): access, limits, confirmation, escalation,
//! output rules, `bind` and `resource`.

use std::collections::HashMap;

use crate::doc::{Kind, Node};
use crate::error::{PolicyCode as C, PolicyError};
use crate::model::*;
use crate::pattern::Pattern;
use crate::value::NON_STRING_KEY_PREFIX;

use super::field::load_schema;
use super::keys::take_keys;
use super::{Loc, check_keys, err};

fn bool_field<'d>(
    v: Option<impl Node<'d>>,
    key: &str,
    default: bool,
    code: C,
    loc: &Loc<'_>,
) -> Result<bool, PolicyError> {
    match v.map(Node::kind) {
        None => Ok(default),
        Some(Kind::Bool(b)) => Ok(b),
        Some(_) => Err(err(
            code,
            format!("`{key}` must be true or false"),
            &loc.key(key),
        )),
    }
}

fn positive_int<'d>(v: Option<impl Node<'d>>, loc: &Loc<'_>) -> Result<Option<u64>, PolicyError> {
    match v.map(Node::kind) {
        None | Some(Kind::Null) => Ok(None),
        Some(Kind::Int(i)) if i >= 1 => Ok(Some(i as u64)),
        Some(Kind::Big(s)) if !s.starts_with('-') => Ok(Some(u64::MAX)),
        Some(_) => Err(err(
            C::InvalidContract,
            "must be a positive integer (`10`, not `10.0`)",
            loc,
        )),
    }
}

pub(super) fn load_tool<'d, N: Node<'d>>(
    name: &str,
    body: N,
    loc: &Loc<'_>,
    patterns: &mut HashMap<String, Pattern>,
) -> Result<Tool, PolicyError> {
    let Some(m) = body.map() else {
        return Err(err(C::NotAMapping, "a tool must be a mapping", loc));
    };
    let [
        t_access,
        t_args,
        t_bind,
        t_budget,
        t_confirmation,
        t_deny_secret_args,
        t_escalate,
        t_output,
        t_rate_limit,
        t_resource,
        t_returns,
        t_sensitivity,
    ] = take_keys(
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
    let access = match t_access.map(Node::kind) {
        None => "read".to_string(),
        Some(Kind::Str(s @ ("read" | "write"))) => s.to_string(),
        Some(_) => {
            return Err(err(
                C::PolicyInvalid,
                "`access` must be `read` or `write`",
                &loc.key("access"),
            ));
        }
    };
    let sensitivity = match t_sensitivity.map(Node::kind) {
        None => "low".to_string(),
        Some(Kind::Str(s)) if ["low", "medium", "high", "critical"].contains(&s) => s.to_string(),
        Some(_) => {
            return Err(err(
                C::InvalidField,
                "`sensitivity` must be low, medium, high or critical",
                &loc.key("sensitivity"),
            ));
        }
    };
    let rate_limit = positive_int(t_rate_limit, &loc.key("rate_limit"))?;
    let budget = positive_int(t_budget, &loc.key("budget"))?;
    let args = load_schema(t_args, &loc.key("args"), patterns)?;
    let returns = load_schema(t_returns, &loc.key("returns"), patterns)?;
    let (requires_confirmation, confirmation_expires_in) = match t_confirmation {
        None => (false, None),
        Some(v) => {
            let l = loc.key("confirmation");
            let Some(c) = v.map() else {
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
            let req = bool_field(c.get("required"), "required", false, C::InvalidField, &l)?;
            (
                req,
                positive_int(c.get("expires_in"), &l.key("expires_in"))?,
            )
        }
    };
    let requires_escalation = match t_escalate {
        None => false,
        Some(v) => {
            let l = loc.key("escalate");
            let Some(c) = v.map() else {
                return Err(err(C::NotAMapping, "`escalate` must be a mapping", &l));
            };
            check_keys(c, &["required"], &l)?;
            if !c.contains_key("required") {
                return Err(err(C::MissingKey, "`escalate.required` is required", &l));
            }
            bool_field(c.get("required"), "required", false, C::InvalidField, &l)?
        }
    };
    let (mut project, mut strict, mut on_violation, mut scan_canary, mut redact_secrets) =
        (false, false, OnViolation::RedactAll, true, true);
    if let Some(v) = t_output {
        let l = loc.key("output");
        let Some(o) = v.map() else {
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
        project = bool_field(o.get("project"), "project", false, C::InvalidField, &l)?;
        strict = bool_field(o.get("strict"), "strict", false, C::InvalidField, &l)?;
        scan_canary = bool_field(
            o.get("scan_canary"),
            "scan_canary",
            true,
            C::InvalidField,
            &l,
        )?;
        redact_secrets = bool_field(
            o.get("redact_secrets"),
            "redact_secrets",
            true,
            C::InvalidField,
            &l,
        )?;
        on_violation = match o.get("on_violation").map(Node::kind) {
            None => OnViolation::RedactAll,
            Some(Kind::Str("redact_all")) => OnViolation::RedactAll,
            Some(Kind::Str("deny")) => OnViolation::Deny,
            Some(Kind::Str("allow")) => OnViolation::Allow,
            Some(_) => {
                return Err(err(
                    C::PolicyInvalid,
                    "`on_violation` must be redact_all, deny or allow",
                    &l.key("on_violation"),
                ));
            }
        };
    }
    let deny_secret_args = bool_field(
        t_deny_secret_args,
        "deny_secret_args",
        true,
        C::InvalidField,
        loc,
    )?;
    let bindings = load_bind(t_bind, &loc.key("bind"))?;
    let constraints = load_resource(t_resource, &loc.key("resource"))?;
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

fn load_bind<'d>(
    v: Option<impl Node<'d>>,
    loc: &Loc<'_>,
) -> Result<Vec<(String, String)>, PolicyError> {
    let m = match v {
        None => return Ok(Vec::new()),
        Some(m) => m
            .map()
            .ok_or_else(|| err(C::InvalidBinding, "`bind` must be a mapping", loc))?,
    };
    let mut out = Vec::with_capacity(m.len());
    for (arg, src) in m.entries() {
        let attr = src.str().and_then(binding_attr).ok_or_else(|| {
            err(
                C::InvalidBinding,
                "a binding must be exactly `principal.<attr>`",
                &loc.key(arg),
            )
        })?;
        out.push((arg.to_string(), attr.to_string()));
    }
    Ok(out)
}

pub(super) fn is_json_value<'d, N: Node<'d>>(v: N) -> bool {
    match v.kind() {
        Kind::Float(f) => f.is_finite(),
        Kind::Timestamp(_) => false,
        Kind::List => v.items().all(is_json_value),
        Kind::Map => v
            .entries()
            .all(|(k, v)| !k.starts_with(NON_STRING_KEY_PREFIX) && is_json_value(v)),
        _ => true,
    }
}

fn load_resource<'d, N: Node<'d>>(
    v: Option<N>,
    loc: &Loc<'_>,
) -> Result<Vec<Constraint>, PolicyError> {
    let m = match v {
        None => return Ok(Vec::new()),
        Some(v) if v.kind() == Kind::Null => return Ok(Vec::new()),
        Some(v) => v
            .map()
            .ok_or_else(|| err(C::NotAMapping, "`resource` must be a mapping", loc))?,
    };
    check_keys(m, &["owns", "where"], loc)?;
    let mut out = Vec::new();
    match m.get("owns").map(|o| (o, o.kind())) {
        None => {}
        Some((_, Kind::Str(s))) => out.push(Constraint {
            field: s.to_string(),
            op: Op::Eq,
            value: None,
            principal_attr: Some(s.to_string()),
        }),
        Some((o, Kind::Map)) => {
            let l = loc.key("owns");
            for k in ["field", "principal_attr"] {
                if !o.contains_key(k) {
                    return Err(err(C::MissingKey, format!("`owns.{k}` is required"), &l));
                }
            }
            check_keys(o, &["field", "principal_attr"], &l)?;
            let (Some(f), Some(a)) = (
                o.get("field").and_then(Node::str),
                o.get("principal_attr").and_then(Node::str),
            ) else {
                return Err(err(C::PolicyInvalid, "`owns` names must be strings", &l));
            };
            out.push(Constraint {
                field: f.to_string(),
                op: Op::Eq,
                value: None,
                principal_attr: Some(a.to_string()),
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
    match m.get("where").map(|w| (w, w.kind())) {
        None => {}
        Some((items, Kind::List)) => {
            let wloc = loc.key("where");
            for (i, it) in items.items().enumerate() {
                let l = wloc.index(i);
                let Some(c) = it.map() else {
                    return Err(err(C::NotAMapping, "a condition must be a mapping", &l));
                };
                check_keys(c, &["field", "op", "value", "principal_attr"], &l)?;
                for k in ["field", "op"] {
                    if !c.contains_key(k) {
                        return Err(err(C::MissingKey, format!("`{k}` is required"), &l));
                    }
                }
                let Some(field) = c.get("field").and_then(Node::str) else {
                    return Err(err(C::PolicyInvalid, "`field` must be a string", &l));
                };
                let op = match c.get("op").and_then(Node::str) {
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
                        (Some(v.to_value()), None)
                    }
                    (None, Some(a)) if a.str().is_some() => (None, a.str().map(str::to_string)),
                    _ => {
                        return Err(err(
                            C::PolicyInvalid,
                            "a condition takes exactly one of `value` and a string `principal_attr`",
                            &l,
                        ));
                    }
                };
                out.push(Constraint {
                    field: field.to_string(),
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
