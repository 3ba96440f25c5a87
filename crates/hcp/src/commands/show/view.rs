//! `hcp show ID.VERB --view [--principal P | --project J] [--json]` (RUNTIME §5.1): what a
//! call of one verb sees, from the plan its child would mount
//! (`hcp_runtime::view_plan::describe`).
//!
//! ```text
//! transit.find: personal land, read, as principal `agent-1`
//! view
//!   ro         /usr                                    system directory
//!   rw         /home/hcp ← /…/homes/transit/principal/agent-1   tenant home
//!   …
//! network      deny
//! limits       /tmp 64 MiB, memory 2 GiB, 4096 processes, 60 s of cpu, …
//! ```

use crate::error::{CliError, CliResult};
use crate::exit;
use hcp_adapter::view::EntryMode;
use hcp_runtime::home::Whose;
use hcp_runtime::view_plan::Described;

use std::fmt::Write as _;

/// Runs `hcp show ID.VERB --view`.
pub fn run(
    target: &str,
    principal: Option<String>,
    project: Option<String>,
    json: bool,
) -> CliResult {
    crate::commands::session::require_owner("show --view")?;
    let rt = crate::commands::exec::runtime()?;
    let caller = crate::commands::exec::caller()?;
    // The forms `hcp exec` takes (`PACK.VERB`, or a verb key unique across the active
    // packs); a target none of them resolves is refused as `PACK.VERB` is read.
    let (pack, verb) = match hcp_runtime::target::resolve(rt.home(), None, target) {
        Ok((p, v)) => (p.manifest.id.to_string(), v),
        Err(_) => {
            let (p, v) = hcp_runtime::view_plan::split_target(target).map_err(CliError::command)?;
            (p.to_owned(), v.to_owned())
        }
    };
    let (pack, verb) = (pack.as_str(), verb.as_str());
    let whose = match (principal, project) {
        (Some(p), _) => Some(Whose::Principal(p)),
        (None, Some(j)) => Some(Whose::Project(j)),
        (None, None) => None,
    };
    let d = hcp_runtime::view_plan::describe(&rt, &caller, pack, verb, whose.as_ref())
        .map_err(CliError::command)?;
    if json {
        out!(
            "{:#}",
            serde_json::to_value(&d).unwrap_or(serde_json::Value::Null)
        );
    } else {
        out_raw!("{}", text(&d));
    }
    Ok(exit::OK)
}

/// A value for a line: control characters shown escaped, so a path cannot forge a line.
fn clean(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

fn bytes(n: u64) -> String {
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    if n.is_multiple_of(GIB) {
        format!("{} GiB", n / GIB)
    } else if n.is_multiple_of(MIB) {
        format!("{} MiB", n / MIB)
    } else {
        format!("{n} bytes")
    }
}

/// The text form (see the module docs).
pub fn text(d: &Described) -> String {
    let mut s = String::new();
    let whose = match &d.project {
        Some(j) => format!("for project `{}`", clean(j)),
        None if d.principal == hcp_store::tenant::OWNER_TENANT => "as the owner".to_owned(),
        None => format!("as principal `{}`", clean(&d.principal)),
    };
    let _ = writeln!(
        s,
        "{}.{}: {} land, {}, {whose}{}",
        d.pack_id,
        clean(&d.verb_key),
        d.land.as_str(),
        d.operation.as_str(),
        d.workdir
            .as_ref()
            .map(|w| format!(", in `{}`", clean(&w.display().to_string())))
            .unwrap_or_default()
    );
    let _ = writeln!(s, "view");
    for e in &d.view {
        let path = clean(&e.path.display().to_string());
        let shown = match (&e.mode, &e.source) {
            (EntryMode::Symlink(t), _) => format!("{path} -> {}", clean(&t.display().to_string())),
            (_, Some(src)) if *src != e.path => {
                format!("{path} ← {}", clean(&src.display().to_string()))
            }
            _ => path,
        };
        let _ = writeln!(s, "  {:<9}  {shown}  ({})", e.mode.word(), e.why);
    }
    for m in &d.mounts_beneath {
        let _ = writeln!(
            s,
            "  beneath    {} (in `{}`): a mount of the host, it comes along",
            clean(&m.mount_point.display().to_string()),
            clean(&m.view_path.display().to_string())
        );
    }
    let _ = writeln!(
        s,
        "network      {}{}",
        d.network.mode,
        if d.network.destinations.is_empty() {
            String::new()
        } else {
            format!(
                ": {}",
                d.network
                    .destinations
                    .iter()
                    .map(|x| clean(x))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    );
    let l = &d.limits;
    let _ = writeln!(
        s,
        "limits       /tmp {}, memory {} together, {} processes, {} s of cpu, {} of address space and {} a file per process, {} open files",
        bytes(l.tmp_bytes),
        bytes(l.memory_bytes),
        l.processes,
        l.cpu_seconds,
        bytes(l.address_space_bytes),
        bytes(l.file_size_bytes),
        l.open_files
    );
    s
}
