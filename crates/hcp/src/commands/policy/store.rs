//! `hcp policy init|coverage|lock`: the runtime policy written from, and checked
//! against, the store's active packs (RUNTIME §7 "Contracts from packs", "Tool locks";
//! `hcp_runtime::policy::{contracts, lock}`).

use crate::commands::session::require_owner;
use crate::error::{CliError, CliResult};
use crate::exit;
use hcp_model::Code;
use hcp_runtime::policy::{contracts, lock as tool_lock, source};
use std::io::Write;
use std::path::PathBuf;

/// Arguments of `hcp policy init`.
#[derive(Debug, clap::Args)]
pub struct InitArgs {
    /// Packs to write the policy for (default: every active pack).
    pub(super) packs: Vec<String>,
    /// Grant every tool to this role (default: nothing is granted). With `--merge`: allow
    /// the added tools for this role (its `allow` list in FILE).
    #[arg(long, value_name = "ROLE")]
    pub(super) role: Option<String>,
    /// Add to the existing policy FILE the tools of the active packs (or the named ones) it
    /// does not name yet, and write FILE again in place (owner only). Every edit in FILE is
    /// kept: its tools, roles and rules untouched, its order and layout, and, in YAML, its
    /// comments; JSON cannot hold comments, so a `.json` FILE gains its tools without
    /// them. Nothing is written on any error, and FILE is replaced atomically. Running it
    /// again adds nothing.
    #[arg(long, value_name = "FILE")]
    merge: Option<PathBuf>,
    /// With `--merge`: answer as one JSON object on stdout.
    #[arg(long, requires = "merge")]
    pub(super) json: bool,
}

/// Arguments of `hcp policy coverage`.
#[derive(Debug, clap::Args)]
pub struct CoverageArgs {
    /// A policy file to check instead of the store's.
    file: Option<PathBuf>,
    /// Answer as one JSON object on stdout.
    #[arg(long)]
    json: bool,
}

/// Arguments of `hcp policy lock`.
#[derive(Debug, clap::Args)]
pub struct LockArgs {
    /// Write nothing: compare the active verbs with the lock; exit 1 on any difference.
    #[arg(long)]
    check: bool,
    /// Answer as one JSON object on stdout.
    #[arg(long)]
    json: bool,
}

fn refused(r: hcp_runtime::Refusal) -> CliError {
    CliError::command(r)
}

/// `hcp policy init [PACK…] [--role ROLE]`: the starting policy on stdout.
pub fn init(a: &InitArgs) -> CliResult {
    if let Some(file) = &a.merge {
        return super::merge::run(a, file);
    }
    let rt = crate::commands::exec::runtime()?;
    let packs = contracts::active_packs(rt.home(), &a.packs).map_err(refused)?;
    let mut command = String::from("hcp policy init");
    for p in &a.packs {
        command.push(' ');
        command.push_str(p);
    }
    if let Some(r) = &a.role {
        command.push_str(" --role ");
        command.push_str(r);
    }
    let text = contracts::init(&packs, a.role.as_deref(), &command).map_err(refused)?;
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
    Ok(exit::OK)
}

/// `hcp policy coverage [FILE]`: exit 1 naming each active verb the policy does not
/// mention.
pub fn coverage(a: &CoverageArgs) -> CliResult {
    let rt = crate::commands::exec::runtime()?;
    let (file, policy) = match &a.file {
        Some(f) => (f.clone(), super::load(f)?),
        None => match source::load(rt.home()) {
            Ok(Some(rp)) => (rp.file, rp.policy),
            Ok(None) => {
                return Err(CliError::new(
                    Code::NotFound,
                    "the store has no runtime policy (`policy.json` or `policy.yaml`): session calls answer to the packs' policies alone",
                )
                .hint(
                    "write one with `hcp policy init > policy.yaml`, check it, and copy it to the store",
                ));
            }
            Err(r) => {
                let e = CliError::new(r.code, r.message);
                return Err(match r.hint {
                    Some(h) => e.hint(h),
                    None => e,
                });
            }
        },
    };
    let packs = contracts::active_packs(rt.home(), &[]).map_err(refused)?;
    let c = contracts::coverage(&policy, &packs);
    let verbs: usize = packs
        .iter()
        .flat_map(contracts::tools_of)
        .filter(|t| !t.stimulus)
        .count();
    let ok = c.verbs.is_empty();
    let mut out = std::io::stdout().lock();
    if a.json {
        let v = serde_json::json!({
            "ok": ok,
            "file": file,
            "active_verbs": verbs,
            "missing_verbs": c.verbs,
            "missing_stimuli": c.stimuli,
            "unused_tools": c.unused,
        });
        let _ = writeln!(out, "{v}");
    } else {
        let _ = writeln!(
            out,
            "policy `{}` mentions {} of {verbs} active verbs",
            file.display(),
            verbs - c.verbs.len()
        );
        section(
            &mut out,
            "not mentioned (every session call of them is refused: unknown_tool)",
            &c.verbs,
        );
        section(
            &mut out,
            "stimuli not mentioned (`hcp sense` of them is refused to sessions)",
            &c.stimuli,
        );
        section(&mut out, "tools that name no active verb", &c.unused);
    }
    Ok(if ok { exit::OK } else { exit::REFUSED })
}

fn section(out: &mut impl Write, title: &str, names: &[String]) {
    if names.is_empty() {
        return;
    }
    let _ = writeln!(out, "{title}:");
    for n in names {
        let _ = writeln!(out, "  {n}");
    }
}

/// `hcp policy lock [--check]`.
pub fn lock(a: &LockArgs) -> CliResult {
    let rt = crate::commands::exec::runtime()?;
    let home = rt.home();
    let packs = contracts::active_packs(home, &[]).map_err(refused)?;
    let current = tool_lock::sources(&packs).map_err(refused)?;
    let path = tool_lock::lock_path(home);
    let mut out = std::io::stdout().lock();
    if a.check {
        let lock = match tool_lock::read(home) {
            Ok(Some(l)) => l,
            Ok(None) => {
                return Err(CliError::new(
                    Code::LockNotFound,
                    format!("there is no tool lock `{}`", path.display()),
                )
                .hint("the owner writes it with `hcp policy lock`"));
            }
            Err(r) => {
                let e = CliError::new(r.code, r.message);
                return Err(match r.hint {
                    Some(h) => e.hint(h),
                    None => e,
                });
            }
        };
        let report = tool_lock::check_all(&lock, &current);
        let drifted: Vec<String> = report
            .drifted
            .iter()
            .map(|(n, d)| format!("{n} ({})", d.moved().join(", ")))
            .collect();
        if a.json {
            let v = serde_json::json!({
                "ok": report.is_clean(),
                "file": path,
                "locked": lock.tools.len(),
                "drifted": report.drifted.iter().map(|(n, d)| serde_json::json!({"tool": n, "moved": d.moved()})).collect::<Vec<_>>(),
                "unlocked": report.unlocked,
                "stale": report.missing,
            });
            let _ = writeln!(out, "{v}");
        } else {
            let _ = writeln!(
                out,
                "tool lock `{}`: {} verbs locked, {} active",
                path.display(),
                lock.tools.len(),
                current.len()
            );
            section(
                &mut out,
                "changed since locked (session calls refused: tool_drift)",
                &drifted,
            );
            section(
                &mut out,
                "not in the lock (session calls refused: tool_drift)",
                &report.unlocked,
            );
            section(
                &mut out,
                "locked but no longer an active verb (lock_stale)",
                &report.missing,
            );
            if report.is_clean() {
                let _ = writeln!(out, "every active verb matches its lock");
            }
        }
        return Ok(if report.is_clean() {
            exit::OK
        } else {
            exit::REFUSED
        });
    }
    require_owner("policy lock")?;
    let before = tool_lock::read(home);
    let policy = source::policy_file(home)
        .ok()
        .flatten()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
    let new = tool_lock::build(&current, policy.as_deref());
    let uncovered = uncovered(home, &packs);
    let (changed, added, removed) = match &before {
        Ok(Some(old)) => {
            let r = tool_lock::check_all(old, &current);
            (
                r.drifted.into_iter().map(|(n, _)| n).collect(),
                r.unlocked,
                r.missing,
            )
        }
        _ => (Vec::new(), Vec::new(), Vec::new()),
    };
    // An act of authority (RUNTIME §6): recorded before the lock is written.
    let act = crate::commands::authority::record(
        &rt,
        "policy lock",
        serde_json::json!({
            "tools": new.tools.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            "changed": changed, "added": added, "removed": removed,
        }),
    )?;
    act.settle(tool_lock::write(home, &new), |r| r.code)
        .map_err(refused)?;
    for w in &uncovered.warnings {
        eprintln!("warning: {w}");
    }
    if a.json {
        let v = serde_json::json!({
            "ok": true, "file": path, "locked": new.tools.len(),
            "changed": changed, "added": added, "removed": removed,
            "replaced_unreadable": before.as_ref().err().map(|r| r.code.as_str()),
            "uncovered": uncovered.verbs, "warnings": uncovered.warnings,
        });
        let _ = writeln!(out, "{v}");
    } else {
        let _ = writeln!(
            out,
            "locked {} verbs in `{}`",
            new.tools.len(),
            path.display()
        );
        if let Err(r) = &before {
            let _ = writeln!(out, "replaced a lock that did not read ({})", r.code);
        }
        section(&mut out, "changed since the last lock", &changed);
        section(&mut out, "new since the last lock", &added);
        section(&mut out, "gone since the last lock", &removed);
    }
    Ok(exit::OK)
}

/// What `hcp policy lock` warns of: the active verbs the runtime policy does not name
/// (every session call of them is refused, `unknown_tool`, whatever the lock says).
struct Uncovered {
    /// The verbs, as tool names, in name order.
    verbs: Vec<String>,
    /// One warning a verb (or one for a policy that does not load).
    warnings: Vec<String>,
}

fn uncovered(home: &hcp_store::Home, packs: &[hcp_store::pack::InstalledPack]) -> Uncovered {
    let mut u = Uncovered {
        verbs: Vec::new(),
        warnings: Vec::new(),
    };
    match source::load(home) {
        // No runtime policy: the packs' policies alone govern session calls.
        Ok(None) => {}
        Ok(Some(rp)) => {
            let shown = rp.file.display().to_string();
            u.verbs = contracts::coverage(&rp.policy, packs).verbs;
            for v in &u.verbs {
                u.warnings.push(format!(
                    "`{v}` is locked but the runtime policy `{shown}` does not name it: every session call of it is refused (unknown_tool); add it with `hcp policy init --merge {shown}`"
                ));
            }
        }
        Err(r) => u.warnings.push(format!(
            "the runtime policy does not load ({}): every call is refused until it does; `hcp policy check FILE` says why",
            r.code
        )),
    }
    u
}
