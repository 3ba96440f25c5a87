//! What of `/etc` a call sees (RUNTIME §5.1, the `/etc` row and "symlinks of the view that
//! point outside it"): the scan that finds the entries a view covers and the targets of
//! `/etc`'s symlinks it binds.
//!
//! An entry of `/etc` is in the view when it and every directory above it up to `/etc`
//! grant others read (a directory: read and search). [`scan_etc`] walks `/etc` once, without
//! following symlinks, and lists the topmost entries that fail the rule ([`EtcIndex::covered`]:
//! `/etc/shadow`, `/etc/ssl/private` …; a socket, a FIFO or a device node is never in the
//! view either), and the symlinks whose target lies outside the view's system directories
//! but is a file or directory every user may read ([`EtcIndex::links`]: `/etc/resolv.conf` →
//! the resolver's stub file under `/run`). The runtime keeps the result in the store and
//! refreshes it at install, at the first call of a boot and on demand; each call's view covers
//! the first list and binds the second read-only at its own path.
//!
//! The scan costs a directory walk of `/etc` (about a thousand `getdents`/`lstat` here, a
//! few milliseconds), which is why it is not made per call. What a call checks instead is
//! cheap ([`EtcIndex::is_current`]): the change time of `/etc` and of each directory that
//! holds a covered entry, as the scan found them ([`EtcIndex::stamps`], a handful of
//! `statx`). An entry added, removed or renamed there since the scan makes the index stale,
//! and the runtime scans again before the call runs. What this does not see: an existing
//! entry made unreadable in place (`chmod`, which changes the entry's time, not its
//! directory's), and a new entry in a directory that holds no covered one; those wait for
//! the next scan (an install, `hcp doctor --refresh`, the next boot).

use serde::{Deserialize, Serialize};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The view's directories that are there for every call whatever the index says: a link
/// target beneath one of them needs no bind of its own.
const IN_EVERY_VIEW: [&str; 10] = [
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/proc", "/dev",
];

/// Symlinks followed at most while resolving one link of `/etc` (a loop ends the walk).
const MAX_LINK_DEPTH: usize = 40;

/// One entry of `/etc` the view covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Covered {
    /// The absolute path (`/etc/shadow`).
    pub path: PathBuf,
    /// A directory (covered by an empty directory), else anything else (covered by an
    /// empty file).
    pub dir: bool,
}

/// A symlink of `/etc` whose target lies outside the view's system directories and every
/// user may read: the view binds the target, read-only, at its own path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkTarget {
    /// The symlink (`/etc/resolv.conf`).
    pub link: PathBuf,
    /// Its target, every symlink resolved (`/run/systemd/resolve/stub-resolv.conf`).
    pub target: PathBuf,
    /// Whether the target is a directory (else a regular file).
    pub dir: bool,
}

/// A directory's change time as the scan saw it, before it read the directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stamp {
    /// The directory (`/etc`, `/etc/ssl`).
    pub path: PathBuf,
    /// Its `st_ctime` in nanoseconds since the Unix epoch.
    pub ctime_ns: i64,
}

/// What [`scan_etc`] found: the two lists a view needs of `/etc`, each sorted by path, and
/// the stamps that tell whether they still hold.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EtcIndex {
    /// The topmost entries that are not in the view (what is beneath one is not listed).
    pub covered: Vec<Covered>,
    /// The targets outside the system directories of `/etc`'s symlinks, one per target.
    pub links: Vec<LinkTarget>,
    /// `/etc` and every directory holding a covered entry, with its change time before the
    /// scan read it (see the module docs); empty in an index of an earlier hcp, which
    /// [`is_current`](Self::is_current) never takes for current.
    #[serde(default)]
    pub stamps: Vec<Stamp>,
}

impl EtcIndex {
    /// Whether `/etc` and each directory holding a covered entry are unchanged since the
    /// scan (one `statx` each): no entry was added, removed or renamed in them. `false`
    /// for an index without stamps.
    pub fn is_current(&self) -> bool {
        !self.stamps.is_empty()
            && self.stamps.iter().all(|s| {
                std::fs::symlink_metadata(&s.path).is_ok_and(|m| ctime_ns(&m) == s.ctime_ns)
            })
    }
}

fn ctime_ns(m: &std::fs::Metadata) -> i64 {
    m.ctime()
        .saturating_mul(1_000_000_000)
        .saturating_add(m.ctime_nsec())
}

/// Scans `/etc` (see the module docs).
pub fn scan_etc() -> EtcIndex {
    scan_etc_at(Path::new("/etc"))
}

/// [`scan_etc`] of another directory standing for `/etc` (tests). A link target is "in the
/// view" when it lies beneath one of the view's fixed directories (`/usr`, `/etc`, `/proc`
/// …) or beneath `etc` itself.
pub fn scan_etc_at(etc: &Path) -> EtcIndex {
    let mut index = EtcIndex::default();
    // Every directory walked, with its change time before it was read.
    let mut walked: Vec<Stamp> = Vec::new();
    match std::fs::symlink_metadata(etc) {
        Ok(m) if m.is_dir() && others_may_enter(&m) => {
            walked.push(Stamp {
                path: etc.to_owned(),
                ctime_ns: ctime_ns(&m),
            });
            walk(etc, etc, &mut index, &mut walked);
        }
        Ok(m) => {
            index.covered.push(Covered {
                path: etc.to_owned(),
                dir: m.is_dir(),
            });
            walked.push(Stamp {
                path: etc.to_owned(),
                ctime_ns: ctime_ns(&m),
            });
        }
        Err(_) => {}
    }
    index.covered.sort_by(|a, b| a.path.cmp(&b.path));
    index.links.sort_by(|a, b| a.target.cmp(&b.target));
    index.links.dedup_by(|a, b| a.target == b.target);
    index.stamps = walked
        .into_iter()
        .filter(|s| {
            s.path == etc
                || index
                    .covered
                    .iter()
                    .any(|c| c.path.parent() == Some(s.path.as_path()))
        })
        .collect();
    index
}

fn walk(etc: &Path, dir: &Path, index: &mut EtcIndex, walked: &mut Vec<Stamp>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().collect();
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for e in entries {
        let path = e.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let t = meta.file_type();
        if t.is_symlink() {
            if let Some(link) = outside_target(etc, &path) {
                index.links.push(link);
            }
        } else if t.is_dir() {
            if others_may_enter(&meta) {
                walked.push(Stamp {
                    path: path.clone(),
                    ctime_ns: ctime_ns(&meta),
                });
                walk(etc, &path, index, walked);
            } else {
                index.covered.push(Covered { path, dir: true });
            }
        } else if !(t.is_file() && meta.mode() & 0o004 != 0) {
            // Not world-readable, or a socket, FIFO or device node: never in a view.
            index.covered.push(Covered { path, dir: false });
        }
    }
}

/// Whether a directory grants others read and search.
fn others_may_enter(meta: &std::fs::Metadata) -> bool {
    meta.mode() & 0o005 == 0o005
}

/// The target of symlink `link` when it lies outside the view and every user may read it.
fn outside_target(etc: &Path, link: &Path) -> Option<LinkTarget> {
    let target = resolve(link)?;
    let in_view = target.starts_with(etc)
        || IN_EVERY_VIEW
            .iter()
            .any(|d| target.starts_with(Path::new(d)));
    if in_view {
        return None;
    }
    let meta = std::fs::metadata(&target).ok()?;
    let ok_kind = meta.is_file() || meta.is_dir();
    let readable = if meta.is_dir() {
        others_may_enter(&meta)
    } else {
        meta.mode() & 0o004 != 0
    };
    if !ok_kind || !readable || !ancestors_searchable(&target) {
        return None;
    }
    Some(LinkTarget {
        link: link.to_owned(),
        target,
        dir: meta.is_dir(),
    })
}

/// Every directory above `path` grants others search.
fn ancestors_searchable(path: &Path) -> bool {
    path.ancestors()
        .skip(1)
        .all(|d| std::fs::metadata(d).is_ok_and(|m| m.mode() & 0o001 != 0))
}

/// `link` with every symlink resolved (like `realpath`), bounded, or `None` when it dangles.
fn resolve(link: &Path) -> Option<PathBuf> {
    let mut at = link.to_owned();
    for _ in 0..MAX_LINK_DEPTH {
        match std::fs::read_link(&at) {
            Ok(t) => {
                at = if t.is_absolute() {
                    t
                } else {
                    at.parent().unwrap_or(Path::new("/")).join(t)
                };
            }
            Err(_) => return at.canonicalize().ok(),
        }
    }
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &Path, m: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    }

    #[test]
    fn what_others_may_not_read_is_covered_and_outside_links_are_listed() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().canonicalize().unwrap();
        mode(&root, 0o755);
        let etc = root.join("etc");
        for dir in [
            "etc/ssl/private",
            "etc/ssl/certs",
            "etc/open",
            "run/resolve",
            "var/secret",
        ] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        for f in [
            "etc/hostname",
            "etc/shadow",
            "etc/ssl/private/key.pem",
            "etc/ssl/certs/ca.pem",
            "etc/open/conf",
            "run/resolve/stub.conf",
            "var/secret/token",
        ] {
            std::fs::write(root.join(f), "x").unwrap();
            mode(&root.join(f), 0o644);
        }
        mode(&root.join("etc/shadow"), 0o640);
        mode(&root.join("etc/ssl/private"), 0o700);
        mode(&root.join("var/secret"), 0o700);
        std::os::unix::fs::symlink(root.join("run/resolve/stub.conf"), etc.join("resolv.conf"))
            .unwrap();
        std::os::unix::fs::symlink("../var/secret/token", etc.join("token")).unwrap();
        std::os::unix::fs::symlink("hostname", etc.join("name")).unwrap();
        std::os::unix::fs::symlink("/nonexistent/x", etc.join("dangling")).unwrap();
        let sock = etc.join("open/daemon.sock");
        let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        mode(&sock, 0o666);
        let index = scan_etc_at(&etc);
        assert_eq!(
            index.covered,
            vec![
                Covered {
                    path: etc.join("open/daemon.sock"),
                    dir: false
                },
                Covered {
                    path: etc.join("shadow"),
                    dir: false
                },
                Covered {
                    path: etc.join("ssl/private"),
                    dir: true
                },
            ]
        );
        assert_eq!(
            index.links,
            vec![LinkTarget {
                link: etc.join("resolv.conf"),
                target: root.join("run/resolve/stub.conf"),
                dir: false,
            }]
        );
    }

    #[test]
    fn an_entry_added_beside_a_covered_one_makes_the_index_stale() {
        let d = tempfile::tempdir().unwrap();
        let etc = d.path().canonicalize().unwrap().join("etc");
        std::fs::create_dir_all(etc.join("ssl/private")).unwrap();
        std::fs::create_dir_all(etc.join("open")).unwrap();
        mode(&etc.join("ssl/private"), 0o700);
        let index = scan_etc_at(&etc);
        let stamped: Vec<&Path> = index.stamps.iter().map(|s| s.path.as_path()).collect();
        assert_eq!(stamped, [etc.as_path(), etc.join("ssl").as_path()]);
        assert!(index.is_current());
        // A directory with no covered entry is not watched.
        std::fs::write(etc.join("open/new"), "x").unwrap();
        assert!(index.is_current());
        // A secret made beside a covered entry, or at the top: the index no longer holds.
        std::fs::write(etc.join("ssl/new.key"), "x").unwrap();
        assert!(!index.is_current());
        let index = scan_etc_at(&etc);
        assert!(index.is_current());
        std::fs::write(etc.join("new-secret"), "x").unwrap();
        assert!(!index.is_current());
        // An index of an earlier hcp, without stamps, is never current.
        let old = EtcIndex {
            stamps: Vec::new(),
            ..scan_etc_at(&etc)
        };
        assert!(!old.is_current());
    }

    #[test]
    fn the_real_etc_scans() {
        let index = scan_etc();
        assert!(
            index.covered.iter().all(|c| c.path.starts_with("/etc")),
            "{index:?}"
        );
        if Path::new("/etc/shadow").exists() {
            assert!(
                index
                    .covered
                    .iter()
                    .any(|c| c.path == Path::new("/etc/shadow")),
                "{index:?}"
            );
        }
    }
}
