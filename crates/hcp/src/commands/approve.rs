//! `hcp approve ID` and `hcp approvals`: the owner's side of the runtime policy's
//! `confirmation` (RUNTIME §7).

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
    match rt.state().approve(&a.id, jiff::Timestamp::now()) {
        Ok(ap) => {
            let _ = writeln!(
                std::io::stdout().lock(),
                "approved `{}`: `{}` for `{}`, usable once within {} s",
                ap.id,
                ap.tool,
                ap.principal,
                ap.window_s
            );
            Ok(exit::OK)
        }
        Err(e) => {
            Err(CliError::new(e.code(), e.to_string())
                .hint("`hcp approvals` lists the pending ones"))
        }
    }
}

/// Runs `hcp approvals` (owner only).
pub fn run_list(a: ListArgs) -> CliResult {
    require_owner("approvals")?;
    let rt = super::exec::runtime()?;
    let now = jiff::Timestamp::now();
    let list = rt
        .state()
        .approvals_list()
        .map_err(|e| CliError::new(e.code(), e.to_string()))?;
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
            "{}  {:<8}  {}  {}  requested {}  {}",
            x.id,
            x.state(now),
            x.principal,
            x.tool,
            x.requested_at,
            args.join(" ")
        );
    }
    Ok(exit::OK)
}
