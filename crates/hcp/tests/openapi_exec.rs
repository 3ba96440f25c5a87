//! `hcp exec` of `kind: openapi` verbs (RUNTIME §1.3), end to end through the built `hcp`
//! against the example API server (`hcp_examples::api`, started by each test on a
//! loopback port): the same gate as a CLI call (arguments typed and bounded by the
//! document, grants, confirm, the runtime policy, the binding), one origin, the time-out,
//! the 1 MiB cap, cancel, the audit, the result shape; the pinned copy of the document and
//! the rug-pull guard; install-time refusals; `pass_through_unsupported`.
//!
//! `ApiServer::hits` counts the requests that reached the server, so "refused before
//! anything is sent" is asserted as "the server saw nothing".

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod exec_common;

use common::World;
use exec_common::{
    assert_audit_clean, assert_refused, audit_records, exec_json, exec_json_env, grant, install,
    last_audit, session, status,
};
use hcp_examples::api::{ApiServer, TASKS_DOCUMENT};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::Output;

/// A world with the example server running, `config.json` pointing the `tasks` pack (and
/// the test pack `apiprobe`) at it, the gold `tasks` pack installed and active, and the
/// owner connected as `ann`.
struct Api {
    w: World,
    server: ApiServer,
}

impl Api {
    fn new() -> Self {
        let w = exec_common::world(&[]);
        let server = ApiServer::start(0).unwrap();
        let a = Self { w, server };
        a.config(&json!({}));
        install(&a.w, &common::gold_pack("tasks"));
        a
    }

    /// Writes `config.json`: `packs.tasks.server` at the server plus `extra`'s keys.
    fn config(&self, extra: &Value) {
        let mut c = json!({"packs": {"tasks": {"server": format!("{}/v1", self.server.origin())}}});
        for (k, v) in extra.as_object().unwrap() {
            c[k] = v.clone();
        }
        std::fs::create_dir_all(&self.w.hcp_home).unwrap();
        std::fs::write(self.w.hcp_home.join("config.json"), c.to_string()).unwrap();
    }

    /// `hcp connect tasks --user USER` (as `token`'s session, else the owner).
    fn connect(&self, user: &str, token: Option<&str>) {
        let mut c = self.w.hcp();
        c.args(["connect", "tasks", "--user", user]);
        if let Some(t) = token {
            c.env("HCP_SESSION", t);
        }
        let out = c.output().unwrap();
        assert!(out.status.success(), "connect: {}", self.w.render(&out));
    }

    fn exec(&self, args: &[&str]) -> (Output, Value) {
        exec_json(&self.w, args)
    }

    fn exec_as(&self, token: &str, args: &[&str]) -> (Output, Value) {
        exec_json_env(&self.w, args, &[("HCP_SESSION", token)])
    }

    /// Runs `f` and asserts that the server saw no request meanwhile.
    fn sends_nothing<T>(&self, f: impl FnOnce() -> T) -> T {
        let before = self.server.hits();
        let t = f();
        assert_eq!(self.server.hits(), before, "nothing may be sent");
        t
    }

    /// Installs the test pack `apiprobe` (the server's `/test` endpoints) and returns its
    /// source directory. Its binding is the `tasks` family's: connect first.
    fn install_probe(&self) -> PathBuf {
        let dir = probe_pack(&self.w, &self.server.origin());
        install_joining(&self.w, &dir);
        dir
    }

    /// [`Api::new`], the owner connected as `ann`, and the test pack installed.
    fn with_probe() -> Self {
        let a = Self::new();
        a.connect("ann", None);
        a.install_probe();
        a
    }
}

/// `hcp install --activate --join-family tasks DIR`: the test pack joins the family of
/// the gold `tasks` pack, which is the owner's decision (RUNTIME §8).
fn install_joining(w: &World, dir: &std::path::Path) {
    let out = w.run(&[
        "install",
        "--activate",
        "--join-family",
        "tasks",
        &dir.display().to_string(),
    ]);
    assert!(out.status.success(), "{}", w.render(&out));
}

/// Writes the test pack `apiprobe`: the `/test` endpoints of the example server, its
/// document beside it with `origin` as its server, binding family `tasks` (so `hcp
/// connect tasks` gives it the bearer token too).
fn probe_pack(w: &World, origin: &str) -> PathBuf {
    let dir = w.root().join("src").join("apiprobe");
    std::fs::create_dir_all(&dir).unwrap();
    let surface = json!({
        "id": "apiprobe", "name": "API probe", "kind": "openapi",
        "transports": ["cli", "json_exec", "mcp"],
        "binding": {"mode": "user", "family": "tasks"},
        "openapi": {"spec": "openapi.json"},
        "verbs": {
            "echo": {"description": "Echo a GET.", "operation": "echoGet"},
            "post": {"description": "Echo a POST.", "operation": "echoPost"},
            "redirect": {"description": "A 302.", "operation": "redirect"},
            "fail": {"description": "A 500.", "operation": "fail"},
            "huge": {"description": "2 GiB.", "operation": "huge"},
            "hang": {"description": "Never answers.", "operation": "hang"},
            "close": {"description": "Closes early.", "operation": "close"}
        }
    });
    let read = json!({"operation": "read", "privacy": {"land": "personal"}});
    let policy = json!({
        "surface_id": "apiprobe", "version": 1,
        "verbs": {
            "echo": read, "redirect": read, "fail": read, "huge": read, "hang": read,
            "close": read,
            "post": {"operation": "write", "privacy": {"land": "personal"}}
        }
    });
    std::fs::write(dir.join("surface.json"), surface.to_string()).unwrap();
    std::fs::write(dir.join("policy.json"), policy.to_string()).unwrap();
    std::fs::write(
        dir.join("HARNESS.md"),
        "# HCP — API probe\n\n## Hot path\n\n| Command | CLI |\n|---|---|\n| `apiprobe.echo` | `hcp exec apiprobe.echo --item a` |\n\n## Anti-patterns\n\n- None.\n",
    )
    .unwrap();
    std::fs::write(dir.join("openapi.json"), probe_document(origin).to_string()).unwrap();
    dir
}

fn probe_document(origin: &str) -> Value {
    json!({
        "openapi": "3.1.0",
        "info": {"title": "probe", "version": "1"},
        "servers": [{"url": format!("{origin}/test")}],
        "paths": {
            "/echo/{item}": {
                "parameters": [{"name": "item", "in": "path", "required": true, "schema": {"type": "string"}}],
                "get": {
                    "operationId": "echoGet",
                    "parameters": [
                        {"name": "status", "in": "query", "schema": {"type": "string", "enum": ["open", "done"]}},
                        {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 100}},
                        {"name": "tags", "in": "query", "schema": {"type": "array", "items": {"type": "string"}}},
                        {"name": "X-Trace", "in": "header", "schema": {"type": "string"}}
                    ],
                    "security": [{"bearer": []}]
                },
                "post": {
                    "operationId": "echoPost",
                    "security": [{"key": []}],
                    "requestBody": {"required": true, "content": {"application/json": {"schema": {
                        "type": "object", "required": ["count"], "properties": {
                            "count": {"type": "integer", "minimum": 0},
                            "title": {"type": "string", "maxLength": 10}
                        }
                    }}}}
                }
            },
            "/redirect": {"get": {"operationId": "redirect", "parameters": [
                {"name": "to", "in": "query", "required": true, "schema": {"type": "string"}}]}},
            "/fail": {"get": {"operationId": "fail"}},
            "/huge": {"get": {"operationId": "huge"}},
            "/hang": {"get": {"operationId": "hang"}},
            "/close": {"get": {"operationId": "close"}}
        },
        "components": {"securitySchemes": {
            "bearer": {"type": "http", "scheme": "bearer"},
            "key": {"type": "apiKey", "in": "header", "name": "X-Api-Key"}
        }}
    })
}

/// Asserts an answered run: exit status, `exit_code`, `http_status`.
fn assert_answered(w: &World, out: &Output, v: &Value, exit: i32, http: Option<u16>) {
    assert_eq!(status(out), exit, "{}", w.render(out));
    assert_eq!(v["exit_code"], json!(exit), "{v}");
    assert_eq!(v["http_status"], json!(http), "{v}");
    assert_eq!(v["ok"], json!(exit == 0), "{v}");
}

// ───────────────────────────────────────────────────────────── the gold pack through the gate

#[test]
fn a_verb_runs_through_the_gate_and_answers_in_the_shape_of_a_cli_run() {
    let a = Api::new();
    a.connect("ann", None);
    let (out, v) = a.exec(&["tasks.add", "Buy milk", "--priority", "high"]);
    assert_answered(&a.w, &out, &v, 0, Some(201));
    assert_eq!(
        v["data"],
        json!({"id": "t-1", "title": "Buy milk", "priority": "high", "status": "open"})
    );
    assert_eq!(
        serde_json::from_str::<Value>(v["stdout"].as_str().unwrap()).unwrap(),
        v["data"]
    );
    assert_eq!(
        (v["truncated"].clone(), v["stderr"].clone()),
        (json!(false), json!(""))
    );
    assert_eq!(v["sandbox"]["network"]["mode"], json!("one origin"));
    assert_eq!(v["sandbox"]["network"]["origin"], json!(a.server.origin()));
    // Typed from the CLI's text: `--limit 5` is the integer 5.
    let (out, v) = a.exec(&["tasks.list", "--status", "open", "--limit", "5"]);
    assert_answered(&a.w, &out, &v, 0, Some(200));
    assert_eq!(v["data"][0]["id"], json!("t-1"));
    // The text face prints the body as it came, ended as a CLI's line is (the JSON
    // face's `stdout` is the body unchanged).
    let out = exec_common::exec(&a.w, &["tasks.show", "t-1"]);
    assert_eq!(status(&out), 0, "{}", a.w.render(&out));
    assert_eq!(
        serde_json::from_slice::<Value>(&out.stdout).unwrap()["title"],
        json!("Buy milk")
    );
    assert!(
        out.stdout.ends_with(b"}\n") && !out.stdout.ends_with(b"\n\n"),
        "{}",
        a.w.render(&out)
    );
    let (_, shown) = a.exec(&["tasks.show", "t-1"]);
    assert!(shown["stdout"].as_str().unwrap().ends_with('}'), "{shown}");
    // 404 is an answer: exit 1, its body in `data`.
    let (out, v) = a.exec(&["tasks.show", "t-9"]);
    assert_answered(&a.w, &out, &v, 1, Some(404));
    // Every call is in the audit, with its HTTP status, and the trail verifies.
    let rec = last_audit(&a.w);
    assert_eq!(
        (
            rec["verb_key"].clone(),
            rec["exit_code"].clone(),
            rec["http_status"].clone()
        ),
        (json!("show"), json!(1), json!(404)),
        "{rec}"
    );
    assert_eq!(rec["id"], v["audit_id"]);
    assert_audit_clean(&a.w);
}

#[test]
fn the_envelope_face_takes_typed_values() {
    let a = Api::new();
    a.connect("ann", None);
    let env =
        json!({"pack_id": "tasks", "verb_key": "add", "args": {"title": "x", "priority": "low"}});
    let (out, v) = exec_common::envelope(&a.w, env.to_string().as_bytes());
    assert_answered(&a.w, &out, &v, 0, Some(201));
    let env = json!({"pack_id": "tasks", "verb_key": "list", "args": {"limit": 500}});
    let (out, v) = a.sends_nothing(|| exec_common::envelope(&a.w, env.to_string().as_bytes()));
    assert_refused(&a.w, &out, &v, "arg_invalid", 65);
}

#[test]
fn show_and_the_skill_present_the_operations_arguments() {
    let a = Api::new();
    let out = a.w.run(&["show", "tasks", "--json"]);
    assert!(out.status.success(), "{}", a.w.render(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let list = v["verbs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["key"] == "list")
        .unwrap();
    assert_eq!(
        list["exec"],
        json!("hcp exec tasks.list [--status open|done] [--limit N]")
    );
    assert_eq!(list["http"]["request"], json!("GET /tasks"));
    assert_eq!(
        list["http"]["input_schema"]["properties"]["limit"],
        json!({"type": "integer", "minimum": 1, "maximum": 100, "default": 20, "description": "At most this many."})
    );
    assert_eq!(
        list["http"]["arguments"][1]["rules"],
        json!("integer, 1 to 100")
    );
    assert!(
        v["openapi"]["sha256"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    // The calls go to the operator's `packs.tasks.server`, and `show` says so.
    let used = format!("{}/v1", a.server.origin());
    assert_eq!(v["openapi"]["operator_server"], json!(used));
    let text = a.w.run(&["show", "tasks"]);
    let said = String::from_utf8_lossy(&text.stdout);
    assert!(
        said.contains("    --task_id  path, required  string, matching"),
        "{}",
        a.w.render(&text)
    );
    assert!(
        said.contains(&format!(
            "server `{used}` (`packs.tasks.server` in config.json; the document names `"
        )),
        "{said}"
    );
    let skill = std::fs::read_to_string(a.w.hcp_home.join("skills/tasks/SKILL.md")).unwrap();
    assert!(
        skill.contains("| `tasks.add` | `hcp exec tasks.add --title TITLE [--priority low\\|normal\\|high]` | write | personal | no |"),
        "{skill}"
    );
}

// ──────────────────────────────────────────────────── arguments refused before anything is sent

#[test]
fn arguments_outside_the_document_are_refused_before_anything_is_sent() {
    let a = Api::new();
    a.connect("ann", None);
    a.install_probe();
    for (args, code, needle) in [
        (
            vec!["tasks.list", "--status", "closed"],
            "arg_invalid",
            "must be one of",
        ),
        (vec!["tasks.list", "--limit", "0"], "arg_invalid", "`limit`"),
        (
            vec!["tasks.list", "--limit", "ten"],
            "arg_invalid",
            "`limit`",
        ),
        (vec!["tasks.add", "--title", ""], "arg_invalid", "`title`"),
        (
            vec!["tasks.add", "--priority", "high"],
            "arg_missing",
            "`title`",
        ),
        (
            vec!["tasks.list", "--owner", "bob"],
            "arg_unknown",
            "`owner`",
        ),
        (
            vec!["tasks.add", "--title", "x", "--id", "t-1"],
            "arg_unknown",
            "readOnly",
        ),
        (
            vec!["tasks.list", "open", "5", "extra"],
            "arg_unknown",
            "more values",
        ),
        (
            vec!["tasks.list", "--project", "p"],
            "tenant_in_args",
            "tenant",
        ),
        (vec!["tasks.show", "../t-1"], "arg_invalid", "`task_id`"),
        (
            vec!["apiprobe.echo", "../etc"],
            "arg_invalid",
            "path separator",
        ),
        (
            vec!["apiprobe.echo", "%2F.."],
            "arg_invalid",
            "path separator",
        ),
        (vec!["apiprobe.echo", "%252e%252e"], "arg_invalid", "`..`"),
        (vec!["apiprobe.echo", ".."], "arg_invalid", "`..`"),
        (
            vec!["apiprobe.echo", "a", "--x_trace", "a\u{7}b"],
            "arg_invalid",
            "control",
        ),
        (
            vec!["apiprobe.echo", "a", "--tags", "not json"],
            "arg_invalid",
            "`tags`",
        ),
        (
            vec!["apiprobe.post", "a", "--count", "-1"],
            "arg_invalid",
            "`count`",
        ),
        (
            vec![
                "apiprobe.post",
                "a",
                "--count",
                "1",
                "--title",
                "far too long",
            ],
            "arg_invalid",
            "`title`",
        ),
    ] {
        let (out, v) = a.sends_nothing(|| a.exec(&args));
        assert_refused(&a.w, &out, &v, code, 65);
        assert!(
            v["error"].as_str().unwrap().contains(needle),
            "{args:?}: {v}"
        );
        let rec = last_audit(&a.w);
        assert_eq!(
            (rec["decision"].clone(), rec["code"].clone()),
            (json!("deny"), json!(code))
        );
    }
    // The same values within the document's rules are sent.
    let (out, v) = a.exec(&[
        "apiprobe.echo",
        "a b",
        "--tags",
        "[\"x\",\"y\"]",
        "--x_trace",
        "t1",
    ]);
    assert_answered(&a.w, &out, &v, 0, Some(200));
    assert_eq!(v["data"]["url"], json!("/test/echo/a%20b?tags=x&tags=y"));
    assert_eq!(v["data"]["x-trace"], json!("t1"));
}

// ──────────────────────────────────────────────────────────────────── servers that misbehave

#[test]
fn a_redirect_to_another_origin_is_not_followed() {
    let a = Api::with_probe();
    let elsewhere = ApiServer::start(0).unwrap();
    let to = format!("{}/test/echo/stolen", elsewhere.origin());
    let (out, v) = a.exec(&["apiprobe.redirect", &to]);
    assert_answered(&a.w, &out, &v, 1, Some(302));
    assert!(
        v["stderr"]
            .as_str()
            .unwrap()
            .contains("follows no redirect"),
        "{v}"
    );
    assert!(v["stderr"].as_str().unwrap().contains(&to), "{v}");
    assert_eq!(elsewhere.hits(), 0, "the other origin saw nothing");
}

#[test]
fn a_server_error_is_exit_1_with_its_body() {
    let a = Api::with_probe();
    let (out, v) = a.exec(&["apiprobe.fail"]);
    assert_answered(&a.w, &out, &v, 1, Some(500));
    assert_eq!(v["data"], json!({"error": "boom"}));
}

#[test]
fn a_two_gigabyte_body_is_capped_at_one_mebibyte_and_truncated() {
    let a = Api::with_probe();
    let (out, v) = a.exec(&["apiprobe.huge"]);
    assert_answered(&a.w, &out, &v, 0, Some(200));
    assert_eq!(v["truncated"], json!(true));
    assert_eq!(v["stdout"].as_str().unwrap().len(), 1024 * 1024);
    assert_eq!(v["data"], Value::Null);
    assert_eq!(last_audit(&a.w)["http_status"], json!(200));
}

#[test]
fn a_server_that_never_answers_times_out() {
    let a = Api::with_probe();
    let (out, v) = a.exec(&["apiprobe.hang", "--timeout", "1"]);
    assert_eq!(status(&out), 124, "{}", a.w.render(&out));
    assert_eq!(
        (v["code"].clone(), v["ok"].clone()),
        (json!("timeout"), json!(false))
    );
    assert_eq!(last_audit(&a.w)["code"], json!("timeout"));
}

#[test]
fn a_server_that_closes_early_is_exit_1_with_what_arrived() {
    let a = Api::with_probe();
    let (out, v) = a.exec(&["apiprobe.close"]);
    assert_answered(&a.w, &out, &v, 1, Some(200));
    assert_eq!(v["stdout"], json!("0123456789"));
    assert!(
        v["stderr"].as_str().unwrap().contains("after 10 bytes"),
        "{v}"
    );
}

#[test]
fn a_signal_cancels_a_request_in_flight_and_the_call_is_audited() {
    let a = Api::with_probe();
    let mut c = std::process::Command::new(common::hcp_bin());
    c.env_clear()
        .env("HOME", &a.w.home)
        .env("HCP_HOME", &a.w.hcp_home)
        .env("PATH", a.w.path_var())
        .current_dir(&a.w.work)
        .args(["exec", "--json", "apiprobe.hang"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let before = a.server.hits();
    let child = c.spawn().unwrap();
    // The request has reached the server: nothing else can say so (polled, with a deadline).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while a.server.hits() == before {
        assert!(
            std::time::Instant::now() < deadline,
            "the request never arrived"
        );
        std::thread::yield_now();
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["code"], json!("cancelled"), "{}", a.w.render(&out));
    assert_eq!(last_audit(&a.w)["code"], json!("cancelled"));
}

#[test]
fn nothing_listening_and_no_server_at_all_are_bad_openapi_naming_the_server_key() {
    let a = Api::new();
    a.connect("ann", None);
    // The operator points the pack at a port nobody listens on.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = free.local_addr().unwrap().port();
    drop(free);
    std::fs::write(
        a.w.hcp_home.join("config.json"),
        json!({"packs": {"tasks": {"server": format!("http://127.0.0.1:{port}/v1")}}}).to_string(),
    )
    .unwrap();
    // No connection could be made, so nothing was sent: refused, naming the key.
    let (out, v) = a.exec(&["tasks.list"]);
    assert_refused(&a.w, &out, &v, "bad_openapi", 66);
    let error = v["error"].as_str().unwrap();
    assert!(
        error.contains(&format!("http://127.0.0.1:{port}/v1"))
            && error.contains("`packs.tasks.server`")
            && error.contains("nothing was sent"),
        "{v}"
    );
    assert_eq!(
        v["hint"],
        json!(
            "start the API's server, or point the pack at it: `hcp config set packs.tasks.server URL` (docs/config.md)"
        )
    );
    // Admitted, then refused: the trail's outcome says so.
    assert_eq!(last_audit(&a.w)["code"], json!("bad_openapi"));
    // The CLI face says the same.
    let out = a.w.hcp().args(["exec", "tasks.list"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("code: bad_openapi") && err.contains("hcp config set packs.tasks.server URL"),
        "{}",
        a.w.render(&out)
    );
    // A document whose server is relative, installed from a path: no server to send to.
    let dir = probe_pack(&a.w, "");
    install_joining(&a.w, &dir);
    let (out, v) = a.sends_nothing(|| a.exec(&["apiprobe.fail"]));
    assert_refused(&a.w, &out, &v, "bad_openapi", 66);
    assert!(
        v["hint"]
            .as_str()
            .unwrap()
            .contains("`hcp config set packs.apiprobe.server URL`"),
        "{v}"
    );
}

#[test]
fn a_bad_server_in_config_is_bad_config_at_its_place() {
    let a = Api::new();
    a.connect("ann", None);
    std::fs::write(
        a.w.hcp_home.join("config.json"),
        "{\"packs\": {\"tasks\":\n  {\"server\": \"file:///etc\"}}}",
    )
    .unwrap();
    let (out, v) = a.sends_nothing(|| a.exec(&["tasks.list"]));
    assert_refused(&a.w, &out, &v, "bad_config", 78);
    assert!(
        v["error"].as_str().unwrap().contains("line 2, column 4"),
        "{v}"
    );
}

// ────────────────────────────────────────────────────────────────── every gate step applies

#[test]
fn grants_apply_and_a_refused_agent_sends_nothing() {
    let a = Api::new();
    let agent = session(&a.w, "agent", &[]);
    let (out, v) = a.sends_nothing(|| a.exec_as(&agent, &["tasks.list"]));
    assert_refused(&a.w, &out, &v, "missing_grant", 77);
    grant(&a.w, "agent", "tasks", &["verb.exec.read"]);
    // Granted a read, not a write.
    let (out, v) = a.sends_nothing(|| a.exec_as(&agent, &["tasks.add", "x"]));
    assert_refused(&a.w, &out, &v, "missing_grant", 77);
}

#[test]
fn the_binding_is_the_agents_own_and_is_never_shown() {
    let a = Api::new();
    let agent = session(&a.w, "agent", &[]);
    grant(
        &a.w,
        "agent",
        "*",
        &["verb.exec.read", "verb.exec.write", "pack.connect"],
    );
    let (out, v) = a.sends_nothing(|| a.exec_as(&agent, &["tasks.list"]));
    assert_refused(&a.w, &out, &v, "binding_required", 77);
    assert!(
        v["hint"].as_str().unwrap().contains("hcp connect tasks"),
        "{v}"
    );
    // The connect verb is an operation; its JSON answer is the credential.
    let (out, v) = a.sends_nothing(|| a.exec_as(&agent, &["tasks.connect", "--user", "bob"]));
    assert_refused(&a.w, &out, &v, "connect_only", 77);
    a.connect("bob", Some(&agent));
    let (out, v) = a.exec_as(&agent, &["tasks.add", "bob's"]);
    assert_answered(&a.w, &out, &v, 0, Some(201));
    // The server echoes the header it got: the token is redacted from the body.
    a.install_probe();
    let (out, v) = a.exec_as(&agent, &["apiprobe.echo", "a"]);
    assert_answered(&a.w, &out, &v, 0, Some(200));
    assert_eq!(v["data"]["authorization"], json!("Bearer [redacted]"));
    assert!(!String::from_utf8_lossy(&out.stdout).contains("tok-bob"));
    // An apiKey scheme puts it in its header.
    let (out, v) = a.exec_as(&agent, &["apiprobe.post", "a", "--count", "2"]);
    assert_answered(&a.w, &out, &v, 0, Some(200));
    assert_eq!(v["data"]["x-api-key"], json!("[redacted]"));
    assert_eq!(v["data"]["body"], json!({"count": 2}));
    let text = std::fs::read_to_string(a.w.hcp_home.join("audit/audit.jsonl")).unwrap();
    assert!(
        !text.contains("tok-bob"),
        "the audit never holds the credential"
    );
}

#[test]
fn the_confirm_gate_applies() {
    let a = Api::new();
    a.connect("ann", None);
    a.exec(&["tasks.add", "x"]);
    let (out, v) = a.sends_nothing(|| a.exec(&["tasks.remove", "t-1"]));
    assert_refused(&a.w, &out, &v, "confirm_required", 77);
    assert_eq!(v["error"], json!("confirm required"));
    let (out, v) = a.exec(&["tasks.remove", "t-1", "--confirm"]);
    assert_answered(&a.w, &out, &v, 0, Some(204));
}

#[test]
fn the_runtime_policy_applies_to_arguments_and_output() {
    let a = Api::new();
    let agent = session(&a.w, "agent", &["--role", "reader"]);
    grant(
        &a.w,
        "agent",
        "*",
        &["verb.exec.read", "verb.exec.write", "pack.connect"],
    );
    a.connect("carl", Some(&agent));
    std::fs::write(
        a.w.hcp_home.join("policy.yaml"),
        "schema_version: histos.policy/0.1\npolicy_id: tasks-test\ntools:\n  tasks.connect:\n    access: write\n    args:\n      user: {type: string}\n  tasks.list:\n    access: read\n    args:\n      status: {type: string, enum: [open]}\n      limit: {type: integer, maximum: 10}\n  tasks.add:\n    access: write\n    args:\n      title: {type: string}\n      priority: {type: string}\nroles:\n  reader:\n    allow: [tasks.list, tasks.connect]\n",
    )
    .unwrap();
    let (out, v) = a.sends_nothing(|| a.exec_as(&agent, &["tasks.list", "--status", "done"]));
    assert_refused(&a.w, &out, &v, "arg_schema", 77);
    let (out, v) = a.sends_nothing(|| a.exec_as(&agent, &["tasks.list", "--limit", "50"]));
    assert_refused(&a.w, &out, &v, "arg_schema", 77);
    let (out, v) = a.sends_nothing(|| a.exec_as(&agent, &["tasks.add", "x"]));
    assert_refused(&a.w, &out, &v, "rbac", 77);
    let (out, v) = a.sends_nothing(|| a.exec_as(&agent, &["tasks.show", "t-1"]));
    assert_refused(&a.w, &out, &v, "unknown_tool", 77);
    let (out, v) = a.exec_as(&agent, &["tasks.list", "--status", "open", "--limit", "3"]);
    assert_answered(&a.w, &out, &v, 0, Some(200));
    assert!(last_audit(&a.w)["policy_hash"].is_string());
}

/// RUNTIME §5.3: an `openapi` verb is sent by hcp itself and reaches its one origin
/// whatever the network of the pack says (the network governs children), in every land.
#[test]
fn an_openapi_verb_reaches_its_one_origin_whatever_the_network_says() {
    let a = Api::new();
    a.connect("ann", None);
    let server = format!("{}/v1", a.server.origin());
    for config in [
        json!({"sandbox": {"network": "deny"}}),
        json!({"packs": {"tasks": {"network": "deny", "server": server}}}),
        json!({"packs": {"tasks": {"network": "host", "server": server}}}),
    ] {
        a.config(&config);
        let before = a.server.hits();
        let (out, v) = a.exec(&["tasks.list"]);
        assert_answered(&a.w, &out, &v, 0, Some(200));
        assert_eq!(a.server.hits(), before + 1, "{config}");
        assert_eq!(v["sandbox"]["network"]["mode"], json!("one origin"));
    }
    // In `local` land too.
    let dir = a.w.copy_pack("tasks");
    std::fs::copy(
        common::gold_pack("tasks").join("openapi.json"),
        dir.join("openapi.json"),
    )
    .unwrap();
    let policy = std::fs::read_to_string(dir.join("policy.json"))
        .unwrap()
        .replace("\"personal\"", "\"local\"");
    std::fs::write(dir.join("policy.json"), policy).unwrap();
    let out = a.w.run(&[
        "install",
        "--force",
        "--activate",
        &dir.display().to_string(),
    ]);
    assert!(out.status.success(), "{}", a.w.render(&out));
    a.config(&json!({"sandbox": {"network": "deny"}}));
    let (out, v) = a.exec(&["tasks.list"]);
    assert_answered(&a.w, &out, &v, 0, Some(200));
}

// ───────────────────────────────────────────────── the pinned copy and the rug-pull guard

#[test]
fn a_document_changed_at_its_url_is_not_used_until_a_reinstall_which_suspends_grants() {
    let a = Api::new();
    // The pack reads its document from the server's URL.
    let dir = a.w.copy_pack("tasks");
    let surface = std::fs::read_to_string(dir.join("surface.json"))
        .unwrap()
        .replace(
            "\"spec\": \"openapi.json\"",
            &format!("\"spec\": \"{}/openapi.json\"", a.server.origin()),
        );
    std::fs::write(dir.join("surface.json"), surface).unwrap();
    let out = a.w.run(&[
        "install",
        "--force",
        "--activate",
        &dir.display().to_string(),
    ]);
    assert!(out.status.success(), "{}", a.w.render(&out));
    let agent = session(&a.w, "agent", &[]);
    grant(
        &a.w,
        "agent",
        "tasks",
        &["verb.exec.read", "verb.exec.write", "pack.connect"],
    );
    a.connect("dora", Some(&agent));
    let (out, v) = a.exec_as(&agent, &["tasks.list", "--limit", "50"]);
    assert_answered(&a.w, &out, &v, 0, Some(200));

    // The document changes at its URL: the pinned copy is still what exec uses.
    let mut changed: Value = serde_json::from_str(TASKS_DOCUMENT).unwrap();
    changed["paths"]["/tasks"]["get"]["parameters"][1]["schema"]["maximum"] = json!(5);
    a.server.set_document(changed.to_string());
    let (out, v) = a.exec_as(&agent, &["tasks.list", "--limit", "50"]);
    assert_answered(&a.w, &out, &v, 0, Some(200));

    // A reinstall reads it again: the new bound holds, and the agent's grants made before
    // the change are suspended until granted again.
    let out = a.w.run(&[
        "install",
        "--force",
        "--activate",
        &dir.display().to_string(),
    ]);
    assert!(out.status.success(), "{}", a.w.render(&out));
    let (out, v) = a.sends_nothing(|| a.exec(&["tasks.list", "--limit", "50"]));
    assert_refused(&a.w, &out, &v, "arg_invalid", 65);
    let (out, v) = a.sends_nothing(|| a.exec_as(&agent, &["tasks.list", "--limit", "3"]));
    assert_refused(&a.w, &out, &v, "missing_grant", 77);
    assert!(v["error"].as_str().unwrap().contains("suspended"), "{v}");
    grant(&a.w, "agent", "tasks", &["verb.exec.read"]);
    let (out, v) = a.exec_as(&agent, &["tasks.list", "--limit", "3"]);
    assert_answered(&a.w, &out, &v, 0, Some(200));
}

// ────────────────────────────────────────────────────────────────── install-time refusals

#[test]
fn documents_hcp_cannot_use_are_refused_at_install_and_the_store_is_unchanged() {
    let a = Api::new();
    let tasks = a.w.hcp_home.join("packs/tasks");
    let record = std::fs::read(tasks.join(".hcp/record.json")).unwrap();
    let pinned = std::fs::read(tasks.join(".hcp/openapi.document")).unwrap();
    let gold: Value = serde_json::from_str(TASKS_DOCUMENT).unwrap();
    let edit = |f: &dyn Fn(&mut Value)| {
        let mut v = gold.clone();
        f(&mut v);
        v.to_string().into_bytes()
    };
    let mut twenty_mb = b"{\"openapi\": \"3.1.0\", \"x-pad\": \"".to_vec();
    twenty_mb.extend(std::iter::repeat_n(b'a', 20 * 1000 * 1000));
    twenty_mb.extend(b"\"}");
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "not openapi 3",
            br#"{"swagger": "2.0", "info": {}, "paths": {}}"#.to_vec(),
            "/swagger",
        ),
        (
            "a $ref loop",
            edit(&|v| {
                v["components"]["schemas"]["Task"] = json!({"$ref": "#/components/schemas/Token"});
                v["components"]["schemas"]["Token"] = json!({"$ref": "#/components/schemas/Task"});
            }),
            "loop",
        ),
        (
            "one operationId twice",
            edit(&|v| v["paths"]["/tasks"]["post"]["operationId"] = json!("listTasks")),
            "operationId",
        ),
        (
            "a server that is not http",
            edit(&|v| v["servers"][0]["url"] = json!("ftp://tasks.example/v1")),
            "ftp",
        ),
        ("20 MB", twenty_mb, "bytes"),
    ];
    for (what, doc, needle) in cases {
        let dir = a.w.copy_pack("tasks");
        std::fs::write(dir.join("openapi.json"), &doc).unwrap();
        let out = a.w.run(&["install", "--force", &dir.display().to_string()]);
        assert_eq!(status(&out), 1, "{what}: {}", a.w.render(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("bad_openapi"), "{what}: {err}");
        assert!(err.contains(needle), "{what}: {err}");
        assert_eq!(
            std::fs::read(tasks.join(".hcp/record.json")).unwrap(),
            record,
            "{what}"
        );
        assert_eq!(
            std::fs::read(tasks.join(".hcp/openapi.document")).unwrap(),
            pinned,
            "{what}"
        );
    }
    // An operation the verbs name that the document lacks.
    let dir = a.w.copy_pack("tasks");
    std::fs::write(
        dir.join("openapi.json"),
        edit(&|v| {
            v["paths"]["/tasks"]["get"]["operationId"] = json!("listAll");
        }),
    )
    .unwrap();
    let out = a.w.run(&["install", "--force", &dir.display().to_string()]);
    assert_eq!(status(&out), 1, "{}", a.w.render(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown_operation"));
    assert_eq!(
        std::fs::read(tasks.join(".hcp/record.json")).unwrap(),
        record
    );
}

// ─────────────────────────────────────────────────────────────────────────── pass_through

#[test]
fn a_pass_through_subcommand_is_pass_through_unsupported() {
    let w = exec_common::world(&[]);
    let dir = w.copy_pack("transit");
    let surface = std::fs::read_to_string(dir.join("surface.json"))
        .unwrap()
        .replacen(
            "\"verbs\"",
            "\"pass_through\": {\"allowedSubcommands\": [\"raw\"]},\n  \"verbs\"",
            1,
        );
    std::fs::write(dir.join("surface.json"), surface).unwrap();
    install(&w, &dir);
    for target in ["transit.raw", "raw"] {
        let (out, v) = exec_json(&w, &[target]);
        assert_refused(&w, &out, &v, "pass_through_unsupported", 66);
        assert!(
            v["hint"].as_str().unwrap().contains("hcp pack promote"),
            "{v}"
        );
    }
    let env = json!({"pack_id": "transit", "verb_key": "raw", "args": {}});
    let (out, v) = exec_common::envelope(&w, env.to_string().as_bytes());
    assert_refused(&w, &out, &v, "pass_through_unsupported", 66);
    // Not listed: still `unknown_verb`.
    let (out, v) = exec_json(&w, &["transit.push"]);
    assert_refused(&w, &out, &v, "unknown_verb", 66);
    assert_eq!(
        audit_records(&w).last().unwrap()["code"],
        json!("unknown_verb")
    );
}

// ──────────────────────────────────────────────────────────────────────────────── hcp mcp

#[test]
fn mcp_lists_openapi_verbs_with_the_documents_schema_and_calls_them() {
    use std::io::{BufRead, BufReader, Write};
    let a = Api::new();
    a.connect("ann", None);
    let mut child = std::process::Command::new(common::hcp_bin())
        .env_clear()
        .env("HOME", &a.w.home)
        .env("HCP_HOME", &a.w.hcp_home)
        .env("PATH", a.w.path_var())
        .current_dir(&a.w.work)
        .arg("mcp")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut ask = |id: u64, method: &str, params: Value| -> Value {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(stdin, "{msg}").unwrap();
        if id == 1 {
            let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
            writeln!(stdin, "{note}").unwrap();
        }
        stdin.flush().unwrap();
        loop {
            let mut line = String::new();
            assert!(
                stdout.read_line(&mut line).unwrap() > 0,
                "the server closed stdout"
            );
            let m: Value = serde_json::from_str(&line).unwrap();
            if m["id"] == json!(id) {
                return m;
            }
        }
    };
    let init = json!({"protocolVersion": "2025-06-18", "capabilities": {},
                      "clientInfo": {"name": "t", "version": "0"}});
    ask(1, "initialize", init);
    let tools = ask(2, "tools/list", json!({}));
    let list = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "tasks.list")
        .cloned()
        .unwrap();
    assert_eq!(
        list["inputSchema"]["properties"]["status"],
        json!({"type": "string", "enum": ["open", "done"], "description": "Only tasks in this state."})
    );
    assert_eq!(list["inputSchema"]["additionalProperties"], json!(false));
    let r = ask(
        3,
        "tools/call",
        json!({"name": "tasks.add", "arguments": {"title": "via mcp"}}),
    );
    assert_eq!(r["result"]["isError"], json!(false), "{r}");
    let r = ask(
        4,
        "tools/call",
        json!({"name": "tasks.list", "arguments": {"limit": 500}}),
    );
    assert_eq!(r["result"]["isError"], json!(true), "{r}");
    assert_eq!(
        r["result"]["structuredContent"]["code"],
        json!("arg_invalid"),
        "{r}"
    );
    drop(stdin);
    let _ = child.wait();
}
