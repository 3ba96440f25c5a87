//! Per-principal `rate_limit` and `budget` counters behind a trait (HISTOS-ENGINE §6).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// Which counter a call draws on: one per principal identity and tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitKey<'a> {
    /// Principal identity (`<anonymous>` when the principal has none).
    pub identity: &'a str,
    /// Tool name.
    pub tool: &'a str,
}

/// The limits a tool declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LimitSpec {
    /// Max calls in the store's rolling window.
    pub rate_limit: Option<u64>,
    /// Max calls for the life of the store.
    pub budget: Option<u64>,
}

/// Outcome of a limit check, in the reference's order: capacity, budget, rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitVerdict {
    /// Within limits (and, for `try_consume`, recorded).
    Ok,
    /// The store cannot track another key (`limit_store_capacity`).
    Capacity,
    /// Budget exhausted (`budget`).
    Budget,
    /// Calls in the window ≥ `rate_limit` (`rate_limit`).
    RateLimit,
}

/// A store of call counters. Implementations must make [`LimitStore::try_consume`]
/// atomic (check and record under one lock / transaction), so that two concurrent
/// callers cannot both take the last slot; hcp's file-backed store shares it across
/// processes. Times are caller-supplied milliseconds on one clock.
pub trait LimitStore: Send + Sync {
    /// The rolling window of `rate_limit`, in milliseconds (reference default 60 000).
    fn window_ms(&self) -> u64;
    /// Read-only check (HISTOS-ENGINE §1b step 7).
    fn check(&self, key: LimitKey<'_>, spec: LimitSpec, now_ms: u64) -> LimitVerdict;
    /// Atomic check-and-record of one call; only called for a final `allow` (§1c).
    fn try_consume(&self, key: LimitKey<'_>, spec: LimitSpec, now_ms: u64) -> LimitVerdict;
}

#[derive(Debug, Default)]
struct Entry {
    recent: VecDeque<u64>,
    total: u64,
}

/// An in-process [`LimitStore`] (a mutex over a map), like the reference's `LimitStore`.
#[derive(Debug)]
pub struct MemoryLimitStore {
    window_ms: u64,
    max_keys: usize,
    map: Mutex<HashMap<(String, String), Entry>>,
}

impl Default for MemoryLimitStore {
    fn default() -> Self {
        Self::new(60_000, 100_000)
    }
}

impl MemoryLimitStore {
    /// A store with a rolling window of `window_ms` milliseconds and at most `max_keys`
    /// identity/tool keys (reference defaults: 60 000 ms, 100 000 keys).
    pub fn new(window_ms: u64, max_keys: usize) -> Self {
        MemoryLimitStore {
            window_ms,
            max_keys,
            map: Mutex::new(HashMap::new()),
        }
    }

    fn verdict(&self, e: Option<&Entry>, len: usize, spec: LimitSpec, now_ms: u64) -> LimitVerdict {
        let Some(e) = e else {
            return if len >= self.max_keys {
                LimitVerdict::Capacity
            } else {
                LimitVerdict::Ok
            };
        };
        if spec.budget.is_some_and(|b| e.total >= b) {
            return LimitVerdict::Budget;
        }
        if let Some(r) = spec.rate_limit {
            let since = now_ms.saturating_sub(self.window_ms);
            let n = e.recent.iter().filter(|&&t| t >= since).count() as u64;
            if n >= r {
                return LimitVerdict::RateLimit;
            }
        }
        LimitVerdict::Ok
    }
}

impl LimitStore for MemoryLimitStore {
    fn window_ms(&self) -> u64 {
        self.window_ms
    }

    fn check(&self, key: LimitKey<'_>, spec: LimitSpec, now_ms: u64) -> LimitVerdict {
        let Ok(map) = self.map.lock() else {
            return LimitVerdict::Capacity;
        };
        let e = map.get(&(key.identity.to_string(), key.tool.to_string()));
        self.verdict(e, map.len(), spec, now_ms)
    }

    fn try_consume(&self, key: LimitKey<'_>, spec: LimitSpec, now_ms: u64) -> LimitVerdict {
        let Ok(mut map) = self.map.lock() else {
            return LimitVerdict::Capacity;
        };
        let k = (key.identity.to_string(), key.tool.to_string());
        let v = self.verdict(map.get(&k), map.len(), spec, now_ms);
        if v != LimitVerdict::Ok {
            return v;
        }
        let since = now_ms.saturating_sub(self.window_ms);
        let e = map.entry(k).or_default();
        while e.recent.front().is_some_and(|&t| t < since) {
            e.recent.pop_front();
        }
        e.recent.push_back(now_ms);
        e.total += 1;
        LimitVerdict::Ok
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn budget_and_rate_are_consumed_only_by_try_consume() {
        let s = MemoryLimitStore::new(1000, 10);
        let k = LimitKey {
            identity: "u",
            tool: "t",
        };
        let spec = LimitSpec {
            rate_limit: Some(2),
            budget: Some(3),
        };
        assert_eq!(s.check(k, spec, 0), LimitVerdict::Ok);
        assert_eq!(s.check(k, spec, 0), LimitVerdict::Ok);
        assert_eq!(s.try_consume(k, spec, 0), LimitVerdict::Ok);
        assert_eq!(s.try_consume(k, spec, 1), LimitVerdict::Ok);
        assert_eq!(s.try_consume(k, spec, 2), LimitVerdict::RateLimit);
        assert_eq!(s.try_consume(k, spec, 1500), LimitVerdict::Ok);
        assert_eq!(s.try_consume(k, spec, 5000), LimitVerdict::Budget);
    }

    #[test]
    fn capacity_is_per_key() {
        let s = MemoryLimitStore::new(1000, 1);
        let spec = LimitSpec {
            rate_limit: Some(5),
            budget: None,
        };
        assert_eq!(
            s.try_consume(
                LimitKey {
                    identity: "a",
                    tool: "t"
                },
                spec,
                0
            ),
            LimitVerdict::Ok
        );
        assert_eq!(
            s.check(
                LimitKey {
                    identity: "b",
                    tool: "t"
                },
                spec,
                0
            ),
            LimitVerdict::Capacity
        );
    }
}
