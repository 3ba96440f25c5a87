//! The egress proxy's cost per connection (RUNTIME §5.5), in process, on loopback; never a
//! timed test. Run with `cargo bench -p hcp-egress --bench proxy`; figures go to
//! BENCHMARKS.md ("Network by destination").
//!
//! Each iteration opens one connection to a loopback echo server, sends 32 bytes and reads
//! them back, then closes, so the figure is what a client pays per connection (an HTTPS
//! request without keep-alive is one such connection plus its TLS exchange, which the
//! proxy only relays):
//!
//! - `direct`: straight to the echo server (what a `host` call's child does);
//! - `connect`: through a running [`Proxy`], `CONNECT 127.0.0.1:PORT` (its address listed
//!   literally), the `200`, then the same exchange (what a `{"allow": …}` call's child
//!   does: head parsed, target checked, connection made, bytes relayed);
//! - `connect_name`: the same with a listed name, resolved by the proxy through a table
//!   (the system's resolver costs what `/etc/hosts` or DNS cost; not measured here);
//! - `refused`: an unlisted target, answered `403`.
//!
//! The arms run back to back in one run, so their differences hold on a loaded machine;
//! `connect − direct` is the proxy's added time per connection (goal ≤ 0.3 ms).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use criterion::{Criterion, criterion_group, criterion_main};
use hcp_egress::{AllowList, Limits, Proxy, ProxyConfig, StaticResolver};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;

fn echo_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { continue };
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 || s.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    port
}

fn exchange(s: &mut TcpStream) {
    let msg = [7u8; 32];
    s.write_all(&msg).unwrap();
    let mut back = [0u8; 32];
    s.read_exact(&mut back).unwrap();
}

fn through(proxy: u16, target: &str) {
    let mut s = TcpStream::connect(("127.0.0.1", proxy)).unwrap();
    s.set_nodelay(true).unwrap();
    s.write_all(format!("CONNECT {target} HTTP/1.1\r\n\r\n").as_bytes())
        .unwrap();
    let mut ok = [0u8; 39];
    s.read_exact(&mut ok).unwrap();
    assert!(ok.starts_with(b"HTTP/1.1 200"));
    exchange(&mut s);
}

fn bench(c: &mut Criterion) {
    let echo = echo_server();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let proxy_port = listener.local_addr().unwrap().port();
    let allow = AllowList::parse(&[
        format!("127.0.0.1:{echo}"),
        format!("echo.bench.example:{echo}"),
    ])
    .unwrap();
    let resolver =
        StaticResolver::new().with("echo.bench.example", &["127.0.0.1".parse().unwrap()]);
    let proxy = Proxy::start(
        listener,
        ProxyConfig {
            allow,
            key: "packs.bench.network".into(),
            limits: Limits::default(),
            resolver: Arc::new(resolver),
        },
    )
    .unwrap();
    let mut g = c.benchmark_group("egress");
    g.bench_function("direct", |b| {
        b.iter(|| {
            let mut s = TcpStream::connect(("127.0.0.1", echo)).unwrap();
            s.set_nodelay(true).unwrap();
            exchange(&mut s);
        })
    });
    let literal = format!("127.0.0.1:{echo}");
    g.bench_function("connect", |b| b.iter(|| through(proxy_port, &literal)));
    let name = format!("echo.bench.example:{echo}");
    g.bench_function("connect_name", |b| b.iter(|| through(proxy_port, &name)));
    g.bench_function("refused", |b| {
        b.iter(|| {
            let mut s = TcpStream::connect(("127.0.0.1", proxy_port)).unwrap();
            s.write_all(b"CONNECT unlisted.example:443 HTTP/1.1\r\n\r\n")
                .unwrap();
            let mut answer = Vec::new();
            s.read_to_end(&mut answer).unwrap();
            assert!(answer.starts_with(b"HTTP/1.1 403"));
        })
    });
    g.finish();
    let log = proxy.finish();
    assert!(log.total() > 0);
}

criterion_group!(benches, bench);
criterion_main!(benches);
