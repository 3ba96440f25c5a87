//! A hostile child for testing hcp's confinement (RUNTIME §4, §5 "Confinement of every
//! land"): each command tries one thing a model's shell escape would, and prints
//! `ok …` (exit 0) or `denied <errno name>` (exit 1). Not part of hcp.
//!
//! `hcp-example-probe try COMMAND …` runs these; the adapter's own test driver
//! (`hcp-confine-probe`) includes this file and runs them directly. Only `libc` and `std`.
//!
//! ```text
//! read PATH | head PATH (512 bytes) | write PATH | list DIR
//! umount PATH | open-tree DIR REL  undo a covering mount, or reach beneath it
//! udp HOST PORT | tcp HOST PORT | resolve NAME | raw | netlink | packet | vsock | inet6
//! io-uring | unix-connect PATH | abstract NAME | socketpair
//! keyctl | ptrace              the session keyring; PTRACE_TRACEME
//! marker                       nested-call probe: `inside` or `outside`
//! detached-marker FIFO         setsid, double fork, wait for the parent to be gone, run
//!                              `marker` with an empty environment into FIFO; then sleep
//! daemon TOKEN FIFO [stay]     setsid + double fork a sleeper (argv holds TOKEN) that writes
//!                              `ready` to FIFO and keeps it open; the child itself exits
//!                              (with `stay`: sleeps)
//! setsid-sleep TOKEN FIFO      the same without the double fork: the child setsids, forks
//!                              the sleeper and then sleeps itself
//! kill-after PID TOKEN FIFO    the daemon of `daemon`, then kill(PID, SIGKILL) (the hcp that
//!                              runs the call, say); write `kill: ok` or `kill: denied …`
//!                              to FIFO (and keep it open), print it, and sleep
//! kill PID                     kill(PID, SIGKILL)
//! fork-bomb N                  fork up to N sleeping children; print how many forks worked
//! pid1                         print the pid, ppid and uid the child sees
//! mkdir PATH | rename FROM TO | remove PATH   change the tree (what a view allows)
//! tmp-hold FILE FIFO           write FILE (a secret in flight), say `ready` on FIFO, sleep
//! fill PATH MAX                write PATH in 1 MiB pieces up to MAX bytes; print how many
//!                              bytes went in and the error that stopped it
//! sched-fifo | nice-down       ask for SCHED_FIFO 50; lower the nice value by one
//! mem-hog N BYTES              fork N children, each touching BYTES of memory, then exit
//!                              when all are done: `ok` when every child finished
//! tcp-echo HOST PORT LINE      send LINE on a TCP connection, print the answer's first line
//! shm-list                     the System V shared memory segments this process sees
//! euid                         print the effective uid
//! unshare-user | clone-user | clone3   a user namespace of its own by `unshare`, by
//!                              `clone(CLONE_NEWUSER)`; a child by `clone3`
//! userns-undo COVERED          in a user and mount namespace of its own (if it gets them):
//!                              detach the cover of COVERED, clone the mount beneath it,
//!                              make `/usr` writable, mount a new proc; one line each
//! setns-mnt | mount-tmpfs DIR  enter its own mount namespace again; mount a tmpfs
//! handle PATH                  `name_to_handle_at` then `open_by_handle_at` of PATH
//! ptrace-attach PID            `PTRACE_ATTACH` to PID
//! spin                         burn CPU until killed
//! ```
//!
//! Every process of `daemon … stay`, `setsid-sleep` and `kill-after` keeps the FIFO open
//! until it ends (the sleeper after writing `ready`): a reader that got the line sees the
//! end of file exactly when the last of them is gone, with no polling.

use std::io::Write;
use std::time::Duration;

/// Runs hostile command `cmd` with `args` (the words after it); `None` for a command this
/// module does not know. Returns the exit status.
pub fn dispatch(cmd: &str, args: &[String]) -> Option<i32> {
    let a = |i: usize| args.get(i).cloned().unwrap_or_default();
    Some(match cmd {
        "read" => {
            report(std::fs::read(a(0)).map(|b| format!("ok {}", String::from_utf8_lossy(&b))))
        }
        "head" => report(std::fs::File::open(a(0)).and_then(|mut f| {
            use std::io::Read;
            let mut b = [0u8; 512];
            let n = f.read(&mut b)?;
            Ok(format!("ok {n} bytes"))
        })),
        "umount" => {
            let c = std::ffi::CString::new(a(0)).unwrap_or_default();
            // SAFETY: a NUL-terminated path.
            let r = unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
            report(status(r == 0))
        }
        "open-tree" => open_tree(&a(0), &a(1)),
        "write" => report(
            std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(a(0))
                .and_then(|mut f| f.write_all(b"evil\n"))
                .map(|()| "ok".to_owned()),
        ),
        "list" => report(std::fs::read_dir(a(0)).map(|d| {
            let mut n: Vec<String> = d
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            n.sort();
            format!("ok {}", n.join(" "))
        })),
        "udp" => {
            let addr = format!("{}:{}", a(0), a(1));
            report(
                std::net::UdpSocket::bind("0.0.0.0:0")
                    .and_then(|s| s.send_to(b"x", addr.as_str()))
                    .map(|n| format!("ok sent {n}")),
            )
        }
        "tcp" => report(
            std::net::TcpStream::connect(format!("{}:{}", a(0), a(1))).map(|_| "ok".to_owned()),
        ),
        "resolve" => {
            use std::net::ToSocketAddrs;
            report(
                (a(0).as_str(), 53)
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
            report(status(r >= 0))
        }
        "unix-connect" => report(
            std::os::unix::net::UnixStream::connect(a(0))
                .and_then(|mut s| s.write_all(b"x"))
                .map(|()| "ok".to_owned()),
        ),
        "abstract" => {
            use std::os::linux::net::SocketAddrExt;
            report(
                std::os::unix::net::SocketAddr::from_abstract_name(a(0).as_bytes())
                    .and_then(|addr| std::os::unix::net::UnixStream::connect_addr(&addr))
                    .map(|_| "ok".to_owned()),
            )
        }
        "socketpair" => report(std::os::unix::net::UnixStream::pair().map(|_| "ok".to_owned())),
        "keyctl" => {
            // KEYCTL_GET_KEYRING_ID of the session keyring (KEY_SPEC_SESSION_KEYRING).
            // SAFETY: integer arguments only.
            let r = unsafe { libc::syscall(libc::SYS_keyctl, 0, -3i64, 0) };
            report(status(r >= 0))
        }
        "ptrace" => {
            // PTRACE_TRACEME.
            // SAFETY: integer arguments only.
            let r = unsafe { libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) };
            report(status(r == 0))
        }
        "marker" => {
            println!(
                "{}",
                if inside_non_owner_call() {
                    "inside"
                } else {
                    "outside"
                }
            );
            0
        }
        "detached-marker" => detached_marker(&a(0)),
        "daemon" => daemon(&a(1), true, a(2) == "stay"),
        "setsid-sleep" => daemon(&a(1), false, true),
        "kill-after" => {
            daemonise(&a(2), true);
            let line = kill_line(a(0).parse().unwrap_or(0));
            if let Ok(mut f) = std::fs::OpenOptions::new().write(true).open(a(2)) {
                // One write (atomic on a FIFO): `writeln!` on a `File` writes each piece,
                // and the daemon's `ready` could land between them.
                let _ = f.write_all(format!("kill: {line}\n").as_bytes());
                std::mem::forget(f);
            }
            println!("{line}");
            let _ = std::io::stdout().flush();
            sleep_forever()
        }
        "kill" => {
            let line = kill_line(a(0).parse().unwrap_or(0));
            println!("{line}");
            i32::from(line != "ok")
        }
        "fork-bomb" => fork_bomb(a(0).parse().unwrap_or(100)),
        "pid1" => {
            // SAFETY: getters that cannot fail.
            let (p, pp, u) = unsafe { (libc::getpid(), libc::getppid(), libc::getuid()) };
            println!("pid {p} ppid {pp} uid {u}");
            0
        }
        "mkdir" => report(std::fs::create_dir_all(a(0)).map(|()| "ok".to_owned())),
        "rename" => report(std::fs::rename(a(0), a(1)).map(|()| "ok".to_owned())),
        "remove" => report(
            std::fs::remove_dir_all(a(0))
                .or_else(|_| std::fs::remove_file(a(0)))
                .map(|()| "ok".to_owned()),
        ),
        "tmp-hold" => {
            if let Err(e) = std::fs::write(a(0), "hcp-test-secret-in-flight") {
                println!("denied {}", errno_name(&e));
                return Some(1);
            }
            tell_and_hold(&a(1));
            sleep_forever()
        }
        "fill" => fill(&a(0), a(1).parse().unwrap_or(1 << 30)),
        "sched-fifo" => {
            let p = libc::sched_param { sched_priority: 50 };
            // SAFETY: a parameter struct on the stack.
            let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &raw const p) };
            report(status(r == 0))
        }
        "nice-down" => {
            // SAFETY: integers only; errno tells a failure from a result of -1.
            let r = unsafe {
                *libc::__errno_location() = 0;
                libc::nice(-1)
            };
            report(status(
                r != -1 || std::io::Error::last_os_error().raw_os_error() == Some(0),
            ))
        }
        "mem-hog" => mem_hog(a(0).parse().unwrap_or(1), a(1).parse().unwrap_or(1 << 20)),
        "tcp-echo" => report(
            std::net::TcpStream::connect(format!("{}:{}", a(0), a(1))).and_then(|mut s| {
                use std::io::BufRead;
                s.write_all(format!("{}\n", a(2)).as_bytes())?;
                let mut line = String::new();
                std::io::BufReader::new(s).read_line(&mut line)?;
                Ok(format!("ok {}", line.trim_end()))
            }),
        ),
        "shm-list" => report(
            std::fs::read_to_string("/proc/sysvipc/shm")
                .map(|t| format!("ok {}", t.lines().skip(1).count())),
        ),
        "euid" => {
            // SAFETY: a getter that cannot fail.
            println!("euid {}", unsafe { libc::geteuid() });
            0
        }
        _ => return wall(cmd, args),
    })
}

/// The commands of the hostile review of the wall (a call trying to leave or undo its view).
fn wall(cmd: &str, args: &[String]) -> Option<i32> {
    let a = |i: usize| args.get(i).cloned().unwrap_or_default();
    let c = |s: &str| std::ffi::CString::new(s).unwrap_or_default();
    Some(match cmd {
        // SAFETY (each arm): system calls with integers, NUL-terminated paths and buffers
        // on this stack; a child made here only calls `_exit`.
        "unshare-user" => report(status(unsafe { libc::unshare(libc::CLONE_NEWUSER) } == 0)),
        "clone-user" => {
            let flags = (libc::CLONE_NEWUSER | libc::SIGCHLD) as libc::c_ulong;
            let pid =
                unsafe { libc::syscall(libc::SYS_clone, flags, 0usize, 0usize, 0usize, 0usize) };
            if pid == 0 {
                unsafe { libc::_exit(0) };
            }
            if pid > 0 {
                unsafe { libc::waitpid(pid as i32, std::ptr::null_mut(), 0) };
            }
            report(status(pid > 0))
        }
        "clone3" => {
            let mut args = [0u64; 11];
            args[4] = libc::SIGCHLD as u64; // exit_signal
            let pid = unsafe { libc::syscall(libc::SYS_clone3, args.as_mut_ptr(), 88usize) };
            if pid == 0 {
                unsafe { libc::_exit(0) };
            }
            if pid > 0 {
                unsafe { libc::waitpid(pid as i32, std::ptr::null_mut(), 0) };
            }
            report(status(pid > 0))
        }
        "userns-undo" => userns_undo(&a(0)),
        "setns-mnt" => {
            let fd = unsafe { libc::open(c"/proc/self/ns/mnt".as_ptr(), libc::O_RDONLY) };
            report(status(
                fd >= 0 && unsafe { libc::setns(fd, libc::CLONE_NEWNS) } == 0,
            ))
        }
        "mount-tmpfs" => {
            let dir = c(&a(0));
            let r = unsafe {
                libc::mount(
                    c"tmpfs".as_ptr(),
                    dir.as_ptr(),
                    c"tmpfs".as_ptr(),
                    0,
                    std::ptr::null(),
                )
            };
            report(status(r == 0))
        }
        "handle" => {
            // struct file_handle with room for 128 bytes of handle.
            let mut h = [0u32; 34];
            h[0] = 128;
            let mut mount_id = 0i32;
            let p = c(&a(0));
            let r = unsafe {
                libc::syscall(
                    libc::SYS_name_to_handle_at,
                    libc::AT_FDCWD,
                    p.as_ptr(),
                    h.as_mut_ptr(),
                    &raw mut mount_id,
                    0,
                )
            };
            if r != 0 {
                return Some(report(Err(std::io::Error::last_os_error())));
            }
            let root = unsafe { libc::open(c"/".as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY) };
            let fd = unsafe {
                libc::syscall(
                    libc::SYS_open_by_handle_at,
                    root,
                    h.as_mut_ptr(),
                    libc::O_RDONLY,
                )
            };
            report(status(fd >= 0))
        }
        "ptrace-attach" => {
            let pid: libc::pid_t = a(0).parse().unwrap_or(1);
            let r = unsafe { libc::ptrace(libc::PTRACE_ATTACH, pid, 0, 0) };
            report(status(r == 0))
        }
        "spin" => {
            let mut x = 0u64;
            loop {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        }
        _ => return None,
    })
}

/// `userns-undo`: a user and a mount namespace of the call's own, then every way out of the
/// view it inherited that such a namespace might open (see the module docs). Exits 0 when
/// the namespaces were had (each attempt says what it got), 1 when they were refused.
fn userns_undo(covered: &str) -> i32 {
    // SAFETY: integers only.
    if unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) } != 0 {
        return report(Err(std::io::Error::last_os_error()));
    }
    // SAFETY: a getter that cannot fail.
    let uid = unsafe { libc::geteuid() };
    let _ = std::fs::write("/proc/self/setgroups", "deny");
    let maps = std::fs::write("/proc/self/uid_map", format!("0 {uid} 1"));
    println!(
        "ok unshared, uid map {}",
        line(maps.map(|()| String::new()))
    );
    let cov = std::ffi::CString::new(covered).unwrap_or_default();
    // SAFETY (below): NUL-terminated paths, structs on this stack.
    let r = unsafe { libc::umount2(cov.as_ptr(), libc::MNT_DETACH) };
    println!("umount {}", line(status(r == 0)));
    let parent = std::path::Path::new(covered)
        .parent()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let name = std::path::Path::new(covered)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    println!("open-tree {}", open_tree_line(&parent, &name));
    let attr = [0u64, 1, 0, 0]; // attr_set 0, attr_clr MOUNT_ATTR_RDONLY
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            c"/usr".as_ptr(),
            0u32,
            attr.as_ptr(),
            32usize,
        )
    };
    println!("usr-writable {}", line(status(r == 0)));
    let _ = std::fs::create_dir_all("/tmp/newproc");
    let r = unsafe {
        libc::mount(
            c"proc".as_ptr(),
            c"/tmp/newproc".as_ptr(),
            c"proc".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    println!("proc {}", line(status(r == 0)));
    println!(
        "read {}",
        line(std::fs::read(covered).map(|b| format!("ok {} bytes", b.len())))
    );
    0
}

/// `open-tree`'s line for DIR and REL.
fn open_tree_line(dir: &str, rel: &str) -> String {
    let c = std::ffi::CString::new(dir).unwrap_or_default();
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
        return line(Err(std::io::Error::last_os_error()));
    }
    let rel = std::ffi::CString::new(rel).unwrap_or_default();
    // SAFETY: a descriptor we hold and a NUL-terminated relative path.
    let f = unsafe { libc::openat(fd as i32, rel.as_ptr(), libc::O_RDONLY) };
    line(status(f >= 0).map(|_| "ok opened".to_owned()))
}

/// `ok …` or `denied ERRNO` without printing.
fn line(r: std::io::Result<String>) -> String {
    match r {
        Ok(s) if s.is_empty() => "ok".to_owned(),
        Ok(s) => s,
        Err(e) => format!("denied {}", errno_name(&e)),
    }
}

/// Whether this process descends from a non-owner call: hcp's seccomp marker answers
/// `prctl(0x48435000, 0x6863702d)` with `EKEYREJECTED` (as `hcp_adapter::inside_non_owner_call`).
fn inside_non_owner_call() -> bool {
    // SAFETY: prctl with integer arguments only.
    let r = unsafe { libc::prctl(0x4843_5000, 0x6863_702d_u64, 0, 0, 0) };
    r == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EKEYREJECTED)
}

fn status(ok: bool) -> std::io::Result<String> {
    if ok {
        Ok("ok".to_owned())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn kill_line(pid: i32) -> String {
    // SAFETY: integers only.
    let r = unsafe { libc::kill(pid, libc::SIGKILL) };
    match status(r == 0) {
        Ok(s) => s,
        Err(e) => format!("denied {}", errno_name(&e)),
    }
}

fn open_tree(dir: &str, rel: &str) -> i32 {
    // A detached, non-recursive clone of the mount holding DIR, then REL read through
    // it: what lies under a covering mount would show.
    let c = std::ffi::CString::new(dir).unwrap_or_default();
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
        return report(Err(std::io::Error::last_os_error()));
    }
    let rel = std::ffi::CString::new(rel).unwrap_or_default();
    // SAFETY: a descriptor we hold and a NUL-terminated relative path.
    let f = unsafe { libc::openat(fd as i32, rel.as_ptr(), libc::O_RDONLY) };
    report(if f >= 0 {
        Ok("ok opened".to_owned())
    } else {
        Err(std::io::Error::last_os_error())
    })
}

/// Writes `path` in 1 MiB pieces until `max` bytes or an error; prints `wrote N` and the
/// error's name (`ENOSPC`, `EFBIG` …) or `done`.
fn fill(path: &str, max: u64) -> i32 {
    let mut f = match std::fs::File::create(path) {
        Ok(f) => f,
        Err(e) => {
            println!("denied {}", errno_name(&e));
            return 1;
        }
    };
    let piece = vec![b'x'; 1 << 20];
    let mut wrote = 0u64;
    while wrote < max {
        match f.write(&piece) {
            Ok(0) => break,
            Ok(n) => wrote += n as u64,
            Err(e) => {
                println!("wrote {wrote} {}", errno_name(&e));
                return 1;
            }
        }
    }
    println!("wrote {wrote} done");
    0
}

/// Forks `n` children that each touch `bytes` of fresh memory and sleep a moment; `ok`
/// when every child exited 0, else `killed K` (how many did not).
fn mem_hog(n: usize, bytes: usize) -> i32 {
    let mut pids = Vec::new();
    for _ in 0..n {
        let pid = fork();
        if pid == 0 {
            let mut v = vec![0u8; bytes];
            for i in (0..v.len()).step_by(4096) {
                v[i] = 1;
            }
            std::thread::sleep(Duration::from_millis(300));
            std::hint::black_box(&v);
            // SAFETY: ends the child without running the parent's exit handlers.
            unsafe { libc::_exit(0) };
        }
        if pid > 0 {
            pids.push(pid);
        }
    }
    let mut killed = 0;
    for p in pids {
        let mut st = 0;
        // SAFETY: waitpid on our own child writes into a local.
        unsafe { libc::waitpid(p, &raw mut st, 0) };
        if !(libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0) {
            killed += 1;
        }
    }
    if killed == 0 {
        println!("ok");
        0
    } else {
        println!("killed {killed}");
        1
    }
}

/// `EACCES`, `EPERM` …: the name of an OS error, for `denied …` lines.
pub fn errno_name(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EACCES) => "EACCES".into(),
        Some(libc::EPERM) => "EPERM".into(),
        Some(libc::ENOENT) => "ENOENT".into(),
        Some(libc::EROFS) => "EROFS".into(),
        Some(libc::ENOSYS) => "ENOSYS".into(),
        Some(libc::EINVAL) => "EINVAL".into(),
        Some(libc::EAGAIN) => "EAGAIN".into(),
        Some(libc::ESRCH) => "ESRCH".into(),
        Some(libc::ENXIO) => "ENXIO".into(),
        Some(libc::ECONNREFUSED) => "ECONNREFUSED".into(),
        Some(libc::EAFNOSUPPORT) => "EAFNOSUPPORT".into(),
        Some(libc::ENOSPC) => "ENOSPC".into(),
        Some(libc::EBUSY) => "EBUSY".into(),
        Some(libc::EEXIST) => "EEXIST".into(),
        Some(libc::EXDEV) => "EXDEV".into(),
        Some(libc::EFBIG) => "EFBIG".into(),
        Some(libc::ELOOP) => "ELOOP".into(),
        Some(libc::ENETUNREACH) => "ENETUNREACH".into(),
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
    report(status(fd >= 0))
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

/// Writes `ready` to the FIFO (opening it waits for the reader) and keeps it open for the
/// rest of this process's life.
fn tell_and_hold(fifo: &str) {
    if let Ok(mut f) = std::fs::OpenOptions::new().write(true).open(fifo) {
        let _ = f.write_all(b"ready\n");
        std::mem::forget(f);
    }
}

/// Opens the FIFO for writing (waits for the reader) and keeps it open for the rest of
/// this process's life, writing nothing.
fn hold(fifo: &str) {
    if let Ok(f) = std::fs::OpenOptions::new().write(true).open(fifo) {
        std::mem::forget(f);
    }
}

/// Forks the sleeper of `daemon` (setsid, then with `double_fork` one more fork whose
/// parent exits) and reaps the first child; returns in the calling process.
fn daemonise(fifo: &str, double_fork: bool) {
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
                tell_and_hold(fifo);
                sleep_forever();
            }
            hold(fifo);
            sleep_forever();
        }
        tell_and_hold(fifo);
        sleep_forever();
    }
    if double_fork {
        let mut st = 0;
        // SAFETY: reaps the first child (the intermediate exits at once).
        unsafe { libc::wait(&mut st) };
    }
}

fn daemon(fifo: &str, double_fork: bool, stay: bool) -> i32 {
    daemonise(fifo, double_fork);
    println!("ok daemonised");
    let _ = std::io::stdout().flush();
    if stay {
        hold(fifo);
        sleep_forever()
    }
    0
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
        let args: Vec<String> = std::env::args().collect();
        let again: Vec<&str> = if args.get(1).map(String::as_str) == Some("try") {
            vec!["try", "marker"]
        } else {
            vec!["marker"]
        };
        let answer = std::fs::OpenOptions::new()
            .write(true)
            .open(fifo)
            .and_then(|f| {
                std::process::Command::new("/proc/self/exe")
                    .args(again)
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
