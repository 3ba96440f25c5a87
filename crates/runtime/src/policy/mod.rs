//! Step 7 of RUNTIME §5: the operator's Histos runtime policy (RUNTIME §7) around one
//! call of a session principal, and its output controls after the run; and what the
//! owner's `hcp policy` commands build from the packs.
//!
//! The engine (`histos`) is pure; this module supplies what it consults: the principal
//! from the session, the call counters and the owner's approvals of the [`State`], the
//! resource resolvers of `config.json` ([`resolve`]) and the owner's approval queue as the
//! escalation tier ([`escalate`]). The pre-gate here is **dry**: counters are only
//! checked and approvals only looked up; what the call would spend
//! ([`PolicyPass::counters`], [`PolicyPass::approvals`]) is taken later by
//! [`State::admit`], once every other check passed. Tool names are `PACK_ID.VERB_KEY`
//! (`PACK_ID.REF` for a stimulus). The owner's own calls answer to the pack policy alone,
//! but a policy that does not load stops every call, the owner's too (fail closed).
//!
//! - [`source`]: the one loader of the runtime policy (exec, sense, MCP's catalog,
//!   `hcp policy coverage`), with the compiled policy cache;
//! - [`contracts`]: each active verb as a tool definition (the `inputSchema` `hcp mcp`
//!   shows), its projected contract, `hcp policy init` and `hcp policy coverage`;
//! - [`merge`]: `hcp policy init --merge`, the new tools added to a policy in place;
//! - [`lock`]: `tools.lock.json`, `hcp policy lock` and the `tool_drift` check;
//! - [`teach`]: policy errors as a fault and a hint;
//! - [`health`]: what `hcp doctor` says of them.

pub mod contracts;
pub mod escalate;
pub mod health;
pub mod lock;
pub mod merge;
pub mod observe;
pub mod resolve;
pub mod source;
pub mod teach;

use hcp_gate::Face;
use hcp_model::{ArgValue, Code, Principal};
use hcp_store::audit;
use hcp_store::config::EscalationMode;
use hcp_store::counter::{Limits, Verdict};
use hcp_store::state::{ApprovalKey, ApprovalRequest, CounterSlot, State};
use histos::engine::Args;
use histos::{
    Effect, Engine, LimitKey, LimitSpec, LimitStore, LimitVerdict, Policy, ResourceResolver, Value,
};
use jiff::Timestamp;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

pub use source::{CacheUse, POLICY_FILES, load};

/// The rolling window of `rate_limit`, in milliseconds (the reference's default).
pub const RATE_WINDOW_MS: u64 = 60_000;

/// A loaded runtime policy.
#[derive(Debug)]
pub struct RuntimePolicy {
    /// The policy.
    pub policy: Policy,
    /// The file it was loaded from.
    pub file: PathBuf,
    /// What the load did with the compiled cache.
    pub cache: CacheUse,
}

impl RuntimePolicy {
    /// The policy's `content_hash` (`sha256:…`, HISTOS-ENGINE §3).
    pub fn hash(&self) -> &str {
        self.policy.content_hash()
    }
}

/// Why step 7 refuses: code (a Histos RUNTIME rule or POLICY code), message, hint, and an
/// approval id for a call paused for confirmation or escalation.
#[derive(Debug, Clone)]
pub struct PolicyRefusal {
    /// The code.
    pub code: Code,
    /// The message.
    pub message: String,
    /// The hint.
    pub hint: Option<String>,
    /// The pending approval of a paused call.
    pub approval_id: Option<String>,
}

impl PolicyRefusal {
    /// A refusal with `code` and `message`, no hint.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            hint: None,
            approval_id: None,
        }
    }

    /// Adds a hint.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

/// The Histos principal of a call's principal (RUNTIME §7: role, attributes and
/// `can_view` from its session; none of them for the owner, whom no policy governs).
pub fn principal_of(p: &Principal) -> histos::Principal {
    let mut attributes = histos::Map::new();
    let session = p.session.as_ref();
    for (k, v) in session.map(|s| &s.attributes).into_iter().flatten() {
        attributes.insert(k.clone(), Value::Str(v.clone()));
    }
    histos::Principal {
        role: session.and_then(|s| s.role.clone()).unwrap_or_default(),
        identity: Some(p.id.clone()),
        attributes,
        can_view: session.map(|s| s.can_view.clone()).unwrap_or_default(),
    }
}

fn to_value(v: &ArgValue) -> Value {
    match v {
        ArgValue::Bool(b) => Value::Bool(*b),
        ArgValue::String(s) => Value::Str(s.clone()),
        ArgValue::Number(n) => Value::from(serde_json::Value::Number(n.clone())),
    }
}

fn to_arg(v: &Value) -> Option<ArgValue> {
    match v {
        Value::Str(s) => Some(ArgValue::String(s.clone())),
        Value::Bool(b) => Some(ArgValue::Bool(*b)),
        Value::Int(_) | Value::BigInt(_) | Value::Float(_) => match serde_json::Value::from(v) {
            serde_json::Value::Number(n) => Some(ArgValue::Number(n)),
            _ => None,
        },
        _ => None,
    }
}

/// A CLI-face value (always text) read as the type the policy's contract declares for it:
/// `integer` from canonical decimal text (`5`, `-3`; not `05`, `5.0`), `number` from any
/// JSON number, `boolean` from `true`/`false`. `None` leaves it a string for the contract
/// to judge. The JSON face and MCP carry real types and are never converted.
fn cli_typed(v: &ArgValue, ty: histos::model::FieldType) -> Option<Value> {
    use histos::model::FieldType;
    let ArgValue::String(s) = v else {
        return None;
    };
    match ty {
        FieldType::Integer => {
            let n: i64 = s.parse().ok()?;
            (n.to_string() == *s).then_some(Value::Int(n))
        }
        FieldType::Number => match serde_json::from_str::<serde_json::Value>(s).ok()? {
            serde_json::Value::Number(n) => Some(Value::from(serde_json::Value::Number(n))),
            _ => None,
        },
        FieldType::Boolean => match s.as_str() {
            "true" => Some(Value::Bool(true)),
            "false" => Some(Value::Bool(false)),
            _ => None,
        },
        _ => None,
    }
}

/// The digest an approval is bound to: the call's arguments after binding.
pub(crate) fn bound_digest(
    state: &dyn State,
    args: &Args<'_>,
) -> Result<String, hcp_store::StoreError> {
    let m: Vec<(String, ArgValue)> = args
        .iter()
        .filter_map(|(k, v)| to_arg(v).map(|a| (k.to_owned(), a)))
        .collect();
    let pairs: Vec<(&str, &ArgValue)> = m.iter().map(|(k, v)| (k.as_str(), v)).collect();
    state.args_digest(&pairs)
}

/// The counters of the [`State`], as the engine's [`LimitStore`], read only: a slot the
/// call would take is noted for admission; nothing is counted here.
struct DryLimits<'a> {
    state: &'a dyn State,
    failed: std::sync::atomic::AtomicBool,
    /// Why the first counter that could not be read failed (a damaged one names its file).
    why: Mutex<Option<String>>,
    checked: Mutex<Vec<CounterSlot>>,
}

impl DryLimits<'_> {
    fn limits(spec: LimitSpec) -> Limits {
        Limits {
            rate_limit: spec.rate_limit,
            budget: spec.budget,
            window_ms: RATE_WINDOW_MS,
        }
    }
}

impl LimitStore for DryLimits<'_> {
    fn window_ms(&self) -> u64 {
        RATE_WINDOW_MS
    }
    fn check(&self, key: LimitKey<'_>, spec: LimitSpec, now_ms: u64) -> LimitVerdict {
        let limits = Self::limits(spec);
        match self
            .state
            .counter_check(key.identity, key.tool, limits, now_ms)
        {
            Ok(Verdict::Ok) => {
                if let Ok(mut c) = self.checked.lock() {
                    c.push(CounterSlot {
                        identity: key.identity.to_owned(),
                        tool: key.tool.to_owned(),
                        limits,
                        now_ms,
                    });
                }
                LimitVerdict::Ok
            }
            Ok(Verdict::Budget) => LimitVerdict::Budget,
            Ok(Verdict::RateLimit) => LimitVerdict::RateLimit,
            // A counter that cannot be read refuses (fail closed).
            Err(e) => {
                self.failed
                    .store(true, std::sync::atomic::Ordering::Relaxed);
                if let Ok(mut why) = self.why.lock() {
                    why.get_or_insert_with(|| e.to_string());
                }
                LimitVerdict::Capacity
            }
        }
    }
    fn try_consume(&self, key: LimitKey<'_>, spec: LimitSpec, now_ms: u64) -> LimitVerdict {
        // Never called (`consume_limits` is false): the slot is taken at admission.
        self.check(key, spec, now_ms)
    }
}

/// The owner's approvals, as the engine's confirmation callback, looked up only: the
/// approval a call would use is noted for admission.
struct DryApprovals<'a> {
    state: &'a dyn State,
    policy_hash: &'a str,
    now: Timestamp,
    found: std::cell::RefCell<Option<(String, ApprovalKey)>>,
    /// The escalation tier of the same call: while its answer is pending, no
    /// confirmation approval may stand in for it (the engine asks the callback of every
    /// paused call, the escalation's too).
    tier: &'a escalate::ApprovalTier<'a>,
    /// The call's session and project.
    tenant: &'a Tenant,
}

impl histos::Confirmer for DryApprovals<'_> {
    fn confirm(
        &self,
        tool: &str,
        args: &Args<'_>,
        principal: &histos::Principal,
    ) -> Result<bool, String> {
        if self.tier.pending() {
            return Ok(false);
        }
        let digest = bound_digest(self.state, args).map_err(|e| e.to_string())?;
        let key = approval_key(
            tool,
            principal,
            self.tenant,
            &digest,
            self.policy_hash,
            false,
        );
        match self.state.approval_lookup(&key, self.now) {
            Ok(Some(a)) => {
                *self.found.borrow_mut() = Some((a.id, key));
                Ok(true)
            }
            Ok(None) => Ok(false),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// What step 7 allowed: the values after binding, the rule for the audit, and what the
/// call would spend once admitted.
#[derive(Debug)]
pub struct PolicyPass {
    /// The call's values after `bind` (HISTOS-ENGINE §5).
    pub values: BTreeMap<String, ArgValue>,
    /// The engine's rule (`allow`, `confirmed`, `escalated`).
    pub rule: &'static str,
    /// The counter slots the call takes at admission.
    pub counters: Vec<CounterSlot>,
    /// The approvals the call uses at admission, each its id as looked up and its key:
    /// the escalation's (when the owner's queue answered `escalate`), then the
    /// confirmation's.
    pub approvals: Vec<(String, ApprovalKey)>,
}

/// What answers the policy's `resource` constraints and `escalate` for one call
/// (`config.json`'s `resolvers` and `escalation`, RUNTIME §7). Unwired, the answers are
/// `no_resource_resolver` and `no_escalation_tier`.
#[derive(Clone, Copy, Default)]
pub struct Wiring<'a> {
    /// The resolver of this tool's resource, when `resolvers` names one.
    pub resolver: Option<&'a dyn ResourceResolver>,
    /// What answers `escalate`: `config.json`'s `escalation` (`approvals`: the owner's
    /// approval queue), or nothing.
    pub escalation: Option<EscalationMode>,
}

impl std::fmt::Debug for Wiring<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wiring")
            .field("resolver", &self.resolver.is_some())
            .field("escalation", &self.escalation)
            .finish()
    }
}

impl Wiring<'_> {
    fn by_approvals(&self) -> bool {
        self.escalation == Some(EscalationMode::Approvals)
    }
}

/// One call as the runtime policy decides it: who, which tool, with what values, through
/// which face (a CLI-face value is text, read as the type the contract declares), when.
#[derive(Debug, Clone, Copy)]
pub struct PolicyCall<'a> {
    /// The session principal (its role, attributes and `can_view`).
    pub principal: &'a Principal,
    /// `PACK_ID.VERB_KEY` (or `PACK_ID.REF`).
    pub tool: &'a str,
    /// The call's values after the gate.
    pub values: &'a BTreeMap<String, ArgValue>,
    /// The face the call came through.
    pub face: Face,
    /// The call's time.
    pub now: Timestamp,
}

/// The dry pre-gate for one call of a session principal (RUNTIME §7): nothing is spent.
///
/// # Errors
/// A [`PolicyRefusal`] with the engine's rule as code; a paused call gets
/// `requires_confirmation` and a pending approval id (recording the request is not
/// spending), marked as an escalation when the owner's queue is asked to answer
/// `escalate`.
pub fn pre(
    state: &dyn State,
    rp: &RuntimePolicy,
    call: &PolicyCall<'_>,
    wiring: Wiring<'_>,
) -> Result<PolicyPass, PolicyRefusal> {
    let principal = principal_of(call.principal);
    let typed = histos_call(rp, call);
    let limits = DryLimits {
        state,
        failed: std::sync::atomic::AtomicBool::new(false),
        why: Mutex::new(None),
        checked: Mutex::new(Vec::new()),
    };
    let tenant = Tenant::of(call.principal);
    let tier = escalate::ApprovalTier::new(state, rp.hash(), call.now, &tenant);
    let approvals = DryApprovals {
        state,
        policy_hash: rp.hash(),
        now: call.now,
        found: std::cell::RefCell::new(None),
        tier: &tier,
        tenant: &tenant,
    };
    let ctx = histos::Context {
        limits: Some(&limits),
        now_ms: u64::try_from(call.now.as_millisecond()).unwrap_or(0),
        tier: wiring
            .by_approvals()
            .then_some(&tier as &dyn histos::EscalationTier),
        confirm: Some(&approvals),
        mode: histos::Mode::Enforce,
        consume_limits: false,
    };
    let d = Engine::pre(&rp.policy, Some(&principal), wiring.resolver, &typed, &ctx);
    match d.effect {
        Effect::Allow => {
            let mut taken: Vec<(String, ApprovalKey)> = tier.approved().into_iter().collect();
            taken.extend(approvals.found.into_inner());
            let counters = limits.checked.into_inner().unwrap_or_default();
            allowed(&d, typed.args, counters, taken)
        }
        Effect::RequireConfirmation => paused(state, rp, call, &principal, &d, typed.args, &tier),
        _ => {
            let failed = limits
                .failed
                .load(std::sync::atomic::Ordering::Relaxed)
                .then(|| {
                    limits
                        .why
                        .lock()
                        .ok()
                        .and_then(|w| w.clone())
                        .unwrap_or_default()
                });
            Err(refused(
                call.tool,
                &d,
                failed.as_deref(),
                wiring,
                (rp, &principal.role),
            ))
        }
    }
}

/// The engine's call: the tool, and its values as the engine reads them — on the CLI face
/// (where every value came as text) a value the contract types is read as that type
/// ([`cli_typed`]).
fn histos_call(rp: &RuntimePolicy, call: &PolicyCall<'_>) -> histos::Call {
    histos::Call {
        tool: call.tool.to_owned(),
        args: engine_args(rp, call),
    }
}

fn engine_args(rp: &RuntimePolicy, call: &PolicyCall<'_>) -> histos::Map {
    let contract = rp.policy.tool(call.tool).and_then(|t| t.args.as_ref());
    let mut args = histos::Map::new();
    for (k, v) in call.values {
        let typed = if call.face == Face::Cli {
            contract
                .and_then(|c| c.field(k))
                .and_then(|f| cli_typed(v, f.ty))
        } else {
            None
        };
        args.insert(k.clone(), typed.unwrap_or_else(|| to_value(v)));
    }
    args
}

/// An allowed call: its values after `bind`, and what admission will take.
fn allowed(
    d: &histos::Decision,
    mut bound: histos::Map,
    counters: Vec<CounterSlot>,
    approvals: Vec<(String, ApprovalKey)>,
) -> Result<PolicyPass, PolicyRefusal> {
    d.apply_bindings(&mut bound);
    let mut values = BTreeMap::new();
    for (k, v) in bound.iter() {
        let Some(a) = to_arg(v) else {
            return Err(PolicyRefusal::new(
                Code::ArgBindingUnresolved,
                format!("bound argument `{k}` is not a string, number or boolean"),
            ));
        };
        values.insert(k.clone(), a);
    }
    Ok(PolicyPass {
        values,
        rule: d.rule.as_str(),
        counters,
        approvals,
    })
}

/// A call paused for the owner's answer: its approval request recorded (not spent), and
/// the refusal naming it. When the owner's queue was asked to answer `escalate` and has
/// no answer yet (`tier`), the call waits for that, not for a confirmation.
fn paused(
    state: &dyn State,
    rp: &RuntimePolicy,
    call: &PolicyCall<'_>,
    principal: &histos::Principal,
    d: &histos::Decision,
    mut bound: histos::Map,
    tier: &escalate::ApprovalTier<'_>,
) -> Result<PolicyPass, PolicyRefusal> {
    let store = |e: hcp_store::StoreError| PolicyRefusal::new(e.code(), e.to_string());
    let tool = call.tool;
    let escalation = tier.pending();
    d.apply_bindings(&mut bound);
    let digest = bound_digest(state, &Args::plain(&bound)).map_err(store)?;
    let summary = bound.iter().map(|(k, v)| (k.clone(), preview(v))).collect();
    let window = if escalation {
        None
    } else {
        rp.policy.tool(tool).and_then(|t| t.confirmation_expires_in)
    };
    let tenant = Tenant::of(call.principal);
    let request = ApprovalRequest {
        key: approval_key(tool, principal, &tenant, &digest, rp.hash(), escalation),
        summary,
        window_s: window,
        session: tenant.session_id(),
        project: tenant.project.clone(),
    };
    let a = state.approval_request(&request, call.now).map_err(store)?;
    let (message, hint) = if escalation {
        (
            format!(
                "`{tool}` needs the owner's answer to its escalation, which the agent cannot give itself: approval `{}` is pending",
                a.id
            ),
            format!(
                "the owner reviews it with `hcp approvals` and answers with `hcp approve {0}` or `hcp deny {0}`; then the same call is asked again",
                a.id
            ),
        )
    } else {
        (
            format!(
                "`{tool}` needs an approval the agent cannot give itself: approval `{}` is pending",
                a.id
            ),
            format!(
                "the owner reviews it with `hcp approvals` and grants it with `hcp approve {}`; then the same call passes once",
                a.id
            ),
        )
    };
    Err(PolicyRefusal {
        code: Code::RequiresConfirmation,
        message,
        hint: Some(hint),
        approval_id: Some(a.id),
    })
}

/// A call the policy refuses: the rule's code (`limit_store_unavailable` when a counter
/// could not be read: fail closed, with the store's reason, which names a damaged file),
/// why, and what the operator can wire.
fn refused(
    tool: &str,
    d: &histos::Decision,
    counters_failed: Option<&str>,
    wiring: Wiring<'_>,
    (rp, role): (&RuntimePolicy, &str),
) -> PolicyRefusal {
    let code = if counters_failed.is_some() {
        Code::LimitStoreUnavailable
    } else {
        Code::try_from(d.rule).unwrap_or(Code::InternalError)
    };
    let mut message = match counters_failed {
        Some(why) if !why.is_empty() => format!(
            "the call counters of `{tool}` cannot be read or written ({why}); the call is refused"
        ),
        Some(_) => {
            format!("the call counters of `{tool}` cannot be read or written; the call is refused")
        }
        None => format!("the runtime policy refuses `{tool}`: {}", d.reason),
    };
    if let Some(f) = &d.field {
        message.push_str(&format!(" (field `{f}`)"));
    }
    // `rbac` says which of three it is: no role, a role the policy does not have, or a
    // role without this tool.
    let file = rp.file.display();
    if code == Code::Rbac && counters_failed.is_none() {
        message = if role.is_empty() {
            format!(
                "the runtime policy refuses `{tool}`: the session has no role, and `{file}` allows tools by role (field `role`)"
            )
        } else if rp.policy.roles.iter().any(|r| r.name == role) {
            format!(
                "the runtime policy refuses `{tool}`: role `{role}` of `{file}` does not allow it (field `role`)"
            )
        } else {
            format!(
                "the runtime policy refuses `{tool}`: role `{role}` is not in `{file}` (field `role`)"
            )
        };
    }
    let hint = match code {
        Code::Rbac if role.is_empty() => Some(format!(
            "start the session with `hcp session start --principal ID --role ROLE` for a role of `{file}` that allows `{tool}`"
        )),
        Code::Rbac => Some(format!(
            "the owner allows `{tool}` for role `{role}` under `roles:` in `{file}`, then checks and locks it (`hcp policy check`, `hcp policy lock`)"
        )),
        Code::EscalationDenied if wiring.by_approvals() => Some(
            "the owner denied this call's escalation; the same call is refused until the denial lapses".to_owned(),
        ),
        Code::NoEscalationTier => Some(
            "the operator wires the owner's approval queue as the tier with `\"escalation\": \"approvals\"` in `config.json`".to_owned(),
        ),
        Code::NoResourceResolver => Some(format!(
            "the operator names a `read` verb whose JSON stdout is the resource in `config.json`: `\"resolvers\": {{\"{tool}\": \"PACK.VERB\"}}`"
        )),
        _ => None,
    };
    PolicyRefusal {
        code,
        message,
        hint,
        approval_id: None,
    }
}

/// A single-line preview of a value for `hcp approvals`: control characters as spaces,
/// at most 4,096 characters (`hcp approvals` shows 60 of them and `--json` all).
fn preview(v: &Value) -> String {
    let text = match v {
        Value::Str(s) => s.clone(),
        other => serde_json::Value::from(other).to_string(),
    };
    let one_line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if one_line.chars().count() > 4096 {
        format!("{}…", one_line.chars().take(4095).collect::<String>())
    } else {
        one_line
    }
}

/// What the output controls did to the child's output.
#[derive(Debug)]
pub struct PostResult {
    /// The stdout the caller may see (`None`: withheld).
    pub stdout: Option<Vec<u8>>,
    /// The stderr the caller may see (canaries and secrets redacted).
    pub stderr: Vec<u8>,
    /// The post-gate's rule (`allow`, `post_redaction`, `output_schema`…).
    pub rule: &'static str,
}

/// The output post-gate on the child's output (RUNTIME §7). stdout that is JSON — read
/// strictly: a repeated key makes it text, so nothing hides behind a later duplicate — is
/// checked as its value; any other stdout as one string. Unchanged output passes as the
/// child's own bytes; changed output is written back with its numbers exact. stderr gets
/// the text redaction of canaries and secrets (HISTOS-ENGINE §1e, exception text).
pub fn post(
    rp: &RuntimePolicy,
    principal: &Principal,
    tool: &str,
    stdout: &[u8],
    stderr: &[u8],
) -> PostResult {
    let principal = principal_of(principal);
    let parsed = std::str::from_utf8(stdout)
        .ok()
        .and_then(|t| histos::json::parse(t).ok());
    let (value, was_json) = match parsed {
        Some(v) => (v, true),
        None => (
            Value::Str(String::from_utf8_lossy(stdout).into_owned()),
            false,
        ),
    };
    let ctx = histos::Context::default();
    let out = Engine::post(&rp.policy, Some(&principal), tool, value, &ctx);
    let rule = out.decision.rule.as_str();
    let (err_text, _) = Engine::post_text(&rp.policy, tool, &String::from_utf8_lossy(stderr));
    let stdout = match (out.decision.effect, out.value) {
        (Effect::Allow, _) => Some(stdout.to_vec()),
        (Effect::Deny, _) | (_, None) => None,
        (_, Some(v)) => Some(match (&v, was_json) {
            (Value::Str(s), false) => s.clone().into_bytes(),
            _ => {
                let mut b = String::new();
                write_json(&v, &mut b);
                b.push('\n');
                b.into_bytes()
            }
        }),
    };
    PostResult {
        stdout,
        stderr: err_text.into_bytes(),
        rule,
    }
}

/// JSON text of a value, numbers as the document wrote them (big integers exact).
fn write_json(v: &Value, out: &mut String) {
    let quote = |s: &str| serde_json::Value::String(s.to_owned()).to_string();
    match v {
        Value::Null | Value::Timestamp(_) => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) => out.push_str(&i.to_string()),
        Value::BigInt(d) => out.push_str(d),
        Value::Float(f) => match serde_json::Number::from_f64(*f) {
            Some(n) => out.push_str(&n.to_string()),
            None => out.push_str("null"),
        },
        Value::Str(s) => out.push_str(&quote(s)),
        Value::List(l) => {
            out.push('[');
            for (i, x) in l.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(x, out);
            }
            out.push(']');
        }
        Value::Map(m) => {
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&quote(k));
                out.push(':');
                write_json(x, out);
            }
            out.push('}');
        }
    }
}

/// The tenant an approval is bound to besides its principal (RUNTIME §7): the call's
/// session and project. An approval asked for under one session and project passes the
/// same call of that session and project only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tenant {
    /// The session's id (`sha256:` and the digest of its token); `None` for the owner.
    pub session: Option<String>,
    /// The call's project: `HCP_PROJECT`, else the session's first project.
    pub project: Option<String>,
}

impl Tenant {
    /// The tenant of a call made by `p`.
    pub fn of(p: &Principal) -> Self {
        let session = p.session.as_ref();
        Self {
            session: session.map(|s| s.token_sha256.clone()),
            project: p
                .project
                .clone()
                .or_else(|| session.and_then(|s| s.projects.first().cloned())),
        }
    }

    /// The session's short id, as `hcp session list` shows it (12 hex digits).
    pub fn session_id(&self) -> Option<String> {
        self.session.as_ref().map(|s| {
            let hex = s.strip_prefix("sha256:").unwrap_or(s);
            hex.get(..12).unwrap_or(hex).to_owned()
        })
    }
}

/// The key of the approval of a call: the tool, the principal's identity and a digest of
/// its role, attributes and `can_view` and of the call's session and project (so another
/// session of the same id, or another project, cannot use it: RUNTIME §7, HISTOS-ENGINE
/// §6), the digest of the bound arguments, the policy.
pub(crate) fn approval_key(
    tool: &str,
    p: &histos::Principal,
    tenant: &Tenant,
    args_digest: &str,
    policy_hash: &str,
    escalation: bool,
) -> ApprovalKey {
    let attrs: serde_json::Map<String, serde_json::Value> = p
        .attributes
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::Value::from(v)))
        .collect();
    let mut can_view = p.can_view.clone();
    can_view.sort();
    let facts = serde_json::json!({
        "identity": p.identity_or_anonymous(),
        "role": p.role,
        "attributes": attrs,
        "can_view": can_view,
        "session": tenant.session,
        "project": tenant.project,
    });
    ApprovalKey {
        tool: tool.to_owned(),
        principal: p.identity_or_anonymous().to_owned(),
        principal_digest: audit::sha256_tagged(&audit::canonical_json(&facts)),
        args_digest: args_digest.to_owned(),
        policy_hash: policy_hash.to_owned(),
        escalation,
    }
}
