//! `hcp config get` / `set` / `unset` through the built `hcp` (RUNTIME §3 `config.json`,
//! §6 acts of authority; issue 27): dotted keys, strict (an unknown key with the nearest
//! keys, a wrong type naming the expected one, nothing written), the rest kept, owner only,
//! each change a record before it is made.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::code;
mod exec_common;

use common::World;
use exec_common::authority_records;
use serde_json::{Value, json};

fn ok(w: &World, args: &[&str]) -> String {
    let o = w.run(args);
    assert_eq!(code(&o), 0, "{args:?}:\n{}", w.render(&o));
    String::from_utf8(o.stdout).unwrap()
}

fn get(w: &World, key: &str) -> Value {
    serde_json::from_str(&ok(w, &["config", "get", key])).unwrap()
}

fn config_path(w: &World) -> std::path::PathBuf {
    w.hcp_home.join("config.json")
}

fn file(w: &World) -> Option<Vec<u8>> {
    std::fs::read(config_path(w)).ok()
}

fn acts(w: &World) -> Vec<String> {
    authority_records(w)
        .iter()
        .map(|r| r["act"].as_str().unwrap().to_owned())
        .collect()
}

/// Runs `args`, expects the refusal `status` with `code`, and the store's `config.json`
/// and trail exactly as they were.
fn refused(w: &World, args: &[&str], status: i32, want: &str) -> String {
    let (before, trail) = (file(w), acts(w));
    let o = w.run(args);
    let text = w.render(&o);
    assert_eq!(code(&o), status, "{args:?}:\n{text}");
    assert!(text.contains(&format!("code: {want}")), "{text}");
    assert_eq!(file(w), before, "{args:?} wrote config.json");
    assert_eq!(acts(w), trail, "{args:?} recorded an act");
    text
}

#[test]
fn set_get_unset_round_trip_keeping_every_other_key() {
    let w = World::with_store();
    // A hand-written file with its own formatting and a key the edits do not touch.
    std::fs::write(
        config_path(&w),
        "{\n\t\"mcp\" :{ \"approve_by_elicitation\":true },\n  \"resolvers\": {\"mail.search\": \"mail.fetch\"}\n}\n",
    )
    .unwrap();
    assert_eq!(get(&w, "limits.cpu_seconds"), json!(60), "the default");
    ok(&w, &["config", "set", "limits.cpu_seconds", "5"]);
    ok(&w, &["config", "set", "sandbox.network", "host"]);
    ok(
        &w,
        &[
            "config",
            "set",
            "packs.echo.network",
            r#"{"allow": ["api.github.com:443"]}"#,
        ],
    );
    assert_eq!(get(&w, "limits.cpu_seconds"), json!(5));
    assert_eq!(get(&w, "sandbox.network"), json!("host"));
    assert_eq!(get(&w, "resolvers.mail.search"), json!("mail.fetch"));
    let on_disk: Value = serde_json::from_slice(&file(&w).unwrap()).unwrap();
    assert_eq!(
        on_disk,
        json!({
            "mcp": {"approve_by_elicitation": true},
            "resolvers": {"mail.search": "mail.fetch"},
            "limits": {"cpu_seconds": 5},
            "sandbox": {"network": "host"},
            "packs": {"echo": {"network": {"allow": ["api.github.com:443"]}}},
        })
    );
    // The whole effective configuration: every default filled in.
    let all: Value = serde_json::from_str(&ok(&w, &["config", "get"])).unwrap();
    assert_eq!(all["limits"]["cpu_seconds"], json!(5));
    assert_eq!(all["limits"]["open_files"], json!(1024));
    assert_eq!(all["mcp"]["approve_by_elicitation"], json!(true));

    let out = ok(&w, &["config", "unset", "limits.cpu_seconds"]);
    assert!(out.contains("unset `limits.cpu_seconds`"), "{out}");
    assert_eq!(get(&w, "limits.cpu_seconds"), json!(60));
    let on_disk: Value = serde_json::from_slice(&file(&w).unwrap()).unwrap();
    assert!(on_disk.get("limits").is_none(), "{on_disk}");
    assert_eq!(on_disk["mcp"], json!({"approve_by_elicitation": true}));

    // Unsetting a key that is not set changes nothing and records nothing.
    let (before, trail) = (file(&w), acts(&w));
    let out = ok(&w, &["config", "unset", "limits.cpu_seconds"]);
    assert!(out.contains("is not set"), "{out}");
    assert_eq!((file(&w), acts(&w)), (before, trail));
}

#[test]
fn an_unknown_key_is_refused_with_the_nearest_keys_and_nothing_written() {
    let w = World::with_store();
    let text = refused(
        &w,
        &["config", "set", "limits.cpu_second", "5"],
        64,
        "bad_config_key",
    );
    insta::assert_snapshot!("unknown_key", text);
    // Also without a file, and for get and unset.
    assert!(file(&w).is_none());
    let text = refused(&w, &["config", "get", "sandbx"], 64, "bad_config_key");
    assert!(text.contains("`sandbox`"), "{text}");
    let text = refused(
        &w,
        &["config", "unset", "packs.echo.netwrk"],
        64,
        "bad_config_key",
    );
    assert!(text.contains("`packs.echo.network`"), "{text}");
    ok(&w, &["config", "set", "policy_mode", "observe"]);
    refused(&w, &["config", "set", "no_such", "1"], 64, "bad_config_key");
    refused(&w, &["config", "set", "limits.", "1"], 64, "bad_config_key");
}

#[test]
fn a_wrong_type_is_refused_naming_the_expected_type_and_nothing_written() {
    let w = World::with_store();
    ok(&w, &["config", "set", "limits.open_files", "64"]);
    let text = refused(
        &w,
        &["config", "set", "limits.cpu_seconds", "many"],
        64,
        "bad_config_key",
    );
    insta::assert_snapshot!("wrong_type", text);
    // Out of range, a string the key does not take, an object where a value goes.
    refused(
        &w,
        &["config", "set", "limits.cpu_seconds", "0"],
        64,
        "bad_config_key",
    );
    refused(
        &w,
        &["config", "set", "sandbox.network", "allow"],
        64,
        "bad_config_key",
    );
    let text = refused(
        &w,
        &["config", "set", "packs.mail.network", "allow"],
        64,
        "bad_config_key",
    );
    assert!(
        text.contains(
            "hint: `packs.PACK_ID.network` takes `\"deny\"` | `\"host\"` | object; what it accepts and refuses: docs/config.md, \"`packs.PACK_ID.network`\""
        ),
        "{text}"
    );
    refused(
        &w,
        &["config", "set", "sandbox.require", "maybe"],
        64,
        "bad_config_key",
    );
    assert_eq!(get(&w, "limits.open_files"), json!(64));
}

#[test]
fn each_change_is_an_act_of_authority_on_the_trail_before_it_is_made() {
    common::example_bins();
    let w = World::with_store();
    ok(
        &w,
        &["install", &common::gold_pack("echo").display().to_string()],
    );
    ok(&w, &["activate", "echo"]);
    ok(&w, &["config", "set", "limits.cpu_seconds", "7"]);
    // The act's intent, then its `act made`.
    let tail: Value = serde_json::from_str(
        ok(&w, &["audit", "tail", "-n", "2", "--json"])
            .lines()
            .last()
            .unwrap(),
    )
    .unwrap();
    let rec = if tail.is_array() {
        tail[0].clone()
    } else {
        tail
    };
    assert_eq!(rec["act"], json!("config set"), "{rec}");
    assert_eq!(rec["changed"]["key"], json!("limits.cpu_seconds"), "{rec}");
    let digest = rec["changed"]["digest"].as_str().unwrap().to_owned();
    assert_eq!(
        digest,
        format!(
            "sha256:{}",
            hex::encode(<sha2::Sha256 as sha2::Digest>::digest(file(&w).unwrap()))
        )
    );
    // The next call does not record the same change again as `config changed`.
    ok(&w, &["exec", "echo.say", "hi"]);
    ok(&w, &["config", "unset", "limits.cpu_seconds"]);
    ok(&w, &["exec", "echo.say", "hi"]);
    let after: Vec<String> = acts(&w)
        .into_iter()
        .skip_while(|a| a != "config set")
        .collect();
    assert_eq!(after, ["config set", "config unset"], "{after:?}");
    // A hand edit before a set is recorded as such, then the set.
    std::fs::write(config_path(&w), r#"{"policy_mode": "observe"}"#).unwrap();
    ok(&w, &["config", "set", "limits.cpu_seconds", "8"]);
    let last: Vec<String> = acts(&w).into_iter().rev().take(2).collect();
    assert_eq!(last, ["config set", "config changed"], "{last:?}");
    assert_eq!(get(&w, "policy_mode"), json!("observe"));
}

#[test]
fn a_session_principal_is_refused_owner_only() {
    let w = World::with_store();
    let token = ok(&w, &["session", "start", "--principal", "agent"])
        .trim()
        .to_owned();
    ok(&w, &["config", "set", "limits.cpu_seconds", "5"]);
    for args in [
        &["config", "set", "limits.cpu_seconds", "9"][..],
        &["config", "unset", "limits.cpu_seconds"],
        &["config", "get"],
    ] {
        let (before, trail) = (file(&w), acts(&w));
        let o = w
            .hcp()
            .env("HCP_SESSION", &token)
            .args(args)
            .output()
            .unwrap();
        let text = w.render(&o);
        assert_eq!(code(&o), 77, "{args:?}:\n{text}");
        assert!(text.contains("code: owner_only"), "{text}");
        assert_eq!((file(&w), acts(&w)), (before, trail), "{args:?}");
    }
    assert_eq!(get(&w, "limits.cpu_seconds"), json!(5));
}

#[test]
fn a_damaged_config_json_is_named_and_left_as_it_is() {
    let w = World::with_store();
    std::fs::write(config_path(&w), "{\"limits\": {\"cpu_seconds\": 5,,}}\n").unwrap();
    for args in [
        &["config", "set", "limits.cpu_seconds", "9"][..],
        &["config", "unset", "limits.cpu_seconds"],
        &["config", "get", "limits.cpu_seconds"],
    ] {
        let text = refused(&w, args, 78, "bad_config");
        assert!(
            text.contains("config.json") && text.contains("line 1"),
            "{text}"
        );
    }
    // A duplicate key is damage too, never the last one silently.
    std::fs::write(
        config_path(&w),
        r#"{"policy_mode": "observe", "policy_mode": "enforce"}"#,
    )
    .unwrap();
    refused(
        &w,
        &["config", "set", "limits.cpu_seconds", "9"],
        78,
        "bad_config",
    );
}

#[test]
fn a_missing_store_is_no_store() {
    let w = World::new();
    let o = w.run(&["config", "set", "limits.cpu_seconds", "5"]);
    assert_eq!(code(&o), 66, "{}", w.render(&o));
    assert!(!w.hcp_home.exists());
}

fn run_text(w: &World, args: &[&str]) -> (i32, String) {
    let o = w.run(args);
    (code(&o), w.render(&o))
}

#[test]
fn a_state_every_call_would_refuse_is_refused_and_nothing_written() {
    let w = World::with_store();
    let text = refused(
        &w,
        &["config", "set", "state.url", "notaurl"],
        64,
        "bad_config_key",
    );
    assert!(
        text.contains("hint: `state.url` takes string")
            && text.contains("docs/config.md, \"`state.url`\"")
            // The message names both forms a libpq connection string takes.
            && text.contains("`postgresql://USER@HOST/DB`")
            && text.contains("`host=/path/to/socket dbname=DB user=USER`"),
        "{text}"
    );
    // The URL's password is never shown back, in the refusal as anywhere.
    let text = refused(
        &w,
        &[
            "config",
            "set",
            "state.url",
            "postgresql://hcp:sekrit@db.internal/hcp?sslmode=sometimes",
        ],
        64,
        "bad_config_key",
    );
    assert!(
        text.contains("sslmode `sometimes`") && !text.contains("sekrit"),
        "{text}"
    );
    for value in [
        "postgresql://hcp:sekrit@db.internal/hcp",
        r#"{"url": "postgresql://hcp:sekrit@db.internal/hcp", "pool": 1}"#,
    ] {
        let text = refused(&w, &["config", "set", "state", value], 64, "bad_config_key");
        assert!(!text.contains("sekrit"), "{text}");
    }
    refused(
        &w,
        &["config", "set", "state", r#"{"url": "dbname=hcp"}"#],
        64,
        "bad_config_key",
    );
    refused(
        &w,
        &[
            "config",
            "set",
            "state",
            r#"{"url": "host=/s", "schema": "pg_x"}"#,
        ],
        64,
        "bad_config_key",
    );
    assert!(file(&w).is_none());
    // A good one is taken, and shown without its password.
    let out = ok(
        &w,
        &[
            "config",
            "set",
            "state.url",
            "host=/nonexistent/pg dbname=hcp user=hcp password=sekrit",
        ],
    );
    assert!(
        out.contains("password=***") && !out.contains("sekrit"),
        "{out}"
    );
    assert_eq!(
        get(&w, "state"),
        json!({"url": "host=/nonexistent/pg dbname=hcp user=hcp password=***", "schema": "hcp"})
    );
    let all: Value = serde_json::from_str(&ok(&w, &["config", "get"])).unwrap();
    assert_eq!(all["state"]["schema"], json!("hcp"), "{all}");
    assert!(!all.to_string().contains("sekrit"), "{all}");
    assert!(!ok(&w, &["config", "get", "state.url"]).contains("sekrit"));
}

#[test]
fn a_state_that_cannot_be_used_never_locks_out_hcp_config() {
    let w = World::with_store();
    // Written by hand (or by an earlier hcp): every command that needs state refuses,
    // naming the commands that repair it.
    std::fs::write(config_path(&w), r#"{"state": {"url": "notaurl"}}"#).unwrap();
    let (status, text) = run_text(&w, &["session", "list"]);
    assert_eq!(status, 78, "{text}");
    assert!(
        text.contains("code: bad_config") && text.contains("`hcp config unset state`"),
        "{text}"
    );
    assert_eq!(get(&w, "state.url"), json!("(unreadable)"));
    let before = acts(&w).len();
    let (status, text) = run_text(&w, &["config", "unset", "state.url"]);
    assert_eq!(status, 0, "{text}");
    assert!(text.contains("own trail"), "{text}");
    // Recorded in the store's own trail, naming why the fleet's was not used.
    let recs = authority_records(&w);
    let last = recs.last().unwrap();
    assert_eq!(
        (
            &last["act"],
            &last["changed"]["key"],
            &last["changed"]["fleet_state"]
        ),
        (
            &json!("config unset"),
            &json!("state.url"),
            &json!("bad_config")
        ),
        "{last}"
    );
    assert!(acts(&w).len() > before);
    ok(&w, &["session", "list"]);

    // A well-formed URL whose server cannot be reached: the same.
    ok(
        &w,
        &[
            "config",
            "set",
            "state.url",
            "host=/nonexistent/pg dbname=hcp",
        ],
    );
    let (status, text) = run_text(&w, &["session", "list"]);
    assert_eq!(status, 74, "{text}");
    assert!(
        text.contains("code: state_unavailable") && text.contains("hcp config set state.url"),
        "{text}"
    );
    ok(&w, &["config", "set", "limits.cpu_seconds", "5"]);
    ok(&w, &["config", "set", "state.schema", "fleet_2"]);
    assert_eq!(get(&w, "state.schema"), json!("fleet_2"));
    ok(&w, &["config", "unset", "state"]);
    let recs = authority_records(&w);
    let tail: Vec<(Value, Value)> = recs
        .iter()
        .rev()
        .take(3)
        .map(|r| {
            (
                r["changed"]["key"].clone(),
                r["changed"]["fleet_state"].clone(),
            )
        })
        .collect();
    assert_eq!(
        tail,
        [
            (json!("state"), json!("state_unavailable")),
            (json!("state.schema"), json!("state_unavailable")),
            (json!("limits.cpu_seconds"), json!("state_unavailable")),
        ]
    );
    assert_eq!(get(&w, "limits.cpu_seconds"), json!(5));
    assert_eq!(get(&w, "state"), Value::Null);
    ok(&w, &["session", "list"]);
    ok(&w, &["audit", "verify"]);
}

#[test]
fn a_bare_word_for_a_key_that_takes_an_array_is_told_that_value_is_json() {
    let w = World::with_store();
    let text = refused(
        &w,
        &["config", "set", "skills.export", "~/.agents/skills"],
        64,
        "bad_config_key",
    );
    assert!(
        text.contains(r#"VALUE is read as JSON"#)
            && text.contains(r#"`hcp config set skills.export '["~/.agents/skills"]'`"#),
        "{text}"
    );
    let o = w.run(&["config", "set", "--help"]);
    let help = String::from_utf8_lossy(&o.stdout);
    assert!(
        help.contains("read as JSON") && help.contains(r#"'["~/.agents/skills"]'"#),
        "{help}"
    );
    ok(
        &w,
        &["config", "set", "skills.export", r#"["~/.agents/skills"]"#],
    );
    assert_eq!(get(&w, "skills.export"), json!(["~/.agents/skills"]));
}

/// Each key of docs/config.md given a value its key takes but the runtime cannot use
/// (one that passes the type): then `hcp config unset KEY` repairs it, and the commands
/// that need no call go on meanwhile.
#[test]
fn a_bad_value_of_any_key_is_undone_by_config_unset() {
    let w = World::with_store();
    for (key, value) in [
        ("audit.witness", "/nonexistent/witness"),
        ("limits.cgroup", "/nonexistent/cgroup"),
        ("sandbox.homes", "/nonexistent/homes"),
        ("sandbox.read", r#"["/nonexistent/read"]"#),
        ("packs.echo.server", "https://nonexistent.invalid/v1"),
        ("escalation", "approvals"),
        ("policy_mode", "observe"),
        ("state.url", "host=/nonexistent/pg dbname=hcp"),
    ] {
        let (status, text) = run_text(&w, &["config", "set", key, value]);
        if status == 0 {
            let (status, text) = run_text(&w, &["session", "list"]);
            assert!(status == 0 || status == 74, "{key}: {text}");
            let (status, text) = run_text(&w, &["config", "unset", key]);
            assert_eq!(status, 0, "{key}: {text}");
        } else {
            // Refused as a value (64) or as an act its witness cannot take (74).
            assert!(status == 64 || status == 74, "{key}: {text}");
        }
        assert!(file(&w).is_none_or(|f| f == b"{}\n"), "{key}");
        ok(&w, &["session", "list"]);
    }
}
