//! Which tools a principal is shown (RUNTIME §10): those it may call. [`visible`] is pure:
//! it answers with the code a call of a hidden tool would be refused with, so the list
//! and the gate agree by construction. Hiding is a convenience for the model; the gate
//! still checks every call, listed or not.

use super::catalog::{Entry, PolicyState};
use crate::Runtime;
use crate::call::Caller;
use hcp_model::{Capability, Code};
use hcp_store::session::SessionError;
use jiff::Timestamp;
use std::collections::BTreeMap;

/// Who looks at the tool list, with what the list depends on read once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Viewer {
    /// No session: the owner, holding every grant; no runtime policy governs it.
    Owner,
    /// A valid session.
    Session(SessionViewer),
    /// A session that cannot be used (bad, expired, ended) or a store that cannot be
    /// read: every call is refused with this code, so nothing is shown.
    Refused(Code),
}

/// A session principal, as the list needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionViewer {
    /// The principal id.
    pub principal: String,
    /// The session's role (empty without one: no role a policy grants).
    pub role: String,
    /// The session's `can_view` classes (which sensitive returns it sees).
    pub can_view: Vec<String>,
    /// Per pack id: the capabilities held and when each was granted, or the store's code
    /// when they could not be read.
    pub grants: BTreeMap<String, Result<Vec<(Capability, Timestamp)>, Code>>,
    /// Whether the session was started with `--workdir` (over HTTP a `local` verb needs
    /// one: `workdir_required`).
    pub has_workdir: bool,
}

impl Viewer {
    /// Reads who `caller` is and, for a session, its grants on each of `packs`, at `now`.
    pub fn load<'a>(
        rt: &Runtime,
        caller: &Caller,
        packs: impl IntoIterator<Item = &'a str>,
        now: Timestamp,
    ) -> Self {
        let Some(token) = &caller.session_token else {
            return Self::Owner;
        };
        let s = match rt.state().session_resolve(&token.to_string_lossy(), now) {
            Ok(s) => s,
            Err(SessionError::Bad(_)) => return Self::Refused(Code::BadSession),
            Err(e) => return Self::Refused(e.code()),
        };
        let mut grants = BTreeMap::new();
        for id in packs {
            let held = hcp_model::PackId::parse(id)
                .map_err(|_| Code::StoreDamaged)
                .and_then(|pack| {
                    rt.state()
                        .grants_held(&s.principal, &pack)
                        .map_err(|e| e.code())
                })
                .map(|h| {
                    h.into_iter()
                        .map(|g| (g.capability, g.granted_at))
                        .collect()
                });
            grants.insert(id.to_owned(), held);
        }
        let p = crate::snapshot::principal_of(s, caller.project.clone());
        let session = p.session.unwrap_or_default();
        Self::Session(SessionViewer {
            principal: p.id,
            role: session.role.unwrap_or_default(),
            can_view: session.can_view,
            grants,
            has_workdir: session.workdir.is_some(),
        })
    }
}

/// Whether `viewer` is shown `entry` under the runtime policy `policy`: `Ok`, or the code
/// a call of it would be refused with, checked in the gate's order (RUNTIME §5). For a
/// session: not a control-plane pack (`control_plane`, step 2); the grant of the verb's
/// operation (and `pack.connect` for the connect verb) held and not suspended by a content
/// change (`missing_grant`, step 4); under a runtime policy (step 7) one that loads (its
/// POLICY code), listing the tool (`unknown_tool`) and allowing it to the session's role
/// (`rbac`); not the connect verb (`connect_only`, step 8). A runtime policy that does not
/// load hides everything from the owner too (every call is refused with its code). Pure.
pub fn visible(entry: &Entry, viewer: &Viewer, policy: &PolicyState) -> Result<(), Code> {
    let s = match viewer {
        Viewer::Owner => {
            return match policy {
                PolicyState::Broken { code, .. } => Err(*code),
                _ => Ok(()),
            };
        }
        Viewer::Refused(code) => return Err(*code),
        Viewer::Session(s) => s,
    };
    if entry.control_plane {
        return Err(Code::ControlPlane);
    }
    let held = match s.grants.get(&entry.pack_id) {
        Some(Ok(h)) => h,
        Some(Err(code)) => return Err(*code),
        None => return Err(Code::MissingGrant),
    };
    let mut needed = vec![Capability::for_operation(entry.operation)];
    if entry.connect {
        needed.push(Capability::PackConnect);
    }
    for cap in needed {
        match hcp_gate::grant::status(held.iter().copied(), cap, entry.content_changed_at) {
            hcp_gate::GrantStatus::Held { .. } => {}
            _ => return Err(Code::MissingGrant),
        }
    }
    match policy {
        PolicyState::Broken { code, .. } => return Err(*code),
        PolicyState::Loaded(p) if p.tool(&entry.name).is_none() => return Err(Code::UnknownTool),
        PolicyState::Loaded(p) if !p.allows(&s.role, &entry.name) => return Err(Code::Rbac),
        _ => {}
    }
    if entry.connect {
        return Err(Code::ConnectOnly);
    }
    Ok(())
}
