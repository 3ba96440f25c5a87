//! `hcp pack promote DIR` (RUNTIME §1.3): rewrites a `pass_through` pack in place into
//! named verbs (`hcp_lint::promote`), keeps a backup, prints what the author must still
//! decide. Exit 0 when promoted, 1 when there is nothing to promote or a file does not
//! parse, 2 when DIR is no pack directory at all (`bad_pack_dir`, as `hcp lint` says), 66
//! when one of its files cannot be read or written (`pack_unreadable`).

use crate::error::{CliError, CliResult};
use crate::exit;
use std::io::Write;
use std::path::PathBuf;

/// `hcp pack …`.
#[derive(Debug, clap::Subcommand)]
pub enum PackCommand {
    /// Rewrite a `pass_through` pack into one named verb per allowed subcommand.
    Promote(PromoteArgs),
}

/// Arguments of `hcp pack promote`.
#[derive(Debug, clap::Args)]
pub struct PromoteArgs {
    /// The pack directory (its files are replaced; a backup is kept beside it).
    #[arg(value_name = "DIR")]
    dir: PathBuf,
}

/// Runs `hcp pack …`.
pub fn run(c: PackCommand) -> CliResult {
    let PackCommand::Promote(a) = c;
    let done = hcp_lint::promote::promote(&a.dir).map_err(|e| {
        let hint = match &e {
            hcp_lint::promote::PromoteError::BadDir(b) => b.hint,
            _ => "`hcp lint DIR` says what is wrong with the pack's files",
        };
        CliError::new(e.code(), e.to_string()).hint(hint)
    })?;
    let p = &done.promotion;
    let mut out = String::new();
    out.push_str(&format!(
        "promoted `{}`: {} verb(s) from `pass_through`; the old files are in `{}`\n",
        a.dir.display(),
        p.verbs.len(),
        done.backup.display()
    ));
    for v in &p.verbs {
        let cli = serde_json::to_string(&v.cli).unwrap_or_default();
        out.push_str(&format!("  {}: write, land {}, cli {cli}\n", v.key, v.land));
    }
    for (sub, why) in &p.skipped {
        out.push_str(&format!("  left out `{sub}`: {why}\n"));
    }
    if !p.decide.is_empty() {
        out.push_str("still to decide:\n");
        for d in &p.decide {
            out.push_str(&format!("  - {d}\n"));
        }
    }
    let _ = std::io::stdout().write_all(out.as_bytes());
    Ok(exit::OK)
}
