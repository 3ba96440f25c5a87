//! `hcp-confine-probe`: the hostile child and the small driver of the confinement tests
//! (RUNTIME §4, §5 "Confinement of every land"). Not part of hcp.
//!
//! As a child, each subcommand tries one thing and prints `ok …` (exit 0) or
//! `denied <errno name>` (exit 1); the commands are `examples/src/hostile.rs`'s (the same
//! file `hcp-example-probe try …` runs; see it for the list).
//!
//! As the driver (`drive [OPTIONS] -- PROGRAM ARGS…`), it confines PROGRAM with
//! `Confinement::for_call` and `run`, as `hcp exec` does, and prints one JSON object:
//! `{"exit_code", "signal", "timed_out", "stdout", "stderr", "sandbox"}` or
//! `{"error", "code"}`.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// The hostile commands, shared with `hcp-example-probe try …` (one copy of the code).
#[path = "../../../../examples/src/hostile.rs"]
#[allow(dead_code)]
mod hostile;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(cmd) = args.first() else {
        eprintln!("usage: hcp-confine-probe COMMAND …");
        std::process::exit(2);
    };
    let code = if cmd == "drive" {
        drive(&args[1..])
    } else if let Some(code) = hostile::dispatch(cmd, &args[1..]) {
        code
    } else {
        eprintln!("unknown command `{cmd}`");
        2
    };
    std::process::exit(code);
}

/// The driver: `drive [--land L] [--agent] [--deny|--host|--allow] [--write-verb]
/// [--workdir D] [--tenant D] [--hcp-home D] [--home D]… [--read P]… [--write P]…
/// [--bootstrap-hide NAME]… [--protect NAME]… [--env K=V]… [--processes N] [--memory N]
/// [--tmp-bytes N] [--cgroup D] [--require] [--echo-egress] [--timeout-ms N] [--cpu N]
/// [--swap PATH=TARGET]… [--swap-fifo PATH]… -- PROGRAM ARGS…`.
///
/// `--swap` and `--swap-fifo` are the race of a hostile tree: once the call's view is
/// planned and before its child binds it, PATH is replaced by a symlink to TARGET, or by
/// a FIFO.
fn drive(args: &[String]) -> i32 {
    use hcp_adapter::{
        CallPolicy, CallSandbox, ChildEnv, Confinement, Egress, Invocation, Limits, Network,
        ResourceLimits, pin_bin, run, scan_etc, verify_bin,
    };
    let mut land = hcp_model::Land::Personal;
    let mut owner = true;
    let mut network = Network::Deny;
    let mut writes = false;
    let (mut workdir, mut tenant, mut hcp_home) = (PathBuf::from("/"), None, PathBuf::new());
    let (mut homes, mut read, mut write) = (vec![], vec![], vec![]);
    let mut hide: Option<Vec<String>> = None;
    let mut protect: Option<Vec<String>> = None;
    let mut processes = 4096;
    let mut memory = 2u64 << 30;
    let mut tmp_bytes = 64u64 << 20;
    let mut cgroup = None;
    let mut require = false;
    let mut echo = false;
    let mut extra_env: Vec<(String, String)> = Vec::new();
    let mut timeout = Duration::from_secs(30);
    let mut cpu = 30;
    let mut swaps: Vec<(PathBuf, Option<PathBuf>)> = Vec::new();
    let mut i = 0;
    while i < args.len() && args[i] != "--" {
        let v = || args.get(i + 1).cloned().unwrap_or_default();
        let n = || v().parse::<u64>().unwrap_or(0);
        let mut step = 2;
        match args[i].as_str() {
            "--land" => {
                land = match v().as_str() {
                    "local" => hcp_model::Land::Local,
                    "brain" => hcp_model::Land::Brain,
                    _ => hcp_model::Land::Personal,
                }
            }
            "--agent" => {
                owner = false;
                step = 1;
            }
            "--deny" | "--host" | "--allow" => {
                network = match args[i].as_str() {
                    "--deny" => Network::Deny,
                    "--host" => Network::Host,
                    _ => Network::Allow,
                };
                step = 1;
            }
            "--write-verb" => {
                writes = true;
                step = 1;
            }
            "--require" => {
                require = true;
                step = 1;
            }
            "--echo-egress" => {
                echo = true;
                step = 1;
            }
            "--workdir" => workdir = PathBuf::from(v()),
            "--tenant" => tenant = Some(PathBuf::from(v())),
            "--hcp-home" => hcp_home = PathBuf::from(v()),
            "--home" => homes.push(PathBuf::from(v())),
            "--read" => read.push(PathBuf::from(v())),
            "--write" => write.push(PathBuf::from(v())),
            "--bootstrap-hide" => hide.get_or_insert_with(Vec::new).push(v()),
            "--protect" => protect.get_or_insert_with(Vec::new).push(v()),
            "--env" => {
                if let Some((k, val)) = v().split_once('=') {
                    extra_env.push((k.to_owned(), val.to_owned()));
                }
            }
            "--processes" => processes = n(),
            "--memory" => memory = n(),
            "--tmp-bytes" => tmp_bytes = n(),
            "--cgroup" => cgroup = Some(PathBuf::from(v())),
            "--timeout-ms" => timeout = Duration::from_millis(n()),
            "--cpu" => cpu = n(),
            "--swap" => {
                let v = v();
                let (p, t) = v.split_once('=').unwrap_or((v.as_str(), ""));
                swaps.push((PathBuf::from(p), Some(PathBuf::from(t))));
            }
            "--swap-fifo" => swaps.push((PathBuf::from(v()), None)),
            other => {
                eprintln!("unknown driver option `{other}`");
                return 2;
            }
        }
        i += step;
    }
    let program: Vec<OsString> = args.iter().skip(i + 1).map(OsString::from).collect();
    let Some(bin_path) = program.first() else {
        eprintln!("drive: no program");
        return 2;
    };
    let out = |v: serde_json::Value| {
        println!("{v}");
        0
    };
    let fail = |e: hcp_adapter::AdapterError| {
        let cause = std::error::Error::source(&e).map(ToString::to_string);
        out(serde_json::json!({"error": e.to_string(), "code": e.code(), "cause": cause}))
    };
    let bin = match pin_bin(std::path::Path::new(bin_path)).and_then(|p| verify_bin(&p)) {
        Ok(b) => b,
        Err(e) => return fail(e),
    };
    let etc = scan_etc();
    let protect: Vec<String> = protect.unwrap_or_else(|| {
        hcp_adapter::PROTECTED_IN_WORKDIR
            .iter()
            .map(|s| (*s).to_owned())
            .collect()
    });
    let hide_refs: Option<Vec<&str>> = hide
        .as_ref()
        .map(|h| h.iter().map(String::as_str).collect());
    let call = CallSandbox {
        land,
        caller: if owner {
            hcp_model::principal::Kind::Owner
        } else {
            hcp_model::principal::Kind::Session
        },
        writes,
        workdir: &workdir,
        tenant_home: tenant.as_deref(),
        bin: bin.path(),
        interpreters: &[],
        hcp_home: &hcp_home,
        bootstrap: hide_refs.as_deref(),
        homes: &homes,
        read: &read,
        write: &write,
        protect_in_workdir: &protect,
        etc: &etc,
    };
    let policy = CallPolicy {
        require,
        network,
        limits: ResourceLimits {
            cpu_seconds: cpu,
            address_space_bytes: 1 << 32,
            open_files: 256,
            file_size_bytes: 1 << 26,
            processes,
            tmp_bytes,
            memory_bytes: memory,
        },
        cgroup,
    };
    let (confine, report) = match Confinement::for_call(&call, &policy) {
        Ok(x) => x,
        Err(e) => return fail(e),
    };
    for (path, target) in &swaps {
        if let Err(e) = swap(path, target.as_deref()) {
            eprintln!("drive: cannot swap `{}`: {e}", path.display());
            return 2;
        }
    }
    let view = confine.view();
    let home = view.map_or_else(
        || tenant.clone().unwrap_or_else(|| workdir.clone()),
        |v| v.home().to_owned(),
    );
    let path = view.map_or_else(
        || OsString::from("/usr/bin:/bin"),
        |v| v.path_var(std::ffi::OsStr::new("/usr/bin:/bin:/usr/local/bin")),
    );
    let mut env = ChildEnv::from_parent([("PATH", path)])
        .home(&home)
        .tmpdir(std::path::Path::new("/tmp"));
    if hide.is_some() {
        env = env.hcp_home(&hcp_home);
    }
    if !extra_env.is_empty() {
        env = match env.agent_env(extra_env.iter().map(|(k, v)| (k.as_str(), v.as_str()))) {
            Ok(e) => e,
            Err(e) => return fail(e),
        };
    }
    let echo_server = |listener: std::os::fd::OwnedFd| {
        let l = std::net::TcpListener::from(listener);
        std::thread::spawn(move || {
            use std::io::{BufRead, Write};
            for conn in l.incoming().flatten() {
                let mut w = conn.try_clone().unwrap_or_else(|_| std::process::exit(3));
                let mut line = String::new();
                if std::io::BufReader::new(conn).read_line(&mut line).is_ok() {
                    let _ = w.write_all(format!("echo {line}").as_bytes());
                }
            }
        });
    };
    let cwd = if land == hcp_model::Land::Local {
        workdir.clone()
    } else {
        home.clone()
    };
    let inv = Invocation {
        bin: &bin,
        argv0: bin_path.clone(),
        args: program[1..].to_vec(),
        env: &env,
        cwd,
        limits: Limits {
            timeout,
            grace: Duration::from_millis(300),
            ..Limits::default()
        },
        confine: Some(&confine),
        cancel: None,
        egress: echo.then_some(Egress(&echo_server)),
    };
    match run(&inv) {
        Ok(o) => out(serde_json::json!({
            "exit_code": o.exit_code,
            "signal": o.signal,
            "timed_out": o.timed_out,
            "stdout": String::from_utf8_lossy(&o.stdout),
            "stderr": String::from_utf8_lossy(&o.stderr),
            "sandbox": report.field_json(),
            "pid_namespace": confine.has_pid_namespace(),
            "socket_attempts": o.socket_attempts,
            "memory_exceeded": o.memory_exceeded,
            "no_proc": o.no_proc,
            "view": view.map(|v| v.describe().to_vec()),
            "protected": view.map(|v| v.protected_before().to_vec()),
            "home": home,
        })),
        Err(e) => fail(e),
    }
}

/// Replaces `path` (a file, a directory with what it holds, a symlink) by a symlink to
/// `target`, or by a FIFO.
fn swap(path: &std::path::Path, target: Option<&std::path::Path>) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path)?,
        Ok(_) => std::fs::remove_file(path)?,
        Err(_) => {}
    }
    match target {
        Some(t) => std::os::unix::fs::symlink(t, path),
        None => {
            use std::os::unix::ffi::OsStrExt;
            let c = std::ffi::CString::new(path.as_os_str().as_bytes())
                .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
            // SAFETY: a NUL-terminated path.
            if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        }
    }
}
