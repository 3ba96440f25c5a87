//! The private temporary directory of a `local` exec (RUNTIME §5 "The child"): one per
//! call, mode `0700`, the child's `TMPDIR`, removed after the run.

use crate::AdapterError;
use std::io;
use std::path::{Path, PathBuf};

fn sandbox_failed(path: &Path, reason: &str, e: io::Error) -> AdapterError {
    AdapterError::SandboxFailed {
        path: path.to_owned(),
        reason: reason.to_owned(),
        source: Some(e),
    }
}

/// A fresh private temporary directory for one exec (RUNTIME §5): `hcp-exec-XXXXXX`
/// under the given base (the system temporary directory), mode `0700`, removed with
/// everything in it by [`remove`](Self::remove) after the run (or on drop). The child
/// gets it read-write and as `TMPDIR`.
#[derive(Debug)]
pub struct PrivateTmp {
    dir: Option<tempfile::TempDir>,
    path: PathBuf,
}

impl PrivateTmp {
    /// Creates the directory under `base` (pass `std::env::temp_dir()`).
    ///
    /// # Errors
    /// `sandbox_failed` when it cannot be created.
    pub fn create_in(base: &Path) -> Result<Self, AdapterError> {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::Builder::new()
            .prefix("hcp-exec-")
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(base)
            .map_err(|e| sandbox_failed(base, "cannot create a private temporary directory", e))?;
        let path = dir.path().to_owned();
        Ok(Self {
            dir: Some(dir),
            path,
        })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the directory and everything the child left in it, including
    /// directories it made unreadable. Symlinks are removed, never followed.
    ///
    /// # Errors
    /// `sandbox_failed` naming the directory when something is left.
    pub fn remove(mut self) -> Result<(), AdapterError> {
        self.remove_now()
    }

    fn remove_now(&mut self) -> Result<(), AdapterError> {
        let Some(dir) = self.dir.take() else {
            return Ok(());
        };
        let path = dir.keep();
        if std::fs::remove_dir_all(&path).is_ok() {
            return Ok(());
        }
        open_up(&path);
        std::fs::remove_dir_all(&path)
            .map_err(|e| sandbox_failed(&path, "cannot remove the private temporary directory", e))
    }
}

impl Drop for PrivateTmp {
    fn drop(&mut self) {
        let _ = self.remove_now();
    }
}

/// Gives the owner full access to every directory beneath `dir` (not following symlinks).
fn open_up(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            open_up(&e.path());
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn private_tmp_is_0700_and_removed_even_when_locked_up() {
        use std::os::unix::fs::PermissionsExt;
        let base = tempfile::tempdir().unwrap();
        let t = PrivateTmp::create_in(base.path()).unwrap();
        let p = t.path().to_owned();
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o700
        );
        let locked = p.join("a/b");
        std::fs::create_dir_all(&locked).unwrap();
        std::fs::write(locked.join("f"), "x").unwrap();
        std::os::unix::fs::symlink(base.path(), p.join("out")).unwrap();
        std::fs::set_permissions(p.join("a"), std::fs::Permissions::from_mode(0o000)).unwrap();
        t.remove().unwrap();
        assert!(!p.exists());
        assert!(base.path().exists());
    }
}
