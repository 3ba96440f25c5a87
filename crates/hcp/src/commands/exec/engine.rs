//! The order of RUNTIME §5 for one call, shared by every face (CLI, JSON envelope, MCP):
//! resolve the target, resolve the principal, the pure gate (`hcp-gate`), binding mint,
//! then the adapter; every decision from principal resolution on is audited (§6).

use super::face::Words;
use hcp_adapter::{BinPin, CallVars, ChildEnv, Invocation, Limits, SessionValues};
use hcp_gate::{Code, Context, Decision, Face, GrantView, PackView, Principal, SessionView};
use hcp_model::manifest::arguments;
use hcp_model::{ArgValue, BindingMode, ExecResult};
use hcp_store::audit::{self, AuditLog, Entry};
use hcp_store::pack::{self, InstalledPack, PackError};
use hcp_store::{Home, binding, grant, session};
use jiff::Timestamp;
use std::ffi::OsString;
use std::os::fd::BorrowedFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The process facts a call reads, gathered once by the caller.
#[derive(Debug)]
pub struct ExecEnv {
    /// The store.
    pub home: Home,
    /// `HCP_SESSION`, when set (even empty: a present but bad token is refused).
    pub session_token: Option<OsString>,
    /// `HCP_PROJECT`, when set.
    pub project: Option<String>,
    /// The caller's current directory.
    pub cwd: PathBuf,
    /// The caller's environment; the adapter keeps only the allowed names.
    pub parent_env: Vec<(OsString, OsString)>,
    /// `HCP_LIMITS`: per-call resource limits, which can only tighten `config.json`'s.
    pub limit_overrides: hcp_adapter::LimitOverrides,
}

/// The arguments of a call as its face gave them.
#[derive(Debug, Clone)]
pub enum CallArgs {
    /// By name (the JSON face, MCP).
    Named(Vec<(String, ArgValue)>),
    /// CLI words: positional values are matched to the verb's arguments once it is known.
    Words(Words),
}

/// One call.
#[derive(Debug, Clone)]
pub struct Call {
    /// The pack, when the face names it apart (`pack_id` of an envelope).
    pub pack_id: Option<String>,
    /// `PACK.VERB` or a verb key (the verb key when `pack_id` is given).
    pub target: String,
    /// The arguments.
    pub args: CallArgs,
    /// The face.
    pub face: Face,
    /// `--timeout`, when given.
    pub timeout: Option<Duration>,
}

/// What the call answered and the exit status it means.
#[derive(Debug)]
pub struct Answer {
    /// The result object of RUNTIME §5.
    pub result: ExecResult,
    /// The exit status of RUNTIME §5.
    pub exit: u8,
    /// Raw child output (text mode prints these as they are).
    pub stdout: Vec<u8>,
    /// Raw child stderr.
    pub stderr: Vec<u8>,
}

/// A refusal or failure before or around the run: code, message, hint, exit status.
#[derive(Debug, Clone)]
struct Refusal {
    code: String,
    message: String,
    hint: Option<String>,
    exit: u8,
}

impl Refusal {
    fn new(
        code: impl Into<String>,
        message: impl Into<String>,
        hint: Option<String>,
        exit: u8,
    ) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
            hint,
            exit,
        }
    }

    fn from_gate(r: &hcp_gate::check::Refusal) -> Self {
        Self::new(
            r.code.as_str(),
            r.message.clone(),
            r.hint.clone(),
            r.code.exit_status(),
        )
    }
}

/// Facts known so far, for the result and the audit record.
#[derive(Debug, Default)]
struct Facts {
    pack_id: Option<String>,
    verb_key: Option<String>,
    operation: Option<hcp_model::Operation>,
    land: Option<hcp_model::Land>,
    principal: Option<String>,
    project: Option<String>,
    args_digest: Option<String>,
    /// Additive audit fields (`policy_hash`, `rule`, `post_rule`, `approval_id`).
    audit_extra: std::collections::BTreeMap<String, serde_json::Value>,
    /// Extra result fields (`approval_id`).
    result_extra: serde_json::Map<String, serde_json::Value>,
}

/// Runs one call for `hcp connect` (RUNTIME §8), the one path on which a session may run a
/// pack's connect verb (elsewhere it is `connect_only`: its stdout is the credential).
/// Also names the principal the call was made as (`owner` without a session), for whom
/// `hcp connect` stores what the verb printed (the answer's raw `stdout`); `None` when no
/// principal was resolved.
pub fn execute_connect(env: &ExecEnv, call: Call) -> (Answer, Option<String>) {
    execute_with(env, call, None, true)
}

/// Runs one call through RUNTIME §5 and answers it; every refusal carries its code.
/// `cancel` is how the face abandons the call mid-run (`hcp exec`: one of
/// `crate::signals::ARMED`; `hcp mcp`: the client cancelled or disconnected). `cancel` is a descriptor (the read end of a pipe) that becomes
/// readable, or hangs up, when the call must end: the adapter then ends the child's
/// process group, and the run is answered and audited with code `cancelled`.
pub fn execute_cancellable(env: &ExecEnv, call: Call, cancel: BorrowedFd<'_>) -> Answer {
    execute_with(env, call, Some(cancel), false).0
}

fn execute_with(
    env: &ExecEnv,
    call: Call,
    cancel: Option<BorrowedFd<'_>>,
    via_connect: bool,
) -> (Answer, Option<String>) {
    let started = Instant::now();
    let mut facts = Facts::default();
    let answer = match execute_inner(env, call, cancel, via_connect, &mut facts, started) {
        Ok(a) => a,
        Err((refusal, audited)) => {
            let audit_id = if audited {
                audit_refusal(env, &facts, &refusal, started)
            } else {
                None
            };
            refusal_answer(&facts, refusal, audit_id, started)
        }
    };
    (answer, facts.principal)
}

type Step1<T> = Result<T, (Refusal, bool)>;

fn execute_inner(
    env: &ExecEnv,
    call: Call,
    cancel: Option<BorrowedFd<'_>>,
    via_connect: bool,
    facts: &mut Facts,
    started: Instant,
) -> Step1<Answer> {
    // Step 1: the target.
    // A miss is a decision too (RUNTIME §5: each refusal audited): it is recorded under
    // the principal the session names, when it names a valid one.
    let (pack, verb_key) = resolve(env, &call).map_err(|r| {
        facts.principal = Some(principal_label(env));
        facts.pack_id = call.pack_id.clone();
        facts.verb_key = Some(call.target.clone());
        (r, true)
    })?;
    facts.pack_id = Some(pack.id.to_string());
    facts.verb_key = Some(verb_key.clone());
    if let Some(entry) = pack.policy.verbs.get(&verb_key) {
        facts.operation = Some(entry.operation);
        facts.land = Some(entry.privacy.land);
    }
    // Step 2: the principal.
    let now = Timestamp::now();
    let session = match &env.session_token {
        None => None,
        Some(tok) => {
            let tok = tok.to_string_lossy();
            match session::resolve(&env.home, &tok, now) {
                Ok(s) => Some(s),
                Err(e) => {
                    facts.principal = Some("unknown".into());
                    let hint =
                        Some("the owner starts a new session with `hcp session start`".to_string());
                    return Err(match e {
                        session::SessionError::Bad(b) => (
                            Refusal::new(
                                Code::BadSession.as_str(),
                                format!("bad session: {b}"),
                                hint,
                                Code::BadSession.exit_status(),
                            ),
                            true,
                        ),
                        other => (
                            Refusal::new(
                                other.code(),
                                other.to_string(),
                                None,
                                crate::exit::EX_IOERR,
                            ),
                            true,
                        ),
                    });
                }
            }
        }
    };
    let principal = match &session {
        None => Principal::Owner,
        Some(s) => Principal::Session(SessionView {
            principal_id: s.principal.as_str().to_owned(),
            projects: s.projects.clone(),
            workdir: s.workdir.clone(),
        }),
    };
    facts.principal = Some(principal.id().to_owned());
    // Steps 3–6: the gate.
    let plan = pack.manifest.plan_verb(&verb_key).ok();
    let takes: Vec<String> = plan
        .as_ref()
        .map(|p| arguments(p).into_iter().map(|(n, _)| n).collect())
        .unwrap_or_default();
    let args: Vec<(String, ArgValue)> = match &call.args {
        CallArgs::Named(v) => v.clone(),
        CallArgs::Words(w) => w.assign(&takes),
    };
    facts.args_digest = Some(audit::args_digest(
        args.iter().map(|(k, v)| (k.as_str(), v)),
    ));
    let grants = match &session {
        None => GrantView::default(),
        Some(s) => {
            let all = grant::Grants::load(&env.home).map_err(|e| {
                (
                    Refusal::new(e.code(), e.to_string(), None, crate::exit::EX_IOERR),
                    true,
                )
            })?;
            GrantView {
                held: all
                    .held(&s.principal, &pack.id)
                    .into_iter()
                    .map(|h| (h.capability, h.granted_at))
                    .collect(),
            }
        }
    };
    let content_changed_at = pack
        .record
        .content_changed_at
        .as_deref()
        .and_then(|t| t.parse::<Timestamp>().ok());
    if pack.record.content_changed_at.is_some() && content_changed_at.is_none() {
        return Err((
            Refusal::new(
                "store_damaged",
                format!(
                    "install record of `{}` has a bad `content_changed_at`",
                    pack.id
                ),
                None,
                crate::exit::EX_IOERR,
            ),
            true,
        ));
    }
    let ctx = Context {
        principal: &principal,
        pack: PackView {
            manifest: &pack.manifest,
            policy: &pack.policy,
            active: pack::is_active(&env.home, pack.id.as_str()),
            content_changed_at,
        },
        verb_key: &verb_key,
        face: call.face,
        grants: &grants,
        cwd: &env.cwd,
        project: env.project.as_deref(),
    };
    let allowed = match hcp_gate::check(&ctx, args.iter().map(|(k, v)| (k, v))) {
        Decision::Allow(a) => a,
        Decision::Deny(r) => return Err((Refusal::from_gate(&r), true)),
    };
    facts.project = allowed.project.clone();
    // Step 7: the runtime policy (RUNTIME §7). It governs session principals; a policy that
    // does not load stops every call, the owner's too.
    let runtime_policy = super::policy::load(&env.home).map_err(|r| (policy_refusal(r), true))?;
    let mut values = allowed.values.clone();
    if let (Some(rp), Some(s)) = (&runtime_policy, &session) {
        facts
            .audit_extra
            .insert("policy_hash".into(), rp.hash().into());
        let tool = format!("{}.{}", pack.id, verb_key);
        let cli_face = call.face == Face::Cli;
        match super::policy::pre(&env.home, rp, s, &tool, &values, cli_face, now) {
            Ok(ok) => {
                facts.audit_extra.insert("rule".into(), ok.rule.into());
                if let Some(id) = ok.approval_id {
                    facts.audit_extra.insert("approval_id".into(), id.into());
                }
                values = ok.values;
            }
            Err(r) => {
                facts
                    .audit_extra
                    .insert("rule".into(), r.code.clone().into());
                if let Some(id) = &r.approval_id {
                    facts
                        .audit_extra
                        .insert("approval_id".into(), id.clone().into());
                    facts
                        .result_extra
                        .insert("approval_id".into(), id.clone().into());
                }
                return Err((policy_refusal(r), true));
            }
        }
    }
    // Step 8: binding mint. A session runs the connect verb only through `hcp connect`,
    // which stores what it prints instead of answering it (DESIGN.md, "Bindings").
    if !via_connect
        && principal != Principal::Owner
        && pack.manifest.connect_verb() == Some(verb_key.as_str())
    {
        return Err((
            Refusal::new(
                "connect_only",
                format!(
                    "verb `{verb_key}` establishes the binding of `{}`; a session runs it through `hcp connect`",
                    pack.id
                ),
                Some(format!("run `hcp connect {}`", pack.id)),
                crate::exit::EX_NOPERM,
            ),
            true,
        ));
    }
    let mut credential = None;
    if pack.manifest.binding.mode == BindingMode::User
        && pack.manifest.connect_verb() != Some(verb_key.as_str())
    {
        match binding::load(&env.home, principal.id(), pack.manifest.family(), now) {
            Ok(c) => credential = Some(c),
            Err(e) => {
                // Bindings and stimuli (DESIGN.md): `binding.degraded`, where the pack
                // declares it, for `hcp sense` to deliver. Best effort: the refusal stands
                // whether or not it could be recorded.
                let _ = hcp_store::stimulus::record_binding_degraded(
                    &env.home,
                    &pack,
                    principal.id(),
                    &verb_key,
                    &e,
                    now,
                );
                let hint = Some(if e.code() == "binding_insecure" {
                    format!(
                        "others may read it: `hcp disconnect {0}` then `hcp connect {0}` writes it 0600 again",
                        pack.id
                    )
                } else {
                    format!("run `hcp connect {}` to establish the binding", pack.id)
                });
                let exit = if e.code() == "binding_required" || e.code() == "binding_insecure" {
                    77
                } else {
                    crate::exit::EX_IOERR
                };
                return Err((Refusal::new(e.code(), e.to_string(), hint, exit), true));
            }
        }
    }
    // Step 9: the adapter.
    let adapter_refusal = |e: hcp_adapter::AdapterError| {
        let hint = matches!(e, hcp_adapter::AdapterError::ArgTooLong { .. })
            .then(|| "pass large content through a file in the working directory".to_owned());
        (
            Refusal::new(e.code(), e.to_string(), hint, e.exit_status()),
            true,
        )
    };
    let pin = pack.record.bin(&allowed.plan.program).ok_or_else(|| {
        (
            Refusal::new(
                "bin_missing",
                format!(
                    "program `{}` has no pin in the install record",
                    allowed.plan.program
                ),
                Some(format!(
                    "reinstall with `hcp install --force`: pack `{}`",
                    pack.id
                )),
                127,
            ),
            true,
        )
    })?;
    let bin_pin = BinPin {
        path: pin.path.clone(),
        sha256: pin.sha256.parse().map_err(|_| {
            (
                Refusal::new(
                    "store_damaged",
                    format!("pin of `{}` is not a sha256 digest", pin.program),
                    None,
                    crate::exit::EX_IOERR,
                ),
                true,
            )
        })?,
        fingerprint: super::pins::cached(&pack.dir, pin),
    };
    let verified = hcp_adapter::verify_bin(&bin_pin).map_err(|e| {
        let (r, a) = adapter_refusal(e);
        let hint = Some(format!("the program changed or moved since install; review it, then `hcp install --force` the pack `{}`", pack.id));
        (Refusal { hint, ..r }, a)
    })?;
    if verified.hashed() {
        super::pins::remember(&pack.dir, &bin_pin, &verified);
    }
    let session_values = SessionValues {
        principal_id: principal.id().to_owned(),
        project_id: allowed.project.clone(),
        workdir: allowed.workdir.clone(),
    };
    let argv = hcp_adapter::render(&allowed.plan.args, &values, &session_values, &verb_key)
        .map_err(adapter_refusal)?;
    let mut child_env = ChildEnv::from_parent(env.parent_env.iter().cloned());
    if is_running_hcp(verified.path()) {
        // The bootstrap pack (hcp-cli) wraps hcp itself: it reads this store (DESIGN.md).
        child_env = child_env.hcp_home(env.home.root());
        if principal != Principal::Owner {
            // …as the caller, never as the owner: an agent granted hcp-cli does not read
            // the owner-only audit through it.
            child_env = child_env.not_the_owner();
        }
    }
    // The child's confinement (RUNTIME §5): resource limits for every child, and for
    // `local` land a Landlock ruleset over the sandbox and a private TMPDIR.
    let config = hcp_store::config::RuntimeConfig::load(env.home.root()).map_err(|e| {
        (
            Refusal::new(
                e.code(),
                e.to_string(),
                Some(
                    "fix `config.json` in the store; every call is refused until it parses".into(),
                ),
                e.exit_status(),
            ),
            true,
        )
    })?;
    let mut sandbox_policy = crate::commands::doctor::sandbox_policy(&config);
    sandbox_policy.limits = sandbox_policy.limits.tightened(&env.limit_overrides);
    let mut private_tmp = None;
    let confinement = if allowed.land == hcp_model::Land::Local {
        child_env = child_env.home(&allowed.workdir);
        let base = match config.sandbox.tmpdir {
            hcp_store::config::TmpdirMode::Memory => hcp_adapter::PrivateTmp::default_base(),
            hcp_store::config::TmpdirMode::System => std::env::temp_dir(),
        };
        hcp_adapter::PrivateTmp::sweep(&base);
        let tmp = hcp_adapter::PrivateTmp::create_in(&base).map_err(adapter_refusal)?;
        child_env = child_env.tmpdir(tmp.path());
        // The store is never writable from a sandbox. Homes (the caller's `$HOME` and
        // every home in /etc/passwd: the environment alone could hide the user's) may
        // hold sandboxes, outside their dot-directories, but may not be or lie in one.
        let not_above = user_homes(
            env.parent_env
                .iter()
                .filter(|(k, _)| k == "HOME")
                .map(|(_, v)| std::path::PathBuf::from(v)),
        );
        let protected = [env.home.root().to_path_buf()];
        let paths = hcp_adapter::SandboxPaths {
            workdir: &allowed.workdir,
            tmpdir: tmp.path(),
            bin: verified.path(),
            extra_ro: &[],
            protected: &protected,
            not_above: &not_above,
        };
        let (c, report) = hcp_adapter::Confinement::for_local_land(&paths, &sandbox_policy)
            .map_err(adapter_refusal)?;
        facts
            .audit_extra
            .insert("sandbox".into(), report.summary().into());
        facts
            .result_extra
            .insert("sandbox".into(), report.summary().into());
        private_tmp = Some(tmp);
        c
    } else {
        hcp_adapter::Confinement::with_limits(&sandbox_policy.limits)
    };
    // A child never outlives a killed hcp (SIGKILL cannot be caught).
    let confinement = confinement.die_with_parent();
    let child_env = layer_child_env(
        child_env,
        &pack,
        &verb_key,
        principal.id(),
        &allowed,
        credential.as_ref().map(|c| &c.secret),
    )
    .map_err(adapter_refusal)?;
    let argv0 = pack
        .manifest
        .cli_bin
        .clone()
        .unwrap_or_else(|| allowed.plan.program.clone());
    let limits = Limits {
        timeout: call.timeout.unwrap_or(hcp_adapter::DEFAULT_TIMEOUT),
        ..Limits::default()
    };
    let inv = Invocation {
        bin: &verified,
        argv0: argv0.into(),
        args: argv,
        env: &child_env,
        cwd: allowed.workdir.clone(),
        limits,
        confine: Some(&confinement),
        cancel,
    };
    // Fail closed: a call whose record could not be written is not run.
    AuditLog::new(&env.home).ensure_writable().map_err(|e| {
        (
            Refusal::new(
                e.code(),
                format!("the audit trail cannot be written, so nothing runs: {e}"),
                None,
                crate::exit::EX_IOERR,
            ),
            false,
        )
    })?;
    let run = hcp_adapter::run(&inv);
    if let Some(tmp) = private_tmp {
        // Best effort: a leftover directory is private (0700) and holds nothing of hcp's.
        let _ = tmp.remove();
    }
    let mut outcome = run.map_err(adapter_refusal)?;
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let (exit, code, error) = if outcome.timed_out {
        (
            crate::exit::TIMEOUT,
            Some("timeout".to_string()),
            Some(format!(
                "the verb ran past its timeout of {:.3} s",
                limits.timeout.as_secs_f64()
            )),
        )
    } else if outcome.cancelled {
        (
            // 128 + SIGINT: the caller went away (no face prints this status).
            130,
            Some("cancelled".to_string()),
            Some("the caller abandoned the call; its process group was ended".to_string()),
        )
    } else {
        (
            u8::try_from(outcome.exit_code.clamp(0, 255)).unwrap_or(1),
            None,
            None,
        )
    };
    let truncated = outcome.truncated();
    if let Some(c) = &credential {
        // The credential reaches the child only: a verb that prints it (its environment,
        // an error quoting it) does not hand it to the caller (RUNTIME §8).
        outcome.stdout = redact_credential(&outcome.stdout, &c.secret);
        outcome.stderr = redact_credential(&outcome.stderr, &c.secret);
    }
    if let Some(sig) = outcome
        .signal
        .filter(|_| !outcome.timed_out && !outcome.cancelled)
    {
        // A limit the kernel enforced ends the child with a signal: say which.
        facts.result_extra.insert("signal".into(), sig.into());
        facts
            .result_extra
            .insert("signal_name".into(), signal_name(sig).into());
        facts.audit_extra.insert("signal".into(), sig.into());
    }
    let mut stdout = std::mem::take(&mut outcome.stdout);
    let mut withheld = false;
    if let (Some(rp), Some(s)) = (&runtime_policy, &session) {
        let tool = format!("{}.{}", pack.id, verb_key);
        let post = super::policy::post(rp, s, &tool, &stdout, &outcome.stderr);
        outcome.stderr = post.stderr;
        facts
            .audit_extra
            .insert("post_rule".into(), post.rule.clone().into());
        match post.stdout {
            Some(b) => stdout = b,
            None => {
                stdout = Vec::new();
                withheld = true;
            }
        }
    }
    let (exit, code, error) = if withheld && code.is_none() {
        (
            77,
            Some("output_withheld".to_string()),
            Some("the runtime policy withheld the verb's output".to_string()),
        )
    } else {
        (exit, code, error)
    };
    let entry = Entry {
        principal: principal.id().to_owned(),
        project: allowed.project.clone(),
        pack_id: Some(pack.id.to_string()),
        verb_key: verb_key.clone(),
        operation: Some(allowed.operation),
        land: Some(allowed.land),
        decision: audit::Decision::Allow,
        code: code.clone(),
        args_digest: facts.args_digest.clone().unwrap_or_default(),
        exit_code: Some(outcome.exit_code),
        duration_ms,
        extra: std::mem::take(&mut facts.audit_extra),
    };
    let audit_id = match AuditLog::new(&env.home).append(&entry) {
        Ok(a) => Some(a.id),
        Err(e) => {
            // The child ran; say so, and say the audit failed.
            return Err((
                Refusal::new(
                    e.code(),
                    format!("the verb ran, but its audit record could not be written: {e}"),
                    None,
                    crate::exit::EX_IOERR,
                ),
                false,
            ));
        }
    };
    let stdout_text = String::from_utf8_lossy(&stdout).into_owned();
    let data = if outcome.stdout_truncated {
        serde_json::Value::Null
    } else {
        serde_json::from_str(&stdout_text).unwrap_or(serde_json::Value::Null)
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
        audit_id,
        extra: std::mem::take(&mut facts.result_extra),
    };
    Ok(Answer {
        result,
        exit,
        stdout,
        stderr: outcome.stderr,
    })
}

/// `bytes` with every string value of a credential (of 4 bytes or more) replaced by
/// `[redacted]`, as written and as it appears inside a JSON string. Output that is not
/// UTF-8 is read lossily when it holds a value.
pub fn redact_credential(
    bytes: &[u8],
    secret: &serde_json::Map<String, serde_json::Value>,
) -> Vec<u8> {
    let mut forms: Vec<String> = Vec::new();
    for s in secret
        .values()
        .filter_map(serde_json::Value::as_str)
        .filter(|s| s.len() >= 4)
    {
        forms.push(s.to_owned());
        if let Ok(q) = serde_json::to_string(s) {
            forms.push(q[1..q.len() - 1].to_owned());
        }
    }
    let text = String::from_utf8_lossy(bytes);
    if !forms.iter().any(|f| text.contains(f.as_str())) {
        return bytes.to_vec();
    }
    let mut out = text.into_owned();
    for f in &forms {
        out = out.replace(f.as_str(), "[redacted]");
    }
    out.into_bytes()
}

/// The last layers of a child's environment (RUNTIME §5), after the parent's allowed
/// names and the land's `HOME`/`TMPDIR`: the pack's `wrap.agent_env`, the call's `HCP_*`
/// variables, then the binding. Shared by exec and sense.
///
/// # Errors
/// The adapter's `env_refused` for an `agent_env` name or value it refuses.
pub fn layer_child_env(
    child_env: ChildEnv,
    pack: &InstalledPack,
    verb_key: &str,
    principal_id: &str,
    allowed: &hcp_gate::Allowed,
    secret: Option<&serde_json::Map<String, serde_json::Value>>,
) -> Result<ChildEnv, hcp_adapter::AdapterError> {
    let mut child_env = child_env;
    if let Some(agent_env) = pack
        .manifest
        .wrap
        .as_ref()
        .and_then(|w| w.agent_env.as_ref())
    {
        child_env = child_env.agent_env(agent_env.iter().map(|(k, v)| (k.as_str(), v.as_str())))?;
    }
    child_env = child_env.call(&CallVars {
        pack_id: pack.id.as_str(),
        verb_key,
        principal_id,
        project_id: allowed.project.as_deref(),
        workdir: &allowed.workdir,
    })?;
    if let Some(s) = secret {
        child_env = child_env.binding(s)?;
    }
    Ok(child_env)
}

/// The name and meaning of a signal that ended a child, for the answer.
fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGKILL => {
            "SIGKILL (killed: after the timeout's grace, the CPU-time limit's hard stop, or from outside)"
        }
        libc::SIGTERM => "SIGTERM (the timeout)",
        libc::SIGXCPU => "SIGXCPU (the CPU-time limit)",
        libc::SIGXFSZ => "SIGXFSZ (the file-size limit)",
        libc::SIGSEGV => "SIGSEGV (a crash, or the address-space limit)",
        libc::SIGABRT => "SIGABRT (the program aborted)",
        libc::SIGPIPE => "SIGPIPE",
        _ => "a signal",
    }
}

/// Whether `bin` is the very file of the running hcp (same device and inode).
fn is_running_hcp(bin: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let (Ok(me), Ok(it)) = (std::fs::metadata("/proc/self/exe"), std::fs::metadata(bin)) else {
        return false;
    };
    me.dev() == it.dev() && me.ino() == it.ino()
}

/// The principal a refusal before step 2 is recorded under: `owner` without a session,
/// the session's principal when its token is valid, `unknown` otherwise.
fn principal_label(env: &ExecEnv) -> String {
    match &env.session_token {
        None => "owner".into(),
        Some(tok) => session::resolve(&env.home, &tok.to_string_lossy(), Timestamp::now())
            .map(|s| s.principal.as_str().to_owned())
            .unwrap_or_else(|_| "unknown".into()),
    }
}

/// Step 1 of RUNTIME §5: `PACK.VERB` (each reading of the dotted target), else a verb
/// key unique across active packs.
fn resolve(env: &ExecEnv, call: &Call) -> Result<(InstalledPack, String), Refusal> {
    let load = |id: &str| -> Result<Option<InstalledPack>, Refusal> {
        match pack::load(&env.home, id) {
            Ok(p) => Ok(Some(p)),
            Err(PackError::NotInstalled { .. }) => Ok(None),
            Err(e) => Err(Refusal::new(
                e.code(),
                e.to_string(),
                None,
                crate::exit::EX_IOERR,
            )),
        }
    };
    if let Some(id) = &call.pack_id {
        let Some(p) = load(id)? else {
            return Err(Refusal::new(
                Code::UnknownVerb.as_str(),
                format!("pack `{id}` is not installed"),
                Some("`hcp list` shows the installed packs".into()),
                66,
            ));
        };
        if !p.manifest.verbs.contains_key(&call.target) {
            let known: Vec<String> = p
                .manifest
                .verbs
                .keys()
                .map(|k| format!("{id}.{k}"))
                .collect();
            return Err(unknown(&call.target, known));
        }
        return Ok((p, call.target.clone()));
    }
    // The readings come in pairs with the same pack id (`echo.say` reads as `echo` +
    // `say`, then `echo` + `echo.say`): each pack is loaded once.
    let mut loaded: Option<(&str, Option<InstalledPack>)> = None;
    for (id, verb) in hcp_gate::target::readings(&call.target) {
        if hcp_model::validate_pack_id(id).is_err() {
            continue;
        }
        if loaded.as_ref().is_none_or(|(l, _)| *l != id) {
            loaded = Some((id, load(id)?));
        }
        if let Some((_, slot)) = &mut loaded
            && slot
                .as_ref()
                .is_some_and(|p| p.manifest.verbs.contains_key(verb))
            && let Some(p) = slot.take()
        {
            return Ok((p, verb.to_owned()));
        }
    }
    // A bare verb key: unique across active packs.
    let ids = pack::active_ids(&env.home)
        .map_err(|e| Refusal::new(e.code(), e.to_string(), None, crate::exit::EX_IOERR))?;
    let mut hits = Vec::new();
    let mut known = Vec::new();
    for id in ids {
        if let Some(p) = load(id.as_str())? {
            for k in p.manifest.verbs.keys() {
                known.push(format!("{id}.{k}"));
            }
            if p.manifest.verbs.contains_key(&call.target) {
                hits.push(p);
            }
        }
    }
    match hits.len() {
        0 => Err(unknown(&call.target, known)),
        1 => {
            let p = hits.remove(0);
            Ok((p, call.target.clone()))
        }
        _ => {
            let names: Vec<String> = hits
                .iter()
                .map(|p| format!("`{}.{}`", p.id, call.target))
                .collect();
            Err(Refusal::new(
                Code::AmbiguousVerb.as_str(),
                format!(
                    "verb `{}` is in several active packs: {}",
                    call.target,
                    names.join(", ")
                ),
                Some("name the pack: `hcp exec PACK.VERB`".into()),
                66,
            ))
        }
    }
}

fn unknown(target: &str, known: Vec<String>) -> Refusal {
    let s = hcp_gate::target::suggest(target, known.iter().map(String::as_str));
    let hint = if s.is_empty() {
        "`hcp list` shows the installed packs; `hcp show PACK` their verbs".to_string()
    } else {
        format!(
            "did you mean {}?",
            s.iter()
                .map(|x| format!("`{x}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    Refusal::new(
        Code::UnknownVerb.as_str(),
        format!("no active verb `{target}`"),
        Some(hint),
        66,
    )
}

/// A refusal of the runtime policy (RUNTIME §7): exit 77.
fn policy_refusal(r: super::policy::PolicyRefusal) -> Refusal {
    Refusal::new(r.code, r.message, r.hint, crate::exit::EX_NOPERM)
}

fn audit_refusal(env: &ExecEnv, facts: &Facts, r: &Refusal, started: Instant) -> Option<String> {
    let entry = Entry {
        principal: facts.principal.clone().unwrap_or_else(|| "unknown".into()),
        project: facts.project.clone(),
        pack_id: facts.pack_id.clone(),
        verb_key: facts.verb_key.clone().unwrap_or_default(),
        operation: facts.operation,
        land: facts.land,
        decision: audit::Decision::Deny,
        code: Some(r.code.clone()),
        args_digest: facts
            .args_digest
            .clone()
            .unwrap_or_else(|| audit::args_digest(std::iter::empty())),
        exit_code: None,
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        extra: facts.audit_extra.clone(),
    };
    AuditLog::new(&env.home).append(&entry).ok().map(|a| a.id)
}

fn refusal_answer(facts: &Facts, r: Refusal, audit_id: Option<String>, started: Instant) -> Answer {
    let result = ExecResult {
        ok: false,
        pack_id: facts.pack_id.clone(),
        verb_key: facts.verb_key.clone(),
        operation: facts.operation.map(|o| o.to_string()),
        land: facts.land.map(|l| l.to_string()),
        error: Some(r.message),
        code: Some(r.code),
        hint: r.hint,
        exit_code: None,
        stdout: None,
        stderr: None,
        data: serde_json::Value::Null,
        truncated: false,
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        audit_id,
        extra: facts.result_extra.clone(),
    };
    Answer {
        result,
        exit: r.exit,
        stdout: Vec::new(),
        stderr: Vec::new(),
    }
}

/// The refusal answer of a call that never reached the engine (a bad envelope, a usage
/// error): not audited, as no principal was resolved.
pub fn early_refusal(code: &str, message: String, hint: Option<String>, exit: u8) -> Answer {
    refusal_answer(
        &Facts::default(),
        Refusal::new(code, message, hint, exit),
        None,
        Instant::now(),
    )
}

/// Home directories a sandbox may not be, hold, or lie in a dot-directory of:
/// `from_env` (the caller's `$HOME`) and every home in /etc/passwd (read directly, without
/// NSS; a user only known to a directory service is covered by `$HOME` alone), except
/// `/` and homes inside `hcp_adapter::NOT_A_SANDBOX` directories (no sandbox lies there
/// anyway). Deduplicated, in that order.
fn user_homes(from_env: impl Iterator<Item = std::path::PathBuf>) -> Vec<std::path::PathBuf> {
    let mut homes: Vec<std::path::PathBuf> = from_env.filter(|h| h.is_absolute()).collect();
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    for home in passwd
        .lines()
        .filter_map(|l| l.split(':').nth(5))
        .map(std::path::PathBuf::from)
    {
        let system = hcp_adapter::NOT_A_SANDBOX
            .iter()
            .any(|d| home.starts_with(d));
        if home.is_absolute()
            && home != std::path::Path::new("/")
            && !system
            && !homes.contains(&home)
        {
            homes.push(home);
        }
    }
    homes
}
