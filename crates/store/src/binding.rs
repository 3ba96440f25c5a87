//! Bindings of RUNTIME §8: the credential a `user` pack's connect verb printed, kept per
//! principal and binding family, readable by the owner only.
//!
//! ```text
//! state/bindings/<principal>/<family>.json   mode 0600, directories 0700
//! ```
//!
//! A credential is a JSON object. Its top-level string fields reach the child as
//! `HCP_BINDING_<K>` (the adapter builds the names); an optional top-level `expires_at`
//! (RFC 3339) ends it. A credential is never written to the audit, logs, errors or results:
//! this module's errors name files and principals, never values.
//!
//! Each file carries the keyed MAC of its content and path ([`crate::stamp::records`]), so
//! a binding copied to another principal's name (and its `principal` edited) is damage
//! for that principal alone, never the owner's credential handed over.

use crate::atomic::sync_dir;
use crate::error::{StoreError, StoreResult};
use crate::home::{Home, StoreDir};
use crate::lock::StoreLock;
use hcp_model::Code;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The largest credential accepted, in bytes of JSON (64 KiB).
pub const MAX_CREDENTIAL_BYTES: usize = 64 * 1024;

/// A stored credential.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Credential {
    /// The principal it belongs to.
    pub principal: String,
    /// The binding family (the manifest's `binding.family`, else the pack id).
    pub family: String,
    /// When `hcp connect` stored it.
    pub connected_at: Timestamp,
    /// When it stops being usable, from the credential's own `expires_at`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
    /// The credential object the connect verb printed.
    pub secret: serde_json::Map<String, serde_json::Value>,
}

impl std::fmt::Display for Credential {
    /// Never shows the secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "credential of `{}` for `{}`",
            self.principal, self.family
        )
    }
}

/// Why a credential cannot be minted (RUNTIME §5 step 8: all answer `binding_required`,
/// except [`MintError::Insecure`] which is `binding_insecure`).
#[derive(Debug, thiserror::Error)]
pub enum MintError {
    /// No credential stored.
    #[error("principal `{principal}` has no binding for `{family}`")]
    Missing {
        /// The principal.
        principal: String,
        /// The family.
        family: String,
    },
    /// The credential's `expires_at` has passed.
    #[error("the binding of `{principal}` for `{family}` expired at {at}")]
    Expired {
        /// The principal.
        principal: String,
        /// The family.
        family: String,
        /// When.
        at: Timestamp,
    },
    /// The file is readable or writable by others than the owner: refused, not used.
    #[error("binding file `{path}` has mode {mode:o}; it must be 0600")]
    Insecure {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl MintError {
    /// The stable code: `binding_required`, `binding_insecure`, or the store's.
    pub fn code(&self) -> Code {
        match self {
            Self::Missing { .. } | Self::Expired { .. } => Code::BindingRequired,
            Self::Insecure { .. } => Code::BindingInsecure,
            Self::Store(e) => e.code(),
        }
    }
}

/// Whether `name` can be a path component of the bindings directory (a principal id or a
/// family): ASCII letters, digits, `.`, `_`, `@`, `-`, not starting with `.`, 1–128 bytes.
pub fn safe_component(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'@' | b'-'))
}

fn path_of(home: &Home, principal: &str, family: &str) -> StoreResult<PathBuf> {
    if !safe_component(principal) || !safe_component(family) {
        return Err(StoreError::Unusable {
            path: home.dir(StoreDir::State).join("bindings"),
            reason: format!("principal `{principal}` or family `{family}` cannot name a binding"),
        });
    }
    Ok(home
        .dir(StoreDir::State)
        .join("bindings")
        .join(principal)
        .join(format!("{family}.json")))
}

/// Stores `secret` as the credential of `principal` for `family`, replacing any other, with
/// mode 0600 from creation (never wider, not even for an instant) and its keyed MAC, and
/// notes it in the state ledger (`crate::ledger`), under the store lock the caller holds.
///
/// # Errors
/// [`StoreError`] when the path cannot be built or written, the chain key cannot be read
/// (nothing is written without its MAC), or the ledger is damaged (nothing is written) or
/// cannot be written.
pub fn save(
    home: &Home,
    lock: &StoreLock,
    principal: &str,
    family: &str,
    secret: serde_json::Map<String, serde_json::Value>,
    now: Timestamp,
) -> StoreResult<Credential> {
    let path = path_of(home, principal, family)?;
    let expires_at = secret
        .get("expires_at")
        .and_then(|v| v.as_str())
        .and_then(|s| s.parse().ok());
    let cred = Credential {
        principal: principal.to_owned(),
        family: family.to_owned(),
        connected_at: now,
        expires_at,
        secret,
    };
    let dir = path.parent().unwrap_or(home.root()).to_path_buf();
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|e| StoreError::io("create", &dir, e))?;
    crate::ledger::ready(home, lock)?;
    let (bytes, mac) = crate::stamp::records::seal_binding_mac(home, &path, &cred)?;
    crate::ledger::stage(home, lock, &path, &mac)?;
    let tmp = dir.join(format!(".{family}.{}.tmp", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| StoreError::io("create", &tmp, e))?;
    f.write_all(&bytes)
        .and_then(|()| f.sync_all())
        .map_err(|e| StoreError::io("write", &tmp, e))?;
    std::fs::rename(&tmp, &path).map_err(|e| StoreError::io("rename into", &path, e))?;
    sync_dir(&dir)?;
    crate::ledger::note(home, lock, &[(&path, Some(mac))])?;
    Ok(cred)
}

/// Loads the credential of `principal` for `family` for binding mint (RUNTIME §5 step 8).
///
/// # Errors
/// [`MintError::Missing`], [`MintError::Expired`] (at `now`), [`MintError::Insecure`] when
/// the file's mode is wider than 0600, [`MintError::Store`] for I/O or a damaged file (one
/// that does not parse, or whose MAC is missing or does not hold: `store_damaged`, for this
/// principal's binding alone).
pub fn load(
    home: &Home,
    principal: &str,
    family: &str,
    now: Timestamp,
) -> Result<Credential, MintError> {
    let missing = || MintError::Missing {
        principal: principal.to_owned(),
        family: family.to_owned(),
    };
    let Ok(path) = path_of(home, principal, family) else {
        return Err(missing());
    };
    let f = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(missing()),
        Err(e) => return Err(StoreError::io("open", &path, e).into()),
    };
    let meta = f.metadata().map_err(|e| StoreError::io("stat", &path, e))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 || !meta.is_file() || meta.uid() != unsafe_geteuid() {
        return Err(MintError::Insecure { path, mode });
    }
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(f, MAX_CREDENTIAL_BYTES as u64 * 2),
        &mut bytes,
    )
    .map_err(|e| StoreError::io("read", &path, e))?;
    let cred: Credential = crate::stamp::records::open_binding(home, &path, &bytes)?;
    if cred.principal != principal || cred.family != family {
        return Err(StoreError::Damaged {
            path,
            reason: "the record names another principal or family".into(),
        }
        .into());
    }
    if let Some(at) = cred.expires_at
        && at <= now
    {
        return Err(MintError::Expired {
            principal: principal.to_owned(),
            family: family.to_owned(),
            at,
        });
    }
    Ok(cred)
}

fn unsafe_geteuid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Removes the credential of `principal` for `family`, and notes in the state ledger that
/// it is gone, under the store lock the caller holds; `Ok(false)` when there was none.
///
/// # Errors
/// [`StoreError::Io`] naming the file; [`StoreError::Damaged`] naming the ledger when it
/// cannot take the write (nothing is removed).
pub fn remove(home: &Home, lock: &StoreLock, principal: &str, family: &str) -> StoreResult<bool> {
    let path = path_of(home, principal, family)?;
    crate::ledger::ready(home, lock)?;
    let removed = match std::fs::remove_file(&path) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Err(StoreError::io("remove", &path, e)),
    };
    crate::ledger::note(home, lock, &[(&path, None)])?;
    Ok(removed)
}

/// Removes every principal's credential for `family` (uninstall, RUNTIME §3), and notes
/// in the state ledger that they are gone, under the store lock the caller holds; returns
/// how many were removed.
///
/// # Errors
/// [`StoreError::Io`] naming the file; [`StoreError::Damaged`] naming the ledger when it
/// cannot take the write (nothing is removed).
pub fn remove_family(home: &Home, lock: &StoreLock, family: &str) -> StoreResult<usize> {
    let root = home.dir(StoreDir::State).join("bindings");
    let Ok(rd) = std::fs::read_dir(&root) else {
        return Ok(0);
    };
    crate::ledger::ready(home, lock)?;
    let mut gone = Vec::new();
    for entry in rd.flatten() {
        let p = entry.path().join(format!("{family}.json"));
        match std::fs::remove_file(&p) {
            Ok(()) => gone.push(p),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(StoreError::io("remove", &p, e)),
        }
    }
    if !gone.is_empty() {
        let changes: Vec<(&Path, Option<String>)> =
            gone.iter().map(|p| (p.as_path(), None)).collect();
        crate::ledger::note(home, lock, &changes)?;
    }
    Ok(gone.len())
}

/// Every stored credential's `(principal, family, file mode)`, for `hcp doctor`; never the
/// values.
pub fn list(home: &Home) -> Vec<(String, String, u32)> {
    let root = home.dir(StoreDir::State).join("bindings");
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(&root) else {
        return out;
    };
    for p in rd.flatten() {
        let principal = p.file_name().to_string_lossy().into_owned();
        let Ok(inner) = std::fs::read_dir(p.path()) else {
            continue;
        };
        for f in inner.flatten() {
            let name = f.file_name().to_string_lossy().into_owned();
            if let Some(family) = name.strip_suffix(".json").filter(|n| !n.starts_with('.')) {
                let mode = f
                    .metadata()
                    .map(|m| m.permissions().mode() & 0o777)
                    .unwrap_or(0);
                out.push((principal.clone(), family.to_owned(), mode));
            }
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        "2026-06-01T00:00:00Z".parse().unwrap()
    }

    fn secret(v: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
        v.as_object().unwrap().clone()
    }

    fn store() -> (tempfile::TempDir, Home) {
        let d = tempfile::tempdir().unwrap();
        crate::made::init(d.path(), crate::audit::Actor::owner(), None).unwrap();
        let home = Home::open(d.path()).unwrap();
        (d, home)
    }

    #[test]
    fn save_load_expire_insecure() {
        let (d, home) = store();
        let lock = StoreLock::acquire(&home).unwrap();
        assert_eq!(
            load(&home, "alice", "mail", now()).unwrap_err().code(),
            "binding_required"
        );
        save(
            &home,
            &lock,
            "alice",
            "mail",
            secret(serde_json::json!({"token": "t1"})),
            now(),
        )
        .unwrap();
        let c = load(&home, "alice", "mail", now()).unwrap();
        assert_eq!(c.secret["token"], "t1");
        assert!(!c.to_string().contains("t1"));
        // another principal never receives it
        assert_eq!(
            load(&home, "bob", "mail", now()).unwrap_err().code(),
            "binding_required"
        );
        let path = d.path().join("state/bindings/alice/mail.json");
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(
            load(&home, "alice", "mail", now()).unwrap_err().code(),
            "binding_insecure"
        );
        save(
            &home,
            &lock,
            "alice",
            "mail",
            secret(serde_json::json!({"token": "t2", "expires_at": "2026-05-01T00:00:00Z"})),
            now(),
        )
        .unwrap();
        assert!(matches!(
            load(&home, "alice", "mail", now()),
            Err(MintError::Expired { .. })
        ));
        assert!(remove(&home, &lock, "alice", "mail").unwrap());
        assert_eq!(remove_family(&home, &lock, "mail").unwrap(), 0);
    }

    /// The state ledger lists each binding by its MAC: a copy saved before a newer
    /// credential replaced it, or before it was removed, holds its MAC and is damage once
    /// put back (`store_damaged`, for that binding alone).
    #[test]
    fn an_older_binding_put_back_is_damage() {
        let (d, home) = store();
        let lock = StoreLock::acquire(&home).unwrap();
        let token = |t: &str| secret(serde_json::json!({ "token": t }));
        save(&home, &lock, "alice", "mail", token("t1"), now()).unwrap();
        save(&home, &lock, "bob", "mail", token("b1"), now()).unwrap();
        let path = d.path().join("state/bindings/alice/mail.json");
        let old = std::fs::read(&path).unwrap();
        save(&home, &lock, "alice", "mail", token("t2"), now()).unwrap();
        std::fs::write(&path, &old).unwrap();
        let e = load(&home, "alice", "mail", now()).unwrap_err();
        assert_eq!(e.code(), "store_damaged", "{e}");
        assert!(
            e.to_string().contains("not the version hcp wrote last"),
            "{e}"
        );
        assert!(remove(&home, &lock, "alice", "mail").unwrap());
        std::fs::write(&path, &old).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let e = load(&home, "alice", "mail", now()).unwrap_err();
        assert_eq!(e.code(), "store_damaged", "{e}");
        assert!(e.to_string().contains("removed by hcp and put back"), "{e}");
        // Bob's binding is untouched by Alice's damage.
        assert_eq!(
            load(&home, "bob", "mail", now()).unwrap().secret["token"],
            "b1"
        );
        assert_eq!(remove_family(&home, &lock, "mail").unwrap(), 2);
        let ledger = std::fs::read_to_string(crate::ledger::path(&home)).unwrap();
        assert!(!ledger.contains("bindings/"), "{ledger}");
    }

    #[test]
    fn unsafe_names_are_not_paths() {
        for bad in ["", "..", "../x", "a/b", ".hidden", "a b"] {
            assert!(!safe_component(bad), "{bad}");
        }
        assert!(safe_component("agent-1@example.org"));
    }
}
