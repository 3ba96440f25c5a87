//! The tools `hcp mcp` lists: one per verb of each active pack that offers the `mcp`
//! transport, named `PACK.VERB`, and the cheap signature that tells when the owner changed
//! the set (install, reinstall, activate, deactivate, uninstall).

use hcp_model::{Land, Operation, Transport};
use hcp_store::Home;
use hcp_store::pack::{self, InstalledPack};
use rmcp::model::{JsonObject, MetaObject, Tool, ToolAnnotations};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The longest tool name the MCP specification allows (2025-06-18 / 2025-11-25), in bytes.
pub const MAX_TOOL_NAME: usize = 128;

pub use hcp_runtime::signature::{RecordMark, Signature};

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
        let Some(entry) = p.policy.verbs.get(verb_key) else {
            continue;
        };
        let confirm = entry.confirm == Some(true);
        let Some(mut schema) = hcp_runtime::schema::verb_input_schema(p, verb_key, confirm) else {
            continue;
        };
        if let Some(contract) = runtime
            .and_then(|r| r.tool(&name))
            .and_then(|t| t.args.as_ref())
        {
            hcp_runtime::schema::refine(&mut schema, contract);
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
