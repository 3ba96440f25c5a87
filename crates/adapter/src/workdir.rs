//! Which directories may be a `local` sandbox (RUNTIME §5 "The child"): never `/`, a
//! shared root, a system directory, a home or what holds one, a home's dot-directory, the
//! store or what holds it.

use crate::AdapterError;
use std::io;
use std::path::{Path, PathBuf};

/// The paths of one `local` exec.
#[derive(Debug, Clone, Copy)]
pub struct SandboxPaths<'a> {
    /// The sandbox working directory: read-write, the child's cwd and `HOME`.
    pub workdir: &'a Path,
    /// The private temporary directory ([`PrivateTmp`](crate::PrivateTmp)): read-write, the child's `TMPDIR`.
    pub tmpdir: &'a Path,
    /// The pinned bin: read and execute.
    pub bin: &'a Path,
    /// More paths to read and execute beneath, never write (an interpreter outside the
    /// system paths, say).
    pub extra_ro: &'a [PathBuf],
    /// Paths the sandbox may neither be, hold, nor lie inside (`$HCP_HOME`): the child
    /// could write there. A working directory that breaks this is refused
    /// (`sandbox_unavailable`).
    pub protected: &'a [PathBuf],
    /// Home directories: the sandbox may lie inside one but neither be nor hold one, nor
    /// lie inside one of its dot-directories (`~/.ssh`, `~/.config`, `~/.cargo` …): a
    /// project under a home is a sandbox, the home itself is not. Refused likewise.
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
/// inside a [`NOT_A_SANDBOX`] directory (`/var/tmp` apart), holds a protected path, a
/// home or the directory the private temporary directory was made in, is a home or lies
/// inside a home's dot-directory, or lies inside a protected path.
pub(crate) fn check_sandbox_dir(paths: &SandboxPaths<'_>) -> Result<(), AdapterError> {
    let work = paths
        .workdir
        .canonicalize()
        .map_err(|e| sandbox_failed(paths.workdir, "cannot resolve the working directory", e))?;
    if work == Path::new("/") {
        return Err(AdapterError::SandboxUnavailable {
            reason: "the sandbox working directory is `/`".into(),
        });
    }
    let resolve = |p: &PathBuf| p.canonicalize().unwrap_or_else(|_| p.clone());
    let shared: Vec<PathBuf> = SHARED_ROOTS
        .iter()
        .map(|p| resolve_system(Path::new(p)))
        .collect();
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
    for system in NOT_A_SANDBOX.iter().map(|p| resolve_system(Path::new(p))) {
        if work.starts_with(&system) && !in_var_tmp {
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
    for p in paths.protected.iter().map(resolve) {
        if p.starts_with(&work) {
            return Err(refuse(&p, "holds"));
        }
        if work.starts_with(&p) {
            return Err(refuse(&p, "lies inside"));
        }
    }
    for home in paths.not_above.iter().map(resolve) {
        if work == home {
            return Err(AdapterError::SandboxUnavailable {
                reason: format!(
                    "the sandbox working directory `{}` is a home directory; use a project directory inside it",
                    work.display()
                ),
            });
        }
        if home.starts_with(&work) {
            return Err(refuse(&home, "holds the home directory"));
        }
        // Dot-directories of a home hold keys, credentials, configuration, tools and
        // what runs at login; none is a sandbox.
        if let Ok(rest) = work.strip_prefix(&home)
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
    // The directory private temporary directories are made in (`/tmp`): holding it
    // would hand the child every other exec's `TMPDIR`.
    if let Some(base) = paths.tmpdir.parent().map(|p| resolve(&p.to_path_buf()))
        && base.starts_with(&work)
    {
        return Err(refuse(
            &base,
            "holds the directory of the private temporary directories,",
        ));
    }
    Ok(())
}

/// `path` with symlinks resolved, for a system path such as `/usr` or `/var/tmp`: one
/// `readlink` a component that is not a symlink (the common case), `canonicalize` from
/// the first that is; a path that does not exist is kept as written.
pub(crate) fn resolve_system(path: &Path) -> PathBuf {
    let mut at = PathBuf::from("/");
    for c in path.components().skip(1) {
        at.push(c);
        match std::fs::read_link(&at) {
            Ok(_) => return path.canonicalize().unwrap_or_else(|_| path.to_owned()),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
            Err(_) => return path.to_owned(),
        }
    }
    at
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
    use crate::{
        Confinement, LandlockSupport, LimitOverrides, Network, ResourceLimits, SandboxPolicy,
    };
    use hcp_model::Code;
    use pretty_assertions::assert_eq;

    const LIMITS: ResourceLimits = ResourceLimits {
        cpu_seconds: 10,
        address_space_bytes: 1 << 30,
        open_files: 256,
        file_size_bytes: 1 << 20,
        processes: 100,
    };

    #[test]
    fn system_paths_resolve_like_canonicalize() {
        for p in [
            "/usr",
            "/bin",
            "/lib64",
            "/var/tmp",
            "/etc",
            "/nonexistent-hcp/x",
        ] {
            let want = Path::new(p)
                .canonicalize()
                .unwrap_or_else(|_| PathBuf::from(p));
            assert_eq!(resolve_system(Path::new(p)), want, "{p}");
        }
    }

    #[test]
    fn overrides_only_tighten() {
        let o = LimitOverrides {
            cpu_seconds: Some(5),
            open_files: Some(100_000),
            ..LimitOverrides::default()
        };
        assert_eq!(
            LIMITS.tightened(&o),
            ResourceLimits {
                cpu_seconds: 5,
                ..LIMITS
            }
        );
    }

    #[test]
    fn unconfined_without_landlock_unless_required() {
        let dir = tempfile::tempdir().unwrap();
        let paths = SandboxPaths {
            workdir: dir.path(),
            tmpdir: dir.path(),
            bin: Path::new("/bin/sh"),
            extra_ro: &[],
            protected: &[],
            not_above: &[],
        };
        let mut policy = SandboxPolicy {
            require: false,
            network: Network::Allow,
            limits: LIMITS,
        };
        let none = LandlockSupport::NotImplemented;
        let (c, report) = Confinement::for_local_land_with(none, &paths, &policy).unwrap();
        assert!(!c.is_landlocked());
        assert_eq!(report.summary(), "unconfined");
        assert_eq!(report.reason.as_deref(), Some("the kernel has no landlock"));
        policy.require = true;
        let e = Confinement::for_local_land_with(none, &paths, &policy).unwrap_err();
        assert_eq!(
            (e.code(), e.code().exit_status()),
            (Code::SandboxUnavailable, 77)
        );
        policy.require = false;
        policy.network = Network::Deny;
        let e = Confinement::for_local_land_with(none, &paths, &policy).unwrap_err();
        assert_eq!(e.code(), "sandbox_unavailable");
        let e =
            Confinement::for_local_land_with(LandlockSupport::Abi(3), &paths, &policy).unwrap_err();
        assert_eq!(e.code(), "sandbox_unavailable");
    }

    #[test]
    fn a_workdir_holding_a_protected_path_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("hcp-home");
        std::fs::create_dir(&home).unwrap();
        let protected = [home];
        let paths = SandboxPaths {
            workdir: dir.path(),
            tmpdir: dir.path(),
            bin: Path::new("/bin/sh"),
            extra_ro: &[],
            protected: &protected,
            not_above: &[],
        };
        let policy = SandboxPolicy {
            require: false,
            network: Network::Allow,
            limits: LIMITS,
        };
        let e = Confinement::for_local_land(&paths, &policy).unwrap_err();
        assert_eq!(e.code(), "sandbox_unavailable");
        let root = SandboxPaths {
            workdir: Path::new("/"),
            protected: &[],
            ..paths
        };
        let e = Confinement::for_local_land(&root, &policy).unwrap_err();
        assert_eq!(e.code(), "sandbox_unavailable");
        // Inside `$HCP_HOME`: refused; inside `$HOME`: a sandbox; `$HOME` itself: refused.
        let inside = protected[0].join("state");
        std::fs::create_dir(&inside).unwrap();
        let within = SandboxPaths {
            workdir: &inside,
            ..paths
        };
        let e = Confinement::for_local_land(&within, &policy).unwrap_err();
        assert!(e.to_string().contains("lies inside"), "{e}");
        let home = [dir.path().to_owned()];
        let project = dir.path().join("project");
        std::fs::create_dir(&project).unwrap();
        let in_home = SandboxPaths {
            workdir: &project,
            protected: &[],
            not_above: &home,
            ..paths
        };
        assert!(Confinement::for_local_land(&in_home, &policy).is_ok());
        let at_home = SandboxPaths {
            workdir: dir.path(),
            ..in_home
        };
        let e = Confinement::for_local_land(&at_home, &policy).unwrap_err();
        assert!(e.to_string().contains("is a home directory"), "{e}");
        // Above the home, or inside one of its dot-directories: refused.
        let nested_home = [project.clone()];
        let above_home = SandboxPaths {
            workdir: dir.path(),
            not_above: &nested_home,
            ..in_home
        };
        let e = Confinement::for_local_land(&above_home, &policy).unwrap_err();
        assert!(e.to_string().contains("holds the home"), "{e}");
        let dot = dir.path().join(".cargo/registry");
        std::fs::create_dir_all(&dot).unwrap();
        let in_dot = SandboxPaths {
            workdir: &dot,
            ..in_home
        };
        let e = Confinement::for_local_land(&in_dot, &policy).unwrap_err();
        assert!(e.to_string().contains("hidden directory"), "{e}");
        // Shared roots themselves: refused; inside them, and inside /var/tmp: a sandbox.
        for root in ["/tmp", "/var/tmp", "/home"] {
            if !Path::new(root).is_dir() {
                continue;
            }
            let at = SandboxPaths {
                workdir: Path::new(root),
                not_above: &[],
                ..in_home
            };
            let e = Confinement::for_local_land(&at, &policy).unwrap_err();
            assert!(e.to_string().contains("shared directory"), "{root}: {e}");
        }
        let var_tmp = tempfile::tempdir_in("/var/tmp").unwrap();
        let in_var_tmp = SandboxPaths {
            workdir: var_tmp.path(),
            not_above: &[],
            ..in_home
        };
        assert!(Confinement::for_local_land(&in_var_tmp, &policy).is_ok());
        // Holding the directory of the private temporary directories (`/tmp`): refused.
        let tmp = dir.path().join("sys-tmp/hcp-exec-x");
        std::fs::create_dir_all(&tmp).unwrap();
        let above_tmp = SandboxPaths {
            workdir: dir.path(),
            tmpdir: &tmp,
            not_above: &[],
            ..in_home
        };
        let e = Confinement::for_local_land(&above_tmp, &policy).unwrap_err();
        assert!(e.to_string().contains("sys-tmp"), "{e}");
        // System directories, and whatever lies inside them: refused.
        for system in [
            "/usr",
            "/usr/share",
            "/etc",
            "/proc/self",
            "/sys/kernel",
            "/dev",
        ] {
            let at = SandboxPaths {
                workdir: Path::new(system),
                ..in_home
            };
            let e = Confinement::for_local_land(&at, &policy).unwrap_err();
            assert_eq!(e.code(), "sandbox_unavailable", "{system}");
            assert!(e.to_string().contains("system directory"), "{system}: {e}");
        }
    }
}
