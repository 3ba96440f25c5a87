//! The tools of `hcp mcp`: one per verb of each active pack that offers the `mcp`
//! transport, named `PACK.VERB`, built once per [`Signature`] of the store (the owner's
//! installs, activations and runtime-policy edits), and listed per [`Viewer`] in a stable
//! order (pack id, then the manifest's order of verbs).

use super::visible::{Viewer, visible};
use crate::schema::{JsonObject, output_schema};
use crate::signature::{RecordMark, Signature};
use hcp_model::Code;
use hcp_store::Home;
use hcp_store::pack;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

pub use crate::tool::{
    ConfirmBy, Entry, MAX_TOOL_NAME, annotations, pack_tool, tools_of, valid_tool_name,
};

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

#[cfg(test)]
mod tests {
    use super::*;
    use hcp_model::{Land, Operation};
    use pretty_assertions::assert_eq;
    use serde_json::json;

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
