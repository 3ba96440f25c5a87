//! The MCP face's mapping: which tools a principal is shown (and that the gate refuses the
//! hidden ones with the same code), output schemas and results, and a runtime-policy
//! approval granted through the person.

use super::{World, code, s};
use crate::call::{Call, CallArgs, Caller};
use crate::confirm::{self, Answered, ApprovalPrompt};
use crate::mcp::{self, Catalog, ConfirmBy, Viewer, visible};
use crate::signature::Signature;
use crate::{Face, Runtime};
use hcp_model::{ArgValue, Capability, Code};
use jiff::Timestamp;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn catalog(rt: &Runtime) -> Catalog {
    Catalog::build(
        rt.home(),
        Signature::read(rt.home()).unwrap(),
        &Catalog::default(),
    )
}

fn shown(w: &World, c: &Caller) -> Vec<String> {
    let cat = catalog(&w.rt);
    let viewer = Viewer::load(&w.rt, c, cat.pack_ids(), Timestamp::now());
    cat.names(&viewer)
}

fn mcp_call(w: &World, c: &Caller, name: &str, args: &[(&str, ArgValue)]) -> crate::Answer {
    let (pack, verb) = name.split_once('.').unwrap();
    let call = Call {
        pack_id: Some(pack.into()),
        target: verb.into(),
        args: CallArgs::Named(args.iter().map(|(k, v)| ((*k).into(), v.clone())).collect()),
        face: Face::Mcp,
        timeout: None,
    };
    crate::pipeline::run(
        &w.rt,
        c,
        crate::pipeline::Subject::Verb(call),
        crate::pipeline::Mode::Exec(None),
    )
}

/// Every tool hidden from `c` is refused, when called by name, with the code the
/// visibility gave (the list and the gate agree).
fn hidden_are_refused_alike(w: &World, c: &Caller) {
    let cat = catalog(&w.rt);
    let viewer = Viewer::load(&w.rt, c, cat.pack_ids(), Timestamp::now());
    for e in cat.entries() {
        if let Err(why) = visible(e, &viewer, &cat.policy) {
            let arg = match e.verb_key.as_str() {
                "sleep" => "secs",
                "exit" => "status",
                "connect" => "file",
                _ => "text",
            };
            let args = [(arg, s("0"))];
            let a = mcp_call(w, c, &e.name, &args);
            assert_eq!(a.result.code, Some(why), "{}: {:?}", e.name, a.result);
        }
    }
}

#[test]
fn the_owner_is_shown_every_tool_a_session_only_those_it_may_call() {
    let w = World::new();
    w.install_pack(
        "up",
        "user",
        &[("get", "read", "personal", false, &["say", "{{text}}"])],
        false,
    );
    let all = shown(&w, &w.owner());
    assert_eq!(
        all,
        [
            "tp.exit",
            "tp.json",
            "tp.note",
            "tp.put",
            "tp.say",
            "tp.sleep",
            "up.connect",
            "up.get"
        ]
        .map(String::from)
        .to_vec()
    );
    let agent = w.session("agent-1", None, &[]);
    assert_eq!(shown(&w, &agent), Vec::<String>::new());
    hidden_are_refused_alike(&w, &agent);
    w.grant("agent-1", "tp", &[Capability::VerbExecRead]);
    assert_eq!(
        shown(&w, &agent),
        ["tp.exit", "tp.json", "tp.say", "tp.sleep"]
            .map(String::from)
            .to_vec()
    );
    // The connect verb is never a session's tool (`connect_only`), whatever it holds.
    w.grant(
        "agent-1",
        "*",
        &[
            Capability::VerbExecRead,
            Capability::VerbExecWrite,
            Capability::PackConnect,
        ],
    );
    let names = shown(&w, &agent);
    assert!(names.contains(&"tp.put".to_owned()) && names.contains(&"up.get".to_owned()));
    assert!(!names.contains(&"up.connect".to_owned()), "{names:?}");
    hidden_are_refused_alike(&w, &agent);
    // A bad session is shown nothing.
    let bad = Caller {
        session_token: Some("nope".into()),
        ..w.owner()
    };
    assert_eq!(shown(&w, &bad), Vec::<String>::new());
}

#[test]
fn a_grant_suspended_by_a_content_change_hides_the_tools() {
    let w = World::new();
    let agent = w.session("agent-1", None, &[]);
    w.grant("agent-1", "tp", &[Capability::VerbExecRead]);
    assert!(shown(&w, &agent).contains(&"tp.say".to_owned()));
    // Reinstalled with other content: the grant made before is suspended.
    let dir = w.write_pack(
        "tp",
        "public",
        &[("say", "read", "personal", false, &["say", "--", "{{text}}"])],
        false,
    );
    w.install_dir(&dir);
    assert_eq!(shown(&w, &agent), Vec::<String>::new());
    hidden_are_refused_alike(&w, &agent);
    w.grant("agent-1", "tp", &[Capability::VerbExecRead]);
    assert_eq!(shown(&w, &agent), vec!["tp.say".to_owned()]);
}

#[test]
fn under_a_runtime_policy_only_the_tools_it_gives_the_role() {
    let w = World::new();
    w.grant("agent-1", "tp", &[Capability::VerbExecRead]);
    w.policy(
        "schema_version: histos.policy/0.1\ntools:\n  tp.say:\n    args:\n      text: {type: string}\n  tp.json:\n    args:\n      text: {type: string}\nroles:\n  base:\n    allow: [tp.say]\n  clerk:\n    inherits: base\n    allow: []\n  other:\n    allow: [tp.json]\n",
    );
    let clerk = w.session("agent-1", Some("clerk"), &[]);
    assert_eq!(shown(&w, &clerk), vec!["tp.say".to_owned()]);
    hidden_are_refused_alike(&w, &clerk);
    let other = w.session("agent-1", Some("other"), &[]);
    assert_eq!(shown(&w, &other), vec!["tp.json".to_owned()]);
    let none = w.session("agent-1", None, &[]);
    assert_eq!(shown(&w, &none), Vec::<String>::new());
    // The owner's calls answer to no policy: every tool.
    assert_eq!(shown(&w, &w.owner()).len(), 6);
    // A policy that does not load refuses every call, the owner's too: nothing is shown.
    w.policy("schema_version: histos.policy/0.1\ntools: [\n");
    let cat = catalog(&w.rt);
    assert!(matches!(cat.policy, mcp::PolicyState::Broken { .. }));
    assert!(!cat.warnings.is_empty());
    assert_eq!(shown(&w, &w.owner()), Vec::<String>::new());
    assert_eq!(shown(&w, &clerk), Vec::<String>::new());
    hidden_are_refused_alike(&w, &clerk);
}

#[test]
fn a_client_that_asks_the_person_is_not_offered_confirm() {
    let w = World::new();
    let cat = catalog(&w.rt);
    let put = |by| {
        cat.listed(&Viewer::Owner, by)
            .into_iter()
            .find(|t| t["name"] == "tp.put")
            .unwrap()
    };
    let by_arg = put(ConfirmBy::Argument);
    assert!(by_arg["inputSchema"]["properties"]["confirm"].is_object());
    assert!(
        by_arg["description"]
            .as_str()
            .unwrap()
            .contains("`confirm: true`")
    );
    assert_eq!(
        by_arg["annotations"],
        json!({"readOnlyHint": false, "destructiveHint": true})
    );
    let by_person = put(ConfirmBy::Person);
    assert!(
        by_person["inputSchema"]["properties"]
            .get("confirm")
            .is_none()
    );
    assert!(
        by_person["description"]
            .as_str()
            .unwrap()
            .contains("the person is asked")
    );
    assert!(by_person.get("outputSchema").is_none());
}

#[test]
fn a_sessions_tools_carry_the_policys_returns_and_results_must_fit_them() {
    let w = World::new();
    w.grant("agent-1", "tp", &[Capability::VerbExecRead]);
    w.policy(
        "schema_version: histos.policy/0.1\ntools:\n  tp.json:\n    args:\n      text: {type: string}\n    returns:\n      n: {type: integer}\n    output:\n      project: true\nroles:\n  clerk:\n    allow: [tp.json]\n",
    );
    let agent = w.session("agent-1", Some("clerk"), &[]);
    let cat = catalog(&w.rt);
    let viewer = Viewer::load(&w.rt, &agent, cat.pack_ids(), Timestamp::now());
    let tools = cat.listed(&viewer, ConfirmBy::Argument);
    assert_eq!(
        tools[0]["outputSchema"],
        json!({"type": "object", "properties": {"n": {"type": "integer"}},
               "required": ["n"], "additionalProperties": false})
    );
    let schema = cat
        .output_schema(cat.get("tp.json").unwrap(), &viewer)
        .unwrap();
    // The projection drops the extra key: the result fits.
    let a = mcp_call(&w, &agent, "tp.json", &[("text", s(r#"{"n": 1, "x": 2}"#))]);
    let r = mcp::result(&a, Some(&schema));
    assert_eq!(
        (&r["isError"], &r["structuredContent"]),
        (&json!(false), &json!({"n": 1}))
    );
    // Output that does not fit is an error result saying why, never a result breaking it.
    for (out, why) in [
        (r#"{"n": "one"}"#, "`n`: not of type integer"),
        ("[1, 2]", "the output: not of type object"),
        ("plain text", "the output: not of type object"),
    ] {
        let a = mcp_call(&w, &agent, "tp.json", &[("text", s(out))]);
        let r = mcp::result(&a, Some(&schema));
        assert_eq!(r["isError"], true, "{r}");
        assert!(r.get("structuredContent").is_none(), "{r}");
        assert!(
            r["content"][0]["text"].as_str().unwrap().contains(why),
            "{r}"
        );
    }
    // The owner's tools carry none (no policy shapes its output).
    assert!(
        cat.output_schema(cat.get("tp.json").unwrap(), &Viewer::Owner)
            .is_none()
    );
    // A refusal: the message, the code, the refusal object.
    let a = mcp_call(&w, &agent, "tp.say", &[("text", s("x"))]);
    let r = mcp::result(&a, None);
    // the code, the hint, then every step the tool still needs (`crate::setup`)
    let detail = r["content"][1]["text"].as_str().unwrap_or_default();
    assert!(
        detail.starts_with(&format!(
            "code: unknown_tool\nhint: {}\nsteps (all of them, in order):\n1. hcp policy init --merge ",
            hcp_model::Code::UnknownTool.next_step_for(Some("tp"))
        )) && detail.ends_with(" --role clerk (unknown_tool)"),
        "{detail}"
    );
    assert_eq!(r["structuredContent"]["code"], "unknown_tool");
}

#[test]
fn mcp_arguments_are_scalars() {
    let ok = mcp::arguments(Some(
        json!({"a": "x", "b": 2, "c": true})
            .as_object()
            .unwrap()
            .clone(),
    ))
    .unwrap();
    assert_eq!(ok.len(), 3);
    for bad in [json!({"a": null}), json!({"a": [1]}), json!({"a": {}})] {
        let a = mcp::arguments(bad.as_object().cloned()).unwrap_err();
        assert_eq!(a.result.code, Some(Code::BadEnvelope));
    }
    let long = json!({"a": "x".repeat(mcp::MAX_VALUE_BYTES + 1)});
    let a = mcp::arguments(long.as_object().cloned()).unwrap_err();
    assert_eq!(a.result.code, Some(Code::ArgInvalid));
}

#[test]
fn a_pending_approval_granted_by_the_person_passes_that_call_once() {
    let w = World::new();
    w.grant("agent-1", "tp", &[Capability::VerbExecWrite]);
    w.policy(
        "schema_version: histos.policy/0.1\ntools:\n  tp.note:\n    access: write\n    args:\n      text: {type: string}\n    confirmation: {required: true}\nroles:\n  clerk:\n    allow: [tp.note]\n",
    );
    let agent = w.session("agent-1", Some("clerk"), &["p1"]);
    let args = [("text", s("pay 10"))];
    let a = mcp_call(&w, &agent, "tp.note", &args);
    assert_eq!(code(&a), (Some("requires_confirmation"), 77));
    let id = a.result.extra["approval_id"].as_str().unwrap().to_owned();
    let now = Timestamp::now();
    // Only the call's own approval is put to the person.
    assert!(ApprovalPrompt::load(&w.rt, &id, "tp.say", "agent-1", now).is_none());
    assert!(ApprovalPrompt::load(&w.rt, &id, "tp.note", "agent-2", now).is_none());
    let prompt = ApprovalPrompt::load(&w.rt, &id, "tp.note", "agent-1", now).unwrap();
    let e = prompt.elicitation();
    assert!(
        e["message"].as_str().unwrap().contains("text = 'pay 10'"),
        "{e}"
    );
    assert_eq!(e["_meta"]["hcp"]["approval"]["id"], json!(id));
    assert_eq!(e["requestedSchema"]["required"], json!(["run"]));
    confirm::approve(&w.rt, &prompt, now).unwrap();
    // Granted once: a second accept of the same prompt finds nothing pending.
    assert_eq!(
        confirm::approve(&w.rt, &prompt, now).unwrap_err().code,
        Code::RequiresConfirmation
    );
    let answered = Answered {
        command: None,
        approval: Some(id.clone()),
    };
    let call = Call {
        pack_id: Some("tp".into()),
        target: "note".into(),
        args: CallArgs::Named(args.iter().map(|(k, v)| ((*k).into(), v.clone())).collect()),
        face: Face::Mcp,
        timeout: None,
    };
    let a = crate::pipeline::run(
        &w.rt,
        &agent,
        crate::pipeline::Subject::Verb(call.clone()),
        crate::pipeline::Mode::Answered(None, &answered),
    );
    assert_eq!(code(&a), (None, 0), "{:?}", a.result);
    let r = w.last_record();
    assert_eq!(
        (&r["approval_id"], &r["approved_by"]),
        (&Value::String(id), &json!("elicitation"))
    );
    // Once: the same call again is paused anew.
    let a = crate::pipeline::run(
        &w.rt,
        &agent,
        crate::pipeline::Subject::Verb(call),
        crate::pipeline::Mode::Answered(None, &answered),
    );
    assert_eq!(code(&a), (Some("requires_confirmation"), 77));
}
