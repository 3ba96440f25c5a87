//! The egress proxy on a loopback listener (RUNTIME §5.5), driven with raw requests: what
//! a listed destination gets, every kind of bad input, and that each connection is in the
//! log. Nothing here connects anywhere but to loopback servers of the test: the refused
//! addresses (`10.0.0.1`, `169.254.169.254` …) are refused before any connection.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Untouched, echo_server, exchange, http_server, ip, proxy, simple_proxy, status};
use hcp_egress::{Connection, Limits, StaticResolver, Verdict};
use pretty_assertions::assert_eq;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

fn only(log: &hcp_egress::ConnectionLog) -> Connection {
    assert_eq!(log.total(), 1, "{:?}", log.first());
    log.first()[0].clone()
}

#[test]
fn a_listed_address_is_tunnelled_and_counted() {
    let echo = echo_server();
    let p = simple_proxy(&[&format!("127.0.0.1:{echo}")]);
    let answer = exchange(
        p.port,
        format!("CONNECT 127.0.0.1:{echo} HTTP/1.1\r\nHost: 127.0.0.1:{echo}\r\n\r\nhello")
            .as_bytes(),
        true,
    );
    assert_eq!(answer, "HTTP/1.1 200 Connection established\r\n\r\nhello");
    let c = only(&p.finish());
    assert_eq!(
        c,
        Connection {
            dest: Some("127.0.0.1".into()),
            port: Some(echo),
            kind: Some("connect"),
            address: Some(ip("127.0.0.1")),
            sent: 5,
            received: 5,
            verdict: Verdict::Allowed,
            reason: None,
        }
    );
}

#[test]
fn unlisted_destinations_are_refused_and_never_reached() {
    let other = Untouched::new();
    let echo = echo_server();
    let p = simple_proxy(&[&format!("127.0.0.1:{echo}"), "api.example.com:443"]);
    let mut reasons = Vec::new();
    for (target, reason) in [
        (format!("127.0.0.1:{}", other.port), "port_not_listed"),
        ("[::1]:443".to_owned(), "not_listed"),
        ("169.254.169.254:80".to_owned(), "not_listed"),
        ("10.0.0.1:80".to_owned(), "not_listed"),
        ("localhost:443".to_owned(), "not_listed"),
        ("evil.example:443".to_owned(), "not_listed"),
        ("api.example.com:22".to_owned(), "port_not_listed"),
    ] {
        let answer = exchange(
            p.port,
            format!("CONNECT {target} HTTP/1.1\r\n\r\n").as_bytes(),
            false,
        );
        assert_eq!(status(&answer), "HTTP/1.1 403 Forbidden", "{target}");
        assert!(answer.contains("packs.t.network"), "{answer}");
        assert!(answer.contains(&format!("`{target}`")), "{answer}");
        reasons.push(reason);
    }
    other.assert_untouched();
    let log = p.finish();
    let logged: Vec<_> = log.first().iter().map(|c| c.reason.unwrap()).collect();
    assert_eq!(logged, reasons);
    assert_eq!(
        logged,
        [
            "port_not_listed",
            "not_listed",
            "not_listed",
            "not_listed",
            "not_listed",
            "not_listed",
            "port_not_listed"
        ]
    );
    assert!(
        log.first()
            .iter()
            .all(|c| c.verdict == Verdict::Refused && c.address.is_none())
    );
    let (refused, more) = log.refused_json();
    assert_eq!(more, 0);
    assert_eq!(
        refused[0],
        serde_json::json!({"dest": "127.0.0.1", "port": other.port, "count": 1})
    );
    assert_eq!(
        refused[6],
        serde_json::json!({"dest": "api.example.com", "port": 22, "count": 1})
    );
}

#[test]
fn a_listed_name_whose_answer_is_not_public_reaches_nothing() {
    let echo = echo_server();
    let resolver = StaticResolver::new()
        .with("loop.example", &[ip("127.0.0.1")])
        .with("private.example", &[ip("10.0.0.1")])
        .with("metadata.example", &[ip("169.254.169.254")])
        .with("v6loop.example", &[ip("::1")])
        .with("mixed.example", &[ip("93.184.215.14"), ip("192.168.1.1")])
        .with("listed-loop.example", &[ip("127.0.0.1")]);
    let p = proxy(
        &[
            &format!("loop.example:{echo}"),
            "private.example:80",
            "metadata.example:80",
            "v6loop.example:80",
            "mixed.example:443",
            &format!("listed-loop.example:{echo}"),
            // The address named literally: a name resolving to it may be reached.
            &format!("127.0.0.1:{echo}"),
        ],
        resolver,
        Limits::default(),
    );
    for (target, class) in [
        ("private.example:80", "private"),
        ("metadata.example:80", "link_local"),
        ("v6loop.example:80", "loopback"),
        ("mixed.example:443", "private"),
    ] {
        let answer = exchange(
            p.port,
            format!("CONNECT {target} HTTP/1.1\r\n\r\n").as_bytes(),
            false,
        );
        assert_eq!(
            status(&answer),
            "HTTP/1.1 403 Forbidden",
            "{target}: {answer}"
        );
        assert!(
            answer.contains(class.replace('_', "-").as_str()),
            "{answer}"
        );
    }
    // The literal entry admits the loopback address for that port.
    let answer = exchange(
        p.port,
        format!("CONNECT listed-loop.example:{echo} HTTP/1.1\r\n\r\nping").as_bytes(),
        true,
    );
    assert_eq!(answer, "HTTP/1.1 200 Connection established\r\n\r\nping");
    let log = p.finish();
    let seen: Vec<_> = log
        .first()
        .iter()
        .map(|c| (c.dest.clone().unwrap(), c.verdict, c.reason, c.address))
        .collect();
    assert_eq!(
        seen,
        [
            (
                "private.example".into(),
                Verdict::Refused,
                Some("private"),
                Some(ip("10.0.0.1"))
            ),
            (
                "metadata.example".into(),
                Verdict::Refused,
                Some("link_local"),
                Some(ip("169.254.169.254"))
            ),
            (
                "v6loop.example".into(),
                Verdict::Refused,
                Some("loopback"),
                Some(ip("::1"))
            ),
            (
                "mixed.example".into(),
                Verdict::Refused,
                Some("private"),
                Some(ip("192.168.1.1"))
            ),
            (
                "listed-loop.example".into(),
                Verdict::Allowed,
                None,
                Some(ip("127.0.0.1"))
            ),
        ]
    );
}

#[test]
fn a_name_that_does_not_resolve_is_a_bad_gateway() {
    let p = simple_proxy(&["nowhere.example:443"]);
    let answer = exchange(
        p.port,
        b"CONNECT nowhere.example:443 HTTP/1.1\r\n\r\n",
        false,
    );
    assert_eq!(status(&answer), "HTTP/1.1 502 Bad Gateway");
    let c = only(&p.finish());
    assert_eq!(
        (c.verdict, c.reason),
        (Verdict::Allowed, Some("resolve_failed"))
    );
}

#[test]
fn plain_http_is_forwarded_in_origin_form() {
    let (port, heads) = http_server();
    let other = Untouched::new();
    let p = simple_proxy(&[&format!("127.0.0.1:{port}")]);
    let answer = exchange(
        p.port,
        format!(
            "GET http://127.0.0.1:{port}/a?b=c HTTP/1.1\r\nHost: elsewhere.example\r\nProxy-Authorization: Basic e30=\r\nConnection: keep-alive\r\nAccept: */*\r\n\r\n"
        )
        .as_bytes(),
        false,
    );
    assert_eq!(status(&answer), "HTTP/1.1 200 OK");
    assert!(answer.ends_with("ok"), "{answer}");
    let answer_len = answer.len() as u64;
    assert_eq!(
        heads.recv_timeout(Duration::from_secs(20)).unwrap(),
        format!(
            "GET /a?b=c HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        )
    );
    // An absolute URI to an unlisted host is refused like a tunnel.
    let answer = exchange(
        p.port,
        format!("GET http://127.0.0.1:{}/ HTTP/1.1\r\n\r\n", other.port).as_bytes(),
        false,
    );
    assert_eq!(status(&answer), "HTTP/1.1 403 Forbidden");
    other.assert_untouched();
    let log = p.finish();
    let c = &log.first()[0];
    assert_eq!(
        (c.kind, c.verdict, c.received),
        (Some("forward"), Verdict::Allowed, answer_len)
    );
    let c = &log.first()[1];
    assert_eq!(
        (c.kind, c.verdict, c.reason),
        (Some("forward"), Verdict::Refused, Some("port_not_listed"))
    );
}

#[test]
fn malformed_huge_and_slow_heads_are_answered_and_closed() {
    let limits = Limits {
        head_timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let p = proxy(&["a.example:443"], StaticResolver::new(), limits);
    let cases: Vec<(Vec<u8>, &str, &str)> = vec![
        (
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n".to_vec(),
            "HTTP/1.1 400 Bad Request",
            "malformed",
        ),
        (
            b"GET / HTTP/1.1\r\nHost: a.example\r\n\r\n".to_vec(),
            "HTTP/1.1 400 Bad Request",
            "unsupported",
        ),
        (
            b"GET https://a.example/ HTTP/1.1\r\n\r\n".to_vec(),
            "HTTP/1.1 400 Bad Request",
            "unsupported",
        ),
        (
            b"CONNECT a.example HTTP/1.1\r\n\r\n".to_vec(),
            "HTTP/1.1 400 Bad Request",
            "bad_target",
        ),
        (
            b"CONNECT 127.1:443 HTTP/1.1\r\n\r\n".to_vec(),
            "HTTP/1.1 400 Bad Request",
            "bad_target",
        ),
        (
            b"CONNECT a.example.:443 HTTP/1.1\r\n\r\n".to_vec(),
            "HTTP/1.1 400 Bad Request",
            "bad_target",
        ),
        (
            {
                let mut v = b"CONNECT a.example:443 HTTP/1.1\r\nX-Big: ".to_vec();
                v.extend(std::iter::repeat_n(b'x', 9000));
                v
            },
            "HTTP/1.1 431 Request Header Fields Too Large",
            "head_too_large",
        ),
        (
            {
                let many: String = (0..150).map(|i| format!("X-{i}: v\r\n")).collect();
                format!("CONNECT a.example:443 HTTP/1.1\r\n{many}\r\n").into_bytes()
            },
            "HTTP/1.1 431 Request Header Fields Too Large",
            "head_too_large",
        ),
        // Never ends its head: answered once the head timeout passes.
        (
            b"CONNECT a.example:443 HTTP/1.1\r\nX-Slow: ".to_vec(),
            "HTTP/1.1 408 Request Timeout",
            "head_timeout",
        ),
    ];
    for (bytes, want, _) in &cases {
        let answer = exchange(p.port, bytes, false);
        assert_eq!(
            status(&answer),
            *want,
            "{}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(60)])
        );
    }
    let log = p.finish();
    let reasons: Vec<_> = log.first().iter().map(|c| c.reason.unwrap()).collect();
    let want: Vec<_> = cases.iter().map(|c| c.2).collect();
    assert_eq!(reasons, want);
    assert!(log.first().iter().all(|c| c.verdict == Verdict::Refused));
}

#[test]
fn a_thousand_connections_are_bounded_and_each_counted() {
    let echo = echo_server();
    let p = simple_proxy(&[&format!("127.0.0.1:{echo}")]);
    let cap = hcp_egress::proxy::DEFAULT_MAX_CONNECTIONS;
    // The first `cap` hold a tunnel open each (the 200 says the proxy serves it) …
    let mut held = Vec::new();
    for _ in 0..cap {
        let mut s = TcpStream::connect(("127.0.0.1", p.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.write_all(format!("CONNECT 127.0.0.1:{echo} HTTP/1.1\r\n\r\n").as_bytes())
            .unwrap();
        let mut buf = [0u8; 39];
        s.read_exact(&mut buf).unwrap();
        assert!(buf.starts_with(b"HTTP/1.1 200"));
        held.push(s);
    }
    // … so each of the rest is answered 503 at once.
    for _ in cap..1000 {
        let answer = exchange(p.port, b"", false);
        assert_eq!(status(&answer), "HTTP/1.1 503 Service Unavailable");
    }
    // A held tunnel still works.
    held[0].write_all(b"ping").unwrap();
    let mut buf = [0u8; 4];
    held[0].read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"ping");
    let log = p.finish();
    assert_eq!(log.total(), 1000);
    assert_eq!(log.refused_total(), 1000 - cap as u64);
    let outcome = log.outcome_json();
    let others = outcome["others"].as_array().unwrap();
    let counted: u64 = others
        .iter()
        .map(|o| o["count"].as_u64().unwrap())
        .sum::<u64>()
        + outcome["first"].as_array().unwrap().len() as u64;
    assert_eq!(counted, 1000);
    assert!(others.iter().any(|o| o["verdict"] == "refused" && o["count"].as_u64().unwrap() == 1000 - cap as u64));
    // The proxy's end closed every held tunnel.
    for mut s in held {
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
    }
}

#[test]
fn the_end_of_the_call_ends_open_tunnels_with_their_bytes_counted() {
    let echo = echo_server();
    let p = simple_proxy(&[&format!("127.0.0.1:{echo}")]);
    let mut s = TcpStream::connect(("127.0.0.1", p.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(format!("CONNECT 127.0.0.1:{echo} HTTP/1.1\r\n\r\n").as_bytes())
        .unwrap();
    let mut buf = [0u8; 39];
    s.read_exact(&mut buf).unwrap();
    s.write_all(b"0123456789").unwrap();
    let mut echoed = [0u8; 10];
    s.read_exact(&mut echoed).unwrap();
    // A second connection that never sends its head, and a third not yet taken.
    let idle = TcpStream::connect(("127.0.0.1", p.port)).unwrap();
    let log = p.finish();
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    assert_eq!(log.total(), 2);
    let tunnel = log.first().into_iter().find(|c| c.dest.is_some()).unwrap();
    assert_eq!(
        (tunnel.sent, tunnel.received, tunnel.verdict),
        (10, 10, Verdict::Allowed)
    );
    let other = log.first().into_iter().find(|c| c.dest.is_none()).unwrap();
    assert_eq!(
        (other.verdict, other.reason),
        (Verdict::Refused, Some("call_ended"))
    );
    drop(idle);
}

#[test]
fn the_system_resolver_answers_from_the_hosts_file_in_a_static_build() {
    use hcp_egress::{Resolve, SystemResolver};
    // `localhost` is in every /etc/hosts; this test binary is linked like `hcp`.
    let a = SystemResolver.resolve("localhost", 80).unwrap();
    assert!(
        a.contains(&ip("127.0.0.1")) || a.contains(&ip("::1")),
        "{a:?}"
    );
    let echo = echo_server();
    let p = proxy(
        &[
            &format!("localhost:{echo}"),
            &format!("127.0.0.1:{echo}"),
            &format!("[::1]:{echo}"),
        ],
        SystemResolver,
        Limits::default(),
    );
    let answer = exchange(
        p.port,
        format!("CONNECT localhost:{echo} HTTP/1.1\r\n\r\nhi").as_bytes(),
        true,
    );
    assert!(
        answer.starts_with("HTTP/1.1 200") || answer.starts_with("HTTP/1.1 502"),
        "{answer}"
    );
    let c = only(&p.finish());
    assert_eq!(c.verdict, Verdict::Allowed, "{c:?}");
}

/// `hcp mcp` runs its calls inside a tokio runtime of its own: a proxy started from
/// there runs its runtime on its own thread and never nests `block_on`.
#[tokio::test]
async fn a_proxy_starts_and_ends_inside_another_runtime() {
    let echo = echo_server();
    let p = simple_proxy(&[&format!("127.0.0.1:{echo}")]);
    let port = p.port;
    let answer = tokio::task::spawn_blocking(move || {
        exchange(
            port,
            format!("CONNECT 127.0.0.1:{echo} HTTP/1.1\r\n\r\nx").as_bytes(),
            true,
        )
    })
    .await
    .unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(p.finish().total(), 1);
}
