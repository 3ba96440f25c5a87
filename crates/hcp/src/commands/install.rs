//! `hcp install` and `hcp uninstall` (RUNTIME §3), and the store helpers the store
//! subcommands share: opening the home, turning store refusals into [`CliError`]s.

use crate::error::{CliError, CliResult};
use crate::exit;
use hcp_runtime::install::InstallError;
use hcp_store::pack::{BinLookup, InstallOptions, InstallStep, PackError};
use hcp_store::{Home, StoreError};
use std::path::PathBuf;

/// Test seam, read only by debug builds: `HCP_TEST_ABORT_AT=<step>` makes `hcp install`
/// call `std::process::abort()` when it reaches that [`InstallStep`] (`locked`,
/// `staging-cleaned`, `staged-partial`, `staged`, `swapped`, `old-removed`,
/// `skill-written`, `activated`). The crash tests use it to prove that an interrupted
/// install leaves the old pack or the new one. Release builds ignore it.
#[cfg_attr(not(debug_assertions), allow(dead_code))]
pub const HCP_TEST_ABORT_AT: &str = "HCP_TEST_ABORT_AT";

/// Arguments of `hcp install`.
#[derive(Debug, clap::Args)]
pub struct InstallArgs {
    /// The pack directory (holding surface.json, policy.json, HARNESS.md).
    dir: PathBuf,
    /// Replace an installed pack with the same id.
    #[arg(long)]
    force: bool,
    /// Activate the pack too (write its SKILL.md), under the same lock.
    #[arg(long)]
    activate: bool,
    /// Let the pack join `FAMILY`, its `binding.family` another installed pack already
    /// uses: its calls then get the credential each principal connected for that family.
    #[arg(long, value_name = "FAMILY")]
    join_family: Option<String>,
    /// One JSON object on stdout (`ok`, `pack_id`, `replaced`, `content_changed`,
    /// `active`, `bins`, `warnings`) instead of the lines.
    #[arg(long)]
    json: bool,
}

/// Arguments of `hcp uninstall`.
#[derive(Debug, clap::Args)]
pub struct UninstallArgs {
    /// The pack id.
    id: String,
    /// Remove the pack's tenant homes too (RUNTIME §5.2): every principal's and project's.
    #[arg(long)]
    purge: bool,
}

/// Opens the store named by `HCP_HOME` (or the platform data directory); see
/// [`crate::commands::session::open_home`].
pub(crate) fn open_home() -> Result<Home, CliError> {
    crate::commands::session::open_home()
}

/// A store failure: exit 74 with the failure's code and its causes.
pub(crate) fn store_error(e: StoreError) -> CliError {
    crate::commands::session::store_error(&e)
}

/// A pack refusal or failure as a [`CliError`] with its code, exit status and hint
/// (`hcp_runtime::install::pack_refusal`).
pub(crate) fn pack_error(e: PackError) -> CliError {
    match &e {
        PackError::Store(s) => crate::commands::session::store_error(s),
        _ => CliError::command(hcp_runtime::install::pack_refusal(&e)),
    }
}

/// [`pack_error`] of a command that names pack `id` in the store `home`: a pack that is not
/// installed is answered with the nearest installed ids
/// (`hcp_runtime::target::not_installed`).
pub(crate) fn pack_error_in(home: &Home, id: &str, e: PackError) -> CliError {
    match e {
        PackError::NotInstalled { .. } => {
            CliError::command(hcp_runtime::target::not_installed(home, id))
        }
        e => pack_error(e),
    }
}

#[cfg(debug_assertions)]
fn abort_at() -> Option<String> {
    std::env::var(HCP_TEST_ABORT_AT).ok()
}

#[cfg(not(debug_assertions))]
fn abort_at() -> Option<String> {
    None
}

/// Runs `hcp install`. Owner only: a session may not install, nor activate a pack
/// (a control-plane one least of all, RUNTIME §8).
pub fn run_install(a: InstallArgs) -> CliResult {
    super::session::require_owner("install")?;
    let (home, fresh) = super::init::open_or_init_for(&a.dir)?;
    let result = install_into(&a, home);
    // A store made for this install is taken back when it fails (bad input leaves the
    // home as it was); one kept is said, so that a typo'd `HCP_HOME` is seen at once.
    match (&result, fresh) {
        (Err(_), Some(f)) => f.undo(),
        (Ok(_), Some(f)) => eprintln!(
            "note: `{}` was not a store: made one there for this install (`hcp init` makes one on purpose); if HCP_HOME has a typo, set it to your store, install again, and remove this directory",
            f.root().display()
        ),
        _ => {}
    }
    result
}

fn install_into(a: &InstallArgs, home: Home) -> CliResult {
    let abort = abort_at();
    let hook = |s: InstallStep| {
        if abort.as_deref() == Some(s.name()) {
            std::process::abort();
        }
    };
    let opts = InstallOptions {
        force: a.force,
        activate: a.activate,
        lookup: BinLookup {
            path: std::env::var_os("PATH"),
            cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
        },
        step_hook: if abort.is_some() { Some(&hook) } else { None },
        authorize: None,
    };
    let rt = hcp_runtime::Runtime::open(home.clone());
    match hcp_runtime::install::install_joining(&rt, &a.dir, &opts, a.join_family.as_deref()) {
        Ok(done) => {
            eprint!("{}", hcp_lint::render::concise(&done.report));
            let mut warnings: Vec<String> = done.view_notes.clone();
            if done.replaced && done.content_changed {
                warnings.extend(suspended_warning(&rt, &done.record.pack_id));
            }
            for n in &warnings {
                eprintln!("warning: {n}");
            }
            let r = &done.record;
            if a.json {
                out!(
                    "{}",
                    serde_json::json!({
                        "ok": true,
                        "pack_id": r.pack_id,
                        "replaced": done.replaced,
                        "content_changed": done.content_changed,
                        "active": done.active,
                        "bins": r.bins.len(),
                        "warnings": warnings,
                    })
                );
                return Ok(exit::OK);
            }
            let bins = r.bins.len();
            out!(
                "{} `{}` ({} {}, {bins} {} pinned)",
                if done.replaced {
                    "reinstalled"
                } else {
                    "installed"
                },
                r.pack_id,
                r.summary.verb_count,
                if r.summary.verb_count == 1 {
                    "verb"
                } else {
                    "verbs"
                },
                if bins == 1 { "bin" } else { "bins" },
            );
            if done.content_changed {
                out!(
                    "content of `{}` changed: grants of other principals on it are suspended until granted again",
                    r.pack_id
                );
            }
            if done.active {
                out!(
                    "active: `{}`",
                    hcp_store::skill::skill_path(&home, &r.pack_id).display()
                );
                for dir in hcp_store::skill::export::ledger(&home, &r.pack_id) {
                    out!(
                        "exported: `{}`",
                        dir.join(&r.pack_id)
                            .join(hcp_store::skill::SKILL_MD)
                            .display()
                    );
                }
            }
            Ok(exit::OK)
        }
        Err(e @ InstallError::Lint(_)) => {
            if let InstallError::Lint(report) = &e {
                eprint!("{}", hcp_lint::render::concise(report));
            }
            Err(CliError::new(e.code(), e.to_string()).hint(format!(
                "fix the errors above; `hcp lint {}` runs the same checks",
                a.dir.display()
            )))
        }
        Err(InstallError::Pack(e)) => Err(pack_error(e)),
    }
}

/// The warning of a reinstall whose content counts as changed (RUNTIME §3, the rug-pull
/// guard: a changed pack, or an install record that was damaged or missing, which
/// `--force` repairs): the grants of other principals on the pack that it suspends,
/// each with the `hcp grant` that restores it. `None` when there are none to suspend.
fn suspended_warning(rt: &hcp_runtime::Runtime, pack_id: &str) -> Option<String> {
    let grants = rt.state().grants_list().ok()?;
    let mut restore: Vec<String> = Vec::new();
    for g in grants.iter().filter(|g| {
        matches!(&g.pack, hcp_store::grant::PackScope::Pack(p) if p.as_str() == pack_id)
            && g.principal.as_str() != hcp_model::principal::OWNER
    }) {
        let line = format!("hcp grant {} {pack_id} {}", g.principal, g.capability);
        if !restore.contains(&line) {
            restore.push(line);
        }
    }
    if restore.is_empty() {
        return None;
    }
    Some(format!(
        "the grants of other principals on `{pack_id}` are suspended until granted again (its content counts as changed: its files differ, or its install record was damaged or missing); restore each with {}",
        restore
            .iter()
            .map(|l| format!("`{l}`"))
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// Runs `hcp uninstall`. Owner only.
pub fn run_uninstall(a: UninstallArgs) -> CliResult {
    super::session::require_owner("uninstall")?;
    let rt = super::exec::runtime()?;
    let removed = hcp_runtime::install::uninstall_purging(&rt, &a.id, a.purge)
        .map_err(|e| pack_error_in(rt.home(), &a.id, e))?;
    out!(
        "uninstalled `{}`{}",
        removed.id,
        if removed.was_active {
            " (it was active)"
        } else {
            ""
        }
    );
    if a.purge {
        let purged = hcp_runtime::home::purge(&rt, &removed.id).map_err(CliError::command)?;
        out!(
            "{} `{}`",
            if purged {
                "removed the tenant homes of"
            } else {
                "no tenant homes of"
            },
            removed.id
        );
    }
    Ok(exit::OK)
}
