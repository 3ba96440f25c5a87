//! Where the store is (RUNTIME §3) and its layout, as types rather than string joins.

use crate::audit::{ChainKey, KeyRead};
use crate::error::{StoreError, StoreResult};
use crate::ledger::{Ledger, Stamp as LedgerStamp};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Resolves the store directory: `HCP_HOME` when set and not empty, else the platform data
/// directory (`platform`, normally [`platform_data_dir`]). Pure: the caller passes the
/// environment value, so this is tested without touching the process environment.
///
/// # Errors
/// [`StoreError::Unusable`] when `HCP_HOME` is relative or neither source gives a directory.
pub fn resolve_home(
    hcp_home: Option<&OsStr>,
    platform: impl FnOnce() -> Option<PathBuf>,
) -> StoreResult<PathBuf> {
    match hcp_home {
        Some(v) if !v.is_empty() => {
            let p = PathBuf::from(v);
            if p.is_relative() {
                let reason = format!(
                    "`HCP_HOME` must be an absolute path; for a store in this directory \
                     give `HCP_HOME=\"$PWD/{}\"`",
                    p.display()
                );
                return Err(StoreError::Unusable { path: p, reason });
            }
            Ok(p)
        }
        _ => platform().ok_or_else(|| StoreError::Unusable {
            path: PathBuf::new(),
            reason: "`HCP_HOME` is unset and there is no platform data directory; set `HCP_HOME`"
                .into(),
        }),
    }
}

/// The platform data directory for hcp (`$XDG_DATA_HOME/hcp`, `~/.local/share/hcp`…).
pub fn platform_data_dir() -> Option<PathBuf> {
    directories::ProjectDirs::from("", "", "hcp").map(|d| d.data_dir().to_path_buf())
}

/// A directory of the store layout (RUNTIME §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreDir {
    /// `packs/`: installed copies, one directory per pack id.
    Packs,
    /// `skills/`: `SKILL.md` per active pack.
    Skills,
    /// `audit/`: the hash-chained audit trail.
    Audit,
    /// `state/`: hcp's own records (install records, activation, sessions, grants…).
    State,
    /// `staging/`: work directories of installs in progress; anything here is garbage.
    Staging,
    /// `quarantine/`: what calls created under a protected name of their workdir
    /// (RUNTIME §5.1; [`crate::quarantine`]).
    Quarantine,
}

impl StoreDir {
    /// The directory's name under the home.
    pub fn name(self) -> &'static str {
        match self {
            Self::Packs => "packs",
            Self::Skills => "skills",
            Self::Audit => "audit",
            Self::State => "state",
            Self::Staging => "staging",
            Self::Quarantine => "quarantine",
        }
    }
}

/// The state ledger kept by a process, with the identity of the file it was read from.
type KeptLedger = (LedgerStamp, Arc<Ledger>);

/// An opened store home.
///
/// Clones share what the home has read once per process: the store's chain key (which the
/// audit trail and the MACs of the state files, [`crate::stamp`], both use) and whether the
/// store's state files are keyed.
#[derive(Clone)]
pub struct Home {
    root: PathBuf,
    /// The chain key, read once ([`crate::audit::AuditLog`] shares it).
    key: Arc<OnceLock<ChainKey>>,
    /// Whether the trail says the state files carry MACs ([`crate::stamp::keyed`]): 0
    /// unknown, 1 no (a store of an earlier version, not migrated yet), 2 yes.
    keyed: Arc<AtomicU8>,
    /// Whether the trail says the store keeps a state ledger ([`crate::ledger::in_force`]),
    /// as `keyed`.
    ledgered: Arc<AtomicU8>,
    /// The state ledger last read, by its file's identity ([`crate::ledger`]).
    ledger: Arc<Mutex<Option<KeptLedger>>>,
    /// The generation of the ledger this process wrote last and no act's record named yet
    /// (0: none).
    ledger_written: Arc<AtomicU64>,
    /// The newest generation of the ledger this process wrote (0: none), never taken: every
    /// anchor this process writes after it carries it (`Anchor::ledger`), so a ledger put
    /// back older than a spend's note of an approval's `.used` marker is found too.
    ledger_newest: Arc<AtomicU64>,
    /// Whether the trail says the install records and bindings carry MACs
    /// ([`crate::stamp::records::keyed`]), as `keyed`.
    records_keyed: Arc<AtomicU8>,
}

impl std::fmt::Debug for Home {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Home").field("root", &self.root).finish()
    }
}

impl Home {
    /// Opens the home at `root` for reading: it may be absent (an empty store).
    ///
    /// # Errors
    /// [`StoreError::Unusable`] when `root` exists and is not a directory.
    pub fn open(root: impl Into<PathBuf>) -> StoreResult<Self> {
        let root = root.into();
        match std::fs::metadata(&root) {
            Ok(m) if !m.is_dir() => Err(StoreError::Unusable {
                path: root,
                reason: "it is not a directory".into(),
            }),
            _ => Ok(Self {
                root,
                key: Arc::new(OnceLock::new()),
                keyed: Arc::new(AtomicU8::new(0)),
                ledgered: Arc::new(AtomicU8::new(0)),
                ledger: Arc::new(Mutex::new(None)),
                ledger_written: Arc::new(AtomicU64::new(0)),
                ledger_newest: Arc::new(AtomicU64::new(0)),
                records_keyed: Arc::new(AtomicU8::new(0)),
            }),
        }
    }

    /// The cell of the chain key, shared by every clone of this home and its audit trail.
    pub(crate) fn key_cell(&self) -> Arc<OnceLock<ChainKey>> {
        Arc::clone(&self.key)
    }

    /// The store's chain key (`audit/chain.key`), read once per process.
    ///
    /// # Errors
    /// [`StoreError::Io`] naming the key when it is missing or cannot be read here;
    /// [`StoreError::Damaged`] when it is not 32 bytes.
    pub(crate) fn chain_key(&self) -> StoreResult<&ChainKey> {
        if let Some(k) = self.key.get() {
            return Ok(k);
        }
        let path = ChainKey::path(self);
        match ChainKey::read(&path)? {
            KeyRead::Found(k) => Ok(self.key.get_or_init(|| k)),
            KeyRead::Absent => Err(StoreError::io(
                "read",
                &path,
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "the store's chain key is missing",
                ),
            )),
            KeyRead::Unreadable(e) => Err(StoreError::io("read", &path, e)),
        }
    }

    /// The cached answer of [`crate::stamp::keyed`]: `None` when not known yet.
    pub(crate) fn keyed_known(&self) -> Option<bool> {
        match self.keyed.load(Ordering::Relaxed) {
            1 => Some(false),
            2 => Some(true),
            _ => None,
        }
    }

    /// The cached answer of [`crate::stamp::records::keyed`]: `None` when not known yet.
    pub(crate) fn records_keyed_known(&self) -> Option<bool> {
        match self.records_keyed.load(Ordering::Relaxed) {
            1 => Some(false),
            2 => Some(true),
            _ => None,
        }
    }

    /// Keeps the answer of [`crate::stamp::records::keyed`] for this process.
    pub(crate) fn set_records_keyed(&self, keyed: bool) {
        self.records_keyed
            .store(if keyed { 2 } else { 1 }, Ordering::Relaxed);
    }

    /// Keeps the answer of [`crate::stamp::keyed`] for this process.
    pub(crate) fn set_keyed(&self, keyed: bool) {
        self.keyed
            .store(if keyed { 2 } else { 1 }, Ordering::Relaxed);
    }

    /// The cached answer of [`crate::ledger::in_force`]: `None` when not known yet.
    pub(crate) fn ledgered_known(&self) -> Option<bool> {
        match self.ledgered.load(Ordering::Relaxed) {
            1 => Some(false),
            2 => Some(true),
            _ => None,
        }
    }

    /// Keeps the answer of [`crate::ledger::in_force`] for this process.
    pub(crate) fn set_ledgered(&self, yes: bool) {
        self.ledgered
            .store(if yes { 2 } else { 1 }, Ordering::Relaxed);
    }

    /// The ledger kept for the file version `stamp`, if it is the one kept.
    pub(crate) fn ledger_cached(&self, stamp: &LedgerStamp) -> Option<Arc<Ledger>> {
        let kept = self.ledger.lock().ok()?;
        kept.as_ref()
            .filter(|(s, _)| s == stamp)
            .map(|(_, l)| Arc::clone(l))
    }

    /// Keeps the ledger read from the file version `stamp`.
    pub(crate) fn set_ledger_cached(&self, stamp: LedgerStamp, ledger: Arc<Ledger>) {
        if let Ok(mut kept) = self.ledger.lock() {
            *kept = Some((stamp, ledger));
        }
    }

    /// Notes that this process wrote the ledger's generation `g`.
    pub(crate) fn note_ledger_written(&self, g: u64) {
        self.ledger_written.store(g, Ordering::Relaxed);
        self.ledger_newest.fetch_max(g, Ordering::Relaxed);
    }

    /// The newest ledger generation this process wrote, shared by every clone (0: none).
    pub(crate) fn ledger_newest_cell(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.ledger_newest)
    }

    /// The generation this process wrote last and no record named yet, taken.
    pub(crate) fn take_ledger_written(&self) -> Option<u64> {
        match self.ledger_written.swap(0, Ordering::Relaxed) {
            0 => None,
            g => Some(g),
        }
    }

    /// The home directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A directory of the layout (not created).
    pub fn dir(&self, d: StoreDir) -> PathBuf {
        self.root.join(d.name())
    }

    /// A directory of the layout, created (with the home) when absent.
    ///
    /// # Errors
    /// [`StoreError::Unusable`] when it cannot be created or is not writable.
    pub fn ensure(&self, d: StoreDir) -> StoreResult<PathBuf> {
        let p = self.dir(d);
        std::fs::create_dir_all(&p).map_err(|e| StoreError::Unusable {
            path: p.clone(),
            reason: format!("cannot create it: {e}"),
        })?;
        // Never through a link: what is written there would land wherever it points.
        if std::fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(StoreError::Damaged {
                path: p,
                reason: "it is a symbolic link, not a directory of the store".into(),
            });
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hcp_home_wins_when_set() {
        let p = resolve_home(Some(OsStr::new("/x/y")), || Some("/plat".into())).unwrap();
        assert_eq!(p, PathBuf::from("/x/y"));
    }

    #[test]
    fn empty_or_unset_falls_back_to_platform() {
        assert_eq!(
            resolve_home(Some(OsStr::new("")), || Some("/plat".into())).unwrap(),
            PathBuf::from("/plat")
        );
        assert_eq!(
            resolve_home(None, || Some("/plat".into())).unwrap(),
            PathBuf::from("/plat")
        );
        assert!(resolve_home(None, || None).is_err());
    }

    #[test]
    fn relative_home_is_refused() {
        let e = resolve_home(Some(OsStr::new("rel/dir")), || None).unwrap_err();
        assert!(
            e.to_string().contains(r#"`HCP_HOME="$PWD/rel/dir"`"#),
            "{e}"
        );
    }

    #[test]
    fn a_file_is_not_a_home() {
        let f = tempfile::NamedTempFile::new().unwrap();
        assert_eq!(Home::open(f.path()).unwrap_err().code(), "store_unusable");
    }
}
