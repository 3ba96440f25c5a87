//! `hcp`: the Harness Context Protocol pack runtime.
//!
//! A thin binary: clap arguments → one module per subcommand under [`commands`] → the
//! library crates (`hcp-runtime`, which wires the gate and the steps of a call; `hcp-lint`,
//! `hcp-store`, `hcp-adapter`, `histos`). Errors are rendered in one place ([`error`]).

/// `println!` that ignores a closed stdout (a broken pipe is not an error, STYLE.md §2).
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($t)*);
    }};
}

/// `print!` that ignores a closed stdout.
macro_rules! out_raw {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout().lock(), $($t)*);
    }};
}

mod commands;
mod env;
mod error;
mod exit;
mod signals;

use std::process::ExitCode;

fn main() -> ExitCode {
    // RUNTIME §4: the owner is never reachable from inside a call. Before anything reads
    // the store or the command line.
    if let Some(e) = nested_call() {
        error::render(&e);
        return ExitCode::from(e.exit);
    }
    // `hcp exec` is the hot path: parse it without building every other subcommand.
    let result = match commands::exec::fast_parse() {
        Some(args) => commands::exec::run(args),
        None => match <commands::Cli as clap::Parser>::try_parse() {
            Ok(cli) => commands::run(cli),
            Err(e) if e.kind() == clap::error::ErrorKind::InvalidUtf8 => Err(invalid_utf8()),
            Err(e) => e.exit(),
        },
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            error::render(&e);
            ExitCode::from(e.exit)
        }
    }
}

/// `usage` (64, RUNTIME §5) for a command line holding an argument that is not UTF-8:
/// every value hcp passes on is text (a JSON string), so none is guessed (no U+FFFD).
fn invalid_utf8() -> error::CliError {
    let n = std::env::args_os()
        .position(|a| a.to_str().is_none())
        .unwrap_or(0);
    error::CliError::call(
        hcp_model::Code::Usage,
        format!("argument {n} of the command line is not valid UTF-8"),
    )
    .hint("pass text as UTF-8; a file's bytes reach a verb through a file in its working directory")
}

/// `nested_call` (77) for an `hcp` without a session that descends from the child of a
/// non-owner call (RUNTIME §4): whatever its environment (`env -u HCP_SESSION`), however
/// it got there (a CLI's shell escape, `setsid`, a double fork, a dead parent), the
/// call's seccomp marker answers (`hcp_adapter::inside_non_owner_call`, one system
/// call). With a session it is that session's principal, as everywhere.
fn nested_call() -> Option<error::CliError> {
    if std::env::var_os(env::HCP_SESSION).is_some() || !hcp_adapter::inside_non_owner_call() {
        return None;
    }
    Some(
        error::CliError::call(
            hcp_model::Code::NestedCall,
            "`hcp` was run without a session from inside an agent's call; it does not act as the owner there",
        )
        .hint("a call's child runs `hcp` only as its caller: give it the caller's `HCP_SESSION`"),
    )
}
