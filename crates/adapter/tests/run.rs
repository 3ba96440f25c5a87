//! Real processes through `hcp_adapter::run`. Tests may use `sh -c`; the adapter never
//! does. No test sleeps to synchronise: each waits on the adapter's own return.

#![allow(clippy::unwrap_used)]

use hcp_adapter::{
    AdapterError, BinPin, CallVars, ChildEnv, Confinement, Invocation, Limits, Outcome, Rlimit,
    SessionValues, VerifiedBin, pin_bin, render, run, verify_bin,
};
use hcp_model::Code;
use hcp_model::exec::ArgValue;
use hcp_model::template::parse_template;
use pretty_assertions::assert_eq;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::fd::AsFd;
use std::path::Path;
use std::time::{Duration, Instant};

fn verified(path: &str) -> VerifiedBin {
    verify_bin(&pin_bin(Path::new(path)).unwrap()).unwrap()
}

fn invoke(bin: &VerifiedBin, args: &[&str], env: &ChildEnv, cwd: &Path, limits: Limits) -> Outcome {
    run(&Invocation {
        bin,
        argv0: "cli".into(),
        args: args.iter().map(OsString::from).collect(),
        env,
        cwd: cwd.to_owned(),
        limits,
        confine: None,
        cancel: None,
        egress: None,
    })
    .unwrap()
}

fn sh_with(script: &str, limits: Limits) -> Outcome {
    let env = ChildEnv::from_parent(std::env::vars_os());
    invoke(
        &verified("/bin/sh"),
        &["-c", script],
        &env,
        Path::new("/"),
        limits,
    )
}

fn sh(script: &str) -> Outcome {
    sh_with(script, Limits::default())
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Live (not zombie) processes whose process group is `pgid`.
fn live_in_group(pgid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the `(comm)`: state, ppid, pgrp.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        if f.len() > 2 && f[2] == pgid.to_string() && f[0] != "Z" && f[0] != "X" {
            out.push(pid);
        }
    }
    out
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            let state = s
                .rsplit_once(')')
                .map(|(_, r)| r.trim_start().chars().next());
            !matches!(state, Some(Some('Z' | 'X')))
        })
        .unwrap_or(false)
}

#[test]
fn hostile_values_never_reach_a_shell() {
    let dir = tempfile::tempdir().unwrap();
    let t = parse_template(&["[%s]\\n", "{{a}}", "{{b}}", "{{c}}", "--d={{d}}"]).unwrap();
    let values: BTreeMap<String, ArgValue> = [
        ("a", "$(touch CANARY)"),
        ("b", "; touch CANARY"),
        ("c", "`touch CANARY` && touch CANARY\nx"),
        ("d", "'\"quoted\" | touch CANARY"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), ArgValue::String(v.to_owned())))
    .collect();
    let session = SessionValues {
        principal_id: "owner".into(),
        project_id: None,
        workdir: dir.path().to_owned(),
    };
    let args = render(&t, &values, &session, "show").unwrap();
    let out = run(&Invocation {
        bin: &verified("/usr/bin/printf"),
        argv0: "printf".into(),
        args,
        env: &ChildEnv::new(),
        cwd: dir.path().to_owned(),
        limits: Limits::default(),
        confine: None,
        cancel: None,
        egress: None,
    })
    .unwrap();
    assert_eq!(
        text(&out.stdout),
        "[$(touch CANARY)]\n[; touch CANARY]\n[`touch CANARY` && touch CANARY\nx]\n[--d='\"quoted\" | touch CANARY]\n"
    );
    assert_eq!(out.exit_code, 0);
    assert!(!dir.path().join("CANARY").exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn timeout_ends_the_whole_group() {
    let limits = Limits {
        timeout: Duration::from_millis(300),
        grace: Duration::from_millis(200),
        ..Limits::default()
    };
    let start = Instant::now();
    // A grandchild too, and a shell that ignores TERM so KILL is needed.
    let out = sh_with("trap '' TERM; sleep 1000 & sleep 1000; wait", limits);
    let took = start.elapsed();
    assert!(out.timed_out);
    assert!(took < Duration::from_millis(300 + 200 + 1000), "{took:?}");
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert_eq!((out.exit_code, out.signal), (137, Some(9)));
    assert_eq!(live_in_group(out.pid), Vec::<u32>::new());

    let env = ChildEnv::from_parent(std::env::vars_os());
    let out = invoke(
        &verified("/bin/sleep"),
        &["1000"],
        &env,
        Path::new("/"),
        limits,
    );
    assert!(out.timed_out);
    assert_eq!((out.exit_code, out.signal), (143, Some(15)));
    assert_eq!(live_in_group(out.pid), Vec::<u32>::new());
}

#[test]
fn grandchild_holding_stdout_does_not_hold_the_call() {
    let start = Instant::now();
    let out = sh("sleep 1000 & echo $!");
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    assert!(!out.timed_out);
    assert_eq!(out.exit_code, 0);
    let grandchild: u32 = text(&out.stdout).trim().parse().unwrap();
    assert!(
        !alive(grandchild),
        "grandchild {grandchild} outlived the call"
    );
    assert_eq!(live_in_group(out.pid), Vec::<u32>::new());
}

#[test]
fn output_is_capped_and_drained() {
    let cap = 1024 * 1024;
    let out = sh("yes | head -c 50000000");
    assert_eq!(out.exit_code, 0);
    assert!(out.stdout_truncated && !out.stderr_truncated);
    assert_eq!(out.stdout.len(), cap);
    assert!(out.stdout.capacity() <= cap, "{}", out.stdout.capacity());
    assert_eq!(out.stdout_total, 50_000_000);
    assert!(out.stdout.starts_with(b"y\ny\n"));

    // A child that never stops writing still meets its timeout.
    let limits = Limits {
        timeout: Duration::from_millis(200),
        grace: Duration::from_millis(100),
        ..Limits::default()
    };
    let env = ChildEnv::from_parent(std::env::vars_os());
    let out = invoke(&verified("/usr/bin/yes"), &[], &env, Path::new("/"), limits);
    assert!(out.timed_out && out.stdout_truncated);
    assert_eq!(out.stdout.len(), cap);
}

#[test]
fn streams_are_capped_independently() {
    let limits = Limits {
        stdout_cap: 1000,
        stderr_cap: 100_000,
        ..Limits::default()
    };
    let out = sh_with("head -c 300000 /dev/zero; head -c 10 /dev/zero >&2", limits);
    assert_eq!((out.stdout.len(), out.stdout_truncated), (1000, true));
    assert_eq!((out.stderr.len(), out.stderr_truncated), (10, false));
    assert_eq!(out.stdout_total, 300_000);

    let limits = Limits {
        stdout_cap: 100_000,
        stderr_cap: 1000,
        ..Limits::default()
    };
    let out = sh_with("head -c 300000 /dev/zero >&2; echo done", limits);
    assert_eq!(
        (text(&out.stdout), out.stdout_truncated),
        ("done\n".into(), false)
    );
    assert_eq!((out.stderr.len(), out.stderr_truncated), (1000, true));
    assert!(out.truncated());
}

#[test]
fn child_env_is_exact() {
    let parent: Vec<(OsString, OsString)> = std::env::vars_os()
        .chain(
            [
                ("AWS_SECRET_ACCESS_KEY", "aws"),
                ("OPENAI_API_KEY", "sk"),
                ("HCP_SESSION", "tok"),
                ("LD_PRELOAD", "/nonexistent.so"),
                ("BASH_ENV", "/nonexistent.sh"),
                ("LANG", "C.UTF-8"),
            ]
            .map(|(k, v)| (k.into(), v.into())),
        )
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let mut cred = serde_json::Map::new();
    cred.insert("token".into(), "t0k".into());
    let env = ChildEnv::from_parent(parent)
        .home(dir.path())
        .agent_env([("MAIL_FORMAT", "json")])
        .unwrap()
        .call(&CallVars {
            pack_id: "mail",
            verb_key: "send",
            principal_id: "alice",
            project_id: Some("apollo"),
            workdir: Some(dir.path()),
        })
        .unwrap()
        .binding(&cred)
        .unwrap();
    let out = invoke(
        &verified("/usr/bin/env"),
        &[],
        &env,
        dir.path(),
        Limits::default(),
    );
    let mut got: Vec<(String, String)> = text(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned())))
        .collect();
    got.sort();
    let want: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string_lossy().into(), v.to_string_lossy().into()))
        .collect();
    assert_eq!(got, want);
    for secret in [
        "AWS_SECRET_ACCESS_KEY",
        "OPENAI_API_KEY",
        "HCP_SESSION",
        "LD_PRELOAD",
        "BASH_ENV",
    ] {
        assert!(!got.iter().any(|(k, _)| k == secret), "{secret}");
    }
}

#[test]
fn exit_codes_signals_stdin_cwd_argv0() {
    assert_eq!(sh("exit 3").exit_code, 3);
    let out = sh("kill -9 $$");
    assert_eq!((out.exit_code, out.signal), (137, Some(9)));
    // stdin is /dev/null: `cat` ends at once.
    let out = sh("cat; echo end");
    assert_eq!(text(&out.stdout), "end\n");
    let dir = tempfile::tempdir().unwrap();
    let env = ChildEnv::new();
    let bin = verified("/bin/sh");
    let out = invoke(
        &bin,
        &["-c", "pwd; tr '\\0' ' ' < /proc/$$/cmdline"],
        &env,
        dir.path(),
        Limits::default(),
    );
    let want = format!(
        "{}\ncli -c pwd; tr '\\0' ' ' < /proc/$$/cmdline ",
        dir.path().canonicalize().unwrap().display()
    );
    assert_eq!(text(&out.stdout), want);

    let e = run(&Invocation {
        bin: &bin,
        argv0: "sh".into(),
        args: vec![],
        env: &env,
        cwd: dir.path().join("missing"),
        limits: Limits::default(),
        confine: None,
        cancel: None,
        egress: None,
    })
    .unwrap_err();
    assert_eq!(e.code(), "spawn_failed");
}

#[test]
fn confinement_sets_rlimits() {
    let bin = verified("/bin/sh");
    let confine = Confinement::new()
        .rlimit(Rlimit::OpenFiles(77))
        .die_with_parent();
    let out = run(&Invocation {
        bin: &bin,
        argv0: "sh".into(),
        args: vec!["-c".into(), "ulimit -n".into()],
        env: &ChildEnv::new(),
        cwd: "/".into(),
        limits: Limits::default(),
        confine: Some(&confine),
        cancel: None,
        egress: None,
    })
    .unwrap();
    assert_eq!(text(&out.stdout), "77\n");
}

#[test]
fn cancel_ends_the_group() {
    let (r, w) = nix::unistd::pipe().unwrap();
    nix::unistd::write(&w, b"x").unwrap();
    let bin = verified("/bin/sleep");
    let start = Instant::now();
    let out = run(&Invocation {
        bin: &bin,
        argv0: "sleep".into(),
        args: vec!["1000".into()],
        env: &ChildEnv::new(),
        cwd: "/".into(),
        limits: Limits {
            grace: Duration::from_millis(100),
            ..Limits::default()
        },
        confine: None,
        cancel: Some(r.as_fd()),
        egress: None,
    })
    .unwrap();
    assert!(out.cancelled && !out.timed_out);
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_eq!(out.signal, Some(15));
}

fn copy_exec(from: &str, to: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::copy(from, to).unwrap();
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn code(r: Result<VerifiedBin, AdapterError>) -> &'static str {
    r.map(|_| "ok").unwrap_or_else(|e| e.code().as_str())
}

#[test]
fn pins_catch_changed_missing_and_unexecutable_bins() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("tool");
    copy_exec("/bin/true", &bin);
    let pin = pin_bin(&bin).unwrap();
    // Freshly written: too young for a trusted fingerprint, so every verify hashes.
    assert_eq!(pin.fingerprint, None);
    let v = verify_bin(&pin).unwrap();
    assert!(v.hashed());

    // Replaced by rename.
    let other = dir.path().join("other");
    copy_exec("/bin/false", &other);
    std::fs::rename(&other, &bin).unwrap();
    let e = verify_bin(&pin).unwrap_err();
    assert_eq!((e.code(), e.code().exit_status()), (Code::BinChanged, 126));

    // Not executable, a directory, missing, relative.
    copy_exec("/bin/true", &bin);
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(code(verify_bin(&pin)), "bin_not_executable");
    let as_dir = BinPin {
        path: dir.path().to_owned(),
        ..pin.clone()
    };
    assert_eq!(code(verify_bin(&as_dir)), "bin_not_executable");
    std::fs::remove_file(&bin).unwrap();
    let e = verify_bin(&pin).unwrap_err();
    assert_eq!((e.code(), e.code().exit_status()), (Code::BinMissing, 127));
    let relative = BinPin {
        path: "tool".into(),
        ..pin
    };
    assert_eq!(code(verify_bin(&relative)), "bin_missing");
}

#[test]
fn fingerprint_fast_path_is_sound() {
    // An old system bin on a filesystem with POSIX ctime gets a fingerprint; verify
    // then does not hash. (Elsewhere there is no fingerprint and every verify hashes.)
    let pin = pin_bin(Path::new("/bin/true")).unwrap();
    let v = verify_bin(&pin).unwrap();
    assert_eq!(v.hashed(), pin.fingerprint.is_none());

    // A forged pin whose fingerprint matches the file but whose digest does not: the
    // fast path trusts the fingerprint; writing the file in place breaks it.
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("tool");
    copy_exec("/bin/true", &bin);
    let mut pin = pin_bin(&bin).unwrap();
    let meta = std::fs::metadata(&bin).unwrap();
    use std::os::unix::fs::MetadataExt;
    pin.fingerprint = Some(hcp_adapter::StatFingerprint {
        dev: meta.dev(),
        ino: meta.ino(),
        size: meta.size(),
        mtime_ns: meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
        ctime_ns: meta.ctime() * 1_000_000_000 + meta.ctime_nsec(),
    });
    pin.sha256 = hcp_adapter::Sha256Digest([0; 32]);
    assert!(!verify_bin(&pin).unwrap().hashed());
    use std::io::Write;
    std::fs::OpenOptions::new()
        .append(true)
        .open(&bin)
        .unwrap()
        .write_all(b"\0")
        .unwrap();
    assert_eq!(code(verify_bin(&pin)), "bin_changed");
}

#[test]
fn scripts_run_by_path() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("tool");
    std::fs::write(&script, "#!/bin/sh\necho \"script $1\"\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let v = verify_bin(&pin_bin(&script).unwrap()).unwrap();
    assert!(v.is_script());
    let out = invoke(
        &v,
        &["ran"],
        &ChildEnv::new(),
        dir.path(),
        Limits::default(),
    );
    assert_eq!(text(&out.stdout), "script ran\n");
}

#[test]
fn a_child_past_its_cap_is_ended_when_asked_and_drained_otherwise() {
    // `yes` never ends on its own: with `end_at_cap` it is ended at the cap (SIGTERM),
    // long before the timeout; without, a child is drained to its own end.
    let limits = Limits {
        stdout_cap: 1000,
        end_at_cap: true,
        timeout: std::time::Duration::from_secs(600),
        ..Limits::default()
    };
    let out = sh_with("exec yes", limits);
    assert!(out.stdout_truncated);
    assert!(!out.timed_out);
    assert_eq!(out.signal, Some(15));
    assert_eq!(out.exit_code, hcp_adapter::ENDED_AT_CAP);
    // A child that ignores the SIGTERM (as a PID namespace's init does unless it handles
    // it) is killed after the grace, and its status is the same one.
    let limits = Limits {
        stdout_cap: 1000,
        end_at_cap: true,
        grace: std::time::Duration::from_millis(100),
        timeout: std::time::Duration::from_secs(600),
        ..Limits::default()
    };
    let out = sh_with("trap '' TERM; exec yes", limits);
    assert!(out.stdout_truncated);
    assert!(!out.timed_out);
    assert_eq!(out.signal, Some(9));
    assert_eq!(out.exit_code, hcp_adapter::ENDED_AT_CAP);
    let limits = Limits {
        stdout_cap: 1000,
        ..Limits::default()
    };
    let out = sh_with("head -c 300000 /dev/zero; exit 3", limits);
    assert_eq!((out.stdout_truncated, out.exit_code), (true, 3));
}
