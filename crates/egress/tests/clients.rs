//! Real clients through the egress proxy (RUNTIME §5.5): `curl`, `git` over HTTPS (a
//! bare repository served as dumb HTTP), Python `urllib` and Node `fetch`, each with only
//! the proxy variables a call's child gets, reach a loopback HTTPS server that is listed
//! (its address literally, and a name resolving to it) and never a second, unlisted one;
//! every connection is in the log.
//!
//! The proxy here listens in the host's network namespace, so a client that ignored the
//! variables could still connect directly: that a program ignoring the proxy reaches
//! nothing is the call's network namespace's, tested through `hcp exec`
//! (`crates/hcp/tests/egress.rs`). A client or tool that is missing prints `skipped:`
//! (a failure under `CI=true`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{
    FileServer, HELLO, README, Running, Untouched, bare_repository, certificate, ip, node, proxy,
    skip, which,
};
use hcp_egress::{ConnectionLog, Limits, StaticResolver, Verdict};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// What every client test needs: a listed HTTPS server, an unlisted port, a certificate
/// the clients trust, a repository to clone.
struct World {
    dir: tempfile::TempDir,
    cert: PathBuf,
    listed: FileServer,
    unlisted: Untouched,
}

impl World {
    fn new() -> Option<Self> {
        let dir = tempfile::tempdir().unwrap();
        let Some(tls) = certificate(dir.path()) else {
            skip("`openssl` is needed to make the test server's certificate");
            return None;
        };
        if which("python3").is_none() {
            skip("`python3` is needed for the test HTTPS server");
            return None;
        }
        let www = dir.path().join("www");
        std::fs::create_dir(&www).unwrap();
        std::fs::write(www.join("hello.txt"), HELLO).unwrap();
        if which("git").is_some() {
            bare_repository(dir.path(), &www.join("repo.git"));
        }
        let listed = FileServer::start(&www, Some(&tls)).expect("the test HTTPS server starts");
        Some(Self {
            cert: tls.0,
            listed,
            unlisted: Untouched::new(),
            dir,
        })
    }

    /// A proxy listing the server's address and `listed.test` (which resolves to it).
    fn proxy(&self) -> Running {
        let p = self.listed.port;
        proxy(
            &[&format!("127.0.0.1:{p}"), &format!("listed.test:{p}")],
            StaticResolver::new().with("listed.test", &[ip("127.0.0.1")]),
            Limits::default(),
        )
    }

    fn listed_url(&self, host: &str, path: &str) -> String {
        format!("https://{host}:{}/{path}", self.listed.port)
    }

    fn unlisted_url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}/{path}", self.unlisted.port)
    }

    /// `program` with the environment a call's child gets under `{"allow": …}`: a cleared
    /// environment, `PATH`, a `HOME` of its own and the proxy variables.
    fn client(&self, program: &Path, proxy: &Running) -> Command {
        let home = self.dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let mut c = Command::new(program);
        c.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &home)
            .env("NODE_USE_ENV_PROXY", "1")
            .current_dir(self.dir.path());
        for k in ["HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"] {
            c.env(k, proxy.url())
                .env(k.to_ascii_lowercase(), proxy.url());
        }
        c
    }

    /// The log of `proxy`: every connection went to the listed server or was refused
    /// for the unlisted one, at least `allowed` reached it, at least one was refused; the
    /// unlisted server was never reached.
    fn check(&self, proxy: Running, allowed: u64, what: &str) -> ConnectionLog {
        let log = proxy.finish();
        self.unlisted.assert_untouched();
        let mut reached = 0;
        for c in log.first() {
            match c.verdict {
                Verdict::Allowed => {
                    assert_eq!(c.port, Some(self.listed.port), "{what}: {c:?}");
                    assert_eq!(c.address, Some(ip("127.0.0.1")), "{what}: {c:?}");
                    assert!(c.received > 0, "{what}: {c:?}");
                    reached += 1;
                }
                Verdict::Refused => {
                    assert_eq!(c.port, Some(self.unlisted.port), "{what}: {c:?}");
                    assert_eq!(c.reason, Some("port_not_listed"), "{what}: {c:?}");
                }
            }
        }
        assert!(reached >= allowed, "{what}: {:?}", log.first());
        assert!(log.refused_total() >= 1, "{what}: {:?}", log.first());
        log
    }
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn curl_reaches_the_listed_server_only() {
    let Some(w) = World::new() else { return };
    let Some(curl) = which("curl") else {
        return skip("`curl` is not installed");
    };
    let p = w.proxy();
    for host in ["127.0.0.1", "listed.test"] {
        let o = w
            .client(&curl, &p)
            .args(["-sS", "--fail", "--max-time", "20", "--cacert"])
            .arg(&w.cert)
            .arg(w.listed_url(host, "hello.txt"))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
        assert_eq!(String::from_utf8_lossy(&o.stdout), HELLO);
    }
    let o = w
        .client(&curl, &p)
        .args(["-sS", "--max-time", "20", "--cacert"])
        .arg(&w.cert)
        .arg(w.unlisted_url("hello.txt"))
        .output()
        .unwrap();
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("403"),
        "{}",
        text(&o)
    );
    let log = w.check(p, 2, "curl");
    assert_eq!(log.total(), 3);
    assert_eq!(
        log.first()
            .iter()
            .map(|c| c.dest.clone().unwrap())
            .collect::<Vec<_>>(),
        ["127.0.0.1", "listed.test", "127.0.0.1"]
    );
}

#[test]
fn git_clones_over_https_from_the_listed_server_only() {
    let Some(w) = World::new() else { return };
    let Some(git) = which("git") else {
        return skip("`git` is not installed");
    };
    let p = w.proxy();
    let clone = |url: String, into: &str| {
        w.client(&git, &p)
            .env("GIT_SSL_CAINFO", &w.cert)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_TERMINAL_PROMPT", "0")
            .args(["clone", "-q", &url, into])
            .output()
            .unwrap()
    };
    let o = clone(w.listed_url("127.0.0.1", "repo.git"), "cloned");
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        std::fs::read_to_string(w.dir.path().join("cloned/README")).unwrap(),
        README
    );
    let o = clone(w.unlisted_url("repo.git"), "refused");
    assert!(!o.status.success(), "{}", text(&o));
    w.check(p, 1, "git");
}

#[test]
fn python_urllib_reaches_the_listed_server_only() {
    let Some(w) = World::new() else { return };
    let Some(python) = which("python3") else {
        return skip("`python3` is not installed");
    };
    let p = w.proxy();
    let script = [
        "import ssl, sys, urllib.request",
        "ctx = ssl.create_default_context(cafile=sys.argv[1])",
        "try:",
        "    sys.stdout.write(urllib.request.urlopen(sys.argv[2], context=ctx, timeout=20).read().decode())",
        "except OSError as e:",
        "    sys.exit(f'refused: {e}')",
    ]
    .join("\n");
    let run = |url: String| {
        w.client(&python, &p)
            .args(["-c", &script])
            .arg(&w.cert)
            .arg(url)
            .output()
            .unwrap()
    };
    let o = run(w.listed_url("127.0.0.1", "hello.txt"));
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), HELLO);
    let o = run(w.unlisted_url("hello.txt"));
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("403"),
        "{}",
        text(&o)
    );
    w.check(p, 1, "python");
}

#[test]
fn node_fetch_reaches_the_listed_server_only() {
    let Some(w) = World::new() else { return };
    let Some(node) = node() else {
        return skip("no Node 22.19 or later (`HCP_TEST_NODE`, or the one .ci/run installs)");
    };
    let p = w.proxy();
    let script = "fetch(process.argv[1]).then(r => r.text()).then(t => process.stdout.write(t))\
        .catch(e => { console.error('refused:', e.cause ? e.cause.message : e.message); process.exit(1); })";
    let run = |url: String| {
        w.client(&node, &p)
            .env("NODE_EXTRA_CA_CERTS", &w.cert)
            .args(["-e", script, &url])
            .output()
            .unwrap()
    };
    let o = run(w.listed_url("127.0.0.1", "hello.txt"));
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), HELLO);
    let o = run(w.unlisted_url("hello.txt"));
    assert!(!o.status.success(), "{}", text(&o));
    w.check(p, 1, "node");
}
