//! The machine id: which chain of the shared audit a process appends to (RUNTIME §9).
//!
//! One id per `$HCP_HOME`, kept in `state/machine-id` (one line, `m-` and 32 lowercase hex
//! digits: 128 bits from the operating system's random source), made on first use and
//! readable by the owner only. Per home rather than per host (`/etc/machine-id`): two
//! homes on one host, or containers sharing one image, are two machines with two chains,
//! and a chain never has two writers that do not share a lock.

use crate::error::{PgError, PgResult};
use std::fmt;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The file name of the machine id inside the state directory.
pub const MACHINE_ID_FILE: &str = "machine-id";

/// `N` bytes of the operating system's random source.
pub(crate) fn random<const N: usize>() -> PgResult<[u8; N]> {
    let mut raw = [0u8; N];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut raw))
        .map_err(|source| PgError::Io {
            action: "read",
            path: PathBuf::from("/dev/urandom"),
            source,
        })?;
    Ok(raw)
}

/// A machine's id: `m-` and 32 lowercase hex digits.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MachineId(String);

impl MachineId {
    /// Checks the shape of `text` (`m-` and 32 lowercase hex digits).
    ///
    /// # Errors
    /// A lowercase reason.
    pub fn parse(text: &str) -> Result<Self, String> {
        let ok = text.strip_prefix("m-").is_some_and(|h| {
            h.len() == 32 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        });
        if ok {
            Ok(Self(text.to_owned()))
        } else {
            Err(format!(
                "`{text}` is not a machine id (`m-` and 32 lowercase hex digits)"
            ))
        }
    }

    /// A fresh random id.
    ///
    /// # Errors
    /// [`PgError::Io`] when `/dev/urandom` cannot be read.
    pub fn generate() -> PgResult<Self> {
        Ok(Self(format!("m-{}", hex::encode(random::<16>()?))))
    }

    /// Reads `dir/machine-id`, or makes it when absent. Two processes that make it at
    /// once agree: each writes a private temporary file and links it into place; the
    /// loser of the link reads the winner's. `dir` is created (0700) when missing.
    ///
    /// # Errors
    /// [`PgError::Io`] naming the file when it cannot be read, written, or does not hold a
    /// machine id.
    pub fn load_or_create(dir: &Path) -> PgResult<Self> {
        let path = dir.join(MACHINE_ID_FILE);
        let io = |action, source| PgError::Io {
            action,
            path: path.clone(),
            source,
        };
        if let Some(id) = Self::read(&path)? {
            return Ok(id);
        }
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| io("make", e))?;
        let id = Self::generate()?;
        let tmp = dir.join(format!(
            ".{MACHINE_ID_FILE}.{}.{}",
            std::process::id(),
            id.0
        ));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(|e| io("make", e))?;
        let written = f
            .write_all(format!("{}\n", id.0).as_bytes())
            .and_then(|()| f.sync_all());
        drop(f);
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(io("write", e));
        }
        let linked = std::fs::hard_link(&tmp, &path);
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => {
                if let Ok(d) = std::fs::File::open(dir) {
                    let _ = d.sync_all();
                }
                Ok(id)
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                Self::read(&path)?.ok_or_else(|| io("read", std::io::Error::other("it vanished")))
            }
            Err(e) => Err(io("make", e)),
        }
    }

    fn read(path: &Path) -> PgResult<Option<Self>> {
        match std::fs::read_to_string(path) {
            Ok(text) => Self::parse(text.trim_end_matches('\n'))
                .map(Some)
                .map_err(|reason| PgError::Io {
                    action: "read",
                    path: path.to_path_buf(),
                    source: std::io::Error::new(std::io::ErrorKind::InvalidData, reason),
                }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(PgError::Io {
                action: "read",
                path: path.to_path_buf(),
                source,
            }),
        }
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for MachineId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn made_once_then_read_back_and_owner_only() {
        let d = tempfile::tempdir().unwrap();
        let state = d.path().join("state");
        let a = MachineId::load_or_create(&state).unwrap();
        let b = MachineId::load_or_create(&state).unwrap();
        assert_eq!(a, b);
        assert!(MachineId::parse(a.as_str()).is_ok());
        let mode = std::fs::metadata(state.join(MACHINE_ID_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let other = tempfile::tempdir().unwrap();
        assert_ne!(a, MachineId::load_or_create(other.path()).unwrap());
    }

    #[test]
    fn racing_first_uses_agree() {
        let d = tempfile::tempdir().unwrap();
        let ids: Vec<MachineId> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..8)
                .map(|_| s.spawn(|| MachineId::load_or_create(d.path()).unwrap()))
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(ids.windows(2).all(|w| w[0] == w[1]));
    }

    #[test]
    fn a_damaged_file_is_an_error_not_a_new_id() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(MACHINE_ID_FILE), "nonsense\n").unwrap();
        assert_eq!(
            MachineId::load_or_create(d.path()).unwrap_err().code(),
            "store_io"
        );
        for bad in [
            "",
            "m-",
            "m-ABCDEF0123456789abcdef0123456789",
            "x-0123456789abcdef0123456789abcdef",
        ] {
            assert!(MachineId::parse(bad).is_err(), "{bad}");
        }
    }
}
