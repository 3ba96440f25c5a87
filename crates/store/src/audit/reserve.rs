//! The audit's reserve (RUNTIME §5.4, §6): space kept for the store's own records, so a
//! child that fills the disk it shares with the store never makes a refusal or an outcome
//! unwritable.
//!
//! The reserve is space allocated to the trail beyond its end: `fallocate(2)` with
//! `FALLOC_FL_KEEP_SIZE` from the trail's length, so the file's size (and every
//! line-oriented reader of it) is unchanged and an append writes into blocks it already
//! owns. Appends consume it; the appender tops it up whenever less than half is left (one
//! `fallocate` every few hundred KiB of records), which on a full disk fails and leaves
//! what is left. How much is left is read from the `fstat` the appender makes anyway
//! (allocated blocks beyond the length), so keeping it costs no system call per record.
//!
//! Admission sets aside room for the call's outcome: the anchor counts the outcomes held
//! (`held`: calls admitted, not yet ended, in this boot), an intent is written only when the
//! reserve holds its own line and [`OUTCOME_MAX`] more than the room already held, and any
//! other record (a refusal, an event, an act of authority) only when it holds its line
//! beyond the held room; an outcome uses the room held for it. When even the reserve is
//! short, the append is refused before anything runs (`audit_unavailable`) and `hcp doctor`
//! says so. Where the file system does not allocate ahead (`fallocate` unsupported), there
//! is no reserve and appends meet a full disk as any write does; `hcp doctor` names such file
//! systems (btrfs and ZFS copy on write, so even preallocated blocks need new space; NFS).

use std::fs::{File, Metadata};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;

/// The reserve kept beside the trail, in bytes (1 MiB, RUNTIME §5.4's least).
pub const RESERVE_BYTES: u64 = 1 << 20;
/// The largest outcome record, in bytes (RUNTIME §5.4: outcomes are bounded, 8 KiB).
pub const OUTCOME_MAX: u64 = 8 << 10;

/// Bytes allocated to the file beyond its length: its reserve.
pub fn beyond_end(meta: &Metadata) -> u64 {
    let allocated = meta.blocks().saturating_mul(512);
    let used = meta.len().div_ceil(4096).saturating_mul(4096);
    allocated.saturating_sub(used)
}

/// The reserve to keep: `base` bytes, and room for the `held` outcomes on top.
pub(crate) fn target(base: u64, held: u64) -> u64 {
    base.saturating_add(held.saturating_mul(OUTCOME_MAX))
}

/// The reserve a record of `line` bytes needs: the room held for `held` outcomes, its own
/// line, and for an admission the room of its call's outcome.
pub(crate) fn need(held: u64, line: u64, admitting: bool) -> u64 {
    held.saturating_mul(OUTCOME_MAX)
        .saturating_add(line)
        .saturating_add(if admitting { OUTCOME_MAX } else { 0 })
}

/// Allocates `want` bytes beyond `len` (the trail's length), keeping the size; answers
/// the reserve now held.
///
/// # Errors
/// The `fallocate(2)` or `fstat(2)` error (`ENOSPC` on a full disk, `EOPNOTSUPP` where
/// the file system does not allocate ahead).
pub(crate) fn refill(log: &File, len: u64, want: u64) -> std::io::Result<u64> {
    let off = libc::off_t::try_from(len).map_err(std::io::Error::other)?;
    let n = libc::off_t::try_from(want).map_err(std::io::Error::other)?;
    // SAFETY: `fallocate` on a descriptor we own, with integer arguments only.
    let r = unsafe { libc::fallocate(log.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, off, n) };
    let err = (r != 0).then(std::io::Error::last_os_error);
    let now = beyond_end(&log.metadata()?);
    match err {
        // A full disk may have allocated part of it: what is there counts.
        Some(e) if now == 0 || e.raw_os_error() != Some(libc::ENOSPC) => Err(e),
        _ => Ok(now),
    }
}

/// Whether the file system of `log` allocates no space ahead (`fallocate` of one byte
/// at its end answers `EOPNOTSUPP`): then there is no reserve to keep, and appends go
/// on as plain writes.
pub(crate) fn unsupported(log: &File) -> bool {
    let len = log.metadata().map(|m| m.len()).unwrap_or(0);
    let Ok(off) = libc::off_t::try_from(len) else {
        return false;
    };
    // SAFETY: as in `refill`.
    let r = unsafe { libc::fallocate(log.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, off, 1) };
    r != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EOPNOTSUPP)
}

/// What `hcp doctor` says of a trail's reserve.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ReserveReport {
    /// Bytes allocated beyond the trail's end.
    pub reserved: u64,
    /// The reserve kept when the disk has room, in bytes.
    pub target: u64,
    /// Free bytes on the trail's file system for an unprivileged writer (`statvfs`
    /// `f_bavail × f_frsize`).
    pub free: Option<u64>,
    /// The file system, when it is one that cannot keep a reserve (`btrfs`, `zfs`,
    /// `nfs`): blocks allocated ahead are not enough for a copy-on-write or remote one.
    pub cannot_keep: Option<&'static str>,
}

/// The file system type of `path` when it is one that cannot keep a reserve.
pub fn cannot_keep(path: &std::path::Path) -> Option<&'static str> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: `st` is a zeroed statfs the call fills; `c` is a valid C string.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    #[allow(clippy::unnecessary_cast)]
    match st.f_type as i64 {
        0x9123_683E => Some("btrfs"),
        0x2fc1_2fc1 => Some("zfs"),
        0x6969 | 0x6e66_7364 => Some("nfs"),
        _ => None,
    }
}

/// Free bytes on the file system of `path` for an unprivileged writer.
pub fn free_bytes(path: &std::path::Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: `st` is a zeroed statvfs the call fills; `c` is a valid C string.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    #[allow(clippy::unnecessary_cast)]
    Some((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_refill_allocates_beyond_the_end_and_keeps_the_size() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t");
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(&p)
            .unwrap();
        f.write_all(b"one line\n").unwrap();
        let before = f.metadata().unwrap();
        match refill(&f, before.len(), 64 << 10) {
            Ok(n) => {
                assert!(n >= 60 << 10, "{n}");
                assert_eq!(f.metadata().unwrap().len(), 9, "the size is kept");
                f.write_all(&[b'x'; 4096]).unwrap();
                assert!(beyond_end(&f.metadata().unwrap()) < n, "appends consume it");
            }
            Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EOPNOTSUPP), "{e}"),
        }
    }

    #[test]
    fn admission_needs_room_for_its_outcome_beyond_what_is_held() {
        assert_eq!(need(0, 500, false), 500);
        assert_eq!(need(0, 500, true), 500 + OUTCOME_MAX);
        assert_eq!(need(3, 500, true), 500 + 4 * OUTCOME_MAX);
        assert_eq!(target(RESERVE_BYTES, 2), RESERVE_BYTES + 2 * OUTCOME_MAX);
    }
}
