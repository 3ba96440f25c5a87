//! Contracts from packs (RUNTIME §7): each verb of an active pack as a tool definition —
//! the `inputSchema` `hcp mcp` shows, closed, projected to a Histos contract by
//! `histos::projection` — and what the owner builds from them: the starting policy of
//! `hcp policy init` and the report of `hcp policy coverage`.
//!
//! A verb's definition is the tool exactly as `hcp mcp` lists it to a client that confirms
//! by argument when no runtime policy narrows it (`crate::tool::pack_tool`):
//! `{"name": "PACK_ID.VERB_KEY", "description" (the manifest's, then operation, land and
//! how it is confirmed), "inputSchema", "annotations", "_meta": {"hcp": {"pack_id",
//! "verb_key", "operation", "land", "confirm"}}}`. The input schema is
//! [`crate::schema::verb_input_schema`] (its placeholders, or a `kind: openapi` verb's
//! operation arguments; never refined by a runtime policy), and `_meta` what the pack's
//! policy says of it, so a reinstall that turns a read into a write, moves it to another
//! land or drops its confirm changes the definition, and a tool lock sees it
//! (`schema_sha256`); a tool that reads hcp's `tools/list` computes the lock's hashes.
//!
//! Control-plane packs are left out: no session ever calls them (`control_plane`), and
//! the runtime policy governs session calls only.

use crate::refusal::Refusal;
use hcp_model::{Code, Operation, Plane};
use hcp_store::Home;
use hcp_store::pack::{self, InstalledPack, PackError};
use histos::init::{Access, InitTool, PolicyInit};
use histos::projection::{self, ToolSource};
use histos::{Policy, PolicyError};
use serde_json::Value;

/// One tool of an active pack: a verb, or a stimulus ref (`hcp sense`, tool
/// `PACK_ID.REF`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackTool {
    /// `PACK_ID.VERB_KEY` or `PACK_ID.REF`.
    pub name: String,
    /// The pack id.
    pub pack_id: String,
    /// The verb key or the stimulus ref.
    pub key: String,
    /// Whether it is a stimulus ref (no arguments, always `read`).
    pub stimulus: bool,
}

/// Whether `name` is a tool name the Histos format accepts (`[A-Za-z_][A-Za-z0-9_.-]*`).
pub fn valid_tool_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
}

/// The tool definition of `verb_key` of `pack` (see the module docs): exactly the tool
/// `hcp mcp` lists ([`crate::tool::pack_tool`]); `None` when the pack has no such
/// verb, no policy entry for it, or cannot plan it (a `kind: openapi` verb: when its pinned
/// operation cannot be read).
pub fn definition(pack: &InstalledPack, verb_key: &str) -> Option<Value> {
    crate::tool::pack_tool(pack, verb_key)
}

/// The verb as a tool source: its definition read by the MCP projection, with the three
/// lock hashes (`histos::projection::from_mcp`).
///
/// # Errors
/// `invalid_import` when the pack has no such verb (or cannot plan it), or the
/// projection's own refusal.
pub fn tool_source(pack: &InstalledPack, verb_key: &str) -> Result<ToolSource, PolicyError> {
    let Some(def) = definition(pack, verb_key) else {
        return Err(PolicyError::new(
            histos::PolicyCode::InvalidImport,
            format!("pack `{}` has no usable verb `{verb_key}`", pack.id),
        ));
    };
    projection::from_mcp(&histos::Value::from(def))
}

/// The tools of one pack: its verbs (manifest order), then its stimulus refs.
pub fn tools_of(pack: &InstalledPack) -> Vec<PackTool> {
    let verbs = pack
        .manifest
        .verbs
        .keys()
        .filter(|k| pack.policy.verbs.get(k.as_str()).is_some())
        .map(|k| (k.clone(), false));
    let refs = pack
        .manifest
        .stimulus_triggers
        .iter()
        .filter(|t| pack.policy.stimuli.get(t.reference.as_str()).is_some())
        .map(|t| (t.reference.clone(), true));
    verbs
        .chain(refs)
        .map(|(key, stimulus)| PackTool {
            name: format!("{}.{key}", pack.id),
            pack_id: pack.id.to_string(),
            key,
            stimulus,
        })
        .collect()
}

/// The active runtime-plane packs named by `names` (all of them when empty), sorted by
/// id, each loaded once.
///
/// # Errors
/// A named pack that is not installed (`not_installed`, 66), not active
/// (`pack_inactive`, 66) or control-plane (`control_plane`); the store's failures.
pub fn active_packs(home: &Home, names: &[String]) -> Result<Vec<InstalledPack>, Refusal> {
    let ids: Vec<String> = if names.is_empty() {
        pack::active_ids(home)
            .map_err(|e| Refusal::store(&e))?
            .into_iter()
            .map(|i| i.to_string())
            .collect()
    } else {
        let mut v = names.to_vec();
        v.sort();
        v.dedup();
        v
    };
    let mut out = Vec::with_capacity(ids.len());
    for id in &ids {
        let p = match pack::load(home, id) {
            Ok(p) => p,
            Err(e @ PackError::NotInstalled { .. }) => {
                return Err(Refusal::new(e.code(), e.to_string())
                    .hint("`hcp list` shows the installed packs"));
            }
            Err(e) => return Err(Refusal::new(e.code(), e.to_string())),
        };
        if !names.is_empty() && !pack::is_active(home, id) {
            return Err(Refusal::new(
                Code::PackInactive,
                format!("pack `{id}` is installed but not active"),
            )
            .hint(format!("the owner runs `hcp activate {id}`")));
        }
        if p.manifest.plane == Plane::Control {
            if names.is_empty() {
                continue;
            }
            return Err(Refusal::new(
                Code::ControlPlane,
                format!(
                    "pack `{id}` is a control-plane pack: no session calls it, so the runtime policy has nothing to say of it"
                ),
            ));
        }
        out.push(p);
    }
    Ok(out)
}

/// What `hcp policy init` writes: the starting policy of `packs`, as YAML a person would
/// keep (RUNTIME §7, `histos::init`): one tool per verb and per stimulus, sorted, each
/// with a comment saying where it came from; `access` from the pack's operation; `args`
/// projected from the verb's input schema (without `confirm`, which the gate takes and
/// never passes on); `confirmation: {required: true}` on confirm-gated writes; nothing
/// granted unless `role` is given, which is then granted every tool. `command` is the
/// command line shown in the header. The same store gives the same bytes.
///
/// # Errors
/// `invalid_import` (or a loader code) when a verb's schema does not project, or the
/// result does not load (a defect, reported rather than written).
pub fn init(packs: &[InstalledPack], role: Option<&str>, command: &str) -> Result<String, Refusal> {
    let mut tools = Vec::new();
    let mut skipped = Vec::new();
    for p in packs {
        for t in tools_of(p) {
            if !valid_tool_name(&t.name) {
                skipped.push(t.name);
                continue;
            }
            tools.push(init_tool(p, &t).map_err(|e| policy_refusal(&t.name, &e))?);
        }
    }
    let ids: Vec<String> = packs.iter().map(|p| p.id.to_string()).collect();
    let mut header = vec![
        format!("The starting runtime policy, written by `{command}`."),
        match ids.as_slice() {
            [] => "No active pack.".to_owned(),
            [one] => format!("Pack: {one}."),
            many => format!("Packs: {}.", many.join(", ")),
        },
        "One tool per verb (PACK_ID.VERB_KEY) and per stimulus (PACK_ID.REF): `args` projected"
            .into(),
        "from the verb's JSON Schema (the `inputSchema` of `hcp mcp`), `access` from the pack's"
            .into(),
        "operation, `confirmation` on the writes the pack gates with confirm.".into(),
    ];
    match role {
        None => header.push(
            "Nothing is granted: add a role under `roles:` with the tools it may `allow`, then"
                .into(),
        ),
        Some(r) => header.push(format!(
            "Role `{r}` is granted every tool (`hcp session start --role {r}`): narrow it, then"
        )),
    }
    header.push(
        "`hcp policy check FILE` and copy it to $HCP_HOME/policy.yaml; `hcp policy lock` pins the verbs."
            .into(),
    );
    if !skipped.is_empty() {
        header.push(format!(
            "Not listed (not a Histos tool name; sessions are refused them): {}.",
            skipped.join(", ")
        ));
    }
    PolicyInit {
        header,
        tools,
        role: role.map(str::to_owned),
    }
    .render()
    .map_err(|e| policy_refusal("the starting policy", &e))
}

fn policy_refusal(what: &str, e: &PolicyError) -> Refusal {
    let t = super::teach::split(e);
    let r = Refusal::new(Code::from(e.code), format!("{what}: {}", t.message));
    match t.hint {
        Some(h) => r.hint(h),
        None => r,
    }
}

/// The starting-policy entry of tool `t` of pack `p` (what `hcp policy init` writes).
pub(crate) fn init_tool(p: &InstalledPack, t: &PackTool) -> Result<InitTool, PolicyError> {
    let name = p.manifest.name.trim();
    if t.stimulus {
        let description = p
            .manifest
            .stimulus_triggers
            .iter()
            .find(|x| x.reference == t.key)
            .and_then(|x| x.description.clone());
        return Ok(InitTool {
            name: t.name.clone(),
            access: Access::Read,
            args: None,
            description,
            confirm: false,
            source: format!("pack {} ({name}), stimulus {} (hcp sense)", p.id, t.key),
        });
    }
    let source = tool_source(p, &t.key)?;
    let entry = p.policy.verbs.get(&t.key);
    let write = entry.is_some_and(|e| e.operation == Operation::Write);
    let confirm = write && entry.is_some_and(|e| e.confirm == Some(true));
    let args = source.contract.args.map(|mut s| {
        s.fields.retain(|f| f.name != "confirm");
        s
    });
    Ok(InitTool {
        name: t.name.clone(),
        access: if write { Access::Write } else { Access::Read },
        args,
        // The manifest's own words: the listing's suffix (operation, land, confirm) is
        // said by the policy's own `access` and `confirmation`.
        description: p
            .manifest
            .verbs
            .get(&t.key)
            .map(|v| v.description.trim().to_owned())
            .or(source.description),
        confirm,
        source: format!("pack {} ({name}), verb {}", p.id, t.key),
    })
}

/// What `hcp policy coverage` reports of a runtime policy against the active packs.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Coverage {
    /// Active verbs the policy does not mention: refused to every session
    /// (`unknown_tool`). Coverage fails when there is one.
    pub verbs: Vec<String>,
    /// Stimulus refs it does not mention (`hcp sense` of them is refused to sessions).
    pub stimuli: Vec<String>,
    /// Tools it lists that are no active verb or stimulus.
    pub unused: Vec<String>,
}

/// Compares `policy` with the tools of `packs`.
pub fn coverage(policy: &Policy, packs: &[InstalledPack]) -> Coverage {
    let mut c = Coverage::default();
    let mut known = std::collections::BTreeSet::new();
    for p in packs {
        for t in tools_of(p) {
            if policy.tool(&t.name).is_none() {
                if t.stimulus {
                    c.stimuli.push(t.name.clone());
                } else {
                    c.verbs.push(t.name.clone());
                }
            }
            known.insert(t.name);
        }
    }
    c.unused = policy
        .tools
        .iter()
        .map(|t| t.name.clone())
        .filter(|n| !known.contains(n))
        .collect();
    c.verbs.sort();
    c.stimuli.sort();
    c.unused.sort();
    c
}
