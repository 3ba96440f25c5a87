//! `hcp audit export --otlp URL [--follow]` (RUNTIME §11, issue 28) against a real OTLP
//! receiver: `otlp_receiver.py` decodes every request with the official OpenTelemetry
//! protobuf definitions (Python's `opentelemetry-proto`) and keeps what it took. The spans
//! parse and carry the attributes the contract names; the collector down, answering 500
//! or slowly; the exporter and the collector killed mid-batch and restarted (every record
//! exported, duplicates bounded by one batch and said); a damaged record stops the
//! export there, naming it; a fleet's chains (with `HCP_TEST_PG_URL`).
//!
//! Without `python3` and `opentelemetry-proto` each test says `skipped:` (and fails under
//! `CI=true`; `.ci/run` installs the package).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod confine_common;
mod exec_common;
mod fleet_support;
mod mcp_common;

use common::World;
use common::skip::skip;
use hcp_store::Home;
use hcp_store::audit::{AuditLog, Decision, Entry};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Whether python3 can import the official definitions.
fn receiver_available() -> bool {
    Command::new("python3")
        .args([
            "-c",
            "import opentelemetry.proto.collector.trace.v1.trace_service_pb2",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn need_receiver() -> bool {
    if receiver_available() {
        return true;
    }
    skip(
        "python3 with the opentelemetry-proto package is missing (pip install opentelemetry-proto)",
    );
    false
}

/// A running `otlp_receiver.py`.
struct Receiver {
    child: Child,
    dir: PathBuf,
    url: String,
    port: u16,
}

impl Receiver {
    fn start(dir: &Path, port: u16) -> Self {
        std::fs::create_dir_all(dir).unwrap();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/otlp_receiver.py");
        let mut child = Command::new("python3")
            .arg(script)
            .arg("--dir")
            .arg(dir)
            .arg("--port")
            .arg(port.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("listening ")
            .unwrap_or_else(|| panic!("the receiver said {line:?}"))
            .to_owned();
        let port = url
            .rsplit_once(':')
            .and_then(|(_, p)| p.split('/').next())
            .and_then(|p| p.parse().ok())
            .unwrap();
        Self {
            child,
            dir: dir.to_path_buf(),
            url,
            port,
        }
    }

    /// Tells it how to answer (`{"status": 500}`, `{"delay": 2}`, `{}`).
    fn control(&self, v: Value) {
        let tmp = self.dir.join("control.json.tmp");
        std::fs::write(&tmp, v.to_string()).unwrap();
        std::fs::rename(tmp, self.dir.join("control.json")).unwrap();
    }

    fn spans(&self) -> Vec<Value> {
        lines(&self.dir.join("spans.jsonl"))
    }

    fn requests(&self) -> Vec<Value> {
        lines(&self.dir.join("requests.jsonl"))
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.kill();
    }
}

fn lines(p: &Path) -> Vec<Value> {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Waits, up to 60 s, for `cond` (looking every 20 ms); panics with `what` otherwise.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn attr<'a>(span: &'a Value, key: &str) -> &'a Value {
    &span["attributes"][key]
}

/// Appends `n` refusals straight to the world's trail (fast: no process per record).
fn append_refusals(w: &World, n: usize) {
    std::fs::create_dir_all(&w.hcp_home).unwrap();
    let log = AuditLog::new(&Home::open(&w.hcp_home).unwrap()).durable(false);
    for i in 0..n {
        log.append(&Entry {
            principal: format!("agent-{}", i % 7),
            project: None,
            pack_id: Some("walprobe".into()),
            verb_key: "mark".into(),
            operation: None,
            land: None,
            decision: Decision::Deny,
            code: Some(hcp_model::Code::MissingGrant),
            args_digest: format!("hmac-sha256:{i:064x}"),
            exit_code: None,
            duration_ms: 1,
            extra: BTreeMap::new(),
        })
        .unwrap();
    }
}

fn spawn_export(w: &World, args: &[&str]) -> Child {
    let mut c = Command::new(common::hcp_bin());
    c.env_clear()
        .env("HOME", &w.home)
        .env("HCP_HOME", &w.hcp_home)
        .env("PATH", w.path_var())
        .env("LANG", "C")
        .env("NO_COLOR", "1")
        .current_dir(&w.work)
        .args(["audit", "export"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c.spawn().unwrap()
}

fn stop(child: Child) -> (i32, String, String) {
    // SAFETY: signalling our own child by its pid.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn sigkill(mut child: Child) -> String {
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The span ids received, each with how often it came.
fn census(spans: &[Value]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for s in spans {
        *m.entry(s["span_id"].as_str().unwrap().to_owned())
            .or_insert(0) += 1;
    }
    m
}

#[test]
fn the_spans_parse_with_the_official_definitions_and_carry_the_attributes() {
    if !need_receiver() {
        return;
    }
    let w = exec_common::world(&["walprobe"]);
    std::fs::write(
        w.hcp_home.join("policy.yaml"),
        "schema_version: histos.policy/0.1
tools:
  walprobe.mark:
    access: write
    args:
      path: {type: string}
      text: {type: string}
roles:
  agent:
    allow: [walprobe.mark]
",
    )
    .unwrap();
    exec_common::grant(&w, "agent", "walprobe", &["verb.exec.write"]);
    let token = exec_common::session(&w, "agent", &["--role", "agent", "--project", "p1"]);
    let env = [("HCP_SESSION", token.as_str())];
    let (out, v) = exec_common::exec_json_env(
        &w,
        &["walprobe.mark", "--path", "marker.txt", "--text", "hi"],
        &env,
    );
    assert_eq!(exec_common::status(&out), 0, "{}", w.render(&out));
    let audit_id = v["audit_id"].as_str().unwrap().to_owned();
    // A refusal: the session holds no read grant.
    let (out, _) = exec_common::exec_json_env(&w, &["walprobe.big", "3"], &env);
    assert_eq!(exec_common::status(&out), 77, "{}", w.render(&out));
    let records = exec_common::audit_records(&w);

    let r = Receiver::start(&w.root().join("otlp"), 0);
    let out = w.run(&["audit", "export", "--otlp", &r.url, "--json"]);
    assert_eq!(exec_common::status(&out), 0, "{}", w.render(&out));
    let totals: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(totals["records"], json!(records.len()), "{totals}");
    let spans = r.spans();
    assert!(r.requests().iter().all(|q| q["status"] == 200));

    // The call: one execute_tool span, its guardrail child, both of one trace.
    let call: Vec<&Value> = spans
        .iter()
        .filter(|s| s["name"] == "execute_tool walprobe.mark")
        .collect();
    assert_eq!(call.len(), 1, "{spans:#?}");
    let call = call[0];
    assert_eq!(call["kind"], "SPAN_KIND_INTERNAL");
    assert_eq!(attr(call, "gen_ai.operation.name"), "execute_tool");
    assert_eq!(attr(call, "gen_ai.tool.name"), "walprobe.mark");
    assert_eq!(attr(call, "gen_ai.tool.call.id"), audit_id.as_str());
    assert_eq!(attr(call, "hcp.principal"), "agent");
    assert_eq!(attr(call, "hcp.project"), "p1");
    assert_eq!(attr(call, "hcp.land"), "local");
    assert_eq!(attr(call, "hcp.decision"), "allow");
    assert_eq!(attr(call, "hcp.exit_code"), 0);
    assert!(attr(call, "hcp.duration_ms").is_u64());
    let intent = records
        .iter()
        .find(|r| r["id"] == audit_id.as_str())
        .unwrap();
    assert_eq!(attr(call, "hcp.chain_hash"), &intent["hash"]);
    assert_eq!(
        call["span_id"].as_str().unwrap(),
        &intent["hash"].as_str().unwrap().rsplit_once(':').unwrap().1[..16],
        "the span id is the record hash's first 8 bytes"
    );
    assert_eq!(call["status_code"], "STATUS_CODE_UNSET");
    assert_eq!(
        call["resource_schema_url"],
        "https://opentelemetry.io/schemas/1.41.0"
    );
    assert_eq!(call["scope_schema_url"], call["resource_schema_url"]);
    assert_eq!(call["resource"]["service.name"], "hcp");
    let gate: Vec<&Value> = spans
        .iter()
        .filter(|s| s["parent_span_id"] == call["span_id"])
        .collect();
    assert_eq!(gate.len(), 1);
    let gate = gate[0];
    assert_eq!(gate["name"], "apply_guardrail hcp gate");
    assert_eq!(gate["trace_id"], call["trace_id"]);
    assert_eq!(attr(gate, "gen_ai.operation.name"), "apply_guardrail");
    assert_eq!(attr(gate, "gen_ai.security.target.type"), "tool_call");
    assert_eq!(attr(gate, "gen_ai.security.decision.type"), "allow");
    assert_eq!(
        attr(gate, "gen_ai.security.policy.id"),
        "hcp.runtime_policy"
    );
    assert_eq!(
        attr(gate, "gen_ai.security.policy.version"),
        &intent["policy_hash"]
    );

    // The refusal: an execute_tool span in error, its guardrail a deny with the code.
    let refused = spans
        .iter()
        .find(|s| s["name"] == "execute_tool walprobe.big")
        .unwrap();
    assert_eq!(refused["status_code"], "STATUS_CODE_ERROR");
    assert_eq!(attr(refused, "error.type"), "missing_grant");
    assert_eq!(attr(refused, "hcp.code"), "missing_grant");
    let deny = spans
        .iter()
        .find(|s| s["parent_span_id"] == refused["span_id"])
        .unwrap();
    assert_eq!(attr(deny, "gen_ai.security.decision.type"), "deny");
    assert_eq!(
        attr(deny, "gen_ai.security.decision.reason"),
        "missing_grant"
    );

    // Every record is in some span, each span id once; a second export sends nothing.
    let hashes: BTreeSet<&str> = spans
        .iter()
        .filter_map(|s| {
            attr(s, "hcp.chain_hash")
                .as_str()
                .or(attr(s, "hcp.outcome_chain_hash").as_str())
        })
        .collect();
    for rec in &records {
        let h = rec["hash"].as_str().unwrap();
        let in_span = hashes.contains(h)
            || spans
                .iter()
                .any(|s| attr(s, "hcp.outcome_chain_hash").as_str() == Some(h));
        assert!(in_span, "record {rec} has no span");
    }
    assert!(census(&spans).values().all(|&n| n == 1));
    let again = w.run(&["audit", "export", "--otlp", &r.url]);
    assert_eq!(exec_common::status(&again), 0, "{}", w.render(&again));
    assert_eq!(r.spans().len(), spans.len(), "nothing is sent twice");
}

#[test]
fn the_collector_down_answering_500_and_answering_slowly() {
    if !need_receiver() {
        return;
    }
    let w = World::new();
    append_refusals(&w, 30);
    // Down: a port nothing listens on; a one-shot export gives up after its tries, exit 1,
    // and the cursor has not moved.
    let dir = w.root().join("otlp");
    let mut r = Receiver::start(&dir, 0);
    let port = r.port;
    let url = r.url.clone();
    r.kill();
    let out = w.run(&["audit", "export", "--otlp", &url, "--tries", "2"]);
    assert_eq!(exec_common::status(&out), 1, "{}", w.render(&out));
    let text = w.render(&out);
    assert!(text.contains("export_failed"), "{text}");
    assert!(text.contains("connection refused"), "{text}");

    // Down, then up: a follower retries until the collector comes, then sends everything.
    let child = spawn_export(&w, &["--otlp", &url, "--follow", "--batch", "10"]);
    let r = Receiver::start(&dir, port);
    wait_for("every span", || r.spans().len() == 60);
    // Answering 500: the follower keeps the batch and tries again; nothing is lost.
    r.control(json!({"status": 500}));
    append_refusals(&w, 5);
    wait_for("a 500", || r.requests().iter().any(|q| q["status"] == 500));
    r.control(json!({}));
    wait_for("the five new records", || r.spans().len() == 70);
    // Answering slowly (past the exporter's time-out): tried again; the slow answers'
    // spans are kept by the collector too, so only that batch's spans repeat.
    let (code, _, stderr) = stop(child);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("the collector answered 500"), "{stderr}");
    r.control(json!({"delay": 1.5}));
    append_refusals(&w, 3);
    let child = spawn_export(
        &w,
        &[
            "--otlp",
            &url,
            "--follow",
            "--timeout",
            "1s",
            "--batch",
            "10",
        ],
    );
    wait_for("a slow answer", || {
        r.requests()
            .iter()
            .any(|q| q["status"] == 200 && q["delay"] == 1.5)
    });
    r.control(json!({}));
    wait_for("the slow batch taken", || {
        census(&r.spans()).len() == 76 && {
            let reqs = r.requests();
            reqs.last().is_some_and(|q| q["delay"] == 0.0)
        }
    });
    let (code, _, stderr) = stop(child);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("did not answer in time"), "{stderr}");
    let slow_answers = |r: &Receiver| {
        let q = r.requests();
        let started = q.iter().filter(|q| q["status"] == "started").count();
        let done = q
            .iter()
            .filter(|q| q["status"] == 200 && q["delay"] == 1.5)
            .count();
        (started, done)
    };
    wait_for("the slow answers to end", || {
        let (started, done) = slow_answers(&r);
        started == done
    });
    let c = census(&r.spans());
    assert_eq!(c.len(), 76, "every record's two spans");
    let repeated: usize = c.values().map(|n| n - 1).sum();
    let slow = slow_answers(&r).1;
    assert_eq!(
        repeated,
        6 * slow,
        "only the slow batch (3 records, 6 spans) repeats, once per slow answer"
    );
}

#[test]
fn the_exporter_and_the_collector_killed_mid_batch_then_restarted() {
    if !need_receiver() {
        return;
    }
    let w = World::new();
    const N: usize = 600;
    const BATCH: usize = 50;
    append_refusals(&w, N);
    let dir = w.root().join("otlp");
    let mut r = Receiver::start(&dir, 0);
    let (url, port) = (r.url.clone(), r.port);
    r.control(json!({"delay": 0.05}));
    let batch = BATCH.to_string();
    let args = [
        "--otlp",
        url.as_str(),
        "--follow",
        "--batch",
        batch.as_str(),
    ];
    let mut said = String::new();
    // Kill the exporter a few times mid-way, and the collector once.
    for round in 0..3 {
        let child = spawn_export(&w, &args);
        let seen = r.spans().len();
        wait_for("progress", || r.spans().len() >= seen + 2 * BATCH * 2);
        said.push_str(&sigkill(child));
        if round == 1 {
            r.kill();
            r = Receiver::start(&dir, port);
            r.control(json!({"delay": 0.05}));
        }
    }
    r.control(json!({}));
    let child = spawn_export(&w, &args);
    wait_for("every record", || census(&r.spans()).len() == 2 * N);
    let (code, _, stderr) = stop(child);
    assert_eq!(code, 0, "{stderr}");
    said.push_str(&stderr);
    let c = census(&r.spans());
    assert_eq!(c.len(), 2 * N, "every record exported: no gap");
    let repeated: usize = c.values().map(|n| n - 1).sum();
    // Four starts after a stop: each repeats at most the one batch in flight.
    assert!(
        repeated <= 4 * 2 * BATCH,
        "duplicates bounded by one batch per restart: {repeated}"
    );
    if repeated > 0 {
        assert!(said.contains("is sent again"), "a repeat is said: {said}");
    }
    // The cursor is at the end: a one-shot export sends nothing more.
    let before = r.spans().len();
    let out = w.run(&["audit", "export", "--otlp", &url]);
    assert_eq!(exec_common::status(&out), 0, "{}", w.render(&out));
    assert_eq!(r.spans().len(), before);
}

#[test]
fn a_damaged_record_stops_the_export_there_and_says_so() {
    if !need_receiver() {
        return;
    }
    let w = World::new();
    append_refusals(&w, 10);
    let trail = w.hcp_home.join("audit/audit.jsonl");
    let text = std::fs::read_to_string(&trail).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines[5] = lines[5].replace("agent-5", "agent-X");
    std::fs::write(&trail, lines.join("\n") + "\n").unwrap();
    let r = Receiver::start(&w.root().join("otlp"), 0);
    let out = w.run(&["audit", "export", "--otlp", &r.url]);
    let text = w.render(&out);
    assert_eq!(exec_common::status(&out), 1, "{text}");
    assert!(text.contains("record 6 of the trail"), "{text}");
    assert!(text.contains("hash_mismatch"), "{text}");
    assert!(text.contains("exported 5 records"), "{text}");
    assert_eq!(census(&r.spans()).len(), 10, "the five records before it");
    // Again: it stops at the same place and sends nothing twice.
    let out = w.run(&["audit", "export", "--otlp", &r.url]);
    assert_eq!(exec_common::status(&out), 1);
    assert_eq!(r.spans().len(), 10);
}

#[test]
fn a_fleets_chains_are_exported_from_any_machine() {
    if !need_receiver() {
        return;
    }
    let Some(url) = fleet_support::url() else {
        return;
    };
    let (_schema, machines) = fleet_support::fleet("export", &[&url, &url], &["walprobe"]);
    for m in &machines {
        let (status, _) = m.exec(None, &["walprobe.big", "3"]);
        assert_eq!(status, 0);
        let (status, _) = m.exec(None, &["walprobe.nosuch"]);
        assert_eq!(status, 66);
    }
    let r = Receiver::start(&machines[0].w.root().join("otlp"), 0);
    let out = machines[0].run(&["audit", "export", "--otlp", &r.url, "--json"]);
    assert_eq!(
        exec_common::status(&out),
        0,
        "{}",
        machines[0].w.render(&out)
    );
    let spans = r.spans();
    let ids: BTreeSet<String> = machines.iter().map(|m| m.id()).collect();
    let seen: BTreeSet<String> = spans
        .iter()
        .filter(|s| s["name"] == "execute_tool walprobe.big")
        .map(|s| attr(s, "hcp.machine").as_str().unwrap().to_owned())
        .collect();
    assert_eq!(seen, ids, "both machines' calls");
    assert!(census(&spans).values().all(|&n| n == 1));
    // Machine B's new call is exported by A's next run, and nothing twice.
    let (status, _) = machines[1].exec(None, &["walprobe.big", "4"]);
    assert_eq!(status, 0);
    let out = machines[0].run(&["audit", "export", "--otlp", &r.url]);
    assert_eq!(exec_common::status(&out), 0);
    let c = census(&r.spans());
    assert!(c.values().all(|&n| n == 1));
    assert_eq!(c.len(), spans.len() + 2);
}
