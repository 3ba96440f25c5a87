//! The versioned schema (RUNTIME §9, `hcp state migrate`).
//!
//! `schema_version(version, applied_at, description)` holds one row per applied
//! migration; the schema's version is the highest. [`migrate_to`] applies every missing
//! migration in one transaction, under an advisory lock, so two machines migrating at
//! once apply each migration once and a failure leaves the schema as it was. A client
//! ([`check`]) reads the version once per connection and refuses anything but
//! [`SCHEMA_VERSION`].

use crate::error::{PgError, PgResult};
use crate::sql;
use postgres::error::SqlState;

/// The schema version this code reads and writes.
pub const SCHEMA_VERSION: i32 = 6;

/// Every migration: its version, a one-line description, and its SQL.
pub(crate) const MIGRATIONS: [(i32, &str, &str); 6] = [
    (
        1,
        "tables: sessions, grants, pack_state, approvals, counters, audit_chain, audit_record, fleet_secret",
        sql::V1_TABLES,
    ),
    (
        2,
        "functions: hcp_append, hcp_admit (one statement per spending step), hcp_snapshot",
        sql::V2_FUNCTIONS,
    ),
    (
        3,
        "approvals of a kind: hcp_snapshot and hcp_admit match escalation or confirmation",
        sql::V3_APPROVAL_KINDS,
    ),
    (
        4,
        "functions: hcp_append locks the chain's head first (one statement fewer per record)",
        sql::V4_APPEND,
    ),
    (
        5,
        "keyed chains and the witness: hcp_append_keyed, hcp_admit_keyed take the machine's hash; audit_witness",
        sql::V5_KEYED,
    ),
    (
        6,
        "approvals name their session and project (RUNTIME §7; the principal digest binds them)",
        sql::V6_APPROVAL_TENANT,
    ),
];

/// What [`migrate_to`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrateReport {
    /// The schema the database had: `None` when it had none.
    pub from: Option<i32>,
    /// The version it has now.
    pub to: i32,
    /// The migrations applied, in order: version and description. Empty when it was
    /// current already.
    pub applied: Vec<(i32, String)>,
    /// Whether the PostgreSQL schema (namespace) itself was created.
    pub created_schema: bool,
}

impl MigrateReport {
    /// One line per fact, for `hcp state migrate`.
    pub fn lines(&self, schema: &str) -> Vec<String> {
        let mut out = Vec::new();
        if self.created_schema {
            out.push(format!("created schema `{schema}`"));
        }
        for (v, d) in &self.applied {
            out.push(format!("applied migration {v}: {d}"));
        }
        match self.from {
            Some(v) if self.applied.is_empty() => {
                out.push(format!("schema `{schema}` is current (version {v})"));
            }
            _ => out.push(format!(
                "schema `{schema}` is at version {} (was {})",
                self.to,
                self.from.map_or("absent".to_owned(), |v| v.to_string())
            )),
        }
        out
    }
}

/// The version of `schema` (a checked name, see `StateConfig::schema`) in the database
/// the client is connected to; `None` when the
/// schema or its `schema_version` table does not exist.
///
/// # Errors
/// [`PgError::Unavailable`].
pub fn version(client: &mut postgres::Client, schema: &str) -> PgResult<Option<i32>> {
    let sql = format!("SELECT max(version) FROM {schema}.schema_version");
    match client.query_typed_one(&sql, &[]) {
        Ok(row) => Ok(row.try_get::<_, Option<i32>>(0)?),
        Err(e)
            if e.code() == Some(&SqlState::UNDEFINED_TABLE)
                || e.code() == Some(&SqlState::INVALID_SCHEMA_NAME) =>
        {
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// Refuses a schema other than [`SCHEMA_VERSION`].
///
/// # Errors
/// [`PgError::Schema`] for an absent, older or newer schema; [`PgError::Unavailable`].
pub fn check(client: &mut postgres::Client, schema: &str) -> PgResult<()> {
    match version(client, schema)? {
        Some(SCHEMA_VERSION) => Ok(()),
        found => Err(PgError::Schema {
            found,
            expected: SCHEMA_VERSION,
        }),
    }
}

/// As [`check`], and reads the fleet's digest secret in the same round trip (`None`
/// when it is missing or not 32 bytes: [`crate::PgState::digest_secret`] then says so).
///
/// # Errors
/// As [`check`].
pub fn check_reading_secret(
    client: &mut postgres::Client,
    schema: &str,
) -> PgResult<Option<[u8; 32]>> {
    let sql = format!(
        "SELECT (SELECT max(version) FROM {schema}.schema_version),
                (SELECT value FROM {schema}.fleet_secret WHERE name = 'args_digest')"
    );
    let (found, secret) = match client.query_typed_one(&sql, &[]) {
        Ok(row) => (
            row.try_get::<_, Option<i32>>(0)?,
            row.try_get::<_, Option<Vec<u8>>>(1)?,
        ),
        Err(e)
            if e.code() == Some(&SqlState::UNDEFINED_TABLE)
                || e.code() == Some(&SqlState::INVALID_SCHEMA_NAME) =>
        {
            // A schema without `fleet_secret` is no schema of this hcp's: say which
            // version it has.
            return match version(client, schema)? {
                Some(SCHEMA_VERSION) => {
                    Err(PgError::damaged("the fleet's digest secret is missing"))
                }
                found => Err(PgError::Schema {
                    found,
                    expected: SCHEMA_VERSION,
                }),
            };
        }
        Err(e) => return Err(e.into()),
    };
    if found != Some(SCHEMA_VERSION) {
        return Err(PgError::Schema {
            found,
            expected: SCHEMA_VERSION,
        });
    }
    Ok(secret.and_then(|s| <[u8; 32]>::try_from(s).ok()))
}

/// Creates `schema` or upgrades it to `target` (at most [`SCHEMA_VERSION`]). A newer
/// schema than `target` is refused, never downgraded.
///
/// # Errors
/// [`PgError::Schema`] when the database is newer; [`PgError::Unavailable`] when a
/// statement fails (nothing is then changed).
pub fn migrate_to(
    client: &mut postgres::Client,
    schema: &str,
    target: i32,
) -> PgResult<MigrateReport> {
    let mut tx = client.transaction()?;
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended('hcp.migrate.' || $1::text, 0))",
        &[&schema],
    )?;
    let exists: bool = tx
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1::text)",
            &[&schema],
        )?
        .get(0);
    // `schema` is checked by `StateConfig::schema` (lowercase identifier), so it needs no
    // quoting.
    tx.batch_execute(&format!(
        "CREATE SCHEMA IF NOT EXISTS {schema};
         SET LOCAL search_path = {schema};
         CREATE TABLE IF NOT EXISTS schema_version (
             version     integer PRIMARY KEY,
             applied_at  timestamptz NOT NULL DEFAULT now(),
             description text NOT NULL
         );"
    ))?;
    let from: Option<i32> = tx
        .query_one("SELECT max(version) FROM schema_version", &[])?
        .get(0);
    if from.is_some_and(|v| v > target) {
        return Err(PgError::Schema {
            found: from,
            expected: target,
        });
    }
    let mut applied = Vec::new();
    for (v, description, sql) in MIGRATIONS {
        if v > target || from.is_some_and(|f| v <= f) {
            continue;
        }
        tx.batch_execute(sql)?;
        if v == 1 {
            let secret = crate::machine::random::<32>()?;
            tx.execute(
                "INSERT INTO fleet_secret (name, value) VALUES ('args_digest', $1)",
                &[&secret.as_slice()],
            )?;
        }
        tx.execute(
            "INSERT INTO schema_version (version, description) VALUES ($1, $2)",
            &[&v, &description],
        )?;
        applied.push((v, description.to_owned()));
    }
    tx.commit()?;
    Ok(MigrateReport {
        from,
        to: applied.last().map_or(from.unwrap_or(0), |(v, _)| *v),
        applied,
        created_schema: !exists,
    })
}

/// The privileges a fleet's machines need, for a PostgreSQL role `role` that does not own
/// the schema: everything `hcp` does, and no more on the audit — records can be appended
/// (`INSERT`), never changed or removed (no `UPDATE`, `DELETE` or `TRUNCATE` on
/// `audit_record`), and checkpoints can be witnessed (`INSERT` on `audit_witness`), never
/// rewritten. Run them as the schema's owner after [`migrate_to`]. `role` must match
/// `^[a-z_][a-z0-9_]{0,62}$` (it is written into the SQL unquoted).
///
/// # Errors
/// [`PgError::Config`] for a role name outside that pattern.
pub fn grant_statements(schema: &str, role: &str) -> PgResult<Vec<String>> {
    let ok = role.len() <= 63
        && role
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && role
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !ok {
        return Err(PgError::Config {
            reason: format!("role `{role}` must match `^[a-z_][a-z0-9_]{{0,62}}$`"),
        });
    }
    let s = schema;
    Ok(vec![
        format!("GRANT USAGE ON SCHEMA {s} TO {role}"),
        format!("GRANT SELECT ON {s}.schema_version, {s}.fleet_secret TO {role}"),
        format!(
            "GRANT SELECT, INSERT, UPDATE, DELETE ON {s}.sessions, {s}.grants, {s}.pack_state, \
             {s}.approvals, {s}.counters TO {role}"
        ),
        format!("GRANT SELECT, INSERT, UPDATE ON {s}.audit_chain TO {role}"),
        format!("GRANT SELECT, INSERT ON {s}.audit_record TO {role}"),
        format!("GRANT SELECT, INSERT ON {s}.audit_witness TO {role}"),
        format!(
            "GRANT EXECUTE ON FUNCTION {s}.hcp_append, {s}.hcp_admit, {s}.hcp_append_keyed, \
             {s}.hcp_admit_keyed, {s}.hcp_head TO {role}"
        ),
    ])
}
