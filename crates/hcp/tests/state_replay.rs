//! A state file's MAC binds it to its name, the state ledger (`state/ledger.json`) binds
//! it to time (RUNTIME §4 "Fault isolation", §6; docs/DESIGN.md, "The state ledger"): a
//! copy of a grant file saved before `hcp revoke` and put back after it, a session file
//! put back after `hcp session end`, an activation marker put back after
//! `hcp deactivate` — each holds its MAC, and each is refused for its principal, session
//! or pack alone (`store_damaged`, naming the file), listed by `hcp doctor` with its
//! repair, while everybody else's calls go on. A ledger put back with the files it
//! vouched for is older than the trail's anchor says: no principal's call and no act
//! believes it until the owner writes it anew (`hcp state reledger`). A store of an earlier
//! version gains its ledger at its first call, with a `migrate` record.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::{code, view_or_skip};
#[path = "exec_common/mod.rs"]
mod exec_common;

use common::World;
use exec_common::{exec_json_env, grant, session, world};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::path::PathBuf;

/// The owner's `echo.say` with a ledger that cannot be believed: refused, the pack's
/// install record with it (an older pack directory put back with the ledger removed is
/// never run), the hint naming the ledger's repair.
fn owner_refused_until_reledgered(w: &World) {
    let (o, v) = exec_json_env(w, &["echo.say", "hi"], &[]);
    assert_eq!(outcome(&o, &v), "74 store_damaged", "{v}");
    assert!(
        v["hint"]
            .as_str()
            .unwrap_or("")
            .contains("hcp state reledger"),
        "{v}"
    );
}

fn outcome(o: &std::process::Output, v: &Value) -> String {
    match v["code"].as_str() {
        Some(c) => format!("{} {c}", code(o)),
        None => format!("{} ok", code(o)),
    }
}

/// The session file of `token`.
fn session_file(w: &World, token: &str) -> PathBuf {
    w.hcp_home
        .join("state/sessions")
        .join(format!("{}.json", hcp_store::session::token_digest(token)))
}

/// `hcp doctor`'s lines that name a damaged record.
fn doctor_damage(w: &World) -> (i32, Vec<String>) {
    let o = w.run(&["doctor"]);
    let text = w.filter(&String::from_utf8_lossy(&o.stdout));
    let lines = text
        .lines()
        .filter(|l| l.contains("damaged "))
        .map(str::to_owned)
        .collect();
    (code(&o), lines)
}

/// Each replay in turn, on a store where `agent-1` and `agent-2` each hold a session and
/// `verb.exec.read` on `echo` and `probe`: a copy saved before the act that took the
/// authority away, put back after it. Then the owner's calls, `agent-2`'s and
/// `agent-1`'s, and `hcp doctor` (snapshot); the repair doctor names makes the store
/// whole.
#[test]
fn a_copy_put_back_after_its_act_refuses_its_principal_or_pack_alone() {
    if !view_or_skip() {
        return;
    }
    for kind in [
        "grant_put_back_after_revoke",
        "session_put_back_after_end",
        "activation_put_back_after_deactivate",
    ] {
        let w = world(&["echo", "probe"]);
        let victim = session(&w, "agent-1", &[]);
        let other = session(&w, "agent-2", &[]);
        for p in ["agent-1", "agent-2"] {
            grant(&w, p, "echo", &["verb.exec.read"]);
            grant(&w, p, "probe", &["verb.exec.read"]);
        }
        let grants = w.hcp_home.join("state/grants/agent-1.json");
        let sess = session_file(&w, &victim);
        let marker = w.hcp_home.join("state/active/probe");
        let digest = sess.file_stem().unwrap().to_str().unwrap().to_owned();
        let (file, act): (&PathBuf, Vec<&str>) = match kind {
            "grant_put_back_after_revoke" => {
                (&grants, vec!["revoke", "agent-1", "echo", "verb.exec.read"])
            }
            "session_put_back_after_end" => (&sess, vec!["session", "end", &victim]),
            _ => (&marker, vec!["deactivate", "probe"]),
        };
        let saved = std::fs::read(file).unwrap();
        let o = w.run(&act);
        assert_eq!(code(&o), 0, "{kind}: {}", w.render(&o));
        std::fs::write(file, &saved).unwrap();
        let mut answers = Vec::new();
        for (who, env) in [
            ("owner", None),
            ("agent-2", Some(other.as_str())),
            ("agent-1", Some(victim.as_str())),
        ] {
            let env: Vec<(&str, &str)> = env.map(|t| ("HCP_SESSION", t)).into_iter().collect();
            for verb in [&["echo.say", "hi"][..], &["probe.big", "3"][..]] {
                let (o, v) = exec_json_env(&w, verb, &env);
                if v["code"] == "store_damaged" {
                    let e = v["error"].as_str().unwrap_or_default();
                    assert!(
                        e.contains(&file.display().to_string()),
                        "{kind}: names no file: {v}"
                    );
                }
                answers.push(format!("{who} {}: {}", verb[0], outcome(&o, &v)));
            }
        }
        let (c, lines) = doctor_damage(&w);
        assert_eq!((c, lines.len()), (1, 1), "{kind}: {lines:?}");
        let shown = format!("{}\n--- doctor\n{}", answers.join("\n"), lines.join("\n"))
            .replace(&digest, "{digest}");
        insta::assert_snapshot!(format!("put_back_{kind}"), shown);
        // The repair doctor names.
        let repair: Vec<&str> = match kind {
            "grant_put_back_after_revoke" => vec!["revoke", "agent-1", "--all"],
            "session_put_back_after_end" => {
                std::fs::remove_file(&sess).unwrap();
                vec![]
            }
            _ => vec!["deactivate", "probe"],
        };
        if !repair.is_empty() {
            let o = w.run(&repair);
            assert_eq!(code(&o), 0, "{kind}: {}", w.render(&o));
        }
        let (c, lines) = doctor_damage(&w);
        assert!(
            lines.is_empty(),
            "{kind}: after the repair ({c}): {lines:?}"
        );
        let (o, v) = exec_json_env(&w, &["echo.say", "hi"], &[("HCP_SESSION", &other)]);
        assert_eq!(code(&o), 0, "{kind}: after the repair: {v}");
    }
}

/// Grant, revoke, grant again; start, end, start a session; deactivate and activate:
/// every act leaves a ledger that vouches for what it wrote, and doctor finds nothing.
#[test]
fn a_normal_cycle_of_acts_is_vouched_for() {
    if !view_or_skip() {
        return;
    }
    let w = world(&["echo"]);
    grant(&w, "agent-1", "echo", &["verb.exec.read"]);
    let o = w.run(&["revoke", "agent-1", "echo", "verb.exec.read"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    grant(&w, "agent-1", "echo", &["verb.exec.read"]);
    let first = session(&w, "agent-1", &[]);
    let o = w.run(&["session", "end", &first]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let token = session(&w, "agent-1", &[]);
    for act in [&["deactivate", "echo"][..], &["activate", "echo"][..]] {
        let o = w.run(act);
        assert_eq!(code(&o), 0, "{}", w.render(&o));
    }
    let (o, v) = exec_json_env(&w, &["echo.say", "hi"], &[("HCP_SESSION", &token)]);
    assert_eq!(code(&o), 0, "{v}");
    let (o, v) = exec_json_env(&w, &["echo.say", "hi"], &[("HCP_SESSION", &first)]);
    assert_eq!(v["code"], json!("bad_session"), "{}", w.render(&o));
    let (_, lines) = doctor_damage(&w);
    assert!(lines.is_empty(), "{lines:?}");
    // Each act that wrote the ledger names the generation it left in its completion.
    let ledger: Value =
        serde_json::from_slice(&std::fs::read(w.hcp_home.join("state/ledger.json")).unwrap())
            .unwrap();
    let o = w.run(&["audit", "tail", "--json", "-n", "4"]);
    let tail: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap();
    let last_made = tail.iter().rev().find(|r| r["act"] == "act made").unwrap();
    assert_eq!(
        last_made["changed"]["ledger"], ledger["generation"],
        "{last_made}"
    );
}

/// The ledger put back together with the grant file it vouched for, after a revoke (a
/// store's `state/` copied back from a backup, its trail left as it is): the trail's
/// anchor names the revoke's later ledger, so the first read of the ledger finds it
/// older. The revived grant runs nothing: every principal's call is refused
/// `store_damaged` naming the ledger, the owner's calls go on, an act that would write a
/// state file is refused before it writes, `hcp doctor` names the ledger and its repair,
/// and `hcp state reledger` lists each file it adopts, the revived one first among
/// those to check; then the owner's revoke takes again.
#[test]
fn a_ledger_put_back_with_its_files_refuses_every_principal_until_reledgered() {
    if !view_or_skip() {
        return;
    }
    let w = world(&["echo"]);
    let token = session(&w, "agent-1", &[]);
    grant(&w, "agent-1", "echo", &["verb.exec.read"]);
    let grants = w.hcp_home.join("state/grants/agent-1.json");
    let ledger = w.hcp_home.join("state/ledger.json");
    let saved = (
        std::fs::read(&grants).unwrap(),
        std::fs::read(&ledger).unwrap(),
    );
    let o = w.run(&["revoke", "agent-1", "echo", "verb.exec.read"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let (o, v) = exec_json_env(&w, &["echo.say", "hi"], &[("HCP_SESSION", &token)]);
    assert_eq!(outcome(&o, &v), "77 missing_grant", "{v}");
    std::fs::write(&grants, &saved.0).unwrap();
    std::fs::write(&ledger, &saved.1).unwrap();

    let (o, v) = exec_json_env(&w, &["echo.say", "hi"], &[("HCP_SESSION", &token)]);
    assert_eq!(outcome(&o, &v), "74 store_damaged", "{v}");
    assert!(
        v.to_string().contains("older than") && v.to_string().contains("state/ledger.json"),
        "{v}"
    );
    owner_refused_until_reledgered(&w);
    let before = std::fs::read(&ledger).unwrap();
    let o = w.run(&["grant", "agent-2", "echo", "verb.exec.read"]);
    assert_eq!(code(&o), 74, "{}", w.render(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("older than"),
        "{}",
        w.render(&o)
    );
    assert!(!w.hcp_home.join("state/grants/agent-2.json").exists());
    assert_eq!(std::fs::read(&ledger).unwrap(), before, "nothing written");
    let (c, lines) = doctor_damage(&w);
    assert_eq!(c, 1, "{lines:?}");
    assert!(
        lines.iter().any(|l| l.contains("damaged ledger")
            && l.contains("older than")
            && l.contains("state/ledger.json")
            && l.contains("repair: `hcp state reledger`")),
        "{lines:?}"
    );

    let o = w.run(&["state", "reledger"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(
        said.contains("adopted state/grants/agent-1.json  (the ledger it replaces did not vouch for it as it is)")
            && said.contains("hcp revoke"),
        "{said}"
    );
    let o = w.run(&["revoke", "agent-1", "--all"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let (o, v) = exec_json_env(&w, &["echo.say", "hi"], &[("HCP_SESSION", &token)]);
    assert_eq!(outcome(&o, &v), "77 missing_grant", "{v}");
    let (c, lines) = doctor_damage(&w);
    assert_eq!((c, lines.len()), (0, 0), "{lines:?}");
    let o = w.run(&["audit", "verify"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
}

/// The same with the anchor put back too (it is a file of its own beside the trail):
/// the anchor then lags the trail, and the `act made` records after its point still name
/// the revoke's ledger, so the revived grant runs nothing.
#[test]
fn a_ledger_put_back_with_an_older_anchor_is_found_by_the_records_after_it() {
    if !view_or_skip() {
        return;
    }
    let w = world(&["echo"]);
    let token = session(&w, "agent-1", &[]);
    grant(&w, "agent-1", "echo", &["verb.exec.read"]);
    let files = [
        w.hcp_home.join("state/grants/agent-1.json"),
        w.hcp_home.join("state/ledger.json"),
        w.hcp_home.join("audit/audit.anchor"),
    ];
    let saved: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
    let o = w.run(&["revoke", "agent-1", "echo", "verb.exec.read"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    for (f, b) in files.iter().zip(&saved) {
        std::fs::write(f, b).unwrap();
    }
    // Each call appends records and moves the anchor past the lag: the ledger it names
    // stays carried, so the second call and the ones after it find the ledger older too.
    for _ in 0..3 {
        let (o, v) = exec_json_env(&w, &["echo.say", "hi"], &[("HCP_SESSION", &token)]);
        assert_eq!(outcome(&o, &v), "74 store_damaged", "{v}");
        assert!(v.to_string().contains("older than"), "{v}");
        owner_refused_until_reledgered(&w);
    }
}

/// A store of an earlier version (no ledger, no word of one on its trail) reads its files
/// as they are, and its first call writes the ledger of what is there under the store
/// lock with a `migrate` record, once; from then on a ledger removed is damage, and a
/// copy put back after a revoke is refused.
#[test]
fn a_store_of_an_earlier_version_gains_its_ledger_at_its_first_call_once() {
    if !view_or_skip() {
        return;
    }
    let w = world(&["echo"]);
    let token = session(&w, "agent-1", &[]);
    grant(&w, "agent-1", "echo", &["verb.exec.read"]);
    let ledger = w.hcp_home.join("state/ledger.json");
    std::fs::remove_file(&ledger).unwrap();
    let _ = std::fs::remove_file(w.hcp_home.join("state/authority-files.json"));
    let log = w.hcp_home.join("audit/audit.jsonl");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("\"state_ledger\":2"),
        "the init record says so"
    );
    // As an earlier version wrote the trail (a test technique: the chain no longer
    // verifies, which nothing here reads); the same length, so it meets its anchor. The
    // acts' completions name no ledger either.
    let text = text
        .replace("\"state_ledger\":2,", "\"xtate_ledger\":2,")
        .replace("\"ledger\":", "\"xedger\":");
    std::fs::write(&log, text).unwrap();
    let (o, v) = exec_json_env(&w, &["echo.say", "hi"], &[("HCP_SESSION", &token)]);
    assert_eq!(code(&o), 0, "{v}");
    let l: Value = serde_json::from_slice(&std::fs::read(&ledger).unwrap()).unwrap();
    // The session, the grant, the activation, the keyed record of the watched files and
    // the install record.
    assert_eq!(l["files"].as_object().unwrap().len(), 5, "{l}");
    let o = w.run(&["audit", "tail", "--json", "-n", "20"]);
    let migrates: Vec<Value> = serde_json::from_slice::<Vec<Value>>(&o.stdout)
        .unwrap()
        .into_iter()
        .filter(|r| r["act"] == "migrate")
        .collect();
    assert_eq!(migrates.len(), 1, "{migrates:?}");
    let mut changed = migrates[0]["changed"].clone();
    // The generation the migration left (the anchor carries it).
    assert!(changed["ledger"].is_u64(), "{changed}");
    changed.as_object_mut().unwrap().remove("ledger");
    assert_eq!(
        changed,
        json!({"state_ledger": 2, "ledger_entries": {
            "files": 3, "used": 0, "active": 1, "records": 1, "bindings": 0
        }})
    );
    // A second call writes nothing again.
    let before = std::fs::read(&ledger).unwrap();
    let (o, _) = exec_json_env(&w, &["echo.say", "hi"], &[("HCP_SESSION", &token)]);
    assert_eq!(code(&o), 0);
    assert_eq!(std::fs::read(&ledger).unwrap(), before);
    // A copy put back after a revoke: refused.
    let grants = w.hcp_home.join("state/grants/agent-1.json");
    let saved = std::fs::read(&grants).unwrap();
    let o = w.run(&["revoke", "agent-1", "echo", "verb.exec.read"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    std::fs::write(&grants, &saved).unwrap();
    let (o, v) = exec_json_env(&w, &["echo.say", "hi"], &[("HCP_SESSION", &token)]);
    assert_eq!((code(&o), &v["code"]), (74, &json!("store_damaged")), "{v}");
    // The ledger removed, and the cache of the answer too: damage, not a new migration.
    std::fs::remove_file(&ledger).unwrap();
    std::fs::remove_file(w.hcp_home.join("state/authority-files.json")).unwrap();
    let o = w.run(&["revoke", "agent-1", "--all"]);
    assert_ne!(code(&o), 0, "{}", w.render(&o));
    let (o, v) = exec_json_env(&w, &["echo.say", "hi"], &[("HCP_SESSION", &token)]);
    assert_eq!((code(&o), &v["code"]), (74, &json!("store_damaged")), "{v}");
    assert!(v["error"].as_str().unwrap().contains("ledger"), "{v}");
    // The owner's calls go on (one damaged file never stops them): the owner holds the
    // authority an activation marker stands for. Doctor names the ledger and its repair,
    // which the owner makes once the files hold only what should be there.
    owner_refused_until_reledgered(&w);
    let (c, lines) = doctor_damage(&w);
    assert_eq!(c, 1);
    assert!(
        lines
            .iter()
            .any(|l| l.contains("damaged ledger") && l.contains("hcp state reledger")),
        "{lines:?}"
    );
    std::fs::remove_file(&grants).unwrap();
    let o = w.run(&["state", "reledger"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let (o, v) = exec_json_env(&w, &["echo.say", "hi"], &[]);
    assert_eq!(code(&o), 0, "{v}");
    let (_, lines) = doctor_damage(&w);
    assert!(lines.is_empty(), "{lines:?}");
    let o = w.run(&["audit", "tail", "--json", "-n", "40"]);
    let migrates = serde_json::from_slice::<Vec<Value>>(&o.stdout)
        .unwrap()
        .into_iter()
        .filter(|r| r["act"] == "migrate")
        .count();
    assert_eq!(migrates, 1, "no second migration");
}

/// Copies the directory `from` to `to` (files and directories only).
fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let p = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &p);
        } else {
            std::fs::copy(e.path(), &p).unwrap();
        }
    }
}

/// The owner's `mail.list` and `echo.say`, as `CODE outcome` lines.
fn owner_calls(w: &World) -> Vec<String> {
    [&["mail.list"][..], &["echo.say", "hi"][..]]
        .iter()
        .map(|verb| {
            let (o, v) = exec_json_env(w, verb, &[]);
            format!("{}: {}", verb[0], outcome(&o, &v))
        })
        .collect()
}

/// A binding saved before `hcp disconnect` and put back after it, and a pack's directory
/// saved before `hcp install --force` of a newer version and put back after it: each
/// holds its MAC, and the state ledger lists both (its version 2), so each is refused
/// alone — that principal's binding, that pack — with `store_damaged` naming the file;
/// `hcp doctor` lists it with its repair, and the repair makes the store whole.
#[test]
fn a_binding_or_a_pack_put_back_after_its_act_is_refused_alone() {
    if !view_or_skip() {
        return;
    }
    let w = world(&["mail", "echo"]);
    exec_common::store_binding(&w, "owner", "mail", "owner-token");
    assert_eq!(owner_calls(&w), ["mail.list: 0 ok", "echo.say: 0 ok"]);

    // The binding, put back after the owner's disconnect.
    let binding = w.hcp_home.join("state/bindings/owner/mail.json");
    let saved = std::fs::read(&binding).unwrap();
    let o = w.run(&["disconnect", "mail"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    assert_eq!(
        owner_calls(&w),
        ["mail.list: 77 binding_required", "echo.say: 0 ok"]
    );
    std::fs::write(&binding, &saved).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&binding, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (_, v) = exec_json_env(&w, &["mail.list"], &[]);
    assert_eq!(v["code"], json!("store_damaged"), "{v}");
    let e = v["error"].as_str().unwrap();
    assert!(e.contains(&binding.display().to_string()), "{v}");
    assert!(e.contains("removed by hcp and put back"), "{v}");
    assert!(!v.to_string().contains("owner-token"), "{v}");
    assert_eq!(
        owner_calls(&w),
        ["mail.list: 74 store_damaged", "echo.say: 0 ok"]
    );
    let (c, lines) = doctor_damage(&w);
    assert_eq!((c, lines.len()), (1, 1), "{lines:?}");
    assert!(lines[0].contains("binding"), "{lines:?}");
    std::fs::remove_file(&binding).unwrap();
    assert!(doctor_damage(&w).1.is_empty());
    assert_eq!(
        owner_calls(&w),
        ["mail.list: 77 binding_required", "echo.say: 0 ok"]
    );

    // The pack's directory, put back after a newer version was installed over it.
    let dir = w.hcp_home.join("packs/echo");
    let saved = w.tmp.path().join("echo-saved");
    copy_dir(&dir, &saved);
    let newer = w.tmp.path().join("echo-newer");
    copy_dir(&exec_common::source("echo"), &newer);
    let harness = newer.join("HARNESS.md");
    let text = std::fs::read_to_string(&harness).unwrap();
    std::fs::write(&harness, format!("{text}\nA newer version.\n")).unwrap();
    let src = newer.display().to_string();
    let o = w.run(&["install", "--force", "--activate", &src]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    std::fs::remove_dir_all(&dir).unwrap();
    copy_dir(&saved, &dir);
    let (_, v) = exec_json_env(&w, &["echo.say", "hi"], &[]);
    assert_eq!(v["code"], json!("store_damaged"), "{v}");
    let record = dir.join(".hcp/record.json");
    let e = v["error"].as_str().unwrap();
    assert!(e.contains(&record.display().to_string()), "{v}");
    assert!(e.contains("not the version hcp wrote last"), "{v}");
    assert_eq!(
        owner_calls(&w),
        [
            "mail.list: 77 binding_required",
            "echo.say: 74 store_damaged"
        ]
    );
    let (c, lines) = doctor_damage(&w);
    assert_eq!((c, lines.len()), (1, 1), "{lines:?}");
    assert!(lines[0].contains("install record"), "{lines:?}");
    let o = w.run(&["install", "--force", "--activate", &src]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    assert!(doctor_damage(&w).1.is_empty());
    assert_eq!(
        owner_calls(&w),
        ["mail.list: 77 binding_required", "echo.say: 0 ok"]
    );
}

/// A pack's directory put back from before a reinstall with the ledger removed too: no
/// install record is believed without the ledger, so the older pack is never run, for the
/// owner either; `hcp state reledger` lists the record among the files it adopts without
/// the replaced ledger's word for them, and says it is not what the trail's last install
/// of the pack wrote, so the owner sees what to reinstall.
#[test]
fn an_older_pack_put_back_with_the_ledger_removed_is_never_run() {
    if !view_or_skip() {
        return;
    }
    let w = world(&["echo"]);
    let dir = w.hcp_home.join("packs/echo");
    let saved = w.tmp.path().join("echo-saved");
    copy_dir(&dir, &saved);
    let newer = w.tmp.path().join("echo-newer");
    copy_dir(&exec_common::source("echo"), &newer);
    let harness = newer.join("HARNESS.md");
    let text = std::fs::read_to_string(&harness).unwrap();
    std::fs::write(&harness, format!("{text}\nA newer version.\n")).unwrap();
    let o = w.run(&[
        "install",
        "--force",
        "--activate",
        &newer.display().to_string(),
    ]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    std::fs::remove_dir_all(&dir).unwrap();
    copy_dir(&saved, &dir);
    std::fs::remove_file(w.hcp_home.join("state/ledger.json")).unwrap();
    owner_refused_until_reledgered(&w);
    let (c, lines) = doctor_damage(&w);
    assert_eq!(c, 1);
    assert!(
        lines.iter().any(|l| l.contains("damaged ledger")),
        "{lines:?}"
    );
    let o = w.run(&["state", "reledger"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(
        said.contains("adopted packs/echo/.hcp/record.json  (the ledger it replaces did not vouch for it as it is)")
            && said.contains("1 install records")
            && said.contains("not the files the trail's last install of pack `echo` wrote"),
        "{said}"
    );
}
