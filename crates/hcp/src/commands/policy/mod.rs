//! `hcp policy check|hash|decide FILE`: the operator's Histos runtime policy on its own
//! (RUNTIME §7, HISTOS-ENGINE §1–§3), to try a policy before putting it in the store; and
//! `hcp policy init|coverage|lock` (`store.rs`): contracts from the installed packs.
//!
//! A policy that does not load is refused with its POLICY code; an unknown key's message
//! is the fault and its `hint:` the keys allowed there and the nearest one.

mod merge;
mod replay;
mod store;

use crate::error::{CliError, CliResult};
use crate::exit;
use histos::{Map, Policy, PolicyError, Value};
use std::io::{Read, Write};
use std::path::PathBuf;

/// The largest decision input read from stdin, in bytes (16 MiB).
pub const MAX_INPUT_BYTES: u64 = 16 * 1024 * 1024;

/// Subcommands of `hcp policy`.
#[derive(Debug, clap::Subcommand)]
pub enum PolicyCommand {
    /// Load FILE strictly (JSON or YAML); exit 0 when valid, 1 with the POLICY code.
    Check {
        /// The policy file (`.json` is JSON, anything else YAML).
        file: PathBuf,
        /// Answer as one JSON object on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Print the policy's `content_hash` (`sha256:…`, HISTOS-ENGINE §3).
    Hash {
        /// The policy file.
        file: PathBuf,
    },
    /// Decide one call read from stdin as `{"principal", "resource"?, "call": {"tool",
    /// "args"}}`; print `{"effect", "rule", "field"?, "bound_args"?}`.
    Decide {
        /// The policy file.
        file: PathBuf,
    },
    /// Print a starting policy for the active packs (or the named ones) as YAML: one tool
    /// per verb, `args` from its schema, nothing granted unless `--role`; or, with
    /// `--merge FILE`, add the tools FILE does not name yet to it in place.
    Init(store::InitArgs),
    /// Exit 1 naming each active verb the runtime policy (or FILE) does not mention.
    Coverage(store::CoverageArgs),
    /// Write `$HCP_HOME/tools.lock.json` for the active verbs (owner only), or `--check`
    /// the store against it.
    Lock(store::LockArgs),
    /// Decide the recorded calls again under CANDIDATE and print which would now be
    /// refused or allowed, by tool and principal (owner only).
    Replay(replay::ReplayArgs),
}

fn load(file: &std::path::Path) -> Result<Policy, CliError> {
    Policy::load_path(file).map_err(|e| policy_error(file, &e))
}

/// A policy that does not load: its POLICY code, the fault as the message (with its
/// place), the lesson (`did you mean …`, the keys allowed there) as the hint.
pub(crate) fn policy_error(file: &std::path::Path, e: &PolicyError) -> CliError {
    let t = hcp_runtime::policy::teach::split(e);
    let err = CliError::new(
        hcp_model::Code::from(e.code),
        format!("policy `{}` does not load: {}", file.display(), t.message),
    );
    match t.hint {
        Some(h) => err.hint(h),
        None => err,
    }
}

/// Runs `hcp policy …`.
pub fn run(c: PolicyCommand) -> CliResult {
    let mut out = std::io::stdout().lock();
    match c {
        PolicyCommand::Check { file, json } => match Policy::load_path(&file) {
            Ok(p) => {
                if json {
                    let v = serde_json::json!({
                        "ok": true, "file": file, "content_hash": p.content_hash(),
                        "tools": p.tools.len(), "roles": p.roles.len(),
                    });
                    let _ = writeln!(out, "{v}");
                } else {
                    let _ = writeln!(
                        out,
                        "policy `{}` is valid: {} tools, {} roles, {}",
                        file.display(),
                        p.tools.len(),
                        p.roles.len(),
                        p.content_hash()
                    );
                }
                Ok(exit::OK)
            }
            Err(e) if json => {
                let t = hcp_runtime::policy::teach::split(&e);
                let v = serde_json::json!({
                    "ok": false, "file": file, "code": e.code.as_str(),
                    "message": e.message, "location": e.location, "hint": t.hint,
                });
                let _ = writeln!(out, "{v}");
                Ok(exit::REFUSED)
            }
            Err(e) => Err(policy_error(&file, &e)),
        },
        PolicyCommand::Hash { file } => {
            let p = load(&file)?;
            let _ = writeln!(out, "{}", p.content_hash());
            Ok(exit::OK)
        }
        PolicyCommand::Decide { file } => {
            let p = load(&file)?;
            let input = read_input()?;
            let d = hcp_runtime::decide::decide(&p, &input).map_err(bad_input)?;
            let _ = writeln!(out, "{d}");
            Ok(exit::OK)
        }
        PolicyCommand::Init(a) => store::init(&a),
        PolicyCommand::Coverage(a) => store::coverage(&a),
        PolicyCommand::Lock(a) => store::lock(&a),
        PolicyCommand::Replay(a) => replay::run(&a),
    }
}

fn bad_input(message: impl Into<String>) -> CliError {
    CliError::new(hcp_model::Code::BadInput, message)
        .hint("stdin is {\"principal\": {\"role\", \"identity\"?, \"attributes\"?, \"can_view\"?}, \"resource\"?: {…}, \"call\": {\"tool\", \"args\"}}")
}

fn read_input() -> Result<Map, CliError> {
    let mut buf = Vec::new();
    std::io::stdin()
        .lock()
        .take(MAX_INPUT_BYTES + 1)
        .read_to_end(&mut buf)
        .map_err(|e| bad_input(format!("cannot read stdin: {e}")))?;
    if buf.len() as u64 > MAX_INPUT_BYTES {
        return Err(bad_input(format!(
            "the input is larger than {MAX_INPUT_BYTES} bytes"
        )));
    }
    let text = String::from_utf8(buf).map_err(|_| bad_input("the input is not UTF-8"))?;
    // The engine's own strict JSON reader: repeated keys are refused.
    let v = histos::json::parse(&text)
        .map_err(|e| bad_input(format!("the input is not a JSON object: {}", e.message)))?;
    let Value::Map(m) = v else {
        return Err(bad_input("the input is not a JSON object"));
    };
    if let Some(k) = m
        .keys()
        .find(|k| !matches!(k.as_str(), "principal" | "resource" | "call"))
    {
        return Err(bad_input(format!("unknown key `{k}`")));
    }
    Ok(m)
}
