//! The run step of a `kind: openapi` verb (RUNTIME §1.3, §5 step 9): instead of a child,
//! one HTTP request built from the verb's compiled operation (the pinned copy install
//! kept), sent by hcp itself with the call's time-out, the 1 MiB cap and the face's cancel
//! descriptor, and answered in the shape of a CLI run ([`hcp_adapter::Outcome`]), so the
//! post-gate (credential redaction, the runtime policy's output controls) and the audit
//! record are the pipeline's own.
//!
//! Preparation ([`prepare`]), after the gate and binding mint and before admission (it
//! spends nothing): `config.json` must parse; the server is the operator's
//! `packs.ID.server`, else the document's first one; the credential is the binding's `token` field (else its only string field); and
//! the request is planned ([`hcp_openapi::plan`]: the arguments checked again, after the
//! runtime policy's `bind`, and the credential placed as the security scheme says).
//! Nothing is sent until admission has passed.
//!
//! **The network.** No child runs: hcp sends the request, to one origin only, never
//! following a redirect and using no proxy, whatever the pack's `network` says (RUNTIME
//! §5.3: the network governs children; an `openapi` verb reaches its one origin).

use crate::prepare::{self, ChildSpec};
use crate::record::Record;
use crate::refusal::Refusal;
use hcp_adapter::{Invocation, Limits, Outcome};
use hcp_model::{ArgValue, Code};
use hcp_openapi::{Credential, HttpOutcome, Operation, RequestPlan};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::os::fd::BorrowedFd;
use std::time::Duration;

/// What the run step runs: a child (a CLI verb), or an HTTP request (a `kind: openapi`
/// verb).
#[derive(Debug)]
pub enum Work {
    /// A prepared child.
    Child(Box<prepare::Child>),
    /// A planned request.
    Http(Box<Request>),
}

/// A planned request of a `kind: openapi` verb, not yet sent.
#[derive(Debug)]
pub struct Request {
    /// The request.
    pub plan: RequestPlan,
    /// The result's and the record's `sandbox` field.
    pub sandbox: Value,
    /// The pack's id.
    pub pack_id: String,
    /// The server the request goes to, and whether the operator set it
    /// (`packs.ID.server`) rather than the document.
    pub server: (String, bool),
}

impl Work {
    /// The `sandbox` field of the result and the record, when there is one.
    pub fn sandbox(&self) -> Option<Value> {
        match self {
            Self::Child(c) => c.sandbox.clone(),
            Self::Http(r) => Some(r.sandbox.clone()),
        }
    }

    /// The call is admitted (its intent durable): keeps what preparation learned for the
    /// next call (the bins' fingerprints, [`crate::pins::Fresh::keep`]). Before this, a
    /// refused call has written nothing.
    pub fn admitted(&mut self) {
        if let Self::Child(c) = self {
            c.fresh.keep();
        }
    }

    /// Releases what preparation took (the call's cgroups, with its confinement).
    pub fn clean_up(&mut self) {
        if let Self::Child(c) = self {
            drop(std::mem::take(&mut c.confinement));
        }
    }

    /// Runs it: the child through the adapter, or the request through
    /// [`hcp_openapi::send`]. An HTTP answer's status goes into the result's and the
    /// record's `http_status`.
    ///
    /// # Errors
    /// The adapter's failure to start the child (`spawn_failed`, `bin_changed` …);
    /// `bad_openapi` when no connection to the server could be made (nothing was sent).
    pub fn run(
        &mut self,
        limits: Limits,
        cancel: Option<BorrowedFd<'_>>,
        rec: &mut Record,
    ) -> Result<Outcome, Refusal> {
        match self {
            Self::Child(child) => {
                let egress = child.egress.take();
                let serve = |fd| {
                    if let Some(e) = &egress {
                        e.serve(fd);
                    }
                };
                let inv = Invocation {
                    bin: &child.bin,
                    argv0: child.argv0.clone(),
                    args: std::mem::take(&mut child.args),
                    env: &child.env,
                    cwd: child.cwd.clone(),
                    limits,
                    confine: Some(&child.confinement),
                    cancel,
                    egress: Some(hcp_adapter::Egress(&serve)),
                };
                let run = hcp_adapter::run(&inv).map_err(|e| Refusal::adapter(&e));
                crate::egress::after_run(egress, &mut rec.facts);
                let outcome = run?;
                crate::prepare::after_run(child, &outcome, &mut rec.facts);
                Ok(outcome)
            }
            Self::Http(r) => {
                let (outcome, status) =
                    send(&r.plan, limits.timeout, cancel).map_err(|why| unreached(r, &why))?;
                rec.facts.http_status = status;
                Ok(outcome)
            }
        }
    }
}

/// `bad_openapi` (66, RUNTIME §1.3) for a request no connection could be made for: the
/// verb has no server to send to at that address, and nothing was sent. The hint names
/// the key that sets the server, with the real pack id.
fn unreached(r: &Request, why: &str) -> Refusal {
    let (server, by_operator) = &r.server;
    let whose = if *by_operator {
        format!("`packs.{}.server` in `config.json`", r.pack_id)
    } else {
        "the document's first server".to_owned()
    };
    Refusal::new(
        Code::BadOpenapi,
        format!(
            "pack `{}` cannot reach its server `{server}` ({whose}): {why}; nothing was sent",
            r.pack_id
        ),
    )
    .hint(server_hint(&r.pack_id))
}

/// The next step for a `kind: openapi` pack without a server it can send to.
fn server_hint(pack_id: &str) -> String {
    format!(
        "start the API's server, or point the pack at it: `hcp config set packs.{pack_id}.server URL` (docs/config.md)"
    )
}

/// The argument names of `op`, in the order the CLI face fills them from positional
/// values ([`Operation::positional`]: the required ones first).
pub fn takes(op: &Operation) -> Vec<String> {
    op.positional().iter().map(|a| a.name.clone()).collect()
}

/// The argument names verb `key` of `pack` takes, in the order positional values fill
/// them: a template's placeholders, or a `kind: openapi` verb's operation's arguments
/// ([`takes`], from the pinned copy). Empty when the verb cannot be planned or read.
pub fn verb_takes(pack: &hcp_store::pack::InstalledPack, key: &str) -> Vec<String> {
    if pack.manifest.kind == hcp_model::Kind::Openapi {
        return hcp_store::pack::openapi::pinned_operation(pack, key)
            .map(|op| takes(&op))
            .unwrap_or_default();
    }
    pack.manifest
        .plan_verb(key)
        .map(|p| {
            hcp_model::manifest::arguments(&p)
                .into_iter()
                .map(|(n, _)| n)
                .collect()
        })
        .unwrap_or_default()
}

/// Prepares the request of `spec`'s `kind: openapi` verb, whose compiled operation is
/// `op` (see the module docs).
///
/// # Errors
/// `bad_config` (78) when `config.json` does not parse; `bad_openapi` (66) when there is no server to send to;
/// `binding_required` (77) when the operation needs a credential the binding cannot give;
/// `arg_*` (65) for a value the runtime policy bound that the document does not allow.
pub fn prepare(op: &Operation, spec: &ChildSpec<'_>) -> Result<Box<Request>, Refusal> {
    let pack = spec.pack;
    let config = spec.config.as_ref().map_err(|e| {
        Refusal::new(e.code(), e.to_string())
            .hint("fix `config.json` in the store; every call is refused until it parses")
    })?;
    let operator = config.pack(pack.id.as_str()).server.as_deref();
    let server = hcp_store::pack::openapi::server(pack, operator).map_err(|e| {
        Refusal::new(
            Code::BadOpenapi,
            format!("pack `{}` has no server to send to: {}", pack.id, e.message),
        )
        .hint(server_hint(pack.id.as_str()))
    })?;
    let credential = match spec.secret {
        None => None,
        Some(s) => Some(Credential::from_binding(s).ok_or_else(|| {
            Refusal::new(
                Code::BindingRequired,
                format!(
                    "the binding of `{}` has no `token` field (nor one string field) that a request header can carry",
                    pack.id
                ),
            )
            .hint(format!("run `hcp connect {}` again", pack.id))
        })?),
    };
    let args = json_args(spec.values);
    let plan = hcp_openapi::plan(op, &server, &args, credential.as_ref()).map_err(|r| {
        let code = r.code;
        let refusal = Refusal::new(code, r.message);
        if code == Code::BindingRequired {
            refusal.hint(format!(
                "run `hcp connect {}` to establish the binding",
                pack.id
            ))
        } else {
            refusal
        }
    })?;
    let none = "no child: hcp sends the request";
    let sandbox = json!({
        "filesystem": none,
        "processes": none,
        "privileges": none,
        "memory": none,
        "network": {"mode": "one origin", "enforced": true, "origin": plan.origin, "refused": []},
    });
    Ok(Box::new(Request {
        plan,
        sandbox,
        pack_id: pack.id.to_string(),
        server: (server.as_str().to_owned(), operator.is_some()),
    }))
}

/// The call's values as the JSON the request is built from.
fn json_args(values: &BTreeMap<String, ArgValue>) -> Map<String, Value> {
    values
        .iter()
        .map(|(k, v)| (k.clone(), hcp_gate::args::arg_json(v)))
        .collect()
}

/// Sends `plan` within `timeout` (the body capped at 1 MiB, as a CLI's stdout) until
/// `cancel` fires, and answers as a CLI run would: `exit_code` 0 for a complete `2xx`
/// answer, 1 otherwise (a `3xx` is never followed: its `Location` is named in `stderr`),
/// 124 on the time-out, 130 when cancelled; the body as stdout, what went wrong as
/// stderr. Also the HTTP status, when a response head arrived.
///
/// # Errors
/// Why no connection to the server could be made, lowercase: nothing was sent
/// ([`HttpOutcome::Unreached`]).
pub fn send(
    plan: &RequestPlan,
    timeout: Duration,
    cancel: Option<BorrowedFd<'_>>,
) -> Result<(Outcome, Option<u16>), String> {
    let limits = hcp_openapi::Limits {
        timeout,
        body_cap: hcp_openapi::DEFAULT_BODY_CAP,
    };
    let blank = |exit_code: i32, duration: Duration| Outcome {
        pid: 0,
        exit_code,
        signal: None,
        timed_out: false,
        cancelled: false,
        stdout: Vec::new(),
        stderr: Vec::new(),
        stdout_truncated: false,
        stderr_truncated: false,
        stdout_total: 0,
        stderr_total: 0,
        duration,
        socket_attempts: 0,
        memory_exceeded: false,
        no_proc: false,
    };
    Ok(match hcp_openapi::send(plan, &limits, cancel) {
        HttpOutcome::Unreached { reason, .. } => return Err(reason),
        HttpOutcome::Answered(a) => {
            let mut o = blank(a.exit_code(), a.duration);
            o.stderr = a.stderr().into_bytes();
            o.stderr_total = o.stderr.len() as u64;
            o.stdout_truncated = a.truncated;
            o.stdout_total = a.body.len() as u64;
            o.stdout = a.body;
            (o, a.http_status)
        }
        HttpOutcome::TimedOut { duration } => {
            let mut o = blank(i32::from(Code::Timeout.exit_status()), duration);
            o.timed_out = true;
            (o, None)
        }
        HttpOutcome::Cancelled { duration } => {
            let mut o = blank(i32::from(Code::Cancelled.exit_status()), duration);
            o.cancelled = true;
            (o, None)
        }
    })
}
