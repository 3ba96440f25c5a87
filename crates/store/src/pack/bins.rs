//! Resolving and pinning the programs a pack runs (RUNTIME §3, DESIGN "Bins"). Checking a
//! pin later (before each run, in `hcp doctor`) is the adapter's `verify_bin`, the one
//! verifier, through `hcp_runtime::pins`.
//!
//! A program holding a `/` is a path relative to the pack directory: every component is
//! checked with `lstat` and none may be a symlink, `..` or absolute. A bare name is looked
//! up on the installing process's `PATH` (the `which` crate) and pinned by its canonical
//! path. Either way the file is hashed through a descriptor opened with `O_NOFOLLOW`, and a
//! script's interpreter is pinned with it ([`super::interpreter`]). Nothing is executed.

use super::PackError;
use super::record::PinnedBin;
#[cfg(test)]
use super::record::sha256_tagged;
use sha2::{Digest, Sha256};
use std::ffi::OsString;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

/// Where bare program names are looked up.
#[derive(Debug, Clone, Default)]
pub struct BinLookup {
    /// The `PATH` value to search; `None` finds nothing for a bare name.
    pub path: Option<OsString>,
    /// The directory relative `PATH` entries are read against.
    pub cwd: PathBuf,
}

/// Resolves and hashes `program` for a pack whose canonical source directory is `pack_dir`.
///
/// # Errors
/// [`PackError::BinMissing`] when it cannot be found, is not a regular file or is not
/// executable; [`PackError::BinUnsafe`] when a relative path is absolute, climbs with `..`
/// or crosses a symlink.
pub fn pin(program: &str, pack_dir: &Path, lookup: &BinLookup) -> Result<PinnedBin, PackError> {
    let path = resolve(program, pack_dir, lookup)?;
    let sha256 = hash_file(&path).map_err(|reason| PackError::BinMissing {
        program: program.to_owned(),
        reason,
    })?;
    let interpreter = super::interpreter::pin_interpreter(program, &path, lookup)?;
    Ok(PinnedBin {
        program: program.to_owned(),
        path,
        sha256,
        interpreter,
    })
}

/// The path [`pin`] would pin `program` at, without hashing it: for install policy that
/// looks at where a program is before anything is written (`hcp_bin_reserved`).
///
/// # Errors
/// As [`pin`], but for a file that cannot be hashed.
pub fn resolve(program: &str, pack_dir: &Path, lookup: &BinLookup) -> Result<PathBuf, PackError> {
    let path = if program.contains('/') {
        resolve_relative(program, pack_dir)?
    } else {
        let found = which::which_in(program, lookup.path.as_ref(), &lookup.cwd).map_err(|e| {
            PackError::BinMissing {
                program: program.to_owned(),
                reason: format!("not found on `PATH`: {e}"),
            }
        })?;
        std::fs::canonicalize(&found).map_err(|e| PackError::BinMissing {
            program: program.to_owned(),
            reason: format!("cannot resolve `{}`: {e}", found.display()),
        })?
    };
    if path.to_str().is_none() {
        return Err(PackError::BinMissing {
            program: program.to_owned(),
            reason: format!(
                "its path `{}` is not UTF-8, so it cannot be pinned",
                path.display()
            ),
        });
    }
    Ok(path)
}

fn resolve_relative(program: &str, pack_dir: &Path) -> Result<PathBuf, PackError> {
    let unsafe_path = |reason: String| PackError::BinUnsafe {
        program: program.to_owned(),
        code: hcp_model::Code::UnsafePath,
        reason,
    };
    if let Some(why) = hcp_model::program_path_problem(program) {
        return Err(unsafe_path(why.into()));
    }
    let rel = Path::new(program);
    let mut cur = pack_dir.to_path_buf();
    for c in rel.components() {
        match c {
            Component::Normal(part) => {
                cur.push(part);
                let meta = std::fs::symlink_metadata(&cur).map_err(|e| PackError::BinMissing {
                    program: program.to_owned(),
                    reason: format!("`{}`: {e}", cur.display()),
                })?;
                if meta.file_type().is_symlink() {
                    return Err(PackError::BinUnsafe {
                        program: program.to_owned(),
                        code: hcp_model::Code::SymlinkInPack,
                        reason: format!(
                            "`{}` is a symlink, which install never follows",
                            cur.display()
                        ),
                    });
                }
            }
            Component::CurDir => {}
            // `program_path_problem` refused these above; kept so that the walk never
            // leaves the pack directory whatever that rule says.
            _ => {
                return Err(unsafe_path("it leaves the pack directory (`..`)".into()));
            }
        }
    }
    Ok(cur)
}

/// Hashes the regular, executable file at `path` without following a symlink in its last
/// component: `sha256:<64 hex>`.
///
/// # Errors
/// A lowercase reason: cannot open, not a regular file, not executable, read error.
pub fn hash_file(path: &Path) -> Result<String, String> {
    let (file, _) = open_regular(path)?;
    hash_reader(file).map_err(|e| format!("cannot read `{}`: {e}", path.display()))
}

fn open_regular(path: &Path) -> Result<(File, std::fs::Metadata), String> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| format!("cannot open `{}`: {e}", path.display()))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot stat `{}`: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("`{}` is not a regular file", path.display()));
    }
    if meta.permissions().mode() & 0o111 == 0 {
        return Err(format!("`{}` is not executable", path.display()));
    }
    Ok((file, meta))
}

fn hash_reader(mut r: impl Read) -> std::io::Result<String> {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = r.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(format!("sha256:{}", hex::encode(h.finalize())))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn exe(p: &Path, body: &[u8]) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn relative_bin_is_pinned_and_verified() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().canonicalize().unwrap();
        exe(&dir.join("bin/tool"), b"#!/bin/sh\n");
        let pin = pin("bin/tool", &dir, &BinLookup::default()).unwrap();
        assert_eq!(pin.path, dir.join("bin/tool"));
        assert_eq!(pin.sha256, sha256_tagged(b"#!/bin/sh\n"));
        let interpreter = pin.interpreter.unwrap();
        assert_eq!(interpreter.line, "/bin/sh");
        assert_eq!(
            interpreter.files[0].path,
            std::fs::canonicalize("/bin/sh").unwrap()
        );
        assert_eq!(hash_file(&pin.path).unwrap(), pin.sha256);
    }

    #[test]
    fn symlinks_dotdot_and_absolute_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().canonicalize().unwrap();
        exe(&dir.join("real/tool"), b"x");
        symlink(dir.join("real"), dir.join("link")).unwrap();
        symlink(dir.join("real/tool"), dir.join("tool")).unwrap();
        let l = BinLookup::default();
        for (p, code) in [
            ("link/tool", "symlink_in_pack"),
            ("./tool", "symlink_in_pack"),
            ("../x/tool", "unsafe_path"),
            ("/bin/sh", "unsafe_path"),
            ("real/none", "bin_missing"),
        ] {
            assert_eq!(pin(p, &dir, &l).unwrap_err().code(), code, "{p}");
        }
        std::fs::set_permissions(
            dir.join("real/tool"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        assert_eq!(
            pin("real/tool", &dir, &l).unwrap_err().code(),
            "bin_missing"
        );
    }

    #[test]
    fn lint_and_install_refuse_the_same_program_paths() {
        // One rule (`hcp_model::program_path_problem`): a program path lint passes is one
        // install does not refuse as unsafe, and the other way round.
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../lint/tests/fixtures/valid");
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().canonicalize().unwrap();
        exe(&dir.join("bin/tool"), b"x");
        for f in ["surface.json", "policy.json", "HARNESS.md"] {
            std::fs::copy(fixture.join(f), dir.join(f)).unwrap();
        }
        let surface = std::fs::read_to_string(dir.join("surface.json")).unwrap();
        let l = BinLookup::default();
        for (program, unsafe_path) in [
            ("../bin/tool", true),
            ("bin/../bin/tool", true),
            ("bin/..", true),
            ("/bin/sh", true),
            ("bin/tool", false),
            ("./bin/tool", false),
            ("bin/./tool", false),
        ] {
            let bin = format!("\"bin\": \"{program}\"");
            let text = surface.replace("\"bin\": \"hcp-example-sample\"", &bin);
            assert!(text.contains(&bin));
            std::fs::write(dir.join("surface.json"), text).unwrap();
            let report = hcp_lint::check(&hcp_lint::read_pack(&dir).unwrap());
            let lint = report
                .diagnostics
                .iter()
                .any(|d| d.code == hcp_model::Code::UnsafePath);
            let install = pin(program, &dir, &l)
                .err()
                .is_some_and(|e| e.code() == "unsafe_path");
            assert_eq!((lint, install), (unsafe_path, unsafe_path), "{program}");
        }
    }

    #[test]
    fn bare_names_use_the_given_path() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().canonicalize().unwrap();
        exe(&dir.join("p/mytool"), b"t");
        let l = BinLookup {
            path: Some(dir.join("p").into_os_string()),
            cwd: dir.clone(),
        };
        assert_eq!(pin("mytool", &dir, &l).unwrap().path, dir.join("p/mytool"));
        assert_eq!(
            pin("mytool", &dir, &BinLookup::default())
                .unwrap_err()
                .code(),
            "bin_missing"
        );
    }
}
