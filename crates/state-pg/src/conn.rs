//! The connection as the queries see it: every table and function is named `@.name` in
//! the SQL text and qualified with the configured schema here, so no query depends on
//! `search_path` (a connection pooler may drop the start-up options that set it).

use postgres::types::{ToSql, Type};
use postgres::{Client, Row, RowIter, Transaction};

fn qualify(schema: &str, sql: &str) -> String {
    sql.replace("@.", &format!("{schema}."))
}

/// A connection bound to a schema.
pub(crate) struct Conn<'a> {
    pub client: &'a mut Client,
    pub schema: &'a str,
}

/// A transaction bound to a schema.
pub(crate) struct Tx<'a> {
    tx: Transaction<'a>,
    schema: &'a str,
}

macro_rules! queries {
    ($field:ident) => {
        pub fn query_typed(
            &mut self,
            sql: &str,
            params: &[(&(dyn ToSql + Sync), Type)],
        ) -> Result<Vec<Row>, postgres::Error> {
            self.$field.query_typed(&qualify(self.schema, sql), params)
        }

        pub fn query_typed_one(
            &mut self,
            sql: &str,
            params: &[(&(dyn ToSql + Sync), Type)],
        ) -> Result<Row, postgres::Error> {
            self.$field
                .query_typed_one(&qualify(self.schema, sql), params)
        }

        pub fn query_typed_opt(
            &mut self,
            sql: &str,
            params: &[(&(dyn ToSql + Sync), Type)],
        ) -> Result<Option<Row>, postgres::Error> {
            self.$field
                .query_typed_opt(&qualify(self.schema, sql), params)
        }

        pub fn execute_typed(
            &mut self,
            sql: &str,
            params: &[(&(dyn ToSql + Sync), Type)],
        ) -> Result<u64, postgres::Error> {
            self.$field
                .execute_typed(&qualify(self.schema, sql), params)
        }
    };
}

impl Conn<'_> {
    queries!(client);

    /// `BEGIN` (one round trip).
    pub fn transaction(&mut self) -> Result<Tx<'_>, postgres::Error> {
        Ok(Tx {
            tx: self.client.transaction()?,
            schema: self.schema,
        })
    }

    /// A read-only transaction on one snapshot (REPEATABLE READ) without a statement time
    /// limit: verify reads anchors and whole chains as of one instant, however long.
    pub fn snapshot(&mut self) -> Result<Tx<'_>, postgres::Error> {
        let mut tx = self
            .client
            .build_transaction()
            .isolation_level(postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()?;
        tx.batch_execute("SET LOCAL statement_timeout = 0")?;
        Ok(Tx {
            tx,
            schema: self.schema,
        })
    }
}

impl Tx<'_> {
    queries!(tx);

    /// Rows streamed as they arrive (verify walks whole chains).
    pub fn query_typed_raw<'p>(
        &mut self,
        sql: &str,
        params: impl IntoIterator<Item = (&'p (dyn ToSql + Sync), Type)>,
    ) -> Result<RowIter<'_>, postgres::Error> {
        self.tx.query_typed_raw(&qualify(self.schema, sql), params)
    }

    /// `COMMIT`.
    pub fn commit(self) -> Result<(), postgres::Error> {
        self.tx.commit()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_the_marker_is_replaced() {
        assert_eq!(
            super::qualify(
                "t_x",
                "SELECT a.b FROM @.grants g JOIN @.pack_state p ON 'x@y'"
            ),
            "SELECT a.b FROM t_x.grants g JOIN t_x.pack_state p ON 'x@y'"
        );
    }
}
