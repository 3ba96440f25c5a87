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

thread_local! {
    /// How many store locks this thread holds (a reader that finds the state ledger and a
    /// file at odds checks again under the lock, unless it holds it already).
    static HELD: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Whether this thread holds the store lock, or must not wait for it ([`no_wait`]).
pub(crate) fn held_here() -> bool {
    HELD.with(|h| h.get() > 0)
}

/// Runs `f` as if this thread held the store lock: a reader inside it never waits for the
/// lock. For reads under the trail's lock, which the store lock is never taken under
/// (acts take the store lock, then the trail's).
pub(crate) fn no_wait<T>(f: impl FnOnce() -> T) -> T {
    HELD.with(|h| h.set(h.get() + 1));
    let out = f();
    HELD.with(|h| h.set(h.get().saturating_sub(1)));
    out
}

impl Drop for StoreLock {
    fn drop(&mut self) {
        HELD.with(|h| h.set(h.get().saturating_sub(1)));
    }
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
        HELD.with(|h| h.set(h.get() + 1));
        Ok(Self { _file: file })
    }
}
