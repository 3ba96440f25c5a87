//! Pack ids (RUNTIME §1.1: `^[a-z0-9]+(-[a-z0-9]+)*$`, at most 64 characters).

use serde::{Deserialize, Serialize};
use std::fmt;

/// The longest pack id, in characters (it becomes an Agent Skills `name`).
pub const MAX_PACK_ID_LEN: usize = 64;

/// Checks a pack id against RUNTIME §1.1.
///
/// # Errors
/// A lowercase message saying what is wrong (empty, too long, a character outside
/// `a-z0-9-`, a leading, trailing or doubled `-`).
pub fn validate_pack_id(id: &str) -> Result<(), String> {
    if id.is_empty() {
        return Err("a pack id may not be empty".into());
    }
    let chars = id.chars().count();
    if chars > MAX_PACK_ID_LEN {
        return Err(format!(
            "pack id is {chars} characters long; at most {MAX_PACK_ID_LEN} are allowed"
        ));
    }
    if let Some(c) = id
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return Err(format!(
            "pack id `{id}` holds {c:?}; only lowercase ASCII letters, digits and single inner `-` are allowed"
        ));
    }
    if id.starts_with('-') || id.ends_with('-') || id.contains("--") {
        return Err(format!(
            "pack id `{id}` has a leading, trailing or doubled `-`"
        ));
    }
    Ok(())
}

/// A validated pack id.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct PackId(String);

impl PackId {
    /// Validates and wraps `id`.
    ///
    /// # Errors
    /// The message of [`validate_pack_id`].
    pub fn parse(id: &str) -> Result<Self, String> {
        validate_pack_id(id)?;
        Ok(Self(id.to_owned()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for PackId {
    type Error = String;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        validate_pack_id(&value)?;
        Ok(Self(value))
    }
}

impl From<PackId> for String {
    fn from(value: PackId) -> Self {
        value.0
    }
}

impl fmt::Display for PackId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_and_refuses() {
        for ok in ["transit", "hcp-cli", "a", "a1-b2", &"a".repeat(64)] {
            assert!(validate_pack_id(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "Transit",
            "../x",
            "a/b",
            &"a".repeat(65),
            "ｔｒａｎｓｉｔ",
            "-a",
            "a-",
            "a--b",
            "a_b",
            "a.b",
        ] {
            assert!(validate_pack_id(bad).is_err(), "{bad}");
        }
    }
}
