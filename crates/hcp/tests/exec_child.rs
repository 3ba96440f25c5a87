//! The child of `hcp exec` through the built binary (RUNTIME §1.2, §5 "The child"): values
//! arrive as one argv element each and nothing else runs; hcp's own environment does not
//! leak; a verb that sleeps forever, or leaves a grandchild holding stdout, is ended with
//! its whole process group by `--timeout` plus the grace; endless output is truncated at
//! the cap with hcp's memory bounded.
//!
//! Processes are found in `/proc`: every child carries `HCP_WORKDIR=<the world's work
//! dir>`, unique to the test, in its environment; a process group is read from
//! `/proc/PID/stat`. Nothing here sleeps to synchronise: waits are polls of `/proc` with a
//! deadline, and time bounds are asserted on the elapsed wall time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod exec_common;

use exec_common::*;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The default grace between TERM and KILL (hcp_adapter::DEFAULT_GRACE).
const GRACE: Duration = Duration::from_secs(1);
/// Room for a loaded 2-core machine on top of timeout + grace.
const SLACK: Duration = Duration::from_secs(3);

/// Values a shell would read as code: each must arrive as exactly one argv element.
fn hostile(canary: &str) -> Vec<String> {
    vec![
        "two words".into(),
        "it's \"quoted\"".into(),
        format!("a; touch {canary}"),
        format!("a && touch {canary}"),
        format!("$(touch {canary})"),
        format!("`touch {canary}`"),
        format!("line one\ntouch {canary}\n"),
        format!("a | touch {canary} > {canary}"),
        "*".into(),
        "~".into(),
        "${HOME}".into(),
        "tab\tand\r\nreturn".into(),
        "naïve ☃".into(),
        String::new(),
    ]
}

#[test]
fn hostile_values_arrive_as_one_argv_element_and_nothing_else_runs() {
    let w = world(&["probe", "transit", "echo"]);
    let canary = w.root().join("canary");
    let c = canary.display().to_string();
    for value in hostile(&c) {
        // CLI face, positional and named; the probe echoes its argv as JSON.
        let (out, v) = exec_json(&w, &["probe.argv", &value]);
        assert_eq!(status(&out), 0, "{value:?}: {}", w.render(&out));
        assert_eq!(v["data"], json!([value]), "{value:?}");
        let (out, v) = exec_json(&w, &["probe.args", "--first", &value, "--second", "x"]);
        assert_eq!(status(&out), 0, "{value:?}: {}", w.render(&out));
        assert_eq!(v["data"], json!(["--", value, "x"]), "{value:?}");
        // JSON face.
        let body = json!({"pack_id": "probe", "verb_key": "argv", "args": {"value": value}});
        let (out, v) = envelope(&w, body.to_string().as_bytes());
        assert_eq!(status(&out), 0, "{value:?}: {}", w.render(&out));
        assert_eq!(v["data"], json!([value]), "{value:?}");
        // A gold pack: echo says it back whole.
        let (out, v) = exec_json(&w, &["echo.say", &value]);
        if !value.is_empty() {
            assert_eq!(status(&out), 0, "{value:?}: {}", w.render(&out));
            assert_eq!(v["data"]["text"], json!(value), "{value:?}: {v}");
        }
        // transit looks the value up as a place name: found nothing, or a usage error (empty).
        let (out, _) = exec_json(&w, &["transit.find", &value]);
        assert!(status(&out) <= 2, "{value:?}: {}", w.render(&out));
    }
    assert!(!canary.exists(), "a value ran as a command");
    assert_eq!(
        std::fs::read_dir(&w.work).unwrap().count(),
        0,
        "nothing was written in the working dir"
    );
}

#[test]
fn secrets_in_hcps_environment_do_not_reach_the_child() {
    let w = world(&["probe"]);
    let tok = session(&w, "agent-1", &[]);
    grant(&w, "agent-1", "probe", &["verb.exec.read"]);
    let secrets = [
        ("AWS_SECRET_ACCESS_KEY", "aws-secret-0001"),
        ("OPENAI_API_KEY", "sk-openai-0002"),
        ("GITHUB_TOKEN", "ghp-0003"),
        ("BASH_ENV", "/tmp/bash-env-0004"),
        ("LD_PRELOAD", "/nonexistent/preload-0005.so"),
        ("LD_LIBRARY_PATH", "/nonexistent/lib-0006"),
        ("HCP_HOME", "ignored"),
        ("HCP_PROJECT", ""),
        ("SSH_AUTH_SOCK", "/tmp/agent-0007"),
        ("LC_ALL", "C"),
        ("TZ", "UTC"),
    ];
    let mut env: Vec<(&str, &str)> = secrets.to_vec();
    env.push(("HCP_SESSION", &tok));
    // HCP_HOME must stay the world's: drop the fake one.
    env.retain(|(k, _)| *k != "HCP_HOME");
    let (out, v) = exec_json_env(&w, &["probe.env"], &env);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    let child: &serde_json::Map<String, Value> = v["data"].as_object().unwrap();
    let allowed = |k: &str| {
        matches!(
            k,
            "PATH"
                | "HOME"
                | "LANG"
                | "TZ"
                | "TMPDIR"
                | "HCP_PACK_ID"
                | "HCP_VERB_KEY"
                | "HCP_PRINCIPAL_ID"
                | "HCP_PROJECT_ID"
                | "HCP_WORKDIR"
        ) || k.starts_with("LC_")
    };
    for k in child.keys() {
        assert!(allowed(k), "`{k}` reached the child: {v}");
    }
    let text = serde_json::to_string(child).unwrap();
    for (k, val) in secrets {
        if k.starts_with("LC_") || k == "TZ" || k == "HCP_HOME" || val.is_empty() {
            continue;
        }
        assert!(!text.contains(val), "the value of `{k}` reached the child");
    }
    assert!(!text.contains(&tok), "the session token reached the child");
    assert!(!child.contains_key("HCP_SESSION"));
    assert_eq!(
        (
            &child["HCP_PACK_ID"],
            &child["HCP_VERB_KEY"],
            &child["HCP_PRINCIPAL_ID"]
        ),
        (&json!("probe"), &json!("env"), &json!("agent-1"))
    );
    // A `personal` call's HOME is its tenant home, at /home/hcp in its view.
    assert_eq!(child["HOME"], json!("/home/hcp"));
    assert!(!child.contains_key("HCP_WORKDIR"), "{v}");
    assert_eq!(child["LC_ALL"], json!("C"));
}

/// Starts `hcp exec --json ARGS` in the background and waits (polling `/proc`, with a
/// deadline) until a process of the call is running; returns the hcp child, the start
/// time and the process group of the verb.
fn start_and_find_group(w: &common::World, args: &[&str]) -> (std::process::Child, Instant, u32) {
    start_and_find_group_ignoring(w, args, &[])
}

/// [`start_and_find_group`], with `ignored` signals set to `SIG_IGN` in hcp, as a caller
/// like `nohup` does.
#[allow(clippy::zombie_processes)] // the child is returned; the caller waits for it
fn start_and_find_group_ignoring(
    w: &common::World,
    args: &[&str],
    ignored: &[libc::c_int],
) -> (std::process::Child, Instant, u32) {
    use std::os::unix::process::CommandExt;
    // A variable the child keeps (`LC_*`) naming this world: its processes are found by it.
    let marker = format!("LC_HCP_TEST_WORLD={}", w.work.display());
    let start = Instant::now();
    let ignored = ignored.to_vec();
    let mut command = std::process::Command::new(common::hcp_bin());
    // SAFETY: between fork and exec, only signal(2), which is async-signal-safe.
    unsafe {
        command.pre_exec(move || {
            for &sig in &ignored {
                libc::signal(sig, libc::SIG_IGN);
            }
            Ok(())
        });
    }
    let mut child = command
        .env_clear()
        .env("HOME", &w.home)
        .env("HCP_HOME", &w.hcp_home)
        .env("PATH", w.path_var())
        .env("LANG", "C")
        .env("LC_HCP_TEST_WORLD", &w.work)
        .current_dir(&w.work)
        .arg("exec")
        .arg("--json")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        // The verb leads its own process group (hcp, and the child between `clone` and
        // `setpgid`, share the marker but not that).
        for p in live_with_env(&marker) {
            let (_, pgid) = proc_stat(p).unwrap_or(('?', 0));
            if pgid == p {
                return (child, start, pgid);
            }
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("the verb's process never appeared: {}", w.render(&out));
        }
        std::thread::yield_now();
    }
}

#[test]
fn a_verb_that_sleeps_forever_is_ended_with_its_group_at_the_timeout() {
    let w = world(&["probe"]);
    let (child, start, pgid) = start_and_find_group(&w, &["--timeout", "1", "probe.sleep", "3600"]);
    let out = child.wait_with_output().unwrap();
    let elapsed = start.elapsed();
    let v = parse(&w, &out);
    assert_eq!(status(&out), 124, "{}", w.render(&out));
    assert_eq!(
        (&v["ok"], &v["code"], &v["exit_code"]),
        (
            &json!(false),
            &json!("timeout"),
            // The init of a PID namespace ignores the `SIGTERM` it does not handle.
            &json!(128 + if child_is_init() { 9 } else { 15 })
        ),
        "{v}"
    );
    assert!(
        elapsed < Duration::from_secs(1) + GRACE + SLACK,
        "back after {elapsed:?}"
    );
    assert_eq!(live_in_group(pgid), Vec::<u32>::new(), "left alive");
    let rec = last_audit(&w);
    assert_eq!(
        (&rec["decision"], &rec["code"]),
        (&json!("allow"), &json!("timeout"))
    );
    // The text face says it too.
    let out = exec(&w, &["probe.sleep", "3600", "--timeout", "0.2"]);
    snap!("timeout_text", w.render(&out));
}

#[test]
fn a_grandchild_holding_stdout_does_not_hold_hcp() {
    let w = world(&["probe"]);
    let start = Instant::now();
    let (out, v) = exec_json(&w, &["probe.hold", "--timeout", "5"]);
    let elapsed = start.elapsed();
    assert!(
        elapsed < Duration::from_secs(5) + GRACE + SLACK,
        "back after {elapsed:?}"
    );
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    let grandchild = u32::try_from(v["data"]["grandchild"].as_u64().unwrap()).unwrap();
    // In a PID namespace the pid the probe saw is the namespace's; the marker below finds
    // the grandchild wherever it is.
    if !child_is_init() {
        assert!(
            !alive(grandchild),
            "the grandchild {grandchild} is left alive"
        );
    }
    assert_eq!(live_with_env("HCP_VERB_KEY=hold"), Vec::<u32>::new());
}

#[test]
fn endless_output_of_a_read_is_ended_at_the_cap_with_memory_bounded() {
    let w = world(&["probe"]);
    let hcp = std::process::Command::new(common::hcp_bin())
        .env_clear()
        .env("HOME", &w.home)
        .env("HCP_HOME", &w.hcp_home)
        .env("PATH", w.path_var())
        .env("LANG", "C")
        .current_dir(&w.work)
        .args(["exec", "--json", "--timeout", "2", "probe.spew"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = hcp.id();
    let start = Instant::now();
    // Sample hcp's peak resident set while the child spews (until hcp has exited).
    let mut peak = 0;
    let reader = std::thread::spawn(move || hcp.wait_with_output().unwrap());
    while !reader.is_finished() {
        if let Some(k) = peak_rss_kib(pid) {
            peak = peak.max(k);
        }
        std::thread::yield_now();
    }
    let out = reader.join().unwrap();
    let elapsed = start.elapsed();
    let v = parse(&w, &out);
    // A read verb's child is ended once its output is past the cap (RUNTIME §5), not at
    // its timeout: 143 (128 + SIGTERM) whether the SIGTERM ended it or, for a child that
    // is its PID namespace's init, the SIGKILL after the grace; no `timeout` code.
    assert_eq!(
        status(&out),
        143,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!((&v["truncated"], &v["code"]), (&json!(true), &Value::Null));
    let stdout = v["stdout"].as_str().unwrap();
    assert!(
        (1024 * 1024 - 100..=1024 * 1024).contains(&stdout.len()),
        "kept {} bytes",
        stdout.len()
    );
    assert!(stdout.starts_with("spew 0 "));
    assert!(v["data"].is_null());
    eprintln!("hcp peak resident set while the child spewed: {peak} KiB");
    assert!(peak > 0, "hcp's memory was sampled");
    assert!(peak < 48 * 1024, "hcp's peak resident set: {peak} KiB");
    assert!(
        elapsed < Duration::from_secs(2) + GRACE + SLACK,
        "{elapsed:?}"
    );
    // Output past the cap that ends on its own: a read verb's child is ended there
    // (RUNTIME §5): 143 when it was ended, or 0 when it finished first; truncated.
    let (out, v) = exec_json(&w, &["probe.big", "3000000"]);
    let ended = status(&out);
    assert!([0, 143].contains(&ended), "{ended}");
    assert_eq!(v["truncated"], json!(true));
    assert_eq!(v["stdout"].as_str().unwrap().len(), 1024 * 1024);
    let out = exec(&w, &["probe.big", "2000000"]);
    assert_eq!(out.stdout.len(), 1024 * 1024);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "hcp: output truncated at the cap\n"
    );
    // Under the cap: whole.
    let (_, v) = exec_json(&w, &["probe.big", "1000"]);
    assert_eq!(
        (&v["truncated"], v["stdout"].as_str().unwrap().len()),
        (&json!(false), 1000)
    );
}

#[test]
fn exit_status_is_the_childs_own() {
    let w = world(&["probe"]);
    for n in ["0", "1", "3", "42", "255"] {
        let (out, v) = exec_json(&w, &["probe.exit", n]);
        let n: i32 = n.parse().unwrap();
        assert_eq!(status(&out), n);
        assert_eq!((&v["exit_code"], &v["ok"]), (&json!(n), &json!(n == 0)));
        let out = exec(&w, &["probe.exit", &n.to_string()]);
        assert_eq!(status(&out), n);
        assert!(out.stdout.is_empty() && out.stderr.is_empty());
    }
}

#[test]
fn local_land_runs_in_the_sandbox_working_dir() {
    let w = world(&["probe"]);
    let (out, v) = exec_json(&w, &["probe.cwd"]);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    assert_eq!(v["data"]["cwd"], json!(w.work.display().to_string()));
    // A session's workdir wins over the caller's directory.
    let sandbox = w.root().join("sandbox");
    std::fs::create_dir_all(&sandbox).unwrap();
    let tok = session(
        &w,
        "agent-1",
        &["--workdir", &sandbox.display().to_string()],
    );
    grant(
        &w,
        "agent-1",
        "probe",
        &["verb.exec.read", "verb.exec.write"],
    );
    let env = [("HCP_SESSION", tok.as_str())];
    let (out, v) = exec_json_env(&w, &["probe.cwd"], &env);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    assert_eq!(v["data"]["cwd"], json!(sandbox.display().to_string()));
    let (out, _) = exec_json_env(&w, &["probe.touch", "f.txt", "hi", "--confirm"], &env);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    assert!(sandbox.join("f.txt").exists());
    assert!(!w.work.join("f.txt").exists());
}

#[test]
fn the_childs_stdin_is_dev_null() {
    let w = world(&["probe"]);
    let out = w
        .hcp()
        .args(["exec", "--json", "probe.stdin"])
        .write_stdin("data hcp was given on its own stdin\n")
        .output()
        .unwrap();
    let v = parse(&w, &out);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    assert_eq!(v["data"], json!({"bytes": 0}));
}

/// RUNTIME §5: `local` land commands are confined by the kernel (Landlock): read-write in
/// the sandbox working directory and a private temporary directory, nothing else.
#[test]
fn local_land_cannot_write_outside_the_sandbox() {
    let w = world(&["probe"]);
    let outside = w.home.join("escaped.txt");
    let store = w.hcp_home.join("escaped.txt");
    for target in [&outside, &store] {
        let t = target.display().to_string();
        let (out, _) = exec_json(&w, &["probe.touch", &t, "x", "--confirm"]);
        assert_ne!(status(&out), 0, "{}", w.render(&out));
        assert!(!target.exists(), "wrote {t} from local land");
    }
    let (out, _) = exec_json(&w, &["probe.touch", "inside.txt", "x", "--confirm"]);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    assert!(w.work.join("inside.txt").exists());
}

#[test]
fn hcp_limits_can_only_tighten_and_the_kernel_enforces_them() {
    let w = world(&["probe"]);
    let text = "x".repeat(4096);
    // A 4 KiB write under a 1 KiB file-size limit: the kernel ends the child (SIGXFSZ),
    // and the answer says so; the init of a PID namespace is not sent the signal, and its
    // write fails (EFBIG) instead.
    let (out, v) = exec_json_env(
        &w,
        &["probe.touch", "big.txt", &text, "--confirm"],
        &[("HCP_LIMITS", "file_size_bytes=1024")],
    );
    if child_is_init() {
        assert_eq!(status(&out), 1, "{}", w.render(&out));
        assert!(
            v["stderr"].as_str().unwrap().contains("File too large"),
            "{v}"
        );
    } else {
        assert_eq!(status(&out), 128 + 25, "{}", w.render(&out));
        assert_eq!(v["signal"], 25);
        assert!(
            v["signal_name"].as_str().unwrap().contains("file-size"),
            "{v}"
        );
    }
    assert!(std::fs::metadata(w.work.join("big.txt")).map_or(0, |m| m.len()) <= 1024);
    // The same call without the override is within config.json's default limits.
    let (out, _) = exec_json(&w, &["probe.touch", "big.txt", &text, "--confirm"]);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    // An override above the configured limit cannot loosen it: config.json sets 2 KiB.
    std::fs::write(
        w.hcp_home.join("config.json"),
        r#"{"limits": {"file_size_bytes": 2048}}"#,
    )
    .unwrap();
    let (out, _) = exec_json_env(
        &w,
        &["probe.touch", "big2.txt", &text, "--confirm"],
        &[("HCP_LIMITS", "file_size_bytes=1000000")],
    );
    assert_eq!(
        status(&out),
        if child_is_init() { 1 } else { 128 + 25 },
        "{}",
        w.render(&out)
    );
    // A bad override is a usage error and runs nothing.
    let out = exec_env(
        &w,
        &["probe.touch", "big3.txt", "x", "--confirm"],
        &[("HCP_LIMITS", "bogus=1")],
    );
    assert_eq!(status(&out), 64, "{}", w.render(&out));
    assert!(!w.work.join("big3.txt").exists());
}

#[test]
fn descriptors_the_caller_left_open_do_not_reach_the_child() {
    use std::os::fd::AsRawFd;
    let w = world(&["probe"]);
    // An inheritable descriptor on a file outside the sandbox, as a careless harness
    // might leave one: Landlock checks paths at open, so it must not reach the child.
    let outside = w.root().join("outside.txt");
    let file = std::fs::File::create(&outside).unwrap();
    let fd = file.as_raw_fd();
    nix::fcntl::fcntl(
        &file,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()),
    )
    .unwrap();
    // It is inherited by what this test starts (hcp included)…
    let ls = std::process::Command::new("/bin/ls")
        .arg("/proc/self/fd")
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&ls.stdout).into_owned();
    assert!(listed.lines().any(|l| l == fd.to_string()), "{listed}");
    // …but not by the wrapped CLI.
    let (out, v) = exec_json(&w, &["probe.fds"]);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    assert_eq!(v["data"]["fds"], json!([0, 1, 2]));
    drop(file);
}

/// Every signal hcp arms ends the call as `cancelled` (130), with its process group gone
/// and an audit record; one the caller ignores (`nohup`) is left ignored.
#[test]
fn signals_to_hcp_cancel_the_call_and_are_audited() {
    let w = world(&["probe"]);
    let armed = [
        libc::SIGINT,
        libc::SIGTERM,
        libc::SIGHUP,
        libc::SIGQUIT,
        libc::SIGUSR1,
        libc::SIGUSR2,
        libc::SIGALRM,
    ];
    for (i, sig) in armed.into_iter().enumerate() {
        let (child, _, pgid) = start_and_find_group(&w, &["probe.sleep", "3600"]);
        // SAFETY: kill(2) with integers only.
        assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
        let out = child.wait_with_output().unwrap();
        let v = parse(&w, &out);
        assert_eq!(status(&out), 130, "signal {sig}: {}", w.render(&out));
        assert_eq!(v["code"], json!("cancelled"), "signal {sig}");
        assert_eq!(
            live_in_group(pgid),
            Vec::<u32>::new(),
            "signal {sig}: the group is left"
        );
        let records = audit_calls(&w);
        assert_eq!(
            records.len(),
            i + 1,
            "signal {sig}: one intent and outcome a call"
        );
        assert_eq!(records[i]["code"], json!("cancelled"), "signal {sig}");
    }
    // Ignored by the caller: SIGHUP changes nothing, SIGTERM still cancels.
    let (child, _, pgid) =
        start_and_find_group_ignoring(&w, &["probe.sleep", "3600"], &[libc::SIGHUP]);
    // hcp armed its handlers before it started the verb, so this is its final state:
    // SIGHUP still ignored, not caught; SIGTERM caught.
    let status_of_hcp = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    let mask = |field: &str| {
        status_of_hcp
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .map(|v| u64::from_str_radix(v.trim(), 16).unwrap())
            .unwrap()
    };
    let bit = |sig: libc::c_int| 1u64 << (sig - 1);
    assert_ne!(mask("SigIgn:") & bit(libc::SIGHUP), 0, "{status_of_hcp}");
    assert_eq!(mask("SigCgt:") & bit(libc::SIGHUP), 0, "{status_of_hcp}");
    assert_ne!(mask("SigCgt:") & bit(libc::SIGTERM), 0, "{status_of_hcp}");
    // SAFETY: kill(2) with integers only.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGHUP) }, 0);
    assert!(
        !live_in_group(pgid).is_empty(),
        "an ignored SIGHUP ended the call"
    );
    // SAFETY: kill(2) with integers only.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let out = child.wait_with_output().unwrap();
    assert_eq!(status(&out), 130, "{}", w.render(&out));
    assert_audit_clean(&w);
}
