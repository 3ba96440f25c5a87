//! The typed policy model a loaded document becomes (HISTOS-ENGINE §0, §3.1).

use std::collections::HashMap;

use crate::detect::CanaryMatcher;
use crate::pattern::Pattern;
use crate::value::Value;

/// A field type (HISTOS-ENGINE §4). The bundle default is [`FieldType::String`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldType {
    /// A string.
    String,
    /// An integer, never a bool or a float (`7.0` is refused).
    Integer,
    /// An integer or float, never a bool.
    Number,
    /// `true` / `false`.
    Boolean,
    /// A list.
    Array,
    /// A mapping (contents unchecked: "object shallow").
    Object,
    /// Anything, including null.
    Any,
}

impl FieldType {
    /// The format's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            FieldType::String => "string",
            FieldType::Integer => "integer",
            FieldType::Number => "number",
            FieldType::Boolean => "boolean",
            FieldType::Array => "array",
            FieldType::Object => "object",
            FieldType::Any => "any",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "string" => FieldType::String,
            "integer" => FieldType::Integer,
            "number" => FieldType::Number,
            "boolean" => FieldType::Boolean,
            "array" => FieldType::Array,
            "object" => FieldType::Object,
            "any" => FieldType::Any,
            _ => return None,
        })
    }
}

/// A sensitivity class on a `returns` field (HISTOS-ENGINE §8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sensitive {
    /// Personal data.
    Pii,
    /// A secret.
    Secret,
}

impl Sensitive {
    /// The format's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Sensitive::Pii => "pii",
            Sensitive::Secret => "secret",
        }
    }
}

/// One declared field of an argument or return schema (HISTOS-ENGINE §4).
#[derive(Debug, Clone)]
pub struct Field {
    /// The argument / return key.
    pub name: String,
    /// Declared type (default string).
    pub ty: FieldType,
    /// Whether the key must be present (default true).
    pub required: bool,
    /// Whether `null` is accepted (default false).
    pub nullable: bool,
    /// Allowed values (Python equality), in document order.
    pub enum_values: Option<Vec<Value>>,
    /// Allowed element values of an array.
    pub item_enum: Option<Vec<Value>>,
    /// Element type of an array.
    pub item_type: Option<FieldType>,
    /// Minimum string length in code points.
    pub min_length: Option<u64>,
    /// Maximum string length in code points.
    pub max_length: Option<u64>,
    /// Full-match pattern (Python `re` dialect), screened at load (§2d).
    pub pattern: Option<Pattern>,
    /// Sensitivity class (returns only).
    pub sensitive: Option<Sensitive>,
    /// Minimum number of array elements.
    pub min_items: Option<u64>,
    /// Maximum number of array elements.
    pub max_items: Option<u64>,
    /// Whether array elements must be distinct (Python equality).
    pub unique_items: bool,
    /// Inclusive lower bound (a number value, as written).
    pub minimum: Option<Value>,
    /// Inclusive upper bound.
    pub maximum: Option<Value>,
    /// Exclusive lower bound.
    pub exclusive_minimum: Option<Value>,
    /// Exclusive upper bound.
    pub exclusive_maximum: Option<Value>,
    /// The value must be a multiple of this (never 0).
    pub multiple_of: Option<Value>,
}

/// An argument or return schema: `{allow_extra, fields}` (HISTOS-ENGINE §3.1).
#[derive(Debug, Clone, Default)]
pub struct Schema {
    /// `$allow_extra`: whether undeclared keys are accepted (default false: closed).
    pub allow_extra: bool,
    /// Declared fields in document order.
    pub fields: Vec<Field>,
}

impl Schema {
    /// The field named `name`.
    #[inline]
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields
            .iter()
            .find(|f| crate::value::fast_eq(&f.name, name))
    }
}

/// A comparison operator of a resource condition (HISTOS-ENGINE §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `lhs in rhs` (substring when rhs is a string).
    In,
    /// `lhs not in rhs`.
    NotIn,
    /// `<=`
    Le,
    /// `<`
    Lt,
    /// `>=`
    Ge,
    /// `>`
    Gt,
}

impl Op {
    /// The format's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Eq => "eq",
            Op::Ne => "ne",
            Op::In => "in",
            Op::NotIn => "not_in",
            Op::Le => "le",
            Op::Lt => "lt",
            Op::Ge => "ge",
            Op::Gt => "gt",
        }
    }
}

/// A resource constraint: `owns` (as `eq` against a principal attribute) or a `where[]`
/// condition (HISTOS-ENGINE §3.1, §5).
#[derive(Debug, Clone)]
pub struct Constraint {
    /// Field of the resolved resource (lhs).
    pub field: String,
    /// Comparison.
    pub op: Op,
    /// Literal rhs (when not the principal form).
    pub value: Option<Value>,
    /// Principal attribute rhs.
    pub principal_attr: Option<String>,
}

/// What the post-gate does on a strict/projection violation (HISTOS-ENGINE §8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnViolation {
    /// Replace the whole value (default).
    RedactAll,
    /// Deny the output.
    Deny,
    /// Let it through (over-budget is still redacted).
    Allow,
}

impl OnViolation {
    /// The format's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            OnViolation::RedactAll => "redact_all",
            OnViolation::Deny => "deny",
            OnViolation::Allow => "allow",
        }
    }
}

/// One tool contract (HISTOS-ENGINE §2b, §3.1).
#[derive(Debug, Clone)]
pub struct Tool {
    /// Tool name (`[A-Za-z_][A-Za-z0-9_.-]*`; hcp uses `PACK_ID.VERB_KEY`).
    pub name: String,
    /// Argument schema; `None` when the tool has no `args` block (→ `no_arg_schema`).
    pub args: Option<Schema>,
    /// Return schema.
    pub returns: Option<Schema>,
    /// `read` (default) or `write`.
    pub access: String,
    /// `low` (default), `medium`, `high`, `critical`.
    pub sensitivity: String,
    /// Max calls per principal per rolling window.
    pub rate_limit: Option<u64>,
    /// Max calls per principal for the life of the limit store.
    pub budget: Option<u64>,
    /// `confirmation.required`.
    pub requires_confirmation: bool,
    /// `confirmation.expires_in`, seconds (hashed even when not required).
    pub confirmation_expires_in: Option<u64>,
    /// `escalate.required`.
    pub requires_escalation: bool,
    /// `owns` first, then `where[]`, in order.
    pub constraints: Vec<Constraint>,
    /// `bind` entries in document order: (argument, principal attribute).
    pub bindings: Vec<(String, String)>,
    /// `output.scan_canary` (default true).
    pub scan_output_for_canary: bool,
    /// `deny_secret_args` (default true).
    pub deny_secret_args: bool,
    /// `output.redact_secrets` (default true).
    pub redact_secret_output: bool,
    /// `output.project` (default false).
    pub project_output: bool,
    /// `output.strict` (default false).
    pub strict_returns: bool,
    /// `output.on_violation` (default redact_all).
    pub on_output_violation: OnViolation,
}

/// A role: an allow-list and at most one parent (HISTOS-ENGINE §8).
#[derive(Debug, Clone)]
pub struct Role {
    /// Role name.
    pub name: String,
    /// Granted tool names in document order.
    pub allow: Vec<String>,
    /// Parent role.
    pub inherits: Option<String>,
}

/// Up to this many tools/roles, names are looked up by a linear scan.
const SMALL: usize = 12;

/// A loaded, validated, precompiled policy.
#[derive(Debug)]
pub struct Policy {
    /// `schema_version` (always `histos.policy/0.1`).
    pub schema_version: String,
    /// `policy_id` metadata.
    pub policy_id: Option<String>,
    /// `version` metadata.
    pub version: Option<String>,
    /// `created_at` metadata.
    pub created_at: Option<String>,
    /// `requires.features` as written.
    pub features: Vec<String>,
    /// Tools in document order.
    pub tools: Vec<Tool>,
    /// Roles in document order.
    pub roles: Vec<Role>,
    /// Canary tokens in document order.
    pub canaries: Vec<String>,
    pub(crate) tool_index: HashMap<String, usize, crate::fasthash::Fnv>,
    pub(crate) role_index: HashMap<String, usize, crate::fasthash::Fnv>,
    /// Per role, a bitset of tool indices it may call (closure over `inherits`).
    pub(crate) grants: Vec<Vec<u64>>,
    pub(crate) canary_matcher: CanaryMatcher,
    pub(crate) content_hash: String,
}

impl Policy {
    /// `content_hash` (`sha256:<hex>`), computed at load (HISTOS-ENGINE §3).
    pub fn content_hash(&self) -> &str {
        &self.content_hash
    }

    /// The tool contract named `name`.
    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.tool_index.get(name).map(|&i| &self.tools[i])
    }

    /// Index of the tool named `name` (a linear scan beats hashing for small policies).
    #[inline]
    pub(crate) fn tool_idx(&self, name: &str) -> Option<usize> {
        if self.tools.len() <= SMALL {
            return self
                .tools
                .iter()
                .position(|t| crate::value::fast_eq(&t.name, name));
        }
        self.tool_index.get(name).copied()
    }

    #[inline]
    fn role_idx(&self, name: &str) -> Option<usize> {
        if self.roles.len() <= SMALL {
            return self
                .roles
                .iter()
                .position(|r| crate::value::fast_eq(&r.name, name));
        }
        self.role_index.get(name).copied()
    }

    /// Whether `role` may call the tool at index `tool` (grants union along `inherits`,
    /// cycle-safe; an undeclared role has no grants).
    pub(crate) fn role_allows(&self, role: &str, tool: usize) -> bool {
        match self.role_idx(role) {
            Some(r) => self.grants[r]
                .get(tool / 64)
                .is_some_and(|w| w & (1u64 << (tool % 64)) != 0),
            None => false,
        }
    }

    /// Whether `role` may call `tool` (HISTOS-ENGINE §1b step 2).
    pub fn allows(&self, role: &str, tool: &str) -> bool {
        self.tool_idx(tool)
            .is_some_and(|t| self.role_allows(role, t))
    }
}
