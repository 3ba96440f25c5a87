//! The world of the confinement tests: a driver process (`hcp-confine-probe drive`) that
//! confines a hostile child (`hcp-confine-probe …`) as `hcp exec` does, run as the current
//! user and, when that is root, as `nobody` too, with a home, a store, tenant homes and a
//! workdir that user owns; and what the tests read of its answers.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

pub const PROBE: &str = env!("CARGO_BIN_EXE_hcp-confine-probe");
pub const SECRET: &str = "hcp-test-secret-4f1c";

#[path = "../../../hcp/tests/common/skip.rs"]
mod skip;

/// A skip the plain `cargo test` run shows, a failure under `CI=true`.
pub fn skip_or_fail(reason: &str) {
    skip::skip(reason);
}

/// Who runs the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum User {
    Me,
    Nobody,
}

pub fn root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The users each test runs as: the current one, and `nobody` as well when that is root.
pub fn users() -> Vec<User> {
    if root() {
        if !Path::new("/usr/bin/setpriv").exists() {
            skip_or_fail(
                "running as root and `setpriv` is missing: not testing as an ordinary user",
            );
        } else if !nobody_runs(Path::new(PROBE)) {
            // `nobody` runs the built probe where it is: every directory above the checkout
            // must let others pass (`o+x`).
            skip_or_fail(
                "`nobody` cannot reach the checkout (a directory above it is not `o+x`): not testing as an ordinary user; `chmod o+x` each directory above it (README.md, \"Running the tests\")",
            );
        } else {
            return vec![User::Me, User::Nobody];
        }
    }
    vec![User::Me]
}

/// Whether `nobody` may run `path` (every directory above it searchable by others).
fn nobody_runs(path: &Path) -> bool {
    Command::new("/usr/bin/setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "test",
            "-x",
        ])
        .arg(path)
        .status()
        .is_ok_and(|s| s.success())
}

pub fn mkfifo(p: &Path) {
    let c = CString::new(p.as_os_str().as_bytes()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// A world: a home with secrets (among them one at a path no list names), a store, two
/// tenant homes, a workdir, granted paths, all owned by the user who runs.
pub struct World {
    _root: tempfile::TempDir,
    pub r: PathBuf,
    pub user: User,
}

impl World {
    pub fn new(user: User) -> Self {
        let root = tempfile::Builder::new()
            .prefix("hcp-call-")
            .tempdir_in("/tmp")
            .unwrap();
        let r = root.path().canonicalize().unwrap();
        for d in [
            "home/.ssh",
            "home/.zz-unknown",
            "home/.config/gh",
            "hcp/state/bindings/agent",
            "hcp/state/sessions",
            "hcp/audit",
            "hcp/packs/p",
            "hcp/homes/p/principal/other",
            "tenant",
            "tenant-b",
            "work/.git/hooks",
            "granted-w",
            "granted-r",
        ] {
            std::fs::create_dir_all(r.join(d)).unwrap();
        }
        for (f, text) in [
            ("home/.ssh/id_ed25519", SECRET),
            ("home/.zz-unknown/secret", SECRET),
            ("home/.config/gh/hosts.yml", SECRET),
            ("home/.npmrc", SECRET),
            ("home/.bashrc", "# rc\n"),
            ("hcp/state/bindings/agent/mail.json", SECRET),
            ("hcp/state/sessions/s.json", SECRET),
            ("hcp/audit/secret", SECRET),
            ("hcp/packs/p/surface.json", "{}"),
            ("hcp/homes/p/principal/other/notes", SECRET),
            ("tenant-b/notes", SECRET),
            ("tenant/own", "mine"),
            ("work/.git/config", "[core]\n"),
            ("work/README", "readme"),
            ("granted-r/data", "granted"),
        ] {
            std::fs::write(r.join(f), text).unwrap();
        }
        mkfifo(&r.join("tenant/ready"));
        mkfifo(&r.join("work/ready"));
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

    pub fn p(&self, rel: &str) -> String {
        self.r.join(rel).display().to_string()
    }

    /// Runs the driver: `opts` before the world's, then the probe with `probe_args`.
    pub fn drive(&self, land: &str, opts: &[&str], probe_args: &[&str]) -> Value {
        let out = self.driver(land, opts, probe_args).output().unwrap();
        parse(&out)
    }

    pub fn driver(&self, land: &str, opts: &[&str], probe_args: &[&str]) -> Command {
        let mut c = self.driver_program(land, opts, PROBE);
        c.args(probe_args);
        c
    }

    pub fn driver_program(&self, land: &str, opts: &[&str], program: &str) -> Command {
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
            ("--tenant", "tenant"),
            ("--home", "home"),
            ("--hcp-home", "hcp"),
            ("--workdir", "work"),
        ] {
            c.arg(k).arg(self.p(v));
        }
        c.arg("--").arg(program);
        c
    }

    /// The FIFO as the child of `land` sees it, and its host path.
    pub fn fifo(&self, land: &str) -> (String, PathBuf) {
        if land == "local" {
            (self.p("work/ready"), self.r.join("work/ready"))
        } else {
            ("/home/hcp/ready".to_owned(), self.r.join("tenant/ready"))
        }
    }

    /// Reads one line from the FIFO at `path` (blocks until a writer writes it; a sleeper
    /// keeps the FIFO open after), on a thread, with a deadline.
    pub fn await_fifo(path: &Path, deadline: Duration) -> Option<String> {
        use std::io::BufRead;
        let path = path.to_owned();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            // An end of file before any line is a writer of an earlier call that was
            // still closing: open again for the writer awaited.
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

pub fn parse(out: &std::process::Output) -> Value {
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| {
        panic!(
            "driver said {text:?} ({e}), stderr {:?}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

pub fn stdout(v: &Value) -> String {
    v["stdout"].as_str().unwrap_or_default().to_owned()
}

/// The probe was refused (its `denied …` line) and printed no secret.
pub fn assert_denied(v: &Value, what: &str) {
    let out = stdout(v);
    assert!(
        out.starts_with("denied") && v["exit_code"] == 1,
        "{what}: {v}"
    );
    assert!(!out.contains(SECRET), "{what}: {v}");
}

/// The probe found nothing at the path: it is not in the view.
pub fn assert_absent(v: &Value, what: &str) {
    assert_eq!(stdout(v).trim(), "denied ENOENT", "{what}: {v}");
}

/// The probe succeeded.
pub fn assert_ok(v: &Value, what: &str) {
    assert!(
        stdout(v).starts_with("ok") && v["exit_code"] == 0,
        "{what}: {v}"
    );
}

/// The names `list DIR` printed.
pub fn listed(v: &Value) -> Vec<String> {
    stdout(v)
        .trim()
        .strip_prefix("ok")
        .unwrap_or("")
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// Live (not zombie) processes whose command line holds `token`.
pub fn live_with(token: &str) -> usize {
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
pub fn gone_within(token: &str, limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if live_with(token) == 0 {
            return Some(start.elapsed());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    None
}

pub fn token(name: &str) -> String {
    format!(
        "hcp-token-{name}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    )
}

pub const LANDS: [&str; 3] = ["personal", "brain", "local"];

/// The first component of each path the view holds beneath `dir` because of `/etc`'s
/// symlinks (a resolver stub under `/run`, a catalogue under `/var/lib`).
pub fn link_parts(dir: &str) -> Vec<String> {
    hcp_adapter::scan_etc()
        .links
        .iter()
        .filter_map(|l| {
            l.target
                .strip_prefix(dir)
                .ok()
                .and_then(|r| r.components().next())
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
        })
        .collect()
}
