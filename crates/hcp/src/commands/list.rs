//! `hcp list [--json]`: the installed packs (RUNTIME §3).

use super::install::{open_home, store_error};
use crate::error::CliResult;
use crate::exit;
use hcp_store::pack;
use std::io::Write;

/// Arguments of `hcp list`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print `{"packs": [{"id", "name", "kind", "active", "verbs", "installed_at"}]}`.
    #[arg(long)]
    json: bool,
}

/// Runs `hcp list`. Reads only `packs/`, `state/active/` and each pack's install record.
pub fn run(a: Args) -> CliResult {
    let home = open_home()?;
    let packs = pack::list(&home).map_err(store_error)?;
    // One buffer, flushed once: a line-buffered stdout would make a write per line.
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    let r = if a.json {
        #[derive(serde::Serialize)]
        struct Listing<'a> {
            packs: &'a [pack::PackListing],
        }
        serde_json::to_writer_pretty(&mut out, &Listing { packs: &packs })
            .map_err(std::io::Error::from)
            .and_then(|()| writeln!(out))
    } else if packs.is_empty() {
        writeln!(out, "no packs installed")
    } else {
        write!(out, "{}", table(&packs))
    }
    .and_then(|()| out.flush());
    match r {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(crate::error::CliError::new(
            hcp_model::Code::StoreIo,
            format!("cannot write the list: {e}"),
        )),
        _ => Ok(exit::OK),
    }
}

fn table(packs: &[pack::PackListing]) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect()
    };
    let rows: Vec<[String; 6]> = packs
        .iter()
        .map(|p| {
            [
                p.id.clone(),
                match &p.damaged {
                    Some(_) => "(damaged record)".to_owned(),
                    None => clean(&p.name),
                },
                p.kind.clone(),
                if p.active { "yes" } else { "no" }.to_owned(),
                p.verbs.to_string(),
                p.installed_at.clone(),
            ]
        })
        .collect();
    let head = ["ID", "NAME", "KIND", "ACTIVE", "VERBS", "INSTALLED"];
    let mut width = head.map(|h| h.chars().count());
    for r in &rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(c);
                s.push_str(&" ".repeat(width[i] - c.chars().count() + 2));
            }
        }
        s.push('\n');
        s
    };
    let mut out = line(&head.map(str::to_owned));
    for r in &rows {
        out.push_str(&line(r));
    }
    out
}
