//! Helpers shared by the example CLIs' integration tests: the built bins, a clean
//! environment, JSON output.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The built example CLI `hcp-example-<name>`.
pub fn bin(name: &str) -> PathBuf {
    PathBuf::from(match name {
        "transit" => env!("CARGO_BIN_EXE_hcp-example-transit"),
        "echo" => env!("CARGO_BIN_EXE_hcp-example-echo"),
        "ledger" => env!("CARGO_BIN_EXE_hcp-example-ledger"),
        "mail" => env!("CARGO_BIN_EXE_hcp-example-mail"),
        "probe" => env!("CARGO_BIN_EXE_hcp-example-probe"),
        other => panic!("no example bin `{other}`"),
    })
}

/// A command for `hcp-example-<name>` with a cleared environment (only `PATH`), run in
/// `dir`.
pub fn cmd(name: &str, dir: &Path) -> Command {
    let mut c = Command::new(bin(name));
    c.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .current_dir(dir);
    c
}

/// Runs `hcp-example-<name> ARGS…` in `dir` with a clean environment.
pub fn run(name: &str, dir: &Path, args: &[&str]) -> Output {
    cmd(name, dir).args(args).output().unwrap()
}

/// The output's stdout as one JSON value, asserting a zero exit.
pub fn ok_json(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "exit {:?}, stderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// The output's stdout as text.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The output's stderr as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts the exit status `code` and an `error: …` line on stderr holding `needle`.
pub fn assert_error(out: &Output, code: i32, needle: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(code), "stderr: {err}");
    assert!(err.starts_with("error: "), "stderr: {err}");
    assert!(err.contains(needle), "`{needle}` not in stderr: {err}");
}

/// The files of `dir`, sorted by name.
pub fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The repository's `packs/` directory.
pub fn packs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("packs")
}
