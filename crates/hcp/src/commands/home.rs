//! `hcp home` (RUNTIME §5.2), owner only: a tenant home's path, seeding it, removing it.
//!
//! ```text
//! hcp home PACK (--principal P | --project J) [--seed DIR]
//! hcp home rm PACK (--principal P | --project J)
//! ```
//!
//! `hcp home` prints the path alone (made empty, `0700`, when new), so that
//! `cp -a ~/.config/gh "$(hcp home gh --principal owner)/.config/"` works; `--seed DIR`
//! copies the owner's directory into it instead (`hcp_runtime::home::seed`); `rm` removes
//! it (`hcp_runtime::home::remove`).

use crate::error::{CliError, CliResult};
use crate::exit;
use hcp_runtime::home::Whose;
use std::path::PathBuf;

/// Arguments of `hcp home`.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct Args {
    #[command(subcommand)]
    command: Option<HomeCommand>,
    /// The pack id.
    #[arg(required = true, value_name = "PACK")]
    pack: Option<String>,
    #[command(flatten)]
    whose: WhoseArgs,
    /// Copy this directory of the owner's into the home (symbolic links copied as links,
    /// never followed; modes kept).
    #[arg(long, value_name = "DIR")]
    seed: Option<PathBuf>,
}

/// `--principal P` or `--project J`: exactly one.
#[derive(Debug, clap::Args)]
#[group(required = true, multiple = false)]
struct WhoseArgs {
    /// The principal whose `personal` home it is (`owner` for the owner's own calls).
    #[arg(long, value_name = "P")]
    principal: Option<String>,
    /// The project whose `brain` home it is.
    #[arg(long, value_name = "J")]
    project: Option<String>,
}

impl WhoseArgs {
    fn whose(&self) -> Whose {
        match (&self.principal, &self.project) {
            (Some(p), _) => Whose::Principal(p.clone()),
            (None, Some(j)) => Whose::Project(j.clone()),
            (None, None) => Whose::Principal(String::new()),
        }
    }
}

#[derive(Debug, clap::Subcommand)]
enum HomeCommand {
    /// Remove a tenant home and everything in it.
    Rm(RmArgs),
}

/// Arguments of `hcp home rm`.
#[derive(Debug, clap::Args)]
struct RmArgs {
    /// The pack id.
    #[arg(value_name = "PACK")]
    pack: String,
    #[command(flatten)]
    whose: WhoseArgs,
}

/// Whose home a record names: `{"principal": P}` or `{"project": J}`.
fn whose_json(w: &Whose) -> serde_json::Value {
    match w {
        Whose::Principal(p) => serde_json::json!({"principal": p}),
        Whose::Project(j) => serde_json::json!({"project": j}),
    }
}

/// Runs `hcp home`.
pub fn run(a: Args) -> CliResult {
    super::session::require_owner("home")?;
    let rt = super::exec::runtime()?;
    if let Some(HomeCommand::Rm(r)) = a.command {
        let whose = r.whose.whose();
        let path = hcp_runtime::home::locate(&rt, &r.pack, &whose).map_err(CliError::command)?;
        let act = super::authority::begin(&rt, "home rm")?;
        if path.exists() {
            super::authority::record_act(
                &act,
                serde_json::json!({"pack_id": r.pack, "whose": whose_json(&whose), "home": path.to_string_lossy()}),
            )?;
        }
        let (home, existed) = act
            .settle(hcp_runtime::home::remove(&rt, &r.pack, &whose), |r| r.code)
            .map_err(CliError::command)?;
        if existed {
            out!("removed `{}`", home.display());
        } else {
            out!(
                "no home of {} for `{}` (`{}`)",
                whose.describe(),
                r.pack,
                home.display()
            );
        }
        return Ok(exit::OK);
    }
    let pack = a.pack.unwrap_or_default();
    let whose = a.whose.whose();
    match &a.seed {
        Some(dir) => {
            let (home, s) =
                hcp_runtime::home::seed(&rt, &pack, &whose, dir).map_err(CliError::command)?;
            out!(
                "seeded `{}` from `{}` ({} {}, {} bytes)",
                home.display(),
                dir.display(),
                s.entries,
                if s.entries == 1 { "entry" } else { "entries" },
                s.bytes
            );
        }
        None => {
            let home = hcp_runtime::home::path(&rt, &pack, &whose).map_err(CliError::command)?;
            out!("{}", home.display());
        }
    }
    Ok(exit::OK)
}
