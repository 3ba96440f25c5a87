//! Grants: which capabilities a principal holds on a pack (RUNTIME §4; seeds §4.6, §9.4).
//!
//! All grants live in one file, `state/grants.json`, replaced whole under the store lock
//! ([`grant`], [`revoke`]) and read without a lock ([`Grants::load`]). A grant names a
//! principal, a pack (or `*`, every pack), one [`Capability`] and when it was made. The
//! owner holds every capability and never appears here.
//!
//! The rug-pull guard (RUNTIME §3) is decided by [`status`]: a grant made before the
//! pack's `content_changed_at` (set by a reinstall that changed the pack's files) is
//! suspended until the owner grants again, which renews `granted_at`.

use crate::atomic::write_atomic;
use crate::error::{StoreError, StoreResult};
use crate::home::{Home, StoreDir};
use crate::lock::StoreLock;
use crate::session::{PrincipalId, Timestamp, serde_ts};
use hcp_model::{Capability, PackId};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::PathBuf;

/// The version of `state/grants.json` this code reads and writes.
pub const GRANTS_VERSION: u32 = 1;

/// The packs a grant covers: one pack, or every pack (`*`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum PackScope {
    /// `*`: every pack, installed now or later.
    All,
    /// One pack id.
    Pack(PackId),
}

impl PackScope {
    /// Parses `*` or a pack id (RUNTIME §1.1).
    ///
    /// # Errors
    /// The pack id's lowercase message.
    pub fn parse(text: &str) -> Result<Self, String> {
        if text == "*" {
            Ok(Self::All)
        } else {
            PackId::parse(text).map(Self::Pack)
        }
    }

    /// Whether this scope covers `pack`.
    pub fn covers(&self, pack: &PackId) -> bool {
        match self {
            Self::All => true,
            Self::Pack(p) => p == pack,
        }
    }
}

impl TryFrom<String> for PackScope {
    type Error = String;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(&value)
    }
}

impl From<PackScope> for String {
    fn from(value: PackScope) -> Self {
        value.to_string()
    }
}

impl fmt::Display for PackScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::All => f.write_str("*"),
            Self::Pack(p) => f.write_str(p.as_str()),
        }
    }
}

/// One grant: `principal` holds `capability` on `pack` since `granted_at`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grant {
    /// Who.
    pub principal: PrincipalId,
    /// On which packs.
    pub pack: PackScope,
    /// What.
    pub capability: Capability,
    /// When it was made or last renewed.
    #[serde(with = "serde_ts")]
    pub granted_at: Timestamp,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct GrantsFile {
    version: u32,
    grants: Vec<Grant>,
}

/// A capability a principal holds on a given pack, from one grant (directly or via `*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldCapability {
    /// The capability.
    pub capability: Capability,
    /// The grant's scope: the pack itself or `*`.
    pub scope: PackScope,
    /// When that grant was made or last renewed.
    pub granted_at: Timestamp,
}

pub use hcp_gate::grant::GrantStatus;

/// The rug-pull guard (RUNTIME §3) over what [`Grants::held`] returned for a non-owner
/// principal: the one grant check of `hcp_gate::grant::status`, for callers holding
/// [`HeldCapability`] values. Pure.
pub fn status(
    held: &[HeldCapability],
    capability: Capability,
    content_changed_at: Option<Timestamp>,
) -> GrantStatus {
    hcp_gate::grant::status(
        held.iter().map(|h| (h.capability, h.granted_at)),
        capability,
        content_changed_at,
    )
}

/// All grants, as loaded from `state/grants.json`, in a stable order (principal, pack,
/// capability).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants {
    grants: Vec<Grant>,
}

/// The path of the grants file.
pub fn grants_path(home: &Home) -> PathBuf {
    home.dir(StoreDir::State).join("grants.json")
}

impl Grants {
    /// Reads `state/grants.json` (one file, no lock; an absent file is no grant).
    ///
    /// # Errors
    /// [`StoreError::Io`] when it cannot be read; [`StoreError::Damaged`] when it does not
    /// parse, has an unknown field or version, or holds a bad principal, pack or
    /// capability.
    pub fn load(home: &Home) -> StoreResult<Self> {
        let path = grants_path(home);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => return Err(StoreError::io("read", &path, e)),
        };
        let file: GrantsFile = serde_json::from_slice(&bytes).map_err(|e| StoreError::Damaged {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        if file.version != GRANTS_VERSION {
            return Err(StoreError::Damaged {
                path,
                reason: format!(
                    "version {} is not the supported {GRANTS_VERSION}",
                    file.version
                ),
            });
        }
        let mut grants = Self {
            grants: file.grants,
        };
        grants.sort();
        Ok(grants)
    }

    fn sort(&mut self) {
        self.grants.sort_by(|a, b| {
            (&a.principal, &a.pack, a.capability).cmp(&(&b.principal, &b.pack, b.capability))
        });
        self.grants.dedup_by(|b, a| {
            a.principal == b.principal && a.pack == b.pack && a.capability == b.capability
        });
    }

    /// Every grant.
    pub fn all(&self) -> &[Grant] {
        &self.grants
    }

    /// Whether there are no grants.
    pub fn is_empty(&self) -> bool {
        self.grants.is_empty()
    }

    /// What `principal` holds on `pack`: the union of the pack's own grants and the `*`
    /// grants, one entry per grant (so a capability can appear twice, with its two
    /// times). Feed the answer to [`status`].
    pub fn held(&self, principal: &PrincipalId, pack: &PackId) -> Vec<HeldCapability> {
        self.grants
            .iter()
            .filter(|g| &g.principal == principal && g.pack.covers(pack))
            .map(|g| HeldCapability {
                capability: g.capability,
                scope: g.pack.clone(),
                granted_at: g.granted_at,
            })
            .collect()
    }

    fn save(&self, home: &Home) -> StoreResult<()> {
        let path = grants_path(home);
        let file = GrantsFile {
            version: GRANTS_VERSION,
            grants: self.grants.clone(),
        };
        let mut bytes = serde_json::to_vec_pretty(&file).map_err(|e| StoreError::Damaged {
            path: path.clone(),
            reason: format!("cannot encode the grants: {e}"),
        })?;
        bytes.push(b'\n');
        write_atomic(&path, &bytes)
    }
}

/// Grants `capabilities` to `principal` on `pack` at `now` (RUNTIME §4), under the store
/// lock. A capability already granted is renewed: its `granted_at` becomes `now`, which
/// lifts a rug-pull suspension. Returns the grants as written, in order.
///
/// # Errors
/// [`StoreError`] when the file cannot be read, is damaged, or cannot be written.
pub fn grant(
    home: &Home,
    principal: &PrincipalId,
    pack: &PackScope,
    capabilities: &[Capability],
    now: Timestamp,
) -> StoreResult<Vec<Grant>> {
    let _lock = StoreLock::acquire(home)?;
    let mut grants = Grants::load(home)?;
    let mut written = Vec::new();
    for &capability in capabilities {
        let g = Grant {
            principal: principal.clone(),
            pack: pack.clone(),
            capability,
            granted_at: now,
        };
        grants.grants.retain(|o| {
            !(o.principal == g.principal && o.pack == g.pack && o.capability == g.capability)
        });
        grants.grants.push(g.clone());
        if !written.contains(&g) {
            written.push(g);
        }
    }
    grants.sort();
    grants.save(home)?;
    written.sort_by_key(|g| g.capability);
    Ok(written)
}

/// Removes every principal's grants on pack `id` (not the `*` grants), under the store
/// lock the caller holds: `hcp uninstall` (RUNTIME §3), so a different pack installed
/// later under the same id starts with no grants. Returns how many were removed.
///
/// # Errors
/// [`StoreError`] when the grants cannot be read or written.
pub fn remove_pack(home: &Home, _lock: &StoreLock, id: &PackId) -> StoreResult<usize> {
    let mut grants = Grants::load(home)?;
    let before = grants.grants.len();
    grants
        .grants
        .retain(|g| g.pack != PackScope::Pack(id.clone()));
    let removed = before - grants.grants.len();
    if removed > 0 {
        grants.save(home)?;
    }
    Ok(removed)
}

/// Takes back `capabilities` (all of them when empty) from `principal` on exactly `pack`
/// (revoking on a pack leaves a `*` grant alone, and the reverse), under the store lock.
/// Returns the grants removed; revoking what was not granted removes nothing.
///
/// # Errors
/// [`StoreError`] when the file cannot be read, is damaged, or cannot be written.
pub fn revoke(
    home: &Home,
    principal: &PrincipalId,
    pack: &PackScope,
    capabilities: &[Capability],
) -> StoreResult<Vec<Grant>> {
    let _lock = StoreLock::acquire(home)?;
    let mut grants = Grants::load(home)?;
    let (removed, kept): (Vec<Grant>, Vec<Grant>) = grants.grants.into_iter().partition(|g| {
        &g.principal == principal
            && &g.pack == pack
            && (capabilities.is_empty() || capabilities.contains(&g.capability))
    });
    grants.grants = kept;
    if !removed.is_empty() {
        grants.save(home)?;
    }
    Ok(removed)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::result_large_err)]
mod tests {
    use super::*;
    use Capability::*;
    use pretty_assertions::assert_eq;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }
    fn p(s: &str) -> PrincipalId {
        PrincipalId::parse(s).unwrap()
    }
    fn pack(s: &str) -> PackId {
        PackId::parse(s).unwrap()
    }
    fn scope(s: &str) -> PackScope {
        PackScope::parse(s).unwrap()
    }
    fn home() -> (tempfile::TempDir, Home) {
        let d = tempfile::tempdir().unwrap();
        let h = Home::open(d.path().join("hcp")).unwrap();
        (d, h)
    }

    #[test]
    fn scope_parses_star_or_a_pack_id() {
        assert_eq!(scope("*"), PackScope::All);
        assert_eq!(scope("mail"), PackScope::Pack(pack("mail")));
        assert!(PackScope::parse("Mail").is_err());
        assert!(PackScope::parse("**").is_err());
        assert!(PackScope::parse("").is_err());
    }

    #[test]
    fn held_is_the_union_of_the_pack_and_star() {
        let (_d, h) = home();
        let t1 = t("2026-01-01T00:00:00Z");
        let t2 = t("2026-01-02T00:00:00Z");
        grant(&h, &p("alice"), &scope("mail"), &[VerbExecRead], t1).unwrap();
        grant(
            &h,
            &p("alice"),
            &scope("*"),
            &[VerbExecRead, SenseEnable],
            t2,
        )
        .unwrap();
        grant(&h, &p("alice"), &scope("notes"), &[VerbExecWrite], t1).unwrap();
        grant(&h, &p("bob"), &scope("mail"), &[VerbExecWrite], t1).unwrap();
        let g = Grants::load(&h).unwrap();
        assert_eq!(
            g.held(&p("alice"), &pack("mail")),
            vec![
                HeldCapability {
                    capability: VerbExecRead,
                    scope: PackScope::All,
                    granted_at: t2
                },
                HeldCapability {
                    capability: SenseEnable,
                    scope: PackScope::All,
                    granted_at: t2
                },
                HeldCapability {
                    capability: VerbExecRead,
                    scope: scope("mail"),
                    granted_at: t1
                },
            ]
        );
        assert_eq!(g.held(&p("carol"), &pack("mail")), vec![]);
        assert_eq!(
            status(&g.held(&p("bob"), &pack("notes")), VerbExecWrite, None),
            GrantStatus::Missing
        );
    }

    #[test]
    fn regrant_renews_and_revoke_is_exact() {
        let (_d, h) = home();
        let t1 = t("2026-01-01T00:00:00Z");
        let t2 = t("2026-01-02T00:00:00Z");
        grant(
            &h,
            &p("alice"),
            &scope("mail"),
            &[VerbExecRead, VerbExecWrite],
            t1,
        )
        .unwrap();
        grant(&h, &p("alice"), &scope("*"), &[VerbExecRead], t1).unwrap();
        let renewed = grant(&h, &p("alice"), &scope("mail"), &[VerbExecRead], t2).unwrap();
        assert_eq!(renewed[0].granted_at, t2);
        assert_eq!(Grants::load(&h).unwrap().all().len(), 3);

        let removed = revoke(&h, &p("alice"), &scope("mail"), &[VerbExecWrite]).unwrap();
        assert_eq!(removed.len(), 1);
        assert_eq!(
            revoke(&h, &p("alice"), &scope("mail"), &[VerbExecWrite]).unwrap(),
            vec![]
        );
        // Revoking every capability on `mail` leaves the `*` grant.
        assert_eq!(
            revoke(&h, &p("alice"), &scope("mail"), &[]).unwrap().len(),
            1
        );
        let left = Grants::load(&h).unwrap();
        assert_eq!(
            left.all(),
            &[Grant {
                principal: p("alice"),
                pack: PackScope::All,
                capability: VerbExecRead,
                granted_at: t1
            }]
        );
    }

    #[test]
    fn rug_pull_guard_suspends_grants_made_before_the_content_changed() {
        let granted = t("2026-03-01T10:00:00Z");
        let changed = t("2026-03-02T09:00:00Z");
        let renewed = t("2026-03-02T09:30:00Z");
        let held = |at: Timestamp, scope: PackScope| HeldCapability {
            capability: VerbExecWrite,
            scope,
            granted_at: at,
        };
        // Never changed after install: held.
        assert_eq!(
            status(&[held(granted, scope("mail"))], VerbExecWrite, None),
            GrantStatus::Held {
                granted_at: granted
            }
        );
        // Changed after the grant: suspended, naming both times.
        assert_eq!(
            status(
                &[held(granted, scope("mail"))],
                VerbExecWrite,
                Some(changed)
            ),
            GrantStatus::Suspended {
                granted_at: granted,
                content_changed_at: changed
            }
        );
        // A `*` grant is suspended for the changed pack too.
        assert_eq!(
            status(
                &[held(granted, PackScope::All)],
                VerbExecWrite,
                Some(changed)
            ),
            GrantStatus::Suspended {
                granted_at: granted,
                content_changed_at: changed
            }
        );
        // Granted again after the change (on the pack or on `*`): the newest decides.
        for s in [scope("mail"), PackScope::All] {
            assert_eq!(
                status(
                    &[held(granted, scope("mail")), held(renewed, s)],
                    VerbExecWrite,
                    Some(changed)
                ),
                GrantStatus::Held {
                    granted_at: renewed
                }
            );
        }
        // A grant made at the very instant of the change counts.
        assert_eq!(
            status(
                &[held(changed, scope("mail"))],
                VerbExecWrite,
                Some(changed)
            ),
            GrantStatus::Held {
                granted_at: changed
            }
        );
        // Other capabilities do not stand in.
        assert_eq!(
            status(&[held(renewed, scope("mail"))], VerbExecRead, Some(changed)),
            GrantStatus::Missing
        );
    }

    #[test]
    fn the_file_is_versioned_strict_and_damage_is_reported() {
        let (_d, h) = home();
        grant(
            &h,
            &p("alice"),
            &scope("mail"),
            &[PackConnect],
            t("2026-01-01T00:00:00Z"),
        )
        .unwrap();
        let text = std::fs::read_to_string(grants_path(&h)).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"version": 1, "grants": [{
                "principal": "alice", "pack": "mail", "capability": "pack.connect",
                "granted_at": "2026-01-01T00:00:00.000Z"
            }]})
        );
        for bad in [
            r#"{"version": 2, "grants": []}"#,
            r#"{"version": 1, "grants": [], "extra": 1}"#,
            r#"{"version": 1, "grants": [{"principal": "owner", "pack": "mail", "capability": "pack.connect", "granted_at": "2026-01-01T00:00:00Z"}]}"#,
            r#"{"version": 1, "grants": [{"principal": "a", "pack": "mail", "capability": "root", "granted_at": "2026-01-01T00:00:00Z"}]}"#,
            "{",
        ] {
            std::fs::write(grants_path(&h), bad).unwrap();
            assert_eq!(
                Grants::load(&h).unwrap_err().code(),
                "store_damaged",
                "{bad}"
            );
        }
    }
}
