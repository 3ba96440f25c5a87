//! Issue 12, "processes outlive the call": through the built `hcp`, as root and as
//! `nobody`, in `personal` and `local` land, a child that `setsid()`s and sleeps, one that
//! double-forks a daemon, one that kills its parent `hcp` first, and `kill -9` of `hcp`
//! while each runs: nothing survives (RUNTIME §5 "Processes"). A fork bomb is bounded by
//! `processes`, also as root, and ended with the call without it.
//!
//! No sleeping to synchronise: each sleeper holds a FIFO open, and the test waits, with a
//! deadline, for the FIFO's end of file, which comes when the last of them is gone.

#![allow(clippy::unwrap_used)]

mod common;
mod confine_common;

use confine_common::{As, Cw, FifoReader, line, live_with, token, users};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

/// Long enough for a debug `hcp` under load to start a call.
const START: Duration = Duration::from_secs(20);
/// RUNTIME §5: no descendant outlives a killed hcp by more than a second.
const SECOND: Duration = Duration::from_secs(1);

/// A world with the hostile pack, an agent allowed it, and a directory of FIFOs the
/// pack may write (`config.json`), in every land.
fn world(user: As) -> (Cw, String, PathBuf) {
    let cw = Cw::new(user, &["hostile"]);
    let tok = cw.session("agent-1", &[]);
    cw.grant("agent-1", "hostile", &["verb.exec.read"]);
    let fifos = cw.w.root().join("fifos");
    std::fs::create_dir_all(&fifos).unwrap();
    cw.own(&fifos);
    cw.config(&json!({"packs": {"hostile": {"write": [fifos]}}}));
    (cw, tok, fifos)
}

fn fresh_fifo(cw: &Cw, dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    cw.fifo(&p);
    p
}

/// `hcp exec --json ARGS…` as the agent, started, its output piped.
fn start(cw: &Cw, tok: &str, args: &[&str]) -> Child {
    cw.hcp()
        .env("HCP_SESSION", tok)
        .arg("exec")
        .arg("--json")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn kill9(child: &Child) {
    // SAFETY: integers only; the child is ours and unreaped.
    unsafe { libc::kill(i32::try_from(child.id()).unwrap(), libc::SIGKILL) };
}

fn pid_namespace_or_skip() -> bool {
    let m = hcp_adapter::process_mechanism();
    if m.survives_sigkill_of_hcp() {
        return true;
    }
    common::skip::skip(&format!(
        "descendants of a killed hcp survive here: {}",
        m.describe()
    ));
    false
}

#[test]
fn a_setsid_sleeper_and_a_double_forked_daemon_end_with_the_call() {
    for user in users() {
        let (cw, tok, fifos) = world(user);
        for land in ["personal", "local"] {
            let verb = format!("hostile.{land}.try");
            for (n, how) in ["setsid-sleep", "daemon"].into_iter().enumerate() {
                let t = token(how);
                let fifo = fresh_fifo(&cw, &fifos, &format!("{land}-{n}"));
                let reader = FifoReader::open(&fifo);
                let f = fifo.display().to_string();
                let child = start(&cw, &tok, &["--timeout", "1", &verb, how, &t, &f, "stay"]);
                assert_eq!(
                    reader.line(START).as_deref(),
                    Some("ready"),
                    "{user:?} {land} {how}"
                );
                let out = child.wait_with_output().unwrap();
                assert_eq!(out.status.code(), Some(124), "{}", cw.w.render(&out));
                assert!(
                    reader.closes_within(SECOND),
                    "{user:?} {land} {how}: a sleeper outlived the call's timeout"
                );
                assert_eq!(live_with(&t), 0, "{user:?} {land} {how}");
            }
        }
    }
}

#[test]
fn kill_9_of_hcp_ends_every_descendant_within_a_second() {
    if !pid_namespace_or_skip() {
        return;
    }
    for user in users() {
        let (cw, tok, fifos) = world(user);
        for land in ["personal", "local"] {
            let verb = format!("hostile.{land}.try");
            for (n, how) in ["setsid-sleep", "daemon"].into_iter().enumerate() {
                let t = token(how);
                let fifo = fresh_fifo(&cw, &fifos, &format!("k-{land}-{n}"));
                let reader = FifoReader::open(&fifo);
                let f = fifo.display().to_string();
                let mut child = start(&cw, &tok, &["--timeout", "60", &verb, how, &t, &f, "stay"]);
                assert_eq!(
                    reader.line(START).as_deref(),
                    Some("ready"),
                    "{user:?} {land} {how}"
                );
                kill9(&child);
                let _ = child.wait();
                assert!(
                    reader.closes_within(SECOND),
                    "{user:?} {land} {how}: a descendant outlived a killed hcp by a second"
                );
                assert_eq!(live_with(&t), 0, "{user:?} {land} {how}");
            }
        }
    }
}

#[test]
fn a_child_cannot_kill_its_hcp_and_its_daemon_dies_with_it() {
    if !pid_namespace_or_skip() {
        return;
    }
    for user in users() {
        let (cw, tok, fifos) = world(user);
        for land in ["personal", "local"] {
            let t = token("kill-after");
            let fifo = fresh_fifo(&cw, &fifos, &format!("ka-{land}"));
            let reader = FifoReader::open(&fifo);
            // `exec` keeps the shell's pid: `$$` is the hcp that runs the call.
            let mut child = cw
                .command(Path::new("/bin/sh"))
                .env("HCP_SESSION", &tok)
                .args([
                    "-c",
                    r#"exec "$0" exec --json --timeout 60 "$1" kill-after "$$" "$2" "$3""#,
                ])
                .arg(common::hcp_bin())
                .arg(format!("hostile.{land}.try"))
                .arg(&t)
                .arg(&fifo)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let mut lines = vec![reader.line(START), reader.line(START)];
            lines.sort();
            let kill = lines[0].clone().unwrap_or_default();
            assert!(
                kill.starts_with("kill: denied"),
                "{user:?} {land}: {lines:?}"
            );
            assert_eq!(lines[1].as_deref(), Some("ready"));
            assert!(
                child.try_wait().unwrap().is_none(),
                "{user:?} {land}: hcp was killed"
            );
            kill9(&child);
            let _ = child.wait();
            assert!(
                reader.closes_within(SECOND),
                "{user:?} {land}: the daemon survived"
            );
            assert_eq!(live_with(&t), 0, "{user:?} {land}");
        }
    }
}

fn forked(v: &Value) -> usize {
    line(v)
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(usize::MAX)
}

#[test]
fn a_fork_bomb_is_bounded_by_processes_and_ended_without() {
    for user in users() {
        let (cw, tok, _) = world(user);
        for land in ["personal", "local"] {
            let verb = format!("hostile.{land}.try");
            let t = token("bomb");
            let out = cw
                .hcp()
                .env("HCP_SESSION", &tok)
                .env("HCP_LIMITS", "processes=30")
                .args(["exec", "--json", &verb, "fork-bomb", "200", &t])
                .output()
                .unwrap();
            let v: Value = serde_json::from_slice(&out.stdout).unwrap();
            if v["sandbox"]["processes"] != "enforced" {
                common::skip::skip(&format!(
                    "{user:?}: fork bombs are not bounded here: {}",
                    v["sandbox"]["processes"]
                ));
                continue;
            }
            assert!(forked(&v) < 30, "{user:?} {land}: {v}");
            assert!(line(&v).ends_with("EAGAIN"), "{v}");
            assert_eq!(
                live_with(&t),
                0,
                "{user:?} {land}: the bomb outlived its call"
            );
            // Without a tight `processes`: it forks what it asks, and every fork ends
            // with the call.
            let (_, v) = cw.exec(Some(&tok), &[&verb, "fork-bomb", "200", &t]);
            assert_eq!(line(&v), "forked 200 all", "{user:?} {land}: {v}");
            assert_eq!(
                live_with(&t),
                0,
                "{user:?} {land}: the bomb outlived its call"
            );
        }
    }
}
