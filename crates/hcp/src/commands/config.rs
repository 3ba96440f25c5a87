//! `hcp config get [KEY]`, `hcp config set KEY VALUE`, `hcp config unset KEY` (RUNTIME
//! §3), owner only: `config.json` edited by dotted key, strictly ([`hcp_store::config::edit`]:
//! an unknown key or a value its key does not take is refused, nothing written), under the
//! store lock, atomically, every other key kept; each change an act of authority recorded
//! before it is made (`config set`, `config unset`, [`hcp_runtime::authority::edit_file`]).

use super::session::{print, require_owner, store_error};
use crate::error::{CliError, CliResult};
use crate::exit;
use hcp_model::Code;
use hcp_store::StoreError;
use hcp_store::config::RuntimeConfig;
use hcp_store::config::edit::{self, EditError, Edited};
use serde_json::{Value, json};
use std::path::Path;

/// `hcp config`: read or change `config.json` by dotted key.
#[derive(Debug, clap::Subcommand)]
pub enum ConfigCommand {
    /// Print the value of KEY (JSON), or with no KEY the whole effective configuration.
    Get(GetArgs),
    /// Set KEY to VALUE (read as JSON when it parses, else as a string).
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
    /// The value: JSON (`5`, `true`, `["/srv/data"]`, `{"allow": ["api.github.com:443"]}`),
    /// or a word taken as a string (`host`).
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
        EditError::WrongValue { doc, .. } => {
            let c = CliError::new(Code::BadConfigKey, e.to_string());
            match doc {
                Some(d) => c.hint(format!(
                    "`{}` takes {}; what it accepts and refuses: docs/config.md, \"`{}`\"",
                    d.name, d.takes, d.name
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
            let v =
                edit::get(text.as_deref(), &path, a.key.as_deref()).map_err(|e| edit_error(&e))?;
            print(&format!(
                "{}\n",
                serde_json::to_string_pretty(&v).unwrap_or_default()
            ));
            Ok(exit::OK)
        }
        ConfigCommand::Set(a) => {
            let value = edit::read_value(&a.value);
            let shown = value.to_string();
            change(&rt, &path, name, &a.key, |text| {
                edit::set(text, &path, &a.key, value).map(Some)
            })?;
            print(&format!("set `{}` to {shown}\n", a.key));
            Ok(exit::OK)
        }
        ConfigCommand::Unset(a) => {
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

/// Works out the edit under the store lock, records the act (`act`, with the key and the
/// new file's digest, never the value: a `state.url` may hold a password), then writes
/// the file atomically. `Ok(false)`: nothing to change, nothing recorded.
fn change(
    rt: &hcp_runtime::Runtime,
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
            let changed = json!({
                "key": key,
                "file": hcp_store::config::CONFIG_FILE,
                "digest": hcp_store::digest::sha256_tagged(e.text.as_bytes()),
            });
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
