//! Strict loading of a policy document into a [`Policy`] (HISTOS-ENGINE §2).

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::path::Path;

use crate::detect::CanaryMatcher;
use crate::error::{PolicyCode as C, PolicyError};
use crate::model::*;
use crate::pattern::Pattern;
use crate::value::{Map, NON_STRING_KEY_PREFIX, Value};

/// Maximum policy document size in bytes (4 MiB); larger → `policy_too_large`.
pub const MAX_POLICY_BYTES: usize = 4 * 1024 * 1024;

/// The schema version this engine implements.
pub const SCHEMA_VERSION: &str = "histos.policy/0.1";

/// The features this engine implements (HISTOS-ENGINE §2a step 5).
pub const FEATURES: [&str; 18] = [
    "arg_schema",
    "array_items",
    "budget",
    "canary",
    "enum",
    "escalation",
    "numeric_range",
    "output_projection",
    "rate_limit",
    "rbac",
    "requires_confirmation",
    "resource_authz",
    "role_inheritance",
    "secret_detectors",
    "sensitive_redaction",
    "strict_returns",
    "string_bounds",
    "trusted_arg_binding",
];

fn err(code: C, msg: impl Into<String>, loc: &str) -> PolicyError {
    PolicyError::new(code, msg).at(loc.to_string())
}

fn shown(k: &str) -> &str {
    k.trim_start_matches(NON_STRING_KEY_PREFIX)
}

fn check_keys(m: &Map, allowed: &[&str], loc: &str) -> Result<(), PolicyError> {
    for k in m.keys() {
        if !allowed.contains(&k.as_str()) {
            return Err(err(
                C::UnknownKey,
                format!("unknown key `{}`", shown(k)),
                loc,
            ));
        }
    }
    Ok(())
}

impl Policy {
    /// Loads a JSON policy (HISTOS-ENGINE §2, §3.5).
    ///
    /// # Errors
    /// A [`PolicyError`] with the reference's POLICY code.
    pub fn load_json(text: &str) -> Result<Policy, PolicyError> {
        if text.len() > MAX_POLICY_BYTES {
            return Err(too_large(text.len()));
        }
        Policy::from_document(crate::json::parse(text)?)
    }

    /// Loads a YAML policy (YAML 1.1 scalars as the reference resolves them, §3.5).
    ///
    /// # Errors
    /// A [`PolicyError`] with the reference's POLICY code.
    pub fn load_yaml(text: &str) -> Result<Policy, PolicyError> {
        if text.len() > MAX_POLICY_BYTES {
            return Err(too_large(text.len()));
        }
        Policy::from_document(crate::yaml::parse(text)?)
    }

    /// Loads a policy file: `.json` as JSON, anything else as YAML. The size is checked
    /// from metadata before reading, and reading stops past [`MAX_POLICY_BYTES`].
    ///
    /// # Errors
    /// `not_found` when the path does not exist, `policy_too_large`, `unparseable` for
    /// unreadable or non-UTF-8 content, then the codes of [`Policy::load_json`] /
    /// [`Policy::load_yaml`].
    pub fn load_path(path: &Path) -> Result<Policy, PolicyError> {
        let loc = path.display().to_string();
        let file = std::fs::File::open(path).map_err(|e| {
            let code = if e.kind() == std::io::ErrorKind::NotFound {
                C::NotFound
            } else {
                C::Unparseable
            };
            err(code, format!("cannot open policy: {e}"), &loc)
        })?;
        if let Ok(md) = file.metadata()
            && md.len() > MAX_POLICY_BYTES as u64
        {
            return Err(too_large(md.len() as usize).at(loc));
        }
        let mut buf = Vec::new();
        file.take(MAX_POLICY_BYTES as u64 + 1)
            .read_to_end(&mut buf)
            .map_err(|e| err(C::Unparseable, format!("cannot read policy: {e}"), &loc))?;
        if buf.len() > MAX_POLICY_BYTES {
            return Err(too_large(buf.len()).at(loc));
        }
        let text = String::from_utf8(buf)
            .map_err(|_| err(C::Unparseable, "policy is not valid UTF-8", &loc))?;
        let is_json = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| e.eq_ignore_ascii_case("json"));
        if is_json {
            Policy::load_json(&text)
        } else {
            Policy::load_yaml(&text)
        }
    }

    /// Loads an already-parsed document (the conformance `document` objects).
    ///
    /// # Errors
    /// A [`PolicyError`] with the reference's POLICY code.
    pub fn from_document(doc: Value) -> Result<Policy, PolicyError> {
        let Value::Map(top) = doc else {
            return Err(PolicyError::new(
                C::NotAnObject,
                "a policy document must be a mapping",
            ));
        };
        load_top(&top)
    }
}

fn too_large(n: usize) -> PolicyError {
    PolicyError::new(
        C::PolicyTooLarge,
        format!("policy is {n} bytes, more than the {MAX_POLICY_BYTES}-byte limit"),
    )
}

fn load_top(top: &Map) -> Result<Policy, PolicyError> {
    const TOP: [&str; 8] = [
        "canaries",
        "created_at",
        "policy_id",
        "requires",
        "roles",
        "schema_version",
        "tools",
        "version",
    ];
    for k in top.keys() {
        if !TOP.contains(&k.as_str()) {
            let hint = match k.as_str() {
                "permissions" | "policy_version" | "role_inherits" => {
                    " (a constructor spelling, not a bundle key)"
                }
                _ => "",
            };
            return Err(err(
                C::UnknownKey,
                format!("unknown top-level key `{}`{hint}", shown(k)),
                k,
            ));
        }
    }
    let schema_version = match top.get("schema_version") {
        None => SCHEMA_VERSION.to_string(),
        Some(Value::Str(s)) if s == SCHEMA_VERSION => s.clone(),
        Some(_) => {
            return Err(err(
                C::UnsupportedVersion,
                format!("unsupported schema_version (this engine implements `{SCHEMA_VERSION}`)"),
                "schema_version",
            ));
        }
    };
    let features = load_requires(top.get("requires"))?;
    let empty = Map::new();
    let tools_map = match top.get("tools") {
        None => &empty,
        Some(Value::Map(m)) => m,
        Some(_) => {
            return Err(err(
                C::ToolsNotAMapping,
                "`tools` must be a mapping keyed by tool name",
                "tools",
            ));
        }
    };
    let mut tools = Vec::with_capacity(tools_map.len());
    // Identical pattern sources compile once per load.
    let mut patterns: HashMap<String, Pattern> = HashMap::new();
    for (name, body) in tools_map.iter() {
        let loc = format!("tools.{}", shown(name));
        if !valid_tool_name(name) {
            return Err(err(
                C::PolicyInvalid,
                format!("invalid tool name `{}`", shown(name)),
                &loc,
            ));
        }
        tools.push(load_tool(name, body, &loc, &mut patterns)?);
    }
    let roles = load_roles(top.get("roles"))?;
    let canaries = load_canaries(top.get("canaries"))?;
    let meta = |k: &str| -> Result<Option<String>, PolicyError> {
        match top.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Str(s)) => Ok(Some(s.clone())),
            Some(_) => Err(err(C::PolicyInvalid, format!("`{k}` must be a string"), k)),
        }
    };
    let policy_id = meta("policy_id")?;
    let version = meta("version")?;
    let created_at = meta("created_at")?;
    build(
        schema_version,
        policy_id,
        version,
        created_at,
        features,
        tools,
        roles,
        canaries,
    )
}

#[allow(clippy::too_many_arguments)]
fn build(
    schema_version: String,
    policy_id: Option<String>,
    version: Option<String>,
    created_at: Option<String>,
    features: Vec<String>,
    tools: Vec<Tool>,
    roles: Vec<Role>,
    canaries: Vec<String>,
) -> Result<Policy, PolicyError> {
    let mut tool_index = HashMap::with_capacity_and_hasher(tools.len(), crate::fasthash::Fnv);
    for (i, t) in tools.iter().enumerate() {
        tool_index.insert(t.name.clone(), i);
    }
    let mut role_index = HashMap::with_capacity_and_hasher(roles.len(), crate::fasthash::Fnv);
    for (i, r) in roles.iter().enumerate() {
        role_index.insert(r.name.clone(), i);
    }
    let words = tools.len().div_ceil(64).max(1);
    let mut grants = Vec::with_capacity(roles.len());
    for r in &roles {
        let mut bits = vec![0u64; words];
        let mut seen: HashSet<&str> = HashSet::new();
        let mut cur = Some(r);
        while let Some(role) = cur {
            if !seen.insert(role.name.as_str()) {
                break;
            }
            for g in &role.allow {
                if let Some(&t) = tool_index.get(g.as_str()) {
                    bits[t / 64] |= 1u64 << (t % 64);
                }
            }
            cur = role
                .inherits
                .as_deref()
                .and_then(|p| role_index.get(p))
                .map(|&i| &roles[i]);
        }
        grants.push(bits);
    }
    let canary_matcher = CanaryMatcher::new(&canaries);
    let mut p = Policy {
        schema_version,
        policy_id,
        version,
        created_at,
        features,
        tools,
        roles,
        canaries,
        tool_index,
        role_index,
        grants,
        canary_matcher,
        content_hash: String::new(),
    };
    p.content_hash = crate::hash::content_hash(&p);
    Ok(p)
}

/// `[A-Za-z_][A-Za-z0-9_.-]*`, fully.
pub(crate) fn valid_tool_name(n: &str) -> bool {
    let b = n.as_bytes();
    !b.is_empty()
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
}

fn load_requires(v: Option<&Value>) -> Result<Vec<String>, PolicyError> {
    let m = match v {
        None => return Ok(Vec::new()),
        Some(Value::Map(m)) => m,
        Some(_) => {
            return Err(err(
                C::PolicyInvalid,
                "`requires` must be a mapping",
                "requires",
            ));
        }
    };
    check_keys(m, &["features"], "requires")?;
    let list = match m.get("features") {
        None => return Ok(Vec::new()),
        Some(Value::List(l)) => l,
        Some(_) => {
            return Err(err(
                C::PolicyInvalid,
                "`requires.features` must be a list",
                "requires.features",
            ));
        }
    };
    let mut out: Vec<String> = Vec::new();
    for f in list {
        let Value::Str(s) = f else {
            return Err(err(
                C::PolicyInvalid,
                "a feature must be a string",
                "requires.features",
            ));
        };
        if out.contains(s) {
            return Err(err(
                C::PolicyInvalid,
                format!("feature `{s}` listed twice"),
                "requires.features",
            ));
        }
        out.push(s.clone());
    }
    for s in &out {
        if !FEATURES.contains(&s.as_str()) {
            return Err(err(
                C::UnsupportedFeature,
                format!("this engine does not implement feature `{s}`"),
                "requires.features",
            ));
        }
    }
    Ok(out)
}

fn load_roles(v: Option<&Value>) -> Result<Vec<Role>, PolicyError> {
    let m = match v {
        None => return Ok(Vec::new()),
        Some(Value::Map(m)) => m,
        Some(_) => return Err(err(C::NotAMapping, "`roles` must be a mapping", "roles")),
    };
    let mut roles = Vec::new();
    for (name, body) in m.iter() {
        let loc = format!("roles.{}", shown(name));
        if name.is_empty() || name.starts_with(NON_STRING_KEY_PREFIX) {
            return Err(err(
                C::PolicyInvalid,
                "a role name must be a non-empty string",
                &loc,
            ));
        }
        let Value::Map(b) = body else {
            return Err(err(C::NotAMapping, "a role must be a mapping", &loc));
        };
        check_keys(b, &["allow", "inherits"], &loc)?;
        let mut allow: Vec<String> = Vec::new();
        match b.get("allow") {
            None => {}
            Some(Value::List(l)) => {
                for g in l {
                    let Value::Str(s) = g else {
                        return Err(err(
                            C::InvalidGrant,
                            "a grant must be a tool name string",
                            &format!("{loc}.allow"),
                        ));
                    };
                    if allow.contains(s) {
                        return Err(err(
                            C::PolicyInvalid,
                            format!("tool `{s}` granted twice"),
                            &format!("{loc}.allow"),
                        ));
                    }
                    allow.push(s.clone());
                }
            }
            Some(_) => {
                return Err(err(
                    C::NotAList,
                    "`allow` must be a list",
                    &format!("{loc}.allow"),
                ));
            }
        }
        let inherits = match b.get("inherits") {
            None => None,
            Some(Value::Str(s)) if !s.is_empty() => Some(s.clone()),
            Some(_) => {
                return Err(err(
                    C::PolicyInvalid,
                    "`inherits` must be a non-empty role name",
                    &format!("{loc}.inherits"),
                ));
            }
        };
        roles.push(Role {
            name: name.clone(),
            allow,
            inherits,
        });
    }
    Ok(roles)
}

fn load_canaries(v: Option<&Value>) -> Result<Vec<String>, PolicyError> {
    let l = match v {
        None => return Ok(Vec::new()),
        Some(Value::List(l)) => l,
        Some(_) => return Err(err(C::NotAList, "`canaries` must be a list", "canaries")),
    };
    let mut out: Vec<String> = Vec::new();
    for c in l {
        match c {
            Value::Str(s) if s.chars().count() >= 6 && !out.contains(s) => out.push(s.clone()),
            _ => {
                return Err(err(
                    C::InvalidCanary,
                    "a canary must be a unique string of at least 6 characters",
                    "canaries",
                ));
            }
        }
    }
    Ok(out)
}

fn bool_field(m: &Map, key: &str, default: bool, code: C, loc: &str) -> Result<bool, PolicyError> {
    match m.get(key) {
        None => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(err(
            code,
            format!("`{key}` must be true or false"),
            &format!("{loc}.{key}"),
        )),
    }
}

fn positive_int(v: Option<&Value>, loc: &str) -> Result<Option<u64>, PolicyError> {
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

fn load_tool(
    name: &str,
    body: &Value,
    loc: &str,
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
                &format!("{loc}.access"),
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
                &format!("{loc}.sensitivity"),
            ));
        }
    };
    let rate_limit = positive_int(m.get("rate_limit"), &format!("{loc}.rate_limit"))?;
    let budget = positive_int(m.get("budget"), &format!("{loc}.budget"))?;
    let args = load_schema(m.get("args"), &format!("{loc}.args"), patterns)?;
    let returns = load_schema(m.get("returns"), &format!("{loc}.returns"), patterns)?;
    let (requires_confirmation, confirmation_expires_in) = match m.get("confirmation") {
        None => (false, None),
        Some(v) => {
            let l = format!("{loc}.confirmation");
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
                positive_int(c.get("expires_in"), &format!("{l}.expires_in"))?,
            )
        }
    };
    let requires_escalation = match m.get("escalate") {
        None => false,
        Some(v) => {
            let l = format!("{loc}.escalate");
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
        let l = format!("{loc}.output");
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
                    &format!("{l}.on_violation"),
                ));
            }
        };
    }
    let deny_secret_args = bool_field(m, "deny_secret_args", true, C::InvalidField, loc)?;
    let bindings = load_bind(m.get("bind"), &format!("{loc}.bind"))?;
    let constraints = load_resource(m.get("resource"), &format!("{loc}.resource"))?;
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

fn load_bind(v: Option<&Value>, loc: &str) -> Result<Vec<(String, String)>, PolicyError> {
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
                &format!("{loc}.{}", shown(arg)),
            )
        })?;
        out.push((arg.clone(), attr.to_string()));
    }
    Ok(out)
}

fn is_json_value(v: &Value) -> bool {
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

fn load_resource(v: Option<&Value>, loc: &str) -> Result<Vec<Constraint>, PolicyError> {
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
            let l = format!("{loc}.owns");
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
                &format!("{loc}.owns"),
            ));
        }
    }
    match m.get("where") {
        None => {}
        Some(Value::List(items)) => {
            for (i, it) in items.iter().enumerate() {
                let l = format!("{loc}.where[{i}]");
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
                &format!("{loc}.where"),
            ));
        }
    }
    Ok(out)
}

fn load_schema(
    v: Option<&Value>,
    loc: &str,
    patterns: &mut HashMap<String, Pattern>,
) -> Result<Option<Schema>, PolicyError> {
    let m = match v {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Map(m)) => m,
        Some(_) => {
            return Err(err(
                C::NotAMapping,
                "a schema must be a mapping of fields",
                loc,
            ));
        }
    };
    if m.len() == 1 && m.contains_key("json_schema") {
        return Err(err(
            C::PolicyInvalid,
            "inline `json_schema` import is not supported by this engine",
            loc,
        ));
    }
    let mut schema = Schema::default();
    for (k, body) in m.iter() {
        if k == "$allow_extra" {
            match body {
                Value::Bool(b) => schema.allow_extra = *b,
                _ => {
                    return Err(err(
                        C::PolicyInvalid,
                        "`$allow_extra` must be true or false",
                        &format!("{loc}.$allow_extra"),
                    ));
                }
            }
            continue;
        }
        let floc = format!("{loc}.{}", shown(k));
        if k.starts_with(NON_STRING_KEY_PREFIX) {
            return Err(err(C::InvalidField, "a field name must be a string", &floc));
        }
        schema.fields.push(load_field(k, body, &floc, patterns)?);
    }
    Ok(Some(schema))
}

const FIELD_KEYS: [&str; 18] = [
    "type",
    "required",
    "nullable",
    "enum",
    "min_length",
    "max_length",
    "pattern",
    "minimum",
    "maximum",
    "exclusive_minimum",
    "exclusive_maximum",
    "multiple_of",
    "min_items",
    "max_items",
    "unique_items",
    "item_type",
    "item_enum",
    "sensitive",
];

fn load_field(
    name: &str,
    body: &Value,
    loc: &str,
    patterns: &mut HashMap<String, Pattern>,
) -> Result<Field, PolicyError> {
    let Value::Map(m) = body else {
        return Err(err(C::InvalidField, "a field must be a mapping", loc));
    };
    check_keys(m, &FIELD_KEYS, loc)?;
    let bad = |k: &str, msg: &str| err(C::InvalidField, msg.to_string(), &format!("{loc}.{k}"));
    let ty_of = |k: &str| -> Result<Option<FieldType>, PolicyError> {
        match m.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Str(s)) => FieldType::parse(s)
                .map(Some)
                .ok_or_else(|| bad(k, "unknown type")),
            Some(_) => Err(bad(k, "a type must be a string")),
        }
    };
    let ty = ty_of("type")?.unwrap_or(FieldType::String);
    let item_type = ty_of("item_type")?;
    let flag = |k: &str, d: bool| -> Result<bool, PolicyError> {
        match m.get(k) {
            None => Ok(d),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(bad(k, "must be true or false")),
        }
    };
    let required = flag("required", true)?;
    let nullable = flag("nullable", false)?;
    let unique_items = flag("unique_items", false)?;
    let list = |k: &str| -> Result<Option<Vec<Value>>, PolicyError> {
        match m.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::List(l)) if l.is_empty() => Err(bad(k, "must not be empty")),
            Some(Value::List(l)) => {
                if l.iter().all(is_json_value) {
                    Ok(Some(l.clone()))
                } else {
                    Err(bad(k, "values must be JSON values"))
                }
            }
            Some(_) => Err(err(
                C::NotAList,
                format!("`{k}` must be a list"),
                &format!("{loc}.{k}"),
            )),
        }
    };
    let enum_values = list("enum")?;
    let item_enum = list("item_enum")?;
    let count = |k: &str| -> Result<Option<u64>, PolicyError> {
        match m.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Int(i)) if *i >= 0 => Ok(Some(*i as u64)),
            Some(Value::BigInt(s)) if !s.starts_with('-') => Ok(Some(u64::MAX)),
            Some(_) => Err(bad(k, "must be a non-negative integer")),
        }
    };
    let min_length = count("min_length")?;
    let max_length = count("max_length")?;
    let min_items = count("min_items")?;
    let max_items = count("max_items")?;
    let bound = |k: &str| -> Result<Option<Value>, PolicyError> {
        match m.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(v @ (Value::Int(_) | Value::BigInt(_) | Value::Float(_))) => {
                let f = v.as_f64().unwrap_or(f64::INFINITY);
                if !f.is_finite() || f.abs() > 1e308 {
                    Err(bad(k, "must be a finite number"))
                } else {
                    Ok(Some(v.clone()))
                }
            }
            Some(_) => Err(bad(k, "must be a number")),
        }
    };
    let minimum = bound("minimum")?;
    let maximum = bound("maximum")?;
    let exclusive_minimum = bound("exclusive_minimum")?;
    let exclusive_maximum = bound("exclusive_maximum")?;
    let multiple_of = bound("multiple_of")?;
    let sensitive = match m.get("sensitive") {
        None | Some(Value::Null) => None,
        Some(Value::Str(s)) if s == "pii" => Some(Sensitive::Pii),
        Some(Value::Str(s)) if s == "secret" => Some(Sensitive::Secret),
        Some(_) => return Err(bad("sensitive", "must be pii or secret")),
    };
    let pattern_src = match m.get("pattern") {
        None | Some(Value::Null) => None,
        Some(Value::Str(s)) => Some(s.clone()),
        Some(_) => return Err(bad("pattern", "must be a string")),
    };
    // Applicability (a keyword the declared type never consults is refused).
    use FieldType as T;
    let has_string = min_length.is_some() || max_length.is_some() || pattern_src.is_some();
    let has_numeric = minimum.is_some()
        || maximum.is_some()
        || exclusive_minimum.is_some()
        || exclusive_maximum.is_some()
        || multiple_of.is_some();
    let has_items = item_type.is_some()
        || item_enum.is_some()
        || min_items.is_some()
        || max_items.is_some()
        || unique_items;
    if has_string && !matches!(ty, T::String | T::Array | T::Any) {
        return Err(err(
            C::InvalidField,
            format!("string bounds do not apply to type {}", ty.as_str()),
            loc,
        ));
    }
    if has_numeric && !matches!(ty, T::Integer | T::Number | T::Array | T::Any) {
        return Err(err(
            C::InvalidField,
            format!("numeric bounds do not apply to type {}", ty.as_str()),
            loc,
        ));
    }
    if has_items && ty != T::Array {
        return Err(err(
            C::InvalidField,
            "item keywords apply only to arrays",
            loc,
        ));
    }
    if item_type == Some(T::Array) {
        return Err(bad("item_type", "nested arrays are not supported"));
    }
    if ty == T::Array
        && let Some(it) = item_type
    {
        if has_string && !matches!(it, T::String | T::Any) {
            return Err(err(
                C::InvalidField,
                "string bounds do not fit the element type",
                loc,
            ));
        }
        if has_numeric && !matches!(it, T::Integer | T::Number | T::Any) {
            return Err(err(
                C::InvalidField,
                "numeric bounds do not fit the element type",
                loc,
            ));
        }
    }
    let lt = |a: &Option<Value>, b: &Option<Value>, strict: bool| -> bool {
        match (a, b) {
            (Some(a), Some(b)) => {
                let (Some(x), Some(y)) = (crate::value::num_of(a), crate::value::num_of(b)) else {
                    return false;
                };
                match x.cmp_num(&y) {
                    Some(std::cmp::Ordering::Greater) => true,
                    Some(std::cmp::Ordering::Equal) => strict,
                    _ => false,
                }
            }
            _ => false,
        }
    };
    if matches!((min_length, max_length), (Some(a), Some(b)) if a > b)
        || matches!((min_items, max_items), (Some(a), Some(b)) if a > b)
        || lt(&minimum, &maximum, false)
        || lt(&minimum, &exclusive_maximum, true)
        || lt(&exclusive_minimum, &maximum, true)
        || lt(&exclusive_minimum, &exclusive_maximum, true)
    {
        return Err(err(C::InvalidField, "contradictory bounds", loc));
    }
    if multiple_of.as_ref().and_then(Value::as_f64) == Some(0.0) {
        return Err(bad("multiple_of", "must not be 0"));
    }
    let pattern = match pattern_src {
        None => None,
        Some(src) => match patterns.get(&src) {
            Some(p) => Some(p.clone()),
            None => {
                let p = Pattern::new(&src).map_err(|e| e.at(format!("{loc}.pattern")))?;
                patterns.insert(src, p.clone());
                Some(p)
            }
        },
    };
    Ok(Field {
        name: name.to_string(),
        ty,
        required,
        nullable,
        enum_values,
        item_enum,
        item_type,
        min_length,
        max_length,
        pattern,
        sensitive,
        min_items,
        max_items,
        unique_items,
        minimum,
        maximum,
        exclusive_minimum,
        exclusive_maximum,
        multiple_of,
    })
}
