//! `hcp exec` (RUNTIME §5): the main job, on its CLI face and its JSON face. This module
//! reads the command line or the envelope, hands the call to the runtime's pipeline
//! (`hcp_runtime::pipeline::run`) and prints the answer.

pub mod face;

use crate::env;
use crate::error::{CliError, CliResult};
use hcp_model::{Code, Envelope, parse_strict};
use hcp_runtime::pipeline::{self, Mode, Subject};
use hcp_runtime::{Answer, Call, CallArgs, Caller, Face, Refusal, Runtime};
use std::io::{Read, Write};
use std::time::Duration;

/// The largest envelope read from stdin, in bytes (16 MiB).
pub const MAX_ENVELOPE_BYTES: u64 = 16 * 1024 * 1024;

/// Arguments of `hcp exec`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "TARGET is PACK.VERB or a verb key unique across active packs. Values fill the \
                  verb's arguments in template order; `--NAME VALUE` names one. `--` ends options."
)]
pub struct Args {
    /// Read a JSON exec envelope from stdin (give `-`); the answer is JSON on stdout.
    #[arg(long, value_name = "-")]
    envelope: Option<String>,
    /// Answer with the JSON result object on stdout.
    #[arg(long)]
    json: bool,
    /// Seconds before the verb's process group is ended (default 60).
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    timeout: Option<f64>,
    /// TARGET, then the verb's values and `--NAME VALUE` pairs, `--confirm`/`--apply`.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "TARGET [ARGS]"
    )]
    words: Vec<String>,
}

fn parse_secs(v: &str) -> Result<f64, String> {
    face::parse_timeout(v).map_err(|e| e.0)
}

/// `hcp exec …` parsed by a command line holding only the `exec` subcommand, the same
/// [`Args`] as in the full one: clap otherwise builds, and drops, the arguments of every
/// subcommand on each call (about 165k of the 1.5M instructions of a whole `hcp exec`).
/// `None` when the first argument is not `exec` or when clap has anything to say (help,
/// version, a usage error): the caller then parses with the full command line, which
/// answers exactly as it always did.
pub fn fast_parse() -> Option<Args> {
    let mut argv = std::env::args_os();
    argv.next()?;
    if argv.next()? != "exec" {
        return None;
    }
    let cmd = clap::Command::new("hcp").subcommand(<Args as clap::Args>::augment_args(
        clap::Command::new("exec"),
    ));
    let matches = cmd.try_get_matches_from(std::env::args_os()).ok()?;
    let (_, sub) = matches.subcommand()?;
    <Args as clap::FromArgMatches>::from_arg_matches(sub).ok()
}

/// Runs `hcp exec`.
pub fn run(a: Args) -> CliResult {
    let json_face = a.envelope.is_some();
    let usage = |m: String| CliError::call(Code::Usage, m);
    let (call, json) = if let Some(src) = &a.envelope {
        if src != "-" {
            return Err(usage(format!(
                "`--envelope {src}`: give `-` to read the envelope from stdin"
            )));
        }
        if !a.words.is_empty() {
            return Err(usage(
                "`--envelope -` takes no TARGET or values; they go in the envelope".into(),
            ));
        }
        match read_envelope() {
            Ok(env) => {
                let args = env
                    .args
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                let call = Call {
                    pack_id: env.pack_id,
                    target: env.verb_key,
                    args: CallArgs::Named(args),
                    face: Face::Json,
                    timeout: secs(a.timeout),
                };
                (call, true)
            }
            Err(answer) => return Ok(print(&answer, true)),
        }
    } else {
        let parsed = face::parse(&a.words, a.json, a.timeout).map_err(|e| {
            usage(e.0).hint(
                "hcp exec PACK.VERB [VALUE…] [--NAME VALUE…] [--confirm] [--json] [--timeout SECS]",
            )
        })?;
        let call = Call {
            pack_id: None,
            target: parsed.target,
            args: CallArgs::Words(parsed.words),
            face: Face::Cli,
            timeout: secs(parsed.timeout),
        };
        (call, parsed.json)
    };
    // No store (RUNTIME §4: `no_store`, 66, nothing created): refused before anything,
    // unrecorded (there is no trail), as the face answers refusals.
    let rt = match crate::commands::session::open_home().map(Runtime::open_for_call) {
        Ok(rt) => rt,
        Err(e) if json || json_face => {
            let mut r = Refusal::new(e.code, e.message);
            r.hint = e.hint;
            return Ok(print(&hcp_runtime::record::early_refusal(r), true));
        }
        Err(e) => return Err(e),
    };
    let caller = caller()?;
    // SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and SIGALRM end the child's
    // process group and are answered and audited as `cancelled`, rather than leaving the
    // child running unrecorded (crate::signals).
    let signals = crate::signals::arm()?;
    let cancel = std::os::fd::AsFd::as_fd(&signals.read);
    let answer = pipeline::run(&rt, &caller, Subject::Verb(call), Mode::Exec(Some(cancel)));
    let status = print(&answer, json || json_face);
    after_answer(&rt);
    Ok(status)
}

/// Off the call path (RUNTIME §6): once a call's answer is out (stdout flushed), the
/// witness's checkpoint when one of its records was the 100th; a failure is a warning,
/// since the call has answered.
pub(crate) fn after_answer(rt: &Runtime) {
    let _ = std::io::stdout().flush();
    if let Err(e) = rt.after_answer() {
        let _ = writeln!(
            std::io::stderr().lock(),
            "hcp: warning: the audit witness did not take its checkpoint: {e}"
        );
    }
}

fn secs(s: Option<f64>) -> Option<Duration> {
    s.map(Duration::from_secs_f64)
}

/// The store and its state backend, from `HCP_HOME` (or the platform data directory).
///
/// # Errors
/// The store's when `HCP_HOME` cannot be used.
pub fn runtime() -> Result<Runtime, CliError> {
    Ok(Runtime::open(crate::commands::session::open_home()?))
}

/// The process facts of a call: `HCP_SESSION`, `HCP_PROJECT`, the current directory, the
/// environment and `HCP_LIMITS`.
///
/// # Errors
/// `usage` when the current directory is gone or `HCP_LIMITS` does not parse.
pub fn caller() -> Result<Caller, CliError> {
    let cwd = std::env::current_dir().map_err(|e| {
        CliError::call(Code::Usage, "the current directory cannot be read").cause(e)
    })?;
    Ok(Caller {
        session_token: std::env::var_os(env::HCP_SESSION),
        project: project()?,
        cwd,
        parent_env: std::env::vars_os().collect(),
        limit_overrides: match std::env::var_os(env::HCP_LIMITS) {
            None => hcp_adapter::LimitOverrides::default(),
            Some(v) => hcp_runtime::call::parse_limits(&v.to_string_lossy())
                .map_err(|m| CliError::call(Code::Usage, m).hint(LIMITS_HINT))?,
        },
    })
}

/// `HCP_PROJECT`, when set and not empty, checked like a session's project names
/// (RUNTIME §4): a value such as `-rf` never reaches `{{@project_id}}`.
///
/// # Errors
/// `bad_value` (64) for a value that is not UTF-8 or not a project name.
fn project() -> Result<Option<String>, CliError> {
    let Some(v) = std::env::var_os(env::HCP_PROJECT).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    let bad = |shown: &str, why: &str| {
        CliError::call(
            Code::BadValue,
            format!("`HCP_PROJECT` `{shown}` is not a project name: {why}"),
        )
        .hint("name one of the session's projects (ASCII letters, digits, `.`, `_`, `@`, `-`, starting with a letter or digit), or unset `HCP_PROJECT`")
    };
    let Some(p) = v.to_str() else {
        return Err(bad(&v.to_string_lossy(), "it is not UTF-8"));
    };
    hcp_store::session::validate_name(p).map_err(|why| bad(p, &why))?;
    Ok(Some(p.to_owned()))
}

const LIMITS_HINT: &str = "HCP_LIMITS=cpu_seconds=N,address_space_bytes=N,open_files=N,file_size_bytes=N,processes=N (any subset)";

/// Reads and parses the envelope on stdin (strict: `bad_envelope`, exit 65).
fn read_envelope() -> Result<Envelope, Box<Answer>> {
    let mut buf = Vec::new();
    let bad = |m: String| {
        Box::new(hcp_runtime::record::early_refusal(
            Refusal::new(Code::BadEnvelope, m).hint(
                "the envelope is {\"pack_id\"?, \"verb_key\", \"args\": {NAME: string|number|bool}}",
            ),
        ))
    };
    if let Err(e) = std::io::stdin()
        .lock()
        .take(MAX_ENVELOPE_BYTES + 1)
        .read_to_end(&mut buf)
    {
        return Err(bad(format!("cannot read the envelope from stdin: {e}")));
    }
    if buf.len() as u64 > MAX_ENVELOPE_BYTES {
        return Err(bad(format!(
            "the envelope is larger than {MAX_ENVELOPE_BYTES} bytes"
        )));
    }
    let text = String::from_utf8(buf).map_err(|_| bad("the envelope is not UTF-8".into()))?;
    // serde reads a struct from an array too; the envelope is an object.
    if !text.trim_start().starts_with('{') {
        return Err(bad("the envelope is not a JSON object".into()));
    }
    parse_strict::<Envelope>(&text).map_err(|e| {
        bad(format!(
            "{} at line {} column {}",
            e.message, e.line, e.column
        ))
    })
}

/// Prints an answer: JSON on stdout, or the child's own output and, for a refusal, the
/// error lines on stderr. Returns the exit status. A closed pipe is not an error.
fn print(answer: &Answer, json: bool) -> u8 {
    let r = &answer.result;
    if json {
        print_json(r);
        return answer.exit;
    }
    if r.exit_code.is_some() {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(&answer.stdout);
        // A CLI's output is its own, newline and all; an HTTP body (a `kind: openapi`
        // verb's, `{"id": …}`) rarely ends in one, and text mode ends it as a CLI's line
        // would. `--json` carries the body unchanged.
        if answer.facts.http_status.is_some() && answer.stdout.last().is_some_and(|b| *b != b'\n') {
            let _ = out.write_all(b"\n");
        }
        drop(out);
        let _ = std::io::stderr().lock().write_all(&answer.stderr);
        if let Some(sig) = answer.facts.signal {
            let _ = writeln!(
                std::io::stderr().lock(),
                "hcp: the verb was ended by signal {}: {}",
                sig.number,
                sig.name
            );
        }
        if r.truncated {
            let _ = writeln!(std::io::stderr().lock(), "hcp: output truncated at the cap");
        }
        for name in r
            .extra
            .get("protected_created")
            .and_then(|v| v.as_array())
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str())
        {
            // RUNTIME §5.1: what the owner's tools run next is not a call's to plant.
            let _ = writeln!(
                std::io::stderr().lock(),
                "hcp: `{}` was created by the call under a protected name and moved into the quarantine (`hcp doctor` lists it)",
                name.escape_debug()
            );
        }
        // What the run taught (a refused destination, a socket tried under `deny`).
        if let Some(h) = r.extra.get("hint").and_then(|h| h.as_str()) {
            let _ = writeln!(std::io::stderr().lock(), "hcp: hint: {h}");
        }
        if let Some(note) = hcp_runtime::trail::deferred_note(&r.extra) {
            let _ = writeln!(std::io::stderr().lock(), "{note}");
        }
    }
    render_refusal(r, answer.exit);
    answer.exit
}

/// Prints `v` as one line of JSON on stdout and flushes; a closed pipe is not an error.
pub fn print_json(v: &impl serde::Serialize) {
    let mut out = std::io::stdout().lock();
    if let Ok(text) = serde_json::to_string(v) {
        let _ = writeln!(out, "{text}");
    }
    let _ = out.flush();
}

/// Renders the refusal of a result, when it is one, on stderr.
pub fn render_refusal(r: &hcp_model::ExecResult, exit: u8) {
    if let (Some(error), Some(code)) = (&r.error, r.code) {
        let mut e = CliError::call(code, error.clone());
        e.exit = exit;
        if let Some(h) = &r.hint {
            e = e.hint(h.clone());
        }
        crate::error::render(&e);
        render_steps(r);
    }
}

/// The steps a refused session call still needs (`steps` of the result), one a line
/// under the refusal (unless it is one step the hint already names):
///
/// ```text
///   steps: this call needs all of these, in order:
///     1. hcp grant agent-1 transit verb.exec.read   (missing_grant)
///     2. hcp policy init --merge …/policy.yaml --role agent   (unknown_tool)
///     3. hcp policy lock   (tool_drift)
/// ```
fn render_steps(r: &hcp_model::ExecResult) {
    let Some(steps) = r.extra.get("steps").and_then(|s| s.as_array()) else {
        return;
    };
    // One step the hint already names is not said twice.
    let hint = r.hint.as_deref().unwrap_or_default();
    let said = |s: &serde_json::Value| s["command"].as_str().is_some_and(|c| hint.contains(c));
    if steps.is_empty() || (steps.len() == 1 && said(&steps[0])) {
        return;
    }
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "  steps: this call needs all of these, in order:");
    for (i, s) in steps.iter().enumerate() {
        let code = s["code"].as_str().unwrap_or_default();
        let what = match s["command"].as_str() {
            Some(c) => c.to_owned(),
            None => s["step"].as_str().unwrap_or_default().to_owned(),
        };
        let _ = writeln!(err, "    {}. {what}   ({code})", i + 1);
    }
}
