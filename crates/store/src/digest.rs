//! The one spelling of a SHA-256 digest in the store's files and records.

use sha2::{Digest, Sha256};

/// `sha256:` and the 64 lowercase hex digits of the SHA-256 of `bytes`: how install
/// records pin files and bins, how the audit trail hashes records, how a confirm accept is
/// bound to a command.
pub fn sha256_tagged(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}
