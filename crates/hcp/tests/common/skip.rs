//! Skipping a test whose outside tool is missing, visibly: `cargo test` captures what a
//! test prints with `eprintln!` and shows it only for a failure or with `--nocapture`, so a
//! skip would pass silently. [`skip`] also writes its line straight to the test process's
//! standard error (`std::io::stderr()`, which the capture does not take), where it appears
//! in a plain `cargo test` run, and records it for the run's one summary line
//! (`hcp_examples::skipped`). Under `CI=true` a skip is a failure.

use std::io::Write;

/// Whether the run is CI's (`CI=true`), where a missing tool is a failure, not a skip.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Skips the running test because of `reason`: panics under `CI=true`, else prints
/// `skipped: TEST: REASON` where a plain `cargo test` shows it (TEST is the name libtest
/// gives the test's thread). The caller returns next.
pub fn skip(reason: &str) {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("a test");
    assert!(!in_ci(), "CI=true and {test} cannot run: {reason}");
    eprintln!("skipped: {test}: {reason}");
    let _ = writeln!(std::io::stderr().lock(), "skipped: {test}: {reason}");
    hcp_examples::skipped::record(test, reason);
}

/// Skips the running test because of `reason` in every run, CI's too: for a test whose
/// input this repository cannot carry and CI cannot fetch (the reason says so). Prints
/// `skipped: TEST: REASON` as [`skip`] does.
#[allow(dead_code)]
pub fn skip_everywhere(reason: &str) {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("a test");
    eprintln!("skipped: {test}: {reason}");
    let _ = writeln!(std::io::stderr().lock(), "skipped: {test}: {reason}");
    hcp_examples::skipped::record(test, reason);
}
