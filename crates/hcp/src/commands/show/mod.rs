//! `hcp show ID [--json]`: one installed pack, its verbs and its pins (RUNTIME §3).
//! `hcp show ID.VERB --view [--principal P | --project J] [--json]`: the view a call of that
//! verb gets (RUNTIME §5.1; `hcp_runtime::view_plan`), owner only.

use super::install::{open_home, pack_error};
use crate::error::{CliError, CliResult};
use crate::exit;
use hcp_store::pack::{self, InstalledPack};
use serde_json::{Value, json};
use std::fmt::Write as _;

mod view;

/// Arguments of `hcp show`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The pack id; with `--view`, `PACK.VERB`.
    #[arg(value_name = "ID")]
    id: String,
    /// Print the same facts as one JSON object.
    #[arg(long)]
    json: bool,
    /// Show the view a call of the verb `ID` (`PACK.VERB`) gets: each path and its mode,
    /// the network, the limits (owner only).
    #[arg(long)]
    view: bool,
    /// With `--view`: a call of this principal (default: the owner's own).
    #[arg(long, value_name = "P", requires = "view", conflicts_with = "project")]
    principal: Option<String>,
    /// With `--view`: a call for this project (a `brain` verb's).
    #[arg(long, value_name = "J", requires = "view")]
    project: Option<String>,
}

/// Runs `hcp show`.
pub fn run(a: Args) -> CliResult {
    if a.view {
        return view::run(&a.id, a.principal, a.project, a.json);
    }
    let home = open_home()?;
    let p = pack::load(&home, &a.id).map_err(|e| match e {
        pack::PackError::NotInstalled { .. } => not_installed(&home, &a.id),
        e => pack_error(e),
    })?;
    let active = pack::is_active(&home, p.id.as_str());
    // RUNTIME §8: which family the pack shares, and with which installed packs.
    let family = p.manifest.family().to_owned();
    let shared = hcp_runtime::install::family_holders(&home, p.id.as_str(), &family);
    // The pack's network beside its verbs (RUNTIME §5.5); `config.json` that does not load
    // is said, not fatal: `hcp doctor` names the fault.
    let config = hcp_store::config::RuntimeConfig::load(home.root());
    let network = config
        .as_ref()
        .map(|c| hcp_runtime::egress::pack_network(c, p.id.as_str()))
        .map_err(ToString::to_string);
    // An openapi pack's calls go to the operator's `packs.ID.server` when it is set, not
    // to the document's server: `show` says which one they go to.
    let operator_server = config
        .as_ref()
        .ok()
        .and_then(|c| c.pack(p.id.as_str()).server.clone())
        .filter(|_| p.record.openapi.is_some());
    if a.json {
        let mut j = to_json(&p, active);
        if let Some(u) = &operator_server {
            j["openapi"]["operator_server"] = json!(u);
        }
        j["family"] = json!({"name": family, "shared_with": shared});
        j["network"] = match &network {
            Ok(n) => json!({"mode": n.mode, "key": n.key, "destinations": n.destinations}),
            Err(e) => json!({"error": e}),
        };
        out!("{j:#}");
    } else {
        let line = network.map_or_else(|e| format!("unknown: {e}"), |n| n.line());
        let mut text = to_text(&p, active, &line, operator_server.as_deref());
        if !shared.is_empty() || p.manifest.binding.family.is_some() {
            let with = if shared.is_empty() {
                "no other installed pack".to_owned()
            } else {
                shared
                    .iter()
                    .map(|s| format!("`{s}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            // After the first line (the pack's id and name).
            let at = text.find('\n').map_or(text.len(), |i| i + 1);
            text.insert_str(
                at,
                &format!(
                    "  family `{}`: its credential is shared with {with}\n",
                    clean(&family)
                ),
            );
        }
        out_raw!("{}", text);
    }
    Ok(exit::OK)
}

/// `not_installed` for `hcp show ID` of an id no installed pack has, with the "did you
/// mean" of `hcp exec` (`hcp_runtime::target::did_you_mean`): the nearest pack ids, or
/// for a `PACK.VERB` of an installed pack, that pack's verbs and `--view`.
fn not_installed(home: &hcp_store::Home, id: &str) -> CliError {
    use hcp_runtime::target::{did_you_mean, typed_verbs};
    let verb_of = id
        .split_once('.')
        .and_then(|(pack_id, _)| pack::load(home, pack_id).ok());
    let Some(p) = verb_of else {
        return CliError::command(hcp_runtime::target::not_installed(home, id));
    };
    let known = typed_verbs(&p);
    let pack_id = p.id.as_str();
    let shows = format!(
        "`hcp show {pack_id}` shows the pack and its verbs; `hcp show {pack_id}.VERB --view` what a call of one sees"
    );
    if known.iter().any(|k| k == id) {
        return CliError::new(
            hcp_model::Code::NotInstalled,
            format!("`{id}` is a verb of pack `{pack_id}`, not a pack"),
        )
        .hint(format!(
            "`hcp show {pack_id}` shows the pack and its verbs; `hcp show {id} --view` what a call of it sees"
        ));
    }
    CliError::new(
        hcp_model::Code::NotInstalled,
        format!("`{id}` is no pack, nor a verb of pack `{pack_id}`"),
    )
    .hint(match did_you_mean(id, known.iter().map(String::as_str)) {
        Some(d) => format!("{d} {shows}"),
        None => shows,
    })
}

fn verbs(p: &InstalledPack) -> Vec<Value> {
    p.manifest
        .verbs
        .iter()
        .map(|(key, spec)| {
            let e = p.policy.verbs.get(key);
            let mut v = json!({
                "key": key,
                "description": spec.description,
                "operation": e.map(|e| e.operation.as_str()),
                "land": e.map(|e| e.privacy.land.as_str()),
                "confirm": e.is_some_and(|e| e.needs_confirm()),
                "exec": hcp_store::skill::exec_form(p, key),
            });
            if p.manifest.kind == hcp_model::Kind::Openapi {
                v["http"] = http_verb(p, key);
            }
            v
        })
        .collect()
}

/// What a `kind: openapi` verb sends (RUNTIME §1.3), from the pinned copy: the
/// operation, its method and path, its arguments (the operation's parameters and body
/// properties, with the document's rules) and their JSON Schema (`hcp mcp`'s
/// `inputSchema`).
fn http_verb(p: &InstalledPack, key: &str) -> Value {
    match pack::openapi::pinned_operation(p, key) {
        Ok(op) => json!({
            "operation_id": op.id,
            "request": format!("{} {}", op.method.as_str(), op.path),
            "arguments": op.arguments().iter().map(|a| json!({
                "name": a.name,
                "in": a.location.as_str(),
                "wire": a.wire,
                "required": a.required,
                "rules": a.rules(),
                "description": a.description,
            })).collect::<Vec<_>>(),
            "input_schema": op.input_schema(),
        }),
        Err(e) => json!({ "error": e.to_string(), "code": e.code() }),
    }
}

fn to_json(p: &InstalledPack, active: bool) -> Value {
    let m = &p.manifest;
    let r = &p.record;
    json!({
        "id": p.id.as_str(),
        "name": m.name,
        "kind": m.kind,
        "plane": m.plane,
        "binding": m.binding,
        "transports": m.transports,
        "active": active,
        "verbs": verbs(p),
        "stimuli": m.stimulus_triggers.iter().map(|t| t.reference.as_str()).collect::<Vec<_>>(),
        "installed_at": r.installed_at,
        "source": r.source,
        "content_changed_at": r.content_changed_at,
        "files": r.files,
        "files_digest": r.files_digest,
        "bins": r.bins,
        "openapi": r.openapi,
    })
}

fn clean(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

fn to_text(
    p: &InstalledPack,
    active: bool,
    network: &str,
    operator_server: Option<&str>,
) -> String {
    let m = &p.manifest;
    let r = &p.record;
    let j = to_json(p, active);
    let word = |k: &str| j[k].as_str().unwrap_or("").to_owned();
    let mut s = String::new();
    let _ = writeln!(s, "{} ({})", p.id, clean(&m.name));
    let _ = writeln!(
        s,
        "  kind: {}  plane: {}  binding: {}  active: {}",
        word("kind"),
        word("plane"),
        j["binding"]["mode"].as_str().unwrap_or(""),
        if active { "yes" } else { "no" }
    );
    let _ = writeln!(
        s,
        "  installed: {} from `{}`",
        r.installed_at,
        r.source.display()
    );
    let _ = writeln!(
        s,
        "  content changed: {}",
        r.content_changed_at.as_deref().unwrap_or("never")
    );
    let _ = writeln!(s, "verbs:");
    for v in verbs(p) {
        let _ = writeln!(
            s,
            "  {}  {}  {}  confirm: {}  `{}`",
            v["key"].as_str().map(clean).unwrap_or_default(),
            v["operation"].as_str().unwrap_or("?"),
            v["land"].as_str().unwrap_or("?"),
            if v["confirm"] == true { "yes" } else { "no" },
            v["exec"].as_str().map(clean).unwrap_or_default(),
        );
        let http = &v["http"];
        if let Some(req) = http["request"].as_str() {
            let _ = writeln!(
                s,
                "    {}  `{}`",
                clean(req),
                http["operation_id"].as_str().map(clean).unwrap_or_default()
            );
        }
        for a in http["arguments"].as_array().into_iter().flatten() {
            let _ = writeln!(
                s,
                "    --{}  {}{}  {}{}",
                a["name"].as_str().map(clean).unwrap_or_default(),
                a["in"].as_str().unwrap_or("?"),
                if a["required"] == true {
                    ", required"
                } else {
                    ""
                },
                a["rules"].as_str().map(clean).unwrap_or_default(),
                a["description"]
                    .as_str()
                    .map(|d| format!(": {}", clean(d)))
                    .unwrap_or_default(),
            );
        }
        if let Some(e) = http["error"].as_str() {
            let _ = writeln!(s, "    cannot read its operation: {}", clean(e));
        }
    }
    let _ = writeln!(s, "network: {}", clean(network));
    let _ = writeln!(s, "pins:");
    for b in &r.bins {
        let _ = writeln!(
            s,
            "  bin `{}` → `{}` {}",
            clean(&b.program),
            b.path.display(),
            b.sha256
        );
    }
    if let Some(d) = &r.openapi {
        let _ = writeln!(
            s,
            "  document `{}` {} ({} bytes) from `{}`; server {}",
            clean(&d.spec),
            d.sha256,
            d.bytes,
            clean(&d.source),
            match (operator_server, d.server.as_deref()) {
                (Some(u), Some(doc)) => format!(
                    "`{}` (`packs.{}.server` in config.json; the document names `{}`)",
                    clean(u),
                    p.id,
                    clean(doc)
                ),
                (Some(u), None) => {
                    format!("`{}` (`packs.{}.server` in config.json)", clean(u), p.id)
                }
                (None, Some(doc)) => format!("`{}`", clean(doc)),
                (None, None) => format!("none (set `packs.{}.server`)", p.id),
            }
        );
    }
    for (name, d) in &r.files {
        let _ = writeln!(s, "  file `{name}` {d}");
    }
    let _ = writeln!(s, "  files digest {}", r.files_digest);
    s
}
