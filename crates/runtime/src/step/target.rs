//! Step 1 of RUNTIME §5: what the call names, as the snapshot resolved it — a verb (the
//! pack must be installed and active, which the gate checks with the rest of steps 1–6),
//! a pack's stimuli (`hcp sense`), or a pack's binding (`hcp disconnect`).

use super::Stop;
use crate::call::Call;
use crate::record::Record;
use crate::refusal::Refusal;
use hcp_store::pack::InstalledPack;

/// A verb, resolved.
#[derive(Debug)]
pub(crate) struct Verb {
    /// Its pack.
    pub pack: InstalledPack,
    /// Its key.
    pub key: String,
    /// For a `kind: openapi` verb, its compiled operation (the pinned copy, RUNTIME §1.3).
    pub operation: Option<hcp_openapi::Operation>,
}

impl Verb {
    /// `PACK_ID.VERB_KEY`, the runtime policy's name of the verb (RUNTIME §7).
    pub fn tool(&self) -> String {
        format!("{}.{}", self.pack.id, self.key)
    }
}

/// The verb `call` names. A miss is recorded under the principal the session names.
///
/// # Errors
/// `unknown_verb`, `ambiguous_verb`, `not_installed` …; a `kind: openapi` verb whose
/// pinned operation cannot be read.
pub(crate) fn verb(
    found: Result<(InstalledPack, String), Refusal>,
    operation: Option<Result<hcp_openapi::Operation, Refusal>>,
    call: &Call,
    rec: &mut Record,
) -> Result<Verb, Stop> {
    let (pack, key) = found.map_err(|r| {
        rec.pack_id.clone_from(&call.pack_id);
        rec.verb_key = Some(call.target.clone());
        Stop::Recorded(r)
    })?;
    rec.pack_id = Some(pack.id.to_string());
    rec.verb_key = Some(key.clone());
    if let Some(entry) = pack.policy.verbs.get(&key) {
        rec.operation = Some(entry.operation);
        rec.land = Some(entry.privacy.land);
    }
    let operation = operation.transpose()?;
    Ok(Verb {
        pack,
        key,
        operation,
    })
}

/// The stimuli of `hcp sense PACK [REF]`: the pack, active, and the refs it declares.
#[derive(Debug)]
pub(crate) struct Stimuli {
    /// The pack.
    pub pack: InstalledPack,
    /// The refs asked for (`REF`, or every ref the pack declares).
    pub refs: Vec<String>,
}

/// The pack `hcp sense` names and its refs `reference` asks for. These refusals come
/// before anything of the call is recorded.
///
/// # Errors
/// The pack's (`not_installed` …), `pack_inactive`, `unknown_stimulus`.
pub(crate) fn stimuli(
    found: Result<(InstalledPack, String), Refusal>,
    active: bool,
    reference: Option<&str>,
    rec: &mut Record,
) -> Result<Stimuli, Stop> {
    let (pack, asked) = found.map_err(Stop::Unrecorded)?;
    if !active {
        let r = hcp_gate::check::inactive(pack.id.as_str());
        return Err(Stop::Unrecorded(Refusal::from_gate(&r)));
    }
    let refs = crate::sense::refs(&pack, reference).map_err(Stop::Unrecorded)?;
    rec.pack_id = Some(pack.id.to_string());
    rec.land = pack.policy.stimuli.get(&asked).map(|p| p.privacy.land);
    Ok(Stimuli { pack, refs })
}

/// The pack of `hcp disconnect` and its connect verb (the binding's record names it).
///
/// # Errors
/// The pack's (`not_installed` …), before anything of the call is recorded.
pub(crate) fn binding(
    found: Result<(InstalledPack, String), Refusal>,
    rec: &mut Record,
) -> Result<Verb, Stop> {
    let (pack, key) = found.map_err(Stop::Unrecorded)?;
    rec.pack_id = Some(pack.id.to_string());
    rec.verb_key = Some(key.clone());
    if let Some(entry) = pack.policy.verbs.get(&key) {
        rec.operation = Some(entry.operation);
        rec.land = Some(entry.privacy.land);
    }
    Ok(Verb {
        pack,
        key,
        operation: None,
    })
}
