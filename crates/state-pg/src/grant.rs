//! Grants and the fleet-wide rug-pull guard (RUNTIME §3, §4, §9).
//!
//! A grant is a row `(principal, pack | '*', capability, granted_at)`. `pack_state`
//! remembers, per pack id, the digest of the pack's files the fleet last saw and when it
//! last changed (`content_changed_at`): a pack installed with other content on *any*
//! machine suspends, on every machine, the non-owner grants made before that time, until
//! the owner grants again (which renews `granted_at`). The decision itself is
//! `hcp_store::grant::status`, shared with the file store.

use crate::PgState;
use crate::error::{PgError, PgResult};
use crate::time::Ts;
use hcp_model::{Capability, PackId};
use hcp_store::grant::{Grant, GrantStatus, HeldCapability, PackScope, status};
use hcp_store::session::{PrincipalId, Timestamp};
use postgres::types::Type;
use std::str::FromStr;

fn damaged(what: &str, e: impl std::fmt::Display) -> PgError {
    PgError::damaged(format!("grant row: {what}: {e}"))
}

fn grant_from_row(row: &postgres::Row) -> PgResult<Grant> {
    let principal: String = row.try_get(0)?;
    let pack: String = row.try_get(1)?;
    let capability: String = row.try_get(2)?;
    Ok(Grant {
        principal: PrincipalId::parse(&principal).map_err(|e| damaged("principal", e))?,
        pack: PackScope::parse(&pack).map_err(|e| damaged("pack", e))?,
        capability: Capability::from_str(&capability).map_err(|e| damaged("capability", e))?,
        granted_at: row.try_get::<_, Ts>(3)?.0,
    })
}

fn cap_names(caps: &[Capability]) -> Vec<&'static str> {
    caps.iter().map(|c| c.as_str()).collect()
}

fn sorted(mut v: Vec<Grant>) -> Vec<Grant> {
    v.sort_by(|a, b| {
        (&a.principal, &a.pack, a.capability).cmp(&(&b.principal, &b.pack, b.capability))
    });
    v
}

impl PgState {
    /// What `principal` holds on `pack`: its own grants and the `*` ones, one entry per
    /// grant. Feed it to `hcp_store::grant::status` with [`PgState::pack_changed_at`].
    ///
    /// # Errors
    /// [`PgError`].
    pub fn grants_held(
        &self,
        principal: &PrincipalId,
        pack: &PackId,
    ) -> PgResult<Vec<HeldCapability>> {
        self.with(|c| {
            let rows = c.query_typed(
                "SELECT principal, pack, capability, granted_at FROM @.grants
                 WHERE principal = $1 AND pack IN ($2, '*')
                 ORDER BY capability, pack",
                &[
                    (&principal.as_str(), Type::TEXT),
                    (&pack.as_str(), Type::TEXT),
                ],
            )?;
            rows.iter()
                .map(|r| {
                    let g = grant_from_row(r)?;
                    Ok(HeldCapability {
                        capability: g.capability,
                        scope: g.pack,
                        granted_at: g.granted_at,
                    })
                })
                .collect()
        })
    }

    /// The grant decision for a non-owner `principal` (one round trip: the grants and the
    /// pack's last content change together).
    ///
    /// # Errors
    /// [`PgError`].
    pub fn grant_status(
        &self,
        principal: &PrincipalId,
        pack: &PackId,
        capability: Capability,
    ) -> PgResult<GrantStatus> {
        self.with(|c| {
            let row = c.query_typed_one(
                "SELECT (SELECT max(granted_at) FROM @.grants
                         WHERE principal = $1 AND pack IN ($2, '*') AND capability = $3),
                        (SELECT content_changed_at FROM @.pack_state WHERE pack_id = $2)",
                &[
                    (&principal.as_str(), Type::TEXT),
                    (&pack.as_str(), Type::TEXT),
                    (&capability.as_str(), Type::TEXT),
                ],
            )?;
            let granted: Option<Ts> = row.try_get(0)?;
            let changed: Option<Ts> = row.try_get(1)?;
            let held: Vec<HeldCapability> = granted
                .map(|g| HeldCapability {
                    capability,
                    scope: PackScope::Pack(pack.clone()),
                    granted_at: g.0,
                })
                .into_iter()
                .collect();
            Ok(status(&held, capability, changed.map(|t| t.0)))
        })
    }

    /// Grants `capabilities` on `pack` at `now`; one already held is renewed (which lifts
    /// a suspension). Returns the grants as written, by capability.
    ///
    /// # Errors
    /// [`PgError`].
    pub fn grant(
        &self,
        principal: &PrincipalId,
        pack: &PackScope,
        capabilities: &[Capability],
        now: Timestamp,
    ) -> PgResult<Vec<Grant>> {
        let caps = cap_names(capabilities);
        let pack = pack.to_string();
        self.with(|c| {
            let rows = c.query_typed(
                "INSERT INTO @.grants (principal, pack, capability, granted_at)
                 SELECT $1, $2, cap, $4 FROM (SELECT DISTINCT unnest($3::text[]) AS cap) caps
                 ON CONFLICT (principal, pack, capability) DO UPDATE SET granted_at = EXCLUDED.granted_at
                 RETURNING principal, pack, capability, granted_at",
                &[
                    (&principal.as_str(), Type::TEXT),
                    (&pack, Type::TEXT),
                    (&caps, Type::TEXT_ARRAY),
                    (&Ts(Ts::micros(now)), Type::TIMESTAMPTZ),
                ],
            )?;
            Ok(sorted(rows.iter().map(grant_from_row).collect::<PgResult<_>>()?))
        })
    }

    /// Takes back `capabilities` (all when empty) from `principal` on exactly `pack`.
    /// Returns what was removed. In force on the next admit everywhere: an admit in
    /// flight holds the grant's row and this waits for it.
    ///
    /// # Errors
    /// [`PgError`].
    pub fn revoke(
        &self,
        principal: &PrincipalId,
        pack: &PackScope,
        capabilities: &[Capability],
    ) -> PgResult<Vec<Grant>> {
        let caps = cap_names(capabilities);
        let pack = pack.to_string();
        self.with(|c| {
            let rows = c.query_typed(
                "DELETE FROM @.grants
                 WHERE principal = $1 AND pack = $2
                   AND (cardinality($3::text[]) = 0 OR capability = ANY ($3::text[]))
                 RETURNING principal, pack, capability, granted_at",
                &[
                    (&principal.as_str(), Type::TEXT),
                    (&pack, Type::TEXT),
                    (&caps, Type::TEXT_ARRAY),
                ],
            )?;
            Ok(sorted(
                rows.iter().map(grant_from_row).collect::<PgResult<_>>()?,
            ))
        })
    }

    /// Every grant of the fleet, by principal, pack, capability.
    ///
    /// # Errors
    /// [`PgError`].
    pub fn grants_list(&self) -> PgResult<Vec<Grant>> {
        self.with(|c| {
            let rows = c.query_typed(
                "SELECT principal, pack, capability, granted_at FROM @.grants",
                &[],
            )?;
            Ok(sorted(
                rows.iter().map(grant_from_row).collect::<PgResult<_>>()?,
            ))
        })
    }

    /// Removes every principal's grants on pack `id` (not `*`), returning how many.
    /// In a fleet, uninstalling on one machine should rather call
    /// [`PgState::pack_content_changed`], since other machines may still have the pack.
    ///
    /// # Errors
    /// [`PgError`].
    pub fn grants_remove_pack(&self, id: &PackId) -> PgResult<u64> {
        self.with(|c| {
            Ok(c.execute_typed(
                "DELETE FROM @.grants WHERE pack = $1",
                &[(&id.as_str(), Type::TEXT)],
            )?)
        })
    }

    /// The pack's last content change the fleet knows of, if any.
    ///
    /// # Errors
    /// [`PgError`].
    pub fn pack_changed_at(&self, pack: &PackId) -> PgResult<Option<Timestamp>> {
        self.with(|c| {
            let row = c.query_typed_opt(
                "SELECT content_changed_at FROM @.pack_state WHERE pack_id = $1",
                &[(&pack.as_str(), Type::TEXT)],
            )?;
            Ok(match row {
                Some(r) => r.try_get::<_, Option<Ts>>(0)?.map(|t| t.0),
                None => None,
            })
        })
    }

    /// Records that `pack`'s content changed at `at` (a reinstall with other files):
    /// non-owner grants made before it are suspended fleet-wide. A later time wins; an
    /// earlier one changes nothing. Returns the pack's `content_changed_at`.
    ///
    /// # Errors
    /// [`PgError`].
    pub fn pack_content_changed(&self, pack: &PackId, at: Timestamp) -> PgResult<Timestamp> {
        self.pack_record(pack, None, at)?
            .ok_or_else(|| PgError::damaged("pack_state row without a change time"))
    }

    /// Records that `pack` with files digest `files_digest` was installed at `at` on this
    /// machine. When the fleet knew the pack with another digest, this is a content
    /// change (see [`PgState::pack_content_changed`]); the first install anywhere is not.
    /// Returns the pack's `content_changed_at` after the call.
    ///
    /// # Errors
    /// [`PgError`].
    pub fn pack_installed(
        &self,
        pack: &PackId,
        files_digest: &str,
        at: Timestamp,
    ) -> PgResult<Option<Timestamp>> {
        self.pack_record(pack, Some(files_digest), at)
    }

    fn pack_record(
        &self,
        pack: &PackId,
        digest: Option<&str>,
        at: Timestamp,
    ) -> PgResult<Option<Timestamp>> {
        self.with(|c| {
            let mut tx = c.transaction()?;
            // The grants it may suspend are locked first, so an admit in flight (which
            // holds them shared) commits before the change does, and later ones see it.
            tx.query_typed(
                "SELECT 1 FROM @.grants WHERE pack IN ($1, '*') FOR UPDATE",
                &[(&pack.as_str(), Type::TEXT)],
            )?;
            let row = tx.query_typed_one(
                "INSERT INTO @.pack_state AS p (pack_id, files_digest, content_changed_at)
                 VALUES ($1, $2, CASE WHEN $2::text IS NULL THEN $3::timestamptz END)
                 ON CONFLICT (pack_id) DO UPDATE SET
                     files_digest = coalesce(EXCLUDED.files_digest, p.files_digest),
                     content_changed_at = CASE
                         WHEN EXCLUDED.files_digest IS NOT NULL
                              AND p.files_digest IS NOT DISTINCT FROM EXCLUDED.files_digest
                             THEN p.content_changed_at
                         WHEN EXCLUDED.files_digest IS NOT NULL AND p.files_digest IS NULL
                              AND p.content_changed_at IS NULL
                             THEN NULL
                         ELSE greatest(p.content_changed_at, $3::timestamptz) END
                 RETURNING content_changed_at",
                &[
                    (&pack.as_str(), Type::TEXT),
                    (&digest, Type::TEXT),
                    (&Ts(Ts::micros(at)), Type::TIMESTAMPTZ),
                ],
            )?;
            let changed = row.try_get::<_, Option<Ts>>(0)?.map(|t| t.0);
            tx.commit()?;
            Ok(changed)
        })
    }
}
