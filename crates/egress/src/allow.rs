//! The allow list of one call (RUNTIME §5.5): whether a target is listed, and whether
//! each address it resolved to may be reached.

use crate::address::{AddressClass, classify};
use crate::destination::{Destination, DestinationError, Host, Target, TargetHost};
use std::fmt;
use std::net::IpAddr;

/// The destinations of one call, `network.allow` parsed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowList {
    entries: Vec<Destination>,
}

/// Why a connection is refused before anything is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No entry names the host (with any port).
    NotListed,
    /// The host is listed, with other ports only (in entry order).
    PortNotListed {
        /// The ports the host is listed with.
        listed: Vec<u16>,
    },
    /// A listed name resolved to an address of a class that is refused unless an entry
    /// names it literally, and none does.
    Address {
        /// The address.
        address: IpAddr,
        /// Its class.
        class: AddressClass,
    },
}

impl Refusal {
    /// The reason as the connection log spells it: `not_listed`, `port_not_listed`, or
    /// the address's class (`loopback`, `private`, `link_local` …).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::NotListed => "not_listed",
            Self::PortNotListed { .. } => "port_not_listed",
            Self::Address { class, .. } => class.as_str(),
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotListed => f.write_str("not listed"),
            Self::PortNotListed { listed } => {
                let ports: Vec<String> = listed.iter().map(u16::to_string).collect();
                write!(f, "listed with port {} only", ports.join(", "))
            }
            Self::Address { address, class } => write!(
                f,
                "it resolves to {address}, a {} address ({}), which no entry names",
                class.as_str().replace('_', "-"),
                class.rfc()
            ),
        }
    }
}

impl AllowList {
    /// An allow list of parsed entries.
    pub fn new(entries: Vec<Destination>) -> Self {
        Self { entries }
    }

    /// Parses every entry (`network.allow` of `config.json`).
    ///
    /// # Errors
    /// The first entry that is not a destination, or that is listed twice (in its
    /// canonical form: `A.example:443` and `a.example:443` are one), with its index in
    /// `entries`.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Self, (usize, DestinationError)> {
        let mut out: Vec<Destination> = Vec::with_capacity(entries.len());
        for (i, e) in entries.iter().enumerate() {
            let d = Destination::parse(e.as_ref()).map_err(|err| (i, err))?;
            if let Some(j) = out.iter().position(|o| *o == d) {
                return Err((
                    i,
                    DestinationError {
                        entry: e.as_ref().to_owned(),
                        message: format!("it is listed twice (entry {j} is `{d}` too)"),
                    },
                ));
            }
            out.push(d);
        }
        Ok(Self::new(out))
    }

    /// The entries, in the order written.
    pub fn entries(&self) -> &[Destination] {
        &self.entries
    }

    /// Whether `target` is listed (host and port), before any name is resolved: an
    /// address target needs an address entry, a name a name or wildcard entry.
    ///
    /// # Errors
    /// [`Refusal::NotListed`] or [`Refusal::PortNotListed`].
    pub fn check(&self, target: &Target) -> Result<(), Refusal> {
        if self.entries.iter().any(|e| e.admits(target)) {
            return Ok(());
        }
        let mut listed: Vec<u16> = self
            .entries
            .iter()
            .filter(|e| e.admits_host(&target.host))
            .map(Destination::port)
            .collect();
        listed.dedup();
        if listed.is_empty() {
            Err(Refusal::NotListed)
        } else {
            Err(Refusal::PortNotListed { listed })
        }
    }

    /// Whether a listed target may be reached at `address` (one of the addresses its
    /// name resolved to, or the address it named): a public address always, any other
    /// only when an entry names it literally with that port (RUNTIME §5.5: a listed name
    /// that resolves to loopback, a private or a metadata address reaches nothing).
    ///
    /// # Errors
    /// [`Refusal::Address`].
    pub fn check_address(&self, address: IpAddr, port: u16) -> Result<(), Refusal> {
        let address = address.to_canonical();
        let class = classify(address);
        if class.is_public() {
            return Ok(());
        }
        let literal = self
            .entries
            .iter()
            .any(|e| e.port() == port && *e.host() == Host::Ip(address));
        if literal {
            Ok(())
        } else {
            Err(Refusal::Address { address, class })
        }
    }

    /// [`AllowList::check`], then [`AllowList::check_address`] of every address in
    /// `resolved` (the name's whole answer, or the target's own address): one refused
    /// address refuses the target, so that an answer mixing a public and a private
    /// address reaches neither.
    ///
    /// # Errors
    /// The first [`Refusal`].
    pub fn check_resolved(&self, target: &Target, resolved: &[IpAddr]) -> Result<(), Refusal> {
        self.check(target)?;
        resolved
            .iter()
            .try_for_each(|a| self.check_address(*a, target.port))
    }

    /// The address of an address target (nothing to resolve), `None` for a name.
    pub fn literal_address(target: &Target) -> Option<IpAddr> {
        match target.host {
            TargetHost::Ip(a) => Some(a),
            TargetHost::Name(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use proptest::prelude::*;

    fn list(e: &[&str]) -> AllowList {
        AllowList::parse(e).unwrap()
    }

    fn t(s: &str) -> Target {
        Target::parse(s).unwrap()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn an_entry_listed_twice_is_refused() {
        let (i, e) =
            AllowList::parse(&["a.example:443", "b.example:443", "A.example:443"]).unwrap_err();
        assert_eq!(i, 2);
        assert_eq!(
            e.to_string(),
            "`A.example:443` is not a destination: it is listed twice (entry 0 is `a.example:443` too)"
        );
    }

    #[test]
    fn listing_is_host_and_port() {
        let l = list(&["api.github.com:443", "github.com:443", "github.com:22"]);
        assert_eq!(l.check(&t("api.github.com:443")), Ok(()));
        assert_eq!(l.check(&t("evil.example:443")), Err(Refusal::NotListed));
        assert_eq!(
            l.check(&t("github.com:80")),
            Err(Refusal::PortNotListed {
                listed: vec![443, 22]
            })
        );
        assert_eq!(
            l.check(&t("github.com:80")).unwrap_err().to_string(),
            "listed with port 443, 22 only"
        );
    }

    #[test]
    fn special_addresses_need_a_literal_entry() {
        let l = list(&["api.example.com:443", "10.0.0.7:8080", "127.0.0.1:5000"]);
        for (a, class) in [
            ("127.0.0.1", "loopback"),
            ("::1", "loopback"),
            ("10.0.0.1", "private"),
            ("169.254.169.254", "link_local"),
            ("::ffff:169.254.169.254", "link_local"),
            ("fd00::1", "unique_local"),
            ("100.64.1.1", "shared"),
            ("0.0.0.0", "unspecified"),
        ] {
            let e = l.check_address(ip(a), 443).unwrap_err();
            assert_eq!(e.as_str(), class, "{a}");
        }
        assert_eq!(l.check_address(ip("140.82.112.3"), 443), Ok(()));
        assert_eq!(l.check_address(ip("10.0.0.7"), 8080), Ok(()));
        assert_eq!(l.check_address(ip("::ffff:10.0.0.7"), 8080), Ok(()));
        // The literal entry is for its port only.
        assert!(l.check_address(ip("10.0.0.7"), 8081).is_err());
        assert_eq!(l.check_address(ip("127.0.0.1"), 5000), Ok(()));
    }

    #[test]
    fn a_listed_name_resolving_to_a_private_address_is_refused() {
        let l = list(&["internal.example.com:443"]);
        let target = t("internal.example.com:443");
        assert_eq!(
            l.check_resolved(&target, &[ip("140.82.112.3"), ip("10.1.2.3")])
                .unwrap_err()
                .as_str(),
            "private"
        );
        assert_eq!(
            l.check_resolved(&target, &[ip("127.0.0.1")])
                .unwrap_err()
                .to_string(),
            "it resolves to 127.0.0.1, a loopback address (RFC 1122, RFC 4291), which no entry names"
        );
        assert_eq!(l.check_resolved(&target, &[ip("140.82.112.3")]), Ok(()));
    }

    fn label() -> impl Strategy<Value = String> {
        "[a-z][a-z0-9-]{0,10}[a-z0-9]"
    }

    fn name() -> impl Strategy<Value = String> {
        prop::collection::vec(label(), 1..5).prop_map(|v| v.join("."))
    }

    proptest! {
        #[test]
        fn a_wildcard_matches_exactly_the_names_below_its_suffix(
            suffix in prop::collection::vec(label(), 2..4).prop_map(|v| v.join(".")),
            prefix in name(),
            other in name(),
            port in 1u16..,
        ) {
            let l = list(&[&format!("*.{suffix}:{port}")]);
            let below = t(&format!("{prefix}.{suffix}:{port}"));
            prop_assert_eq!(l.check(&below), Ok(()));
            let bare = t(&format!("{suffix}:{port}"));
            prop_assert!(l.check(&bare).is_err());
            if port != 1 {
                let other_port = t(&format!("{prefix}.{suffix}:{}", port - 1));
                prop_assert!(l.check(&other_port).is_err());
            }
            let o = format!("{other}:{port}");
            let matched = other.ends_with(&format!(".{suffix}"));
            prop_assert_eq!(l.check(&t(&o)).is_ok(), matched, "{}", o);
        }

        #[test]
        fn a_name_entry_matches_itself_in_any_case_and_nothing_else(
            n in name(), other in name(), port in 1u16..,
        ) {
            let l = list(&[&format!("{n}:{port}")]);
            let upper = t(&format!("{}:{port}", n.to_ascii_uppercase()));
            prop_assert_eq!(l.check(&upper), Ok(()));
            let o = t(&format!("{other}:{port}"));
            prop_assert_eq!(l.check(&o).is_ok(), other == n);
        }

        #[test]
        fn an_address_target_needs_its_literal_entry(bits in any::<u32>(), port in 1u16..) {
            let a = std::net::Ipv4Addr::from(bits);
            let l = list(&["*.example.com:443", "example.com:443"]);
            let target = Target { host: TargetHost::Ip(IpAddr::V4(a)), port };
            prop_assert_eq!(l.check(&target), Err(Refusal::NotListed));
        }

        #[test]
        fn entries_round_trip_through_their_canonical_form(n in name(), port in 1u16..) {
            for text in [format!("{n}:{port}"), format!("*.{n}.example:{port}")] {
                let d = Destination::parse(&text);
                if let Ok(d) = d {
                    prop_assert_eq!(Destination::parse(&d.to_string()), Ok(d));
                }
            }
        }
    }
}
