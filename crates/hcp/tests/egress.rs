//! Issue 25, network by destination, through the built `hcp` (RUNTIME §5.3, §5.5): a pack
//! whose network is `{"allow": […]}` runs in a network namespace of its own and reaches,
//! through hcp's egress proxy, only what its entries name. `curl`, `git` over HTTPS,
//! Python `urllib` and Node `fetch` reach a loopback HTTPS server listed by address and
//! never a second, unlisted one; loopback, private and metadata addresses stay out unless
//! named literally; a program that ignores the proxy, UDP and DNS reach nothing; 1,000
//! connections are bounded and counted; every connection is in the call's outcome record.
//! As root and, through `setpriv`, as `nobody`.
//!
//! Nothing here sends a packet beyond loopback: the refused addresses (`10.0.0.1`,
//! `169.254.169.254` …) are refused by the proxy before any connection, and what the child
//! tries directly targets loopback servers of the test (which its own namespace does not
//! hold).
//!
//! Until the call's network namespace is built (the view of issue 23), each test prints
//! `skipped: the network-namespace mode is not built yet` (a failure under `CI=true`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod confine_common;
#[path = "../../egress/tests/support/fixtures.rs"]
mod fixtures;

use confine_common::{As, Cw, users};
use serde_json::{Value, json};
use std::net::{TcpListener, UdpSocket};
use std::path::{Path, PathBuf};

use fixtures::{FileServer, HELLO, bare_repository, certificate};

/// The `net` pack: one verb per client, each `read` in `personal` land, the test's CA
/// certificate `ca` written into each; Python and Node run scripts of the pack (lint
/// refuses an interpreter given code on its command line).
fn net_pack(cw: &Cw, ca: &Path, node: Option<&Path>) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = cw.w.root().join("src/net");
    std::fs::create_dir_all(&dir).unwrap();
    let ca = ca.display().to_string();
    let mut verbs = serde_json::Map::new();
    let mut rows = serde_json::Map::new();
    let mut add = |key: &str, cli: Value| {
        verbs.insert(
            key.into(),
            json!({"description": format!("{key} through the proxy."), "cli": cli}),
        );
        rows.insert(
            key.into(),
            json!({"operation": "read", "privacy": {"land": "personal"}}),
        );
    };
    add(
        "curl.get",
        json!([
            "curl",
            "-sS",
            "--fail",
            "--max-time",
            "20",
            "--cacert",
            ca,
            "--",
            "{{url}}"
        ]),
    );
    add(
        "curl.many",
        json!([
            "curl",
            "-sS",
            "--max-time",
            "60",
            "--parallel",
            "--parallel-max",
            "300",
            "--cacert",
            ca,
            "--",
            "{{url}}"
        ]),
    );
    add(
        "git.clone",
        json!([
            "git",
            "-c",
            format!("http.sslCAInfo={ca}"),
            "clone",
            "-q",
            "--",
            "{{url}}",
            // A read verb's home is read-only: the clone goes to the call's scratch.
            "/tmp/cloned"
        ]),
    );
    let script = |name: &str, text: String| {
        let f = dir.join(name);
        std::fs::write(&f, text).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    script(
        "fetch.py",
        format!(
            "#!/usr/bin/python3\nimport ssl, sys, urllib.request\n\
             ctx = ssl.create_default_context(cafile={ca:?})\n\
             sys.stdout.write(urllib.request.urlopen(sys.argv[1], context=ctx, timeout=20).read().decode())\n"
        ),
    );
    add("python.get", json!(["./fetch.py", "{{url}}"]));
    if let Some(node) = node {
        // `NODE_EXTRA_CA_CERTS` is read at start only and a composite verb has no
        // environment of its own: this client checks reachability, not the chain.
        script(
            "fetch.js",
            format!(
                "#!{}\nprocess.env.NODE_TLS_REJECT_UNAUTHORIZED = '0';\n\
                 fetch(process.argv[2]).then(r => r.text()).then(t => process.stdout.write(t))\n\
                 .catch(e => {{ console.error(String(e.cause || e)); process.exit(1); }});\n",
                node.join("node").display()
            ),
        );
        add("node.get", json!(["./fetch.js", "{{url}}"]));
    }
    let surface = json!({
        "id": "net", "name": "Net", "kind": "composite", "binding": {"mode": "public"},
        "verbs": verbs,
    });
    let policy = json!({"surface_id": "net", "version": 1, "stimuli": {}, "verbs": rows});
    std::fs::write(dir.join("surface.json"), format!("{surface:#}")).unwrap();
    std::fs::write(dir.join("policy.json"), format!("{policy:#}")).unwrap();
    std::fs::write(
        dir.join("HARNESS.md"),
        "# HCP — Net\n\nClients of hcp's egress tests.\n\n## Hot path\n\n\
         | Command | CLI |\n|---------|-----|\n| `curl.get` | `curl URL` |\n\n\
         ## Anti-patterns\n\n- Installing it anywhere but a test store\n",
    )
    .unwrap();
    cw.own(&dir);
    dir
}

/// One test's world: the hostile and net packs installed as `user`, a certificate, the
/// listed server (with a bare repository to clone), an unlisted TCP and UDP port.
struct Net {
    cw: Cw,
    ca: String,
    listed: FileServer,
    unlisted: TcpListener,
    udp: UdpSocket,
    node: bool,
}

impl Net {
    fn new(user: As) -> Option<Self> {
        let cw = Cw::new(user, &["hostile"]);
        let certs = cw.w.root().join("certs");
        std::fs::create_dir_all(&certs).unwrap();
        let Some(tls) = certificate(&certs) else {
            common::skip::skip("`openssl` is needed for the test server's certificate");
            return None;
        };
        let cert = tls.0.clone();
        let www = cw.w.root().join("www");
        std::fs::create_dir_all(&www).unwrap();
        std::fs::write(www.join("hello.txt"), HELLO).unwrap();
        std::fs::write(www.join("event.json"), "{\"n\": 1}\n").unwrap();
        bare_repository(&cw.w.root(), &www.join("repo.git"));
        let listed = FileServer::start(&www, Some(&tls)).expect("the test HTTPS server starts");
        let node = node_dir().filter(|_| user == As::Me);
        let dir = net_pack(&cw, &cert, node.as_deref());
        let mut install = cw.hcp();
        if let Some(n) = &node {
            install.env("PATH", format!("{}:{}", n.display(), cw.w.path_var()));
        }
        let out = install
            .args(["install", "--activate", &dir.display().to_string()])
            .output()
            .unwrap();
        assert!(out.status.success(), "install net:\n{}", cw.w.render(&out));
        cw.own(&certs);
        let unlisted = TcpListener::bind("127.0.0.1:0").unwrap();
        unlisted.set_nonblocking(true).unwrap();
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        udp.set_nonblocking(true).unwrap();
        let net = Self {
            cw,
            ca: cert.display().to_string(),
            listed,
            unlisted,
            udp,
            node: node.is_some(),
        };
        net.configure(&[]);
        net.mode_is_built().then_some(net)
    }

    fn port(&self) -> u16 {
        self.listed.port
    }

    fn unlisted_port(&self) -> u16 {
        self.unlisted.local_addr().unwrap().port()
    }

    /// `config.json`: the packs' network lists the listed server's address, and `more`.
    fn configure(&self, more: &[&str]) {
        let mut allow = vec![format!("127.0.0.1:{}", self.port())];
        allow.extend(more.iter().map(|s| (*s).to_owned()));
        let certs = Path::new(&self.ca).parent().unwrap().display().to_string();
        // Node (V8) reserves more address space than the default limit of 4 GiB.
        self.cw.config(&json!({
            "packs": {
                "net": {"network": {"allow": allow}, "read": [certs]},
                "hostile": {"network": {"allow": allow}},
                "feed": {"network": {"allow": allow}, "read": [certs]},
            },
            "limits": {"address_space_bytes": 64_u64 << 30},
        }));
    }

    /// Whether this build has the network-namespace mode: a call of an `{"allow": …}`
    /// pack answers with a `network` part of mode `allow`. Else the test is skipped.
    fn mode_is_built(&self) -> bool {
        let (_, v) = self.cw.exec(None, &["hostile.personal.try", "socketpair"]);
        let built = v["sandbox"]["network"]["mode"] == "allow";
        if !built {
            common::skip::skip(&format!(
                "the network-namespace mode is not built yet (a call answered {})",
                v.get("code").unwrap_or(&v["sandbox"])
            ));
        }
        built
    }

    fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}/{path}", self.port())
    }

    fn exec(&self, args: &[&str]) -> Value {
        self.cw.exec(None, args).1
    }

    /// Nothing reached the unlisted TCP or UDP port.
    fn assert_untouched(&self) {
        match self.unlisted.accept() {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            other => panic!("the unlisted server was reached: {other:?}"),
        }
        let mut buf = [0u8; 16];
        assert!(self.udp.recv_from(&mut buf).is_err(), "a datagram arrived");
    }

    /// The newest outcome record's `connections`.
    fn last_connections(&self) -> Value {
        let out = self.cw.run(&["audit", "tail", "-n", "1", "--json"]);
        assert!(out.status.success(), "{}", self.cw.w.render(&out));
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text.lines().last().unwrap_or_default();
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {text}"));
        let v = if v.is_array() { v[0].clone() } else { v };
        v.get("connections")
            .or_else(|| v.get("record").and_then(|r| r.get("connections")))
            .cloned()
            .unwrap_or_else(|| panic!("no connections in the outcome: {v}"))
    }
}

/// The directory of a Node that honours `NODE_USE_ENV_PROXY` (22.19 or later).
fn node_dir() -> Option<PathBuf> {
    fixtures::node().and_then(|n| n.parent().map(Path::to_path_buf))
}

fn ok(v: &Value, what: &str) {
    assert!(v["ok"] == true && v["exit_code"] == 0, "{what}: {v}");
}

fn refused_in_result(v: &Value, port: u16) {
    let refused = &v["sandbox"]["network"]["refused"];
    assert!(
        refused
            .as_array()
            .is_some_and(|r| r.iter().any(|e| e["port"] == port)),
        "{v}"
    );
    assert!(v["hint"].as_str().is_some_and(|h| h.contains("packs.net.network") || h.contains("packs.hostile.network")), "{v}");
}

#[test]
fn clients_reach_the_listed_server_only() {
    for user in users() {
        let Some(n) = Net::new(user) else { return };
        let unlisted = format!("https://127.0.0.1:{}/hello.txt", n.unlisted_port());
        // curl
        let v = n.exec(&["net.curl.get", &n.url("hello.txt")]);
        ok(&v, "curl");
        assert_eq!(v["stdout"], HELLO);
        assert_eq!(v["sandbox"]["network"]["mode"], "allow");
        assert_eq!(v["sandbox"]["network"]["enforced"], true);
        let c = n.last_connections();
        assert_eq!(c["total"], 1, "{c}");
        assert_eq!(c["first"][0]["verdict"], "allowed", "{c}");
        assert_eq!(c["first"][0]["port"], n.port(), "{c}");
        let v = n.exec(&["net.curl.get", &unlisted]);
        assert_ne!(v["exit_code"], 0, "{v}");
        refused_in_result(&v, n.unlisted_port());
        let c = n.last_connections();
        assert_eq!(c["first"][0]["verdict"], "refused", "{c}");
        // In text mode the hint follows the child's stderr.
        let out = n.cw.run(&["exec", "net.curl.get", &unlisted]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!(
                "hcp: hint: the network refused `127.0.0.1:{}`",
                n.unlisted_port()
            )),
            "{err}"
        );
        // git over HTTPS (dumb HTTP)
        let v = n.exec(&["net.git.clone", &n.url("repo.git")]);
        ok(&v, "git clone");
        let v = n.exec(&[
            "net.git.clone",
            &n.ca,
            &format!("https://127.0.0.1:{}/repo.git", n.unlisted_port()),
        ]);
        assert_ne!(v["exit_code"], 0, "{v}");
        // Python urllib
        let v = n.exec(&["net.python.get", &n.url("hello.txt")]);
        ok(&v, "python");
        assert_eq!(v["stdout"], HELLO);
        let v = n.exec(&["net.python.get", &unlisted]);
        assert_ne!(v["exit_code"], 0, "{v}");
        // Node fetch (root only: the Node .ci/run installs lives in root's home)
        if n.node {
            let v = n.exec(&["net.node.get", &n.url("hello.txt")]);
            ok(&v, "node");
            assert_eq!(v["stdout"], HELLO);
            let v = n.exec(&["net.node.get", &unlisted]);
            assert_ne!(v["exit_code"], 0, "{v}");
        } else if user == As::Me {
            common::skip::skip("no Node 22.19 or later for the `fetch` case");
        }
        n.assert_untouched();
        let out = n.cw.run(&["audit", "verify"]);
        assert!(out.status.success(), "{}", n.cw.w.render(&out));
    }
}

#[test]
fn special_addresses_other_ports_and_unlisted_names_are_refused() {
    for user in users() {
        let Some(n) = Net::new(user) else { return };
        n.configure(&["localhost:443", "api.example.com:443"]);
        for (url, port) in [
            (
                format!("https://127.0.0.1:{}/", n.unlisted_port()),
                n.unlisted_port(),
            ),
            ("https://localhost:443/".to_owned(), 443),
            ("https://[::1]:443/".to_owned(), 443),
            ("http://169.254.169.254/latest/meta-data/".to_owned(), 80),
            ("https://10.0.0.1/".to_owned(), 443),
            ("https://api.example.com:8443/".to_owned(), 8443),
            ("https://unlisted.example/".to_owned(), 443),
        ] {
            let v = n.exec(&["net.curl.get", &url]);
            assert_ne!(v["exit_code"], 0, "{url}: {v}");
            assert!(
                v["stderr"].as_str().unwrap_or_default().contains("403"),
                "{url}: {v}"
            );
            refused_in_result(&v, port);
            let c = n.last_connections();
            assert_eq!(c["first"][0]["verdict"], "refused", "{url}: {c}");
            assert!(
                c["first"][0].get("address").is_none() || url.contains("localhost"),
                "{url}: {c}"
            );
        }
        n.assert_untouched();
    }
}

#[test]
fn a_child_that_ignores_the_proxy_reaches_nothing() {
    for user in users() {
        let Some(n) = Net::new(user) else { return };
        let port = n.unlisted_port().to_string();
        let listed = n.port().to_string();
        let udp = n.udp.local_addr().unwrap().port().to_string();
        for a in [
            vec!["tcp", "127.0.0.1", port.as_str()],
            vec!["tcp", "127.0.0.1", listed.as_str()],
            vec!["udp", "127.0.0.1", udp.as_str()],
            vec!["udp", "127.0.0.1", "53"],
            vec!["resolve", "example.com"],
        ] {
            let mut args = vec!["hostile.personal.try"];
            args.extend_from_slice(&a);
            let (_, v) = n.cw.exec(None, &args);
            let line = confine_common::line(&v);
            assert!(
                !line.starts_with("ok") || a[0] == "udp",
                "{user:?} {a:?}: {v}"
            );
        }
        n.assert_untouched();
    }
}

#[test]
fn a_thousand_connections_are_bounded_and_counted() {
    let Some(n) = Net::new(As::Me) else { return };
    // 1,000 requests, up to 300 at once, to a refused destination: the proxy serves at
    // most 256 at once (the rest are answered 503), and counts every one.
    let url = format!("https://127.0.0.1:{}/[1-1000]", n.unlisted_port());
    let v = n.exec(&["net.curl.many", &url]);
    let c = n.last_connections();
    assert_eq!(c["total"], 1000, "{c}");
    let first = c["first"].as_array().unwrap().len() as u64;
    let counted: u64 = first
        + c["others"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["count"].as_u64().unwrap())
            .sum::<u64>();
    assert_eq!(counted, 1000, "{c}");
    refused_in_result(&v, n.unlisted_port());
    n.assert_untouched();
}

#[test]
fn doctor_and_show_list_each_packs_destinations() {
    let cw = Cw::new(As::Me, &["hostile", "echo"]);
    cw.config(&json!({"packs": {"hostile": {"network": {"allow": [
        "API.github.com:443", "*.githubusercontent.com:443", "[2001:DB8::7]:443"]}}}}));
    let out = cw.run(&["show", "hostile"]);
    assert!(out.status.success(), "{}", cw.w.render(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let verbs = text.find("verbs:").unwrap();
    let network = text
        .find("network: allow (packs.hostile.network): api.github.com:443, *.githubusercontent.com:443, [2001:db8::7]:443\n")
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        verbs < network && network < text.find("pins:").unwrap(),
        "{text}"
    );
    let out = cw.run(&["show", "echo", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["network"],
        json!({"mode": "deny", "key": "sandbox.network", "destinations": []})
    );
    let out = cw.run(&["doctor", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["networks"],
        json!([
            {"pack_id": "echo", "mode": "deny", "key": "sandbox.network", "destinations": []},
            {"pack_id": "hostile", "mode": "allow", "key": "packs.hostile.network",
             "destinations": ["api.github.com:443", "*.githubusercontent.com:443", "[2001:db8::7]:443"]},
        ])
    );
    let out = cw.run(&["doctor"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("network by pack\n  echo  deny (sandbox.network)\n  hostile  allow (packs.hostile.network): api.github.com:443"),
        "{text}"
    );
    // A bad entry refuses the call with its line and column, and doctor names it.
    cw.config(&json!({"packs": {"hostile": {"network": {"allow": ["github.com"]}}}}));
    let (out, v) = cw.exec(None, &["hostile.personal.try", "socketpair"]);
    assert_eq!(out.status.code(), Some(78), "{v}");
    assert_eq!(v["code"], "bad_config");
    assert!(v["error"].as_str().unwrap().contains("line 1, column 42: `packs.hostile.network.allow[0]`: `github.com` is not a destination: a port is required"), "{v}");
}

#[test]
fn a_trigger_reaches_its_destinations_and_the_sense_records_them() {
    let Some(n) = Net::new(As::Me) else { return };
    // A pack whose one trigger fetches one JSON line through the proxy, and a second
    // that tries an unlisted port.
    let dir = n.cw.w.root().join("src/feed");
    std::fs::create_dir_all(&dir).unwrap();
    let get = |url: String| {
        json!([
            "curl",
            "-sS",
            "--max-time",
            "20",
            "--cacert",
            n.ca,
            "--",
            url
        ])
    };
    let surface = json!({
        "id": "feed", "name": "Feed", "kind": "wrap", "cliBin": "curl",
        "binding": {"mode": "public"}, "wrap": {"bin": "curl"},
        "verbs": {"version": {"description": "curl's version.", "cli": ["curl", "--version"]}},
        "stimulusTriggers": [
            {"ref": "web", "cli": get(n.url("event.json"))},
            {"ref": "elsewhere", "cli": get(format!("https://127.0.0.1:{}/event.json", n.unlisted_port()))},
        ],
    });
    let read = json!({"operation": "read", "privacy": {"land": "personal"}});
    let policy = json!({"surface_id": "feed", "version": 1, "verbs": {"version": read},
                        "stimuli": {"web": read, "elsewhere": read}});
    std::fs::write(dir.join("surface.json"), surface.to_string()).unwrap();
    std::fs::write(dir.join("policy.json"), policy.to_string()).unwrap();
    std::fs::write(
        dir.join("HARNESS.md"),
        "# Feed\n\nA test pack.\n\n## Hot path\n\n| Command | CLI |\n|---|---|\n| `version` | `curl --version` |\n\n## Anti-patterns\n\n- None\n",
    )
    .unwrap();
    let out =
        n.cw.run(&["install", "--activate", &dir.display().to_string()]);
    assert!(out.status.success(), "{}", n.cw.w.render(&out));
    let out = n.cw.run(&["sense", "feed"]);
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        events,
        [json!({"pack_id": "feed", "ref": "web", "event": {"n": 1}})],
        "{}",
        n.cw.w.render(&out)
    );
    let c = n.last_connections();
    assert_eq!(c["web"]["total"], 1, "{c}");
    assert_eq!(c["web"]["first"][0]["verdict"], "allowed", "{c}");
    assert_eq!(c["elsewhere"]["first"][0]["verdict"], "refused", "{c}");
    assert_eq!(c["elsewhere"]["first"][0]["port"], n.unlisted_port(), "{c}");
    n.assert_untouched();
}
