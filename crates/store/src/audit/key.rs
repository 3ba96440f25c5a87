//! The store's chain key (RUNTIME §6 "Keyed chain"): `audit/chain.key`, 32 random bytes,
//! 0600 in the 0700 `audit/`, in no call's view. Every record's `hash` and both slots of
//! the anchor are HMAC-SHA-256 under it, so whoever lacks the key cannot delete, reorder,
//! insert or edit records and recompute a chain that verifies.
//!
//! The formulas (docs/DESIGN.md, "The audit trail", writes them for an outside verifier):
//!
//! ```text
//! record hash  = "hmac-sha256:" + hex(HMAC-SHA-256(key, canonical_json(record without "hash")))
//! anchor slot  = hex(HMAC-SHA-256(key, "hcp-audit-anchor/2\n" + slot_json))
//! ```
//!
//! The record's canonical JSON holds its `prev`, so each hash covers the previous one.
//! The anchor's message starts with a tag no record's canonical JSON can start with (a
//! record starts with `{`), so a slot's MAC is never a record's hash.

use super::fsutil::{self, random_bytes};
use super::record::canonical_json;
use crate::error::StoreError;
use crate::home::{Home, StoreDir};
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Map, Value};
use sha2::Sha256;
use std::path::{Path, PathBuf};

/// The chain key's file name inside `audit/`.
pub const CHAIN_KEY_FILE: &str = "chain.key";
/// The prefix of a keyed record hash.
pub const KEYED_PREFIX: &str = "hmac-sha256:";
/// The tag that starts the message of an anchor slot's MAC.
pub const ANCHOR_TAG: &[u8] = b"hcp-audit-anchor/2\n";
/// Bytes of the key.
pub const CHAIN_KEY_BYTES: usize = 32;

/// The store's chain key.
#[derive(Clone)]
pub struct ChainKey {
    bytes: [u8; CHAIN_KEY_BYTES],
}

impl std::fmt::Debug for ChainKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChainKey(..)")
    }
}

/// What reading the chain key found.
#[derive(Debug)]
pub enum KeyRead {
    /// The key.
    Found(ChainKey),
    /// No file: the store was never given one (a trail from before keyed chains), or it
    /// was removed.
    Absent,
    /// A file that cannot be read by this process (a call's view covers it, or its mode
    /// forbids it): the keyed chain cannot be checked here.
    Unreadable(std::io::Error),
}

impl ChainKey {
    /// A key from its bytes (tests, and a new store before it is written).
    pub fn from_bytes(bytes: [u8; CHAIN_KEY_BYTES]) -> Self {
        Self { bytes }
    }

    /// 32 bytes of the kernel's random source.
    ///
    /// # Errors
    /// [`StoreError`] when `/dev/urandom` cannot be read.
    pub fn generate() -> Result<Self, StoreError> {
        Ok(Self::from_bytes(random_bytes::<CHAIN_KEY_BYTES>()?))
    }

    /// The path of the chain key of `home`.
    pub fn path(home: &Home) -> PathBuf {
        home.dir(StoreDir::Audit).join(CHAIN_KEY_FILE)
    }

    /// Reads the key at `path`.
    ///
    /// # Errors
    /// [`StoreError::Damaged`] for a file that is not 32 bytes.
    pub fn read(path: &Path) -> Result<KeyRead, StoreError> {
        match fsutil::read_small(path, CHAIN_KEY_BYTES) {
            Ok(b) => {
                let bytes: [u8; CHAIN_KEY_BYTES] =
                    b.as_slice().try_into().map_err(|_| StoreError::Damaged {
                        path: path.to_path_buf(),
                        reason: format!("it holds {} bytes, not {CHAIN_KEY_BYTES}", b.len()),
                    })?;
                Ok(KeyRead::Found(Self { bytes }))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(KeyRead::Absent),
            Err(e) => Ok(KeyRead::Unreadable(e)),
        }
    }

    /// Whether the key at `path` is covered as the bootstrap pack's view covers it (RUNTIME
    /// §5.1): an empty regular file mounted over it (the root of a mount of its own), in
    /// a directory on a read-only mount. Only that view holds the store so — in the owner's
    /// own mount namespace nothing is mounted over the key — and only there is a keyed
    /// trail verified without its key. Nothing is read: a key readable through its cover
    /// (a process with `CAP_DAC_OVERRIDE`) is not taken for an empty key.
    pub fn covered_by_view(path: &Path) -> bool {
        let dir = path.parent().unwrap_or(Path::new("."));
        read_only_mount(dir) && empty_mount_root(path)
    }

    /// Writes the key to `path` (0600, synced, its directory synced), refusing to replace
    /// a key that exists: a store has one key for its whole life.
    ///
    /// # Errors
    /// [`StoreError`] when the file cannot be made, or exists.
    pub fn write_new(&self, path: &Path) -> Result<(), StoreError> {
        let dir = path.parent().unwrap_or(Path::new("."));
        fsutil::ensure_dir(dir)?;
        fsutil::write_new_synced(path, &self.bytes)
    }

    /// The MAC keyed by this key; `None` never happens (HMAC takes a key of any length),
    /// and a caller that met it would produce a hash no verifier accepts.
    fn mac(&self) -> Option<Hmac<Sha256>> {
        <Hmac<Sha256> as KeyInit>::new_from_slice(&self.bytes).ok()
    }

    /// The keyed hash of a record given as a JSON object: [`KEYED_PREFIX`] and the hex
    /// HMAC-SHA-256 of the canonical JSON of the object without its `hash` key.
    pub fn record_hash(&self, record: &Map<String, Value>) -> String {
        let mut m = record.clone();
        m.remove("hash");
        self.hash_canonical(&canonical_json(&Value::Object(m)))
    }

    /// [`ChainKey::record_hash`] of the canonical bytes of a record without `hash`.
    pub fn hash_canonical(&self, bytes: &[u8]) -> String {
        let Some(mut mac) = self.mac() else {
            return String::new();
        };
        mac.update(bytes);
        format!("{KEYED_PREFIX}{}", hex::encode(mac.finalize().into_bytes()))
    }

    /// The MAC of `bytes` under the domain tag `tag` (a file's name and version and a
    /// newline, such as `hcp-authority-files/1\n`, so that no MAC made for one use holds
    /// for another): 64 hex digits.
    pub fn tagged_mac(&self, tag: &[u8], bytes: &[u8]) -> String {
        let Some(mut mac) = self.mac() else {
            return String::new();
        };
        mac.update(tag);
        mac.update(bytes);
        hex::encode(mac.finalize().into_bytes())
    }

    /// Whether `mac` (64 hex digits) is [`ChainKey::tagged_mac`] of `tag` and `bytes`,
    /// compared in constant time.
    pub fn tagged_mac_holds(&self, tag: &[u8], bytes: &[u8], mac: &str) -> bool {
        let Ok(expected) = hex::decode(mac) else {
            return false;
        };
        let Some(mut m) = self.mac() else {
            return false;
        };
        m.update(tag);
        m.update(bytes);
        m.verify_slice(&expected).is_ok()
    }

    /// The MAC of an anchor slot's JSON: 64 hex digits.
    pub fn anchor_mac(&self, slot_json: &[u8]) -> String {
        let Some(mut mac) = self.mac() else {
            return String::new();
        };
        mac.update(ANCHOR_TAG);
        mac.update(slot_json);
        hex::encode(mac.finalize().into_bytes())
    }

    /// Whether `mac` (64 hex digits) is the MAC of `slot_json`, compared in constant time.
    pub fn anchor_mac_holds(&self, slot_json: &[u8], mac: &[u8]) -> bool {
        let Some(expected) = std::str::from_utf8(mac)
            .ok()
            .and_then(|h| hex::decode(h).ok())
        else {
            return false;
        };
        let Some(mut m) = self.mac() else {
            return false;
        };
        m.update(ANCHOR_TAG);
        m.update(slot_json);
        m.verify_slice(&expected).is_ok()
    }
}

/// Whether `dir` lies on a read-only mount (`statvfs`'s `ST_RDONLY`).
fn read_only_mount(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c` is a valid C string and `st` a buffer of the right type for the call.
    if unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) } != 0 {
        return false;
    }
    // SAFETY: initialised by the successful call above.
    let st = unsafe { st.assume_init() };
    st.f_flag & libc::ST_RDONLY != 0
}

/// Whether `path` (not followed) is an empty regular file that is the root of a mount:
/// `statx`'s `STATX_ATTR_MOUNT_ROOT`, or where the kernel does not say (before Linux 5.8),
/// a device other than its directory's.
fn empty_mount_root(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    let mut stx = std::mem::MaybeUninit::<libc::statx>::zeroed();
    // SAFETY: `c` is a valid C string and `stx` a buffer of the right type for the call.
    let r = unsafe {
        libc::statx(
            libc::AT_FDCWD,
            c.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
            libc::STATX_TYPE | libc::STATX_SIZE,
            stx.as_mut_ptr(),
        )
    };
    if r != 0 {
        return false;
    }
    // SAFETY: initialised by the successful call above (and zeroed before it).
    let stx = unsafe { stx.assume_init() };
    let regular = u32::from(stx.stx_mode) & libc::S_IFMT == libc::S_IFREG;
    if !regular || stx.stx_size != 0 {
        return false;
    }
    let flag = libc::STATX_ATTR_MOUNT_ROOT as u64;
    if stx.stx_attributes_mask & flag != 0 {
        return stx.stx_attributes & flag != 0;
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    match (std::fs::symlink_metadata(path), std::fs::metadata(dir)) {
        (Ok(f), Ok(d)) => f.dev() != d.dev(),
        _ => false,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_record_hash_depends_on_the_key_and_leaves_out_only_hash() {
        let a = ChainKey::from_bytes([1; 32]);
        let b = ChainKey::from_bytes([2; 32]);
        let Value::Object(m) = json!({"x": 1, "prev": "p", "hash": "whatever"}) else {
            unreachable!()
        };
        let h = a.record_hash(&m);
        assert!(h.starts_with(KEYED_PREFIX) && h.len() == KEYED_PREFIX.len() + 64);
        assert_ne!(h, b.record_hash(&m));
        assert_eq!(h, a.hash_canonical(br#"{"prev":"p","x":1}"#));
        let mut edited = m.clone();
        edited.insert("hash".into(), "other".into());
        assert_eq!(h, a.record_hash(&edited), "the hash field is not covered");
    }

    #[test]
    fn anchor_macs_are_tagged_and_checked() {
        let k = ChainKey::from_bytes([9; 32]);
        let mac = k.anchor_mac(b"{\"v\":2}");
        assert!(k.anchor_mac_holds(b"{\"v\":2}", mac.as_bytes()));
        assert!(!k.anchor_mac_holds(b"{\"v\":3}", mac.as_bytes()));
        assert!(!k.anchor_mac_holds(b"{\"v\":2}", b"zz"));
        assert_ne!(
            format!("{KEYED_PREFIX}{mac}"),
            k.hash_canonical(b"{\"v\":2}"),
            "a slot's MAC is never a record hash"
        );
    }

    #[test]
    fn a_key_is_written_once() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("audit").join(CHAIN_KEY_FILE);
        let k = ChainKey::from_bytes([4; 32]);
        k.write_new(&p).unwrap();
        assert!(ChainKey::from_bytes([5; 32]).write_new(&p).is_err());
        let KeyRead::Found(back) = ChainKey::read(&p).unwrap() else {
            panic!("no key")
        };
        assert_eq!(back.bytes, [4; 32]);
        std::fs::write(&p, b"short").unwrap();
        assert!(ChainKey::read(&p).is_err());
        assert!(matches!(
            ChainKey::read(&d.path().join("none")).unwrap(),
            KeyRead::Absent
        ));
    }
}
