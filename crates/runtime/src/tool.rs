//! A verb as an MCP tool (RUNTIME §10): its definition — name, description, `inputSchema`
//! (refined by the runtime policy's contract), annotations, `_meta` — as `hcp mcp` lists it
//! ([`Entry::listing`]) and as `hcp policy lock` pins it ([`pack_tool`], RUNTIME §7). Both
//! the MCP catalog and the tool lock read it here, so neither depends on the other.

use crate::schema::{JsonObject, refine};
use hcp_model::{Land, Operation, Plane, Transport};
use hcp_store::pack::InstalledPack;
use jiff::Timestamp;
use serde_json::{Value, json};

/// The longest tool name the MCP specification allows (2025-06-18 / 2025-11-25), in bytes.
pub const MAX_TOOL_NAME: usize = 128;

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
