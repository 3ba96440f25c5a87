//! Kernel confinement of `local` children through the real `run` (RUNTIME §5 "The
//! child"): every hostile attempt fails inside the child with a permission error and
//! leaves everything outside the sandbox as it was.
//!
//! Tests that need Landlock print `skipped: <reason>` and return where the kernel has
//! none, except with `CI=true`, where they fail. Test programs run through `sh -c`; the
//! adapter itself never uses a shell. No test sleeps to synchronise.

#![allow(clippy::unwrap_used)]

#[path = "../../hcp/tests/common/skip.rs"]
mod skip;

use hcp_adapter::{
    ChildEnv, Confinement, Invocation, LandlockSupport, Limits, Network, Outcome, PrivateTmp,
    ResourceLimits, SandboxPaths, SandboxPolicy, SandboxReport, pin_bin, run, verify_bin,
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
};

/// Whether Landlock is here; otherwise says why the test is skipped (fails under CI).
fn landlock_or_skip() -> bool {
    let support = LandlockSupport::probe();
    if let Some(reason) = support.missing_reason() {
        skip::skip(reason);
        return false;
    }
    true
}

/// A temporary world: a fake `$HOME` with secrets, a fake `$HCP_HOME`, the sandbox
/// `work`, a sibling `work-evil`, and a private temporary directory.
struct World {
    root: tempfile::TempDir,
    tmp: PrivateTmp,
}

const SECRET: &str = "-----BEGIN OPENSSH PRIVATE KEY----- hcp-test-secret";

impl World {
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        for d in ["home/.ssh", "hcp-home/state", "work", "work-evil"] {
            std::fs::create_dir_all(r.join(d)).unwrap();
        }
        std::fs::write(r.join("home/.bashrc"), "# bashrc\n").unwrap();
        std::fs::write(r.join("home/.ssh/id_rsa"), SECRET).unwrap();
        std::fs::write(r.join("home/.ssh/authorized_keys"), "").unwrap();
        std::fs::write(r.join("hcp-home/state/grants.json"), "{}").unwrap();
        std::fs::write(r.join("work-evil/keep"), "keep").unwrap();
        let tmp = PrivateTmp::create_in(&std::env::temp_dir()).unwrap();
        Self { root, tmp }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.root.path().join(p)
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
        walk(self.root.path(), &self.work(), &mut out);
        for p in ["/tmp/x", "/etc/hcp-evil"] {
            out.push((
                p.into(),
                std::fs::read(p).unwrap_or_else(|_| b"<absent>".to_vec()),
            ));
        }
        out
    }

    fn policy(&self, network: Network, limits: ResourceLimits) -> SandboxPolicy {
        SandboxPolicy {
            require: true,
            network,
            limits,
        }
    }

    fn confine(&self, bin: &Path, policy: &SandboxPolicy) -> (Confinement, SandboxReport) {
        let protected = [self.path("hcp-home")];
        let not_above = [self.path("home")];
        let work = self.work();
        Confinement::for_local_land(
            &SandboxPaths {
                workdir: &work,
                tmpdir: self.tmp.path(),
                bin,
                extra_ro: &[],
                protected: &protected,
                not_above: &not_above,
            },
            policy,
        )
        .unwrap()
    }

    /// Runs `program args…` confined, cwd and `HOME` the sandbox, `TMPDIR` private.
    fn run_with(&self, program: &str, args: &[&str], policy: &SandboxPolicy) -> Outcome {
        let bin = verify_bin(&pin_bin(Path::new(program)).unwrap()).unwrap();
        let (confine, report) = self.confine(bin.path(), policy);
        assert_eq!(report.summary(), format!("landlock abi {}", report.abi));
        let env = ChildEnv::from_parent([("PATH", "/usr/bin:/bin")])
            .home(&self.work())
            .tmpdir(self.tmp.path());
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
        })
        .unwrap()
    }

    fn sh(&self, script: &str) -> Outcome {
        self.run_with(
            "/bin/sh",
            &["-c", script],
            &self.policy(Network::Allow, TIGHT),
        )
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The child failed, and said so with a permission error.
fn assert_denied(out: &Outcome, what: &str) {
    let err = text(&out.stderr);
    assert_ne!(out.exit_code, 0, "{what}: the child succeeded");
    assert!(
        err.contains("Permission denied") || err.contains("Operation not permitted"),
        "{what}: stderr was {err:?}"
    );
}

#[test]
fn writes_outside_the_sandbox_are_denied() {
    if !landlock_or_skip() {
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
        "echo evil > /tmp/x".to_owned(),
        "echo evil > /etc/hcp-evil".to_owned(),
        format!("rm {}/.bashrc", home.display()),
    ];
    for a in &attempts {
        assert_denied(&w.sh(a), a);
    }
    assert_eq!(w.outside(), before);
}

#[test]
fn reading_a_planted_key_is_denied() {
    if !landlock_or_skip() {
        return;
    }
    let w = World::new();
    let key = w.path("home/.ssh/id_rsa");
    for script in [
        format!("cat {}", key.display()),
        format!("ls {}/.ssh", w.path("home").display()),
        format!("cp {} stolen", key.display()),
        // Other processes' command lines (and /proc as a whole) are not granted.
        "cat /proc/1/cmdline".to_owned(),
        format!("cat /proc/{}/cmdline", std::process::id()),
    ] {
        let out = w.sh(&script);
        assert_denied(&out, &script);
        assert!(!text(&out.stdout).contains("hcp-test-secret"));
    }
    assert!(!w.work().join("stolen").exists());
}

#[test]
fn symlinks_out_of_the_sandbox_lead_nowhere() {
    if !landlock_or_skip() {
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
        assert_denied(&out, a);
        assert!(!text(&out.stdout).contains("hcp-test-secret"));
    }
    assert_eq!(w.outside(), before);
}

#[test]
fn a_sibling_with_a_longer_name_and_dot_dot_stay_outside() {
    if !landlock_or_skip() {
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
        "echo evil > ./sub/../../outside".to_owned(),
        format!("echo evil > {}/../home/.bashrc", w.work().display()),
        "cat ../home/.ssh/id_rsa".to_owned(),
    ] {
        assert_denied(&w.sh(&a), &a);
    }
    assert_eq!(w.outside(), before);
}

#[test]
fn the_sandbox_and_the_private_tmp_are_writable() {
    if !landlock_or_skip() {
        return;
    }
    let w = World::new();
    let out = w.sh(
        "mkdir -p a/b && echo hi > a/b/f && echo t > \"$TMPDIR/t\" && mv \"$TMPDIR/t\" moved \
         && ln -s a/b/f link && cat link moved && [ \"$HOME\" = \"$PWD\" ] && ls /usr/bin/env \
         && cat /etc/passwd > /dev/null && echo ok > /dev/null && head -c 4 /dev/urandom | wc -c",
    );
    assert_eq!(
        (text(&out.stdout), text(&out.stderr), out.exit_code),
        ("hi\nt\n/usr/bin/env\n4\n".into(), String::new(), 0)
    );
}

#[test]
fn the_child_cannot_signal_outside_its_sandbox() {
    if !landlock_or_skip() {
        return;
    }
    if LandlockSupport::probe().abi() < hcp_adapter::SCOPE_LANDLOCK_ABI {
        skip::skip("signal scoping needs landlock abi 6");
        return;
    }
    let w = World::new();
    let me = std::process::id();
    let out = w.sh(&format!("kill -0 {me}"));
    assert_ne!(out.exit_code, 0);
    assert!(
        text(&out.stderr).contains("ermitted"),
        "{:?}",
        text(&out.stderr)
    );
    // Its own group still answers.
    let out = w.sh("sleep 5 & kill $!; wait $!; echo $?");
    assert_eq!(text(&out.stdout), "143\n");
}

#[test]
fn a_fork_bomb_is_bounded() {
    if !landlock_or_skip() {
        return;
    }
    let w = World::new();
    // The kernel does not apply RLIMIT_NPROC to root: as root, the bomb runs as `nobody`
    // (setpriv), which is what the limit is for.
    let bomb = "f() { f | f & }; f; sleep 1; echo done";
    // SAFETY: `geteuid` takes no argument and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if root && !Path::new("/usr/bin/setpriv").exists() {
        skip::skip("running as root and `setpriv` is missing to drop to `nobody`");
        return;
    }
    let policy = w.policy(
        Network::Allow,
        ResourceLimits {
            processes: 24,
            ..TIGHT
        },
    );
    let start = Instant::now();
    let out = if root {
        w.run_with(
            "/usr/bin/setpriv",
            &[
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "/bin/sh",
                "-c",
                bomb,
            ],
            &policy,
        )
    } else {
        w.run_with("/bin/sh", &["-c", bomb], &policy)
    };
    let took = start.elapsed();
    assert!(!out.timed_out, "the bomb ran until the timeout");
    assert!(took < Duration::from_secs(15), "{took:?}");
    assert!(
        text(&out.stderr).contains("fork"),
        "the kernel refused no fork: {:?}",
        text(&out.stderr)
    );
    // Its whole process group is gone.
    let still = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter(|s| {
            let f: Vec<&str> = s
                .rsplit_once(')')
                .map(|(_, r)| r.split_whitespace().collect())
                .unwrap_or_default();
            f.len() > 2 && f[2] == out.pid.to_string() && f[0] != "Z"
        })
        .count();
    assert_eq!(still, 0);
}

#[test]
fn a_memory_hog_is_refused_by_the_kernel() {
    if !landlock_or_skip() {
        return;
    }
    let w = World::new();
    // mawk/gawk double a string until malloc fails under RLIMIT_AS (256 MiB).
    let out = w.run_with(
        "/usr/bin/awk",
        &["BEGIN { s = \"x\"; while (1) s = s s }"],
        &w.policy(Network::Allow, TIGHT),
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
    if !landlock_or_skip() {
        return;
    }
    let w = World::new();
    let policy = w.policy(
        Network::Allow,
        ResourceLimits {
            cpu_seconds: 1,
            file_size_bytes: 1 << 20,
            ..TIGHT
        },
    );
    let out = w.run_with("/bin/sh", &["-c", "while :; do :; done"], &policy);
    assert!(!out.timed_out);
    // SIGXCPU at the soft limit: the hard limit, a second later, is what would send
    // SIGKILL, and that is kept apart so the answer can name the CPU-time limit.
    assert_eq!(out.signal, Some(libc::SIGXCPU), "{out:?}");
    let out = w.run_with(
        "/bin/sh",
        &["-c", "head -c 2000000 /dev/zero > big"],
        &policy,
    );
    assert_ne!(out.exit_code, 0);
    assert!(std::fs::metadata(w.work().join("big")).unwrap().len() <= 1 << 20);
}

#[test]
fn network_deny_refuses_tcp_connect() {
    if !landlock_or_skip() {
        return;
    }
    if LandlockSupport::probe().abi() < hcp_adapter::NETWORK_LANDLOCK_ABI {
        skip::skip("tcp rules need landlock abi 4");
        return;
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let w = World::new();
    let script = format!("echo hi > /dev/tcp/127.0.0.1/{port} && echo connected");
    let out = w.run_with(
        "/usr/bin/bash",
        &["-c", &script],
        &w.policy(Network::Allow, TIGHT),
    );
    assert_eq!(text(&out.stdout), "connected\n", "{:?}", text(&out.stderr));
    let deny = w.policy(Network::Deny, TIGHT);
    let (_, report) = w.confine(Path::new("/usr/bin/bash"), &deny);
    assert_eq!(report.field.network.as_str(), "only tcp is denied");
    let out = w.run_with("/usr/bin/bash", &["-c", &script], &deny);
    assert_denied(&out, "tcp connect");
    assert_eq!(text(&out.stdout), "");
}

#[test]
fn git_works_inside_the_confinement() {
    if !landlock_or_skip() {
        return;
    }
    let Ok(git) = which_git() else {
        skip::skip("no `git` on this machine");
        return;
    };
    let w = World::new();
    let policy = w.policy(Network::Allow, TIGHT);
    let bin = verify_bin(&pin_bin(&git).unwrap()).unwrap();
    let (confine, _) = w.confine(bin.path(), &policy);
    // The git gold pack's environment and hardening flags (packs/git/surface.json).
    let env = ChildEnv::from_parent([("PATH", "/usr/bin:/bin")])
        .home(&w.work())
        .tmpdir(w.tmp.path())
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
    // And it cannot reach out: a repository path outside is refused.
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

#[test]
fn without_landlock_the_report_says_unconfined() {
    let w = World::new();
    let work = w.work();
    let paths = SandboxPaths {
        workdir: &work,
        tmpdir: w.tmp.path(),
        bin: Path::new("/bin/sh"),
        extra_ro: &[],
        protected: &[],
        not_above: &[],
    };
    let mut policy = w.policy(Network::Allow, TIGHT);
    policy.require = false;
    let (c, report) =
        Confinement::for_local_land_with(LandlockSupport::NotEnabled, &paths, &policy).unwrap();
    assert!(!c.is_landlocked());
    assert_eq!(report.summary(), "unconfined");
    assert_eq!(
        serde_json::to_value(&report).unwrap()["mode"],
        serde_json::json!("unconfined")
    );
    // It still runs in the sandbox directory, with its limits.
    let bin = verify_bin(&pin_bin(Path::new("/bin/sh")).unwrap()).unwrap();
    let out = run(&Invocation {
        bin: &bin,
        argv0: "sh".into(),
        args: vec!["-c".into(), "pwd; ulimit -n".into()],
        env: &ChildEnv::new(),
        cwd: work.clone(),
        limits: Limits::default(),
        confine: Some(&c),
        cancel: None,
    })
    .unwrap();
    assert_eq!(
        text(&out.stdout),
        format!("{}\n256\n", work.canonicalize().unwrap().display())
    );
    policy.require = true;
    let e =
        Confinement::for_local_land_with(LandlockSupport::NotEnabled, &paths, &policy).unwrap_err();
    assert_eq!(e.code(), "sandbox_unavailable");
}

#[test]
fn every_older_abi_still_confines() {
    if !landlock_or_skip() {
        return;
    }
    let kernel = LandlockSupport::probe().abi();
    let w = World::new();
    let bin = verify_bin(&pin_bin(Path::new("/bin/sh")).unwrap()).unwrap();
    let env = ChildEnv::from_parent([("PATH", "/usr/bin:/bin")])
        .home(&w.work())
        .tmpdir(w.tmp.path());
    let before = w.outside();
    for abi in 1..=kernel.min(hcp_adapter::TESTED_LANDLOCK_ABI) {
        let work = w.work();
        let protected = [w.path("hcp-home")];
        let (confine, report) = Confinement::for_local_land_with(
            LandlockSupport::Abi(abi),
            &SandboxPaths {
                workdir: &work,
                tmpdir: w.tmp.path(),
                bin: bin.path(),
                extra_ro: &[],
                protected: &protected,
                not_above: &[],
            },
            &w.policy(Network::Allow, TIGHT),
        )
        .unwrap();
        assert_eq!(report.summary(), format!("landlock abi {abi}"));
        let script = format!(
            "echo in > in-{abi} && echo t > \"$TMPDIR/t\" && mv \"$TMPDIR/t\" t-{abi} && cat in-{abi} t-{abi}; \
             echo evil >> {}/.bashrc",
            w.path("home").display()
        );
        let out = run(&Invocation {
            bin: &bin,
            argv0: "sh".into(),
            args: vec!["-c".into(), script.into()],
            env: &env,
            cwd: w.work(),
            limits: Limits::default(),
            confine: Some(&confine),
            cancel: None,
        })
        .unwrap();
        assert_eq!(
            text(&out.stdout),
            "in\nt\n",
            "abi {abi}: {}",
            text(&out.stderr)
        );
        assert_denied(&out, &format!("abi {abi}"));
    }
    assert_eq!(w.outside(), before);
}
