//! Audit records as OpenTelemetry spans (RUNTIME §11), a pure mapping.
//!
//! - A call is one `execute_tool PACK.VERB` span (GenAI semantic conventions, the
//!   `execute_tool` span: kind `INTERNAL`, `gen_ai.operation.name` = `execute_tool`,
//!   `gen_ai.tool.name` = `PACK.VERB`, `gen_ai.tool.call.id` = the call's `audit_id`),
//!   built from its `intent` and `outcome` records (or its one `refusal` record), with the
//!   record's facts as `hcp.*` attributes: principal, project, land, decision, code,
//!   duration, exit code, chain hash.
//! - The gate's decision is its child span `apply_guardrail hcp gate` in the conventions'
//!   guardrail form (`gen_ai.operation.name` = `apply_guardrail`,
//!   `gen_ai.security.target.type` = `tool_call`, `gen_ai.security.decision.type` `allow`,
//!   `deny`, or `warn` for a call observe mode let through, `gen_ai.security.policy.*`).
//! - Every other record — an act of authority, an event, a recovery — is one span of its
//!   own (`authority grant`, `event`, `recovery`).
//!
//! Identifiers derive from the records, so a span sent twice is recognisable as one: a
//! span's id is the first 8 bytes of its record's chain hash (the guardrail's, of the
//! SHA-256 of that hash); a call's trace id is the first 16 bytes of the SHA-256 of its
//! `audit_id` (an outcome names it), and any other record's of its own `id`.

use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::{Span, Status, span::SpanKind, status::StatusCode};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// The semantic-conventions version the spans follow: its schema URL. 1.41.0 is the last
/// release that holds the GenAI conventions (`execute_tool`); the guardrail span follows
/// the GenAI group's `apply_guardrail` (development status), which no release holds yet.
pub const SCHEMA_URL: &str = "https://opentelemetry.io/schemas/1.41.0";

/// The guardian's name in `gen_ai.guardian.name` and in the guardrail span's name.
pub const GUARDIAN: &str = "hcp gate";

fn sha(parts: &[&[u8]]) -> [u8; 32] {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().into()
}

/// The bytes of a chain hash (`sha256:HEX`, `hmac-sha256:HEX`); for anything else, the
/// SHA-256 of its text.
fn hash_bytes(hash: &str) -> Vec<u8> {
    hash.rsplit_once(':')
        .and_then(|(_, h)| hex::decode(h).ok())
        .filter(|b| b.len() >= 16)
        .unwrap_or_else(|| sha(&[hash.as_bytes()]).to_vec())
}

fn nonzero(mut b: Vec<u8>) -> Vec<u8> {
    if b.iter().all(|&x| x == 0)
        && let Some(last) = b.last_mut()
    {
        *last = 1;
    }
    b
}

/// The span id of the record whose chain hash is `hash`.
pub fn span_id(hash: &str) -> Vec<u8> {
    nonzero(hash_bytes(hash)[..8].to_vec())
}

/// The span id of the guardrail span of the decision recorded with `hash`.
pub fn guardrail_span_id(hash: &str) -> Vec<u8> {
    nonzero(sha(&[b"apply_guardrail\n", hash.as_bytes()])[..8].to_vec())
}

/// The trace id of the call (or record) whose `id` is `id`.
pub fn trace_id(id: &str) -> Vec<u8> {
    nonzero(sha(&[b"hcp-trace\n", id.as_bytes()])[..16].to_vec())
}

fn str_of<'a>(m: &'a Map<String, Value>, k: &str) -> Option<&'a str> {
    m.get(k).and_then(Value::as_str)
}

/// Nanoseconds since the epoch of a record's `ts` (0 when it does not parse).
pub fn ts_nanos(m: &Map<String, Value>) -> u64 {
    str_of(m, "ts")
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .and_then(|t| u64::try_from(t.as_nanosecond()).ok())
        .unwrap_or(0)
}

fn kv(key: &str, value: any_value::Value) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue { value: Some(value) }),
        ..Default::default()
    }
}

fn s(key: &str, v: impl Into<String>) -> KeyValue {
    kv(key, any_value::Value::StringValue(v.into()))
}

/// A JSON value as an attribute value: strings, booleans and integers as themselves,
/// anything else as its JSON text.
fn json_value(v: &Value) -> Option<any_value::Value> {
    Some(match v {
        Value::Null => return None,
        Value::Bool(b) => any_value::Value::BoolValue(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => any_value::Value::IntValue(i),
            None => any_value::Value::StringValue(n.to_string()),
        },
        Value::String(t) => any_value::Value::StringValue(t.clone()),
        other => any_value::Value::StringValue(other.to_string()),
    })
}

/// Fields of a record that become attributes under other names, or not at all.
const NOT_COPIED: [&str; 6] = ["ts", "id", "kind", "prev", "hash", "intent"];

/// `hcp.KEY` for every field of `m` but those of [`NOT_COPIED`] and nulls.
fn hcp_attributes(m: &Map<String, Value>, out: &mut Vec<KeyValue>) {
    for (k, v) in m {
        if NOT_COPIED.contains(&k.as_str()) || out.iter().any(|a| a.key == format!("hcp.{k}")) {
            continue;
        }
        if let Some(v) = json_value(v) {
            out.push(kv(&format!("hcp.{k}"), v));
        }
    }
}

fn tool_name(m: &Map<String, Value>) -> String {
    match (str_of(m, "pack_id"), str_of(m, "verb_key")) {
        (Some(p), Some(v)) => format!("{p}.{v}"),
        (None, Some(v)) => v.to_owned(),
        (Some(p), None) => p.to_owned(),
        (None, None) => "unknown".to_owned(),
    }
}

/// What became of a call, as its span says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End<'a> {
    /// Its `outcome` record.
    Outcome(&'a Map<String, Value>),
    /// No outcome came: hcp was killed while it ran (`interrupted`).
    Interrupted,
    /// Refused: its one `refusal` record is the call.
    Refused,
}

/// The spans of one call: `execute_tool PACK.VERB` and its guardrail child. `decision` is
/// the call's `intent` or `refusal` record.
pub fn call_spans(decision: &Map<String, Value>, end: End<'_>) -> Vec<Span> {
    let id = str_of(decision, "id").unwrap_or_default();
    let hash = str_of(decision, "hash").unwrap_or_default();
    let tool = tool_name(decision);
    let trace = trace_id(id);
    let at = ts_nanos(decision);
    let mut attrs = vec![
        s("gen_ai.operation.name", "execute_tool"),
        s("gen_ai.tool.name", tool.clone()),
        s("gen_ai.tool.call.id", id),
        s("hcp.audit_id", id),
        s("hcp.chain_hash", hash),
    ];
    let (start, finish, error, outcome) = match end {
        End::Refused => {
            let ms = decision
                .get("duration_ms")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            let code = str_of(decision, "code").unwrap_or("refused").to_owned();
            (
                at.saturating_sub(ms.saturating_mul(1_000_000)),
                at,
                Some(code),
                "refused",
            )
        }
        End::Interrupted => (at, at, Some("interrupted".to_owned()), "interrupted"),
        End::Outcome(o) => {
            if let Some(h) = str_of(o, "hash") {
                attrs.push(s("hcp.outcome_chain_hash", h));
            }
            for k in [
                "code",
                "exit_code",
                "duration_ms",
                "stdout_bytes",
                "stderr_bytes",
                "truncated",
            ] {
                if let Some(v) = o.get(k).and_then(json_value) {
                    attrs.push(kv(&format!("hcp.{k}"), v));
                }
            }
            let mut rest = o.clone();
            for k in ["principal", "pack_id", "verb_key", "machine", "seq"] {
                rest.remove(k);
            }
            hcp_attributes(&rest, &mut attrs);
            let finish = ts_nanos(o).max(at);
            (
                at,
                finish,
                str_of(o, "code").map(str::to_owned),
                "completed",
            )
        }
    };
    attrs.push(s("hcp.outcome", outcome));
    hcp_attributes(decision, &mut attrs);
    if let Some(e) = &error {
        attrs.push(s("error.type", e.clone()));
    }
    let call_span_id = span_id(hash);
    let status = error.as_ref().map(|e| Status {
        message: match end {
            End::Refused => format!("refused: {e}"),
            End::Interrupted => "interrupted: the call's outcome never came".to_owned(),
            End::Outcome(_) => e.clone(),
        },
        code: StatusCode::Error as i32,
    });
    let call = Span {
        trace_id: trace.clone(),
        span_id: call_span_id.clone(),
        name: format!("execute_tool {tool}"),
        kind: SpanKind::Internal as i32,
        start_time_unix_nano: start,
        end_time_unix_nano: finish,
        attributes: attrs,
        status,
        ..Default::default()
    };
    vec![call, guardrail_span(decision, trace, call_span_id, at)]
}

fn guardrail_span(decision: &Map<String, Value>, trace: Vec<u8>, parent: Vec<u8>, at: u64) -> Span {
    let id = str_of(decision, "id").unwrap_or_default();
    let hash = str_of(decision, "hash").unwrap_or_default();
    let denied = str_of(decision, "decision") == Some("deny");
    let observed = str_of(decision, "would_refuse");
    let verdict = match (denied, observed) {
        (true, _) => "deny",
        (false, Some(_)) => "warn",
        (false, None) => "allow",
    };
    let mut attrs = vec![
        s("gen_ai.operation.name", "apply_guardrail"),
        s("gen_ai.security.target.type", "tool_call"),
        s("gen_ai.security.target.id", id),
        s("gen_ai.security.decision.type", verdict),
        s("gen_ai.guardian.name", GUARDIAN),
        s("gen_ai.guardian.provider.name", "hcp"),
    ];
    let reason = if denied {
        str_of(decision, "code")
    } else {
        observed
    };
    if let Some(r) = reason {
        attrs.push(s("gen_ai.security.decision.reason", r));
    }
    match str_of(decision, "policy_hash") {
        Some(h) => {
            attrs.push(s("gen_ai.security.policy.id", "hcp.runtime_policy"));
            attrs.push(s("gen_ai.security.policy.name", "runtime policy"));
            attrs.push(s("gen_ai.security.policy.version", h));
        }
        None => {
            attrs.push(s("gen_ai.security.policy.id", "hcp.pack_policy"));
            attrs.push(s("gen_ai.security.policy.name", "pack policy and grants"));
        }
    }
    if let Some(d) = str_of(decision, "args_digest") {
        attrs.push(s("gen_ai.security.content.input.hash", d));
    }
    for k in ["code", "rule", "would_refuse"] {
        if let Some(v) = str_of(decision, k) {
            attrs.push(s(&format!("hcp.{k}"), v));
        }
    }
    if let Some(step) = str_of(decision, "code")
        .and_then(hcp_model::Code::parse)
        .map(|c| c.step().as_str())
    {
        attrs.push(s("hcp.step", step));
    }
    attrs.push(s("hcp.chain_hash", hash));
    Span {
        trace_id: trace,
        span_id: guardrail_span_id(hash),
        parent_span_id: parent,
        name: format!("apply_guardrail {GUARDIAN}"),
        kind: SpanKind::Internal as i32,
        start_time_unix_nano: at,
        end_time_unix_nano: at,
        attributes: attrs,
        ..Default::default()
    }
}

/// The span of an outcome whose intent was already sent as `interrupted` (a call that
/// ran longer than the exporter waited): `execute_tool PACK.VERB` in the same trace, a
/// child of the interrupted span, with `hcp.late_outcome` = true.
pub fn late_outcome_span(outcome: &Map<String, Value>, intent_hash: Option<&str>) -> Span {
    let intent = str_of(outcome, "intent").unwrap_or_default();
    let hash = str_of(outcome, "hash").unwrap_or_default();
    let tool = tool_name(outcome);
    let at = ts_nanos(outcome);
    let ms = outcome
        .get("duration_ms")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let mut attrs = vec![
        s("gen_ai.operation.name", "execute_tool"),
        s("gen_ai.tool.name", tool.clone()),
        s("gen_ai.tool.call.id", intent),
        s("hcp.audit_id", intent),
        s("hcp.outcome_chain_hash", hash),
        s("hcp.outcome", "completed"),
        kv("hcp.late_outcome", any_value::Value::BoolValue(true)),
    ];
    hcp_attributes(outcome, &mut attrs);
    let code = str_of(outcome, "code");
    if let Some(c) = code {
        attrs.push(s("error.type", c));
    }
    Span {
        trace_id: trace_id(intent),
        span_id: span_id(hash),
        parent_span_id: intent_hash.map(span_id).unwrap_or_default(),
        name: format!("execute_tool {tool}"),
        kind: SpanKind::Internal as i32,
        start_time_unix_nano: at.saturating_sub(ms.saturating_mul(1_000_000)),
        end_time_unix_nano: at,
        attributes: attrs,
        status: code.map(|c| Status {
            message: c.to_owned(),
            code: StatusCode::Error as i32,
        }),
        ..Default::default()
    }
}

/// The span of a record that is not part of a call: an act of authority (`authority
/// ACT`: `hcp.act`, `hcp.actor`, what it changed), an event, a recovery.
pub fn record_span(m: &Map<String, Value>) -> Span {
    let id = str_of(m, "id").unwrap_or_default();
    let hash = str_of(m, "hash").unwrap_or_default();
    let kind = str_of(m, "kind").unwrap_or("record");
    let name = match (kind, str_of(m, "act")) {
        ("authority", Some(act)) => format!("authority {act}"),
        (k, _) if k == "event" && m.contains_key("verb_key") => {
            format!("event {}", tool_name(m))
        }
        (k, _) => k.to_owned(),
    };
    let mut attrs = vec![
        s("hcp.kind", kind),
        s("hcp.record_id", id),
        s("hcp.chain_hash", hash),
    ];
    hcp_attributes(m, &mut attrs);
    let at = ts_nanos(m);
    Span {
        trace_id: trace_id(id),
        span_id: span_id(hash),
        name,
        kind: SpanKind::Internal as i32,
        start_time_unix_nano: at,
        end_time_unix_nano: at,
        attributes: attrs,
        ..Default::default()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    fn attr<'a>(span: &'a Span, key: &str) -> Option<&'a any_value::Value> {
        span.attributes
            .iter()
            .find(|a| a.key == key)
            .and_then(|a| a.value.as_ref())
            .and_then(|v| v.value.as_ref())
    }

    fn text<'a>(span: &'a Span, key: &str) -> Option<&'a str> {
        match attr(span, key) {
            Some(any_value::Value::StringValue(s)) => Some(s),
            _ => None,
        }
    }

    #[test]
    fn a_call_is_an_execute_tool_span_with_the_gate_as_its_guardrail_child() {
        let intent = obj(json!({
            "ts": "2026-01-02T03:04:05.000Z", "id": "0190-intent", "seq": 7, "kind": "intent",
            "principal": "agent", "project": "p1", "pack_id": "echo", "verb_key": "say",
            "operation": "read", "land": "personal", "decision": "allow",
            "args_digest": "hmac-sha256:ab", "policy_hash": "sha256:cd", "rule": "allow",
            "prev": "sha256:00", "hash": format!("sha256:{}", "11".repeat(32)),
        }));
        let outcome = obj(json!({
            "ts": "2026-01-02T03:04:06.500Z", "id": "0190-outcome", "kind": "outcome",
            "intent": "0190-intent", "principal": "agent", "pack_id": "echo",
            "verb_key": "say", "exit_code": 0, "duration_ms": 1500, "code": null,
            "prev": "x", "hash": format!("sha256:{}", "22".repeat(32)),
        }));
        let spans = call_spans(&intent, End::Outcome(&outcome));
        let (call, gate) = (&spans[0], &spans[1]);
        assert_eq!(call.name, "execute_tool echo.say");
        assert_eq!(text(call, "gen_ai.operation.name"), Some("execute_tool"));
        assert_eq!(text(call, "gen_ai.tool.name"), Some("echo.say"));
        assert_eq!(text(call, "hcp.principal"), Some("agent"));
        assert_eq!(text(call, "hcp.land"), Some("personal"));
        assert_eq!(text(call, "hcp.decision"), Some("allow"));
        assert_eq!(
            attr(call, "hcp.exit_code"),
            Some(&any_value::Value::IntValue(0))
        );
        assert_eq!(
            attr(call, "hcp.duration_ms"),
            Some(&any_value::Value::IntValue(1500))
        );
        assert_eq!(call.span_id, vec![0x11; 8]);
        assert_eq!(call.trace_id, trace_id("0190-intent"));
        assert_eq!(
            call.end_time_unix_nano - call.start_time_unix_nano,
            1_500_000_000
        );
        assert_eq!(call.status, None);
        assert_eq!(gate.parent_span_id, call.span_id);
        assert_eq!(gate.trace_id, call.trace_id);
        assert_eq!(gate.name, "apply_guardrail hcp gate");
        assert_eq!(text(gate, "gen_ai.security.decision.type"), Some("allow"));
        assert_eq!(
            text(gate, "gen_ai.security.policy.version"),
            Some("sha256:cd")
        );
        assert_eq!(text(gate, "gen_ai.security.target.type"), Some("tool_call"));
    }

    #[test]
    fn a_refusal_denies_and_an_interrupted_call_says_so() {
        let refusal = obj(json!({
            "ts": "2026-01-02T03:04:05.000Z", "id": "r1", "kind": "refusal",
            "principal": "agent", "pack_id": "echo", "verb_key": "say",
            "decision": "deny", "code": "missing_grant", "duration_ms": 2,
            "prev": "x", "hash": "sha256:33",
        }));
        let spans = call_spans(&refusal, End::Refused);
        assert_eq!(text(&spans[0], "error.type"), Some("missing_grant"));
        assert_eq!(
            spans[0].status.as_ref().map(|s| s.code),
            Some(StatusCode::Error as i32)
        );
        assert_eq!(
            text(&spans[1], "gen_ai.security.decision.type"),
            Some("deny")
        );
        assert_eq!(
            text(&spans[1], "gen_ai.security.decision.reason"),
            Some("missing_grant")
        );
        assert_eq!(text(&spans[1], "hcp.step"), Some("grant"));
        let mut intent = refusal.clone();
        intent.insert("decision".into(), json!("allow"));
        intent.insert("would_refuse".into(), json!("rbac"));
        let spans = call_spans(&intent, End::Interrupted);
        assert_eq!(text(&spans[0], "hcp.outcome"), Some("interrupted"));
        assert_eq!(
            text(&spans[1], "gen_ai.security.decision.type"),
            Some("warn")
        );
    }

    #[test]
    fn an_act_of_authority_is_a_span_of_its_own() {
        let m = obj(json!({
            "ts": "2026-01-02T03:04:05.000Z", "id": "a1", "kind": "authority",
            "act": "grant", "actor": "owner", "changed": {"principal": "agent"},
            "prev": "x", "hash": "sha256:44",
        }));
        let span = record_span(&m);
        assert_eq!(span.name, "authority grant");
        assert_eq!(text(&span, "hcp.changed"), Some(r#"{"principal":"agent"}"#));
    }
}
