//! Step 8 of RUNTIME §5: binding mint. A session runs a pack's connect verb only through
//! `hcp connect` (`connect_only`: its stdout is the credential); the principal's credential
//! for the pack (or its family) is what the snapshot read, handed to the child's
//! environment only. A credential that cannot be minted refuses the call and records the
//! `binding.degraded` stimulus where the pack declares it (for `hcp sense` to deliver).

use super::Stop;
use super::target::Verb;
use crate::Runtime;
use crate::refusal::Refusal;
use hcp_gate::StimulusAllowed;
use hcp_model::{BindingMode, Code, Principal};
use hcp_store::binding::{Credential, MintError};
use hcp_store::pack::InstalledPack;
use jiff::Timestamp;
use serde_json::{Map, Value};

/// Whether the call runs a connect verb for `hcp connect`: the one path on which a session
/// may run it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConnectVerb {
    /// Through `hcp connect`.
    Connecting,
    /// Through any other face.
    Refused,
}

/// Step 8 for a verb: its credential, when its pack has a `user` binding and it is not
/// the connect verb.
///
/// # Errors
/// `connect_only` for a session's call of the connect verb not made by `hcp connect`;
/// `binding_required`, `binding_insecure`, or the store's failure to read the credential.
pub(crate) fn verb(
    rt: &Runtime,
    (verb, principal): (&Verb, &Principal),
    connect: ConnectVerb,
    credential: Option<Result<Credential, MintError>>,
    now: Timestamp,
) -> Result<Option<Credential>, Stop> {
    let pack = &verb.pack;
    if connect == ConnectVerb::Refused
        && !principal.is_owner()
        && pack.manifest.connect_verb() == Some(verb.key.as_str())
    {
        return Err(Refusal::new(
            Code::ConnectOnly,
            format!(
                "verb `{}` establishes the binding of `{}`; a session runs it through `hcp connect`",
                verb.key, pack.id
            ),
        )
        .hint(format!("run `hcp connect {}`", pack.id))
        .into());
    }
    match credential {
        None => Ok(None),
        Some(Ok(c)) => Ok(Some(c)),
        Some(Err(e)) => Err(mint_refusal(rt, pack, &principal.id, &verb.key, &e, now).into()),
    }
}

/// What a sense's triggers get of the binding.
#[derive(Debug)]
pub(crate) enum Mint {
    /// The credential's object for their environment, if the pack has a `user` binding.
    Bound(Option<Map<String, Value>>),
    /// Every ref was asked for and the credential cannot be minted (its code): no trigger
    /// runs, the recorded stimuli still flow (among them the `binding.degraded` just
    /// recorded).
    Unbound(Code),
}

/// Step 8 for a sense: the credential of the triggers that run (those with a command).
///
/// # Errors
/// The mint's refusal when a ref was asked for by name.
pub(crate) fn stimuli(
    rt: &Runtime,
    (pack, principal): (&InstalledPack, &Principal),
    (allowed, reference): (&[(String, StimulusAllowed)], Option<&str>),
    credential: Option<Result<Credential, MintError>>,
    now: Timestamp,
) -> Result<Mint, Stop> {
    let running = allowed.iter().find(|(_, a)| a.plan.is_some());
    let (Some((first, _)), BindingMode::User) = (running, pack.manifest.binding.mode) else {
        return Ok(Mint::Bound(None));
    };
    match credential {
        Some(Ok(c)) => Ok(Mint::Bound(Some(c.secret))),
        Some(Err(e)) => {
            let r = mint_refusal(rt, pack, &principal.id, first, &e, now);
            match reference {
                Some(_) => Err(r.into()),
                None => Ok(Mint::Unbound(r.code)),
            }
        }
        None => Ok(Mint::Bound(None)),
    }
}

/// Binding mint failed: record `binding.degraded` where the pack declares it (best
/// effort: the refusal stands either way), and refuse.
fn mint_refusal(
    rt: &Runtime,
    pack: &InstalledPack,
    principal: &str,
    key: &str,
    e: &MintError,
    now: Timestamp,
) -> Refusal {
    let _ = crate::degraded::record(rt.home(), pack, principal, key, e, now);
    let hint = if e.code() == Code::BindingInsecure {
        format!(
            "others may read it: `hcp disconnect {0}` then `hcp connect {0}` writes it 0600 again",
            pack.id
        )
    } else if e.code() == Code::StoreDamaged
        && e.to_string().ends_with(hcp_store::ledger::UNBELIEVED)
    {
        hcp_store::ledger::UNBELIEVED_HINT.to_owned()
    } else if e.code() == Code::StoreDamaged {
        // Edited by hand, or copied from another principal's name: never used.
        format!(
            "`hcp disconnect {0}` removes it, then `hcp connect {0}` stores a new one; `hcp doctor` lists it",
            pack.id
        )
    } else {
        format!("run `hcp connect {}` to establish the binding", pack.id)
    };
    Refusal::new(e.code(), e.to_string()).hint(hint)
}
