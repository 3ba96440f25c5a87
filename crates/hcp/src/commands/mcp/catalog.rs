//! The tools `hcp mcp` lists: one per verb of each active pack that offers the `mcp`
//! transport, named `PACK.VERB`, and the cheap signature that tells when the owner changed
//! the set (install, reinstall, activate, deactivate, uninstall).

use hcp_model::manifest::arguments;
use hcp_model::{Land, Operation, Transport};
use hcp_store::Home;
use hcp_store::pack::{self, InstallRecord, InstalledPack};
use rmcp::model::{JsonObject, MetaObject, Tool, ToolAnnotations};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The longest tool name the MCP specification allows (2025-06-18 / 2025-11-25), in bytes.
pub const MAX_TOOL_NAME: usize = 128;

/// What the owner last did to one active pack, as its install record says: `(pack id,
/// installed_at, files_digest)`. Empty strings when the record cannot be read.
pub type RecordMark = (String, String, String);

/// The signature of the tool set: the active pack ids, each with its install record's
/// `installed_at` and `files_digest`, sorted by id. It changes when the owner installs,
/// reinstalls, activates, deactivates or uninstalls; it does not change when a pack's
/// files or bin change under it without a reinstall (that pack is refused at call time
/// with `store_damaged` or `bin_changed`, never re-listed).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Signature(pub Vec<RecordMark>);

impl Signature {
    /// Reads the signature: one listing of `state/active/` and one small record file per
    /// active pack (no manifest is parsed, no pack file hashed).
    ///
    /// # Errors
    /// The store's, as text, when `state/active/` cannot be read.
    pub fn read(home: &Home) -> Result<Self, String> {
        let ids = pack::active_ids(home).map_err(|e| e.to_string())?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            let path = pack::pack_dir(home, id.as_str())
                .join(pack::record::RECORD_DIR)
                .join(pack::record::RECORD_FILE);
            let mark = std::fs::read(&path)
                .ok()
                .and_then(|b| InstallRecord::from_bytes(&b, &path).ok())
                .map(|r| (r.installed_at, r.files_digest))
                .unwrap_or_default();
            out.push((id.to_string(), mark.0, mark.1));
        }
        Ok(Self(out))
    }
}

/// One listed tool and the verb it runs.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The MCP tool, as `tools/list` shows it.
    pub tool: Tool,
    /// The pack id.
    pub pack_id: String,
    /// The verb key.
    pub verb_key: String,
}

/// The tools of one signature. Packs are kept by their record mark, so a rebuild after
/// one pack changed reuses the others' tools: a pack whose files were damaged under it
/// stays listed as it was (and is refused when called).
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    /// The signature these tools were built for.
    pub signature: Signature,
    /// Per active pack: its record mark and its tools, in manifest order.
    packs: BTreeMap<String, (RecordMark, Vec<Entry>)>,
}

impl Catalog {
    /// Builds the catalog of `signature`, reusing `previous` tools of packs whose record
    /// mark did not change. A pack that cannot be loaded, and was not listed before, is
    /// left out (with a warning on stderr).
    pub fn build(home: &Home, signature: Signature, previous: &Catalog) -> Self {
        let mut packs = BTreeMap::new();
        for mark in &signature.0 {
            if let Some((old_mark, tools)) = previous.packs.get(&mark.0)
                && old_mark == mark
            {
                packs.insert(mark.0.clone(), (mark.clone(), tools.clone()));
                continue;
            }
            match pack::load(home, &mark.0) {
                Ok(p) => {
                    packs.insert(mark.0.clone(), (mark.clone(), tools_of(&p)));
                }
                Err(e) => tracing::warn!("pack `{}` is not listed: {e}", mark.0),
            }
        }
        Self { signature, packs }
    }

    /// Every tool, by pack id then manifest order.
    pub fn tools(&self) -> impl Iterator<Item = &Entry> {
        self.packs.values().flat_map(|(_, t)| t.iter())
    }

    /// The tool named `name`.
    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.tools().find(|e| e.tool.name == name)
    }
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
/// policy covers and the manifest can plan, in manifest order.
pub fn tools_of(p: &InstalledPack) -> Vec<Entry> {
    let m = &p.manifest;
    if !m.offers(Transport::Mcp) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (verb_key, spec) in m.verbs.iter() {
        let name = format!("{}.{verb_key}", p.id);
        if !valid_tool_name(&name) {
            tracing::warn!(
                "verb `{verb_key}` of `{}` is not listed: `{name}` is not an mcp tool name (1-128 of A-Z a-z 0-9 _ - .)",
                p.id
            );
            continue;
        }
        let (Some(entry), Ok(plan)) = (p.policy.verbs.get(verb_key), m.plan_verb(verb_key)) else {
            continue;
        };
        let confirm = entry.confirm == Some(true);
        let args = arguments(&plan);
        let schema = input_schema(&args, confirm);
        let mut description = spec.description.trim().to_owned();
        description.push_str(&format!(
            " ({}, land {}{})",
            entry.operation,
            entry.privacy.land,
            if confirm {
                "; needs `confirm: true`, else the call is refused with `confirm required`"
            } else {
                ""
            }
        ));
        let annotations = annotations(entry.operation, entry.privacy.land, confirm);
        let mut meta = JsonObject::new();
        meta.insert(
            "hcp".into(),
            json!({
                "pack_id": p.id.as_str(),
                "verb_key": verb_key,
                "operation": entry.operation.to_string(),
                "land": entry.privacy.land.to_string(),
                "confirm": confirm,
            }),
        );
        let tool = Tool::new(name, description, Arc::new(schema))
            .annotate(annotations)
            .with_meta(MetaObject(meta));
        out.push(Entry {
            tool,
            pack_id: p.id.to_string(),
            verb_key: verb_key.clone(),
        });
    }
    out
}

/// The `inputSchema` of a verb: each placeholder a string (what the child receives; a
/// number or boolean is accepted too and passed as its JSON text, as on the envelope face,
/// but a single `type` keeps the schema portable across model providers), the required
/// ones required, `confirm` (boolean) where the policy sets `confirm: true`, and nothing
/// else (`additionalProperties: false`).
pub fn input_schema(args: &[(String, bool)], confirm: bool) -> JsonObject {
    let mut props = JsonObject::new();
    let mut required = Vec::new();
    for (name, req) in args {
        props.insert(
            name.clone(),
            json!({
                "type": "string",
                "description": format!("fills `{{{{{name}}}}}` of the verb's command, as one argument")
            }),
        );
        if *req {
            required.push(Value::String(name.clone()));
        }
    }
    if confirm {
        props.insert(
            "confirm".into(),
            json!({
                "type": "boolean",
                "description": "true to run this write; without it the call is refused with `confirm required` (HCP §4.5)"
            }),
        );
    }
    let mut schema = JsonObject::new();
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), Value::Object(props));
    if !required.is_empty() {
        schema.insert("required".into(), Value::Array(required));
    }
    schema.insert("additionalProperties".into(), json!(false));
    schema
}

/// Hints from the policy (they describe; the gate still enforces): `readOnlyHint` for a
/// read; for a write, `destructiveHint` is the policy's `confirm`; `openWorldHint` false
/// for `local` land (other lands may reach an upstream: left unsaid).
pub fn annotations(operation: Operation, land: Land, confirm: bool) -> ToolAnnotations {
    let mut a = ToolAnnotations::new().read_only(operation == Operation::Read);
    if operation == Operation::Write {
        a = a.destructive(confirm);
    }
    if land == Land::Local {
        a = a.open_world(false);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn schema_is_closed_and_lists_required_and_confirm() {
        let s = input_schema(&[("text".into(), true), ("path".into(), false)], true);
        assert_eq!(
            Value::Object(s),
            json!({
                "type": "object",
                "properties": {
                    "text": { "type": "string", "description": "fills `{{text}}` of the verb's command, as one argument" },
                    "path": { "type": "string", "description": "fills `{{path}}` of the verb's command, as one argument" },
                    "confirm": {
                        "type": "boolean",
                        "description": "true to run this write; without it the call is refused with `confirm required` (HCP §4.5)"
                    }
                },
                "required": ["text"],
                "additionalProperties": false
            })
        );
        let s = input_schema(&[], false);
        assert_eq!(
            Value::Object(s),
            json!({ "type": "object", "properties": {}, "additionalProperties": false })
        );
    }

    #[test]
    fn hints_follow_the_policy() {
        let v = |a: ToolAnnotations| serde_json::to_value(a).unwrap();
        assert_eq!(
            v(annotations(Operation::Read, Land::Local, false)),
            json!({ "readOnlyHint": true, "openWorldHint": false })
        );
        assert_eq!(
            v(annotations(Operation::Write, Land::Personal, true)),
            json!({ "readOnlyHint": false, "destructiveHint": true })
        );
        assert_eq!(
            v(annotations(Operation::Write, Land::Local, false)),
            json!({ "readOnlyHint": false, "destructiveHint": false, "openWorldHint": false })
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
