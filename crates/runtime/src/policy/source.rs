//! The one loader of the runtime policy (RUNTIME §3, §7), with the compiled policy cache:
//! a policy that has not changed is not parsed, screened or hashed again.
//!
//! Every load reads the policy file's bytes and takes their SHA-256 (the key: never the
//! modification time, so an edit of the same size within the same second is seen). The
//! compiled form (`histos::cache`) of the last policy that loaded is kept in
//! `$HCP_HOME/cache/policy.compiled`:
//!
//! ```text
//! "HCPPOLC1"  u8 len + hcp's version  u8 len + the policy's file name  histos' compiled form
//! ```
//!
//! It is used only when this very hcp wrote it, for a file of the same name, from bytes
//! of the same digest, whole (histos checks its engine and format version, the digest,
//! the length and a checksum). Anything else — missing, truncated, corrupted, another
//! version's, another source's — is loaded from source and rewritten (temporary file,
//! `fsync`, `rename`). A cache that cannot be written is skipped: the policy is loaded
//! from source on every call, with a note for `hcp doctor`. A source that does not load
//! has a digest no entry carries, so its POLICY code is what every call gets: the cache
//! never keeps a broken policy alive, and it can only make a load faster, never decide
//! differently.

use super::{PolicyRefusal, RuntimePolicy};
use hcp_model::Code;
use hcp_store::Home;
use histos::Policy;
use histos::cache::source_digest;
use std::path::{Path, PathBuf};

/// The names the runtime policy may live under, in `$HCP_HOME`.
pub const POLICY_FILES: [&str; 2] = ["policy.json", "policy.yaml"];

/// The cache directory under `$HCP_HOME`.
pub const CACHE_DIR: &str = "cache";

/// The compiled policy's file in [`CACHE_DIR`].
pub const CACHE_FILE: &str = "policy.compiled";

/// The note of the last refused entry in [`CACHE_DIR`], for `hcp doctor`:
/// `{"at", "reason", "hcp"}`, written when an entry is rebuilt.
pub const NOTE_FILE: &str = "policy.note";

const MAGIC: &[u8; 8] = b"HCPPOLC1";
const HCP_VERSION: &str = env!("CARGO_PKG_VERSION");

/// What a load did with the compiled cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheUse {
    /// The compiled form was current and used: nothing was parsed.
    Hit,
    /// There was none; the policy was parsed and its compiled form written.
    Written,
    /// There was one that could not be used (`reason`: `cache_truncated`,
    /// `cache_corrupted`, `cache_other_version`, `cache_other_hcp`, `cache_other_source`,
    /// `cache_other_file`, `cache_not_a_cache`, `cache_unreadable`); the policy was parsed
    /// and the compiled form written again.
    Rebuilt {
        /// Why the old entry was refused.
        reason: String,
    },
    /// The policy was parsed and the compiled form could not be written (`reason`); every
    /// call parses the policy until it can.
    Skipped {
        /// Why it could not be written.
        reason: String,
    },
}

impl CacheUse {
    /// One line for `hcp doctor`.
    pub fn describe(&self) -> String {
        match self {
            Self::Hit => "current: calls use the compiled form".into(),
            Self::Written => "written: calls use the compiled form".into(),
            Self::Rebuilt { reason } => {
                format!("the old entry was refused ({reason}) and rebuilt")
            }
            Self::Skipped { reason } => {
                format!("cannot be written ({reason}): every call parses the policy from source")
            }
        }
    }
}

/// The last rebuild of the cache (`policy.note`): when, and why the entry was refused.
pub fn last_rebuild(home: &Home) -> Option<(String, String)> {
    let b = hcp_store::atomic::read_record(&home.root().join(CACHE_DIR).join(NOTE_FILE)).ok()??;
    let v: serde_json::Value = serde_json::from_slice(&b).ok()?;
    Some((
        v["at"].as_str()?.to_owned(),
        v["reason"].as_str()?.to_owned(),
    ))
}

fn cache_path(home: &Home) -> PathBuf {
    home.root().join(CACHE_DIR).join(CACHE_FILE)
}

/// The runtime policy's file in the store, when there is one.
///
/// # Errors
/// `policy_conflict` when both files exist.
pub fn policy_file(home: &Home) -> Result<Option<PathBuf>, PolicyRefusal> {
    let found: Vec<PathBuf> = POLICY_FILES
        .iter()
        .map(|n| home.root().join(n))
        .filter(|p| std::fs::symlink_metadata(p).is_ok())
        .collect();
    match found.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(one.clone())),
        _ => Err(PolicyRefusal::new(
            Code::PolicyConflict,
            "both `policy.json` and `policy.yaml` are in the store; the runtime policy must be one file",
        )
        .with_hint("remove one of them")),
    }
}

/// Loads `$HCP_HOME/policy.json` or `policy.yaml` (RUNTIME §3, §7) through the compiled
/// cache; `None` when neither exists (two `stat`s).
///
/// # Errors
/// A [`PolicyRefusal`] carrying the POLICY code when the file does not load, or
/// `policy_conflict` when both files exist.
pub fn load(home: &Home) -> Result<Option<RuntimePolicy>, PolicyRefusal> {
    let Some(path) = policy_file(home)? else {
        return Ok(None);
    };
    load_file(home, &path).map(Some)
}

/// Loads the store's policy file `path` through the cache of `home`.
fn load_file(home: &Home, path: &Path) -> Result<RuntimePolicy, PolicyRefusal> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // One open: its `InvalidInput` (not a regular file) refuses here, any other failure
    // or a file too large goes to the engine's reader below.
    let read = read_regular(path, histos::MAX_POLICY_BYTES as u64);
    if let Err(e) = &read
        && e.kind() == std::io::ErrorKind::InvalidInput
    {
        return Err(PolicyRefusal::new(
            Code::Unparseable,
            format!(
                "the runtime policy `{}` cannot be read: {e}",
                path.display()
            ),
        ));
    }
    let Some(bytes) = read.ok().flatten() else {
        // Missing, unreadable or too large: the engine's own reader says which, with its
        // POLICY code (it never reaches the cache).
        return Err(match Policy::load_path(path) {
            Ok(_) => PolicyRefusal::new(
                Code::Unparseable,
                format!("the runtime policy `{}` cannot be read", path.display()),
            ),
            Err(e) => refusal_of(path, &e),
        });
    };
    let digest = source_digest(&bytes);
    let cache = cache_path(home);
    let old = match hcp_store::atomic::read_record(&cache) {
        Ok(Some(b)) => Some(decode(&b, &name, &digest)),
        Ok(None) => None,
        Err(_) => Some(Err("cache_unreadable".to_owned())),
    };
    if let Some(Ok(policy)) = old {
        return Ok(RuntimePolicy {
            policy,
            file: path.to_owned(),
            cache: CacheUse::Hit,
        });
    }
    let policy = parse(path, &bytes)?;
    let cache_use = match write(&cache, &name, &policy.to_cache_bytes(&digest)) {
        Err(reason) => CacheUse::Skipped { reason },
        Ok(()) => match old {
            Some(Err(reason)) => {
                // Best effort: the note only tells `hcp doctor` why the entry was rebuilt.
                let note = serde_json::json!({
                    "at": jiff::Timestamp::now().to_string(),
                    "reason": reason,
                    "hcp": HCP_VERSION,
                });
                let _ = hcp_store::atomic::write_atomic(
                    &home.root().join(CACHE_DIR).join(NOTE_FILE),
                    format!("{note}\n").as_bytes(),
                );
                CacheUse::Rebuilt { reason }
            }
            _ => CacheUse::Written,
        },
    };
    Ok(RuntimePolicy {
        policy,
        file: path.to_owned(),
        cache: cache_use,
    })
}

/// Loads the store's policy from source alone, never touching the cache (the equality
/// test's other arm, and what a cache-less build would do).
///
/// # Errors
/// As [`load`].
pub fn load_uncached(home: &Home) -> Result<Option<RuntimePolicy>, PolicyRefusal> {
    let Some(path) = policy_file(home)? else {
        return Ok(None);
    };
    let policy = Policy::load_path(&path).map_err(|e| refusal_of(&path, &e))?;
    Ok(Some(RuntimePolicy {
        policy,
        file: path,
        cache: CacheUse::Skipped {
            reason: "not used".into(),
        },
    }))
}

/// [`hcp_store::atomic::read_regular`]: the policy and its lock are read through it.
pub(crate) use hcp_store::atomic::read_regular;

/// Parses the bytes of `path` as `Policy::load_path` would (JSON for `.json`, else YAML).
fn parse(path: &Path, bytes: &[u8]) -> Result<Policy, PolicyRefusal> {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Err(match Policy::load_path(path) {
            Ok(_) => PolicyRefusal::new(Code::Unparseable, "the runtime policy is not UTF-8"),
            Err(e) => refusal_of(path, &e),
        });
    };
    let is_json = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    let loaded = if is_json {
        Policy::load_json(text)
    } else {
        Policy::load_yaml(text)
    };
    loaded.map_err(|e| refusal_of(path, &e))
}

/// The refusal of every call under a policy that does not load: its POLICY code, the
/// message that teaches (the allowed keys and the nearest one go to the hint).
pub(crate) fn refusal_of(path: &Path, e: &histos::PolicyError) -> PolicyRefusal {
    let taught = super::teach::split(e);
    let hint = match taught.hint {
        Some(h) => format!(
            "{h}; check it with `hcp policy check FILE`: every call is refused until it loads"
        ),
        None => "fix it, then check it with `hcp policy check FILE`; every call is refused until it loads".into(),
    };
    PolicyRefusal::new(
        Code::from(e.code),
        format!(
            "the runtime policy `{}` does not load: {}",
            path.display(),
            taught.message
        ),
    )
    .with_hint(hint)
}

/// The compiled policy in a cache entry, when hcp's header names this version and file.
fn decode(bytes: &[u8], name: &str, digest: &[u8; 32]) -> Result<Policy, String> {
    let rest = bytes.strip_prefix(MAGIC.as_slice()).ok_or_else(|| {
        if MAGIC.starts_with(bytes) {
            "cache_truncated"
        } else {
            "cache_not_a_cache"
        }
        .to_owned()
    })?;
    let (version, rest) = field(rest).ok_or("cache_truncated")?;
    if version != HCP_VERSION.as_bytes() {
        return Err("cache_other_hcp".into());
    }
    let (file, rest) = field(rest).ok_or("cache_truncated")?;
    if file != name.as_bytes() {
        return Err("cache_other_file".into());
    }
    Policy::from_cache_bytes(rest, digest).map_err(|e| e.reason().to_owned())
}

/// A `u8`-length-prefixed field and what follows it.
fn field(b: &[u8]) -> Option<(&[u8], &[u8])> {
    let (&n, rest) = b.split_first()?;
    let n = usize::from(n);
    (rest.len() >= n).then(|| rest.split_at(n))
}

/// Writes a cache entry atomically; the reason when it cannot.
fn write(path: &Path, name: &str, compiled: &[u8]) -> Result<(), String> {
    let (Ok(v), Ok(n)) = (u8::try_from(HCP_VERSION.len()), u8::try_from(name.len())) else {
        return Err("a name too long for the header".into());
    };
    let mut bytes =
        Vec::with_capacity(MAGIC.len() + 2 + HCP_VERSION.len() + name.len() + compiled.len());
    bytes.extend_from_slice(MAGIC);
    bytes.push(v);
    bytes.extend_from_slice(HCP_VERSION.as_bytes());
    bytes.push(n);
    bytes.extend_from_slice(name.as_bytes());
    bytes.extend_from_slice(compiled);
    hcp_store::atomic::write_atomic(path, &bytes).map_err(|e| e.to_string())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::read_regular;
    use std::io::ErrorKind;

    /// A FIFO, a device or a directory in place of the policy or the lock is refused at
    /// once (no open that waits for a writer, no read without end); a regular file is read
    /// up to its limit.
    #[test]
    fn only_a_regular_file_is_read_and_never_past_its_limit() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        for p in [fifo.as_path(), std::path::Path::new("/dev/zero"), d.path()] {
            let e = read_regular(p, 16).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidInput, "{}", p.display());
        }
        let f = d.path().join("f");
        std::fs::write(&f, b"0123456789").unwrap();
        assert_eq!(read_regular(&f, 10).unwrap().unwrap(), b"0123456789");
        assert_eq!(read_regular(&f, 9).unwrap(), None);
        let gone = read_regular(&d.path().join("gone"), 9).unwrap_err();
        assert_eq!(gone.kind(), ErrorKind::NotFound);
    }
}
