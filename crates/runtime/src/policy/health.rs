//! What `hcp doctor` says of the runtime policy (RUNTIME §7): whether it loads, what the
//! compiled cache did, and the tool lock against the active verbs.

use super::{contracts, lock, source};
use hcp_store::Home;
use serde::Serialize;
use std::path::PathBuf;

/// The runtime policy, its compiled cache and the tool lock.
#[derive(Debug, Serialize)]
pub struct PolicyHealth {
    /// `$HCP_HOME/policy.json` or `policy.yaml`, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
    /// Its `content_hash`, when it loads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_hash: Option<String>,
    /// Why it does not load (its code and message), when it does not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What loading did with the compiled cache.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache: Option<String>,
    /// The last time an entry was refused and rebuilt, and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_last_rebuilt: Option<String>,
    /// Active verbs the runtime policy does not name (every session call of them is
    /// refused, `unknown_tool`): deny by default, so not a problem, but what a pack
    /// installed after the policy still needs (`hcp policy init --merge FILE`).
    pub uncovered: Vec<String>,
    /// `tools.lock.json`.
    pub lock: LockHealth,
    /// `config.json`'s `policy_mode`: `enforce`, or `observe` (RUNTIME §11: the policy
    /// decides and records `would_refuse`, and refuses nothing).
    pub mode: &'static str,
}

/// `tools.lock.json` against the active verbs.
#[derive(Debug, Default, Serialize)]
pub struct LockHealth {
    /// Whether the file exists.
    pub present: bool,
    /// Why it does not read, when it does not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Verbs locked.
    pub locked: usize,
    /// Active verbs whose definition moved (`tool_drift` for sessions).
    pub drifted: Vec<String>,
    /// Active verbs the lock does not cover (`tool_drift` for sessions).
    pub unlocked: Vec<String>,
    /// Entries naming no active verb (`lock_stale`).
    pub stale: Vec<String>,
}

/// Examines the runtime policy of `home`, adding what is wrong to `problems`. Loading it
/// rebuilds a compiled entry that could not be used, as any call would.
pub fn examine(home: &Home, problems: &mut Vec<String>) -> PolicyHealth {
    let mut h = PolicyHealth {
        file: source::policy_file(home).ok().flatten(),
        content_hash: None,
        error: None,
        cache: None,
        cache_last_rebuilt: source::last_rebuild(home).map(|(at, why)| format!("{at} ({why})")),
        uncovered: Vec::new(),
        lock: LockHealth::default(),
        mode: match hcp_store::config::RuntimeConfig::load(home.root()).map(|c| c.policy_mode) {
            Ok(hcp_store::config::PolicyMode::Observe) => "observe",
            _ => "enforce",
        },
    };
    match source::load(home) {
        Ok(None) => {}
        Ok(Some(rp)) => {
            h.content_hash = Some(rp.hash().to_owned());
            h.cache = Some(rp.cache.describe());
            if let Ok(packs) = contracts::active_packs(home, &[]) {
                h.uncovered = contracts::coverage(&rp.policy, &packs).verbs;
            }
        }
        Err(r) => {
            problems.push(format!(
                "the runtime policy does not load, so every call is refused ({}): {}",
                r.code, r.message
            ));
            h.error = Some(format!("{}: {}", r.code, r.message));
        }
    }
    h.lock.present = lock::lock_path(home).exists();
    match lock::read(home) {
        Ok(None) => {}
        Err(r) => {
            problems.push(format!(
                "the tool lock does not read, so every session call is refused ({}): {}",
                r.code, r.message
            ));
            h.lock.error = Some(format!("{}: {}", r.code, r.message));
        }
        Ok(Some(l)) => {
            h.lock.locked = l.tools.len();
            let current = contracts::active_packs(home, &[]).and_then(|p| lock::sources(&p));
            match current {
                Err(r) => problems.push(format!("the active verbs cannot be read: {}", r.message)),
                Ok(current) => {
                    let r = lock::check_all(&l, &current);
                    h.lock.drifted = r.drifted.into_iter().map(|(n, _)| n).collect();
                    h.lock.unlocked = r.unlocked;
                    h.lock.stale = r.missing;
                    for (what, names) in [
                        ("changed since it was locked (tool_drift)", &h.lock.drifted),
                        ("not in the tool lock (tool_drift)", &h.lock.unlocked),
                    ] {
                        for n in names {
                            problems.push(format!(
                                "`{n}` is {what}: session calls are refused until `hcp policy lock`"
                            ));
                        }
                    }
                    for n in &h.lock.stale {
                        problems.push(format!(
                            "the tool lock names `{n}`, which is no active verb (lock_stale): `hcp policy lock` writes it again"
                        ));
                    }
                }
            }
        }
    }
    h
}
