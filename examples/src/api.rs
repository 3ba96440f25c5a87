//! `hcp-example-api`: the small HTTP API of the gold `tasks` pack (an OpenAPI document,
//! `packs/tasks/openapi.json`), and the misbehaving endpoints hcp's tests need.
//!
//! Built on `tiny_http`; [`ApiServer::start`] binds a loopback port (port 0: the kernel
//! picks one, [`ApiServer::addr`] says which) and answers each request on its own thread,
//! so one that never answers does not hold up the others. Dropping the server stops it and
//! releases the requests that were held.
//!
//! The API, under `/v1` (state in memory, per user):
//! - `POST /v1/tokens {"user"}` → `201 {"token": "tok-<user>"}`;
//! - with `Authorization: Bearer tok-<user>`: `GET /v1/tasks[?status=&limit=]`,
//!   `POST /v1/tasks {"title", "priority"?}` → 201, `GET /v1/tasks/{id}`,
//!   `DELETE /v1/tasks/{id}` → 204, `POST /v1/tasks/{id}/done`; `401` without a token,
//!   `404` for an unknown task.
//!
//! For tests, under `/test`:
//! - `…/echo[/…]`: `200` with what arrived (`method`, the raw `url`, the headers
//!   `authorization`, `x-api-key`, `x-trace`, `content-type`, and the body as JSON);
//! - `…/redirect?to=URL`: `302` to `URL`; `…/fail`: `500 {"error": "boom"}`;
//! - `…/huge`: a 2 GiB body, generated as it is sent (nothing allocated);
//! - `…/hang`: never answers (until the server stops); `…/close`: promises 1000 bytes,
//!   sends 10 and closes.
//!
//! `GET /openapi.json` serves the document set with [`ApiServer::set_document`] (the
//! gold one by default). [`ApiServer::hits`] counts the requests that arrived, so a test
//! can show that a refused call sent nothing.

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::Read;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// The gold pack's OpenAPI document.
pub const TASKS_DOCUMENT: &str = include_str!("../../packs/tasks/openapi.json");

/// The size of `/test/huge`: 2 GiB.
pub const HUGE_BYTES: u64 = 2 * 1024 * 1024 * 1024;

#[derive(Debug, Clone)]
struct Task {
    id: String,
    title: String,
    priority: String,
    status: String,
}

impl Task {
    fn json(&self) -> Value {
        json!({"id": self.id, "title": self.title, "priority": self.priority, "status": self.status})
    }
}

#[derive(Default)]
struct State {
    tasks: BTreeMap<String, Vec<Task>>,
    next: u64,
    document: Vec<u8>,
}

struct Shared {
    state: Mutex<State>,
    hits: AtomicU64,
    stopping: AtomicBool,
    stop_lock: Mutex<()>,
    stopped: Condvar,
}

/// A running example API server; dropping it stops it.
pub struct ApiServer {
    server: Arc<tiny_http::Server>,
    shared: Arc<Shared>,
    addr: SocketAddr,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for ApiServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiServer")
            .field("addr", &self.addr)
            .finish()
    }
}

impl ApiServer {
    /// Starts a server on `127.0.0.1:port` (`0`: any free port).
    ///
    /// # Errors
    /// The bind error, as text.
    pub fn start(port: u16) -> Result<Self, String> {
        let server = tiny_http::Server::http(("127.0.0.1", port)).map_err(|e| e.to_string())?;
        let addr = server
            .server_addr()
            .to_ip()
            .ok_or_else(|| "the server has no IP address".to_owned())?;
        let server = Arc::new(server);
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                document: TASKS_DOCUMENT.as_bytes().to_vec(),
                ..State::default()
            }),
            hits: AtomicU64::new(0),
            stopping: AtomicBool::new(false),
            stop_lock: Mutex::new(()),
            stopped: Condvar::new(),
        });
        let thread = {
            let server = Arc::clone(&server);
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || {
                for request in server.incoming_requests() {
                    if shared.stopping.load(Ordering::SeqCst) {
                        break;
                    }
                    shared.hits.fetch_add(1, Ordering::SeqCst);
                    let shared = Arc::clone(&shared);
                    std::thread::spawn(move || handle(&shared, request));
                }
            })
        };
        Ok(Self {
            server,
            shared,
            addr,
            thread: Some(thread),
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// How many requests have arrived.
    pub fn hits(&self) -> u64 {
        self.shared.hits.load(Ordering::SeqCst)
    }

    /// Replaces the document `GET /openapi.json` serves.
    pub fn set_document(&self, bytes: impl Into<Vec<u8>>) {
        if let Ok(mut s) = self.shared.state.lock() {
            s.document = bytes.into();
        }
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        {
            let _g = self.shared.stop_lock.lock();
            self.shared.stopped.notify_all();
        }
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn header(name: &str, value: &str) -> Option<tiny_http::Header> {
    tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes()).ok()
}

fn reply(request: tiny_http::Request, status: u16, body: &Value) {
    let mut r = tiny_http::Response::from_string(body.to_string()).with_status_code(status);
    if let Some(h) = header("Content-Type", "application/json") {
        r = r.with_header(h);
    }
    let _ = request.respond(r);
}

fn empty(request: tiny_http::Request, status: u16) {
    let _ = request.respond(tiny_http::Response::empty(status));
}

/// A reader of `left` zero bytes that allocates nothing.
struct Zeros {
    left: u64,
}

impl Read for Zeros {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = usize::try_from(self.left.min(buf.len() as u64)).unwrap_or(buf.len());
        buf[..n].fill(b'0');
        self.left -= n as u64;
        Ok(n)
    }
}

fn handle(shared: &Shared, mut request: tiny_http::Request) {
    let url = request.url().to_owned();
    let (path, query) = url.split_once('?').unwrap_or((&url, ""));
    let path = path.to_owned();
    let query: BTreeMap<String, String> = query
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (decode(k), decode(v))
        })
        .collect();
    let headers: Vec<(String, String)> = request
        .headers()
        .iter()
        .map(|h| {
            (
                h.field.as_str().as_str().to_ascii_lowercase(),
                h.value.as_str().to_owned(),
            )
        })
        .collect();
    let get = |name: &str| {
        let name = name.to_ascii_lowercase();
        headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.clone())
    };
    let auth = get("Authorization");
    let mut body_text = String::new();
    let _ = request
        .as_reader()
        .take(1024 * 1024)
        .read_to_string(&mut body_text);
    let body: Value = serde_json::from_str(&body_text).unwrap_or(Value::Null);
    let method = request.method().as_str().to_owned();
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();

    match (method.as_str(), segments.as_slice()) {
        ("GET", ["openapi.json"]) => {
            let doc = shared
                .state
                .lock()
                .map(|s| s.document.clone())
                .unwrap_or_default();
            let mut r = tiny_http::Response::from_data(doc);
            if let Some(h) = header("Content-Type", "application/json") {
                r = r.with_header(h);
            }
            let _ = request.respond(r);
        }
        (_, ["test", "echo", ..]) => {
            let echo = json!({
                "method": method,
                "url": url,
                "authorization": auth,
                "x-api-key": get("X-Api-Key"),
                "x-trace": get("X-Trace"),
                "content-type": get("Content-Type"),
                "body": body,
            });
            reply(request, 200, &echo);
        }
        ("GET", ["test", "redirect"]) => {
            let to = query.get("to").cloned().unwrap_or_else(|| "/".into());
            let mut r = tiny_http::Response::empty(302);
            if let Some(h) = header("Location", &to) {
                r = r.with_header(h);
            }
            let _ = request.respond(r);
        }
        ("GET", ["test", "fail"]) => reply(request, 500, &json!({"error": "boom"})),
        ("GET", ["test", "huge"]) => {
            let r = tiny_http::Response::new(
                tiny_http::StatusCode(200),
                header("Content-Type", "text/plain").into_iter().collect(),
                Zeros { left: HUGE_BYTES },
                usize::try_from(HUGE_BYTES).ok(),
                None,
            );
            let _ = request.respond(r);
        }
        ("GET", ["test", "hang"]) => {
            let mut g = shared.stop_lock.lock();
            while !shared.stopping.load(Ordering::SeqCst) {
                g = match g {
                    Ok(g) => shared.stopped.wait(g),
                    Err(_) => break,
                };
            }
            drop(g);
            empty(request, 503);
        }
        ("GET", ["test", "close"]) => {
            let r = tiny_http::Response::new(
                tiny_http::StatusCode(200),
                Vec::new(),
                &b"0123456789"[..],
                Some(1000),
                None,
            );
            let _ = request.respond(r);
        }
        (_, ["v1", rest @ ..]) => tasks(shared, request, &method, rest, &query, auth, &body),
        _ => reply(request, 404, &json!({"error": "no such endpoint"})),
    }
}

fn tasks(
    shared: &Shared,
    request: tiny_http::Request,
    method: &str,
    rest: &[&str],
    query: &BTreeMap<String, String>,
    auth: Option<String>,
    body: &Value,
) {
    if let ("POST", ["tokens"]) = (method, rest) {
        let user = body.get("user").and_then(Value::as_str).unwrap_or("");
        let ok = !user.is_empty()
            && user
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !ok {
            return reply(request, 400, &json!({"error": "`user` is required"}));
        }
        return reply(request, 201, &json!({"token": format!("tok-{user}")}));
    }
    let Some(user) = auth
        .as_deref()
        .and_then(|a| a.strip_prefix("Bearer tok-"))
        .map(str::to_owned)
    else {
        return reply(
            request,
            401,
            &json!({"error": "a bearer token is required"}),
        );
    };
    let Ok(mut state) = shared.state.lock() else {
        return empty(request, 500);
    };
    state.next += 1;
    let next = state.next;
    let list = state.tasks.entry(user).or_default();
    let find = |list: &Vec<Task>, id: &str| list.iter().position(|t| t.id == id);
    match (method, rest) {
        ("GET", ["tasks"]) => {
            let limit = query
                .get("limit")
                .and_then(|l| l.parse::<usize>().ok())
                .unwrap_or(20);
            let out: Vec<Value> = list
                .iter()
                .rev()
                .filter(|t| query.get("status").is_none_or(|s| *s == t.status))
                .take(limit)
                .map(Task::json)
                .collect();
            drop(state);
            reply(request, 200, &Value::Array(out));
        }
        ("POST", ["tasks"]) => {
            let Some(title) = body.get("title").and_then(Value::as_str) else {
                drop(state);
                return reply(request, 400, &json!({"error": "`title` is required"}));
            };
            let t = Task {
                id: format!("t-{next}"),
                title: title.to_owned(),
                priority: body
                    .get("priority")
                    .and_then(Value::as_str)
                    .unwrap_or("normal")
                    .to_owned(),
                status: "open".into(),
            };
            let v = t.json();
            list.push(t);
            drop(state);
            reply(request, 201, &v);
        }
        ("GET", ["tasks", id]) => match find(list, id) {
            Some(i) => {
                let v = list[i].json();
                drop(state);
                reply(request, 200, &v);
            }
            None => {
                drop(state);
                reply(request, 404, &json!({"error": "no such task"}));
            }
        },
        ("DELETE", ["tasks", id]) => match find(list, id) {
            Some(i) => {
                list.remove(i);
                drop(state);
                empty(request, 204);
            }
            None => {
                drop(state);
                reply(request, 404, &json!({"error": "no such task"}));
            }
        },
        ("POST", ["tasks", id, "done"]) => match find(list, id) {
            Some(i) => {
                list[i].status = "done".into();
                let v = list[i].json();
                drop(state);
                reply(request, 200, &v);
            }
            None => {
                drop(state);
                reply(request, 404, &json!({"error": "no such task"}));
            }
        },
        _ => {
            drop(state);
            reply(request, 404, &json!({"error": "no such endpoint"}));
        }
    }
}

/// Percent-decodes a query component (`+` stays `+`).
fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (
                (bytes[i + 1] as char).to_digit(16),
                (bytes[i + 2] as char).to_digit(16),
            )
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
