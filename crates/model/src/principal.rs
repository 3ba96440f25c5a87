//! Who is calling (RUNTIME §4): the one shape of the principal every step of a call reads
//! — the gate (steps 2–5), the runtime policy (step 7, its role and attributes), binding
//! mint (step 8), the child's `HCP_PRINCIPAL_ID` and the audit record.
//!
//! The runtime derives it once per call, from the session the snapshot read (or none: the
//! owner); nothing else builds one.

use std::collections::BTreeMap;
use std::path::PathBuf;

/// The principal id of the caller without a session, who holds every grant. Reserved:
/// no session may name it.
pub const OWNER: &str = "owner";

/// The principal of one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The principal id: [`OWNER`] without a session, else the session's principal.
    pub id: String,
    /// The session the call is made under; `None` for the owner.
    pub session: Option<SessionFacts>,
    /// The project the caller names for this call (`HCP_PROJECT`), if any: step 5 checks
    /// it against the session's projects, and it is the owner's project for `brain` land.
    pub project: Option<String>,
}

/// What a call reads of its session (RUNTIME §4, §7).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SessionFacts {
    /// The session's id: `sha256:` and the hex digest of its token.
    pub token_sha256: String,
    /// The role for the runtime policy, if any.
    pub role: Option<String>,
    /// Projects the principal is a member of, in the order given at session start.
    pub projects: Vec<String>,
    /// Attributes for the runtime policy's `bind`, key → value.
    pub attributes: BTreeMap<String, String>,
    /// Data classes the principal may see (the runtime policy's projection).
    pub can_view: Vec<String>,
    /// The sandbox working directory of `local` land, absolute; `None`: the caller's
    /// current directory.
    pub workdir: Option<PathBuf>,
}

/// Whether a principal is the owner or speaks through a session: what the steps that
/// treat the two apart (grants, the runtime policy, confinement) ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The local user, without a session.
    Owner,
    /// A session's principal.
    Session,
}

impl Principal {
    /// The owner, calling for `project` (`HCP_PROJECT`) if any.
    pub fn owner(project: Option<String>) -> Self {
        Self {
            id: OWNER.to_owned(),
            session: None,
            project,
        }
    }

    /// The principal `id` of `session`, calling for `project` if any.
    pub fn of_session(id: String, session: SessionFacts, project: Option<String>) -> Self {
        Self {
            id,
            session: Some(session),
            project,
        }
    }

    /// Owner or session.
    pub fn kind(&self) -> Kind {
        match self.session {
            None => Kind::Owner,
            Some(_) => Kind::Session,
        }
    }

    /// Whether this is the owner.
    pub fn is_owner(&self) -> bool {
        self.kind() == Kind::Owner
    }

    /// The session's id (`sha256:…` of its token), for a session principal.
    pub fn session_id(&self) -> Option<&str> {
        self.session.as_ref().map(|s| s.token_sha256.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_owner_has_no_session_and_a_session_principal_has_one() {
        let o = Principal::owner(None);
        assert_eq!(
            (o.id.as_str(), o.kind(), o.session_id()),
            ("owner", Kind::Owner, None)
        );
        let s = SessionFacts {
            token_sha256: "sha256:ab".into(),
            ..SessionFacts::default()
        };
        let p = Principal::of_session("agent".into(), s, Some("p1".into()));
        assert_eq!(
            (
                p.id.as_str(),
                p.kind(),
                p.session_id(),
                p.project.as_deref()
            ),
            ("agent", Kind::Session, Some("sha256:ab"), Some("p1"))
        );
        assert!(!p.is_owner());
    }
}
