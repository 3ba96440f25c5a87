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

/// The pack `hcp sense` names and its refs `reference` asks for. A refusal is recorded
/// like exec's (under the principal the session names, `rec.pack_id` the pack asked
/// for). An inactive pack is refused by the gate's step 1 (`hcp_gate::check_stimulus`,
/// the one check of `pack_inactive`): its refs are then the ones asked for, unchecked, so
/// that the gate answers `pack_inactive` before `unknown_stimulus`, as the contract's
/// order has it.
///
/// # Errors
/// The pack's (`not_installed` …), `unknown_stimulus`.
pub(crate) fn stimuli(
    found: Result<(InstalledPack, String), Refusal>,
    active: bool,
    reference: Option<&str>,
    rec: &mut Record,
) -> Result<Stimuli, Stop> {
    let (pack, asked) = found.map_err(Stop::Recorded)?;
    rec.pack_id = Some(pack.id.to_string());
    rec.land = pack.policy.stimuli.get(&asked).map(|p| p.privacy.land);
    let refs = match crate::sense::refs(&pack, reference) {
        Ok(refs) => refs,
        Err(_) if !active => vec![reference.unwrap_or("*").to_owned()],
        Err(r) => return Err(Stop::Recorded(r)),
    };
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
