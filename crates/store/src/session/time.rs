//! The store's one time format, and the time to live of a session.

use super::SessionError;
use jiff::{SignedDuration, Timestamp};

/// The time to live of a session when `--ttl` is not given: 8 hours.
pub const DEFAULT_TTL: SignedDuration = SignedDuration::from_hours(8);

/// The shortest time to live: 1 second.
pub const MIN_TTL: SignedDuration = SignedDuration::from_secs(1);

/// The longest time to live: 365 days.
pub const MAX_TTL: SignedDuration = SignedDuration::from_hours(365 * 24);

/// Formats a time as RFC 3339 UTC with milliseconds: `2026-11-29T20:34:17.123Z`.
pub fn format_ts(t: Timestamp) -> String {
    format!("{t:.3}")
}

/// Serde for [`Timestamp`] as [`format_ts`] text (the store's one time format).
pub(crate) mod serde_ts {
    use super::{Timestamp, format_ts};
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub fn serialize<S: Serializer>(t: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format_ts(*t))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Timestamp, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(D::Error::custom)
    }

    /// The same for `Option<Timestamp>` (`null` when absent).
    pub mod option {
        use super::*;

        pub fn serialize<S: Serializer>(t: &Option<Timestamp>, s: S) -> Result<S::Ok, S::Error> {
            match t {
                Some(t) => s.serialize_str(&format_ts(*t)),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Timestamp>, D::Error> {
            Option::<String>::deserialize(d)?
                .map(|s| s.parse().map_err(D::Error::custom))
                .transpose()
        }
    }
}

/// Parses a time to live: a whole number and one unit, `s`, `m`, `h` or `d` (`30s`,
/// `15m`, `8h`, `7d`), from [`MIN_TTL`] to [`MAX_TTL`].
///
/// # Errors
/// [`SessionError::BadTtl`].
pub fn parse_ttl(text: &str) -> Result<SignedDuration, SessionError> {
    let bad = |reason: &str| SessionError::BadTtl {
        value: text.to_owned(),
        reason: reason.to_owned(),
    };
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| bad("it needs a unit: `s`, `m`, `h` or `d` (e.g. `8h`)"))?;
    let (digits, unit) = text.split_at(split);
    if digits.is_empty() {
        return Err(bad("it must start with a whole number (e.g. `8h`)"));
    }
    let per_unit: i64 = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(bad("the unit must be `s`, `m`, `h` or `d`")),
    };
    let ttl = digits
        .parse::<i64>()
        .ok()
        .and_then(|n| n.checked_mul(per_unit))
        .map(SignedDuration::from_secs)
        .filter(|d| *d <= MAX_TTL)
        .ok_or_else(|| bad("it is longer than 365 days"))?;
    if ttl < MIN_TTL {
        return Err(bad("it must be at least 1 second"));
    }
    Ok(ttl)
}
