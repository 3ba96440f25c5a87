//! Fixtures of the egress tests, shared by `crates/egress/tests` and
//! `crates/hcp/tests/egress.rs` (which includes this file by path): a self-signed
//! certificate, a bare repository served as dumb HTTP, the Python file server, a Node that
//! honours `NODE_USE_ENV_PROXY`. Only the standard library.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// What the served file holds.
pub const HELLO: &str = "hello through hcp\n";

/// What the cloned repository's `README` holds.
pub const README: &str = "cloned through hcp\n";

/// A self-signed certificate in `dir` (`cert.pem`, `key.pem`) for `IP:127.0.0.1` and
/// `DNS:listed.test`, made with `openssl`; `None` without it.
pub fn certificate(dir: &Path) -> Option<(PathBuf, PathBuf)> {
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    let ok = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .args(["ec_paramgen_curve:prime256v1", "-nodes", "-days", "2"])
        .args(["-subj", "/CN=hcp-egress-test"])
        .args(["-addext", "subjectAltName=IP:127.0.0.1,DNS:listed.test"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    ok.then_some((cert, key))
}

/// A bare repository at `bare` with one commit (a `README`), ready for dumb HTTP (`git
/// update-server-info`); its work tree is made in `dir/repo-work`.
pub fn bare_repository(dir: &Path, bare: &Path) {
    let work = dir.join("repo-work");
    let git = |args: &[&str], cwd: &Path| {
        let o = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(["-c", "init.defaultBranch=main"])
            .args(args)
            .current_dir(cwd)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "git {args:?}: {err}");
    };
    std::fs::create_dir_all(&work).unwrap();
    git(&["init", "-q"], &work);
    std::fs::write(work.join("README"), README).unwrap();
    git(&["add", "README"], &work);
    git(&["commit", "-qm", "first"], &work);
    let (w, b) = (work.to_str().unwrap(), bare.to_str().unwrap());
    git(&["clone", "-q", "--bare", w, b], dir);
    git(&["update-server-info"], bare);
}

/// The Python file server (`https_server.py` beside this file) of `root` on a loopback
/// port, over HTTPS with `tls`; killed on drop.
pub struct FileServer {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
}

impl FileServer {
    /// Starts it; `None` when `python3` cannot run it.
    pub fn start(root: &Path, tls: Option<&(PathBuf, PathBuf)>) -> Option<Self> {
        // From either crate that includes this file (`crates/egress`, `crates/hcp`).
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../egress/tests/support/https_server.py");
        let (cert, key) = match tls {
            Some((c, k)) => (c.display().to_string(), k.display().to_string()),
            None => ("-".into(), "-".into()),
        };
        let mut child = Command::new("python3")
            .arg(script)
            .args([&cert, &key])
            .arg(root)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .ok()?;
        let mut line = String::new();
        BufReader::new(child.stdout.take()?)
            .read_line(&mut line)
            .ok()?;
        let port = line.trim().parse().ok()?;
        Some(Self { child, port })
    }
}

impl Drop for FileServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A Node that honours `NODE_USE_ENV_PROXY` (22.19 or later): `HCP_TEST_NODE`, the one
/// `.ci/run` installs (`~/.cache/hcp-ci/inspector`), or the `PATH`'s when new enough; its
/// resolved path.
pub fn node() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("HCP_TEST_NODE") {
        candidates.push(p.into());
    }
    if let Some(home) = std::env::var_os("HOME") {
        let n = PathBuf::from(home).join(".cache/hcp-ci/inspector/node_modules/.bin/node");
        candidates.push(n);
    }
    if let Some(p) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&p).map(|d| d.join("node")));
    }
    candidates
        .into_iter()
        .filter_map(|n| n.canonicalize().ok())
        .find(|n| {
            let Ok(out) = Command::new(n).arg("--version").output() else {
                return false;
            };
            let v = String::from_utf8_lossy(&out.stdout);
            let mut parts = v.trim().trim_start_matches('v').split('.');
            let mut next = || {
                parts
                    .next()
                    .and_then(|p| p.parse::<u32>().ok())
                    .unwrap_or(0)
            };
            let (major, minor) = (next(), next());
            major > 22 || (major == 22 && minor >= 19)
        })
}
