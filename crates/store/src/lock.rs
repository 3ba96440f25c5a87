//! The store lock: one writer at a time across processes (RUNTIME §3, "concurrent hcp
//! processes are safe").

use crate::error::{StoreError, StoreResult};
use crate::home::{Home, StoreDir};
use std::fs::{File, OpenOptions};

/// An exclusive lock on the store, held until dropped. Writers take it for the whole
/// read-check-write of a change; readers need no lock because every write is an atomic
/// rename.
#[derive(Debug)]
pub struct StoreLock {
    _file: File,
}

impl StoreLock {
    /// Blocks until the lock on `state/store.lock` is held.
    ///
    /// # Errors
    /// [`StoreError::Unusable`] when the state directory cannot be created (a read-only
    /// home), [`StoreError::Io`] when the lock file cannot be opened or locked.
    pub fn acquire(home: &Home) -> StoreResult<Self> {
        let dir = home.ensure(StoreDir::State)?;
        let path = dir.join("store.lock");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| StoreError::Unusable {
                path: path.clone(),
                reason: format!("cannot open the store lock: {e}"),
            })?;
        file.lock().map_err(|e| StoreError::io("lock", &path, e))?;
        Ok(Self { _file: file })
    }
}
