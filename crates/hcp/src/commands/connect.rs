//! `hcp connect PACK` and `hcp disconnect PACK` (RUNTIME §8): establish and remove a
//! `user` pack's binding for the calling principal and the pack's binding family.
//!
//! Connect runs the pack's connect verb through the one exec path
//! ([`engine::execute_connect`]: the gate with `verb.exec.write` and `pack.connect`, the confirm
//! gate when its policy asks, the audit), then reads the credential from the verb's
//! stdout: exactly one JSON object of at most [`MAX_CREDENTIAL_BYTES`] bytes. Anything
//! else is refused with `connect_output_invalid` and nothing is stored. The credential is
//! never printed: the answer leaves out the verb's stdout, redacts its string values from
//! the verb's stderr, and no message quotes it (DESIGN.md, "Bindings and stimuli").

use super::exec::engine::{self, Call, CallArgs, ExecEnv};
use super::exec::{exec_env, face};
use crate::error::{CliError, CliResult};
use crate::exit;
use hcp_gate::Face;
use hcp_model::{BindingMode, ExecResult};
use hcp_store::audit::{self, AuditLog, Entry};
use hcp_store::binding::{self, MAX_CREDENTIAL_BYTES};
use hcp_store::pack::{self, InstalledPack};
use hcp_store::session::{self, Session};
use hcp_store::{Home, StoreLock, grant};
use jiff::Timestamp;
use serde_json::{Map, Value, json};
use std::io::Write;

/// Arguments of `hcp connect`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Runs the pack's connect verb through the gate and stores the credential it \
                  prints (one JSON object) for the calling principal and the pack's binding \
                  family. `--confirm` when the verb's policy asks for it."
)]
pub struct Args {
    /// The pack id.
    pack: String,
    /// Answer with a JSON object on stdout (never holding the credential).
    #[arg(long)]
    json: bool,
    /// The connect verb's `--NAME VALUE` arguments, `--confirm`, `--timeout SECS`.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGS"
    )]
    words: Vec<String>,
}

/// Arguments of `hcp disconnect`.
#[derive(Debug, clap::Args)]
pub struct DisconnectArgs {
    /// The pack id.
    pack: String,
    /// Answer with a JSON object on stdout.
    #[arg(long)]
    json: bool,
}

/// Runs `hcp connect`.
pub fn run(a: Args) -> CliResult {
    let env = exec_env()?;
    let pack = connectable(&env.home, &a.pack)?;
    let verb_key = pack
        .manifest
        .connect_verb()
        .map(str::to_owned)
        .unwrap_or_default();
    let mut words = vec![verb_key.clone()];
    words.extend(a.words.iter().cloned());
    let words = face::parse(&words, a.json, None).map_err(|e| {
        CliError::new("usage", e.0, exit::USAGE)
            .hint("hcp connect PACK [--NAME VALUE…] [--confirm] [--json] [--timeout SECS]")
    })?;
    let json = words.json;
    let digest = args_digest(&pack, &verb_key, &words);
    let call = Call {
        pack_id: Some(pack.id.to_string()),
        target: verb_key.clone(),
        timeout: words.timeout.map(std::time::Duration::from_secs_f64),
        args: CallArgs::Words(words),
        face: Face::Cli,
    };
    let (answer, principal) = engine::execute_connect(&env, call);
    let mut result = answer.result;
    // The verb's stdout is the credential: it never leaves this function.
    let stdout = answer.stdout;
    result.stdout = None;
    result.data = Value::Null;
    let Some(code) = result.exit_code else {
        // Refused before the verb ran: the engine's answer as it is.
        return Ok(answer_out(&result, answer.exit, json, &[]));
    };
    let Some(principal) = principal else {
        return Err(CliError::new(
            "store_damaged",
            "the connect verb ran without a principal",
            exit::EX_IOERR,
        ));
    };
    if code != 0 || result.code.is_some() {
        result.ok = false;
        if result.code.is_none() {
            result.code = Some("connect_failed".into());
            result.error = Some(format!(
                "the connect verb `{verb_key}` of `{}` exited with status {code}; nothing was stored",
                pack.id
            ));
        }
        result.hint =
            Some("see the verb's stderr; the pack's skill says how its connect works".to_string());
        let refusal = result.code.clone().unwrap_or_default();
        let id = audit_binding(
            &env.home,
            &principal,
            &pack,
            &verb_key,
            &digest,
            Some(&refusal),
            "refused",
            result.audit_id.as_deref(),
        );
        result.extra.insert("binding_audit_id".into(), json!(id));
        return Ok(answer_out(&result, answer.exit, json, &answer.stderr));
    }
    let now = Timestamp::now();
    let secret = match credential(&stdout, result.truncated, now) {
        Ok(s) => s,
        Err(why) => {
            let id = audit_binding(
                &env.home,
                &principal,
                &pack,
                &verb_key,
                &digest,
                Some("connect_output_invalid"),
                "refused",
                result.audit_id.as_deref(),
            );
            result.ok = false;
            result.code = Some("connect_output_invalid".into());
            result.error = Some(format!(
                "the connect verb `{verb_key}` of `{}` did not print a credential: {why}; nothing was stored",
                pack.id
            ));
            result.hint = Some(format!(
                "a connect verb prints exactly one JSON object of at most {MAX_CREDENTIAL_BYTES} bytes on stdout"
            ));
            result.extra.insert("binding_audit_id".into(), json!(id));
            // Its stderr may quote what it printed: not shown.
            result.stderr = None;
            return Ok(answer_out(&result, exit::EX_DATAERR, json, &[]));
        }
    };
    let family = pack.manifest.family().to_owned();
    let redacted = redact(&answer.stderr, &secret);
    result.stderr = Some(String::from_utf8_lossy(&redacted).into_owned());
    let stored = StoreLock::acquire(&env.home)
        .and_then(|_lock| binding::save(&env.home, &principal, &family, secret, now))
        .map_err(|e| super::install::store_error(e).hint("nothing was stored"))?;
    let id = audit_binding(
        &env.home,
        &principal,
        &pack,
        &verb_key,
        &digest,
        None,
        "stored",
        result.audit_id.as_deref(),
    );
    result.extra.insert(
        "binding".into(),
        json!({
            "principal": principal,
            "family": family,
            "expires_at": stored.expires_at.map(|t| t.to_string()),
        }),
    );
    result.extra.insert("binding_audit_id".into(), json!(id));
    if json {
        print_json(&result);
    } else {
        let _ = std::io::stderr().lock().write_all(&redacted);
        let shared = if family == pack.id.as_str() {
            String::new()
        } else {
            format!(" (family `{family}`, shared by its packs)")
        };
        out!("connected `{}` as `{principal}`{shared}", pack.id);
    }
    Ok(exit::OK)
}

/// Runs `hcp disconnect`: removes the calling principal's credential for the pack's
/// family. A session needs `pack.connect` on the pack.
pub fn run_disconnect(a: DisconnectArgs) -> CliResult {
    let env = exec_env()?;
    let pack = connectable(&env.home, &a.pack)?;
    let verb_key = pack.manifest.connect_verb().unwrap_or_default().to_owned();
    let digest = audit::args_digest(std::iter::empty());
    let session = resolve_principal(&env).inspect_err(|e| {
        audit_refusal(&env.home, "unknown", &pack, &verb_key, &e.code);
    })?;
    let principal = session
        .as_ref()
        .map_or("owner", |s| s.principal.as_str())
        .to_owned();
    if let Some(s) = &session
        && let Err(e) = require_capability(&env.home, s, &pack, "pack.connect")
    {
        audit_refusal(&env.home, &principal, &pack, &verb_key, &e.code);
        return Err(e);
    }
    let family = pack.manifest.family().to_owned();
    let removed = StoreLock::acquire(&env.home)
        .and_then(|_lock| binding::remove(&env.home, &principal, &family))
        .map_err(super::install::store_error)?;
    let id = audit_binding(
        &env.home,
        &principal,
        &pack,
        &verb_key,
        &digest,
        None,
        if removed { "removed" } else { "absent" },
        None,
    );
    if a.json {
        print_json_value(&json!({
            "ok": true,
            "pack_id": pack.id.as_str(),
            "principal": principal,
            "family": family,
            "removed": removed,
            "audit_id": id,
        }));
    } else if removed {
        out!("disconnected `{principal}` from `{family}`");
    } else {
        out!("`{principal}` had no binding for `{family}`");
    }
    Ok(exit::OK)
}

/// Loads pack `id` and checks it has a `user` binding and a connect verb.
fn connectable(home: &Home, id: &str) -> Result<InstalledPack, CliError> {
    let pack = pack::load(home, id).map_err(super::install::pack_error)?;
    if pack.manifest.binding.mode != BindingMode::User {
        return Err(CliError::new(
            "not_connectable",
            format!(
                "pack `{}` has binding mode `{}`: there is no credential to connect",
                pack.id,
                mode_name(pack.manifest.binding.mode)
            ),
            exit::EX_NOINPUT,
        ));
    }
    if pack
        .manifest
        .connect_verb()
        .is_none_or(|v| !pack.manifest.verbs.contains_key(v))
    {
        return Err(CliError::new(
            "not_connectable",
            format!("pack `{}` has no connect verb", pack.id),
            exit::EX_NOINPUT,
        )
        .hint("a connect verb is named by `binding.connect`, or keyed `connect` or `….connect`"));
    }
    Ok(pack)
}

fn mode_name(m: BindingMode) -> &'static str {
    match m {
        BindingMode::Public => "public",
        BindingMode::User => "user",
        BindingMode::Local => "local",
        BindingMode::Mothership => "mothership",
    }
}

/// The credential in the connect verb's stdout: one JSON object (surrounding whitespace
/// allowed), at most [`MAX_CREDENTIAL_BYTES`], not empty, whose string fields the adapter
/// can turn into variables, with a valid future `expires_at` when it has one. The reason
/// never quotes the output.
fn credential(
    stdout: &[u8],
    truncated: bool,
    now: Timestamp,
) -> Result<Map<String, Value>, String> {
    if truncated || stdout.len() > MAX_CREDENTIAL_BYTES {
        return Err(format!(
            "its output is larger than {MAX_CREDENTIAL_BYTES} bytes"
        ));
    }
    if stdout.iter().all(u8::is_ascii_whitespace) {
        return Err("its output is empty".into());
    }
    let Ok(value) = serde_json::from_slice::<Value>(stdout) else {
        return Err("its output is not one JSON value".into());
    };
    let Value::Object(map) = value else {
        return Err("its output is JSON but not an object".into());
    };
    if !map.values().any(Value::is_string) {
        return Err("the object has no string field to pass on".into());
    }
    if let Err(e) = hcp_adapter::ChildEnv::new().binding(&map) {
        return Err(format!("its fields cannot become variables: {}", e.code()));
    }
    match map.get("expires_at") {
        None => {}
        Some(Value::String(s)) => match s.parse::<Timestamp>() {
            Ok(t) if t > now => {}
            Ok(_) => return Err("its `expires_at` has already passed".into()),
            Err(_) => return Err("its `expires_at` is not an RFC 3339 time".into()),
        },
        Some(_) => return Err("its `expires_at` is not an RFC 3339 time".into()),
    }
    Ok(map)
}

/// `bytes` with every string value of the credential (of 4 bytes or more) replaced by
/// `[redacted]`.
fn redact(bytes: &[u8], secret: &Map<String, Value>) -> Vec<u8> {
    let mut text = String::from_utf8_lossy(bytes).into_owned();
    for v in secret.values() {
        if let Value::String(s) = v
            && s.len() >= 4
        {
            text = text.replace(s.as_str(), "[redacted]");
        }
    }
    text.into_bytes()
}

fn args_digest(pack: &InstalledPack, verb_key: &str, words: &face::Words) -> String {
    let takes: Vec<String> = pack
        .manifest
        .plan_verb(verb_key)
        .map(|p| {
            hcp_model::manifest::arguments(&p)
                .into_iter()
                .map(|(n, _)| n)
                .collect()
        })
        .unwrap_or_default();
    let args = words.assign(&takes);
    audit::args_digest(args.iter().map(|(k, v)| (k.as_str(), v)))
}

/// The session of `HCP_SESSION`, `None` for the owner; a present but bad token is
/// `bad_session` (77), never the owner (RUNTIME §4).
///
/// # Errors
/// `bad_session`, or the store's code.
pub(crate) fn resolve_principal(env: &ExecEnv) -> Result<Option<Session>, CliError> {
    let Some(tok) = &env.session_token else {
        return Ok(None);
    };
    match session::resolve(&env.home, &tok.to_string_lossy(), Timestamp::now()) {
        Ok(s) => Ok(Some(s)),
        Err(session::SessionError::Bad(b)) => {
            Err(
                CliError::new("bad_session", format!("bad session: {b}"), exit::EX_NOPERM)
                    .hint("the owner starts a new session with `hcp session start`"),
            )
        }
        Err(e) => Err(CliError::new(e.code(), e.to_string(), exit::EX_IOERR)),
    }
}

/// Checks that session `s` holds `cap` on `pack`, granted after the pack's content last
/// changed (the rug-pull guard of RUNTIME §3).
///
/// # Errors
/// `missing_grant` (77), or the store's code.
pub(crate) fn require_capability(
    home: &Home,
    s: &Session,
    pack: &InstalledPack,
    cap: &str,
) -> Result<(), CliError> {
    let all = grant::Grants::load(home).map_err(super::install::store_error)?;
    let latest = all
        .held(&s.principal, &pack.id)
        .into_iter()
        .filter(|h| h.capability.to_string() == cap)
        .map(|h| h.granted_at)
        .max();
    let changed = pack
        .record
        .content_changed_at
        .as_deref()
        .and_then(|t| t.parse::<Timestamp>().ok());
    let who = s.principal.as_str();
    match latest {
        None => Err(CliError::new(
            "missing_grant",
            format!("principal `{who}` lacks `{cap}` on pack `{}`", pack.id),
            exit::EX_NOPERM,
        )
        .hint(format!("the owner runs `hcp grant {who} {} {cap}`", pack.id))),
        Some(at) if changed.is_some_and(|c| at < c) => Err(CliError::new(
            "missing_grant",
            format!(
                "the grant of `{cap}` to `{who}` is suspended: pack `{}` changed since it was granted",
                pack.id
            ),
            exit::EX_NOPERM,
        )
        .hint(format!(
            "the owner reviews the pack and runs `hcp grant {who} {} {cap}` again",
            pack.id
        ))),
        Some(_) => Ok(()),
    }
}

/// Appends the audit record of a binding decision: stored, refused, removed, absent. It
/// carries the usual digest of the arguments, never the credential. Returns its id.
#[allow(clippy::too_many_arguments)]
fn audit_binding(
    home: &Home,
    principal: &str,
    pack: &InstalledPack,
    verb_key: &str,
    args_digest: &str,
    code: Option<&str>,
    outcome: &str,
    run: Option<&str>,
) -> Option<String> {
    let entry = verb_entry(pack, verb_key, principal, code, args_digest, |extra| {
        extra.insert("binding".into(), json!(outcome));
        extra.insert("family".into(), json!(pack.manifest.family()));
        if let Some(r) = run {
            extra.insert("run_audit_id".into(), json!(r));
        }
    });
    AuditLog::new(home).append(&entry).ok().map(|a| a.id)
}

fn audit_refusal(home: &Home, principal: &str, pack: &InstalledPack, verb_key: &str, code: &str) {
    let digest = audit::args_digest(std::iter::empty());
    let entry = verb_entry(pack, verb_key, principal, Some(code), &digest, |extra| {
        extra.insert("binding".into(), json!("refused"));
    });
    let _ = AuditLog::new(home).append(&entry);
}

fn verb_entry(
    pack: &InstalledPack,
    verb_key: &str,
    principal: &str,
    code: Option<&str>,
    args_digest: &str,
    extra: impl FnOnce(&mut std::collections::BTreeMap<String, Value>),
) -> Entry {
    let policy = pack.policy.verbs.get(verb_key);
    let mut e = Entry {
        principal: principal.to_owned(),
        project: None,
        pack_id: Some(pack.id.to_string()),
        verb_key: verb_key.to_owned(),
        operation: policy.map(|p| p.operation),
        land: policy.map(|p| p.privacy.land),
        decision: if code.is_some() {
            audit::Decision::Deny
        } else {
            audit::Decision::Allow
        },
        code: code.map(str::to_owned),
        args_digest: args_digest.to_owned(),
        exit_code: None,
        duration_ms: 0,
        extra: Default::default(),
    };
    extra(&mut e.extra);
    e
}

/// Prints a connect answer (JSON on stdout, or the verb's stderr and the error lines) and
/// returns the exit status. `stderr` is what to show of the verb's stderr in text mode.
fn answer_out(result: &ExecResult, status: u8, json: bool, stderr: &[u8]) -> u8 {
    if json {
        print_json(result);
        return status;
    }
    let _ = std::io::stderr().lock().write_all(stderr);
    if let (Some(error), Some(code)) = (&result.error, &result.code) {
        let mut e = CliError::new(code.clone(), error.clone(), status);
        if let Some(h) = &result.hint {
            e = e.hint(h.clone());
        }
        crate::error::render(&e);
    }
    status
}

fn print_json(result: &ExecResult) {
    if let Ok(v) = serde_json::to_value(result) {
        print_json_value(&v);
    }
}

fn print_json_value(v: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{v}");
    let _ = out.flush();
}
