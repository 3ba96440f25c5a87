//! Steps 3–6 of RUNTIME §5, the pure gate of `hcp-gate`: arguments (unknown, missing,
//! tenant-bearing, flag-looking), the grant (with the rug-pull guard), land, and the
//! confirm gate — for a verb ([`verb`]), for every stimulus ref of a sense ([`stimuli`]),
//! and the one grant check of `hcp disconnect` ([`binding`]). The call's argument digest
//! is made here, once its arguments are known.

use super::Stop;
use super::target::Verb;
use crate::Runtime;
use crate::call::{Call, Caller};
use crate::confirm::{self, Answered};
use crate::policy::{PolicyRefusal, RuntimePolicy};
use crate::record::Record;
use crate::refusal::Refusal;
use hcp_gate::{Allowed, Context, Decision, Face, GrantView, PackView, StimulusAllowed};
use hcp_model::manifest::arguments;
use hcp_model::{ArgValue, Capability, Code, Principal};
use hcp_store::grant::HeldCapability;
use hcp_store::pack::InstalledPack;
use histos::lock::Lock;
use jiff::Timestamp;

/// What the gate reads besides the call: the grants the snapshot read, whether the pack
/// is active, and the runtime policy (for the preview of a confirm refusal).
pub(crate) struct GateReads<'a> {
    /// The principal's grants on the pack.
    pub grants: Result<Vec<HeldCapability>, Refusal>,
    /// Whether the pack is active.
    pub active: bool,
    /// The runtime policy, as the snapshot read it.
    pub policy: &'a Result<Option<RuntimePolicy>, PolicyRefusal>,
    /// The tool lock, as the snapshot read it (`None` for the owner), for the steps a
    /// refused session call still needs (`crate::setup`).
    pub lock: Option<&'a Result<Option<Lock>, PolicyRefusal>>,
}

/// Steps 3–6 for a verb. `answered`: the person accepted the command at the confirm gate
/// (RUNTIME §10): the gate counts the call as confirmed, its arguments as sent.
///
/// # Errors
/// The gate's refusals (`arg_*`, `tenant_in_args`, `missing_grant`, `project_required`,
/// `confirm_required` …); `store_damaged` for a bad install record; the state's failure
/// to make the digest or read the grants.
pub(crate) fn verb(
    rt: &Runtime,
    caller: &Caller,
    (verb, principal): (&Verb, &Principal),
    reads: GateReads<'_>,
    (call, answered): (&Call, Option<&Answered>),
    rec: &mut Record,
) -> Result<Allowed, Stop> {
    let takes: Vec<String> = match &verb.operation {
        Some(op) => crate::http::takes(op),
        None => verb
            .pack
            .manifest
            .plan_verb(&verb.key)
            .map(|p| arguments(&p).into_iter().map(|(n, _)| n).collect())
            .unwrap_or_default(),
    };
    let args = call.args.for_verb(&takes);
    rec.args_digest = Some(digest(rt, &args)?);
    let grants = grants_view(reads.grants)?;
    let content_changed_at = content_changed_at(&verb.pack)?;
    let ctx = Context {
        principal,
        pack: PackView {
            manifest: &verb.pack.manifest,
            policy: &verb.pack.policy,
            active: reads.active,
            content_changed_at,
        },
        verb_key: &verb.key,
        face: call.face,
        grants: &grants,
        cwd: &caller.cwd,
    };
    let gated = match answered.and_then(|a| a.command.as_deref()) {
        Some(_) => confirm::with_confirm(&args),
        None => args.clone(),
    };
    let decision = match &verb.operation {
        Some(op) => hcp_gate::check_operation(&ctx, op, gated.iter().map(|(k, v)| (k, v))),
        None => hcp_gate::check(&ctx, gated.iter().map(|(k, v)| (k, v))),
    };
    match decision {
        Decision::Allow(a) => {
            rec.project.clone_from(&a.project);
            Ok(*a)
        }
        Decision::Deny(r) => {
            if r.code == Code::MissingGrant {
                // Every step the call still needs, in one answer (`crate::setup`).
                let missing = missing_grants(verb, principal, &grants, content_changed_at);
                let subject = crate::setup::Subject {
                    pack: &verb.pack,
                    key: &verb.key,
                    principal,
                };
                let policy = reads.policy.as_ref().ok().and_then(Option::as_ref);
                let lock = reads
                    .lock
                    .and_then(|l| l.as_ref().ok())
                    .and_then(Option::as_ref);
                rec.facts.setup = crate::setup::steps(&subject, &missing, policy, lock);
            }
            if r.code == Code::ConfirmRequired && call.face == Face::Mcp {
                // What would run once confirmed, for the face to show the person.
                let of = confirm::PreviewOf {
                    pack: &verb.pack,
                    verb_key: &verb.key,
                    args: &args,
                    policy: reads
                        .policy
                        .as_ref()
                        .ok()
                        .and_then(Option::as_ref)
                        .map(|p| &p.policy),
                    principal,
                };
                rec.preview = confirm::preview(&ctx, &of).map(Box::new);
            }
            Err(Stop::Recorded(Refusal::from_gate(&r)))
        }
    }
}

/// The capabilities step 4 requires of `principal` for the verb that it does not hold
/// (or holds suspended by a content change), in the order they are checked.
fn missing_grants(
    verb: &Verb,
    principal: &Principal,
    grants: &GrantView,
    changed: Option<Timestamp>,
) -> Vec<Capability> {
    let Some(entry) = verb.pack.policy.verbs.get(verb.key.as_str()) else {
        return Vec::new();
    };
    let caps = super::admit::verb_capabilities(&verb.pack, &verb.key, entry.operation, principal);
    caps.into_iter()
        .filter(|c| {
            hcp_gate::grant::require(
                &principal.id,
                verb.pack.id.as_str(),
                grants.held.iter().copied(),
                *c,
                changed,
            )
            .is_err()
        })
        .collect()
}

/// Steps 3–6 for every ref of a sense (`hcp_gate::check_stimulus`).
///
/// # Errors
/// The gate's first refusal (`write_stimulus`, `control_plane`, `missing_grant`,
/// `project_required` …); `store_damaged`; the state's failure to read the grants.
pub(crate) fn stimuli(
    caller: &Caller,
    (pack, refs): (&InstalledPack, &[String]),
    principal: &Principal,
    reads: GateReads<'_>,
) -> Result<Vec<(String, StimulusAllowed)>, Stop> {
    let grants = grants_view(reads.grants)?;
    let content_changed_at = content_changed_at(pack)?;
    let mut allowed = Vec::new();
    for r in refs {
        let ctx = Context {
            principal,
            pack: PackView {
                manifest: &pack.manifest,
                policy: &pack.policy,
                active: reads.active,
                content_changed_at,
            },
            verb_key: r,
            face: Face::Cli,
            grants: &grants,
            cwd: &caller.cwd,
        };
        let a = hcp_gate::check_stimulus(&ctx).map_err(|d| Refusal::from_gate(&d))?;
        allowed.push((r.clone(), a));
    }
    Ok(allowed)
}

/// Step 4 of `hcp disconnect`: a session needs `pack.connect` on the pack, not suspended
/// by a content change (the one grant check, with the rug-pull guard); the owner holds it.
///
/// # Errors
/// `missing_grant`; `store_damaged` for a bad install record; the state's failure to read
/// the grants.
pub(crate) fn binding(
    pack: &InstalledPack,
    principal: &Principal,
    grants: Result<Vec<HeldCapability>, Refusal>,
) -> Result<(), Stop> {
    let held = grants_view(grants)?;
    let changed = content_changed_at(pack)?;
    if principal.is_owner() {
        return Ok(());
    }
    hcp_gate::grant::require(
        &principal.id,
        pack.id.as_str(),
        held.held.iter().copied(),
        Capability::PackConnect,
        changed,
    )
    .map_err(|r| Stop::Recorded(Refusal::from_gate(&r)))
}

/// The keyed digest of the call's arguments (RUNTIME §6), never their values.
fn digest(rt: &Runtime, args: &[(String, ArgValue)]) -> Result<String, Refusal> {
    let pairs: Vec<(&str, &ArgValue)> = args.iter().map(|(k, v)| (k.as_str(), v)).collect();
    rt.state()
        .args_digest(&pairs)
        .map_err(|e| Refusal::store(&e))
}

fn grants_view(grants: Result<Vec<HeldCapability>, Refusal>) -> Result<GrantView, Refusal> {
    Ok(GrantView {
        held: grants?
            .into_iter()
            .map(|h| (h.capability, h.granted_at))
            .collect(),
    })
}

/// The pack's `content_changed_at`, for the rug-pull guard.
fn content_changed_at(pack: &InstalledPack) -> Result<Option<Timestamp>, Refusal> {
    match pack.record.content_changed_at.as_deref() {
        None => Ok(None),
        Some(t) => t.parse::<Timestamp>().map(Some).map_err(|_| {
            Refusal::new(
                Code::StoreDamaged,
                format!(
                    "install record of `{}` has a bad `content_changed_at`",
                    pack.id
                ),
            )
        }),
    }
}
