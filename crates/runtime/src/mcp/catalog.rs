//! The tools of `hcp mcp`: one per verb of each active pack that offers the `mcp`
//! transport, named `PACK.VERB`, built once per [`Signature`] of the store (the owner's
//! installs, activations and runtime-policy edits), and listed per [`Viewer`] in a stable
//! order (pack id, then the manifest's order of verbs).

use super::visible::{Viewer, visible};
use crate::schema::{JsonObject, output_schema, refine};
use crate::signature::{RecordMark, Signature};
use hcp_model::{Code, Land, Operation, Plane, Transport};
use hcp_store::Home;
use hcp_store::pack::{self, InstalledPack};
use jiff::Timestamp;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The longest tool name the MCP specification allows (2025-06-18 / 2025-11-25), in bytes.
pub const MAX_TOOL_NAME: usize = 128;

/// The operator's runtime policy as the catalog last read it.
#[derive(Debug, Clone, Default)]
pub enum PolicyState {
    /// None is configured.
    #[default]
    None,
    /// It loads.
    Loaded(Arc<histos::Policy>),
    /// It does not load: every call is refused with `code` (RUNTIME §7).
    Broken {
        /// Its POLICY code, or `policy_conflict`.
        code: Code,
        /// Why.
        message: String,
    },
}

/// One tool and the verb it runs.
#[derive(Debug, Clone)]
pub struct Entry {
    /// `PACK.VERB`.
    pub name: String,
    /// The pack id.
    pub pack_id: String,
    /// The verb key.
    pub verb_key: String,
    /// The verb's operation.
    pub operation: Operation,
    /// The verb's land.
    pub land: Land,
    /// Whether the pack is a control-plane pack.
    pub control_plane: bool,
    /// Whether the verb is the pack's connect verb.
    pub connect: bool,
    /// Whether the verb's policy says `confirm`.
    pub confirm: bool,
    /// The pack's `content_changed_at` (the rug-pull guard).
    pub content_changed_at: Option<Timestamp>,
    /// `inputSchema` (with `confirm` where the policy asks for it).
    input_schema: JsonObject,
    /// The tool's description, before the note on confirmation.
    description: String,
    /// `annotations`.
    annotations: Value,
    /// `_meta`.
    meta: Value,
}

/// The tools of one signature. Packs are kept by their record mark, so a rebuild after
/// one pack changed reuses the others' tools: a pack whose files were damaged under it
/// stays listed as it was (and is refused when called).
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    /// The signature these tools were built for.
    pub signature: Signature,
    /// The runtime policy read with it.
    pub policy: PolicyState,
    /// Per active pack: its record mark and its tools, in manifest order.
    packs: BTreeMap<String, (RecordMark, Vec<Entry>)>,
    /// What was left out and why, for the server's log (stderr).
    pub warnings: Vec<String>,
}

/// How the client confirms a confirm-gated write: which `inputSchema` and description
/// the list shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfirmBy {
    /// `confirm: true` among the arguments (RUNTIME §5): a client without elicitation.
    Argument,
    /// The person, asked through the client's elicitation (RUNTIME §10): `confirm` is not
    /// offered (and not counted: the server drops it, `confirm::for_the_person`).
    Person,
}

impl Catalog {
    /// Builds the catalog of `signature`, reusing `previous` tools of packs whose record
    /// mark did not change (when the runtime policy did not change either). A pack that
    /// cannot be loaded, and was not listed before, is left out (with a warning on
    /// stderr).
    pub fn build(home: &Home, signature: Signature, previous: &Catalog) -> Self {
        let same_policy = previous.signature.policy == signature.policy;
        let policy = match crate::policy::load(home) {
            Ok(None) => PolicyState::None,
            // Observe mode (RUNTIME §11): the policy shapes no listing either.
            Ok(Some(_)) if crate::policy::observe::observing(home) => PolicyState::None,
            Ok(Some(rp)) => PolicyState::Loaded(Arc::new(rp.policy)),
            Err(r) => PolicyState::Broken {
                code: r.code,
                message: r.message,
            },
        };
        let contracts = match &policy {
            PolicyState::Loaded(p) => Some(p.as_ref()),
            _ => None,
        };
        let mut packs = BTreeMap::new();
        let mut warnings = Vec::new();
        if let PolicyState::Broken { code, message } = &policy {
            warnings.push(format!(
                "no tool is listed while the runtime policy does not load ({code}): {message}"
            ));
        }
        for mark in &signature.packs {
            let before = previous.packs.get(&mark.0).filter(|(m, _)| m == mark);
            if let Some((_, tools)) = before
                && same_policy
            {
                packs.insert(mark.0.clone(), (mark.clone(), tools.clone()));
                continue;
            }
            match pack::load(home, &mark.0) {
                Ok(p) => {
                    let tools = tools_of(&p, contracts, &mut warnings);
                    packs.insert(mark.0.clone(), (mark.clone(), tools));
                }
                // Damaged under us since it was listed: stays listed as it was.
                Err(_) if before.is_some() => {
                    if let Some((_, tools)) = before {
                        packs.insert(mark.0.clone(), (mark.clone(), tools.clone()));
                    }
                }
                Err(e) => warnings.push(format!("pack `{}` is not listed: {e}", mark.0)),
            }
        }
        Self {
            signature,
            policy,
            packs,
            warnings,
        }
    }

    /// Every tool, by pack id then manifest order, whoever looks.
    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.packs.values().flat_map(|(_, t)| t.iter())
    }

    /// The ids of the packs listed.
    pub fn pack_ids(&self) -> impl Iterator<Item = &str> {
        self.packs.keys().map(String::as_str)
    }

    /// The tool named `name`, whoever looks (a call of a tool not shown to the caller
    /// still goes to the gate, which refuses it with its code).
    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.entries().find(|e| e.name == name)
    }

    /// The tools `viewer` is shown ([`visible`]), in order, as `tools/list` entries.
    pub fn listed(&self, viewer: &Viewer, by: ConfirmBy) -> Vec<Value> {
        self.entries()
            .filter(|e| visible(e, viewer, &self.policy).is_ok())
            .map(|e| self.tool(e, viewer, by))
            .collect()
    }

    /// The names of the tools `viewer` is shown, in order.
    pub fn names(&self, viewer: &Viewer) -> Vec<String> {
        self.entries()
            .filter(|e| visible(e, viewer, &self.policy).is_ok())
            .map(|e| e.name.clone())
            .collect()
    }

    /// The `outputSchema` of `entry` for `viewer`: for a session principal (the runtime
    /// policy governs its calls and their output, RUNTIME §7), from the policy's `returns`
    /// for the tool ([`output_schema`]); none for the owner, whose calls no policy shapes.
    pub fn output_schema(&self, entry: &Entry, viewer: &Viewer) -> Option<JsonObject> {
        let (PolicyState::Loaded(p), Viewer::Session(s)) = (&self.policy, viewer) else {
            return None;
        };
        let returns = p.tool(&entry.name)?.returns.as_ref()?;
        Some(output_schema(returns, &s.can_view))
    }

    /// The `tools/list` entry of `e` for `viewer`: [`Entry::listing`], and the tool's
    /// `outputSchema` for a session under a runtime policy.
    fn tool(&self, e: &Entry, viewer: &Viewer, by: ConfirmBy) -> Value {
        let mut tool = e.listing(by);
        if let Some(out) = self.output_schema(e, viewer) {
            tool["outputSchema"] = Value::Object(out);
        }
        tool
    }
}

impl Entry {
    /// The tool as listed to a client that confirms `by` (without the `outputSchema` a
    /// session may get): `name`, `description` (the manifest's, then the operation, the
    /// land and how the call is confirmed), `inputSchema`, `annotations`, `_meta`.
    pub fn listing(&self, by: ConfirmBy) -> Value {
        let mut input = self.input_schema.clone();
        let note = match (self.confirm, by) {
            (false, _) => "",
            (true, ConfirmBy::Argument) => {
                "; needs `confirm: true`, else the call is refused with `confirm required`"
            }
            (true, ConfirmBy::Person) => {
                if let Some(Value::Object(p)) = input.get_mut("properties") {
                    p.remove("confirm");
                }
                "; the person is asked to confirm the exact command before it runs"
            }
        };
        let land = self.meta["hcp"]["land"].as_str().unwrap_or_default();
        json!({
            "name": self.name,
            "description": format!("{} ({}, land {land}{note})", self.description, self.operation),
            "inputSchema": input,
            "annotations": self.annotations,
            "_meta": self.meta,
        })
    }
}

/// The tool of `verb_key` of `p` exactly as `hcp mcp` lists it to a client that confirms
/// by argument when no runtime policy narrows it ([`Entry::listing`] with
/// [`ConfirmBy::Argument`]): what `hcp policy lock` pins (RUNTIME §7), so that a tool that
/// reads `tools/list` (the Histos reference's `import --kind mcp`) computes the lock's
/// hashes. `None` when the pack has no such verb, no policy entry for it, or cannot plan
/// it. The pack's `transports` and the MCP tool-name rule do not matter here: every verb
/// is locked.
pub fn pack_tool(p: &InstalledPack, verb_key: &str) -> Option<Value> {
    let spec = p.manifest.verbs.get(verb_key)?;
    entry_of(p, verb_key, spec, None).map(|e| e.listing(ConfirmBy::Argument))
}

/// Whether `name` is a tool name the MCP specification allows: 1–128 characters from
/// `A-Z a-z 0-9 _ - .`.
pub fn valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TOOL_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// The tools of a pack: none unless its `transports` include `mcp`; one per verb the
/// policy covers and the manifest can plan, in manifest order. The runtime policy's
/// argument contract for `PACK.VERB`, where there is one, refines the input schema. A verb
/// whose name MCP does not allow is left out, with a line in `warnings`.
pub fn tools_of(
    p: &InstalledPack,
    runtime: Option<&histos::Policy>,
    warnings: &mut Vec<String>,
) -> Vec<Entry> {
    let m = &p.manifest;
    if !m.offers(Transport::Mcp) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (verb_key, spec) in m.verbs.iter() {
        let name = format!("{}.{verb_key}", p.id);
        if !valid_tool_name(&name) {
            warnings.push(format!(
                "verb `{verb_key}` of `{}` is not listed: `{name}` is not an mcp tool name (1-128 of A-Z a-z 0-9 _ - .)",
                p.id
            ));
            continue;
        }
        if let Some(e) = entry_of(p, verb_key, spec, runtime) {
            out.push(e);
        }
    }
    out
}

/// The tool of one verb of `p`, its input schema refined by the runtime policy's argument
/// contract for it when `runtime` has one; `None` when the policy of the pack has no entry
/// for the verb or the verb cannot be planned.
fn entry_of(
    p: &InstalledPack,
    verb_key: &str,
    spec: &hcp_model::manifest::VerbSpec,
    runtime: Option<&histos::Policy>,
) -> Option<Entry> {
    let name = format!("{}.{verb_key}", p.id);
    let m = &p.manifest;
    let entry = p.policy.verbs.get(verb_key)?;
    let confirm = entry.needs_confirm();
    // A `kind: openapi` verb's schema comes from its pinned operation.
    let mut schema = crate::schema::verb_input_schema(p, verb_key, confirm)?;
    if let Some(contract) = runtime
        .and_then(|r| r.tool(&name))
        .and_then(|t| t.args.as_ref())
    {
        refine(&mut schema, contract);
    }
    let land = entry.privacy.land;
    Some(Entry {
        pack_id: p.id.to_string(),
        verb_key: verb_key.to_owned(),
        operation: entry.operation,
        land,
        control_plane: m.plane == Plane::Control,
        connect: m.connect_verb() == Some(verb_key),
        confirm,
        content_changed_at: p
            .record
            .content_changed_at
            .as_deref()
            .and_then(|t| t.parse::<Timestamp>().ok()),
        input_schema: schema,
        description: spec.description.trim().to_owned(),
        annotations: annotations(entry.operation, land),
        meta: json!({ "hcp": {
            "pack_id": p.id.as_str(),
            "verb_key": verb_key,
            "operation": entry.operation.to_string(),
            "land": land.to_string(),
            "confirm": confirm,
        }}),
        name,
    })
}

/// Hints from the policy (they describe; the gate still enforces): `readOnlyHint` for a
/// read, `destructiveHint` for a write, `openWorldHint` false for `local` land (other
/// lands may reach an upstream: left unsaid).
pub fn annotations(operation: Operation, land: Land) -> Value {
    let mut a = json!({ "readOnlyHint": operation == Operation::Read });
    if operation == Operation::Write {
        a["destructiveHint"] = json!(true);
    }
    if land == Land::Local {
        a["openWorldHint"] = json!(false);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn hints_follow_the_policy() {
        assert_eq!(
            annotations(Operation::Read, Land::Local),
            json!({ "readOnlyHint": true, "openWorldHint": false })
        );
        assert_eq!(
            annotations(Operation::Write, Land::Personal),
            json!({ "readOnlyHint": false, "destructiveHint": true })
        );
        assert_eq!(
            annotations(Operation::Write, Land::Local),
            json!({ "readOnlyHint": false, "destructiveHint": true, "openWorldHint": false })
        );
    }

    #[test]
    fn tool_names_follow_the_spec() {
        assert!(valid_tool_name("transit.find"));
        assert!(valid_tool_name("echo.echo.say"));
        assert!(valid_tool_name("a-b_c.D9"));
        assert!(!valid_tool_name(""));
        assert!(!valid_tool_name("a b"));
        assert!(!valid_tool_name("a/b"));
        assert!(!valid_tool_name(&"a".repeat(129)));
        assert!(valid_tool_name(&"a".repeat(128)));
    }
}
