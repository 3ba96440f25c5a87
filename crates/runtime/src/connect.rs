//! `hcp connect PACK` and `hcp disconnect PACK` (RUNTIME §8): establish and remove a
//! `user` pack's binding for the calling principal and the pack's binding family.
//!
//! Connect runs the pack's connect verb through the pipeline ([`pipeline::connect_verb`]:
//! the gate with `verb.exec.write` and `pack.connect`, the confirm gate when its policy
//! asks, the runtime policy, the audit), then reads the credential from the verb's
//! stdout: exactly one JSON object of at most [`MAX_CREDENTIAL_BYTES`] bytes. Anything
//! else is refused with `connect_output_invalid` and nothing is stored. The credential is
//! never shown: the answer leaves out the verb's stdout, redacts the credential from its
//! stderr (the one redaction, [`crate::redact`]: plain and JSON-escaped forms), and no
//! message quotes it (DESIGN.md, "Bindings and stimuli").

use crate::Runtime;
use crate::call::{Call, CallArgs, Caller, Words};
use crate::pipeline;
use crate::redact::Redactor;
use crate::refusal::Refusal;
use hcp_gate::Face;
use hcp_model::facts::{BindingAct, BindingOutcome, BindingResult, Stored};
use hcp_model::{BindingMode, CallFacts, Capability, Code, ExecResult, exit};
use hcp_store::StoreLock;
use hcp_store::audit::{Decision, Entry};
use hcp_store::binding::{self, MAX_CREDENTIAL_BYTES};
use hcp_store::pack::{self, InstalledPack};
use hcp_store::session::{OWNER, SessionError};
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
    let pack = pack::load(rt.home(), id).map_err(|e| crate::install::pack_refusal(&e))?;
    if pack.manifest.binding.mode != BindingMode::User {
        return Err(Refusal::new(
            Code::NotConnectable,
            format!(
                "pack `{}` has binding mode `{}`: there is no credential to connect",
                pack.id,
                mode_name(pack.manifest.binding.mode)
            ),
        ));
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
    let call = Call {
        pack_id: Some(pack.id.to_string()),
        target: verb_key.clone(),
        timeout,
        args: CallArgs::Words(words),
        face: Face::Cli,
    };
    let (answer, principal) = pipeline::connect_verb(rt, caller, call);
    let mut result = answer.result;
    // The verb's stdout is the credential: it never leaves this function.
    let stdout = answer.stdout;
    result.stdout = None;
    result.data = Value::Null;
    let Some(code) = result.exit_code else {
        // Refused before the verb ran: the pipeline's answer as it is.
        return Ok(Connected {
            result,
            exit: answer.exit,
            stderr: Vec::new(),
            stored: None,
        });
    };
    let Some(principal) = principal else {
        return Err(Refusal::new(
            Code::StoreDamaged,
            "the connect verb ran without a principal",
        ));
    };
    let record = |code: Option<Code>, outcome: BindingOutcome, run: Option<&str>| {
        record_binding(rt, &principal, pack, &verb_key, &digest, code, outcome, run)
    };
    if code != 0 || result.code.is_some() {
        result.ok = false;
        if result.code.is_none() {
            result.code = Some(Code::ConnectFailed);
            result.error = Some(format!(
                "the connect verb `{verb_key}` of `{}` exited with status {code}; nothing was stored",
                pack.id
            ));
        }
        result.hint =
            Some("see the verb's stderr; the pack's skill says how its connect works".to_string());
        let refusal = result.code;
        let id = record(refusal, BindingOutcome::Refused, result.audit_id.as_deref());
        connected(&mut result, id, None);
        return Ok(Connected {
            result,
            exit: answer.exit,
            stderr: answer.stderr,
            stored: None,
        });
    }
    let now = Timestamp::now();
    let secret = match credential(&stdout, result.truncated, now) {
        Ok(s) => s,
        Err(why) => {
            let id = record(
                Some(Code::ConnectOutputInvalid),
                BindingOutcome::Refused,
                result.audit_id.as_deref(),
            );
            result.ok = false;
            result.code = Some(Code::ConnectOutputInvalid);
            result.error = Some(format!(
                "the connect verb `{verb_key}` of `{}` did not print a credential: {why}; nothing was stored",
                pack.id
            ));
            result.hint = Some(format!(
                "a connect verb prints exactly one JSON object of at most {MAX_CREDENTIAL_BYTES} bytes on stdout"
            ));
            connected(&mut result, id, None);
            // Its stderr may quote what it printed: not shown.
            result.stderr = None;
            return Ok(Connected {
                result,
                exit: Code::ConnectOutputInvalid.exit_status(),
                stderr: Vec::new(),
                stored: None,
            });
        }
    };
    let family = pack.manifest.family().to_owned();
    let redacted = Redactor::new(&secret).bytes(&answer.stderr);
    result.stderr = Some(String::from_utf8_lossy(&redacted).into_owned());
    let stored = StoreLock::acquire(rt.home())
        .and_then(|_lock| binding::save(rt.home(), &principal, &family, secret, now))
        .map_err(|e| Refusal::store(&e).hint("nothing was stored"))?;
    let id = record(None, BindingOutcome::Stored, result.audit_id.as_deref());
    let stored = Stored {
        principal: principal.clone(),
        family: family.clone(),
        expires_at: stored.expires_at.map(|t| t.to_string()),
    };
    connected(&mut result, id, Some(stored));
    Ok(Connected {
        result,
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
/// pack (the one grant check, with the rug-pull guard). Audited either way.
///
/// # Errors
/// `bad_session`, `missing_grant`, or the store's.
pub fn disconnect(
    rt: &Runtime,
    caller: &Caller,
    pack: &InstalledPack,
) -> Result<Disconnected, Refusal> {
    let verb_key = pack.manifest.connect_verb().unwrap_or_default().to_owned();
    let digest = rt
        .state()
        .args_digest(&[])
        .map_err(|e| Refusal::store(&e))?;
    let now = Timestamp::now();
    let refuse = |principal: &str, r: Refusal| {
        let act = BindingAct {
            outcome: BindingOutcome::Refused,
            family: None,
            run_audit_id: None,
        };
        let entry = binding_entry(pack, &verb_key, principal, Some(r.code), &digest, act);
        let _ = rt.state().record(&entry);
        r
    };
    let session = match &caller.session_token {
        None => None,
        Some(t) => match rt.state().session_resolve(&t.to_string_lossy(), now) {
            Ok(s) => Some(s),
            Err(SessionError::Bad(b)) => {
                return Err(refuse(
                    "unknown",
                    Refusal::new(Code::BadSession, format!("bad session: {b}"))
                        .hint("the owner starts a new session with `hcp session start`"),
                ));
            }
            Err(e) => return Err(refuse("unknown", Refusal::new(e.code(), e.to_string()))),
        },
    };
    let principal = session
        .as_ref()
        .map_or(OWNER, |s| s.principal.as_str())
        .to_owned();
    if let Some(s) = &session {
        let held = rt
            .state()
            .grants_held(&s.principal, &pack.id)
            .map_err(|e| refuse(&principal, Refusal::store(&e)))?;
        let changed = pack
            .record
            .content_changed_at
            .as_deref()
            .and_then(|t| t.parse::<Timestamp>().ok());
        hcp_gate::grant::require(
            s.principal.as_str(),
            pack.id.as_str(),
            held.iter().map(|h| (h.capability, h.granted_at)),
            Capability::PackConnect,
            changed,
        )
        .map_err(|r| refuse(&principal, Refusal::from_gate(&r)))?;
    }
    let family = pack.manifest.family().to_owned();
    let removed = StoreLock::acquire(rt.home())
        .and_then(|_lock| binding::remove(rt.home(), &principal, &family))
        .map_err(|e| Refusal::store(&e))?;
    let audit_id = record_binding(
        rt,
        &principal,
        pack,
        &verb_key,
        &digest,
        None,
        if removed {
            BindingOutcome::Removed
        } else {
            BindingOutcome::Absent
        },
        None,
    );
    Ok(Disconnected {
        principal,
        family,
        removed,
        audit_id,
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

/// Appends the audit record of a binding decision: stored, refused, removed, absent, with
/// the family and the run's record. It carries the usual digest of the arguments, never
/// the credential. Returns its id.
#[allow(clippy::too_many_arguments)]
fn record_binding(
    rt: &Runtime,
    principal: &str,
    pack: &InstalledPack,
    verb_key: &str,
    args_digest: &str,
    code: Option<Code>,
    outcome: BindingOutcome,
    run: Option<&str>,
) -> Option<String> {
    let act = BindingAct {
        outcome,
        family: Some(pack.manifest.family().to_owned()),
        run_audit_id: run.map(str::to_owned),
    };
    let entry = binding_entry(pack, verb_key, principal, code, args_digest, act);
    rt.state().record(&entry).ok().map(|a| a.id)
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

/// The audit entry of a binding decision on `pack`'s connect verb.
fn binding_entry(
    pack: &InstalledPack,
    verb_key: &str,
    principal: &str,
    code: Option<Code>,
    args_digest: &str,
    act: BindingAct,
) -> Entry {
    let policy = pack.policy.verbs.get(verb_key);
    Entry {
        principal: principal.to_owned(),
        project: None,
        pack_id: Some(pack.id.to_string()),
        verb_key: verb_key.to_owned(),
        operation: policy.map(|p| p.operation),
        land: policy.map(|p| p.privacy.land),
        decision: if code.is_some() {
            Decision::Deny
        } else {
            Decision::Allow
        },
        code,
        args_digest: args_digest.to_owned(),
        exit_code: None,
        duration_ms: 0,
        extra: CallFacts {
            binding: Some(act),
            ..CallFacts::default()
        }
        .audit_fields(),
    }
}
