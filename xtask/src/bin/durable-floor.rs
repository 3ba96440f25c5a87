//! `durable-floor FILE PROGRAM [ARG…]`: the durable floor of `cargo xtask bench exec`.
//!
//! Appends one 256-byte record (255 bytes and `\n`) to `FILE` with `O_APPEND`, waits for
//! `fdatasync`, then spawns `PROGRAM` with the given arguments, inheriting everything,
//! waits for it and exits with its status: the least a launcher that makes a durable
//! record of each call before running it can cost. What `hcp exec` costs beyond this is
//! what hcp adds to a durably audited run. Built with optimisations by the benchmark
//! (see `xtask/src/bench_exec.rs`).

use std::io::Write;
use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let (Some(file), Some(program)) = (args.next(), args.next()) else {
        return ExitCode::from(2);
    };
    let mut record = [b'x'; 256];
    record[255] = b'\n';
    let appended = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(file)
        .and_then(|mut f| f.write_all(&record).and_then(|()| f.sync_data()));
    if appended.is_err() {
        return ExitCode::from(74);
    }
    match Command::new(program).args(args).status() {
        Ok(s) => ExitCode::from(u8::try_from(s.code().unwrap_or(128)).unwrap_or(1)),
        Err(_) => ExitCode::from(127),
    }
}
