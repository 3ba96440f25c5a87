//! `hcp mcp`: the active packs as MCP tools over stdio (newline-delimited JSON-RPC), through
//! the same gate as `hcp exec --envelope`.
//!
//! - The protocol layer is the official Rust SDK (`rmcp`); the mapping of packs to tools,
//!   of answers to results and who is shown what is the runtime's (`hcp_runtime::mcp`);
//!   this module hands calls to the runtime's pipeline with `Face::Mcp` ([`server`]) and
//!   puts questions to the person through the client's elicitation. stdout is the
//!   protocol: logs go to stderr only.
//! - The principal is the server process's: `HCP_SESSION` is read once at startup, and
//!   nothing in a request (arguments, `_meta`) changes it. A bad token makes every call
//!   answer `bad_session`; it never falls back to the owner.
//! - The tool list shows the tools the principal may call (grants, runtime policy); it
//!   changes when the owner changes the active packs, reinstalls one or edits the runtime
//!   policy (`hcp_runtime::signature::Signature`), or the principal's grants change; the
//!   server then sends `notifications/tools/list_changed`.
//! - hcp reads the client's lines itself ([`intake`]): a line that is not JSON is answered
//!   with -32700, params that do not fit with -32602, a repeated key is refused, requests
//!   are bounded ([`intake::MAX_REQUEST_BYTES`]). When the client goes away (the reading end
//!   of stdout closes, or a write to it fails), calls in flight are abandoned at once: their
//!   process groups are ended and their audit records written before the process exits; a
//!   call still waiting for a slot never starts. A client that closes stdin and keeps
//!   reading gets the answers of its calls in flight.
//! - The MCP revisions are 2025-06-18, 2025-11-25 (with the `initialize` handshake) and
//!   2026-07-28 (stateless requests, `server/discover`, the person asked through an
//!   input-required result): [`server::SUPPORTED`].
//! - `--http ADDR` serves the same tools over Streamable HTTP ([`http`]): each request's
//!   bearer token is a session of the store, and its principal the caller.

pub mod http;
pub mod intake;
pub mod server;

use crate::commands::exec::{caller, runtime};
use crate::error::{CliError, CliResult};
use hcp_model::Code;
use rmcp::ServiceExt;
use std::os::fd::AsFd;
use std::time::Duration;

/// How often the server looks for owner changes between requests (each request also looks).
pub const WATCH_INTERVAL: Duration = Duration::from_secs(2);

/// Arguments of `hcp mcp`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Serves one tool per verb of each active pack whose `transports` include `mcp`, \
                  named PACK.VERB, in MCP revisions 2025-06-18, 2025-11-25 and 2026-07-28. \
                  Over stdio the caller is the session in HCP_SESSION (else the owner); logs go \
                  to stderr, stdout is the protocol. With --http ADDR (HOST:PORT or unix:PATH) \
                  every request carries `Authorization: Bearer TOKEN`, a session token, and is \
                  made as that session's principal; there is no owner over HTTP."
)]
pub struct Args {
    /// Serve Streamable HTTP on `HOST:PORT` or `unix:PATH` instead of stdio; every request
    /// carries `Authorization: Bearer TOKEN`, a session token (`hcp session start`).
    #[arg(long, value_name = "ADDR")]
    pub http: Option<String>,
    /// The TLS certificate chain (PEM) for `--http` (needed off loopback).
    #[arg(long, value_name = "PEM", requires = "http", requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// The TLS certificate's private key (PEM).
    #[arg(long, value_name = "PEM", requires = "http", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
}

/// Runs `hcp mcp` until the client closes stdin (stdio) or the process is stopped
/// (`--http`).
///
/// # Errors
/// The store's when `HCP_HOME` cannot be used; `usage` for an `--http` address that does
/// not read, or one off loopback without `--tls-cert` and `--tls-key`; `mcp_failed` when the
/// async runtime cannot start, the address cannot be bound or the client never completes
/// `initialize`.
pub fn run(a: Args) -> CliResult {
    let rt = runtime()?;
    let caller = caller()?;
    if let Some(addr) = &a.http {
        return run_http(rt, caller, addr, &a);
    }
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(tracing::Level::WARN)
        .with_target(false)
        .try_init();
    if caller.session_token.is_none() {
        // Many MCP clients start servers with a reduced environment: say plainly when the
        // server runs as the owner, which no runtime policy governs (RUNTIME §7).
        tracing::warn!(
            "no `HCP_SESSION`: serving the store `{}` as the owner; give the client's server entry `HCP_SESSION` (and `HCP_HOME`) to serve an agent",
            rt.home().root().display()
        );
    }
    let tokio_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::new(Code::McpFailed, "cannot start the async runtime").cause(e))?;
    let out = tokio_rt.block_on(serve(rt, caller));
    // Dropping the runtime waits for the blocking calls still in flight: each ends its
    // child's group (its cancel pipe is closed) and writes its audit record first.
    drop(tokio_rt);
    out
}

fn run_http(
    rt: hcp_runtime::Runtime,
    caller: hcp_runtime::Caller,
    addr: &str,
    a: &Args,
) -> CliResult {
    let listen = http::Listen::parse(addr)?;
    let tls = match (&a.tls_cert, &a.tls_key) {
        (Some(c), Some(k)) => Some(http::tls_acceptor(c, k)?),
        _ => None,
    };
    if !listen.is_local() && tls.is_none() {
        return Err(CliError::new(
            Code::Usage,
            format!("`--http {addr}` is reachable from other machines: it needs TLS"),
        )
        .hint(
            "give `--tls-cert CERT.pem --tls-key KEY.pem`, or listen on loopback or `unix:PATH`",
        ));
    }
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(tracing::Level::WARN)
        .with_target(false)
        .try_init();
    let tokio_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::new(Code::McpFailed, "cannot start the async runtime").cause(e))?;
    let server = server::Server::for_http(rt, caller);
    let shared = server.runtime();
    let out = tokio_rt.block_on(http::serve(server, shared, listen, tls));
    drop(tokio_rt);
    out
}

async fn serve(rt: hcp_runtime::Runtime, caller: hcp_runtime::Caller) -> CliResult {
    let server = server::Server::new(rt, caller);
    let inflight = server.inflight();
    // The client is gone when the reading end of stdout closes or a write to it fails:
    // every call in flight ends now, and no other starts.
    let gone: intake::Gone = {
        let inflight = inflight.clone();
        std::sync::Arc::new(move || inflight.cancel_all())
    };
    if let Ok(fd) = std::io::stdout().as_fd().try_clone_to_owned() {
        intake::watch_reader(fd, gone.clone());
    }
    let out = intake::Output::new(tokio::io::stdout(), gone);
    let (transport, to_sdk) = intake::Intake::new(out.clone());
    let pump = tokio::spawn(intake::pump(
        tokio::io::BufReader::new(tokio::io::stdin()),
        to_sdk,
        out,
        intake::MAX_REQUEST_BYTES,
    ));
    let running = match server.clone().serve(transport).await {
        Ok(r) => r,
        Err(e) => {
            pump.abort();
            return Err(
                CliError::new(Code::McpFailed, "the client did not complete `initialize`").cause(e),
            );
        }
    };
    let peer = running.peer().clone();
    let watcher = tokio::spawn({
        let server = server.clone();
        async move {
            let mut tick = tokio::time::interval(WATCH_INTERVAL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                server.refresh_and_notify(&peer).await;
            }
        }
    });
    let _ = running.waiting().await;
    watcher.abort();
    pump.abort();
    inflight.cancel_all();
    Ok(crate::exit::OK)
}
