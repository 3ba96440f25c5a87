//! `hcp policy replay CANDIDATE [--since TIME] [--json]` (RUNTIME §11): the recorded
//! calls decided again under a candidate runtime policy (`hcp_runtime::replay`), printed
//! by change, tool and principal. Owner only: it reads every principal's records.

use crate::commands::session::{print, require_owner};
use crate::error::{CliError, CliResult};
use crate::exit;
use hcp_model::Code;
use hcp_runtime::replay::{self, Change, Inputs, Replayed};
use hcp_store::audit::ChainPos;
use histos::Policy;
use serde_json::{Map, Value, json};
use std::path::PathBuf;

/// Arguments of `hcp policy replay`.
#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    /// The candidate policy file (`.json` is JSON, anything else YAML).
    candidate: PathBuf,
    /// Only calls made at or after TIME: an RFC 3339 time (`2026-07-01T00:00:00Z`) or a
    /// duration back from now (`30m`, `24h`, `7d`).
    #[arg(long, value_name = "TIME")]
    since: Option<String>,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
}

/// The cut-off of `--since TEXT` at `now`.
fn since(text: &str, now: jiff::Timestamp) -> Result<jiff::Timestamp, CliError> {
    if let Ok(t) = text.parse::<jiff::Timestamp>() {
        return Ok(t);
    }
    match hcp_store::session::parse_ttl(text) {
        Ok(d) => now
            .checked_sub(d)
            .map_err(|e| bad_since(text, &e.to_string())),
        Err(_) => Err(bad_since(
            text,
            "it is neither an RFC 3339 time nor a duration",
        )),
    }
}

fn bad_since(text: &str, why: &str) -> CliError {
    CliError::new(
        Code::BadSince,
        format!("`--since {text}` cannot be read: {why}"),
    )
    .hint("give an RFC 3339 time (`2026-07-01T00:00:00Z`) or a duration back from now (`30m`, `24h`, `7d`)")
}

/// Every record of the trail, verified, oldest first within each chain.
fn read_all(state: &dyn hcp_store::state::State) -> Result<Vec<Map<String, Value>>, CliError> {
    let mut from: Vec<ChainPos> = Vec::new();
    let mut out = Vec::new();
    loop {
        let b = state
            .audit_read(&from, 4096)
            .map_err(|e| crate::commands::audit::audit_error(&e))?;
        let n = b.records.len();
        for r in b.records {
            match from.iter_mut().find(|c| c.machine == r.after.machine) {
                Some(c) => *c = r.after.clone(),
                None => from.push(r.after.clone()),
            }
            out.push(r.fields);
        }
        if let Some(f) = b.fault {
            return Err(CliError::new(
                f.fault.code(),
                format!(
                    "the trail does not verify at record {}{}: {}: {}",
                    f.seq,
                    f.id.map(|i| format!(" (`{i}`)")).unwrap_or_default(),
                    f.fault.as_str(),
                    f.detail
                ),
            )
            .hint("`hcp audit verify` names the fault; replay decides only records that verify"));
        }
        if n < 4096 {
            return Ok(out);
        }
    }
}

fn label(c: Change) -> &'static str {
    match c {
        Change::NowRefused => "now refused",
        Change::NowAllowed => "now allowed",
        Change::Unchanged => "unchanged",
        Change::Undecidable => "undecidable",
        Change::NotGoverned => "not the runtime policy's",
    }
}

/// Runs `hcp policy replay`.
pub fn run(a: &ReplayArgs) -> CliResult {
    require_owner("policy replay")?;
    let candidate =
        Policy::load_path(&a.candidate).map_err(|e| super::policy_error(&a.candidate, &e))?;
    let now = jiff::Timestamp::now();
    let cutoff = a.since.as_deref().map(|t| since(t, now)).transpose()?;
    let rt = crate::commands::exec::runtime()?;
    let state = rt.state();
    let current = hcp_runtime::policy::source::load_uncached(rt.home()).map_err(|r| {
        CliError::new(
            r.code,
            format!("the runtime policy in force does not load: {}", r.message),
        )
    })?;
    let config = hcp_store::config::RuntimeConfig::load(rt.home().root())
        .map_err(|e| CliError::new(e.code(), e.to_string()))?;
    let empty = state
        .args_digest(&[])
        .map_err(|e| CliError::new(e.code(), e.to_string()))?;
    let records: Vec<Map<String, Value>> = read_all(state)?
        .into_iter()
        .filter(|m| match (&cutoff, m.get("ts").and_then(Value::as_str)) {
            (Some(c), Some(ts)) => ts.parse::<jiff::Timestamp>().is_ok_and(|t| t >= *c),
            (Some(_), None) => false,
            (None, _) => true,
        })
        .collect();
    let inputs = Inputs {
        candidate: &candidate,
        current: current.as_ref().map(|c| &c.policy),
        empty_args_digest: &empty,
        escalation_tier: config.escalation.is_some(),
    };
    let replayed = replay::replay(&records, &inputs);
    let groups = replay::groups(&replayed);
    let current_hash = current.as_ref().map(|c| c.hash().to_owned());
    // The policies the calls were decided under, and how many calls each.
    let mut policies: std::collections::BTreeMap<String, usize> = Default::default();
    for r in replayed.iter().filter(|r| r.change != Change::NotGoverned) {
        *policies
            .entry(r.policy_hash.clone().unwrap_or_else(|| "none".into()))
            .or_default() += 1;
    }
    let other: usize = policies
        .iter()
        .filter(|(h, _)| Some(h.as_str()) != current_hash.as_deref())
        .map(|(_, n)| n)
        .sum();
    let count = |c: Change| {
        replayed
            .iter()
            .filter(|r: &&Replayed| r.change == c)
            .count()
    };
    if a.json {
        let by: Map<String, Value> = groups
            .iter()
            .map(|(c, g)| {
                (
                    serde_json::to_value(c)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default(),
                    json!(g),
                )
            })
            .collect();
        let v = json!({
            "candidate": {"file": a.candidate, "content_hash": candidate.content_hash()},
            "current": current_hash,
            "since": cutoff.map(|c| c.to_string()),
            "calls": replayed.len(),
            "now_refused": count(Change::NowRefused),
            "now_allowed": count(Change::NowAllowed),
            "unchanged": count(Change::Unchanged),
            "undecidable": count(Change::Undecidable),
            "not_governed": count(Change::NotGoverned),
            "groups": by,
            "policies": policies.iter().map(|(h, n)| json!({
                "policy_hash": h, "calls": n, "in_force": Some(h.as_str()) == current_hash.as_deref(),
            })).collect::<Vec<_>>(),
        });
        print(&format!("{v}\n"));
        return Ok(exit::OK);
    }
    let mut out = format!(
        "replayed {} calls{} under `{}` ({})\n",
        replayed.len(),
        cutoff.map(|c| format!(" since {c}")).unwrap_or_default(),
        a.candidate.display(),
        candidate.content_hash()
    );
    for c in [
        Change::NowRefused,
        Change::NowAllowed,
        Change::Undecidable,
        Change::Unchanged,
        Change::NotGoverned,
    ] {
        let n = count(c);
        out.push_str(&format!("{}: {n}\n", label(c)));
        if matches!(c, Change::Unchanged | Change::NotGoverned) {
            continue;
        }
        for g in groups.get(&c).into_iter().flatten() {
            out.push_str(&format!(
                "  {}  {}  {}×  {}\n",
                g.tool, g.principal, g.count, g.why
            ));
        }
    }
    if other > 0 {
        out.push_str(&format!(
            "note: {other} of these calls were decided under another policy than the one in force ({}): their argument checks are not carried over\n",
            current_hash.as_deref().unwrap_or("none")
        ));
    }
    print(&out);
    Ok(exit::OK)
}
