//! The shapes of what calls answer and record, snapshot whole: the result object, the exit
//! status, the child's streams and every audit record a call appends, for each way a call
//! goes (a run, each kind of refusal, the runtime policy's fields, approvals, the person's
//! answer, connect and disconnect, sense, a resolver's call). Values that change from run
//! to run are replaced by stable markers: ids by `[ID n]` in order of first appearance (so
//! an intent, its outcome and the result's `audit_id` still show as one), argument digests
//! by `[DIGEST n]`, session digests by `[SESSION n]`, chain hashes by `[HASH]`, times by
//! `[TS]`, durations by 0, an act's owner uid by `[UID]`, the temporary root by `[TMP]`; a `sandbox` field by the names of
//! its parts (what each part says depends on the kernel).

use super::{World, s};
use crate::call::{Answer, Call, CallArgs, Caller};
use crate::{Face, Words};
use hcp_model::{ArgValue, Capability};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

const POLICY: &str = "schema_version: histos.policy/0.1
tools:
  tp.say:
    args: {text: {type: string}}
  tp.json:
    args: {text: {type: string}}
    returns:
      n: {type: integer}
    output: {strict: true, on_violation: deny}
  tp.put:
    access: write
    args: {text: {type: string}}
    confirmation: {required: true, expires_in: 300}
  tp.lines:
    args: {}
roles:
  agent:
    allow: [tp.say, tp.json, tp.put, tp.lines]
";

/// Markers for the values of one scenario.
#[derive(Default)]
struct Markers {
    ids: BTreeMap<String, usize>,
    digests: BTreeMap<String, usize>,
    sessions: BTreeMap<String, usize>,
    root: String,
}

fn is_uuid(s: &str) -> bool {
    s.len() == 36
        && s.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit(),
        })
}

impl Markers {
    fn id(&mut self, s: &str) -> String {
        let n = self.ids.len() + 1;
        format!("[ID {}]", self.ids.entry(s.to_owned()).or_insert(n))
    }

    fn digest(&mut self, s: &str) -> String {
        let n = self.digests.len() + 1;
        format!("[DIGEST {}]", self.digests.entry(s.to_owned()).or_insert(n))
    }

    fn session(&mut self, s: &str) -> String {
        let n = self.sessions.len() + 1;
        format!(
            "[SESSION {}]",
            self.sessions.entry(s.to_owned()).or_insert(n)
        )
    }

    /// Text with the temporary root and approval ids (in messages and hints) marked.
    fn text(&mut self, s: &str) -> String {
        let mut out = s.replace(&self.root, "[TMP]");
        while let Some(at) = out.find("apr_") {
            let end = out[at + 4..]
                .find(|c: char| !c.is_ascii_hexdigit())
                .map_or(out.len(), |e| at + 4 + e);
            let id = out[at..end].to_owned();
            out.replace_range(at..end, &self.id(&id));
        }
        out
    }

    fn value(&mut self, key: Option<&str>, v: &Value) -> Value {
        match (key, v) {
            (Some("ts"), Value::String(_)) => json!("[TS]"),
            (Some("hash" | "prev"), Value::String(_)) => json!("[HASH]"),
            (Some("duration_ms"), Value::Number(_)) => json!(0),
            (Some("uid"), Value::Number(_)) => json!("[UID]"),
            (Some("args_digest"), Value::String(d)) => json!(self.digest(d)),
            (Some("session"), Value::String(d)) => json!(self.session(d)),
            (Some("sandbox"), Value::Object(m)) => sandbox_parts(m),
            (_, Value::String(s)) if is_uuid(s) || s.starts_with("apr_") => json!(self.id(s)),
            (_, Value::String(s)) => json!(self.text(s)),
            (_, Value::Array(a)) => a.iter().map(|x| self.value(None, x)).collect(),
            (_, Value::Object(m)) => m
                .iter()
                .map(|(k, x)| (k.clone(), self.value(Some(k), x)))
                .collect::<Map<String, Value>>()
                .into(),
            (_, other) => other.clone(),
        }
    }
}

/// A `sandbox` field as the names of its parts (by ref for a sense of several triggers).
fn sandbox_parts(m: &Map<String, Value>) -> Value {
    if m.values().all(Value::is_object) {
        return m
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    sandbox_parts(v.as_object().unwrap_or(&Map::new())),
                )
            })
            .collect::<Map<String, Value>>()
            .into();
    }
    m.keys().cloned().collect::<Vec<_>>().into()
}

/// One scenario: what it answered, and the records it appended.
struct Shot<'w> {
    w: &'w World,
    markers: Markers,
    seen: usize,
    out: Vec<Value>,
}

impl<'w> Shot<'w> {
    fn new(w: &'w World) -> Self {
        Self {
            w,
            markers: Markers {
                root: w.root.display().to_string(),
                ..Markers::default()
            },
            seen: w.records().len(),
            out: Vec::new(),
        }
    }

    /// The records appended since the last step.
    fn records(&mut self) -> Vec<Value> {
        let all = self.w.records();
        let new = all[self.seen..].to_vec();
        self.seen = all.len();
        new.iter().map(|r| self.markers.value(None, r)).collect()
    }

    fn answer(&mut self, step: &str, a: &Answer) {
        let result = serde_json::to_value(&a.result).unwrap();
        let v = json!({
            "step": step,
            "exit": a.exit,
            "result": self.markers.value(None, &result),
            "stdout": String::from_utf8_lossy(&a.stdout),
            "stderr": String::from_utf8_lossy(&a.stderr),
            "preview": a.preview.is_some(),
            "records": self.records(),
        });
        self.out.push(v);
    }

    fn other(&mut self, step: &str, what: Value) {
        let v = json!({
            "step": step,
            "answer": self.markers.value(None, &what),
            "records": self.records(),
        });
        self.out.push(v);
    }

    fn render(&self) -> String {
        serde_json::to_string_pretty(&self.out).unwrap()
    }
}

fn call(face: Face, target: &str, args: &[(&str, ArgValue)], timeout: Option<u64>) -> Call {
    Call {
        pack_id: None,
        target: target.into(),
        args: CallArgs::Named(args.iter().map(|(k, v)| ((*k).into(), v.clone())).collect()),
        face,
        timeout: timeout.map(Duration::from_millis),
    }
}

fn exec(w: &World, c: &Caller, call: Call) -> Answer {
    crate::pipeline::run(
        &w.rt,
        c,
        crate::pipeline::Subject::Verb(call),
        crate::pipeline::Mode::Exec(None),
    )
}

fn answered(w: &World, c: &Caller, call: Call, a: &crate::confirm::Answered) -> Answer {
    crate::pipeline::run(
        &w.rt,
        c,
        crate::pipeline::Subject::Verb(call),
        crate::pipeline::Mode::Answered(None, a),
    )
}

/// `hcp sense PACK [REF] --count N`: the refusal, or the relay's status and output.
fn sense(w: &World, c: &Caller, pack: &str, reference: Option<&str>, count: u64) -> Value {
    let (stop, _keep) = nix::unistd::pipe().unwrap();
    let mut events = Vec::new();
    let mut notes = Vec::new();
    let stimuli = crate::pipeline::Stimuli {
        pack_id: pack,
        reference,
        count: Some(count),
        sinks: crate::sense::Sinks {
            events: &mut events,
            notes: &mut notes,
            events_fd: None,
        },
    };
    let a = crate::pipeline::run(
        &w.rt,
        c,
        crate::pipeline::Subject::Stimuli(stimuli),
        crate::pipeline::Mode::Exec(Some(std::os::fd::AsFd::as_fd(&stop))),
    );
    if let Some(code) = a.result.code {
        return json!({"refused": code, "message": a.result.error});
    }
    let status: Result<u8, hcp_model::Code> = Ok(a.exit);
    json!({
        "status": status,
        "events": String::from_utf8_lossy(&events),
        "notes": String::from_utf8_lossy(&notes),
    })
}

fn connect(w: &World, c: &Caller, pack: &str, file: &str) -> Value {
    let p = match crate::connect::connectable(&w.rt, pack) {
        Ok(p) => p,
        Err(r) => return json!({"refused": r.code}),
    };
    let words = Words {
        named: vec![("file".into(), file.into())],
        ..Words::default()
    };
    match crate::connect::connect(&w.rt, c, &p, words, None) {
        Ok(c) => json!({
            "exit": c.exit,
            "result": c.result,
            "stderr": String::from_utf8_lossy(&c.stderr),
            "stored": c.stored,
        }),
        Err(r) => json!({"refused": r.code, "message": r.message}),
    }
}

fn disconnect(w: &World, c: &Caller, pack: &str) -> Value {
    let p = match crate::connect::connectable(&w.rt, pack) {
        Ok(p) => p,
        Err(r) => return json!({"refused": r.code}),
    };
    match crate::connect::disconnect(&w.rt, c, &p) {
        Ok(d) => json!({
            "principal": d.principal,
            "family": d.family,
            "removed": d.removed,
            "audit_id": d.audit_id,
        }),
        Err(r) => json!({"refused": r.code, "message": r.message, "hint": r.hint}),
    }
}

fn agent(w: &World) -> Caller {
    let a = w.session("agent", Some("agent"), &[]);
    w.grant(
        "agent",
        "tp",
        &[
            Capability::VerbExecRead,
            Capability::VerbExecWrite,
            Capability::SenseEnable,
        ],
    );
    a
}

#[test]
fn owner_runs_and_refusals() {
    let w = World::new();
    let o = w.owner();
    let mut shot = Shot::new(&w);
    let a = w.say(&o, "hello world");
    shot.answer("run", &a);
    let a = w.exec(&o, "tp.exit", &[("status", s("3"))]);
    shot.answer("exit status", &a);
    let a = w.exec(&o, "tp.sya", &[]);
    shot.answer("unknown verb", &a);
    let a = w.exec(&o, "tp.say", &[("text", s("-rf"))]);
    shot.answer("flag-looking argument", &a);
    let a = w.exec(&o, "tp.put", &[("text", s("x"))]);
    shot.answer("confirm required", &a);
    let a = exec(
        &w,
        &o,
        call(Face::Json, "tp.sleep", &[("secs", s("5"))], Some(200)),
    );
    shot.answer("timeout", &a);
    insta::assert_snapshot!(shot.render());
}

#[test]
fn session_refusals() {
    let w = World::new();
    let mut bad = w.owner();
    bad.session_token = Some("hcps_garbage".into());
    let mut shot = Shot::new(&w);
    let a = w.say(&bad, "x");
    shot.answer("bad session", &a);
    let c = w.session("agent", None, &[]);
    let a = w.say(&c, "x");
    shot.answer("missing grant", &a);
    let a = w.exec(&c, "nope.nope", &[]);
    shot.answer("unknown verb of a session", &a);
    w.grant("agent", "tp", &[Capability::VerbExecWrite]);
    let a = w.exec(&c, "tp.note", &[("text", s("x"))]);
    shot.answer("project required", &a);
    insta::assert_snapshot!(shot.render());
}

#[test]
fn runtime_policy_fields() {
    let w = World::new();
    w.policy(POLICY);
    let c = agent(&w);
    let mut shot = Shot::new(&w);
    let a = w.say(&c, "hello");
    shot.answer("allowed under the policy", &a);
    let a = w.exec(&c, "tp.exit", &[("status", s("0"))]);
    shot.answer("a tool the policy does not list", &a);
    let a = w.exec(&c, "tp.json", &[("text", s("{\"n\": \"no\"}"))]);
    shot.answer("output withheld", &a);
    let a = w.exec(&c, "tp.json", &[("text", s("{\"n\": 1}"))]);
    shot.answer("output passed", &a);
    let put = [("text", s("x")), ("confirm", ArgValue::Bool(true))];
    let a = w.exec(&c, "tp.put", &put);
    shot.answer("requires confirmation", &a);
    let id = a.result.extra["approval_id"].as_str().unwrap().to_owned();
    w.rt.state().approve(&id, jiff::Timestamp::now()).unwrap();
    let a = answered(
        &w,
        &c,
        call(Face::Mcp, "tp.put", &put, None),
        &crate::confirm::Answered {
            command: None,
            approval: Some(id),
        },
    );
    shot.answer("approved, by elicitation", &a);
    let a = w.exec(&c, "tp.put", &put);
    shot.answer("the approval is used", &a);
    insta::assert_snapshot!(shot.render());
}

#[test]
fn the_persons_answer() {
    let w = World::new();
    let o = w.owner();
    let mut shot = Shot::new(&w);
    let args = [("text", s("hello"))];
    let a = exec(&w, &o, call(Face::Mcp, "tp.put", &args, None));
    shot.answer("confirm required, with a preview", &a);
    let digest = a.preview.map(|p| p.digest).unwrap();
    let accepted = crate::confirm::Answered {
        command: Some(digest),
        approval: None,
    };
    let a = answered(&w, &o, call(Face::Mcp, "tp.put", &args, None), &accepted);
    shot.answer("the accepted command runs", &a);
    let other = [("text", s("other"))];
    let a = answered(&w, &o, call(Face::Mcp, "tp.put", &other, None), &accepted);
    shot.answer("another command is refused", &a);
    insta::assert_snapshot!(shot.render());
}

#[test]
fn bindings() {
    let w = World::new();
    w.install_pack(
        "tb",
        "user",
        &[("show", "read", "personal", false, &["env"])],
        false,
    );
    std::fs::write(w.work.join("c.json"), "{\"token\": \"s3cret-1\"}\n").unwrap();
    std::fs::write(w.work.join("bad.json"), "not json\n").unwrap();
    let o = w.owner();
    let c = w.session("agent", None, &[]);
    let mut shot = Shot::new(&w);
    let a = w.exec(&o, "tb.show", &[]);
    shot.answer("binding required", &a);
    w.grant("agent", "tb", &[Capability::VerbExecWrite]);
    let v = connect(&w, &c, "tb", "c.json");
    shot.other("connect without pack.connect", v);
    w.grant("agent", "tb", &[Capability::PackConnect]);
    let a = w.exec(&c, "tb.connect", &[("file", s("c.json"))]);
    shot.answer("connect only", &a);
    let v = connect(&w, &o, "tb", "bad.json");
    shot.other("connect output invalid", v);
    let v = connect(&w, &o, "tb", "c.json");
    shot.other("connect", v);
    let a = w.exec(&o, "tb.show", &[]);
    shot.answer("the credential reaches the child only", &a);
    let other = w.session("other", None, &[]);
    let v = disconnect(&w, &other, "tb");
    shot.other("disconnect without pack.connect", v);
    let v = disconnect(&w, &o, "tb");
    shot.other("disconnect", v);
    let v = disconnect(&w, &o, "tb");
    shot.other("disconnect again", v);
    let v = connect(&w, &o, "tp", "c.json");
    shot.other("not connectable", v);
    insta::assert_snapshot!(shot.render());
}

#[test]
fn stimuli() {
    let w = World::new();
    w.install_pack(
        "tb",
        "user",
        &[("show", "read", "personal", false, &["env"])],
        true,
    );
    let o = w.owner();
    let mut shot = Shot::new(&w);
    let v = sense(&w, &o, "tp", Some("lines"), 1);
    shot.other("one event", v);
    let v = sense(&w, &o, "tp", Some("nope"), 1);
    shot.other("unknown stimulus", v);
    let c = w.session("agent", Some("agent"), &[]);
    let v = sense(&w, &c, "tp", None, 1);
    shot.other("without sense.enable", v);
    w.policy(POLICY);
    let c = agent(&w);
    let v = sense(&w, &c, "tp", Some("lines"), 1);
    shot.other("under the policy", v);
    w.policy("schema_version: histos.policy/0.1\ntools:\n  tp.say:\n    args: {text: {type: string}}\nroles:\n  agent: {allow: [tp.say]}\n");
    let v = sense(&w, &c, "tp", Some("lines"), 1);
    shot.other("a ref the policy does not list", v);
    std::fs::remove_file(w.home().root().join("policy.yaml")).unwrap();
    let v = sense(&w, &o, "tb", Some("lines"), 1);
    shot.other("binding required", v);
    let v = sense(&w, &o, "tb", None, 1);
    shot.other("every ref, unbound: the recorded stimuli flow", v);
    insta::assert_snapshot!(shot.render());
}

#[test]
fn a_resolvers_call() {
    let w = World::new();
    w.install_pack(
        "rs",
        "public",
        &[
            ("act", "write", "personal", false, &["say", "{{id}}"]),
            ("lookup", "read", "personal", false, &["json", "{{id}}"]),
        ],
        false,
    );
    w.policy("schema_version: histos.policy/0.1\ntools:\n  rs.act:\n    access: write\n    args: {id: {type: string}}\n    resource: {owns: team}\n  rs.lookup:\n    args: {id: {type: string}}\nroles:\n  agent:\n    allow: [rs.act, rs.lookup]\n");
    w.config(Some("{\"resolvers\": {\"rs.act\": \"rs.lookup\"}}"));
    let new = hcp_store::session::NewSession {
        principal: "agent".into(),
        role: Some("agent".into()),
        attributes: vec!["team=red".into()],
        ..hcp_store::session::NewSession::default()
    };
    let (token, _) =
        w.rt.state()
            .session_start(&new, jiff::Timestamp::now())
            .unwrap();
    w.grant(
        "agent",
        "rs",
        &[Capability::VerbExecRead, Capability::VerbExecWrite],
    );
    let c = Caller {
        session_token: Some(token.as_str().into()),
        ..w.owner()
    };
    let mut shot = Shot::new(&w);
    let a = w.exec(&c, "rs.act", &[("id", s(r#"{"team": "red"}"#))]);
    shot.answer("the resource allows", &a);
    let a = w.exec(&c, "rs.act", &[("id", s(r#"{"team": "blue"}"#))]);
    shot.answer("the resource refuses", &a);
    let a = w.exec(&c, "rs.act", &[("id", s("null"))]);
    shot.answer("no resource", &a);
    insta::assert_snapshot!(shot.render());
}
