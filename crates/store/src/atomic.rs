//! Whole-file replacement by rename: readers and crashes see the old file or the new one.

use crate::error::{StoreError, StoreResult};
use std::io::Write;
use std::path::Path;

/// Writes `bytes` to `path` atomically: a temporary file in the same directory, synced,
/// then renamed over `path`, then the directory synced. Creates the parent directory.
///
/// # Errors
/// [`StoreError::Io`] naming the path.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> StoreResult<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| StoreError::io("create", dir, e))?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .map_err(|e| StoreError::io("create a temporary file in", dir, e))?;
    tmp.write_all(bytes)
        .map_err(|e| StoreError::io("write", tmp.path().to_path_buf(), e))?;
    tmp.as_file()
        .sync_all()
        .map_err(|e| StoreError::io("sync", tmp.path().to_path_buf(), e))?;
    tmp.persist(path)
        .map_err(|e| StoreError::io("rename into", path, e.error))?;
    sync_dir(dir)
}

/// Syncs a directory so a rename inside it is durable.
///
/// # Errors
/// [`StoreError::Io`] naming the directory.
pub fn sync_dir(dir: &Path) -> StoreResult<()> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StoreError::io("sync", dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_whole_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a/b.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert_eq!(std::fs::read_dir(p.parent().unwrap()).unwrap().count(), 1);
    }
}
