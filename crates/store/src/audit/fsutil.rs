//! Files of the audit directory: owner-only modes, the boot id, unsynced replacement.

use crate::error::StoreError;
use std::fs::{DirBuilder, File};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::Path;

/// The mode of `audit/` (RUNTIME §6: readable by the owner only).
pub(crate) const DIR_MODE: u32 = 0o700;
/// The mode of every file in `audit/`.
pub(crate) const FILE_MODE: u32 = 0o600;

/// Creates `dir` (and its missing parents) with mode 0700 for the last component; an
/// existing directory is left as it is.
pub(crate) fn ensure_dir(dir: &Path) -> Result<(), StoreError> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent).map_err(|e| StoreError::io("create", parent, e))?;
    }
    match DirBuilder::new().mode(DIR_MODE).create(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        Err(e) => Err(StoreError::io("create", dir, e)),
    }
}

/// Sets `file`'s mode to 0600 when it grants anything to group or others.
pub(crate) fn tighten(file: &File, path: &Path) -> Result<(), StoreError> {
    let meta = file
        .metadata()
        .map_err(|e| StoreError::io("read", path, e))?;
    if meta.permissions().mode() & 0o077 != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(FILE_MODE))
            .map_err(|e| StoreError::io("chmod", path, e))?;
    }
    Ok(())
}

/// Sets a directory's mode to 0700 when it grants anything to group or others.
pub(crate) fn tighten_dir(dir: &Path) -> Result<(), StoreError> {
    let meta = std::fs::metadata(dir).map_err(|e| StoreError::io("read", dir, e))?;
    if meta.permissions().mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(DIR_MODE))
            .map_err(|e| StoreError::io("chmod", dir, e))?;
    }
    Ok(())
}

/// Replaces `path` whole with `bytes` (a temporary file renamed over it) **without**
/// syncing: a reader or a killed process sees the old file or the new one. For caches
/// that the audit trail can rebuild, never for a record of its own.
pub(crate) fn replace_unsynced(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".tmp-")
        .tempfile_in(dir)
        .map_err(|e| StoreError::io("create a temporary file in", dir, e))?;
    tmp.write_all(bytes)
        .map_err(|e| StoreError::io("write", tmp.path().to_path_buf(), e))?;
    tmp.persist(path)
        .map_err(|e| StoreError::io("rename into", path, e.error))?;
    Ok(())
}

/// This boot of the machine: `/proc/sys/kernel/random/boot_id` (a UUID), or `""` where
/// there is none. Claims the anchor makes about records that were written but not yet
/// synced, and the spend caches, hold only within the boot that wrote them.
pub(crate) fn boot_id() -> String {
    static BOOT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BOOT.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .map(|s| s.trim().to_owned())
            .unwrap_or_default()
    })
    .clone()
}

/// `n` bytes from the kernel's random source.
pub(crate) fn random_bytes<const N: usize>() -> Result<[u8; N], StoreError> {
    let mut raw = [0u8; N];
    File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut raw))
        .map_err(|e| StoreError::io("read", "/dev/urandom", e))?;
    Ok(raw)
}

/// Reads a file of at most `max` bytes in one `read` (a short read of a regular file is its
/// end): `open`, `fstat` (a regular file only, so a FIFO or a device put in its place is
/// neither waited on nor read), `read`, `close`, where `std::fs::read` adds a second `read`.
/// A file longer than `max` answers its first `max + 1` bytes, so the caller sees it is too
/// long.
///
/// # Errors
/// The I/O error.
pub fn read_small(path: &Path, max: usize) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt;
    // Never waiting on a FIFO nor reading a device: a regular file only (a link followed).
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    if !f.metadata()?.is_file() && !path.starts_with("/proc") {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "it is not a regular file",
        ));
    }
    let mut buf = vec![0u8; max + 1];
    let mut got = 0;
    loop {
        match std::io::Read::read(&mut f, &mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => {
                got += n;
                // One read holds a small regular file whole: a short one is its end.
                if got == buf.len() || n < buf.len() - (got - n) {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(got);
    Ok(buf)
}

/// Reads a small secret file, or creates it with `make()` (0600, synced, then linked into
/// place so two first users agree on one value).
pub(crate) fn load_or_create_secret(
    path: &Path,
    make: impl FnOnce() -> Result<Vec<u8>, StoreError>,
) -> Result<Vec<u8>, StoreError> {
    match read_small(path, 64) {
        Ok(b) => return Ok(b),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(StoreError::io("read", path, e)),
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    ensure_dir(dir)?;
    let bytes = make()?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".tmp-")
        .tempfile_in(dir)
        .map_err(|e| StoreError::io("create a temporary file in", dir, e))?;
    tmp.write_all(&bytes)
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(|e| StoreError::io("write", tmp.path().to_path_buf(), e))?;
    match tmp.persist_noclobber(path) {
        Ok(_) => {
            crate::atomic::sync_dir(dir)?;
            Ok(bytes)
        }
        Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => {
            std::fs::read(path).map_err(|e| StoreError::io("read", path, e))
        }
        Err(e) => Err(StoreError::io("create", path, e.error)),
    }
}

/// Writes `bytes` as a new file at `path` (0600): a temporary file beside it, synced, then
/// linked into place without replacing anything, then the directory synced.
///
/// # Errors
/// [`StoreError::Io`]; `AlreadyExists` when `path` exists.
pub(crate) fn write_new_synced(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".tmp-")
        .tempfile_in(dir)
        .map_err(|e| StoreError::io("create a temporary file in", dir, e))?;
    tmp.write_all(bytes)
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(|e| StoreError::io("write", tmp.path().to_path_buf(), e))?;
    tmp.persist_noclobber(path)
        .map_err(|e| StoreError::io("create", path, e.error))?;
    crate::atomic::sync_dir(dir)
}

/// This boot of the machine as the trail's rules need it: its id and when it began.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Boot {
    /// `/proc/sys/kernel/random/boot_id`, `""` where there is none.
    pub id: String,
    /// When the boot began, in seconds since the Unix epoch (`btime` of `/proc/stat`);
    /// `None`: read when it is needed (only a torn anchor slot needs it).
    pub began_s: Option<i64>,
}

impl Boot {
    /// The running boot (when it began is read only when it is needed).
    pub fn current() -> Self {
        Self {
            id: boot_id(),
            began_s: None,
        }
    }

    /// When the boot began: as given, else `btime` of `/proc/stat`.
    pub fn began(&self) -> Option<i64> {
        self.began_s.or_else(boot_time)
    }
}

/// When this boot began (`btime` of `/proc/stat`), in seconds since the epoch.
pub(crate) fn boot_time() -> Option<i64> {
    static BTIME: std::sync::OnceLock<Option<i64>> = std::sync::OnceLock::new();
    *BTIME.get_or_init(|| {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        stat.lines()
            .find_map(|l| l.strip_prefix("btime "))
            .and_then(|v| v.trim().parse().ok())
    })
}
