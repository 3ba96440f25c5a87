//! The store's quarantine (RUNTIME §5.1, "Protected names"): what a call created under a
//! protected name of its workdir (`.git/hooks`, `.claude`, `.envrc` …), moved out of the
//! workdir when the call ends and before it answers, kept owner-only under
//! `$HCP_HOME/quarantine/<audit id>/files/<name>` for the owner to look at (`hcp doctor`
//! lists it) and delete. `quarantine/<audit id>/names.json` lists the names moved, with
//! whether each was kept whole (`[{"name", "complete"}]`).
//!
//! A move is one `rename` when the workdir and the store share a filesystem. Across
//! filesystems the name is copied — directories, regular files and symbolic links (as
//! links, never followed), at most [`KEEP_BYTES`] of file content and [`KEEP_ENTRIES`]
//! entries per call — and then removed from the workdir whatever the copy kept: the
//! workdir never keeps what the call planted, and a call cannot fill the store's disk
//! through the quarantine. Special files (FIFOs, sockets) are removed, never opened.
//!
//! This module moves; which names a call created is the runtime's (`hcp_runtime::quarantine`).

use crate::error::{StoreError, StoreResult};
use crate::home::{Home, StoreDir};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

/// The most file content a call's quarantine keeps when it must copy (another
/// filesystem): 8 MiB; what lies beyond is removed from the workdir and not kept.
pub const KEEP_BYTES: u64 = 8 << 20;

/// The most entries (files, directories, links) a call's quarantine keeps when it must
/// copy: 4096.
pub const KEEP_ENTRIES: u64 = 4096;

/// The deepest directory a copy descends into: 64 levels.
const MAX_DEPTH: usize = 64;

/// One protected name moved out of a workdir.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Moved {
    /// The name, relative to the workdir (`.git/hooks`).
    pub name: PathBuf,
    /// Where it is now (`$HCP_HOME/quarantine/<audit id>/files/.git/hooks`).
    pub to: PathBuf,
    /// Whether everything it held is kept (false: a copy across filesystems left out
    /// special files, or content past [`KEEP_BYTES`] / [`KEEP_ENTRIES`]).
    pub complete: bool,
}

/// What the quarantine holds for one call.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Held {
    /// The call's audit id (the directory's name).
    pub audit_id: String,
    /// The names kept, relative to the workdir they came from, sorted.
    pub names: Vec<PathBuf>,
    /// The bytes of regular files kept.
    pub bytes: u64,
    /// The directory.
    pub dir: PathBuf,
}

/// `$HCP_HOME/quarantine/`.
pub fn dir(home: &Home) -> PathBuf {
    home.dir(StoreDir::Quarantine)
}

/// Whether `name` is a relative path of normal components only (no `..`, `.`, root): what
/// may name a protected name of a workdir.
pub fn plain_relative(name: &Path) -> bool {
    name.components().next().is_some()
        && name.components().all(|c| matches!(c, Component::Normal(_)))
}

/// Whether `id` can name a directory: one component, no control character.
fn plain_id(id: &str) -> bool {
    !id.is_empty()
        && id != "."
        && id != ".."
        && !id.contains('/')
        && !id.chars().any(char::is_control)
}

/// Moves `workdir/name` into the quarantine of call `audit_id` (see the module docs).
/// `name` is not followed: a symbolic link is moved as a link.
///
/// # Errors
/// [`StoreError::Unusable`] for an `audit_id` or `name` that cannot name a place
/// (absolute, `..`); [`StoreError::Io`] naming the path that could not be made, moved,
/// copied or removed. When the copy fails the name is still removed from the workdir
/// where that is possible, and the error says what was not kept.
pub fn quarantine(home: &Home, audit_id: &str, workdir: &Path, name: &Path) -> StoreResult<Moved> {
    if !plain_id(audit_id) || !plain_relative(name) {
        return Err(StoreError::Unusable {
            path: dir(home).join(audit_id).join(name),
            reason: "a quarantined name is a relative path under a call's audit id".into(),
        });
    }
    let src = workdir.join(name);
    let call = dir(home).join(audit_id);
    let to = call.join(FILES).join(name);
    let parent = to.parent().unwrap_or(&to);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(parent)
        .map_err(|e| StoreError::io("create", parent, e))?;
    // The top directory is the owner's alone, whatever the umask made of it.
    let top = dir(home);
    let _ = std::fs::set_permissions(&top, std::fs::Permissions::from_mode(0o700));
    let complete = match std::fs::rename(&src, &to) {
        Ok(()) => true,
        Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
            let mut budget = Budget {
                bytes: KEEP_BYTES,
                entries: KEEP_ENTRIES,
                complete: true,
            };
            let copied = copy(&src, &to, &mut budget, 0);
            let removed = remove(&src);
            copied?;
            removed?;
            budget.complete
        }
        Err(e) => return Err(StoreError::io("move into the quarantine", &src, e)),
    };
    crate::atomic::sync_dir(parent)?;
    let mut names = read_names(&call);
    names.retain(|n| n.name != name);
    names.push(Name {
        name: name.to_owned(),
        complete,
    });
    let bytes = serde_json::to_vec(&names)
        .map_err(|e| StoreError::io("write", call.join(NAMES), std::io::Error::other(e)))?;
    crate::atomic::write_atomic(&call.join(NAMES), &bytes)?;
    Ok(Moved {
        name: name.to_owned(),
        to,
        complete,
    })
}

/// The directory of a call's quarantine that holds the names moved.
const FILES: &str = "files";
/// The list of a call's quarantined names.
const NAMES: &str = "names.json";

/// One entry of `names.json`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Name {
    name: PathBuf,
    complete: bool,
}

/// The names of `names.json` in a call's directory; none when it is absent or damaged
/// (the files are what is kept; the list only names them).
fn read_names(call: &Path) -> Vec<Name> {
    std::fs::read(call.join(NAMES))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// Removes `workdir/name` (a tree, a file, a link: never followed) without keeping it:
/// what the runtime does with a name it could not move, so that it is never left in place.
///
/// # Errors
/// [`StoreError::Unusable`] for a `name` that is not a plain relative path;
/// [`StoreError::Io`] when it cannot be removed.
pub fn discard(workdir: &Path, name: &Path) -> StoreResult<()> {
    if !plain_relative(name) {
        return Err(StoreError::Unusable {
            path: workdir.join(name),
            reason: "a protected name is a relative path of the workdir".into(),
        });
    }
    remove(&workdir.join(name))
}

struct Budget {
    bytes: u64,
    entries: u64,
    complete: bool,
}

fn remove(path: &Path) -> StoreResult<()> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(StoreError::io("read", path, e)),
    };
    let r = if meta.is_dir() {
        // `remove_dir_all` never follows a symbolic link inside the tree.
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    };
    r.map_err(|e| StoreError::io("remove from the workdir", path, e))
}

/// Copies `src` to `dst` without following a symbolic link (see the module docs).
fn copy(src: &Path, dst: &Path, budget: &mut Budget, depth: usize) -> StoreResult<()> {
    let meta = std::fs::symlink_metadata(src).map_err(|e| StoreError::io("read", src, e))?;
    if budget.entries == 0 || depth > MAX_DEPTH {
        budget.complete = false;
        return Ok(());
    }
    budget.entries -= 1;
    let ft = meta.file_type();
    if ft.is_symlink() {
        let target = std::fs::read_link(src).map_err(|e| StoreError::io("read", src, e))?;
        std::os::unix::fs::symlink(&target, dst).map_err(|e| StoreError::io("create", dst, e))?;
    } else if ft.is_dir() {
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(dst)
            .map_err(|e| StoreError::io("create", dst, e))?;
        let mut names: Vec<_> = std::fs::read_dir(src)
            .map_err(|e| StoreError::io("read", src, e))?
            .filter_map(Result::ok)
            .map(|e| e.file_name())
            .collect();
        names.sort();
        for n in names {
            copy(&src.join(&n), &dst.join(&n), budget, depth + 1)?;
        }
    } else if ft.is_file() {
        if meta.len() > budget.bytes {
            budget.complete = false;
            return Ok(());
        }
        budget.bytes -= meta.len();
        let mut from = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(src)
            .map_err(|e| StoreError::io("read", src, e))?;
        let mut to = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(dst)
            .map_err(|e| StoreError::io("create", dst, e))?;
        // At most what was measured: a file that grew meanwhile is cut there.
        let mut limited = std::io::Read::take(&mut from, meta.len());
        std::io::copy(&mut limited, &mut to).map_err(|e| StoreError::io("copy", src, e))?;
    } else {
        // A FIFO, a socket, a device: removed with the rest, never opened.
        budget.complete = false;
    }
    Ok(())
}

/// What the quarantine holds, one entry per call, oldest audit id first (ids sort by
/// time): for `hcp doctor`. An absent quarantine holds nothing.
///
/// # Errors
/// [`StoreError::Io`] when the quarantine exists and cannot be read.
pub fn list(home: &Home) -> StoreResult<Vec<Held>> {
    let top = dir(home);
    let entries = match std::fs::read_dir(&top) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StoreError::io("read", &top, e)),
    };
    let mut out = Vec::new();
    for e in entries.filter_map(Result::ok) {
        let Some(audit_id) = e.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        let dir = e.path();
        if !std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
            continue;
        }
        let mut names: Vec<PathBuf> = read_names(&dir).into_iter().map(|n| n.name).collect();
        if names.is_empty() {
            // A list lost to a crash between the move and its write: the top entries.
            names = std::fs::read_dir(dir.join(FILES))
                .map(|rd| {
                    rd.filter_map(Result::ok)
                        .map(|e| PathBuf::from(e.file_name()))
                        .collect()
                })
                .unwrap_or_default();
        }
        names.sort();
        out.push(Held {
            audit_id,
            names,
            bytes: tree_bytes(&dir.join(FILES), 0),
            dir,
        });
    }
    out.sort_by(|a, b| a.audit_id.cmp(&b.audit_id));
    Ok(out)
}

fn tree_bytes(path: &Path, depth: usize) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if meta.is_file() {
        return meta.len();
    }
    if !meta.is_dir() || depth > MAX_DEPTH {
        return 0;
    }
    std::fs::read_dir(path)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| tree_bytes(&e.path(), depth + 1))
                .sum()
        })
        .unwrap_or(0)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn world() -> (tempfile::TempDir, Home, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let home = Home::open(t.path().join("store")).unwrap();
        let work = t.path().join("work");
        std::fs::create_dir_all(work.join(".git/hooks")).unwrap();
        std::fs::write(work.join(".git/hooks/pre-commit"), "#!/bin/sh\nhcp grant\n").unwrap();
        std::fs::write(work.join(".envrc"), "export X=1\n").unwrap();
        (t, home, work)
    }

    #[test]
    fn a_name_is_moved_whole_and_listed() {
        let (_t, home, work) = world();
        let m = quarantine(&home, "a1", &work, Path::new(".git/hooks")).unwrap();
        assert!(m.complete);
        assert!(!work.join(".git/hooks").exists());
        assert!(work.join(".git").is_dir(), "only the name moves");
        assert_eq!(
            std::fs::read_to_string(m.to.join("pre-commit")).unwrap(),
            "#!/bin/sh\nhcp grant\n"
        );
        quarantine(&home, "a1", &work, Path::new(".envrc")).unwrap();
        std::fs::create_dir_all(work.join(".agents/skills/x")).unwrap();
        std::fs::write(work.join(".agents/skills/x/SKILL.md"), "---\n").unwrap();
        quarantine(&home, "a1", &work, Path::new(".agents")).unwrap();
        let held = list(&home).unwrap();
        assert_eq!(held.len(), 1);
        assert_eq!(
            held[0].names,
            vec![
                PathBuf::from(".agents"),
                PathBuf::from(".envrc"),
                PathBuf::from(".git/hooks")
            ]
        );
        assert_eq!(held[0].bytes, 11 + 20 + 4);
        let mode = std::fs::metadata(dir(&home)).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "owner only");
    }

    #[test]
    fn a_symlink_is_moved_as_a_link_and_never_followed() {
        let (t, home, work) = world();
        let outside = t.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("keep"), "owner's").unwrap();
        std::os::unix::fs::symlink(&outside, work.join(".claude")).unwrap();
        let m = quarantine(&home, "a2", &work, Path::new(".claude")).unwrap();
        assert!(std::fs::symlink_metadata(&m.to).unwrap().is_symlink());
        assert_eq!(
            std::fs::read_to_string(outside.join("keep")).unwrap(),
            "owner's"
        );
        assert!(std::fs::symlink_metadata(work.join(".claude")).is_err());
    }

    #[test]
    fn a_copy_is_bounded_and_the_workdir_is_emptied_anyway() {
        let (_t, home, work) = world();
        let big = work.join(".agents");
        std::fs::create_dir_all(big.join("skills/x")).unwrap();
        std::fs::write(big.join("small"), "x").unwrap();
        let f = std::fs::File::create(big.join("huge")).unwrap();
        f.set_len(KEEP_BYTES + 1).unwrap();
        let to = home.root().join("copy");
        std::fs::create_dir_all(&to).unwrap();
        let mut budget = Budget {
            bytes: KEEP_BYTES,
            entries: KEEP_ENTRIES,
            complete: true,
        };
        copy(&big, &to.join(".agents"), &mut budget, 0).unwrap();
        remove(&big).unwrap();
        assert!(!budget.complete);
        assert!(to.join(".agents/small").exists());
        assert!(!to.join(".agents/huge").exists());
        assert!(!big.exists());
    }

    #[test]
    fn names_that_leave_their_place_are_refused() {
        let (_t, home, work) = world();
        for (id, name) in [
            ("a", "../x"),
            ("a", "/etc"),
            ("..", ".envrc"),
            ("a/b", ".envrc"),
        ] {
            assert!(
                quarantine(&home, id, &work, Path::new(name)).is_err(),
                "{id} {name}"
            );
        }
        assert!(work.join(".envrc").exists());
    }
}
