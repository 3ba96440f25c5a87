//! `hcp-confine-probe`: the hostile child and the small driver of the confinement tests
//! (RUNTIME §4, §5 "Confinement of every land"). Not part of hcp.
//!
//! As a child, each subcommand tries one thing and prints `ok …` (exit 0) or
//! `denied <errno name>` (exit 1):
//!
//! ```text
//! read PATH | head PATH (512 bytes) | write PATH | list DIR
//! umount PATH | open-tree DIR REL  undo a covering mount, or reach beneath it
//! udp HOST PORT | tcp HOST PORT | resolve NAME | raw | netlink | packet | vsock | inet6
//! io-uring | unix-connect PATH | abstract NAME | socketpair
//! marker                       nested-call probe: `inside` or `outside`
//! detached-marker FIFO         setsid, double fork, wait for the parent to be gone, run
//!                              `marker` with an empty environment into FIFO; then sleep
//! daemon TOKEN FIFO [stay]     setsid + double fork a sleeper (argv holds TOKEN) that writes
//!                              `ready` to FIFO; the child itself exits (with `stay`: sleeps)
//! setsid-sleep TOKEN FIFO      the same without the double fork: the child setsids, forks
//!                              the sleeper and then sleeps itself
//! kill PID                     kill(PID, SIGKILL)
//! fork-bomb N                  fork up to N sleeping children; print how many forks worked
//! pid1                         print the pid, ppid and uid the child sees
//! ```
//!
//! As the driver (`drive [OPTIONS] -- PROGRAM ARGS…`), it confines PROGRAM with
//! `Confinement::for_call` and `run`, as `hcp exec` does, and prints one JSON object:
//! `{"exit_code", "signal", "timed_out", "stdout", "stderr", "sandbox"}` or
//! `{"error", "code"}`.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(cmd) = args.first() else {
        eprintln!("usage: hcp-confine-probe COMMAND …");
        std::process::exit(2);
    };
    let a = |i: usize| args.get(i).cloned().unwrap_or_default();
    let code = match cmd.as_str() {
        "drive" => drive(&args[1..]),
        "read" => {
            report(std::fs::read(a(1)).map(|b| format!("ok {}", String::from_utf8_lossy(&b))))
        }
        "head" => report(std::fs::File::open(a(1)).and_then(|mut f| {
            use std::io::Read;
            let mut b = [0u8; 512];
            let n = f.read(&mut b)?;
            Ok(format!("ok {n} bytes"))
        })),
        "umount" => {
            let c = std::ffi::CString::new(a(1)).unwrap_or_default();
            // SAFETY: a NUL-terminated path.
            let r = unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
            report(if r == 0 {
                Ok("ok".to_owned())
            } else {
                Err(std::io::Error::last_os_error())
            })
        }
        "open-tree" => {
            // A detached, non-recursive clone of the mount holding DIR, then FILE read
            // through it: what lies under a covering mount would show.
            let c = std::ffi::CString::new(a(1)).unwrap_or_default();
            // SAFETY: a NUL-terminated path; flags only.
            let fd = unsafe {
                libc::syscall(
                    libc::SYS_open_tree,
                    libc::AT_FDCWD,
                    c.as_ptr(),
                    1u32 | libc::O_CLOEXEC as u32,
                )
            };
            if fd < 0 {
                report(Err(std::io::Error::last_os_error()))
            } else {
                let rel = std::ffi::CString::new(a(2)).unwrap_or_default();
                // SAFETY: a descriptor we hold and a NUL-terminated relative path.
                let f = unsafe { libc::openat(fd as i32, rel.as_ptr(), libc::O_RDONLY) };
                report(if f >= 0 {
                    Ok("ok opened".to_owned())
                } else {
                    Err(std::io::Error::last_os_error())
                })
            }
        }
        "write" => report(
            std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(a(1))
                .and_then(|mut f| f.write_all(b"evil\n"))
                .map(|()| "ok".to_owned()),
        ),
        "list" => report(std::fs::read_dir(a(1)).map(|d| {
            let mut n: Vec<String> = d
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            n.sort();
            format!("ok {}", n.join(" "))
        })),
        "udp" => {
            let addr = format!("{}:{}", a(1), a(2));
            report(
                std::net::UdpSocket::bind("0.0.0.0:0")
                    .and_then(|s| s.send_to(b"x", addr.as_str()))
                    .map(|n| format!("ok sent {n}")),
            )
        }
        "tcp" => report(
            std::net::TcpStream::connect(format!("{}:{}", a(1), a(2))).map(|_| "ok".to_owned()),
        ),
        "resolve" => {
            use std::net::ToSocketAddrs;
            report(
                (a(1).as_str(), 53)
                    .to_socket_addrs()
                    .map(|mut it| format!("ok {:?}", it.next())),
            )
        }
        "raw" => sock(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_ICMP),
        "netlink" => sock(libc::AF_NETLINK, libc::SOCK_RAW, 0),
        "packet" => sock(libc::AF_PACKET, libc::SOCK_RAW, 0),
        "vsock" => sock(libc::AF_VSOCK, libc::SOCK_STREAM, 0),
        "inet6" => sock(libc::AF_INET6, libc::SOCK_DGRAM, 0),
        "io-uring" => {
            let mut params = [0u8; 120];
            // SAFETY: io_uring_setup writes at most sizeof(struct io_uring_params) (120).
            let r = unsafe { libc::syscall(libc::SYS_io_uring_setup, 4u32, params.as_mut_ptr()) };
            report(if r >= 0 {
                Ok("ok".to_owned())
            } else {
                Err(std::io::Error::last_os_error())
            })
        }
        "unix-connect" => report(
            std::os::unix::net::UnixStream::connect(a(1))
                .and_then(|mut s| s.write_all(b"x"))
                .map(|()| "ok".to_owned()),
        ),
        "abstract" => {
            use std::os::linux::net::SocketAddrExt;
            report(
                std::os::unix::net::SocketAddr::from_abstract_name(a(1).as_bytes())
                    .and_then(|addr| std::os::unix::net::UnixStream::connect_addr(&addr))
                    .map(|_| "ok".to_owned()),
            )
        }
        "socketpair" => report(std::os::unix::net::UnixStream::pair().map(|_| "ok".to_owned())),
        "marker" => {
            println!(
                "{}",
                if hcp_adapter::inside_non_owner_call() {
                    "inside"
                } else {
                    "outside"
                }
            );
            0
        }
        "detached-marker" => detached_marker(&a(1)),
        "daemon" => daemon(&a(2), true, a(3) == "stay"),
        "setsid-sleep" => daemon(&a(2), false, true),
        "kill" => {
            let pid: i32 = a(1).parse().unwrap_or(0);
            // SAFETY: integers only.
            let r = unsafe { libc::kill(pid, libc::SIGKILL) };
            report(if r == 0 {
                Ok("ok".to_owned())
            } else {
                Err(std::io::Error::last_os_error())
            })
        }
        "fork-bomb" => fork_bomb(a(1).parse().unwrap_or(100)),
        "pid1" => {
            // SAFETY: getters that cannot fail.
            let (p, pp, u) = unsafe { (libc::getpid(), libc::getppid(), libc::getuid()) };
            println!("pid {p} ppid {pp} uid {u}");
            0
        }
        _ => {
            eprintln!("unknown command `{cmd}`");
            2
        }
    };
    std::process::exit(code);
}

fn errno_name(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EACCES) => "EACCES".into(),
        Some(libc::EPERM) => "EPERM".into(),
        Some(libc::ENOENT) => "ENOENT".into(),
        Some(libc::EROFS) => "EROFS".into(),
        Some(libc::ENOSYS) => "ENOSYS".into(),
        Some(libc::EAGAIN) => "EAGAIN".into(),
        Some(libc::ECONNREFUSED) => "ECONNREFUSED".into(),
        Some(libc::EAFNOSUPPORT) => "EAFNOSUPPORT".into(),
        Some(n) => format!("errno {n}"),
        None => e.to_string(),
    }
}

fn report(r: std::io::Result<String>) -> i32 {
    match r {
        Ok(s) => {
            println!("{s}");
            0
        }
        Err(e) => {
            println!("denied {}", errno_name(&e));
            1
        }
    }
}

fn sock(domain: i32, ty: i32, proto: i32) -> i32 {
    // SAFETY: integers only; the descriptor is leaked to exit.
    let fd = unsafe { libc::socket(domain, ty, proto) };
    report(if fd >= 0 {
        Ok("ok".to_owned())
    } else {
        Err(std::io::Error::last_os_error())
    })
}

fn fork() -> i32 {
    // SAFETY: this program is single-threaded; the child only makes system calls.
    unsafe { libc::fork() }
}

fn sleep_forever() -> ! {
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// Writes `what` to the FIFO (opened for writing: waits for the reader).
fn tell(fifo: &str, what: &str) {
    if let Ok(mut f) = std::fs::OpenOptions::new().write(true).open(fifo) {
        let _ = f.write_all(what.as_bytes());
    }
}

fn daemon(fifo: &str, double_fork: bool, stay: bool) -> i32 {
    if fork() == 0 {
        // SAFETY: setsid takes nothing.
        unsafe { libc::setsid() };
        if double_fork && fork() != 0 {
            // SAFETY: ends the intermediate at once.
            unsafe { libc::_exit(0) };
        }
        if !double_fork {
            // The setsid'd process forks the sleeper and sleeps itself.
            if fork() == 0 {
                tell(fifo, "ready\n");
                sleep_forever();
            }
            sleep_forever();
        }
        tell(fifo, "ready\n");
        sleep_forever();
    }
    let mut st = 0;
    // SAFETY: reaps the first child.
    unsafe { libc::wait(&mut st) };
    println!("ok daemonised");
    let _ = std::io::stdout().flush();
    if stay { sleep_forever() } else { 0 }
}

fn detached_marker(fifo: &str) -> i32 {
    if fork() == 0 {
        // SAFETY: setsid and getpid take nothing.
        let intermediate = unsafe {
            libc::setsid();
            libc::getpid()
        };
        if fork() != 0 {
            // SAFETY: ends the intermediate at once.
            unsafe { libc::_exit(0) };
        }
        // Wait until the parent (the intermediate) is gone: the parent is then whoever
        // reaps orphans (a subreaper or an init).
        let mut tries = 0;
        // SAFETY: getppid cannot fail.
        while unsafe { libc::getppid() } == intermediate && tries < 1000 {
            tries += 1;
            std::thread::sleep(Duration::from_millis(1));
        }
        // A fresh program with an empty environment asks, its answer into the FIFO.
        let answer = std::fs::OpenOptions::new()
            .write(true)
            .open(fifo)
            .and_then(|f| {
                std::process::Command::new("/proc/self/exe")
                    .arg("marker")
                    .env_clear()
                    .stdout(f)
                    .status()
            });
        // SAFETY: done.
        unsafe { libc::_exit(i32::from(answer.is_err())) };
    }
    let mut st = 0;
    // SAFETY: reaps the first child (the intermediate exits at once).
    unsafe { libc::wait(&mut st) };
    println!("ok");
    let _ = std::io::stdout().flush();
    // Keep the call alive while the detached process asks (the call's timeout ends it).
    sleep_forever()
}

fn fork_bomb(n: usize) -> i32 {
    let mut made = 0;
    let mut failed = None;
    for _ in 0..n {
        match fork() {
            0 => sleep_forever(),
            p if p > 0 => made += 1,
            _ => {
                failed = Some(errno_name(&std::io::Error::last_os_error()));
                break;
            }
        }
    }
    println!("forked {made} {}", failed.unwrap_or_else(|| "all".into()));
    0
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
