//! Issue 12, "`network: deny` is TCP only": through the built `hcp`, as root and as
//! `nobody`, `deny` (the default of every land, `sandbox.network` or the pack's
//! `network` for the others) is total: UDP to 127.0.0.1 and to port 53, `getaddrinfo`, a
//! raw socket, a netlink socket, `io_uring_setup`, a pathname Unix socket outside the
//! sandbox and an abstract one all fail inside the child, and nothing reaches the
//! listeners (RUNTIME §5 "Network").

#![allow(clippy::unwrap_used)]

mod common;
mod confine_common;

use confine_common::{Cw, assert_denied, assert_ok, users};
use serde_json::json;
use std::os::unix::net::UnixListener;

#[test]
fn deny_is_total_in_every_land() {
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let udp_port = udp.local_addr().unwrap().port().to_string();
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let tcp_port = tcp.local_addr().unwrap().port().to_string();
    let name = format!("hcp-test-net-{}", std::process::id());
    let abstract_listener = {
        use std::os::linux::net::SocketAddrExt;
        let a = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        UnixListener::bind_addr(&a).unwrap()
    };
    abstract_listener.set_nonblocking(true).unwrap();
    for user in users() {
        let cw = Cw::new(user, &["hostile"]);
        let tok = cw.session("agent-1", &["--project", "p1"]);
        cw.grant("agent-1", "hostile", &["verb.exec.read"]);
        let sock = cw.w.root().join("outside.sock");
        let unix = UnixListener::bind(&sock).unwrap();
        unix.set_nonblocking(true).unwrap();
        cw.own(&sock);
        let sockp = sock.display().to_string();
        let attempts: Vec<Vec<&str>> = vec![
            vec!["udp", "127.0.0.1", &udp_port],
            vec!["udp", "127.0.0.1", "53"],
            vec!["tcp", "127.0.0.1", &tcp_port],
            vec!["resolve", "example.com"],
            vec!["raw"],
            vec!["netlink"],
            vec!["packet"],
            vec!["inet6"],
            vec!["io-uring"],
            vec!["unix-connect", &sockp],
            vec!["abstract", &name],
        ];
        // Every land by default; also when the operator says so (here per pack for
        // `personal` and for every pack for `brain`).
        for (land, config) in [
            ("local", json!({})),
            ("personal", json!({})),
            (
                "personal",
                json!({"packs": {"hostile": {"network": "deny"}}}),
            ),
            ("brain", json!({"sandbox": {"network": "deny"}})),
        ] {
            cw.config(&config);
            let verb = format!("hostile.{land}.try");
            for a in &attempts {
                let mut args = vec![verb.as_str()];
                args.extend_from_slice(a);
                let (_, v) = cw.exec(Some(&tok), &args);
                assert_denied(&v, &format!("{user:?} {land} {a:?}"));
                assert_eq!(v["sandbox"]["network"]["mode"], "deny", "{v}");
                assert_eq!(v["sandbox"]["network"]["enforced"], true, "{v}");
            }
            let (_, v) = cw.exec(Some(&tok), &[&verb, "socketpair"]);
            assert_ok(&v, "socketpair under deny");
        }
        let mut buf = [0u8; 16];
        assert!(
            udp.recv_from(&mut buf).is_err(),
            "{user:?}: a datagram arrived"
        );
        assert!(tcp.accept().is_err(), "{user:?}: a tcp connection arrived");
        assert!(
            unix.accept().is_err(),
            "{user:?}: a unix connection arrived"
        );
        assert!(
            abstract_listener.accept().is_err(),
            "{user:?}: an abstract connection arrived"
        );
        // `host` (the operator's word): TCP reaches the listener; an abstract socket made
        // outside the call stays out of reach (no Unix socket at all, and Landlock's
        // scope, ABI 6).
        cw.config(&json!({"packs": {"hostile": {"network": "host"}}}));
        let (_, v) = cw.exec(
            Some(&tok),
            &["hostile.personal.try", "tcp", "127.0.0.1", &tcp_port],
        );
        assert_ok(&v, "tcp with the host's network");
        assert!(tcp.accept().is_ok(), "the allowed connection arrived");
        assert_eq!(v["sandbox"]["network"]["mode"], "host", "{v}");
        if hcp_adapter::LandlockSupport::probe().abi() >= hcp_adapter::SCOPE_LANDLOCK_ABI {
            let (_, v) = cw.exec(Some(&tok), &["hostile.personal.try", "abstract", &name]);
            assert_denied(&v, "an abstract socket outside the call");
        } else {
            common::skip::skip("abstract socket scoping needs landlock abi 6");
        }
    }
}
