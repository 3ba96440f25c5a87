//! The confirm gate answered by the person (RUNTIME §10): the preview a `confirm_required`
//! refusal of the MCP face carries, and the confirmed re-run bound to its digest.

use super::{World, code, s};
use crate::Face;
use crate::call::{Answer, Call, CallArgs, Caller};
use hcp_model::{ArgValue, Capability};
use hcp_store::session::NewSession;
use jiff::Timestamp;
use pretty_assertions::assert_eq;
use serde_json::json;
use std::ffi::OsString;

fn call(face: Face, target: &str, args: &[(&str, ArgValue)]) -> Call {
    Call {
        pack_id: None,
        target: target.into(),
        args: CallArgs::Named(args.iter().map(|(k, v)| ((*k).into(), v.clone())).collect()),
        face,
        timeout: None,
    }
}

fn mcp(w: &World, c: &Caller, target: &str, args: &[(&str, ArgValue)]) -> Answer {
    crate::pipeline::run(
        &w.rt,
        c,
        crate::pipeline::Subject::Verb(call(Face::Mcp, target, args)),
        crate::pipeline::Mode::Exec(None),
    )
}

fn confirmed(w: &World, c: &Caller, args: &[(&str, ArgValue)], digest: &str) -> Answer {
    let answered = crate::confirm::Answered {
        command: Some(digest.to_owned()),
        approval: None,
    };
    crate::pipeline::run(
        &w.rt,
        c,
        crate::pipeline::Subject::Verb(call(Face::Mcp, "tp.put", args)),
        crate::pipeline::Mode::Answered(None, &answered),
    )
}

fn with_attrs(w: &World, principal: &str, role: &str, attrs: &[&str]) -> Caller {
    let new = NewSession {
        principal: principal.into(),
        role: Some(role.into()),
        attributes: attrs.iter().map(|a| (*a).to_owned()).collect(),
        ..NewSession::default()
    };
    let (token, _) = w.rt.state().session_start(&new, Timestamp::now()).unwrap();
    Caller {
        session_token: Some(OsString::from(token.as_str())),
        ..w.owner()
    }
}

#[test]
fn a_confirm_refusal_of_the_mcp_face_carries_the_command_it_would_run() {
    let w = World::new();
    let a = mcp(&w, &w.owner(), "tp.put", &[("text", s("two words"))]);
    assert_eq!(code(&a), (Some("confirm_required"), 77));
    assert_eq!(a.result.error.as_deref(), Some("confirm required"));
    let p = a.preview.expect("a preview");
    assert_eq!(
        (
            p.pack_id.as_str(),
            p.verb_key.as_str(),
            p.principal.as_str()
        ),
        ("tp", "put", "owner")
    );
    assert_eq!(
        (p.argv0.as_str(), p.args.clone()),
        ("tp", vec!["say".to_owned(), "two words".to_owned()])
    );
    assert_eq!(p.workdir, w.work.display().to_string());
    assert!(p.bin.ends_with("/bin/tp"), "{}", p.bin);
    assert_eq!(p.command_line(), "tp say 'two words'");
    // The preview is not in the result object (the agent's view): only the face shows it.
    assert!(
        serde_json::to_value(&a.result)
            .unwrap()
            .get("digest")
            .is_none()
    );
    // Nothing ran: one refusal record.
    assert_eq!(w.last_record()["code"], json!("confirm_required"));
    // Other faces, and refusals of other steps, carry none.
    let a = w.exec(&w.owner(), "tp.put", &[("text", s("x"))]);
    assert_eq!(code(&a), (Some("confirm_required"), 77));
    assert!(a.preview.is_none());
    let agent = w.session("agent-1", None, &[]);
    let a = mcp(&w, &agent, "tp.put", &[("text", s("x"))]);
    assert_eq!(code(&a), (Some("missing_grant"), 77));
    assert!(a.preview.is_none());
}

#[test]
fn the_accepted_command_runs_once_and_its_record_says_so() {
    let w = World::new();
    let args = [("text", s("hello"))];
    let p = mcp(&w, &w.owner(), "tp.put", &args).preview.unwrap();
    let a = confirmed(&w, &w.owner(), &args, &p.digest);
    assert_eq!(code(&a), (None, 0));
    assert_eq!(a.stdout, b"hello\n");
    let r = w.last_record();
    assert_eq!(
        (&r["decision"], &r["confirm"]),
        (&json!("allow"), &json!("elicitation"))
    );
    // The audit digest is that of the arguments as sent (no `confirm` among them).
    let refused = &w.records()[w.records().len() - 2];
    assert_eq!(r["args_digest"], refused["args_digest"]);
}

#[test]
fn a_command_other_than_the_accepted_one_is_refused_before_anything_is_spent() {
    let w = World::new();
    let p = mcp(&w, &w.owner(), "tp.put", &[("text", s("hello"))])
        .preview
        .unwrap();
    let before = w.records().len();
    // Other arguments than those shown.
    let a = confirmed(&w, &w.owner(), &[("text", s("other"))], &p.digest);
    assert_eq!(code(&a), (Some("confirm_required"), 77));
    assert_eq!(a.result.error.as_deref(), Some("confirm required"));
    assert!(
        a.result
            .hint
            .as_deref()
            .unwrap()
            .contains("changed since the person accepted")
    );
    assert!(a.stdout.is_empty());
    // The caller's directory is no part of a `personal` call (it runs in its tenant home).
    assert_eq!(p.workdir, w.work.display().to_string());
    // The pack reinstalled with another template since.
    let dir = w.write_pack(
        "tp",
        "public",
        &[("put", "write", "personal", true, &["say", "--", "{{text}}"])],
        false,
    );
    w.install_dir(&dir);
    let a = confirmed(&w, &w.owner(), &[("text", s("hello"))], &p.digest);
    assert_eq!(code(&a), (Some("confirm_required"), 77));
    // The reinstall is an act of authority on the trail; both calls are refusals.
    let records = w.records();
    let (acts, calls): (Vec<_>, Vec<_>) = records[before..]
        .iter()
        .partition(|r| r["kind"] == json!("authority"));
    // The install's intent, then its `act made`.
    assert_eq!(acts.len(), 2);
    assert_eq!(acts[0]["act"], json!("install"));
    assert_eq!(acts[1]["act"], json!("act made"));
    assert_eq!(calls.len(), 2);
    assert!(
        calls
            .iter()
            .all(|r| r["decision"] == json!("deny") && r["code"] == json!("confirm_required"))
    );
}

#[test]
fn the_preview_shows_the_value_the_runtime_policy_binds() {
    let w = World::new();
    w.policy(
        "schema_version: histos.policy/0.1\ntools:\n  tp.put:\n    access: write\n    args:\n      text: {type: string}\n    bind:\n      text: principal.team\nroles:\n  clerk:\n    allow: [tp.put]\n",
    );
    let agent = with_attrs(&w, "agent-1", "clerk", &["team=blue", "desk=7"]);
    w.grant("agent-1", "tp", &[Capability::VerbExecWrite]);
    let args = [("text", s("whatever the model said"))];
    let p = mcp(&w, &agent, "tp.put", &args).preview.unwrap();
    assert_eq!(p.args, vec!["say".to_owned(), "blue".to_owned()]);
    assert_eq!(p.principal, "agent-1");
    // The owner changes the binding while the person reads: the accept no longer fits.
    w.policy(
        "schema_version: histos.policy/0.1\ntools:\n  tp.put:\n    access: write\n    args:\n      text: {type: string}\n    bind:\n      text: principal.desk\nroles:\n  clerk:\n    allow: [tp.put]\n",
    );
    let a = confirmed(&w, &agent, &args, &p.digest);
    assert_eq!(code(&a), (Some("confirm_required"), 77));
    // Shown again, then accepted: it runs with the value bound now.
    let p = mcp(&w, &agent, "tp.put", &args).preview.unwrap();
    assert_eq!(p.args[1], "7");
    let a = confirmed(&w, &agent, &args, &p.digest);
    assert_eq!(code(&a), (None, 0), "{:?}", a.result);
    assert_eq!(a.stdout, b"7\n");
    // A binding without its attribute: the call would be refused anyway, nobody is asked.
    let bare = with_attrs(&w, "agent-1", "clerk", &[]);
    let a = mcp(&w, &bare, "tp.put", &args);
    assert_eq!(code(&a), (Some("confirm_required"), 77));
    assert!(a.preview.is_none());
}
