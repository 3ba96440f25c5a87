//! What the proxy tests share: a proxy on a loopback listener of the host's namespace,
//! loopback servers (echo, one-shot HTTP, a Python file server over HTTPS), raw clients,
//! and visible skips.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use hcp_egress::{AllowList, ConnectionLog, Limits, Proxy, ProxyConfig, Resolve, StaticResolver};
use std::io::{BufRead, BufReader, Read, Write};

#[path = "../support/fixtures.rs"]
mod fixtures;
#[allow(unused_imports)]
pub use fixtures::{FileServer, HELLO, README, bare_repository, certificate, node};
use std::net::{IpAddr, Shutdown, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

/// Whether the run is CI's (`CI=true`), where a missing tool is a failure, not a skip.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Skips the running test because of `reason` (a failure under `CI=true`), printing
/// `skipped: TEST: REASON` where a plain `cargo test` shows it.
pub fn skip(reason: &str) {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("a test");
    assert!(!in_ci(), "CI=true and {test} cannot run: {reason}");
    let _ = writeln!(std::io::stderr().lock(), "skipped: {test}: {reason}");
    hcp_examples::skipped::record(test, reason);
}

/// A running proxy and its port.
pub struct Running {
    pub proxy: Proxy,
    pub port: u16,
}

impl Running {
    pub fn finish(self) -> ConnectionLog {
        self.proxy.finish()
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

/// A proxy serving `allow` (entries as in `config.json`) under key `packs.t.network`.
pub fn proxy(allow: &[&str], resolver: impl Resolve, limits: Limits) -> Running {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let config = ProxyConfig {
        allow: AllowList::parse(allow).unwrap(),
        key: "packs.t.network".into(),
        limits,
        resolver: Arc::new(resolver),
    };
    Running {
        proxy: Proxy::start(listener, config).unwrap(),
        port,
    }
}

/// A proxy with the default limits and a resolver that knows no name.
pub fn simple_proxy(allow: &[&str]) -> Running {
    proxy(allow, StaticResolver::new(), Limits::default())
}

/// A loopback listener nobody should reach: [`Untouched::assert_untouched`] fails if any
/// connection arrived.
pub struct Untouched {
    listener: TcpListener,
    pub port: u16,
}

impl Untouched {
    pub fn new() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        Self { listener, port }
    }

    pub fn assert_untouched(&self) {
        match self.listener.accept() {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Ok((_, peer)) => panic!(
                "the unlisted server on {} was reached from {peer}",
                self.port
            ),
            Err(e) => panic!("accept: {e}"),
        }
    }
}

/// A loopback echo server: each connection gets back what it sends, on a thread of its
/// own; the server lives as long as the test process.
pub fn echo_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { continue };
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                loop {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            if s.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                    }
                }
            });
        }
    });
    port
}

/// A loopback HTTP server that answers each request with `200 ok` and sends the head it
/// got on the channel.
pub fn http_server() -> (u16, mpsc::Receiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(s) = s else { continue };
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut r = BufReader::new(s);
                let mut head = String::new();
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    head.push_str(&line);
                    if line == "\r\n" {
                        break;
                    }
                }
                let _ = tx.send(head);
                let mut s = r.into_inner();
                let _ = s.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                );
            });
        }
    });
    (port, rx)
}

/// Connects to the proxy, sends `bytes`, half-closes when `close`, and reads the answer
/// to its end (at most 20 s).
pub fn exchange(port: u16, bytes: &[u8], close: bool) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(bytes).unwrap();
    if close {
        s.shutdown(Shutdown::Write).unwrap();
    }
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// The first line of an answer.
pub fn status(answer: &str) -> &str {
    answer.lines().next().unwrap_or("")
}

pub fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// The path of a program, if it is on `PATH`.
pub fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|f| f.is_file())
    })
}
