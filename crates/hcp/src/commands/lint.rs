//! `hcp lint DIR… [--json]` (RUNTIME §2): the checks install runs, without installing.
//!
//! Text mode prints one diagnostic a line on stdout (`path:line:col: level[code]:
//! message`, then `  hint: …`) and a summary on stderr; `--json` prints an array with one
//! object per pack on stdout (`hcp_lint::render::json`). Exit 0 when no pack has an error
//! (warnings allowed), 1 when one has, 2 when a DIR cannot be linted at all (then
//! nothing is linted; with `--json` that refusal is an object on stdout, `{"ok": false,
//! "code": "bad_pack_dir", "message", "causes", "hint"}`).

use crate::error::{CliError, CliResult};
use crate::exit;
use hcp_model::Code;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Arguments of `hcp lint`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Pack directories, each holding surface.json, policy.json and HARNESS.md.
    #[arg(required = true, value_name = "DIR")]
    dirs: Vec<PathBuf>,
    /// Print the findings as JSON on stdout: an array with one object per pack.
    #[arg(long)]
    json: bool,
}

/// Runs `hcp lint`.
pub fn run(a: Args) -> CliResult {
    let mut sources = Vec::with_capacity(a.dirs.len());
    let mut unusable = Vec::new();
    for dir in &a.dirs {
        match hcp_lint::read_pack(dir) {
            Ok(src) => sources.push(src),
            Err(e) => unusable.push(dir_error(dir, &e)),
        }
    }
    if let Some(first) = unusable.first() {
        let mut err = if unusable.len() == 1 {
            CliError::new(Code::BadPackDir, first.0.clone())
        } else {
            let mut err = CliError::new(
                Code::BadPackDir,
                format!("{} of the directories cannot be linted", unusable.len()),
            );
            for (message, _) in &unusable {
                err = err.cause(message);
            }
            err
        };
        if let Some(hint) = first.1 {
            err = err.hint(hint);
        }
        if a.json {
            // With `--json` the refusal is data on stdout, like the findings (DESIGN.md).
            let v = serde_json::json!({
                "ok": false,
                "code": err.code,
                "message": err.message,
                "causes": err.causes,
                "hint": err.hint,
            });
            write_ignoring_broken_pipe(&mut std::io::stdout().lock(), &format!("{v:#}\n"));
            return Ok(err.exit);
        }
        return Err(err);
    }
    let reports: Vec<hcp_lint::Report> = sources.iter().map(hcp_lint::check).collect();
    let text = if a.json {
        let mut t = serde_json::to_string_pretty(&hcp_lint::render::json(&reports))
            .map_err(|e| CliError::new(Code::InternalError, "cannot render JSON").cause(e))?;
        t.push('\n');
        t
    } else {
        reports.iter().map(hcp_lint::render::concise).collect()
    };
    write_ignoring_broken_pipe(&mut std::io::stdout().lock(), &text);
    if !a.json {
        let summary = format!("{}\n", hcp_lint::render::summary(&reports));
        write_ignoring_broken_pipe(&mut std::io::stderr().lock(), &summary);
    }
    if reports.iter().any(hcp_lint::Report::has_errors) {
        Ok(exit::REFUSED)
    } else {
        Ok(exit::OK)
    }
}

/// A closed pipe (`hcp lint … | head`) is not an error; other write errors have nowhere
/// to be reported either.
fn write_ignoring_broken_pipe(w: &mut impl Write, text: &str) {
    let _ = w.write_all(text.as_bytes()).and_then(|()| w.flush());
}

/// Why `dir` cannot be linted, and a hint: what install and promote say of it too
/// (`hcp_lint::bad_pack_dir`).
fn dir_error(dir: &Path, e: &std::io::Error) -> (String, Option<&'static str>) {
    let b = hcp_lint::bad_pack_dir(dir, e);
    (b.message, Some(b.hint))
}
