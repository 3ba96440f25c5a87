//! `spawn-floor PROGRAM [ARG…]`: the floor of `cargo xtask bench exec`.
//!
//! Spawns `PROGRAM` with the given arguments, inheriting everything, waits for it and
//! exits with its status. Nothing else: no argument parsing, no environment handling, no
//! output. What `hcp exec` costs beyond this is what hcp itself adds to running a bin.
//! Built with optimisations by the benchmark (see `xtask/src/bench_exec.rs`).

use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let Some(program) = args.next() else {
        return ExitCode::from(2);
    };
    match Command::new(program).args(args).status() {
        Ok(s) => ExitCode::from(u8::try_from(s.code().unwrap_or(128)).unwrap_or(1)),
        Err(_) => ExitCode::from(127),
    }
}
