//! Reading installed packs without a lock: [`load`] for one pack, [`list`] for all.

use super::fsops;
use super::record::{InstallRecord, RECORD_DIR, RECORD_FILE, sha256_tagged};
use super::{PackError, pack_dir};
use crate::error::StoreError;
use crate::home::{Home, StoreDir};
use hcp_model::{Manifest, PackId, PolicyFile};
use std::collections::HashSet;
use std::path::PathBuf;

/// The largest record read, in bytes (1 MiB).
const MAX_RECORD_BYTES: u64 = 1024 * 1024;

/// An installed pack as exec and `hcp show` need it: the parsed files, the record, and
/// where it lives. The files and the record are of one install (checked by digest).
#[derive(Debug, Clone)]
pub struct InstalledPack {
    /// The pack id.
    pub id: PackId,
    /// `packs/<id>`.
    pub dir: PathBuf,
    /// `surface.json`, parsed.
    pub manifest: Manifest,
    /// `policy.json`, parsed.
    pub policy: PolicyFile,
    /// `HARNESS.md` (lossily UTF-8).
    pub harness: String,
    /// `.hcp/record.json`: pins and digests.
    pub record: InstallRecord,
}

/// Parses a user-given pack id for a lookup.
///
/// # Errors
/// [`PackError::NotInstalled`] when the text is not a pack id (no such pack can exist).
pub fn parse_id(id: &str) -> Result<PackId, PackError> {
    PackId::parse(id).map_err(|_| PackError::NotInstalled { id: id.to_owned() })
}

/// Loads installed pack `id`: opens `packs/<id>` once, reads the three files and the
/// record relative to that descriptor (no symlink followed), checks the record's keyed MAC
/// ([`InstallRecord::open`]), each file against the record's digest, and parses them. Reads only this pack's directory, so its cost does not
/// grow with the number of installed packs (RUNTIME §3). Does not check activation: see
/// [`is_active`].
///
/// # Errors
/// [`PackError::NotInstalled`] when there is no such pack; [`StoreError::Damaged`] when a
/// file is missing, differs from its recorded digest or does not parse, or the record's
/// MAC is missing or does not hold;
/// [`StoreError::Io`] for other read failures.
pub fn load(home: &Home, id: &str) -> Result<InstalledPack, PackError> {
    let id = parse_id(id)?;
    let dir = pack_dir(home, id.as_str());
    // A reinstall may swap the directory and remove the old copy while we read it: the
    // descriptor keeps us on one copy, and a file removed under us means "read again".
    let mut last = None;
    for _ in 0..3 {
        match load_once(home, &id, &dir) {
            Ok(p) => return Ok(p),
            Err(Retry::Again(e)) => last = Some(e),
            Err(Retry::Fail(e)) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| PackError::NotInstalled { id: id.to_string() }))
}

enum Retry {
    Again(PackError),
    Fail(PackError),
}

fn load_once(home: &Home, id: &PackId, dir: &PathBuf) -> Result<InstalledPack, Retry> {
    let fd = fsops::open_dir(dir).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Retry::Fail(PackError::NotInstalled { id: id.to_string() }),
        _ => Retry::Fail(StoreError::io("open", dir, e).into()),
    })?;
    let read = |name: &str, limit: u64| {
        fsops::read_at(&fd, name, limit).map_err(|e| {
            // A link, a FIFO, a directory or an oversized file where a pack file or its
            // record should be is damage of this pack (never read through or waited on).
            let not_a_file = e.raw_os_error() == Some(libc::ELOOP)
                || e.raw_os_error() == Some(libc::EISDIR)
                || e.kind() == std::io::ErrorKind::InvalidData;
            if not_a_file {
                let reason = if e.raw_os_error() == Some(libc::ELOOP) {
                    "it is a symbolic link, not a regular file".to_owned()
                } else {
                    e.to_string()
                };
                return Retry::Fail(
                    StoreError::Damaged {
                        path: dir.join(name),
                        reason,
                    }
                    .into(),
                );
            }
            let err: PackError = StoreError::io("read", dir.join(name), e).into();
            Retry::Again(err)
        })
    };
    let rel_record = format!("{RECORD_DIR}/{RECORD_FILE}");
    let record_bytes = read(&rel_record, MAX_RECORD_BYTES)?;
    // Its keyed MAC first: a record whose pins or digests were edited, or one copied from
    // another pack, refuses this pack alone.
    let record = InstallRecord::open(home, id.as_str(), &dir.join(&rel_record), &record_bytes)
        .map_err(|e| Retry::Fail(e.into()))?;
    let damaged = |name: &str, reason: String| {
        Retry::Fail(
            StoreError::Damaged {
                path: dir.join(name),
                reason,
            }
            .into(),
        )
    };
    let mut texts = Vec::new();
    for name in hcp_model::PACK_FILES {
        let bytes = read(name, hcp_model::MAX_PACK_FILE_BYTES)?;
        let want = record.files.get(name).map(String::as_str).unwrap_or("");
        let got = sha256_tagged(&bytes);
        if got != want {
            return Err(damaged(
                name,
                format!("its digest is `{got}` but the install record says `{want}`"),
            ));
        }
        // Valid UTF-8 (the usual case) is moved, not copied; otherwise lossily.
        texts.push(
            String::from_utf8(bytes)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
        );
    }
    if record.pack_id != id.as_str() {
        return Err(damaged(
            &rel_record,
            format!("it names pack `{}`", record.pack_id),
        ));
    }
    let manifest = hcp_model::parse_manifest(&texts[0])
        .map_err(|e| damaged(hcp_model::MANIFEST_FILE, e.message))?;
    let policy = hcp_model::parse_policy(&texts[1])
        .map_err(|e| damaged(hcp_model::POLICY_FILE, e.message))?;
    let harness = texts.swap_remove(2);
    Ok(InstalledPack {
        id: id.clone(),
        dir: dir.clone(),
        manifest,
        policy,
        harness,
        record,
    })
}

/// Whether pack `id` is active: `state/active/<id>` exists and the state ledger
/// ([`crate::ledger`]) vouches for it. Any error reads as inactive (fail closed):
/// [`activation`] says why.
pub fn is_active(home: &Home, id: &str) -> bool {
    activation(home, id).unwrap_or(false)
}

/// Whether pack `id` is active, as [`is_active`], with the damage of a marker the state
/// ledger does not vouch for (made by hand, or put back after `hcp deactivate`): one
/// `lstat`, and the ledger (one small read and one HMAC per process and version of it).
///
/// # Errors
/// [`StoreError::Damaged`] naming the marker when the ledger does not vouch for it, or
/// cannot be believed; [`StoreError::Io`] when the marker or the ledger cannot be read.
pub fn activation(home: &Home, id: &str) -> Result<bool, StoreError> {
    if PackId::parse(id).is_err() {
        return Ok(false);
    }
    let marker = home.dir(StoreDir::State).join("active").join(id);
    // No marker is an inactive pack; a marker that is no regular file (a directory, a
    // FIFO, a link) is a damaged one, read without following or waiting
    // (`atomic::read_record`).
    if std::fs::symlink_metadata(&marker).is_err() {
        return Ok(false);
    }
    let Some(bytes) = crate::atomic::read_record(&marker)? else {
        return Ok(false);
    };
    let digest = crate::ledger::marker_digest(&bytes);
    let why = match crate::ledger::vouch(home, &marker, &digest)? {
        None => return Ok(true),
        // An activation may be between its marker and the ledger: look again under the
        // lock, which it holds for both.
        Some(_) if !crate::lock::held_here() => match crate::StoreLock::acquire(home) {
            Ok(_lock) => return activation(home, id),
            Err(_) => crate::ledger::vouch(home, &marker, &digest)?,
        },
        why => why,
    };
    match why {
        None => Ok(true),
        Some(reason) => Err(StoreError::Damaged {
            path: marker,
            reason,
        }),
    }
}

/// The ids in `dir` that are valid pack ids, sorted; an absent directory is empty.
fn ids_in(dir: &std::path::Path) -> Result<Vec<PackId>, StoreError> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StoreError::io("read", dir, e)),
    };
    let mut out = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|e| StoreError::io("read", dir, e))?;
        if let Some(id) = entry
            .file_name()
            .to_str()
            .and_then(|n| PackId::parse(n).ok())
        {
            out.push(id);
        }
    }
    out.sort();
    Ok(out)
}

/// The ids of the active packs (`state/active/`, each marker vouched for by the state
/// ledger), sorted. Does not check that each is installed.
///
/// # Errors
/// [`StoreError::Io`] when the directory exists but cannot be read.
pub fn active_ids(home: &Home) -> Result<Vec<PackId>, StoreError> {
    let mut ids = ids_in(&home.dir(StoreDir::State).join("active"))?;
    ids.retain(|id| is_active(home, id.as_str()));
    Ok(ids)
}

/// The activation markers the state ledger does not vouch for ([`activation`]), by pack,
/// with why (`hcp doctor`).
///
/// # Errors
/// [`StoreError::Io`] when `state/active/` exists but cannot be read.
pub fn damaged_markers(home: &Home) -> Result<Vec<(PackId, PathBuf, String)>, StoreError> {
    let mut out = Vec::new();
    for id in ids_in(&home.dir(StoreDir::State).join("active"))? {
        match activation(home, id.as_str()) {
            Ok(_) => {}
            Err(StoreError::Damaged { path, reason }) => out.push((id, path, reason)),
            Err(e) => {
                let path = home.dir(StoreDir::State).join("active").join(id.as_str());
                out.push((id, path, e.to_string()));
            }
        }
    }
    Ok(out)
}

/// The ids of the installed packs (`packs/`), sorted.
///
/// # Errors
/// [`StoreError::Io`] when the directory exists but cannot be read.
pub fn installed_ids(home: &Home) -> Result<Vec<PackId>, StoreError> {
    ids_in(&home.dir(StoreDir::Packs))
}

/// One line of `hcp list`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PackListing {
    /// The pack id.
    pub id: String,
    /// The manifest `name` (empty when damaged).
    pub name: String,
    /// `wrap`, `composite` or `openapi` (empty when damaged).
    pub kind: String,
    /// Whether `state/active/<id>` exists.
    pub active: bool,
    /// Number of verbs.
    pub verbs: usize,
    /// RFC 3339 install time (empty when damaged).
    pub installed_at: String,
    /// Why the record could not be read, when it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub damaged: Option<String>,
}

/// Every installed pack, sorted by id. Reads one directory listing of `packs/`, one of
/// `state/active/`, and each pack's record (which carries the manifest facts listed, its
/// MAC checked), so it never parses a manifest. A record that cannot be read, or whose
/// MAC is missing or does not hold, is listed with `damaged`.
///
/// # Errors
/// [`StoreError::Io`] when `packs/` or `state/active/` exists but cannot be read.
pub fn list(home: &Home) -> Result<Vec<PackListing>, StoreError> {
    let active: HashSet<PackId> = active_ids(home)?.into_iter().collect();
    let ids = installed_ids(home)?;
    let packs = home.dir(StoreDir::Packs);
    let fd = match fsops::open_dir(&packs) {
        Ok(fd) => Some(fd),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(StoreError::io("open", &packs, e)),
    };
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let rel = format!("{id}/{RECORD_DIR}/{RECORD_FILE}");
        let head = fd
            .as_ref()
            .ok_or_else(|| "`packs/` is gone".to_owned())
            .and_then(|fd| fsops::read_at(fd, &rel, MAX_RECORD_BYTES).map_err(|e| e.to_string()))
            .and_then(|b| {
                InstallRecord::open(home, id.as_str(), &packs.join(&rel), &b).map_err(|e| match e {
                    StoreError::Damaged { reason, .. } => reason,
                    e => e.to_string(),
                })
            });
        let is_active = active.contains(&id);
        out.push(match head {
            Ok(h) => PackListing {
                id: id.to_string(),
                name: h.summary.name,
                kind: h.summary.kind,
                active: is_active,
                verbs: h.summary.verb_count,
                installed_at: h.installed_at,
                damaged: None,
            },
            Err(reason) => PackListing {
                id: id.to_string(),
                name: String::new(),
                kind: String::new(),
                active: is_active,
                verbs: 0,
                installed_at: String::new(),
                damaged: Some(reason),
            },
        });
    }
    Ok(out)
}
