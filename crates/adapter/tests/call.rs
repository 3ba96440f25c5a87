//! The confinement of every call ([`hcp_adapter::Confinement::for_call`], RUNTIME §4, §5
//! "Confinement of every land"), driven as `hcp exec` drives it: a driver process
//! (`hcp-confine-probe drive`) confines a hostile child (`hcp-confine-probe …`) and
//! prints the outcome. Each test runs as the current user and, when that is root, again
//! as `nobody` (`setpriv`), with a world (fake home, store, sandboxes) that user owns.
//!
//! Where the kernel lacks a mechanism the test prints `skipped: <reason>` and passes,
//! except under `CI=true`, where it fails. No test sleeps to synchronise: readiness comes
//! through a FIFO, the end of a process through `/proc` with a deadline.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const PROBE: &str = env!("CARGO_BIN_EXE_hcp-confine-probe");
const SECRET: &str = "hcp-test-secret-4f1c";

#[path = "../../hcp/tests/common/skip.rs"]
mod skip;

/// A skip the plain `cargo test` run shows, a failure under `CI=true`.
fn skip_or_fail(reason: &str) {
    skip::skip(reason);
}

/// Who runs the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum User {
    Me,
    Nobody,
}

fn root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The users each test runs as: the current one, and `nobody` as well when that is root.
fn users() -> Vec<User> {
    if root() {
        if Path::new("/usr/bin/setpriv").exists() {
            return vec![User::Me, User::Nobody];
        }
        skip_or_fail("running as root and `setpriv` is missing: not testing as an ordinary user");
    }
    vec![User::Me]
}

/// A world: a home with secrets, a store, another principal's sandbox, the sandbox,
/// the private temporary directory (with a FIFO), all owned by the user who runs.
struct World {
    _root: tempfile::TempDir,
    r: PathBuf,
    user: User,
}

impl World {
    fn new(user: User) -> Self {
        let root = tempfile::Builder::new()
            .prefix("hcp-call-")
            .tempdir_in("/tmp")
            .unwrap();
        let r = root.path().canonicalize().unwrap();
        for d in [
            "home/.ssh",
            "home/.aws",
            "home/.config",
            "hcp/state/bindings/agent",
            "hcp/state/sessions",
            "hcp/audit",
            "hcp/packs/p",
            "other",
            "work",
            "tmp",
            "granted-w",
            "granted-r",
            "protected",
            "hcp-exec-999999-other",
        ] {
            std::fs::create_dir_all(r.join(d)).unwrap();
        }
        for (f, text) in [
            ("home/.ssh/id_ed25519", SECRET),
            ("home/.aws/credentials", SECRET),
            ("home/.bashrc", "# rc\n"),
            ("home/.config/app", "conf"),
            ("hcp/state/bindings/agent/mail.json", SECRET),
            ("hcp/state/sessions/s.json", SECRET),
            ("hcp/audit/secret", SECRET),
            ("hcp/packs/p/surface.json", "{}"),
            ("other/notes", SECRET),
            ("protected/data", SECRET),
            ("granted-r/data", "granted"),
            ("hcp-exec-999999-other/in-flight", SECRET),
        ] {
            std::fs::write(r.join(f), text).unwrap();
        }
        let fifo = CString::new(r.join("tmp/ready").as_os_str().as_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&r, std::fs::Permissions::from_mode(0o755)).unwrap();
        if user == User::Nobody {
            let st = Command::new("chown")
                .args(["-R", "65534:65534"])
                .arg(&r)
                .status()
                .unwrap();
            assert!(st.success());
        }
        Self {
            _root: root,
            r,
            user,
        }
    }

    fn p(&self, rel: &str) -> String {
        self.r.join(rel).display().to_string()
    }

    /// Runs the driver: `opts` before the world's, then the probe with `probe_args`.
    fn drive(&self, land: &str, opts: &[&str], probe_args: &[&str]) -> Value {
        let out = self.driver(land, opts, probe_args).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        serde_json::from_str(text.trim()).unwrap_or_else(|e| {
            panic!(
                "driver said {text:?} ({e}), stderr {:?}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
    }

    fn driver(&self, land: &str, opts: &[&str], probe_args: &[&str]) -> Command {
        let mut c = if self.user == User::Nobody {
            let mut c = Command::new("/usr/bin/setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups", PROBE]);
            c
        } else {
            Command::new(PROBE)
        };
        c.args(["drive", "--land", land]);
        c.args(opts);
        for (k, v) in [
            ("--tmp", "tmp"),
            ("--home", "home"),
            ("--hcp-home", "hcp"),
            ("--workdir", "work"),
            ("--other", "other"),
        ] {
            c.arg(k).arg(self.p(v));
        }
        c.arg("--").arg(PROBE).args(probe_args);
        c
    }

    /// Reads one line from the FIFO (blocks until a writer writes it; a sleeper keeps the
    /// FIFO open after), on a thread, with a deadline.
    fn await_fifo(&self, deadline: Duration) -> Option<String> {
        use std::io::BufRead;
        let path = self.r.join("tmp/ready");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            // An end of file before any line is a writer of an earlier call that was
            // still closing (a dying process leaves /proc's view of it before it closes
            // its files): open again for the writer awaited.
            let mut line = String::new();
            while line.is_empty() {
                let Ok(f) = std::fs::File::open(&path) else {
                    break;
                };
                let _ = std::io::BufReader::new(f).read_line(&mut line);
            }
            let _ = tx.send(line);
        });
        rx.recv_timeout(deadline).ok()
    }
}

fn stdout(v: &Value) -> String {
    v["stdout"].as_str().unwrap_or_default().to_owned()
}

/// The probe was refused (its `denied …` line) and printed no secret.
fn assert_denied(v: &Value, what: &str) {
    let out = stdout(v);
    assert!(
        out.starts_with("denied") && v["exit_code"] == 1,
        "{what}: {v}"
    );
    assert!(!out.contains(SECRET), "{what}: {v}");
}

/// The probe succeeded.
fn assert_ok(v: &Value, what: &str) {
    assert!(
        stdout(v).starts_with("ok") && v["exit_code"] == 0,
        "{what}: {v}"
    );
}

/// Live (not zombie) processes whose command line holds `token`.
fn live_with(token: &str) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            let p = e.path();
            std::fs::read(p.join("cmdline"))
                .is_ok_and(|c| c.windows(token.len()).any(|w| w == token.as_bytes()))
                && std::fs::read_to_string(p.join("stat")).is_ok_and(|s| {
                    s.rsplit_once(')')
                        .and_then(|(_, r)| r.split_whitespace().next())
                        .is_some_and(|st| st != "Z" && st != "X")
                })
        })
        .count()
}

/// Waits (bounded) until no process holds `token`; returns how long it took.
fn gone_within(token: &str, limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if live_with(token) == 0 {
            return Some(start.elapsed());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    None
}

fn token(name: &str) -> String {
    format!("hcp-token-{name}-{}-{}", std::process::id(), rand_suffix())
}

fn rand_suffix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos()
        .into()
}

fn pid_namespace_or_skip(v: &Value) -> bool {
    if v["pid_namespace"] != true {
        skip_or_fail(&format!(
            "no pid namespace for this user: {}",
            v["sandbox"]["processes"]
        ));
        return false;
    }
    true
}

#[test]
fn a_personal_or_brain_child_reads_no_secret_and_no_store() {
    for user in users() {
        let w = World::new(user);
        for land in ["personal", "brain"] {
            for path in [
                "home/.ssh/id_ed25519",
                "home/.aws/credentials",
                "hcp/state/bindings/agent/mail.json",
                "hcp/state/sessions/s.json",
                "hcp/audit/secret",
                "other/notes",
                "hcp-exec-999999-other/in-flight",
            ] {
                let v = w.drive(land, &["--agent"], &["read", &w.p(path)]);
                assert_denied(&v, &format!("{user:?} {land} read {path}"));
                assert_eq!(v["sandbox"]["filesystem"], "enforced", "{v}");
            }
            // Undoing the cover, or reaching beneath it through a detached clone.
            let v = w.drive(land, &["--agent"], &["umount", &w.p("home/.ssh")]);
            assert_denied(&v, "umount a cover");
            let v = w.drive(
                land,
                &["--agent"],
                &["open-tree", &w.p("home"), ".ssh/id_ed25519"],
            );
            assert_denied(&v, "open_tree beneath a cover");
            let v = w.drive(land, &["--agent"], &["list", &w.p("home/.ssh")]);
            assert!(!stdout(&v).contains("id_ed25519"), "{v}");
            // /etc/shadow: hidden (root), or kept out by its permission bits.
            let v = w.drive(land, &["--agent"], &["read", "/etc/shadow"]);
            assert!(!stdout(&v).contains("root:"), "{user:?} {land}: {v}");
            // Raw disks (root reads them by its permission bits, and the hidden files with
            // them).
            for dev in hcp_adapter::block_devices() {
                let v = w.drive(land, &["--agent"], &["head", &dev.display().to_string()]);
                assert_denied(&v, &format!("{user:?} {land} read {}", dev.display()));
            }
            // The rest of the user's files read as usual.
            let v = w.drive(land, &["--agent"], &["read", &w.p("home/.bashrc")]);
            assert_ok(&v, "read ~/.bashrc");
        }
    }
}

#[test]
fn a_personal_child_writes_only_its_tmpdir_and_the_granted_paths() {
    for user in users() {
        let w = World::new(user);
        for path in [
            "home/.bashrc",
            "home/.ssh/authorized_keys",
            "hcp/state/grants.json",
            "work/x",
        ] {
            let v = w.drive("personal", &["--agent"], &["write", &w.p(path)]);
            assert_denied(&v, &format!("{user:?} write {path}"));
        }
        assert_eq!(
            std::fs::read_to_string(w.r.join("home/.bashrc")).unwrap(),
            "# rc\n"
        );
        assert!(!w.r.join("hcp/state/grants.json").exists());
        let v = w.drive("personal", &["--agent"], &["write", &w.p("tmp/out")]);
        assert_ok(&v, "write TMPDIR");
        let grant = ["--agent", "--write", &w.p("granted-w")];
        let v = w.drive("personal", &grant, &["write", &w.p("granted-w/f")]);
        assert_ok(&v, "write a granted path");
    }
}

#[test]
fn operator_paths_are_hidden_and_read_grants_reveal() {
    for user in users() {
        let w = World::new(user);
        let prot = w.p("protected");
        let v = w.drive(
            "personal",
            &["--agent", "--protect", &prot],
            &["read", &w.p("protected/data")],
        );
        assert_denied(&v, "sandbox.protect");
        // A pack granted `~/.aws` reads it; its siblings stay hidden.
        let aws = w.p("home/.aws");
        let v = w.drive(
            "personal",
            &["--agent", "--read", &aws],
            &["read", &w.p("home/.aws/credentials")],
        );
        assert_ok(&v, "read grant of ~/.aws");
        let v = w.drive(
            "personal",
            &["--agent", "--read", &aws],
            &["read", &w.p("home/.ssh/id_ed25519")],
        );
        assert_denied(&v, "~/.ssh beside a read grant");
    }
}

#[test]
fn daemon_sockets_are_out_of_reach_even_with_network_allowed() {
    for user in users() {
        let w = World::new(user);
        // An agent socket in its own directory (ssh-agent, the session bus) and one
        // alone, both protected as the runtime protects what `session_sockets` names.
        let in_dir = w.r.join("protected/agent.sock");
        let alone = w.r.join("bus.sock");
        let _a = std::os::unix::net::UnixListener::bind(&in_dir).unwrap();
        let _b = std::os::unix::net::UnixListener::bind(&alone).unwrap();
        if user == User::Nobody {
            Command::new("chown")
                .arg("65534")
                .arg(&in_dir)
                .arg(&alone)
                .status()
                .unwrap();
        }
        let opts = [
            "--agent",
            "--protect",
            &w.p("protected"),
            "--protect",
            &w.p("bus.sock"),
        ];
        for sock in [&in_dir, &alone] {
            let v = w.drive(
                "personal",
                &opts,
                &["unix-connect", &sock.display().to_string()],
            );
            assert_denied(&v, &format!("{user:?} connect {}", sock.display()));
            assert_eq!(v["sandbox"]["network"], "allowed");
        }
        // Unprotected, the same socket is reachable (network allowed).
        let v = w.drive(
            "personal",
            &["--agent"],
            &["unix-connect", &alone.display().to_string()],
        );
        assert_ok(&v, "an unprotected socket");
    }
}

#[test]
fn the_bootstrap_pack_reads_the_store_but_not_its_credentials() {
    for user in users() {
        let w = World::new(user);
        let hide = [
            "--agent",
            "--bootstrap-hide",
            &w.p("hcp/state/bindings"),
            "--bootstrap-hide",
            &w.p("hcp/audit/secret"),
        ];
        let v = w.drive(
            "personal",
            &hide,
            &["read", &w.p("hcp/packs/p/surface.json")],
        );
        assert_ok(&v, "bootstrap reads the store");
        for path in ["hcp/state/bindings/agent/mail.json", "hcp/audit/secret"] {
            let v = w.drive("personal", &hide, &["read", &w.p(path)]);
            assert_denied(&v, path);
        }
        let v = w.drive(
            "personal",
            &hide,
            &["write", &w.p("hcp/packs/p/surface.json")],
        );
        assert_denied(&v, "bootstrap writes the store");
    }
}

#[test]
fn a_local_child_reaches_neither_store_nor_system_secrets() {
    for user in users() {
        let w = World::new(user);
        for path in ["hcp/state/sessions/s.json", "home/.ssh/id_ed25519"] {
            let v = w.drive("local", &["--agent"], &["read", &w.p(path)]);
            assert_denied(&v, path);
        }
        let v = w.drive("local", &["--agent"], &["read", "/etc/shadow"]);
        assert!(!stdout(&v).contains("root:"), "{user:?}: {v}");
        let v = w.drive("local", &["--agent"], &["write", &w.p("work/out")]);
        assert_ok(&v, "write the sandbox");
        assert_eq!(
            v["sandbox"]["network"], "enforced",
            "local defaults to deny: {v}"
        );
    }
}

#[test]
fn the_nested_call_marker_survives_setsid_double_fork_env_and_a_dead_parent() {
    for user in users() {
        let w = World::new(user);
        let v = w.drive("personal", &["--agent"], &["marker"]);
        assert_eq!(stdout(&v), "inside\n", "{v}");
        let v = w.drive("personal", &[], &["marker"]);
        assert_eq!(stdout(&v), "outside\n", "the owner's call: {v}");
        // setsid, double fork, the parent gone, a fresh program with no environment.
        let fifo = w.p("tmp/ready");
        let mut call = w
            .driver(
                "personal",
                &["--agent", "--timeout-ms", "1500"],
                &["detached-marker", &fifo],
            )
            .spawn()
            .unwrap();
        let answer = w.await_fifo(Duration::from_secs(5));
        let _ = call.wait();
        assert_eq!(answer.as_deref(), Some("inside\n"), "{user:?}");
    }
}

#[test]
fn no_descendant_outlives_the_call() {
    for user in users() {
        let w = World::new(user);
        let fifo = w.p("tmp/ready");
        // A double-forked daemon: the call's child exits at once.
        let t = token("daemon");
        let v = w.drive("personal", &["--agent"], &["daemon", &t, &fifo]);
        let _ = w.await_fifo(Duration::from_millis(200));
        assert_ok(&v, "daemon");
        assert!(
            gone_within(&t, Duration::from_secs(1)).is_some(),
            "{user:?}: daemon {t} survived the call"
        );
        // A setsid'd sleeper, ended by the timeout.
        let t = token("setsid");
        let v = w.drive(
            "personal",
            &["--agent", "--timeout-ms", "300"],
            &["setsid-sleep", &t, "/dev/null"],
        );
        assert_eq!(v["timed_out"], true, "{v}");
        assert!(
            gone_within(&t, Duration::from_secs(1)).is_some(),
            "{user:?}: setsid sleeper {t} survived"
        );
    }
}

#[test]
fn a_killed_driver_takes_every_descendant_with_it() {
    for user in users() {
        let w = World::new(user);
        let probe = w.drive("personal", &["--agent"], &["pid1"]);
        if !pid_namespace_or_skip(&probe) {
            continue;
        }
        for how in ["daemon", "setsid-sleep"] {
            let t = token(how);
            let mut driver = w
                .driver(
                    "personal",
                    &["--agent", "--timeout-ms", "20000"],
                    &[how, &t, &w.p("tmp/ready"), "stay"],
                )
                .spawn()
                .unwrap();
            let ready = w.await_fifo(Duration::from_secs(10));
            assert_eq!(ready.as_deref(), Some("ready\n"), "{user:?} {how}");
            assert!(live_with(&t) >= 1);
            // SAFETY: integers only; the driver is our child.
            unsafe { libc::kill(driver.id() as i32, libc::SIGKILL) };
            let _ = driver.wait();
            let took = gone_within(&t, Duration::from_secs(1));
            assert!(
                took.is_some(),
                "{user:?} {how}: {t} outlived a killed driver by a second"
            );
        }
    }
}

#[test]
fn the_child_cannot_kill_outside_its_call() {
    for user in users() {
        let w = World::new(user);
        let me = std::process::id().to_string();
        let v = w.drive("personal", &["--agent"], &["kill", &me]);
        assert_denied(&v, "kill the test process");
    }
}

#[test]
fn network_deny_is_total() {
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let udp_port = udp.local_addr().unwrap().port().to_string();
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let tcp_port = tcp.local_addr().unwrap().port().to_string();
    for user in users() {
        let w = World::new(user);
        let sock = w.r.join("outside.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        if user == User::Nobody {
            Command::new("chown")
                .arg("65534")
                .arg(&sock)
                .status()
                .unwrap();
        }
        let name = format!("hcp-test-{}", std::process::id());
        let _abs = {
            use std::os::linux::net::SocketAddrExt;
            let a = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
            std::os::unix::net::UnixListener::bind_addr(&a).unwrap()
        };
        let sockp = sock.display().to_string();
        let attempts: Vec<Vec<&str>> = vec![
            vec!["udp", "127.0.0.1", &udp_port],
            vec!["udp", "127.0.0.1", "53"],
            vec!["tcp", "127.0.0.1", &tcp_port],
            vec!["resolve", "hcp-test.invalid"],
            vec!["raw"],
            vec!["netlink"],
            vec!["packet"],
            vec!["vsock"],
            vec!["inet6"],
            vec!["io-uring"],
            vec!["unix-connect", &sockp],
            vec!["abstract", &name],
        ];
        for land in ["local", "personal"] {
            for a in &attempts {
                let v = w.drive(land, &["--agent", "--deny"], a);
                assert_ne!(v["exit_code"], 0, "{user:?} {land} {a:?}: {v}");
                assert_eq!(v["sandbox"]["network"], "enforced");
            }
            let v = w.drive(land, &["--agent", "--deny"], &["socketpair"]);
            assert_ok(&v, "socketpair under deny");
        }
        // Allowed (personal's default): TCP and UDP work; abstract sockets made outside
        // the call stay out of reach (Landlock scope).
        let v = w.drive("personal", &["--agent"], &["tcp", "127.0.0.1", &tcp_port]);
        assert_ok(&v, "tcp allowed");
        assert_eq!(v["sandbox"]["network"], "allowed");
        if hcp_adapter::LandlockSupport::probe().abi() >= hcp_adapter::SCOPE_LANDLOCK_ABI {
            let v = w.drive("personal", &["--agent"], &["abstract", &name]);
            assert_denied(&v, "abstract socket outside the call");
        } else {
            skip_or_fail("abstract socket scoping needs landlock abi 6");
        }
    }
}

#[test]
fn a_fork_bomb_is_bounded_with_processes_and_ended_without() {
    for user in users() {
        let w = World::new(user);
        let probe = w.drive(
            "personal",
            &["--agent", "--processes", "30"],
            &["fork-bomb", "200"],
        );
        if user == User::Me && root() && probe["sandbox"]["processes"] != "enforced" {
            skip_or_fail(&format!("as root: {}", probe["sandbox"]["processes"]));
            continue;
        }
        let out = stdout(&probe);
        let made: usize = out
            .split_whitespace()
            .nth(1)
            .and_then(|n| n.parse().ok())
            .unwrap_or(999);
        if user == User::Nobody {
            // RLIMIT_NPROC counts every process of `nobody`, so the bound is at most 30.
            assert!(made < 30, "{user:?}: {out}");
        } else {
            assert!(made < 30, "{user:?}: {out}");
        }
        assert!(out.contains("EAGAIN"), "{out}");
        // Without a tight `processes` the bomb forks what it asks and is ended with
        // the call.
        let v = w.drive("personal", &["--agent"], &["fork-bomb", "100"]);
        assert!(stdout(&v).starts_with("forked 100 all"), "{v}");
    }
}

#[test]
fn init_of_the_pid_namespace_is_still_ended_on_timeout() {
    for user in users() {
        let w = World::new(user);
        let v = w.drive(
            "personal",
            &["--agent", "--timeout-ms", "200"],
            &["setsid-sleep", &token("t"), "/dev/null"],
        );
        assert_eq!(v["timed_out"], true, "{v}");
        assert_eq!(v["signal"], libc::SIGKILL, "{v}");
    }
}

#[test]
fn programs_run_in_the_namespaces_as_their_user() {
    for user in users() {
        let w = World::new(user);
        let v = w.drive("personal", &["--agent"], &["pid1"]);
        let uid = if user == User::Nobody {
            65534
        } else {
            // SAFETY: getuid cannot fail.
            unsafe { libc::getuid() }
        };
        assert!(stdout(&v).ends_with(&format!("uid {uid}\n")), "{v}");
        if v["pid_namespace"] == true {
            assert!(stdout(&v).starts_with("pid 1 "), "{v}");
            // Its /proc is its namespace's: no other process's command line.
            let v = w.drive("personal", &["--agent"], &["list", "/proc"]);
            let pids = stdout(&v)
                .split_whitespace()
                .filter(|n| n.parse::<u32>().is_ok())
                .count();
            assert!(pids <= 2, "{user:?}: {v}");
        }
        // git's ownership check (`safe.directory`) passes in the user namespace.
        let Some(git) = ["/usr/bin/git", "/usr/local/bin/git"]
            .into_iter()
            .find(|p| Path::new(p).exists())
        else {
            skip_or_fail("no git on this machine");
            continue;
        };
        let repo = w.r.join("work");
        let init = Command::new(git)
            .args(["init", "-q"])
            .arg(&repo)
            .status()
            .unwrap();
        assert!(init.success());
        if user == User::Nobody {
            Command::new("chown")
                .args(["-R", "65534:65534"])
                .arg(&repo)
                .status()
                .unwrap();
        }
        let out = w
            .driver_program("local", &["--agent"], git, &["status", "--porcelain"])
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["exit_code"], 0, "{user:?}: {v}");
    }
}

impl World {
    fn driver_program(&self, land: &str, opts: &[&str], program: &str, args: &[&str]) -> Command {
        let mut c = self.driver(land, opts, &[]);
        // Replace the probe with `program`: rebuild the command line.
        let mut argv: Vec<std::ffi::OsString> = c.get_args().map(ToOwned::to_owned).collect();
        argv.pop(); // PROBE
        let mut n = Command::new(c.get_program());
        n.args(argv).arg(program).args(args);
        let _ = &mut c;
        n
    }
}

#[test]
fn without_namespaces_the_landlock_complement_hides_the_same_paths() {
    use hcp_adapter::{
        CallPolicy, CallSandbox, ChildEnv, Confinement, Invocation, KernelSupport, Limits,
        ProcessMechanism, ResourceLimits, pin_bin, run, verify_bin,
    };
    let w = World::new(User::Me);
    let mut support = KernelSupport::probe();
    if support.landlock.abi() == 0 {
        skip_or_fail("no landlock");
        return;
    }
    support.processes = ProcessMechanism::Subreaper("as if the kernel had no namespaces".into());
    support.pids_cgroup = Ok(None);
    let bin = verify_bin(&pin_bin(Path::new(PROBE)).unwrap()).unwrap();
    let (home, hcp, work, tmp) = (
        w.r.join("home"),
        w.r.join("hcp"),
        w.r.join("work"),
        w.r.join("tmp"),
    );
    let homes = [home];
    let call = CallSandbox {
        land: hcp_model::Land::Personal,
        owner: false,
        workdir: &work,
        tmpdir: &tmp,
        bin: bin.path(),
        hcp_home: &hcp,
        bootstrap: None,
        homes: &homes,
        not_above: &homes,
        other_sandboxes: &[],
        protect: &[],
        read: &[],
        write: &[],
        extra_ro: &[],
    };
    let policy = CallPolicy {
        require: true,
        network: None,
        limits: ResourceLimits {
            cpu_seconds: 10,
            address_space_bytes: 1 << 32,
            open_files: 256,
            file_size_bytes: 1 << 20,
            processes: 4096,
        },
    };
    let (confine, report) = Confinement::for_call_with(&support, &call, &policy).unwrap();
    assert!(!confine.has_pid_namespace());
    assert_eq!(report.field.filesystem.as_str(), "enforced");
    assert!(
        report
            .field
            .processes
            .as_str()
            .contains("would outlive a killed hcp"),
        "{report:?}"
    );
    let env = ChildEnv::from_parent([("PATH", "/usr/bin:/bin")]).tmpdir(&tmp);
    let probe = |args: &[&str]| {
        let o = run(&Invocation {
            bin: &bin,
            argv0: PROBE.into(),
            args: args.iter().map(Into::into).collect(),
            env: &env,
            cwd: work.clone(),
            limits: Limits::default(),
            confine: Some(&confine),
            cancel: None,
        })
        .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    for secret in ["home/.ssh/id_ed25519", "hcp/state/sessions/s.json"] {
        let out = probe(&["read", &w.p(secret)]);
        assert!(out.starts_with("denied"), "{secret}: {out}");
    }
    assert!(probe(&["read", &w.p("home/.bashrc")]).starts_with("ok"));
    // A setsid'd daemon is ended when the call ends (hcp is the subreaper).
    let t = token("subreaper");
    let out = probe(&["daemon", &t, "/dev/null"]);
    assert!(out.starts_with("ok"), "{out}");
    assert!(
        gone_within(&t, Duration::from_secs(1)).is_some(),
        "{t} outlived the call"
    );
}
