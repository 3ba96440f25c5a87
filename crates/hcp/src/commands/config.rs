//! `hcp config get [KEY]`, `hcp config set KEY VALUE`, `hcp config unset KEY` (RUNTIME
//! §3), owner only: `config.json` edited by dotted key, strictly ([`hcp_store::config::edit`]:
//! an unknown key or a value its key does not take is refused, nothing written), under the
//! store lock, atomically, every other key kept; each change an act of authority recorded
//! before it is made (`config set`, `config unset`, [`hcp_runtime::authority::edit_file`]).
//!
//! `hcp config` is how the operator repairs a fleet's `state` (RUNTIME §9), so a `state`
//! that cannot be used never locks it out: `config set` refuses a `state` every call would
//! refuse (`bad_config_key`, checked as the backend parses it, without connecting), and
//! when `config.json` already names one that cannot be used — it does not parse, or its
//! database cannot be reached — the act is recorded in this store's own trail
//! (`$HCP_HOME/audit`, [`hcp_runtime::Runtime::own_trail`]) instead of the fleet's, its
//! record naming why (`fleet_state`: the code), and the command says so on stderr. An act
//! that neither trail can take still does not happen (74). `config get` shows `state` with
//! the URL's password as `***`.

use super::session::{print, require_owner, store_error};
use crate::error::{CliError, CliResult};
use crate::exit;
use hcp_model::Code;
use hcp_store::StoreError;
use hcp_store::config::RuntimeConfig;
use hcp_store::config::edit::{self, EditError, Edited};
use serde_json::{Value, json};
use std::io::Write;
use std::path::Path;

/// `hcp config`: read or change `config.json` by dotted key.
#[derive(Debug, clap::Subcommand)]
pub enum ConfigCommand {
    /// Print the value of KEY (JSON), or with no KEY the whole effective configuration.
    Get(GetArgs),
    /// Set KEY to VALUE: JSON (an array `'["~/.agents/skills"]'`, an object, a number,
    /// `true`), or a bare word taken as a string.
    Set(SetArgs),
    /// Remove KEY from `config.json`, so its default applies.
    Unset(UnsetArgs),
}

/// Arguments of `hcp config get`.
#[derive(Debug, clap::Args)]
pub struct GetArgs {
    /// A dotted key (`limits.cpu_seconds`, `packs.mail.network`); none: every key.
    #[arg(value_name = "KEY")]
    key: Option<String>,
}

/// Arguments of `hcp config set`.
#[derive(Debug, clap::Args)]
pub struct SetArgs {
    /// A dotted key (`limits.cpu_seconds`, `sandbox.network`).
    #[arg(value_name = "KEY")]
    key: String,
    /// The value, read as JSON (`5`, `true`, `["/srv/data"]`, `{"allow":
    /// ["api.github.com:443"]}`); text that is not JSON is taken as a string (`host`). An
    /// array or an object is JSON, quoted for the shell: `hcp config set skills.export
    /// '["~/.agents/skills"]'`.
    #[arg(value_name = "VALUE", allow_hyphen_values = true)]
    value: String,
}

/// Arguments of `hcp config unset`.
#[derive(Debug, clap::Args)]
pub struct UnsetArgs {
    /// A dotted key.
    #[arg(value_name = "KEY")]
    key: String,
}

/// Why a change is not made: the edit's refusal or the store's.
enum Refusal {
    Edit(EditError),
    Store(StoreError),
}

impl From<StoreError> for Refusal {
    fn from(e: StoreError) -> Self {
        Self::Store(e)
    }
}

impl From<EditError> for Refusal {
    fn from(e: EditError) -> Self {
        Self::Edit(e)
    }
}

impl From<Refusal> for CliError {
    fn from(r: Refusal) -> Self {
        match r {
            Refusal::Edit(e) => edit_error(&e),
            Refusal::Store(e) => store_error(&e),
        }
    }
}

/// The command-line error of an edit's refusal.
fn edit_error(e: &EditError) -> CliError {
    match e {
        EditError::UnknownKey { nearest, .. } => {
            let c = CliError::new(Code::BadConfigKey, e.to_string());
            if nearest.is_empty() {
                c
            } else {
                let names: Vec<String> = nearest.iter().map(|k| format!("`{k}`")).collect();
                let noun = if names.len() == 1 { "key" } else { "keys" };
                c.hint(format!(
                    "the nearest {noun}: {}; `hcp config get` prints every key",
                    names.join(", ")
                ))
            }
        }
        EditError::WrongValue { doc, value, key, .. } => {
            let c = CliError::new(Code::BadConfigKey, e.to_string());
            match doc {
                Some(d) => c.hint(format!(
                    "`{}` takes {}{}; what it accepts and refuses: docs/config.md, \"`{}`\"",
                    d.name,
                    d.takes,
                    json_note(key, value, &d.takes),
                    d.name
                )),
                None => c.hint("each key and the type it takes: docs/config.md"),
            }
        }
        EditError::BadKey { .. } => CliError::new(Code::BadConfigKey, e.to_string()),
        EditError::Damaged(d) => CliError::new(d.code(), d.to_string()).hint(
            "fix `config.json` at that place by hand (`hcp doctor` checks it), then run `hcp config` again",
        ),
    }
}

/// For a key that takes an array or an object, given a bare word (read as a string): that
/// VALUE is read as JSON, with the command that sets it to an array of that word.
fn json_note(key: &str, value: &str, takes: &str) -> String {
    let Ok(Value::String(word)) = serde_json::from_str::<Value>(value) else {
        return String::new();
    };
    if takes.starts_with("array of") {
        let array = Value::Array(vec![Value::String(word)]).to_string();
        format!(
            " (VALUE is read as JSON, and a bare word is a string: `hcp config set {key} '{array}'`)"
        )
    } else if takes == "object" || takes.starts_with("map of") {
        " (VALUE is read as JSON, and a bare word is a string: give a JSON object, quoted for the shell)".to_owned()
    } else {
        String::new()
    }
}

/// `config.json`'s `state` as `hcp config get` shows it at `segments` (`["state"]`,
/// `["state", "url"]`, …; the whole object for none): the URL without its password
/// ([`hcp_runtime::backend::shown_state`]); `None` for a key outside `state`, `Null` for
/// a `state` not set.
fn shown_state(text: Option<&str>, path: &Path, segments: &[&str]) -> Option<Value> {
    if segments.first().is_some_and(|s| *s != "state") {
        return None;
    }
    let state = text
        .and_then(|t| RuntimeConfig::parse(t, path).ok())
        .and_then(|c| c.state);
    let Some(st) = state else {
        return Some(Value::Null);
    };
    let shown = hcp_runtime::backend::shown_state(&st);
    Some(match segments.get(1) {
        None => shown,
        Some(k) => shown.get(*k).cloned().unwrap_or(Value::Null),
    })
}

/// A `state` in the edited text that the backend would refuse, as the edit's refusal
/// (RUNTIME §9: every call would answer `bad_config` under it), for an edit of `key`
/// under `state`.
fn check_state(e: &Edited, path: &Path, key: &str) -> Result<(), EditError> {
    if e.segments.first().map(String::as_str) != Some("state") {
        return Ok(());
    }
    let Some(st) = RuntimeConfig::parse(&e.text, path)?.state else {
        return Ok(());
    };
    hcp_runtime::backend::check_state(&st).map_err(|message| EditError::WrongValue {
        key: key.to_owned(),
        value: shown_value(&e.segments, &st),
        message,
        doc: hcp_store::config::schema::key_doc(&e.segments),
    })
}

/// A refusal of a value for a key under `state` without the value (`raw`, as given), which
/// may hold the URL's password, in its message: the parser's words quote what they were
/// given.
fn unshown(e: EditError, key: &str, raw: &str) -> EditError {
    let under_state = key == "state" || key.starts_with("state.");
    match e {
        EditError::WrongValue {
            key, message, doc, ..
        } if under_state => {
            let mut message = message;
            if let Ok(Value::String(inner)) = serde_json::from_str::<Value>(raw) {
                message = message.replace(&inner, "…");
            }
            EditError::WrongValue {
                key,
                value: "that value".to_owned(),
                message: message.replace(raw, "…"),
                doc,
            }
        }
        other => other,
    }
}

/// The value an edit of `segments` under `state` set, as messages show it (the URL
/// without its password).
fn shown_value(segments: &[String], st: &hcp_store::config::StateConfig) -> String {
    let shown = hcp_runtime::backend::shown_state(st);
    // A URL that does not parse cannot have its password found: it is not shown.
    if shown["url"] == hcp_runtime::backend::UNREADABLE_URL {
        return "that value".to_owned();
    }
    match segments.get(1) {
        None => shown.to_string(),
        Some(k) => shown
            .get(k.as_str())
            .cloned()
            .unwrap_or(Value::Null)
            .to_string(),
    }
}

/// The text of `path`, `None` when there is no file.
fn read(path: &Path) -> Result<Option<String>, StoreError> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoreError::io("read", path, e)),
    }
}

/// Runs `hcp config`.
pub fn run(c: ConfigCommand) -> CliResult {
    let name = match &c {
        ConfigCommand::Get(_) => "config get",
        ConfigCommand::Set(_) => "config set",
        ConfigCommand::Unset(_) => "config unset",
    };
    require_owner(name)?;
    let rt = super::exec::runtime()?;
    let path = RuntimeConfig::path(rt.home().root());
    match c {
        ConfigCommand::Get(a) => {
            let text = read(&path).map_err(|e| store_error(&e))?;
            let mut v =
                edit::get(text.as_deref(), &path, a.key.as_deref()).map_err(|e| edit_error(&e))?;
            // `state` is never serialised by the model (its URL may hold a password):
            // shown here with the password as `***`.
            match a.key.as_deref() {
                None => {
                    if let (Some(m), Some(st @ Value::Object(_))) =
                        (v.as_object_mut(), shown_state(text.as_deref(), &path, &[]))
                    {
                        m.insert("state".into(), st);
                    }
                }
                Some(k) => {
                    let segments: Vec<&str> = k.split('.').collect();
                    if let Some(st) = shown_state(text.as_deref(), &path, &segments) {
                        v = st;
                    }
                }
            }
            print(&format!(
                "{}\n",
                serde_json::to_string_pretty(&v).unwrap_or_default()
            ));
            Ok(exit::OK)
        }
        ConfigCommand::Set(a) => {
            let value = edit::read_value(&a.value);
            let mut shown = value.to_string();
            let rt = recorder(rt);
            change(&rt, &path, name, &a.key, |text| {
                let e = edit::set(text, &path, &a.key, value)
                    .map_err(|e| unshown(e, &a.key, &a.value))?;
                check_state(&e, &path, &a.key)?;
                if e.segments.first().map(String::as_str) == Some("state")
                    && let Some(st) = RuntimeConfig::parse(&e.text, &path)?.state
                {
                    shown = shown_value(&e.segments, &st);
                }
                Ok(Some(e))
            })?;
            print(&format!("set `{}` to {shown}\n", a.key));
            Ok(exit::OK)
        }
        ConfigCommand::Unset(a) => {
            let rt = recorder(rt);
            // A witness removed from `config.json` by hand is still the trail's until the
            // change is recorded (RUNTIME §6): unsetting it then records that.
            let trail_witness = if a.key == "audit.witness" || a.key == "audit" {
                rt.state()
                    .trail_witness()
                    .map_err(|e| store_error(&hcp_runtime::authority::store_error(e)))?
            } else {
                None
            };
            let mut stopped = false;
            let made = change(&rt, &path, name, &a.key, |text| {
                match edit::unset(text, &path, &a.key)? {
                    None if trail_witness.is_some() => {
                        stopped = true;
                        Ok(Some(Edited {
                            text: text.map_or_else(|| "{}\n".to_owned(), str::to_owned),
                            segments: a.key.split('.').map(str::to_owned).collect(),
                        }))
                    }
                    other => Ok(other),
                }
            })?;
            if made && stopped {
                print(&format!(
                    "`{}` is not set in `config.json`; the trail's witness ({}) is stopped\n",
                    a.key,
                    trail_witness.as_deref().unwrap_or_default()
                ));
            } else if made {
                print(&format!("unset `{}`; its default applies\n", a.key));
            } else {
                print(&format!("`{}` is not set; nothing to change\n", a.key));
            }
            Ok(exit::OK)
        }
    }
}

/// The runtime whose trail records an act of `hcp config`: `rt`'s when its state can be
/// used (the files always can), else — a `state` that does not parse, a database that
/// cannot be reached or used — this store's own trail ([`hcp_runtime::Runtime::own_trail`]),
/// said on stderr with why. `config.json` is this machine's file (RUNTIME §9), and the
/// command that repairs `state` must not need it.
fn recorder(rt: hcp_runtime::Runtime) -> Recorder {
    // A `config.json` that does not load is refused as it is, by [`change`].
    if RuntimeConfig::load(rt.home().root()).is_err() {
        return Recorder { rt, fleet: None };
    }
    match hcp_runtime::backend::ready(&rt) {
        Ok(()) => Recorder { rt, fleet: None },
        Err(e) => {
            let _ = writeln!(
                std::io::stderr().lock(),
                "note: the fleet's state cannot be used ({}: {e}); this change is recorded in this store's own trail (`audit/` of `HCP_HOME`)",
                e.code()
            );
            Recorder {
                rt: hcp_runtime::Runtime::own_trail(rt.home().clone()),
                fleet: Some(e.code()),
            }
        }
    }
}

/// The runtime that records an act of `hcp config`, and when it is the store's own trail
/// in place of the fleet's, the code of why.
struct Recorder {
    rt: hcp_runtime::Runtime,
    fleet: Option<Code>,
}

impl std::ops::Deref for Recorder {
    type Target = hcp_runtime::Runtime;
    fn deref(&self) -> &Self::Target {
        &self.rt
    }
}

/// Works out the edit under the store lock, records the act (`act`, with the key and the
/// new file's digest, never the value: a `state.url` may hold a password), then writes
/// the file atomically. `Ok(false)`: nothing to change, nothing recorded.
fn change(
    rt: &Recorder,
    path: &Path,
    act: &str,
    key: &str,
    edit: impl FnOnce(Option<&str>) -> Result<Option<Edited>, EditError>,
) -> Result<bool, CliError> {
    // A file that does not load is refused before anything is recorded; a hand edit made
    // before this one is recorded as such first (RUNTIME §6).
    RuntimeConfig::load(rt.home().root()).map_err(|e| edit_error(&EditError::Damaged(e)))?;
    hcp_runtime::authority::note_files(rt).map_err(|e| store_error(&e))?;
    let path_for = path.to_path_buf();
    let witness_key = key == "audit.witness" || key == "audit";
    hcp_runtime::authority::edit_file_as(
        rt,
        act,
        || -> Result<Option<(Value, Edited)>, Refusal> {
            let text = read(path)?;
            let Some(e) = edit(text.as_deref())? else {
                return Ok(None);
            };
            let mut changed = json!({
                "key": key,
                "file": hcp_store::config::CONFIG_FILE,
                "digest": hcp_store::digest::sha256_tagged(e.text.as_bytes()),
            });
            if let Some(code) = rt.fleet {
                changed["fleet_state"] = Value::String(code.as_str().to_owned());
            }
            Ok(Some((changed, e)))
        },
        // A change of the witness is witnessed by the new one (RUNTIME §6): a witness
        // that is gone does not lock out the act that replaces it.
        |e: &Edited| {
            if !witness_key {
                return None;
            }
            let new = RuntimeConfig::parse(&e.text, &path_for)
                .ok()?
                .audit
                .witness();
            match new {
                None => Some(None),
                Some(hcp_store::config::WitnessConfig::Dir(d)) => Some(Some(std::sync::Arc::new(
                    hcp_store::audit::witness::DirWitness::new(d),
                )
                    as std::sync::Arc<dyn hcp_store::audit::witness::Witness>)),
                Some(_) => None,
            }
        },
        |e| hcp_store::atomic::write_atomic(path, e.text.as_bytes()),
    )
    .map_err(CliError::from)
}
