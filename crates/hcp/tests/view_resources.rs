//! Issue 23, "resources" (RUNTIME §5.1 `/tmp`, §5.4): through the built `hcp`, as root and
//! as `nobody`, in `personal`, `brain` and `local` land, a child filling `/tmp` stops at
//! `limits.tmp_bytes` and leaves the host's temporary directories as they were; children
//! that together exceed `limits.memory_bytes` are killed together (`memory_exceeded`).
//! The ordinary user's memory bound needs a delegated cgroup (`HCP_TEST_CGROUP`, made by
//! `.ci/view-setup`): without one that part says `skipped:` (and fails under `CI=true`).

#![allow(clippy::unwrap_used)]

mod common;
mod confine_common;
mod view_common;

use confine_common::{As, users};
use serde_json::json;
use view_common::{LANDS, Vw, delegated_cgroup, sqlite3_or_skip, verb};

const TMP_BYTES: u64 = 4 << 20;
const MEMORY_BYTES: u64 = 64 << 20;

/// Bytes free on the filesystem of `path`.
fn free(path: &str) -> u64 {
    let c = std::ffi::CString::new(path).unwrap();
    // SAFETY: a zeroed statvfs filled by the kernel.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a valid out-pointer.
    assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &raw mut s) }, 0);
    s.f_bavail * s.f_frsize
}

#[test]
fn a_child_filling_tmp_stops_at_the_bound() {
    if !sqlite3_or_skip() {
        return;
    }
    for user in users() {
        let vw = Vw::new(user);
        vw.cw.config(&json!({"limits": {"tmp_bytes": TMP_BYTES}}));
        for land in LANDS {
            let host = [free("/tmp"), free("/dev/shm")];
            let said = vw.sh(
                Some(&vw.writer),
                &verb(land, "write"),
                "head -c 64M /dev/zero 2>&1 > $TMPDIR/fill; echo rc=$?; wc -c < $TMPDIR/fill; \
                 head -c 64M /dev/zero 2>&1 > /dev/shm/fill; echo shm=$?",
            );
            assert!(
                said.contains("No space left on device") && !said.contains("rc=0"),
                "{user:?} {land}: {said}"
            );
            let written: u64 = said
                .lines()
                .find_map(|l| l.trim().parse().ok())
                .unwrap_or(u64::MAX);
            // The call's root tmpfs holds its skeleton too (the view's directories, its
            // `/etc/passwd`): the adapter sizes it `tmp_bytes` + 1 MiB.
            assert!(
                written <= TMP_BYTES + (1 << 20),
                "{user:?} {land}: {written} bytes in /tmp"
            );
            assert!(
                !said.contains("shm=0"),
                "{user:?} {land}: /dev/shm is unbounded: {said}"
            );
            // The host's directories did not take it (within what other work on the machine
            // may use meanwhile: less than what the call tried to write).
            let after = [free("/tmp"), free("/dev/shm")];
            for (b, a) in host.iter().zip(after) {
                assert!(
                    b.saturating_sub(a) < 32 << 20,
                    "{user:?} {land}: the host lost {} bytes",
                    b - a
                );
            }
        }
    }
}

#[test]
fn children_that_together_exceed_the_memory_bound_are_killed_together() {
    if !sqlite3_or_skip() {
        return;
    }
    for user in users() {
        let mut limits = json!({"memory_bytes": MEMORY_BYTES});
        if user == As::Nobody {
            match delegated_cgroup() {
                Some(dir) => limits["cgroup"] = json!(dir),
                None => {
                    common::skip::skip(
                        "no cgroup delegated to nobody (`HCP_TEST_CGROUP`, see `.ci/view-setup`): not testing the ordinary user's memory bound",
                    );
                    continue;
                }
            }
        }
        let vw = Vw::new(user);
        vw.cw.config(&json!({ "limits": limits }));
        for land in LANDS {
            let (out, v) = vw.shell(
                Some(&vw.reader),
                &verb(land, "read"),
                "for i in 1 2 3 4; do head -c 48M /dev/zero | tail -c 48M > /dev/null & done; wait; echo survived",
            );
            let what = format!("{user:?} {land}: {}", vw.w().render(&out));
            assert_eq!(v["code"], "memory_exceeded", "{what}");
            assert_eq!(v["ok"], false, "{what}");
            assert!(
                !v["stdout"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("survived"),
                "{what}"
            );
            assert_eq!(v["sandbox"]["memory"], "enforced", "{what}");
        }
    }
}
