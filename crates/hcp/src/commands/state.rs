//! `hcp state migrate [--json]` (RUNTIME §9), owner only: creates or upgrades the schema of
//! the fleet's PostgreSQL database (`hcp_runtime::backend::migrate`) and says what it did.
//! `hcp state reledger [--json]` (RUNTIME §4 "Fault isolation"), owner only: writes the
//! file store's state ledger (`hcp_store::ledger`) anew from the files there now, the
//! repair `hcp doctor` names for a ledger that is missing or damaged; an act of authority.

use super::session::{print, require_owner};
use crate::error::{CliError, CliResult};
use crate::exit;

/// Subcommands of `hcp state`.
#[derive(Debug, clap::Subcommand)]
pub enum StateCommand {
    /// Create or upgrade the schema of the state database named by `config.json`'s
    /// `state` (each missing migration in its own transaction), and say what was done.
    Migrate(MigrateArgs),
    /// Write the state ledger (`state/ledger.json`) anew from the grant, session and
    /// approval files and the markers there now: the repair of a ledger that is missing
    /// or damaged. Check first that they hold only what should be there.
    Reledger(MigrateArgs),
}

/// Arguments of `hcp state migrate` and `hcp state reledger`.
#[derive(Debug, clap::Args)]
pub struct MigrateArgs {
    /// Print what was done as one JSON object.
    #[arg(long)]
    json: bool,
}

/// Runs `hcp state …`.
pub fn run(c: StateCommand) -> CliResult {
    require_owner("state")?;
    let rt = super::exec::runtime()?;
    match c {
        StateCommand::Reledger(a) => reledger(&rt, &a),
        StateCommand::Migrate(a) => {
            let done = hcp_runtime::backend::migrate(&rt).map_err(|r| {
                let e = CliError::new(r.code, r.message);
                match r.hint {
                    Some(h) => e.hint(h),
                    None => e,
                }
            })?;
            // The act of authority (RUNTIME §6) is recorded once the schema it is recorded
            // in exists: the first migration makes the fleet's trail itself. A record that
            // cannot be made fails the command (74); the migration stays (it is
            // idempotent, and the next `hcp state migrate` records nothing new).
            if !done.applied.is_empty() {
                // Made already: its intent and its completion follow each other.
                let made = super::authority::record(
                    &rt,
                    "state migrate",
                    serde_json::json!({
                        "backend": done.backend,
                        "schema": done.schema,
                        "from": done.from,
                        "to": done.to,
                        "applied": done.applied.iter().map(|m| m.version).collect::<Vec<_>>(),
                    }),
                )?;
                let _ = made.settle(Ok::<(), std::convert::Infallible>(()), |e| match *e {});
            }
            if a.json {
                print(&format!("{}\n", serde_json::json!(done)));
            } else {
                print(
                    &done
                        .lines
                        .iter()
                        .map(|l| format!("{l}\n"))
                        .collect::<String>(),
                );
            }
            Ok(exit::OK)
        }
    }
}

/// `hcp state reledger`: the act `state reledger`, recorded, then the ledger written under
/// the store lock; prints how many entries it holds.
fn reledger(rt: &hcp_runtime::Runtime, a: &MigrateArgs) -> CliResult {
    let home = rt.home();
    let act = super::authority::record(rt, "state reledger", serde_json::json!({}))?;
    let entered = act
        .settle(
            hcp_store::StoreLock::acquire(home)
                .and_then(|lock| hcp_store::ledger::rebuild(home, &lock)),
            hcp_store::StoreError::code,
        )
        .map_err(|e| super::authority::act_error(&e))?;
    if a.json {
        let adopted: Vec<_> = entered
            .adopted
            .iter()
            .map(|(path, vouched)| serde_json::json!({"path": path, "vouched": vouched}))
            .collect();
        print(&format!(
            "{}\n",
            serde_json::json!({"entries": entered, "adopted": adopted})
        ));
    } else {
        // Every file it now vouches for, so the owner sees what it adopted: those the
        // ledger it replaced did not vouch for as they are first among what to check.
        let mut out = format!(
            "state ledger written: {} state files, {} spent approvals, {} active packs, {} install records, {} bindings\n",
            entered.files, entered.used, entered.active, entered.records, entered.bindings
        );
        let last = last_installs(home);
        for (path, vouched) in &entered.adopted {
            let note = if *vouched {
                ""
            } else {
                "  (the ledger it replaces did not vouch for it as it is)"
            };
            // The ledger names a file outside `state/` from it (`../packs/…`).
            let shown = path
                .strip_prefix("../")
                .map_or_else(|| format!("state/{path}"), str::to_owned);
            let trail = if *vouched {
                None
            } else {
                shown.strip_prefix("packs/").and_then(|rest| {
                    let id = rest.split('/').next()?;
                    not_last_installed(home, &last, id)
                })
            };
            out.push_str(&format!(
                "  adopted {shown}{note}{}\n",
                trail.map(|t| format!("\n    {t}")).unwrap_or_default()
            ));
        }
        if entered.adopted.iter().any(|(_, v)| !v) {
            out.push_str("check them: `hcp session list`, `hcp grant --list`, `hcp list` (each pack's version and install time), `hcp doctor`; remove what should not be there with `hcp revoke`, `hcp session end`, `hcp deactivate`, `hcp disconnect`, or `hcp install --force DIR` from the pack's source\n");
        }
        print(&out);
    }
    Ok(exit::OK)
}

/// The last `install` or `uninstall` act the trail records of each pack: its act and the
/// `files_digest` it installed (`None` for an uninstall). Unreadable lines are skipped.
fn last_installs(
    home: &hcp_store::Home,
) -> std::collections::BTreeMap<String, (String, Option<String>)> {
    use std::io::BufRead;
    let mut last = std::collections::BTreeMap::new();
    let log = hcp_store::audit::AuditLog::new(home);
    let Ok(f) = std::fs::File::open(log.path()) else {
        return last;
    };
    for line in std::io::BufReader::new(f).lines().map_while(Result::ok) {
        if !line.contains("install\"") {
            continue;
        }
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        let act = v["act"].as_str().unwrap_or_default();
        if act != "install" && act != "uninstall" {
            continue;
        }
        let c = &v["changed"];
        let Some(id) = c["pack_id"].as_str().or_else(|| c["pack"].as_str()) else {
            continue;
        };
        let digest = c["files_digest"].as_str().map(str::to_owned);
        last.insert(id.to_owned(), (act.to_owned(), digest));
    }
    last
}

/// What the trail says against the install record of pack `id` adopted without the
/// replaced ledger's word: its last install wrote other files, or its last act was an
/// uninstall (a pack directory put back); `None` when the record is what it installed.
fn not_last_installed(
    home: &hcp_store::Home,
    last: &std::collections::BTreeMap<String, (String, Option<String>)>,
    id: &str,
) -> Option<String> {
    let path = hcp_store::pack::pack_dir(home, id).join(".hcp/record.json");
    let record: serde_json::Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    let here = record["files_digest"].as_str()?;
    match last.get(id) {
        Some((act, _)) if act == "uninstall" => Some(format!(
            "the trail's last act on pack `{id}` uninstalled it: this directory was put back; `hcp uninstall {id}` removes it"
        )),
        Some((_, Some(d))) if d != here => Some(format!(
            "not the files the trail's last install of pack `{id}` wrote: an older copy put back? `hcp install --force DIR` from its source installs it again"
        )),
        _ => None,
    }
}
