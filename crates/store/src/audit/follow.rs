//! Following the trail as it grows (`hcp audit tail --follow`, RUNTIME §6): complete new
//! lines, as stored, for a log shipper.

use super::AuditError;
use super::report::AuditFollow;
use super::scan;
use crate::error::StoreError;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Reads the lines appended to the trail since the last call. Only complete lines are
/// returned (a line being written, or a torn one, waits for its `\n`). When the path
/// comes to name another file (the trail was moved aside and a new one started, as a
/// rotation would), the rest of the old file is read, then the new one from its start;
/// when the file shrinks below what was read (emptied in place), reading starts over.
#[derive(Debug)]
pub struct Follower {
    path: PathBuf,
    file: Option<File>,
    ino: u64,
    offset: u64,
}

impl Follower {
    /// A follower positioned after the last `n` complete lines of the file at `path`
    /// (which may not exist yet).
    ///
    /// # Errors
    /// When the file exists and cannot be read.
    pub fn new(path: PathBuf, n: usize) -> io::Result<Self> {
        let mut f = Self {
            path,
            file: None,
            ino: 0,
            offset: 0,
        };
        if let Some(file) = f.open()? {
            let len = file.metadata()?.len();
            let (lines, torn) = scan::last_lines(&file, len, n)?;
            let held: u64 = lines.iter().map(|l| l.len() as u64 + 1).sum();
            f.offset = len - torn - held;
            f.ino = file.metadata()?.ino();
            f.file = Some(file);
        }
        Ok(f)
    }

    /// The path followed.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    fn open(&self) -> io::Result<Option<File>> {
        match File::open(&self.path) {
            Ok(f) => Ok(Some(f)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The complete lines (without `\n`) appended since the last call, oldest first.
    ///
    /// # Errors
    /// When the file cannot be read.
    pub fn poll(&mut self) -> io::Result<Vec<Vec<u8>>> {
        let mut out = Vec::new();
        let current = std::fs::metadata(&self.path).ok().map(|m| m.ino());
        if let Some(file) = &self.file {
            let len = file.metadata()?.len();
            if len < self.offset {
                self.offset = 0;
            }
            self.read_lines(&mut out)?;
            if current != Some(self.ino) {
                // Replaced: the old file is done once its complete lines are read.
                self.file = None;
                self.offset = 0;
            }
        }
        if self.file.is_none()
            && let Some(file) = self.open()?
        {
            self.ino = file.metadata()?.ino();
            self.file = Some(file);
            self.offset = 0;
            self.read_lines(&mut out)?;
        }
        Ok(out)
    }

    fn read_lines(&mut self, out: &mut Vec<Vec<u8>>) -> io::Result<()> {
        let Some(mut file) = self.file.as_ref() else {
            return Ok(());
        };
        file.seek(SeekFrom::Start(self.offset))?;
        let mut buf = Vec::new();
        file.read_to_end(&mut buf)?;
        let Some(last_nl) = buf.iter().rposition(|&b| b == b'\n') else {
            return Ok(());
        };
        for line in buf[..last_nl].split(|&b| b == b'\n') {
            out.push(line.to_vec());
        }
        self.offset += last_nl as u64 + 1;
        Ok(())
    }
}

/// The file store's [`AuditFollow`]: a [`Follower`] of the trail woken by an inotify watch
/// of the audit directory (an append, a file moved in or out, as a rotation does); without
/// inotify it looks again when `wait` runs out.
#[derive(Debug)]
pub struct FileFollow {
    follower: Follower,
    dir: PathBuf,
    inotify: Option<OwnedFd>,
}

impl FileFollow {
    /// Follows the trail at `path` in `dir` after its last `n` records.
    ///
    /// # Errors
    /// When the trail exists and cannot be read.
    pub fn new(path: PathBuf, dir: PathBuf, n: usize) -> io::Result<Self> {
        let follower = Follower::new(path, n)?;
        let inotify = watch(&dir);
        Ok(Self {
            follower,
            dir,
            inotify,
        })
    }
}

impl AuditFollow for FileFollow {
    fn next(
        &mut self,
        wait: Duration,
        wake: &[BorrowedFd<'_>],
    ) -> Result<Vec<Vec<u8>>, AuditError> {
        let path = self.follower.path().to_path_buf();
        let io = |e| AuditError::Store(StoreError::io("read", &path, e));
        let lines = self.follower.poll().map_err(io)?;
        if !lines.is_empty() {
            return Ok(lines);
        }
        if self.inotify.is_none() {
            // The directory may appear later (a store not used yet).
            self.inotify = watch(&self.dir);
        }
        let mut fds: Vec<libc::pollfd> = wake
            .iter()
            .map(|fd| libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        if let Some(fd) = &self.inotify {
            fds.push(libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            });
        }
        let ms = i32::try_from(wait.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: `fds` is a live array of initialised pollfd of the given length.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        if r > 0
            && let Some(fd) = &self.inotify
            && fds.last().is_some_and(|p| p.revents != 0)
        {
            drain(fd);
        }
        let lines = self.follower.poll().map_err(io)?;
        Ok(lines)
    }
}

/// An inotify watch of `dir` for appends and files moved or created; `None` when the
/// kernel or the directory does not allow one.
fn watch(dir: &Path) -> Option<OwnedFd> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: `inotify_init1` returns a new descriptor or -1; `path` is a valid C string
    // that outlives the call.
    unsafe {
        let fd = libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK);
        if fd < 0 {
            return None;
        }
        let owned = OwnedFd::from_raw_fd(fd);
        let mask = libc::IN_MODIFY
            | libc::IN_CREATE
            | libc::IN_MOVED_TO
            | libc::IN_MOVED_FROM
            | libc::IN_DELETE
            | libc::IN_CLOSE_WRITE;
        if libc::inotify_add_watch(fd, path.as_ptr(), mask) < 0 {
            return None;
        }
        Some(owned)
    }
}

/// Reads and drops what a non-blocking descriptor holds.
fn drain(fd: &OwnedFd) {
    let mut buf = [0u8; 4096];
    loop {
        // SAFETY: `buf` is a live local buffer of the given length.
        let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            break;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::io::Write;

    fn append(p: &std::path::Path, s: &str) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .unwrap();
        f.write_all(s.as_bytes()).unwrap();
    }

    #[test]
    fn follows_growth_partial_lines_and_a_replaced_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.jsonl");
        let mut f = Follower::new(p.clone(), 10).unwrap();
        assert!(f.poll().unwrap().is_empty(), "no file yet");
        append(&p, "a\nb\n");
        assert_eq!(f.poll().unwrap(), vec![b"a".to_vec(), b"b".to_vec()]);
        append(&p, "c");
        assert!(f.poll().unwrap().is_empty(), "a line waits for its newline");
        append(&p, "\n");
        assert_eq!(f.poll().unwrap(), vec![b"c".to_vec()]);
        // Rotation: the old file gets a last line, is moved aside, a new file starts.
        append(&p, "d\n");
        std::fs::rename(&p, d.path().join("t.jsonl.1")).unwrap();
        append(&p, "e\n");
        assert_eq!(f.poll().unwrap(), vec![b"d".to_vec(), b"e".to_vec()]);
        // Emptied in place: start over.
        std::fs::write(&p, "").unwrap();
        assert!(f.poll().unwrap().is_empty());
        append(&p, "f\n");
        assert_eq!(f.poll().unwrap(), vec![b"f".to_vec()]);
        // Starting after the last n lines.
        let mut g = Follower::new(p.clone(), 0).unwrap();
        assert!(g.poll().unwrap().is_empty());
        let mut h = Follower::new(d.path().join("t.jsonl.1"), 2).unwrap();
        assert_eq!(h.poll().unwrap(), vec![b"c".to_vec(), b"d".to_vec()]);
    }
}
