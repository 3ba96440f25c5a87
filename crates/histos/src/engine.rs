//! The pre-gate: wrapper steps and the engine chain, in the reference's order
//! (HISTOS-ENGINE §1a–§1d, §5, §6, §7).

use std::borrow::Cow;

use crate::decision::{Decision, Effect, Rule};
use crate::detect;
use crate::limits::{LimitKey, LimitSpec, LimitStore, LimitVerdict};
use crate::model::{Constraint, Op, Policy, Tool};
use crate::validate;
use crate::value::{Map, Value, num_of};

/// Maximum size of the argument scan blob in characters (HISTOS-ENGINE §1b step 3c).
pub const INPUT_BUDGET_CHARS: usize = 1_048_576;

/// The trusted caller, bound out-of-band by the host (never inferred from arguments).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Principal {
    /// Role name (an undeclared role has no grants).
    pub role: String,
    /// Identity for limits and audit (`<anonymous>` when absent).
    pub identity: Option<String>,
    /// Trusted attributes (`bind`, `owns`, `where[].principal_attr`).
    pub attributes: Map,
    /// Sensitivity classes this principal may see in output (`pii`, `secret`).
    pub can_view: Vec<String>,
}

impl Principal {
    /// A principal with a role and nothing else.
    pub fn new(role: impl Into<String>) -> Self {
        Principal {
            role: role.into(),
            ..Default::default()
        }
    }

    /// The identity used for limit keys.
    pub fn identity_or_anonymous(&self) -> &str {
        self.identity.as_deref().unwrap_or("<anonymous>")
    }
}

/// A tool call: the tool name (may contain dots, e.g. `PACK_ID.VERB_KEY`) and its
/// named arguments.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Call {
    /// Tool name.
    pub tool: String,
    /// Arguments in call order.
    pub args: Map,
}

/// Why a resolver could not produce a resource (HISTOS-ENGINE §5). Every failure but
/// [`ResolveError::NotFound`] is `resolver_error`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// The resource does not exist (`resource_not_found`).
    #[error("resource not found")]
    NotFound,
    /// Anything else (`resolver_error`); the text becomes the decision's reason.
    #[error("resolver failed: {0}")]
    Failed(String),
    /// The host refused to run its resolver (`resolver_error`), with its own code: the
    /// decision's `received` is `code`, so the host can report why (a resolver verb that
    /// is `write`, not active, not granted, timed out, printed non-JSON, …).
    #[error("resolver refused ({code}): {message}")]
    Refused {
        /// The host's code.
        code: String,
        /// What happened.
        message: String,
    },
}

impl ResolveError {
    /// The resource a resolver printed as JSON (`text`): an object is the resource; a
    /// falsy value (`null`, `false`, `0`, `""`, `[]`, `{}`) counts as an empty resource
    /// (HISTOS-ENGINE §5); anything else is a failure.
    ///
    /// # Errors
    /// [`ResolveError::Failed`] when `text` is not JSON, or is a truthy non-object.
    pub fn resource_from_json(text: &str) -> Result<Map, ResolveError> {
        let v = crate::json::parse(text.trim()).map_err(|e| {
            ResolveError::Failed(format!("the resource is not JSON: {}", e.message))
        })?;
        match v {
            Value::Map(m) => Ok(m),
            Value::Null | Value::Bool(false) => Ok(Map::new()),
            Value::Int(0) => Ok(Map::new()),
            Value::Float(0.0) => Ok(Map::new()),
            Value::Str(s) if s.is_empty() => Ok(Map::new()),
            Value::List(l) if l.is_empty() => Ok(Map::new()),
            other => Err(ResolveError::Failed(format!(
                "the resource is a JSON {}, not an object",
                other.type_name()
            ))),
        }
    }
}

/// Fetches the resource a call would act on, from trusted state (never from echoing an
/// argument). Receives the post-binding arguments.
pub trait ResourceResolver {
    /// The resolved resource; `None` (falsy) counts as an empty mapping.
    ///
    /// # Errors
    /// [`ResolveError`] maps to `resource_not_found` / `resolver_error`.
    fn resolve<'r>(
        &'r self,
        tool: &str,
        args: &Args<'_>,
    ) -> Result<Option<Cow<'r, Map>>, ResolveError>;
}

/// A semantic tier's answer to an `escalate` call (HISTOS-ENGINE §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Escalation {
    /// Exactly `True`: the chain continues (`escalated`, or `requires_confirmation` when
    /// the tool also requires confirmation).
    Approved,
    /// `False`: `escalation_denied`.
    Denied,
    /// Not answered yet (a tier that asks a person, e.g. an approval queue): the call is
    /// paused as `require_confirmation` / `requires_confirmation` with the `escalate`
    /// marker, never allowed; the host asks again once the person answered.
    Pending,
}

impl From<bool> for Escalation {
    fn from(b: bool) -> Self {
        if b {
            Escalation::Approved
        } else {
            Escalation::Denied
        }
    }
}

/// A host semantic tier for `escalate` (HISTOS-ENGINE §6). It runs after every machine
/// check (so `rbac`, `arg_schema`, limits … win over it) and before confirmation, and
/// receives the post-binding arguments. Without a tier the answer is
/// `no_escalation_tier` (deny); no setting turns that into an allow.
pub trait EscalationTier {
    /// The answer for this call; `Err` → `escalation_error`.
    ///
    /// # Errors
    /// Any failure of the tier.
    fn judge(
        &self,
        tool: &str,
        args: &Args<'_>,
        principal: &Principal,
    ) -> Result<Escalation, String>;
}

/// A host confirmation callback (HISTOS-ENGINE §1c).
pub trait Confirmer {
    /// `Ok(true)` → `confirmed`/allow; `Ok(false)` → still `requires_confirmation`;
    /// `Err` → `confirm_error`/deny.
    ///
    /// # Errors
    /// Any failure of the callback.
    fn confirm(&self, tool: &str, args: &Args<'_>, principal: &Principal) -> Result<bool, String>;
}

/// Enforce or observe (HISTOS-ENGINE §1d).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Non-allow effects are enforced by the host.
    #[default]
    Enforce,
    /// Decisions are recorded with `enforced = false`; output is not mutated.
    Observe,
}

/// Everything impure a decision may consult, passed in by the host.
#[derive(Clone, Copy, Default)]
pub struct Context<'a> {
    /// Limit counters; a tool with `rate_limit`/`budget` and no store is denied
    /// (`limit_store_capacity`: fail closed).
    pub limits: Option<&'a dyn LimitStore>,
    /// Caller clock in milliseconds (same clock as the store's records).
    pub now_ms: u64,
    /// Semantic tier for `escalate`; none → `no_escalation_tier`.
    pub tier: Option<&'a dyn EscalationTier>,
    /// Confirmation callback; none → `requires_confirmation` stands.
    pub confirm: Option<&'a dyn Confirmer>,
    /// Enforce (default) or observe.
    pub mode: Mode,
    /// Whether a final `allow` consumes limit counters (default false with
    /// `Default`; hosts running calls set it true).
    pub consume_limits: bool,
}

impl std::fmt::Debug for Context<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("limits", &self.limits.is_some())
            .field("now_ms", &self.now_ms)
            .field("tier", &self.tier.is_some())
            .field("confirm", &self.confirm.is_some())
            .field("mode", &self.mode)
            .field("consume_limits", &self.consume_limits)
            .finish()
    }
}

/// The engine: associated functions over a loaded [`Policy`]; it holds no state.
#[derive(Debug, Clone, Copy, Default)]
pub struct Engine;

/// The arguments of a call after binding, as a view: the caller's map with bound
/// arguments overwritten by the principal's attributes (appended when the caller did not
/// send them), without copying anything (HISTOS-ENGINE §5).
#[derive(Debug, Clone, Copy)]
pub struct Args<'a> {
    base: &'a Map,
    bindings: &'a [(String, String)],
    attrs: &'a Map,
}

impl<'a> Args<'a> {
    /// A view of `base` with no bindings.
    pub fn plain(base: &'a Map) -> Self {
        static EMPTY: std::sync::OnceLock<Map> = std::sync::OnceLock::new();
        Args {
            base,
            bindings: &[],
            attrs: EMPTY.get_or_init(Map::new),
        }
    }

    /// The post-binding value of `k`.
    #[inline]
    pub fn get(&self, k: &str) -> Option<&'a Value> {
        match self
            .bindings
            .iter()
            .find(|(n, _)| crate::value::fast_eq(n, k))
        {
            Some((_, attr)) => self.attrs.get(attr),
            None => self.base.get(k),
        }
    }

    /// Post-binding arguments in call order (bound ones the caller did not send last).
    pub fn iter(&self) -> impl Iterator<Item = (&'a str, &'a Value)> + '_ {
        let Args {
            base,
            bindings,
            attrs,
        } = *self;
        base.iter()
            .filter_map(move |(k, v)| match bindings.iter().find(|(n, _)| n == k) {
                Some((_, attr)) => attrs.get(attr).map(|w| (k.as_str(), w)),
                None => Some((k.as_str(), v)),
            })
            .chain(
                bindings
                    .iter()
                    .filter(move |(n, _)| !base.contains_key(n))
                    .filter_map(move |(n, attr)| attrs.get(attr).map(|w| (n.as_str(), w))),
            )
    }

    /// Number of post-binding arguments.
    pub fn len(&self) -> usize {
        self.base.len()
            + self
                .bindings
                .iter()
                .filter(|(n, _)| !self.base.contains_key(n))
                .count()
    }

    /// Whether there are no arguments.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// An owned copy of the post-binding arguments.
    pub fn to_map(&self) -> Map {
        self.iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }
}

fn walk(v: &Value, out: &mut String) {
    match v {
        Value::List(l) => l.iter().for_each(|x| walk(x, out)),
        Value::Map(m) => {
            for (k, x) in m.iter() {
                if !out.is_empty() {
                    out.push(' ');
                }
                out.push_str(k);
                walk(x, out);
            }
        }
        leaf => {
            if !out.is_empty() {
                out.push(' ');
            }
            leaf.write_py_str(out);
        }
    }
}

/// The argument scan blob (HISTOS-ENGINE §4): every leaf under every argument (nested
/// dict keys included, top-level names not), rendered as Python `str()`, joined by
/// single spaces. An integer argument is therefore scanned as its digits.
pub fn scan_blob<'a>(args: impl Iterator<Item = (&'a str, &'a Value)>) -> String {
    let mut out = String::new();
    for (_, v) in args {
        walk(v, &mut out);
    }
    out
}

/// Python `repr` of a literal, for decision detail.
fn py_repr(v: &Value) -> String {
    match v {
        Value::Str(s) => format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'")),
        Value::List(l) => format!("[{}]", l.iter().map(py_repr).collect::<Vec<_>>().join(", ")),
        Value::Map(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!("'{k}': {}", py_repr(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => {
            let mut s = String::new();
            other.write_py_str(&mut s);
            s
        }
    }
}

/// Python operator semantics for a resource condition; `None` = a raised TypeError.
fn compare(op: Op, lhs: &Value, rhs: &Value) -> Option<bool> {
    use std::cmp::Ordering::*;
    let contains = |l: &Value, r: &Value| -> Option<bool> {
        match r {
            Value::Str(s) => match l {
                Value::Str(x) => Some(s.contains(x.as_str())),
                _ => None,
            },
            Value::List(items) => Some(items.iter().any(|i| i.py_eq(l))),
            Value::Map(m) => match l {
                Value::Str(x) => Some(m.contains_key(x)),
                Value::List(_) | Value::Map(_) => None,
                _ => Some(false),
            },
            _ => None,
        }
    };
    let order = |l: &Value, r: &Value| -> Option<Option<std::cmp::Ordering>> {
        match (l, r) {
            (Value::Str(a), Value::Str(b)) => Some(Some(a.as_str().cmp(b.as_str()))),
            _ => match (num_of(l), num_of(r)) {
                (Some(a), Some(b)) => Some(a.cmp_num(&b)),
                _ => None,
            },
        }
    };
    Some(match op {
        Op::Eq => lhs.py_eq(rhs),
        Op::Ne => !lhs.py_eq(rhs),
        Op::In => contains(lhs, rhs)?,
        Op::NotIn => !contains(lhs, rhs)?,
        Op::Le => matches!(order(lhs, rhs)?, Some(Less | Equal)),
        Op::Lt => matches!(order(lhs, rhs)?, Some(Less)),
        Op::Ge => matches!(order(lhs, rhs)?, Some(Greater | Equal)),
        Op::Gt => matches!(order(lhs, rhs)?, Some(Greater)),
    })
}

fn check_constraint(c: &Constraint, resource: &Map, principal: &Principal) -> Option<Decision> {
    let expected = || match (&c.principal_attr, &c.value) {
        (Some(a), _) => format!("principal.{a}"),
        (None, Some(v)) => py_repr(v),
        (None, None) => "None".to_string(),
    };
    let fail = |why: &str| {
        let e = expected();
        Some(
            Decision::deny(
                Rule::ResourceConstraint,
                format!("resource.{} {} {e}{why}", c.field, c.op.as_str()),
            )
            .with_field(c.field.clone())
            .with_detail(e, format!("resource.{}", c.field)),
        )
    };
    let Some(lhs) = resource.get(&c.field) else {
        return Some(
            Decision::deny(
                Rule::ResourceConstraint,
                format!("resource has no field `{}`", c.field),
            )
            .with_field(c.field.clone())
            .with_detail("<present>", "<missing>"),
        );
    };
    let rhs = match (&c.principal_attr, &c.value) {
        (Some(a), _) => match principal.attributes.get(a) {
            Some(v) => v,
            None => {
                return Some(
                    Decision::deny(
                        Rule::ResourceConstraint,
                        format!("principal has no attribute `{a}`"),
                    )
                    .with_field(c.field.clone())
                    .with_detail(format!("principal.{a}"), "<unset>"),
                );
            }
        },
        (None, Some(v)) => v,
        (None, None) => &Value::Null,
    };
    match compare(c.op, lhs, rhs) {
        Some(true) => None,
        Some(false) => fail(" failed"),
        None => fail(": type error"),
    }
}

impl Engine {
    /// The pre-gate decision for `call` by `principal` (HISTOS-ENGINE §1a–§1c):
    /// `no_principal`, bindings, then the engine chain (`unknown_tool`, `rbac`,
    /// `no_arg_schema`, `arg_schema`, input budget, resource constraints, canaries,
    /// checksum secrets, limits, escalation, confirmation), then the confirmation
    /// callback and atomic limit consumption on a final allow.
    ///
    /// `resolver` is consulted only for a tool with resource constraints, after the
    /// argument checks passed. Pure apart from the traits passed in.
    pub fn pre(
        policy: &Policy,
        principal: Option<&Principal>,
        resolver: Option<&dyn ResourceResolver>,
        call: &Call,
        ctx: &Context<'_>,
    ) -> Decision {
        let mut d = Self::pre_inner(policy, principal, resolver, call, ctx);
        d.enforced = ctx.mode == Mode::Enforce;
        d
    }

    #[inline(always)]
    fn pre_inner(
        policy: &Policy,
        principal: Option<&Principal>,
        resolver: Option<&dyn ResourceResolver>,
        call: &Call,
        ctx: &Context<'_>,
    ) -> Decision {
        // W2: a trusted principal must be bound.
        let Some(principal) = principal else {
            return Decision::deny(Rule::NoPrincipal, "no trusted principal is bound");
        };
        let tool_idx = policy.tool_idx(&call.tool);
        let tool: Option<&Tool> = tool_idx.map(|i| &policy.tools[i]);
        // W3: bindings, before the whole chain.
        let mut rebound: Vec<String> = Vec::new();
        let bindings: &[(String, String)] = tool.map_or(&[], |t| t.bindings.as_slice());
        for (arg, attr) in bindings {
            match principal.attributes.get(attr) {
                None => {
                    return Decision::deny(
                        Rule::ArgBindingUnresolved,
                        concat(&["principal has no attribute `", attr, "` to bind"]),
                    )
                    .with_field(arg.clone())
                    .with_detail(concat(&["principal.", attr]), "<unset>");
                }
                Some(v) => {
                    if call.args.get(arg) != Some(v) {
                        rebound.push(arg.clone());
                    }
                }
            }
        }
        let args = Args {
            base: &call.args,
            bindings,
            attrs: &principal.attributes,
        };
        let mut d = Self::chain(policy, principal, resolver, call, tool_idx, &args, ctx);
        // 1c: confirmation callback.
        if d.effect == Effect::RequireConfirmation
            && let Some(cb) = ctx.confirm
        {
            match cb.confirm(&call.tool, &args, principal) {
                Ok(true) => {
                    let esc = d.escalate;
                    d = Decision::new(Effect::Allow, Rule::Confirmed, "approved out of band");
                    d.escalate = esc;
                }
                Ok(false) => {}
                Err(e) => {
                    d = Decision::deny(Rule::ConfirmError, format!("confirmation failed: {e}"))
                }
            }
        }
        // 1c: atomic consumption on a final allow.
        if d.effect == Effect::Allow
            && ctx.consume_limits
            && let (Some(t), Some(store)) = (tool, ctx.limits)
        {
            let spec = LimitSpec {
                rate_limit: t.rate_limit,
                budget: t.budget,
            };
            if spec.rate_limit.is_some() || spec.budget.is_some() {
                let key = LimitKey {
                    identity: principal.identity_or_anonymous(),
                    tool: &t.name,
                };
                if let Some(deny) = limit_denial(store.try_consume(key, spec, ctx.now_ms), store) {
                    d = deny;
                }
            }
        }
        if !rebound.is_empty() {
            d.bound_args = bindings
                .iter()
                .filter(|(arg, _)| rebound.contains(arg))
                .filter_map(|(arg, attr)| {
                    principal
                        .attributes
                        .get(attr)
                        .map(|v| (arg.clone(), v.clone()))
                })
                .collect();
        }
        d.rebound_args = rebound;
        d
    }

    #[inline(always)]
    fn chain(
        policy: &Policy,
        principal: &Principal,
        resolver: Option<&dyn ResourceResolver>,
        call: &Call,
        tool_idx: Option<usize>,
        args: &Args<'_>,
        ctx: &Context<'_>,
    ) -> Decision {
        // 1: unknown tool.
        let Some(ti) = tool_idx else {
            return Decision::deny(
                Rule::UnknownTool,
                "the policy has no contract for this tool",
            );
        };
        let tool = &policy.tools[ti];
        // 2: RBAC.
        if !policy.role_allows(&principal.role, ti) {
            return Decision::deny(Rule::Rbac, "the role has no grant for this tool")
                .with_field("role")
                .with_detail(
                    concat(&["grant for '", &tool.name, "'"]),
                    principal.role.clone(),
                );
        }
        // 3a: no argument schema.
        let Some(schema) = &tool.args else {
            return Decision::deny(Rule::NoArgSchema, "the tool has no argument schema");
        };
        let _ = call;
        let args = *args;
        // 3b: validation.
        let errors = validate::validate(schema, args.len(), args.iter(), |k| args.get(k));
        if let Some(first) = errors.first() {
            return Decision::deny(Rule::ArgSchema, validate::join(&errors))
                .with_field(first.field.clone());
        }
        // 3c–5b: input budget, resource, canaries, secrets over the scan blob.
        if let Some(d) = BLOB.with(|cell| {
            let mut blob = cell.borrow_mut();
            blob.clear();
            for (_, v) in args.iter() {
                walk(v, &mut blob);
            }
            Self::blob_checks(policy, principal, resolver, tool, &args, &blob)
        }) {
            return d;
        }
        // 7: limits (read-only).
        let spec = LimitSpec {
            rate_limit: tool.rate_limit,
            budget: tool.budget,
        };
        if spec.rate_limit.is_some() || spec.budget.is_some() {
            let Some(store) = ctx.limits else {
                return Decision::deny(
                    Rule::LimitStoreCapacity,
                    "the tool declares limits and no limit store is wired",
                );
            };
            let key = LimitKey {
                identity: principal.identity_or_anonymous(),
                tool: &tool.name,
            };
            if let Some(d) = limit_denial(store.check(key, spec, ctx.now_ms), store) {
                return d;
            }
        }
        // 8: escalation.
        let mut escalated = false;
        if tool.requires_escalation {
            let mut d = match ctx.tier {
                None => Decision::deny(
                    Rule::NoEscalationTier,
                    "escalation is required and no semantic tier is wired",
                ),
                Some(tier) => match tier.judge(&tool.name, &args, principal) {
                    Ok(Escalation::Approved) => {
                        escalated = true;
                        Decision::new(Effect::Allow, Rule::Escalated, "")
                    }
                    Ok(Escalation::Denied) => {
                        Decision::deny(Rule::EscalationDenied, "the semantic tier refused the call")
                    }
                    Ok(Escalation::Pending) => {
                        let mut d = Decision::new(
                            Effect::RequireConfirmation,
                            Rule::RequiresConfirmation,
                            "the call waits for the semantic tier's answer",
                        );
                        d.expected = Some("an answer to the escalation".into());
                        d
                    }
                    Err(e) => {
                        Decision::deny(Rule::EscalationError, format!("semantic tier failed: {e}"))
                    }
                },
            };
            if !escalated {
                d.escalate = true;
                return d;
            }
        }
        // 9: confirmation.
        if tool.requires_confirmation {
            let mut d = Decision::new(
                Effect::RequireConfirmation,
                Rule::RequiresConfirmation,
                "the tool requires a trusted approval",
            );
            if let Some(s) = tool.confirmation_expires_in {
                d.expected = Some(format!("an approval granted within {s}s").into());
            }
            d.escalate = escalated;
            return d;
        }
        // 10: allow.
        if escalated {
            let mut d = Decision::new(
                Effect::Allow,
                Rule::Escalated,
                "the semantic tier allowed the call",
            );
            d.escalate = true;
            return d;
        }
        Decision::new(Effect::Allow, Rule::Allow, Cow::Borrowed("ok"))
    }
}

thread_local! {
    static BLOB: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

impl Engine {
    fn blob_checks(
        policy: &Policy,
        principal: &Principal,
        resolver: Option<&dyn ResourceResolver>,
        tool: &Tool,
        args: &Args<'_>,
        blob: &str,
    ) -> Option<Decision> {
        // 3c: input budget.
        if blob.len() > INPUT_BUDGET_CHARS && blob.chars().count() > INPUT_BUDGET_CHARS {
            let first = args
                .iter()
                .next()
                .map(|(k, _)| k.to_string())
                .unwrap_or_default();
            return Some(
                Decision::deny(Rule::ArgSchema, "arguments exceed the input scan budget")
                    .with_field(first)
                    .with_detail(
                        format!("at most {INPUT_BUDGET_CHARS} characters"),
                        "oversized",
                    ),
            );
        }
        // 4: resource constraints.
        if !tool.constraints.is_empty() {
            let Some(r) = resolver else {
                return Some(Decision::deny(
                    Rule::NoResourceResolver,
                    "resource constraints need a resolver",
                ));
            };
            let resource = match r.resolve(&tool.name, args) {
                Ok(Some(m)) => m,
                Ok(None) => Cow::Owned(Map::new()),
                Err(ResolveError::NotFound) => {
                    return Some(Decision::deny(
                        Rule::ResourceNotFound,
                        "the resource was not found",
                    ));
                }
                Err(ResolveError::Failed(e)) => {
                    return Some(Decision::deny(
                        Rule::ResolverError,
                        format!("resolver failed: {e}"),
                    ));
                }
                Err(ResolveError::Refused { code, message }) => {
                    return Some(
                        Decision::deny(Rule::ResolverError, format!("resolver refused: {message}"))
                            .with_detail("a resolved resource", code),
                    );
                }
            };
            for c in &tool.constraints {
                if let Some(d) = check_constraint(c, &resource, principal) {
                    return Some(d);
                }
            }
        }
        // 5: canaries.
        if policy.canary_matcher.find(blob).is_some() {
            return Some(Decision::deny(
                Rule::CanaryExfil,
                "a canary token is in the arguments",
            ));
        }
        // 5b: checksum secrets.
        if tool.deny_secret_args
            && let Some(kind) = detect::find_checksum_secret(blob)
        {
            return Some(
                Decision::deny(
                    Rule::SecretDetected,
                    "a checksum-verified secret is in the arguments",
                )
                .with_detail("no secret", kind.as_str()),
            );
        }
        None
    }
}

/// The concatenation of `parts` in one allocation (cheaper than `format!`).
fn concat(parts: &[&str]) -> String {
    let mut s = String::with_capacity(parts.iter().map(|p| p.len()).sum());
    for p in parts {
        s.push_str(p);
    }
    s
}

fn limit_denial(v: LimitVerdict, store: &dyn LimitStore) -> Option<Decision> {
    match v {
        LimitVerdict::Ok => None,
        LimitVerdict::Capacity => Some(Decision::deny(
            Rule::LimitStoreCapacity,
            "the limit store is full",
        )),
        LimitVerdict::Budget => Some(Decision::deny(Rule::Budget, "the call budget is exhausted")),
        LimitVerdict::RateLimit => Some(Decision::deny(
            Rule::RateLimit,
            format!("rate limit reached (window: {}s)", store.window_ms() / 1000),
        )),
    }
}
