//! Runtime capabilities (seeds §4.6, §9.4; RUNTIME §4): what a grant lets a principal do
//! on a pack. Policy states the effect class of a verb; a capability states who may use it.

use crate::policy::Operation;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// One capability a principal can hold on a pack (or on every pack, `*`).
///
/// The wire form (serde, [`Display`](fmt::Display), [`FromStr`]) is the dotted token of
/// seeds §4.6: `verb.exec.read`, `verb.exec.write`, `pack.connect`, `sense.enable`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Capability {
    /// Run a verb whose operation is `read` (§4.6: `operation read → verb.exec.read`).
    #[serde(rename = "verb.exec.read")]
    VerbExecRead,
    /// Run a verb whose operation is `write` (§4.6: `operation write → verb.exec.write`).
    #[serde(rename = "verb.exec.write")]
    VerbExecWrite,
    /// Run the pack's connect verb, which establishes a binding (§4.2.5, §9.4).
    #[serde(rename = "pack.connect")]
    PackConnect,
    /// Receive the pack's trigger deliveries (`hcp sense`, §4.6).
    #[serde(rename = "sense.enable")]
    SenseEnable,
}

impl Capability {
    /// Every capability, in wire order.
    pub const ALL: [Capability; 4] = [
        Self::VerbExecRead,
        Self::VerbExecWrite,
        Self::PackConnect,
        Self::SenseEnable,
    ];

    /// The wire token (`verb.exec.read` …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::VerbExecRead => "verb.exec.read",
            Self::VerbExecWrite => "verb.exec.write",
            Self::PackConnect => "pack.connect",
            Self::SenseEnable => "sense.enable",
        }
    }

    /// The capability that running a verb of `operation` needs (§4.6). The connect verb
    /// needs [`Capability::PackConnect`] instead; the caller knows which verb that is.
    pub fn for_operation(operation: Operation) -> Self {
        match operation {
            Operation::Read => Self::VerbExecRead,
            Operation::Write => Self::VerbExecWrite,
        }
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A text that is not one of the four capability tokens.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown capability `{0}`; expected one of `verb.exec.read`, `verb.exec.write`, `pack.connect`, `sense.enable`"
)]
pub struct UnknownCapability(pub String);

impl FromStr for Capability {
    type Err = UnknownCapability;

    /// Parses the exact wire token (case-sensitive, no surrounding space).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| UnknownCapability(s.to_owned()))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::result_large_err)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn wire_tokens_round_trip_through_serde_display_and_from_str() {
        for c in Capability::ALL {
            let json = serde_json::to_string(&c).unwrap();
            assert_eq!(json, format!("\"{c}\""));
            assert_eq!(serde_json::from_str::<Capability>(&json).unwrap(), c);
            assert_eq!(c.as_str().parse::<Capability>().unwrap(), c);
        }
    }

    #[test]
    fn unknown_tokens_are_refused_with_the_list() {
        for bad in ["", "verb.exec", "VERB.EXEC.READ", " pack.connect", "sense"] {
            let e = bad.parse::<Capability>().unwrap_err();
            assert_eq!(e, UnknownCapability(bad.to_owned()));
        }
        assert_eq!(
            "exec".parse::<Capability>().unwrap_err().to_string(),
            "unknown capability `exec`; expected one of `verb.exec.read`, `verb.exec.write`, \
             `pack.connect`, `sense.enable`"
        );
        assert!(serde_json::from_str::<Capability>("\"verb.exec\"").is_err());
    }

    #[test]
    fn operations_map_to_their_capability() {
        assert_eq!(
            Capability::for_operation(Operation::Read),
            Capability::VerbExecRead
        );
        assert_eq!(
            Capability::for_operation(Operation::Write),
            Capability::VerbExecWrite
        );
    }
}
