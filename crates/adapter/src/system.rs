//! The machine's top-level directories as this process found them, once: which exist,
//! which are symlinks (merged `/usr`: `/bin` → `usr/bin`) and where each leads, for the
//! view's system directories (the view module), the rule of a bin's directory
//! ([`crate::bin_dirs`]) and the rules of a workdir (the workdir module).
//!
//! One listing of `/` tells the type of every top-level entry (`getdents` gives it), so a
//! name that is a plain directory costs nothing more; only a symlink is read and its target
//! resolved. That replaces a `readlink` or `realpath` per name per rule (about 60 system
//! calls a call before).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// What a top-level name of the machine is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Entry {
    /// Not there.
    Missing,
    /// A directory, at its own path.
    Dir,
    /// Another kind of file (not a directory, not a symlink).
    File,
    /// A symlink: its target as read, and where it leads, resolved (the target as written
    /// when it cannot be resolved).
    Link {
        /// The target as read (`usr/bin`).
        target: PathBuf,
        /// Resolved (`/usr/bin`).
        resolved: PathBuf,
    },
}

/// The top-level entries of `/`, by name (`usr`, `bin` …), as found at the first use.
fn top() -> &'static Vec<(String, Entry)> {
    static TOP: OnceLock<Vec<(String, Entry)>> = OnceLock::new();
    TOP.get_or_init(|| {
        let Ok(rd) = std::fs::read_dir("/") else {
            return Vec::new();
        };
        // (name, a directory, the target of a symlink)
        let listed: Vec<(String, bool, Option<PathBuf>)> = rd
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let t = e.file_type().ok()?;
                let target = if t.is_symlink() {
                    Some(std::fs::read_link(Path::new("/").join(&name)).ok()?)
                } else {
                    None
                };
                Some((name, t.is_dir(), target))
            })
            .collect();
        let is_dir = |n: &std::ffi::OsStr| listed.iter().any(|(m, d, _)| *d && n == m.as_str());
        listed
            .iter()
            .map(|(name, dir, target)| {
                let entry = match target {
                    Some(target) => Entry::Link {
                        target: target.clone(),
                        resolved: link_target(name, target, is_dir),
                    },
                    None if *dir => Entry::Dir,
                    None => Entry::File,
                };
                (name.clone(), entry)
            })
            .collect()
    })
}

/// Where the top-level symlink `/name` → `target` leads, as `realpath` says. A merged
/// `/usr`'s links (`bin` → `usr/bin`: relative, plain names, the first a directory of
/// `/` per `is_dir`) are resolved from the listing and one `readlink` of each further
/// component (`/usr/bin`), not a `realpath` that reads `/bin` again and `/usr`; any other
/// target through `canonicalize` (the target as written when it cannot be resolved).
fn link_target(name: &str, target: &Path, is_dir: impl Fn(&std::ffi::OsStr) -> bool) -> PathBuf {
    use std::path::Component;
    let p = Path::new("/").join(name);
    let plain = target.is_relative()
        && target
            .components()
            .all(|c| matches!(c, Component::Normal(_)));
    if plain
        && target
            .components()
            .next()
            .is_some_and(|c| is_dir(c.as_os_str()))
    {
        let mut at = PathBuf::from("/");
        let mut simple = true;
        for (i, c) in target.components().enumerate() {
            at.push(c);
            if i == 0 {
                continue; // a directory of `/`, from the listing
            }
            match std::fs::read_link(&at) {
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
                _ => {
                    simple = false;
                    break;
                }
            }
        }
        if simple {
            return at;
        }
    }
    p.canonicalize().unwrap_or_else(|_| {
        if target.is_absolute() {
            target.to_owned()
        } else {
            Path::new("/").join(target)
        }
    })
}

/// What the absolute path `p` of one component below `/` (`/usr`) is.
pub(crate) fn entry(p: &Path) -> Entry {
    let name = p
        .strip_prefix("/")
        .ok()
        .and_then(|r| r.to_str())
        .unwrap_or_default();
    top()
        .iter()
        .find(|(n, _)| n == name)
        .map_or(Entry::Missing, |(_, e)| e.clone())
}

/// `path` (absolute) with its symlinks resolved, for a system path such as `/usr`, `/bin`
/// or `/var/tmp`: what `realpath` gives, from the listing of `/` for the first component
/// and one `readlink` for each further one (none for the top-level names). A path whose
/// first component is missing is kept as written.
pub(crate) fn resolve(path: &Path) -> PathBuf {
    let mut comps = path.components();
    let (Some(std::path::Component::RootDir), Some(first)) = (comps.next(), comps.next()) else {
        return path.to_owned();
    };
    let first = Path::new("/").join(first);
    let rest = comps.as_path();
    match entry(&first) {
        Entry::Link { resolved, .. } if rest.as_os_str().is_empty() => resolved,
        Entry::Link { .. } => path.canonicalize().unwrap_or_else(|_| path.to_owned()),
        Entry::Missing | Entry::File => path.to_owned(),
        Entry::Dir => {
            let mut at = first;
            for c in rest.components() {
                at.push(c);
                match std::fs::read_link(&at) {
                    Ok(_) => return path.canonicalize().unwrap_or_else(|_| path.to_owned()),
                    Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
                    Err(_) => return path.to_owned(),
                }
            }
            at
        }
    }
}

/// [`resolve`] for the runtime's rules of a workdir (RUNTIME §4): an absolute system path
/// (`/usr`, `/var/run`) with its symlinks resolved from this process's one listing of `/`
/// and one `readlink` per further component. A top-level symlink that cannot be resolved
/// answers its target as written (`realpath` fails there).
pub fn resolve_system_path(path: &Path) -> PathBuf {
    resolve(path)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn system_paths_resolve_like_canonicalize() {
        for p in [
            "/usr", "/bin", "/sbin", "/lib", "/etc", "/var/tmp", "/tmp", "/lib64",
        ] {
            let path = Path::new(p);
            let want = path.canonicalize().unwrap_or_else(|_| path.to_owned());
            assert_eq!(resolve(path), want, "{p}");
        }
        assert_eq!(
            resolve(Path::new("/no-such-top-level-dir")),
            PathBuf::from("/no-such-top-level-dir")
        );
        assert_eq!(entry(Path::new("/usr")), Entry::Dir);
    }
}
