//! Helpers of the `confine_*` integration tests (issue 12, RUNTIME §4, §5 "Confinement of
//! every land"): a world driven through the built `hcp` as the current user and, when that
//! is root, as `nobody` too (`setpriv`; the world is then `nobody`'s), with a home holding
//! planted secrets, the hostile pack (`hcp-example-probe try …` in every land) and the
//! `sqlprobe` pack (sqlite3, whose `.shell` runs any command).
//!
//! Each test file declares `mod common;` and `mod confine_common;`.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use crate::common::{self, World};
use serde_json::Value;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

/// What every planted secret holds; no output of a call may contain it.
pub const SECRET: &str = "hcp-test-secret-9d2e";

/// The uid and gid the unprivileged runs use.
pub const NOBODY: u32 = 65534;

/// Who runs `hcp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum As {
    /// The user running the tests.
    Me,
    /// `nobody`, when the tests run as root.
    Nobody,
}

/// Whether the tests run as root.
pub fn root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The users each test runs as: the current one and, as root, `nobody` too (visibly
/// skipped, and failed under `CI=true`, without `setpriv`).
pub fn users() -> Vec<As> {
    if root() {
        if !Path::new("/usr/bin/setpriv").exists() {
            common::skip::skip(
                "running as root without `setpriv`: not testing as an ordinary user",
            );
        } else if !nobody_reaches(&common::hcp_bin()) || !nobody_reaches(&common::gold_pack("echo"))
        {
            // `nobody` runs the built `hcp`, the example CLIs and the gold packs where they
            // are: every directory above the checkout must let others pass (`o+x`).
            common::skip::skip(
                "`nobody` cannot reach the checkout (a directory above it is not `o+x`): not testing as an ordinary user; `chmod o+x` each directory above it (README.md, \"Running the tests\")",
            );
        } else {
            return vec![As::Me, As::Nobody];
        }
    }
    vec![As::Me]
}

/// Whether `nobody` can reach `path` (every directory above it searchable by others).
fn nobody_reaches(path: &Path) -> bool {
    Command::new("/usr/bin/setpriv")
        .args([
            &format!("--reuid={NOBODY}"),
            &format!("--regid={NOBODY}"),
            "--clear-groups",
            "test",
            "-r",
        ])
        .arg(path)
        .status()
        .is_ok_and(|s| s.success())
}

/// A confinement world: a [`World`] whose every `hcp` runs as `user`.
pub struct Cw {
    pub w: World,
    pub user: As,
}

/// The hostile pack: verb `personal.try`, `brain.try`, `local.try` (the probe's `try`
/// with up to four words), each in its land.
pub fn hostile_pack(w: &World) -> PathBuf {
    let dir = w.root().join("src/hostile");
    std::fs::create_dir_all(&dir).unwrap();
    let cli = r#"["probe", "try", "{{what}}", "{{a1?}}", "{{a2?}}", "{{a3?}}", "{{a4?}}"]"#;
    let verbs: Vec<String> = ["personal", "brain", "local"]
        .iter()
        .map(|l| format!(r#""{l}.try": {{ "description": "Try one hostile thing in {l} land.", "cli": {cli} }}"#))
        .collect();
    std::fs::write(
        dir.join("surface.json"),
        format!(
            r#"{{"id": "hostile", "name": "Hostile", "kind": "wrap", "cliBin": "probe",
  "transports": ["cli", "json_exec"], "binding": {{"mode": "public"}},
  "wrap": {{"bin": "hcp-example-probe"}}, "verbs": {{ {} }} }}"#,
            verbs.join(",\n")
        ),
    )
    .unwrap();
    let rows: Vec<String> = ["personal", "brain", "local"]
        .iter()
        .map(|l| format!(r#""{l}.try": {{"operation": "read", "privacy": {{"land": "{l}"}}}}"#))
        .collect();
    std::fs::write(
        dir.join("policy.json"),
        format!(
            r#"{{"surface_id": "hostile", "version": 1, "stimuli": {{}}, "verbs": {{ {} }} }}"#,
            rows.join(",\n")
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("HARNESS.md"),
        "# HCP — Hostile\n\nA test pack of hcp's confinement tests.\n\n## Hot path\n\n\
         | Command | CLI |\n|---------|-----|\n| `personal.try` | `probe try WHAT` |\n\n\
         ## Anti-patterns\n\n- Installing it anywhere but a test store\n",
    )
    .unwrap();
    dir
}

/// The `sqlprobe` pack of issue 12: sqlite3 on an in-memory database, the SQL as one
/// argument; verb `query` in `personal`, `brain.query` in `brain`, `local.query` in
/// `local`, all `read`.
pub fn sqlprobe_pack(w: &World) -> PathBuf {
    let dir = w.root().join("src/sqlprobe");
    std::fs::create_dir_all(&dir).unwrap();
    let cli = r#"["sqlite3", "-readonly", ":memory:", "{{sql}}"]"#;
    std::fs::write(
        dir.join("surface.json"),
        format!(
            r#"{{"id": "sqlprobe", "name": "SQL probe", "kind": "wrap", "cliBin": "sqlite3",
  "transports": ["cli", "json_exec"], "binding": {{"mode": "public"}},
  "wrap": {{"bin": "sqlite3"}}, "verbs": {{
    "query": {{"description": "Run SQL.", "cli": {cli}}},
    "brain.query": {{"description": "Run SQL for a project.", "cli": {cli}}},
    "local.query": {{"description": "Run SQL in the sandbox.", "cli": {cli}}} }} }}"#
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("policy.json"),
        r#"{"surface_id": "sqlprobe", "version": 1, "stimuli": {}, "verbs": {
  "query": {"operation": "read", "privacy": {"land": "personal"}},
  "brain.query": {"operation": "read", "privacy": {"land": "brain"}},
  "local.query": {"operation": "read", "privacy": {"land": "local"}} } }"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("HARNESS.md"),
        "# HCP — SQL probe\n\nsqlite3 on an in-memory database.\n\n## Hot path\n\n\
         | Command | CLI |\n|---------|-----|\n| `query` | `sqlite3 -readonly :memory: SQL` |\n\n\
         ## Anti-patterns\n\n- Dot commands\n",
    )
    .unwrap();
    dir
}

impl Cw {
    /// A world for `user`: a home with planted secrets (`~/.ssh/id_ed25519`,
    /// `~/.aws/credentials`, `~/.bashrc`), the sources of the hostile and sqlprobe packs,
    /// everything owned by `user`, and `packs` (of those two, or gold ids) installed and
    /// active, as `user`.
    pub fn new(user: As, packs: &[&str]) -> Self {
        common::example_bins();
        let w = World::new();
        for d in [".ssh", ".aws"] {
            std::fs::create_dir_all(w.home.join(d)).unwrap();
        }
        for (f, text) in [
            (".ssh/id_ed25519", SECRET),
            (".aws/credentials", SECRET),
            (".bashrc", "# bashrc\n"),
        ] {
            std::fs::write(w.home.join(f), text).unwrap();
        }
        let sources: Vec<PathBuf> = packs
            .iter()
            .map(|p| match *p {
                "hostile" => hostile_pack(&w),
                "sqlprobe" => sqlprobe_pack(&w),
                other => common::gold_pack(other),
            })
            .collect();
        let cw = Self { w, user };
        cw.own(&cw.w.root());
        let out = cw.run(&["init"]);
        assert!(out.status.success(), "init:\n{}", cw.w.render(&out));
        for dir in sources {
            let out = cw.run(&["install", "--activate", &dir.display().to_string()]);
            assert!(out.status.success(), "install:\n{}", cw.w.render(&out));
        }
        cw
    }

    /// Gives `path` (recursively) to the world's user.
    pub fn own(&self, path: &Path) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(self.w.root(), std::fs::Permissions::from_mode(0o755)).unwrap();
        if self.user == As::Nobody {
            let st = Command::new("chown")
                .arg("-R")
                .arg(format!("{NOBODY}:{NOBODY}"))
                .arg(path)
                .status()
                .unwrap();
            assert!(st.success());
        }
    }

    /// `hcp` as the world's user, with the world's clean environment.
    pub fn hcp(&self) -> Command {
        let mut c = self.command(&common::hcp_bin());
        c.current_dir(&self.w.work);
        c
    }

    /// `program ARGS` as the world's user, with the world's clean environment.
    pub fn command(&self, program: &Path) -> Command {
        let mut c = if self.user == As::Nobody {
            let mut c = Command::new("/usr/bin/setpriv");
            c.args([
                &format!("--reuid={NOBODY}"),
                &format!("--regid={NOBODY}"),
                "--clear-groups",
            ])
            .arg(program);
            c
        } else {
            Command::new(program)
        };
        c.env_clear()
            .env("HOME", &self.w.home)
            .env("HCP_HOME", &self.w.hcp_home)
            .env("PATH", self.w.path_var())
            .env("LANG", "C")
            .env("NO_COLOR", "1")
            .current_dir(&self.w.work);
        c
    }

    /// `hcp ARGS`.
    pub fn run(&self, args: &[&str]) -> Output {
        self.hcp().args(args).output().unwrap()
    }

    /// `hcp session start --principal ID EXTRA…`: the token.
    pub fn session(&self, principal: &str, extra: &[&str]) -> String {
        let mut args = vec!["session", "start", "--principal", principal];
        args.extend_from_slice(extra);
        let out = self.run(&args);
        assert!(out.status.success(), "{}", self.w.render(&out));
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    /// `hcp grant PRINCIPAL PACK CAP…`.
    pub fn grant(&self, principal: &str, pack: &str, caps: &[&str]) {
        let mut args = vec!["grant", principal, pack];
        args.extend_from_slice(caps);
        let out = self.run(&args);
        assert!(out.status.success(), "{}", self.w.render(&out));
    }

    /// `hcp exec --json ARGS…` with `HCP_SESSION` = `token` (the owner when `None`).
    pub fn exec(&self, token: Option<&str>, args: &[&str]) -> (Output, Value) {
        let mut c = self.hcp();
        c.arg("exec").arg("--json").args(args);
        if let Some(t) = token {
            c.env("HCP_SESSION", t);
        }
        let out = c.output().unwrap();
        let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not one JSON object ({e}):\n{}",
                self.w.render(&out)
            )
        });
        (out, v)
    }

    /// `hcp grant --list --json`.
    pub fn grants(&self) -> String {
        let out = self.run(&["grant", "--list", "--json"]);
        assert!(out.status.success(), "{}", self.w.render(&out));
        String::from_utf8(out.stdout).unwrap()
    }

    /// Writes `config.json` (as the world's user).
    pub fn config(&self, v: &Value) {
        std::fs::create_dir_all(&self.w.hcp_home).unwrap();
        let path = self.w.hcp_home.join("config.json");
        std::fs::write(&path, v.to_string()).unwrap();
        self.own(&path);
    }

    /// A FIFO at `path`, owned by the world's user.
    pub fn fifo(&self, path: &Path) {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        self.own(path);
    }
}

/// The probe's line of a `try` call (its stdout).
pub fn line(v: &Value) -> String {
    v["stdout"].as_str().unwrap_or_default().trim().to_owned()
}

/// The attempt was refused inside the child (`denied …`, exit 1) and showed no secret.
pub fn assert_denied(v: &Value, what: &str) {
    let out = line(v);
    assert!(
        out.starts_with("denied") && v["exit_code"] == 1,
        "{what}: {v}"
    );
    assert!(!v.to_string().contains(SECRET), "{what}: {v}");
}

/// The attempt worked.
pub fn assert_ok(v: &Value, what: &str) {
    assert!(
        line(v).starts_with("ok") && v["exit_code"] == 0,
        "{what}: {v}"
    );
}

/// Reads a FIFO on a thread: each line as it comes, then `None` at the end of file (when
/// every writer is gone: the sleepers keep it open while they live).
pub struct FifoReader {
    rx: std::sync::mpsc::Receiver<Option<String>>,
}

impl FifoReader {
    /// Starts reading `path` (opening waits for a writer).
    pub fn open(path: &Path) -> Self {
        let path = path.to_owned();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let Ok(f) = std::fs::File::open(path) else {
                let _ = tx.send(None);
                return;
            };
            for l in std::io::BufReader::new(f).lines() {
                match l {
                    Ok(l) => {
                        if tx.send(Some(l)).is_err() {
                            return;
                        }
                    }
                    Err(_) => break,
                }
            }
            let _ = tx.send(None);
        });
        Self { rx }
    }

    /// The next line, within `deadline`; `None` at the end of file or past the deadline.
    pub fn line(&self, deadline: Duration) -> Option<String> {
        self.rx.recv_timeout(deadline).ok().flatten()
    }

    /// Whether the end of file (every writer gone) comes within `deadline`; lines on the
    /// way are skipped.
    pub fn closes_within(&self, deadline: Duration) -> bool {
        let until = std::time::Instant::now() + deadline;
        loop {
            let left = until.saturating_duration_since(std::time::Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(None) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return true,
                Ok(Some(_)) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => return false,
            }
        }
    }
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

/// A token no other process's command line holds.
pub fn token(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("hcp-token-{name}-{}-{nanos}", std::process::id())
}
