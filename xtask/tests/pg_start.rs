//! `.ci/pg-start` takes back what it started when a later step fails (README, "A fleet"):
//! a `pgbouncer` that refuses to start leaves no PostgreSQL server running and no
//! directory behind, and prints no lines for the caller's `eval`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Command;

/// The repository's top directory.
fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Skips the running test because of `reason` (a failure under `CI=true`, where the
/// server's tools are installed), recorded for the run's summary line.
fn skip(reason: &str) {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("a test");
    assert!(
        !std::env::var("CI").is_ok_and(|v| v == "true"),
        "CI=true and {test} cannot run: {reason}"
    );
    eprintln!("skipped: {test}: {reason}");
    hcp_examples::skipped::record(test, reason);
}

#[test]
fn a_pgbouncer_that_fails_to_start_leaves_no_server_and_no_directory() {
    let tmp = tempfile::tempdir().unwrap();
    // As root the server's tools run as `postgres`, who must reach the directory and the
    // stand-in `pgbouncer`.
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let fake = tmp.path().join("bin");
    std::fs::create_dir(&fake).unwrap();
    // A stand-in that says which server is running (the pid file of the data directory
    // beside its configuration, `pgbouncer -d DIR/pgbouncer.ini`), then fails.
    std::fs::write(
        fake.join("pgbouncer"),
        "#!/bin/sh\n\
         dir=$(dirname \"$2\")\n\
         echo \"stand-in pgbouncer: postmaster $(head -n 1 \"$dir/data/postmaster.pid\")\" >&2\n\
         exit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(
        fake.join("pgbouncer"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let dir = tmp.path().join("pg");
    let path = format!(
        "{}:{}",
        fake.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new(repo_root().join(".ci/pg-start"))
        .args(["--pool", "--quiet", "--dir"])
        .arg(&dir)
        .env("PATH", path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if err.contains("no PostgreSQL server binaries") || err.contains("needs the `postgres` user") {
        return skip(err.trim());
    }
    assert!(!out.status.success(), "{err}");
    let pid: u32 = err
        .lines()
        .find_map(|l| l.strip_prefix("stand-in pgbouncer: postmaster "))
        .unwrap_or_else(|| panic!("the server never started: {err}"))
        .trim()
        .parse()
        .unwrap();
    // The server was stopped (`pg_ctl -w`: it is gone when the script has exited) ...
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    assert!(
        !String::from_utf8_lossy(&cmdline).contains("postgres"),
        "server {pid} left running: {err}"
    );
    // ... its directory removed, and nothing printed for `eval`.
    assert!(!dir.exists(), "{} left behind: {err}", dir.display());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "", "{err}");
}
