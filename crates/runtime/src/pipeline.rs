//! The pipeline of RUNTIME §5, top to bottom, for every face: [`exec`] (the CLI face, the
//! JSON envelope, MCP's tools), [`connect_verb`] (`hcp connect`'s run) and [`sense`]
//! (`hcp sense`'s admission). Each step is a few lines here; what a step checks lives in
//! the module it names (see the crate docs for the map).
//!
//! Every refusal from step 2 on is recorded (RUNTIME §6); a target miss too, under the
//! principal the session names. Nothing single-use is spent before `State::admit`
//! (step 9b), and everything that can refuse without spending runs before it. Admission
//! writes the call's durable `intent`; from then on every end of the call — a run, a
//! timeout, a cancel, a spawn that failed — is its `outcome` record, not a refusal.

use crate::Runtime;
use crate::call::{Answer, Call, Caller};
use crate::confirm::{self, Answered};
use crate::http::Work;
use crate::policy;
use crate::prepare::{self, ChildSpec};
use crate::record::Facts;
use crate::redact::Redactor;
use crate::refusal::Refusal;
use crate::seam::Point;
use crate::snapshot::{Snapshot, Subject};
use crate::steps::{
    PolicyStep, SenseCall, Spend, Stop, admit_sense, admit_stop, checked_capabilities,
    content_changed_at, grants_view, mint_refusal, policy_config, policy_refusal, record_outcome,
    runtime_policy_pre, session_refusal, signal_name, stop, stop_record, tool_lock,
};
use hcp_adapter::Limits;
use hcp_gate::{Context, Decision, Face, PackView};
use hcp_model::facts::{Approval, RecordFace, Sandbox, Signal, Via};
use hcp_model::manifest::arguments;
use hcp_model::{BindingMode, Code, ExecResult, exit};
use hcp_store::audit::Decision as Logged;
use hcp_store::pack::InstalledPack;
use hcp_store::state::Admission;
use jiff::Timestamp;
use serde_json::Value;
use std::os::fd::BorrowedFd;

/// Runs one call through RUNTIME §5 and answers it; every refusal carries its code.
/// `cancel` is how the face abandons the call mid-run (`hcp exec`: a signal; `hcp mcp`:
/// the client cancelled or went away): a descriptor that becomes readable, or hangs up,
/// when the call must end. The adapter then ends the child's process group, and the run is
/// answered and recorded with code `cancelled`.
pub fn exec(rt: &Runtime, caller: &Caller, call: Call, cancel: Option<BorrowedFd<'_>>) -> Answer {
    execute(rt, caller, &call, cancel, false, None).0
}

/// [`exec`] for a call the person answered through the face (RUNTIME §10,
/// [`crate::confirm`]). With [`Answered::command`], the gate counts the call as confirmed —
/// its arguments, and so its audit digest, stay as sent — and after child preparation it
/// is refused (`confirm_required`, nothing spent) unless the command it is about to run
/// has that digest, the [`crate::confirm::Preview::digest`] the person accepted; its
/// record says `"confirm": "elicitation"`. With [`Answered::approval`], a record that
/// takes that approval says `"approved_by": "elicitation"`.
pub fn exec_answered(
    rt: &Runtime,
    caller: &Caller,
    call: Call,
    cancel: Option<BorrowedFd<'_>>,
    answered: &Answered,
) -> Answer {
    execute(rt, caller, &call, cancel, false, Some(answered)).0
}

/// Runs the connect verb of a pack for `hcp connect` (RUNTIME §8), the one path on which a
/// session may run it (elsewhere it is `connect_only`: its stdout is the credential).
/// Also names the principal the call was made as (`owner` without a session), for whom
/// `hcp connect` stores what the verb printed (the answer's raw `stdout`); `None` when no
/// principal was resolved.
pub fn connect_verb(rt: &Runtime, caller: &Caller, call: Call) -> (Answer, Option<String>) {
    execute(rt, caller, &call, None, true, None)
}

fn execute(
    rt: &Runtime,
    caller: &Caller,
    call: &Call,
    cancel: Option<BorrowedFd<'_>>,
    via_connect: bool,
    answered: Option<&Answered>,
) -> (Answer, Option<String>) {
    // A state that cannot be used refuses before any step (RUNTIME §9): no refusal
    // could be recorded, and nothing falls back to the files. A database's connection
    // is opened, and its schema checked, by the snapshot's reads (one round trip).
    if let Err(e) = crate::backend::ready_to_read(rt) {
        return (crate::record::early_refusal(Refusal::store(&e)), None);
    }
    let now = Timestamp::now();

    // ── 0. Snapshot: every read of the store and the state, up front. ──────────────────
    let subject = Subject::Verb {
        pack_id: call.pack_id.as_deref(),
        target: &call.target,
    };
    let mut snap = Snapshot::load(rt, caller, subject, now);
    if let Some(r) = snap.unavailable.take() {
        return (crate::record::early_refusal(r), None);
    }
    let mut facts = Facts::start(rt);
    let answer = match steps(
        rt,
        caller,
        snap,
        call,
        cancel,
        via_connect,
        answered,
        &mut facts,
    ) {
        Ok(a) => a,
        Err(s) => {
            let audit_id = stop_record(rt, &mut facts, &s);
            facts.refusal_answer(s.refusal, audit_id)
        }
    };
    (answer, facts.principal)
}

/// Steps 1–10 of RUNTIME §5 on the call's snapshot: one function, read top to bottom, so
/// it takes the call's every input.
#[allow(clippy::too_many_lines, clippy::too_many_arguments)]
fn steps(
    rt: &Runtime,
    caller: &Caller,
    snap: Snapshot,
    call: &Call,
    cancel: Option<BorrowedFd<'_>>,
    via_connect: bool,
    answered: Option<&Answered>,
    facts: &mut Facts,
) -> Result<Answer, Stop> {
    facts.principal = Some(snap.principal_label());
    let Snapshot {
        now,
        principal,
        target,
        active,
        grants,
        policy: runtime_policy,
        lock,
        config,
        credential,
        operation,
        sandboxes,
        unavailable: _,
    } = snap;

    // ── 1. Target (a miss is recorded under the session's principal). ──────────────────
    let (pack, verb_key) = target.map_err(|r| {
        facts.pack_id.clone_from(&call.pack_id);
        facts.verb_key = Some(call.target.clone());
        stop(r)
    })?;
    facts.pack_id = Some(pack.id.to_string());
    facts.verb_key = Some(verb_key.clone());
    if let Some(entry) = pack.policy.verbs.get(&verb_key) {
        facts.operation = Some(entry.operation);
        facts.land = Some(entry.privacy.land);
    }
    // A `kind: openapi` verb: its compiled operation (the pinned copy), RUNTIME §1.3.
    let operation = operation.transpose().map_err(stop)?;

    // ── 2. Principal. ──────────────────────────────────────────────────────────────────
    let principal = principal.map_err(|e| stop(session_refusal(e)))?;
    facts.principal = Some(principal.id.clone());
    let takes: Vec<String> = match &operation {
        Some(op) => crate::http::takes(op),
        None => pack
            .manifest
            .plan_verb(&verb_key)
            .map(|p| arguments(&p).into_iter().map(|(n, _)| n).collect())
            .unwrap_or_default(),
    };
    let args = call.args.for_verb(&takes);
    let pairs: Vec<(&str, &hcp_model::ArgValue)> =
        args.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let digest = rt.state().args_digest(&pairs);
    facts.args_digest = Some(digest.map_err(|e| stop(Refusal::store(&e)))?);
    let grants = grants_view(grants).map_err(stop)?;
    let content_changed_at = content_changed_at(&pack).map_err(stop)?;

    // ── 3–6. The pure gate: arguments, grant, land, confirm (hcp-gate). ────────────────
    let ctx = Context {
        principal: &principal,
        pack: PackView {
            manifest: &pack.manifest,
            policy: &pack.policy,
            active,
            content_changed_at,
        },
        verb_key: &verb_key,
        face: call.face,
        grants: &grants,
        cwd: &caller.cwd,
    };
    let confirmed = answered.and_then(|a| a.command.as_deref());
    let gated = match confirmed {
        Some(_) => confirm::with_confirm(&args),
        None => args.clone(),
    };
    let decision = match &operation {
        Some(op) => hcp_gate::check_operation(&ctx, op, gated.iter().map(|(k, v)| (k, v))),
        None => hcp_gate::check(&ctx, gated.iter().map(|(k, v)| (k, v))),
    };
    let allowed = match decision {
        Decision::Allow(a) => a,
        Decision::Deny(r) => {
            if r.code == Code::ConfirmRequired && call.face == Face::Mcp {
                // What would run once confirmed, for the face to show the person.
                let of = confirm::PreviewOf {
                    pack: &pack,
                    verb_key: &verb_key,
                    args: &args,
                    policy: runtime_policy
                        .as_ref()
                        .ok()
                        .and_then(Option::as_ref)
                        .map(|p| &p.policy),
                    principal: &principal,
                };
                facts.preview = confirm::preview(&ctx, &of).map(Box::new);
            }
            return Err(stop(Refusal::from_gate(&r)));
        }
    };
    facts.project.clone_from(&allowed.project);

    // ── 7. The tool lock, then the runtime policy, dry: counters checked, approvals ──
    //       looked up, a resolver's own call made.
    let runtime_policy = runtime_policy.map_err(|r| stop(policy_refusal(r)))?;
    let tool = format!("{}.{verb_key}", pack.id);
    tool_lock(lock, &pack, &verb_key, facts)?;
    let mut values = allowed.values.clone();
    let mut spend = Spend::default();
    if let Some(rp) = runtime_policy.as_ref().filter(|_| !principal.is_owner()) {
        let step = PolicyStep {
            rt,
            caller,
            timeout: call.timeout,
            config: policy_config(&config).map_err(stop)?,
            face: call.face,
            now,
        };
        let pass = runtime_policy_pre(&step, rp, &principal, &tool, &values, facts)?;
        values = pass.values;
        spend.take(pass.counters, pass.approvals);
    }

    // ── 8. Binding mint. ───────────────────────────────────────────────────────────────
    if !via_connect
        && !principal.is_owner()
        && pack.manifest.connect_verb() == Some(verb_key.as_str())
    {
        return Err(stop(
            Refusal::new(
                Code::ConnectOnly,
                format!(
                    "verb `{verb_key}` establishes the binding of `{}`; a session runs it through `hcp connect`",
                    pack.id
                ),
            )
            .hint(format!("run `hcp connect {}`", pack.id)),
        ));
    }
    let credential = match credential {
        None => None,
        Some(Ok(c)) => Some(c),
        Some(Err(e)) => {
            return Err(stop(mint_refusal(
                rt,
                &pack,
                &principal.id,
                &verb_key,
                &e,
                now,
            )));
        }
    };

    // ── 9a. Child preparation: bin, argv, environment, limits, sandbox; for a ─────────
    //        `kind: openapi` verb, its one HTTP request instead (http.rs).
    let spec = ChildSpec {
        pack: &pack,
        key: &verb_key,
        allowed: &allowed,
        values: &values,
        principal: &principal,
        secret: credential.as_ref().map(|c| &c.secret),
        config: &config,
        sandboxes: &sandboxes,
    };
    let mut child = match &operation {
        None => Work::Child(Box::new(
            prepare::child(rt.home(), caller, &spec).map_err(stop)?,
        )),
        Some(op) => Work::Http(crate::http::prepare(op, &spec).map_err(stop)?),
    };
    if let Some(accepted) = confirmed {
        // The person accepted one command: this call runs that one or nothing. A request
        // of a `kind: openapi` verb has no preview to accept (confirm::preview renders
        // commands only), so an answer for one is refused.
        let about_to_run = match &child {
            Work::Child(c) => crate::pins::pin_of(&pack, &allowed.plan.program).map(|pin| {
                confirm::digest(pack.id.as_str(), &verb_key, &pin, &c.argv0, &c.args, &c.cwd)
            }),
            Work::Http(_) => Err(confirm::changed()),
        };
        let refused = match about_to_run {
            Ok(d) if d == accepted => None,
            Ok(_) => Some(confirm::changed()),
            Err(r) => Some(r),
        };
        if let Some(r) = refused {
            child.clean_up();
            return Err(stop(r));
        }
        facts.learned.confirm = Some(Via::Elicitation);
    }
    if let Some(s) = child.sandbox() {
        facts.learned.sandbox = Some(Sandbox::One(s));
    }
    let remove_tmp = |child: &mut Work| child.clean_up();
    // Fail closed: a call whose record could not be written is not run.
    if let Err(e) = rt.state().audit_ready() {
        remove_tmp(&mut child);
        return Err(Stop {
            refusal: Refusal::new(
                Code::AuditUnavailable,
                format!("the audit trail cannot be written, so nothing runs: {e}"),
            ),
            recorded: false,
        });
    }

    // ── 9b. Admission: the one step that spends (counter slots, the approval) and makes
    //       the call's intent record durable; nothing runs without it. ─────────────────
    facts.operation = Some(allowed.operation);
    facts.land = Some(allowed.land);
    let intent = facts.intent();
    let capabilities = checked_capabilities(&pack, &verb_key, allowed.operation, &principal);
    let admitted = rt
        .state()
        .admit(&Admission {
            session: principal.session_id(),
            pack: &pack.id,
            capabilities: &capabilities,
            intent: &intent,
            counters: &spend.counters,
            approvals: &spend.approvals,
            now,
        })
        .map_err(|e| {
            remove_tmp(&mut child);
            admit_stop(e, &tool, facts)
        })?;
    facts.admitted(admitted.intent.id.clone(), intent);
    rt.seam().reach(Point::Admitted);
    if let Some(id) = admitted.approval_ids.first() {
        if answered.and_then(|a| a.approval.as_ref()) == Some(id) {
            facts.learned.approved_by = Some(Via::Elicitation);
        }
        facts.learned.approval = Some(Approval::Taken(id.clone()));
    }

    // ── 9c. The adapter runs the child (or hcp sends the request: http.rs). ─────────────
    let limits = Limits {
        timeout: call.timeout.unwrap_or(hcp_adapter::DEFAULT_TIMEOUT),
        ..Limits::default()
    };
    rt.seam().watch_child();
    let run = child.run(limits, cancel, facts);
    rt.seam().reach(Point::ChildExited);
    remove_tmp(&mut child);
    let mut outcome = run.map_err(stop)?;
    let duration_ms = facts.elapsed_ms();
    let (exit, mut code, mut error) = if outcome.timed_out {
        (
            Code::Timeout.exit_status(),
            Some(Code::Timeout),
            Some(format!(
                "the verb ran past its timeout of {:.3} s",
                limits.timeout.as_secs_f64()
            )),
        )
    } else if outcome.cancelled {
        (
            // The caller went away (no face prints this status).
            Code::Cancelled.exit_status(),
            Some(Code::Cancelled),
            Some("the caller abandoned the call; its process group was ended".to_string()),
        )
    } else {
        (
            u8::try_from(outcome.exit_code.clamp(0, 255)).unwrap_or(exit::REFUSED),
            None,
            None,
        )
    };
    let truncated = outcome.truncated();

    // ── Post-gate: the credential never leaves; the runtime policy's output controls. ──
    if let Some(c) = &credential {
        // The credential reaches the child only: a verb that prints it (its environment,
        // an error quoting it) does not hand it to the caller (RUNTIME §8).
        let r = Redactor::new(&c.secret);
        outcome.stdout = r.bytes(&outcome.stdout);
        outcome.stderr = r.bytes(&outcome.stderr);
    }
    if let Some(sig) = outcome
        .signal
        .filter(|_| !outcome.timed_out && !outcome.cancelled)
    {
        // A limit the kernel enforced ends the child with a signal: say which.
        facts.learned.signal = Some(Signal {
            number: sig,
            name: signal_name(sig),
        });
    }
    let mut stdout = std::mem::take(&mut outcome.stdout);
    let mut withheld = false;
    if let Some(rp) = runtime_policy.as_ref().filter(|_| !principal.is_owner()) {
        let post = policy::post(rp, &principal, &tool, &stdout, &outcome.stderr);
        outcome.stderr = post.stderr;
        facts.learned.post_rule = Some(post.rule);
        match post.stdout {
            Some(b) => stdout = b,
            None => {
                stdout = Vec::new();
                withheld = true;
            }
        }
    }
    let exit = if withheld && code.is_none() {
        code = Some(Code::OutputWithheld);
        error = Some("the runtime policy withheld the verb's output".to_string());
        Code::OutputWithheld.exit_status()
    } else {
        exit
    };

    // ── Outcome record. ────────────────────────────────────────────────────────────────
    let audit_id = record_outcome(rt, facts, code, &outcome, duration_ms)?;

    // ── The answer. ────────────────────────────────────────────────────────────────────
    let stdout_text = String::from_utf8_lossy(&stdout).into_owned();
    let data = if outcome.stdout_truncated {
        Value::Null
    } else {
        serde_json::from_str(&stdout_text).unwrap_or(Value::Null)
    };
    let result = ExecResult {
        ok: !outcome.timed_out && !outcome.cancelled && !withheld && outcome.exit_code == 0,
        pack_id: Some(pack.id.to_string()),
        verb_key: Some(verb_key),
        operation: Some(allowed.operation.to_string()),
        land: Some(allowed.land.to_string()),
        error,
        code,
        hint: None,
        exit_code: Some(outcome.exit_code),
        stdout: Some(stdout_text),
        stderr: Some(String::from_utf8_lossy(&outcome.stderr).into_owned()),
        data,
        truncated,
        duration_ms,
        audit_id: Some(audit_id),
        extra: facts.learned.result_fields(),
    };
    Ok(Answer {
        result,
        exit,
        stdout,
        stderr: outcome.stderr,
        preview: None,
    })
}

// ════════════════════════════════════════════════════════════════════════════════════
// `hcp sense` (RUNTIME §8): the same steps for a pack's stimuli, up to admission; the
// relay (`crate::sense`) then runs the admitted triggers.
// ════════════════════════════════════════════════════════════════════════════════════

/// A sense admitted: the triggers to run and the credential to redact from what they
/// print.
#[derive(Debug)]
pub struct SenseAdmitted {
    /// The pack.
    pub pack: InstalledPack,
    /// The principal id (`owner` without a session).
    pub principal: String,
    /// The refs asked for.
    pub refs: Vec<String>,
    /// The triggers that run.
    pub triggers: Vec<crate::sense::Planned>,
    /// What to redact from their output.
    pub redactor: Redactor,
    /// Why the triggers do not run when every ref was asked for and the binding could
    /// not be minted (`binding_required` …): the recorded stimuli still flow.
    pub unbound: Option<Code>,
    /// The sense's intent record, for its outcome when the relay stops
    /// ([`crate::sense::run`]).
    pub audit: crate::sense::SenseAudit,
}

/// Why a sense did not start (recorded when a principal was resolved).
#[derive(Debug)]
pub struct SenseRefused {
    /// The refusal.
    pub refusal: Refusal,
}

/// Admits `hcp sense PACK [REF]`: the pack, its refs, the principal, steps 1–6 for every
/// ref (`hcp_gate::check_stimulus`), the runtime policy for every ref (tool
/// `PACK_ID.REF`), binding mint for the triggers that run, their preparation, then
/// admission, which writes the sense's intent (its outcome follows when the relay stops:
/// [`crate::sense::run`]). Refusals of the target (before a principal is known)
/// are not recorded; every later one is, with `"face": "sense"` and `verb_key` the ref
/// (`*` for all).
///
/// # Errors
/// [`SenseRefused`].
#[allow(clippy::too_many_lines)]
pub fn sense(
    rt: &Runtime,
    caller: &Caller,
    pack_id: &str,
    reference: Option<&str>,
) -> Result<SenseAdmitted, SenseRefused> {
    let now = Timestamp::now();
    let target = reference.unwrap_or("*");
    crate::backend::ready(rt).map_err(|e| SenseRefused {
        refusal: Refusal::store(&e),
    })?;
    let mut facts = Facts::start(rt);
    facts.verb_key = Some(target.to_owned());
    facts.operation = Some(hcp_model::Operation::Read);
    facts.learned.face = Some(RecordFace::Sense);
    let refused = |refusal: Refusal| SenseRefused { refusal };

    // ── 0. Snapshot. ───────────────────────────────────────────────────────────────────
    let subject = Subject::Stimulus {
        pack_id,
        reference: target,
    };
    let snap = Snapshot::load(rt, caller, subject, now);
    let label = snap.principal_label();
    let Snapshot {
        now: _,
        principal,
        target: found,
        active,
        grants,
        policy: runtime_policy,
        lock: _,
        config,
        credential,
        operation: _,
        sandboxes,
        unavailable,
    } = snap;
    if let Some(r) = unavailable {
        return Err(refused(r));
    }

    // ── 1. Target: the pack, active, the refs it declares (not recorded). ─────────────
    let (pack, _) = found.map_err(refused)?;
    if !active {
        return Err(refused(
            Refusal::new(
                Code::PackInactive,
                format!("pack `{}` is installed but not active", pack.id),
            )
            .hint(format!("the owner runs `hcp activate {}`", pack.id)),
        ));
    }
    let refs = crate::sense::refs(&pack, reference).map_err(refused)?;
    facts.pack_id = Some(pack.id.to_string());
    facts.land = pack.policy.stimuli.get(target).map(|p| p.privacy.land);
    facts.principal = Some(label);
    let record_refusal = |facts: &Facts, r: Refusal| {
        let entry = facts.entry(Logged::Deny, Some(r.code), None);
        let _ = rt.state().record(&entry);
        refused(r)
    };

    // ── 2. Principal. ──────────────────────────────────────────────────────────────────
    let principal = match principal {
        Ok(p) => p,
        Err(e) => return Err(record_refusal(&facts, session_refusal(e))),
    };
    facts.principal = Some(principal.id.clone());
    let grants = match grants_view(grants) {
        Ok(g) => g,
        Err(r) => return Err(record_refusal(&facts, r)),
    };
    let content_changed_at = match content_changed_at(&pack) {
        Ok(c) => c,
        Err(r) => return Err(record_refusal(&facts, r)),
    };

    // ── 3–6. The pure gate, for every ref. ────────────────────────────────────────────
    let mut allowed = Vec::new();
    for r in &refs {
        let ctx = Context {
            principal: &principal,
            pack: PackView {
                manifest: &pack.manifest,
                policy: &pack.policy,
                active,
                content_changed_at,
            },
            verb_key: r,
            face: Face::Cli,
            grants: &grants,
            cwd: &caller.cwd,
        };
        match hcp_gate::check_stimulus(&ctx) {
            Ok(a) => allowed.push((r.clone(), a)),
            Err(d) => return Err(record_refusal(&facts, Refusal::from_gate(&d))),
        }
    }

    // ── 7. The runtime policy, dry, for every ref. ────────────────────────────────────
    let runtime_policy = match runtime_policy {
        Ok(p) => p,
        Err(r) => return Err(record_refusal(&facts, policy_refusal(r))),
    };
    let mut spend = Spend::default();
    if let Some(rp) = runtime_policy.as_ref().filter(|_| !principal.is_owner()) {
        let config = match policy_config(&config) {
            Ok(c) => c,
            Err(r) => return Err(record_refusal(&facts, r)),
        };
        let step = PolicyStep {
            rt,
            caller,
            timeout: None,
            config,
            face: Face::Cli,
            now,
        };
        for r in &refs {
            let tool = format!("{}.{r}", pack.id);
            let none = std::collections::BTreeMap::new();
            match runtime_policy_pre(&step, rp, &principal, &tool, &none, &mut facts) {
                Ok(pass) => spend.take(pass.counters, pass.approvals),
                Err(st) => return Err(record_refusal(&facts, st.refusal)),
            }
        }
    }

    // ── 8. Binding mint, for the triggers that run. ───────────────────────────────────
    let running: Vec<&(String, hcp_gate::StimulusAllowed)> =
        allowed.iter().filter(|(_, a)| a.plan.is_some()).collect();
    let mut secret = None;
    if !running.is_empty() && pack.manifest.binding.mode == BindingMode::User {
        match credential {
            Some(Ok(c)) => secret = Some(c.secret),
            Some(Err(e)) => {
                let r = mint_refusal(rt, &pack, &principal.id, &running[0].0, &e, now);
                if reference.is_some() {
                    return Err(record_refusal(&facts, r));
                }
                // Every stimulus asked for: the recorded ones still flow, among them the
                // `binding.degraded` just recorded.
                let c = SenseCall {
                    pack,
                    principal,
                    refs,
                    triggers: Vec::new(),
                    secret: None,
                    unbound: Some(r.code),
                };
                return admit_sense(rt, c, &spend, facts, now);
            }
            None => {}
        }
    }

    // ── 9a. Trigger preparation. ──────────────────────────────────────────────────────
    let mut planned = Vec::new();
    let world = crate::sense::World {
        home: rt.home(),
        caller,
        config: &config,
        sandboxes: &sandboxes,
    };
    for (r, a) in running {
        match crate::sense::plan(&world, &pack, &principal, r, a, secret.as_ref()) {
            Ok(p) => planned.push(p),
            Err(x) => return Err(record_refusal(&facts, x)),
        }
    }
    if !planned.is_empty() {
        let by_ref: serde_json::Map<String, Value> = planned
            .iter()
            .map(|p| (p.reference.clone(), p.sandbox.clone()))
            .collect();
        facts.learned.sandbox = Some(Sandbox::ByRef(by_ref));
    }
    let c = SenseCall {
        pack,
        principal,
        refs,
        triggers: planned,
        secret,
        unbound: None,
    };
    admit_sense(rt, c, &spend, facts, now)
}
