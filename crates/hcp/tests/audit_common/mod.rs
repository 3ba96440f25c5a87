//! Helpers of the audit tests through `hcp exec` (`audit_exec.rs`, `audit_crash.rs`): the
//! `walprobe` fixture pack (a call that ran leaves a marker file), a session under a
//! runtime policy with `rate_limit`, `budget` and a confirmation, the census of the
//! trail (intents, outcomes, what each intent spends), and `kill -9`.
//!
//! Each test file declares `mod common;`, `mod exec_common;` and `mod audit_common;`.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use crate::common::{self, World};
use crate::exec_common;
use hcp_model::ArgValue;
use hcp_store::Home;
use hcp_store::audit::DigestKey;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

/// The runtime policy of the crash tests: `walprobe.mark` counted (`rate_limit` and
/// `budget`, both far above what the tests spend, so that every intent must count
/// exactly once), `walprobe.markc` behind the owner's approval.
pub const POLICY: &str = "schema_version: histos.policy/0.1
tools:
  walprobe.mark:
    access: write
    args:
      path: {type: string}
      text: {type: string}
    rate_limit: 100000
    budget: 100000
  walprobe.markc:
    access: write
    args:
      path: {type: string}
      text: {type: string}
    budget: 100000
    confirmation:
      required: true
      expires_in: 600
roles:
  agent:
    allow: [walprobe.mark, walprobe.markc]
";

/// A world with `walprobe` installed and active.
pub fn world() -> World {
    exec_common::world(&["walprobe"])
}

/// [`world`], the [`POLICY`], and a session of principal `agent` (role `agent`) granted
/// every exec capability on `walprobe`: its token.
pub fn policy_world() -> (World, String) {
    let w = world();
    std::fs::write(w.hcp_home.join("policy.yaml"), POLICY).unwrap();
    exec_common::grant(
        &w,
        "agent",
        "walprobe",
        &["verb.exec.read", "verb.exec.write"],
    );
    let token = exec_common::session(&w, "agent", &["--role", "agent"]);
    (w, token)
}

/// `hcp exec --json ARGS…`, spawned with stdout piped: as session `token` when given,
/// and with `HCP_TEST_ABORT_AT=abort` when given.
pub fn spawn_exec(w: &World, token: Option<&str>, args: &[&str], abort: Option<&str>) -> Child {
    spawn_exec_in(&w.hcp_home, w, token, args, abort)
}

/// [`spawn_exec`] with another `HCP_HOME`.
pub fn spawn_exec_in(
    hcp_home: &Path,
    w: &World,
    token: Option<&str>,
    args: &[&str],
    abort: Option<&str>,
) -> Child {
    let mut c = Command::new(common::hcp_bin());
    c.env_clear()
        .env("HOME", &w.home)
        .env("HCP_HOME", hcp_home)
        .env("PATH", w.path_var())
        .env("LANG", "C")
        .env("NO_COLOR", "1")
        .current_dir(&w.work)
        .arg("exec")
        .arg("--json")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(t) = token {
        c.env("HCP_SESSION", t);
    }
    if let Some(a) = abort {
        c.env("HCP_TEST_ABORT_AT", a);
    }
    c.spawn().unwrap()
}

/// Sends SIGKILL to `pid` (our unreaped child).
pub fn sigkill(pid: u32) {
    // SAFETY: kill(2) with integers only, to a child not yet reaped.
    unsafe {
        libc::kill(pid as libc::pid_t, libc::SIGKILL);
    }
}

/// How long one `hcp` process of the campaigns may take: past it the process is killed
/// and the test fails (a hang, which must not stall CI; no call takes a tenth of it).
pub const CALL_BOUND: Duration = Duration::from_secs(60);

/// `child.wait_with_output()`, bounded by [`CALL_BOUND`]: a watchdog waits on the child's
/// pidfd (readable when it exits) and SIGKILLs it through that pidfd when it has not
/// exited in time, which cannot hit another process; the test then fails.
pub fn wait_bounded(child: Child) -> Output {
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: pidfd_open(2) with integers, for our child not yet reaped.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    assert!(fd >= 0, "pidfd_open: {}", std::io::Error::last_os_error());
    // SAFETY: a new descriptor that nothing else owns.
    let pidfd = unsafe { OwnedFd::from_raw_fd(i32::try_from(fd).unwrap()) };
    let watchdog = std::thread::spawn(move || {
        let ms = i32::try_from(CALL_BOUND.as_millis()).unwrap();
        loop {
            let mut p = libc::pollfd {
                fd: pidfd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            match unsafe { libc::poll(&mut p, 1, ms) } {
                0 => break,
                n if n > 0 => return false,
                _ if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {}
                _ => panic!("poll: {}", std::io::Error::last_os_error()),
            }
        }
        // SAFETY: pidfd_send_signal(2) on our pidfd, no siginfo.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                pidfd.as_raw_fd(),
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            );
        }
        true
    });
    let out = child.wait_with_output().unwrap();
    let hung = watchdog.join().unwrap();
    assert!(
        !hung,
        "an `hcp` process did not end within {CALL_BOUND:?}: killed"
    );
    out
}

/// Whether `status` is a death by SIGKILL.
pub fn killed(status: &std::process::ExitStatus) -> bool {
    std::os::unix::process::ExitStatusExt::signal(status) == Some(libc::SIGKILL)
}

/// The keyed digest `hcp exec` records for `walprobe.mark{,c} --path PATH --text TEXT`.
pub fn mark_digest(w: &World, path: &str, text: &str) -> String {
    let key = DigestKey::load_or_create(&Home::open(&w.hcp_home).unwrap()).unwrap();
    let (p, t) = (ArgValue::String(path.into()), ArgValue::String(text.into()));
    key.args_digest([("path", &p), ("text", &t)])
}

/// What the trail holds, read from the file.
#[derive(Debug, Default)]
pub struct Census {
    /// Intents by id.
    pub intents: BTreeMap<String, Value>,
    /// The intents that have an outcome.
    pub closed: BTreeSet<String>,
    /// Intents naming each counter (`identity tool`).
    pub spends: BTreeMap<String, u64>,
    /// Intents naming each approval.
    pub approvals: BTreeMap<String, u64>,
}

impl Census {
    /// Reads `audit/audit.jsonl` of `hcp_home` (complete lines only).
    pub fn of(hcp_home: &Path) -> Self {
        let text = std::fs::read_to_string(hcp_home.join("audit/audit.jsonl")).unwrap_or_default();
        let mut c = Self::default();
        for line in text.split_inclusive('\n').filter(|l| l.ends_with('\n')) {
            let r: Value = serde_json::from_str(line).unwrap();
            match r["kind"].as_str() {
                Some("intent") => {
                    for k in r["spends"]["counters"].as_array().into_iter().flatten() {
                        let key = format!(
                            "{} {}",
                            k["identity"].as_str().unwrap(),
                            k["tool"].as_str().unwrap()
                        );
                        *c.spends.entry(key).or_insert(0) += 1;
                    }
                    for a in r["spends"]["approvals"].as_array().into_iter().flatten() {
                        *c.approvals
                            .entry(a.as_str().unwrap().to_owned())
                            .or_insert(0) += 1;
                    }
                    c.intents.insert(r["id"].as_str().unwrap().to_owned(), r);
                }
                Some("outcome") => {
                    c.closed.insert(r["intent"].as_str().unwrap().to_owned());
                }
                _ => {}
            }
        }
        c
    }

    /// The intents without an outcome.
    pub fn open(&self) -> BTreeSet<String> {
        self.intents
            .keys()
            .filter(|id| !self.closed.contains(*id))
            .cloned()
            .collect()
    }

    /// The ids of the intents with args digest `digest`.
    pub fn with_digest(&self, digest: &str) -> Vec<String> {
        self.intents
            .iter()
            .filter(|(_, r)| r["args_digest"] == digest)
            .map(|(id, _)| id.clone())
            .collect()
    }
}

/// `hcp audit verify --json` of `hcp_home`: its exit status and report.
pub fn verify_in(w: &World, hcp_home: &Path) -> (Option<i32>, Value) {
    let out = Command::new(common::hcp_bin())
        .env_clear()
        .env("HOME", &w.home)
        .env("HCP_HOME", hcp_home)
        .env("PATH", w.path_var())
        .current_dir(&w.work)
        .args(["audit", "verify", "--json"])
        .output()
        .unwrap();
    let v = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("verify --json ({e}): {}", w.render(&out)));
    (out.status.code(), v)
}

/// The interrupted calls `verify --json` lists.
pub fn interrupted(report: &Value) -> BTreeSet<String> {
    report["interrupted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_owned())
        .collect()
}

/// A small xorshift generator seeded from the clock (printed; `HCP_TEST_SEED` replays).
pub struct Rng(pub u64);

impl Rng {
    pub fn new() -> Self {
        let seed = std::env::var("HCP_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
                    | 1
            });
        eprintln!("seed {seed} (HCP_TEST_SEED replays it)");
        Self(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}
