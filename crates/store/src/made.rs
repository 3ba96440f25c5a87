//! Stores are made on purpose (RUNTIME §4): `hcp init` (and `hcp install` into a home
//! that is not a store yet) makes one; every other command refuses a `HCP_HOME` that is
//! not one (`no_store`, 66), so a typo never makes a store.
//!
//! A store is a directory with its marker `store.json` ([`Marker`]: the store's format,
//! its id, when and how it was made, the public half of its checkpoint key) and its trail
//! (`audit/`: the keys, the first record `init`, the anchor, the reserve). [`init`] makes
//! it whole under a temporary name beside `HCP_HOME` and renames it into place, so a crash
//! leaves either no store or the whole store; into an existing directory that is not a
//! store yet (an empty one, or one the operator made for its `config.json`: nothing but
//! [`PREPARED_FILES`]), `audit/` is made whole under a temporary name and renamed into
//! place, and the marker written last. A directory that holds anything else is refused
//! ([`StoreError::Occupied`]): no one's files end up inside a store.
//!
//! A store of an earlier version (a directory with `packs/`, `state/` or `audit/` and no
//! marker) gains its marker and keys at its first use by this version ([`open`]), and its
//! trail is migrated onto a keyed chain with a `migrate` record ([`crate::audit`]'s
//! migration) — once its trail verifies as one an earlier version wrote and the store holds
//! nothing only this version writes: a store of this version whose marker and trail were
//! removed is `missing_log`, a trail recomputed without the key that holds what only a
//! keyed store writes `hash_mismatch`, and neither is migrated. [`open_read`] opens a store
//! for a command that only reads it, and writes nothing. A directory whose `audit/chain.key` exists but whose marker does not (an
//! `init` or a migration killed before its last step) is completed: its trail is checked
//! and the marker written.

use crate::audit::witness::{DirWitness, Witness};
use crate::audit::{self, Actor, AuditError, AuditLog, Authority, Boot};
use crate::config::WitnessConfig;
use crate::error::StoreError;
use crate::home::{Home, StoreDir};
use crate::session::{Timestamp, format_ts};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::path::{Path, PathBuf};

/// The marker's file name at the top of a store.
pub const MARKER_FILE: &str = "store.json";
/// The store format this hcp makes and reads: 2, the first with a marker (format 1 is a
/// store of an earlier version: no marker, a trail without a chain key).
pub const STORE_FORMAT: u32 = 2;

/// The largest marker read, in bytes (one is about 250).
const MARKER_MAX: usize = 4096;

/// `store.json`: what makes a directory a store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Marker {
    /// The store format ([`STORE_FORMAT`]).
    pub format: u32,
    /// The store's id: 32 hex digits, random, made once (a store of an earlier version
    /// keeps the one in `state/store-id`). Names the store in witnesses and exported skills.
    pub store_id: String,
    /// When it was made (RFC 3339 UTC, milliseconds).
    pub made_at: String,
    /// `init`, or `migrate` for a store of an earlier version.
    pub made_by: String,
    /// The public key of its signed checkpoints (`ed25519:<hex>`).
    pub checkpoint_key: String,
}

impl Marker {
    /// The marker of the store at `root`; `None` when there is none.
    ///
    /// # Errors
    /// [`StoreError::Damaged`] for a marker that does not parse; [`StoreError::Io`].
    pub fn read(root: &Path) -> Result<Option<Self>, StoreError> {
        let path = root.join(MARKER_FILE);
        match crate::audit::read_small(&path, MARKER_MAX) {
            Ok(b) => serde_json::from_slice(&b)
                .map(Some)
                .map_err(|e| StoreError::Damaged {
                    path,
                    reason: e.to_string(),
                }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => Ok(None),
            Err(e) => Err(StoreError::io("read", &path, e)),
        }
    }

    fn write(&self, root: &Path) -> Result<(), StoreError> {
        let mut bytes = serde_json::to_vec_pretty(self).unwrap_or_default();
        bytes.push(b'\n');
        crate::atomic::write_atomic(&root.join(MARKER_FILE), &bytes)
    }
}

/// What [`init`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Made {
    /// A new store, with its `init` record.
    New {
        /// Its id.
        store_id: String,
    },
    /// The directory was a store already: nothing changed.
    Already {
        /// Its id.
        store_id: String,
    },
    /// A store of an earlier version, migrated (see [`open`]).
    Migrated {
        /// Its id.
        store_id: String,
        /// Records of its old trail.
        records: u64,
    },
}

/// Whether `root` holds a store of an earlier version: `packs/`, `state/` or `audit/`
/// without a marker.
pub fn is_earlier_store(root: &Path) -> bool {
    [StoreDir::Packs, StoreDir::State, StoreDir::Audit]
        .iter()
        .any(|d| root.join(d.name()).is_dir())
}

/// The names an operator may write at the top of a directory before `hcp init` makes the
/// store in it (docs/config.md, RUNTIME §7): they are the store's own files.
pub const PREPARED_FILES: [&str; 3] = ["config.json", "policy.json", "policy.yaml"];

/// The entries at the top of directory `root` that are not a store's, sorted: anything but
/// [`PREPARED_FILES`] and what a killed `hcp init` left (`.audit.init-…`). `hcp init`
/// makes a store only in a directory without any ([`StoreError::Occupied`]); a directory
/// that cannot be listed has none that can be named.
pub fn foreign_entries(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !PREPARED_FILES.contains(&n.as_str()) && !n.starts_with(".audit.init-"))
        .collect();
    names.sort();
    names
}

/// Up to three of `names` in backticks, then how many more: `` `a`, `b`, `c` and 2 more ``.
pub(crate) fn name_some(names: &[String]) -> String {
    let mut s = names
        .iter()
        .take(3)
        .map(|n| format!("`{}`", n.escape_debug()))
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > 3 {
        s.push_str(&format!(" and {} more", names.len() - 3));
    }
    s
}

fn no_store(root: &Path, reason: &str) -> StoreError {
    let hint = if !root.exists() {
        "`hcp init` makes a store there; or set `HCP_HOME` to the store you meant".to_owned()
    } else {
        let foreign = foreign_entries(root);
        let prepared: Vec<String> = PREPARED_FILES
            .iter()
            .filter(|f| root.join(f).exists())
            .map(|f| (*f).to_owned())
            .collect();
        if foreign.is_empty() && prepared.is_empty() {
            "`hcp init` makes a store in it; or set `HCP_HOME` to the store you meant".to_owned()
        } else if foreign.is_empty() {
            format!(
                "`hcp init` makes a store in it, keeping its {}; or set `HCP_HOME` to the store you meant",
                name_some(&prepared)
            )
        } else {
            format!(
                "it holds files of its own ({}), among which `hcp init` makes no store: set `HCP_HOME` to your store, or to a new or empty directory and run `hcp init` there",
                name_some(&foreign)
            )
        }
    };
    StoreError::NoStore {
        path: root.to_path_buf(),
        reason: reason.to_owned(),
        hint,
    }
}

/// Opens the store at `root` for a command that needs one (RUNTIME §4): a directory with
/// its marker; a store of an earlier version is migrated first (its marker, its keys and a
/// `migrate` record, witnessed when `audit.witness` names a directory), and the one grants
/// file of an earlier hcp is split into one file per principal
/// ([`crate::grant::split_legacy`]).
///
/// # Errors
/// [`StoreError::NoStore`] (`no_store`, 66) when `root` is missing or is a directory that
/// holds no store (nothing is created); [`StoreError::Unusable`] for a file, or a store of
/// a newer format; [`StoreError::Damaged`] for a marker that does not parse; a migration's
/// failure.
pub fn open(root: &Path) -> Result<Home, StoreError> {
    let home = Home::open(root)?;
    match Marker::read(root)? {
        Some(m) if m.format > STORE_FORMAT => Err(StoreError::Unusable {
            path: root.to_path_buf(),
            reason: format!(
                "it is a store of format {} (this hcp reads format {STORE_FORMAT}): upgrade hcp",
                m.format
            ),
        }),
        Some(_) => {
            crate::grant::split_legacy(&home)?;
            Ok(home)
        }
        None if !root.exists() => Err(no_store(root, "it does not exist")),
        None if is_earlier_store(root) => {
            migrate(&home, Actor::owner(), witness_of(root)?.as_deref())?;
            crate::grant::split_legacy(&home)?;
            Ok(home)
        }
        None => Err(no_store(
            root,
            "it is a directory without the marker `store.json`",
        )),
    }
}

/// What [`open_read`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// A store of this version: its marker.
    Current,
    /// A directory with `packs/`, `state/` or `audit/` and no marker: a store of an earlier
    /// version, not migrated (the next command that uses the store migrates it), or a store
    /// of this version whose marker and trail were removed, which verifying its trail tells
    /// apart (`missing_log`).
    Earlier,
}

/// Opens the store at `root` for a command that only reads it (`hcp audit verify`, `hcp
/// audit tail`, `hcp doctor`; RUNTIME §6: `verify` writes nothing): as [`open`], except that
/// nothing is written — a store of an earlier version is not migrated and the grants file
/// of an earlier hcp is not split; the answer says which it is.
///
/// # Errors
/// As [`open`], but never a migration's.
pub fn open_read(root: &Path) -> Result<(Home, Found), StoreError> {
    let home = Home::open(root)?;
    match Marker::read(root)? {
        Some(m) if m.format > STORE_FORMAT => Err(StoreError::Unusable {
            path: root.to_path_buf(),
            reason: format!(
                "it is a store of format {} (this hcp reads format {STORE_FORMAT}): upgrade hcp",
                m.format
            ),
        }),
        Some(_) => Ok((home, Found::Current)),
        None if !root.exists() => Err(no_store(root, "it does not exist")),
        None if is_earlier_store(root) => Ok((home, Found::Earlier)),
        None => Err(no_store(
            root,
            "it is a directory without the marker `store.json`",
        )),
    }
}

/// The directory witness `config.json` names, if it names one (a `"state"` witness is the
/// fleet's database, which this crate does not reach: the runtime takes those).
///
/// # Errors
/// The configuration's error.
pub fn witness_of(root: &Path) -> Result<Option<Box<dyn Witness>>, StoreError> {
    Ok(
        match WitnessConfig::load(root).map_err(|e| StoreError::Config(Box::new(e)))? {
            Some(WitnessConfig::Dir(d)) => Some(Box::new(DirWitness::new(d))),
            _ => None,
        },
    )
}

/// Makes a store at `root` (RUNTIME §4, `hcp init`): see the module docs. `witness`, when
/// given, must be ready before anything is made, and takes the first checkpoint.
///
/// # Errors
/// [`StoreError::Unusable`] for a `root` that is a file or whose parent cannot be
/// written; [`StoreError::Occupied`] for a directory that holds files of its own
/// ([`foreign_entries`]); [`StoreError::Io`]; [`AuditError`]s as [`StoreError`]s; a witness that cannot
/// take the checkpoint is `witness_unavailable` ([`StoreError::Witness`]).
pub fn init(root: &Path, actor: Actor, witness: Option<&dyn Witness>) -> Result<Made, StoreError> {
    init_with_reserve(root, actor, witness, audit::reserve::RESERVE_BYTES)
}

/// [`init`] with a reserve of `reserve_bytes` beside the new trail (tests that exhaust it
/// on a small disk; a store keeps 1 MiB otherwise).
///
/// # Errors
/// As [`init`].
pub fn init_with_reserve(
    root: &Path,
    actor: Actor,
    witness: Option<&dyn Witness>,
    reserve_bytes: u64,
) -> Result<Made, StoreError> {
    if root.exists() && !root.is_dir() {
        return Err(StoreError::Unusable {
            path: root.to_path_buf(),
            reason: "it is not a directory".into(),
        });
    }
    // A directory that exists is made a store (or migrated) by one process at a time: the
    // lock is on the directory itself, since nothing of the store may be written before
    // its marker says what it is. (A store made whole under a temporary name needs none:
    // its rename is the one that wins.)
    let _held = match std::fs::File::open(root) {
        Ok(dir) if root.is_dir() => {
            dir.lock().map_err(|e| StoreError::io("lock", root, e))?;
            Some(dir)
        }
        _ => None,
    };
    if let Some(m) = Marker::read(root)? {
        return Ok(Made::Already {
            store_id: m.store_id,
        });
    }
    // No one's files end up inside a store: a directory that holds any is refused
    // (a store of an earlier version is one, and is migrated).
    if root.is_dir() && !is_earlier_store(root) {
        let entries = foreign_entries(root);
        if !entries.is_empty() {
            return Err(StoreError::Occupied {
                path: root.to_path_buf(),
                entries,
            });
        }
    }
    if let Some(w) = witness {
        w.ready().map_err(|e| StoreError::Witness(Box::new(e)))?;
    }
    if root.is_dir() && is_earlier_store(root) {
        let home = Home::open(root)?;
        let (store_id, records) = migrate(&home, actor, witness)?;
        return Ok(Made::Migrated { store_id, records });
    }
    let store_id = uuid::Uuid::now_v7().simple().to_string();
    let now = Timestamp::now();
    let boot = Boot::current();
    let first = Authority {
        act: "init".into(),
        actor,
        // Its state files carry MACs from the first (`crate::stamp`), vouched for by the
        // state ledger (`crate::ledger`), which its first act writes.
        changed: json!({
            "store": store_id,
            "format": STORE_FORMAT,
            crate::stamp::KEYED_FIELD: crate::stamp::KEYED_VERSION,
            crate::ledger::LEDGER_FIELD: crate::ledger::LEDGER_VERSION,
        }),
        intent: false,
    };
    if root.is_dir() {
        // A directory the operator made (for its `config.json`): `audit/` whole under a
        // temporary name, renamed into place, then the marker.
        let tmp = tempfile::Builder::new()
            .prefix(".audit.init-")
            .tempdir_in(root)
            .map_err(|e| StoreError::io("create a temporary directory in", root, e))?;
        // The audit is the owner's only (0700), whatever the umask made of the directory.
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o700))
                .map_err(|e| StoreError::io("set the mode of", tmp.path(), e))?;
        }
        build(tmp.path(), root, &first, now, &boot, false, reserve_bytes)?;
        let audit = root.join(StoreDir::Audit.name());
        if let Err(e) = std::fs::rename(tmp.path(), &audit) {
            // Another process made the store meanwhile: the directory locked above was an
            // empty one that its whole store was renamed over (a rename may replace an
            // empty directory), so the lock did not keep it out. Its store stands.
            if let Some(m) = Marker::read(root)? {
                return Ok(Made::Already {
                    store_id: m.store_id,
                });
            }
            return Err(StoreError::io("rename into", &audit, e));
        }
        let _ = tmp.keep();
        crate::atomic::sync_dir(root)?;
        finish(root, &store_id, now, "init")?;
    } else {
        let parent = root.parent().unwrap_or(Path::new("/"));
        std::fs::create_dir_all(parent).map_err(|e| StoreError::Unusable {
            path: parent.to_path_buf(),
            reason: format!("cannot create it: {e}"),
        })?;
        let name = root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "hcp".into());
        let tmp = tempfile::Builder::new()
            .prefix(&format!(".{name}.init-"))
            .tempdir_in(parent)
            .map_err(|e| StoreError::Unusable {
                path: parent.to_path_buf(),
                reason: format!("cannot make a directory in it: {e}"),
            })?;
        let audit = tmp.path().join(StoreDir::Audit.name());
        build(&audit, tmp.path(), &first, now, &boot, true, reserve_bytes)?;
        finish(tmp.path(), &store_id, now, "init")?;
        // The whole store appears at once; a directory made meanwhile at `root` (another
        // `hcp init`) keeps its place (rename refuses a non-empty directory).
        match std::fs::rename(tmp.path(), root) {
            Ok(()) => {
                let _ = tmp.keep();
                crate::atomic::sync_dir(parent)?;
            }
            Err(e) => {
                if let Some(m) = Marker::read(root)? {
                    return Ok(Made::Already {
                        store_id: m.store_id,
                    });
                }
                return Err(StoreError::io("rename into", root, e));
            }
        }
    }
    let home = Home::open(root)?;
    if let Some(w) = witness {
        AuditLog::new(&home)
            .witness(w, now)
            .map_err(audit_to_store)?;
    }
    Ok(Made::New { store_id })
}

/// Builds `audit/` at `audit` for the store being made at `store_root`.
fn build(
    audit: &Path,
    store_root: &Path,
    first: &Authority,
    now: Timestamp,
    boot: &Boot,
    whole: bool,
    reserve_bytes: u64,
) -> Result<(), StoreError> {
    audit::create_trail(audit, first, now, boot, reserve_bytes).map_err(audit_to_store)?;
    if whole {
        std::fs::create_dir_all(store_root.join(StoreDir::State.name()))
            .map_err(|e| StoreError::io("create", store_root, e))?;
    }
    Ok(())
}

/// Writes `state/store-id` (when missing) and the marker.
fn finish(root: &Path, store_id: &str, now: Timestamp, made_by: &str) -> Result<(), StoreError> {
    let id_path = root.join(StoreDir::State.name()).join("store-id");
    if !id_path.exists() {
        crate::atomic::write_atomic(&id_path, format!("{store_id}\n").as_bytes())?;
    }
    let seed_path = root
        .join(StoreDir::Audit.name())
        .join(audit::checkpoint::KEY_FILE);
    let seed = std::fs::read(&seed_path).map_err(|e| StoreError::io("read", &seed_path, e))?;
    let seed: [u8; 32] = seed
        .as_slice()
        .try_into()
        .map_err(|_| StoreError::Damaged {
            path: seed_path.clone(),
            reason: format!("it holds {} bytes, not 32", seed.len()),
        })?;
    Marker {
        format: STORE_FORMAT,
        store_id: store_id.to_owned(),
        made_at: format_ts(now),
        made_by: made_by.to_owned(),
        checkpoint_key: audit::checkpoint::public_of(&seed),
    }
    .write(root)
}

fn audit_to_store(e: AuditError) -> StoreError {
    match e {
        AuditError::Store(s) => s,
        AuditError::Witness(w) => StoreError::Witness(Box::new(w)),
        other => StoreError::Audit(Box::new(other)),
    }
}

/// Migrates the store of an earlier version at `home` (see the module docs), under the
/// store's lock: answers its id and the records of its old trail.
fn migrate(
    home: &Home,
    actor: Actor,
    witness: Option<&dyn Witness>,
) -> Result<(String, u64), StoreError> {
    let root = home.root();
    let key_path = home.dir(StoreDir::Audit).join(audit::CHAIN_KEY_FILE);
    if !key_path.exists() {
        // Before anything is written (the lock's file included): only a store that is one
        // of an earlier version is migrated.
        check_earlier(&AuditLog::new(home))?;
    }
    let lock = crate::lock::StoreLock::acquire(home)?;
    if let Some(m) = Marker::read(root)? {
        // Another process migrated it meanwhile.
        drop(lock);
        return Ok((m.store_id, 0));
    }
    if let Some(w) = witness {
        w.ready().map_err(|e| StoreError::Witness(Box::new(e)))?;
    }
    let store_id = crate::skill::export::store_id(home)
        .unwrap_or_else(|| uuid::Uuid::now_v7().simple().to_string());
    let now = Timestamp::now();
    let log = AuditLog::new(home);
    let records = if key_path.exists() {
        // An init or a migration killed before its marker: the trail is whole; check it.
        log.ensure_writable().map_err(audit_to_store)?;
        0
    } else {
        let act = Authority {
            act: "migrate".into(),
            actor,
            changed: json!({"store": store_id, "from_format": 1, "format": STORE_FORMAT}),
            intent: false,
        };
        log.migrate_trail(&act).map_err(audit_to_store)?.records
    };
    finish(root, &store_id, now, "migrate")?;
    drop(lock);
    if let Some(w) = witness {
        log.witness(w, now).map_err(audit_to_store)?;
    }
    Ok((store_id, records))
}

/// Checks, writing nothing, that the store of `log` is one of an earlier version (RUNTIME
/// §4): its trail verifies as one — plain SHA-256 records that an earlier version wrote,
/// matching its old anchor — and the store holds nothing only this version writes.
///
/// # Errors
/// [`AuditError::Broken`] (as a [`StoreError::Audit`]: `audit_unavailable`, 74) with the
/// first fault verify finds (`missing_log` for a store of this version whose marker and
/// trail were removed, `hash_mismatch` for a record only a keyed store writes, …); the
/// trail's read errors.
fn check_earlier(log: &AuditLog) -> Result<(), StoreError> {
    let r = log.verify().map_err(audit_to_store)?;
    match r.broken {
        None => Ok(()),
        Some(b) => Err(StoreError::Audit(Box::new(AuditError::Broken {
            fault: b.fault,
            line: b.line,
            detail: b.detail,
        }))),
    }
}

/// The path of the marker of the store at `root`.
pub fn marker_path(root: &Path) -> PathBuf {
    root.join(MARKER_FILE)
}
