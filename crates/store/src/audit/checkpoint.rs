//! Signed checkpoints of the trail (RUNTIME §6): `hcp audit checkpoint` prints one for
//! the operator to keep elsewhere; `hcp audit verify --checkpoint FILE` proves the trail
//! still extends it. A checkpoint is one JSON object:
//!
//! ```json
//! {"format": "hcp-audit-checkpoint/1", "origin": "HOST:HCP_HOME", "count": 102,
//!  "head": "sha256:…", "time": "2026-12-01T08:00:00.000Z", "key": "ed25519:<hex>",
//!  "signature": "<hex>"}
//! ```
//!
//! `signature` is Ed25519 (RFC 8032) by the store's key over the [`canonical_json`] of the
//! object without `signature`. The key is `audit/checkpoint.key` (the 32-byte seed,
//! 0600), made on first use. A checkpoint proves what the trail held when it was made;
//! kept where the trail's writers cannot reach, it catches a trail and anchor replaced
//! together by an older or forged copy, which nothing inside the store can.

use super::AuditLog;
use super::fsutil::{load_or_create_secret, random_bytes};
use super::record::canonical_json;
use crate::error::StoreError;
use crate::session::{Timestamp, format_ts};
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The key's file name inside `audit/`.
pub const KEY_FILE: &str = "checkpoint.key";
/// The `format` of a checkpoint.
pub const FORMAT: &str = "hcp-audit-checkpoint/1";

/// A signed checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    /// [`FORMAT`].
    pub format: String,
    /// Which store: the host name and the store's path.
    pub origin: String,
    /// Records in the trail.
    pub count: u64,
    /// The hash of the last of them.
    pub head: String,
    /// When it was made (RFC 3339 UTC, milliseconds).
    pub time: String,
    /// `ed25519:` and the hex public key that signed it.
    pub key: String,
    /// The hex Ed25519 signature.
    pub signature: String,
}

/// Why a checkpoint file cannot be used (`bad_checkpoint`).
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// Not a checkpoint (JSON, fields, format, key or signature encoding).
    #[error("not an audit checkpoint: {0}")]
    Malformed(String),
    /// The signature does not verify with the key it names.
    #[error("its signature does not verify with the key it names: it was altered")]
    BadSignature,
}

impl CheckpointError {
    /// `bad_checkpoint`.
    pub fn code(&self) -> hcp_model::Code {
        hcp_model::Code::BadCheckpoint
    }
}

fn signed_bytes(c: &Checkpoint) -> Vec<u8> {
    let mut v = serde_json::to_value(c).unwrap_or(Value::Null);
    if let Some(m) = v.as_object_mut() {
        m.remove("signature");
    }
    canonical_json(&v)
}

fn key_text(k: &VerifyingKey) -> String {
    format!("ed25519:{}", hex::encode(k.to_bytes()))
}

fn signing_key(log: &AuditLog) -> Result<SigningKey, StoreError> {
    let path = log.dir().join(KEY_FILE);
    let seed = load_or_create_secret(&path, || Ok(random_bytes::<32>()?.to_vec()))?;
    let seed: [u8; 32] = seed
        .as_slice()
        .try_into()
        .map_err(|_| StoreError::Damaged {
            path: path.clone(),
            reason: format!("it holds {} bytes, not 32", seed.len()),
        })?;
    Ok(SigningKey::from_bytes(&seed))
}

/// The store's public key (`ed25519:<hex>`), `None` while it has made none.
///
/// # Errors
/// [`StoreError`] when the key file cannot be read or is damaged.
pub fn public_key(log: &AuditLog) -> Result<Option<String>, StoreError> {
    let path = log.dir().join(KEY_FILE);
    match std::fs::read(&path) {
        Ok(seed) => {
            let seed: [u8; 32] = seed
                .as_slice()
                .try_into()
                .map_err(|_| StoreError::Damaged {
                    path: path.clone(),
                    reason: format!("it holds {} bytes, not 32", seed.len()),
                })?;
            Ok(Some(key_text(
                &SigningKey::from_bytes(&seed).verifying_key(),
            )))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoreError::io("read", &path, e)),
    }
}

/// Signs a checkpoint of `count` records ending with `head` at `time`, with the store's
/// key (made on first use).
///
/// # Errors
/// [`StoreError`] when the key cannot be read or made.
pub fn sign(
    log: &AuditLog,
    count: u64,
    head: &str,
    time: Timestamp,
) -> Result<Checkpoint, StoreError> {
    let key = signing_key(log)?;
    let host = hostname();
    let mut c = Checkpoint {
        format: FORMAT.to_owned(),
        origin: format!("{host}:{}", log.home().root().display()),
        count,
        head: head.to_owned(),
        time: format_ts(time),
        key: key_text(&key.verifying_key()),
        signature: String::new(),
    };
    c.signature = hex::encode(key.sign(&signed_bytes(&c)).to_bytes());
    Ok(c)
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "localhost".into())
}

impl Checkpoint {
    /// Parses a checkpoint and checks its signature against the key it names.
    ///
    /// # Errors
    /// [`CheckpointError`].
    pub fn parse(text: &str) -> Result<Self, CheckpointError> {
        let c: Checkpoint = serde_json::from_str(text.trim())
            .map_err(|e| CheckpointError::Malformed(e.to_string()))?;
        if c.format != FORMAT {
            return Err(CheckpointError::Malformed(format!(
                "format `{}`, expected `{FORMAT}`",
                c.format
            )));
        }
        let key: [u8; 32] = c
            .key
            .strip_prefix("ed25519:")
            .and_then(|h| hex::decode(h).ok())
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| {
                CheckpointError::Malformed("`key` is not `ed25519:` and 64 hex digits".into())
            })?;
        let key = VerifyingKey::from_bytes(&key)
            .map_err(|_| CheckpointError::Malformed("`key` is not an Ed25519 public key".into()))?;
        let sig: [u8; 64] = hex::decode(&c.signature)
            .ok()
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| {
                CheckpointError::Malformed("`signature` is not 128 hex digits".into())
            })?;
        key.verify(&signed_bytes(&c), &Signature::from_bytes(&sig))
            .map_err(|_| CheckpointError::BadSignature)?;
        Ok(c)
    }

    /// The checkpoint as one line of JSON (with `\n`).
    pub fn to_line(&self) -> String {
        let mut s = serde_json::to_string(self).unwrap_or_default();
        s.push('\n');
        s
    }
}
