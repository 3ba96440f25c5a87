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
/// `installed_at` and `files_digest`, sorted by id, and the stamp of the operator's
/// runtime policy file. It changes when the owner installs, reinstalls, activates,
/// deactivates or uninstalls, or edits the runtime policy; it does not change when a
/// pack's files or bin change under it without a reinstall (that pack is refused at call
/// time with `store_damaged` or `bin_changed`, never re-listed).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Signature {
    /// The active packs' record marks.
    pub packs: Vec<RecordMark>,
    /// `NAME:LEN:MTIME_NS` of `$HCP_HOME/policy.json` or `policy.yaml`, when one exists.
    pub policy: Option<String>,
}

fn policy_stamp(home: &Home) -> Option<String> {
    hcp_runtime::policy::POLICY_FILES.iter().find_map(|name| {
        let m = std::fs::metadata(home.root().join(name)).ok()?;
        let mtime = m
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        Some(format!("{name}:{}:{mtime}", m.len()))
    })
}

/// The operator's runtime policy (RUNTIME §7), when one is configured and loads, through
/// the runtime's one loader (`policy.json` and `policy.yaml` both present is
/// `policy_conflict`, as for exec): its argument contracts refine the tools' input
/// schemas. One that does not load refines nothing here (every session call under it is
/// refused with its code; this only describes).
pub fn runtime_policy(home: &Home) -> Option<histos::Policy> {
    match hcp_runtime::policy::load(home) {
        Ok(p) => p.map(|rp| rp.policy),
        Err(r) => {
            tracing::warn!("the runtime policy is not used ({}): {}", r.code, r.message);
            None
        }
    }
}

impl Signature {
    /// Reads the signature: one listing of `state/active/` and one small record file per
    /// active pack (no manifest is parsed, no pack file hashed).
    ///
    /// # Errors
    /// The store's, as text, when `state/active/` cannot be read.
    pub fn read(home: &Home) -> Result<Self, String> {
        let policy = policy_stamp(home);
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
        Ok(Self { packs: out, policy })
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
    pub fn build(home: &Home, signature: Signature, previous: &Catalog, owner: bool) -> Self {
        let same_policy = previous.signature.policy == signature.policy;
        let policy = runtime_policy(home);
        let mut packs = BTreeMap::new();
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
                    packs.insert(
                        mark.0.clone(),
                        (mark.clone(), tools_of(&p, policy.as_ref(), owner)),
                    );
                }
                // Damaged under us since it was listed: stays listed as it was.
                Err(_) if before.is_some() => {
                    if let Some((_, tools)) = before {
                        packs.insert(mark.0.clone(), (mark.clone(), tools.clone()));
                    }
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
/// policy covers and the manifest can plan, in manifest order. The runtime policy's
/// argument contract for `PACK.VERB`, where there is one, refines the input schema. For a
/// session principal (`owner` false) a control-plane pack offers nothing and the connect
/// verb is left out: the gate would refuse them (`control_plane`, `connect_only`).
pub fn tools_of(p: &InstalledPack, runtime: Option<&histos::Policy>, owner: bool) -> Vec<Entry> {
    let m = &p.manifest;
    if !m.offers(Transport::Mcp) || (!owner && m.plane == hcp_model::Plane::Control) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (verb_key, spec) in m.verbs.iter() {
        if !owner && m.connect_verb() == Some(verb_key.as_str()) {
            continue;
        }
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
        let mut schema = input_schema(&args, confirm);
        if let Some(contract) = runtime
            .and_then(|r| r.tool(&name))
            .and_then(|t| t.args.as_ref())
        {
            refine(&mut schema, contract);
        }
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

/// Narrows a verb's input schema by the runtime policy's argument contract (HISTOS-ENGINE
/// §4) for the placeholders it declares: a scalar `type`, `enum`, string lengths, numeric
/// bounds, and `required` (a placeholder the contract requires becomes required). Patterns
/// are left out (Python `re` is not JSON Schema's dialect); fields that are not
/// placeholders are ignored (the verb cannot take them); the schema stays closed.
pub fn refine(schema: &mut JsonObject, contract: &histos::model::Schema) {
    use histos::model::FieldType;
    let mut newly_required = Vec::new();
    if let Some(Value::Object(props)) = schema.get_mut("properties") {
        for f in &contract.fields {
            let Some(Value::Object(prop)) = props.get_mut(&f.name) else {
                continue;
            };
            let ty = match f.ty {
                FieldType::String => Some("string"),
                FieldType::Integer => Some("integer"),
                FieldType::Number => Some("number"),
                FieldType::Boolean => Some("boolean"),
                _ => None,
            };
            if let Some(t) = ty {
                prop.insert("type".into(), json!(t));
            }
            if let Some(values) = &f.enum_values {
                prop.insert(
                    "enum".into(),
                    Value::Array(values.iter().map(Value::from).collect()),
                );
            }
            if f.ty == FieldType::String {
                if let Some(n) = f.min_length {
                    prop.insert("minLength".into(), json!(n));
                }
                if let Some(n) = f.max_length {
                    prop.insert("maxLength".into(), json!(n));
                }
            }
            for (key, v) in [
                ("minimum", &f.minimum),
                ("maximum", &f.maximum),
                ("exclusiveMinimum", &f.exclusive_minimum),
                ("exclusiveMaximum", &f.exclusive_maximum),
                ("multipleOf", &f.multiple_of),
            ] {
                if let Some(v) = v {
                    prop.insert(key.into(), Value::from(v));
                }
            }
            if f.required {
                newly_required.push(f.name.clone());
            }
        }
    }
    if newly_required.is_empty() {
        return;
    }
    let required = schema
        .entry("required")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(list) = required {
        for n in newly_required {
            if !list.iter().any(|v| v == n.as_str()) {
                list.push(Value::String(n));
            }
        }
    }
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
#[allow(clippy::unwrap_used)]
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
    fn the_runtime_policy_contract_narrows_placeholders() {
        let policy = histos::Policy::load_json(
            &json!({
                "schema_version": "histos.policy/0.1",
                "tools": {"t.find": {"args": {
                    "query": {"type": "string", "max_length": 40, "min_length": 1},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 50},
                    "mode": {"type": "string", "enum": ["fast", "slow"], "required": false},
                    "other": {"type": "string"}
                }}},
                "roles": {}
            })
            .to_string(),
        )
        .unwrap();
        let mut s = input_schema(
            &[
                ("query".into(), true),
                ("limit".into(), false),
                ("mode".into(), false),
            ],
            false,
        );
        refine(
            &mut s,
            policy.tool("t.find").unwrap().args.as_ref().unwrap(),
        );
        let d = |n: &str| format!("fills `{{{{{n}}}}}` of the verb's command, as one argument");
        assert_eq!(
            Value::Object(s),
            json!({
                "type": "object",
                "properties": {
                    "query": { "type": "string", "description": d("query"), "minLength": 1, "maxLength": 40 },
                    "limit": { "type": "integer", "description": d("limit"), "minimum": 1, "maximum": 50 },
                    "mode": { "type": "string", "description": d("mode"), "enum": ["fast", "slow"] }
                },
                "required": ["query", "limit"],
                "additionalProperties": false
            })
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
