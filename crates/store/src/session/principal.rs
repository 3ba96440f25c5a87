//! Principal ids (RUNTIME §4): the charset every name of a session shares, and the
//! reserved id of the owner.

use super::SessionError;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The reserved principal id of the caller without a session (RUNTIME §4: "the local
/// user, holding every grant"). It cannot be given a session or a grant.
pub const OWNER: &str = hcp_model::principal::OWNER;

/// The longest principal id, role, project or `can_view` class, in bytes.
pub const MAX_NAME_LEN: usize = 128;

/// The longest attribute value, in bytes.
pub const MAX_ATTR_VALUE_LEN: usize = 1024;

/// Checks a name (principal id, role, project, `can_view` class) against
/// `^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$`.
///
/// # Errors
/// A lowercase reason.
pub fn validate_name(s: &str) -> Result<(), String> {
    let Some(first) = s.chars().next() else {
        return Err("it is empty".into());
    };
    if s.len() > MAX_NAME_LEN {
        return Err(format!("it is longer than {MAX_NAME_LEN} bytes"));
    }
    if !first.is_ascii_alphanumeric() {
        return Err("it must start with an ASCII letter or digit".into());
    }
    if let Some(c) = s
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '@' | '-')))
    {
        return Err(format!(
            "it holds {c:?}; only ASCII letters, digits, `.`, `_`, `@` and `-` are allowed"
        ));
    }
    Ok(())
}

/// A validated principal id: [`validate_name`]'s charset, and never the reserved
/// [`OWNER`] (compared case-insensitively, so `Owner` cannot pose as the owner either).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct PrincipalId(String);

impl PrincipalId {
    /// Validates `id`.
    ///
    /// # Errors
    /// [`SessionError::BadPrincipal`] for a bad charset or the reserved `owner`.
    pub fn parse(id: &str) -> Result<Self, SessionError> {
        let bad = |reason: String| SessionError::BadPrincipal {
            id: id.to_owned(),
            reason,
        };
        validate_name(id).map_err(bad)?;
        if id.eq_ignore_ascii_case(OWNER) {
            return Err(bad(format!(
                "`{OWNER}` is the reserved id of the caller without a session"
            )));
        }
        Ok(Self(id.to_owned()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for PrincipalId {
    type Error = String;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(&value).map_err(|e| e.to_string())
    }
}

impl From<PrincipalId> for String {
    fn from(value: PrincipalId) -> Self {
        value.0
    }
}

impl fmt::Display for PrincipalId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
