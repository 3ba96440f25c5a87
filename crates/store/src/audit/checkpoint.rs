//! Signed checkpoints of the trail (RUNTIME §6): `hcp audit checkpoint` prints one for
//! the operator to keep elsewhere; a witness (`audit.witness`, [`super::witness`]) takes
//! one after every act of authority and every 100 calls; `hcp audit verify` proves the
//! trail still extends the newest. A checkpoint is one JSON object:
//!
//! ```json
//! {"format": "hcp-audit-checkpoint/2", "origin": "HOST:HCP_HOME", "store": "<store id>",
//!  "count": 102, "head": "hmac-sha256:…", "time": "2026-12-01T08:00:00.000Z",
//!  "key": "ed25519:<hex>", "signature": "<hex>"}
//! ```
//!
//! `signature` is Ed25519 (RFC 8032) by the store's key over the [`canonical_json`] of the
//! object without `signature`. The key is `audit/checkpoint.key` (the 32-byte seed,
//! 0600), made with the store; its public half is in the store's marker (`store.json`),
//! so a reader without the secret (the bootstrap pack's child) can check a checkpoint.
//! `store` is the store's id (its marker's `store_id`), which names the store's file in a
//! witness; one machine's chain of a fleet (RUNTIME §9) is named by `machine` as well
//! (docs/DESIGN.md, "Checkpoints of a fleet"). Format 1 (no `store`, written before
//! witnesses) is still read. A checkpoint proves what the trail held when it was made;
//! kept where the trail's writers cannot reach, it catches a trail and anchor replaced
//! together by an older or forged copy, which nothing inside the store can.
//!
//! Each checkpoint the store makes is also kept as `audit/checkpoint.last` (the newest
//! one this store signed), for a verifier that cannot reach the witness.

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
pub const FORMAT: &str = "hcp-audit-checkpoint/2";
/// The `format` of checkpoints written before witnesses (no `store`, no `machine`).
pub const FORMAT_1: &str = "hcp-audit-checkpoint/1";
/// The newest checkpoint the store signed, inside `audit/`.
pub const LAST_FILE: &str = "checkpoint.last";

/// A signed checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    /// [`FORMAT`].
    pub format: String,
    /// Which store: the host name and the store's path.
    pub origin: String,
    /// The store's id (format 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<String>,
    /// The machine whose chain of a fleet's database this is (format 2, RUNTIME §9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
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

/// The store's public key (`ed25519:<hex>`): of `audit/checkpoint.key`, or, where that
/// secret cannot be read, the one the store's marker names; `None` when there is neither.
///
/// # Errors
/// [`StoreError`] when the key file cannot be read or is damaged.
pub fn public_key(log: &AuditLog) -> Result<Option<String>, StoreError> {
    let path = log.dir().join(KEY_FILE);
    // Covered by the bootstrap pack's view: an empty file, which a process that may read
    // any file would read as a key of 0 bytes. There is no secret here.
    let read = if super::key::ChainKey::covered_by_view(&path) {
        Err(std::io::Error::from(std::io::ErrorKind::PermissionDenied))
    } else {
        std::fs::read(&path)
    };
    match read {
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
        // A reader without the secret (the bootstrap pack's child): the public half the
        // store's marker names.
        Err(e) => match crate::made::Marker::read(log.home().root()) {
            Ok(Some(m)) => Ok(Some(m.checkpoint_key)),
            _ if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            _ => Err(StoreError::io("read", &path, e)),
        },
    }
}

/// Signs a checkpoint of `count` records ending with `head` at `time`, with the store's
/// key, names it with the store's id (`store`) and keeps it as `audit/checkpoint.last`.
///
/// # Errors
/// [`StoreError`] when the key cannot be read or made.
pub fn sign(
    log: &AuditLog,
    count: u64,
    head: &str,
    time: Timestamp,
) -> Result<Checkpoint, StoreError> {
    let store = crate::made::Marker::read(log.home().root())?.map(|m| m.store_id);
    let c = sign_as(
        log,
        &format!("{}:{}", hostname(), log.home().root().display()),
        store,
        None,
        count,
        head,
        time,
    )?;
    // Best effort: the copy is a convenience for readers without the witness.
    let _ = super::fsutil::replace_unsynced(&log.dir().join(LAST_FILE), c.to_line().as_bytes());
    Ok(c)
}

/// Signs a checkpoint with the store's key for `origin`, `store` and `machine` (one
/// machine's chain of a fleet).
///
/// # Errors
/// [`StoreError`] when the key cannot be read or made.
pub fn sign_as(
    log: &AuditLog,
    origin: &str,
    store: Option<String>,
    machine: Option<String>,
    count: u64,
    head: &str,
    time: Timestamp,
) -> Result<Checkpoint, StoreError> {
    let key = signing_key(log)?;
    let mut c = Checkpoint {
        format: FORMAT.to_owned(),
        origin: origin.to_owned(),
        store,
        machine,
        count,
        head: head.to_owned(),
        time: format_ts(time),
        key: key_text(&key.verifying_key()),
        signature: String::new(),
    };
    c.signature = hex::encode(key.sign(&signed_bytes(&c)).to_bytes());
    Ok(c)
}

/// The newest checkpoint this store signed (`audit/checkpoint.last`), if there is one.
///
/// # Errors
/// [`StoreError`] when it exists and cannot be read; a file that is not a checkpoint is
/// [`StoreError::Damaged`].
pub fn last(log: &AuditLog) -> Result<Option<Checkpoint>, StoreError> {
    let path = log.dir().join(LAST_FILE);
    match std::fs::read_to_string(&path) {
        Ok(t) => Checkpoint::parse(&t)
            .map(Some)
            .map_err(|e| StoreError::Damaged {
                path,
                reason: e.to_string(),
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoreError::io("read", &path, e)),
    }
}

/// The public key of the seed `seed`, as a checkpoint names it (`ed25519:<hex>`).
pub fn public_of(seed: &[u8; 32]) -> String {
    key_text(&SigningKey::from_bytes(seed).verifying_key())
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
        if c.format != FORMAT && c.format != FORMAT_1 {
            return Err(CheckpointError::Malformed(format!(
                "format `{}`, expected `{FORMAT}`",
                c.format
            )));
        }
        if c.format == FORMAT_1 && (c.store.is_some() || c.machine.is_some()) {
            return Err(CheckpointError::Malformed(format!(
                "format `{FORMAT_1}` has no `store` or `machine`"
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
