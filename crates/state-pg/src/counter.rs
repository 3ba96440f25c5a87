//! The read-only counter check of the dry pre-gate (RUNTIME §7, §9): `rate_limit` over a
//! rolling window and `budget` over the life of the state, per identity and tool, across
//! the fleet. Spending is [`crate::PgState::admit`]'s.
//!
//! Times are the callers' (milliseconds since the Unix epoch), as with the file store:
//! the machines of a fleet keep their clocks in step (NTP). A machine whose clock runs
//! behind counts more slots in its own window (stricter for it) and its slots look older
//! to the others.

use crate::PgState;
use crate::error::PgResult;
use hcp_store::counter::{Limits, Verdict};
use postgres::types::Type;

/// The most slot times kept per counter (as the file store's `MAX_RECENT`).
pub const MAX_RECENT: u64 = 100_000;

/// The verdict of a counter with `total` calls and slot times `recent`, checked in the
/// file store's order: budget, then rate.
pub(crate) fn verdict(total: u64, recent: &[i64], limits: Limits, now_ms: u64) -> Verdict {
    if limits.budget.is_some_and(|b| total >= b) {
        return Verdict::Budget;
    }
    if let Some(rate) = limits.rate_limit {
        let since = now_ms.saturating_sub(limits.window_ms);
        let n = recent
            .iter()
            .filter(|&&t| u64::try_from(t).is_ok_and(|t| t >= since))
            .count() as u64;
        if n >= rate.min(MAX_RECENT) {
            return Verdict::RateLimit;
        }
    }
    Verdict::Ok
}

impl PgState {
    /// Whether a call of `tool` by `identity` at `now_ms` is within `limits`, counting
    /// nothing (one round trip, no lock).
    ///
    /// # Errors
    /// [`crate::PgError`] (callers fail closed).
    pub fn counter_check(
        &self,
        identity: &str,
        tool: &str,
        limits: Limits,
        now_ms: u64,
    ) -> PgResult<Verdict> {
        if limits.budget.is_none() && limits.rate_limit.is_none() {
            return Ok(Verdict::Ok);
        }
        self.with(|c| {
            let row = c.query_typed_opt(
                "SELECT total, recent FROM @.counters WHERE identity = $1 AND tool = $2",
                &[(&identity, Type::TEXT), (&tool, Type::TEXT)],
            )?;
            let (total, recent): (i64, Vec<i64>) = match row {
                Some(r) => (r.try_get(0)?, r.try_get(1)?),
                None => (0, Vec::new()),
            };
            Ok(verdict(
                u64::try_from(total).unwrap_or(0),
                &recent,
                limits,
                now_ms,
            ))
        })
    }

    /// The calls counted so far for `identity` and `tool`: the budget's total and the slot
    /// times in the window ending at `now_ms`.
    ///
    /// # Errors
    /// [`crate::PgError`].
    pub fn counter_read(
        &self,
        identity: &str,
        tool: &str,
        window_ms: u64,
        now_ms: u64,
    ) -> PgResult<(u64, u64)> {
        self.with(|c| {
            let row = c.query_typed_opt(
                "SELECT total, recent FROM @.counters WHERE identity = $1 AND tool = $2",
                &[(&identity, Type::TEXT), (&tool, Type::TEXT)],
            )?;
            let Some(r) = row else { return Ok((0, 0)) };
            let total: i64 = r.try_get(0)?;
            let recent: Vec<i64> = r.try_get(1)?;
            let since = now_ms.saturating_sub(window_ms);
            let n = recent
                .iter()
                .filter(|&&t| u64::try_from(t).is_ok_and(|t| t >= since))
                .count() as u64;
            Ok((u64::try_from(total).unwrap_or(0), n))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_before_rate_and_the_window_rolls() {
        let l = Limits {
            rate_limit: Some(2),
            budget: Some(3),
            window_ms: 1000,
        };
        assert_eq!(verdict(0, &[], l, 5000), Verdict::Ok);
        assert_eq!(verdict(2, &[4500, 4600], l, 5000), Verdict::RateLimit);
        assert_eq!(verdict(2, &[3999, 4600], l, 5000), Verdict::Ok);
        assert_eq!(verdict(3, &[], l, 5000), Verdict::Budget);
        assert_eq!(verdict(3, &[4500, 4600], l, 5000), Verdict::Budget);
    }
}
