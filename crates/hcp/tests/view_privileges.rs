//! Issue 23, "root's children keep capabilities" (RUNTIME §5.4): through the built `hcp`, as
//! root and as `nobody`, in `personal`, `brain` and `local` land, a call holds no
//! capability (as root its five sets are empty) and `no_new_privs` is set; `AF_PACKET` and
//! raw sockets, `SCHED_FIFO` and negative nice values fail; a setuid program does not
//! raise it. Nothing outside the call changes.

#![allow(clippy::unwrap_used)]

mod common;
mod confine_common;
mod view_common;

use confine_common::{As, assert_denied, users};
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use view_common::{LANDS, Vw, outside, sqlite3_or_skip, verb};

/// The `Cap*` and `NoNewPrivs` lines of `/proc/self/status`, by name.
fn status_fields(text: &str) -> std::collections::BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect()
}

#[test]
fn a_call_holds_no_capability_and_no_new_privileges() {
    if !sqlite3_or_skip() {
        return;
    }
    for user in users() {
        let vw = Vw::new(user);
        let before = outside(&vw);
        for land in LANDS {
            let said = vw.sh(
                Some(&vw.reader),
                &verb(land, "read"),
                "grep ^Cap /proc/self/status; grep NoNewPrivs /proc/self/status",
            );
            let f = status_fields(&said);
            let zero = "0000000000000000";
            let mut sets = vec!["CapInh", "CapPrm", "CapEff", "CapAmb"];
            if user == As::Me && confine_common::root() {
                // Root's bounding set too: nothing an `execve` could give back.
                sets.push("CapBnd");
            }
            for set in sets {
                assert_eq!(
                    f.get(set).map(String::as_str),
                    Some(zero),
                    "{user:?} {land}: {set}:\n{said}"
                );
            }
            assert_eq!(
                f.get("NoNewPrivs").map(String::as_str),
                Some("1"),
                "{user:?} {land}"
            );
        }
        assert_eq!(outside(&vw), before, "{user:?}");
    }
}

#[test]
fn packet_and_raw_sockets_real_time_scheduling_and_negative_nice_fail() {
    if !sqlite3_or_skip() {
        return;
    }
    for user in users() {
        let vw = Vw::new(user);
        for land in LANDS {
            for what in ["packet", "raw"] {
                let v = vw.probe(Some(&vw.reader), land, &[what]);
                assert_denied(&v, &format!("{user:?} {land} {what}"));
            }
            for what in ["sched-fifo", "nice-down"] {
                let v = vw.probe(Some(&vw.reader), land, &[what]);
                assert_denied(&v, &format!("{user:?} {land} {what}"));
            }
            let said = vw.sh(
                Some(&vw.reader),
                &verb(land, "read"),
                "chrt -f 99 true 2>&1; echo fifo=$?; chrt -r 1 true 2>&1; echo rr=$?; grep -E ^Max.realtime.priority /proc/self/limits; grep -E ^Max.nice /proc/self/limits",
            );
            for ok in ["fifo=0", "rr=0"] {
                assert!(
                    !said.contains(ok),
                    "{user:?} {land}: real-time scheduling worked: {said}"
                );
            }
            for limit in ["Max realtime priority", "Max nice priority"] {
                let line = said
                    .lines()
                    .find(|l| l.starts_with(limit))
                    .unwrap_or_default();
                let values: Vec<&str> = line[limit.len().min(line.len())..]
                    .split_whitespace()
                    .collect();
                assert_eq!(values, vec!["0", "0"], "{user:?} {land}: {limit}: {said}");
            }
        }
    }
}

#[test]
fn a_setuid_program_does_not_raise_a_call() {
    if !sqlite3_or_skip() {
        return;
    }
    if !confine_common::root() {
        common::skip::skip("making a setuid-root program needs root");
        return;
    }
    for user in users() {
        let vw = Vw::new(user);
        let w = vw.w();
        // A setuid-root copy of `id`, in a directory the operator lets the pack read.
        let dir = w.root().join("suid");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let id = dir.join("id");
        std::fs::copy("/usr/bin/id", &id).unwrap();
        std::fs::set_permissions(&id, std::fs::Permissions::from_mode(0o4755)).unwrap();
        vw.cw.config(&json!({"packs": {"sq": {"read": [dir]}}}));
        let want = match user {
            As::Me => "0",
            As::Nobody => "65534",
        };
        for land in LANDS {
            let said = vw.sh(
                Some(&vw.reader),
                &verb(land, "read"),
                &format!("{} -u", id.display()),
            );
            assert_eq!(
                said.trim(),
                want,
                "{user:?} {land}: the setuid bit raised the call"
            );
        }
    }
}
