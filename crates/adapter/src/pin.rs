//! Pinned bins (RUNTIME §3, §5 step 9): what install records, and the check before every
//! spawn that the bin is still the one pinned.
//!
//! # The fast path
//!
//! Hashing a 1–5 MB bin costs about 1–3 ms, too much for every exec. [`pin_bin`] records
//! a [`StatFingerprint`] (device, inode, size, mtime and ctime in ns) beside the sha256;
//! [`verify_bin`] re-hashes only when the fingerprint differs. This is sound because the
//! kernel sets ctime to the current time on every change to a file's content or
//! metadata and no unprivileged call can set it back: a file written in place, chmod-ed
//! or replaced (a new inode) no longer matches. Two limits, both handled by not
//! recording a fingerprint (so every verify hashes):
//!
//! - *Racy timestamps*: a filesystem stamps times from a coarse clock (one tick, or one
//!   second on some filesystems), so a write in the same tick as the pin could keep the
//!   ctime. A fingerprint is only taken when the ctime is at least [`RACY_MARGIN`] old.
//!   [`VerifiedBin::refreshed`] hands back a fingerprint once a hash-verified file has
//!   aged, for the store to record if it wants the fast path.
//! - *Filesystems without POSIX ctime* (FAT, NTFS, network filesystems whose clocks may
//!   differ): only ext2/3/4, xfs, btrfs, tmpfs, overlayfs and f2fs get a fingerprint.
//!
//! # Time of check, time of use
//!
//! [`verify_bin`] opens the bin once (`O_RDONLY | O_CLOEXEC`) and checks that
//! descriptor; [`run`](crate::run) executes that same open file with
//! `execveat(fd, "", AT_EMPTY_PATH)`, so a rename of another file over the pinned path
//! after the check is not what runs. Its `argv[0]` is the CLI name; recent kernels name
//! the process (`comm`, what `ps -e` and `pgrep` show) after the file, older ones after
//! the descriptor number. After the spawn the adapter compares the file's status again and
//! kills the child (`bin_changed`) if it was written in between. A `#!` script is run by
//! the interpreter install pinned with it ([`VerifiedBin::run_by`]): that file, verified
//! like the bin, is what `execveat` runs, with the script's path as its argument.
//! Residual window: the interpreter re-opens the script by name (a close-on-exec
//! descriptor cannot be handed over), so a replacement of the script between the spawn and
//! the interpreter's read is not seen (the check after the spawn compares it by path).
//! Without `execveat` (Linux before 3.19) the pinned paths are executed.

use crate::AdapterError;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::ffi::OsString;
use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How old (by the wall clock) a file's ctime must be before its fingerprint is trusted:
/// 2 s, above the coarsest timestamp granularity of the trusted filesystems (1 s).
pub const RACY_MARGIN: Duration = Duration::from_secs(2);

/// A sha256 digest, written `sha256:<64 lowercase hex>` (the install record's form).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sha256Digest(pub [u8; 32]);

impl fmt::Display for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", hex::encode(self.0))
    }
}

impl fmt::Debug for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Why a digest string is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a digest is `sha256:` followed by 64 lowercase hex digits")]
pub struct DigestParseError;

impl FromStr for Sha256Digest {
    type Err = DigestParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let h = s.strip_prefix("sha256:").ok_or(DigestParseError)?;
        if h.len() != 64 || h.bytes().any(|b| b.is_ascii_uppercase()) {
            return Err(DigestParseError);
        }
        let mut out = [0u8; 32];
        hex::decode_to_slice(h, &mut out).map_err(|_| DigestParseError)?;
        Ok(Self(out))
    }
}

impl Serialize for Sha256Digest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Sha256Digest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The status of a bin file that changes whenever the file is written, replaced or its
/// mode changes (see the module docs). Times are nanoseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatFingerprint {
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
    /// `st_size`, bytes.
    pub size: u64,
    /// `st_mtime` in ns.
    pub mtime_ns: i64,
    /// `st_ctime` in ns.
    pub ctime_ns: i64,
}

impl StatFingerprint {
    pub(crate) fn of(m: &std::fs::Metadata) -> Self {
        Self {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime_ns: m
                .mtime()
                .saturating_mul(1_000_000_000)
                .saturating_add(m.mtime_nsec()),
            ctime_ns: m
                .ctime()
                .saturating_mul(1_000_000_000)
                .saturating_add(m.ctime_nsec()),
        }
    }
}

/// What install records for each bin it will run (RUNTIME §3), and what exec checks.
///
/// Serialized as `{"path", "sha256": "sha256:<hex>", "fingerprint"?: {"dev", "ino",
/// "size", "mtime_ns", "ctime_ns"}}`. Unknown fields are not refused here so that the
/// store can `#[serde(flatten)]` it into its own strict record beside `program`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BinPin {
    /// The absolute, resolved path.
    pub path: PathBuf,
    /// The digest of the file's bytes.
    pub sha256: Sha256Digest,
    /// The fast-path fingerprint; `None` means every verify hashes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<StatFingerprint>,
}

/// A bin checked against its pin and held open for [`run`](crate::run).
#[derive(Debug)]
pub struct VerifiedBin {
    pub(crate) path: PathBuf,
    pub(crate) file: File,
    pub(crate) snapshot: StatFingerprint,
    pub(crate) script: bool,
    hashed: bool,
    refreshed: Option<StatFingerprint>,
    pub(crate) interpreter: Option<Box<Interpreter>>,
}

impl VerifiedBin {
    /// The pinned path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether this check hashed the file (the fingerprint was absent or differed).
    pub fn hashed(&self) -> bool {
        self.hashed
    }

    /// A fingerprint the store may record in the pin so that later checks take the fast
    /// path: set when this check hashed a matching file that is now old enough and on a
    /// filesystem with trustworthy ctime.
    pub fn refreshed(&self) -> Option<StatFingerprint> {
        self.refreshed
    }

    /// Whether the file starts with `#!` (executed by path, see the module docs).
    pub fn is_script(&self) -> bool {
        self.script
    }

    /// `self`, a script, run by the interpreter install pinned (RUNTIME §5.1): `files`, each
    /// checked against its pin ([`verify_bin`]), the script's interpreter first and the
    /// program that runs last; `argv`, what that program gets before the call's own
    /// arguments (its `argv[0]`, the `#!` line's argument, the script's path: what the
    /// kernel and `env` would give it). [`run`](crate::run) then executes the last file
    /// through its verified descriptor with `argv` and the call's arguments (the call's
    /// `argv[0]` is dropped, as the kernel drops it), and the view holds every file of the
    /// chain ([`interpreters`](Self::interpreters)); no `PATH` is searched at call time.
    ///
    /// # Errors
    /// `bin_not_executable` when `self` is not a script, `files` is empty, or its last file
    /// is itself a script (which only a path could run).
    pub fn run_by(
        mut self,
        argv: Vec<OsString>,
        files: Vec<VerifiedBin>,
    ) -> Result<Self, AdapterError> {
        let refuse = |reason: &str| AdapterError::BinNotExecutable {
            path: self.path.clone(),
            reason: reason.to_owned(),
            source: None,
        };
        if !self.script {
            return Err(refuse("it is not a script, so no interpreter runs it"));
        }
        match files.last() {
            None => return Err(refuse("its pinned interpreter names no file")),
            Some(last) if last.script => {
                return Err(refuse(
                    "the last file of its pinned interpreter is a script",
                ));
            }
            Some(_) => {}
        }
        self.interpreter = Some(Box::new(Interpreter { argv, files }));
        Ok(self)
    }

    /// The files of the interpreter that runs this script ([`run_by`](Self::run_by)), the
    /// script's interpreter first; none for a program that is not run by one.
    pub fn interpreters(&self) -> impl Iterator<Item = &Path> {
        self.interpreter
            .iter()
            .flat_map(|i| i.files.iter().map(|f| f.path.as_path()))
    }
}

/// What runs a script ([`VerifiedBin::run_by`]).
#[derive(Debug)]
pub(crate) struct Interpreter {
    /// The arguments before the call's own.
    pub(crate) argv: Vec<OsString>,
    /// The files of the chain, each verified; the last is executed.
    pub(crate) files: Vec<VerifiedBin>,
}

/// Pins the bin at `path`: its digest and, when trustworthy, its fingerprint
/// (RUNTIME §3). Install calls it; install executes nothing.
///
/// # Errors
/// `bin_missing` when `path` is not absolute or does not exist; `bin_not_executable`
/// when it is not a regular file with an execute bit or cannot be read.
pub fn pin_bin(path: &Path) -> Result<BinPin, AdapterError> {
    let (file, meta) = open_checked(path)?;
    let (sha256, fingerprint) = hash_and_fingerprint(path, &file, &meta)?;
    Ok(BinPin {
        path: path.to_owned(),
        sha256,
        fingerprint,
    })
}

/// Checks that the bin of `pin` is still the pinned file (RUNTIME §5 step 9) and holds it
/// open for [`run`](crate::run). Hashes only when the fingerprint is absent or differs.
///
/// # Errors
/// `bin_missing` (127), `bin_not_executable` (126), `bin_changed` (126).
pub fn verify_bin(pin: &BinPin) -> Result<VerifiedBin, AdapterError> {
    let (file, meta) = open_checked(&pin.path)?;
    let snapshot = StatFingerprint::of(&meta);
    if pin.fingerprint == Some(snapshot) {
        let mut head = [0u8; 2];
        let n = file
            .read_at(&mut head, 0)
            .map_err(|e| unreadable(&pin.path, e))?;
        return Ok(VerifiedBin {
            path: pin.path.clone(),
            file,
            snapshot,
            script: n == 2 && head == *b"#!",
            hashed: false,
            refreshed: None,
            interpreter: None,
        });
    }
    let (actual, refreshed) = hash_and_fingerprint(&pin.path, &file, &meta)?;
    if actual != pin.sha256 {
        return Err(AdapterError::BinChanged {
            path: pin.path.clone(),
            pinned: pin.sha256.to_string(),
            actual: actual.to_string(),
        });
    }
    let mut head = [0u8; 2];
    let n = file
        .read_at(&mut head, 0)
        .map_err(|e| unreadable(&pin.path, e))?;
    Ok(VerifiedBin {
        path: pin.path.clone(),
        file,
        snapshot,
        script: n == 2 && head == *b"#!",
        hashed: true,
        refreshed,
        interpreter: None,
    })
}

fn unreadable(path: &Path, e: io::Error) -> AdapterError {
    AdapterError::BinNotExecutable {
        path: path.to_owned(),
        reason: "it cannot be read".into(),
        source: Some(e),
    }
}

/// Opens `path` read-only without blocking (a FIFO must not hang the call) and checks
/// that it is a regular file with an execute bit.
fn open_checked(path: &Path) -> Result<(File, std::fs::Metadata), AdapterError> {
    if !path.is_absolute() {
        return Err(AdapterError::BinMissing {
            path: path.to_owned(),
            source: None,
        });
    }
    let file = File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound | io::ErrorKind::NotADirectory => AdapterError::BinMissing {
                path: path.to_owned(),
                source: Some(e),
            },
            _ => unreadable(path, e),
        })?;
    let meta = file.metadata().map_err(|e| unreadable(path, e))?;
    let not_exec = |reason: &str| AdapterError::BinNotExecutable {
        path: path.to_owned(),
        reason: reason.to_owned(),
        source: None,
    };
    if !meta.file_type().is_file() {
        return Err(not_exec("it is not a regular file"));
    }
    if meta.mode() & 0o111 == 0 {
        return Err(not_exec("it has no execute permission"));
    }
    Ok((file, meta))
}

/// Hashes the open file and returns its digest and a fingerprint when one is trustworthy:
/// the status did not change while hashing, the filesystem keeps POSIX ctime, and the
/// ctime is at least [`RACY_MARGIN`] old.
fn hash_and_fingerprint(
    path: &Path,
    file: &File,
    before: &std::fs::Metadata,
) -> Result<(Sha256Digest, Option<StatFingerprint>), AdapterError> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut reader = file;
    loop {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => hasher.update(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(unreadable(path, e)),
        }
    }
    let mut sha = [0u8; 32];
    sha.copy_from_slice(&hasher.finalize());
    let fp = StatFingerprint::of(before);
    let after = file.metadata().map(|m| StatFingerprint::of(&m)).ok();
    let trusted = after == Some(fp) && ctime_is_trustworthy(file) && !racy(fp.ctime_ns);
    Ok((Sha256Digest(sha), trusted.then_some(fp)))
}

fn racy(ctime_ns: i64) -> bool {
    let now_ns = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    let margin = i64::try_from(RACY_MARGIN.as_nanos()).unwrap_or(i64::MAX);
    now_ns.saturating_sub(ctime_ns) < margin
}

fn ctime_is_trustworthy(file: &File) -> bool {
    use nix::sys::statfs::{
        BTRFS_SUPER_MAGIC, EXT4_SUPER_MAGIC, F2FS_SUPER_MAGIC, OVERLAYFS_SUPER_MAGIC, TMPFS_MAGIC,
        XFS_SUPER_MAGIC, fstatfs,
    };
    let Ok(fs) = fstatfs(file) else {
        return false;
    };
    let t = fs.filesystem_type();
    [
        EXT4_SUPER_MAGIC,
        XFS_SUPER_MAGIC,
        BTRFS_SUPER_MAGIC,
        TMPFS_MAGIC,
        OVERLAYFS_SUPER_MAGIC,
        F2FS_SUPER_MAGIC,
    ]
    .contains(&t)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn digest_text() {
        let d = Sha256Digest([0xab; 32]);
        let s = d.to_string();
        assert_eq!(s, format!("sha256:{}", "ab".repeat(32)));
        assert_eq!(s.parse::<Sha256Digest>().unwrap(), d);
        assert!("sha256:AB".parse::<Sha256Digest>().is_err());
        assert!(
            format!("sha256:{}", "AB".repeat(32))
                .parse::<Sha256Digest>()
                .is_err()
        );
        assert!("ab".repeat(32).parse::<Sha256Digest>().is_err());
    }

    #[test]
    fn racy_margin() {
        assert!(racy(i64::MAX));
        assert!(!racy(0));
    }
}
