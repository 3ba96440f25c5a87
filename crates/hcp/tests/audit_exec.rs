//! The write-ahead audit of `hcp exec` (RUNTIME §6, issue 13): an allowed call is an
//! `intent` then an `outcome` (bytes, `truncated`), a refusal one record; every way of
//! cutting, wiping, editing or replacing a trail that exec wrote is a fault with its code
//! and exit 1; a full disk and a read-only audit directory refuse a call with
//! `audit_unavailable` (74) before anything runs and with nothing spent (no budget
//! counted, the approval still there for the same call); `hcp doctor` reports loose modes, a
//! broken trail and interrupted calls.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod audit_common;
mod common;
mod exec_common;

use audit_common::{Census, spawn_exec, verify_in};
use common::World;
use common::skip::skip;
use exec_common::{audit_records, exec_json, exec_json_env, status};
use hcp_store::counter::{Counters, Limits, Verdict};
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

fn audit_dir(w: &World) -> PathBuf {
    w.hcp_home.join("audit")
}

#[test]
fn an_allowed_call_is_an_intent_then_an_outcome_with_its_bytes() {
    let w = audit_common::world();
    // Past the 1 MiB cap: the outcome says how much was read and that it was cut. A read
    // verb's child is ended at the cap (RUNTIME §5): it may have finished first (0) or
    // been ended (143), and what was read lies between the cap and all of it.
    let (out, v) = exec_json(&w, &["walprobe.big", "1048700"]);
    let ended = status(&out);
    assert!([0, 143].contains(&ended), "{}", w.render(&out));
    assert_eq!(v["truncated"], true);
    let (out, _) = exec_json(&w, &["walprobe.big", "3", "--tenant", "x"]);
    assert_eq!(status(&out), 65);
    let recs = audit_records(&w);
    assert_eq!(recs.len(), 3, "{recs:?}");
    let (intent, outcome, refusal) = (&recs[0], &recs[1], &recs[2]);
    assert_eq!(
        (&intent["kind"], &intent["seq"], &intent["decision"]),
        // After the store's acts of authority: its `init`, and the install's intent and
        // `act made`.
        (&json!("intent"), &json!(4), &json!("allow"))
    );
    assert_eq!(
        (&intent["operation"], &intent["land"], &intent["verb_key"]),
        (&json!("read"), &json!("personal"), &json!("big"))
    );
    assert!(
        intent["args_digest"]
            .as_str()
            .unwrap()
            .starts_with("hmac-sha256:"),
        "a keyed digest: {intent}"
    );
    assert_eq!(
        v["audit_id"], intent["id"],
        "the call's audit_id is its intent"
    );
    assert_eq!(
        (&outcome["kind"], &outcome["intent"], &outcome["exit_code"]),
        (&json!("outcome"), &intent["id"], &json!(ended))
    );
    assert_eq!(
        (&outcome["stderr_bytes"], &outcome["truncated"]),
        (&json!(0), &json!(true))
    );
    let read = outcome["stdout_bytes"].as_u64().unwrap();
    assert!((1_048_577..=1_048_700).contains(&read), "{outcome}");
    assert!(outcome["duration_ms"].is_u64() && outcome.get("decision").is_none());
    assert_eq!(
        (&refusal["kind"], &refusal["code"]),
        (&json!("refusal"), &json!("tenant_in_args"))
    );
    // The trail, its anchor and the secret are the owner's only.
    let dir = audit_dir(&w);
    assert_eq!(mode(&dir), 0o700);
    for f in ["audit.jsonl", "audit.anchor", "digest.secret"] {
        assert_eq!(mode(&dir.join(f)), 0o600, "{f}");
    }
    // Tail shows the pair, verify nothing interrupted.
    let o = w.run(&["audit", "tail"]);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        text.contains("admitted") && text.contains("truncated"),
        "{text}"
    );
    let (code, report) = verify_in(&w, &w.hcp_home);
    assert_eq!((code, report["interrupted"].clone()), (Some(0), json!([])));
}

#[test]
fn a_call_killed_after_admission_is_interrupted_and_doctor_counts_it() {
    let w = audit_common::world();
    let (out, _) = exec_json(&w, &["walprobe.argv", "one"]);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    let out = audit_common::wait_bounded(spawn_exec(
        &w,
        None,
        &["walprobe.argv", "two"],
        Some("admitted"),
    ));
    assert!(audit_common::killed(&out.status), "{}", w.render(&out));
    let census = Census::of(&w.hcp_home);
    assert_eq!(census.open().len(), 1);
    let o = w.run(&["audit", "verify"]);
    assert_eq!(o.status.code(), Some(0), "{}", w.render(&o));
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(text.contains("interrupted: 1 call"), "{text}");
    let doctor = |w: &World| {
        let o = w.run(&["doctor", "--json"]);
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        (o.status.code(), v)
    };
    let (_, v) = doctor(&w);
    let a = &v["store"]["audit"];
    assert_eq!(
        (&a["sound"], &a["interrupted"], &a["loose_modes"]),
        (&json!(true), &json!(1), &json!([]))
    );
    let human = w.run(&["doctor"]);
    assert!(
        String::from_utf8_lossy(&human.stdout).contains("1 interrupted call"),
        "{}",
        w.render(&human)
    );
    // Modes wider than the owner's are problems.
    let dir = audit_dir(&w);
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(
        dir.join("audit.jsonl"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let (code, v) = doctor(&w);
    assert_eq!(code, Some(1));
    assert_eq!(
        v["store"]["audit"]["loose_modes"].as_array().unwrap().len(),
        2
    );
    let problems = v["problems"].to_string();
    assert!(
        problems.contains("0755") && problems.contains("0644"),
        "{problems}"
    );
    // A cut trail is broken, with its fault.
    let text = std::fs::read_to_string(dir.join("audit.jsonl")).unwrap();
    let kept: Vec<&str> = text.lines().collect();
    std::fs::write(
        dir.join("audit.jsonl"),
        format!("{}\n", kept[..kept.len() - 1].join("\n")),
    )
    .unwrap();
    let (code, v) = doctor(&w);
    assert_eq!(code, Some(1));
    assert_eq!(
        (&v["store"]["audit"]["sound"], &v["store"]["audit"]["fault"]),
        (&json!(false), &json!("truncated"))
    );
}

/// A world whose trail `hcp exec` wrote: 6 calls, 12 records.
fn exec_trail() -> World {
    let w = audit_common::world();
    for i in 0..6 {
        let (out, _) = exec_json(&w, &["walprobe.argv", &format!("v{i}")]);
        assert_eq!(status(&out), 0, "{}", w.render(&out));
    }
    assert_eq!(audit_records(&w).len(), 12);
    w
}

fn trail_lines(w: &World) -> Vec<String> {
    std::fs::read_to_string(audit_dir(w).join("audit.jsonl"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn write_trail(w: &World, lines: &[String]) {
    let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(audit_dir(w).join("audit.jsonl"), body).unwrap();
}

fn fault(w: &World) -> (Option<i32>, Value) {
    let (code, v) = verify_in(w, &w.hcp_home);
    (code, v["broken"]["fault"].clone())
}

/// Asserts that `hcp exec` refuses over the damaged trail (nothing is written over the
/// evidence, nothing runs).
fn exec_refuses(w: &World) {
    let before = std::fs::read(audit_dir(w).join("audit.jsonl")).ok();
    let (out, v) = exec_json(w, &["walprobe.argv", "after"]);
    assert_eq!(
        (status(&out), v["code"].as_str()),
        (74, Some("audit_unavailable")),
        "{}",
        w.render(&out)
    );
    assert!(v["exit_code"].is_null(), "nothing ran: {v}");
    assert_eq!(std::fs::read(audit_dir(w).join("audit.jsonl")).ok(), before);
}

#[test]
fn every_cut_wipe_edit_swap_and_replacement_of_an_exec_trail_is_a_fault_with_exit_1() {
    // Cut by 1 and by 5 records.
    for cut in [1, 5] {
        let w = exec_trail();
        let lines = trail_lines(&w);
        write_trail(&w, &lines[..lines.len() - cut]);
        assert_eq!(fault(&w), (Some(1), json!("truncated")), "cut by {cut}");
        exec_refuses(&w);
    }
    // Deleted; emptied.
    let w = exec_trail();
    std::fs::remove_file(audit_dir(&w).join("audit.jsonl")).unwrap();
    assert_eq!(fault(&w), (Some(1), json!("missing_log")));
    exec_refuses(&w);
    let w = exec_trail();
    write_trail(&w, &[]);
    assert_eq!(fault(&w), (Some(1), json!("truncated")));
    exec_refuses(&w);
    // One record edited: an outcome's exit code.
    let w = exec_trail();
    let mut lines = trail_lines(&w);
    // The first outcome (after the acts of authority that made the store and installed).
    let at = lines
        .iter()
        .position(|l| l.contains(r#""exit_code":0"#))
        .unwrap();
    lines[at] = lines[at].replace(r#""exit_code":0"#, r#""exit_code":1"#);
    write_trail(&w, &lines);
    assert_eq!(fault(&w), (Some(1), json!("hash_mismatch")));
    let (_, v) = verify_in(&w, &w.hcp_home);
    assert_eq!(v["broken"]["line"], json!(at + 1));
    // Two records swapped.
    let w = exec_trail();
    let mut lines = trail_lines(&w);
    let n = lines.len();
    lines.swap(n - 2, n - 1);
    write_trail(&w, &lines);
    assert_eq!(fault(&w), (Some(1), json!("prev_mismatch")));
    // The anchor deleted.
    let w = exec_trail();
    std::fs::remove_file(audit_dir(&w).join("audit.anchor")).unwrap();
    assert_eq!(fault(&w), (Some(1), json!("missing_anchor")));
    exec_refuses(&w);
}

#[test]
fn an_older_copy_of_trail_and_anchor_is_caught_by_a_checkpoint() {
    let w = exec_trail();
    let keep = w.root().join("older");
    std::fs::create_dir(&keep).unwrap();
    for f in ["audit.jsonl", "audit.anchor"] {
        std::fs::copy(audit_dir(&w).join(f), keep.join(f)).unwrap();
    }
    for i in 0..2 {
        let (out, _) = exec_json(&w, &["walprobe.argv", &format!("later{i}")]);
        assert_eq!(status(&out), 0, "{}", w.render(&out));
    }
    let o = w.run(&["audit", "checkpoint"]);
    assert_eq!(o.status.code(), Some(0), "{}", w.render(&o));
    let cp = w.root().join("checkpoint.json");
    std::fs::write(&cp, &o.stdout).unwrap();
    for f in ["audit.jsonl", "audit.anchor"] {
        std::fs::copy(keep.join(f), audit_dir(&w).join(f)).unwrap();
    }
    // Consistent with each other; what tells is a checkpoint: the one kept elsewhere, and
    // the store's own copy of the last one it signed, which verify reads by default.
    let (code, v) = verify_in(&w, &w.hcp_home);
    assert_eq!((code, &v["broken"]["fault"]), (Some(1), &json!("rollback")));
    let o = w.run(&[
        "audit",
        "verify",
        "--json",
        "--checkpoint",
        cp.to_str().unwrap(),
    ]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (o.status.code(), &v["broken"]["fault"]),
        (Some(1), &json!("rollback"))
    );
}

/// Runs `script` with `sh` in a private mount namespace (so that what it mounts vanishes
/// with it); `None` when this machine does not allow one.
fn in_mount_namespace(w: &World, script: &str) -> Option<std::process::Output> {
    in_mount_namespace_env(w, script, &[])
}

/// [`in_mount_namespace`] with more environment variables for `script`.
fn in_mount_namespace_env(
    w: &World,
    script: &str,
    env: &[(&str, &str)],
) -> Option<std::process::Output> {
    let probe = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "true"])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        return None;
    }
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-ec", script])
        .env_clear()
        .env("HOME", &w.home)
        .env("PATH", w.path_var())
        .env("LANG", "C")
        .env("HCP", common::hcp_bin())
        .env("WORK", &w.work)
        .env("HCP_HOME", &w.hcp_home)
        .env("ROOT", w.root())
        .envs(env.iter().copied())
        .current_dir(&w.work)
        .output()
        .unwrap();
    Some(out)
}

fn read_json(p: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

fn read_status(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap().trim().to_owned()
}

#[test]
fn a_full_disk_refuses_with_audit_unavailable_before_anything_runs() {
    let w = audit_common::world();
    let (out, _) = exec_json(&w, &["walprobe.argv", "first"]);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    // The store copied to a 1 MiB tmpfs, the rest of the space filled. Calls run while
    // the trail's last page has room, then one is refused (at its intent or, when the
    // intent still fits, at its outcome); then the same with no trail at all (a new one
    // cannot be made).
    let script = r#"
        full="$ROOT/full"; mkdir -p "$full"
        mount -t tmpfs -o size=1m tmpfs "$full"
        cp -a "$HCP_HOME"/. "$full"/
        dd if=/dev/zero of="$full/filler" bs=4096 2>/dev/null || true
        set +e
        i=0
        while [ $i -lt 10 ]; do
            HCP_HOME="$full" "$HCP" exec --json walprobe.mark --path "full-$i" --text x > "$ROOT/out-$i.json"
            s=$?; echo $s > "$ROOT/status-$i"
            [ $s -eq 0 ] || break
            i=$((i+1))
        done
        echo $i > "$ROOT/runs"
        HCP_HOME="$full" "$HCP" audit verify --json > "$ROOT/verify.json"; echo $? > "$ROOT/verify-status"
        rm -f "$full"/audit/audit.jsonl "$full"/audit/audit.anchor
        dd if=/dev/zero of="$full/filler2" bs=512 2>/dev/null
        HCP_HOME="$full" "$HCP" exec --json walprobe.mark --path fresh --text x > "$ROOT/out-fresh.json"
        echo $? > "$ROOT/status-fresh"
    "#;
    let Some(ns) = in_mount_namespace(&w, script) else {
        skip("no private mount namespace (unshare --mount) to mount a small tmpfs in");
        return;
    };
    assert!(ns.status.success(), "{}", w.render(&ns));
    let root = w.root();
    let ran: usize = read_status(&root.join("runs")).parse().unwrap();
    assert!(ran < 10, "the disk never filled up");
    for i in 0..ran {
        assert_eq!(read_status(&root.join(format!("status-{i}"))), "0");
        assert!(w.work.join(format!("full-{i}")).exists());
    }
    for tag in [ran.to_string(), "fresh".to_owned()] {
        let v = read_json(&root.join(format!("out-{tag}.json")));
        assert_eq!(
            (
                read_status(&root.join(format!("status-{tag}"))),
                v["code"].as_str()
            ),
            ("74".to_owned(), Some("audit_unavailable")),
            "{tag}: {v}"
        );
        assert!(v["exit_code"].is_null(), "{v}");
    }
    // No trail at all and no room for one: the intent cannot be written, nothing runs.
    assert!(!w.work.join("fresh").exists(), "fresh: the child ran");
    // In the trail's last page, the room may end at the intent (nothing runs) or after
    // it, at the outcome: then the durable intent authorised the run, the call answers
    // 74 all the same, and `verify` names it interrupted (RUNTIME §6), never damaged.
    let v = read_json(&root.join("verify.json"));
    assert_eq!(read_status(&root.join("verify-status")), "0", "{v}");
    let ran_anyway = w.work.join(format!("full-{ran}")).exists();
    let interrupted = v["interrupted"].as_array().map_or(0, Vec::len);
    assert_eq!(
        interrupted,
        usize::from(ran_anyway),
        "the refused call ran: {ran_anyway}; {v}"
    );
}

#[test]
fn a_read_only_audit_directory_refuses_with_audit_unavailable_before_anything_runs() {
    // A session under the runtime policy: the call counts toward `budget` and takes the
    // owner's approval, so a refusal that spent either would show.
    let (w, token) = audit_common::policy_world();
    let args = ["walprobe.markc", "--path", "ro-marker", "--text", "x"];
    let as_agent = [("HCP_SESSION", token.as_str())];
    let (out, v) = exec_json_env(&w, &args, &as_agent);
    assert_eq!(v["code"], "requires_confirmation", "{}", w.render(&out));
    let id = v["approval_id"].as_str().unwrap().to_owned();
    let o = w.run(&["approve", &id]);
    assert!(o.status.success(), "{}", w.render(&o));
    let before = audit_records(&w).len();
    let refused = |out: &std::process::Output, v: &Value| {
        assert_eq!(
            (status(out), v["code"].as_str()),
            (74, Some("audit_unavailable")),
            "{}",
            w.render(out)
        );
        assert!(v["exit_code"].is_null(), "{v}");
        assert!(!w.work.join("ro-marker").exists(), "the child ran");
    };
    // SAFETY: getuid(2) has no preconditions.
    if unsafe { libc::getuid() } != 0 {
        // An ordinary owner: the directory's and the files' modes.
        let dir = audit_dir(&w);
        for f in ["audit.jsonl", "audit.anchor"] {
            std::fs::set_permissions(dir.join(f), std::fs::Permissions::from_mode(0o400)).unwrap();
        }
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o500)).unwrap();
        let (out, v) = exec_json_env(&w, &args, &as_agent);
        refused(&out, &v);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        for f in ["audit.jsonl", "audit.anchor"] {
            std::fs::set_permissions(dir.join(f), std::fs::Permissions::from_mode(0o600)).unwrap();
        }
    } else {
        // Root writes whatever the modes say: a read-only bind mount.
        let script = r#"
            mount --bind "$HCP_HOME/audit" "$HCP_HOME/audit"
            mount -o remount,ro,bind "$HCP_HOME/audit"
            set +e
            HCP_SESSION="$TOKEN" "$HCP" exec --json walprobe.markc --path ro-marker --text x > "$ROOT/out.json"
            echo $? > "$ROOT/status"
        "#;
        let Some(ns) = in_mount_namespace_env(&w, script, &[("TOKEN", &token)]) else {
            skip("running as root without a private mount namespace for a read-only mount");
            return;
        };
        assert!(ns.status.success(), "{}", w.render(&ns));
        let v = read_json(&w.root().join("out.json"));
        let code = read_status(&w.root().join("status"));
        assert_eq!(
            (code.as_str(), v["code"].as_str()),
            ("74", Some("audit_unavailable")),
            "{v}"
        );
        assert!(v["exit_code"].is_null(), "{v}");
        assert!(!w.work.join("ro-marker").exists(), "the child ran");
    }
    assert_eq!(audit_records(&w).len(), before, "nothing was written");
    // Nothing spent: no budget counted, the approval not taken ...
    let home = hcp_store::Home::open(&w.hcp_home).unwrap();
    hcp_store::audit::AuditLog::new(&home).reconcile().unwrap();
    let one = Limits {
        rate_limit: None,
        budget: Some(1),
        window_ms: 1,
    };
    let counters = Counters::new(&home);
    assert_eq!(
        counters.check("agent", "walprobe.markc", one, 0).unwrap(),
        Verdict::Ok
    );
    assert!(
        hcp_store::approval::get(&home, &id)
            .unwrap()
            .unwrap()
            .used_at
            .is_none()
    );
    // ... so once the directory takes writes again the same call runs on that approval.
    let (out, v) = exec_json_env(&w, &args, &as_agent);
    assert_eq!(
        (status(&out), &v["ok"]),
        (0, &json!(true)),
        "{}",
        w.render(&out)
    );
    assert!(w.work.join("ro-marker").exists());
    assert_eq!(
        counters.check("agent", "walprobe.markc", one, 0).unwrap(),
        Verdict::Budget
    );
}
