//! `surface.json`, the manifest (RUNTIME §1.1, Pack concept).

use crate::strict::{StrictMap, StrictValue};
use crate::template::{Element, TemplateError, parse_template};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A pack manifest. Unknown fields at any level fail parse.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// The pack id: `^[a-z0-9]+(-[a-z0-9]+)*$`, at most 64 characters (lint `bad_pack_id`).
    pub id: String,
    /// A human name.
    pub name: String,
    /// How verbs run.
    pub kind: Kind,
    /// The CLI name every verb's `cli[0]` must equal, for `wrap` (lint `cli_bin_mismatch`).
    #[serde(rename = "cliBin", default, skip_serializing_if = "Option::is_none")]
    pub cli_bin: Option<String>,
    /// `runtime` (default) or `control`.
    #[serde(default)]
    pub plane: Plane,
    /// Faces the pack is offered on; default `["cli", "json_exec"]`.
    #[serde(default = "default_transports")]
    pub transports: Vec<Transport>,
    /// The credential the pack needs (§8).
    pub binding: Binding,
    /// The wrapped program, for `kind: wrap`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wrap: Option<Wrap>,
    /// Named commands, verb_key → spec, in document order.
    pub verbs: StrictMap<VerbSpec>,
    /// Triggers of an upstream that pushes (seeds §4.4.3).
    #[serde(
        rename = "stimulusTriggers",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub stimulus_triggers: Vec<Trigger>,
    /// Bootstrap pass-through (lint warns `pass_through_present`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass_through: Option<StrictValue>,
    /// The OpenAPI document reference of `kind: openapi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub openapi: Option<StrictValue>,
    /// A hosted copy of the skill.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill_url: Option<String>,
    /// Protocol affinity; `1` when present (lint `bad_version`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hcp: Option<u32>,
}

fn default_transports() -> Vec<Transport> {
    vec![Transport::Cli, Transport::JsonExec]
}

/// How a pack's verbs run (RUNTIME §1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Every verb runs `wrap.bin`.
    Wrap,
    /// Each verb's `cli[0]` is its own bin.
    Composite,
    /// Parsed and linted; exec answers `kind_unsupported`.
    Openapi,
}

/// The plane of a pack (Pack concept, "Planes").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Plane {
    /// End-user capability.
    #[default]
    Runtime,
    /// Admin, fleet, operator; needs `mothership` binding.
    Control,
}

/// A face a pack is offered on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    /// `hcp exec PACK.VERB …`.
    Cli,
    /// `hcp exec --envelope -`.
    JsonExec,
    /// `hcp mcp`.
    Mcp,
}

/// The binding a pack needs (RUNTIME §8).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Binding {
    /// The binding mode.
    pub mode: BindingMode,
    /// Which hub mints the credential.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hub: Option<String>,
    /// Packs of one family share one login.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<String>,
    /// The connect verb's key (default: `connect` or a key ending in `.connect`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect: Option<String>,
}

/// Binding modes (Pack concept, RUNTIME §8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum BindingMode {
    /// Nothing to mint.
    Public,
    /// A per-principal credential from `hcp connect`.
    User,
    /// The workspace is the binding.
    Local,
    /// Control plane only.
    Mothership,
}

/// The wrapped program of a `wrap` pack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Wrap {
    /// A path relative to the pack directory, or a bare command name looked up on `PATH`
    /// at install and pinned.
    pub bin: String,
    /// The argv of a verb with no `cli`; `{{verb}}` is the verb key. Default `["{{verb}}"]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argv_template: Option<Vec<String>>,
    /// Environment defaults for the child.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_env: Option<StrictMap<String>>,
}

/// One named command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VerbSpec {
    /// One line saying what it does.
    pub description: String,
    /// The CLI face as an argv array with placeholders; `cli[0]` is the CLI name (`wrap`)
    /// or the bin (`composite`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cli: Option<Vec<String>>,
}

/// A stimulus trigger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Trigger {
    /// The stimulus ref, a key of the policy's `stimuli`.
    #[serde(rename = "ref")]
    pub reference: String,
    /// What the event means.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The command that emits events, one JSON line each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cli: Option<Vec<String>>,
}

/// What running a verb or trigger means, before any value is filled: the program as the
/// manifest names it and the parsed template of the rest of argv.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommandPlan {
    /// `wrap.bin` or a composite verb's `cli[0]`, as written (relative or bare).
    pub program: String,
    /// argv after the program.
    pub args: Vec<Element>,
}

/// Why a command cannot be planned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// No such verb or trigger.
    #[error("no verb `{0}`")]
    NoSuchVerb(String),
    /// `kind: openapi` is parsed but not executed (`kind_unsupported`).
    #[error("kind `openapi` is not executed by this runtime")]
    KindUnsupported,
    /// `wrap` pack without `wrap`, composite verb without `cli`, or `cli[0]` ≠ `cliBin`.
    #[error("{0}")]
    Shape(String),
    /// A template element is refused; the index is into the template as written.
    #[error("element {index}: {error}")]
    Template {
        /// Index into the written array (`cli` counts from 0 at the program).
        index: usize,
        /// The refusal.
        error: TemplateError,
    },
}

impl Manifest {
    /// Whether the pack offers `t`.
    pub fn offers(&self, t: Transport) -> bool {
        self.transports.contains(&t)
    }

    /// The connect verb's key (RUNTIME §1.1): `binding.connect`, else `connect`, else the
    /// first key ending in `.connect`.
    pub fn connect_verb(&self) -> Option<&str> {
        if let Some(c) = &self.binding.connect {
            return Some(c);
        }
        if self.verbs.contains_key("connect") {
            return Some("connect");
        }
        self.verbs
            .keys()
            .find(|k| k.ends_with(".connect"))
            .map(String::as_str)
    }

    /// The binding family (`binding.family`, else the pack id).
    pub fn family(&self) -> &str {
        self.binding.family.as_deref().unwrap_or(&self.id)
    }

    /// Plans verb `verb_key` (RUNTIME §1.1–1.2).
    ///
    /// # Errors
    /// [`PlanError`] when the verb is absent or its shape is refused.
    pub fn plan_verb(&self, verb_key: &str) -> Result<CommandPlan, PlanError> {
        let spec = self
            .verbs
            .get(verb_key)
            .ok_or_else(|| PlanError::NoSuchVerb(verb_key.to_owned()))?;
        self.plan_cli(verb_key, spec.cli.as_deref())
    }

    /// Plans the trigger `reference` (its `cli`, same rules as a verb).
    ///
    /// # Errors
    /// [`PlanError`] when the trigger is absent, has no `cli`, or its shape is refused.
    pub fn plan_trigger(&self, reference: &str) -> Result<CommandPlan, PlanError> {
        let t = self
            .stimulus_triggers
            .iter()
            .find(|t| t.reference == reference)
            .ok_or_else(|| PlanError::NoSuchVerb(reference.to_owned()))?;
        match &t.cli {
            Some(cli) => self.plan_cli(reference, Some(cli)),
            None => Err(PlanError::Shape(format!(
                "trigger `{reference}` has no `cli`"
            ))),
        }
    }

    fn plan_cli(&self, key: &str, cli: Option<&[String]>) -> Result<CommandPlan, PlanError> {
        let template_err = |offset: usize| {
            move |(index, error)| PlanError::Template {
                index: index + offset,
                error,
            }
        };
        match self.kind {
            Kind::Openapi => Err(PlanError::KindUnsupported),
            Kind::Wrap => {
                let wrap = self.wrap.as_ref().ok_or_else(|| {
                    PlanError::Shape("a `wrap` pack needs a `wrap` object".into())
                })?;
                match cli {
                    Some(cli) => {
                        let Some(first) = cli.first() else {
                            return Err(PlanError::Shape(format!("`{key}`: `cli` is empty")));
                        };
                        if let Some(cb) = &self.cli_bin
                            && first != cb
                        {
                            return Err(PlanError::Shape(format!(
                                "`{key}`: `cli[0]` is `{first}`, but `cliBin` is `{cb}`"
                            )));
                        }
                        let args = parse_template(&cli[1..]).map_err(template_err(1))?;
                        Ok(CommandPlan {
                            program: wrap.bin.clone(),
                            args,
                        })
                    }
                    None => {
                        let default = ["{{verb}}".to_owned()];
                        let t = wrap.argv_template.as_deref().unwrap_or(&default);
                        let args = parse_template(t).map_err(template_err(0))?;
                        Ok(CommandPlan {
                            program: wrap.bin.clone(),
                            args,
                        })
                    }
                }
            }
            Kind::Composite => {
                let cli = cli.ok_or_else(|| {
                    PlanError::Shape(format!(
                        "`{key}`: a composite verb needs `cli`, whose first element is its bin"
                    ))
                })?;
                let Some(first) = cli.first() else {
                    return Err(PlanError::Shape(format!("`{key}`: `cli` is empty")));
                };
                if first.contains("{{") || first.contains("}}") {
                    return Err(PlanError::Template {
                        index: 0,
                        error: TemplateError::BadPlaceholder(format!(
                            "`{first}`: the program may not be a placeholder"
                        )),
                    });
                }
                let args = parse_template(&cli[1..]).map_err(template_err(1))?;
                Ok(CommandPlan {
                    program: first.clone(),
                    args,
                })
            }
        }
    }

    /// Every program the pack may run, as written, deduplicated in order: `wrap.bin`, or
    /// each composite verb's and trigger's `cli[0]`. Install pins each (RUNTIME §3).
    pub fn programs(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let mut push = |p: &str| {
            if !out.iter().any(|o| o == p) {
                out.push(p.to_owned());
            }
        };
        match self.kind {
            Kind::Wrap => {
                if let Some(w) = &self.wrap {
                    push(&w.bin);
                }
            }
            Kind::Composite => {
                for (_, v) in &self.verbs {
                    if let Some(first) = v.cli.as_ref().and_then(|c| c.first()) {
                        push(first);
                    }
                }
                for t in &self.stimulus_triggers {
                    if let Some(first) = t.cli.as_ref().and_then(|c| c.first()) {
                        push(first);
                    }
                }
            }
            Kind::Openapi => {}
        }
        out
    }
}

/// The arguments a planned command takes: `(name, required)`, in template order, each once
/// (required if any occurrence is required).
pub fn arguments(plan: &CommandPlan) -> Vec<(String, bool)> {
    let mut out: Vec<(String, bool)> = Vec::new();
    for (name, optional) in plan.args.iter().filter_map(Element::arg) {
        match out.iter_mut().find(|(n, _)| n == name) {
            Some((_, req)) => *req |= !optional,
            None => out.push((name.to_owned(), !optional)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_manifest;
    use pretty_assertions::assert_eq;

    const TRANSIT: &str = r#"{
  "id": "transit",
  "name": "Transit",
  "kind": "wrap",
  "cliBin": "transit",
  "plane": "runtime",
  "transports": ["cli", "json_exec"],
  "binding": { "mode": "public", "hub": "public" },
  "wrap": { "bin": "hcp-example-transit", "argv_template": ["{{verb}}"] },
  "verbs": {
    "find":   { "description": "Resolve a place.", "cli": ["transit", "find", "{{query}}", "--limit={{limit?}}"] },
    "status": { "description": "Live observation." }
  }
}"#;

    #[test]
    fn plans_wrap_verbs() {
        let m = parse_manifest(TRANSIT).unwrap();
        let p = m.plan_verb("find").unwrap();
        assert_eq!(p.program, "hcp-example-transit");
        assert_eq!(
            arguments(&p),
            vec![("query".into(), true), ("limit".into(), false)]
        );
        let s = m.plan_verb("status").unwrap();
        assert_eq!(s.args, vec![Element::Verb]);
        assert_eq!(m.programs(), vec!["hcp-example-transit".to_string()]);
    }

    #[test]
    fn cli_bin_mismatch_is_a_shape_error() {
        let m = parse_manifest(&TRANSIT.replace("[\"transit\", \"find\"", "[\"tram\", \"find\""))
            .unwrap();
        assert!(matches!(m.plan_verb("find"), Err(PlanError::Shape(_))));
    }

    #[test]
    fn repeated_verb_key_is_refused() {
        let text = TRANSIT.replace(
            "\"status\": {",
            "\"find\": { \"description\": \"x\" },\n    \"status\": {",
        );
        assert_eq!(
            parse_manifest(&text).unwrap_err().code,
            crate::ParseCode::DuplicateKey
        );
    }
}
