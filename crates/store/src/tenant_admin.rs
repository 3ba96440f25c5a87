//! What the owner does to tenant homes (RUNTIME §5.2; [`crate::tenant`] has where they are):
//! seed one with a directory of the owner's ([`seed`]), remove one ([`remove`]), remove
//! every home of a pack ([`purge`], `hcp uninstall ID --purge`).
//!
//! A seed copies the directory's tree — directories, regular files, symbolic links as links
//! (never followed, so nothing outside the directory is read) — with each entry's
//! permission bits (not set-user-ID, set-group-ID or sticky), into a staging directory
//! beside the homes first; only when the whole copy is made does it move into the home,
//! one `rename` per entry the home lacks, directories the home already has merged. A name
//! the home already holds as a file, or as another kind, refuses the seed before anything
//! moves; a move that fails undoes the moves before it. Either way the home is left as it
//! was. A FIFO, socket or device in the directory refuses the seed.
//!
//! A removal moves the home aside with one `rename`, then deletes it: a reader sees the
//! home or nothing.

use crate::error::StoreError;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Why a seed was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum SeedError {
    /// `bad_seed`: the directory to copy cannot be seeded (missing, not a directory, a
    /// symbolic link, holding a special file).
    #[error("cannot seed from `{}`: {reason}", path.display())]
    Source {
        /// The path named (or the entry inside it at fault).
        path: PathBuf,
        /// Why, lowercase.
        reason: String,
    },
    /// `bad_seed`: the home already holds a name the seed would replace.
    #[error("the home already holds `{}`, which the seed would replace", name.display())]
    Conflict {
        /// The name, relative to the home.
        name: PathBuf,
    },
    /// A store failure (`store_io`) making the staging copy or moving it.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl SeedError {
    /// The stable code: `bad_seed` or the store's.
    pub fn code(&self) -> hcp_model::Code {
        match self {
            Self::Source { .. } | Self::Conflict { .. } => hcp_model::Code::BadSeed,
            Self::Store(e) => e.code(),
        }
    }
}

/// What a seed copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seeded {
    /// Directories, files and links copied.
    pub entries: u64,
    /// Bytes of the regular files copied.
    pub bytes: u64,
}

/// Copies the directory `source` into the tenant home `home` below `homes` (see the module
/// docs), making the home first when it is new.
///
/// # Errors
/// [`SeedError::Source`] for a `source` that is missing, not a directory, a symbolic link
/// or holds a special file; [`SeedError::Conflict`] for a name the home already holds;
/// [`SeedError::Store`] when the home cannot be made or the copy cannot be written.
pub fn seed(homes: &Path, home: &Path, source: &Path) -> Result<Seeded, SeedError> {
    seed_with(homes, home, source, &|_| Ok(()))
}

/// [`seed`], with the act of authority's gate (RUNTIME §6): `authorize` is called once the
/// copy is staged and checked against what the home holds, before anything is moved into
/// it, with what will be seeded; an `Err` leaves the home as it was.
///
/// # Errors
/// As [`seed`]; `authorize`'s error.
pub fn seed_with(
    homes: &Path,
    home: &Path,
    source: &Path,
    authorize: &dyn Fn(&Seeded) -> Result<(), StoreError>,
) -> Result<Seeded, SeedError> {
    let bad = |path: &Path, reason: &str| SeedError::Source {
        path: path.to_owned(),
        reason: reason.to_owned(),
    };
    match std::fs::symlink_metadata(source) {
        Ok(m) if m.file_type().is_symlink() => {
            return Err(bad(
                source,
                "it is a symbolic link; name the directory itself",
            ));
        }
        Ok(m) if !m.is_dir() => return Err(bad(source, "it is not a directory")),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(bad(source, "it does not exist"));
        }
        Err(e) => return Err(bad(source, &e.to_string().to_lowercase())),
    }
    crate::tenant::ensure_tenant_home(homes, home)
        .map_err(|e| StoreError::io("create the tenant home", home, e))?;
    let staging = homes.join(format!(".seed-{}", uuid::Uuid::now_v7().simple()));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&staging)
        .map_err(|e| StoreError::io("create", &staging, e))?;
    let mut seeded = Seeded {
        entries: 0,
        bytes: 0,
    };
    let result = copy_children(source, &staging, &mut seeded)
        .and_then(|()| check_conflicts(&staging, home, Path::new("")))
        .and_then(|()| authorize(&seeded).map_err(SeedError::Store))
        .and_then(|()| {
            let mut moved = Vec::new();
            let r = move_into(&staging, home, &mut moved);
            if r.is_err() {
                for (to, from) in moved.iter().rev() {
                    let _ = std::fs::rename(to, from);
                }
            }
            r
        });
    let _ = std::fs::remove_dir_all(&staging);
    result?;
    crate::atomic::sync_dir(home)?;
    Ok(seeded)
}

fn copy_children(from: &Path, to: &Path, seeded: &mut Seeded) -> Result<(), SeedError> {
    let rd = std::fs::read_dir(from).map_err(|e| StoreError::io("read", from, e))?;
    let mut names: Vec<_> = rd.filter_map(Result::ok).map(|e| e.file_name()).collect();
    names.sort();
    for n in names {
        copy_entry(&from.join(&n), &to.join(&n), seeded)?;
    }
    Ok(())
}

fn copy_entry(from: &Path, to: &Path, seeded: &mut Seeded) -> Result<(), SeedError> {
    let meta = std::fs::symlink_metadata(from).map_err(|e| StoreError::io("read", from, e))?;
    let mode = meta.permissions().mode() & 0o777;
    let ft = meta.file_type();
    seeded.entries += 1;
    if ft.is_symlink() {
        let target = std::fs::read_link(from).map_err(|e| StoreError::io("read", from, e))?;
        std::os::unix::fs::symlink(&target, to).map_err(|e| StoreError::io("create", to, e))?;
    } else if ft.is_dir() {
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(to)
            .map_err(|e| StoreError::io("create", to, e))?;
        copy_children(from, to, seeded)?;
        std::fs::set_permissions(to, std::fs::Permissions::from_mode(mode))
            .map_err(|e| StoreError::io("set the mode of", to, e))?;
    } else if ft.is_file() {
        let mut src = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(from)
            .map_err(|e| StoreError::io("read", from, e))?;
        let mut dst = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(to)
            .map_err(|e| StoreError::io("create", to, e))?;
        seeded.bytes +=
            std::io::copy(&mut src, &mut dst).map_err(|e| StoreError::io("copy", from, e))?;
        dst.sync_all().map_err(|e| StoreError::io("sync", to, e))?;
        std::fs::set_permissions(to, std::fs::Permissions::from_mode(mode))
            .map_err(|e| StoreError::io("set the mode of", to, e))?;
    } else {
        return Err(SeedError::Source {
            path: from.to_owned(),
            reason: "a socket, FIFO or device cannot be seeded".into(),
        });
    }
    Ok(())
}

/// Refuses a staged name the home holds as a file, a link or another kind than the
/// staged entry; directories on both sides are compared beneath.
fn check_conflicts(staged: &Path, home: &Path, rel: &Path) -> Result<(), SeedError> {
    let rd = std::fs::read_dir(staged).map_err(|e| StoreError::io("read", staged, e))?;
    for e in rd.filter_map(Result::ok) {
        let name = rel.join(e.file_name());
        let there = home.join(&name);
        let Ok(h) = std::fs::symlink_metadata(&there) else {
            continue;
        };
        let s = std::fs::symlink_metadata(e.path())
            .map_err(|err| StoreError::io("read", e.path(), err))?;
        if h.is_dir() && !h.file_type().is_symlink() && s.is_dir() {
            check_conflicts(&e.path(), home, &name)?;
        } else {
            return Err(SeedError::Conflict { name });
        }
    }
    Ok(())
}

/// Moves every staged entry the home lacks into it (directories both hold: beneath),
/// noting each move in `moved` (destination, source) for an undo.
fn move_into(
    staged: &Path,
    home: &Path,
    moved: &mut Vec<(PathBuf, PathBuf)>,
) -> Result<(), SeedError> {
    let rd = std::fs::read_dir(staged).map_err(|e| StoreError::io("read", staged, e))?;
    let mut names: Vec<_> = rd.filter_map(Result::ok).map(|e| e.file_name()).collect();
    names.sort();
    for n in names {
        let from = staged.join(&n);
        let to = home.join(&n);
        if std::fs::symlink_metadata(&to).is_ok_and(|m| m.is_dir()) {
            move_into(&from, &to, moved)?;
            continue;
        }
        crate::pack::fsops::rename_noreplace(&from, &to)
            .map_err(|e| StoreError::io("move into the home", &to, e))?;
        moved.push((to, from));
    }
    Ok(())
}

/// Removes the tenant home `home` below `homes` (`hcp home rm`): moved aside with one
/// `rename`, then deleted. Returns whether there was one.
///
/// # Errors
/// [`StoreError::Io`] when it cannot be moved or deleted.
pub fn remove(homes: &Path, home: &Path) -> Result<bool, StoreError> {
    remove_dir(homes, home)
}

/// Removes every tenant home of pack `pack` below `homes` (`hcp uninstall ID --purge`).
/// Returns whether there were any.
///
/// # Errors
/// [`StoreError::Unusable`] for a text that is not a pack id; [`StoreError::Io`] as
/// [`remove`].
pub fn purge(homes: &Path, pack: &str) -> Result<bool, StoreError> {
    hcp_model::validate_pack_id(pack).map_err(|reason| StoreError::Unusable {
        path: homes.join(pack),
        reason,
    })?;
    remove_dir(homes, &homes.join(pack))
}

fn remove_dir(homes: &Path, dir: &Path) -> Result<bool, StoreError> {
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(StoreError::io("read", dir, e)),
        Ok(_) => {}
    }
    let grave = homes.join(format!(".removed-{}", uuid::Uuid::now_v7().simple()));
    std::fs::rename(dir, &grave).map_err(|e| StoreError::io("move aside", dir, e))?;
    if let Some(parent) = dir.parent() {
        crate::atomic::sync_dir(parent)?;
    }
    let meta = std::fs::symlink_metadata(&grave).map_err(|e| StoreError::io("read", &grave, e))?;
    let r = if meta.is_dir() {
        std::fs::remove_dir_all(&grave)
    } else {
        std::fs::remove_file(&grave)
    };
    r.map_err(|e| StoreError::io("remove", &grave, e))?;
    Ok(true)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::tenant::{Tenant, tenant_home_path};
    use pretty_assertions::assert_eq;

    fn world() -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let homes = t.path().join("homes");
        let home = tenant_home_path(&homes, "gh", Tenant::Principal("owner")).unwrap();
        let src = t.path().join("seed");
        std::fs::create_dir_all(src.join(".config/gh")).unwrap();
        std::fs::write(src.join(".config/gh/hosts.yml"), "token: x\n").unwrap();
        std::fs::set_permissions(
            src.join(".config/gh/hosts.yml"),
            std::fs::Permissions::from_mode(0o4640),
        )
        .unwrap();
        std::os::unix::fs::symlink("/etc/passwd", src.join("link")).unwrap();
        (t, homes, home, src)
    }

    #[test]
    fn a_seed_copies_the_tree_with_its_modes_and_links_as_links() {
        let (_t, homes, home, src) = world();
        let s = seed(&homes, &home, &src).unwrap();
        assert_eq!(
            s,
            Seeded {
                entries: 4,
                bytes: 9
            }
        );
        let f = home.join(".config/gh/hosts.yml");
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "token: x\n");
        assert_eq!(
            std::fs::metadata(&f).unwrap().permissions().mode() & 0o7777,
            0o640
        );
        assert_eq!(
            std::fs::read_link(home.join("link")).unwrap(),
            PathBuf::from("/etc/passwd")
        );
        let mode = std::fs::metadata(&home).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        // Nothing left beside the homes.
        let left: Vec<_> = std::fs::read_dir(&homes)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, vec![std::ffi::OsString::from("gh")]);
    }

    #[test]
    fn directories_merge_and_a_conflict_leaves_the_home_as_it_was() {
        let (_t, homes, home, src) = world();
        crate::tenant::ensure_tenant_home(&homes, &home).unwrap();
        std::fs::create_dir_all(home.join(".config/other")).unwrap();
        seed(&homes, &home, &src).unwrap();
        assert!(home.join(".config/other").is_dir() && home.join(".config/gh/hosts.yml").exists());
        let before: Vec<_> = walk(&home);
        let e = seed(&homes, &home, &src).unwrap_err();
        assert_eq!(e.code(), hcp_model::Code::BadSeed);
        assert!(
            e.to_string().contains(".config/gh/hosts.yml") || e.to_string().contains("link"),
            "{e}"
        );
        assert_eq!(walk(&home), before);
    }

    #[test]
    fn what_cannot_be_seeded_is_refused() {
        let (t, homes, home, src) = world();
        for bad in [
            t.path().join("absent"),
            src.join(".config/gh/hosts.yml"),
            src.join("link"),
        ] {
            let e = seed(&homes, &home, &bad).unwrap_err();
            assert_eq!(e.code(), hcp_model::Code::BadSeed, "{}", bad.display());
        }
        let l = std::os::unix::net::UnixListener::bind(src.join("sock")).unwrap();
        let e = seed(&homes, &home, &src).unwrap_err();
        drop(l);
        assert_eq!(e.code(), hcp_model::Code::BadSeed);
        assert!(walk(&home).is_empty(), "the home stays empty");
    }

    #[test]
    fn remove_and_purge() {
        let (_t, homes, home, src) = world();
        seed(&homes, &home, &src).unwrap();
        assert!(remove(&homes, &home).unwrap());
        assert!(!home.exists());
        assert!(!remove(&homes, &home).unwrap());
        seed(&homes, &home, &src).unwrap();
        assert!(purge(&homes, "gh").unwrap());
        assert!(!homes.join("gh").exists());
        assert!(purge(&homes, "../x").is_err());
    }

    fn walk(p: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        if let Ok(rd) = std::fs::read_dir(p) {
            for e in rd.flatten() {
                out.push(e.path());
                if e.file_type().unwrap().is_dir() {
                    out.extend(walk(&e.path()));
                }
            }
        }
        out.sort();
        out
    }
}
