//! Destinations (RUNTIME §5.5): the entries of `"network": {"allow": [DEST…]}` and the
//! targets a child asks the proxy for.
//!
//! An entry is one of
//!
//! | form | example | matches |
//! |---|---|---|
//! | `NAME:PORT` | `api.github.com:443` | that name (any case) and port |
//! | `*.SUFFIX:PORT` | `*.githubusercontent.com:443` | a name of one or more labels more than `SUFFIX`, and that port; never `SUFFIX` itself |
//! | `IPV4:PORT` | `10.0.0.7:8080` | that address and port |
//! | `[IPV6]:PORT` | `[2001:db8::7]:443` | that address and port |
//!
//! Strict: a port is required, decimal 1–65535 without a sign or leading zero; a name is
//! RFC 1123 (labels of 1–63 letters, digits and `-`, not starting or ending with `-`, at
//! most 253 characters in all), written without a trailing dot, and its last label is not
//! numeric (`127.1`, `0x7f.1` are the address forms some resolvers read as `127.0.0.1`);
//! `*.` stands only as the leftmost label, before at least two labels (`*.com` is refused:
//! it would be nearly the whole network); an IPv4 address is four decimal parts without
//! leading zeros; an IPv6 address is in brackets, without a zone. An IPv6 address that
//! maps an IPv4 one (`::ffff:a.b.c.d`) is the IPv4 address. An unspecified address
//! (`0.0.0.0/8`, `::`), a multicast one and `255.255.255.255` are refused as entries: no
//! TCP connection goes there (and one to `0.0.0.0` reaches this machine). Names are kept
//! lower-cased.

use crate::address::{AddressClass, classify};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The longest name accepted: 253 characters (RFC 1035 §2.3.4, without the root's dot).
pub const MAX_NAME_LEN: usize = 253;
/// The longest label accepted: 63 characters (RFC 1035 §2.3.4).
pub const MAX_LABEL_LEN: usize = 63;

/// The host part of an entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Host {
    /// A name, lower-cased (`api.github.com`).
    Name(String),
    /// `*.SUFFIX`: the suffix, lower-cased, without `*.` (`githubusercontent.com`).
    Wildcard(String),
    /// An address, IPv4-mapped IPv6 addresses as IPv4 ([`IpAddr::to_canonical`]).
    Ip(IpAddr),
}

/// One entry of `network.allow`: a host or address with a port.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Destination {
    host: Host,
    port: u16,
}

/// Why an entry (or a target) is not a destination: the text as written and what is
/// wrong with it, lowercase.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{entry}` is not a destination: {message}")]
pub struct DestinationError {
    /// The text as written.
    pub entry: String,
    /// What is wrong, lowercase, without the entry.
    pub message: String,
}

impl Destination {
    /// Parses one entry of `network.allow` (the module's grammar).
    ///
    /// # Errors
    /// [`DestinationError`] naming the entry and the fault.
    pub fn parse(text: &str) -> Result<Self, DestinationError> {
        let fail = |message: String| DestinationError {
            entry: text.to_owned(),
            message,
        };
        let (host, port) = split_host_port(text).map_err(fail)?;
        let port = parse_port(port).map_err(fail)?;
        let host = if let Some(rest) = host.strip_prefix("*.") {
            check_name(rest).map_err(fail)?;
            if !rest.contains('.') {
                return Err(fail(format!(
                    "`*.{rest}` would match every name under `{rest}`; a wildcard needs at least two labels after `*.`"
                )));
            }
            Host::Wildcard(rest.to_ascii_lowercase())
        } else if host.contains('*') {
            return Err(fail(
                "`*` may only stand alone as the leftmost label (`*.example.org:443`)".into(),
            ));
        } else {
            parse_host(host).map_err(fail)?
        };
        if let Host::Ip(ip) = host
            && let Some(why) = unreachable_entry(ip)
        {
            return Err(fail(why));
        }
        Ok(Self { host, port })
    }

    /// The host part.
    pub fn host(&self) -> &Host {
        &self.host
    }

    /// The port, 1–65535.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Whether the entry admits `target` (RUNTIME §5.5): a name entry the same name, a
    /// wildcard a name ending in `.SUFFIX` with at least one label before it, an address
    /// entry the same address; and the same port. A name never matches an address entry
    /// (nor an address a name entry), whatever the name resolves to.
    pub fn admits(&self, target: &Target) -> bool {
        if self.port != target.port {
            return false;
        }
        self.admits_host(&target.host)
    }

    /// [`Destination::admits`] without the port.
    pub fn admits_host(&self, host: &TargetHost) -> bool {
        match (&self.host, host) {
            (Host::Name(n), TargetHost::Name(t)) => n == t,
            (Host::Wildcard(s), TargetHost::Name(t)) => t
                .strip_suffix(s.as_str())
                .and_then(|before| before.strip_suffix('.'))
                .is_some_and(|before| !before.is_empty()),
            (Host::Ip(a), TargetHost::Ip(b)) => a == b,
            _ => false,
        }
    }
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Name(n) => f.write_str(n),
            Self::Wildcard(s) => write!(f, "*.{s}"),
            Self::Ip(IpAddr::V4(a)) => write!(f, "{a}"),
            Self::Ip(IpAddr::V6(a)) => write!(f, "[{a}]"),
        }
    }
}

impl fmt::Display for Destination {
    /// The canonical form: lower-cased, an IPv6 address in brackets and in RFC 5952 form.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

impl std::str::FromStr for Destination {
    type Err = DestinationError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// The host a child asked for: a name or an address, never a wildcard.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TargetHost {
    /// A name, lower-cased.
    Name(String),
    /// An address, IPv4-mapped IPv6 addresses as IPv4.
    Ip(IpAddr),
}

impl fmt::Display for TargetHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Name(n) => f.write_str(n),
            Self::Ip(IpAddr::V4(a)) => write!(f, "{a}"),
            Self::Ip(IpAddr::V6(a)) => write!(f, "[{a}]"),
        }
    }
}

/// What a child asked the proxy to reach: the authority of a `CONNECT` or of an
/// absolute URI.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Target {
    /// The host.
    pub host: TargetHost,
    /// The port, 1–65535.
    pub port: u16,
}

impl Target {
    /// Parses `HOST:PORT` (a `CONNECT`'s authority) with the grammar of entries, without
    /// wildcards, and with any address accepted (whether it may be reached is the allow
    /// list's to say).
    ///
    /// # Errors
    /// [`DestinationError`] naming the text and the fault.
    pub fn parse(text: &str) -> Result<Self, DestinationError> {
        let fail = |message: String| DestinationError {
            entry: text.to_owned(),
            message,
        };
        let (host, port) = split_host_port(text).map_err(fail)?;
        Ok(Self {
            host: Self::parse_host(host).map_err(fail)?,
            port: parse_port(port).map_err(fail)?,
        })
    }

    /// Parses a host alone (the authority of an absolute URI without its port).
    ///
    /// # Errors
    /// What is wrong with it, lowercase.
    pub fn parse_host(host: &str) -> Result<TargetHost, String> {
        if host.contains('*') {
            return Err("a wildcard is not a host".into());
        }
        Ok(match parse_host(host)? {
            Host::Name(n) => TargetHost::Name(n),
            Host::Ip(ip) => TargetHost::Ip(ip),
            Host::Wildcard(_) => return Err("a wildcard is not a host".into()),
        })
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// `HOST` and `PORT` of `HOST:PORT` or `[V6]:PORT`.
fn split_host_port(text: &str) -> Result<(&str, &str), String> {
    if text.is_empty() {
        return Err("an entry may not be empty".into());
    }
    if let Some(c) = text
        .chars()
        .find(|c| c.is_whitespace() || c.is_control() || !c.is_ascii())
    {
        return Err(format!(
            "it holds {}; a destination is `HOST:PORT` in ASCII without spaces",
            describe_char(c)
        ));
    }
    if text.contains("://") {
        return Err("a destination is `HOST:PORT`, not a URL (`api.github.com:443`)".into());
    }
    if let Some(rest) = text.strip_prefix('[') {
        let Some((v6, after)) = rest.split_once(']') else {
            return Err("an IPv6 address opened with `[` is closed with `]`".into());
        };
        let Some(port) = after.strip_prefix(':') else {
            return Err(format!(
                "a port is required: `[{v6}]:PORT` (for example `[{v6}]:443`)"
            ));
        };
        return Ok((&text[..v6.len() + 2], port));
    }
    let Some((host, port)) = text.rsplit_once(':') else {
        return Err(format!(
            "a port is required: `{text}:PORT` (for example `{text}:443`)"
        ));
    };
    if host.contains(':') {
        return Err("an IPv6 address is written in brackets: `[2001:db8::1]:443`".into());
    }
    if host.is_empty() {
        return Err("the host is missing before `:`".into());
    }
    Ok((host, port))
}

/// A port: decimal 1–65535, no sign, no leading zero.
fn parse_port(text: &str) -> Result<u16, String> {
    if text.is_empty() {
        return Err("the port is missing after `:`".into());
    }
    if !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("the port `{text}` is not a number from 1 to 65535"));
    }
    if text.len() > 1 && text.starts_with('0') {
        return Err(format!("the port `{text}` has a leading zero"));
    }
    match text.parse::<u16>() {
        Ok(0) => Err("port 0 is not a port one connects to".into()),
        Ok(p) => Ok(p),
        Err(_) => Err(format!("the port `{text}` is not a number from 1 to 65535")),
    }
}

/// A host without wildcard: `[V6]`, an IPv4 address, or a name.
fn parse_host(host: &str) -> Result<Host, String> {
    if let Some(inner) = host.strip_prefix('[') {
        let inner = inner
            .strip_suffix(']')
            .ok_or("an IPv6 address opened with `[` is closed with `]`")?;
        if inner.contains('%') {
            return Err("an IPv6 zone (`%…`) is not part of a destination".into());
        }
        let v6: Ipv6Addr = inner
            .parse()
            .map_err(|_| format!("`{inner}` is not an IPv6 address"))?;
        return Ok(Host::Ip(IpAddr::V6(v6).to_canonical()));
    }
    if host.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        let v4: Ipv4Addr = host.parse().map_err(|_| {
            format!("`{host}` is not an IPv4 address (four decimal parts 0–255, no leading zeros)")
        })?;
        return Ok(Host::Ip(IpAddr::V4(v4)));
    }
    check_name(host)?;
    Ok(Host::Name(host.to_ascii_lowercase()))
}

/// Whether `name` is an RFC 1123 host name as entries take it (module docs).
fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the name is empty".into());
    }
    if name.ends_with('.') {
        return Err(format!(
            "`{name}` ends with a dot; write the name without it (`{}`)",
            name.trim_end_matches('.')
        ));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(format!(
            "the name is {} characters long, more than {MAX_NAME_LEN}",
            name.len()
        ));
    }
    let mut last = "";
    for label in name.split('.') {
        if label.is_empty() {
            return Err(format!(
                "`{name}` has an empty label (`..` or a leading dot)"
            ));
        }
        if label.len() > MAX_LABEL_LEN {
            return Err(format!(
                "the label `{label}` is {} characters long, more than {MAX_LABEL_LEN}",
                label.len()
            ));
        }
        if let Some(c) = label
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '-'))
        {
            return Err(format!(
                "the label `{label}` holds {}; a name has letters, digits and `-` (an international name in its `xn--` form)",
                describe_char(c)
            ));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(format!("the label `{label}` starts or ends with `-`"));
        }
        last = label;
    }
    let hex = last.len() > 2
        && last[..2].eq_ignore_ascii_case("0x")
        && last[2..].bytes().all(|b| b.is_ascii_hexdigit());
    if last.bytes().all(|b| b.is_ascii_digit()) || hex {
        return Err(format!(
            "`{name}` ends in a number, which resolvers read as an address; write the address as four decimal parts (`10.0.0.7:8080`)"
        ));
    }
    Ok(())
}

/// Why an address is refused as an entry, if it is: no TCP connection goes there.
fn unreachable_entry(ip: IpAddr) -> Option<String> {
    match classify(ip) {
        AddressClass::Unspecified => Some(format!(
            "`{ip}` is the unspecified address ({}); to reach this machine list a loopback address (`127.0.0.1:PORT`)",
            AddressClass::Unspecified.rfc()
        )),
        c @ (AddressClass::Multicast | AddressClass::Broadcast) => Some(format!(
            "`{ip}` is a {} address ({}), which no TCP connection reaches",
            c.as_str(),
            c.rfc()
        )),
        _ => None,
    }
}

fn describe_char(c: char) -> String {
    if c.is_whitespace() {
        "a space".into()
    } else if c.is_control() || !c.is_ascii() {
        format!("the character U+{:04X}", u32::from(c))
    } else {
        format!("`{c}`")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn ok(s: &str) -> String {
        Destination::parse(s)
            .unwrap_or_else(|e| panic!("{s}: {e}"))
            .to_string()
    }

    fn err(s: &str) -> String {
        match Destination::parse(s) {
            Ok(d) => panic!("{s} parsed as {d}"),
            Err(e) => e.message,
        }
    }

    #[test]
    fn the_forms_of_an_entry() {
        assert_eq!(ok("api.github.com:443"), "api.github.com:443");
        assert_eq!(ok("API.GitHub.com:443"), "api.github.com:443");
        assert_eq!(
            ok("*.githubusercontent.com:443"),
            "*.githubusercontent.com:443"
        );
        assert_eq!(ok("10.0.0.7:8080"), "10.0.0.7:8080");
        assert_eq!(ok("[2001:DB8:0:0::7]:443"), "[2001:db8::7]:443");
        assert_eq!(ok("[::ffff:10.0.0.7]:8080"), "10.0.0.7:8080");
        assert_eq!(ok("localhost:8080"), "localhost:8080");
        assert_eq!(ok("a:1"), "a:1");
        assert_eq!(ok("x-1.example:65535"), "x-1.example:65535");
        assert_eq!(ok("127.0.0.1:5432"), "127.0.0.1:5432");
        assert_eq!(ok("[::1]:5432"), "[::1]:5432");
    }

    #[test]
    fn a_port_is_required_and_strict() {
        assert!(err("api.github.com").contains("a port is required"));
        assert!(err("api.github.com:").contains("missing"));
        assert!(err("api.github.com:0").contains("port 0"));
        assert!(err("api.github.com:65536").contains("1 to 65535"));
        assert!(err("api.github.com:0443").contains("leading zero"));
        assert!(err("api.github.com:+443").contains("not a number"));
        assert!(err("api.github.com:https").contains("not a number"));
        assert!(err("[::1]").contains("a port is required"));
        assert!(err("10.0.0.1").contains("a port is required"));
    }

    #[test]
    fn wildcards_only_leftmost_and_not_too_wide() {
        assert!(err("*.com:443").contains("at least two labels"));
        assert!(err("api.*.github.com:443").contains("leftmost"));
        assert!(err("*api.github.com:443").contains("leftmost"));
        assert!(err("*:443").contains("leftmost"));
        assert!(err("*.*.github.com:443").contains("holds `*`"));
        assert!(err("*.10.0.0.1:443").contains("ends in a number"));
    }

    #[test]
    fn names_are_rfc_1123_without_games() {
        assert!(err("api.github.com.:443").contains("ends with a dot"));
        assert!(err(".github.com:443").contains("empty label"));
        assert!(err("a..b:443").contains("empty label"));
        assert!(err("-a.b:443").contains("starts or ends with `-`"));
        assert!(err("a_b.example:443").contains("holds `_`"));
        assert!(err("exämple.org:443").contains("U+00E4"));
        assert!(err("a b:443").contains("a space"));
        assert!(err("user@host.example:443").contains("holds `@`"));
        assert!(err("http://host.example:443").contains("not a URL"));
        assert!(err("host.example/x:443").contains("holds `/`"));
        assert!(err(&format!("{}.example:443", "a".repeat(64))).contains("more than 63"));
        let long = format!("{}example", "abcdefghi.".repeat(25));
        assert!(err(&format!("{long}:443")).contains("more than 253"));
        assert!(err(":443").contains("missing"));
        assert!(err("").contains("empty"));
    }

    #[test]
    fn numbers_that_resolvers_read_as_addresses_are_refused() {
        for s in [
            "127.1:80",
            "0x7f.1:80",
            "1.2.3:80",
            "2130706433:80",
            "a.0x7F:80",
        ] {
            let e = err(s);
            assert!(
                e.contains("ends in a number") || e.contains("not an IPv4 address"),
                "{s}: {e}"
            );
        }
        assert!(err("010.0.0.1:80").contains("not an IPv4 address"));
        assert!(err("256.0.0.1:80").contains("not an IPv4 address"));
    }

    #[test]
    fn addresses_no_connection_reaches_are_refused() {
        assert!(err("0.0.0.0:80").contains("unspecified"));
        assert!(err("0.1.2.3:80").contains("unspecified"));
        assert!(err("[::]:80").contains("unspecified"));
        assert!(err("224.0.0.1:80").contains("multicast"));
        assert!(err("[ff02::1]:80").contains("multicast"));
        assert!(err("255.255.255.255:80").contains("broadcast"));
    }

    #[test]
    fn ipv6_is_bracketed_without_zone() {
        assert!(err("::1:443").contains("brackets"));
        assert!(err("[fe80::1%eth0]:443").contains("zone"));
        assert!(err("[::1:443").contains("closed"));
        assert!(err("[::1]443").contains("a port is required"));
        assert!(err("[1.2.3.4]:443").contains("not an IPv6 address"));
    }

    #[test]
    fn the_error_names_the_entry() {
        let e = Destination::parse("github.com").unwrap_err();
        assert_eq!(
            e.to_string(),
            "`github.com` is not a destination: a port is required: `github.com:PORT` (for example `github.com:443`)"
        );
    }

    #[test]
    fn matching() {
        let t = |s: &str| Target::parse(s).unwrap();
        let d = |s: &str| Destination::parse(s).unwrap();
        assert!(d("api.github.com:443").admits(&t("API.github.com:443")));
        assert!(!d("api.github.com:443").admits(&t("api.github.com:22")));
        assert!(!d("api.github.com:443").admits(&t("github.com:443")));
        assert!(!d("api.github.com:443").admits(&t("xapi.github.com:443")));
        let w = d("*.example.org:443");
        assert!(w.admits(&t("a.example.org:443")));
        assert!(w.admits(&t("a.b.example.org:443")));
        assert!(!w.admits(&t("example.org:443")));
        assert!(!w.admits(&t("aexample.org:443")));
        assert!(!w.admits(&t("example.org.evil.com:443")));
        assert!(!w.admits(&t("a.example.org:80")));
        assert!(d("10.0.0.7:8080").admits(&t("10.0.0.7:8080")));
        assert!(d("10.0.0.7:8080").admits(&t("[::ffff:10.0.0.7]:8080")));
        assert!(!d("10.0.0.7:8080").admits(&t("10.0.0.8:8080")));
        assert!(d("[2001:db8::7]:443").admits(&t("[2001:db8:0::7]:443")));
        // A name never matches an address entry, nor an address a name entry.
        assert!(!d("localhost:80").admits(&t("127.0.0.1:80")));
        assert!(!d("127.0.0.1:80").admits(&t("localhost:80")));
    }

    #[test]
    fn targets_take_any_address_but_no_wildcard() {
        assert_eq!(
            Target::parse("0.0.0.0:80").unwrap().to_string(),
            "0.0.0.0:80"
        );
        assert!(Target::parse("*.example.org:443").is_err());
        assert!(Target::parse("example.org").is_err());
    }
}
