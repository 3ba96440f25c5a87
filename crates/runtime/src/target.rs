//! Step 1 of RUNTIME §5, the part that reads the store: which installed pack a target
//! names. `PACK.VERB` (each reading of a dotted target, `hcp_gate::target::readings`), a
//! pack named apart (`pack_id` of an envelope, MCP, connect), else a verb key unique
//! across active packs. Cost does not grow with the number of installed packs unless the
//! target is a bare verb key.
//!
//! A target that names no verb but a subcommand a pack's `pass_through` lists is
//! `pass_through_unsupported` (66), not `unknown_verb`: hcp never runs `pass_through`, and
//! the author promotes it to named verbs with `hcp pack promote DIR` (RUNTIME §1.3).

use crate::refusal::Refusal;
/// The nearest `PACK.VERB` names to a miss (edit distance), for every face's "did you
/// mean": [`hcp_gate::target::suggest`].
pub use hcp_gate::target::suggest;
use hcp_model::Code;
use hcp_store::Home;
use hcp_store::pack::{self, InstalledPack, PackError};

/// The pack and verb key a target resolves to.
///
/// # Errors
/// `unknown_verb` (with suggestions), `ambiguous_verb`, `pass_through_unsupported`, or the
/// store's code when a pack cannot be read.
pub fn resolve(
    home: &Home,
    pack_id: Option<&str>,
    target: &str,
) -> Result<(InstalledPack, String), Refusal> {
    if let Some(id) = pack_id {
        return named(home, id, target);
    }
    let mut passed_through = None;
    let mut named_verbs = Vec::new();
    if let Some(found) = dotted(home, target, &mut passed_through, &mut named_verbs)? {
        return Ok(found);
    }
    bare(home, target, passed_through, named_verbs)
}

/// Pack `id`, installed or not (`None`).
fn load(home: &Home, id: &str) -> Result<Option<InstalledPack>, Refusal> {
    match pack::load(home, id) {
        Ok(p) => Ok(Some(p)),
        Err(PackError::NotInstalled { .. }) => Ok(None),
        Err(e) => Err(Refusal::new(e.code(), e.to_string())),
    }
}

/// Verb `target` of pack `id`, named apart.
fn named(home: &Home, id: &str, target: &str) -> Result<(InstalledPack, String), Refusal> {
    let Some(p) = load(home, id)? else {
        return Err(
            Refusal::new(Code::UnknownVerb, format!("pack `{id}` is not installed"))
                .hint("`hcp list` shows the installed packs"),
        );
    };
    if !p.manifest.verbs.contains_key(target) {
        if p.manifest.pass_through_allows(target) {
            return Err(pass_through(&p, target));
        }
        let known: Vec<String> = p.manifest.verbs.keys().map(|k| typed(id, k)).collect();
        return Err(unknown(target, known));
    }
    Ok((p, target.to_owned()))
}

/// Each `PACK.VERB` reading of a dotted target, in order; notes the first `pass_through`
/// subcommand one names, and the verbs of each installed pack a reading names (active or
/// not: a miss suggests among them too).
fn dotted(
    home: &Home,
    target: &str,
    passed_through: &mut Option<Refusal>,
    named_verbs: &mut Vec<String>,
) -> Result<Option<(InstalledPack, String)>, Refusal> {
    // The readings come in pairs with the same pack id (`echo.say` reads as `echo` +
    // `say`, then `echo` + `echo.say`): each pack is loaded once.
    let mut loaded: Option<(&str, Option<InstalledPack>)> = None;
    for (id, verb) in hcp_gate::target::readings(target) {
        if hcp_model::validate_pack_id(id).is_err() {
            continue;
        }
        if loaded.as_ref().is_none_or(|(l, _)| *l != id) {
            let p = load(home, id)?;
            if let Some(p) = &p {
                named_verbs.extend(typed_verbs(p));
            }
            loaded = Some((id, p));
        }
        if let Some((_, slot)) = &mut loaded {
            if slot
                .as_ref()
                .is_some_and(|p| p.manifest.verbs.contains_key(verb))
                && let Some(p) = slot.take()
            {
                return Ok(Some((p, verb.to_owned())));
            }
            if let Some(p) = slot.as_ref()
                && passed_through.is_none()
                && p.manifest.pass_through_allows(verb)
            {
                *passed_through = Some(pass_through(p, verb));
            }
        }
    }
    Ok(None)
}

/// A bare verb key: unique across active packs. `named_verbs`: the verbs of the installed
/// packs a dotted target named, which a miss suggests among too.
fn bare(
    home: &Home,
    target: &str,
    mut passed_through: Option<Refusal>,
    named_verbs: Vec<String>,
) -> Result<(InstalledPack, String), Refusal> {
    let ids = pack::active_ids(home).map_err(|e| Refusal::store(&e))?;
    let mut hits = Vec::new();
    let mut known = named_verbs;
    for id in ids {
        if let Some(p) = load(home, id.as_str())? {
            for k in p.manifest.verbs.keys() {
                known.push(typed(id.as_str(), k));
            }
            if p.manifest.verbs.contains_key(target) {
                hits.push(p);
            } else if passed_through.is_none() && p.manifest.pass_through_allows(target) {
                passed_through = Some(pass_through(&p, target));
            }
        }
    }
    known.sort();
    known.dedup();
    match hits.len() {
        0 => Err(passed_through.unwrap_or_else(|| unknown(target, known))),
        1 => {
            let p = hits.remove(0);
            Ok((p, target.to_owned()))
        }
        _ => {
            let names: Vec<String> = hits
                .iter()
                .map(|p| format!("`{}.{}`", p.id, target))
                .collect();
            Err(Refusal::new(
                Code::AmbiguousVerb,
                format!(
                    "verb `{target}` is in several active packs: {}",
                    names.join(", ")
                ),
            )
            .hint("name the pack: `hcp exec PACK.VERB`"))
        }
    }
}

/// `pass_through_unsupported`: `sub` is a subcommand `pack`'s `pass_through` lists.
fn pass_through(pack: &InstalledPack, sub: &str) -> Refusal {
    Refusal::new(
        Code::PassThroughUnsupported,
        format!(
            "`{sub}` is a `pass_through` subcommand of pack `{}`; hcp never runs `pass_through`",
            pack.id
        ),
    )
    .hint(format!(
        "the pack's author makes it a named verb with `hcp pack promote {}`, then the owner reinstalls it",
        pack.record.source.display()
    ))
}

/// The target a user types for verb `key` of pack `id`: `PACK.VERB`, or the key alone
/// when it already starts with the pack id (`mail.send` of pack `mail`), as a suggestion
/// should read.
fn typed(id: &str, key: &str) -> String {
    if key.strip_prefix(id).is_some_and(|r| r.starts_with('.')) {
        key.to_owned()
    } else {
        format!("{id}.{key}")
    }
}

/// `` did you mean `X`? `` (up to three, nearest first, [`suggest`]) for `miss` among
/// `known`, when one is near: the one "did you mean" of every command that names a verb
/// or a pack (`hcp exec`, `hcp show`, `hcp grant`).
pub fn did_you_mean<'a>(miss: &str, known: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let s = hcp_gate::target::suggest(miss, known);
    (!s.is_empty()).then(|| {
        format!(
            "did you mean {}?",
            s.iter()
                .map(|x| format!("`{x}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

/// The verbs of `pack` as a user types them (`PACK.VERB`), sorted.
pub fn typed_verbs(pack: &InstalledPack) -> Vec<String> {
    pack.manifest
        .verbs
        .keys()
        .map(|k| typed(pack.id.as_str(), k))
        .collect()
}

/// `not_installed` (66) for pack `id`, its hint the nearest installed pack ids
/// ([`did_you_mean`]) and where to look.
pub fn not_installed(home: &Home, id: &str) -> Refusal {
    let ids = pack::installed_ids(home).unwrap_or_default();
    let near = did_you_mean(id, ids.iter().map(|i| i.as_str()));
    let look = "`hcp list` shows the installed packs; `hcp install DIR` installs one";
    Refusal::new(Code::NotInstalled, format!("pack `{id}` is not installed")).hint(match near {
        Some(n) => format!("{n} {look}"),
        None => look.to_owned(),
    })
}

/// `unknown_verb` for `target`, its hint the nearest of `known` (`PACK.VERB`, the active
/// verbs), else the verbs of the pack the target names, else where to look.
fn unknown(target: &str, known: Vec<String>) -> Refusal {
    let s = hcp_gate::target::suggest(target, known.iter().map(String::as_str));
    let own: Vec<String> = target
        .split_once('.')
        .map(|(pack, _)| {
            known
                .iter()
                .filter(|k| k.strip_prefix(pack).is_some_and(|r| r.starts_with('.')))
                .map(|k| format!("`{k}`"))
                .collect()
        })
        .unwrap_or_default();
    let hint = if s.is_empty() && !own.is_empty() {
        let pack = target.split_once('.').map_or(target, |(p, _)| p);
        format!(
            "the verbs of `{pack}`: {} (`hcp show {pack}`)",
            own.join(", ")
        )
    } else if s.is_empty() {
        "`hcp list` shows the installed packs; `hcp show PACK` their verbs".to_string()
    } else {
        did_you_mean(target, known.iter().map(String::as_str)).unwrap_or_default()
    };
    Refusal::new(Code::UnknownVerb, format!("no active verb `{target}`")).hint(hint)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn hint(target: &str, known: &[&str]) -> String {
        unknown(target, known.iter().map(|k| (*k).to_owned()).collect())
            .hint
            .unwrap_or_default()
    }

    #[test]
    fn a_miss_names_the_nearest_verb_or_the_packs_verbs() {
        assert_eq!(typed("mail", "mail.send"), "mail.send");
        assert_eq!(typed("mail", "notes.create"), "mail.notes.create");
        assert_eq!(typed("mailx", "mail.send"), "mailx.mail.send");
        let known = [
            "mail.send",
            "mail.list",
            "mail.notes.create",
            "transit.find",
        ];
        assert_eq!(hint("mail.snd", &known), "did you mean `mail.send`?");
        assert_eq!(hint("transit.fnd", &known), "did you mean `transit.find`?");
        assert_eq!(
            hint("transit.search", &known),
            "the verbs of `transit`: `transit.find` (`hcp show transit`)"
        );
        assert_eq!(
            hint("zzz.qqq", &known),
            "`hcp list` shows the installed packs; `hcp show PACK` their verbs"
        );
    }
}
