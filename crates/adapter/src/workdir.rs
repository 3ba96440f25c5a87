//! Which directories may be a `local` sandbox (RUNTIME §5 "The child"): never `/`, a
//! shared root, a system directory, a home or what holds one, a home's dot-directory, the
//! store or what holds it.

use crate::AdapterError;
use std::io;
use std::path::{Path, PathBuf};

/// The paths a `local` workdir is checked against.
#[derive(Debug, Clone, Copy)]
pub struct SandboxPaths<'a> {
    /// The workdir: read-only or read-write in the view, the child's cwd and `HOME`.
    pub workdir: &'a Path,
    /// Paths the workdir may neither be, hold, nor lie inside (`$HCP_HOME`), resolved
    /// (`realpath`): a write verb could write there. A workdir that breaks this is refused
    /// (`sandbox_unavailable`).
    pub protected: &'a [PathBuf],
    /// Home directories: the workdir may lie inside one but neither be nor hold one, nor
    /// lie inside one of its dot-directories (`~/.ssh`, `~/.config`, `~/.cargo` …): a
    /// project under a home is a workdir, the home itself is not. Refused likewise.
    /// Resolved, like `protected`.
    pub not_above: &'a [PathBuf],
}

/// System directories a sandbox working directory may neither be nor lie inside:
/// [`SYSTEM_READ_ONLY`](crate::SYSTEM_READ_ONLY) (a child would get write access to programs and configuration,
/// as root to all of them) and the kernel's and devices' trees.
pub const NOT_A_SANDBOX: [&str; 16] = [
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/boot", "/proc",
    "/sys", "/dev", "/run", "/var", "/opt", "/snap",
];

/// Directories whose contents may be sandboxes, but not they themselves: shared roots that
/// hold other users' or other programs' files. `/var/tmp` is also the one place under
/// `/var` a sandbox may lie in.
pub const SHARED_ROOTS: [&str; 6] = ["/tmp", "/var/tmp", "/home", "/srv", "/mnt", "/media"];

/// Refuses a working directory that is `/` or a [`SHARED_ROOTS`] directory, is or lies
/// inside a [`NOT_A_SANDBOX`] directory (`/var/tmp` apart), holds a protected path or a
/// home, is a home or lies inside a home's dot-directory, or lies inside a protected path.
/// Returns the workdir resolved.
pub(crate) fn check_sandbox_dir(paths: &SandboxPaths<'_>) -> Result<PathBuf, AdapterError> {
    let work = paths
        .workdir
        .canonicalize()
        .map_err(|e| sandbox_failed(paths.workdir, "cannot resolve the working directory", e))?;
    if work == Path::new("/") {
        return Err(AdapterError::SandboxUnavailable {
            reason: "the sandbox working directory is `/`".into(),
        });
    }
    // The shared roots and system directories as resolved, once per process.
    static RESOLVED: std::sync::OnceLock<(Vec<PathBuf>, Vec<PathBuf>)> = std::sync::OnceLock::new();
    let (shared, systems) = RESOLVED.get_or_init(|| {
        let r = |list: &[&str]| {
            list.iter()
                .map(|p| crate::system::resolve(Path::new(p)))
                .collect::<Vec<_>>()
        };
        (r(&SHARED_ROOTS), r(&NOT_A_SANDBOX))
    });
    if let Some(root) = shared.iter().find(|r| **r == work) {
        return Err(AdapterError::SandboxUnavailable {
            reason: format!(
                "the sandbox working directory `{}` is a shared directory that holds other users' files; use a directory inside it",
                root.display()
            ),
        });
    }
    let in_var_tmp = shared
        .iter()
        .any(|r| r.ends_with("var/tmp") && work.starts_with(r));
    for system in systems {
        if work.starts_with(system) && !in_var_tmp {
            return Err(AdapterError::SandboxUnavailable {
                reason: format!(
                    "the sandbox working directory `{}` is a system directory (`{}`), which a local command may not write",
                    work.display(),
                    system.display()
                ),
            });
        }
    }
    let refuse = |p: &Path, how: &str| AdapterError::SandboxUnavailable {
        reason: format!(
            "the sandbox working directory `{}` {how} `{}`, which a local command may not write",
            work.display(),
            p.display()
        ),
    };
    for p in paths.protected {
        if p.starts_with(&work) {
            return Err(refuse(p, "holds"));
        }
        if work.starts_with(p) {
            return Err(refuse(p, "lies inside"));
        }
    }
    for home in paths.not_above {
        if work == *home {
            return Err(AdapterError::SandboxUnavailable {
                reason: format!(
                    "the sandbox working directory `{}` is a home directory; use a project directory inside it",
                    work.display()
                ),
            });
        }
        if home.starts_with(&work) {
            return Err(refuse(home, "holds the home directory"));
        }
        // Dot-directories of a home hold keys, credentials, configuration, tools and
        // what runs at login; none is a sandbox.
        if let Ok(rest) = work.strip_prefix(home)
            && let Some(first) = rest.components().next()
            && first.as_os_str().as_encoded_bytes().starts_with(b".")
        {
            return Err(AdapterError::SandboxUnavailable {
                reason: format!(
                    "the sandbox working directory `{}` lies inside `{}`, a hidden directory of a home (configuration, keys, tools)",
                    work.display(),
                    home.join(first).display()
                ),
            });
        }
    }
    Ok(work)
}

pub(crate) fn sandbox_failed(path: &Path, reason: &str, e: io::Error) -> AdapterError {
    AdapterError::SandboxFailed {
        path: path.to_owned(),
        reason: reason.to_owned(),
        source: Some(e),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn refused(paths: &SandboxPaths<'_>, needle: &str) {
        let e = check_sandbox_dir(paths).unwrap_err();
        assert_eq!(
            e.code(),
            "sandbox_unavailable",
            "{}",
            paths.workdir.display()
        );
        assert!(e.to_string().contains(needle), "{e}");
    }

    #[test]
    fn a_workdir_that_is_a_shared_root_a_home_or_holds_the_store_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("hcp-home");
        std::fs::create_dir(&store).unwrap();
        let protected = [store.clone()];
        let base = SandboxPaths {
            workdir: dir.path(),
            protected: &protected,
            not_above: &[],
        };
        refused(&base, "holds");
        refused(
            &SandboxPaths {
                workdir: Path::new("/"),
                ..base
            },
            "is `/`",
        );
        let inside = store.join("state");
        std::fs::create_dir(&inside).unwrap();
        refused(
            &SandboxPaths {
                workdir: &inside,
                ..base
            },
            "lies inside",
        );
        // Inside a home: a workdir; the home itself, above it, or in a dot-directory: not.
        let home = [dir.path().to_owned()];
        let project = dir.path().join("project");
        std::fs::create_dir(&project).unwrap();
        let in_home = SandboxPaths {
            workdir: &project,
            protected: &[],
            not_above: &home,
        };
        assert!(check_sandbox_dir(&in_home).is_ok());
        refused(
            &SandboxPaths {
                workdir: dir.path(),
                ..in_home
            },
            "is a home directory",
        );
        let nested = [project.clone()];
        refused(
            &SandboxPaths {
                workdir: dir.path(),
                not_above: &nested,
                ..in_home
            },
            "holds the home",
        );
        let dot = dir.path().join(".cargo/registry");
        std::fs::create_dir_all(&dot).unwrap();
        refused(
            &SandboxPaths {
                workdir: &dot,
                ..in_home
            },
            "hidden directory",
        );
        for root in ["/tmp", "/var/tmp", "/home"] {
            if Path::new(root).is_dir() {
                refused(
                    &SandboxPaths {
                        workdir: Path::new(root),
                        not_above: &[],
                        ..in_home
                    },
                    "shared directory",
                );
            }
        }
        let var_tmp = tempfile::tempdir_in("/var/tmp").unwrap();
        assert!(
            check_sandbox_dir(&SandboxPaths {
                workdir: var_tmp.path(),
                not_above: &[],
                ..in_home
            })
            .is_ok()
        );
        for system in [
            "/usr",
            "/usr/share",
            "/etc",
            "/proc/self",
            "/sys/kernel",
            "/dev",
        ] {
            refused(
                &SandboxPaths {
                    workdir: Path::new(system),
                    ..in_home
                },
                "system directory",
            );
        }
    }
}
