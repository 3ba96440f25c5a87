//! The keyed digest of a call's arguments (RUNTIME §6): HMAC-SHA-256 with a per-store
//! secret, so a record never holds a value and a guessable value (`{"query":"Central"}`)
//! cannot be confirmed from its digest without the secret.

use super::fsutil::{load_or_create_secret, random_bytes};
use super::record::canonical_json;
use crate::error::StoreError;
use crate::home::{Home, StoreDir};
use hcp_model::ArgValue;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Map, Value};
use sha2::Sha256;

/// The secret's file name inside `audit/` (32 random bytes, 0600).
pub const DIGEST_SECRET_FILE: &str = "digest.secret";
/// The prefix of a keyed digest.
pub const DIGEST_PREFIX: &str = "hmac-sha256:";
/// Bytes of the secret.
pub const SECRET_BYTES: usize = 32;

/// The per-store secret of the argument digest.
#[derive(Clone)]
pub struct DigestKey {
    secret: [u8; SECRET_BYTES],
}

impl std::fmt::Debug for DigestKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DigestKey(..)")
    }
}

impl DigestKey {
    /// A key from its bytes (a backend that keeps the secret elsewhere, tests).
    pub fn from_bytes(secret: [u8; SECRET_BYTES]) -> Self {
        Self { secret }
    }

    /// The store's key: `audit/digest.secret`, made on first use (32 bytes of
    /// `/dev/urandom`, 0600 in a 0700 directory; two first users agree on one).
    ///
    /// # Errors
    /// [`StoreError`] when the file cannot be read or made, or is not 32 bytes.
    pub fn load_or_create(home: &Home) -> Result<Self, StoreError> {
        let path = home.dir(StoreDir::Audit).join(DIGEST_SECRET_FILE);
        let bytes = load_or_create_secret(&path, || Ok(random_bytes::<SECRET_BYTES>()?.to_vec()))?;
        let secret: [u8; SECRET_BYTES] =
            bytes
                .as_slice()
                .try_into()
                .map_err(|_| StoreError::Damaged {
                    path: path.clone(),
                    reason: format!("it holds {} bytes, not {SECRET_BYTES}", bytes.len()),
                })?;
        Ok(Self { secret })
    }

    /// `hmac-sha256:` and the lowercase hex HMAC-SHA-256 of `bytes`.
    pub fn digest(&self, bytes: &[u8]) -> String {
        // HMAC takes a key of any length; 32 bytes never fail.
        let mut mac = match <Hmac<Sha256> as KeyInit>::new_from_slice(&self.secret) {
            Ok(m) => m,
            Err(_) => return String::new(),
        };
        mac.update(bytes);
        format!(
            "{DIGEST_PREFIX}{}",
            hex::encode(mac.finalize().into_bytes())
        )
    }

    /// The digest of a call's arguments: [`DigestKey::digest`] over the canonical JSON of
    /// the object `{name: value}` (strings, numbers as written, booleans). The order of
    /// `args` does not matter; no arguments is the digest of `{}`.
    pub fn args_digest<'a>(
        &self,
        args: impl IntoIterator<Item = (&'a str, &'a ArgValue)>,
    ) -> String {
        self.digest(&canonical_json(&Value::Object(args_object(args))))
    }
}

/// The arguments as a JSON object.
pub(crate) fn args_object<'a>(
    args: impl IntoIterator<Item = (&'a str, &'a ArgValue)>,
) -> Map<String, Value> {
    args.into_iter()
        .map(|(k, v)| {
            let value = match v {
                ArgValue::Bool(b) => Value::Bool(*b),
                ArgValue::Number(n) => Value::Number(n.clone()),
                ArgValue::String(s) => Value::String(s.clone()),
            };
            (k.to_owned(), value)
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn keyed_digests_depend_on_the_secret_not_on_order() {
        let a = DigestKey::from_bytes([1; 32]);
        let b = DigestKey::from_bytes([2; 32]);
        let q = ArgValue::String("Central".into());
        let n = ArgValue::Number(3.into());
        let d = a.args_digest([("query", &q), ("n", &n)]);
        assert_eq!(d, a.args_digest([("n", &n), ("query", &q)]));
        assert_ne!(d, b.args_digest([("query", &q), ("n", &n)]));
        assert!(d.starts_with(DIGEST_PREFIX) && d.len() == DIGEST_PREFIX.len() + 64);
        // The plain sha256 of the canonical object is not it (that one can be guessed).
        assert!(
            !d.contains(&super::super::record::sha256_tagged(br#"{"n":3,"query":"Central"}"#)[7..])
        );
        // RFC 4231 test case 2: key "Jefe".
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(b"Jefe").unwrap();
        mac.update(b"what do ya want for nothing?");
        assert_eq!(
            hex::encode(mac.finalize().into_bytes()),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn the_secret_is_made_once_owner_only() {
        let d = tempfile::tempdir().unwrap();
        let home = Home::open(d.path().join("h")).unwrap();
        let k1 = DigestKey::load_or_create(&home).unwrap();
        let k2 = DigestKey::load_or_create(&home).unwrap();
        assert_eq!(k1.secret, k2.secret);
        let path = home.dir(StoreDir::Audit).join(DIGEST_SECRET_FILE);
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&home.dir(StoreDir::Audit)), 0o700);
        std::fs::write(&path, b"short").unwrap();
        assert_eq!(
            DigestKey::load_or_create(&home).unwrap_err().code(),
            "store_damaged"
        );
    }
}
