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

/// The driver: `drive [--land L] [--agent] [--deny|--allow] [--workdir D] [--tmp D]
/// [--home D]… [--hcp-home D] [--other D]… [--protect P]… [--read P]… [--write P]…
/// [--bootstrap-hide P]… [--pass-hcp-home] [--env K=V]… [--processes N] [--timeout-ms N] -- PROGRAM ARGS…`.
fn drive(args: &[String]) -> i32 {
    use hcp_adapter::{
        CallPolicy, CallSandbox, ChildEnv, Confinement, Invocation, Limits, Network,
        ResourceLimits, pin_bin, run, verify_bin,
    };
    let mut land = hcp_model::Land::Personal;
    let mut owner = true;
    let mut network = None;
    let (mut workdir, mut tmp, mut hcp_home) = (PathBuf::from("/"), PathBuf::new(), PathBuf::new());
    let (mut homes, mut other, mut protect, mut read, mut write, mut hide) =
        (vec![], vec![], vec![], vec![], vec![], None::<Vec<PathBuf>>);
    let mut processes = 4096;
    let mut extra_env: Vec<(String, String)> = Vec::new();
    let mut pass_home = false;
    let mut timeout = Duration::from_secs(30);
    let mut i = 0;
    while i < args.len() && args[i] != "--" {
        let v = || PathBuf::from(args.get(i + 1).cloned().unwrap_or_default());
        let mut step = 2;
        match args[i].as_str() {
            "--land" => {
                land = match args.get(i + 1).map(String::as_str) {
                    Some("local") => hcp_model::Land::Local,
                    Some("brain") => hcp_model::Land::Brain,
                    _ => hcp_model::Land::Personal,
                }
            }
            "--agent" => {
                owner = false;
                step = 1;
            }
            "--deny" => {
                network = Some(Network::Deny);
                step = 1;
            }
            "--allow" => {
                network = Some(Network::Allow);
                step = 1;
            }
            "--workdir" => workdir = v(),
            "--tmp" => tmp = v(),
            "--hcp-home" => hcp_home = v(),
            "--home" => homes.push(v()),
            "--other" => other.push(v()),
            "--protect" => protect.push(v()),
            "--read" => read.push(v()),
            "--write" => write.push(v()),
            "--bootstrap-hide" => hide.get_or_insert_with(Vec::new).push(v()),
            "--pass-hcp-home" => {
                pass_home = true;
                step = 1;
            }
            "--env" => {
                if let Some((k, val)) = args.get(i + 1).and_then(|kv| kv.split_once('=')) {
                    extra_env.push((k.to_owned(), val.to_owned()));
                }
            }
            "--processes" => processes = v().to_string_lossy().parse().unwrap_or(4096),
            "--timeout-ms" => {
                timeout = Duration::from_millis(v().to_string_lossy().parse().unwrap_or(30_000));
            }
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
    let call = CallSandbox {
        land,
        owner,
        workdir: &workdir,
        tmpdir: &tmp,
        bin: bin.path(),
        hcp_home: &hcp_home,
        bootstrap: hide.as_deref(),
        homes: &homes,
        not_above: &homes,
        other_sandboxes: &other,
        protect: &protect,
        read: &read,
        write: &write,
        extra_ro: &[],
    };
    let policy = CallPolicy {
        require: true,
        network,
        limits: ResourceLimits {
            cpu_seconds: 30,
            address_space_bytes: 1 << 32,
            open_files: 256,
            file_size_bytes: 1 << 24,
            processes,
        },
    };
    let (confine, report) = match Confinement::for_call(&call, &policy) {
        Ok(x) => x,
        Err(e) => return fail(e),
    };
    let mut env = ChildEnv::from_parent([("PATH", "/usr/bin:/bin")]).tmpdir(&tmp);
    if pass_home {
        env = env.hcp_home(&hcp_home);
    }
    if !extra_env.is_empty() {
        env = match env.agent_env(extra_env.iter().map(|(k, v)| (k.as_str(), v.as_str()))) {
            Ok(e) => e,
            Err(e) => return fail(e),
        };
    }
    let inv = Invocation {
        bin: &bin,
        argv0: bin_path.clone(),
        args: program[1..].to_vec(),
        env: &env,
        cwd: workdir.clone(),
        limits: Limits {
            timeout,
            grace: Duration::from_millis(300),
            ..Limits::default()
        },
        confine: Some(&confine),
        cancel: None,
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
        })),
        Err(e) => fail(e),
    }
}
