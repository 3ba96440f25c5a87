//! `hcp approve ID`, `hcp deny ID` and `hcp approvals`: the owner's side of the runtime
//! policy's `confirmation`, and of its `escalate` when `config.json` says `"escalation":
//! "approvals"` (RUNTIME §7). An approval is answered once.

use crate::commands::session::require_owner;
use crate::error::{CliError, CliResult};
use crate::exit;
use std::io::Write;

/// Arguments of `hcp approve`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The approval id a paused call answered with (`apr_…`).
    id: String,
}

/// Arguments of `hcp deny`.
#[derive(Debug, clap::Args)]
pub struct DenyArgs {
    /// The id of a pending escalation (`apr_…`, marked `escalation` in `hcp approvals`).
    id: String,
}

/// Arguments of `hcp approvals`.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// List every approval (used, expired) rather than the pending ones.
    #[arg(long)]
    all: bool,
    /// One JSON array on stdout.
    #[arg(long)]
    json: bool,
}

/// Runs `hcp approve ID` (owner only).
pub fn run(a: Args) -> CliResult {
    require_owner("approve")?;
    let rt = super::exec::runtime()?;
    let act = record_answer(&rt, "approve", &a.id)?;
    match act.settle(
        rt.state().approve(&a.id, jiff::Timestamp::now()),
        hcp_store::approval::ApprovalError::code,
    ) {
        Ok(ap) => {
            let what = if ap.escalation {
                format!(
                    "the escalation of `{}` for `{}`: the same call passes it once within {} s",
                    ap.tool, ap.principal, ap.window_s
                )
            } else {
                format!(
                    "`{}` for `{}`, usable once within {} s",
                    ap.tool, ap.principal, ap.window_s
                )
            };
            let _ = writeln!(std::io::stdout().lock(), "approved `{}`: {what}", ap.id);
            Ok(exit::OK)
        }
        Err(e) => Err(answer_error(&e)),
    }
}

/// Runs `hcp deny ID` (owner only): says no to a pending escalation.
pub fn run_deny(a: DenyArgs) -> CliResult {
    require_owner("deny")?;
    let rt = super::exec::runtime()?;
    let act = record_answer(&rt, "deny", &a.id)?;
    match act.settle(
        rt.state().deny(&a.id, jiff::Timestamp::now()),
        hcp_store::approval::ApprovalError::code,
    ) {
        Ok(ap) => {
            let _ = writeln!(
                std::io::stdout().lock(),
                "denied `{}`: the escalation of `{}` for `{}`; the same call is refused (escalation_denied) for {} s",
                ap.id,
                ap.tool,
                ap.principal,
                ap.window_s
            );
            Ok(exit::OK)
        }
        Err(hcp_store::approval::ApprovalError::Store(e)) => {
            Err(crate::commands::session::store_error(&e))
        }
        Err(e) => Err(answer_error(&e)),
    }
}

/// Records the owner's answer `act` (`approve`, `deny`) to the pending approval `id`
/// before it is given (RUNTIME §6). An id that is not pending is not recorded: the answer
/// itself then refuses it, and nothing changes. The answer is made through the act
/// returned ([`hcp_runtime::authority::Act::settle`]).
///
/// # Errors
/// The audit's refusal (74).
fn record_answer<'a>(
    rt: &'a hcp_runtime::Runtime,
    act: &'a str,
    id: &str,
) -> Result<hcp_runtime::authority::Act<'a>, CliError> {
    let made = super::authority::begin(rt, act)?;
    let list = rt
        .state()
        .approvals_list()
        .map_err(|e| crate::commands::session::store_error(&e))?;
    let now = jiff::Timestamp::now();
    let Some(ap) = list
        .iter()
        .find(|x| x.id == id && x.state(now) == "pending")
    else {
        return Ok(made);
    };
    super::authority::record_act(
        &made,
        serde_json::json!({
            "approval_id": ap.id,
            "kind": ap.kind(),
            "tool": ap.tool,
            "principal": ap.principal,
            "session": ap.session,
            "project": ap.project,
            "args_digest": ap.args_digest,
            "window_s": ap.window_s,
        }),
    )?;
    Ok(made)
}

fn answer_error(e: &hcp_store::approval::ApprovalError) -> CliError {
    use hcp_store::approval::ApprovalError as E;
    let hint = match e {
        E::NotAnEscalation(_) => {
            "a confirmation the owner does not approve is never used; it leaves the list after 24 h"
        }
        E::Decided { .. } => "an approval is answered once; the call asks anew when it expires",
        _ => "`hcp approvals` lists the pending ones",
    };
    CliError::new(e.code(), e.to_string()).hint(hint)
}

/// Runs `hcp approvals` (owner only).
pub fn run_list(a: ListArgs) -> CliResult {
    require_owner("approvals")?;
    let rt = super::exec::runtime()?;
    let now = jiff::Timestamp::now();
    let list = rt
        .state()
        .approvals_list()
        .map_err(|e| crate::commands::session::store_error(&e))?;
    let shown: Vec<_> = list
        .into_iter()
        .filter(|x| a.all || x.state(now) == "pending")
        .collect();
    let mut out = std::io::stdout().lock();
    if a.json {
        let v: Vec<serde_json::Value> = shown
            .iter()
            .map(|x| {
                let mut j = serde_json::to_value(x).unwrap_or_default();
                if let Some(o) = j.as_object_mut() {
                    o.insert("state".into(), x.state(now).into());
                    o.insert("kind".into(), x.kind().into());
                    o.insert("session".into(), x.session.clone().into());
                    o.insert("project".into(), x.project.clone().into());
                }
                j
            })
            .collect();
        let _ = writeln!(out, "{}", serde_json::Value::Array(v));
        return Ok(exit::OK);
    }
    if shown.is_empty() {
        let _ = writeln!(out, "no pending approvals");
        return Ok(exit::OK);
    }
    for x in &shown {
        let args: Vec<String> = x
            .summary
            .iter()
            .map(|(k, v)| {
                // The whole value is in `--json`; the line shows its start and its size.
                let n = v.chars().count();
                if n > 60 {
                    let head: String = v.chars().take(60).collect();
                    format!("{k}={head:?}…(+{} characters: see --json)", n - 60)
                } else {
                    format!("{k}={v:?}")
                }
            })
            .collect();
        let _ = writeln!(
            out,
            "{}  {:<8}  {:<12}  {}  {}  session {}  project {}  requested {}  {}",
            x.id,
            x.state(now),
            x.kind(),
            x.principal,
            x.tool,
            x.session.as_deref().unwrap_or("-"),
            x.project.as_deref().unwrap_or("-"),
            x.requested_at,
            args.join(" ")
        );
    }
    Ok(exit::OK)
}
