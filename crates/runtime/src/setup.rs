//! A new pack under a runtime policy, in one answer (RUNTIME §5 steps 4 and 7, §7): when a
//! session's call is refused because something is not set up yet — the grant
//! (`missing_grant`), the tool lock (`tool_drift`, `lock_stale`), the runtime policy
//! (`unknown_tool`, `rbac`) — the refusal lists every step the call still needs, not only
//! the first one: the grant command, `hcp policy init --merge FILE`, `hcp policy lock`.
//! The refusal's code stays the first failing check's, in the contract's order; the
//! steps are the result's `steps` ([`hcp_model::facts::SetupStep`]).
//!
//! Pure: it reads what the call's snapshot already read (the principal's grants, the
//! runtime policy, the lock), so it costs nothing but on such a refusal.

use crate::policy::RuntimePolicy;
use hcp_model::facts::SetupStep;
use hcp_model::{Capability, Code, Principal};
use hcp_store::pack::InstalledPack;
use histos::lock::Lock;

/// What the call names and who makes it.
pub(crate) struct Subject<'a> {
    /// The verb's pack.
    pub pack: &'a InstalledPack,
    /// The verb key.
    pub key: &'a str,
    /// The session's principal.
    pub principal: &'a Principal,
}

/// Every setup step the call still needs, in the order to take them: the grants
/// `missing`, then the runtime policy (the tool added, or allowed for the session's
/// role), then the tool lock. `policy` and `lock` are what the snapshot read (`None`: the
/// store has none). Empty for the owner.
pub(crate) fn steps(
    s: &Subject<'_>,
    missing: &[Capability],
    policy: Option<&RuntimePolicy>,
    lock: Option<&Lock>,
) -> Vec<SetupStep> {
    if s.principal.is_owner() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let who = &s.principal.id;
    let pack = s.pack.id.as_str();
    if !missing.is_empty() {
        let caps: Vec<String> = missing.iter().map(ToString::to_string).collect();
        out.push(SetupStep {
            code: Code::MissingGrant,
            step: format!(
                "grant `{}` to principal `{who}` on pack `{pack}`",
                caps.join("`, `")
            ),
            command: Some(format!("hcp grant {who} {pack} {}", caps.join(" "))),
        });
    }
    let tool = format!("{pack}.{}", s.key);
    let role = s.principal.session.as_ref().and_then(|x| x.role.as_deref());
    if let Some(rp) = policy {
        policy_steps(&mut out, rp, &tool, role);
    }
    if let Some(l) = lock
        && let Err(r) = crate::policy::lock::check_call(l, s.pack, s.key)
    {
        out.push(SetupStep {
            code: r.code,
            step: format!(
                "review the verbs of pack `{pack}`, then lock them again (the lock does not hold `{tool}` as it is now)"
            ),
            command: Some("hcp policy lock".into()),
        });
    }
    out
}

fn policy_steps(out: &mut Vec<SetupStep>, rp: &RuntimePolicy, tool: &str, role: Option<&str>) {
    let file = rp.file.display().to_string();
    let p = &rp.policy;
    let role_known = role.filter(|r| p.roles.iter().any(|x| x.name == *r));
    if p.tool(tool).is_none() {
        let command = match role_known {
            Some(r) => format!("hcp policy init --merge {file} --role {r}"),
            None => format!("hcp policy init --merge {file}"),
        };
        out.push(SetupStep {
            code: Code::UnknownTool,
            step: match role_known {
                Some(r) => format!(
                    "add `{tool}` (and the other tools the policy does not name yet) to the runtime policy, allowed for role `{r}`"
                ),
                None => format!(
                    "add `{tool}` (and the other tools the policy does not name yet) to the runtime policy"
                ),
            },
            command: Some(command),
        });
        if role_known.is_some() {
            return;
        }
    } else if role.is_some_and(|r| p.allows(r, tool)) {
        return;
    }
    out.push(SetupStep {
        code: Code::Rbac,
        step: match role {
            Some(r) => format!(
                "allow `{tool}` for role `{r}`: add it to `roles.{r}.allow` in `{file}` (a role the policy does not have yet needs its own entry under `roles:`)"
            ),
            None => format!(
                "the session has no role: start it with `--role ROLE` for a role of `{file}` that allows `{tool}`"
            ),
        },
        command: None,
    });
}
