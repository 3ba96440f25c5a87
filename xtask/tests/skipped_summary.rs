//! The run's skipped tests in one line, at the end of a plain `cargo test --workspace`.
//!
//! Each test that skips records itself (`hcp_examples::skipped::record`); this is the last
//! test binary of the workspace's run (`xtask` is the last package, an integration test
//! runs after the unit tests), so it prints `N skipped: REASON: TEST, …; …` for the whole
//! run where a plain `cargo test` shows it. Doc tests, which skip nothing, still follow.
//! `cargo xtask test` prints the same line after everything.

#[test]
fn the_runs_skipped_tests_in_one_line() {
    hcp_examples::skipped::print_summary_of_this_run();
}
