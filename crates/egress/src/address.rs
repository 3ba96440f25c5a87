//! Address classes (RUNTIME §5.5), written once with their RFC numbers: which addresses a
//! call reaches only when an entry names them literally.
//!
//! IPv4 (RFC 6890 and the IANA special-purpose registry):
//!
//! | range | class | RFC |
//! |---|---|---|
//! | `0.0.0.0/8` | unspecified ("this network") | RFC 791, RFC 1122 |
//! | `10.0.0.0/8`, `172.16.0.0/12`, `192.168.0.0/16` | private | RFC 1918 |
//! | `100.64.0.0/10` | shared (carrier-grade NAT) | RFC 6598 |
//! | `127.0.0.0/8` | loopback | RFC 1122 |
//! | `169.254.0.0/16` | link-local (cloud metadata: `169.254.169.254`) | RFC 3927 |
//! | `192.0.0.0/24` | reserved (IETF protocol assignments) | RFC 6890 |
//! | `192.0.2.0/24`, `198.51.100.0/24`, `203.0.113.0/24` | documentation | RFC 5737 |
//! | `192.88.99.0/24` | reserved (6to4 relay anycast, withdrawn) | RFC 7526 |
//! | `198.18.0.0/15` | reserved (benchmarking) | RFC 2544 |
//! | `224.0.0.0/4` | multicast | RFC 5771 |
//! | `240.0.0.0/4` | reserved (future use) | RFC 1112 |
//! | `255.255.255.255/32` | broadcast | RFC 919, RFC 8190 |
//!
//! IPv6 (RFC 6890, RFC 4291 and the IANA special-purpose registry). An address that
//! embeds an IPv4 one is judged by it: `::ffff:0:0/96` (IPv4-mapped, RFC 4291),
//! `64:ff9b::/96` (NAT64, RFC 6052), `2002::/16` (6to4, RFC 3056).
//!
//! | range | class | RFC |
//! |---|---|---|
//! | `::/128` | unspecified | RFC 4291 |
//! | `::1/128` | loopback | RFC 4291 |
//! | the rest of `::/8` (IPv4-compatible, …) | reserved | RFC 4291 |
//! | `64:ff9b:1::/48` | reserved (local-use NAT64) | RFC 8215 |
//! | `100::/64` | reserved (discard-only) | RFC 6666 |
//! | `2001::/23` | reserved (IETF protocol assignments; Teredo, ORCHID) | RFC 2928, RFC 4380 |
//! | `2001:db8::/32`, `3fff::/20` | documentation | RFC 3849, RFC 9637 |
//! | `5f00::/16` | reserved (SRv6 SIDs) | RFC 9602 |
//! | `fc00::/7` | unique-local | RFC 4193 |
//! | `fe80::/10` | link-local | RFC 4291 |
//! | `fec0::/10` | reserved (site-local, deprecated) | RFC 3879 |
//! | `ff00::/8` | multicast | RFC 4291 |
//! | anything outside `2000::/3` | reserved (not allocated as global unicast) | RFC 4291 |
//!
//! Built from what is given: an IPv6 address is public only inside `2000::/3` and outside
//! every row above.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The class of an address (RUNTIME §5.5). Every class but [`AddressClass::Public`] is
/// refused unless an entry names the address literally.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AddressClass {
    /// A globally reachable unicast address.
    Public,
    /// `0.0.0.0/8`, `::`: a connection to it reaches this machine.
    Unspecified,
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// RFC 1918.
    Private,
    /// `100.64.0.0/10`, RFC 6598.
    Shared,
    /// `169.254.0.0/16`, `fe80::/10`: the cloud metadata addresses.
    LinkLocal,
    /// `fc00::/7`, RFC 4193.
    UniqueLocal,
    /// `224.0.0.0/4`, `ff00::/8`.
    Multicast,
    /// `255.255.255.255`.
    Broadcast,
    /// Documentation ranges (RFC 5737, RFC 3849, RFC 9637).
    Documentation,
    /// Other special-purpose or unallocated ranges (RFC 6890).
    Reserved,
}

impl AddressClass {
    /// The class's name as the connection log and the result spell it: `public`,
    /// `unspecified`, `loopback`, `private`, `shared`, `link_local`, `unique_local`,
    /// `multicast`, `broadcast`, `documentation`, `reserved`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Public => "public",
            Self::Unspecified => "unspecified",
            Self::Loopback => "loopback",
            Self::Private => "private",
            Self::Shared => "shared",
            Self::LinkLocal => "link_local",
            Self::UniqueLocal => "unique_local",
            Self::Multicast => "multicast",
            Self::Broadcast => "broadcast",
            Self::Documentation => "documentation",
            Self::Reserved => "reserved",
        }
    }

    /// The RFCs that define the class, for messages.
    pub fn rfc(self) -> &'static str {
        match self {
            Self::Public => "RFC 6890",
            Self::Unspecified => "RFC 1122, RFC 4291",
            Self::Loopback => "RFC 1122, RFC 4291",
            Self::Private => "RFC 1918",
            Self::Shared => "RFC 6598",
            Self::LinkLocal => "RFC 3927, RFC 4291",
            Self::UniqueLocal => "RFC 4193",
            Self::Multicast => "RFC 5771, RFC 4291",
            Self::Broadcast => "RFC 919",
            Self::Documentation => "RFC 5737, RFC 3849",
            Self::Reserved => "RFC 6890",
        }
    }

    /// Whether a call may reach the address without an entry naming it literally.
    pub fn is_public(self) -> bool {
        self == Self::Public
    }
}

/// `(network, prefix length, class)` of IPv4, in the order of the module's table.
const V4: [(u32, u8, AddressClass); 16] = [
    (0x0000_0000, 8, AddressClass::Unspecified), // 0.0.0.0/8
    (0x0a00_0000, 8, AddressClass::Private),     // 10.0.0.0/8
    (0x6440_0000, 10, AddressClass::Shared),     // 100.64.0.0/10
    (0x7f00_0000, 8, AddressClass::Loopback),    // 127.0.0.0/8
    (0xa9fe_0000, 16, AddressClass::LinkLocal),  // 169.254.0.0/16
    (0xac10_0000, 12, AddressClass::Private),    // 172.16.0.0/12
    (0xc000_0000, 24, AddressClass::Reserved),   // 192.0.0.0/24
    (0xc000_0200, 24, AddressClass::Documentation), // 192.0.2.0/24
    (0xc058_6300, 24, AddressClass::Reserved),   // 192.88.99.0/24
    (0xc0a8_0000, 16, AddressClass::Private),    // 192.168.0.0/16
    (0xc612_0000, 15, AddressClass::Reserved),   // 198.18.0.0/15
    (0xc633_6400, 24, AddressClass::Documentation), // 198.51.100.0/24
    (0xcb00_7100, 24, AddressClass::Documentation), // 203.0.113.0/24
    (0xe000_0000, 4, AddressClass::Multicast),   // 224.0.0.0/4
    (0xffff_ffff, 32, AddressClass::Broadcast),  // 255.255.255.255/32 (before 240/4)
    (0xf000_0000, 4, AddressClass::Reserved),    // 240.0.0.0/4
];

/// `(network, prefix length, class)` of IPv6 after the embedding ranges, in the order of
/// the module's table (the first match wins).
const V6: [(u128, u8, AddressClass); 13] = [
    (0, 128, AddressClass::Unspecified),                  // ::/128
    (1, 128, AddressClass::Loopback),                     // ::1/128
    (0, 8, AddressClass::Reserved),                       // ::/8
    (0x0064_ff9b_0001 << 80, 48, AddressClass::Reserved), // 64:ff9b:1::/48
    (0x0100_0000_0000_0000 << 64, 64, AddressClass::Reserved), // 100::/64
    (0x2001_0db8 << 96, 32, AddressClass::Documentation), // 2001:db8::/32
    (0x2001 << 112, 23, AddressClass::Reserved),          // 2001::/23
    (0x3fff << 112, 20, AddressClass::Documentation),     // 3fff::/20
    (0x5f00 << 112, 16, AddressClass::Reserved),          // 5f00::/16
    (0xfc00 << 112, 7, AddressClass::UniqueLocal),        // fc00::/7
    (0xfe80 << 112, 10, AddressClass::LinkLocal),         // fe80::/10
    (0xfec0 << 112, 10, AddressClass::Reserved),          // fec0::/10
    (0xff00 << 112, 8, AddressClass::Multicast),          // ff00::/8
];

fn in_v4(a: u32, net: u32, len: u8) -> bool {
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    a & mask == net
}

fn in_v6(a: u128, net: u128, len: u8) -> bool {
    let mask = if len == 0 {
        0
    } else {
        u128::MAX << (128 - len)
    };
    a & mask == net
}

/// The class of an IPv4 address (the module's first table).
pub fn classify_v4(a: Ipv4Addr) -> AddressClass {
    let a = u32::from(a);
    V4.iter()
        .find(|(net, len, _)| in_v4(a, *net, *len))
        .map_or(AddressClass::Public, |(_, _, c)| *c)
}

/// The IPv4 address an IPv6 address embeds, if it is in one of the embedding ranges:
/// `::ffff:0:0/96`, `64:ff9b::/96` (the low 32 bits), `2002::/16` (bits 16–47).
pub fn embedded_v4(a: Ipv6Addr) -> Option<Ipv4Addr> {
    let v = u128::from(a);
    let low = |v: u128| Ipv4Addr::from((v & 0xffff_ffff) as u32);
    if in_v6(v, 0xffff << 32, 96) || in_v6(v, 0x0064_ff9b << 96, 96) {
        Some(low(v))
    } else if in_v6(v, 0x2002 << 112, 16) {
        Some(Ipv4Addr::from(((v >> 80) & 0xffff_ffff) as u32))
    } else {
        None
    }
}

/// The class of an IPv6 address (the module's second table); one that embeds an IPv4
/// address has that address's class.
pub fn classify_v6(a: Ipv6Addr) -> AddressClass {
    if let Some(v4) = embedded_v4(a) {
        return classify_v4(v4);
    }
    let v = u128::from(a);
    if let Some((_, _, c)) = V6.iter().find(|(net, len, _)| in_v6(v, *net, *len)) {
        return *c;
    }
    if in_v6(v, 0x2000 << 112, 3) {
        AddressClass::Public
    } else {
        AddressClass::Reserved
    }
}

/// The class of an address (RUNTIME §5.5).
pub fn classify(a: IpAddr) -> AddressClass {
    match a {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use proptest::prelude::*;

    fn c(s: &str) -> &'static str {
        classify(s.parse().unwrap()).as_str()
    }

    #[test]
    fn the_table() {
        for (a, want) in [
            ("0.0.0.0", "unspecified"),
            ("0.255.1.2", "unspecified"),
            ("10.0.0.1", "private"),
            ("10.255.255.255", "private"),
            ("11.0.0.1", "public"),
            ("100.63.255.255", "public"),
            ("100.64.0.1", "shared"),
            ("100.127.255.255", "shared"),
            ("100.128.0.0", "public"),
            ("127.0.0.1", "loopback"),
            ("127.255.255.254", "loopback"),
            ("169.254.169.254", "link_local"),
            ("172.15.255.255", "public"),
            ("172.16.0.1", "private"),
            ("172.31.255.255", "private"),
            ("172.32.0.0", "public"),
            ("192.0.0.8", "reserved"),
            ("192.0.2.1", "documentation"),
            ("192.0.3.1", "public"),
            ("192.88.99.1", "reserved"),
            ("192.168.1.1", "private"),
            ("198.18.0.1", "reserved"),
            ("198.19.255.255", "reserved"),
            ("198.20.0.0", "public"),
            ("198.51.100.7", "documentation"),
            ("203.0.113.9", "documentation"),
            ("224.0.0.1", "multicast"),
            ("239.255.255.255", "multicast"),
            ("240.0.0.1", "reserved"),
            ("255.255.255.254", "reserved"),
            ("255.255.255.255", "broadcast"),
            ("8.8.8.8", "public"),
            ("140.82.112.3", "public"),
            ("::", "unspecified"),
            ("::1", "loopback"),
            ("::2", "reserved"),
            ("::7f00:1", "reserved"),
            ("::ffff:127.0.0.1", "loopback"),
            ("::ffff:169.254.169.254", "link_local"),
            ("::ffff:8.8.8.8", "public"),
            ("64:ff9b::10.0.0.1", "private"),
            ("64:ff9b::8.8.8.8", "public"),
            ("64:ff9b:1::1", "reserved"),
            ("100::1", "reserved"),
            ("2001::1", "reserved"),
            ("2001:1ff::1", "reserved"),
            ("2001:200::1", "public"),
            ("2001:db8::1", "documentation"),
            ("2002:7f00:1::1", "loopback"),
            ("2002:a9fe:a9fe::", "link_local"),
            ("2002:808:808::1", "public"),
            ("2606:4700::1111", "public"),
            ("3fff::1", "documentation"),
            ("4000::1", "reserved"),
            ("5f00::1", "reserved"),
            ("fc00::1", "unique_local"),
            ("fd12:3456::1", "unique_local"),
            ("fe80::1", "link_local"),
            ("febf::1", "link_local"),
            ("fec0::1", "reserved"),
            ("ff02::1", "multicast"),
        ] {
            assert_eq!(c(a), want, "{a}");
        }
    }

    #[test]
    fn std_agrees_where_it_has_an_opinion() {
        // Spot checks against the standard library's stable predicates.
        for a in [
            "127.0.0.1",
            "10.1.2.3",
            "172.20.0.1",
            "192.168.9.9",
            "169.254.1.1",
        ] {
            let v4: Ipv4Addr = a.parse().unwrap();
            assert!(v4.is_loopback() || v4.is_private() || v4.is_link_local());
            assert!(!classify_v4(v4).is_public(), "{a}");
        }
    }

    proptest! {
        #[test]
        fn std_non_public_ipv4_is_never_public(bits in any::<u32>()) {
            let a = Ipv4Addr::from(bits);
            if a.is_loopback() || a.is_private() || a.is_link_local() || a.is_unspecified()
                || a.is_multicast() || a.is_broadcast() || a.is_documentation()
                || a.octets()[0] == 0 || a.octets()[0] >= 240
            {
                prop_assert!(!classify_v4(a).is_public(), "{}", a);
            }
        }

        #[test]
        fn std_non_public_ipv6_is_never_public(bits in any::<u128>()) {
            let a = Ipv6Addr::from(bits);
            if a.is_loopback() || a.is_unspecified() || a.is_multicast()
                || a.is_unicast_link_local() || a.is_unique_local()
            {
                prop_assert!(!classify_v6(a).is_public(), "{}", a);
            }
        }

        #[test]
        fn mapped_nat64_and_6to4_are_judged_by_the_ipv4(bits in any::<u32>(), tail in any::<u64>()) {
            let v4 = Ipv4Addr::from(bits);
            let want = classify_v4(v4);
            let mapped = v4.to_ipv6_mapped();
            prop_assert_eq!(classify_v6(mapped), want);
            let nat64 = Ipv6Addr::from((0x0064_ff9b_u128 << 96) | u128::from(bits));
            prop_assert_eq!(classify_v6(nat64), want);
            let six_to_four = Ipv6Addr::from(
                (0x2002_u128 << 112) | (u128::from(bits) << 80) | u128::from(tail) & 0xffff_ffff_ffff_ffff_ffff,
            );
            prop_assert_eq!(classify_v6(six_to_four), want);
        }

        #[test]
        fn public_ipv6_is_global_unicast(bits in any::<u128>()) {
            let a = Ipv6Addr::from(bits);
            if classify_v6(a).is_public() && embedded_v4(a).is_none() {
                prop_assert!(bits >> 125 == 0b001, "{}", a);
            }
        }

        #[test]
        fn biased_ipv4_near_the_edges(net in prop::sample::select(V4.to_vec()), off in any::<u32>()) {
            // An address inside each range has that range's class (broadcast's /32
            // comes before 240/4 in the table).
            let (n, len, class) = net;
            let host = if len == 32 { 0 } else { off & (u32::MAX >> len) };
            let a = Ipv4Addr::from(n | host);
            if a != Ipv4Addr::BROADCAST {
                prop_assert_eq!(classify_v4(a), class, "{}", a);
            }
        }
    }
}
