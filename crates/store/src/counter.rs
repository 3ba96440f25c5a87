//! Call counters shared by every hcp process: the `rate_limit` and `budget` of the
//! operator's runtime policy (RUNTIME §7, HISTOS-ENGINE §6), kept across runs.
//!
//! ```text
//! state/counters/<sha256 of identity NUL tool>.json   {"identity", "tool", "recent": [ms…], "total"}
//! state/counters/<same>.lock                          the key's lock (flock)
//! ```
//!
//! [`Counters::try_consume`] holds the key's exclusive lock across read, decide and write,
//! so concurrent processes cannot both take the last slot. A read-only [`Counters::check`]
//! takes the shared lock. The store is generic: it knows identities, tools and numbers,
//! not policies.

use crate::atomic::write_atomic;
use crate::error::{StoreError, StoreResult};
use crate::home::{Home, StoreDir};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fs::{File, OpenOptions};
use std::path::PathBuf;

/// The most timestamps kept per key: a `rate_limit` above this is treated as this.
pub const MAX_RECENT: usize = 100_000;

/// The limits of one tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Limits {
    /// Calls allowed in the rolling window.
    pub rate_limit: Option<u64>,
    /// Calls allowed for the life of the store.
    pub budget: Option<u64>,
    /// The rolling window, in milliseconds.
    pub window_ms: u64,
}

/// A counter's verdict, checked in the order budget, then rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Within limits (and, for [`Counters::try_consume`], counted).
    Ok,
    /// The budget is spent.
    Budget,
    /// The window is full.
    RateLimit,
}

/// One counter file. `applied` (absent in files written by [`Counters::try_consume`])
/// is the audit log offset through which the intents that spend this counter are counted
/// (`hcp_store::audit::admit`): the file is then a cache of the audit trail.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Record {
    pub(crate) identity: String,
    pub(crate) tool: String,
    pub(crate) recent: Vec<u64>,
    pub(crate) total: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) applied: Option<u64>,
}

/// The counters of one store.
#[derive(Debug, Clone)]
pub struct Counters {
    pub(crate) dir: PathBuf,
}

impl Counters {
    /// The counters of `home` (nothing is created until a call is counted).
    pub fn new(home: &Home) -> Self {
        Self {
            dir: home.dir(StoreDir::State).join("counters"),
        }
    }

    /// The file of the counter of `identity` and `tool` (it may not exist).
    pub fn file(&self, identity: &str, tool: &str) -> PathBuf {
        self.paths(identity, tool).0
    }

    pub(crate) fn paths(&self, identity: &str, tool: &str) -> (PathBuf, PathBuf) {
        let mut h = Sha256::new();
        h.update(identity.as_bytes());
        h.update([0]);
        h.update(tool.as_bytes());
        let name = hex::encode(h.finalize());
        (
            self.dir.join(format!("{name}.json")),
            self.dir.join(format!("{name}.lock")),
        )
    }

    /// Opens (creating it) and locks the key's lock file. The directory is made only when
    /// the open finds it missing: a call's two locks cost one `open` each, not a `mkdir`
    /// and a `stat` more.
    pub(crate) fn lock(&self, path: &PathBuf, exclusive: bool) -> StoreResult<File> {
        use std::os::unix::fs::OpenOptionsExt;
        // Never through a link, never waiting on a FIFO; what is there must be a regular
        // file, else the counter is damaged (its principal and tool alone).
        let open = || {
            OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
                .open(path)
        };
        let damaged = |reason: &str| StoreError::Damaged {
            path: path.clone(),
            reason: reason.into(),
        };
        if std::fs::symlink_metadata(&self.dir).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(StoreError::Damaged {
                path: self.dir.clone(),
                reason: "it is a symbolic link, not a directory of the store".into(),
            });
        }
        let f = match open() {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(&self.dir)
                    .map_err(|e| StoreError::io("create", &self.dir, e))?;
                open().map_err(|e| StoreError::io("open", path, e))?
            }
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(damaged(
                    "its lock file is a symbolic link, not a regular file",
                ));
            }
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                return Err(damaged("its lock file is a FIFO, not a regular file"));
            }
            Err(e) if e.raw_os_error() == Some(libc::EISDIR) => {
                return Err(damaged("its lock file is a directory, not a regular file"));
            }
            Err(e) => return Err(StoreError::io("open", path, e)),
        };
        if !f
            .metadata()
            .map_err(|e| StoreError::io("stat", path, e))?
            .is_file()
        {
            return Err(damaged("its lock file is not a regular file"));
        }
        if exclusive { f.lock() } else { f.lock_shared() }
            .map_err(|e| StoreError::io("lock", path, e))?;
        Ok(f)
    }

    pub(crate) fn read(path: &std::path::Path) -> StoreResult<Record> {
        match crate::atomic::read_record(path)? {
            Some(b) => serde_json::from_slice(&b).map_err(|e| StoreError::Damaged {
                path: path.to_path_buf(),
                reason: e.to_string(),
            }),
            None => Ok(Record::default()),
        }
    }

    pub(crate) fn verdict(r: &Record, limits: Limits, now_ms: u64) -> Verdict {
        if limits.budget.is_some_and(|b| r.total >= b) {
            return Verdict::Budget;
        }
        if let Some(rate) = limits.rate_limit {
            let since = now_ms.saturating_sub(limits.window_ms);
            let n = r.recent.iter().filter(|&&t| t >= since).count() as u64;
            if n >= rate.min(MAX_RECENT as u64) {
                return Verdict::RateLimit;
            }
        }
        Verdict::Ok
    }

    /// Whether a call of `tool` by `identity` at `now_ms` is within `limits`, without
    /// counting it.
    ///
    /// # Errors
    /// [`StoreError`] when the counter cannot be read (callers fail closed).
    pub fn check(
        &self,
        identity: &str,
        tool: &str,
        limits: Limits,
        now_ms: u64,
    ) -> StoreResult<Verdict> {
        let (path, lock) = self.paths(identity, tool);
        let _l = self.lock(&lock, false)?;
        Ok(Self::verdict(&Self::read(&path)?, limits, now_ms))
    }

    /// Checks and, when within `limits`, counts one call, atomically across processes.
    ///
    /// # Errors
    /// [`StoreError`] when the counter cannot be read or written (callers fail closed).
    pub fn try_consume(
        &self,
        identity: &str,
        tool: &str,
        limits: Limits,
        now_ms: u64,
    ) -> StoreResult<Verdict> {
        match self.hold(identity, tool, limits, now_ms)? {
            Ok(slot) => slot.commit().map(|()| Verdict::Ok),
            Err(v) => Ok(v),
        }
    }

    /// Takes the key's exclusive lock and checks `limits`: a [`HeldSlot`] that counts the
    /// call once [`HeldSlot::commit`]ted (dropping it counts nothing and releases the lock),
    /// or the verdict that refuses it. While a slot is held no other process can take one
    /// of this key, so a caller can hold several (of different keys, in a fixed order) and
    /// commit all of them only once every other check of the call passed.
    ///
    /// # Errors
    /// [`StoreError`] when the counter cannot be read (callers fail closed).
    pub fn hold(
        &self,
        identity: &str,
        tool: &str,
        limits: Limits,
        now_ms: u64,
    ) -> StoreResult<Result<HeldSlot, Verdict>> {
        let (path, lock) = self.paths(identity, tool);
        let lock = self.lock(&lock, true)?;
        let record = Self::read(&path)?;
        let v = Self::verdict(&record, limits, now_ms);
        if v != Verdict::Ok {
            return Ok(Err(v));
        }
        Ok(Ok(HeldSlot {
            _lock: lock,
            path,
            record,
            identity: identity.to_owned(),
            tool: tool.to_owned(),
            window_ms: limits.window_ms,
            now_ms,
        }))
    }
}

/// A counter slot checked and held under its key's exclusive lock ([`Counters::hold`]).
#[derive(Debug)]
pub struct HeldSlot {
    _lock: File,
    path: PathBuf,
    record: Record,
    identity: String,
    tool: String,
    window_ms: u64,
    now_ms: u64,
}

impl HeldSlot {
    /// Counts the call (writes the counter) and releases the lock.
    ///
    /// # Errors
    /// [`StoreError`] when the counter cannot be written; then nothing was counted.
    pub fn commit(self) -> StoreResult<()> {
        let mut r = self.record;
        let since = self.now_ms.saturating_sub(self.window_ms);
        r.recent.retain(|&t| t >= since);
        if r.recent.len() >= MAX_RECENT {
            r.recent.remove(0);
        }
        r.recent.push(self.now_ms);
        r.total += 1;
        r.identity = self.identity;
        r.tool = self.tool;
        let bytes = serde_json::to_vec(&r).map_err(|e| StoreError::Damaged {
            path: self.path.clone(),
            reason: e.to_string(),
        })?;
        write_atomic(&self.path, &bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_and_budget() {
        let d = tempfile::tempdir().unwrap();
        let c = Counters::new(&Home::open(d.path()).unwrap());
        let rate = Limits {
            rate_limit: Some(2),
            budget: None,
            window_ms: 1000,
        };
        assert_eq!(c.try_consume("a", "t", rate, 10_000).unwrap(), Verdict::Ok);
        assert_eq!(c.try_consume("a", "t", rate, 10_001).unwrap(), Verdict::Ok);
        assert_eq!(c.check("a", "t", rate, 10_002).unwrap(), Verdict::RateLimit);
        assert_eq!(
            c.try_consume("a", "t", rate, 10_002).unwrap(),
            Verdict::RateLimit
        );
        // another principal has its own counter
        assert_eq!(c.try_consume("b", "t", rate, 10_002).unwrap(), Verdict::Ok);
        // the window rolls
        assert_eq!(c.try_consume("a", "t", rate, 11_001).unwrap(), Verdict::Ok);
        let budget = Limits {
            rate_limit: None,
            budget: Some(1),
            window_ms: 1000,
        };
        assert_eq!(c.try_consume("a", "u", budget, 1).unwrap(), Verdict::Ok);
        assert_eq!(
            c.try_consume("a", "u", budget, 999_999).unwrap(),
            Verdict::Budget
        );
    }

    #[test]
    fn concurrent_consumers_take_exactly_the_limit() {
        let d = tempfile::tempdir().unwrap();
        let home = Home::open(d.path()).unwrap();
        let limits = Limits {
            rate_limit: Some(5),
            budget: None,
            window_ms: 60_000,
        };
        let ok = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    let c = Counters::new(&home);
                    for _ in 0..5 {
                        if c.try_consume("p", "t", limits, 1_000).unwrap() == Verdict::Ok {
                            ok.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        }
                    }
                });
            }
        });
        assert_eq!(ok.into_inner(), 5);
    }
}
