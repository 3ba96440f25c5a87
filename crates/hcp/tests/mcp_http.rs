//! `hcp mcp --http` (RUNTIME §10, "Streamable HTTP"): a session token per request, and a
//! test for each bad input of issue 28 — no token, an ended or expired token, the owner
//! without a session, a token of another store, a foreign `Origin` or `Host`, a 20 MB body,
//! 1,000 open connections, a slow-loris client, a batch, a tool the session may not call,
//! an unknown revision, and an answer of the person from another client or after the
//! session ended.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod mcp_common;
mod mcp_http_common;

use common::World;
use mcp_common::{last_audit, modern, world_with};
use mcp_http_common::Http;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::io::{Read, Write};

fn run_ok(w: &World, args: &[&str]) -> String {
    let out = w.run(args);
    assert!(out.status.success(), "{}", w.render(&out));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// A session of `principal` granted reads and writes on `echo` and reads on `transit` (when
/// installed), with `--workdir` a directory of its own in the world's work directory (a
/// live session's workdir is no other principal's: RUNTIME §4).
fn agent(w: &World, principal: &str) -> String {
    let dir = w.work.join(principal);
    std::fs::create_dir_all(&dir).unwrap();
    let work = dir.to_str().unwrap().to_owned();
    let token = run_ok(
        w,
        &[
            "session",
            "start",
            "--principal",
            principal,
            "--workdir",
            &work,
        ],
    );
    run_ok(
        w,
        &[
            "grant",
            principal,
            "echo",
            "verb.exec.read",
            "verb.exec.write",
        ],
    );
    // A grant names an installed pack: `transit`'s when the world has it.
    if w.hcp_home.join("packs/transit").exists() {
        run_ok(w, &["grant", principal, "transit", "verb.exec.read"]);
    }
    token
}

/// The trail's records: the number of call records, and the acts of authority by name.
fn audit_len(w: &World) -> (usize, Vec<String>) {
    let out = w.run(&["audit", "tail", "-n", "10000", "--json"]);
    let all = serde_json::from_slice::<Vec<Value>>(&out.stdout).unwrap();
    let (acts, calls): (Vec<_>, Vec<_>) = all.iter().partition(|r| r["kind"] == "authority");
    // The acts (their completions, `act made`, left out: one per act).
    let acts = acts
        .iter()
        .map(|r| r["act"].as_str().unwrap_or_default().to_owned())
        .filter(|a| a != "act made")
        .collect();
    (calls.len(), acts)
}

fn find(token: Option<&str>, s: &Http) -> mcp_http_common::Response {
    s.rpc(
        token,
        "tools/call",
        modern(
            json!({ "name": "transit.find", "arguments": { "query": "central" } }),
            &json!({}),
        ),
    )
}

#[test]
fn a_session_token_calls_as_its_principal_and_nothing_else_gets_in() {
    let w = world_with(&["transit", "echo"]);
    let token = agent(&w, "agent-1");
    let s = Http::start(&w);
    let r = find(Some(&token), &s);
    assert_eq!(r.status, 200, "{r:?}");
    let v = r.json();
    assert_eq!(v["result"]["isError"], false, "{v}");
    let a = last_audit(&w);
    assert_eq!(
        (&a["principal"], &a["decision"]),
        (&json!("agent-1"), &json!("allow"))
    );

    let records = audit_len(&w);
    // No token: the owner has no way in.
    let r = find(None, &s);
    assert_eq!(r.status, 401, "{r:?}");
    assert_eq!(r.header("www-authenticate"), Some(r#"Bearer realm="hcp""#));
    // A token that is no session, and one that is not `Bearer`.
    for bad in ["hcp_not-a-token", ""] {
        let r = find(Some(bad), &s);
        assert_eq!(r.status, 401, "{bad}: {r:?}");
        assert_eq!(
            r.header("www-authenticate"),
            Some(r#"Bearer realm="hcp", error="invalid_token""#),
            "{bad}"
        );
    }
    let r = s.post(None, &[("Authorization", &format!("Basic {token}"))], "{}");
    assert_eq!(r.status, 401);
    // A token of another store.
    let other = world_with(&["transit"]);
    let foreign = run_ok(&other, &["session", "start", "--principal", "agent-1"]);
    assert_eq!(find(Some(&foreign), &s).status, 401);
    // No OAuth metadata.
    let r = s.raw(
        &format!(
            "GET /.well-known/oauth-protected-resource HTTP/1.1\nHost: {}\nConnection: close",
            s.addr
        ),
        b"",
    );
    assert_eq!(r.status, 404, "{r:?}");
    // An expired token, then an ended one.
    let expiring = agent(&w, "agent-2");
    assert_eq!(find(Some(&expiring), &s).status, 200);
    expire(&w, "agent-2");
    let r = find(Some(&expiring), &s);
    assert_eq!(r.status, 401, "{r:?}");
    run_ok(&w, &["session", "end", &token]);
    let r = find(Some(&token), &s);
    assert_eq!(r.status, 401, "{r:?}");
    // Nothing of these ran, nor was recorded as a call: agent-2's one allowed call is two
    // records; its session start, its two grants and the session end are acts of
    // authority.
    let after = audit_len(&w);
    assert!(after.0 <= records.0 + 2, "{records:?} → {after:?}");
    assert_eq!(
        after.1[records.1.len()..],
        ["session start", "grant", "grant", "session end"].map(str::to_owned),
        "{after:?}"
    );
}

/// Makes every session of `principal` expired, as time would.
fn expire(w: &World, principal: &str) {
    let dir = w.hcp_home.join("state/sessions");
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let mut v: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        if v["principal"] == principal {
            v["expires_at"] = json!("2000-01-01T00:00:00Z");
            // hcp would refuse a file edited by hand: written with its MAC, as hcp does.
            let home = hcp_store::Home::open(&w.hcp_home).unwrap();
            hcp_store::stamp::write(
                &home,
                &hcp_store::StoreLock::acquire(&home).unwrap(),
                &p,
                &v,
            )
            .unwrap();
        }
    }
}

#[test]
fn a_foreign_origin_or_host_is_refused_and_a_listed_origin_served() {
    let w = world_with(&["transit"]);
    std::fs::write(
        w.hcp_home.join("config.json"),
        r#"{"mcp": {"http": {"origins": ["http://app.example:3000"]}}}"#,
    )
    .unwrap();
    let token = run_ok(&w, &["session", "start", "--principal", "agent-1"]);
    run_ok(&w, &["grant", "agent-1", "transit", "verb.exec.read"]);
    let s = Http::start(&w);
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list",
                       "params": modern(json!({}), &json!({})) })
    .to_string();
    let v = [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/list"),
    ];
    let r = s.post(
        Some(&token),
        &[("Origin", "http://evil.example"), v[0], v[1]],
        &body,
    );
    assert_eq!(r.status, 403, "{r:?}");
    let r = s.post(
        Some(&token),
        &[("Origin", "http://app.example:3000"), v[0], v[1]],
        &body,
    );
    assert_eq!(r.status, 200, "{r:?}");
    // DNS rebinding: a name that now points here, in `Host`.
    let r = s.raw(
        &format!(
            "POST /mcp HTTP/1.1\nHost: evil.example:{}\nAuthorization: Bearer {token}\nContent-Type: application/json\nAccept: application/json, text/event-stream\nConnection: close\nContent-Length: {}",
            s.addr.rsplit(':').next().unwrap(),
            body.len()
        ),
        body.as_bytes(),
    );
    assert_eq!(r.status, 403, "{r:?}");
}

#[test]
fn bodies_batches_and_bad_json_are_refused_before_anything_runs() {
    let w = world_with(&["transit"]);
    let token = run_ok(&w, &["session", "start", "--principal", "agent-1"]);
    run_ok(&w, &["grant", "agent-1", "transit", "verb.exec.read"]);
    let s = Http::start(&w);
    // 20 MB announced: refused unread (the body is never sent).
    let r = s.raw(
        &format!(
            "POST /mcp HTTP/1.1\nHost: {}\nAuthorization: Bearer {token}\nContent-Type: application/json\nAccept: application/json, text/event-stream\nContent-Length: {}",
            s.addr,
            20 * 1024 * 1024
        ),
        b"",
    );
    assert_eq!(r.status, 413, "{r:?}");
    assert_eq!(r.json()["code"], "request_too_large");
    // A batch, a line that is not JSON, params that do not fit, a repeated key.
    let r = s.post(
        Some(&token),
        &[],
        r#"[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]"#,
    );
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (400, json!(-32600))
    );
    let r = s.post(Some(&token), &[], "{not json");
    assert_eq!(r.json()["error"]["code"], -32700);
    let r = s.post(
        Some(&token),
        &[],
        &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": 7}})
            .to_string(),
    );
    assert_eq!(r.json()["error"]["code"], -32602);
    let r = s.post(
        Some(&token),
        &[],
        r#"{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "transit.find", "arguments": {"query": "a", "query": "b"}}}"#,
    );
    assert_eq!(r.json()["error"]["data"]["code"], "duplicate_key");
    // The server goes on.
    assert_eq!(find(Some(&token), &s).json()["result"]["isError"], false);
}

#[test]
fn a_tool_the_session_may_not_call_is_refused_by_the_gate_and_recorded() {
    let w = world_with(&["transit", "echo"]);
    let token = run_ok(&w, &["session", "start", "--principal", "agent-1"]);
    let s = Http::start(&w);
    let r = find(Some(&token), &s).json();
    assert_eq!(
        r["result"]["structuredContent"]["code"], "missing_grant",
        "{r}"
    );
    assert_eq!(last_audit(&w)["principal"], "agent-1");
    // A `local` verb over HTTP needs a session with `--workdir`.
    run_ok(&w, &["grant", "agent-1", "echo", "verb.exec.read"]);
    let r = s
        .rpc(
            Some(&token),
            "tools/call",
            modern(
                json!({ "name": "echo.echo.say", "arguments": { "text": "hi" } }),
                &json!({}),
            ),
        )
        .json();
    assert_eq!(
        r["result"]["structuredContent"]["code"], "workdir_required",
        "{r}"
    );
    let a = last_audit(&w);
    assert_eq!(
        (&a["code"], &a["principal"]),
        (&json!("workdir_required"), &json!("agent-1"))
    );
    let with_workdir = agent(&w, "agent-2");
    let r = s
        .rpc(
            Some(&with_workdir),
            "tools/call",
            modern(
                json!({ "name": "echo.echo.say", "arguments": { "text": "hi" } }),
                &json!({}),
            ),
        )
        .json();
    assert_eq!(r["result"]["isError"], false, "{r}");
}

#[test]
fn an_unknown_revision_is_answered_in_the_newest_hcp_knows() {
    let w = world_with(&["transit"]);
    let token = run_ok(&w, &["session", "start", "--principal", "agent-1"]);
    let s = Http::start(&w);
    let r = s.post(
        Some(&token),
        &[],
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2099-01-01", "capabilities": {},
                           "clientInfo": {"name": "raw", "version": "0"}}})
        .to_string(),
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["result"]["protocolVersion"], "2025-11-25");
    let r = s.rpc(
        Some(&token),
        "server/discover",
        modern(json!({}), &json!({})),
    );
    assert_eq!(
        r.json()["result"]["supportedVersions"],
        json!(["2025-06-18", "2025-11-25", "2026-07-28"])
    );
}

fn write_call(name: &str) -> Value {
    modern(
        json!({ "name": "echo.echo.write", "arguments": { "name": name, "text": "x" } }),
        &json!({ "elicitation": {} }),
    )
}

fn retry(name: &str, handle: &str) -> Value {
    let mut p = write_call(name);
    p["requestState"] = json!(handle);
    p["inputResponses"] =
        json!({ "hcp_person": { "action": "accept", "content": { "run": true } } });
    p
}

#[test]
fn the_persons_answer_is_bound_to_the_token_and_the_handle() {
    let w = world_with(&["echo"]);
    let a = agent(&w, "agent-1");
    let b = agent(&w, "agent-2");
    let s = Http::start(&w);
    let ask = |token: &str| {
        let r = s.rpc(Some(token), "tools/call", write_call("f.txt")).json();
        assert_eq!(r["result"]["resultType"], "input_required", "{r}");
        r["result"]["requestState"].as_str().unwrap().to_owned()
    };
    // Another client (token) with A's handle: refused, and A's question is gone.
    let h = ask(&a);
    let r = s.rpc(Some(&b), "tools/call", retry("f.txt", &h)).json();
    assert_eq!(
        r["result"]["structuredContent"]["code"], "confirm_required",
        "{r}"
    );
    assert!(!w.work.join("agent-2/f.txt").exists());
    let r = s.rpc(Some(&a), "tools/call", retry("f.txt", &h)).json();
    assert_eq!(
        r["result"]["structuredContent"]["code"], "confirm_required",
        "{r}"
    );
    assert!(!w.work.join("agent-2/f.txt").exists());
    // After the session ended: the token no longer gets in.
    let h = ask(&a);
    run_ok(&w, &["session", "end", &a]);
    let r = s.rpc(Some(&a), "tools/call", retry("f.txt", &h));
    assert_eq!(r.status, 401);
    assert!(!w.work.join("agent-2/f.txt").exists());
    // Its own retry, in time: runs once.
    let h = ask(&b);
    let r = s.rpc(Some(&b), "tools/call", retry("f.txt", &h)).json();
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert!(w.work.join("agent-2/f.txt").exists());
    assert!(!w.work.join("agent-1/f.txt").exists());
}

#[test]
fn a_session_of_the_handshake_revisions_belongs_to_its_token() {
    let w = world_with(&["transit"]);
    let a = run_ok(&w, &["session", "start", "--principal", "agent-1"]);
    let b = run_ok(&w, &["session", "start", "--principal", "agent-2"]);
    let s = Http::start(&w);
    let r = s.post(
        Some(&a),
        &[],
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                           "clientInfo": {"name": "raw", "version": "0"}}})
        .to_string(),
    );
    let sid = r.header("mcp-session-id").unwrap().to_owned();
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string();
    let headers = [
        ("Mcp-Session-Id", sid.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let r = s.post(Some(&b), &headers, &list);
    assert_eq!(r.status, 404, "{r:?}");
    let r = s.post(Some(&a), &headers, &list);
    assert_eq!(r.status, 200, "{r:?}");
}

#[test]
fn a_thousand_connections_and_a_slow_loris_do_not_stop_the_server() {
    let w = world_with(&["transit"]);
    let token = run_ok(&w, &["session", "start", "--principal", "agent-1"]);
    run_ok(&w, &["grant", "agent-1", "transit", "verb.exec.read"]);
    let s = Http::start(&w);
    // Room for a thousand descriptors in this process.
    let (_, hard) =
        nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).unwrap();
    nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE, hard, hard).unwrap();
    let mut idle = Vec::new();
    for _ in 0..1000 {
        if let Ok(c) = std::net::TcpStream::connect(&s.addr) {
            idle.push(c);
        }
    }
    assert!(idle.len() >= 900, "{}", idle.len());
    drop(idle);
    // Once the server saw them go, a real request is served (each try is a request, not a
    // wait; the server closes a connection over its bound at once).
    let served = (0..500).any(|_| find(Some(&token), &s).status == 200);
    assert!(
        served,
        "the server never served again after 1,000 connections"
    );
    // A slow-loris client: half a request, then nothing. The server drops it once its
    // header time is up: the read returns at end of file (nothing waits for time here).
    let mut loris = std::net::TcpStream::connect(&s.addr).unwrap();
    loris.write_all(b"POST /mcp HTTP/1.1\r\nHost: ").unwrap();
    let mut rest = Vec::new();
    let _ = loris.read_to_end(&mut rest);
    assert!(
        !String::from_utf8_lossy(&rest).contains("200 OK"),
        "{}",
        String::from_utf8_lossy(&rest)
    );
    assert_eq!(find(Some(&token), &s).json()["result"]["isError"], false);
}

#[test]
fn a_unix_socket_is_made_0600_and_serves() {
    use std::os::unix::fs::PermissionsExt;
    let w = world_with(&["transit"]);
    let token = run_ok(&w, &["session", "start", "--principal", "agent-1"]);
    run_ok(&w, &["grant", "agent-1", "transit", "verb.exec.read"]);
    let path = w.root().join("hcp.sock");
    let s = Http::start_on(&w, &format!("unix:{}", path.display()));
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(find(Some(&token), &s).json()["result"]["isError"], false);
}

#[test]
fn an_address_off_loopback_needs_tls() {
    let w = world_with(&[]);
    let out = w.run(&["mcp", "--http", "0.0.0.0:0"]);
    assert_eq!(out.status.code(), Some(2), "{}", w.render(&out));
    assert!(w.render(&out).contains("needs TLS"), "{}", w.render(&out));
}

/// Off loopback hcp serves TLS only: with `--tls-cert` and `--tls-key` (a certificate made
/// here with `openssl`), `curl` trusting that certificate gets its answer; a plain-HTTP
/// request on the same port gets none.
#[test]
fn tls_serves_with_the_certificate_given() {
    let (Some(openssl), Some(curl)) = (which("openssl"), which("curl")) else {
        return common::skip::skip("openssl and curl are needed to make and trust a certificate");
    };
    let w = world_with(&["transit"]);
    let token = run_ok(&w, &["session", "start", "--principal", "agent-1"]);
    run_ok(&w, &["grant", "agent-1", "transit", "verb.exec.read"]);
    let (cert, key) = (w.root().join("cert.pem"), w.root().join("key.pem"));
    let made = std::process::Command::new(openssl)
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
        ])
        .args([
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let s = Http::start_with(
        &w,
        &[
            "0.0.0.0:0",
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
    );
    let port = s.addr.rsplit(':').next().unwrap().to_owned();
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": modern(json!({ "name": "transit.find",
                                                "arguments": { "query": "central" } }),
                                        &json!({})) })
    .to_string();
    let out = std::process::Command::new(curl)
        .args(["-sS", "--cacert"])
        .arg(&cert)
        .args(["-H", &format!("Authorization: Bearer {token}")])
        .args(["-H", "Content-Type: application/json"])
        .args(["-H", "Accept: application/json, text/event-stream"])
        .args(["-H", "MCP-Protocol-Version: 2026-07-28"])
        .args([
            "-H",
            "Mcp-Method: tools/call",
            "-H",
            "Mcp-Name: transit.find",
        ])
        .args(["--data", &body])
        .arg(format!("https://127.0.0.1:{port}/mcp"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["result"]["isError"], false, "{v}");
    let plain = s.rpc(Some(&token), "tools/list", modern(json!({}), &json!({})));
    assert_ne!(plain.status, 200, "{plain:?}");
}

fn which(name: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|f| f.is_file())
    })
}

/// Open streams count against their token's bound: with 16 event streams of one token
/// open, its next request is answered 429 while another token is still served; once one
/// stream closes, the first token gets in again.
#[test]
fn open_streams_are_bounded_per_token() {
    let w = world_with(&["transit"]);
    let a = run_ok(&w, &["session", "start", "--principal", "agent-1"]);
    let b = run_ok(&w, &["session", "start", "--principal", "agent-2"]);
    run_ok(&w, &["grant", "agent-1", "transit", "verb.exec.read"]);
    run_ok(&w, &["grant", "agent-2", "transit", "verb.exec.read"]);
    let s = Http::start(&w);
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                      "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                                 "clientInfo": {"name": "raw", "version": "0"}}})
    .to_string();
    let mut streams = Vec::new();
    for _ in 0..16 {
        let r = s.post(Some(&a), &[], &init);
        let sid = r.header("mcp-session-id").unwrap().to_owned();
        let mut c = std::net::TcpStream::connect(&s.addr).unwrap();
        write!(
            c,
            "GET /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {a}\r\nAccept: text/event-stream\r\nMcp-Session-Id: {sid}\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n",
            s.addr
        )
        .unwrap();
        // The stream's headers: it is open from here on.
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            assert_eq!(
                c.read(&mut byte).unwrap(),
                1,
                "{}",
                String::from_utf8_lossy(&head)
            );
            head.push(byte[0]);
        }
        assert!(
            head.starts_with(b"HTTP/1.1 200"),
            "{}",
            String::from_utf8_lossy(&head)
        );
        streams.push(c);
    }
    assert_eq!(find(Some(&a), &s).status, 429);
    assert_eq!(find(Some(&b), &s).json()["result"]["isError"], false);
    drop(streams.pop());
    // Once the server saw it close, the token gets in again (each try is a request).
    assert!((0..500).any(|_| find(Some(&a), &s).status == 200));
}
