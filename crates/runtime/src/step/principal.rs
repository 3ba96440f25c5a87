//! Step 2 of RUNTIME §5: who calls — the principal the snapshot made of the session
//! (`crate::snapshot::principal_of`), or the owner without one. A present but bad token is
//! refused (`bad_session`); it never falls back to the owner. A session's facts the
//! runtime policy reads go into the call's records, for a replay (RUNTIME §6, §11).

use super::Stop;
use crate::record::Record;
use crate::refusal::Refusal;
use hcp_model::{Code, Principal};
use hcp_store::session::SessionError;

/// The call's principal; the record is made under it from here on.
///
/// # Errors
/// `bad_session` (77), or the store's failure to read the session.
pub(crate) fn resolve(
    principal: Result<Principal, SessionError>,
    rec: &mut Record,
) -> Result<Principal, Stop> {
    let p = principal.map_err(|e| Stop::Recorded(session_refusal(e)))?;
    rec.principal = Some(p.id.clone());
    crate::replay::note_session(&mut rec.facts, &p);
    Ok(p)
}

/// A session that cannot be used: `bad_session`, or the store's failure.
pub(crate) fn session_refusal(e: SessionError) -> Refusal {
    match e {
        SessionError::Bad(b) => Refusal::new(Code::BadSession, format!("bad session: {b}"))
            .hint("the owner starts a new session with `hcp session start`"),
        SessionError::Store(s) => Refusal::store(&s),
        other => Refusal::new(other.code(), other.to_string()),
    }
}
