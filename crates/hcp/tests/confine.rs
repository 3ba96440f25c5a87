//! `local` land through the built `hcp exec` (RUNTIME §5 "The child"): the kernel
//! confines the child to its sandbox working directory and a private temporary
//! directory; every hostile attempt fails inside the child and nothing outside changes;
//! the result and the audit record say how the child was confined.
//!
//! Tests that need Landlock print `skipped: <reason>` and return where the kernel has
//! none, except with `CI=true`, where they fail. The fork bomb, the memory hog and the
//! other resource limits are tested with real processes at the adapter level
//! (`crates/adapter/tests/confine.rs`), where a test may use a shell.

#![allow(clippy::unwrap_used)]

mod common;
mod exec_common;

use common::World;
use exec_common::{assert_audit_clean, exec_json, install, last_audit, parse, status, world};
use hcp_adapter::LandlockSupport;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Output;

/// Whether Landlock is here; otherwise says why the test is skipped (fails under CI).
fn landlock_or_skip() -> bool {
    if let Some(reason) = LandlockSupport::probe().missing_reason() {
        common::skip::skip(reason);
        return false;
    }
    true
}

/// The `sandbox` field of a `local` call here: everything enforced (`network: deny` is
/// the land's default) where the kernel has every mechanism.
fn expected_sandbox() -> Value {
    let k = hcp_adapter::KernelSupport::probe();
    let processes = if k.processes.survives_sigkill_of_hcp()
        && k.fork_bombs() == hcp_adapter::Status::Enforced
    {
        json!("enforced")
    } else {
        // Named by the adapter; not what this file tests.
        Value::Null
    };
    json!({
        "filesystem": "enforced",
        "privileges": "enforced",
        "network": {"mode": "deny", "enforced": true, "refused": []},
        "processes": processes,
    })
}

/// `v` against [`expected_sandbox`] (a `null` processes matches any reason).
fn sandbox_ok(v: &Value) -> bool {
    let e = expected_sandbox();
    v["filesystem"] == e["filesystem"]
        && v["privileges"] == e["privileges"]
        && v["network"] == e["network"]
        && (e["processes"].is_null() || v["processes"] == e["processes"])
}

const SECRET: &str = "-----BEGIN OPENSSH PRIVATE KEY----- hcp-test-secret";

/// A pack whose verbs are all `local` land, wrapping the probe CLI.
fn jail_pack(w: &World) -> PathBuf {
    let dir = w.root().join("src/jail");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("surface.json"),
        r#"{
  "id": "jail",
  "name": "Jail",
  "kind": "wrap",
  "cliBin": "probe",
  "plane": "runtime",
  "transports": ["cli", "json_exec"],
  "binding": { "mode": "public" },
  "wrap": { "bin": "hcp-example-probe" },
  "verbs": {
    "write": { "description": "Write a file.",           "cli": ["probe", "write", "{{path}}", "{{text}}"] },
    "read":  { "description": "Print a file.",           "cli": ["probe", "read", "{{path}}"] },
    "env":   { "description": "Print the environment.",  "cli": ["probe", "env"] }
  }
}
"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("policy.json"),
        r#"{
  "surface_id": "jail",
  "version": 1,
  "stimuli": {},
  "verbs": {
    "write": { "operation": "write", "privacy": { "land": "local" } },
    "read":  { "operation": "read",  "privacy": { "land": "local" } },
    "env":   { "operation": "read",  "privacy": { "land": "local" } }
  }
}
"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("HARNESS.md"),
        "# HCP — Jail\n\nA test pack of hcp's confinement tests: every verb runs in `local` land.\n\n\
         ## Hot path\n\n| Command | CLI |\n|---------|-----|\n| `write` | `probe write PATH TEXT` |\n\
         | `read` | `probe read PATH` |\n| `env` | `probe env` |\n\n## Anti-patterns\n\n\
         - Installing it anywhere but a test store\n",
    )
    .unwrap();
    dir
}

/// A world with the jail pack, a fake `$HOME` holding secrets, and a sibling of the
/// sandbox whose name extends it.
fn jail() -> World {
    let w = world(&[]);
    install(&w, &jail_pack(&w));
    std::fs::create_dir_all(w.home.join(".ssh")).unwrap();
    std::fs::write(w.home.join(".bashrc"), "# bashrc\n").unwrap();
    std::fs::write(w.home.join(".ssh/id_rsa"), SECRET).unwrap();
    std::fs::write(w.home.join(".ssh/authorized_keys"), "").unwrap();
    std::fs::create_dir_all(w.root().join("work-evil")).unwrap();
    std::fs::write(w.root().join("work-evil/keep"), "keep").unwrap();
    // Before any hostile attempt: exec must say it confines local land, or the attempts
    // below would really write outside (as root, even into `/etc`).
    let (out, v) = exec_json(&w, &["jail.env"]);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    assert!(
        sandbox_ok(&v["sandbox"]),
        "exec does not report a confined local land ({}); no escape is attempted",
        v["sandbox"]
    );
    w
}

/// Every file outside the sandbox with its content (the audit trail, which exec
/// appends to, left out), plus `/tmp/x` and `/etc/hcp-evil`.
fn outside(w: &World) -> Vec<(PathBuf, Vec<u8>)> {
    fn walk(dir: &Path, skip: &[PathBuf], out: &mut Vec<(PathBuf, Vec<u8>)>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        let mut entries: Vec<_> = rd.flatten().collect();
        entries.sort_by_key(|e| e.path());
        for e in entries {
            let p = e.path();
            if skip.contains(&p) {
                continue;
            }
            if e.file_type().unwrap().is_dir() {
                out.push((p.clone(), b"<dir>".to_vec()));
                walk(&p, skip, out);
            } else {
                out.push((p.clone(), std::fs::read(&p).unwrap_or_default()));
            }
        }
    }
    let skip = [w.work.clone(), w.hcp_home.join("audit")];
    let mut out = Vec::new();
    walk(&w.root(), &skip, &mut out);
    for p in ["/tmp/x", "/etc/hcp-evil"] {
        out.push((
            p.into(),
            std::fs::read(p).unwrap_or_else(|_| b"<absent>".to_vec()),
        ));
    }
    out
}

/// The call failed inside the child (the path is not in its view, read-only there, or
/// not permitted), and the result and the audit record say it was confined.
fn assert_denied(w: &World, args: &[&str]) -> Value {
    let (out, v) = exec_json(w, args);
    assert_ne!(status(&out), 0, "{args:?} succeeded: {}", w.render(&out));
    let err = v["stderr"].as_str().unwrap_or_default();
    assert!(
        [
            "ermission denied",
            "not permitted",
            "No such file",
            "Read-only file system"
        ]
        .iter()
        .any(|n| err.contains(n)),
        "{args:?}: {}",
        w.render(&out)
    );
    assert!(
        !v["stdout"]
            .as_str()
            .unwrap_or_default()
            .contains("hcp-test-secret")
    );
    assert!(sandbox_ok(&v["sandbox"]), "{v:#}");
    assert!(sandbox_ok(&last_audit(w)["sandbox"]));
    v
}

#[test]
fn writes_outside_the_sandbox_fail_in_the_child() {
    if !landlock_or_skip() {
        return;
    }
    let w = jail();
    let before = outside(&w);
    let targets = [
        w.home.join(".bashrc"),
        w.home.join(".ssh/authorized_keys"),
        w.hcp_home.join("state/evil.json"),
        w.hcp_home.join("packs/jail/surface.json"),
        PathBuf::from("/etc/hcp-evil"),
    ];
    for t in &targets {
        assert_denied(&w, &["jail.write", &t.display().to_string(), "evil"]);
    }
    // The call's /tmp is its own: what it writes there is not the host's.
    let (out, _) = exec_json(&w, &["jail.write", "/tmp/x", "evil"]);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    assert_eq!(outside(&w), before);
    assert_audit_clean(&w);
}

#[test]
fn a_planted_key_cannot_be_read() {
    if !landlock_or_skip() {
        return;
    }
    let w = jail();
    let key = w.home.join(".ssh/id_rsa").display().to_string();
    assert_denied(&w, &["jail.read", &key]);
    assert_denied(&w, &["jail.read", "../home/.ssh/id_rsa"]);
}

#[test]
fn symlinks_out_of_the_sandbox_lead_nowhere() {
    if !landlock_or_skip() {
        return;
    }
    let w = jail();
    std::os::unix::fs::symlink("/etc", w.work.join("etc-link")).unwrap();
    std::os::unix::fs::symlink(&w.home, w.work.join("home-link")).unwrap();
    let before = outside(&w);
    assert_denied(&w, &["jail.write", "etc-link/hcp-evil", "evil"]);
    assert_denied(&w, &["jail.write", "home-link/.bashrc", "evil"]);
    assert_denied(&w, &["jail.read", "home-link/.ssh/id_rsa"]);
    assert_eq!(outside(&w), before);
}

#[test]
fn a_sibling_with_a_longer_name_and_dot_dot_stay_outside() {
    if !landlock_or_skip() {
        return;
    }
    let w = jail();
    std::fs::create_dir_all(w.work.join("sub")).unwrap();
    let before = outside(&w);
    let evil = w.root().join("work-evil/f").display().to_string();
    for path in [
        evil.as_str(),
        "../work-evil/f",
        "../work-evil/keep",
        "sub/../../work-evil/f",
    ] {
        assert_denied(&w, &["jail.write", path, "evil"]);
    }
    // Beside the workdir lies the call's own /tmp (the test's worlds are in the host's
    // /tmp): a write there stays in the call.
    let (out, _) = exec_json(&w, &["jail.write", "./sub/../../outside", "evil"]);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    assert!(!w.root().join("outside").exists());
    assert_eq!(outside(&w), before);
}

#[test]
fn the_sandbox_is_home_and_tmpdir_is_private_and_removed() {
    if !landlock_or_skip() {
        return;
    }
    let w = jail();
    let (out, v) = exec_json(&w, &["jail.write", "inside.txt", "ok"]);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    assert_eq!(
        std::fs::read_to_string(w.work.join("inside.txt")).unwrap(),
        "ok"
    );
    assert!(sandbox_ok(&v["sandbox"]), "{v:#}");

    let (out, v) = exec_json(&w, &["jail.env"]);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    let env = &v["data"];
    assert_eq!(env["HOME"], json!(w.work.display().to_string()));
    assert_eq!(env["HCP_WORKDIR"], json!(w.work.display().to_string()));
    assert_eq!(env["TMPDIR"], json!("/tmp"));
}

#[test]
fn a_configuration_that_does_not_parse_stops_every_exec() {
    if !landlock_or_skip() {
        return;
    }
    let w = jail();
    std::fs::write(
        w.hcp_home.join("config.json"),
        "{\"sandbox\": {\"require\": true, \"netwrk\": \"deny\"}}",
    )
    .unwrap();
    let (out, v) = exec_json(&w, &["jail.write", "inside.txt", "ok"]);
    assert_ne!(status(&out), 0);
    assert_eq!(v["code"], json!("bad_config"), "{}", w.render(&out));
    assert!(!w.work.join("inside.txt").exists());
}

#[test]
fn network_is_denied_by_default_and_allowed_per_pack() {
    if !landlock_or_skip() {
        return;
    }
    let w = jail();
    // `local`'s default (the jail calls above): denied, and said so.
    let (out, v) = exec_json(&w, &["jail.write", "inside.txt", "ok"]);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    assert_eq!(v["sandbox"]["network"]["mode"], json!("deny"));
    assert_eq!(v["sandbox"]["network"]["enforced"], json!(true));
    // The operator gives this pack alone the host's network.
    std::fs::write(
        w.hcp_home.join("config.json"),
        r#"{"packs": {"jail": {"network": "host"}}}"#,
    )
    .unwrap();
    let (out, v) = exec_json(&w, &["jail.write", "inside.txt", "ok"]);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    assert_eq!(v["sandbox"]["network"]["mode"], json!("host"));
    assert_eq!(last_audit(&w)["sandbox"]["network"]["mode"], json!("host"));
}

#[test]
fn the_git_gold_pack_works_inside_the_confinement() {
    if !landlock_or_skip() {
        return;
    }
    let w = world(&["git"]);
    let repo = w.work.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let init = std::process::Command::new("git")
        .args(["init", "-q", "-b", "main"])
        .current_dir(&repo)
        .output()
        .unwrap();
    assert!(init.status.success());
    std::fs::write(repo.join("a.txt"), "one\n").unwrap();
    let in_repo = |args: &[&str]| {
        let mut all = vec!["exec", "--json"];
        all.extend_from_slice(args);
        let out = w.hcp().current_dir(&repo).args(&all).output().unwrap();
        let v = parse(&w, &out);
        assert_eq!(status(&out), 0, "{}", w.render(&out));
        assert!(sandbox_ok(&v["sandbox"]), "{v:#}");
        v
    };
    let v = in_repo(&["git.status"]);
    assert_eq!(v["stdout"], json!("## No commits yet on main\n?? a.txt\n"));
    in_repo(&["git.add", "a.txt"]);
    in_repo(&["git.commit", "--message", "first", "--confirm"]);
    std::fs::write(repo.join("a.txt"), "two\n").unwrap();
    let v = in_repo(&["git.diff"]);
    assert!(v["stdout"].as_str().unwrap().contains("+two"), "{v}");
    let v = in_repo(&["git.status"]);
    assert_eq!(v["stdout"], json!("## main\n M a.txt\n"));
    assert_audit_clean(&w);
}

/// Whether this process may make `dir` its working directory (an ordinary user running
/// the tests cannot enter `/root`).
fn can_enter(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).unwrap();
    // SAFETY: a NUL-terminated path.
    unsafe { libc::access(c.as_ptr(), libc::X_OK) == 0 }
}

/// `hcp exec --json ARGS…` run in `dir` with `HOME` set to `home` (`None`: unset).
fn exec_json_in(w: &World, dir: &Path, home: Option<&str>, args: &[&str]) -> (Output, Value) {
    let mut c = w.hcp();
    c.current_dir(dir).arg("exec").arg("--json").args(args);
    match home {
        Some(h) => c.env("HOME", h),
        None => c.env_remove("HOME"),
    };
    let out = c.output().unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out, v)
}

#[test]
fn system_directories_are_never_a_sandbox() {
    if !landlock_or_skip() {
        return;
    }
    let w = jail();
    for dir in ["/usr", "/usr/share", "/etc", "/proc", "/sys/kernel", "/dev"] {
        let (out, v) = exec_json_in(&w, Path::new(dir), Some("/nonexistent"), &["jail.env"]);
        assert_eq!(status(&out), 64, "{dir}: {}", w.render(&out));
        assert_eq!(v["code"], json!("bad_workdir"), "{dir}");
        assert!(
            v["error"].as_str().unwrap().contains("system directory"),
            "{dir}: {v}"
        );
    }
}

#[test]
fn the_homes_key_and_startup_directories_are_never_a_sandbox() {
    if !landlock_or_skip() {
        return;
    }
    let w = jail();
    let home = w.home.display().to_string();
    for sub in [".ssh", ".config/autostart", ".local/bin"] {
        let dir = w.home.join(sub);
        std::fs::create_dir_all(&dir).unwrap();
        let (out, v) = exec_json_in(
            &w,
            &dir,
            Some(&home),
            &["jail.write", "authorized_keys", "x"],
        );
        assert_eq!(status(&out), 64, "{sub}: {}", w.render(&out));
        assert_eq!(v["code"], json!("bad_workdir"), "{sub}");
        assert!(!dir.join("authorized_keys").exists() || sub == ".ssh");
    }
    assert_eq!(
        std::fs::read(w.home.join(".ssh/authorized_keys")).unwrap(),
        b""
    );
}

/// The caller's `HOME` alone does not define the home: the user's entry in /etc/passwd
/// counts too, so an agent that unsets or changes `HOME` still cannot make the real home
/// its sandbox.
#[test]
fn the_passwd_home_is_not_a_sandbox_whatever_home_says() {
    if !landlock_or_skip() {
        return;
    }
    let w = jail();
    // SAFETY: geteuid takes no argument and cannot fail.
    let uid = unsafe { libc::geteuid() }.to_string();
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    let Some(home) = passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() >= 7 && f[2] == uid).then(|| PathBuf::from(f[5]))
    }) else {
        common::skip::skip(&format!("uid {uid} has no /etc/passwd entry"));
        return;
    };
    if !home.is_dir() || home == Path::new("/") {
        common::skip::skip(&format!(
            "the passwd home `{}` is not a directory",
            home.display()
        ));
        return;
    }
    for spoof in [Some("/nonexistent"), None] {
        // `jail.env` writes nothing, so a failure of the guard changes nothing there.
        let (out, v) = exec_json_in(&w, &home, spoof, &["jail.env"]);
        assert_eq!(status(&out), 64, "HOME={spoof:?}: {}", w.render(&out));
        assert_eq!(v["code"], json!("bad_workdir"), "HOME={spoof:?}");
    }
}

/// `TMPDIR` is the call's own `/tmp` (a tmpfs of the view, RUNTIME §5.1); the
/// `sandbox.tmpdir` of earlier versions is read and ignored.
#[test]
fn the_tmpdir_is_the_views_own_and_the_old_key_is_ignored() {
    if !landlock_or_skip() {
        return;
    }
    let w = jail();
    let (out, v) = exec_json(&w, &["jail.env"]);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    assert_eq!(v["data"]["TMPDIR"], "/tmp");
    std::fs::write(
        w.hcp_home.join("config.json"),
        r#"{"sandbox": {"tmpdir": "system"}}"#,
    )
    .unwrap();
    let (out, v) = exec_json(&w, &["jail.env"]);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    assert_eq!(v["data"]["TMPDIR"], "/tmp");
}

/// Every home of /etc/passwd (not only the caller's) and the shared roots (`/home`,
/// `/tmp` …) are refused as sandboxes; so is `/var` and what lies in it.
#[test]
fn other_users_homes_and_shared_roots_are_never_a_sandbox() {
    if !landlock_or_skip() {
        return;
    }
    let w = jail();
    let home = w.home.display().to_string();
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    let mut dirs: Vec<PathBuf> = passwd
        .lines()
        .filter_map(|l| l.split(':').nth(5))
        .map(PathBuf::from)
        .filter(|h| {
            h.is_dir()
                && h != Path::new("/")
                && !hcp_adapter::NOT_A_SANDBOX.iter().any(|d| h.starts_with(d))
                && can_enter(h)
        })
        .collect();
    dirs.extend(
        ["/home", "/tmp", "/var", "/var/lib"]
            .iter()
            .map(PathBuf::from)
            .filter(|d| d.is_dir()),
    );
    assert!(!dirs.is_empty());
    for dir in dirs {
        let (out, v) = exec_json_in(&w, &dir, Some(&home), &["jail.env"]);
        assert_eq!(status(&out), 64, "{}: {}", dir.display(), w.render(&out));
        assert_eq!(v["code"], json!("bad_workdir"), "{}", dir.display());
    }
}
