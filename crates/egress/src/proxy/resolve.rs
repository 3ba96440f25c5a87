//! Names are resolved by hcp, never by the child (RUNTIME §5.5): through a [`Resolve`],
//! the system's resolver by default, another in tests.

use std::collections::BTreeMap;
use std::io;
use std::net::{IpAddr, ToSocketAddrs};

/// What resolves a listed name to the addresses the proxy checks and connects to.
/// Called on a blocking thread of the proxy's runtime, once per connection: the addresses
/// it returns are the only ones tried (no second resolution between the check and the
/// connection).
pub trait Resolve: Send + Sync + 'static {
    /// The addresses of `name` (lower-cased, RFC 1123) for `port`, in the order to try.
    ///
    /// # Errors
    /// Why the name has no address.
    fn resolve(&self, name: &str, port: u16) -> io::Result<Vec<IpAddr>>;
}

/// The system's resolver: `getaddrinfo(3)` through the standard library, so
/// `/etc/hosts`, then DNS, as `/etc/nsswitch.conf` says; in the host's network namespace,
/// with hcp's own `/etc/resolv.conf`.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve(&self, name: &str, port: u16) -> io::Result<Vec<IpAddr>> {
        let mut out: Vec<IpAddr> = Vec::new();
        for a in (name, port).to_socket_addrs()? {
            let ip = a.ip().to_canonical();
            if !out.contains(&ip) {
                out.push(ip);
            }
        }
        Ok(out)
    }
}

/// A fixed table of names, for tests: a name it does not hold does not resolve.
#[derive(Debug, Clone, Default)]
pub struct StaticResolver {
    names: BTreeMap<String, Vec<IpAddr>>,
}

impl StaticResolver {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// `name` (any case) resolves to `addresses`, in that order.
    #[must_use]
    pub fn with(mut self, name: &str, addresses: &[IpAddr]) -> Self {
        self.names
            .insert(name.to_ascii_lowercase(), addresses.to_vec());
        self
    }
}

impl Resolve for StaticResolver {
    fn resolve(&self, name: &str, _port: u16) -> io::Result<Vec<IpAddr>> {
        self.names.get(name).cloned().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("`{name}` is not in the table"),
            )
        })
    }
}
