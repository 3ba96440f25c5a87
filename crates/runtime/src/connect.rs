//! `hcp connect PACK` and `hcp disconnect PACK` (RUNTIME §8): establish and remove a
//! `user` pack's binding for the calling principal and the pack's binding family.
//!
//! Connect runs the pack's connect verb through the pipeline ([`pipeline::run`] of a
//! [`pipeline::Binding`] in [`Mode::Connect`]: the gate with `verb.exec.write` and
//! `pack.connect`, the confirm gate when its policy asks, the runtime policy, the audit),
//! then reads the credential from the verb's stdout: exactly one JSON object of at most
//! [`MAX_CREDENTIAL_BYTES`] bytes. Anything else is refused with `connect_output_invalid`
//! and nothing is stored. The credential is never shown: the answer leaves out the verb's
//! stdout, redacts the credential from its stderr (the one redaction, [`crate::redact`]:
//! plain and JSON-escaped forms), and no message quotes it (DESIGN.md, "Bindings and
//! stimuli"). Disconnect is the pipeline's [`Mode::Disconnect`].

use crate::Runtime;
use crate::call::{Caller, Words};
use crate::pipeline::{self, Binding, Mode, Subject};
use crate::redact::Redactor;
use crate::refusal::Refusal;
use crate::step::bind::{self, Of};
use hcp_model::facts::{BindingOutcome, BindingResult, Stored};
use hcp_model::{BindingMode, CallFacts, Code, ExecResult, exit};
use hcp_store::StoreLock;
use hcp_store::binding::{self, MAX_CREDENTIAL_BYTES};
use hcp_store::pack::{self, InstalledPack};
use jiff::Timestamp;
use serde_json::{Map, Value};
use std::time::Duration;

/// What `hcp connect` answered.
#[derive(Debug)]
pub struct Connected {
    /// The result object (never the verb's stdout or `data`).
    pub result: ExecResult,
    /// The exit status.
    pub exit: u8,
    /// What to show of the verb's stderr in text mode (redacted).
    pub stderr: Vec<u8>,
    /// Who was connected to which family, when the credential was stored.
    pub stored: Option<(String, String)>,
}

/// Loads pack `id` and checks that it has a `user` binding and a connect verb. A state
/// that cannot be used refuses first (RUNTIME §9), as for every call that needs state.
///
/// # Errors
/// `state_unavailable` (74), the pack's (`not_installed` …), `not_connectable` (66).
pub fn connectable(rt: &Runtime, id: &str) -> Result<InstalledPack, Refusal> {
    crate::backend::ready(rt).map_err(|e| Refusal::store(&e))?;
    let pack = pack::load(rt.home(), id).map_err(|e| match e {
        pack::PackError::NotInstalled { .. } => crate::target::not_installed(rt.home(), id),
        e => crate::refusal::pack_refusal(&e),
    })?;
    if pack.manifest.binding.mode != BindingMode::User {
        return Err(Refusal::new(
            Code::NotConnectable,
            format!(
                "pack `{}` has binding mode `{}`: there is no credential to connect",
                pack.id,
                mode_name(pack.manifest.binding.mode)
            ),
        )
        .hint(format!(
            "its calls need no connect: run them with `hcp exec {}.VERB` (`hcp show {}` lists its verbs)",
            pack.id, pack.id
        )));
    }
    if pack
        .manifest
        .connect_verb()
        .is_none_or(|v| !pack.manifest.verbs.contains_key(v))
    {
        return Err(Refusal::new(
            Code::NotConnectable,
            format!("pack `{}` has no connect verb", pack.id),
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

/// Runs `hcp connect` for `pack` (from [`connectable`]) with the connect verb's `words`.
///
/// # Errors
/// The store's when the credential cannot be saved (`store_io` …, "nothing was stored").
pub fn connect(
    rt: &Runtime,
    caller: &Caller,
    pack: &InstalledPack,
    words: Words,
    timeout: Option<Duration>,
) -> Result<Connected, Refusal> {
    let verb_key = pack
        .manifest
        .connect_verb()
        .map(str::to_owned)
        .unwrap_or_default();
    let digest = args_digest(rt, pack, &verb_key, &words)?;
    let binding = Binding {
        pack,
        words,
        timeout,
    };
    let answer = pipeline::run(rt, caller, Subject::Binding(binding), Mode::Connect);
    let mut result = answer.result;
    // The verb's stdout is the credential: it never leaves this function.
    let stdout = answer.stdout;
    result.stdout = None;
    result.data = Value::Null;
    let Some(status) = result.exit_code else {
        // Refused before the verb ran: the pipeline's answer as it is.
        return Ok(Connected {
            result,
            exit: answer.exit,
            stderr: Vec::new(),
            stored: None,
        });
    };
    let Some(principal) = answer.principal else {
        return Err(Refusal::new(
            Code::StoreDamaged,
            "the connect verb ran without a principal",
        ));
    };
    let of = Of {
        pack,
        verb_key: &verb_key,
        principal: &principal,
        args_digest: &digest,
    };
    let ran = Ran {
        result,
        exit: answer.exit,
        stderr: answer.stderr,
    };
    if status != 0 || ran.result.code.is_some() {
        return Ok(failed(rt, &of, ran, status));
    }
    let now = Timestamp::now();
    match credential(&stdout, ran.result.truncated, now) {
        Ok(secret) => store(rt, &of, ran, secret, now),
        Err(why) => Ok(invalid(rt, &of, ran, &why)),
    }
}

/// What the connect verb's run answered, its stdout taken out.
struct Ran {
    result: ExecResult,
    exit: u8,
    stderr: Vec<u8>,
}

/// The connect verb exited non-zero (or its run ended with a code): nothing is stored.
fn failed(rt: &Runtime, of: &Of<'_>, mut ran: Ran, status: i32) -> Connected {
    let result = &mut ran.result;
    result.ok = false;
    if result.code.is_none() {
        result.code = Some(Code::ConnectFailed);
        result.error = Some(format!(
            "the connect verb `{}` of `{}` exited with status {status}; nothing was stored",
            of.verb_key, of.pack.id
        ));
    }
    result.hint =
        Some("see the verb's stderr; the pack's skill says how its connect works".to_string());
    let run = result.audit_id.as_deref();
    let id = bind::record(rt, of, result.code, BindingOutcome::Refused, run);
    connected(result, id, None);
    Connected {
        result: ran.result,
        exit: ran.exit,
        stderr: ran.stderr,
        stored: None,
    }
}

/// The connect verb printed no credential (`why`, never quoting it): nothing is stored,
/// and its stderr, which may quote what it printed, is not shown.
fn invalid(rt: &Runtime, of: &Of<'_>, mut ran: Ran, why: &str) -> Connected {
    let result = &mut ran.result;
    let code = Code::ConnectOutputInvalid;
    let id = bind::record(
        rt,
        of,
        Some(code),
        BindingOutcome::Refused,
        result.audit_id.as_deref(),
    );
    result.ok = false;
    result.code = Some(code);
    result.error = Some(format!(
        "the connect verb `{}` of `{}` did not print a credential: {why}; nothing was stored",
        of.verb_key, of.pack.id
    ));
    result.hint = Some(format!(
        "a connect verb prints exactly one JSON object of at most {MAX_CREDENTIAL_BYTES} bytes on stdout"
    ));
    connected(result, id, None);
    result.stderr = None;
    Connected {
        result: ran.result,
        exit: code.exit_status(),
        stderr: Vec::new(),
        stored: None,
    }
}

/// Stores the credential for the principal and the pack's family, and records it.
fn store(
    rt: &Runtime,
    of: &Of<'_>,
    mut ran: Ran,
    secret: Map<String, Value>,
    now: Timestamp,
) -> Result<Connected, Refusal> {
    let family = of.pack.manifest.family().to_owned();
    let redacted = Redactor::new(&secret).bytes(&ran.stderr);
    let result = &mut ran.result;
    result.stderr = Some(String::from_utf8_lossy(&redacted).into_owned());
    let principal = of.principal.to_owned();
    let lock =
        StoreLock::acquire(rt.home()).map_err(|e| Refusal::store(&e).hint("nothing was stored"))?;
    // An act of authority (RUNTIME §6): recorded before the credential is stored.
    let made = bind::authority(rt, &principal, "connect", of.pack, &family)?;
    let saved = made
        .settle(
            binding::save(rt.home(), &lock, &principal, &family, secret, now),
            hcp_store::StoreError::code,
        )
        .map_err(|e| Refusal::store(&e).hint("nothing was stored"))?;
    drop(lock);
    let id = bind::record(
        rt,
        of,
        None,
        BindingOutcome::Stored,
        result.audit_id.as_deref(),
    );
    let stored = Stored {
        principal: principal.clone(),
        family: family.clone(),
        expires_at: saved.expires_at.map(|t| t.to_string()),
    };
    connected(result, id, Some(stored));
    Ok(Connected {
        result: ran.result,
        exit: exit::OK,
        stderr: redacted,
        stored: Some((principal, family)),
    })
}

/// What `hcp disconnect` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disconnected {
    /// The principal (`owner` without a session).
    pub principal: String,
    /// The binding family.
    pub family: String,
    /// Whether a credential was removed.
    pub removed: bool,
    /// The audit record's id.
    pub audit_id: Option<String>,
}

/// Runs `hcp disconnect` for `pack` (from [`connectable`]): removes the calling
/// principal's credential for the pack's family. A session needs `pack.connect` on the
/// pack (the one grant check, with the rug-pull guard); a damaged install record is
/// refused (`store_damaged`), as exec refuses it. Audited either way.
///
/// # Errors
/// `bad_session`, `missing_grant`, `store_damaged`, or the store's.
pub fn disconnect(
    rt: &Runtime,
    caller: &Caller,
    pack: &InstalledPack,
) -> Result<Disconnected, Refusal> {
    let binding = Binding {
        pack,
        words: Words::default(),
        timeout: None,
    };
    let answer = pipeline::run(rt, caller, Subject::Binding(binding), Mode::Disconnect);
    let r = answer.result;
    if let Some(code) = r.code {
        return Err(Refusal {
            code,
            message: r.error.unwrap_or_default(),
            hint: r.hint,
        });
    }
    let act = answer.facts.binding;
    Ok(Disconnected {
        principal: answer.principal.unwrap_or_default(),
        family: act
            .as_ref()
            .and_then(|a| a.family.clone())
            .unwrap_or_else(|| pack.manifest.family().to_owned()),
        removed: act.is_some_and(|a| a.outcome == BindingOutcome::Removed),
        audit_id: r.audit_id,
    })
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

fn args_digest(
    rt: &Runtime,
    pack: &InstalledPack,
    verb_key: &str,
    words: &Words,
) -> Result<String, Refusal> {
    let takes = crate::http::verb_takes(pack, verb_key);
    let args = words.assign(&takes);
    let pairs: Vec<(&str, &hcp_model::ArgValue)> =
        args.iter().map(|(k, v)| (k.as_str(), v)).collect();
    rt.state()
        .args_digest(&pairs)
        .map_err(|e| Refusal::store(&e))
}

/// Adds what `hcp connect` did with the credential to its result: the binding decision's
/// record `audit_id` and, when it was stored, for whom.
fn connected(result: &mut ExecResult, audit_id: Option<String>, stored: Option<Stored>) {
    let facts = CallFacts {
        connected: Some(BindingResult { audit_id, stored }),
        ..CallFacts::default()
    };
    result.extra.extend(facts.result_fields());
}
