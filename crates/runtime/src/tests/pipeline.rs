//! One test per step of the pipeline and per refusal it raises.

use super::{World, code, s};
use hcp_model::{ArgValue, Capability};
use pretty_assertions::assert_eq;
use serde_json::json;

#[test]
fn step_9c_a_run_answers_with_the_childs_output_status_and_record() {
    let w = World::new();
    let a = w.say(&w.owner(), "hello world");
    assert_eq!(code(&a), (None, 0));
    assert!(a.result.ok);
    assert_eq!(a.stdout, b"hello world\n");
    let r = w.last_record();
    assert_eq!(
        (
            &r["decision"],
            &r["principal"],
            &r["verb_key"],
            &r["exit_code"]
        ),
        (&json!("allow"), &json!("owner"), &json!("say"), &json!(0))
    );
    assert_eq!(a.result.audit_id.as_deref(), r["id"].as_str());
    // the child's own status passes through
    let a = w.exec(&w.owner(), "tp.exit", &[("status", s("3"))]);
    assert_eq!(code(&a), (None, 3));
    assert_eq!(a.stderr, b"bye\n");
}

#[test]
fn step_9c_timeout_ends_the_call() {
    let w = World::new();
    let call = crate::Call {
        pack_id: Some("tp".into()),
        target: "sleep".into(),
        args: crate::CallArgs::Named(vec![("secs".into(), s("5"))]),
        face: crate::Face::Json,
        timeout: Some(std::time::Duration::from_millis(200)),
    };
    let a = crate::pipeline::run(
        &w.rt,
        &w.owner(),
        crate::pipeline::Subject::Verb(call),
        crate::pipeline::Mode::Exec(None),
    );
    assert_eq!(code(&a), (Some("timeout"), 124));
    assert_eq!(w.last_record()["code"], json!("timeout"));
}

#[test]
fn step_1_unknown_and_ambiguous_targets_and_an_inactive_pack() {
    let w = World::new();
    let a = w.exec(&w.owner(), "tp.sya", &[]);
    assert_eq!(code(&a), (Some("unknown_verb"), 66));
    assert!(a.result.hint.as_deref().unwrap_or("").contains("tp.say"));
    // recorded under the principal the session names
    let agent = w.session("agent-1", None, &[]);
    w.exec(&agent, "nope.nope", &[]);
    let r = w.last_record();
    assert_eq!(
        (&r["principal"], &r["code"], &r["pack_id"]),
        (&json!("agent-1"), &json!("unknown_verb"), &json!(null))
    );
    w.install_pack("tq", "public", &super::TP[..1], false);
    let a = w.exec(&w.owner(), "say", &[("text", s("x"))]);
    assert_eq!(code(&a), (Some("ambiguous_verb"), 66));
    std::fs::remove_file(w.home().root().join("state/active/tq")).unwrap();
    let a = w.exec(&w.owner(), "tq.say", &[("text", s("x"))]);
    assert_eq!(code(&a), (Some("pack_inactive"), 66));
}

#[test]
fn step_2_a_bad_session_is_refused_never_the_owner() {
    let w = World::new();
    let mut bad = w.owner();
    bad.session_token = Some("hcps_garbage".into());
    let a = w.say(&bad, "x");
    assert_eq!(code(&a), (Some("bad_session"), 77));
    let r = w.last_record();
    assert_eq!(
        (&r["principal"], &r["code"]),
        (&json!("unknown"), &json!("bad_session"))
    );
}

#[test]
fn step_3_arguments() {
    let w = World::new();
    let o = w.owner();
    let a = w.exec(&o, "tp.say", &[]);
    assert_eq!(code(&a), (Some("arg_missing"), 65));
    let a = w.exec(&o, "tp.say", &[("text", s("x")), ("other", s("y"))]);
    assert_eq!(code(&a), (Some("arg_unknown"), 65));
    let a = w.exec(&o, "tp.say", &[("text", s("x")), ("tenant_id", s("t"))]);
    assert_eq!(code(&a), (Some("tenant_in_args"), 65));
    let a = w.exec(&o, "tp.say", &[("text", s("-rf"))]);
    assert_eq!(code(&a), (Some("arg_looks_like_flag"), 65));
    // refusals after step 2 carry the digest of the arguments
    assert!(w.last_record()["args_digest"].as_str().is_some());
}

#[test]
fn step_4_grants_and_the_rug_pull_guard() {
    let w = World::new();
    let agent = w.session("agent", None, &[]);
    let a = w.say(&agent, "x");
    assert_eq!(code(&a), (Some("missing_grant"), 77));
    w.grant("agent", "tp", &[Capability::VerbExecRead]);
    assert_eq!(code(&w.say(&agent, "x")), (None, 0));
    // a reinstall that changes the pack's content suspends the grant
    let dir = w.write_pack("tp", "public", super::TP, true);
    std::fs::write(dir.join("HARNESS.md"), "# Changed\n").unwrap();
    w.install_dir(&dir);
    let a = w.say(&agent, "x");
    assert_eq!(code(&a), (Some("missing_grant"), 77));
    assert!(
        a.result
            .error
            .as_deref()
            .unwrap_or("")
            .contains("suspended")
    );
    w.grant("agent", "tp", &[Capability::VerbExecRead]);
    assert_eq!(code(&w.say(&agent, "x")), (None, 0));
}

#[test]
fn step_5_brain_land_needs_a_project_and_membership() {
    let w = World::new();
    let agent = w.session("agent", None, &["p1", "p2"]);
    w.grant("agent", "tp", &[Capability::VerbExecWrite]);
    let a = w.exec(&agent, "tp.note", &[("text", s("x"))]);
    assert_eq!(code(&a), (Some("project_required"), 77));
    let mut other = agent.clone();
    other.project = Some("p9".into());
    let a = w.exec(&other, "tp.note", &[("text", s("x"))]);
    assert_eq!(code(&a), (Some("not_project_member"), 77));
    let mut p2 = agent.clone();
    p2.project = Some("p2".into());
    let a = w.exec(&p2, "tp.note", &[("text", s("x"))]);
    assert_eq!((code(&a), a.stdout.as_slice()), ((None, 0), &b"p2 x\n"[..]));
}

#[test]
fn step_6_the_confirm_gate() {
    let w = World::new();
    let a = w.exec(&w.owner(), "tp.put", &[("text", s("x"))]);
    assert_eq!(code(&a), (Some("confirm_required"), 77));
    assert_eq!(a.result.error.as_deref(), Some("confirm required"));
    let a = w.exec(
        &w.owner(),
        "tp.put",
        &[("text", s("x")), ("confirm", ArgValue::Bool(true))],
    );
    assert_eq!(code(&a), (None, 0));
}

const POLICY: &str = "schema_version: histos.policy/0.1\ntools:\n  tp.say:\n    args: {text: {type: string}}\n    rate_limit: 1\n  tp.put:\n    access: write\n    args: {text: {type: string}}\n    confirmation: {required: true, expires_in: 60}\n  tp.lines:\n    args: {}\nroles:\n  agent:\n    allow: [tp.say, tp.put, tp.lines]\n";

#[test]
fn step_7_the_runtime_policy_governs_sessions() {
    let w = World::new();
    w.policy(POLICY);
    let agent = w.session("agent", Some("agent"), &[]);
    let stranger = w.session("stranger", Some("nobody"), &[]);
    for p in ["agent", "stranger"] {
        w.grant(p, "tp", &[Capability::VerbExecRead]);
    }
    // a verb the policy does not list: deny by default
    let a = w.exec(&agent, "tp.json", &[("text", s("{}"))]);
    assert_eq!(code(&a), (Some("unknown_tool"), 77));
    let a = w.say(&stranger, "x");
    assert_eq!(code(&a), (Some("rbac"), 77));
    let r = w.last_record();
    assert_eq!(
        (&r["rule"], &r["policy_hash"].is_string()),
        (&json!("rbac"), &true)
    );
    // the owner answers to the pack policy alone
    assert_eq!(
        code(&w.exec(&w.owner(), "tp.json", &[("text", s("{}"))])),
        (None, 0)
    );
    assert_eq!(code(&w.say(&agent, "x")), (None, 0));
    assert_eq!(code(&w.say(&agent, "x")), (Some("rate_limit"), 77));
}

#[test]
fn step_7_a_policy_that_does_not_load_stops_every_call() {
    let w = World::new();
    w.policy("schema_version: histos.policy/0.1\ntools: [\n");
    let a = w.say(&w.owner(), "x");
    assert_eq!(code(&a), (Some("unparseable"), 77));
    w.policy(POLICY);
    std::fs::write(w.home().root().join("policy.json"), "{}").unwrap();
    let a = w.say(&w.owner(), "x");
    assert_eq!(code(&a), (Some("policy_conflict"), 77));
}

#[test]
fn step_7_a_paused_call_passes_once_after_the_owner_approves() {
    let w = World::new();
    w.policy(POLICY);
    let agent = w.session("agent", Some("agent"), &[]);
    w.grant("agent", "tp", &[Capability::VerbExecWrite]);
    let put = |w: &World| {
        w.exec(
            &agent,
            "tp.put",
            &[("text", s("x")), ("confirm", ArgValue::Bool(true))],
        )
    };
    let a = put(&w);
    assert_eq!(code(&a), (Some("requires_confirmation"), 77));
    let id = a.result.extra["approval_id"].as_str().unwrap().to_owned();
    w.rt.state().approve(&id, jiff::Timestamp::now()).unwrap();
    let a = put(&w);
    assert_eq!(code(&a), (None, 0));
    assert_eq!(w.last_record()["approval_id"], json!(id));
    // single use
    assert_eq!(code(&put(&w)), (Some("requires_confirmation"), 77));
}

#[test]
fn step_8_binding_mint_and_connect_only() {
    let w = World::new();
    w.install_pack(
        "tb",
        "user",
        &[("show", "read", "personal", false, &["env"])],
        false,
    );
    let a = w.exec(&w.owner(), "tb.show", &[]);
    assert_eq!(code(&a), (Some("binding_required"), 77));
    // `binding.degraded` is recorded for `hcp sense` to deliver
    let pending = hcp_store::stimulus::pending(w.home(), "owner", "tb", None).unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].event["reason"], json!("missing"));
    // a session runs the connect verb only through `hcp connect`
    let agent = w.session("agent", None, &[]);
    w.grant(
        "agent",
        "tb",
        &[Capability::VerbExecWrite, Capability::PackConnect],
    );
    let a = w.exec(&agent, "tb.connect", &[("file", s("c.json"))]);
    assert_eq!(code(&a), (Some("connect_only"), 77));
}

#[test]
fn step_9a_the_bin_is_verified_and_the_config_read_before_anything_runs() {
    let w = World::new();
    let bin = w.root.join("src/tp/bin/tp");
    let pinned = std::fs::read(&bin).unwrap();
    std::fs::write(&bin, b"#!/bin/sh\necho changed\n").unwrap();
    let a = w.say(&w.owner(), "x");
    assert_eq!(code(&a), (Some("bin_changed"), 126));
    assert!(
        a.result
            .hint
            .as_deref()
            .unwrap_or("")
            .contains("install --force")
    );
    std::fs::remove_file(&bin).unwrap();
    assert_eq!(code(&w.say(&w.owner(), "x")), (Some("bin_missing"), 127));
    std::fs::write(&bin, pinned).unwrap();
    std::fs::set_permissions(&bin, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    w.config(Some("{\"sandbox\": {\"nope\": 1}}"));
    let a = w.say(&w.owner(), "x");
    assert_eq!(code(&a), (Some("bad_config"), 78));
    w.config(None);
    assert_eq!(code(&w.say(&w.owner(), "x")), (None, 0));
    // a value too long for one argv element
    let long = "x".repeat(200 * 1024);
    assert_eq!(code(&w.say(&w.owner(), &long)), (Some("arg_invalid"), 65));
}

#[test]
fn post_gate_the_credential_never_leaves_in_any_form() {
    let w = World::new();
    w.install_pack(
        "tb",
        "user",
        &[("show", "read", "personal", false, &["env"])],
        false,
    );
    let secret = json!({"token": "s3cr\"et/1"});
    hcp_store::binding::save(
        w.home(),
        &hcp_store::StoreLock::acquire(w.home()).unwrap(),
        "owner",
        "tb",
        secret.as_object().unwrap().clone(),
        jiff::Timestamp::now(),
    )
    .unwrap();
    let a = w.exec(&w.owner(), "tb.show", &[]);
    assert_eq!(code(&a), (None, 0));
    let out = String::from_utf8(a.stdout.clone()).unwrap();
    assert_eq!(out, "[redacted]\n{\"echo\": \"[redacted]\"}\n");
    assert!(!a.result.stdout.unwrap().contains("s3cr"));
}

#[test]
fn post_gate_the_runtime_policy_withholds_output() {
    let w = World::new();
    w.policy("schema_version: histos.policy/0.1\ntools:\n  tp.json:\n    args: {text: {type: string}}\n    returns:\n      n: {type: integer}\n    output: {strict: true, on_violation: deny}\nroles:\n  agent: {allow: [tp.json]}\n");
    let agent = w.session("agent", Some("agent"), &[]);
    w.grant("agent", "tp", &[Capability::VerbExecRead]);
    let a = w.exec(&agent, "tp.json", &[("text", s("{\"n\": \"no\"}"))]);
    assert_eq!(code(&a), (Some("output_withheld"), 77));
    assert!(a.stdout.is_empty());
    let a = w.exec(&agent, "tp.json", &[("text", s("{\"n\": 1}"))]);
    assert_eq!(code(&a), (None, 0));
    assert_eq!(a.result.data, json!({"n": 1}));
}

#[test]
fn sense_goes_through_step_7_like_any_call() {
    let w = World::new();
    w.policy("schema_version: histos.policy/0.1\ntools:\n  tp.say:\n    args: {text: {type: string}}\nroles:\n  agent: {allow: [tp.say]}\n");
    let agent = w.session("agent", Some("agent"), &[]);
    w.grant("agent", "tp", &[Capability::SenseEnable]);
    let (a, _) = w.sense(&agent, "tp", Some("lines"), 1);
    assert_eq!(code(&a), (Some("unknown_tool"), 77));
    let rec = w.last_record();
    assert_eq!(
        (&rec["face"], &rec["verb_key"], &rec["code"], &rec["rule"]),
        (
            &json!("sense"),
            &json!("lines"),
            &json!("unknown_tool"),
            &json!("unknown_tool")
        )
    );
    // listed: admitted, its trigger run and its event relayed
    w.policy(POLICY);
    let (a, events) = w.sense(&agent, "tp", Some("lines"), 1);
    assert_eq!(code(&a), (None, 0));
    assert_eq!(
        events,
        "{\"event\":{\"n\":1},\"pack_id\":\"tp\",\"ref\":\"lines\"}\n"
    );
    let records = w.records();
    let intent = &records[records.len() - 2];
    assert_eq!(
        (&intent["kind"], &intent["decision"]),
        (&json!("intent"), &json!("allow"))
    );
    // without sense.enable: the one grant check
    let other = w.session("other", Some("agent"), &[]);
    let (a, _) = w.sense(&other, "tp", None, 1);
    assert_eq!(code(&a), (Some("missing_grant"), 77));
}

#[test]
fn connect_redacts_the_credential_from_the_verbs_stderr_in_every_form() {
    let w = World::new();
    w.install_pack(
        "tb",
        "user",
        &[("show", "read", "personal", false, &["env"])],
        false,
    );
    // A `personal` verb reads what its tenant home holds (its working directory there).
    let tenant = w.home().root().join("homes/tb/principal/owner");
    std::fs::create_dir_all(&tenant).unwrap();
    std::fs::write(tenant.join("c.json"), "{\"token\": \"s3cr\\\"et/1\"}\n").unwrap();
    let pack = crate::connect::connectable(&w.rt, "tb").unwrap();
    let words = crate::Words {
        named: vec![("file".into(), "c.json".into())],
        ..crate::Words::default()
    };
    let c = crate::connect::connect(&w.rt, &w.owner(), &pack, words, None).unwrap();
    assert_eq!(c.exit, 0);
    assert_eq!(c.stored, Some(("owner".into(), "tb".into())));
    // the verb printed the JSON-escaped form (`s3cr\"et/1`) on stderr
    assert_eq!(String::from_utf8(c.stderr).unwrap(), "[redacted]\n");
    assert_eq!(c.result.stderr.as_deref(), Some("[redacted]\n"));
    assert_eq!(c.result.stdout, None);
    let stored = hcp_store::binding::load(w.home(), "owner", "tb", jiff::Timestamp::now()).unwrap();
    assert_eq!(stored.secret["token"], json!("s3cr\"et/1"));
    // disconnect: the one grant check for a session
    let agent = w.session("agent", None, &[]);
    let r = crate::connect::disconnect(&w.rt, &agent, &pack).unwrap_err();
    assert_eq!(r.code.as_str(), "missing_grant");
    let d = crate::connect::disconnect(&w.rt, &w.owner(), &pack).unwrap();
    assert!(d.removed);
}

#[test]
fn disconnect_refuses_a_damaged_install_record_as_exec_does() {
    let w = World::new();
    w.install_pack(
        "tb",
        "user",
        &[("show", "read", "personal", false, &["env"])],
        false,
    );
    let pack = crate::connect::connectable(&w.rt, "tb").unwrap();
    let record = w.home().root().join("packs/tb/.hcp/record.json");
    let mut r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&record).unwrap()).unwrap();
    r["content_changed_at"] = json!("not a time");
    // Sealed, so the field itself is what is damaged (not the record's MAC).
    let (sealed, mac) =
        hcp_store::stamp::records::seal_record_mac(w.home(), "tb", &record, &r).unwrap();
    std::fs::write(&record, sealed).unwrap();
    // …and in the ledger, as hcp writes a record.
    let lock = hcp_store::StoreLock::acquire(w.home()).unwrap();
    hcp_store::ledger::note(w.home(), &lock, &[(&record, Some(mac))]).unwrap();
    drop(lock);
    let a = w.exec(&w.owner(), "tb.show", &[]);
    assert_eq!(code(&a), (Some("store_damaged"), 74));
    let before = w.records().len();
    for caller in [w.owner(), w.session("agent", None, &[])] {
        let e = crate::connect::disconnect(&w.rt, &caller, &pack).unwrap_err();
        assert_eq!((e.code.as_str(), e.exit()), ("store_damaged", 74), "{e:?}");
    }
    // each refusal is recorded, as the binding's refusal
    let records = w.records();
    assert_eq!(records.len(), before + 2);
    for r in &records[before..] {
        assert_eq!(
            (&r["code"], &r["binding"], &r["verb_key"]),
            (
                &json!("store_damaged"),
                &json!("refused"),
                &json!("connect")
            )
        );
    }
}
