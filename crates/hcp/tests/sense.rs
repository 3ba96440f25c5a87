//! `hcp sense PACK [REF]` through the built `hcp` (RUNTIME §8): the gate, the relay of a
//! trigger's JSON lines, recorded stimuli, and stopping (signal, closed stdout, `--count`,
//! the trigger's end). The full mail flow is in `bindings.rs`.
//!
//! Never sleeps to synchronise: waits are bounded reads of lines the child prints.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::World;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const BOUND: Duration = Duration::from_secs(60);

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

macro_rules! snapshot {
    ($w:expr, $name:expr, $out:expr) => {
        insta::with_settings!({filters => vec![
            (r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", "[TS]"),
        ]}, {
            insta::assert_snapshot!($name, $w.render($out));
        });
    };
}

fn mail_world() -> World {
    common::example_bins();
    let w = World::new();
    let o = w.run(&[
        "install",
        common::gold_pack("mail").to_str().unwrap(),
        "--activate",
    ]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    w.grant_mail_root();
    w
}

fn session(w: &World, principal: &str) -> String {
    let o = w.run(&["session", "start", "--principal", principal]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    String::from_utf8(o.stdout).unwrap().trim().to_owned()
}

fn run_as(w: &World, token: &str, args: &[&str]) -> Output {
    w.hcp()
        .env("HCP_SESSION", token)
        .args(args)
        .output()
        .unwrap()
}

/// A pack whose triggers print what tests put in the working directory
/// (`probe read FILE`) or exit with a status (`probe exit N`).
fn trigger_pack(w: &World) {
    let dir = w.root().join("src").join("feed");
    std::fs::create_dir_all(&dir).unwrap();
    let surface = json!({
        "id": "feed", "name": "Feed", "kind": "wrap", "cliBin": "probe",
        "binding": {"mode": "public"},
        "wrap": {"bin": "hcp-example-probe"},
        "verbs": {"where": {"description": "Where it runs.", "cli": ["probe", "cwd"]}},
        "stimulusTriggers": [
            {"ref": "lines", "cli": ["probe", "read", "events.txt"]},
            {"ref": "fails", "cli": ["probe", "exit", "3"]},
            {"ref": "here", "cli": ["probe", "cwd"]},
        ]
    });
    let read = json!({"operation": "read", "privacy": {"land": "personal"}});
    let policy = json!({
        "surface_id": "feed", "version": 1,
        "verbs": {"where": read},
        "stimuli": {"lines": read, "fails": read,
                    "here": {"operation": "read", "privacy": {"land": "local"}}}
    });
    std::fs::write(dir.join("surface.json"), surface.to_string()).unwrap();
    std::fs::write(dir.join("policy.json"), policy.to_string()).unwrap();
    std::fs::write(
        dir.join("HARNESS.md"),
        "# Feed\n\nA test pack.\n\n## Hot path\n\n| Command | CLI |\n|---|---|\n| `where` | `probe cwd` |\n\n## Anti-patterns\n\n- None\n",
    )
    .unwrap();
    let o = w.run(&["install", dir.to_str().unwrap(), "--activate"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
}

fn lines_of(r: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(r).lines() {
            let Ok(l) = l else { break };
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    rx
}

fn spawn_sense(w: &World, args: &[&str]) -> Child {
    Command::new(common::hcp_bin())
        .env_clear()
        .env("HOME", &w.home)
        .env("HCP_HOME", &w.hcp_home)
        .env("PATH", w.path_var())
        .env("LANG", "C")
        .current_dir(&w.work)
        .arg("sense")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn wait_line(rx: &mpsc::Receiver<String>, what: &str) {
    loop {
        let l = rx
            .recv_timeout(BOUND)
            .unwrap_or_else(|_| panic!("no line with `{what}`"));
        if l.contains(what) {
            return;
        }
    }
}

/// `child.wait()`, bounded.
fn wait_bounded(mut child: Child) -> ExitStatus {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait().unwrap());
    });
    rx.recv_timeout(BOUND).expect("the child did not stop")
}

/// Live processes whose argv holds `word` and whose `HOME` is this world's.
fn live_watchers(w: &World) -> Vec<PathBuf> {
    let want = format!("HOME={}", w.home.display());
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let (Ok(env), Ok(cmd), Ok(stat)) = (
            std::fs::read(e.path().join("environ")),
            std::fs::read(e.path().join("cmdline")),
            std::fs::read_to_string(e.path().join("stat")),
        ) else {
            continue;
        };
        let zombie = stat
            .rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z'));
        if !zombie
            && env.split(|b| *b == 0).any(|v| v == want.as_bytes())
            && cmd.split(|b| *b == 0).any(|v| v == b"watch")
        {
            out.push(e.path());
        }
    }
    out
}

#[test]
fn sense_is_gated() {
    let w = mail_world();
    let t = session(&w, "agent");
    // no sense.enable
    let o = w.run(&["grant", "agent", "mail", "verb.exec.read", "pack.connect"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let o = run_as(&w, &t, &["sense", "mail", "new_item"]);
    snapshot!(w, "sense_without_grant", &o);
    // unknown ref, unknown pack, a pack without stimuli, a bad session, an inactive pack
    let o = w.run(&["sense", "mail", "nope"]);
    snapshot!(w, "sense_unknown_ref", &o);
    let o = w.run(&["sense", "nosuch"]);
    assert_eq!(code(&o), 66, "{}", w.render(&o));
    let o = w.run(&[
        "install",
        common::gold_pack("transit").to_str().unwrap(),
        "--activate",
    ]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let o = w.run(&["sense", "transit"]);
    assert_eq!(code(&o), 66, "{}", w.render(&o));
    assert!(text(&o).contains("unknown_stimulus"));
    let o = run_as(&w, "hcps_bad", &["sense", "mail", "new_item"]);
    assert_eq!(code(&o), 77, "{}", w.render(&o));
    assert!(text(&o).contains("bad_session"));
    let o = w.run(&["deactivate", "mail"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let o = w.run(&["sense", "mail", "new_item"]);
    assert_eq!(code(&o), 66, "{}", w.render(&o));
    assert!(text(&o).contains("pack_inactive"));
    // refusals are audited, the target's too (`unknown_stimulus`, `not_installed`,
    // `pack_inactive`), as exec's are
    let audit = std::fs::read_to_string(w.hcp_home.join("audit/audit.jsonl")).unwrap();
    let sense: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["face"] == "sense")
        .collect();
    assert_eq!(
        sense
            .iter()
            .map(|r| (r["principal"].clone(), r["code"].clone()))
            .collect::<Vec<_>>(),
        vec![
            (json!("agent"), json!("missing_grant")),
            (json!("owner"), json!("unknown_stimulus")),
            (json!("owner"), json!("not_installed")),
            (json!("owner"), json!("unknown_stimulus")),
            (json!("unknown"), json!("bad_session")),
            (json!("owner"), json!("pack_inactive")),
        ]
    );
    let pack_of = |code: &str| {
        sense
            .iter()
            .find(|r| r["code"] == code)
            .map(|r| (r["pack_id"].clone(), r["verb_key"].clone()))
    };
    assert_eq!(
        pack_of("not_installed"),
        Some((json!("nosuch"), json!("*")))
    );
    assert_eq!(
        pack_of("pack_inactive"),
        Some((json!("mail"), json!("new_item")))
    );
}

#[test]
fn a_stimulus_policy_edited_after_install_is_refused() {
    common::example_bins();
    let w = World::new();
    trigger_pack(&w);
    // edit the installed policy: the read becomes a write (lint forbids it at install)
    let installed = w.hcp_home.join("packs/feed/policy.json");
    let p = std::fs::read_to_string(&installed).unwrap();
    let mut v: Value = serde_json::from_str(&p).unwrap();
    v["stimuli"]["lines"]["operation"] = json!("write");
    std::fs::write(&installed, v.to_string()).unwrap();
    let o = w.run(&["sense", "feed", "lines"]);
    // the install record's digest no longer matches: refused before anything runs
    assert_ne!(code(&o), 0, "{}", w.render(&o));
    assert!(o.stdout.is_empty());
}

#[test]
fn relays_json_lines_and_drops_the_rest() {
    common::example_bins();
    let w = World::new();
    trigger_pack(&w);
    std::fs::write(
        events_file(&w),
        "{\"a\": 1}\nnot json at all\n[1, 2]\n\n   \n{\"b\": \"x\"}",
    )
    .unwrap();
    let o = w.run(&["sense", "feed", "lines"]);
    snapshot!(w, "sense_lines", &o);
    let events: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        events,
        vec![
            json!({"pack_id": "feed", "ref": "lines", "event": {"a": 1}}),
            json!({"pack_id": "feed", "ref": "lines", "event": [1, 2]}),
            json!({"pack_id": "feed", "ref": "lines", "event": {"b": "x"}}),
        ]
    );
    // --count stops early
    let o = w.run(&["sense", "feed", "lines", "--count", "1"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), 1);
    // a trigger that fails: its status, and a note
    let o = w.run(&["sense", "feed", "fails"]);
    snapshot!(w, "sense_trigger_fails", &o);
    // a `local` trigger runs confined like a `local` verb, in its sandbox (RUNTIME §5)
    let o = w.run(&["sense", "feed", "here"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v,
        json!({"pack_id": "feed", "ref": "here", "event": {"cwd": w.work.display().to_string()}})
    );
    // …and the sense's intent says how each trigger was confined (its outcome follows)
    let tail = w.run(&["audit", "tail", "-n", "2", "--json"]);
    let tail = String::from_utf8_lossy(&tail.stdout).into_owned();
    let rec: Value = tail
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .flat_map(|v| match v {
            Value::Array(a) => a,
            v => vec![v],
        })
        .find(|r| r["kind"] == "intent")
        .unwrap_or_else(|| panic!("no intent in {tail}"));
    assert_eq!(
        rec["sandbox"]["here"]["filesystem"],
        json!("enforced"),
        "{rec}"
    );
}

/// Where the `lines` trigger (`personal` land, run by the owner) reads `events.txt`: the
/// owner's tenant home of the pack, its working directory (RUNTIME §5.2).
fn events_file(w: &World) -> std::path::PathBuf {
    let home = w.hcp_home.join("homes/feed/principal/owner");
    std::fs::create_dir_all(&home).unwrap();
    home.join("events.txt")
}

/// The records of the trail.
fn audit_records(w: &World) -> Vec<Value> {
    std::fs::read_to_string(w.hcp_home.join("audit/audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_sense_is_an_intent_then_an_outcome_with_its_events() {
    common::example_bins();
    let w = World::new();
    trigger_pack(&w);
    std::fs::write(events_file(&w), "{\"a\": 1}\nnot json\n[2]\n").unwrap();
    let before = audit_records(&w).len();
    let o = w.run(&["sense", "feed", "lines"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let o2 = w.run(&["sense", "feed", "fails"]);
    assert_eq!(code(&o2), 3, "{}", w.render(&o2));
    let recs = audit_records(&w);
    let recs = &recs[before..];
    assert_eq!(recs.len(), 4, "{recs:#?}");
    // each sense: its intent (durable before a trigger starts), then its outcome
    for (pair, events, exit, stdout) in
        [(&recs[0..2], 2, 0, o.stdout.len()), (&recs[2..4], 0, 3, 0)]
    {
        let (intent, outcome) = (&pair[0], &pair[1]);
        assert_eq!(
            (&intent["kind"], &intent["decision"], &intent["face"]),
            (&json!("intent"), &json!("allow"), &json!("sense")),
            "{intent}"
        );
        assert_eq!(intent["pack_id"], "feed");
        assert_eq!(outcome["kind"], "outcome", "{outcome}");
        assert_eq!(
            outcome["intent"], intent["id"],
            "the outcome names its intent"
        );
        assert_eq!(outcome["events"], events, "{outcome}");
        assert_eq!(outcome["exit_code"], exit, "{outcome}");
        assert_eq!(outcome["stdout_bytes"], stdout as u64, "{outcome}");
        assert_eq!(outcome["truncated"], false, "{outcome}");
    }
    let o = w.run(&["audit", "verify"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
}

#[test]
fn stops_when_its_reader_goes_away_or_on_sigint() {
    let w = mail_world();
    let o = w.run(&["connect", "mail"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));

    // the harness closes our stdout: sense ends the watcher and exits 0
    let mut child = spawn_sense(&w, &["mail", "new_item"]);
    let err = lines_of(child.stderr.take().unwrap());
    wait_line(&err, "watching the inbox of owner");
    drop(child.stdout.take());
    // a message makes the watcher print, in case the closed pipe was not noticed yet
    let o = Command::new(common::bin_dir().join("hcp-example-mail"))
        .env("HOME", &w.home)
        .args([
            "deliver",
            "--to",
            "owner",
            "--from",
            "x",
            "--subject",
            "s",
            "--body",
            "b",
        ])
        .output()
        .unwrap();
    assert!(o.status.success());
    assert_eq!(wait_bounded(child).code(), Some(0));
    assert_eq!(live_watchers(&w), Vec::<PathBuf>::new());

    // SIGINT
    let mut child = spawn_sense(&w, &["mail", "new_item"]);
    let err = lines_of(child.stderr.take().unwrap());
    let _out = child.stdout.take();
    wait_line(&err, "watching the inbox of owner");
    let k = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(k.success());
    assert_eq!(wait_bounded(child).code(), Some(0));
    assert_eq!(live_watchers(&w), Vec::<PathBuf>::new());
}

#[test]
fn without_a_binding_all_stimuli_still_deliver_binding_degraded() {
    let w = mail_world();
    // no connect: the watcher cannot run, the degraded stimulus is recorded and relayed
    let o = w.run(&["sense", "mail", "--count", "1"]);
    snapshot!(w, "sense_all_unbound", &o);
    // delivered once: it is not pending any more
    let pending = hcp_store::stimulus::pending(
        &hcp_store::Home::open(&w.hcp_home).unwrap(),
        "owner",
        "mail",
        None,
    )
    .unwrap();
    assert_eq!(pending, vec![]);
    // asked for by name, the trigger refuses instead
    let o = w.run(&["sense", "mail", "new_item"]);
    snapshot!(w, "sense_new_item_unbound", &o);
}
