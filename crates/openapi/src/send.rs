//! Sending one planned request (RUNTIME §1.3): one origin, no redirect followed, a
//! time-out, a cap on the body kept, and cancel through a descriptor.
//!
//! The client is `ureq` 3 with rustls (webpki roots), configured explicitly rather than
//! by its defaults: no redirect is followed (`max_redirects(0)`: a `3xx` is the answer,
//! whatever its `Location`), no proxy is used (`HTTP(S)_PROXY` in hcp's environment
//! cannot route a pack's requests elsewhere), no connection is kept for another call,
//! `4xx`/`5xx` are answers rather than errors, and the whole call is bounded by
//! [`Limits::timeout`]. The request runs on a worker thread; the calling thread waits in
//! `poll(2)` on the worker's completion pipe and the caller's cancel descriptor, with the
//! deadline as timeout. On cancel or deadline it shuts the agent down, which makes the
//! worker's blocked read or write fail at once, and answers without waiting for it.

use crate::plan::RequestPlan;
use crate::server::origin_of;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use serde_json::Value;
use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

/// Default time-out of a call: 60 s, as for a CLI (RUNTIME §5).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// Default cap of the response body kept: 1 MiB, as for a CLI's stdout (RUNTIME §5).
pub const DEFAULT_BODY_CAP: usize = 1024 * 1024;

/// Bounds of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall time from the start of [`send`] to the end of the body ([`DEFAULT_TIMEOUT`]).
    pub timeout: Duration,
    /// Bytes of the response body kept; past it the answer is `truncated` and the rest is
    /// not read (the connection is closed) ([`DEFAULT_BODY_CAP`]).
    pub body_cap: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            timeout: DEFAULT_TIMEOUT,
            body_cap: DEFAULT_BODY_CAP,
        }
    }
}

/// What the server answered, or how reaching it failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpAnswer {
    /// The HTTP status, when a response head arrived.
    pub http_status: Option<u16>,
    /// The first [`Limits::body_cap`] bytes of the body.
    pub body: Vec<u8>,
    /// Whether the body went past the cap.
    pub truncated: bool,
    /// Why the exchange failed (connection refused, closed before the body ended, TLS),
    /// lowercase; `None` when the whole answer arrived.
    pub error: Option<String>,
    /// The response's `Content-Type`.
    pub content_type: Option<String>,
    /// The response's `Location` (a redirect is never followed).
    pub location: Option<String>,
    /// Wall time of the exchange.
    pub duration: Duration,
}

impl HttpAnswer {
    /// The result's `exit_code` (RUNTIME §1.3): 0 for a complete `2xx` answer, else 1.
    pub fn exit_code(&self) -> i32 {
        match (self.http_status, &self.error) {
            (Some(s), None) if (200..300).contains(&s) => 0,
            _ => 1,
        }
    }

    /// The body, lossily UTF-8 (the result's `stdout`).
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// What went wrong, for the result's `stderr` (empty on a complete answer).
    pub fn stderr(&self) -> String {
        match (&self.error, self.http_status, &self.location) {
            (Some(e), _, _) => e.clone(),
            (None, Some(s), Some(l)) if (300..400).contains(&s) => format!(
                "the server answered {s} with `Location: {}`; hcp follows no redirect",
                crate::pointer::shorten(l)
            ),
            _ => String::new(),
        }
    }

    /// The body parsed as JSON when it is JSON and complete (the result's `data`), else
    /// `null`.
    pub fn data(&self) -> Value {
        if self.truncated {
            return Value::Null;
        }
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// [`HttpAnswer::duration`] in whole milliseconds.
    pub fn duration_ms(&self) -> u64 {
        u64::try_from(self.duration.as_millis()).unwrap_or(u64::MAX)
    }
}

/// How a [`send`] ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpOutcome {
    /// An answer, or a failure to get one (see [`HttpAnswer::error`]).
    Answered(HttpAnswer),
    /// [`Limits::timeout`] passed first (`hcp exec` answers `timeout`, 124).
    TimedOut {
        /// Wall time until then.
        duration: Duration,
    },
    /// The cancel descriptor became readable first (`cancelled`, 130).
    Cancelled {
        /// Wall time until then.
        duration: Duration,
    },
}

/// The `User-Agent` of every request.
const USER_AGENT: &str = concat!("hcp/", env!("CARGO_PKG_VERSION"));

fn agent(limits: &Limits) -> ureq::Agent {
    let config = ureq::Agent::config_builder()
        .max_redirects(0)
        .max_redirects_will_error(false)
        .save_redirect_history(false)
        .proxy(None)
        .http_status_as_error(false)
        .timeout_global(Some(limits.timeout))
        .max_idle_connections(0)
        .max_idle_connections_per_host(0)
        .user_agent(USER_AGENT)
        .build();
    ureq::Agent::new_with_config(config)
}

/// Sends `plan` and reads its answer (RUNTIME §1.3), within `limits`, until `cancel` (a
/// descriptor that becomes readable when the call must be abandoned, such as the self-pipe
/// `hcp` arms on `SIGINT`/`SIGTERM`) fires.
///
/// Never follows a redirect and never reaches another origin than `plan.origin`: a plan
/// whose URL is elsewhere is answered with an error without a connection.
pub fn send(plan: &RequestPlan, limits: &Limits, cancel: Option<BorrowedFd<'_>>) -> HttpOutcome {
    let start = Instant::now();
    let failed = |e: String| {
        HttpOutcome::Answered(HttpAnswer {
            http_status: None,
            body: Vec::new(),
            truncated: false,
            error: Some(e),
            content_type: None,
            location: None,
            duration: start.elapsed(),
        })
    };
    match url::Url::parse(&plan.url) {
        Ok(u) if origin_of(&u) == plan.origin => {}
        _ => {
            return failed(
                "the request's URL is not on its server's origin; nothing was sent".into(),
            );
        }
    }
    let agent = agent(limits);
    let (mut done_r, done_w) = match std::io::pipe() {
        Ok(p) => p,
        Err(e) => return failed(format!("cannot make a pipe: {e}")),
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let worker = {
        let agent = agent.clone();
        let plan = plan.clone();
        let cap = limits.body_cap;
        std::thread::Builder::new()
            .name("hcp-openapi-send".into())
            .spawn(move || {
                let answer = perform(&agent, &plan, cap);
                let _ = tx.send(answer);
                let mut w = done_w;
                let _ = w.write_all(b"x");
            })
    };
    if let Err(e) = worker {
        return failed(format!("cannot start the request: {e}"));
    }
    let deadline = start + limits.timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            agent.shutdown();
            return HttpOutcome::TimedOut {
                duration: start.elapsed(),
            };
        }
        let mut fds = vec![PollFd::new(done_r.as_fd(), PollFlags::POLLIN)];
        if let Some(c) = cancel {
            fds.push(PollFd::new(c, PollFlags::POLLIN));
        }
        let ms = u16::try_from(left.as_millis().saturating_add(1)).unwrap_or(u16::MAX);
        match poll(&mut fds, PollTimeout::from(ms)) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => {
                agent.shutdown();
                return failed(format!("cannot wait for the answer: {e}"));
            }
        }
        let ready = |fd: &PollFd<'_>| {
            fd.revents().is_some_and(|r| {
                r.intersects(PollFlags::POLLIN | PollFlags::POLLHUP | PollFlags::POLLERR)
            })
        };
        if fds.get(1).is_some_and(ready) {
            agent.shutdown();
            return HttpOutcome::Cancelled {
                duration: start.elapsed(),
            };
        }
        if ready(&fds[0]) {
            let mut b = [0u8; 1];
            let _ = done_r.read(&mut b);
            return match rx.recv() {
                Ok(mut a) => {
                    a.duration = start.elapsed();
                    HttpOutcome::Answered(a)
                }
                Err(_) => failed("the request ended without an answer".into()),
            };
        }
    }
}

fn perform(agent: &ureq::Agent, plan: &RequestPlan, cap: usize) -> HttpAnswer {
    let mut answer = HttpAnswer {
        http_status: None,
        body: Vec::new(),
        truncated: false,
        error: None,
        content_type: None,
        location: None,
        duration: Duration::ZERO,
    };
    let mut b = ureq::http::Request::builder()
        .method(plan.method.as_str())
        .uri(plan.url.as_str())
        // No connection is kept for another call; saying so lets the server close it.
        .header("Connection", "close");
    for h in &plan.headers {
        b = b.header(h.name.as_str(), h.value.as_str());
    }
    let sent = match &plan.body {
        Some(bytes) => b.body(bytes.clone()).map(|r| agent.run(r)),
        None => b.body(()).map(|r| agent.run(r)),
    };
    let mut response = match sent {
        Err(e) => {
            answer.error = Some(format!("cannot build the request: {e}"));
            return answer;
        }
        Ok(Err(e)) => {
            answer.error = Some(describe(&e));
            return answer;
        }
        Ok(Ok(r)) => r,
    };
    answer.http_status = Some(response.status().as_u16());
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    answer.content_type = header("content-type");
    answer.location = header("location");
    let mut reader = response
        .body_mut()
        .with_config()
        .limit(u64::MAX)
        .reader()
        .take(cap as u64 + 1);
    let mut buf = Vec::with_capacity(cap.min(64 * 1024));
    match reader.read_to_end(&mut buf) {
        Ok(_) => {}
        Err(e) => {
            answer.error = Some(format!(
                "the connection failed after {} bytes of the body: {}",
                buf.len(),
                lower(&e.to_string())
            ));
        }
    }
    if buf.len() > cap {
        buf.truncate(cap);
        answer.truncated = true;
    }
    answer.body = buf;
    answer
}

fn describe(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Timeout(_) => "the server did not answer in time".into(),
        ureq::Error::ConnectionFailed => "cannot connect to the server".into(),
        ureq::Error::HostNotFound => "the server's host name does not resolve".into(),
        ureq::Error::Io(io) => format!("the connection failed: {}", lower(&io.to_string())),
        other => format!("the request failed: {}", lower(&other.to_string())),
    }
}

fn lower(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_lowercase().chain(c).collect(),
        None => String::new(),
    }
}

/// Fetches a document for install: `GET url`, within `limits` (a body past
/// [`Limits::body_cap`] is refused, not cut), same rules as [`send`] (no redirect, no
/// proxy, one origin).
///
/// # Errors
/// Why it could not be read, lowercase: a URL that is not `http(s)` (or carries a user
/// name or password), no answer, a status other than `2xx`, a body larger than the cap,
/// a time-out.
pub fn fetch(url: &str, limits: &Limits) -> Result<Vec<u8>, String> {
    let mut u =
        url::Url::parse(url).map_err(|e| format!("`{}`: {e}", crate::pointer::shorten(url)))?;
    if !matches!(u.scheme(), "http" | "https") || u.host().is_none() {
        return Err("a document URL must be `https://` or `http://` with a host".into());
    }
    if !u.username().is_empty() || u.password().is_some() {
        return Err("a document URL may not carry a user name or password".into());
    }
    u.set_fragment(None);
    let plan = RequestPlan {
        operation: String::new(),
        method: crate::Method::Get,
        url: u.to_string(),
        origin: origin_of(&u),
        headers: vec![crate::plan::Header {
            name: "Accept".into(),
            value: "application/json, application/yaml;q=0.9, */*;q=0.5".into(),
            secret: false,
        }],
        body: None,
    };
    match send(&plan, limits, None) {
        HttpOutcome::Answered(a) => {
            if let Some(e) = a.error {
                return Err(e);
            }
            match a.http_status {
                Some(s) if (200..300).contains(&s) => {}
                Some(s) => {
                    let mut m = format!("the server answered {s}");
                    if let Some(l) = &a.location {
                        m.push_str(&format!(
                            " (a redirect to `{}`, which hcp does not follow)",
                            crate::pointer::shorten(l)
                        ));
                    }
                    return Err(m);
                }
                None => return Err("no answer".into()),
            }
            if a.truncated {
                return Err(format!(
                    "the document is larger than {} bytes",
                    limits.body_cap
                ));
            }
            Ok(a.body)
        }
        HttpOutcome::TimedOut { .. } => Err(format!(
            "no complete answer within {} s",
            limits.timeout.as_secs()
        )),
        HttpOutcome::Cancelled { .. } => Err("cancelled".into()),
    }
}
