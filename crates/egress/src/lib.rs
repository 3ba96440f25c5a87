//! `hcp-egress`: network by destination (RUNTIME §5.5, with §5.3 and §6).
//!
//! What this crate owns:
//! - [`Destination`]: one entry of `"network": {"allow": [DEST…]}` in `config.json`,
//!   parsed strictly (`host:port`, `*.suffix:port`, `a.b.c.d:port`, `[v6]:port`; the
//!   grammar is in [`destination`]), and [`Target`], what a child asks the proxy for;
//! - [`classify`]: the class of an address ([`AddressClass`]), with the RFC ranges written
//!   once ([`address`]): loopback, private, shared, link-local (the cloud metadata
//!   address), unique-local, multicast, broadcast, documentation and reserved ranges, and
//!   IPv6 addresses that embed an IPv4 one judged by it;
//! - [`AllowList`]: whether a target is listed and whether each address its name resolved
//!   to may be reached (an address that is not public only when an entry names it
//!   literally, so a listed name never leads to loopback or a private network);
//! - with the `proxy` feature (default): [`Proxy`], hcp's egress proxy for one call —
//!   HTTP `CONNECT` and plain HTTP forwarding on tokio, names resolved by hcp, strict and
//!   bounded parsing of each request head, a cap on connections at once;
//! - [`ConnectionLog`]: every connection of a call with its destination, port, bytes each
//!   way and verdict, bounded in memory, and its summaries for the outcome record and the
//!   result's `network` part.
//!
//! What it does not own: the network namespace the child runs in and the listening socket
//! made inside it (`hcp-adapter`), reading `config.json` (`hcp-store`, which calls
//! [`Destination::parse`] on each entry), when a proxy starts and where its log goes (the
//! runtime), and what a program that ignores the proxy variables gets (nothing: the
//! namespace holds only loopback).
//!
//! Without the `proxy` feature the crate is pure (no tokio): what `hcp-store` needs to
//! check `config.json`.
#![deny(missing_docs)]

pub mod address;
mod allow;
pub mod destination;
mod log;
#[cfg(feature = "proxy")]
pub mod proxy;

pub use address::{AddressClass, classify};
pub use allow::{AllowList, Refusal};
pub use destination::{Destination, DestinationError, Host, Target, TargetHost};
pub use log::{
    Connection, ConnectionLog, FIRST, MAX_DEST_CHARS, MAX_GROUPS, MAX_REFUSED_SHOWN,
    OUTCOME_FIRST_BYTES, OUTCOME_OTHERS_BYTES, Verdict,
};
#[cfg(feature = "proxy")]
pub use proxy::{Limits, Proxy, ProxyConfig, ProxyError, Resolve, StaticResolver, SystemResolver};
