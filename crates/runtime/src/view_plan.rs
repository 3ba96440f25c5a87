//! `hcp show ID.VERB --view` (RUNTIME §5.1): the view a call of one verb gets, so that an
//! operator sees exactly what an agent can reach.
//!
//! [`describe`] builds the call's view the way every call's is built —
//! [`crate::prepare::describe_view`]: the inputs of [`crate::prepare::confine`] with the
//! verb's land and operation, the pinned bin, the principal's tenant home (`owner` by
//! default) or the project's, `config.json`'s paths, network and limits — and lists the plan
//! the child would mount (`hcp_adapter::View::describe`): the very data that builds the
//! mounts, never a second copy of the rules. Nothing runs, nothing is recorded, no tenant
//! home is made. What the kernel brings along beneath a bound path (a mount inside it: a
//! user namespace admits only recursive binds) is named from `/proc/self/mountinfo`
//! (`hcp_adapter::view::mounts_beneath`).

use crate::Runtime;
use crate::call::Caller;
use crate::home::Whose;
use crate::prepare::{ConfineSpec, config_of};
use crate::refusal::Refusal;
use hcp_adapter::ViewEntry;
use hcp_model::{Code, Land, Operation};
use hcp_store::config::{NetworkMode, RuntimeConfig};
use hcp_store::tenant::OWNER_TENANT;
use serde::Serialize;
use std::path::PathBuf;

/// The view of one verb's call, as `hcp show --view` prints it.
#[derive(Debug, Serialize)]
pub struct Described {
    /// The pack.
    pub pack_id: String,
    /// The verb.
    pub verb_key: String,
    /// Its land.
    pub land: Land,
    /// Its operation.
    pub operation: Operation,
    /// Whose call: the principal (`owner` when none was named), for `personal` and `local`.
    pub principal: String,
    /// The project, for `brain`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// The workdir of a `local` call: the current directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workdir: Option<PathBuf>,
    /// The entries of the view in the order they are made; empty when there is no view
    /// (`sandbox.filesystem` says why).
    pub view: Vec<ViewEntry>,
    /// Mounts the kernel brings along beneath a bound host path.
    pub mounts_beneath: Vec<Beneath>,
    /// The network: `mode` and, for `allow`, its destinations.
    pub network: Network,
    /// The limits the call runs under (tightened by `HCP_LIMITS`, lowered to what hcp runs
    /// under).
    pub limits: hcp_adapter::ResourceLimits,
}

/// A mount of the host beneath a path the view binds: it comes along (a user namespace
/// admits only recursive binds).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Beneath {
    /// The view's entry it lies beneath (its path in the view).
    pub view_path: PathBuf,
    /// The mount point on the host.
    pub mount_point: PathBuf,
}

/// The network of a call.
#[derive(Debug, Serialize)]
pub struct Network {
    /// `deny`, `host` or `allow`.
    pub mode: &'static str,
    /// `allow`'s destinations, as written.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub destinations: Vec<String>,
}

/// Splits `ID.VERB` at its first `.`: a pack id holds none, a verb key may.
///
/// # Errors
/// `unknown_verb` (66) without a `.`.
pub fn split_target(target: &str) -> Result<(&str, &str), Refusal> {
    target
        .split_once('.')
        .filter(|(p, v)| !p.is_empty() && !v.is_empty())
        .ok_or_else(|| {
            Refusal::new(Code::UnknownVerb, format!("`{target}` is not `PACK.VERB`")).hint(
                "`hcp show PACK` lists a pack's verbs; `--view` takes one of them as `PACK.VERB`",
            )
        })
}

/// The view a call of `pack_id`'s verb `verb_key` gets for `whose` (the owner's own call
/// when `None`), prepared as the call's would be (see the module docs).
///
/// # Errors
/// `not_installed`, `unknown_verb` (66); `project_required` for a `brain` verb without
/// `--project`; `bad_principal` / `bad_value` for an id that is not one; the pin's
/// (`bin_changed` …), the configuration's (`bad_config`) and the adapter's
/// (`sandbox_unavailable`: what the call would be refused with).
pub fn describe(
    rt: &Runtime,
    caller: &Caller,
    pack_id: &str,
    verb_key: &str,
    whose: Option<&Whose>,
) -> Result<Described, Refusal> {
    let (pack, land, operation) = verb_of(rt, pack_id, verb_key)?;
    let (principal, project) = tenant_of(whose)?;
    if land == Land::Brain && project.is_none() {
        return Err(Refusal::new(
            Code::ProjectRequired,
            format!("`{pack_id}.{verb_key}` is a `brain` verb: its view is a project's"),
        )
        .hint("name the project: `--project J`"));
    }
    let plan = pack.manifest.plan_verb(verb_key).map_err(|e| {
        Refusal::new(
            Code::UnknownVerb,
            format!("verb `{verb_key}` cannot be planned: {e}"),
        )
    })?;
    let bin = crate::pins::verify(&pack, &plan.program)?;
    let config = RuntimeConfig::load(rt.home().root());
    let config = config_of(&config)?;
    let bootstrap = crate::prepare::is_bootstrap(&pack, bin.path());
    let owner = principal == OWNER_TENANT;
    let (plan, policy) = crate::prepare::describe_view(
        rt.home(),
        caller,
        &ConfineSpec {
            land,
            caller: if owner {
                hcp_model::principal::Kind::Owner
            } else {
                hcp_model::principal::Kind::Session
            },
            principal_id: &principal,
            project: project.as_deref(),
            writes: operation == Operation::Write,
            workdir: &caller.cwd,
            bin: &bin,
            bootstrap,
            pack_id,
            config,
        },
    )?;
    let view: Vec<ViewEntry> = plan.describe().to_vec();
    let mounts_beneath = beneath(&plan);
    let network = network_of(config, pack_id);
    Ok(Described {
        pack_id: pack_id.to_owned(),
        verb_key: verb_key.to_owned(),
        land,
        operation,
        principal,
        project,
        workdir: (land == Land::Local).then(|| caller.cwd.clone()),
        view,
        mounts_beneath,
        network,
        limits: policy.limits.effective(),
    })
}

/// Pack `pack_id` and its verb `verb_key`'s land and operation; a `kind: openapi` verb
/// runs no child and has no view.
fn verb_of(
    rt: &Runtime,
    pack_id: &str,
    verb_key: &str,
) -> Result<(hcp_store::pack::InstalledPack, Land, Operation), Refusal> {
    let pack = hcp_store::pack::load(rt.home(), pack_id).map_err(|e| match e {
        hcp_store::pack::PackError::NotInstalled { .. } => {
            crate::target::not_installed(rt.home(), pack_id)
        }
        e => crate::refusal::pack_refusal(&e),
    })?;
    let entry = pack.policy.verbs.get(verb_key).ok_or_else(|| {
        // The "did you mean" of `hcp exec`, among this pack's verbs (active or not).
        let target = format!("{pack_id}.{verb_key}");
        let known = crate::target::typed_verbs(&pack);
        let lists = format!("`hcp show {pack_id}` lists its verbs");
        Refusal::new(
            Code::UnknownVerb,
            format!("pack `{pack_id}` has no verb `{verb_key}`"),
        )
        .hint(
            match crate::target::did_you_mean(&target, known.iter().map(String::as_str)) {
                Some(d) => format!("{d} {lists}"),
                None => lists,
            },
        )
    })?;
    let (land, operation) = (entry.privacy.land, entry.operation);
    if pack.manifest.kind == hcp_model::Kind::Openapi {
        return Err(Refusal::new(
            Code::KindUnsupported,
            format!(
                "`{pack_id}.{verb_key}` is an HTTP request hcp sends itself: no child, no view"
            ),
        )
        .hint(format!(
            "`hcp show {pack_id}` shows its operation and server"
        )));
    }
    Ok((pack, land, operation))
}

/// The principal and project whose view it is: the owner's own call when `whose` is
/// `None`.
fn tenant_of(whose: Option<&Whose>) -> Result<(String, Option<String>), Refusal> {
    Ok(match whose {
        None => (OWNER_TENANT.to_owned(), None),
        Some(w) => {
            // The same checks as `hcp home` (an id that can name a home).
            crate::home::check_whose(w)?;
            match w {
                Whose::Principal(p) => (p.clone(), None),
                Whose::Project(j) => (OWNER_TENANT.to_owned(), Some(j.clone())),
            }
        }
    })
}

/// The host's mounts beneath the paths `plan` binds (they come along into the view).
fn beneath(plan: &hcp_adapter::View) -> Vec<Beneath> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .map(|mi| hcp_adapter::view::mounts_beneath(plan, &mi))
        .unwrap_or_default()
        .into_iter()
        .map(|(view_path, mount_point)| Beneath {
            view_path,
            mount_point,
        })
        .collect()
}

/// The network a call of `pack_id` gets, as `config.json` gives it.
fn network_of(config: &RuntimeConfig, pack_id: &str) -> Network {
    match config.network_for(pack_id) {
        NetworkMode::Allow(d) => Network {
            mode: "allow",
            destinations: d.clone(),
        },
        other => Network {
            mode: other.mode(),
            destinations: Vec::new(),
        },
    }
}
