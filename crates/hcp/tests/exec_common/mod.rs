//! Helpers shared by the `exec_*` integration tests: a world with packs installed and
//! active, `hcp exec` on both faces, sessions and grants, the audit trail, and `/proc`
//! probes for the processes a call leaves behind.
//!
//! Each test file declares `mod common;` and `mod exec_common;`.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use crate::common::{self, World};
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

/// A test fixture pack (`crates/hcp/tests/fixtures/packs/ID`).
pub fn fixture(id: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/packs")
        .join(id)
}

/// The source of a pack: a fixture when one has the id, else the gold pack.
pub fn source(id: &str) -> PathBuf {
    let f = fixture(id);
    if f.is_dir() { f } else { common::gold_pack(id) }
}

/// Whether a call's child is the init of a PID namespace of its own here (RUNTIME §5:
/// then every descendant ends with it). As an init it gets only the signals it handles,
/// and from the kernel only `SIGKILL`: a timeout's `SIGTERM` reaches it only if it handles
/// it (the `SIGKILL` after the grace always does: exit 137), and a resource limit's
/// `SIGXFSZ` or `SIGXCPU` is not delivered (the write fails with `EFBIG`; the CPU limit's
/// hard `SIGKILL` still ends it).
pub fn child_is_init() -> bool {
    hcp_adapter::process_mechanism().survives_sigkill_of_hcp()
}

/// A fresh world with `packs` (gold or fixture ids) installed and active.
pub fn world(packs: &[&str]) -> World {
    common::example_bins();
    let w = World::new();
    for id in packs {
        install(&w, &source(id));
    }
    if packs.contains(&"mail") {
        w.grant_mail_root();
    }
    w
}

/// Stores `{"token": TOKEN}` as `principal`'s credential for `family`, as `hcp connect`
/// does (under the store lock, noted in the state ledger).
pub fn store_binding(w: &World, principal: &str, family: &str, token: &str) {
    let home = hcp_store::Home::open(&w.hcp_home).unwrap();
    let mut secret = serde_json::Map::new();
    secret.insert("token".into(), serde_json::json!(token));
    let lock = hcp_store::StoreLock::acquire(&home).unwrap();
    hcp_store::binding::save(
        &home,
        &lock,
        principal,
        family,
        secret,
        jiff::Timestamp::now(),
    )
    .unwrap();
}

/// `hcp install --activate DIR`, asserting success.
pub fn install(w: &World, dir: &Path) {
    let out = w.run(&["install", "--activate", &dir.display().to_string()]);
    assert!(
        out.status.success(),
        "install of {} failed:\n{}",
        dir.display(),
        w.render(&out)
    );
}

/// `hcp session start --principal ID EXTRA…`: the token.
pub fn session(w: &World, principal: &str, extra: &[&str]) -> String {
    let mut args = vec!["session", "start", "--principal", principal];
    args.extend_from_slice(extra);
    let out = w.run(&args);
    assert!(out.status.success(), "session start:\n{}", w.render(&out));
    let token = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    assert!(token.starts_with("hcp"), "token shape: {token}");
    token
}

/// `hcp grant PRINCIPAL PACK CAP…`, asserting success.
pub fn grant(w: &World, principal: &str, pack: &str, caps: &[&str]) {
    let mut args = vec!["grant", principal, pack];
    args.extend_from_slice(caps);
    let out = w.run(&args);
    assert!(out.status.success(), "grant:\n{}", w.render(&out));
}

/// `hcp exec ARGS…` with extra environment variables.
pub fn exec_env(w: &World, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = w.hcp();
    c.arg("exec").args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

/// `hcp exec ARGS…`.
pub fn exec(w: &World, args: &[&str]) -> Output {
    exec_env(w, args, &[])
}

/// `hcp exec --json ARGS…` with extra environment: the output and the result object.
pub fn exec_json_env(w: &World, args: &[&str], env: &[(&str, &str)]) -> (Output, Value) {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = exec_env(w, &all, env);
    let v = parse(w, &out);
    (out, v)
}

/// `hcp exec --json ARGS…`: the output and the result object.
pub fn exec_json(w: &World, args: &[&str]) -> (Output, Value) {
    exec_json_env(w, args, &[])
}

/// `hcp exec --envelope -` with `stdin` and extra environment: output and result object.
pub fn envelope_env(w: &World, stdin: &[u8], env: &[(&str, &str)]) -> (Output, Value) {
    let mut c = std::process::Command::new(common::hcp_bin());
    c.env_clear()
        .env("HOME", &w.home)
        .env("HCP_HOME", &w.hcp_home)
        .env("PATH", w.path_var())
        .env("LANG", "C")
        .env("NO_COLOR", "1")
        .current_dir(&w.work)
        .args(["exec", "--envelope", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    let mut child = c.spawn().unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    let v = parse(w, &out);
    (out, v)
}

/// `hcp exec --envelope -` with `stdin`.
pub fn envelope(w: &World, stdin: &[u8]) -> (Output, Value) {
    envelope_env(w, stdin, &[])
}

/// The JSON object on stdout (one line).
pub fn parse(w: &World, out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON object ({e}):\n{}", w.render(out)))
}

/// The exit status (`-1` for a signal).
pub fn status(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

/// Asserts a refusal on the JSON face: exit status, `ok: false`, the code, no child run.
pub fn assert_refused(w: &World, out: &Output, v: &Value, code: &str, exit: i32) {
    assert_eq!(
        (status(out), v["ok"].clone(), v["code"].as_str()),
        (exit, Value::Bool(false), Some(code)),
        "{}",
        w.render(out)
    );
    assert!(v["exit_code"].is_null(), "a refusal runs nothing: {v}");
    assert!(v["error"].is_string(), "{v}");
}

/// The audit records of calls (intents, outcomes, refusals, events, recoveries), oldest
/// first; the store's acts of authority (its `init`, RUNTIME §6) are left out
/// ([`authority_records`] has them).
pub fn audit_records(w: &World) -> Vec<Value> {
    all_records(w)
        .into_iter()
        .filter(|r| r["kind"] != "authority")
        .collect()
}

/// The records of acts of authority, oldest first, without the `act made` records that
/// complete their intents ([`act_completions`] has those; an `act failed` is kept).
pub fn authority_records(w: &World) -> Vec<Value> {
    all_records(w)
        .into_iter()
        .filter(|r| r["kind"] == "authority" && r["act"] != "act made")
        .collect()
}

/// The `act made` and `act failed` records, oldest first.
pub fn act_completions(w: &World) -> Vec<Value> {
    all_records(w)
        .into_iter()
        .filter(|r| {
            r["kind"] == "authority" && (r["act"] == "act made" || r["act"] == "act failed")
        })
        .collect()
}

/// Every record of the trail, oldest first.
pub fn all_records(w: &World) -> Vec<Value> {
    let path = w.hcp_home.join("audit").join("audit.jsonl");
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Vec::new();
    };
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The latest call's audit: a refusal's one record, or an allowed call's `intent` with
/// its `outcome`'s fields over it (the intent's `id`, the call's `audit_id`, stays;
/// `outcome_id` is the outcome's).
pub fn last_audit(w: &World) -> Value {
    call_view(&audit_records(w)).expect("an audit record")
}

/// The last call of `records` as one object (see [`last_audit`]).
pub fn call_view(records: &[Value]) -> Option<Value> {
    let last = records.last()?;
    if last["kind"] != "outcome" {
        return Some(last.clone());
    }
    let mut view = records
        .iter()
        .rev()
        .find(|r| r["kind"] == "intent" && r["id"] == last["intent"])
        .cloned()
        .expect("the outcome's intent");
    for (k, v) in last.as_object().unwrap() {
        if !matches!(k.as_str(), "id" | "ts" | "seq" | "kind" | "prev" | "hash") {
            view[k] = v.clone();
        }
    }
    view["outcome_id"] = last["id"].clone();
    Some(view)
}

/// Every call's audit, oldest first: refusals, events and each allowed call as
/// [`last_audit`] shows it (an intent without outcome as it is).
pub fn audit_calls(w: &World) -> Vec<Value> {
    let records = audit_records(w);
    let mut out: Vec<Value> = Vec::new();
    for (i, r) in records.iter().enumerate() {
        match r["kind"].as_str() {
            Some("outcome") => {
                let view = call_view(&records[..=i]).unwrap();
                if let Some(slot) = out.iter_mut().find(|c| c["id"] == view["id"]) {
                    *slot = view;
                }
            }
            Some("recovery") => {}
            _ => out.push(r.clone()),
        }
    }
    out
}

/// `hcp audit verify`: asserts it is clean and returns its line.
pub fn assert_audit_clean(w: &World) -> String {
    let out = w.run(&["audit", "verify"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && text.starts_with("audit trail intact"),
        "{}",
        w.render(&out)
    );
    text
}

/// The state letter and process group of `pid` from `/proc/PID/stat`, when it exists.
pub fn proc_stat(pid: u32) -> Option<(char, u32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid pgrp …`; comm may hold spaces and parentheses.
    let rest = &text[text.rfind(')')? + 2..];
    let mut f = rest.split(' ');
    let state = f.next()?.chars().next()?;
    let _ppid = f.next()?;
    let pgrp = f.next()?.parse().ok()?;
    Some((state, pgrp))
}

/// Whether `pid` is a live (not zombie, not dead) process.
pub fn alive(pid: u32) -> bool {
    proc_stat(pid).is_some_and(|(s, _)| s != 'Z' && s != 'X')
}

fn all_pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

/// Live processes of group `pgid`.
pub fn live_in_group(pgid: u32) -> Vec<u32> {
    all_pids()
        .into_iter()
        .filter(|p| matches!(proc_stat(*p), Some((s, g)) if g == pgid && s != 'Z' && s != 'X'))
        .collect()
}

/// Live processes whose environment holds the exact `KEY=VALUE` entry.
pub fn live_with_env(entry: &str) -> Vec<u32> {
    all_pids()
        .into_iter()
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|e| e == entry.as_bytes()))
        })
        .filter(|p| alive(*p))
        .collect()
}

/// Peak resident set of `pid` in KiB (`VmHWM`), while it exists.
pub fn peak_rss_kib(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// Snapshot filters for exec answers: durations, audit ids, digests.
pub fn filters() -> Vec<(&'static str, &'static str)> {
    vec![
        (r#""duration_ms":\d+"#, r#""duration_ms":[MS]"#),
        (
            r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
            "[UUID]",
        ),
        (r"sha256:[0-9a-f]{64}", "[SHA256]"),
        (r"\b\d+(\.\d+)? s\b", "[SECS] s"),
    ]
}

/// `insta::assert_snapshot!` with [`filters`].
#[macro_export]
macro_rules! snap {
    ($name:expr, $text:expr) => {
        insta::with_settings!({filters => $crate::exec_common::filters()}, {
            insta::assert_snapshot!($name, $text);
        });
    };
}
