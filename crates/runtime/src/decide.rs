//! `hcp policy decide`: one call decided under a Histos policy as the conformance corpus
//! decides it (HISTOS-ENGINE §1), from the strict JSON input the operator gives.

use histos::engine::{Args, ResolveError, ResourceResolver};
use histos::{Context, Engine, Map, MemoryLimitStore, Policy, Principal, Value};
use std::borrow::Cow;

/// Why `hcp policy decide`'s input is refused: the message.
fn bad(message: impl Into<String>) -> String {
    message.into()
}

struct Fixed(Map);

impl ResourceResolver for Fixed {
    fn resolve<'r>(
        &'r self,
        _tool: &str,
        _args: &Args<'_>,
    ) -> Result<Option<Cow<'r, Map>>, ResolveError> {
        Ok(Some(Cow::Borrowed(&self.0)))
    }
}

fn strings(v: Option<&Value>, what: &str) -> Result<Vec<String>, String> {
    match v {
        None => Ok(Vec::new()),
        Some(Value::List(l)) => l
            .iter()
            .map(|x| {
                x.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| bad(format!("`{what}` holds a non-string")))
            })
            .collect(),
        Some(_) => Err(bad(format!("`{what}` must be a list of strings"))),
    }
}

fn principal_of(v: &Value) -> Result<Principal, String> {
    let Value::Map(m) = v else {
        return Err(bad("`principal` must be an object"));
    };
    if let Some(k) = m
        .keys()
        .find(|k| !matches!(k.as_str(), "role" | "identity" | "attributes" | "can_view"))
    {
        return Err(bad(format!("unknown key `principal.{k}`")));
    }
    let text = |k: &str| -> Result<Option<String>, String> {
        match m.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Str(s)) => Ok(Some(s.clone())),
            Some(_) => Err(bad(format!("`principal.{k}` must be a string"))),
        }
    };
    let attributes = match m.get("attributes") {
        None => Map::new(),
        Some(Value::Map(a)) => a.clone(),
        Some(_) => return Err(bad("`principal.attributes` must be an object")),
    };
    Ok(Principal {
        role: text("role")?.unwrap_or_default(),
        identity: text("identity")?,
        attributes,
        can_view: strings(m.get("can_view"), "principal.can_view")?,
    })
}

/// Decides the call of `input` (`{"principal", "resource"?, "call": {"tool", "args"}}`,
/// strict) under `policy` as the conformance corpus does (`hcp policy decide`): the
/// resource (when given) is what the resolver answers; limits are counted in memory.
/// Answers `{"effect", "rule", "field"?, "bound_args"?}`.
///
/// # Errors
/// A message naming what in `input` is not a call.
pub fn decide(policy: &Policy, input: &Map) -> Result<serde_json::Value, String> {
    // `"principal": null` is the corpus's way to say no principal is bound (no_principal).
    let principal = match input.get("principal") {
        None | Some(Value::Null) => None,
        Some(v) => Some(principal_of(v)?),
    };
    let resolver = match input.get("resource") {
        None | Some(Value::Null) => None,
        Some(Value::Map(m)) => Some(Fixed(m.clone())),
        Some(_) => return Err(bad("`resource` must be an object")),
    };
    let Some(Value::Map(call)) = input.get("call") else {
        return Err(bad("`call` must be an object with `tool` and `args`"));
    };
    if let Some(k) = call.keys().find(|k| !matches!(k.as_str(), "tool" | "args")) {
        return Err(bad(format!("unknown key `call.{k}`")));
    }
    let Some(Value::Str(tool)) = call.get("tool") else {
        return Err(bad("`call.tool` must be a string"));
    };
    let args = match call.get("args") {
        None => Map::new(),
        Some(Value::Map(a)) => a.clone(),
        Some(_) => return Err(bad("`call.args` must be an object")),
    };
    let call = histos::Call {
        tool: tool.clone(),
        args,
    };
    let store = MemoryLimitStore::default();
    let ctx = Context {
        limits: Some(&store),
        consume_limits: true,
        ..Default::default()
    };
    let d = Engine::pre(
        policy,
        principal.as_ref(),
        resolver.as_ref().map(|r| r as &dyn ResourceResolver),
        &call,
        &ctx,
    );
    let mut out = serde_json::Map::new();
    out.insert("effect".into(), d.effect.as_str().into());
    out.insert("rule".into(), d.rule.as_str().into());
    if let Some(f) = &d.field {
        out.insert("field".into(), f.to_string().into());
    }
    if !d.bound_args.is_empty() {
        let b: serde_json::Map<String, serde_json::Value> = d
            .bound_args
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::Value::from(v)))
            .collect();
        out.insert("bound_args".into(), b.into());
    }
    Ok(serde_json::Value::Object(out))
}
