//! Where the store is (RUNTIME §3) and its layout, as types rather than string joins.

use crate::error::{StoreError, StoreResult};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

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
                return Err(StoreError::Unusable {
                    path: p,
                    reason: "`HCP_HOME` must be an absolute path".into(),
                });
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

/// An opened store home.
#[derive(Debug, Clone)]
pub struct Home {
    root: PathBuf,
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
            _ => Ok(Self { root }),
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
        assert!(resolve_home(Some(OsStr::new("rel/dir")), || None).is_err());
    }

    #[test]
    fn a_file_is_not_a_home() {
        let f = tempfile::NamedTempFile::new().unwrap();
        assert_eq!(Home::open(f.path()).unwrap_err().code(), "store_unusable");
    }
}
