//! The connection log of one call (RUNTIME §5.5, §6): every connection the child opened
//! to the proxy, with its destination, port, bytes each way and verdict; summarised for
//! the outcome record (the first [`FIRST`] connections, then counts by destination and
//! verdict) and for the result's `network` part (the refused destinations).
//!
//! Memory is bounded whatever the child does: the first [`FIRST`] connections are kept
//! whole, the rest only as counts of at most [`MAX_GROUPS`] distinct destinations (beyond
//! them, one group whose `dest` is `null` counts the others).

use serde::Serialize;
use std::collections::BTreeMap;
use std::net::IpAddr;

/// Connections kept whole, the first the child opened: 64 (RUNTIME §5.5).
pub const FIRST: usize = 64;
/// Distinct `(dest, port, verdict)` groups counted after the first [`FIRST`]; more fall
/// into one group with `dest` `null`: 256.
pub const MAX_GROUPS: usize = 256;
/// Refused destinations named in the result's `network` part: 16; the rest are counted in
/// its `refused_other`.
pub const MAX_REFUSED_SHOWN: usize = 16;
/// Bytes of JSON the outcome's `first` list may take: 5 KiB.
pub const OUTCOME_FIRST_BYTES: usize = 5 * 1024;
/// Bytes of JSON the outcome's `others` list may take before the folded groups: 1 KiB.
pub const OUTCOME_OTHERS_BYTES: usize = 1024;
/// Destination names are cut to this many characters in the records (a name is at most
/// 253; what a child sent that was not a name is cut): 255.
pub const MAX_DEST_CHARS: usize = 255;

/// A connection's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The destination is listed and its address may be reached: the proxy connected (or
    /// tried to: see [`Connection::error`]).
    Allowed,
    /// Nothing was reached.
    Refused,
}

/// One connection of the child to the proxy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Connection {
    /// The host the child asked for (a name lower-cased, or an address), `None` when its
    /// request could not be read.
    pub dest: Option<String>,
    /// The port it asked for.
    pub port: Option<u16>,
    /// How it asked: `connect` (a tunnel) or `forward` (a plain HTTP request).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<&'static str>,
    /// The address the proxy connected to, once it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<IpAddr>,
    /// Bytes from the child to the destination (after the request head of a `CONNECT`;
    /// the rewritten head and the body of a forwarded request).
    pub sent: u64,
    /// Bytes from the destination to the child.
    pub received: u64,
    /// `allowed` or `refused`.
    pub verdict: Verdict,
    /// Why it was refused (`not_listed`, `port_not_listed`, an address class such as
    /// `loopback`, `malformed`, `head_too_large`, `head_timeout`, `unsupported`,
    /// `too_many_connections`), or why an allowed connection reached nothing
    /// (`resolve_failed`, `connect_failed`, `connect_timeout`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
}

impl Connection {
    /// A connection refused for `reason` before its request named a destination.
    pub fn unread(reason: &'static str) -> Self {
        Self {
            dest: None,
            port: None,
            kind: None,
            address: None,
            sent: 0,
            received: 0,
            verdict: Verdict::Refused,
            reason: Some(reason),
        }
    }
}

/// Key of a counted group: destination, port, verdict.
type GroupKey = (Option<String>, Option<u16>, Verdict);

/// Counts of one group.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Counts {
    count: u64,
    sent: u64,
    received: u64,
}

/// Every connection of a call, bounded (module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnectionLog {
    total: u64,
    first: Vec<Option<Connection>>,
    rest: BTreeMap<GroupKey, Counts>,
    refused: BTreeMap<(Option<String>, Option<u16>), u64>,
    refused_order: Vec<(Option<String>, Option<u16>)>,
    refused_other: u64,
}

impl ConnectionLog {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one ended connection, numbered as the next ([`ConnectionLog::record`] with
    /// the number of connections recorded so far).
    pub fn push(&mut self, c: Connection) {
        self.record(self.total, c);
    }

    /// Adds ended connection number `seq` (0-based, in the order the child opened them;
    /// each number once): one of the first [`FIRST`] is kept whole in its place, a later
    /// one counted in its group.
    pub fn record(&mut self, seq: u64, mut c: Connection) {
        self.total += 1;
        if let Some(d) = &mut c.dest
            && d.chars().count() > MAX_DEST_CHARS
        {
            *d = d.chars().take(MAX_DEST_CHARS).collect();
        }
        // A connection that closed before its request, or that the call's end closed
        // first, named nothing to refuse: it is in the log, not among the refusals.
        let named = !matches!(c.reason, Some("closed" | "call_ended"));
        if c.verdict == Verdict::Refused && named {
            let key = (c.dest.clone(), c.port);
            if let Some(n) = self.refused.get_mut(&key) {
                *n += 1;
            } else if self.refused.len() < MAX_GROUPS {
                self.refused.insert(key.clone(), 1);
                self.refused_order.push(key);
            } else {
                self.refused_other += 1;
            }
        }
        if let Ok(i) = usize::try_from(seq)
            && i < FIRST
        {
            if self.first.len() <= i {
                self.first.resize(i + 1, None);
            }
            self.first[i] = Some(c);
            return;
        }
        let mut key = (c.dest, c.port, c.verdict);
        if !self.rest.contains_key(&key) && self.rest.len() >= MAX_GROUPS {
            key = (None, None, c.verdict);
        }
        let g = self.rest.entry(key).or_default();
        g.count += 1;
        g.sent += c.sent;
        g.received += c.received;
    }

    /// Connections in all.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The first [`FIRST`] connections the child opened, in that order.
    pub fn first(&self) -> Vec<&Connection> {
        self.first.iter().flatten().collect()
    }

    /// Connections refused in all, but those that closed before their request or that
    /// the call's end closed (`closed`, `call_ended`: they are in the log only).
    pub fn refused_total(&self) -> u64 {
        self.refused.values().sum::<u64>() + self.refused_other
    }

    /// The refused destinations with their counts, in the order first refused (at most
    /// [`MAX_GROUPS`]; `dest` `None`: requests that named none).
    pub fn refused(&self) -> impl Iterator<Item = (Option<&str>, Option<u16>, u64)> {
        self.refused_order.iter().map(|k| {
            (
                k.0.as_deref(),
                k.1,
                self.refused.get(k).copied().unwrap_or(0),
            )
        })
    }

    /// The outcome record's `connections` (RUNTIME §5.5, §6):
    /// `{"total": N, "first": [CONNECTION…], "others": [{"dest", "port", "verdict",
    /// "count", "sent", "received"}…]}`, `first` as [`Connection`] serialises, `others`
    /// counting the connections after `first` by destination and verdict.
    ///
    /// Bounded, since an outcome record is (RUNTIME §5.4): `first` holds the first
    /// [`FIRST`] connections as long as their JSON stays within [`OUTCOME_FIRST_BYTES`]
    /// (about 40 of usual size), `others` the groups within [`OUTCOME_OTHERS_BYTES`];
    /// what does not fit is counted in the groups whose `dest` and `port` are `null`.
    #[cfg(feature = "proxy")]
    pub fn outcome_json(&self) -> serde_json::Value {
        let len = |v: &serde_json::Value| v.to_string().len() + 1;
        let mut groups = self.rest.clone();
        let mut first = Vec::new();
        let mut used = 0;
        let mut cut = false;
        for c in self.first.iter().flatten() {
            let v = serde_json::to_value(c).unwrap_or_default();
            let n = len(&v);
            if !cut && used + n <= OUTCOME_FIRST_BYTES {
                used += n;
                first.push(v);
            } else {
                cut = true; // in order: nothing after the first that did not fit
                let g = groups
                    .entry((c.dest.clone(), c.port, c.verdict))
                    .or_default();
                g.count += 1;
                g.sent += c.sent;
                g.received += c.received;
            }
        }
        let group = |(dest, port, verdict): &GroupKey, c: &Counts| {
            serde_json::json!({
                "dest": dest, "port": port, "verdict": verdict,
                "count": c.count, "sent": c.sent, "received": c.received,
            })
        };
        let mut others = Vec::new();
        let mut folded: BTreeMap<Verdict, Counts> = BTreeMap::new();
        let mut used = 0;
        for (k, c) in &groups {
            let v = group(k, c);
            let n = len(&v);
            if k.0.is_some() && used + n <= OUTCOME_OTHERS_BYTES {
                used += n;
                others.push(v);
            } else {
                let f = folded.entry(k.2).or_default();
                f.count += c.count;
                f.sent += c.sent;
                f.received += c.received;
            }
        }
        for (verdict, c) in &folded {
            others.push(group(&(None, None, *verdict), c));
        }
        serde_json::json!({
            "total": self.total,
            "first": first,
            "others": others,
        })
    }

    /// The result's `network.refused` (RUNTIME §5.3): `[{"dest", "port", "count"}…]`, the
    /// first [`MAX_REFUSED_SHOWN`] refused destinations; and how many refused connections
    /// went to the others.
    #[cfg(feature = "proxy")]
    pub fn refused_json(&self) -> (serde_json::Value, u64) {
        let mut shown = Vec::new();
        let mut other = self.refused_other;
        for (i, (dest, port, count)) in self.refused().enumerate() {
            if i < MAX_REFUSED_SHOWN {
                shown.push(serde_json::json!({"dest": dest, "port": port, "count": count}));
            } else {
                other += count;
            }
        }
        (serde_json::Value::Array(shown), other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::Value;

    fn conn(dest: &str, port: u16, verdict: Verdict) -> Connection {
        Connection {
            dest: Some(dest.into()),
            port: Some(port),
            kind: Some("connect"),
            address: None,
            sent: 10,
            received: 20,
            verdict,
            reason: (verdict == Verdict::Refused).then_some("not_listed"),
        }
    }

    #[test]
    fn the_first_64_whole_then_counts() {
        let mut log = ConnectionLog::new();
        for i in 0..1000 {
            let v = if i % 2 == 0 {
                Verdict::Allowed
            } else {
                Verdict::Refused
            };
            log.push(conn(
                if i % 2 == 0 { "a.example" } else { "b.example" },
                443,
                v,
            ));
        }
        assert_eq!(log.total(), 1000);
        assert_eq!(log.first().len(), FIRST);
        assert_eq!(log.refused_total(), 500);
        let j = log.outcome_json();
        assert_eq!(j["total"], 1000);
        let first = j["first"].as_array().unwrap();
        assert!(!first.is_empty() && first.len() <= FIRST);
        assert!(j["first"].to_string().len() <= OUTCOME_FIRST_BYTES);
        assert_eq!(first[0]["dest"], "a.example");
        assert_eq!(first[1]["reason"], "not_listed");
        let others = j["others"].as_array().unwrap();
        let counted: u64 = others.iter().map(|o| o["count"].as_u64().unwrap()).sum();
        assert_eq!(counted + first.len() as u64, 1000);
        let sent: u64 = others.iter().map(|o| o["sent"].as_u64().unwrap()).sum();
        assert_eq!(sent + 10 * first.len() as u64, 10_000);
        assert_eq!(others[0]["dest"], "a.example");
        assert_eq!(others[1]["dest"], "b.example");
        assert_eq!(others[1]["verdict"], "refused");
        assert_eq!(
            log.refused_json(),
            (
                serde_json::json!([{"dest": "b.example", "port": 443, "count": 500}]),
                0
            )
        );
    }

    #[test]
    fn distinct_destinations_are_bounded() {
        let mut log = ConnectionLog::new();
        for i in 0..10_000 {
            log.push(conn(&format!("h{i}.example"), 443, Verdict::Refused));
        }
        let j = log.outcome_json();
        assert!(j.to_string().len() <= OUTCOME_FIRST_BYTES + OUTCOME_OTHERS_BYTES + 200);
        let others = j["others"].as_array().unwrap();
        let last = others.last().unwrap();
        assert_eq!((&last["dest"], &last["port"]), (&Value::Null, &Value::Null));
        let counted: u64 = others.iter().map(|o| o["count"].as_u64().unwrap()).sum();
        let first = j["first"].as_array().unwrap().len() as u64;
        assert_eq!(counted + first, 10_000);
        let (shown, other) = log.refused_json();
        assert_eq!(shown.as_array().unwrap().len(), MAX_REFUSED_SHOWN);
        assert_eq!(other, 10_000 - MAX_REFUSED_SHOWN as u64);
        assert_eq!(log.refused_total(), 10_000);
    }

    #[test]
    fn long_destinations_are_cut() {
        let mut log = ConnectionLog::new();
        log.push(conn(&"x".repeat(5000), 1, Verdict::Refused));
        assert_eq!(
            log.first()[0].dest.as_deref().map(str::len),
            Some(MAX_DEST_CHARS)
        );
    }
}
