//! The private temporary directory of every call (RUNTIME §5 "The child"): one per call,
//! `hcp-exec-<pid>-XXXXXX`, mode `0700`, the child's `TMPDIR`, removed after the run; what
//! a killed `hcp` left is removed by the next call ([`PrivateTmp::sweep`], which
//! [`Confinement::for_call`](crate::Confinement::for_call) runs on the directory's base).
//!
//! Where: [`PrivateTmp::default_base`] prefers a memory filesystem. On a journaled disk
//! filesystem, making and removing a directory for every call costs tens of
//! microseconds of kernel time, and `rmdir` can wait milliseconds for the journal while
//! other processes write (ext4 here: `mkdir` ≈ 8 µs, `rmdir` ≈ 50 µs of CPU, medians up to
//! 4 ms under a build); on tmpfs both take about 1 µs. The price: what a child writes
//! there is held in memory (or swap) until the call ends, bounded by the tmpfs size
//! (half the memory by default) and, per file, by the file-size limit. The runtime
//! configuration's `sandbox.tmpdir: "system"` puts it in the system temporary directory
//! instead.

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

/// A fresh private temporary directory for one call (RUNTIME §5): `hcp-exec-<pid>-XXXXXX`
/// under the given base (the system temporary directory), mode `0700`, removed with
/// everything in it by [`remove`](Self::remove) after the run (or on drop). The child
/// gets it read-write and as `TMPDIR`.
#[derive(Debug)]
pub struct PrivateTmp {
    dir: Option<tempfile::TempDir>,
    path: PathBuf,
}

/// `TMPFS_MAGIC` of `statfs(2)`.
const TMPFS_MAGIC: i64 = 0x0102_1994;

/// Whether `dir` is a directory on tmpfs that this process may create entries in.
fn is_writable_tmpfs(dir: &Path) -> bool {
    use nix::unistd::{AccessFlags, access};
    let on_tmpfs = nix::sys::statfs::statfs(dir)
        .is_ok_and(|fs| i64::from(fs.filesystem_type().0 as u32) == TMPFS_MAGIC);
    on_tmpfs && access(dir, AccessFlags::W_OK | AccessFlags::X_OK).is_ok()
}

/// The start of a private temporary directory's name, followed by the pid of the
/// process that made it, `-` and random characters.
const PREFIX: &str = "hcp-exec-";

impl PrivateTmp {
    /// Removes what processes that no longer run left in `base`: directories named
    /// `hcp-exec-<pid>-…`, owned by the effective user, whose `<pid>` no process has (an
    /// `hcp` killed by `SIGKILL` cannot remove its own; on tmpfs it holds memory until
    /// then). Best effort, returns how many were removed. A reused pid keeps a leftover
    /// until that process ends too.
    pub fn sweep(base: &Path) -> usize {
        Self::sweep_listing(base, None).0
    }

    /// [`sweep`](Self::sweep) of `base` in the same directory read that lists the live
    /// private temporary directories there other than `own` (other calls', for
    /// [`Confinement::for_call`](crate::Confinement::for_call) to hide; the calls' own
    /// covers, `hcp-exec-*-hide-*`, are left out: they hold nothing). Returns how many were
    /// removed, and that list.
    pub(crate) fn sweep_listing(base: &Path, own: Option<&Path>) -> (usize, Vec<PathBuf>) {
        use std::os::unix::fs::MetadataExt;
        let mut others = Vec::new();
        let Ok(entries) = std::fs::read_dir(base) else {
            return (0, others);
        };
        let own = own.and_then(Path::file_name);
        // SAFETY: geteuid takes no argument and cannot fail.
        let uid = unsafe { libc::geteuid() };
        let mut removed = 0;
        for e in entries.flatten() {
            let name = e.file_name();
            let Some(pid) = name
                .to_str()
                .and_then(|n| n.strip_prefix(PREFIX))
                .and_then(|rest| rest.split_once('-'))
                .and_then(|(pid, _)| pid.parse::<i32>().ok())
                .filter(|&pid| pid > 0)
            else {
                continue;
            };
            let dead = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None)
                == Err(nix::errno::Errno::ESRCH);
            if !dead {
                let hide = name.as_encoded_bytes().windows(6).any(|w| w == b"-hide-");
                if !hide && Some(name.as_os_str()) != own {
                    others.push(e.path());
                }
                continue;
            }
            let ours = e.metadata().is_ok_and(|m| m.is_dir() && m.uid() == uid);
            if ours {
                let path = e.path();
                if std::fs::remove_dir_all(&path).is_err() {
                    open_up(&path);
                    let _ = std::fs::remove_dir_all(&path);
                }
                removed += usize::from(!path.exists());
            }
        }
        (removed, others)
    }

    /// Where `hcp exec` makes private temporary directories: the system temporary
    /// directory (`$TMPDIR`, else `/tmp`) when it is on tmpfs, else `/dev/shm` when
    /// that is a writable tmpfs, else the system temporary directory (see the module
    /// docs for why). Two `statfs` calls; no error: the last choice always stands.
    pub fn default_base() -> PathBuf {
        let system = std::env::temp_dir();
        if is_writable_tmpfs(&system) {
            return system;
        }
        let shm = Path::new("/dev/shm");
        if is_writable_tmpfs(shm) {
            return shm.to_path_buf();
        }
        system
    }

    /// Creates the directory under `base` ([`default_base`](Self::default_base), or
    /// `std::env::temp_dir()`).
    ///
    /// # Errors
    /// `sandbox_failed` when it cannot be created.
    pub fn create_in(base: &Path) -> Result<Self, AdapterError> {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::Builder::new()
            .prefix(&format!("{PREFIX}{}-", std::process::id()))
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
        // Most children leave it empty: one `rmdir` instead of a walk.
        if std::fs::remove_dir(&path).is_ok() || std::fs::remove_dir_all(&path).is_ok() {
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

    #[test]
    fn sweep_removes_only_what_dead_processes_left() {
        let base = tempfile::tempdir().unwrap();
        let live = PrivateTmp::create_in(base.path()).unwrap();
        // A pid above the kernel's pid_max (4194304 at most) belongs to nobody.
        let dead = base.path().join("hcp-exec-999999999-abcdef");
        std::fs::create_dir_all(dead.join("sub")).unwrap();
        std::fs::write(dead.join("sub/f"), "x").unwrap();
        let other = base.path().join("unrelated-999999999-x");
        std::fs::create_dir(&other).unwrap();
        assert_eq!(PrivateTmp::sweep(base.path()), 1);
        assert!(!dead.exists());
        assert!(live.path().exists());
        assert!(other.exists());
        assert!(
            live.path()
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&format!("hcp-exec-{}-", std::process::id()))
        );
    }
}
