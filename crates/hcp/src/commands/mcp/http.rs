//! `hcp mcp --http ADDR`: the same tools over MCP's Streamable HTTP transport (RUNTIME §10,
//! "Streamable HTTP"). The transport and its message types are the SDK's
//! (`rmcp::transport::streamable_http_server`); hyper serves it on a TCP or Unix listener,
//! and this module is the door in front of it, checking every request before the SDK sees
//! it:
//!
//! 1. `Host` is the bound address (or the host of an origin in `mcp.http.origins`) and a
//!    browser's `Origin`, when one is sent, is listed in `mcp.http.origins`: else 403
//!    (DNS rebinding).
//! 2. `Authorization: Bearer TOKEN` names a live session of this store (§4): else 401 with
//!    `WWW-Authenticate: Bearer realm="hcp"` (and `error="invalid_token"` when a token
//!    came). The owner has no token: there is no owner over HTTP. No OAuth metadata is
//!    served.
//! 3. Per token: at most [`MAX_REQUESTS_PER_TOKEN`] requests in flight (open streams
//!    included; more: 429); a body of at most [`MAX_BODY_BYTES`] (more: 413,
//!    `request_too_large`, without reading it), which must arrive within
//!    [`BODY_TIMEOUT`] (else 408 and the connection is dropped); headers within
//!    [`HEADER_TIMEOUT`] of the connection opening (a slow-loris client is dropped); at most
//!    [`MAX_CONNECTIONS`] connections at once.
//! 4. A POSTed message is read as stdio's lines are ([`super::intake::classify`]): not
//!    JSON → -32700, params that do not fit → -32602, a repeated key or a batch → -32600,
//!    a response whose id is not exactly one hcp sent → dropped.
//! 5. A session (`Mcp-Session-Id`, revisions before 2026-07-28) belongs to the token that
//!    opened it: another token's request naming it is answered 404, so an elicitation's
//!    answer is bound to the token and to the session.
//!
//! Then the request goes to the SDK with the checked token in its extensions ([`Bearer`]);
//! the server runs the call as that session's principal ([`super::server::Server`]).

use super::intake::{self, Line};
use super::server::Server;
use crate::error::{CliError, CliResult};
use bytes::Bytes;
use hcp_model::Code;
use hcp_store::config::HttpOrigin;
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use sha2::Digest;
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The one path MCP is served on.
pub const PATH: &str = "/mcp";
/// The largest request body read, in bytes (1 MiB, as on stdio).
pub const MAX_BODY_BYTES: usize = intake::MAX_REQUEST_BYTES;
/// Requests of one token in flight at once, open streams included.
pub const MAX_REQUESTS_PER_TOKEN: usize = 16;
/// Connections open at once; one more is closed at once.
pub const MAX_CONNECTIONS: usize = 256;
/// How long a connection may take to send a request's headers.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a request may take to send its body.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);

type Body = BoxBody<Bytes, Infallible>;

/// What the door puts in a request's extensions for the server: the bearer token it
/// checked, and the client an answer of the person is bound to (a digest of the token).
#[derive(Debug, Clone)]
pub struct Bearer {
    /// The session token.
    pub token: String,
    /// `http:` and the first 128 bits of the token's SHA-256, in hex.
    pub client: String,
}

/// Where `--http` listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// `HOST:PORT`.
    Tcp(SocketAddr),
    /// `unix:PATH`.
    Unix(PathBuf),
}

impl Listen {
    /// Reads `--http ADDR`: `unix:PATH` (an absolute path), or `HOST:PORT` where HOST is
    /// an IP address or `localhost` (127.0.0.1).
    ///
    /// # Errors
    /// `usage` naming the argument.
    pub fn parse(text: &str) -> Result<Self, CliError> {
        let bad = |why: &str| {
            CliError::new(Code::Usage, format!("`--http {text}`: {why}")).hint(
                "`--http 127.0.0.1:8765`, `--http '[::1]:8765'` or `--http unix:/run/me/hcp.sock`",
            )
        };
        if let Some(p) = text.strip_prefix("unix:") {
            let p = PathBuf::from(p);
            if !p.is_absolute() {
                return Err(bad("the socket path is absolute"));
            }
            return Ok(Self::Unix(p));
        }
        let text_l = text
            .strip_prefix("localhost:")
            .map(|p| format!("127.0.0.1:{p}"));
        text_l
            .as_deref()
            .unwrap_or(text)
            .parse::<SocketAddr>()
            .map(Self::Tcp)
            .map_err(|_| bad("not `HOST:PORT` (an IP address or `localhost`) or `unix:PATH`"))
    }

    /// Whether what listens is reachable from this machine alone (loopback, or a socket).
    pub fn is_local(&self) -> bool {
        match self {
            Self::Tcp(a) => a.ip().is_loopback(),
            Self::Unix(_) => true,
        }
    }
}

/// The `Host` values a request may carry: the bound address (and `localhost` for a
/// loopback address or a socket), and the authority of every listed origin.
fn allowed_hosts(bound: &Listen, origins: &[HttpOrigin]) -> Vec<String> {
    let mut out: Vec<String> = origins.iter().map(|o| o.authority().to_owned()).collect();
    match bound {
        Listen::Tcp(a) => {
            out.push(a.to_string());
            if a.ip().is_unspecified() {
                // Every address of the machine, loopback among them; any other name
                // reaches it only as the host of a listed origin.
                out.push(format!("127.0.0.1:{}", a.port()));
                out.push(format!("[::1]:{}", a.port()));
            }
            if a.ip().is_loopback() || a.ip().is_unspecified() {
                out.push(format!("localhost:{}", a.port()));
            }
            if a.port() == 80 {
                out.push(match a.ip() {
                    IpAddr::V4(ip) => ip.to_string(),
                    IpAddr::V6(ip) => format!("[{ip}]"),
                });
            }
        }
        Listen::Unix(_) => out.push("localhost".into()),
    }
    out
}

/// The door's state, shared by every connection.
struct Door {
    rt: Arc<hcp_runtime::Runtime>,
    hosts: Vec<String>,
    origins: Vec<String>,
    per_token: Mutex<HashMap<String, Arc<Semaphore>>>,
    /// `Mcp-Session-Id` → the client (token digest) that opened it.
    sessions: Mutex<HashMap<String, String>>,
    /// The SDK's sessions, to forget the owners of those that ended.
    manager: Arc<LocalSessionManager>,
    sdk: StreamableHttpService<Server, LocalSessionManager>,
}

/// Past this many remembered session owners, those of ended sessions are forgotten.
const SESSION_OWNERS_PRUNE_AT: usize = 1024;

fn plain(status: StatusCode, text: impl Into<String>) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(text.into())).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

fn json_response(status: StatusCode, v: &serde_json::Value) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(v.to_string())).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn unauthorized(token_came: bool, why: &str) -> Response<Body> {
    let mut r = plain(
        StatusCode::UNAUTHORIZED,
        format!("401 unauthorized: {why}\n"),
    );
    let challenge = if token_came {
        r#"Bearer realm="hcp", error="invalid_token""#
    } else {
        r#"Bearer realm="hcp""#
    };
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static(challenge),
    );
    r
}

/// `http:` and the first 16 bytes of the token's SHA-256, in hex.
pub fn client_of(token: &str) -> String {
    let d = sha2::Sha256::digest(token.as_bytes());
    format!("http:{}", hex::encode(&d[..16]))
}

impl Door {
    async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Response<Body> {
        let (mut parts, body) = req.into_parts();
        // 1. Host and Origin (DNS rebinding), before anything else is read.
        let host = parts
            .headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        if !self.hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
            return plain(
                StatusCode::FORBIDDEN,
                format!("403 forbidden: `Host: {host}` is not this server's address\n"),
            );
        }
        if let Some(origin) = parts.headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("");
            if !self.origins.iter().any(|o| o == origin) {
                return plain(
                    StatusCode::FORBIDDEN,
                    format!(
                        "403 forbidden: origin `{origin}` is not listed in `mcp.http.origins`\n"
                    ),
                );
            }
        }
        if parts.uri.path() != PATH {
            return plain(
                StatusCode::NOT_FOUND,
                format!("404: MCP is served on `{PATH}`\n"),
            );
        }
        // 2. The bearer token names a live session of this store.
        let Some(auth) = parts.headers.get(header::AUTHORIZATION) else {
            return unauthorized(
                false,
                "a session token is required (`Authorization: Bearer TOKEN`)",
            );
        };
        let token = auth
            .to_str()
            .ok()
            .and_then(|a| {
                a.strip_prefix("Bearer ")
                    .or_else(|| a.strip_prefix("bearer "))
            })
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_owned);
        let Some(token) = token else {
            return unauthorized(true, "the `Authorization` header is not `Bearer TOKEN`");
        };
        let rt = self.rt.clone();
        let checked = {
            let token = token.clone();
            tokio::task::spawn_blocking(move || {
                rt.state().session_resolve(&token, jiff::Timestamp::now())
            })
            .await
        };
        match checked {
            Ok(Ok(_)) => {}
            Ok(Err(hcp_store::session::SessionError::Bad(_))) => {
                return unauthorized(true, "the token is no live session of this store");
            }
            // The store or a fleet's database cannot answer: nothing runs, and the token
            // is not called bad for it.
            Ok(Err(e)) => {
                return json_response(
                    StatusCode::SERVICE_UNAVAILABLE,
                    &serde_json::json!({ "code": e.code(), "message": e.to_string() }),
                );
            }
            Err(_) => return plain(StatusCode::INTERNAL_SERVER_ERROR, "500\n"),
        }
        let client = client_of(&token);
        // 3. Bounded per token: the permit lives as long as the answer's body, so an open
        // stream counts until it closes.
        let permit: OwnedSemaphorePermit = {
            let sem = self
                .per_token
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(client.clone())
                .or_insert_with(|| Arc::new(Semaphore::new(MAX_REQUESTS_PER_TOKEN)))
                .clone();
            match sem.try_acquire_owned() {
                Ok(p) => p,
                Err(_) => {
                    return plain(
                        StatusCode::TOO_MANY_REQUESTS,
                        format!(
                            "429: this token has {MAX_REQUESTS_PER_TOKEN} requests in flight\n"
                        ),
                    );
                }
            }
        };
        // 5. A session belongs to the token that opened it.
        if let Some(sid) = parts
            .headers
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
        {
            let owner = self
                .sessions
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(sid)
                .cloned();
            if owner.is_some_and(|o| o != client) {
                return plain(StatusCode::NOT_FOUND, "404: no such session\n");
            }
        }
        let too_large = parts
            .headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|n| n > MAX_BODY_BYTES as u64);
        if too_large {
            return too_large_response();
        }
        let read = tokio::time::timeout(BODY_TIMEOUT, Limited::new(body, MAX_BODY_BYTES).collect());
        let bytes = match read.await {
            Err(_) => {
                let mut r = plain(
                    StatusCode::REQUEST_TIMEOUT,
                    "408: the body came too slowly\n",
                );
                r.headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
                return r;
            }
            Ok(Err(e))
                if e.downcast_ref::<http_body_util::LengthLimitError>()
                    .is_some() =>
            {
                return too_large_response();
            }
            Ok(Err(e)) => return plain(StatusCode::BAD_REQUEST, format!("400: {e}\n")),
            Ok(Ok(c)) => c.to_bytes(),
        };
        // 4. A message is read as stdio reads a line.
        if parts.method == http::Method::POST {
            match intake::classify(&bytes) {
                Line::Message(_) => {}
                Line::Answer(a) => return json_response(StatusCode::BAD_REQUEST, &a),
                Line::Drop(why) => {
                    tracing::debug!("dropped {why}");
                    return plain(StatusCode::ACCEPTED, "");
                }
            }
        }
        parts.extensions.insert(Bearer {
            token,
            client: client.clone(),
        });
        let req = Request::from_parts(parts, Full::new(bytes));
        let mut sdk = self.sdk.clone();
        let resp = match tower_service::Service::call(&mut sdk, req).await {
            Ok(r) => r,
            Err(never) => match never {},
        };
        if let Some(sid) = resp
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
        {
            self.sessions
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(sid.to_owned())
                .or_insert(client);
            let many = self
                .sessions
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .len()
                > SESSION_OWNERS_PRUNE_AT;
            if many {
                let live = self.manager.sessions.read().await;
                self.sessions
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .retain(|sid, _| live.contains_key(sid.as_str()));
            }
        }
        resp.map(|b| {
            b.map_frame(move |f| {
                let _held = &permit;
                f
            })
            .boxed()
        })
    }
}

fn too_large_response() -> Response<Body> {
    json_response(
        StatusCode::PAYLOAD_TOO_LARGE,
        &serde_json::json!({
            "code": "request_too_large",
            "message": format!("the request body is larger than {MAX_BODY_BYTES} bytes; it was not read"),
            "max_bytes": MAX_BODY_BYTES,
        }),
    )
}

/// Serves `server` on `listen` until the process is stopped (SIGINT, SIGTERM).
///
/// # Errors
/// `mcp_failed` when the address cannot be bound, the TLS files do not load, or
/// `config.json` does not parse (`bad_config`).
pub async fn serve(
    server: Server,
    rt: Arc<hcp_runtime::Runtime>,
    listen: Listen,
    tls: Option<tokio_rustls::TlsAcceptor>,
) -> CliResult {
    let config = hcp_store::config::RuntimeConfig::load(rt.home().root()).map_err(|e| {
        CliError::new(
            Code::BadConfig,
            format!("`config.json` does not parse: {e}"),
        )
    })?;
    let origins = config.mcp.http.origins;
    let sdk_config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .disable_allowed_origins()
        .with_json_response(true)
        .with_max_request_body_bytes(MAX_BODY_BYTES);
    let factory = {
        let server = server.clone();
        move || Ok(server.clone())
    };
    let manager = Arc::new(LocalSessionManager::default());
    let door = Arc::new(Door {
        rt,
        hosts: allowed_hosts(&listen, &origins),
        origins: origins.iter().map(|o| o.as_str().to_owned()).collect(),
        per_token: Mutex::new(HashMap::new()),
        sessions: Mutex::new(HashMap::new()),
        sdk: StreamableHttpService::new(factory, manager.clone(), sdk_config),
        manager,
    });
    let connections = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let scheme = if tls.is_some() { "https" } else { "http" };
    match listen {
        Listen::Tcp(addr) => {
            let l = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
                CliError::new(Code::McpFailed, format!("cannot listen on `{addr}`")).cause(e)
            })?;
            let bound = l.local_addr().unwrap_or(addr);
            // The bound port (`:0` asks the kernel for one) is part of the address.
            let door = if bound == addr {
                door
            } else {
                let mut d = Arc::into_inner(door).ok_or_else(|| {
                    CliError::new(
                        Code::McpFailed,
                        "the server's door is shared before it opens",
                    )
                })?;
                d.hosts = allowed_hosts(&Listen::Tcp(bound), &origins);
                Arc::new(d)
            };
            eprintln!("hcp mcp: listening on {scheme}://{bound}{PATH}");
            loop {
                let Ok((stream, _)) = l.accept().await else {
                    continue;
                };
                spawn_connection(stream, door.clone(), tls.clone(), &connections);
            }
        }
        Listen::Unix(path) => {
            let l = bind_unix(&path)?;
            eprintln!("hcp mcp: listening on unix:{}{PATH}", path.display());
            loop {
                let Ok((stream, _)) = l.accept().await else {
                    continue;
                };
                spawn_connection(stream, door.clone(), tls.clone(), &connections);
            }
        }
    }
}

/// Binds `path` with mode 0600 from the start (the umask is set around the bind).
fn bind_unix(path: &std::path::Path) -> Result<tokio::net::UnixListener, CliError> {
    use nix::sys::stat::{Mode, umask};
    if path.exists() {
        return Err(CliError::new(
            Code::McpFailed,
            format!("`{}` already exists", path.display()),
        )
        .hint("remove the old socket (or pick another path) before starting `hcp mcp --http`"));
    }
    let old = umask(Mode::from_bits_truncate(0o177));
    let bound = tokio::net::UnixListener::bind(path);
    umask(old);
    let l = bound.map_err(|e| {
        CliError::new(
            Code::McpFailed,
            format!("cannot listen on `unix:{}`", path.display()),
        )
        .cause(e)
    })?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(|e| {
        CliError::new(
            Code::McpFailed,
            format!("cannot make `{}` 0600", path.display()),
        )
        .cause(e)
    })?;
    Ok(l)
}

fn spawn_connection<S>(
    stream: S,
    door: Arc<Door>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    connections: &Arc<Semaphore>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let Ok(permit) = connections.clone().try_acquire_owned() else {
        // Over the bound: the connection is closed unanswered.
        return;
    };
    tokio::spawn(async move {
        let _permit = permit;
        match tls {
            None => serve_connection(stream, door).await,
            Some(acceptor) => {
                let accepted = tokio::time::timeout(HEADER_TIMEOUT, acceptor.accept(stream)).await;
                if let Ok(Ok(s)) = accepted {
                    serve_connection(s, door).await;
                }
            }
        }
    });
}

async fn serve_connection<S>(stream: S, door: Arc<Door>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let svc = hyper::service::service_fn(move |req| {
        let door = door.clone();
        async move { Ok::<_, Infallible>(door.handle(req).await) }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .serve_connection(TokioIo::new(stream), svc);
    if let Err(e) = conn.await {
        tracing::debug!("connection ended: {e}");
    }
}

/// The TLS acceptor of `--tls-cert` and `--tls-key` (PEM files: the certificate chain, and
/// its private key).
///
/// # Errors
/// `mcp_failed` naming the file that does not load.
pub fn tls_acceptor(
    cert: &std::path::Path,
    key: &std::path::Path,
) -> Result<tokio_rustls::TlsAcceptor, CliError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|i| i.collect::<Result<Vec<_>, _>>())
        .map_err(|e| {
            CliError::new(
                Code::McpFailed,
                format!("`{}` holds no PEM certificate", cert.display()),
            )
            .cause(e)
        })?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| {
        CliError::new(
            Code::McpFailed,
            format!("`{}` holds no PEM private key", key.display()),
        )
        .cause(e)
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(certs, key))
        .map_err(|e| {
            CliError::new(
                Code::McpFailed,
                "the TLS certificate and key do not go together",
            )
            .cause(e)
        })?;
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn addresses_read_strictly() {
        assert_eq!(
            Listen::parse("127.0.0.1:8765").unwrap(),
            Listen::Tcp("127.0.0.1:8765".parse().unwrap())
        );
        assert_eq!(
            Listen::parse("localhost:1").unwrap(),
            Listen::Tcp("127.0.0.1:1".parse().unwrap())
        );
        assert_eq!(
            Listen::parse("unix:/run/x.sock").unwrap(),
            Listen::Unix("/run/x.sock".into())
        );
        for bad in ["8765", "unix:rel.sock", "example.org:80", "127.0.0.1"] {
            assert!(Listen::parse(bad).is_err(), "{bad}");
        }
        assert!(Listen::parse("[::1]:9").unwrap().is_local());
        assert!(!Listen::parse("0.0.0.0:9").unwrap().is_local());
    }

    #[test]
    fn hosts_are_the_bound_address_and_the_listed_origins() {
        let o = vec![HttpOrigin::parse("https://app.example:8443").unwrap()];
        assert_eq!(
            allowed_hosts(&Listen::Tcp("127.0.0.1:9".parse().unwrap()), &o),
            vec!["app.example:8443", "127.0.0.1:9", "localhost:9"]
        );
        assert_eq!(
            allowed_hosts(&Listen::Unix("/s".into()), &[]),
            vec!["localhost"]
        );
    }
}
