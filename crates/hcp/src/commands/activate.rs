//! `hcp activate` and `hcp deactivate` (RUNTIME §3).

use super::install::{pack_error, pack_error_in};
use crate::error::CliResult;
use crate::exit;
use hcp_store::pack::PackError;
use hcp_store::skill;

/// Arguments of `hcp activate`.
#[derive(Debug, clap::Args)]
pub struct ActivateArgs {
    /// The pack id.
    id: String,
}

/// Arguments of `hcp deactivate`.
#[derive(Debug, clap::Args)]
pub struct DeactivateArgs {
    /// The pack id.
    id: String,
}

/// Runs `hcp activate`: writes `skills/<id>/SKILL.md` and its copy in each folder of
/// `skills.export` (RUNTIME §10), and marks the pack active.
///
/// Owner only (RUNTIME §8: a control-plane pack is never activated for a non-owner
/// principal; activation decides what every harness is taught, so no session may do it).
pub fn run_activate(a: ActivateArgs) -> CliResult {
    super::session::require_owner("activate")?;
    let rt = super::exec::runtime()?;
    let home = rt.home().clone();
    // Checked (installed, every export folder can take the skill), recorded, then made.
    let act = super::authority::begin(&rt, "activate")?;
    let pack = act
        .settle(
            skill::activate_authorized(&home, &a.id, |installed| {
                act.record(serde_json::json!({"pack_id": installed.id.as_str(), "files_digest": installed.record.files_digest}))?;
                Ok(())
            }),
            PackError::code,
        )
        .map_err(|e| pack_error_in(&home, &a.id, e))?;
    out!(
        "activated `{}`: `{}`",
        pack.id,
        skill::skill_path(&home, pack.id.as_str()).display()
    );
    for dir in skill::export::ledger(&home, pack.id.as_str()) {
        out!(
            "exported: `{}`",
            dir.join(pack.id.as_str()).join(skill::SKILL_MD).display()
        );
    }
    Ok(exit::OK)
}

/// Runs `hcp deactivate`: removes the marker, the exported copies hcp wrote and the
/// SKILL.md.
///
/// Owner only, like activate.
pub fn run_deactivate(a: DeactivateArgs) -> CliResult {
    super::session::require_owner("deactivate")?;
    let rt = super::exec::runtime()?;
    let home = rt.home().clone();
    let id = hcp_store::pack::parse_id(&a.id).map_err(pack_error)?;
    let active = hcp_store::pack::is_active(&home, id.as_str());
    hcp_store::pack::ensure_writable(&home).map_err(super::install::store_error)?;
    let act = super::authority::begin(&rt, "deactivate")?;
    if active || hcp_store::pack::pack_dir(&home, id.as_str()).exists() {
        super::authority::record_act(
            &act,
            serde_json::json!({"pack_id": id.as_str(), "was_active": active}),
        )?;
    }
    let was = act
        .settle(skill::deactivate(&home, &a.id), PackError::code)
        .map_err(|e| pack_error_in(&home, &a.id, e))?;
    if was {
        out!("deactivated `{}`", a.id);
    } else {
        out!("`{}` was not active", a.id);
    }
    Ok(exit::OK)
}
