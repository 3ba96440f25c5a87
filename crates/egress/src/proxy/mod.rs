//! hcp's egress proxy (RUNTIME §5.5): serves one call's listener for the call's lifetime.
//!
//! A [`Proxy`] runs on one thread of its own with a current-thread tokio runtime, started
//! by [`Proxy::start`] only for a call whose network is `{"allow": […]}` and ended by
//! [`Proxy::finish`], which answers the call's [`ConnectionLog`]. A `deny` or `host` call
//! never makes one: no thread, no runtime.
//!
//! Per connection of the child, in order:
//!
//! 1. the request head, read within [`Limits::head_timeout`] (10 s) and
//!    [`Limits::head_bytes`] (8 KiB) with at most [`Limits::headers`] (100) fields, parsed
//!    by `httparse`: `CONNECT host:port` (a tunnel for TLS or any TCP stream) or a request
//!    whose target is an absolute `http://` URI (forwarded). Anything else is answered
//!    `400` (malformed, a request to the proxy itself, `https://` in a URI), `431` (too
//!    large) or `408` (too slow) and closed;
//! 2. the target checked against the allow list ([`AllowList::check`]): host and port;
//!    unlisted → `403` naming the destination and the key to change;
//! 3. a name resolved by hcp ([`Resolve`], the system's resolver by default) within
//!    [`Limits::resolve_timeout`], and every address of the answer checked
//!    ([`AllowList::check_address`]): one loopback, private, link-local, unique-local or
//!    other special address that no entry names literally refuses the target (`403`);
//! 4. a connection to the addresses checked, in order, within
//!    [`Limits::connect_timeout`] (`502` / `504` when none answers), never to a second
//!    resolution's;
//! 5. a `CONNECT` is answered `200` and its bytes relayed both ways as they are (hcp does
//!    not look inside TLS: a destination is an address reached, not a site served); a
//!    forwarded request goes to the origin with its request line in origin form, `Host`
//!    set from the URI, hop-by-hop headers dropped and `Connection: close`, and the rest
//!    relayed both ways: **one request per connection** (a client opens another for the
//!    next).
//!
//! At most [`Limits::max_connections`] (256) connections are served at once; one more
//! is answered `503` at once and closed, and counted like every other. Each connection
//! ends in the [`ConnectionLog`] with its destination, port, bytes each way and verdict.

mod head;
mod relay;
mod resolve;

pub use resolve::{Resolve, StaticResolver, SystemResolver};

use crate::allow::{AllowList, Refusal};
use crate::destination::{Target, TargetHost};
use crate::log::{Connection, ConnectionLog, Verdict};
use head::{HeadError, Request};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tokio::time::timeout;

/// Default [`Limits::head_bytes`]: 8 KiB.
pub const DEFAULT_HEAD_BYTES: usize = 8 * 1024;
/// Default [`Limits::headers`]: 100 header fields.
pub const DEFAULT_HEADERS: usize = 100;
/// Default [`Limits::head_timeout`]: 10 s.
pub const DEFAULT_HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Default [`Limits::resolve_timeout`]: 10 s.
pub const DEFAULT_RESOLVE_TIMEOUT: Duration = Duration::from_secs(10);
/// Default [`Limits::connect_timeout`]: 10 s for all the addresses of one target.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default [`Limits::max_connections`]: 256 connections served at once.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;

/// The proxy's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of a request head, its empty line included ([`DEFAULT_HEAD_BYTES`]).
    pub head_bytes: usize,
    /// Header fields of a request head ([`DEFAULT_HEADERS`]).
    pub headers: usize,
    /// Time from accepting a connection to the end of its head ([`DEFAULT_HEAD_TIMEOUT`]).
    pub head_timeout: Duration,
    /// Time to resolve a name ([`DEFAULT_RESOLVE_TIMEOUT`]).
    pub resolve_timeout: Duration,
    /// Time to connect to a target, all its addresses together
    /// ([`DEFAULT_CONNECT_TIMEOUT`]).
    pub connect_timeout: Duration,
    /// Connections served at once ([`DEFAULT_MAX_CONNECTIONS`]).
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            head_bytes: DEFAULT_HEAD_BYTES,
            headers: DEFAULT_HEADERS,
            head_timeout: DEFAULT_HEAD_TIMEOUT,
            resolve_timeout: DEFAULT_RESOLVE_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// What one call's proxy serves.
pub struct ProxyConfig {
    /// The call's destinations.
    pub allow: AllowList,
    /// The `config.json` key that lists them, named in every `403`
    /// (`packs.gh.network`, or `sandbox.network`).
    pub key: String,
    /// The bounds.
    pub limits: Limits,
    /// What resolves names ([`SystemResolver`] outside tests).
    pub resolver: Arc<dyn Resolve>,
}

impl std::fmt::Debug for ProxyConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyConfig")
            .field("allow", &self.allow)
            .field("key", &self.key)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl ProxyConfig {
    /// `allow` under `key`, the default limits, the system's resolver.
    pub fn new(allow: AllowList, key: impl Into<String>) -> Self {
        Self {
            allow,
            key: key.into(),
            limits: Limits::default(),
            resolver: Arc::new(SystemResolver),
        }
    }
}

/// Why a proxy could not start.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The runtime, the listener's registration or the thread could not be made.
    #[error("the egress proxy could not start: {what}")]
    Start {
        /// What failed.
        what: &'static str,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// A running proxy: one thread serving one listener until [`Proxy::finish`]. Dropping it
/// finishes it too (and loses the log).
#[derive(Debug)]
pub struct Proxy {
    stop: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<ConnectionLog>>,
}

impl Proxy {
    /// Serves `listener` (a listening TCP socket, in the child's network namespace or
    /// any other) with `config`, on a thread of its own, until [`Proxy::finish`].
    ///
    /// # Errors
    /// [`ProxyError::Start`] when the runtime, the listener's registration or the thread
    /// cannot be made.
    pub fn start(listener: std::net::TcpListener, config: ProxyConfig) -> Result<Self, ProxyError> {
        let start = |what| move |source| ProxyError::Start { what, source };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .max_blocking_threads(8)
            .thread_name("hcp-egress-resolve")
            .build()
            .map_err(start("the runtime"))?;
        listener
            .set_nonblocking(true)
            .map_err(start("the listener"))?;
        let listener = {
            let _in = rt.enter();
            TcpListener::from_std(listener).map_err(start("the listener"))?
        };
        let (stop, stopped) = watch::channel(false);
        let thread = std::thread::Builder::new()
            .name("hcp-egress".into())
            .spawn(move || {
                let log = rt.block_on(serve(listener, Arc::new(config), stopped));
                // A resolution still running on a blocking thread is not waited for.
                rt.shutdown_background();
                log
            })
            .map_err(start("the thread"))?;
        Ok(Self {
            stop,
            thread: Some(thread),
        })
    }

    /// Ends the proxy: the listener is closed, connections not yet taken from it are
    /// counted (`call_ended`), every open connection is closed with what it relayed so
    /// far counted, and the thread is joined. Returns the call's log.
    pub fn finish(mut self) -> ConnectionLog {
        self.end().unwrap_or_default()
    }

    fn end(&mut self) -> Option<ConnectionLog> {
        let _ = self.stop.send(true);
        self.thread.take().and_then(|t| t.join().ok())
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.end();
    }
}

/// What every connection task shares.
struct Shared {
    config: Arc<ProxyConfig>,
    log: Mutex<ConnectionLog>,
}

impl Shared {
    fn record(&self, seq: u64, c: Connection) {
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .record(seq, c);
    }
}

/// The accept loop, until `stopped` says so.
async fn serve(
    listener: TcpListener,
    config: Arc<ProxyConfig>,
    mut stopped: watch::Receiver<bool>,
) -> ConnectionLog {
    let shared = Arc::new(Shared {
        config: config.clone(),
        log: Mutex::new(ConnectionLog::new()),
    });
    let slots = Arc::new(Semaphore::new(config.limits.max_connections));
    let mut tasks = JoinSet::new();
    let for_tasks = stopped.clone();
    let mut seq: u64 = 0;
    loop {
        tokio::select! {
            _ = stopped.wait_for(|s| *s) => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let n = seq;
                    seq += 1;
                    match slots.clone().try_acquire_owned() {
                        Ok(slot) => {
                            let shared = shared.clone();
                            let stopped = for_tasks.clone();
                            tasks.spawn(async move {
                                connection(stream, n, &shared, stopped).await;
                                drop(slot);
                            });
                        }
                        Err(_) => {
                            // Over the cap: answered at once without reading, never
                            // waited on.
                            let body = format!(
                                "hcp: more than {} connections at once through the egress proxy\n",
                                config.limits.max_connections
                            );
                            let _ = stream.try_write(&response(503, "Service Unavailable", &body));
                            shared.record(n, Connection::unread("too_many_connections"));
                        }
                    }
                }
                // A descriptor or memory shortage: give the tasks a moment to end.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
    // Connections the child made that were not taken yet reached nothing.
    while let Ok(Ok(_)) = timeout(Duration::ZERO, listener.accept()).await {
        shared.record(seq, Connection::unread("call_ended"));
        seq += 1;
    }
    drop(listener);
    while tasks.join_next().await.is_some() {}
    drop(tasks);
    match Arc::try_unwrap(shared) {
        Ok(s) => s.log.into_inner().unwrap_or_else(PoisonError::into_inner),
        Err(s) => s.log.lock().unwrap_or_else(PoisonError::into_inner).clone(),
    }
}

/// One connection of the child, logged when it ends, or when the proxy is stopped.
async fn connection(
    mut stream: TcpStream,
    seq: u64,
    shared: &Shared,
    mut stopped: watch::Receiver<bool>,
) {
    let mut conn = Connection::unread("call_ended");
    tokio::select! {
        () = handle(&mut stream, &shared.config, &mut conn) => {}
        _ = stopped.wait_for(|s| *s) => {}
    }
    shared.record(seq, conn);
}

/// A status line, headers and a short text body, closing.
fn response(status: u16, phrase: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status} {phrase}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Writes an answer that ends the connection (bounded in time: a child that does not
/// read is not waited on).
async fn answer(stream: &mut TcpStream, status: u16, phrase: &str, body: &str) {
    let bytes = response(status, phrase, body);
    let _ = timeout(Duration::from_secs(5), async {
        stream.write_all(&bytes).await?;
        stream.shutdown().await
    })
    .await;
    // What the child sent beyond the head is read and dropped for a moment (at most 64
    // KiB, 1 s), so that closing with unread bytes does not reset the connection before
    // the child has read the answer.
    let _ = timeout(Duration::from_secs(1), async {
        let mut sink = [0u8; 4096];
        let mut left: usize = 64 * 1024;
        while left > 0 {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    })
    .await;
}

/// Serves one connection, filling `conn` as it learns (so that a stop at any point logs
/// what was done).
async fn handle(stream: &mut TcpStream, config: &ProxyConfig, conn: &mut Connection) {
    let limits = &config.limits;
    let (request, rest) = match timeout(limits.head_timeout, head::read(stream, limits)).await {
        Err(_) => {
            conn.reason = Some("head_timeout");
            let body = format!(
                "hcp: the request head did not arrive within {} s\n",
                limits.head_timeout.as_secs()
            );
            answer(stream, 408, "Request Timeout", &body).await;
            return;
        }
        Ok(Err(e)) => {
            conn.reason = Some(bad_request_reason(&e));
            refuse_head(stream, &e, limits).await;
            return;
        }
        Ok(Ok((buf, end))) => match head::parse(&buf[..end], limits) {
            Ok(r) => (r, buf[end..].to_vec()),
            Err(e) => {
                if let HeadError::BadTarget(d) = &e {
                    conn.dest = Some(d.entry.clone());
                }
                conn.reason = Some(bad_request_reason(&e));
                refuse_head(stream, &e, limits).await;
                return;
            }
        },
    };
    let (target, forward_head) = match request {
        Request::Connect(t) => {
            conn.kind = Some("connect");
            (t, None)
        }
        Request::Forward { target, head } => {
            conn.kind = Some("forward");
            (target, Some(head))
        }
    };
    conn.dest = Some(target.host.to_string());
    conn.port = Some(target.port);
    if let Err(r) = config.allow.check(&target) {
        conn.reason = Some(r.as_str());
        refuse(stream, config, &target, &r).await;
        return;
    }
    let addresses = match &target.host {
        TargetHost::Ip(a) => vec![*a],
        TargetHost::Name(name) => {
            let resolver = config.resolver.clone();
            let (name, port) = (name.clone(), target.port);
            let answer_of = tokio::task::spawn_blocking(move || resolver.resolve(&name, port));
            match timeout(limits.resolve_timeout, answer_of).await {
                Ok(Ok(Ok(a))) if !a.is_empty() => a,
                _ => {
                    conn.verdict = Verdict::Allowed;
                    conn.reason = Some("resolve_failed");
                    answer(
                        stream,
                        502,
                        "Bad Gateway",
                        &format!("hcp: `{target}` is listed, but its name did not resolve\n"),
                    )
                    .await;
                    return;
                }
            }
        }
    };
    for a in &addresses {
        if let Err(r) = config.allow.check_address(*a, target.port) {
            conn.address = Some(a.to_canonical());
            conn.reason = Some(r.as_str());
            refuse(stream, config, &target, &r).await;
            return;
        }
    }
    conn.verdict = Verdict::Allowed;
    conn.reason = None;
    let upstream = match connect(&addresses, target.port, limits.connect_timeout).await {
        Ok((s, a)) => {
            conn.address = Some(a);
            s
        }
        Err(reason) => {
            conn.reason = Some(reason);
            let (status, phrase) = if reason == "connect_timeout" {
                (504, "Gateway Timeout")
            } else {
                (502, "Bad Gateway")
            };
            answer(
                stream,
                status,
                phrase,
                &format!("hcp: `{target}` is listed, but it did not accept a connection\n"),
            )
            .await;
            return;
        }
    };
    let mut upstream = upstream;
    let first = match forward_head {
        None => {
            if stream
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .await
                .is_err()
            {
                return;
            }
            rest
        }
        Some(mut h) => {
            h.extend_from_slice(&rest);
            h
        }
    };
    if upstream.write_all(&first).await.is_err() {
        return;
    }
    conn.sent = first.len() as u64;
    relay::both_ways(stream, &mut upstream, &mut conn.sent, &mut conn.received).await;
}

/// The log's reason for a head refused at parsing.
fn bad_request_reason(e: &HeadError) -> &'static str {
    match e {
        HeadError::Closed => "closed",
        HeadError::TooLarge => "head_too_large",
        HeadError::Malformed(_) => "malformed",
        HeadError::BadTarget(_) => "bad_target",
        HeadError::Unsupported(_) => "unsupported",
    }
}

/// Answers a head that is refused: `431` or `400` with why.
async fn refuse_head(stream: &mut TcpStream, e: &HeadError, limits: &Limits) {
    match e {
        HeadError::Closed => {}
        HeadError::TooLarge => {
            answer(
                stream,
                431,
                "Request Header Fields Too Large",
                &format!(
                    "hcp: a request head is at most {} bytes and {} header fields\n",
                    limits.head_bytes, limits.headers
                ),
            )
            .await;
        }
        HeadError::Malformed(m) | HeadError::Unsupported(m) => {
            answer(stream, 400, "Bad Request", &format!("hcp: {m}\n")).await;
        }
        HeadError::BadTarget(d) => {
            answer(stream, 400, "Bad Request", &format!("hcp: {d}\n")).await;
        }
    }
}

/// Answers `403` naming the destination, why, and the key that lists destinations.
async fn refuse(stream: &mut TcpStream, config: &ProxyConfig, target: &Target, r: &Refusal) {
    let key = &config.key;
    let body = match r {
        Refusal::Address { address, .. } => format!(
            "hcp: `{target}` is not reachable from this call: {r}; the owner may list `{}` in `{key}` of config.json\n",
            literal(*address, target.port)
        ),
        _ => format!(
            "hcp: `{target}` is not a destination of this call ({r}); the owner may add it to `{key}` of config.json\n"
        ),
    };
    answer(stream, 403, "Forbidden", &body).await;
}

/// `ADDRESS:PORT` as an entry writes it.
fn literal(a: IpAddr, port: u16) -> String {
    match a {
        IpAddr::V4(v4) => format!("{v4}:{port}"),
        IpAddr::V6(v6) => format!("[{v6}]:{port}"),
    }
}

/// Connects to the first of `addresses` that answers, all within `limit`.
async fn connect(
    addresses: &[IpAddr],
    port: u16,
    limit: Duration,
) -> Result<(TcpStream, IpAddr), &'static str> {
    let tries = async {
        for a in addresses {
            if let Ok(s) = TcpStream::connect(SocketAddr::new(*a, port)).await {
                let _ = s.set_nodelay(true);
                return Ok((s, a.to_canonical()));
            }
        }
        Err("connect_failed")
    };
    timeout(limit, tries)
        .await
        .unwrap_or(Err("connect_timeout"))
}
