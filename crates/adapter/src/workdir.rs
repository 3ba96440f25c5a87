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
/// [`SYSTEM_READ_ONLY`] (a child would get write access to programs and configuration,
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
        .map(|p| resolve(&PathBuf::from(p)))
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
    for system in NOT_A_SANDBOX.iter().map(|p| resolve(&PathBuf::from(p))) {
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

pub(crate) fn sandbox_failed(path: &Path, reason: &str, e: io::Error) -> AdapterError {
    AdapterError::SandboxFailed {
        path: path.to_owned(),
        reason: reason.to_owned(),
        source: Some(e),
    }
}
