//! Sending one planned request (RUNTIME §1.3): one origin, no redirect followed, a
//! time-out, a cap on the body kept, and cancel through a descriptor.
//!
//! The client is `ureq` 3 with rustls (webpki roots), configured explicitly rather than
//! by its defaults: no redirect is followed (`max_redirects(0)`: a `3xx` is the answer,
//! whatever its `Location`), no proxy is used (`HTTP(S)_PROXY` in hcp's environment
//! cannot route a pack's requests elsewhere), no connection is kept for another call,
//! `4xx`/`5xx` are answers rather than errors, and the whole call, body included, is
//! bounded by [`Limits::timeout`] (ureq's global time-out). The request runs on the
//! calling thread; a cancel descriptor is watched by one thread for the whole process
//! (see the `watch` module), which shuts the call's agent down when it fires, so a
//! blocked read or write fails at once.

use crate::plan::RequestPlan;
use crate::server::origin_of;
use serde_json::Value;
use std::io::Read;
use std::os::fd::BorrowedFd;
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
    /// No connection to the server could be made, so nothing was sent: its host name does
    /// not resolve, or nothing accepts a connection at its address (refused, no route to
    /// its network). A failure once connected, where the request may have reached the
    /// server, is an [`HttpOutcome::Answered`] with its [`HttpAnswer::error`].
    Unreached {
        /// Why, lowercase (`cannot connect to the server: connection refused`).
        reason: String,
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
    let watch = match cancel.map(|c| watch::register(c, &agent)).transpose() {
        Ok(w) => w,
        Err(e) => return failed(format!("cannot watch for cancel: {e}")),
    };
    let mut answer = perform(&agent, plan, limits.body_cap);
    answer.duration = start.elapsed();
    let cancelled = watch.is_some_and(watch::Ticket::stop);
    if cancelled {
        return HttpOutcome::Cancelled {
            duration: answer.duration,
        };
    }
    if answer.timed_out || answer.duration >= limits.timeout {
        return HttpOutcome::TimedOut {
            duration: answer.duration,
        };
    }
    if answer.unreached {
        return HttpOutcome::Unreached {
            reason: answer.error.clone().unwrap_or_default(),
            duration: answer.duration,
        };
    }
    HttpOutcome::Answered(answer.into_answer())
}

/// Cancel watching, shared by every call of the process: one thread waits in `poll(2)` on
/// a duplicate of each distinct cancel descriptor it was given (told apart by device and
/// inode, so a process's one signal self-pipe is registered once) and on a wake pipe. A
/// call registers its agent under its descriptor (a lock, an `fstat`, and a wake only the
/// first time a descriptor is seen) and leaves when it ends, so a call that is not
/// cancelled never waits for that thread nor starts one. When a descriptor becomes
/// readable, every call registered under it is marked and its agent shut down, which makes
/// its blocked read or write fail at once; the descriptor is then dropped from the set (it
/// stays readable: the caller's to drain).
mod watch {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::io::{Read, Write};
    use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::{Arc, Mutex, OnceLock};

    struct Call {
        id: u64,
        agent: ureq::Agent,
        fired: Arc<AtomicBool>,
    }

    struct Entry {
        key: (u64, u64),
        fd: Arc<OwnedFd>,
        calls: Vec<Call>,
    }

    struct Hub {
        entries: Mutex<Vec<Entry>>,
        wake: Mutex<std::io::PipeWriter>,
        next: AtomicU64,
    }

    static HUB: OnceLock<Option<Hub>> = OnceLock::new();

    fn hub() -> Option<&'static Hub> {
        HUB.get_or_init(|| {
            let (r, w) = std::io::pipe().ok()?;
            std::thread::Builder::new()
                .name("hcp-openapi-cancel".into())
                .spawn(move || run(r))
                .ok()?;
            Some(Hub {
                entries: Mutex::new(Vec::new()),
                wake: Mutex::new(w),
                next: AtomicU64::new(0),
            })
        })
        .as_ref()
    }

    fn run(mut wake: std::io::PipeReader) {
        loop {
            let Some(h) = HUB.get().and_then(Option::as_ref) else {
                // The hub is being made: its first registration wakes us.
                let mut b = [0u8; 64];
                if wake.read(&mut b).is_err() {
                    return;
                }
                continue;
            };
            let raw: Vec<(Arc<OwnedFd>, (u64, u64))> = match h.entries.lock() {
                Ok(e) => e.iter().map(|e| (Arc::clone(&e.fd), e.key)).collect(),
                Err(_) => return,
            };
            let mut fds = vec![PollFd::new(wake.as_fd(), PollFlags::POLLIN)];
            fds.extend(
                raw.iter()
                    .map(|(fd, _)| PollFd::new(fd.as_fd(), PollFlags::POLLIN)),
            );
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => continue,
                Err(_) => return,
            }
            let ready = |f: &PollFd<'_>| f.revents().is_some_and(|r| !r.is_empty());
            let woke = ready(&fds[0]);
            let fired: Vec<(u64, u64)> = fds[1..]
                .iter()
                .zip(&raw)
                .filter(|(f, _)| ready(f))
                .map(|(_, (_, key))| *key)
                .collect();
            drop(fds);
            if woke {
                let mut b = [0u8; 64];
                let _ = wake.read(&mut b);
            }
            if fired.is_empty() {
                continue;
            }
            let gone: Vec<Entry> = match h.entries.lock() {
                Ok(mut e) => {
                    let (out, keep) = std::mem::take(&mut *e)
                        .into_iter()
                        .partition(|x| fired.contains(&x.key));
                    *e = keep;
                    out
                }
                Err(_) => return,
            };
            for entry in gone {
                for c in entry.calls {
                    c.fired.store(true, Ordering::SeqCst);
                    c.agent.shutdown();
                }
            }
        }
    }

    /// A call's registration.
    pub(super) struct Ticket {
        id: u64,
        key: (u64, u64),
        fired: Arc<AtomicBool>,
    }

    /// Registers `agent` under `cancel`.
    pub(super) fn register(cancel: BorrowedFd<'_>, agent: &ureq::Agent) -> std::io::Result<Ticket> {
        let h = hub().ok_or_else(|| std::io::Error::other("cannot start the cancel watcher"))?;
        let st = nix::sys::stat::fstat(cancel).map_err(std::io::Error::from)?;
        let key = (st.st_dev as u64, st.st_ino as u64);
        let id = h.next.fetch_add(1, Ordering::Relaxed);
        let fired = Arc::new(AtomicBool::new(false));
        let call = Call {
            id,
            agent: agent.clone(),
            fired: Arc::clone(&fired),
        };
        let mut new = false;
        {
            let mut e = h
                .entries
                .lock()
                .map_err(|_| std::io::Error::other("the cancel watcher failed"))?;
            match e.iter_mut().find(|x| x.key == key) {
                Some(x) => x.calls.push(call),
                None => {
                    e.push(Entry {
                        key,
                        fd: Arc::new(cancel.try_clone_to_owned()?),
                        calls: vec![call],
                    });
                    new = true;
                }
            }
        }
        if new && let Ok(mut w) = h.wake.lock() {
            w.write_all(b"x")?;
        }
        Ok(Ticket { id, key, fired })
    }

    impl Ticket {
        /// Leaves the watch; whether the call was cancelled.
        pub(super) fn stop(self) -> bool {
            if let Some(h) = HUB.get().and_then(Option::as_ref)
                && let Ok(mut e) = h.entries.lock()
                && let Some(x) = e.iter_mut().find(|x| x.key == self.key)
            {
                x.calls.retain(|c| c.id != self.id);
            }
            self.fired.load(Ordering::SeqCst)
        }
    }
}

/// What the calling thread got, before it is told apart from a time-out.
struct Got {
    answer: HttpAnswer,
    timed_out: bool,
    /// No connection was made: nothing was sent ([`HttpOutcome::Unreached`]).
    unreached: bool,
}

impl std::ops::Deref for Got {
    type Target = HttpAnswer;
    fn deref(&self) -> &HttpAnswer {
        &self.answer
    }
}

impl std::ops::DerefMut for Got {
    fn deref_mut(&mut self) -> &mut HttpAnswer {
        &mut self.answer
    }
}

impl Got {
    fn into_answer(self) -> HttpAnswer {
        self.answer
    }
}

fn perform(agent: &ureq::Agent, plan: &RequestPlan, cap: usize) -> Got {
    let mut timed_out = false;
    let mut unreached = false;
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
            return Got {
                answer,
                timed_out,
                unreached,
            };
        }
        Ok(Err(e)) => {
            timed_out = is_timeout(&e);
            unreached = is_unreached(&e);
            answer.error = Some(describe(&e));
            return Got {
                answer,
                timed_out,
                unreached,
            };
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
            timed_out = e.kind() == std::io::ErrorKind::TimedOut
                || e.get_ref()
                    .and_then(|i| i.downcast_ref::<ureq::Error>())
                    .is_some_and(is_timeout);
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
    Got {
        answer,
        timed_out,
        unreached,
    }
}

/// Whether `e` came before any connection was made, so that nothing was sent: a host name
/// that does not resolve, or a connection refused or without a route to its network. (A
/// host unreachable can also end a connection already made, so it is not one.)
fn is_unreached(e: &ureq::Error) -> bool {
    match e {
        ureq::Error::HostNotFound | ureq::Error::ConnectionFailed => true,
        ureq::Error::Io(io) => matches!(
            io.kind(),
            std::io::ErrorKind::ConnectionRefused
                | std::io::ErrorKind::NetworkUnreachable
                | std::io::ErrorKind::AddrNotAvailable
        ),
        _ => false,
    }
}

fn is_timeout(e: &ureq::Error) -> bool {
    match e {
        ureq::Error::Timeout(_) => true,
        ureq::Error::Io(io) => io.kind() == std::io::ErrorKind::TimedOut,
        _ => false,
    }
}

fn describe(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Timeout(_) => "the server did not answer in time".into(),
        ureq::Error::ConnectionFailed => "cannot connect to the server".into(),
        ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
            "cannot connect to the server: connection refused".into()
        }
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
        HttpOutcome::Unreached { reason, .. } => Err(reason),
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
