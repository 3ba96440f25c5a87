//! `hcp policy check|hash|decide FILE`: the operator's Histos runtime policy on its own
//! (RUNTIME §7, HISTOS-ENGINE §1–§3), to try a policy before putting it in the store.

use crate::error::{CliError, CliResult};
use crate::exit;
use histos::engine::{Args, ResolveError, ResourceResolver};
use histos::{Context, Engine, Map, MemoryLimitStore, Policy, PolicyError, Principal, Value};
use std::borrow::Cow;
use std::io::{Read, Write};
use std::path::PathBuf;

/// The largest decision input read from stdin, in bytes (16 MiB).
pub const MAX_INPUT_BYTES: u64 = 16 * 1024 * 1024;

/// Subcommands of `hcp policy`.
#[derive(Debug, clap::Subcommand)]
pub enum PolicyCommand {
    /// Load FILE strictly (JSON or YAML); exit 0 when valid, 1 with the POLICY code.
    Check {
        /// The policy file (`.json` is JSON, anything else YAML).
        file: PathBuf,
        /// Answer as one JSON object on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Print the policy's `content_hash` (`sha256:…`, HISTOS-ENGINE §3).
    Hash {
        /// The policy file.
        file: PathBuf,
    },
    /// Decide one call read from stdin as `{"principal", "resource"?, "call": {"tool",
    /// "args"}}`; print `{"effect", "rule", "field"?, "bound_args"?}`.
    Decide {
        /// The policy file.
        file: PathBuf,
    },
}

fn load(file: &std::path::Path) -> Result<Policy, CliError> {
    Policy::load_path(file).map_err(|e| policy_error(file, &e))
}

fn policy_error(file: &std::path::Path, e: &PolicyError) -> CliError {
    let mut msg = format!("policy `{}` does not load: {}", file.display(), e.message);
    if let Some(l) = &e.location {
        msg.push_str(&format!(" (at {l})"));
    }
    CliError::new(hcp_runtime::refusal::code_of(e.code.as_str()), msg)
}

/// Runs `hcp policy …`.
pub fn run(c: PolicyCommand) -> CliResult {
    let mut out = std::io::stdout().lock();
    match c {
        PolicyCommand::Check { file, json } => match Policy::load_path(&file) {
            Ok(p) => {
                if json {
                    let v = serde_json::json!({
                        "ok": true, "file": file, "content_hash": p.content_hash(),
                        "tools": p.tools.len(), "roles": p.roles.len(),
                    });
                    let _ = writeln!(out, "{v}");
                } else {
                    let _ = writeln!(
                        out,
                        "policy `{}` is valid: {} tools, {} roles, {}",
                        file.display(),
                        p.tools.len(),
                        p.roles.len(),
                        p.content_hash()
                    );
                }
                Ok(exit::OK)
            }
            Err(e) if json => {
                let v = serde_json::json!({
                    "ok": false, "file": file, "code": e.code.as_str(),
                    "message": e.message, "location": e.location,
                });
                let _ = writeln!(out, "{v}");
                Ok(exit::REFUSED)
            }
            Err(e) => Err(policy_error(&file, &e)),
        },
        PolicyCommand::Hash { file } => {
            let p = load(&file)?;
            let _ = writeln!(out, "{}", p.content_hash());
            Ok(exit::OK)
        }
        PolicyCommand::Decide { file } => {
            let p = load(&file)?;
            let input = read_input()?;
            let d = decide(&p, &input)?;
            let _ = writeln!(out, "{d}");
            Ok(exit::OK)
        }
    }
}

fn bad_input(message: impl Into<String>) -> CliError {
    CliError::new(hcp_model::Code::BadInput, message)
        .hint("stdin is {\"principal\": {\"role\", \"identity\"?, \"attributes\"?, \"can_view\"?}, \"resource\"?: {…}, \"call\": {\"tool\", \"args\"}}")
}

fn read_input() -> Result<Map, CliError> {
    let mut buf = Vec::new();
    std::io::stdin()
        .lock()
        .take(MAX_INPUT_BYTES + 1)
        .read_to_end(&mut buf)
        .map_err(|e| bad_input(format!("cannot read stdin: {e}")))?;
    if buf.len() as u64 > MAX_INPUT_BYTES {
        return Err(bad_input(format!(
            "the input is larger than {MAX_INPUT_BYTES} bytes"
        )));
    }
    let text = String::from_utf8(buf).map_err(|_| bad_input("the input is not UTF-8"))?;
    // The engine's own strict JSON reader: repeated keys are refused.
    let v = histos::json::parse(&text)
        .map_err(|e| bad_input(format!("the input is not a JSON object: {}", e.message)))?;
    let Value::Map(m) = v else {
        return Err(bad_input("the input is not a JSON object"));
    };
    if let Some(k) = m
        .keys()
        .find(|k| !matches!(k.as_str(), "principal" | "resource" | "call"))
    {
        return Err(bad_input(format!("unknown key `{k}`")));
    }
    Ok(m)
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

fn strings(v: Option<&Value>, what: &str) -> Result<Vec<String>, CliError> {
    match v {
        None => Ok(Vec::new()),
        Some(Value::List(l)) => l
            .iter()
            .map(|x| {
                x.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| bad_input(format!("`{what}` holds a non-string")))
            })
            .collect(),
        Some(_) => Err(bad_input(format!("`{what}` must be a list of strings"))),
    }
}

fn principal_of(v: &Value) -> Result<Principal, CliError> {
    let Value::Map(m) = v else {
        return Err(bad_input("`principal` must be an object"));
    };
    if let Some(k) = m
        .keys()
        .find(|k| !matches!(k.as_str(), "role" | "identity" | "attributes" | "can_view"))
    {
        return Err(bad_input(format!("unknown key `principal.{k}`")));
    }
    let text = |k: &str| -> Result<Option<String>, CliError> {
        match m.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Str(s)) => Ok(Some(s.clone())),
            Some(_) => Err(bad_input(format!("`principal.{k}` must be a string"))),
        }
    };
    let attributes = match m.get("attributes") {
        None => Map::new(),
        Some(Value::Map(a)) => a.clone(),
        Some(_) => return Err(bad_input("`principal.attributes` must be an object")),
    };
    Ok(Principal {
        role: text("role")?.unwrap_or_default(),
        identity: text("identity")?,
        attributes,
        can_view: strings(m.get("can_view"), "principal.can_view")?,
    })
}

/// Decides the call of `input` under `policy` as the conformance corpus does: the
/// resource (when given) is what the resolver answers; limits are counted in memory.
fn decide(policy: &Policy, input: &Map) -> Result<serde_json::Value, CliError> {
    // `"principal": null` is the corpus's way to say no principal is bound (no_principal).
    let principal = match input.get("principal") {
        None | Some(Value::Null) => None,
        Some(v) => Some(principal_of(v)?),
    };
    let resolver = match input.get("resource") {
        None | Some(Value::Null) => None,
        Some(Value::Map(m)) => Some(Fixed(m.clone())),
        Some(_) => return Err(bad_input("`resource` must be an object")),
    };
    let Some(Value::Map(call)) = input.get("call") else {
        return Err(bad_input("`call` must be an object with `tool` and `args`"));
    };
    if let Some(k) = call.keys().find(|k| !matches!(k.as_str(), "tool" | "args")) {
        return Err(bad_input(format!("unknown key `call.{k}`")));
    }
    let Some(Value::Str(tool)) = call.get("tool") else {
        return Err(bad_input("`call.tool` must be a string"));
    };
    let args = match call.get("args") {
        None => Map::new(),
        Some(Value::Map(a)) => a.clone(),
        Some(_) => return Err(bad_input("`call.args` must be an object")),
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
