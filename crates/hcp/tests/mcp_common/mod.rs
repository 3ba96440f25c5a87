//! What the MCP tests share: a world with gold packs, commands in its environment, and a
//! raw newline-delimited JSON-RPC client of `hcp mcp`.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use crate::common::{self, World};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

pub fn world_with(packs: &[&str]) -> World {
    common::example_bins();
    let w = World::new();
    for p in packs {
        let out = w.run(&["install", common::gold_pack(p).to_str().unwrap()]);
        assert!(out.status.success(), "{}", w.render(&out));
        let out = w.run(&["activate", p]);
        assert!(out.status.success(), "{}", w.render(&out));
    }
    if packs.contains(&"mail") {
        w.grant_mail_root();
    }
    w
}

/// A command with the world's environment (as `World::hcp` sets it).
pub fn world_command(w: &World, program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = Command::new(program);
    c.env_clear()
        .env("HOME", &w.home)
        .env("HCP_HOME", &w.hcp_home)
        .env("PATH", w.path_var())
        .env("LANG", "C")
        .env("NO_COLOR", "1")
        .current_dir(&w.work);
    c
}

/// A raw JSON-RPC client over the server's stdio.
pub struct Raw {
    pub child: Child,
    pub stdin: Option<ChildStdin>,
    pub stdout: BufReader<ChildStdout>,
    pub next_id: u64,
}

impl Raw {
    pub fn start(w: &World, session: Option<&str>) -> Self {
        Self::start_with(w, session, &json!({}))
    }

    /// [`Raw::start`] declaring the client `capabilities` at `initialize` (`{"elicitation":
    /// {}}` for a client that can ask its person).
    pub fn start_with(w: &World, session: Option<&str>, capabilities: &Value) -> Self {
        let mut raw = Self::spawn(w, session);
        let init = raw.request(
            "initialize",
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": capabilities,
                "clientInfo": { "name": "raw", "version": "0" }
            }),
        );
        assert_eq!(init["result"]["serverInfo"]["name"], "hcp", "{init}");
        raw.send(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
        raw
    }

    pub fn send(&mut self, msg: &Value) {
        self.send_raw(&msg.to_string());
    }

    /// Sends one line as it is.
    pub fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    pub fn read(&mut self) -> Value {
        let mut line = String::new();
        let n = self.stdout.read_line(&mut line).unwrap();
        assert!(n > 0, "the server closed stdout");
        serde_json::from_str(&line).unwrap()
    }

    /// Sends a request; returns the notifications seen before its response, and the
    /// response.
    pub fn request_seeing(&mut self, method: &str, params: Value) -> (Vec<Value>, Value) {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        let mut notes = Vec::new();
        loop {
            let m = self.read();
            if m.get("id") == Some(&json!(id)) {
                return (notes, m);
            }
            notes.push(m);
        }
    }

    pub fn request(&mut self, method: &str, params: Value) -> Value {
        self.request_seeing(method, params).1
    }

    pub fn call(&mut self, name: &str, args: Value) -> Value {
        self.request("tools/call", json!({ "name": name, "arguments": args }))
    }

    pub fn tool_names(&mut self) -> Vec<String> {
        let r = self.request("tools/list", json!({}));
        r["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    }

    /// Closes stdin and waits for the server to exit.
    pub fn finish(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        self.child.wait().unwrap()
    }

    /// Goes away as a client that dies does: closes both its ends (stdin and the reading
    /// end of stdout), then waits for the server to exit.
    pub fn vanish(self) -> std::process::ExitStatus {
        let Self {
            mut child,
            stdin,
            stdout,
            ..
        } = self;
        drop(stdout);
        drop(stdin);
        child.wait().unwrap()
    }
}

/// The code of a refusal result (`isError` with the refusal object as structured content).
pub fn refusal_code(resp: &Value) -> String {
    assert_eq!(resp["result"]["isError"], true, "{resp}");
    resp["result"]["structuredContent"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("no code in {resp}"))
        .to_owned()
}

/// The last call's audit: a refusal's record, or an allowed call's intent with its
/// outcome's fields over it (the intent's `id` is the call's `audit_id`).
pub fn last_audit(w: &World) -> Value {
    let out = w.run(&["audit", "tail", "-n", "100", "--json"]);
    assert!(out.status.success(), "{}", w.render(&out));
    let v: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let last = v.last().unwrap().clone();
    if last["kind"] != "outcome" {
        return last;
    }
    let mut view = v
        .iter()
        .find(|r| r["kind"] == "intent" && r["id"] == last["intent"])
        .unwrap()
        .clone();
    for (k, x) in last.as_object().unwrap() {
        if !matches!(k.as_str(), "id" | "ts" | "seq" | "kind" | "prev" | "hash") {
            view[k] = x.clone();
        }
    }
    view
}

impl Raw {
    /// Sends a request without waiting for its answer; returns its id.
    pub fn send_request(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        id
    }

    /// Reads until the server's request `method` (e.g. `elicitation/create`); returns it
    /// and what came before.
    pub fn read_request(&mut self, method: &str) -> (Vec<Value>, Value) {
        let mut before = Vec::new();
        loop {
            let m = self.read();
            if m["method"] == method && m.get("id").is_some() {
                return (before, m);
            }
            before.push(m);
        }
    }

    /// Reads until the response to `id`; returns it and what came before.
    pub fn read_response(&mut self, id: u64) -> (Vec<Value>, Value) {
        let mut before = Vec::new();
        loop {
            let m = self.read();
            if m.get("id") == Some(&json!(id)) && m.get("method").is_none() {
                return (before, m);
            }
            before.push(m);
        }
    }

    /// Answers the server's request `req` with `result`.
    pub fn answer(&mut self, req: &Value, result: Value) {
        self.send(&json!({ "jsonrpc": "2.0", "id": req["id"], "result": result }));
    }
}

impl Raw {
    /// A server with no `initialize` sent: for the stateless revision (2026-07-28), whose
    /// every request carries its own `_meta` ([`modern_meta`]).
    pub fn spawn(w: &World, session: Option<&str>) -> Self {
        let mut c = world_command(w, common::hcp_bin());
        c.arg("mcp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if let Some(s) = session {
            c.env("HCP_SESSION", s);
        }
        let mut child = c.spawn().unwrap();
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Self {
            child,
            stdin,
            stdout,
            next_id: 0,
        }
    }
}

/// The `_meta` every request of revision 2026-07-28 carries: the revision, the client's
/// capabilities and its name.
pub fn modern_meta(capabilities: &Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": { "name": "raw", "version": "0" }
    })
}

/// `params` with the 2026-07-28 `_meta` of a client declaring `capabilities`.
pub fn modern(mut params: Value, capabilities: &Value) -> Value {
    params["_meta"] = modern_meta(capabilities);
    params
}
