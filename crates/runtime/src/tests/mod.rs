//! Unit tests of the pipeline against a temporary home, one per step and per refusal,
//! without the `hcp` binary: packs whose bin is a small shell script inside the pack
//! (`bin/tp`), installed through [`crate::install`], called through [`crate::pipeline`].

mod bootstrap;
mod cache;
mod confirm;
mod escalate;
mod lock;
mod mcp;
mod pipeline;
mod resolve;
mod shapes;
mod spending;
mod table;

use crate::call::{Answer, Call, CallArgs, Caller};
use crate::{Face, Runtime};
use hcp_model::{ArgValue, Capability};
use hcp_store::Home;
use hcp_store::grant::PackScope;
use hcp_store::pack::{BinLookup, InstallOptions};
use hcp_store::session::{NewSession, PrincipalId};
use jiff::Timestamp;
use serde_json::Value;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The bin of the test packs: a POSIX shell script, run by its pinned path.
const SCRIPT: &str = r#"#!/bin/sh
cmd=$1; shift
case "$cmd" in
  say) printf '%s\n' "$*" ;;
  json) printf '%s\n' "$1" ;;
  env) printf '%s\n' "$HCP_BINDING_TOKEN"
       printf '{"echo": "%s"}\n' "$(printf '%s' "$HCP_BINDING_TOKEN" | sed 's/\\/\\\\/g; s/"/\\"/g')" ;;
  sleep) sleep "$1"; echo slept ;;
  exit) echo bye >&2; exit "$1" ;;
  lines) echo '{"n": 1}' ;;
  connect) cat "$1"; sed -n 's/.*"token": *"\(.*\)".*/\1/p' "$1" >&2 ;;
esac
"#;

const HARNESS: &str = "# Test pack\n\nFor the runtime's tests.\n\n## Hot path\n\n| verb | does |\n|---|---|\n| say | prints |\n\n## Anti-patterns\n\n- none\n";

/// A temporary home with the test packs, a working directory and a user home.
pub(crate) struct World {
    _dir: tempfile::TempDir,
    pub rt: Runtime,
    pub root: PathBuf,
    pub work: PathBuf,
    pub user: PathBuf,
}

/// A verb of a test pack: key, operation, land, confirm, cli after the program.
type Verb<'a> = (&'a str, &'a str, &'a str, bool, &'a [&'a str]);

/// `tp`: a public pack (personal land but `note`, brain) with the stimulus `lines`.
pub(crate) const TP: &[Verb<'static>] = &[
    ("say", "read", "personal", false, &["say", "{{text}}"]),
    ("put", "write", "personal", true, &["say", "{{text}}"]),
    (
        "note",
        "write",
        "brain",
        false,
        &["say", "{{@project_id}}", "{{text}}"],
    ),
    ("sleep", "read", "personal", false, &["sleep", "{{secs}}"]),
    ("exit", "read", "personal", false, &["exit", "{{status}}"]),
    ("json", "read", "personal", false, &["json", "{{text}}"]),
];

impl World {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let work = root.join("work");
        let user = root.join("user");
        std::fs::create_dir_all(&work).unwrap();
        std::fs::create_dir_all(&user).unwrap();
        let rt = Runtime::open(Home::open(root.join("home")).unwrap());
        let w = Self {
            _dir: dir,
            rt,
            root,
            work,
            user,
        };
        w.install_pack("tp", "public", TP, true);
        w
    }

    pub fn home(&self) -> &Home {
        self.rt.home()
    }

    /// Writes and installs (active) pack `id` with `verbs`, binding `mode`; `lines` adds
    /// the stimulus `lines`, and a `user` pack gets `connect` and `binding.degraded`.
    pub fn install_pack(&self, id: &str, mode: &str, verbs: &[Verb<'_>], lines: bool) {
        let dir = self.write_pack(id, mode, verbs, lines);
        self.install_dir(&dir);
    }

    pub fn install_dir(&self, dir: &Path) {
        let opts = InstallOptions {
            force: true,
            activate: true,
            lookup: BinLookup {
                path: Some("/usr/bin:/bin".into()),
                cwd: "/".into(),
            },
            ..InstallOptions::default()
        };
        crate::install::install(&self.rt, dir, &opts).unwrap();
    }

    pub fn write_pack(&self, id: &str, mode: &str, verbs: &[Verb<'_>], lines: bool) -> PathBuf {
        let dir = self.root.join("src").join(id);
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        let bin = dir.join("bin/tp");
        std::fs::write(&bin, SCRIPT).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut all: Vec<Verb<'_>> = verbs.to_vec();
        if mode == "user" {
            all.push((
                "connect",
                "write",
                "personal",
                false,
                &["connect", "{{file}}"],
            ));
        }
        let mut sverbs = serde_json::Map::new();
        let mut pverbs = serde_json::Map::new();
        for (key, op, land, confirm, cli) in &all {
            let mut argv = vec!["tp".to_owned()];
            argv.extend(cli.iter().map(|s| (*s).to_owned()));
            sverbs.insert(
                (*key).into(),
                serde_json::json!({"description": format!("{key}."), "cli": argv}),
            );
            let mut e = serde_json::json!({"operation": op, "privacy": {"land": land}});
            if *confirm {
                e["confirm"] = true.into();
            }
            pverbs.insert((*key).into(), e);
        }
        let mut triggers = Vec::new();
        let mut stimuli = serde_json::Map::new();
        if lines {
            triggers.push(serde_json::json!({"ref": "lines", "cli": ["tp", "lines"]}));
            stimuli.insert(
                "lines".into(),
                serde_json::json!({"operation": "read", "privacy": {"land": "personal"}}),
            );
        }
        if mode == "user" {
            triggers.push(serde_json::json!({"ref": "binding.degraded"}));
            stimuli.insert(
                "binding.degraded".into(),
                serde_json::json!({"operation": "read", "privacy": {"land": "personal"}}),
            );
        }
        let mut surface = serde_json::json!({
            "id": id, "name": "Test", "kind": "wrap", "cliBin": "tp",
            "binding": {"mode": mode}, "wrap": {"bin": "bin/tp"}, "verbs": sverbs,
            "transports": ["cli", "json_exec", "mcp"],
        });
        if !triggers.is_empty() {
            surface["stimulusTriggers"] = triggers.into();
        }
        let mut policy = serde_json::json!({"surface_id": id, "version": 1, "verbs": pverbs});
        if !stimuli.is_empty() {
            policy["stimuli"] = stimuli.into();
        }
        std::fs::write(dir.join("surface.json"), surface.to_string()).unwrap();
        std::fs::write(dir.join("policy.json"), policy.to_string()).unwrap();
        std::fs::write(dir.join("HARNESS.md"), HARNESS).unwrap();
        dir
    }

    /// The owner in the working directory.
    pub fn owner(&self) -> Caller {
        Caller {
            session_token: None,
            project: None,
            cwd: self.work.clone(),
            parent_env: vec![
                ("PATH".into(), "/usr/bin:/bin".into()),
                ("HOME".into(), self.user.clone().into_os_string()),
            ],
            limit_overrides: hcp_adapter::LimitOverrides::default(),
        }
    }

    /// A session of `principal` with `role` and `projects`, as a caller.
    pub fn session(&self, principal: &str, role: Option<&str>, projects: &[&str]) -> Caller {
        let new = NewSession {
            principal: principal.into(),
            role: role.map(str::to_owned),
            projects: projects.iter().map(|p| (*p).to_owned()).collect(),
            ..NewSession::default()
        };
        let (token, _) = self
            .rt
            .state()
            .session_start(&new, Timestamp::now())
            .unwrap();
        Caller {
            session_token: Some(OsString::from(token.as_str())),
            ..self.owner()
        }
    }

    pub fn grant(&self, principal: &str, pack: &str, caps: &[Capability]) {
        self.rt
            .state()
            .grant(
                &PrincipalId::parse(principal).unwrap(),
                &PackScope::parse(pack).unwrap(),
                caps,
                Timestamp::now(),
            )
            .unwrap();
    }

    /// Calls `target` with named `args` on the JSON face.
    pub fn exec(&self, caller: &Caller, target: &str, args: &[(&str, ArgValue)]) -> Answer {
        let call = Call {
            pack_id: None,
            target: target.into(),
            args: CallArgs::Named(args.iter().map(|(k, v)| ((*k).into(), v.clone())).collect()),
            face: Face::Json,
            timeout: None,
        };
        crate::pipeline::run(
            &self.rt,
            caller,
            crate::pipeline::Subject::Verb(call),
            crate::pipeline::Mode::Exec(None),
        )
    }

    /// `hcp sense PACK [REF] --count N` as `caller`: the answer and the events relayed.
    pub fn sense(
        &self,
        caller: &Caller,
        pack: &str,
        reference: Option<&str>,
        count: u64,
    ) -> (Answer, String) {
        let (stop, _keep) = nix::unistd::pipe().unwrap();
        let mut events = Vec::new();
        let stimuli = crate::pipeline::Stimuli {
            pack_id: pack,
            reference,
            count: Some(count),
            sinks: crate::sense::Sinks {
                events: &mut events,
                notes: &mut std::io::sink(),
                events_fd: None,
            },
        };
        let cancel = std::os::fd::AsFd::as_fd(&stop);
        let subject = crate::pipeline::Subject::Stimuli(stimuli);
        let a = crate::pipeline::run(
            &self.rt,
            caller,
            subject,
            crate::pipeline::Mode::Exec(Some(cancel)),
        );
        (a, String::from_utf8(events).unwrap())
    }

    /// `tp.say TEXT` as `caller`.
    pub fn say(&self, caller: &Caller, text: &str) -> Answer {
        self.exec(caller, "tp.say", &[("text", s(text))])
    }

    /// The runtime policy, as YAML.
    pub fn policy(&self, yaml: &str) {
        std::fs::write(self.home().root().join("policy.yaml"), yaml).unwrap();
    }

    /// `config.json`, or none.
    pub fn config(&self, json: Option<&str>) {
        let p = self.home().root().join("config.json");
        match json {
            Some(j) => std::fs::write(p, j).unwrap(),
            None => {
                let _ = std::fs::remove_file(p);
            }
        }
    }

    /// Every audit record, oldest first.
    pub fn records(&self) -> Vec<Value> {
        let p = self.home().root().join("audit/audit.jsonl");
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The last call's record: a refusal's one record, or an allowed call's `intent` with
    /// its `outcome`'s fields over it (the intent's `id`, the call's `audit_id`, stays).
    pub fn last_record(&self) -> Value {
        call_view(&self.records())
    }
}

pub(crate) fn s(v: &str) -> ArgValue {
    ArgValue::String(v.into())
}

/// The code and exit status of an answer (`None` for a run without a code).
pub(crate) fn code(a: &Answer) -> (Option<&'static str>, u8) {
    (a.result.code.map(hcp_model::Code::as_str), a.exit)
}

/// The last call of `records` as one object (see [`World::last_record`]).
pub(crate) fn call_view(records: &[Value]) -> Value {
    let Some(last) = records.last() else {
        return Value::Null;
    };
    if last["kind"] != "outcome" {
        return last.clone();
    }
    let mut view = records
        .iter()
        .rev()
        .find(|r| r["kind"] == "intent" && r["id"] == last["intent"])
        .cloned()
        .expect("the outcome's intent");
    for (k, v) in last.as_object().unwrap() {
        if !matches!(k.as_str(), "id" | "ts" | "seq" | "kind" | "prev" | "hash") {
            view[k] = v.clone();
        }
    }
    view["outcome_id"] = last["id"].clone();
    view
}
