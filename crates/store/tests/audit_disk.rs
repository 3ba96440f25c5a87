//! The audit trail on a disk that refuses (RUNTIME §5.4, §6: if the intent cannot be made
//! durable, nothing runs; a child that fills the disk never makes a refusal or an outcome
//! unwritable): on a full disk (a small tmpfs as the store) refusals and outcomes are
//! written from the audit's reserve, an admission only while the reserve holds room for
//! its outcome, and once even the reserve is short every admission is `audit_unavailable`
//! before anything runs, leaving no partial record, spending nothing, keeping the trail
//! sound; a read-only audit directory refuses every admission the same way.
//!
//! Mounting needs root: the scenarios run in a child process (this test binary, as
//! `disk_child`) that enters its own mount namespace, so nothing it mounts outlives it.
//! Without root the full-disk test says `skipped:` (a failure under `CI=true`), and the
//! read-only test falls back to file modes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use hcp_model::{Land, Operation};
use hcp_store::Home;
use hcp_store::audit::{
    Actor, Admission, AuditLog, CounterSpend, Decision, DigestKey, Entry, Intent, Outcome,
};
use hcp_store::counter::{Counters, Limits};
use std::collections::BTreeMap;
use std::ffi::CString;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

const SCENARIO: &str = "HCP_TEST_AUDIT_DISK";
const DIR: &str = "HCP_TEST_AUDIT_DISK_DIR";

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Skips the running test, visibly: `skipped: TEST: WHY` on the process's standard error
/// (which the test harness's capture does not take, so a plain `cargo test` shows it), as
/// the hcp crate's `tests/common/skip.rs` does; under `CI=true` a skip fails.
fn skip(why: &str) {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("a test");
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI=true and {test} cannot run: {why}"
    );
    let _ = writeln!(std::io::stderr().lock(), "skipped: {test}: {why}");
    hcp_examples::skipped::record(test, why);
}

fn spend() -> Admission {
    Admission {
        intent: Intent {
            principal: "agent".into(),
            project: None,
            pack_id: "transit".into(),
            verb_key: "find".into(),
            operation: Operation::Read,
            land: Some(Land::Local),
            args_digest: DigestKey::from_bytes([3; 32]).args_digest([]),
            extra: BTreeMap::new(),
        },
        counters: vec![CounterSpend {
            identity: "agent".into(),
            tool: "transit.find".into(),
            limits: Limits {
                rate_limit: None,
                budget: Some(1000),
                window_ms: 60_000,
            },
        }],
        approvals: vec![],
    }
}

fn refusal(i: u64) -> Entry {
    Entry {
        principal: "agent".into(),
        project: None,
        pack_id: Some("transit".into()),
        verb_key: "find".into(),
        operation: Some(Operation::Read),
        land: Some(Land::Local),
        decision: Decision::Deny,
        code: Some(hcp_model::Code::MissingGrant),
        args_digest: DigestKey::from_bytes([3; 32]).args_digest([]),
        exit_code: None,
        duration_ms: i,
        extra: BTreeMap::new(),
    }
}

/// A store with a few admitted and finished calls, its trail keeping a reserve of
/// `reserve` bytes.
fn populated_with(root: &Path, reserve: u64) -> (Home, AuditLog) {
    hcp_store::made::init(&root.join("hcp"), Actor::owner(), None).unwrap();
    let home = Home::open(root.join("hcp")).unwrap();
    let log = AuditLog::new(&home).with_reserve(reserve);
    for _ in 0..3 {
        let a = log.admit(&spend()).unwrap();
        log.outcome(&Outcome {
            intent: a.id,
            principal: "agent".into(),
            pack_id: "transit".into(),
            verb_key: "find".into(),
            code: None,
            exit_code: Some(0),
            duration_ms: 1,
            stdout_bytes: 0,
            stderr_bytes: 0,
            truncated: false,
            extra: BTreeMap::new(),
        })
        .unwrap();
    }
    (home, log)
}

/// [`populated_with`] the store's own reserve (1 MiB).
fn populated(root: &Path) -> (Home, AuditLog) {
    populated_with(root, hcp_store::audit::reserve::RESERVE_BYTES)
}

fn outcome_of(id: String) -> Outcome {
    Outcome {
        intent: id,
        principal: "agent".into(),
        pack_id: "transit".into(),
        verb_key: "find".into(),
        code: None,
        exit_code: Some(0),
        duration_ms: 1,
        stdout_bytes: 0,
        stderr_bytes: 0,
        truncated: false,
        extra: BTreeMap::new(),
    }
}

/// What must not change when an admission is refused: the trail, its anchor, the counter.
fn state(home: &Home, log: &AuditLog) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let counter = Counters::new(home).file("agent", "transit.find");
    (
        std::fs::read(log.path()).unwrap(),
        std::fs::read(log.anchor_path()).unwrap(),
        std::fs::read(counter).unwrap(),
    )
}

fn assert_refused_and_untouched(home: &Home, log: &AuditLog, what: &str) {
    let before = state(home, log);
    let e = log.admit(&spend()).unwrap_err();
    assert_eq!(e.code(), "audit_unavailable", "{what}: {e}");
    assert_eq!(
        state(home, log),
        before,
        "{what}: nothing written, nothing spent"
    );
    let r = log.verify().unwrap();
    assert!(r.is_clean() && r.torn_tail.is_none(), "{what}: {r:?}");
}

fn mount(src: &str, target: &Path, fstype: Option<&str>, flags: libc::c_ulong, data: Option<&str>) {
    let c = |s: &str| CString::new(s).unwrap();
    let src = c(src);
    let target = c(target.to_str().unwrap());
    let fstype = fstype.map(c);
    let data = data.map(c);
    // SAFETY: every pointer is a live NUL-terminated string or null.
    let r = unsafe {
        libc::mount(
            src.as_ptr(),
            target.as_ptr(),
            fstype.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
            flags,
            data.as_ref()
                .map_or(std::ptr::null(), |s| s.as_ptr().cast()),
        )
    };
    assert_eq!(r, 0, "mount: {}", std::io::Error::last_os_error());
}

fn full_disk(dir: &Path) {
    mount("tmpfs", dir, Some("tmpfs"), 0, Some("size=4m,mode=0700"));
    let (home, log) = populated_with(dir, 64 * 1024);
    // A call admitted before the disk fills: its outcome has room set aside.
    let running = log.admit(&spend()).unwrap();
    // Fill the disk.
    let mut fill = std::fs::File::create(dir.join("fill")).unwrap();
    while fill.write_all(&[0u8; 4096]).is_ok() {}
    while fill.write_all(&[0u8; 1]).is_ok() {}
    // Refusals go on from the reserve until only the room held for the outcome is left.
    let mut i = 0;
    loop {
        let before = std::fs::read(log.path()).unwrap();
        match log.append(&refusal(i)) {
            Ok(_) => i += 1,
            Err(e) => {
                assert_eq!(e.code(), "audit_unavailable", "{e}");
                assert!(
                    matches!(e, hcp_store::audit::AuditError::ReserveShort { .. }),
                    "{e:?}"
                );
                assert_eq!(
                    std::fs::read(log.path()).unwrap(),
                    before,
                    "a partial line was left"
                );
                break;
            }
        }
        assert!(i < 10_000, "the reserve never ran short");
    }
    assert!(i > 10, "refusals were written from the reserve: {i}");
    // The outcome of the call that ran is written from the room held for it.
    log.outcome(&outcome_of(running.id)).unwrap();
    // Even the reserve is short: admissions are refused before anything runs.
    assert_refused_and_untouched(&home, &log, "full disk, reserve short");
    // Room again: the reserve is refilled and admissions pass.
    drop(fill);
    std::fs::remove_file(dir.join("fill")).unwrap();
    let a = log.admit(&spend()).unwrap();
    log.outcome(&outcome_of(a.id)).unwrap();
    assert!(log.reserve_report().unwrap().reserved >= 32 * 1024);
    let r = log.verify().unwrap();
    assert!(r.is_clean() && r.interrupted.is_empty(), "{r:?}");
    println!("ok full_disk after {i} refusals from the reserve");
}

fn read_only(dir: &Path) {
    mount("tmpfs", dir, Some("tmpfs"), 0, Some("size=4m,mode=0700"));
    let (home, log) = populated(dir);
    let audit = log.dir().to_path_buf();
    mount(audit.to_str().unwrap(), &audit, None, libc::MS_BIND, None);
    mount(
        "none",
        &audit,
        None,
        libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY,
        None,
    );
    assert_refused_and_untouched(&home, &log, "read-only audit directory");
    assert_eq!(
        log.ensure_writable().unwrap_err().code(),
        "audit_unavailable"
    );
    assert_eq!(
        log.append(&refusal(0)).unwrap_err().code(),
        "audit_unavailable"
    );
    // A store whose audit directory was never written, on a read-only mount.
    let fresh = dir.join("fresh");
    hcp_store::made::init(&fresh.join("hcp"), Actor::owner(), None).unwrap();
    let faudit = fresh.join("hcp/audit");
    mount(faudit.to_str().unwrap(), &faudit, None, libc::MS_BIND, None);
    mount(
        "none",
        &faudit,
        None,
        libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY,
        None,
    );
    let flog = AuditLog::new(&Home::open(fresh.join("hcp")).unwrap());
    assert_eq!(
        flog.admit(&spend()).unwrap_err().code(),
        "audit_unavailable"
    );
    println!("ok read_only");
}

/// The scenario runner. Does nothing in a normal test run.
#[test]
fn disk_child() {
    let Ok(scenario) = std::env::var(SCENARIO) else {
        return;
    };
    let dir = PathBuf::from(std::env::var_os(DIR).unwrap());
    // SAFETY: plain syscalls on this process; the root mount is made private so that
    // nothing mounted below leaks out of the new namespace.
    unsafe {
        assert_eq!(
            libc::unshare(libc::CLONE_NEWNS),
            0,
            "unshare: {}",
            std::io::Error::last_os_error()
        );
    }
    mount(
        "none",
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_PRIVATE,
        None,
    );
    match scenario.as_str() {
        "full_disk" => full_disk(&dir),
        "read_only" => read_only(&dir),
        other => panic!("unknown scenario {other}"),
    }
}

fn run_child(scenario: &str) {
    let d = tempfile::tempdir().unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "disk_child",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(SCENARIO, scenario)
        .env(DIR, d.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains(&format!("ok {scenario}")),
        "{scenario}: {}\n{}\n{}",
        out.status,
        text,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_full_disk_takes_refusals_and_outcomes_from_the_reserve_then_refuses_admissions() {
    if !is_root() {
        return skip("a full disk needs root to mount a small tmpfs as the store");
    }
    run_child("full_disk");
}

#[test]
fn a_read_only_audit_directory_refuses_the_intent() {
    if is_root() {
        return run_child("read_only");
    }
    // Without root: file modes make the directory read-only for this user.
    let d = tempfile::tempdir().unwrap();
    let (home, log) = populated(d.path());
    let ro =
        |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    for f in std::fs::read_dir(log.dir()).unwrap() {
        ro(&f.unwrap().path(), 0o400);
    }
    ro(log.dir(), 0o500);
    assert_refused_and_untouched(&home, &log, "read-only audit directory (modes)");
    ro(log.dir(), 0o700);
}
