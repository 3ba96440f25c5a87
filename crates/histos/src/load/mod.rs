//! Strict loading of a policy document into a [`Policy`] (HISTOS-ENGINE §2).
//!
//! Modules: this one (entry points, the top level, roles, canaries, `requires`),
//! `tool` (one tool contract: limits, confirmation, escalation, output, `bind`,
//! `resource`), `field` (argument and return schemas), `keys` (unknown-key errors that
//! name the keys allowed there and the nearest one), `loc` (where an error is, rendered
//! only when there is one).

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::path::Path;

use crate::detect::CanaryMatcher;
use crate::doc::{Kind, Node};
use crate::error::{PolicyCode as C, PolicyError};
use crate::model::*;
use crate::pattern::Pattern;

mod field;
mod keys;
mod loc;
mod tool;

use crate::value::{NON_STRING_KEY_PREFIX, Value};
use keys::check_keys;
pub(crate) use loc::Loc;
use tool::load_tool;

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

fn err(code: C, msg: impl Into<String>, loc: &Loc<'_>) -> PolicyError {
    PolicyError::new(code, msg).at(loc.render())
}

fn shown(k: &str) -> &str {
    k.trim_start_matches(NON_STRING_KEY_PREFIX)
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
        // The zero-copy reader: strings stay in `text` (HISTOS-ENGINE §3.5).
        let tape = crate::json::tape(text)?;
        load_doc(tape.root())
    }

    /// Loads a YAML policy (YAML 1.1 scalars as the reference resolves them, §3.5).
    ///
    /// # Errors
    /// A [`PolicyError`] with the reference's POLICY code.
    pub fn load_yaml(text: &str) -> Result<Policy, PolicyError> {
        if text.len() > MAX_POLICY_BYTES {
            return Err(too_large(text.len()));
        }
        load_doc(&crate::yaml::parse(text)?)
    }

    /// Loads a policy file: `.json` as JSON, anything else as YAML. The size is checked
    /// from metadata before reading, and reading stops past [`MAX_POLICY_BYTES`].
    ///
    /// # Errors
    /// `not_found` when the path does not exist, `policy_too_large`, `unparseable` for
    /// unreadable or non-UTF-8 content, then the codes of [`Policy::load_json`] /
    /// [`Policy::load_yaml`].
    pub fn load_path(path: &Path) -> Result<Policy, PolicyError> {
        let shown_path = path.display().to_string();
        let loc = Loc::top(&shown_path);
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
            return Err(too_large(md.len() as usize).at(shown_path));
        }
        let mut buf = Vec::new();
        file.take(MAX_POLICY_BYTES as u64 + 1)
            .read_to_end(&mut buf)
            .map_err(|e| err(C::Unparseable, format!("cannot read policy: {e}"), &loc))?;
        if buf.len() > MAX_POLICY_BYTES {
            return Err(too_large(buf.len()).at(shown_path));
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
        load_doc(&doc)
    }
}

/// Loads a parsed document of either reader.
fn load_doc<'d, N: Node<'d>>(doc: N) -> Result<Policy, PolicyError> {
    let Some(top) = doc.map() else {
        return Err(PolicyError::new(
            C::NotAnObject,
            "a policy document must be a mapping",
        ));
    };
    load_top(top)
}

fn too_large(n: usize) -> PolicyError {
    PolicyError::new(
        C::PolicyTooLarge,
        format!("policy is {n} bytes, more than the {MAX_POLICY_BYTES}-byte limit"),
    )
}

fn load_top<'d, N: Node<'d>>(top: N) -> Result<Policy, PolicyError> {
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
    check_keys(top, &TOP, &Loc::Root)?;
    let schema_version = match top.get("schema_version").map(Node::kind) {
        None => SCHEMA_VERSION.to_string(),
        Some(Kind::Str(SCHEMA_VERSION)) => SCHEMA_VERSION.to_string(),
        Some(_) => {
            return Err(err(
                C::UnsupportedVersion,
                format!("unsupported schema_version (this engine implements `{SCHEMA_VERSION}`)"),
                &Loc::top("schema_version"),
            ));
        }
    };
    let features = load_requires(top.get("requires"))?;
    let tools_map = match top.get("tools") {
        None => None,
        Some(m) if m.kind() == Kind::Map => Some(m),
        Some(_) => {
            return Err(err(
                C::ToolsNotAMapping,
                "`tools` must be a mapping keyed by tool name",
                &Loc::top("tools"),
            ));
        }
    };
    let mut tools = Vec::with_capacity(tools_map.map_or(0, Node::len));
    // Identical pattern sources compile once per load.
    let mut patterns: HashMap<String, Pattern> = HashMap::new();
    let tools_loc = Loc::top("tools");
    for (name, body) in tools_map.into_iter().flat_map(Node::entries) {
        let loc = tools_loc.key(name);
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
        match top.get(k).map(Node::kind) {
            None | Some(Kind::Null) => Ok(None),
            Some(Kind::Str(s)) => Ok(Some(s.to_string())),
            Some(_) => Err(err(
                C::PolicyInvalid,
                format!("`{k}` must be a string"),
                &Loc::top(k),
            )),
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
pub(crate) fn build(
    schema_version: String,
    policy_id: Option<String>,
    version: Option<String>,
    created_at: Option<String>,
    features: Vec<String>,
    tools: Vec<Tool>,
    roles: Vec<Role>,
    canaries: Vec<String>,
) -> Result<Policy, PolicyError> {
    let mut p = assemble(
        schema_version,
        policy_id,
        version,
        created_at,
        features,
        tools,
        roles,
        canaries,
        String::new(),
    );
    p.content_hash = crate::hash::content_hash(&p);
    Ok(p)
}

/// The policy with its lookup indices, grant bitsets and canary matcher built, and the
/// given `content_hash` (the compiled cache keeps it; a load computes it).
#[allow(clippy::too_many_arguments)]
pub(crate) fn assemble(
    schema_version: String,
    policy_id: Option<String>,
    version: Option<String>,
    created_at: Option<String>,
    features: Vec<String>,
    tools: Vec<Tool>,
    roles: Vec<Role>,
    canaries: Vec<String>,
    content_hash: String,
) -> Policy {
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
    Policy {
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
        content_hash,
    }
}

/// `[A-Za-z_][A-Za-z0-9_.-]*`, fully.
pub(crate) fn valid_tool_name(n: &str) -> bool {
    let b = n.as_bytes();
    !b.is_empty()
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
}

fn load_requires<'d, N: Node<'d>>(v: Option<N>) -> Result<Vec<String>, PolicyError> {
    let m = match v {
        None => return Ok(Vec::new()),
        Some(m) if m.kind() == Kind::Map => m,
        Some(_) => {
            return Err(err(
                C::PolicyInvalid,
                "`requires` must be a mapping",
                &Loc::top("requires"),
            ));
        }
    };
    check_keys(m, &["features"], &Loc::top("requires"))?;
    let list = match m.get("features") {
        None => return Ok(Vec::new()),
        Some(l) if l.kind() == Kind::List => l,
        Some(_) => {
            return Err(err(
                C::PolicyInvalid,
                "`requires.features` must be a list",
                &Loc::top("requires").key("features"),
            ));
        }
    };
    let mut out: Vec<String> = Vec::new();
    for f in list.items() {
        let Some(s) = f.str() else {
            return Err(err(
                C::PolicyInvalid,
                "a feature must be a string",
                &Loc::top("requires").key("features"),
            ));
        };
        if out.iter().any(|o| o == s) {
            return Err(err(
                C::PolicyInvalid,
                format!("feature `{s}` listed twice"),
                &Loc::top("requires").key("features"),
            ));
        }
        out.push(s.to_string());
    }
    for s in &out {
        if !FEATURES.contains(&s.as_str()) {
            return Err(err(
                C::UnsupportedFeature,
                format!("this engine does not implement feature `{s}`"),
                &Loc::top("requires").key("features"),
            ));
        }
    }
    Ok(out)
}

fn load_roles<'d, N: Node<'d>>(v: Option<N>) -> Result<Vec<Role>, PolicyError> {
    let m = match v {
        None => return Ok(Vec::new()),
        Some(m) if m.kind() == Kind::Map => m,
        Some(_) => {
            return Err(err(
                C::NotAMapping,
                "`roles` must be a mapping",
                &Loc::top("roles"),
            ));
        }
    };
    let mut roles = Vec::with_capacity(m.len());
    let roles_loc = Loc::top("roles");
    for (name, body) in m.entries() {
        let loc = roles_loc.key(name);
        if name.is_empty() || name.starts_with(NON_STRING_KEY_PREFIX) {
            return Err(err(
                C::PolicyInvalid,
                "a role name must be a non-empty string",
                &loc,
            ));
        }
        let Some(b) = body.map() else {
            return Err(err(C::NotAMapping, "a role must be a mapping", &loc));
        };
        check_keys(b, &["allow", "inherits"], &loc)?;
        let mut allow: Vec<String> = Vec::new();
        match b.get("allow") {
            None => {}
            Some(l) if l.kind() == Kind::List => {
                for g in l.items() {
                    let Some(s) = g.str() else {
                        return Err(err(
                            C::InvalidGrant,
                            "a grant must be a tool name string",
                            &loc.key("allow"),
                        ));
                    };
                    if allow.iter().any(|a| a == s) {
                        return Err(err(
                            C::PolicyInvalid,
                            format!("tool `{s}` granted twice"),
                            &loc.key("allow"),
                        ));
                    }
                    allow.push(s.to_string());
                }
            }
            Some(_) => {
                return Err(err(
                    C::NotAList,
                    "`allow` must be a list",
                    &loc.key("allow"),
                ));
            }
        }
        let inherits = match b.get("inherits").map(Node::kind) {
            None => None,
            Some(Kind::Str(s)) if !s.is_empty() => Some(s.to_string()),
            Some(_) => {
                return Err(err(
                    C::PolicyInvalid,
                    "`inherits` must be a non-empty role name",
                    &loc.key("inherits"),
                ));
            }
        };
        roles.push(Role {
            name: name.to_string(),
            allow,
            inherits,
        });
    }
    Ok(roles)
}

fn load_canaries<'d, N: Node<'d>>(v: Option<N>) -> Result<Vec<String>, PolicyError> {
    let l = match v {
        None => return Ok(Vec::new()),
        Some(l) if l.kind() == Kind::List => l,
        Some(_) => {
            return Err(err(
                C::NotAList,
                "`canaries` must be a list",
                &Loc::top("canaries"),
            ));
        }
    };
    let mut out: Vec<String> = Vec::new();
    for c in l.items() {
        match c.str() {
            Some(s) if s.chars().count() >= 6 && !out.iter().any(|o| o == s) => {
                out.push(s.to_string())
            }
            _ => {
                return Err(err(
                    C::InvalidCanary,
                    "a canary must be a unique string of at least 6 characters",
                    &Loc::top("canaries"),
                ));
            }
        }
    }
    Ok(out)
}

/// Loads one schema (`args` or `returns`) written in the bundle vocabulary, as a tool's
/// would be (the JSON-Schema projection builds its contracts through this, so a
/// projected contract is always one the loader accepts). `what` names it in errors.
pub(crate) fn schema_from_bundle(v: &Value, what: &str) -> Result<Option<Schema>, PolicyError> {
    let mut patterns = HashMap::new();
    field::load_schema(Some(v), &Loc::top(what), &mut patterns)
}
