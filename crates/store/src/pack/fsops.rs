//! The few system calls the pack store needs beyond `std`: `renameat2` (Linux), `access`,
//! `openat`. Each wrapper is safe and returns `std::io::Error`.

use std::ffi::CString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

fn cpath(p: &Path) -> std::io::Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "path holds a NUL"))
}

fn renameat2(from: &Path, to: &Path, flags: libc::c_uint) -> std::io::Result<()> {
    let (f, t) = (cpath(from)?, cpath(to)?);
    // SAFETY: both pointers are valid NUL-terminated strings that outlive the call.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            f.as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            flags,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Moves `from` to `to`, failing when `to` exists (`RENAME_NOREPLACE`).
pub fn rename_noreplace(from: &Path, to: &Path) -> std::io::Result<()> {
    renameat2(from, to, libc::RENAME_NOREPLACE)
}

/// Swaps `a` and `b` atomically (`RENAME_EXCHANGE`): both must exist.
pub fn rename_exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    renameat2(a, b, libc::RENAME_EXCHANGE)
}

/// `access(path, W_OK)`: whether this process may create entries in `path`. Unlike a
/// mode-bit check it also answers no for root on a read-only mount or an immutable inode.
pub fn access_writable(path: &Path) -> std::io::Result<()> {
    let p = cpath(path)?;
    // SAFETY: `p` is a valid NUL-terminated string that outlives the call.
    let rc = unsafe { libc::access(p.as_ptr(), libc::W_OK) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Opens directory `path` without following a symlink in its last component.
pub fn open_dir(path: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// Reads file `name` (relative, may hold `/`) inside the directory open as `dir`, without
/// following a symlink in its last component and without blocking (a FIFO there is
/// refused, never waited on), at most `limit` bytes of a regular file.
///
/// # Errors
/// The open's or the read's error; `InvalidData` for a file that is not a regular file or
/// is larger than `limit`.
pub fn read_at(dir: &File, name: &str, limit: u64) -> std::io::Result<Vec<u8>> {
    let c = CString::new(name)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "name holds a NUL"))?;
    // SAFETY: `dir` is an open descriptor and `c` a valid NUL-terminated string; the
    // returned descriptor is owned by the `File` built from it below.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            c.as_ptr(),
            libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nothing else.
    let f = unsafe { File::from_raw_fd(fd) };
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "it is not a regular file",
        ));
    }
    // Most files here are a few KiB: one read fills the buffer, one more sees the end.
    let mut out = Vec::with_capacity(usize::try_from(limit.min(16 * 1024)).unwrap_or(0) + 1);
    f.take(limit + 1).read_to_end(&mut out)?;
    if out.len() as u64 > limit {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "file is larger than expected",
        ));
    }
    Ok(out)
}

/// Creates `path` (which must not exist), writes `bytes` and syncs it.
pub fn write_new_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

/// Syncs directory `dir`.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}
