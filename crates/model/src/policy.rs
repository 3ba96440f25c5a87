//! `policy.json` (seeds §4.1): one entry per verb and per stimulus trigger.

use crate::strict::StrictMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The policy file of a pack (seeds §4.1). Unknown fields at any level fail parse.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyFile {
    /// Must equal the manifest `id` (§4.4.5, lint `surface_id_mismatch`).
    pub surface_id: String,
    /// Must be `1` (lint `bad_version`).
    pub version: u32,
    /// One entry per manifest `verb_key` (§4.4.1–2).
    pub verbs: StrictMap<PolicyEntry>,
    /// One entry per stimulus trigger `ref` (§4.4.3–4); default empty.
    #[serde(default)]
    pub stimuli: StrictMap<PolicyEntry>,
}

/// What a runtime must know about one verb or trigger (seeds §4.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyEntry {
    /// Effect class (§4.2).
    pub operation: Operation,
    /// Privacy land (§4.3).
    pub privacy: Privacy,
    /// Writes only (§4.5.1): the command is refused unless the call says `confirm`/`apply`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirm: Option<bool>,
}

impl PolicyEntry {
    /// Whether the confirm gate of §4.5.2 applies.
    pub fn needs_confirm(&self) -> bool {
        self.confirm == Some(true)
    }
}

/// The privacy object (§4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Privacy {
    /// The land token (§4.3).
    pub land: Land,
}

/// `read` or `write` (§4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Operation {
    /// No side effect an invoker would need to undo.
    Read,
    /// Changes state.
    Write,
}

impl Operation {
    /// The wire token.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The privacy land (§4.3). No other token is accepted (§4.3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Land {
    /// Actor-private data or effect: restricted to the principal's own scope.
    Personal,
    /// Shared project context: needs a project and membership.
    Brain,
    /// A local workspace directory: bound to the sandbox working directory.
    Local,
}

impl Land {
    /// The wire token.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Personal => "personal",
            Self::Brain => "brain",
            Self::Local => "local",
        }
    }
}

impl fmt::Display for Land {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use crate::{ParseCode, parse_policy};
    use pretty_assertions::assert_eq;

    const GOOD: &str = r#"{
  "surface_id": "mail",
  "version": 1,
  "verbs": {
    "mail.send": { "operation": "write", "privacy": { "land": "personal" }, "confirm": true }
  }
}"#;

    #[test]
    fn parses_the_seed_shape() {
        let p = parse_policy(GOOD).unwrap();
        assert!(p.verbs.get("mail.send").unwrap().needs_confirm());
        assert!(p.stimuli.is_empty());
    }

    fn code(text: &str) -> ParseCode {
        parse_policy(text).unwrap_err().code
    }

    #[test]
    fn bad_inputs_have_their_codes() {
        assert_eq!(
            code(&GOOD.replace("\"confirm\"", "\"confrim\"")),
            ParseCode::UnknownField
        );
        assert_eq!(
            code(&GOOD.replace(r#"{ "land": "personal" }"#, r#"{ "lands": "local" }"#)),
            ParseCode::UnknownField
        );
        assert_eq!(code(&GOOD.replace("personal", "team")), ParseCode::BadLand);
        assert_eq!(
            code(&GOOD.replace("\"write\"", "\"delete\"")),
            ParseCode::BadOperation
        );
        assert_eq!(code(&GOOD.replace("true", "\"yes\"")), ParseCode::BadJson);
        assert_eq!(
            code(&GOOD.replace("\"version\": 1", "\"version\": \"1\"")),
            ParseCode::BadVersion
        );
        assert_eq!(
            code(&GOOD.replace("\"version\": 1,", "\"version\": 1, \"version\": 1,")),
            ParseCode::DuplicateKey
        );
    }

    #[test]
    fn bad_land_names_its_line() {
        let e = parse_policy(&GOOD.replace("personal", "team")).unwrap_err();
        assert_eq!(e.line, 5);
        assert_eq!(e.path, "verbs.mail.send.privacy.land");
    }
}
