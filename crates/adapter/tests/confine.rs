//! A call's view through the real `run` (RUNTIME §5.1, §5.4), in-process as the current
//! user: every hostile attempt fails inside the child and leaves everything outside the
//! call's workdir as it was; what the call was given works (a shell, git, the limits).
//!
//! Test programs run through `sh -c`; the adapter itself never uses a shell. Where the
//! kernel cannot give a view the test prints `skipped: <reason>` (a failure under
//! `CI=true`). No test sleeps to synchronise.

#![allow(clippy::unwrap_used)]

#[path = "../../hcp/tests/common/skip.rs"]
mod skip;

use hcp_adapter::{
    CallPolicy, CallSandbox, ChildEnv, Confinement, EtcIndex, Invocation, KernelSupport, Limits,
    Network, Outcome, ResourceLimits, SandboxReport, pin_bin, run, scan_etc, verify_bin,
};
use pretty_assertions::assert_eq;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Limits small enough that a fork bomb or a memory hog stays harmless.
const TIGHT: ResourceLimits = ResourceLimits {
    cpu_seconds: 20,
    address_space_bytes: 256 << 20,
    open_files: 256,
    file_size_bytes: 16 << 20,
    processes: 32,
    tmp_bytes: 16 << 20,
    memory_bytes: 512 << 20,
};

/// Whether a call can have its view here; otherwise says why the test is skipped.
fn view_or_skip() -> bool {
    if let Some(why) = KernelSupport::probe().view_missing() {
        skip::skip(&why);
        return false;
    }
    true
}

/// A temporary world: a fake `$HOME` with secrets, a fake `$HCP_HOME`, the workdir
/// `work`, a sibling `work-evil`.
struct World {
    root: tempfile::TempDir,
    etc: EtcIndex,
}

const SECRET: &str = "-----BEGIN OPENSSH PRIVATE KEY----- hcp-test-secret";

impl World {
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        for d in ["home/.ssh", "hcp-home/state", "work", "work-evil", "tenant"] {
            std::fs::create_dir_all(r.join(d)).unwrap();
        }
        std::fs::write(r.join("home/.bashrc"), "# bashrc\n").unwrap();
        std::fs::write(r.join("home/.ssh/id_rsa"), SECRET).unwrap();
        std::fs::write(r.join("home/.ssh/authorized_keys"), "").unwrap();
        std::fs::write(r.join("hcp-home/state/grants.json"), "{}").unwrap();
        std::fs::write(r.join("work-evil/keep"), "keep").unwrap();
        Self {
            root,
            etc: scan_etc(),
        }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.root.path().canonicalize().unwrap().join(p)
    }

    fn work(&self) -> PathBuf {
        self.path("work")
    }

    /// Every file outside `work` with its content, to compare before and after.
    fn outside(&self) -> Vec<(PathBuf, Vec<u8>)> {
        fn walk(dir: &Path, skip: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
            let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
            entries.sort_by_key(|e| e.path());
            for e in entries {
                let p = e.path();
                if p == skip {
                    continue;
                }
                let t = e.file_type().unwrap();
                if t.is_dir() {
                    out.push((p.clone(), b"<dir>".to_vec()));
                    walk(&p, skip, out);
                } else {
                    out.push((p.clone(), std::fs::read(&p).unwrap_or_default()));
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.path(""), &self.work(), &mut out);
        for p in ["/tmp/x", "/etc/hcp-evil"] {
            out.push((
                p.into(),
                std::fs::read(p).unwrap_or_else(|_| b"<absent>".to_vec()),
            ));
        }
        out
    }

    fn confine(
        &self,
        bin: &Path,
        writes: bool,
        limits: ResourceLimits,
    ) -> (Confinement, SandboxReport) {
        let homes = [self.path("home")];
        let (work, hcp, tenant) = (self.work(), self.path("hcp-home"), self.path("tenant"));
        Confinement::for_call(
            &CallSandbox {
                land: hcp_model::Land::Local,
                caller: hcp_model::principal::Kind::Session,
                writes,
                workdir: &work,
                tenant_home: Some(&tenant),
                bin,
                interpreters: &[],
                hcp_home: &hcp,
                bootstrap: None,
                homes: &homes,
                read: &[],
                write: &[],
                protect_in_workdir: &[],
                etc: &self.etc,
            },
            &CallPolicy {
                require: false,
                network: Network::Deny,
                limits,
                cgroup: None,
            },
        )
        .unwrap()
    }

    /// Runs `program args…` in a `local` call's view (a write verb), cwd and `HOME` the
    /// workdir, `TMPDIR` the call's `/tmp`.
    fn run_with(&self, program: &str, args: &[&str], limits: ResourceLimits) -> Outcome {
        let bin = verify_bin(&pin_bin(Path::new(program)).unwrap()).unwrap();
        let (confine, report) = self.confine(bin.path(), true, limits);
        assert_eq!(report.summary(), "view");
        let env = ChildEnv::from_parent([("PATH", "/usr/bin:/bin")])
            .home(&self.work())
            .tmpdir(Path::new("/tmp"));
        run(&Invocation {
            bin: &bin,
            argv0: program.rsplit('/').next().unwrap().into(),
            args: args.iter().map(OsString::from).collect(),
            env: &env,
            cwd: self.work(),
            limits: Limits {
                timeout: Duration::from_secs(30),
                ..Limits::default()
            },
            confine: Some(&confine),
            cancel: None,
            egress: None,
        })
        .unwrap()
    }

    fn sh(&self, script: &str) -> Outcome {
        self.run_with("/bin/sh", &["-c", script], TIGHT)
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The child failed, and said so: the path is not there, read-only, or not permitted.
fn assert_refused(out: &Outcome, what: &str) {
    let err = text(&out.stderr);
    assert_ne!(out.exit_code, 0, "{what}: the child succeeded");
    assert!(
        [
            "No such file",
            "nonexistent",
            "Read-only",
            "Permission denied",
            "not permitted",
        ]
        .iter()
        .any(|n| err.contains(n)),
        "{what}: stderr was {err:?}"
    );
}

#[test]
fn writes_outside_the_workdir_change_nothing() {
    if !view_or_skip() {
        return;
    }
    let w = World::new();
    let before = w.outside();
    let home = w.path("home");
    let hcp_home = w.path("hcp-home");
    let attempts = [
        format!("echo evil >> {}/.bashrc", home.display()),
        format!("echo evil >> {}/.ssh/authorized_keys", home.display()),
        format!("echo evil > {}/.ssh/new", home.display()),
        format!(
            "echo '{{\"evil\":1}}' > {}/state/grants.json",
            hcp_home.display()
        ),
        format!("mkdir {}/packs", hcp_home.display()),
        "echo evil > /etc/hcp-evil".to_owned(),
        "echo evil > /usr/hcp-evil".to_owned(),
        format!("rm {}/.bashrc", home.display()),
    ];
    for a in &attempts {
        assert_refused(&w.sh(a), a);
    }
    // The call's /tmp is its own: writing it touches nothing of the host's.
    let out = w.sh("echo evil > /tmp/x && cat /tmp/x");
    assert_eq!(text(&out.stdout), "evil\n");
    assert_eq!(w.outside(), before);
}

#[test]
fn a_planted_key_and_other_processes_are_not_in_the_view() {
    if !view_or_skip() {
        return;
    }
    let w = World::new();
    let key = w.path("home/.ssh/id_rsa");
    for script in [
        format!("cat {}", key.display()),
        format!("ls {}/.ssh", w.path("home").display()),
        format!("cp {} stolen", key.display()),
        format!("cat /proc/{}/cmdline", std::process::id()),
    ] {
        let out = w.sh(&script);
        assert_refused(&out, &script);
        assert!(!text(&out.stdout).contains("hcp-test-secret"));
    }
    assert!(!w.work().join("stolen").exists());
}

#[test]
fn symlinks_out_of_the_workdir_lead_nowhere() {
    if !view_or_skip() {
        return;
    }
    let w = World::new();
    let before = w.outside();
    let home = w.path("home");
    let out = w.sh(&format!(
        "ln -s /etc etc-link && ln -s {h} home-link && ln -s {h}/.bashrc rc-link && echo made",
        h = home.display()
    ));
    assert_eq!((text(&out.stdout), out.exit_code), ("made\n".into(), 0));
    for a in [
        "echo evil > etc-link/hcp-evil",
        "echo evil >> home-link/.bashrc",
        "echo evil >> rc-link",
        "cat home-link/.ssh/id_rsa",
    ] {
        let out = w.sh(a);
        assert_refused(&out, a);
        assert!(!text(&out.stdout).contains("hcp-test-secret"));
    }
    assert_eq!(w.outside(), before);
}

#[test]
fn a_sibling_with_a_longer_name_and_dot_dot_stay_outside() {
    if !view_or_skip() {
        return;
    }
    let w = World::new();
    let before = w.outside();
    let evil = w.path("work-evil");
    std::fs::create_dir(w.work().join("sub")).unwrap();
    for a in [
        format!("echo evil > {}/f", evil.display()),
        "echo evil > ../work-evil/f".to_owned(),
        "echo evil > ../work-evil/keep".to_owned(),
        "echo evil > sub/../../work-evil/f".to_owned(),
        format!("echo evil > {}/../home/.bashrc", w.work().display()),
        "cat ../home/.ssh/id_rsa".to_owned(),
    ] {
        assert_refused(&w.sh(&a), &a);
    }
    // Beside the workdir (the host's /tmp here) lies the call's own /tmp: a write there
    // stays in the call.
    let out = w.sh("echo evil > ./sub/../../outside && cat ../outside");
    assert_eq!(text(&out.stdout), "evil\n");
    assert!(!w.path("outside").exists());
    assert_eq!(w.outside(), before);
}

#[test]
fn the_workdir_and_the_tmpdir_are_writable() {
    if !view_or_skip() {
        return;
    }
    let w = World::new();
    let out = w.sh(
        "mkdir -p a/b && echo hi > a/b/f && echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\" \
         && ln -s a/b/f link && cat link && [ \"$HOME\" = \"$PWD\" ] && ls /usr/bin/env \
         && cat /etc/passwd > /dev/null && echo ok > /dev/null && head -c 4 /dev/urandom | wc -c",
    );
    assert_eq!(
        (text(&out.stdout), text(&out.stderr), out.exit_code),
        ("t\nhi\n/usr/bin/env\n4\n".into(), String::new(), 0)
    );
}

#[test]
fn the_child_cannot_signal_outside_its_call() {
    if !view_or_skip() {
        return;
    }
    let w = World::new();
    let me = std::process::id();
    let out = w.sh(&format!("kill -0 {me}"));
    assert_ne!(out.exit_code, 0);
    // Its own processes still answer.
    let out = w.sh("sleep 5 & kill $!; wait $!; echo $?");
    assert_eq!(text(&out.stdout), "143\n");
}

#[test]
fn a_fork_bomb_is_bounded() {
    if !view_or_skip() {
        return;
    }
    let w = World::new();
    let support = KernelSupport::probe();
    if hcp_adapter::running_as_root() && support.pids_cgroup.is_err() {
        skip::skip("root without a pids cgroup: a fork bomb is not bounded here");
        return;
    }
    let bomb = "f() { f | f & }; f; sleep 1; echo done";
    let start = Instant::now();
    let out = w.run_with(
        "/bin/sh",
        &["-c", bomb],
        ResourceLimits {
            processes: 24,
            ..TIGHT
        },
    );
    let took = start.elapsed();
    assert!(!out.timed_out, "the bomb ran until the timeout");
    assert!(took < Duration::from_secs(15), "{took:?}");
    assert!(
        text(&out.stderr).contains("fork"),
        "the kernel refused no fork: {:?}",
        text(&out.stderr)
    );
}

#[test]
fn a_memory_hog_is_refused_by_the_kernel() {
    if !view_or_skip() {
        return;
    }
    let w = World::new();
    // mawk/gawk double a string until malloc fails under RLIMIT_AS (256 MiB).
    let out = w.run_with(
        "/usr/bin/awk",
        &["BEGIN { s = \"x\"; while (1) s = s s }"],
        TIGHT,
    );
    assert!(!out.timed_out);
    assert_ne!(out.exit_code, 0);
    let err = text(&out.stderr).to_lowercase();
    assert!(
        err.contains("memory") || out.signal.is_some(),
        "stderr {err:?}, exit {}",
        out.exit_code
    );
}

#[test]
fn cpu_and_file_size_limits_end_the_child() {
    if !view_or_skip() {
        return;
    }
    let w = World::new();
    let limits = ResourceLimits {
        cpu_seconds: 1,
        file_size_bytes: 1 << 20,
        ..TIGHT
    };
    let out = w.run_with("/bin/sh", &["-c", "while :; do :; done"], limits);
    assert!(!out.timed_out);
    // SIGXCPU at the soft limit. The child is the init of its PID namespace, which the
    // kernel spares the signals it does not handle: then the hard limit, a second later,
    // ends it with SIGKILL.
    assert!(
        matches!(out.signal, Some(libc::SIGXCPU | libc::SIGKILL)),
        "{out:?}"
    );
    assert!(out.duration < Duration::from_secs(10), "{out:?}");
    let out = w.run_with(
        "/bin/sh",
        &["-c", "head -c 2000000 /dev/zero > big"],
        limits,
    );
    assert_ne!(out.exit_code, 0);
    assert!(std::fs::metadata(w.work().join("big")).unwrap().len() <= 1 << 20);
}

#[test]
fn network_deny_refuses_tcp_and_hcp_hears_of_it() {
    if !view_or_skip() {
        return;
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let w = World::new();
    let script = format!("echo hi > /dev/tcp/127.0.0.1/{port} && echo connected");
    let out = w.run_with("/usr/bin/bash", &["-c", &script], TIGHT);
    assert_refused(&out, "tcp connect");
    assert_eq!(text(&out.stdout), "");
    assert!(out.socket_attempts >= 1, "{out:?}");
}

#[test]
fn git_works_inside_the_view() {
    if !view_or_skip() {
        return;
    }
    let Ok(git) = which_git() else {
        skip::skip("no `git` on this machine");
        return;
    };
    let w = World::new();
    let bin = verify_bin(&pin_bin(&git).unwrap()).unwrap();
    let (confine, _) = w.confine(bin.path(), true, TIGHT);
    // The git gold pack's environment and hardening flags (packs/git/surface.json).
    let env = ChildEnv::from_parent([("PATH", "/usr/bin:/bin")])
        .home(&w.work())
        .tmpdir(Path::new("/tmp"))
        .agent_env([
            ("GIT_TERMINAL_PROMPT", "0"),
            ("GIT_OPTIONAL_LOCKS", "0"),
            ("GIT_ATTR_NOSYSTEM", "1"),
            ("GIT_AUTHOR_NAME", "hcp agent"),
            ("GIT_AUTHOR_EMAIL", "agent@hcp.invalid"),
            ("GIT_COMMITTER_NAME", "hcp agent"),
            ("GIT_COMMITTER_EMAIL", "agent@hcp.invalid"),
        ])
        .unwrap();
    let git_run = |args: &[&str]| {
        let mut all: Vec<OsString> = [
            "--no-pager",
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "core.attributesFile=/dev/null",
            "-c",
            "commit.gpgSign=false",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        all.extend(args.iter().map(OsString::from));
        run(&Invocation {
            bin: &bin,
            argv0: "git".into(),
            args: all,
            env: &env,
            cwd: w.work(),
            limits: Limits::default(),
            confine: Some(&confine),
            cancel: None,
            egress: None,
        })
        .unwrap()
    };
    let ok = |out: Outcome| {
        assert_eq!(out.exit_code, 0, "{}", text(&out.stderr));
        text(&out.stdout)
    };
    ok(git_run(&["init", "-q", "-b", "main"]));
    std::fs::write(w.work().join("a.txt"), "one\n").unwrap();
    assert_eq!(ok(git_run(&["status", "--short"])), "?? a.txt\n");
    ok(git_run(&["add", "--", "a.txt"]));
    ok(git_run(&["commit", "-q", "--no-verify", "--message=first"]));
    std::fs::write(w.work().join("a.txt"), "two\n").unwrap();
    assert!(ok(git_run(&["diff"])).contains("+two"));
    ok(git_run(&["add", "--", "a.txt"]));
    ok(git_run(&[
        "commit",
        "-q",
        "--no-verify",
        "--message=second",
    ]));
    assert_eq!(ok(git_run(&["log", "--format=%s"])), "second\nfirst\n");
    // And it cannot reach out: a repository path outside is not there.
    let out = git_run(&["-C", &w.path("home").display().to_string(), "init", "-q"]);
    assert_ne!(out.exit_code, 0);
    assert!(!w.path("home/.git").exists());
}

fn which_git() -> Result<PathBuf, ()> {
    ["/usr/bin/git", "/usr/local/bin/git"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .ok_or(())
}
