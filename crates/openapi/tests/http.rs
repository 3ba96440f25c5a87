//! Calls against the example API server on a loopback port (RUNTIME §1.3): arguments
//! refused before anything is sent, credentials placed, one origin, time-out, size cap,
//! cancel, and a server that misbehaves.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::args;
use hcp_examples::api::ApiServer;
use hcp_openapi::{
    Credential, Document, HttpAnswer, HttpOutcome, Limits, Operation, RequestPlan, ServerUrl, plan,
    send,
};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::io::Write;
use std::time::{Duration, Instant};

struct Fixture {
    server: ApiServer,
    doc: Document,
    base: ServerUrl,
}

fn fixture(version: &str) -> Fixture {
    let server = ApiServer::start(0).unwrap();
    let doc = Document::parse(
        common::doc(&server.origin(), version)
            .to_string()
            .as_bytes(),
    )
    .unwrap();
    let base = doc.server(None).unwrap().unwrap();
    Fixture { server, doc, base }
}

impl Fixture {
    fn op(&self, id: &str) -> Operation {
        self.doc.operation(id).unwrap()
    }

    fn plan(&self, id: &str, a: &[(&str, Value)], c: Option<&Credential>) -> RequestPlan {
        plan(&self.op(id), &self.base, &args(a), c).unwrap()
    }

    fn refuse(&self, id: &str, a: &[(&str, Value)]) -> (String, String) {
        let token = Credential::new("tok-ann").unwrap();
        let before = self.server.hits();
        let e = plan(&self.op(id), &self.base, &args(a), Some(&token)).unwrap_err();
        assert_eq!(self.server.hits(), before, "nothing may be sent");
        (e.code.as_str().to_owned(), e.message)
    }
}

fn answered(o: HttpOutcome) -> HttpAnswer {
    match o {
        HttpOutcome::Answered(a) => a,
        other => panic!("not answered: {other:?}"),
    }
}

fn quick() -> Limits {
    Limits {
        timeout: Duration::from_secs(20),
        ..Limits::default()
    }
}

#[test]
fn a_call_reaches_the_server_with_its_values_encoded_and_the_bearer_token() {
    for version in ["3.0.3", "3.1.0"] {
        let f = fixture(version);
        let token = Credential::new("tok-ann").unwrap();
        let p = f.plan(
            "echoGet",
            &[
                ("item", json!("a b&c=d?é")),
                ("status", json!("open")),
                ("limit", json!("5")),
                ("q", json!("x+y z/")),
                ("tags", json!(["red", "blue"])),
                ("x_trace", json!("t-1")),
            ],
            Some(&token),
        );
        assert_eq!(
            p.url,
            format!(
                "{}/test/echo/a%20b%26c%3Dd%3F%C3%A9?status=open&limit=5&q=x%2By%20z%2F&tags=red&tags=blue",
                f.server.origin()
            )
        );
        let a = answered(send(&p, &quick(), None));
        assert_eq!(
            (a.http_status, a.exit_code(), a.truncated),
            (Some(200), 0, false)
        );
        let d = a.data();
        assert_eq!(d["method"], "GET");
        assert_eq!(d["authorization"], "Bearer tok-ann");
        assert_eq!(d["x-trace"], "t-1");
        assert_eq!(a.stdout(), d.to_string());
    }
}

#[test]
fn a_json_body_and_an_api_key_header() {
    let f = fixture("3.1.0");
    let key = Credential::new("k-123").unwrap();
    let p = f.plan(
        "echoPost",
        &[
            ("item", json!("x")),
            ("count", json!("3")),
            ("title", json!("hi")),
            ("done", json!("true")),
        ],
        Some(&key),
    );
    let a = answered(send(&p, &quick(), None));
    let d = a.data();
    assert_eq!(d["method"], "POST");
    assert_eq!(d["x-api-key"], "k-123");
    assert_eq!(d["authorization"], Value::Null);
    assert_eq!(d["content-type"], "application/json");
    assert_eq!(d["body"], json!({"count": 3, "title": "hi", "done": true}));
}

#[test]
fn arguments_outside_the_document_are_refused_before_anything_is_sent() {
    let f = fixture("3.0.3");
    let item = ("item", json!("x"));
    type Case<'a> = (&'a str, Vec<(&'a str, Value)>, &'a str, &'a str);
    let cases: Vec<Case<'_>> = vec![
        (
            "echoGet",
            vec![item.clone(), ("limit", json!("abc"))],
            "arg_invalid",
            "argument `limit` must be an integer or null",
        ),
        (
            "echoGet",
            vec![item.clone(), ("limit", json!(500))],
            "arg_invalid",
            "argument `limit` must be ≤ 100",
        ),
        (
            "echoGet",
            vec![item.clone(), ("limit", json!(0))],
            "arg_invalid",
            "argument `limit` must be ≥ 1",
        ),
        (
            "echoGet",
            vec![item.clone(), ("status", json!("later"))],
            "arg_invalid",
            "argument `status` must be one of \"open\", \"done\"",
        ),
        (
            "echoGet",
            vec![item.clone(), ("status", json!(3))],
            "arg_invalid",
            "argument `status` must be a string",
        ),
        (
            "echoGet",
            vec![item.clone(), ("verbose", json!("1"))],
            "arg_unknown",
            "`verbose` is not an argument of operation `echoGet`",
        ),
        (
            "echoGet",
            vec![item.clone(), ("session", json!("s"))],
            "arg_unknown",
            "`session` is not an argument of operation `echoGet` (cookie `session` is not passed: hcp sends no cookies)",
        ),
        (
            "echoGet",
            vec![],
            "arg_missing",
            "missing required argument `item`",
        ),
        (
            "echoPost",
            vec![item.clone(), ("count", json!(-1))],
            "arg_invalid",
            "argument `count` must be ≥ 0",
        ),
        (
            "echoPost",
            vec![
                item.clone(),
                ("count", json!(1)),
                ("title", json!("far too long a title")),
            ],
            "arg_invalid",
            "argument `title` must be at most 10 characters long",
        ),
        (
            "echoPost",
            vec![item.clone()],
            "arg_missing",
            "missing required argument `count`",
        ),
        (
            "echoGet",
            vec![item.clone(), ("x_trace", json!("a\r\nX-Evil: 1"))],
            "arg_invalid",
            "header argument `x_trace` holds a control or non-ASCII character",
        ),
        (
            "echoGet",
            vec![item.clone(), ("q", json!("a\u{0}b"))],
            "arg_invalid",
            "argument `q` holds a NUL character",
        ),
    ];
    for (op, a, code, message) in cases {
        assert_eq!(
            f.refuse(op, &a),
            (code.to_owned(), message.to_owned()),
            "{op} {a:?}"
        );
    }
}

#[test]
fn a_path_parameter_that_could_leave_its_segment_is_refused() {
    let f = fixture("3.1.0");
    for bad in [
        "../admin",
        "..",
        "%2F..",
        "..%2Fadmin",
        "%2e%2e",
        "%252e%252e%252f",
        "a/b",
        "a\\b",
        "",
    ] {
        let (code, message) = f.refuse("echoGet", &[("item", json!(bad))]);
        assert_eq!(code, "arg_invalid", "{bad:?}");
        assert!(
            message.starts_with("path argument `item` "),
            "{bad:?}: {message}"
        );
    }
}

#[test]
fn a_missing_credential_is_binding_required() {
    let f = fixture("3.1.0");
    let e = plan(
        &f.op("echoGet"),
        &f.base,
        &args(&[("item", json!("x"))]),
        None,
    )
    .unwrap_err();
    assert_eq!(e.code, "binding_required");
}

#[test]
fn a_redirect_to_another_origin_is_not_followed() {
    let f = fixture("3.1.0");
    let other = ApiServer::start(0).unwrap();
    let to = format!("{}/test/echo/stolen", other.origin());
    let p = f.plan("redirect", &[("to", json!(to))], None);
    let a = answered(send(&p, &quick(), None));
    assert_eq!((a.http_status, a.exit_code()), (Some(302), 1));
    assert_eq!(a.location.as_deref(), Some(to.as_str()));
    assert!(
        a.stderr().contains("hcp follows no redirect"),
        "{}",
        a.stderr()
    );
    assert_eq!(other.hits(), 0, "the other origin was reached");
}

#[test]
fn a_server_error_is_exit_1_with_its_body() {
    let f = fixture("3.1.0");
    let a = answered(send(&f.plan("fail", &[], None), &quick(), None));
    assert_eq!((a.http_status, a.exit_code()), (Some(500), 1));
    assert_eq!(a.data(), json!({"error": "boom"}));
    assert_eq!(a.stderr(), "");
}

#[test]
fn a_two_gigabyte_body_is_cut_at_the_cap() {
    let f = fixture("3.1.0");
    let start = Instant::now();
    let a = answered(send(&f.plan("huge", &[], None), &quick(), None));
    assert_eq!(
        (a.http_status, a.exit_code(), a.truncated),
        (Some(200), 0, true)
    );
    assert_eq!(a.body.len(), hcp_openapi::DEFAULT_BODY_CAP);
    assert_eq!(a.data(), Value::Null);
    // Nowhere near the time 2 GiB would take to read.
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn a_server_that_never_answers_times_out() {
    let f = fixture("3.1.0");
    let limits = Limits {
        timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let o = send(&f.plan("hang", &[], None), &limits, None);
    let HttpOutcome::TimedOut { duration } = o else {
        panic!("{o:?}")
    };
    assert!(duration >= Duration::from_millis(300) && duration < Duration::from_secs(10));
}

#[test]
fn cancel_ends_a_call_in_flight() {
    let f = fixture("3.1.0");
    let (r, mut w) = std::io::pipe().unwrap();
    let before = f.server.hits();
    let p = f.plan("hang", &[], None);
    std::thread::scope(|s| {
        s.spawn(|| {
            // The call is in flight once the server holds it.
            let deadline = Instant::now() + Duration::from_secs(20);
            while f.server.hits() == before && Instant::now() < deadline {
                std::thread::yield_now();
            }
            w.write_all(b"x").unwrap();
        });
        let o = send(&p, &quick(), Some(std::os::fd::AsFd::as_fd(&r)));
        assert!(matches!(o, HttpOutcome::Cancelled { .. }), "{o:?}");
    });
}

#[test]
fn a_server_that_closes_early_is_exit_1_with_what_arrived() {
    let f = fixture("3.1.0");
    let a = answered(send(&f.plan("close", &[], None), &quick(), None));
    assert_eq!((a.http_status, a.exit_code()), (Some(200), 1));
    assert_eq!(a.body, b"0123456789");
    assert!(
        a.stderr()
            .starts_with("the connection failed after 10 bytes"),
        "{}",
        a.stderr()
    );
}

#[test]
fn nothing_listening_is_unreached_and_nothing_is_sent() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let doc = Document::parse(
        common::doc(&format!("http://127.0.0.1:{port}"), "3.1.0")
            .to_string()
            .as_bytes(),
    )
    .unwrap();
    let base = doc.server(None).unwrap().unwrap();
    let p = plan(&doc.operation("fail").unwrap(), &base, &args(&[]), None).unwrap();
    let o = send(&p, &quick(), None);
    let HttpOutcome::Unreached { reason, .. } = &o else {
        panic!("{o:?}")
    };
    assert_eq!(reason, "cannot connect to the server: connection refused");
}

#[test]
fn an_operator_server_replaces_the_documents() {
    let f = fixture("3.1.0");
    let other = ApiServer::start(0).unwrap();
    let s = ServerUrl::parse(&format!("{}/test", other.origin())).unwrap();
    let p = plan(&f.op("fail"), &s, &args(&[]), None).unwrap();
    assert_eq!(p.origin, format!("http://{}", other.addr()));
    let a = answered(send(&p, &quick(), None));
    assert_eq!(a.http_status, Some(500));
    assert_eq!((f.server.hits(), other.hits()), (0, 1));
}

#[test]
fn fetch_reads_a_document_and_refuses_redirects_and_size() {
    let server = ApiServer::start(0).unwrap();
    let u = format!("{}/openapi.json", server.origin());
    let limits = Limits {
        timeout: Duration::from_secs(20),
        body_cap: hcp_openapi::MAX_DOCUMENT_BYTES,
    };
    let bytes = hcp_openapi::fetch(&u, &limits).unwrap();
    Document::parse(&bytes).unwrap();
    server.set_document(vec![b' '; hcp_openapi::MAX_DOCUMENT_BYTES + 10]);
    let e = hcp_openapi::fetch(&u, &limits).unwrap_err();
    assert!(e.contains("larger than"), "{e}");
    let r = format!("{}/test/redirect", server.origin());
    let e = hcp_openapi::fetch(&r, &limits).unwrap_err();
    assert!(e.contains("302"), "{e}");
    assert!(hcp_openapi::fetch("file:///etc/passwd", &limits).is_err());
}
