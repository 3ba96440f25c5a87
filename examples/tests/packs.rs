//! The gold packs under `packs/`: each parses strictly with `hcp-model`, plans every verb
//! and trigger, keeps its policy in step with its manifest, keeps its skill in shape, and
//! (for the packs whose bins are here or on every system) runs every verb, rendered the way
//! the runtime renders it, against the real program.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use hcp_model::manifest::{CommandPlan, arguments};
use hcp_model::template::{Element, SessionVar};
use hcp_model::{Kind, Manifest, Operation, PolicyFile, parse_manifest, parse_policy};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const PACKS: [&str; 6] = ["echo", "git", "hcp-cli", "ledger", "mail", "transit"];
/// The `kind: openapi` gold packs (`tests/tasks.rs` checks them; their fourth file is the
/// OpenAPI document).
const OPENAPI_PACKS: [&str; 1] = ["tasks"];

fn load(id: &str) -> (Manifest, PolicyFile, String) {
    let dir = common::packs_dir().join(id);
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
    let m = parse_manifest(&read("surface.json")).unwrap_or_else(|e| panic!("{id}: {e:?}"));
    let p = parse_policy(&read("policy.json")).unwrap_or_else(|e| panic!("{id}: {e:?}"));
    (m, p, read("HARNESS.md"))
}

#[test]
fn the_gold_packs_are_exactly_these() {
    let mut found = common::files(&common::packs_dir());
    found.retain(|f| common::packs_dir().join(f).is_dir());
    let mut all: Vec<&str> = PACKS.iter().chain(OPENAPI_PACKS.iter()).copied().collect();
    all.sort_unstable();
    assert_eq!(found, all);
    for id in PACKS {
        let files = common::files(&common::packs_dir().join(id));
        assert_eq!(files, ["HARNESS.md", "policy.json", "surface.json"], "{id}");
    }
}

#[test]
fn every_pack_parses_plans_and_covers_its_policy() {
    for id in PACKS {
        let (m, p, _) = load(id);
        assert_eq!(m.id, id);
        assert_eq!(p.surface_id, id, "§4.4.5");
        assert_eq!(p.version, 1);
        let verbs: Vec<&String> = m.verbs.keys().collect();
        let policed: Vec<&String> = p.verbs.keys().collect();
        assert_eq!(verbs, policed, "{id}: §4.4.1-2, in the same order");
        let refs: Vec<&String> = m.stimulus_triggers.iter().map(|t| &t.reference).collect();
        let stimuli: Vec<&String> = p.stimuli.keys().collect();
        assert_eq!(refs, stimuli, "{id}: §4.4.3-4");
        for (_, entry) in &p.stimuli {
            assert_eq!(entry.operation, Operation::Read, "{id}: §4.2.6");
            assert!(entry.confirm.is_none());
        }
        for (key, spec) in &m.verbs {
            let plan = m
                .plan_verb(key)
                .unwrap_or_else(|e| panic!("{id}.{key}: {e}"));
            let entry = p.verbs.get(key).unwrap();
            if entry.confirm.is_some() {
                assert_eq!(entry.operation, Operation::Write, "{id}.{key}: §4.5.1");
            }
            let cli = spec.cli.as_ref().unwrap();
            let mirrored = cli.iter().any(|a| a == "--confirm" || a == "--apply");
            if entry.needs_confirm() && (id, key.as_str()) != ("git", "commit") {
                assert!(mirrored, "{id}.{key}: §4.5.4");
            }
            if !entry.needs_confirm() {
                assert!(!mirrored, "{id}.{key}: a flag the gate does not guard");
            }
            assert!(!spec.description.is_empty());
            assert!(
                !plan.program.contains('/'),
                "{id}.{key}: bins are bare names, looked up on PATH at install"
            );
        }
        for t in &m.stimulus_triggers {
            if t.cli.is_some() {
                m.plan_trigger(&t.reference).unwrap();
            }
        }
        let n = m.verbs.len();
        if id == "mail" {
            assert_eq!(n, 4, "mail is the §4.7 example, exactly");
        } else {
            assert!((5..=12).contains(&n), "{id}: {n} verbs");
        }
        match m.kind {
            Kind::Wrap => assert!(m.cli_bin.is_some() && m.wrap.is_some(), "{id}"),
            Kind::Composite => assert!(m.wrap.is_none(), "{id}"),
            Kind::Openapi => panic!("{id}: the openapi gold packs are in OPENAPI_PACKS"),
        }
    }
}

/// `(verb, operation, land, confirm)` for every verb of every pack.
fn table(p: &PolicyFile) -> Vec<(String, &'static str, &'static str, bool)> {
    p.verbs
        .iter()
        .map(|(k, e)| {
            (
                k.clone(),
                e.operation.as_str(),
                e.privacy.land.as_str(),
                e.needs_confirm(),
            )
        })
        .collect()
}

#[test]
fn policies_say_what_the_packs_promise() {
    let rows = |v: &[(&str, &'static str, &'static str, bool)]| -> Vec<(String, &'static str, &'static str, bool)> {
        v.iter().map(|(k, o, l, c)| ((*k).to_owned(), *o, *l, *c)).collect()
    };
    let expect: BTreeMap<&str, Vec<(String, &str, &str, bool)>> = BTreeMap::from([
        (
            "transit",
            rows(&[
                ("find", "read", "personal", false),
                ("plan", "read", "personal", false),
                ("show", "read", "personal", false),
                ("status", "read", "personal", false),
                ("follow", "read", "personal", false),
            ]),
        ),
        (
            "echo",
            rows(&[
                ("echo.say", "read", "local", false),
                ("echo.upper", "read", "local", false),
                ("echo.count", "read", "local", false),
                ("echo.write", "write", "local", true),
                ("echo.read", "read", "local", false),
                ("echo.where", "read", "local", false),
                ("echo.ls", "read", "local", false),
            ]),
        ),
        (
            "ledger",
            rows(&[
                ("ledger.post", "write", "local", true),
                ("ledger.preview", "write", "local", false),
                ("ledger.validate", "read", "local", false),
                ("ledger.balance", "read", "local", false),
                ("ledger.list", "read", "local", false),
            ]),
        ),
        (
            "hcp-cli",
            rows(&[
                ("list", "read", "personal", false),
                ("show", "read", "personal", false),
                ("lint", "read", "personal", false),
                ("audit.tail", "read", "personal", false),
                ("audit.verify", "read", "personal", false),
            ]),
        ),
        (
            "git",
            rows(&[
                ("status", "read", "local", false),
                ("log", "read", "local", false),
                ("diff", "read", "local", false),
                ("show", "read", "local", false),
                ("add", "write", "local", false),
                ("commit", "write", "local", true),
            ]),
        ),
    ]);
    for (id, want) in expect {
        assert_eq!(table(&load(id).1), want, "{id}");
    }
}

#[test]
fn mail_policy_is_the_seed_example_verbatim() {
    let seed = json!({
      "surface_id": "mail",
      "version": 1,
      "verbs": {
        "mail.list":    { "operation": "read",  "privacy": { "land": "personal" } },
        "mail.send":    { "operation": "write", "privacy": { "land": "personal" }, "confirm": true },
        "mail.connect": { "operation": "write", "privacy": { "land": "personal" } },
        "notes.create": { "operation": "write", "privacy": { "land": "brain" } }
      },
      "stimuli": {
        "new_item":         { "operation": "read", "privacy": { "land": "personal" } },
        "binding.degraded": { "operation": "read", "privacy": { "land": "personal" } }
      }
    });
    let text = std::fs::read_to_string(common::packs_dir().join("mail/policy.json")).unwrap();
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), seed);
    let (m, _, _) = load("mail");
    assert_eq!(m.connect_verb(), Some("mail.connect"));
    assert_eq!(
        serde_json::to_value(m.binding.mode).unwrap(),
        json!("user"),
        "mail acts as the principal"
    );
}

#[test]
fn transit_is_the_seed_pack_with_this_repos_bin() {
    let (m, _, skill) = load("transit");
    assert_eq!(m.cli_bin.as_deref(), Some("transit"));
    assert_eq!(m.wrap.as_ref().unwrap().bin, "hcp-example-transit");
    let verbs: Vec<&str> = m.verbs.keys().map(String::as_str).collect();
    assert_eq!(verbs, ["find", "plan", "show", "status", "follow"]);
    assert!(skill.contains("Public five-command wrap sample. No login. No secrets."));
}

#[test]
fn skills_have_the_seed_shape() {
    for id in PACKS {
        let (m, _, skill) = load(id);
        let lines: Vec<&str> = skill.lines().collect();
        assert!(lines.len() <= 60, "{id}: {} lines", lines.len());
        assert!(lines[0].starts_with("# HCP — "), "{id}: title");
        assert!(lines.contains(&"## Hot path"), "{id}");
        assert!(lines.contains(&"## Anti-patterns"), "{id}");
        assert!(
            lines.iter().any(|l| l.starts_with("|---")),
            "{id}: hot-path table"
        );
        for key in m.verbs.keys() {
            assert!(
                skill.contains(&format!("| `{key}` |")),
                "{id}: `{key}` not taught"
            );
        }
    }
}

#[test]
fn nothing_names_a_host_path() {
    for id in PACKS {
        for f in ["surface.json", "policy.json", "HARNESS.md"] {
            let text = std::fs::read_to_string(common::packs_dir().join(id).join(f)).unwrap();
            for bad in ["/work", "/home/", "/Users/", "/tmp/", "/root", "C:\\"] {
                assert!(!text.contains(bad), "{id}/{f} names `{bad}`");
            }
        }
        let skill = load(id).2;
        let absolute = skill
            .match_indices('/')
            .filter(|(i, _)| {
                *i == 0 || matches!(skill.as_bytes()[i - 1], b' ' | b'`' | b'"' | b'(')
            })
            .any(|(i, _)| {
                skill
                    .as_bytes()
                    .get(i + 1)
                    .is_some_and(u8::is_ascii_alphanumeric)
            });
        assert!(!absolute, "{id}: absolute path in the skill");
    }
}

#[test]
fn git_verbs_switch_off_code_running_configuration() {
    let (m, _, _) = load("git");
    for (key, spec) in &m.verbs {
        let cli = spec.cli.as_ref().unwrap();
        let pairs: Vec<&str> = cli
            .windows(2)
            .filter(|w| w[0] == "-c")
            .map(|w| w[1].as_str())
            .collect();
        for must in [
            "core.hooksPath=/dev/null",
            "core.fsmonitor=false",
            "core.pager=cat",
            "diff.external=",
            "core.sshCommand=false",
            "credential.helper=",
            "protocol.allow=never",
        ] {
            assert!(pairs.contains(&must), "git.{key} lacks -c {must}");
        }
        for flag in ["--no-pager", "--literal-pathspecs", "--no-optional-locks"] {
            assert!(cli.contains(&flag.to_owned()), "git.{key} lacks {flag}");
        }
        let sub = cli.iter().position(|a| a == key).unwrap();
        if ["log", "diff", "show"].contains(&key.as_str()) {
            assert!(
                cli[sub..].contains(&"--no-ext-diff".to_owned()),
                "git.{key}"
            );
            assert!(
                cli[sub..].contains(&"--no-textconv".to_owned()),
                "git.{key}"
            );
        }
        // Every path placeholder sits after a literal `--`.
        let plan = m.plan_verb(key).unwrap();
        for el in &plan.args {
            if let Element::Arg {
                name,
                prefix: None,
                after_double_dash,
                ..
            } = el
                && name == "path"
            {
                assert!(after_double_dash, "git.{key}: path before `--`");
            }
        }
    }
    let env = m.wrap.as_ref().unwrap().agent_env.as_ref().unwrap();
    assert_eq!(
        env.get("GIT_TERMINAL_PROMPT").map(String::as_str),
        Some("0")
    );
    // In land `local`, HOME is the working directory: without these, a `.gitconfig`
    // committed at the root of the repository would be read as the global config.
    assert_eq!(
        env.get("GIT_CONFIG_NOSYSTEM").map(String::as_str),
        Some("1")
    );
    assert_eq!(
        env.get("GIT_CONFIG_GLOBAL").map(String::as_str),
        Some("/dev/null")
    );
    assert!(env.get("GIT_AUTHOR_EMAIL").is_some());
}

/// The session of a rendered call.
struct Session<'a> {
    principal: &'a str,
    project: &'a str,
    workdir: &'a Path,
}

/// Renders a plan the way RUNTIME §1.2 says: whole elements, optional ones dropped, the
/// `--flag=` prefix kept, session values from the session, and a flag-looking value in
/// a positional before `--` refused as the gate would.
fn render(
    plan: &CommandPlan,
    key: &str,
    args: &BTreeMap<&str, &str>,
    s: &Session<'_>,
) -> Vec<String> {
    let mut argv = Vec::new();
    for (name, required) in arguments(plan) {
        if required {
            assert!(args.contains_key(name.as_str()), "`{key}` needs `{name}`");
        }
    }
    for name in args.keys() {
        assert!(
            arguments(plan).iter().any(|(n, _)| n == name),
            "`{key}` takes no `{name}`"
        );
    }
    for el in &plan.args {
        match el {
            Element::Literal { text } => argv.push(text.clone()),
            Element::Arg {
                name,
                prefix,
                after_double_dash,
                ..
            } => {
                if let Some(v) = args.get(name.as_str()) {
                    if prefix.is_none() && !after_double_dash {
                        assert!(!v.starts_with('-'), "`{key}`: the gate refuses `{v}`");
                    }
                    argv.push(format!("{}{v}", prefix.as_deref().unwrap_or("")));
                }
            }
            Element::Session { var, prefix } => {
                let v = match var {
                    SessionVar::PrincipalId => s.principal.to_owned(),
                    SessionVar::ProjectId => s.project.to_owned(),
                    SessionVar::Workdir => s.workdir.to_string_lossy().into_owned(),
                };
                argv.push(format!("{}{v}", prefix.as_deref().unwrap_or("")));
            }
            Element::Verb => argv.push(key.to_owned()),
        }
    }
    argv
}

fn program(name: &str) -> PathBuf {
    match name.strip_prefix("hcp-example-") {
        Some(short) => common::bin(short),
        None => PathBuf::from(name),
    }
}

/// Runs every verb of pack `id` in order with `samples`, the way hcp would: cleared
/// environment, `agent_env`, the `HCP_*` facts, `HOME` and the working directory.
fn run_pack(
    id: &str,
    samples: &[(&str, &[(&str, &str)])],
    home: &Path,
    work: &Path,
    extra_env: &[(&str, &str)],
) -> BTreeMap<String, Output> {
    let (m, p, _) = load(id);
    let s = Session {
        principal: "alice",
        project: "apollo",
        workdir: work,
    };
    let mut outs = BTreeMap::new();
    assert_eq!(
        samples.iter().map(|(k, _)| *k).collect::<Vec<_>>(),
        m.verbs.keys().map(String::as_str).collect::<Vec<_>>(),
        "{id}: a sample for every verb, in order"
    );
    for (key, args) in samples {
        let args: BTreeMap<&str, &str> = args.iter().copied().collect();
        let plan = m.plan_verb(key).unwrap();
        let argv = render(&plan, key, &args, &s);
        let local = p.verbs.get(key).unwrap().privacy.land == hcp_model::Land::Local;
        let mut c = Command::new(program(&plan.program));
        c.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("LANG", "C")
            .env("HOME", if local { work } else { home })
            .env("HCP_PACK_ID", id)
            .env("HCP_VERB_KEY", key)
            .env("HCP_PRINCIPAL_ID", s.principal)
            .env("HCP_PROJECT_ID", s.project)
            .env("HCP_WORKDIR", work)
            .current_dir(work)
            .args(&argv);
        if let Some(env) = m.wrap.as_ref().and_then(|w| w.agent_env.as_ref()) {
            for (k, v) in env {
                c.env(k, v);
            }
        }
        for (k, v) in extra_env {
            c.env(k, v);
        }
        let out = c.output().unwrap();
        assert!(
            out.status.success(),
            "{id}.{key} {argv:?}: exit {:?}: {}",
            out.status.code(),
            common::stderr(&out)
        );
        if argv.iter().any(|a| a == "--json") {
            common::ok_json(&out);
        }
        outs.insert((*key).to_owned(), out);
    }
    outs
}

#[test]
fn transit_verbs_run() {
    let tmp = tempfile::tempdir().unwrap();
    let outs = run_pack(
        "transit",
        &[
            ("find", &[("query", "Central")]),
            ("plan", &[("from", "Central"), ("to", "Harbor")]),
            ("show", &[("option_id", "opt-5-central-harbor")]),
            ("status", &[]),
            ("follow", &[("run_id", "run-4")]),
        ],
        tmp.path(),
        tmp.path(),
        &[],
    );
    let plan = common::ok_json(&outs["plan"]);
    assert_eq!(plan["options"][0]["id"], "opt-5-central-harbor");
}

#[test]
fn echo_verbs_run() {
    let tmp = tempfile::tempdir().unwrap();
    let outs = run_pack(
        "echo",
        &[
            ("echo.say", &[("text", "-hello")]),
            ("echo.upper", &[("text", "hello")]),
            ("echo.count", &[]),
            ("echo.write", &[("name", "n.txt"), ("text", "hi")]),
            ("echo.read", &[("name", "n.txt")]),
            ("echo.where", &[]),
            ("echo.ls", &[]),
        ],
        tmp.path(),
        tmp.path(),
        &[],
    );
    assert_eq!(common::ok_json(&outs["echo.say"])["text"], "-hello");
    assert_eq!(common::ok_json(&outs["echo.read"])["text"], "hi");
    assert_eq!(common::stdout(&outs["echo.ls"]), "n.txt\n");
}

#[test]
fn ledger_verbs_run_and_preview_persists_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let entry: &[(&str, &str)] = &[
        ("account", "assets:cash"),
        ("amount", "-3.20"),
        ("memo", "refund"),
    ];
    let outs = run_pack(
        "ledger",
        &[
            ("ledger.post", entry),
            ("ledger.preview", entry),
            ("ledger.validate", entry),
            ("ledger.balance", &[]),
            ("ledger.list", &[("limit", "5")]),
        ],
        tmp.path(),
        tmp.path(),
        &[],
    );
    assert_eq!(
        common::ok_json(&outs["ledger.preview"])["would_post"]["seq"],
        2
    );
    assert_eq!(common::ok_json(&outs["ledger.balance"])["total"], "-3.20");
    let journal = std::fs::read_to_string(tmp.path().join("ledger.jsonl")).unwrap();
    assert_eq!(journal.lines().count(), 1, "only the post persisted");
}

#[test]
fn mail_verbs_and_trigger_run() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    let token = common::ok_json(
        &common::cmd("mail", &work)
            .args(["connect", "--principal", "alice"])
            .output()
            .unwrap(),
    )["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let outs = run_pack(
        "mail",
        &[
            ("mail.list", &[]),
            (
                "mail.send",
                &[("to", "alice"), ("subject", "-hi"), ("body", "b")],
            ),
            ("mail.connect", &[]),
            ("notes.create", &[("title", "t"), ("body", "b")]),
        ],
        &home,
        &work,
        &[("HCP_BINDING_TOKEN", &token)],
    );
    assert_eq!(
        common::ok_json(&outs["mail.connect"])["token"],
        token.as_str()
    );
    assert!(
        home.join(".hcp-example-mail/projects/apollo/notes")
            .is_dir(),
        "the note went to the session's project"
    );
    // The trigger, planned and rendered like a verb, with the test-only `--backlog --once`.
    let (m, _, _) = load("mail");
    let plan = m.plan_trigger("new_item").unwrap();
    let s = Session {
        principal: "alice",
        project: "apollo",
        workdir: &work,
    };
    let argv = render(&plan, "new_item", &BTreeMap::new(), &s);
    let out = Command::new(program(&plan.program))
        .env_clear()
        .env("HOME", &home)
        .args(&argv)
        .args(["--backlog", "--once"])
        .output()
        .unwrap();
    let event = common::ok_json(&out);
    assert_eq!(event["subject"], "-hi");
    assert_eq!(event["principal"], "alice");
}

#[test]
fn git_verbs_run_against_real_git() {
    let Ok(v) = Command::new("git").arg("--version").output() else {
        eprintln!("git is not installed; skipping");
        return;
    };
    assert!(v.status.success());
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path();
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", work)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t.invalid")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t.invalid")
            .current_dir(work)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", common::stderr(&out));
        out
    };
    git(&["init", "-q"]);
    std::fs::write(work.join("a.txt"), "one\n").unwrap();
    git(&["add", "a.txt"]);
    git(&["commit", "-q", "-m", "first"]);
    std::fs::write(work.join("a.txt"), "one\ntwo\n").unwrap();
    std::fs::write(work.join("-b.txt"), "dash\n").unwrap();
    let outs = run_pack(
        "git",
        &[
            ("status", &[]),
            ("log", &[("limit", "5")]),
            ("diff", &[("path", "a.txt")]),
            ("show", &[("rev", "HEAD")]),
            ("add", &[("path", "-b.txt")]),
            ("commit", &[("message", "--amend; $(x)")]),
        ],
        work,
        work,
        &[],
    );
    assert!(common::stdout(&outs["status"]).contains(" M a.txt"));
    assert!(common::stdout(&outs["log"]).contains(" t "));
    assert!(common::stdout(&outs["diff"]).contains("+two"));
    let log = git(&["log", "--format=%an|%s|%P"]);
    let log = common::stdout(&log);
    let newest = log.lines().next().unwrap();
    assert!(
        newest.starts_with("hcp agent|--amend; $(x)|"),
        "a new commit, not an amend: {log}"
    );
    assert_eq!(log.lines().count(), 2);
}

fn git_available() -> bool {
    Command::new("git")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A plain `git` for setting up a repository in `work`, ignoring every config file but
/// the repository's own.
fn setup_git(work: &Path, args: &[&str]) {
    let out = Command::new("git")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", work)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t.invalid")
        .current_dir(work)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {}", common::stderr(&out));
}

fn executable(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn git_verbs_run_no_code_from_a_hostile_repository() {
    if !git_available() {
        eprintln!("git is not installed; skipping");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path();
    setup_git(work, &["init", "-q"]);
    std::fs::write(work.join("a.txt"), "one\n").unwrap();
    setup_git(work, &["add", "a.txt"]);
    setup_git(work, &["commit", "-q", "-m", "first"]);
    let mark = |name: &str| format!("touch {}", work.join(name).display());
    // The repository's own config names programs in every way `-c` switches off …
    // A filter driver in the repository's own config with a committed `.gitattributes`
    // naming it is neutralised by `--attr-source` (the empty tree); a signature check
    // would run `gpg.program` (`log.showSignature`).
    let local = format!(
        "[core]\n\tfsmonitor = {}\n\thooksPath = hooks\n\tpager = {}\n\teditor = {}\n[diff]\n\texternal = {}\n[filter \"evil\"]\n\tclean = {}\n[log]\n\tshowSignature = true\n[gpg]\n\tprogram = {}\n",
        mark("fsmonitor-ran"),
        mark("pager-ran"),
        mark("editor-ran"),
        mark("external-diff-ran"),
        mark("local-filter-ran"),
        work.join("gpg.sh").display(),
    );
    executable(
        &work.join("gpg.sh"),
        &format!("#!/bin/sh\n{}\n", mark("gpg-ran")),
    );
    let mut config = std::fs::read_to_string(work.join(".git/config")).unwrap();
    config.push_str(&local);
    std::fs::write(work.join(".git/config"), config).unwrap();
    // … and, since `HOME` is the working directory in land `local`, a committed
    // `.gitconfig` would be the global config: filters and textconv, which `-c` cannot
    // name in advance. `GIT_CONFIG_GLOBAL=/dev/null` keeps it unread.
    let global = format!(
        "[filter \"evil\"]\n\tclean = {}\n\tsmudge = {}\n[diff \"evil\"]\n\ttextconv = {}\n{local}",
        mark("filter-ran"),
        mark("smudge-ran"),
        mark("textconv-ran"),
    );
    std::fs::write(work.join(".gitconfig"), global).unwrap();
    std::fs::write(work.join(".gitattributes"), "*.txt filter=evil diff=evil\n").unwrap();
    for dir in ["hooks", ".git/hooks"] {
        std::fs::create_dir_all(work.join(dir)).unwrap();
        for hook in [
            "pre-commit",
            "commit-msg",
            "post-commit",
            "post-index-change",
        ] {
            executable(
                &work.join(dir).join(hook),
                &format!("#!/bin/sh\n{}\n", mark(&format!("{hook}-ran"))),
            );
        }
    }
    std::fs::write(work.join("a.txt"), "one\ntwo\n").unwrap();
    run_pack(
        "git",
        &[
            ("status", &[]),
            ("log", &[("path", "a.txt")]),
            ("diff", &[]),
            ("show", &[("rev", "HEAD")]),
            ("add", &[("path", "a.txt")]),
            ("commit", &[("message", "second")]),
        ],
        work,
        work,
        &[],
    );
    let ran: Vec<String> = common::files(work)
        .into_iter()
        .filter(|f| f.ends_with("-ran"))
        .collect();
    assert!(ran.is_empty(), "the repository ran code: {ran:?}");
}
