//! The order of checks of RUNTIME §5, steps 1–6, as one pure function.

use crate::args::{check_args, check_operation_args};
use crate::code::{Code, Step};
use hcp_model::manifest::{CommandPlan, PlanError};
use hcp_model::template::{Element, SessionVar};
use hcp_model::{
    ArgValue, Capability, Land, Manifest, Operation, Plane, PolicyFile, Principal, Transport,
};
use jiff::Timestamp;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The face a call came through; a pack offers faces in `transports`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Face {
    /// `hcp exec PACK.VERB …`.
    Cli,
    /// `hcp exec --envelope -`.
    Json,
    /// `hcp mcp`.
    Mcp,
}

impl Face {
    fn transport(self) -> Transport {
        match self {
            Self::Cli => Transport::Cli,
            Self::Json => Transport::JsonExec,
            Self::Mcp => Transport::Mcp,
        }
    }
}

/// An installed pack as the gate sees it.
#[derive(Debug, Clone, Copy)]
pub struct PackView<'a> {
    /// The manifest.
    pub manifest: &'a Manifest,
    /// The policy.
    pub policy: &'a PolicyFile,
    /// Whether the pack is active (RUNTIME §5 step 1).
    pub active: bool,
    /// When a reinstall last changed the pack's files (RUNTIME §3, the rug-pull guard).
    pub content_changed_at: Option<Timestamp>,
}

/// The grants a principal holds on the pack: capability and when it was granted. The
/// union of the pack's grants and `*` grants.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GrantView {
    /// `(capability, granted_at)`.
    pub held: Vec<(Capability, Timestamp)>,
}

/// Everything the gate reads besides the call itself.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// Who is calling, and for which project (`HCP_PROJECT`).
    pub principal: &'a Principal,
    /// The resolved pack.
    pub pack: PackView<'a>,
    /// The resolved verb key.
    pub verb_key: &'a str,
    /// The face the call came through.
    pub face: Face,
    /// The principal's grants on the pack (ignored for the owner).
    pub grants: &'a GrantView,
    /// The caller's current directory (the sandbox working directory when the session
    /// names none).
    pub cwd: &'a Path,
}

/// An allowed call: what the adapter needs.
#[derive(Debug, Clone, PartialEq)]
pub struct Allowed {
    /// The command to run; empty (no program, no arguments) for a `kind: openapi` verb,
    /// which runs none ([`check_operation`]).
    pub plan: CommandPlan,
    /// Argument values by name, without `confirm`/`apply`.
    pub values: BTreeMap<String, ArgValue>,
    /// The verb's operation.
    pub operation: Operation,
    /// The verb's land.
    pub land: Land,
    /// The working directory of the child (the sandbox working directory for `local`).
    pub workdir: PathBuf,
    /// The project of the call, when there is one.
    pub project: Option<String>,
    /// Whether the call said `confirm`/`apply`.
    pub confirmed: bool,
}

/// A refusal: code, the step that raised it, message, hint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refusal {
    /// The stable code.
    pub code: Code,
    /// The step of RUNTIME §5.
    pub step: Step,
    /// The message; for the confirm gate exactly `confirm required` (§4.5.3).
    pub message: String,
    /// How to proceed.
    pub hint: Option<String>,
    /// The verb's operation, when known.
    pub operation: Option<Operation>,
    /// The verb's land, when known.
    pub land: Option<Land>,
}

/// The gate's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Run it.
    Allow(Box<Allowed>),
    /// Do not.
    Deny(Refusal),
}

fn deny(code: Code, step: Step, message: impl Into<String>, hint: Option<String>) -> Decision {
    Decision::Deny(Refusal {
        code,
        step,
        message: message.into(),
        hint,
        operation: None,
        land: None,
    })
}

/// `pack_inactive` (step 1): pack `pack_id` is installed but not active.
pub fn inactive(pack_id: &str) -> Refusal {
    Refusal {
        code: Code::PackInactive,
        step: Step::Target,
        message: format!("pack `{pack_id}` is installed but not active"),
        hint: Some(format!("the owner runs `hcp activate {pack_id}`")),
        operation: None,
        land: None,
    }
}

/// Runs steps 1–6 of RUNTIME §5 for a resolved target: the pack is active and offers the
/// face, the principal may call this plane, the arguments (step 3), the grant (step 4),
/// the land (step 5) and the confirm gate (step 6, §4.5). The runtime policy, binding mint
/// and adapter follow in the caller.
pub fn check<'a>(
    ctx: &Context<'_>,
    args: impl IntoIterator<Item = (&'a String, &'a ArgValue)> + Clone,
) -> Decision {
    check_verb(ctx, None, args)
}

/// [`check`] for a verb of a `kind: openapi` pack (RUNTIME §1.3), whose compiled operation
/// `op` (the pinned copy install kept) replaces the command template: step 3 checks the
/// arguments against the operation's parameters and body properties, typed and bounded
/// by the document ([`crate::args::check_operation_args`]); every other step is the same.
/// The answer's [`Allowed::plan`] is empty: such a verb runs no command.
pub fn check_operation<'a>(
    ctx: &Context<'_>,
    op: &hcp_openapi::Operation,
    args: impl IntoIterator<Item = (&'a String, &'a ArgValue)> + Clone,
) -> Decision {
    check_verb(ctx, Some(op), args)
}

fn check_verb<'a>(
    ctx: &Context<'_>,
    operation: Option<&hcp_openapi::Operation>,
    args: impl IntoIterator<Item = (&'a String, &'a ArgValue)> + Clone,
) -> Decision {
    let m = ctx.pack.manifest;
    let verb = ctx.verb_key;
    // Step 1: target.
    if !ctx.pack.active {
        return Decision::Deny(inactive(&m.id));
    }
    if !m.offers(ctx.face.transport()) {
        return deny(
            Code::TransportNotOffered,
            Step::Target,
            format!("pack `{}` is not offered on this face (`transports`)", m.id),
            None,
        );
    }
    let Some(entry) = ctx.pack.policy.verbs.get(verb) else {
        return deny(
            Code::UnknownVerb,
            Step::Target,
            format!("pack `{}` has no verb `{verb}`", m.id),
            None,
        );
    };
    let planned = match operation {
        // A `kind: openapi` verb runs no command: its request is built from `operation`.
        Some(_) => Ok(CommandPlan {
            program: String::new(),
            args: Vec::new(),
        }),
        None => m.plan_verb(verb),
    };
    let plan = match planned {
        Ok(p) => p,
        Err(PlanError::KindUnsupported) => {
            return deny(
                Code::KindUnsupported,
                Step::Target,
                format!(
                    "pack `{}` is `kind: openapi`, which this runtime does not execute",
                    m.id
                ),
                None,
            );
        }
        Err(e) => {
            return deny(
                Code::UnknownVerb,
                Step::Target,
                format!("verb `{verb}` cannot run: {e}"),
                None,
            );
        }
    };
    let with_entry = |d: Decision| match d {
        Decision::Deny(mut r) => {
            r.operation = Some(entry.operation);
            r.land = Some(entry.privacy.land);
            Decision::Deny(r)
        }
        a => a,
    };
    // Step 2: principal (the session itself was resolved by the caller).
    if m.plane == Plane::Control && !ctx.principal.is_owner() {
        return with_entry(deny(
            Code::ControlPlane,
            Step::Principal,
            format!(
                "pack `{}` is a control-plane pack; only the owner may call it",
                m.id
            ),
            None,
        ));
    }
    // Step 3: arguments.
    let checked = match operation {
        Some(op) => check_operation_args(op, args, ctx.face == Face::Cli),
        None => check_args(&plan, args, ctx.face == Face::Cli),
    };
    let (values, confirmed) = match checked {
        Ok(v) => v,
        Err(r) => return with_entry(deny(r.code, Step::Arguments, r.message, r.hint)),
    };
    // Step 4: grants (§4.6, §9.4).
    if !ctx.principal.is_owner() {
        let mut needed = vec![Capability::for_operation(entry.operation)];
        if m.connect_verb() == Some(verb) {
            needed.push(Capability::PackConnect);
        }
        for cap in needed {
            if let Err(r) = crate::grant::require(
                &ctx.principal.id,
                &m.id,
                ctx.grants.held.iter().copied(),
                cap,
                ctx.pack.content_changed_at,
            ) {
                return with_entry(Decision::Deny(r));
            }
        }
    }
    // Step 5: land (§4.3).
    let land = entry.privacy.land;
    let (project, workdir) = match land_obligations(ctx, land, &plan, "verb", verb) {
        Ok(pw) => pw,
        Err(d) => return with_entry(d),
    };
    // Step 6: confirm (§4.5.2–3).
    if entry.needs_confirm() && !confirmed {
        return with_entry(deny(
            Code::ConfirmRequired,
            Step::Confirm,
            "confirm required",
            Some(format!(
                "call again with {} once the effect of `{verb}` is intended",
                match ctx.face {
                    Face::Cli => "`--confirm`",
                    Face::Json => "`\"confirm\": true` inside `args` (not beside it)",
                    Face::Mcp => "`\"confirm\": true` among the tool's arguments",
                }
            )),
        ));
    }
    Decision::Allow(Box::new(Allowed {
        plan,
        values,
        operation: entry.operation,
        land,
        workdir,
        project,
        confirmed,
    }))
}

/// Step 5 (§4.3): the project a `brain` call (or a template using `{{@project_id}}`)
/// needs, and the working directory (the session's workdir, else the caller's directory).
fn land_obligations(
    ctx: &Context<'_>,
    land: Land,
    plan: &CommandPlan,
    what: &str,
    key: &str,
) -> Result<(Option<String>, PathBuf), Decision> {
    let needs_project = land == Land::Brain
        || plan.args.iter().any(|e| {
            matches!(
                e,
                Element::Session {
                    var: SessionVar::ProjectId,
                    ..
                }
            )
        });
    let project = resolve_project(ctx)?;
    if needs_project && project.is_none() {
        let hint = match &ctx.principal.session {
            None => "set `HCP_PROJECT`, or run the call in a session started with `--project`"
                .to_string(),
            Some(s) if s.projects.len() > 1 => {
                format!(
                    "set `HCP_PROJECT` to one of the session's projects: {}",
                    s.projects.join(", ")
                )
            }
            Some(_) => "the owner starts the session with `--project`".to_string(),
        };
        return Err(deny(
            Code::ProjectRequired,
            Step::Land,
            format!("{what} `{key}` works in `brain` land and needs a project"),
            Some(hint),
        ));
    }
    let workdir = match ctx
        .principal
        .session
        .as_ref()
        .and_then(|s| s.workdir.as_ref())
    {
        Some(w) => w.clone(),
        None => ctx.cwd.to_path_buf(),
    };
    Ok((project, workdir))
}

/// What the gate allowed of one stimulus ref (`hcp sense`, RUNTIME §8).
#[derive(Debug, Clone, PartialEq)]
pub struct StimulusAllowed {
    /// The trigger's command, when it has one (`cli`); `None` for a stimulus only the
    /// runtime records (`binding.degraded`).
    pub plan: Option<CommandPlan>,
    /// The stimulus's land.
    pub land: Land,
    /// The working directory of the trigger.
    pub workdir: PathBuf,
    /// The project of the call, when there is one.
    pub project: Option<String>,
}

/// Steps 1–6 of RUNTIME §5 for the stimulus ref `ctx.verb_key` of `hcp sense` (RUNTIME
/// §8), the same checks a verb gets: the pack is active and declares the stimulus, its
/// policy entry is a `read` (`write_stimulus`: sense cannot write), a control-plane pack
/// only for the owner, the trigger's arguments (it takes none), `sense.enable` (with the
/// rug-pull guard), and, for a trigger with a command, its land and project. `ctx.face`
/// and `ctx.grants` are read as for a verb; the transport is not checked (sense is not a
/// transport).
pub fn check_stimulus(ctx: &Context<'_>) -> Result<StimulusAllowed, Refusal> {
    let m = ctx.pack.manifest;
    let reference = ctx.verb_key;
    let refuse = |d: Decision| match d {
        Decision::Deny(r) => r,
        Decision::Allow(_) => Refusal {
            code: Code::InternalError,
            step: Step::Target,
            message: "the gate allowed a refusal".into(),
            hint: None,
            operation: None,
            land: None,
        },
    };
    // Step 1: target.
    if !ctx.pack.active {
        return Err(inactive(&m.id));
    }
    let trigger = m
        .stimulus_triggers
        .iter()
        .find(|t| t.reference == reference);
    let (Some(trigger), Some(entry)) = (trigger, ctx.pack.policy.stimuli.get(reference)) else {
        return Err(refuse(deny(
            Code::UnknownStimulus,
            Step::Target,
            format!("pack `{}` declares no stimulus `{reference}`", m.id),
            None,
        )));
    };
    if entry.operation != Operation::Read {
        // Lint's `write_stimulus` makes this impossible for an installed pack.
        return Err(refuse(deny(
            Code::WriteStimulus,
            Step::Target,
            format!(
                "stimulus `{reference}` of pack `{}` is not a `read` in its policy; sense cannot write",
                m.id
            ),
            None,
        )));
    }
    let plan = match &trigger.cli {
        None => None,
        Some(_) => Some(match m.plan_trigger(reference) {
            Ok(p) => p,
            Err(PlanError::KindUnsupported) => {
                return Err(refuse(deny(
                    Code::KindUnsupported,
                    Step::Target,
                    format!(
                        "pack `{}` is `kind: openapi`, which this runtime does not execute",
                        m.id
                    ),
                    None,
                )));
            }
            Err(e) => {
                return Err(refuse(deny(
                    Code::UnknownStimulus,
                    Step::Target,
                    format!("trigger `{reference}` cannot run: {e}"),
                    None,
                )));
            }
        }),
    };
    let with_entry = |mut r: Refusal| {
        r.operation = Some(entry.operation);
        r.land = Some(entry.privacy.land);
        r
    };
    // Step 2: principal.
    if m.plane == Plane::Control && !ctx.principal.is_owner() {
        return Err(with_entry(refuse(deny(
            Code::ControlPlane,
            Step::Principal,
            format!(
                "pack `{}` is a control-plane pack; only the owner may sense it",
                m.id
            ),
            None,
        ))));
    }
    // Step 3: arguments (a trigger takes none).
    if let Some(p) = &plan {
        let none: Vec<(String, ArgValue)> = Vec::new();
        if let Err(r) = check_args(p, none.iter().map(|(k, v)| (k, v)), false) {
            return Err(with_entry(refuse(deny(
                r.code,
                Step::Arguments,
                r.message,
                r.hint,
            ))));
        }
    }
    // Step 4: grants.
    if !ctx.principal.is_owner() {
        crate::grant::require(
            &ctx.principal.id,
            &m.id,
            ctx.grants.held.iter().copied(),
            Capability::SenseEnable,
            ctx.pack.content_changed_at,
        )
        .map_err(with_entry)?;
    }
    // Step 5: land, for a trigger that runs.
    let land = entry.privacy.land;
    let (project, workdir) = match &plan {
        Some(p) => land_obligations(ctx, land, p, "trigger", reference)
            .map_err(|d| with_entry(refuse(d)))?,
        None => (None, ctx.cwd.to_path_buf()),
    };
    // Step 6: confirm (§4.5): a `read` never needs it (lint: `confirm_on_read`).
    Ok(StimulusAllowed {
        plan,
        land,
        workdir,
        project,
    })
}

/// The project of a call: `HCP_PROJECT` when set (a session must be a member), else a
/// session's only project.
fn resolve_project(ctx: &Context<'_>) -> Result<Option<String>, Decision> {
    match (&ctx.principal.session, ctx.principal.project.as_deref()) {
        (None, p) => Ok(p.map(str::to_owned)),
        (Some(s), Some(p)) => {
            if s.projects.iter().any(|q| q == p) {
                Ok(Some(p.to_owned()))
            } else {
                Err(deny(
                    Code::NotProjectMember,
                    Step::Land,
                    format!(
                        "principal `{}` is not a member of project `{p}`",
                        ctx.principal.id
                    ),
                    Some(format!(
                        "the session's projects are: {}",
                        if s.projects.is_empty() {
                            "none".into()
                        } else {
                            s.projects.join(", ")
                        }
                    )),
                ))
            }
        }
        (Some(s), None) => Ok(if s.projects.len() == 1 {
            s.projects.first().cloned()
        } else {
            None
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hcp_model::{SessionFacts, parse_manifest, parse_policy};
    use pretty_assertions::assert_eq;

    const MANIFEST: &str = r#"{
      "id": "mail", "name": "Mail", "kind": "wrap", "cliBin": "mail",
      "binding": { "mode": "user" },
      "wrap": { "bin": "hcp-example-mail" },
      "verbs": {
        "mail.list":    { "description": "List.", "cli": ["mail", "list", "--limit={{limit?}}"] },
        "mail.send":    { "description": "Send.", "cli": ["mail", "send", "{{to}}", "{{body}}", "--confirm"] },
        "mail.connect": { "description": "Connect.", "cli": ["mail", "connect"] },
        "notes.create": { "description": "Note.", "cli": ["mail", "note", "{{@project_id}}", "{{text}}"] }
      }
    }"#;
    const POLICY: &str = r#"{
      "surface_id": "mail", "version": 1,
      "verbs": {
        "mail.list":    { "operation": "read",  "privacy": { "land": "personal" } },
        "mail.send":    { "operation": "write", "privacy": { "land": "personal" }, "confirm": true },
        "mail.connect": { "operation": "write", "privacy": { "land": "personal" } },
        "notes.create": { "operation": "write", "privacy": { "land": "brain" } }
      }
    }"#;

    struct W {
        m: Manifest,
        p: PolicyFile,
    }

    fn w() -> W {
        W {
            m: parse_manifest(MANIFEST).unwrap(),
            p: parse_policy(POLICY).unwrap(),
        }
    }

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn owner() -> Principal {
        Principal::owner(None)
    }

    fn agent(projects: &[&str]) -> Principal {
        let s = SessionFacts {
            projects: projects.iter().map(|s| s.to_string()).collect(),
            workdir: Some("/sandbox".into()),
            ..SessionFacts::default()
        };
        Principal::of_session("agent-1".into(), s, None)
    }

    fn decide(
        w: &W,
        who: &Principal,
        verb: &str,
        grants: &[(&str, &str)],
        changed: Option<&str>,
        project: Option<&str>,
        args: &[(&str, ArgValue)],
    ) -> Result<Allowed, Code> {
        let g = GrantView {
            held: grants
                .iter()
                .map(|(c, at)| (c.parse().unwrap(), t(at)))
                .collect(),
        };
        let who = Principal {
            project: project.map(str::to_owned),
            ..who.clone()
        };
        let ctx = Context {
            principal: &who,
            pack: PackView {
                manifest: &w.m,
                policy: &w.p,
                active: true,
                content_changed_at: changed.map(t),
            },
            verb_key: verb,
            face: Face::Cli,
            grants: &g,
            cwd: Path::new("/cwd"),
        };
        let owned: Vec<(String, ArgValue)> = args
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        match check(&ctx, owned.iter().map(|(k, v)| (k, v))) {
            Decision::Allow(a) => Ok(*a),
            Decision::Deny(r) => Err(r.code),
        }
    }

    const T0: &str = "2026-01-01T00:00:00Z";

    fn s(v: &str) -> ArgValue {
        ArgValue::String(v.into())
    }

    #[test]
    fn owner_reads_in_the_callers_directory() {
        let w = w();
        let a = decide(&w, &owner(), "mail.list", &[], None, None, &[]).unwrap();
        assert_eq!(a.workdir, PathBuf::from("/cwd"));
        assert_eq!(a.operation, Operation::Read);
    }

    #[test]
    fn confirm_gate_is_last_and_exact() {
        let w = w();
        let args = [("to", s("bob")), ("body", s("hi"))];
        assert_eq!(
            decide(&w, &owner(), "mail.send", &[], None, None, &args).unwrap_err(),
            Code::ConfirmRequired
        );
        let mut with = args.to_vec();
        with.push(("confirm", ArgValue::Bool(true)));
        assert!(decide(&w, &owner(), "mail.send", &[], None, None, &with).is_ok());
        // the agent without a grant is refused before the confirm gate
        assert_eq!(
            decide(&w, &agent(&[]), "mail.send", &[], None, None, &args).unwrap_err(),
            Code::MissingGrant
        );
        // arguments come before grants
        assert_eq!(
            decide(&w, &agent(&[]), "mail.send", &[], None, None, &[]).unwrap_err(),
            Code::ArgMissing
        );
    }

    #[test]
    fn the_confirm_refusal_says_exactly_confirm_required() {
        let w = w();
        let g = GrantView::default();
        let ctx = Context {
            principal: &owner(),
            pack: PackView {
                manifest: &w.m,
                policy: &w.p,
                active: true,
                content_changed_at: None,
            },
            verb_key: "mail.send",
            face: Face::Json,
            grants: &g,
            cwd: Path::new("/"),
        };
        let args: Vec<(String, ArgValue)> = vec![("to".into(), s("a")), ("body".into(), s("b"))];
        match check(&ctx, args.iter().map(|(k, v)| (k, v))) {
            Decision::Deny(r) => {
                assert_eq!(r.message, "confirm required");
                assert_eq!(r.step, Step::Confirm);
                // On the JSON face `confirm` goes inside `args`: a top-level one is
                // `bad_envelope`.
                assert_eq!(
                    r.hint.as_deref(),
                    Some(
                        "call again with `\"confirm\": true` inside `args` (not beside it) once the effect of `mail.send` is intended"
                    )
                );
            }
            d => panic!("{d:?}"),
        }
    }

    #[test]
    fn grants_and_the_rug_pull_guard() {
        let w = w();
        let who = agent(&[]);
        assert!(
            decide(
                &w,
                &who,
                "mail.list",
                &[("verb.exec.read", T0)],
                None,
                None,
                &[]
            )
            .is_ok()
        );
        assert_eq!(
            decide(
                &w,
                &who,
                "mail.list",
                &[("verb.exec.write", T0)],
                None,
                None,
                &[]
            )
            .unwrap_err(),
            Code::MissingGrant
        );
        // a grant older than the pack's last content change is suspended
        assert_eq!(
            decide(
                &w,
                &who,
                "mail.list",
                &[("verb.exec.read", T0)],
                Some("2026-02-01T00:00:00Z"),
                None,
                &[]
            )
            .unwrap_err(),
            Code::MissingGrant
        );
        // granted again after the change: allowed
        assert!(
            decide(
                &w,
                &who,
                "mail.list",
                &[
                    ("verb.exec.read", T0),
                    ("verb.exec.read", "2026-03-01T00:00:00Z")
                ],
                Some("2026-02-01T00:00:00Z"),
                None,
                &[]
            )
            .is_ok()
        );
        // the connect verb needs pack.connect as well as verb.exec.write
        assert_eq!(
            decide(
                &w,
                &who,
                "mail.connect",
                &[("verb.exec.write", T0)],
                None,
                None,
                &[]
            )
            .unwrap_err(),
            Code::MissingGrant
        );
        assert!(
            decide(
                &w,
                &who,
                "mail.connect",
                &[("verb.exec.write", T0), ("pack.connect", T0)],
                None,
                None,
                &[]
            )
            .is_ok()
        );
    }

    #[test]
    fn brain_land_needs_a_project_and_membership() {
        let w = w();
        let g = [("verb.exec.write", T0)];
        let text = [("text", s("hello"))];
        assert_eq!(
            decide(&w, &agent(&[]), "notes.create", &g, None, None, &text).unwrap_err(),
            Code::ProjectRequired
        );
        assert_eq!(
            decide(
                &w,
                &agent(&["p1", "p2"]),
                "notes.create",
                &g,
                None,
                None,
                &text
            )
            .unwrap_err(),
            Code::ProjectRequired
        );
        assert_eq!(
            decide(
                &w,
                &agent(&["p1"]),
                "notes.create",
                &g,
                None,
                Some("p9"),
                &text
            )
            .unwrap_err(),
            Code::NotProjectMember
        );
        let a = decide(&w, &agent(&["p1"]), "notes.create", &g, None, None, &text).unwrap();
        assert_eq!(a.project.as_deref(), Some("p1"));
        assert_eq!(a.workdir, PathBuf::from("/sandbox"));
        assert_eq!(
            decide(&w, &owner(), "notes.create", &[], None, None, &text).unwrap_err(),
            Code::ProjectRequired
        );
        assert!(decide(&w, &owner(), "notes.create", &[], None, Some("any"), &text).is_ok());
    }

    #[test]
    fn tenant_arguments_are_refused_before_grants() {
        let w = w();
        assert_eq!(
            decide(
                &w,
                &agent(&[]),
                "mail.list",
                &[],
                None,
                None,
                &[("tenant_id", s("other"))]
            )
            .unwrap_err(),
            Code::TenantInArgs
        );
    }

    #[test]
    fn stimuli_pass_the_same_steps_as_verbs() {
        let m = parse_manifest(
            r#"{"id": "feed", "name": "Feed", "kind": "wrap", "cliBin": "feed",
                "binding": {"mode": "public"}, "wrap": {"bin": "feed"},
                "stimulusTriggers": [
                  {"ref": "new", "cli": ["feed", "watch"]},
                  {"ref": "brainy", "cli": ["feed", "watch", "{{@project_id}}"]},
                  {"ref": "binding.degraded"}],
                "verbs": {"get": {"description": "Get.", "cli": ["feed", "get"]}}}"#,
        )
        .unwrap();
        let p = parse_policy(
            r#"{"surface_id": "feed", "version": 1,
                "verbs": {"get": {"operation": "read", "privacy": {"land": "personal"}}},
                "stimuli": {
                  "new": {"operation": "read", "privacy": {"land": "personal"}},
                  "brainy": {"operation": "read", "privacy": {"land": "brain"}},
                  "binding.degraded": {"operation": "read", "privacy": {"land": "personal"}}}}"#,
        )
        .unwrap();
        let check = |who: &Principal, r: &str, grants: &[(Capability, &str)]| {
            let g = GrantView {
                held: grants.iter().map(|(c, at)| (*c, t(at))).collect(),
            };
            let ctx = Context {
                principal: who,
                pack: PackView {
                    manifest: &m,
                    policy: &p,
                    active: true,
                    content_changed_at: None,
                },
                verb_key: r,
                face: Face::Cli,
                grants: &g,
                cwd: Path::new("/cwd"),
            };
            check_stimulus(&ctx).map_err(|e| e.code)
        };
        let a = check(&owner(), "new", &[]).unwrap();
        assert_eq!((a.plan.is_some(), a.land), (true, Land::Personal));
        // a stimulus only the runtime records has no command to plan
        assert!(
            check(&owner(), "binding.degraded", &[])
                .unwrap()
                .plan
                .is_none()
        );
        assert_eq!(check(&owner(), "nope", &[]), Err(Code::UnknownStimulus));
        let agent = agent(&["p1"]);
        assert_eq!(check(&agent, "new", &[]), Err(Code::MissingGrant));
        // a read grant is not sense.enable
        assert_eq!(
            check(&agent, "new", &[(Capability::VerbExecRead, T0)]),
            Err(Code::MissingGrant)
        );
        let g = [(Capability::SenseEnable, T0)];
        assert!(check(&agent, "new", &g).is_ok());
        assert_eq!(
            check(&agent, "brainy", &g).unwrap().project.as_deref(),
            Some("p1")
        );
        assert_eq!(check(&owner(), "brainy", &[]), Err(Code::ProjectRequired));
    }
}
