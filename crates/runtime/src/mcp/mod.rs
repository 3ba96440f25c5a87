//! The MCP face's mapping (RUNTIME §10), without the protocol: which tools a principal is
//! shown ([`catalog`], [`visible`]), a call's arguments from `tools/call`
//! ([`arguments`]), and the tool result of an answer ([`result`]), as JSON the `hcp mcp`
//! server hands its SDK. The person in the loop (elicitation) is [`crate::confirm`].

pub mod catalog;
pub mod pending;
pub mod visible;

pub use catalog::{Catalog, ConfirmBy, Entry, PolicyState};
pub use visible::{SessionViewer, Viewer, visible};

use crate::call::Answer;
use crate::record::early_refusal;
use crate::refusal::Refusal;
use crate::schema::{JsonObject, conforms};
use hcp_model::{ArgValue, Code};
use serde_json::{Value, json};

/// The longest value one argument may hold, in bytes: Linux's limit for one argv element
/// (`MAX_ARG_STRLEN`, 128 KiB with its NUL).
pub const MAX_VALUE_BYTES: usize = 128 * 1024 - 1;

/// The call's arguments as the envelope face takes them: a JSON object of strings,
/// numbers and booleans, each string at most [`MAX_VALUE_BYTES`].
///
/// # Errors
/// The refusal answer (not audited, like a bad envelope): `bad_envelope` for a value of
/// another type, `arg_invalid` for a value too long for argv.
pub fn arguments(args: Option<JsonObject>) -> Result<Vec<(String, ArgValue)>, Box<Answer>> {
    let mut out = Vec::new();
    for (name, v) in args.unwrap_or_default() {
        let value = match v {
            Value::String(s) if s.len() > MAX_VALUE_BYTES => {
                return Err(Box::new(early_refusal(Refusal::new(
                    Code::ArgInvalid,
                    format!(
                        "argument `{name}` is {} bytes; a value may be at most {MAX_VALUE_BYTES} bytes (one argv element)",
                        s.len()
                    ),
                ))));
            }
            Value::String(s) => ArgValue::String(s),
            Value::Number(n) => ArgValue::Number(n),
            Value::Bool(b) => ArgValue::Bool(b),
            other => {
                let kind = match other {
                    Value::Null => "null",
                    Value::Array(_) => "an array",
                    _ => "an object",
                };
                return Err(Box::new(early_refusal(
                    Refusal::new(
                        Code::BadEnvelope,
                        format!(
                            "argument `{name}` is {kind}; a value is a string, a number or a boolean"
                        ),
                    )
                    .hint("the tool's inputSchema lists its arguments"),
                )));
            }
        };
        out.push((name, value));
    }
    Ok(out)
}

/// The `tools/call` result of an answer (a `CallToolResult` as JSON).
///
/// - A refusal: `isError`, its message as text (exactly `confirm required` for the confirm
///   gate), its code, hint and the steps a new pack still needs (`steps`) as a second
///   text, and the refusal object of RUNTIME §5 as `structuredContent`.
/// - A run: the child's stdout as text (stderr as a second text when not empty),
///   `isError` unless it exited 0, the run's facts (exit code, audit id…) in `_meta.hcp`.
///   Its JSON object, when it printed one, is `structuredContent` (MCP's structured
///   content is an object: a JSON array or scalar is text only). With `output_schema`
///   (the tool's `outputSchema`), a successful run's stdout must be a JSON object that
///   fits it; one that does not is answered as an error result saying why, its text
///   following, never as a result that breaks the schema.
pub fn result(a: &Answer, output_schema: Option<&JsonObject>) -> Value {
    let r = &a.result;
    let mut facts = serde_json::to_value(r).unwrap_or(Value::Null);
    if r.exit_code.is_none() {
        let message = r.error.clone().unwrap_or_else(|| "refused".into());
        let mut detail = format!("code: {}", r.code.map_or("refused", Code::as_str));
        if let Some(h) = &r.hint {
            detail.push_str(&format!("\nhint: {h}"));
        }
        // Every step a new pack still needs (`crate::setup`), as `hcp exec` says them.
        for (i, s) in a.facts.setup.iter().enumerate() {
            if i == 0 {
                detail.push_str("\nsteps (all of them, in order):");
            }
            let what = s.command.as_deref().unwrap_or(&s.step);
            detail.push_str(&format!("\n{}. {what} ({})", i + 1, s.code));
        }
        return json!({
            "content": [text(&message), text(&detail)],
            "isError": true,
            "structuredContent": facts,
        });
    }
    let stdout = String::from_utf8_lossy(&a.stdout).into_owned();
    let mut content = vec![text(&stdout)];
    if !a.stderr.is_empty() {
        content.push(text(&String::from_utf8_lossy(&a.stderr)));
    }
    let mut is_error = !r.ok;
    let mut structured = r.data.is_object().then(|| r.data.clone());
    if let (true, Some(schema)) = (r.ok, output_schema) {
        // The schema is an object's: stdout that is no JSON object does not fit either.
        if let Err(why) = conforms(schema, &r.data) {
            is_error = true;
            structured = None;
            content.insert(
                0,
                text(&format!(
                    "the verb ran, but its output does not fit the tool's outputSchema: {why}"
                )),
            );
        }
    }
    if let Value::Object(m) = &mut facts {
        for k in ["stdout", "stderr", "data"] {
            m.remove(k);
        }
    }
    let mut out = json!({
        "content": content,
        "isError": is_error,
        "_meta": { "hcp": facts },
    });
    if let Some(s) = structured {
        out["structuredContent"] = s;
    }
    out
}

fn text(t: &str) -> Value {
    json!({ "type": "text", "text": t })
}

/// `config.json`'s `mcp` key, as `hcp mcp` uses it when it may ask the person: the
/// defaults (nothing approved by elicitation) when the file does not parse — a call is
/// then refused with `bad_config` anyway, once it reaches child preparation.
pub fn config(rt: &crate::Runtime) -> hcp_store::config::McpConfig {
    hcp_store::config::RuntimeConfig::load(rt.home().root())
        .map(|c| c.mcp)
        .unwrap_or_default()
}

/// Over `hcp mcp --http` (RUNTIME §10) a `local` verb runs in the session's `--workdir`,
/// never in the server's own directory: the call of a tool `viewer` may call (its grant
/// and the runtime policy pass, so this refusal keeps the gate's order, step 5 after step
/// 4) whose land is `local`, by a session without a workdir, is refused with
/// `workdir_required` and recorded like any refusal of the pipeline. `None` when the call
/// goes on to the pipeline.
pub fn workdir_required(
    rt: &crate::Runtime,
    entry: &Entry,
    viewer: &Viewer,
    policy: &PolicyState,
    args: &[(String, ArgValue)],
) -> Option<Answer> {
    let Viewer::Session(s) = viewer else {
        return None;
    };
    let local = entry.land == hcp_model::Land::Local;
    if !local || s.has_workdir || visible(entry, viewer, policy).is_err() {
        return None;
    }
    let mut rec = crate::record::Record::start(rt);
    rec.pack_id = Some(entry.pack_id.clone());
    rec.verb_key = Some(entry.verb_key.clone());
    rec.operation = Some(entry.operation);
    rec.land = Some(hcp_model::Land::Local);
    rec.principal = Some(s.principal.clone());
    let pairs: Vec<(&str, &ArgValue)> = args.iter().map(|(k, v)| (k.as_str(), v)).collect();
    if let Ok(d) = rt.state().args_digest(&pairs) {
        rec.args_digest = Some(d);
    }
    rec.facts.transport = Some(hcp_model::facts::Transport::Http);
    let r = Refusal::new(
        Code::WorkdirRequired,
        format!(
            "`{}` runs in `local` land, and over HTTP a `local` verb needs a session started with `--workdir`",
            entry.name
        ),
    )
    .hint("start the agent's session with `hcp session start … --workdir DIR` and give the client that token");
    let entry_record = rec.entry(hcp_store::audit::Decision::Deny, Some(r.code), None);
    let audit_id = rt.state().record(&entry_record).ok().map(|a| a.id);
    Some(rec.refusal_answer(r, audit_id))
}
