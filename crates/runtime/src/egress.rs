//! Network by destination for one call (RUNTIME §5.5): the proxy that serves a child
//! whose network is `{"allow": [DEST…]}`, for the call's lifetime, and what its
//! connection log puts into the outcome record and the result.
//!
//! The child's view (`hcp-adapter`) runs it in a network namespace of its own and hands
//! hcp a socket listening inside it before `execve`; [`CallEgress::serve`] starts
//! `hcp_egress::Proxy` on it; [`CallEgress::finish`], once the child has ended, stops the
//! proxy and writes what it saw:
//!
//! - the outcome record's `connections` (`hcp_egress::ConnectionLog::outcome_json`: the
//!   first connections whole — destination, port, address, bytes each way, `allowed` or
//!   `refused` and why — then counts by destination and verdict);
//! - the result's `sandbox.network.refused`, `[{"dest", "port", "count"}]`, and with a
//!   refused destination a hint naming the key that lists them ([`hint`]).
//!
//! A `deny` or `host` call never makes a [`CallEgress`]: no proxy, no thread.

use crate::refusal::Refusal;
use hcp_egress::{AllowList, ConnectionLog, Destination, Proxy, ProxyConfig};
use hcp_model::CallFacts;
use hcp_model::Code;
use hcp_store::config::{NetworkMode, RuntimeConfig};
use serde::Serialize;
use serde_json::{Map, Value};
use std::os::fd::OwnedFd;
use std::sync::{Mutex, PoisonError};

/// The egress of one call: its destinations and, once the child handed its listener, the
/// proxy serving it. [`CallEgress::serve`] takes `&self` (the adapter calls it through a
/// shared `Fn` hook right after the spawn).
#[derive(Debug)]
pub struct CallEgress {
    key: String,
    state: Mutex<Serving>,
}

/// Where a call's proxy is.
#[derive(Debug)]
enum Serving {
    /// Not started: the destinations.
    Ready(ProxyConfig),
    /// Serving the child's listener.
    Running(Proxy),
    /// It could not start (why), or a second listener came.
    Failed(String),
}

impl CallEgress {
    /// The egress of a call whose network lists `entries`, at `key` in `config.json`
    /// (`packs.ID.network`, or `sandbox.network`: [`key_for`]).
    ///
    /// # Errors
    /// `bad_config` (78) for an entry that is not a destination (reading `config.json`
    /// already refuses one; checked again here, since this is what the proxy enforces).
    pub fn new(entries: &[String], key: String) -> Result<Self, Refusal> {
        let allow = AllowList::parse(entries).map_err(|(i, e)| {
            Refusal::new(Code::BadConfig, format!("`{key}.allow[{i}]`: {e}"))
                .hint("fix `config.json` in the store; every call is refused until it parses")
        })?;
        Ok(Self {
            state: Mutex::new(Serving::Ready(ProxyConfig::new(allow, key.clone()))),
            key,
        })
    }

    /// Serves `listener` — the socket the child made listening inside its network
    /// namespace, handed to hcp before `execve` — for the rest of the call. A proxy that
    /// cannot start closes the listener, so the child's connections are refused and reach
    /// nothing; the result says why. A second listener is closed.
    pub fn serve(&self, listener: OwnedFd) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let next = match std::mem::replace(&mut *state, Serving::Failed(String::new())) {
            Serving::Ready(config) => {
                match Proxy::start(std::net::TcpListener::from(listener), config) {
                    Ok(p) => Serving::Running(p),
                    Err(e) => Serving::Failed(e.to_string()),
                }
            }
            other => other,
        };
        *state = next;
    }

    /// Whether a proxy is serving the call.
    pub fn serving(&self) -> bool {
        matches!(
            *self.state.lock().unwrap_or_else(PoisonError::into_inner),
            Serving::Running(_)
        )
    }

    /// Ends the proxy (after the child: its connections are closed, each counted) and
    /// writes its log into `facts`: the outcome record's `connections`, and the result's
    /// `sandbox.network.refused` (with `refused_other` when more destinations were
    /// refused than it names, and `proxy` when the proxy could not start).
    pub fn finish(self, facts: &mut CallFacts) {
        let state = self
            .state
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        let (log, failed) = match state {
            Serving::Running(p) => (p.finish(), None),
            Serving::Failed(why) => (ConnectionLog::new(), Some(why)),
            // The child handed no listener (it did not start, or this build has no
            // network namespace): nothing was served.
            Serving::Ready(_) => (ConnectionLog::new(), None),
        };
        note(&log, failed.as_deref(), &self.key, facts);
    }
}

/// The egress of a call of `pack_id` (RUNTIME §5.5): `Some` when its network
/// (`packs.ID.network`, else `sandbox.network`) is `{"allow": […]}` and the child runs in a
/// network namespace of its own (`in_namespace`: the confinement hands hcp a listener);
/// `None` for `deny`, `host`, and an owner's call that the kernel gave no namespace (its
/// `network` part says so, and nothing serves it).
///
/// # Errors
/// `bad_config` for an entry that is not a destination ([`CallEgress::new`]).
pub fn for_call(
    config: &RuntimeConfig,
    pack_id: &str,
    in_namespace: bool,
) -> Result<Option<CallEgress>, Refusal> {
    match config.network_for(pack_id) {
        NetworkMode::Allow(entries) if in_namespace => {
            let own = config.pack(pack_id).network.is_some();
            CallEgress::new(entries, key_for(pack_id, own)).map(Some)
        }
        _ => Ok(None),
    }
}

/// After the run of a child that had `egress`: the proxy ended and its log written
/// ([`CallEgress::finish`]); a refused destination gives the result its hint ([`hint`])
/// unless it has one already.
pub fn after_run(egress: Option<CallEgress>, facts: &mut CallFacts) {
    let Some(e) = egress else {
        return;
    };
    e.finish(facts);
    if facts.hint.is_none()
        && let Some(h) = hint(facts.sandbox_after_run())
    {
        facts.hint = Some(h);
    }
}

/// `hcp sense`: serves a trigger's `listener` (taken from the started trigger) with its
/// `egress`, if it has both; else the listener is closed.
pub fn serve_trigger(egress: Option<&CallEgress>, listener: Option<OwnedFd>) {
    if let (Some(e), Some(fd)) = (egress, listener) {
        e.serve(fd);
    }
}

/// `hcp sense`: once every trigger has ended, each trigger's proxy ended and its log, by
/// ref, for the sense's outcome record (`connections`: `{REF: {"total", "first",
/// "others"}}`); `None` when no trigger had one.
pub fn trigger_connections<'a>(
    triggers: impl Iterator<Item = (&'a str, Option<CallEgress>)>,
) -> Option<Value> {
    let mut by_ref = Map::new();
    for (reference, egress) in triggers {
        if let Some(e) = egress {
            let state = e.state.into_inner().unwrap_or_else(PoisonError::into_inner);
            let log = match state {
                Serving::Running(p) => p.finish(),
                Serving::Ready(_) | Serving::Failed(_) => ConnectionLog::new(),
            };
            by_ref.insert(reference.to_owned(), log.outcome_json());
        }
    }
    (!by_ref.is_empty()).then_some(Value::Object(by_ref))
}

/// One pack's network as `config.json` gives it (RUNTIME §5.3, §5.5), for `hcp doctor`
/// and `hcp show`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PackNetwork {
    /// The pack.
    pub pack_id: String,
    /// `deny`, `host` or `allow`.
    pub mode: &'static str,
    /// The key it comes from: `packs.ID.network`, else `sandbox.network` (whose default
    /// is `deny`).
    pub key: String,
    /// Under `allow`, its destinations in their canonical form (lower-cased, an IPv6
    /// address in brackets), in the order written.
    pub destinations: Vec<String>,
}

impl PackNetwork {
    /// `allow (packs.gh.network): api.github.com:443, github.com:443`, `deny
    /// (sandbox.network)`: one line of `hcp doctor` and `hcp show`.
    pub fn line(&self) -> String {
        let mut s = format!("{} ({})", self.mode, self.key);
        if self.mode == "allow" {
            if self.destinations.is_empty() {
                s.push_str(": no destination");
            } else {
                s.push_str(": ");
                s.push_str(&self.destinations.join(", "));
            }
        }
        s
    }
}

/// The network of `pack_id` ([`PackNetwork`]). An entry that is not a destination cannot
/// be here: `config.json` would not have loaded.
pub fn pack_network(config: &RuntimeConfig, pack_id: &str) -> PackNetwork {
    let mode = config.network_for(pack_id);
    let destinations = match mode {
        NetworkMode::Allow(entries) => entries
            .iter()
            .map(|e| Destination::parse(e).map_or_else(|_| e.clone(), |d| d.to_string()))
            .collect(),
        _ => Vec::new(),
    };
    PackNetwork {
        pack_id: pack_id.to_owned(),
        mode: mode.mode(),
        key: key_for(pack_id, config.pack(pack_id).network.is_some()),
        destinations,
    }
}

/// Writes `log` into a call's facts (as [`CallEgress::finish`]): its records'
/// `connections`, its result's `sandbox.network`.
fn note(log: &ConnectionLog, failed: Option<&str>, key: &str, facts: &mut CallFacts) {
    facts.connections = Some(log.outcome_json());
    let (refused, other) = log.refused_json();
    let sandbox = facts.sandbox_after_run();
    let network = sandbox
        .entry("network")
        .or_insert_with(|| serde_json::json!({"mode": "allow"}));
    if !network.is_object() {
        // An older shape (`"network": "enforced"`): the mode and what it enforced.
        *network = serde_json::json!({"mode": "allow", "enforced": network.clone()});
    }
    if let Value::Object(n) = network {
        n.insert("refused".into(), refused);
        if other > 0 {
            n.insert("refused_other".into(), other.into());
        }
        n.insert("key".into(), key.into());
        if let Some(why) = failed {
            n.insert("proxy".into(), format!("not started: {why}").into());
        }
    }
}

/// The key of `config.json` that lists a pack's destinations: its own
/// `packs.ID.network` when it has one, else `sandbox.network`.
pub fn key_for(pack_id: &str, pack_has_own: bool) -> String {
    if pack_has_own {
        format!("packs.{pack_id}.network")
    } else {
        "sandbox.network".into()
    }
}

/// The result's hint when its `sandbox`'s `network` part names refused destinations
/// (RUNTIME §5.5: the model and the operator see why): the first of them and the key.
pub fn hint(sandbox: &Map<String, Value>) -> Option<String> {
    let network = sandbox.get("network")?;
    let refused = network.get("refused")?.as_array()?;
    let first = refused.first()?;
    let key = network
        .get("key")
        .and_then(Value::as_str)
        .unwrap_or("network");
    let dest = match (first.get("dest").and_then(Value::as_str), first.get("port")) {
        (Some(d), Some(Value::Number(p))) => format!("`{d}:{p}`"),
        _ => "a request that named no destination".into(),
    };
    let more = refused.len() - 1
        + usize::from(
            network
                .get("refused_other")
                .is_some_and(|v| v.as_u64() > Some(0)),
        );
    let others = if more > 0 {
        format!(" (and {more} more)")
    } else {
        String::new()
    };
    Some(format!(
        "the network refused {dest}{others}: it is not a destination of this pack; the owner may list it in `{key}` of `config.json` (`{{\"allow\": [\"HOST:PORT\"]}}`)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::io::{Read, Write};

    #[test]
    fn a_served_call_writes_its_connections_and_refusals() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let egress = CallEgress::new(&["api.example.com:443".into()], key_for("gh", true)).unwrap();
        egress.serve(OwnedFd::from(listener));
        assert!(egress.serving());
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.write_all(b"CONNECT evil.example:443 HTTP/1.1\r\n\r\n")
            .unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
        assert!(answer.contains("`packs.gh.network`"), "{answer}");
        let sandbox =
            serde_json::json!({"network": {"mode": "allow", "enforced": true, "refused": []}});
        let mut facts = CallFacts {
            sandbox: Some(hcp_model::facts::Sandbox::One(sandbox)),
            ..CallFacts::default()
        };
        let Serving::Running(proxy) = egress.state.into_inner().unwrap() else {
            panic!("not serving")
        };
        note(&proxy.finish(), None, "packs.gh.network", &mut facts);
        let (audit, result) = (facts.audit_fields(), facts.result_fields());
        assert_eq!(
            result["sandbox"]["network"],
            serde_json::json!({
                "mode": "allow", "enforced": true, "key": "packs.gh.network",
                "refused": [{"dest": "evil.example", "port": 443, "count": 1}],
            })
        );
        assert_eq!(audit["connections"]["total"], 1);
        assert_eq!(audit["connections"]["first"][0]["reason"], "not_listed");
        assert_eq!(
            hint(facts.sandbox_after_run()).unwrap(),
            "the network refused `evil.example:443`: it is not a destination of this pack; the owner may list it in `packs.gh.network` of `config.json` (`{\"allow\": [\"HOST:PORT\"]}`)"
        );
    }

    #[test]
    fn nothing_refused_no_hint() {
        let mut facts = CallFacts::default();
        note(&ConnectionLog::new(), None, "sandbox.network", &mut facts);
        let (audit, result) = (facts.audit_fields(), facts.result_fields());
        assert_eq!(
            result["sandbox"]["network"]["refused"],
            serde_json::json!([])
        );
        assert_eq!(audit["connections"]["total"], 0);
        assert_eq!(hint(facts.sandbox_after_run()), None);
    }

    #[test]
    fn only_an_allow_network_in_a_namespace_gets_a_proxy() {
        let c =
            |text: &str| RuntimeConfig::parse(text, std::path::Path::new("config.json")).unwrap();
        let own = c(r#"{"packs": {"gh": {"network": {"allow": ["api.github.com:443"]}}}}"#);
        let e = for_call(&own, "gh", true).unwrap().unwrap();
        assert_eq!(e.key, "packs.gh.network");
        assert!(for_call(&own, "gh", false).unwrap().is_none());
        assert!(for_call(&own, "other", true).unwrap().is_none());
        let every =
            c(r#"{"sandbox": {"network": {"allow": []}}, "packs": {"h": {"network": "host"}}}"#);
        assert_eq!(
            for_call(&every, "any", true).unwrap().unwrap().key,
            "sandbox.network"
        );
        assert!(for_call(&every, "h", true).unwrap().is_none());
        assert!(for_call(&c("{}"), "any", true).unwrap().is_none());
    }

    #[test]
    fn a_packs_network_for_doctor_and_show() {
        let c = RuntimeConfig::parse(
            r#"{"packs": {"gh": {"network": {"allow": ["API.github.com:443", "[2001:DB8::1]:443"]}}, "h": {"network": "host"}}}"#,
            std::path::Path::new("config.json"),
        )
        .unwrap();
        assert_eq!(
            pack_network(&c, "gh").line(),
            "allow (packs.gh.network): api.github.com:443, [2001:db8::1]:443"
        );
        assert_eq!(pack_network(&c, "h").line(), "host (packs.h.network)");
        assert_eq!(pack_network(&c, "echo").line(), "deny (sandbox.network)");
    }

    #[test]
    fn a_bad_entry_is_bad_config() {
        let e = CallEgress::new(&["github.com".into()], "packs.gh.network".into()).unwrap_err();
        assert_eq!(e.code, Code::BadConfig);
        assert!(
            e.message
                .starts_with("`packs.gh.network.allow[0]`: `github.com`"),
            "{}",
            e.message
        );
    }
}
