//! Acts of authority through the built `hcp` (RUNTIME §6 "Every act of authority is a
//! record too", §8 families; issue 26): each owner command is a record with its actor and
//! what it changed; a changed runtime policy or `config.json` is recorded once; an act
//! whose record cannot be made does not happen, and the store stays exactly as it was.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::code;
mod exec_common;

use common::World;
use exec_common::authority_records;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;

fn ok(w: &World, args: &[&str]) -> std::process::Output {
    let o = w.run(args);
    assert_eq!(code(&o), 0, "{args:?}:\n{}", w.render(&o));
    o
}

fn acts(w: &World) -> Vec<String> {
    authority_records(w)
        .iter()
        .map(|r| r["act"].as_str().unwrap().to_owned())
        .collect()
}

fn uid() -> u32 {
    // SAFETY: getuid cannot fail.
    unsafe { libc::getuid() }
}

/// Every file and directory of `root`, with its bytes (directories as `dir`), by path.
fn tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            let t = e.file_type().unwrap();
            if t.is_dir() {
                out.insert(rel, b"dir".to_vec());
                stack.push(p);
            } else if t.is_symlink() {
                out.insert(
                    rel,
                    std::fs::read_link(&p).unwrap().display().to_string().into(),
                );
            } else {
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

fn write_config(w: &World, v: &Value) {
    std::fs::write(w.hcp_home.join("config.json"), v.to_string()).unwrap();
}

#[test]
fn every_owner_act_is_a_record_with_its_actor_and_what_it_changed() {
    common::example_bins();
    let w = World::with_store();
    let echo = common::gold_pack("echo").display().to_string();
    let mail = common::gold_pack("mail").display().to_string();
    let seed = w.root().join("seed");
    std::fs::create_dir_all(&seed).unwrap();
    std::fs::write(seed.join("rc"), "x").unwrap();
    ok(&w, &["install", &echo]);
    ok(&w, &["install", &mail]);
    ok(&w, &["activate", "echo"]);
    ok(&w, &["deactivate", "echo"]);
    ok(&w, &["grant", "agent", "echo", "verb.exec.read"]);
    ok(&w, &["revoke", "agent", "echo"]);
    let token = exec_common::session(&w, "agent", &["--project", "p1"]);
    ok(&w, &["session", "end", &token]);
    exec_common::session(&w, "agent", &[]);
    ok(&w, &["session", "end", "--principal", "agent"]);
    ok(&w, &["activate", "echo"]);
    ok(&w, &["policy", "lock"]);
    ok(
        &w,
        &[
            "home",
            "mail",
            "--principal",
            "agent",
            "--seed",
            &seed.display().to_string(),
        ],
    );
    ok(&w, &["home", "rm", "mail", "--principal", "agent"]);
    ok(&w, &["uninstall", "echo", "--purge"]);
    // Nothing to change, nothing recorded: an ended session, a home that is not there.
    ok(&w, &["session", "end", &token]);
    ok(&w, &["home", "rm", "mail", "--principal", "agent"]);
    assert_eq!(
        acts(&w),
        [
            "init",
            "install",
            "install",
            "activate",
            "deactivate",
            "grant",
            "revoke",
            "session start",
            "session end",
            "session start",
            "session end",
            "activate",
            "policy lock",
            "home --seed",
            "home rm",
            "uninstall",
        ]
    );
    let recs = authority_records(&w);
    for r in &recs {
        assert_eq!(
            (&r["actor"], &r["uid"]),
            (&json!("owner"), &json!(uid())),
            "{r}"
        );
    }
    let find = |act: &str| recs.iter().find(|r| r["act"] == act).unwrap()["changed"].clone();
    assert_eq!(find("install")["pack_id"], "echo");
    assert!(
        find("install")["files_digest"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    assert_eq!(
        find("grant"),
        json!({"principal": "agent", "pack": "echo", "capabilities": ["verb.exec.read"]})
    );
    assert_eq!(find("revoke")["all"], true);
    let started = find("session start");
    assert_eq!(
        (&started["principal"], &started["projects"]),
        (&json!("agent"), &json!(["p1"]))
    );
    let list: Value =
        serde_json::from_slice(&ok(&w, &["session", "list", "--json"]).stdout).unwrap();
    let id = started["session"].as_str().unwrap();
    assert!(
        list.as_array().unwrap().iter().any(|s| s["id"] == id),
        "{list}"
    );
    assert!(
        !started.to_string().contains(&token),
        "no token in the trail"
    );
    assert_eq!(find("session end")["sessions"], json!([id]));
    assert_eq!(
        find("uninstall"),
        json!({"pack_id": "echo", "was_active": true, "purge": true})
    );
    assert_eq!(find("home --seed")["whose"], json!({"principal": "agent"}));
    let locked = find("policy lock")["tools"].clone();
    assert!(locked.as_array().is_some_and(|t| !t.is_empty()), "{locked}");
    // The trail verifies, and `audit tail` shows each act readably (each followed by
    // its `act made`).
    ok(&w, &["audit", "verify"]);
    let tail = String::from_utf8(ok(&w, &["audit", "tail", "-n", "40"]).stdout).unwrap();
    // Write-ahead: every act but `init` is an intent completed by its `act made`.
    let intents: Vec<u64> = recs
        .iter()
        .filter(|r| r["act"] != "init")
        .map(|r| {
            assert_eq!(r["phase"], "intent", "{r}");
            r["seq"].as_u64().unwrap()
        })
        .collect();
    let made: Vec<u64> = exec_common::act_completions(&w)
        .iter()
        .map(|r| {
            assert_eq!(r["act"], "act made", "{r}");
            r["changed"]["seq"].as_u64().unwrap()
        })
        .collect();
    assert_eq!(intents, made);
    let line = tail.lines().find(|l| l.contains(" grant ")).unwrap();
    assert!(
        line.contains(&format!("act       owner (uid {})  grant", uid()))
            && line.contains("capabilities=[\"verb.exec.read\"] pack=echo principal=agent"),
        "{tail}"
    );
}

#[test]
fn a_changed_runtime_policy_or_config_is_recorded_once_with_its_digest() {
    common::example_bins();
    let w = World::new();
    exec_common::install(&w, &common::gold_pack("echo"));
    let calls = |n: usize| {
        for i in 0..n {
            let o = exec_common::exec(&w, &["echo.say", &format!("{i}")]);
            assert_eq!(code(&o), 0, "{}", w.render(&o));
        }
    };
    let changed = |act: &str| -> Vec<Value> {
        authority_records(&w)
            .into_iter()
            .filter(|r| r["act"] == act)
            .map(|r| r["changed"].clone())
            .collect()
    };
    calls(2);
    assert!(changed("config changed").is_empty());
    let config = json!({"packs": {}}).to_string();
    std::fs::write(w.hcp_home.join("config.json"), &config).unwrap();
    // Calls at once: one of them records it, once.
    let kids: Vec<_> = (0..4)
        .map(|i| {
            std::process::Command::new(common::hcp_bin())
                .env_clear()
                .env("HOME", &w.home)
                .env("HCP_HOME", &w.hcp_home)
                .env("PATH", w.path_var())
                .current_dir(&w.work)
                .args(["exec", "echo.say", &format!("c{i}")])
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut k in kids {
        assert!(k.wait().unwrap().success());
    }
    let digest = |bytes: &[u8]| {
        use sha2::Digest;
        format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)))
    };
    assert_eq!(
        changed("config changed"),
        [json!({"file": "config.json", "digest": digest(config.as_bytes())})]
    );
    // Written again with the same bytes: no change. Other bytes: one more record.
    std::fs::write(w.hcp_home.join("config.json"), &config).unwrap();
    calls(1);
    assert_eq!(changed("config changed").len(), 1);
    std::fs::write(w.hcp_home.join("config.json"), "{}").unwrap();
    calls(2);
    assert_eq!(changed("config changed").len(), 2);
    // A runtime policy appears, then goes.
    let policy = "schema_version: histos.policy/0.1\ntools: {}\n";
    std::fs::write(w.hcp_home.join("policy.yaml"), policy).unwrap();
    calls(2);
    std::fs::remove_file(w.hcp_home.join("policy.yaml")).unwrap();
    calls(1);
    assert_eq!(
        changed("policy changed"),
        [
            json!({"file": "policy.yaml", "digest": digest(policy.as_bytes())}),
            json!({"removed": true, "digest": "absent", "was": {"file": "policy.yaml", "digest": digest(policy.as_bytes())}}),
        ]
    );
    ok(&w, &["audit", "verify"]);
}

/// Runs each of `commands` against a trail that refuses appends: each exits 74 with
/// `code`, and the store is byte for byte as it was.
fn refused_whole(w: &World, commands: &[Vec<String>], code_name: &str) {
    for args in commands {
        let before = tree(&w.hcp_home);
        let o = w.hcp().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(code(&o), 74, "{args:?}:\n{}", w.render(&o));
        assert!(
            err.contains(&format!("code: {code_name}")),
            "{args:?}: {err}"
        );
        let after = tree(&w.hcp_home);
        assert_eq!(
            before.keys().collect::<Vec<_>>(),
            after.keys().collect::<Vec<_>>(),
            "{args:?} changed the store's files"
        );
        for (k, v) in &before {
            assert!(after[k] == *v, "{args:?} changed `{k}`");
        }
    }
}

fn owner_acts(w: &World, seed: &Path) -> Vec<Vec<String>> {
    let mail = common::gold_pack("mail").display().to_string();
    let echo = common::gold_pack("echo").display().to_string();
    [
        vec!["install", &mail],
        vec!["install", "--force", &echo],
        vec!["uninstall", "echo"],
        vec!["uninstall", "echo", "--purge"],
        vec!["deactivate", "echo"],
        vec!["activate", "ledger"],
        vec!["grant", "agent", "echo", "verb.exec.read"],
        vec!["revoke", "bob", "echo"],
        vec!["session", "start", "--principal", "carol"],
        vec!["session", "end", "--principal", "bob"],
        vec!["policy", "lock"],
        vec![
            "home",
            "echo",
            "--principal",
            "bob",
            "--seed",
            &seed.display().to_string(),
        ],
    ]
    .into_iter()
    .map(|a| {
        let _ = w;
        a.into_iter().map(str::to_owned).collect()
    })
    .collect()
}

fn atomic_world() -> (World, std::path::PathBuf) {
    common::example_bins();
    let w = World::with_store();
    exec_common::install(&w, &common::gold_pack("echo"));
    let ledger = common::gold_pack("ledger").display().to_string();
    ok(&w, &["install", &ledger]);
    ok(&w, &["grant", "bob", "echo", "verb.exec.read"]);
    exec_common::session(&w, "bob", &[]);
    // Bob's home for `echo` exists (`hcp home` makes it): seeding it is what is refused.
    ok(&w, &["home", "echo", "--principal", "bob"]);
    let seed = w.root().join("seed");
    std::fs::create_dir_all(&seed).unwrap();
    std::fs::write(seed.join("rc"), "x").unwrap();
    (w, seed)
}

#[test]
fn an_act_whose_record_the_witness_cannot_take_does_not_happen_and_writes_nothing() {
    let (w, seed) = atomic_world();
    write_config(
        &w,
        &json!({"audit": {"witness": w.root().join("no-such-witness")}}),
    );
    refused_whole(&w, &owner_acts(&w, &seed), "witness_unavailable");
    // A witness refuses acts of authority, never calls: the changed `config.json` a call
    // notices is recorded in the trail and the call runs; its checkpoint is left to the
    // next act of authority (or 100th call).
    let before = authority_records(&w).len();
    for _ in 0..2 {
        let o = exec_common::exec(&w, &["echo.say", "hi"]);
        assert_eq!(code(&o), 0, "{}", w.render(&o));
    }
    let noticed = authority_records(&w);
    assert_eq!(noticed.len(), before + 1, "recorded once: {noticed:?}");
    let last = noticed.last().unwrap();
    assert_eq!(last["act"], json!("config changed"));
    assert_eq!(last["changed"]["file"], json!("config.json"));
    assert!(!w.root().join("no-such-witness").exists());
    // Owner commands still refuse while the witness cannot take their checkpoint.
    refused_whole(&w, &owner_acts(&w, &seed)[..1], "witness_unavailable");
}

#[test]
fn an_act_whose_record_a_damaged_trail_refuses_does_not_happen_and_writes_nothing() {
    let (w, seed) = atomic_world();
    // One anchor slot changed now (not a torn write of an earlier boot): tampering.
    let anchor = w.hcp_home.join("audit").join("audit.anchor");
    let mut bytes = std::fs::read(&anchor).unwrap();
    let i = bytes.len() / 4;
    bytes[i] ^= 0x55;
    std::fs::write(&anchor, &bytes).unwrap();
    let o = w.run(&["grant", "agent", "echo", "verb.exec.read"]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    let code_name = err
        .lines()
        .find_map(|l| l.trim().strip_prefix("code: "))
        .unwrap_or_default()
        .to_owned();
    assert_eq!(code(&o), 74, "{}", w.render(&o));
    refused_whole(&w, &owner_acts(&w, &seed), &code_name);
}

fn family_pack(w: &World, from: &str, id: &str, family: Option<&str>) -> std::path::PathBuf {
    let to = w.root().join("packs").join(id);
    std::fs::create_dir_all(&to).unwrap();
    for f in ["surface.json", "policy.json", "HARNESS.md"] {
        std::fs::copy(common::gold_pack(from).join(f), to.join(f)).unwrap();
    }
    let mut s: Value =
        serde_json::from_slice(&std::fs::read(to.join("surface.json")).unwrap()).unwrap();
    s["id"] = json!(id);
    match family {
        Some(f) => s["binding"]["family"] = json!(f),
        None => {
            s["binding"].as_object_mut().unwrap().remove("family");
        }
    }
    std::fs::write(to.join("surface.json"), s.to_string()).unwrap();
    let mut p: Value =
        serde_json::from_slice(&std::fs::read(to.join("policy.json")).unwrap()).unwrap();
    p["surface_id"] = json!(id);
    std::fs::write(to.join("policy.json"), p.to_string()).unwrap();
    to
}

#[test]
fn a_pack_joins_another_packs_family_only_with_the_owners_join_family() {
    common::example_bins();
    let w = World::with_store();
    let mail = family_pack(&w, "mail", "mail", Some("post"));
    let d = mail.display().to_string();
    ok(&w, &["install", "--activate", &d]);
    let hostile = family_pack(&w, "mail", "tasks", Some("post"));
    let h = hostile.display().to_string();
    let before = tree(&w.hcp_home);
    // Bad input: the family of another pack without `--join-family`.
    let o = w.run(&["install", &h]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(code(&o), 1, "{}", w.render(&o));
    assert!(
        err.contains("code: family_claimed")
            && err.contains("`post`")
            && err.contains("`mail`")
            && err.contains("--join-family post"),
        "{err}"
    );
    assert_eq!(
        tree(&w.hcp_home),
        before,
        "a refused install changes nothing"
    );
    // Bad input: `--join-family` naming a family the pack does not declare.
    let o = w.run(&["install", "--join-family", "mail", &h]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(code(&o), 2, "{}", w.render(&o));
    assert!(
        err.contains("code: usage") && err.contains("`post`"),
        "{err}"
    );
    assert_eq!(tree(&w.hcp_home), before);
    // The owner joins it: recorded as such.
    ok(&w, &["install", "--activate", "--join-family", "post", &h]);
    let last = authority_records(&w).pop().unwrap();
    assert_eq!(last["act"], "install --join-family");
    assert_eq!(
        (&last["changed"]["family"], &last["changed"]["joined"]),
        (&json!("post"), &json!(["mail"]))
    );
    // Reinstalls of packs already in the family need nothing.
    ok(&w, &["install", "--force", &d]);
    ok(&w, &["install", "--force", &h]);
    // `show` and the skill say which family a pack shares.
    let show = String::from_utf8(ok(&w, &["show", "tasks"]).stdout).unwrap();
    assert!(
        show.contains("family `post`") && show.contains("`mail`"),
        "{show}"
    );
    let skill = std::fs::read_to_string(w.hcp_home.join("skills/tasks/SKILL.md")).unwrap();
    assert!(skill.contains("binding family `post`"), "{skill}");
    // A pack whose id is another pack's family shares it too.
    let post = family_pack(&w, "mail", "post", None);
    let o = w.run(&["install", &post.display().to_string()]);
    assert_eq!(code(&o), 1, "{}", w.render(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("family_claimed"));
}
