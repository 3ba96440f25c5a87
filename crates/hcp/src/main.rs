//! `hcp`: the Harness Context Protocol pack runtime.
//!
//! A thin binary: clap arguments → one module per subcommand under [`commands`] → the
//! library crates (`hcp-lint`, `hcp-store`, `hcp-gate`, `hcp-adapter`, `histos`). Errors
//! are rendered in one place ([`error`]).

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

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    // `hcp exec` is the hot path: parse it without building every other subcommand.
    let result = match commands::exec::fast_parse() {
        Some(args) => commands::exec::run(args),
        None => commands::run(commands::Cli::parse()),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            error::render(&e);
            ExitCode::from(e.exit)
        }
    }
}
