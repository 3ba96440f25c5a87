//! `surface.json`, the manifest (RUNTIME §1.1, Pack concept).

use crate::strict::StrictMap;
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
    /// Bootstrap pass-through (lint warns `pass_through_present`; exec never runs it,
    /// `pass_through_unsupported`; `hcp pack promote` turns it into named verbs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass_through: Option<PassThrough>,
    /// The OpenAPI document of `kind: openapi` (RUNTIME §1.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub openapi: Option<OpenapiRef>,
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
    /// Each verb is one operation of an HTTP API described by an OpenAPI document
    /// (RUNTIME §1.3).
    Openapi,
}

/// `openapi` of a `kind: openapi` manifest (RUNTIME §1.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OpenapiRef {
    /// The OpenAPI 3.0 or 3.1 document: an `https://` or `http://` URL, or a path relative
    /// to the pack directory (read at install, then not kept as a pack file).
    pub spec: String,
}

/// Where an [`OpenapiRef::spec`] points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecSource<'a> {
    /// An `http://` or `https://` URL.
    Url(&'a str),
    /// A relative path inside the pack directory, `/`-separated, without `.`, `..` or
    /// empty components.
    Path(&'a str),
}

impl OpenapiRef {
    /// Where the document is.
    ///
    /// # Errors
    /// Why `spec` is neither an `http(s)` URL nor a plain relative path inside the pack
    /// (an absolute path, `..`, a backslash, another URL scheme, a control character),
    /// lowercase.
    pub fn source(&self) -> Result<SpecSource<'_>, String> {
        let s = self.spec.as_str();
        let lower = s.to_ascii_lowercase();
        if lower.starts_with("https://") || lower.starts_with("http://") {
            return Ok(SpecSource::Url(s));
        }
        if s.is_empty() {
            return Err("`openapi.spec` is empty".into());
        }
        if let Some((scheme, _)) = s.split_once(':')
            && !scheme.is_empty()
            && scheme
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
        {
            return Err(format!(
                "`openapi.spec` has scheme `{scheme}`; use an `https://` or `http://` URL or a path inside the pack"
            ));
        }
        if s.starts_with('/') || s.contains('\\') || s.chars().any(char::is_control) {
            return Err("`openapi.spec` must be a relative path inside the pack directory".into());
        }
        if s.split('/').any(|c| c.is_empty() || c == "." || c == "..") {
            return Err(
                "`openapi.spec` may not hold empty, `.` or `..` components: it must stay inside the pack directory"
                    .into(),
            );
        }
        Ok(SpecSource::Path(s))
    }
}

/// `pass_through`: a bootstrap allow-list of raw subcommands (RUNTIME §1.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PassThrough {
    /// The subcommands of the bin it would let through.
    #[serde(rename = "allowedSubcommands")]
    pub allowed_subcommands: Vec<String>,
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
    /// The `operationId` this verb calls, for `kind: openapi` (RUNTIME §1.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
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

/// Why `program` (`wrap.bin`, a composite verb's `cli[0]`) cannot be a program path of a
/// pack, or `None`: the one rule lint (`unsafe_path`) and install (`unsafe_path`, RUNTIME
/// §3) both apply. A bare name (no `/`) is looked up on `PATH` and has no path to check;
/// a program holding a `/` is a path inside the pack directory, so it may be neither
/// absolute nor hold a `..` component. Whether its components exist or are symlinks is
/// for install to see on disk (`bin_missing`, `symlink_in_pack`).
pub fn program_path_problem(program: &str) -> Option<&'static str> {
    if !program.contains('/') {
        return None;
    }
    if program.starts_with('/') {
        return Some("an absolute path; name a path inside the pack directory or a bare command");
    }
    if program.split('/').any(|c| c == "..") {
        return Some("it leaves the pack directory (`..`)");
    }
    None
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
    /// A `kind: openapi` verb runs no command: it is an HTTP request (`hcp-openapi`).
    /// Until exec sends it, exec answers `kind_unsupported`.
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

    /// The `operationId` verb `verb_key` calls (`kind: openapi`).
    pub fn operation_id(&self, verb_key: &str) -> Option<&str> {
        self.verbs.get(verb_key)?.operation.as_deref()
    }

    /// Whether `pass_through` lists `sub`: a target naming it is answered
    /// `pass_through_unsupported`, not `unknown_verb` (RUNTIME §1.3).
    pub fn pass_through_allows(&self, sub: &str) -> bool {
        self.pass_through
            .as_ref()
            .is_some_and(|p| p.allowed_subcommands.iter().any(|s| s == sub))
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

    const TASKS: &str = r#"{
  "id": "tasks", "name": "Tasks", "kind": "openapi",
  "binding": { "mode": "user" },
  "openapi": { "spec": "openapi.json" },
  "verbs": { "list": { "description": "List.", "operation": "listTasks" } }
}"#;

    #[test]
    fn openapi_verbs_name_operations() {
        let m = parse_manifest(TASKS).unwrap();
        assert_eq!(m.operation_id("list"), Some("listTasks"));
        let spec = m.openapi.as_ref().unwrap();
        assert_eq!(spec.source(), Ok(SpecSource::Path("openapi.json")));
        assert!(matches!(
            m.plan_verb("list"),
            Err(PlanError::KindUnsupported)
        ));
        let e = parse_manifest(&TASKS.replace("\"spec\"", "\"url\"")).unwrap_err();
        assert_eq!(e.code, crate::ParseCode::UnknownField);
        assert_eq!((e.line, e.column), (4, 20));
    }

    #[test]
    fn spec_sources() {
        let src = |s: &str| OpenapiRef { spec: s.to_owned() }.source().map(|_| ());
        let r = OpenapiRef {
            spec: "https://x.example/o.json".into(),
        };
        assert_eq!(r.source(), Ok(SpecSource::Url("https://x.example/o.json")));
        assert_eq!(src("api/o.yaml"), Ok(()));
        for bad in [
            "/etc/o.json",
            "../o.json",
            "a/../../o.json",
            "file:///o.json",
            "ftp://x/o",
            "",
            "a//b",
            "a\\b",
        ] {
            assert!(src(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn pass_through_is_typed() {
        let m = parse_manifest(&TRANSIT.replace(
            "\"verbs\":",
            "\"pass_through\": { \"allowedSubcommands\": [\"log\"] },\n  \"verbs\":",
        ))
        .unwrap();
        assert!(m.pass_through_allows("log") && !m.pass_through_allows("push"));
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
