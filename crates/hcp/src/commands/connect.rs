//! `hcp connect PACK` and `hcp disconnect PACK` (RUNTIME §8): the command line and the
//! printing; the runtime (`hcp_runtime::connect`) runs the connect verb through the
//! pipeline and stores the credential, which is never shown.

use super::exec::{caller, face, print_json, render_refusal, runtime};
use crate::error::{CliError, CliResult};
use crate::exit;
use hcp_model::Code;
use hcp_runtime::connect;
use serde_json::json;
use std::io::Write as _;

/// Arguments of `hcp connect`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Runs the pack's connect verb through the gate and stores the credential it \
                  prints (one JSON object) as the binding of the calling principal for the \
                  pack's binding family; that principal's later calls of the family's packs \
                  use it.\n\n\
                  Two users are involved. The binding's owner is the principal running \
                  `hcp connect`: `owner` without `HCP_SESSION`, else the session's principal \
                  (the session needs `pack.connect`). ARGS are the connect verb's own \
                  (`hcp show PACK` lists them) and go to the service: in `hcp connect tasks \
                  --user ann`, `ann` is the account the task service signs in, and the \
                  binding is still the calling principal's. To connect an agent, run it with \
                  the agent's `HCP_SESSION`.\n\n\
                  `--confirm` when the verb's policy asks for it. The answer names the \
                  principal the binding was stored for; the credential is never shown."
)]
pub struct Args {
    /// The pack id.
    pack: String,
    /// Answer with a JSON object on stdout (never holding the credential).
    #[arg(long)]
    json: bool,
    /// The connect verb's `--NAME VALUE` arguments (passed to the service, such as its
    /// account: never the principal the binding is stored for), `--confirm`, `--timeout
    /// SECS`.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGS"
    )]
    words: Vec<String>,
}

/// Arguments of `hcp disconnect`.
#[derive(Debug, clap::Args)]
pub struct DisconnectArgs {
    /// The pack id.
    pack: String,
    /// Answer with a JSON object on stdout.
    #[arg(long)]
    json: bool,
}

/// Runs `hcp connect`.
pub fn run(a: Args) -> CliResult {
    let rt = runtime()?;
    let caller = caller()?;
    let pack = connect::connectable(&rt, &a.pack).map_err(CliError::from)?;
    let verb_key = pack.manifest.connect_verb().unwrap_or_default().to_owned();
    let mut words = vec![verb_key];
    words.extend(a.words.iter().cloned());
    let parsed = face::parse(&words, a.json, None).map_err(|e| {
        CliError::new(Code::Usage, e.0)
            .hint("hcp connect PACK [--NAME VALUE…] [--confirm] [--json] [--timeout SECS]")
    })?;
    let json = parsed.json;
    let timeout = parsed.timeout.map(std::time::Duration::from_secs_f64);
    let c = connect::connect(&rt, &caller, &pack, parsed.words, timeout).map_err(CliError::from)?;
    if json {
        print_json(&c.result);
        super::exec::after_answer(&rt);
        return Ok(c.exit);
    }
    let _ = std::io::stderr().lock().write_all(&c.stderr);
    render_refusal(&c.result, c.exit);
    if let Some((principal, family)) = &c.stored {
        let shared = if family == pack.id.as_str() {
            String::new()
        } else {
            format!(" (family `{family}`, shared by its packs)")
        };
        // The principal, not an argument of the verb (`--user ann` is the service's
        // account): the binding is the caller's.
        out!(
            "connected `{}`: binding stored for principal `{principal}`{shared}",
            pack.id
        );
    }
    super::exec::after_answer(&rt);
    Ok(c.exit)
}

/// Runs `hcp disconnect`: removes the calling principal's credential for the pack's
/// family. A session needs `pack.connect` on the pack.
pub fn run_disconnect(a: DisconnectArgs) -> CliResult {
    let rt = runtime()?;
    let caller = caller()?;
    let pack = connect::connectable(&rt, &a.pack).map_err(CliError::from)?;
    let d = connect::disconnect(&rt, &caller, &pack).map_err(CliError::from)?;
    if a.json {
        print_json(&json!({
            "ok": true,
            "pack_id": pack.id.as_str(),
            "principal": d.principal,
            "family": d.family,
            "removed": d.removed,
            "audit_id": d.audit_id,
        }));
    } else if d.removed {
        out!("disconnected `{}` from `{}`", d.principal, d.family);
    } else {
        out!("`{}` had no binding for `{}`", d.principal, d.family);
    }
    super::exec::after_answer(&rt);
    Ok(exit::OK)
}
