//! `timestamptz` ⇄ [`jiff::Timestamp`], in PostgreSQL's binary form (microseconds since
//! 2000-01-01 UTC). Times are stored to the microsecond; finer digits are dropped.

use jiff::Timestamp;
use postgres::types::{FromSql, IsNull, ToSql, Type, to_sql_checked};
use std::error::Error;

/// Seconds from the Unix epoch to PostgreSQL's (2000-01-01T00:00:00Z).
const PG_EPOCH_S: i64 = 946_684_800;

/// A time as a `timestamptz` parameter or column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Ts(pub Timestamp);

impl Ts {
    /// `t` cut to whole microseconds, as the database keeps it.
    pub fn micros(t: Timestamp) -> Timestamp {
        Timestamp::from_microsecond(t.as_microsecond()).unwrap_or(t)
    }
}

impl ToSql for Ts {
    fn to_sql(
        &self,
        _ty: &Type,
        out: &mut postgres::types::private::BytesMut,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        let us = self.0.as_microsecond() - PG_EPOCH_S * 1_000_000;
        out.extend_from_slice(&us.to_be_bytes());
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::TIMESTAMPTZ
    }

    to_sql_checked!();
}

impl<'a> FromSql<'a> for Ts {
    fn from_sql(_ty: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn Error + Sync + Send>> {
        let bytes: [u8; 8] = raw.try_into().map_err(|_| "a timestamptz is 8 bytes")?;
        let us = i64::from_be_bytes(bytes)
            .checked_add(PG_EPOCH_S * 1_000_000)
            .ok_or("timestamptz out of range")?;
        Ok(Self(Timestamp::from_microsecond(us)?))
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::TIMESTAMPTZ
    }
}
