//! Grants: which capabilities a principal holds on a pack (RUNTIME §4; seeds §4.6, §9.4).
//!
//! Grants are kept one file per principal, `state/grants/<principal>.json` (RUNTIME §4
//! "Fault isolation"), each replaced whole under the store lock ([`grant`], [`revoke`])
//! and read without a lock ([`Grants::load_principal`]). A grant names a principal, a
//! pack (or `*`, every pack), one [`Capability`] and when it was made. The owner holds
//! every capability and never appears here.
//!
//! Each file carries the keyed MAC of its content and name ([`crate::stamp`]): a file
//! edited by hand, or copied from another principal's, is damaged and grants nothing.
//!
//! Each install record counts, per principal, the grants that cover its pack
//! ([`crate::pack::InstallRecord::grants`]). A call reads its principal's file and its
//! pack's count: a file that holds fewer (a missing file beside a non-zero count, an older
//! copy put back) is damaged, refusing that principal alone (`store_damaged`), never read
//! as "no grants". The count never runs ahead of the file, whatever instant a writer is
//! killed at: a grant writes the file before the counts, a revoke the counts before the
//! file. A damaged file refuses its principal alone; [`revoke_all`] (`hcp revoke
//! PRINCIPAL --all`) moves it aside and zeroes its counts.
//!
//! A store of an earlier hcp keeps every grant in one file, `state/grants.json`:
//! [`split_legacy`] splits it at the store's first use by this version, under the store
//! lock, recorded as a `migrate` act. A legacy file that does not parse stays where it is
//! and refuses every principal but the owner until it is repaired.
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
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// The version of a grant file (`state/grants/<principal>.json`, and the legacy
/// `state/grants.json`) this code reads and writes.
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

/// Grants of one principal (or of several), as loaded from their grant files, in a stable
/// order (principal, pack, capability).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants {
    grants: Vec<Grant>,
}

/// The directory of the grant files, `state/grants/`.
pub fn grants_dir(home: &Home) -> PathBuf {
    home.dir(StoreDir::State).join("grants")
}

/// The grant file of `principal`, `state/grants/<principal>.json` (a principal id is a
/// safe file name: `^[A-Za-z0-9][A-Za-z0-9._@-]*$`).
pub fn grant_file(home: &Home, principal: &PrincipalId) -> PathBuf {
    grants_dir(home).join(format!("{principal}.json"))
}

/// The one grants file of an earlier hcp, `state/grants.json` ([`split_legacy`]).
pub fn legacy_path(home: &Home) -> PathBuf {
    home.dir(StoreDir::State).join("grants.json")
}

/// The principal a grant file is named for; `None` for a name that is not
/// `<principal>.json`.
fn principal_of(path: &Path) -> Option<PrincipalId> {
    let name = path.file_name()?.to_str()?.strip_suffix(".json")?;
    PrincipalId::parse(name).ok()
}

/// Parses the bytes of a grants file at `path`; `principal`, when given, is the one every
/// grant must name. A principal's file carries its MAC ([`crate::stamp`]), checked before anything of it is
/// believed; the legacy file of an earlier hcp has none.
fn parse_file(
    home: &Home,
    bytes: &[u8],
    path: &Path,
    principal: Option<&PrincipalId>,
) -> StoreResult<Grants> {
    let damaged = |reason: String| StoreError::Damaged {
        path: path.to_path_buf(),
        reason,
    };
    let file: GrantsFile = match principal {
        Some(_) => crate::stamp::open(home, path, bytes)?,
        None => serde_json::from_slice(bytes).map_err(|e| damaged(e.to_string()))?,
    };
    if file.version != GRANTS_VERSION {
        return Err(damaged(format!(
            "version {} is not the supported {GRANTS_VERSION}",
            file.version
        )));
    }
    if let Some(p) = principal
        && let Some(other) = file.grants.iter().find(|g| &g.principal != p)
    {
        return Err(damaged(format!(
            "it holds a grant of `{}`, but it is the grant file of `{p}`",
            other.principal
        )));
    }
    let mut grants = Grants {
        grants: file.grants,
    };
    grants.sort();
    Ok(grants)
}

/// Reads one file; `Ok(None)` when it does not exist.
fn read_file(
    home: &Home,
    path: &Path,
    principal: Option<&PrincipalId>,
) -> StoreResult<Option<Grants>> {
    match crate::atomic::read_record(path)? {
        Some(b) => parse_file(home, &b, path, principal).map(Some),
        None => Ok(None),
    }
}

/// The error of a legacy file still in place: it refuses every principal but the owner.
fn legacy_in_place(home: &Home) -> StoreResult<()> {
    let path = legacy_path(home);
    match std::fs::symlink_metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StoreError::io("read", &path, e)),
        Ok(_) => {
            let why = match read_file(home, &path, None) {
                Ok(_) => "the next hcp command splits it".to_owned(),
                Err(StoreError::Damaged { reason, .. }) => reason,
                Err(e) => e.to_string(),
            };
            Err(StoreError::Damaged {
                path,
                reason: format!(
                    "the grants of an earlier hcp are not split into one file per principal yet ({why})"
                ),
            })
        }
    }
}

/// What one grant file holds, or why it is damaged, for every grant file of the store.
type Listing = Vec<(PathBuf, StoreResult<Grants>)>;

/// Every `*.json` file of `state/grants/`, by path, each read.
fn every_file(home: &Home) -> StoreResult<Listing> {
    let dir = grants_dir(home);
    let rd = match std::fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StoreError::io("read", &dir, e)),
    };
    let mut paths = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|e| StoreError::io("read", &dir, e))?;
        let path = entry.path();
        if path.extension().is_some_and(|x| x == "json") {
            paths.push(path);
        }
    }
    paths.sort();
    Ok(paths
        .into_iter()
        .map(|path| {
            let read = match principal_of(&path) {
                Some(p) => read_file(home, &path, Some(&p)).map(Option::unwrap_or_default),
                None => Err(StoreError::Damaged {
                    path: path.clone(),
                    reason: "its name is not `PRINCIPAL.json` for a principal id".into(),
                }),
            };
            (path, read)
        })
        .collect())
}

impl Grants {
    /// Reads the grant file of `principal` (no lock; an absent file is no grant — the
    /// caller compares with the pack's count, [`held_checked`]).
    ///
    /// # Errors
    /// [`StoreError::Io`] when it cannot be read; [`StoreError::Damaged`] when it does not
    /// parse, has an unknown field or version, holds another principal's grant or a bad
    /// pack or capability, or when the legacy `state/grants.json` is still in place.
    pub fn load_principal(home: &Home, principal: &PrincipalId) -> StoreResult<Self> {
        legacy_in_place(home)?;
        Ok(read_file(home, &grant_file(home, principal), Some(principal))?.unwrap_or_default())
    }

    /// Every principal's grants, all or nothing (tests, tools): [`Grants::load_all`]
    /// without its list of damaged files.
    ///
    /// # Errors
    /// As [`Grants::load_all`]; [`StoreError::Damaged`] naming the first damaged file.
    pub fn load(home: &Home) -> StoreResult<Self> {
        let (all, damaged) = Self::load_all(home)?;
        match damaged.into_iter().next() {
            Some((path, reason)) => Err(StoreError::Damaged { path, reason }),
            None => Ok(all),
        }
    }

    /// Every principal's grants, and the grant files that are damaged (path, reason),
    /// which are left out: one damaged file hides nobody else's grants.
    ///
    /// # Errors
    /// [`StoreError::Io`] when `state/grants/` cannot be listed; [`StoreError::Damaged`]
    /// when the legacy `state/grants.json` is still in place.
    pub fn load_all(home: &Home) -> StoreResult<(Self, Vec<(PathBuf, String)>)> {
        legacy_in_place(home)?;
        let mut all = Self::default();
        let mut damaged = Vec::new();
        for (path, read) in every_file(home)? {
            match read {
                Ok(g) => all.grants.extend(g.grants),
                Err(StoreError::Damaged { reason, .. }) => damaged.push((path, reason)),
                Err(e) => damaged.push((path, e.to_string())),
            }
        }
        all.sort();
        Ok((all, damaged))
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

    /// How many grants of `principal` cover `pack` (what its install record counts).
    fn covering(&self, principal: &PrincipalId, pack: &PackId) -> u32 {
        let n = self
            .grants
            .iter()
            .filter(|g| &g.principal == principal && g.pack.covers(pack))
            .count();
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    /// Writes the grant file of `principal` (only its grants), or removes it when it holds
    /// none.
    fn save(&self, home: &Home, lock: &StoreLock, principal: &PrincipalId) -> StoreResult<()> {
        let path = grant_file(home, principal);
        let mine: Vec<Grant> = self
            .grants
            .iter()
            .filter(|g| &g.principal == principal)
            .cloned()
            .collect();
        if mine.is_empty() {
            return crate::stamp::remove(home, lock, &path);
        }
        let file = GrantsFile {
            version: GRANTS_VERSION,
            grants: mine,
        };
        crate::stamp::write(home, lock, &path, &file)
    }
}

/// What `principal` holds on `pack` (RUNTIME §4), checked against the count of the pack's
/// install record: the one read of a call ([`crate::FileState`]). Reads the principal's
/// file and the pack's record, nothing of other principals or packs.
///
/// # Errors
/// [`StoreError::Damaged`] naming the principal's grant file when it is damaged, or holds
/// fewer grants covering `pack` than the install record counts (a missing file beside a
/// non-zero count); [`Grants::load_principal`]'s errors.
pub fn held_checked(
    home: &Home,
    principal: &PrincipalId,
    pack: &PackId,
) -> StoreResult<Vec<HeldCapability>> {
    held_counted(home, principal, pack, None)
}

/// [`held_checked`] against `record`, the install record of `pack` already read (by the
/// pack's load); `None` reads it here.
///
/// # Errors
/// As [`held_checked`].
pub fn held_counted(
    home: &Home,
    principal: &PrincipalId,
    pack: &PackId,
    record: Option<&crate::pack::InstallRecord>,
) -> StoreResult<Vec<HeldCapability>> {
    let grants = Grants::load_principal(home, principal)?;
    let held = grants.held(principal, pack);
    let read;
    let record = match record {
        Some(r) => Some(r),
        None => {
            read = read_record(home, pack);
            read.as_ref()
        }
    };
    let counted = record
        .and_then(|r| r.grants.get(principal.as_str()).copied())
        .unwrap_or(0);
    let have = u32::try_from(held.len()).unwrap_or(u32::MAX);
    if have < counted {
        return Err(short_file(home, principal, pack, have, counted));
    }
    Ok(held)
}

/// The damage of a grant file that holds fewer grants covering `pack` than its record
/// counts.
fn short_file(
    home: &Home,
    principal: &PrincipalId,
    pack: &PackId,
    have: u32,
    counted: u32,
) -> StoreError {
    let path = grant_file(home, principal);
    let reason = if path.exists() {
        format!(
            "it holds {have} grant(s) covering pack `{pack}`, but the pack's install record counts {counted}"
        )
    } else {
        format!(
            "it is missing, but the install record of pack `{pack}` counts {counted} grant(s) of `{principal}` on it"
        )
    };
    StoreError::Damaged { path, reason }
}

fn record_path(home: &Home, pack: &str) -> PathBuf {
    crate::pack::pack_dir(home, pack)
        .join(crate::pack::record::RECORD_DIR)
        .join(crate::pack::record::RECORD_FILE)
}

/// The install record of `pack`, when it is installed, parses and its MAC holds (a
/// damaged record refuses the pack by itself, `crate::pack::load`).
fn read_record(home: &Home, pack: &PackId) -> Option<crate::pack::InstallRecord> {
    let path = record_path(home, pack.as_str());
    let bytes = crate::atomic::read_record(&path).ok()??;
    crate::pack::InstallRecord::open(home, pack.as_str(), &path, &bytes).ok()
}

/// Writes `record` in place with its MAC, and notes it in the state ledger, under the
/// store lock the caller holds.
fn write_record(
    home: &Home,
    lock: &StoreLock,
    record: &crate::pack::InstallRecord,
) -> StoreResult<()> {
    let path = record_path(home, &record.pack_id);
    crate::ledger::ready(home, lock)?;
    let (bytes, mac) = record.seal_mac(home, &path)?;
    crate::ledger::stage(home, lock, &path, &mac)?;
    write_atomic(&path, &bytes)?;
    crate::ledger::note(home, lock, &[(&path, Some(mac))])
}

/// Sets the count of `principal` in the install record of each installed pack `scope`
/// covers to what `grants` holds, rewriting only the records whose count changes. Under
/// the store lock the caller holds.
fn set_counts(
    home: &Home,
    lock: &StoreLock,
    principal: &PrincipalId,
    scope: Option<&PackScope>,
    grants: &Grants,
) -> StoreResult<()> {
    for pack in crate::pack::installed_ids(home)? {
        if scope.is_some_and(|s| !s.covers(&pack)) {
            continue;
        }
        let Some(mut record) = read_record(home, &pack) else {
            continue;
        };
        let n = grants.covering(principal, &pack);
        let old = record.grants.get(principal.as_str()).copied().unwrap_or(0);
        if old == n {
            continue;
        }
        if n == 0 {
            record.grants.remove(principal.as_str());
        } else {
            record.grants.insert(principal.to_string(), n);
        }
        write_record(home, lock, &record)?;
    }
    Ok(())
}

/// The counts a new install record of pack `id` starts with (RUNTIME §4): for each
/// principal, the grants of its file that cover the pack; for a principal whose file is
/// damaged, the count of the record replaced (`old`), so the damage stays in sight. Under
/// the store lock the caller (install) holds. Best effort: a `state/grants/` that cannot be
/// listed keeps `old`.
pub fn counts_for(
    home: &Home,
    _lock: &StoreLock,
    id: &str,
    old: Option<&BTreeMap<String, u32>>,
) -> BTreeMap<String, u32> {
    let Ok(pack) = PackId::parse(id) else {
        return BTreeMap::new();
    };
    let Ok(files) = every_file(home) else {
        return old.cloned().unwrap_or_default();
    };
    let mut out = BTreeMap::new();
    for (path, read) in files {
        let Some(p) = principal_of(&path) else {
            continue;
        };
        let n = match read {
            Ok(g) => g.covering(&p, &pack),
            Err(_) => old.and_then(|o| o.get(p.as_str()).copied()).unwrap_or(0),
        };
        if n > 0 {
            out.insert(p.to_string(), n);
        }
    }
    out
}

/// Grants `capabilities` to `principal` on `pack` at `now` (RUNTIME §4), under the store
/// lock. A capability already granted is renewed: its `granted_at` becomes `now`, which
/// lifts a rug-pull suspension. Writes the principal's file, then the counts of the
/// install records it covers. Returns the grants as written, in order.
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
    let lock = StoreLock::acquire(home)?;
    let mut grants = Grants::load_principal(home, principal)?;
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
    grants.save(home, &lock, principal)?;
    set_counts(home, &lock, principal, Some(pack), &grants)?;
    written.sort_by_key(|g| g.capability);
    Ok(written)
}

/// Removes every principal's grants on pack `id` (not the `*` grants), under the store
/// lock the caller holds: `hcp uninstall` (RUNTIME §3), so a different pack installed
/// later under the same id starts with no grants. Every grant file is read before anything
/// is written, and the pack's counts are zeroed before a file changes. Returns how many
/// were removed.
///
/// # Errors
/// [`StoreError::Damaged`] naming a damaged grant file (it may hold grants on the pack, so
/// nothing is removed until it is repaired with `hcp revoke PRINCIPAL --all`); other
/// [`StoreError`]s when the grants cannot be read or written.
pub fn remove_pack(home: &Home, lock: &StoreLock, id: &PackId) -> StoreResult<usize> {
    legacy_in_place(home)?;
    let mut files = Vec::new();
    for (path, read) in every_file(home)? {
        let g = read?;
        if let Some(p) = principal_of(&path) {
            files.push((p, g));
        }
    }
    if let Some(mut record) = read_record(home, id)
        && !record.grants.is_empty()
    {
        record.grants.clear();
        write_record(home, lock, &record)?;
    }
    let mut removed = 0;
    for (p, mut g) in files {
        let before = g.grants.len();
        g.grants.retain(|x| x.pack != PackScope::Pack(id.clone()));
        if g.grants.len() != before {
            removed += before - g.grants.len();
            g.save(home, lock, &p)?;
        }
    }
    Ok(removed)
}

/// A damaged grant file, as [`damaged`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantDamage {
    /// The file (it may be missing).
    pub path: PathBuf,
    /// The principal it belongs to; `None` for the legacy `state/grants.json`, which
    /// refuses every principal but the owner.
    pub principal: Option<PrincipalId>,
    /// Why, without the path.
    pub reason: String,
}

/// Every damaged grant file (RUNTIME §4 "Fault isolation"), by path: the legacy file still
/// in place, a file that does not parse, and a file that holds fewer grants covering a
/// pack than the pack's install record counts (a missing one beside a non-zero count).
/// Reads every grant file and every install record; takes no lock (`hcp doctor`).
pub fn damaged(home: &Home) -> Vec<GrantDamage> {
    let mut out = Vec::new();
    if let Err(e) = legacy_in_place(home) {
        out.push(GrantDamage {
            path: legacy_path(home),
            principal: None,
            reason: match e {
                StoreError::Damaged { reason, .. } => reason,
                other => other.to_string(),
            },
        });
        return out;
    }
    let files = match every_file(home) {
        Ok(f) => f,
        Err(e) => {
            out.push(GrantDamage {
                path: grants_dir(home),
                principal: None,
                reason: e.to_string(),
            });
            return out;
        }
    };
    let mut sound: BTreeMap<PrincipalId, Grants> = BTreeMap::new();
    for (path, read) in files {
        match (principal_of(&path), read) {
            (Some(p), Ok(g)) => {
                sound.insert(p, g);
            }
            (principal, Err(e)) => out.push(GrantDamage {
                path,
                principal,
                reason: match e {
                    StoreError::Damaged { reason, .. } => reason,
                    other => other.to_string(),
                },
            }),
            (None, Ok(_)) => {}
        }
    }
    let mut short: BTreeMap<PrincipalId, GrantDamage> = BTreeMap::new();
    for pack in crate::pack::installed_ids(home).unwrap_or_default() {
        let Some(record) = read_record(home, &pack) else {
            continue;
        };
        for (name, &counted) in &record.grants {
            let Ok(p) = PrincipalId::parse(name) else {
                continue;
            };
            if short.contains_key(&p) || out.iter().any(|d| d.principal.as_ref() == Some(&p)) {
                continue;
            }
            let have = sound.get(&p).map_or(0, |g| g.covering(&p, &pack));
            if have < counted
                && let StoreError::Damaged { path, reason } =
                    short_file(home, &p, &pack, have, counted)
            {
                short.insert(
                    p.clone(),
                    GrantDamage {
                        path,
                        principal: Some(p),
                        reason,
                    },
                );
            }
        }
    }
    out.extend(short.into_values());
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// Checks that every grant file reads (uninstall, before anything changes).
///
/// # Errors
/// [`StoreError::Damaged`] naming the first damaged grant file, or the legacy file.
pub(crate) fn check_files(home: &Home) -> StoreResult<()> {
    legacy_in_place(home)?;
    for (_, read) in every_file(home)? {
        read?;
    }
    Ok(())
}

/// Takes back `capabilities` (all of them when empty) from `principal` on exactly `pack`
/// (revoking on a pack leaves a `*` grant alone, and the reverse), under the store lock:
/// the counts of the install records first, then the principal's file. Returns the grants
/// removed; revoking what was not granted removes nothing.
///
/// # Errors
/// [`StoreError`] when the file cannot be read, is damaged, or cannot be written.
pub fn revoke(
    home: &Home,
    principal: &PrincipalId,
    pack: &PackScope,
    capabilities: &[Capability],
) -> StoreResult<Vec<Grant>> {
    let lock = StoreLock::acquire(home)?;
    let mut grants = Grants::load_principal(home, principal)?;
    let (removed, kept): (Vec<Grant>, Vec<Grant>) = grants.grants.into_iter().partition(|g| {
        &g.principal == principal
            && &g.pack == pack
            && (capabilities.is_empty() || capabilities.contains(&g.capability))
    });
    grants.grants = kept;
    if !removed.is_empty() {
        set_counts(home, &lock, principal, Some(pack), &grants)?;
        grants.save(home, &lock, principal)?;
    }
    Ok(removed)
}

/// What [`revoke_all`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RevokedAll {
    /// The file was sound: these grants were taken back.
    Grants(Vec<Grant>),
    /// The file was damaged or missing beside a count: it was moved to this path (when it
    /// existed) and the principal's counts zeroed.
    Repaired {
        /// Where the damaged file now is, when there was one.
        moved_to: Option<PathBuf>,
    },
}

/// Takes back every grant of `principal`, on every pack and `*` (`hcp revoke PRINCIPAL
/// --all`), under the store lock: the repair of a damaged grant file (RUNTIME §4 "Fault
/// isolation"). Zeroes the principal's counts in every install record, then removes its
/// file; a file that does not parse is moved to `<principal>.json.damaged` instead, kept for
/// the operator to read.
///
/// # Errors
/// [`StoreError`] when a record or the file cannot be written; the legacy file's damage.
pub fn revoke_all(home: &Home, principal: &PrincipalId) -> StoreResult<RevokedAll> {
    let lock = StoreLock::acquire(home)?;
    legacy_in_place(home)?;
    crate::ledger::ready(home, &lock)?;
    let path = grant_file(home, principal);
    let read = read_file(home, &path, Some(principal));
    set_counts(home, &lock, principal, None, &Grants::default())?;
    match read {
        Ok(Some(g)) => {
            Grants::default().save(home, &lock, principal)?;
            Ok(RevokedAll::Grants(g.grants))
        }
        Ok(None) => Ok(RevokedAll::Repaired { moved_to: None }),
        Err(StoreError::Damaged { .. }) => {
            let to = path.with_extension("json.damaged");
            std::fs::rename(&path, &to).map_err(|e| StoreError::io("rename", &path, e))?;
            crate::atomic::sync_dir(&grants_dir(home))?;
            crate::ledger::note(home, &lock, &[(&path, None)])?;
            Ok(RevokedAll::Repaired { moved_to: Some(to) })
        }
        Err(e) => Err(e),
    }
}

/// What [`split_legacy`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    /// The principals that got a grant file.
    pub principals: usize,
    /// The grants moved.
    pub grants: usize,
}

/// Splits the one grants file of an earlier hcp (`state/grants.json`) into one file per
/// principal and counts them in the install records (RUNTIME §4), at the store's first use
/// by this version: under the store lock, recorded first as a `migrate` act (an act that
/// cannot be recorded does not happen), then each principal's file (merged with one that
/// exists already, keeping the newer `granted_at`), the counts, and last the legacy file's
/// removal, so a process killed at any instant leaves the legacy file for the next command
/// to split again. Costs one `stat` when there is no legacy file.
///
/// A legacy file that does not parse stays in place and is not an error here: it refuses
/// every principal but the owner ([`Grants::load_principal`]) and `hcp doctor` lists it.
///
/// # Errors
/// [`StoreError`] when the act cannot be recorded or a file cannot be written; a directory
/// witness that cannot take the act's checkpoint (`witness_unavailable`).
pub fn split_legacy(home: &Home) -> StoreResult<Option<Split>> {
    let legacy = legacy_path(home);
    if std::fs::symlink_metadata(&legacy).is_err() {
        return Ok(None);
    }
    let lock = StoreLock::acquire(home)?;
    let old = match read_file(home, &legacy, None) {
        Ok(Some(g)) => g,
        Ok(None) | Err(_) => return Ok(None),
    };
    let mut by_principal: BTreeMap<PrincipalId, Grants> = BTreeMap::new();
    for g in old.grants {
        by_principal
            .entry(g.principal.clone())
            .or_default()
            .grants
            .push(g);
    }
    let split = Split {
        principals: by_principal.len(),
        grants: by_principal.values().map(|g| g.grants.len()).sum(),
    };
    // A directory witness (`audit.witness`) must be able to take the act's checkpoint
    // before the act; a `config.json` that does not load is reported where it is read.
    let witness = crate::made::witness_of(home.root()).ok().flatten();
    if let Some(w) = &witness {
        w.ready().map_err(|e| StoreError::Witness(Box::new(e)))?;
    }
    let log = crate::audit::AuditLog::new(home);
    let audit_error = |e| match e {
        crate::audit::AuditError::Store(s) => s,
        crate::audit::AuditError::Witness(w) => StoreError::Witness(Box::new(w)),
        other => StoreError::Audit(Box::new(other)),
    };
    let act = log
        .append_authority(&crate::audit::Authority {
            act: "migrate".into(),
            actor: crate::audit::Actor::owner(),
            changed: serde_json::json!({
                "grants": {
                    "from": "state/grants.json",
                    "to": "state/grants/PRINCIPAL.json",
                    "principals": split.principals,
                    "grants": split.grants,
                }
            }),
            intent: false,
        })
        .map_err(audit_error)?;
    for (p, mut g) in by_principal {
        let path = grant_file(home, &p);
        // A split killed after this file was written: merge, the newer time wins.
        if let Ok(Some(existing)) = read_file(home, &path, Some(&p)) {
            for e in existing.grants {
                let same = |x: &Grant| x.pack == e.pack && x.capability == e.capability;
                match g.grants.iter_mut().find(|x| same(x)) {
                    Some(x) if x.granted_at < e.granted_at => *x = e,
                    Some(_) => {}
                    None => g.grants.push(e),
                }
            }
        }
        g.sort();
        g.save(home, &lock, &p)?;
        set_counts(home, &lock, &p, None, &g)?;
    }
    std::fs::remove_file(&legacy).map_err(|e| StoreError::io("remove", &legacy, e))?;
    crate::atomic::sync_dir(&home.dir(StoreDir::State))?;
    drop(lock);
    if let Some(w) = &witness {
        log.witness(w.as_ref(), act.ts).map_err(audit_error)?;
    }
    Ok(Some(split))
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
    /// A store (its chain key keys the grant files).
    fn home() -> (tempfile::TempDir, Home) {
        let d = tempfile::tempdir().unwrap();
        crate::made::init(&d.path().join("hcp"), crate::audit::Actor::owner(), None).unwrap();
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
        let g = Grants::load_all(&h).unwrap().0;
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
        assert_eq!(Grants::load_all(&h).unwrap().0.all().len(), 3);

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
        let left = Grants::load_all(&h).unwrap().0;
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
        let text = std::fs::read_to_string(grant_file(&h, &p("alice"))).unwrap();
        let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let mac = v.as_object_mut().unwrap().remove("mac").unwrap();
        assert_eq!(mac.as_str().map(str::len), Some(64), "{text}");
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
            r#"{"version": 1, "grants": [{"principal": "bob", "pack": "mail", "capability": "pack.connect", "granted_at": "2026-01-01T00:00:00Z"}]}"#,
            r#"{"version": 1, "grants": [{"principal": "a", "pack": "mail", "capability": "root", "granted_at": "2026-01-01T00:00:00Z"}]}"#,
            "{",
        ] {
            std::fs::write(grant_file(&h, &p("alice")), bad).unwrap();
            assert_eq!(
                Grants::load_principal(&h, &p("alice")).unwrap_err().code(),
                "store_damaged",
                "{bad}"
            );
        }
    }

    /// An installed pack's record, as far as the counts need one.
    fn install_record(h: &Home, id: &str) {
        let r = crate::pack::InstallRecord {
            pack_id: id.into(),
            installed_at: "2026-01-01T00:00:00Z".into(),
            source: "/src".into(),
            files: BTreeMap::new(),
            files_digest: "sha256:0".into(),
            bins: vec![],
            content_changed_at: None,
            summary: crate::pack::PackSummaryFields {
                name: id.into(),
                kind: "wrap".into(),
                verb_count: 1,
            },
            openapi: None,
            grants: BTreeMap::new(),
        };
        let lock = StoreLock::acquire(h).unwrap();
        write_record(h, &lock, &r).unwrap();
    }

    fn counts(h: &Home, id: &str) -> BTreeMap<String, u32> {
        read_record(h, &pack(id)).unwrap().grants
    }

    #[test]
    fn each_principal_has_its_file_and_a_damaged_one_refuses_it_alone() {
        let (_d, h) = home();
        install_record(&h, "mail");
        let t1 = t("2026-01-01T00:00:00Z");
        grant(&h, &p("alice"), &scope("mail"), &[VerbExecRead], t1).unwrap();
        grant(&h, &p("bob"), &scope("*"), &[VerbExecRead], t1).unwrap();
        assert!(grant_file(&h, &p("alice")).is_file());
        assert!(grant_file(&h, &p("bob")).is_file());
        assert!(!legacy_path(&h).exists());
        std::fs::write(grant_file(&h, &p("alice")), "[]").unwrap();
        let e = held_checked(&h, &p("alice"), &pack("mail")).unwrap_err();
        assert_eq!(e.code(), "store_damaged");
        assert!(e.to_string().contains("alice.json"), "{e}");
        assert_eq!(held_checked(&h, &p("bob"), &pack("mail")).unwrap().len(), 1);
        // The listing keeps bob's and names alice's file as damaged.
        let (all, bad) = Grants::load_all(&h).unwrap();
        assert_eq!(all.all().len(), 1);
        assert_eq!(bad.len(), 1);
        assert_eq!(damaged(&h).len(), 1);
        // Granting to alice is refused until the repair; bob's grants go on.
        assert_eq!(
            grant(&h, &p("alice"), &scope("mail"), &[VerbExecWrite], t1)
                .unwrap_err()
                .code(),
            "store_damaged"
        );
        grant(&h, &p("bob"), &scope("mail"), &[VerbExecWrite], t1).unwrap();
    }

    #[test]
    fn the_install_record_counts_the_grants_that_cover_it() {
        let (_d, h) = home();
        install_record(&h, "mail");
        install_record(&h, "notes");
        let t1 = t("2026-01-01T00:00:00Z");
        grant(
            &h,
            &p("alice"),
            &scope("mail"),
            &[VerbExecRead, VerbExecWrite],
            t1,
        )
        .unwrap();
        grant(&h, &p("alice"), &scope("*"), &[VerbExecRead], t1).unwrap();
        // A renewal counts once.
        grant(&h, &p("alice"), &scope("mail"), &[VerbExecRead], t1).unwrap();
        assert_eq!(counts(&h, "mail"), BTreeMap::from([("alice".into(), 3)]));
        assert_eq!(counts(&h, "notes"), BTreeMap::from([("alice".into(), 1)]));
        revoke(&h, &p("alice"), &scope("*"), &[]).unwrap();
        assert_eq!(counts(&h, "mail"), BTreeMap::from([("alice".into(), 2)]));
        assert_eq!(counts(&h, "notes"), BTreeMap::new());
        // A new install counts what is there already.
        grant(&h, &p("bob"), &scope("*"), &[SenseEnable], t1).unwrap();
        let lock = StoreLock::acquire(&h).unwrap();
        assert_eq!(
            counts_for(&h, &lock, "later", None),
            BTreeMap::from([("bob".into(), 1)])
        );
    }

    #[test]
    fn a_missing_file_beside_a_count_is_damage_not_no_grants() {
        let (_d, h) = home();
        install_record(&h, "mail");
        let t1 = t("2026-01-01T00:00:00Z");
        grant(&h, &p("alice"), &scope("mail"), &[VerbExecRead], t1).unwrap();
        std::fs::remove_file(grant_file(&h, &p("alice"))).unwrap();
        let e = held_checked(&h, &p("alice"), &pack("mail")).unwrap_err();
        assert_eq!(e.code(), "store_damaged");
        assert!(e.to_string().contains("is missing"), "{e}");
        let d = damaged(&h);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].principal, Some(p("alice")));
        // A principal never granted anything holds nothing, without damage.
        assert_eq!(
            held_checked(&h, &p("carol"), &pack("mail")).unwrap(),
            vec![]
        );
        // The repair zeroes the counts; alice holds nothing and is granted again.
        assert_eq!(
            revoke_all(&h, &p("alice")).unwrap(),
            RevokedAll::Repaired { moved_to: None }
        );
        assert_eq!(
            held_checked(&h, &p("alice"), &pack("mail")).unwrap(),
            vec![]
        );
        assert!(damaged(&h).is_empty());
    }

    #[test]
    fn revoke_all_moves_a_damaged_file_aside() {
        let (_d, h) = home();
        install_record(&h, "mail");
        let t1 = t("2026-01-01T00:00:00Z");
        grant(&h, &p("alice"), &scope("*"), &[VerbExecRead], t1).unwrap();
        std::fs::write(grant_file(&h, &p("alice")), "{").unwrap();
        let RevokedAll::Repaired { moved_to: Some(to) } = revoke_all(&h, &p("alice")).unwrap()
        else {
            panic!("not repaired");
        };
        assert_eq!(std::fs::read(&to).unwrap(), b"{");
        assert!(damaged(&h).is_empty());
        grant(&h, &p("alice"), &scope("mail"), &[VerbExecRead], t1).unwrap();
        assert_eq!(
            held_checked(&h, &p("alice"), &pack("mail")).unwrap().len(),
            1
        );
        // A sound file: every grant taken back.
        let RevokedAll::Grants(g) = revoke_all(&h, &p("alice")).unwrap() else {
            panic!("not revoked");
        };
        assert_eq!(g.len(), 1);
        assert!(!grant_file(&h, &p("alice")).exists());
    }

    #[test]
    fn uninstall_takes_the_packs_grants_and_refuses_on_a_damaged_file() {
        let (_d, h) = home();
        install_record(&h, "mail");
        let t1 = t("2026-01-01T00:00:00Z");
        grant(&h, &p("alice"), &scope("mail"), &[VerbExecRead], t1).unwrap();
        grant(&h, &p("alice"), &scope("*"), &[SenseEnable], t1).unwrap();
        let lock = StoreLock::acquire(&h).unwrap();
        assert_eq!(remove_pack(&h, &lock, &pack("mail")).unwrap(), 1);
        assert_eq!(counts(&h, "mail"), BTreeMap::new());
        assert_eq!(Grants::load_all(&h).unwrap().0.all().len(), 1);
        std::fs::write(grant_file(&h, &p("bob")), "{").unwrap();
        assert_eq!(
            remove_pack(&h, &lock, &pack("mail")).unwrap_err().code(),
            "store_damaged"
        );
    }

    #[test]
    fn the_legacy_file_is_split_and_a_damaged_one_stays() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("hcp");
        crate::made::init(&root, crate::audit::Actor::owner(), None).unwrap();
        let h = Home::open(&root).unwrap();
        install_record(&h, "mail");
        let legacy = serde_json::json!({"version": 1, "grants": [
            {"principal": "alice", "pack": "mail", "capability": "verb.exec.read", "granted_at": "2026-01-01T00:00:00Z"},
            {"principal": "alice", "pack": "*", "capability": "sense.enable", "granted_at": "2026-01-01T00:00:00Z"},
            {"principal": "bob", "pack": "notes", "capability": "verb.exec.write", "granted_at": "2026-01-01T00:00:00Z"},
        ]});
        std::fs::write(legacy_path(&h), legacy.to_string()).unwrap();
        // Not split yet: non-owner reads are refused naming the legacy file.
        let e = held_checked(&h, &p("alice"), &pack("mail")).unwrap_err();
        assert!(e.to_string().contains("grants.json"), "{e}");
        crate::made::open(&root).unwrap();
        assert!(!legacy_path(&h).exists());
        assert_eq!(
            held_checked(&h, &p("alice"), &pack("mail")).unwrap().len(),
            2
        );
        assert_eq!(counts(&h, "mail"), BTreeMap::from([("alice".into(), 2)]));
        let (tail, _) = crate::audit::AuditLog::new(&h).tail_lines(1).unwrap();
        let last = String::from_utf8_lossy(&tail[0]).into_owned();
        assert!(
            last.contains("migrate") && last.contains("\"principals\":2"),
            "{last}"
        );
        // A damaged legacy file stays, refuses non-owner principals and is listed.
        std::fs::write(legacy_path(&h), "{").unwrap();
        crate::made::open(&root).unwrap();
        assert_eq!(std::fs::read(legacy_path(&h)).unwrap(), b"{");
        assert_eq!(
            held_checked(&h, &p("bob"), &pack("mail"))
                .unwrap_err()
                .code(),
            "store_damaged"
        );
        let d = damaged(&h);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].principal, None);
    }
}
