//! Whole-file replacement by rename (readers and crashes see the old file or the new one),
//! and the one way a store record is read: a regular file of bounded size, never a link,
//! a FIFO or a device ([`read_record`]).

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

/// The most bytes a store record may hold (16 MiB): grant, session, approval and counter
/// files, the ledger, install and activation markers are far smaller, so a larger one is
/// damage, never something to read whole into memory.
pub const RECORD_CAP: u64 = 16 << 20;

/// Reads the store record at `path`, whole; `Ok(None)` when it does not exist.
///
/// Opened without following a symbolic link in its last component and without blocking,
/// then checked with `fstat` to be a regular file of at most [`RECORD_CAP`] bytes, and read
/// through that one descriptor: a symbolic link (to `/dev/zero`, say), a FIFO (which would
/// block a plain read until a writer came), a directory, a device or an oversized file is
/// damage of that record, and nothing of it is read.
///
/// # Errors
/// [`StoreError::Damaged`] naming the path and what it is instead of a regular file, or its
/// size; [`StoreError::Io`] when it cannot be opened or read for another reason.
pub fn read_record(path: &Path) -> StoreResult<Option<Vec<u8>>> {
    Ok(read_record_with_meta(path)?.map(|(bytes, _)| bytes))
}

/// [`read_record`], with the `fstat` of the descriptor it read (what tells one version of
/// the file from another without reading it again).
///
/// # Errors
/// As [`read_record`].
pub fn read_record_with_meta(path: &Path) -> StoreResult<Option<(Vec<u8>, std::fs::Metadata)>> {
    use std::io::Read;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let damaged = |reason: String| StoreError::Damaged {
        path: path.to_path_buf(),
        reason,
    };
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(damaged("it is a symbolic link, not a regular file".into()));
        }
        Err(e) => return Err(StoreError::io("read", path, e)),
    };
    let meta = file
        .metadata()
        .map_err(|e| StoreError::io("read", path, e))?;
    let t = meta.file_type();
    if !t.is_file() {
        let what = if t.is_dir() {
            "a directory"
        } else if t.is_fifo() {
            "a FIFO"
        } else if t.is_socket() {
            "a socket"
        } else if t.is_char_device() || t.is_block_device() {
            "a device"
        } else {
            "not a file"
        };
        return Err(damaged(format!("it is {what}, not a regular file")));
    }
    let too_large = || damaged(format!("it holds more than {RECORD_CAP} bytes"));
    if meta.len() > RECORD_CAP {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(RECORD_CAP + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| StoreError::io("read", path, e))?;
    if bytes.len() as u64 > RECORD_CAP {
        return Err(too_large());
    }
    Ok(Some((bytes, meta)))
}

/// The bytes of the regular file at `path` (symlinks followed), or `Ok(None)` when it holds
/// more than `limit` bytes. It is opened without blocking and read at most `limit + 1`
/// bytes, so a FIFO, a device (`/dev/zero`) or a socket put in its place neither hangs a
/// call nor fills its memory.
///
/// # Errors
/// The open's or the read's; `InvalidInput` for a path that is not a regular file.
pub fn read_regular(path: &Path, limit: u64) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "it is not a regular file",
        ));
    }
    let mut buf = Vec::new();
    file.take(limit + 1).read_to_end(&mut buf)?;
    Ok((buf.len() as u64 <= limit).then_some(buf))
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

    #[test]
    fn a_record_is_read_only_from_a_regular_file_of_bounded_size() {
        let d = tempfile::tempdir().unwrap();
        let ok = d.path().join("ok.json");
        std::fs::write(&ok, b"{}").unwrap();
        assert_eq!(read_record(&ok).unwrap(), Some(b"{}".to_vec()));
        assert_eq!(read_record(&d.path().join("absent")).unwrap(), None);
        let reason = |p: &Path| match read_record(p) {
            Err(StoreError::Damaged { path, reason }) => {
                assert_eq!(path, p);
                reason
            }
            other => panic!("{}: {other:?}", p.display()),
        };
        // A link to an endless device is never followed (a plain read would not end).
        let zero = d.path().join("zero.json");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        assert!(reason(&zero).contains("symbolic link"));
        // A FIFO with no writer is refused at once (a plain read would block for ever).
        let fifo = d.path().join("fifo.json");
        mkfifo(&fifo);
        assert!(reason(&fifo).contains("a FIFO"));
        let dir = d.path().join("dir.json");
        std::fs::create_dir(&dir).unwrap();
        assert!(reason(&dir).contains("a directory"));
        let big = d.path().join("big.json");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(RECORD_CAP + 1)
            .unwrap();
        assert!(reason(&big).contains("more than"));
    }

    fn mkfifo(p: &Path) {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
        // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }
}
