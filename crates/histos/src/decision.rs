//! Decisions as values: effect, RUNTIME rule and detail (HISTOS-ENGINE §0, §1).

use std::borrow::Cow;

use crate::value::Value;

/// A decision effect (HISTOS-ENGINE §0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// The call may proceed / the output passes unchanged.
    Allow,
    /// Refused.
    Deny,
    /// Paused until a trusted approval.
    RequireConfirmation,
    /// Output passes with redactions (post-gate only).
    Redact,
}

impl Effect {
    /// The reference's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::Allow => "allow",
            Effect::Deny => "deny",
            Effect::RequireConfirmation => "require_confirmation",
            Effect::Redact => "redact",
        }
    }

    /// The agent-facing `public_reason`.
    pub fn public_reason(self) -> &'static str {
        match self {
            Effect::Allow => "OK",
            Effect::Deny => "ACTION_NOT_AUTHORIZED",
            Effect::RequireConfirmation => "CONFIRMATION_REQUIRED",
            Effect::Redact => "OUTPUT_REDACTED",
        }
    }
}

macro_rules! rules {
    ($($v:ident => $s:literal, $d:literal;)*) => {
        /// A RUNTIME decision code (`GateDecision.rule`, `spec/decision-codes.json`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Rule {
            $(#[doc = $d] $v,)*
        }
        impl Rule {
            /// The stable snake_case code.
            pub fn as_str(self) -> &'static str {
                match self { $(Rule::$v => $s,)* }
            }
            /// Every code, in the order of `decision-codes.json`.
            pub const ALL: &'static [Rule] = &[$(Rule::$v,)*];
        }
    };
}

rules! {
    Allow => "allow", "Nothing fired.";
    Confirmed => "confirmed", "A confirmation callback approved the call.";
    UnknownTool => "unknown_tool", "The tool has no contract.";
    NoArgSchema => "no_arg_schema", "The contract has no `args` block.";
    NoPrincipal => "no_principal", "No trusted principal is bound.";
    Rbac => "rbac", "The role has no grant for the tool.";
    ArgSchema => "arg_schema", "Argument validation or the input budget failed.";
    ArgBindingUnresolved => "arg_binding_unresolved", "A bound attribute is missing on the principal.";
    ResourceConstraint => "resource_constraint", "A resource constraint failed.";
    NoResourceResolver => "no_resource_resolver", "Constraints exist but no resolver is wired.";
    ResourceNotFound => "resource_not_found", "The resolver found no resource.";
    ResolverError => "resolver_error", "The resolver failed.";
    CanaryExfil => "canary_exfil", "A canary token is in the arguments.";
    SecretDetected => "secret_detected", "A checksum-verified secret is in the arguments.";
    InjectionPattern => "injection_pattern", "Optional content rule: injection.";
    ExfiltrationPattern => "exfiltration_pattern", "Optional content rule: exfiltration.";
    RateLimit => "rate_limit", "Calls in the window reached `rate_limit`.";
    Budget => "budget", "The budget is exhausted.";
    LimitStoreCapacity => "limit_store_capacity", "The limit store is full.";
    RequiresConfirmation => "requires_confirmation", "The tool requires confirmation.";
    ConfirmError => "confirm_error", "The confirmation callback failed.";
    Escalated => "escalated", "The semantic tier allowed the call.";
    EscalationDenied => "escalation_denied", "The semantic tier refused the call.";
    EscalationError => "escalation_error", "The semantic tier failed.";
    NoEscalationTier => "no_escalation_tier", "Escalation required and no tier is wired.";
    InternalError => "internal_error", "An internal failure (fail closed).";
    PostRedaction => "post_redaction", "Output redacted.";
    ExceptionRedaction => "exception_redaction", "Error text redacted.";
    OutputSchema => "output_schema", "Output violated the return contract.";
    ConfirmSuspended => "confirm_suspended", "Confirmation suspended by the host.";
    ConfirmCancelled => "confirm_cancelled", "Cancelled while awaiting confirmation.";
    PreCancelled => "pre_cancelled", "Cancelled during a pre-gate callback.";
    UnnameableArgs => "unnameable_args", "Positional arguments that cannot be named.";
    UninspectableOutput => "uninspectable_output", "A lazy output that cannot be inspected.";
}

/// A gate decision (HISTOS-ENGINE §1): `{effect, rule, reason, field, expected,
/// received, escalate, redactions}` plus the post-binding values of bound arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// Effect.
    pub effect: Effect,
    /// RUNTIME code.
    pub rule: Rule,
    /// Engine-composed explanation (never quotes argument values).
    pub reason: Cow<'static, str>,
    /// The field concerned (argument, `role`, resource field).
    pub field: Option<Cow<'static, str>>,
    /// What was expected.
    pub expected: Option<Cow<'static, str>>,
    /// What was received (a description, never a raw argument value).
    pub received: Option<Cow<'static, str>>,
    /// Set on every escalation outcome.
    pub escalate: bool,
    /// Post-binding values of the bound arguments the binding changed or supplied, in
    /// `bind` order; every other argument is as the caller sent it (see
    /// [`Decision::apply_bindings`]). Empty when binding changed nothing.
    pub bound_args: Vec<(String, Value)>,
    /// Names of the bound arguments whose value the binding changed or supplied.
    pub rebound_args: Vec<String>,
    /// Post-gate redaction labels (`drop:<key>`, `canary:<tok>`, `field:<name>`, …).
    pub redactions: Vec<String>,
    /// False in observe mode: the host records but does not enforce.
    pub enforced: bool,
}

impl Decision {
    #[inline(always)]
    pub(crate) fn new(effect: Effect, rule: Rule, reason: impl Into<Cow<'static, str>>) -> Self {
        Decision {
            effect,
            rule,
            reason: reason.into(),
            field: None,
            expected: None,
            received: None,
            escalate: false,
            bound_args: Vec::new(),
            rebound_args: Vec::new(),
            redactions: Vec::new(),
            enforced: true,
        }
    }

    #[inline(always)]
    pub(crate) fn deny(rule: Rule, reason: impl Into<Cow<'static, str>>) -> Self {
        Self::new(Effect::Deny, rule, reason)
    }

    #[inline(always)]
    pub(crate) fn with_field(mut self, f: impl Into<Cow<'static, str>>) -> Self {
        self.field = Some(f.into());
        self
    }

    #[inline(always)]
    pub(crate) fn with_detail(
        mut self,
        expected: impl Into<Cow<'static, str>>,
        received: impl Into<Cow<'static, str>>,
    ) -> Self {
        self.expected = Some(expected.into());
        self.received = Some(received.into());
        self
    }

    /// Rewrites `args` to the post-binding arguments the decision was made on (what the
    /// host must pass to the tool in enforce mode, HISTOS-ENGINE §5).
    pub fn apply_bindings(&self, args: &mut crate::value::Map) {
        for (k, v) in &self.bound_args {
            args.insert(k.clone(), v.clone());
        }
    }

    /// Whether the effect is `allow`.
    pub fn is_allow(&self) -> bool {
        self.effect == Effect::Allow
    }
}
