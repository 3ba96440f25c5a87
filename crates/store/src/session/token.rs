//! Session tokens: the bearer secret a harness hands its agent, and its digest, the only
//! form the store keeps.

use super::SessionError;
use sha2::{Digest, Sha256};
use std::fmt;
use std::io::Read;

/// The prefix of a session token.
pub const TOKEN_PREFIX: &str = "hcps_";

/// Random bytes in a token (256 bits), written as twice as many hex digits.
pub const TOKEN_BYTES: usize = 32;

/// A session token, the secret a harness hands its agent. Its [`Debug`](fmt::Debug) form
/// hides the value; [`Token::as_str`] is the only way to the text.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// A fresh token: [`TOKEN_PREFIX`] and [`TOKEN_BYTES`] bytes of `/dev/urandom` in hex.
    ///
    /// # Errors
    /// [`SessionError::Entropy`] when the random source cannot be read.
    pub fn generate() -> Result<Self, SessionError> {
        let mut bytes = [0u8; TOKEN_BYTES];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut bytes))
            .map_err(SessionError::Entropy)?;
        Ok(Self(format!("{TOKEN_PREFIX}{}", hex::encode(bytes))))
    }

    /// The token's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(hcps_…)")
    }
}

/// Whether `text` has a token's shape: [`TOKEN_PREFIX`] then 64 lowercase hex digits.
pub fn is_token_shape(text: &str) -> bool {
    text.strip_prefix(TOKEN_PREFIX).is_some_and(|h| {
        h.len() == 2 * TOKEN_BYTES && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

/// The sha256 of a token's text, in lowercase hex: the session's file stem.
pub fn token_digest(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}
