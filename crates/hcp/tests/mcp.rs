//! `hcp mcp` end to end: the official Python SDK and the MCP inspector's CLI as clients,
//! and a raw newline-delimited JSON-RPC client for the edges (bad input, sessions, the
//! tool list changing, a client that goes away mid-call).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod mcp_common;
mod mcp_http_common;

use common::World;
use mcp_common::{Raw, last_audit, refusal_code, world_command, world_with};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Skips (saying why where a plain `cargo test` shows it) outside CI, fails in CI.
fn skip_or_fail(reason: &str) {
    common::skip::skip(reason);
}

/// The interpreter with the official Python SDK, or `None` after a visible skip (a
/// failure under `CI=true`).
fn python_with_the_sdk(w: &World, script: &Path) -> Option<String> {
    // The interpreter on the caller's PATH (a pyenv shim needs the caller's HOME to find
    // it), then run with the world's environment.
    let python = match Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
    {
        Ok(o) if o.status.success() => String::from_utf8(o.stdout).unwrap().trim().to_owned(),
        Ok(o) => {
            skip_or_fail(&format!(
                "python3 fails: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ));
            return None;
        }
        Err(e) => {
            skip_or_fail(&format!("python3 cannot run: {e}"));
            return None;
        }
    };
    match world_command(w, &python)
        .arg(script)
        .arg("--probe")
        .output()
    {
        Ok(o) if o.status.success() => Some(python),
        Ok(o) => {
            skip_or_fail(&format!(
                "the python package `mcp` is missing (`pip install mcp`): {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ));
            None
        }
        Err(e) => {
            skip_or_fail(&format!("python3 cannot run: {e}"));
            None
        }
    }
}

#[test]
fn python_sdk_client_lists_calls_and_meets_the_confirm_gate() {
    let w = world_with(&["transit", "echo"]);
    let script = common::repo_root().join("crates/hcp/tests/mcp_client.py");
    let Some(python) = python_with_the_sdk(&w, &script) else {
        return;
    };
    let out = world_command(&w, &python)
        .arg(&script)
        .arg(common::hcp_bin())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    insta::assert_snapshot!(
        "python_sdk_session",
        w.filter(&serde_json::to_string_pretty(&v).unwrap())
    );
    // The points of the issue, said once more without the snapshot.
    assert_eq!(v["read"]["isError"], false);
    assert_eq!(v["write_unconfirmed"]["text"][0], "confirm required");
    assert_eq!(v["write_unconfirmed"]["code"], "confirm_required");
    assert_eq!(v["file_after_refusal"], false);
    assert_eq!(v["write_confirmed"]["isError"], false);
    assert_eq!(v["file_after_confirm"], "hello");
    assert_eq!(v["unknown_tool"]["code"], -32602);
}

/// The official Python SDK as an agent's client whose person is asked (its
/// `elicitation_callback` accepts the first question and declines the second): the session
/// sees only the tools its grants and the runtime policy give it, `confirm` is not offered,
/// the accepted command runs once, the declined one is `confirm required`, the SDK checks
/// the structured result against the `outputSchema` from the policy's `returns`, and a tool
/// not listed is refused by the gate when called by name.
#[test]
fn python_sdk_client_asks_the_person_and_sees_only_its_tools() {
    let w = world_with(&["transit", "echo"]);
    let script = common::repo_root().join("crates/hcp/tests/mcp_client.py");
    let Some(python) = python_with_the_sdk(&w, &script) else {
        return;
    };
    std::fs::write(
        w.hcp_home.join("policy.json"),
        json!({
            "schema_version": "histos.policy/0.1",
            "tools": {
                "echo.echo.say": {"args": {"text": {"type": "string"}},
                                  "returns": {"text": {"type": "string", "max_length": 100}}},
                "echo.echo.write": {"access": "write",
                                    "args": {"name": {"type": "string"}, "text": {"type": "string"}}}
            },
            "roles": {"agent": {"allow": ["echo.echo.say", "echo.echo.write"]}}
        })
        .to_string(),
    )
    .unwrap();
    let out = w.run(&[
        "session",
        "start",
        "--principal",
        "agent-1",
        "--role",
        "agent",
    ]);
    assert!(out.status.success(), "{}", w.render(&out));
    let token = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    for args in [
        [
            "grant",
            "agent-1",
            "echo",
            "verb.exec.read",
            "verb.exec.write",
        ]
        .as_slice(),
        &["grant", "agent-1", "transit", "verb.exec.read"],
    ] {
        let out = w.run(args);
        assert!(out.status.success(), "{}", w.render(&out));
    }
    let out = world_command(&w, &python)
        .env("HCP_SESSION", &token)
        .arg(&script)
        .arg("--person")
        .arg(common::hcp_bin())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    insta::assert_snapshot!(
        "python_sdk_person",
        w.filter(
            &serde_json::to_string_pretty(&v)
                .unwrap()
                .replace(common::bin_dir().to_str().unwrap(), "[BIN]")
        )
    );
    assert_eq!(v["protocol"], "2025-11-25");
    assert_eq!(v["tools"], json!(["echo.echo.say", "echo.echo.write"]));
    assert_eq!(v["write properties"], json!(["name", "text"]));
    assert_eq!(v["say"]["structured"], json!({"text": "hi"}));
    assert_eq!(v["write accepted"]["isError"], false);
    assert_eq!(v["a.txt"], "accepted");
    assert_eq!(v["write declined"]["text"][0], "confirm required");
    assert_eq!(v["b.txt exists"], false);
    assert_eq!(v["unlisted"]["code"], "unknown_tool");
    assert_eq!(v["asked"].as_array().unwrap().len(), 2);
    assert_eq!(last_audit(&w)["code"], "unknown_tool");
}

/// The MCP inspector's CLI mode lists the tools and meets the confirm gate, run as the
/// README runs it. The launcher: `HCP_TEST_INSPECTOR` (`.ci/run` installs the inspector
/// and Node 22 in one npm prefix and names its `mcp-inspector`; its directory goes first on
/// `PATH`, so the prefix's Node runs it), else `mcp-inspector` on `PATH`, else the README's
/// `npx -y` command (with `-p node@22.23.3` when the system's Node is older than the 22.19
/// the inspector needs). Without Node or the inspector: skipped visibly, a failure under
/// `CI=true`.
#[test]
fn inspector_cli_lists_and_calls() {
    let w = world_with(&["echo"]);
    let Some(launcher) = Inspector::find() else {
        return;
    };
    let target = [
        common::hcp_bin().to_str().unwrap().to_owned(),
        "mcp".to_owned(),
    ];
    let inspector = |args: &[&str]| {
        let mut all: Vec<String> = vec!["-e".into(), format!("HCP_HOME={}", w.hcp_home.display())];
        all.extend(args.iter().map(|a| (*a).to_owned()));
        all.push("--".into());
        all.extend(target.iter().cloned());
        launcher.run(&w, &all)
    };
    let listed = match inspector(&["--method", "tools/list"]) {
        Ok(o) if o.status.success() => o,
        Ok(o) => {
            return skip_or_fail(&format!(
                "the inspector could not be installed or run: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ));
        }
        Err(e) => return skip_or_fail(&format!("the inspector cannot run: {e}")),
    };
    let v: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let names: Vec<&str> = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"echo.echo.write"), "{names:?}");
    let refused = inspector(&[
        "--method",
        "tools/call",
        "--tool-name",
        "echo.echo.write",
        "--tool-arg",
        "name=n.txt",
        "--tool-arg",
        "text=hi",
    ])
    .unwrap();
    let text = String::from_utf8_lossy(&refused.stdout);
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["isError"], true, "{text}");
    assert_eq!(v["content"][0]["text"], "confirm required", "{text}");
    assert!(!w.work.join("n.txt").exists());
    let ran = inspector(&[
        "--method",
        "tools/call",
        "--tool-name",
        "echo.echo.write",
        "--tool-arg",
        "name=n.txt",
        "--tool-arg",
        "text=hi",
        "--tool-arg",
        "confirm=true",
    ])
    .unwrap();
    assert!(
        ran.status.success(),
        "{}",
        String::from_utf8_lossy(&ran.stdout)
    );
    assert_eq!(std::fs::read_to_string(w.work.join("n.txt")).unwrap(), "hi");
    // An agent's session sees only what it may call. The inspector will not call a tool
    // it was not shown (the raw and Python clients check that the gate refuses one called
    // by name).
    let out = w.run(&["session", "start", "--principal", "agent-1"]);
    assert!(out.status.success(), "{}", w.render(&out));
    let token = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let out = w.run(&["grant", "agent-1", "echo", "verb.exec.read"]);
    assert!(out.status.success(), "{}", w.render(&out));
    let session = format!("HCP_SESSION={token}");
    let listed = inspector(&["-e", &session, "--method", "tools/list"]).unwrap();
    let v: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let names: Vec<&str> = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"echo.echo.say"), "{names:?}");
    assert!(!names.contains(&"echo.echo.write"), "{names:?}");
    let refused = inspector(&[
        "-e",
        &session,
        "--method",
        "tools/call",
        "--tool-name",
        "echo.echo.write",
        "--tool-arg",
        "name=m.txt",
        "--tool-arg",
        "text=hi",
        "--tool-arg",
        "confirm=true",
    ])
    .unwrap();
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("tool_not_found"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    assert!(!w.work.join("m.txt").exists());
}

/// How the tests run the MCP inspector's CLI. The launcher: `HCP_TEST_INSPECTOR`
/// (`.ci/run` installs the inspector and Node 22 in one npm prefix and names its
/// `mcp-inspector`; its directory goes first on `PATH`, so the prefix's Node runs it), else
/// `mcp-inspector` on `PATH`, else the README's `npx -y` command (with `-p node@22.23.3`
/// when the system's Node is older than the 22.19 the inspector needs).
struct Inspector {
    launcher: Vec<String>,
    path_first: Option<std::path::PathBuf>,
}

impl Inspector {
    /// The launcher, or `None` after a visible skip (a failure under `CI=true`).
    fn find() -> Option<Self> {
        const VERSION: &str = "2.12.0";
        const NODE: &str = "22.23.3";
        let mut path_first: Option<std::path::PathBuf> = None;
        let launcher: Vec<String> = match std::env::var("HCP_TEST_INSPECTOR") {
            Ok(p) if !p.is_empty() => {
                path_first = Path::new(&p).parent().map(Path::to_path_buf);
                vec![p]
            }
            _ if which_on_path("mcp-inspector").is_some() => vec!["mcp-inspector".into()],
            _ => {
                if which_on_path("npx").is_none() || which_on_path("node").is_none() {
                    skip_or_fail("node and npx are not on PATH (the inspector is a node program)");
                    return None;
                }
                let inspector = format!("@modelcontextprotocol/inspector@{VERSION}");
                if node_at_least(22, 19) {
                    vec!["npx".into(), "-y".into(), inspector]
                } else {
                    vec![
                        "npx".into(),
                        "-y".into(),
                        "-p".into(),
                        format!("node@{NODE}"),
                        "-p".into(),
                        inspector,
                        "--".into(),
                        "mcp-inspector".into(),
                    ]
                }
            }
        };
        Some(Self {
            launcher,
            path_first,
        })
    }

    /// Runs `mcp-inspector --cli ARGS` in `w`'s environment.
    fn run(&self, w: &World, args: &[String]) -> std::io::Result<std::process::Output> {
        let mut c = world_command(w, &self.launcher[0]);
        // npx and node need the system PATH and a writable npm cache (HOME is the world's).
        c.env(
            "PATH",
            format!(
                "{}{}:{}",
                self.path_first
                    .as_ref()
                    .map(|p| format!("{}:", p.display()))
                    .unwrap_or_default(),
                w.path_var(),
                std::env::var("PATH").unwrap_or_default()
            ),
        );
        // npx keeps its downloads in the user's npm cache, not the world's HOME.
        if let Some(h) = std::env::var_os("HOME") {
            c.env("npm_config_cache", Path::new(&h).join(".npm"));
        }
        c.args(&self.launcher[1..]).arg("--cli").args(args);
        c.output()
    }
}

/// The inspector's CLI over Streamable HTTP, the session token as its `Authorization`
/// header: it lists the session's tools, meets the confirm gate (it declares no
/// elicitation, so `confirm=true` among the arguments runs the write), and gets nothing
/// without the header.
#[test]
fn inspector_cli_over_streamable_http() {
    let w = world_with(&["transit", "echo"]);
    let Some(launcher) = Inspector::find() else {
        return;
    };
    let token = http_agent(&w);
    let server = mcp_http_common::Http::start(&w);
    let url = format!("http://{}/mcp", server.addr);
    let auth = format!("Authorization: Bearer {token}");
    let run = |args: &[&str]| {
        let mut all: Vec<String> = vec![url.clone(), "--header".into(), auth.clone()];
        all.extend(args.iter().map(|a| (*a).to_owned()));
        launcher.run(&w, &all).unwrap()
    };
    let listed = run(&["--method", "tools/list"]);
    if !listed.status.success() {
        return skip_or_fail(&format!(
            "the inspector could not be installed or run: {}",
            String::from_utf8_lossy(&listed.stderr).trim()
        ));
    }
    let v: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let names: Vec<&str> = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"echo.echo.write"), "{names:?}");
    assert!(names.contains(&"transit.find"), "{names:?}");
    let call = |extra: &[&str]| {
        let mut a = vec![
            "--method",
            "tools/call",
            "--tool-name",
            "echo.echo.write",
            "--tool-arg",
            "name=h.txt",
            "--tool-arg",
            "text=over http",
        ];
        a.extend_from_slice(extra);
        run(&a)
    };
    let refused = call(&[]);
    let v: Value = serde_json::from_slice(&refused.stdout).unwrap();
    assert_eq!(v["content"][0]["text"], "confirm required", "{v}");
    assert!(!w.work.join("h.txt").exists());
    let ran = call(&["--tool-arg", "confirm=true"]);
    assert!(
        ran.status.success(),
        "{}",
        String::from_utf8_lossy(&ran.stdout)
    );
    assert_eq!(
        std::fs::read_to_string(w.work.join("h.txt")).unwrap(),
        "over http"
    );
    assert_eq!(last_audit(&w)["principal"], "agent-1");
    // Without the header the server lets nothing in.
    let out = launcher
        .run(&w, &[url.clone(), "--method".into(), "tools/list".into()])
        .unwrap();
    assert!(
        !out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// Whether the `node` on `PATH` is at least MAJOR.MINOR.
fn node_at_least(major: u32, minor: u32) -> bool {
    let Ok(out) = Command::new("node").arg("--version").output() else {
        return false;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let mut parts = text.trim().trim_start_matches('v').split('.');
    let mut next = || {
        parts
            .next()
            .and_then(|p| p.parse::<u32>().ok())
            .unwrap_or(0)
    };
    let (a, b) = (next(), next());
    (a, b) >= (major, minor)
}

fn which_on_path(name: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|f| f.is_file())
    })
}

#[test]
fn tools_list_shows_only_active_packs_that_offer_mcp() {
    // mail offers only the default transports; git is installed but not active.
    let w = world_with(&["transit", "ledger", "mail"]);
    let out = w.run(&["install", common::gold_pack("git").to_str().unwrap()]);
    assert!(out.status.success(), "{}", w.render(&out));
    let mut s = Raw::start(&w, None);
    let r = s.request("tools/list", json!({}));
    let tools = r["result"]["tools"].as_array().unwrap();
    let summary: Vec<Value> = tools
        .iter()
        .map(|t| {
            json!({
                "name": t["name"],
                "annotations": t["annotations"],
                "required": t["inputSchema"]["required"],
                "properties": t["inputSchema"]["properties"].as_object().unwrap().keys().collect::<Vec<_>>(),
                "additionalProperties": t["inputSchema"]["additionalProperties"],
            })
        })
        .collect();
    insta::assert_snapshot!(
        "tools_list_summary",
        serde_json::to_string_pretty(&summary).unwrap()
    );
    let full = tools
        .iter()
        .find(|t| t["name"] == "ledger.ledger.post")
        .unwrap();
    insta::assert_snapshot!(
        "tool_ledger_post",
        serde_json::to_string_pretty(full).unwrap()
    );
    // A verb of a pack without `mcp`, of an inactive pack: unknown tools, protocol errors.
    for name in ["mail.list", "git.status", "git.git.status"] {
        let r = s.call(name, json!({}));
        assert_eq!(r["error"]["code"], -32602, "{name}: {r}");
    }
    assert!(s.finish().success());
}

#[test]
fn bad_input_is_refused_with_its_code() {
    let w = world_with(&["transit"]);
    let mut s = Raw::start(&w, None);
    // Extra, missing, wrong type, tenant-bearing.
    let r = s.call("transit.find", json!({ "query": "central", "extra": "1" }));
    assert_eq!(refusal_code(&r), "arg_unknown");
    let r = s.call("transit.find", json!({}));
    assert_eq!(refusal_code(&r), "arg_missing");
    // A misspelt tool: a protocol error naming the nearest tool.
    let r = s.call("transit.fnd", json!({}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert_eq!(
        r["error"]["message"],
        json!("unknown tool `transit.fnd`; did you mean `transit.find`?"),
        "{r}"
    );
    for bad in [json!(["a"]), json!({ "a": 1 }), Value::Null] {
        let r = s.call("transit.find", json!({ "query": bad }));
        assert_eq!(refusal_code(&r), "bad_envelope");
    }
    let r = s.call(
        "transit.find",
        json!({ "query": "central", "tenant": "other" }),
    );
    assert_eq!(refusal_code(&r), "tenant_in_args");
    // A number is passed as its text, as on the envelope face.
    let r = s.call("transit.show", json!({ "option_id": 7 }));
    assert!(r["result"].is_object(), "{r}");
    // Params that do not fit are Invalid params (-32602), with the request's id.
    for params in [
        json!({ "name": "transit.find", "arguments": ["central"] }),
        json!({ "name": "transit.find", "arguments": [1] }),
        json!({ "arguments": {} }),
        json!({ "name": 7 }),
        json!(["transit.find"]),
    ] {
        let r = s.request("tools/call", params.clone());
        assert_eq!(r["error"]["code"], -32602, "{params}: {r}");
    }
    let r = s.request("tools/list", json!([1]));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    // A line that is not JSON is a Parse error (-32700, id null), and the server goes on.
    s.send_raw("{\"jsonrpc\": \"2.0\", \"id\": 50, \"method\": \"tools/list\"");
    let r = s.read();
    assert_eq!(
        (&r["id"], &r["error"]["code"]),
        (&Value::Null, &json!(-32700)),
        "{r}"
    );
    s.send_raw("hello");
    assert_eq!(s.read()["error"]["code"], -32700);
    // A repeated argument is refused, never last-wins: nothing runs.
    s.send_raw(r#"{"jsonrpc": "2.0", "id": 51, "method": "tools/call", "params": {"name": "transit.find", "arguments": {"query": "central", "query": "x"}}}"#);
    let r = s.read();
    assert_eq!(
        (&r["id"], &r["error"]["code"]),
        (&json!(51), &json!(-32602)),
        "{r}"
    );
    assert_eq!(r["error"]["data"]["code"], "duplicate_key", "{r}");
    // A batch is an Invalid Request.
    s.send_raw(r#"[{"jsonrpc": "2.0", "id": 52, "method": "ping"}]"#);
    assert_eq!(s.read()["error"]["code"], -32600);
    // A value too long for argv.
    let r = s.call("transit.find", json!({ "query": "x".repeat(200 * 1024) }));
    assert_eq!(refusal_code(&r), "arg_invalid");
    // A 10 MB argument is never read whole: an Invalid Request error, and the server
    // goes on.
    let r = s.call(
        "transit.find",
        json!({ "query": "x".repeat(10 * 1024 * 1024) }),
    );
    assert_eq!(r["error"]["code"], -32600, "{r}");
    assert_eq!(r["error"]["data"]["code"], "request_too_large", "{r}");
    let r = s.call("transit.find", json!({ "query": "central" }));
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert_eq!(
        r["result"]["structuredContent"]["places"][0]["id"],
        "central"
    );
    assert!(s.finish().success());
}

#[test]
fn the_revision_is_2025_11_25_at_most() {
    let w = world_with(&["transit"]);
    for (asked, got) in [
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        ("2026-07-28", "2025-11-25"),
    ] {
        let mut c = world_command(&w, common::hcp_bin());
        let mut child = c
            .arg("mcp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let init = json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": { "protocolVersion": asked, "capabilities": {},
                        "clientInfo": { "name": "raw", "version": "0" } }
        });
        writeln!(stdin, "{init}").unwrap();
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let r: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(r["result"]["protocolVersion"], got, "{asked}: {r}");
        drop(stdin);
        assert!(child.wait().unwrap().success());
    }
}

#[test]
fn the_principal_is_the_servers_session_never_the_request() {
    let w = world_with(&["transit"]);
    // A bad token: every call answers bad_session, never the owner.
    let mut s = Raw::start(&w, Some("not-a-token"));
    let r = s.call("transit.find", json!({ "query": "central" }));
    assert_eq!(refusal_code(&r), "bad_session");
    assert!(s.finish().success());
    assert_eq!(last_audit(&w)["principal"], "unknown");

    let out = w.run(&["session", "start", "--principal", "agent-1"]);
    assert!(out.status.success(), "{}", w.render(&out));
    let token = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let mut s = Raw::start(&w, Some(&token));
    // No grant yet; a tenant in `_meta` changes nothing.
    let r = s.request(
        "tools/call",
        json!({
            "name": "transit.find",
            "arguments": { "query": "central" },
            "_meta": { "tenant": "owner", "principal": "owner" }
        }),
    );
    assert_eq!(refusal_code(&r), "missing_grant");
    let a = last_audit(&w);
    assert_eq!(a["principal"], "agent-1");
    assert_eq!(a["code"], "missing_grant");
    let out = w.run(&["grant", "agent-1", "transit", "verb.exec.read"]);
    assert!(out.status.success(), "{}", w.render(&out));
    let r = s.call("transit.find", json!({ "query": "central" }));
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert_eq!(
        r["result"]["_meta"]["hcp"]["audit_id"],
        last_audit(&w)["id"]
    );
    assert_eq!(last_audit(&w)["principal"], "agent-1");
    assert!(s.finish().success());
}

#[test]
fn list_changed_is_sent_for_owner_changes_only() {
    let w = world_with(&["transit"]);
    let mut s = Raw::start(&w, None);
    assert_eq!(s.tool_names().len(), 5);
    // Nothing changed: a ping sees no notification.
    let (notes, _) = s.request_seeing("ping", json!({}));
    assert_eq!(notes, Vec::<Value>::new());
    // The owner installs and activates echo: one notification, and the new tools.
    for args in [
        vec!["install", common::gold_pack("echo").to_str().unwrap()],
        vec!["activate", "echo"],
    ] {
        let out = w.run(&args);
        assert!(out.status.success(), "{}", w.render(&out));
    }
    let (notes, _) = s.request_seeing("ping", json!({}));
    assert_eq!(
        notes,
        vec![json!({ "jsonrpc": "2.0", "method": "notifications/tools/list_changed" })]
    );
    let names = s.tool_names();
    assert!(names.contains(&"echo.echo.say".to_string()), "{names:?}");
    // A pack whose files change under it (no reinstall): no notification, still listed,
    // and refused when called.
    let installed = w.hcp_home.join("packs/transit/HARNESS.md");
    let mut perms = std::fs::metadata(&installed).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(&installed, perms).unwrap();
    std::fs::write(&installed, "# changed under it\n").unwrap();
    let (notes, _) = s.request_seeing("ping", json!({}));
    assert_eq!(notes, Vec::<Value>::new());
    assert!(s.tool_names().contains(&"transit.find".to_string()));
    let r = s.call("transit.find", json!({ "query": "central" }));
    assert_eq!(r["result"]["isError"], true, "{r}");
    // The owner adds a runtime policy: a notification, and its argument contract narrows
    // the schema; the damaged pack stays listed.
    let policy = json!({
        "schema_version": "histos.policy/0.1",
        "tools": { "echo.echo.say": { "args": { "text": { "type": "string", "max_length": 40 } } } },
        "roles": { "agent": { "allow": ["echo.echo.say"] } }
    });
    // Written aside and renamed, so the server's watcher never sees half a file.
    std::fs::write(w.hcp_home.join("policy.json.tmp"), policy.to_string()).unwrap();
    std::fs::rename(
        w.hcp_home.join("policy.json.tmp"),
        w.hcp_home.join("policy.json"),
    )
    .unwrap();
    let (notes, r) = s.request_seeing("tools/list", json!({}));
    assert_eq!(notes.len(), 1, "{notes:?}");
    let tools = r["result"]["tools"].as_array().unwrap();
    let say = tools.iter().find(|t| t["name"] == "echo.echo.say").unwrap();
    assert_eq!(
        say["inputSchema"]["properties"]["text"]["maxLength"], 40,
        "{say}"
    );
    assert!(tools.iter().any(|t| t["name"] == "transit.find"));
    // The owner deactivates echo: a notification, and its tools are gone.
    let out = w.run(&["deactivate", "echo"]);
    assert!(out.status.success(), "{}", w.render(&out));
    let (notes, _) = s.request_seeing("tools/list", json!({}));
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(!s.tool_names().iter().any(|n| n.starts_with("echo.")));
    assert!(s.finish().success());
}

/// A pack whose one verb sleeps, to be abandoned mid-call.
fn nap_pack(w: &World) -> std::path::PathBuf {
    let dir = w.root().join("src/nap");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("surface.json"),
        r#"{
  "id": "nap",
  "name": "Nap",
  "kind": "composite",
  "transports": ["mcp"],
  "binding": { "mode": "local" },
  "verbs": { "nap": { "description": "Sleep a while.", "cli": ["sleep", "{{secs}}"] } }
}"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("policy.json"),
        r#"{ "surface_id": "nap", "version": 1, "verbs": { "nap": { "operation": "read", "privacy": { "land": "local" } } } }"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("HARNESS.md"),
        "# Nap\n\n| verb | use |\n|---|---|\n| nap | sleep |\n\n## Anti-patterns\n\n- none\n",
    )
    .unwrap();
    dir
}

/// How many verbs `hcp mcp` runs at once (`server::MAX_CONCURRENT_CALLS`).
fn hcp_slots() -> usize {
    8
}

/// The children of `pid` (Linux `/proc`).
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            if let Ok(text) = std::fs::read_to_string(t.path().join("children")) {
                out.extend(
                    text.split_whitespace()
                        .filter_map(|p| p.parse::<u32>().ok()),
                );
            }
        }
    }
    out
}

#[test]
fn a_client_that_goes_away_mid_call_ends_the_child_and_the_call_is_audited() {
    let w = world_with(&[]);
    let dir = nap_pack(&w);
    for args in [
        vec!["install", dir.to_str().unwrap()],
        vec!["activate", "nap"],
    ] {
        let out = w.run(&args);
        assert!(out.status.success(), "{}", w.render(&out));
    }
    let mut s = Raw::start(&w, None);
    s.send(&json!({
        "jsonrpc": "2.0", "id": 99, "method": "tools/call",
        "params": { "name": "nap.nap", "arguments": { "secs": "300" } }
    }));
    // Wait (bounded) until the child runs.
    let server = s.child.id();
    let deadline = Instant::now() + Duration::from_secs(20);
    let child = loop {
        if let Some(c) = children(server).first() {
            break *c;
        }
        assert!(Instant::now() < deadline, "the verb's child never started");
        // A bounded poll of /proc, not a wait for time to pass.
        std::thread::sleep(Duration::from_millis(5));
    };
    assert!(Path::new(&format!("/proc/{child}")).exists());
    // Nine more naps: seven more run (eight slots in all), two wait; those never start.
    for id in 100..109 {
        s.send(&json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": { "name": "nap.nap", "arguments": { "secs": "300" } }
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while children(server).len() < hcp_slots() {
        assert!(Instant::now() < deadline, "the naps never all started");
        // A bounded poll of /proc, not a wait for time to pass.
        std::thread::sleep(Duration::from_millis(5));
    }
    let started = Instant::now();
    let status = s.vanish();
    assert!(status.success(), "{status:?}");
    // rmcp alone waits up to 5 s for the handlers of a client that went away ("drain");
    // hcp ends the calls as soon as the reader of its stdout is gone, well before that.
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the server took {:?} to end its calls: it waited instead of ending them",
        started.elapsed()
    );
    // The child was reaped by the server, so its pid is gone.
    assert!(!Path::new(&format!("/proc/{child}")).exists());
    let a = last_audit(&w);
    assert_eq!(a["verb_key"], "nap");
    assert_eq!(a["decision"], "allow");
    assert_eq!(a["code"], "cancelled");
    // Every call that started was audited as cancelled; the one still waiting never ran.
    let out = w.run(&["audit", "tail", "-n", "100", "--json"]);
    let all: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let naps: Vec<&Value> = all
        .iter()
        .filter(|r| r["verb_key"] == "nap" && r["kind"] == "outcome")
        .collect();
    assert_eq!(naps.len(), hcp_slots(), "{naps:?}");
    assert!(naps.iter().all(|r| r["code"] == "cancelled"), "{naps:?}");
    let out = w.run(&["audit", "verify"]);
    assert!(out.status.success(), "{}", w.render(&out));
}

#[test]
fn a_client_that_closes_stdin_and_keeps_reading_gets_its_answer() {
    let w = world_with(&[]);
    let dir = nap_pack(&w);
    for args in [
        vec!["install", dir.to_str().unwrap()],
        vec!["activate", "nap"],
    ] {
        let out = w.run(&args);
        assert!(out.status.success(), "{}", w.render(&out));
    }
    let mut s = Raw::start(&w, None);
    s.send(&json!({
        "jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": { "name": "nap.nap", "arguments": { "secs": "1" } }
    }));
    // `printf … | hcp mcp`: the client is done writing, not gone.
    drop(s.stdin.take());
    let r = s.read();
    assert_eq!(r["id"], 7, "{r}");
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert_eq!(r["result"]["_meta"]["hcp"]["exit_code"], 0, "{r}");
    assert!(s.child.wait().unwrap().success());
}

#[test]
fn more_calls_than_slots_are_all_answered() {
    let w = world_with(&["transit"]);
    let mut s = Raw::start(&w, None);
    let n = 12; // more than the 8 verbs the server runs at once
    for id in 0..n {
        s.send(&json!({
            "jsonrpc": "2.0", "id": 1000 + id, "method": "tools/call",
            "params": { "name": "transit.find", "arguments": { "query": "central" } }
        }));
    }
    let mut seen = Vec::new();
    while seen.len() < n {
        let m = s.read();
        assert_eq!(m["result"]["isError"], false, "{m}");
        seen.push(m["id"].as_u64().unwrap());
    }
    seen.sort_unstable();
    assert_eq!(seen, (1000..1000 + n as u64).collect::<Vec<_>>());
    assert!(s.finish().success());
}

/// A session with `--workdir` the world's work directory, granted reads and writes on
/// `echo` and reads on `transit`.
fn http_agent(w: &World) -> String {
    let work = w.work.to_str().unwrap().to_owned();
    let out = w.run(&[
        "session",
        "start",
        "--principal",
        "agent-1",
        "--workdir",
        &work,
    ]);
    assert!(out.status.success(), "{}", w.render(&out));
    let token = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    for args in [
        [
            "grant",
            "agent-1",
            "echo",
            "verb.exec.read",
            "verb.exec.write",
        ]
        .as_slice(),
        &["grant", "agent-1", "transit", "verb.exec.read"],
    ] {
        let out = w.run(args);
        assert!(out.status.success(), "{}", w.render(&out));
    }
    token
}

fn assert_accept_then_decline(v: &Value) {
    assert_eq!(v["read"]["isError"], false, "{v}");
    assert_eq!(v["write accepted"]["isError"], false, "{v}");
    assert_eq!(v["a.txt"], "accepted", "{v}");
    assert_eq!(v["write declined"]["text"][0], "confirm required", "{v}");
    assert_eq!(v["b.txt exists"], false, "{v}");
    assert_eq!(v["asked"], 2, "{v}");
}

/// The SDK's `Client(mode="auto")` discovers `hcp mcp` over stdio and speaks 2026-07-28:
/// its person is asked through input-required results, accepts once and declines once.
#[test]
fn python_sdk_client_speaks_2026_07_28_and_asks_the_person() {
    let w = world_with(&["transit", "echo"]);
    let script = common::repo_root().join("crates/hcp/tests/mcp_client.py");
    let Some(python) = python_with_the_sdk(&w, &script) else {
        return;
    };
    let out = world_command(&w, &python)
        .arg(&script)
        .arg("--modern")
        .arg(common::hcp_bin())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["protocol"], "2026-07-28", "{v}");
    assert_accept_then_decline(&v);
    let a = last_audit(&w);
    assert_eq!(a["code"], "confirm_required");
}

/// The SDK over Streamable HTTP, the session token as its bearer header, in 2026-07-28
/// (`auto`) and with the handshake (`legacy`, 2025-11-25): the same tools, the same
/// person in the loop, each call as the token's principal.
#[test]
fn python_sdk_client_over_streamable_http() {
    let script = common::repo_root().join("crates/hcp/tests/mcp_client.py");
    for (mode, revision) in [("auto", "2026-07-28"), ("legacy", "2025-11-25")] {
        let w = world_with(&["transit", "echo"]);
        let Some(python) = python_with_the_sdk(&w, &script) else {
            return;
        };
        let token = http_agent(&w);
        let server = mcp_http_common::Http::start(&w);
        let url = format!("http://{}/mcp", server.addr);
        let out = world_command(&w, &python)
            .arg(&script)
            .args(["--http", &url, &token, mode])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{mode}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["protocol"], revision, "{v}");
        assert_accept_then_decline(&v);
        assert_eq!(last_audit(&w)["principal"], "agent-1");
    }
}
