//! The demo's person in the loop (RUNTIME §10): an MCP client that asks its person,
//! scripted to accept the first question and decline the second, driving `hcp mcp` over
//! stdio as the agent. Each question shows the exact command; the accepted one runs once,
//! the declined one is `confirm required`.

use super::{Demo, Summary, quote};
use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{ChildStdin, ChildStdout, Stdio};

/// The newline-delimited JSON-RPC line pair of the scripted client.
struct Client {
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Client {
    fn send(&mut self, msg: &Value) -> Result<()> {
        writeln!(self.stdin, "{msg}").context("cannot write to `hcp mcp`")?;
        self.stdin.flush().context("cannot write to `hcp mcp`")
    }

    fn read(&mut self) -> Result<Value> {
        let mut line = String::new();
        if self
            .stdout
            .read_line(&mut line)
            .context("cannot read `hcp mcp`")?
            == 0
        {
            bail!("`hcp mcp` closed its stdout");
        }
        serde_json::from_str(&line).context("`hcp mcp` wrote a line that is not JSON")
    }

    /// Reads until the response to `id`, answering each `elicitation/create` with the next
    /// of `person`'s answers; returns the response and the questions asked.
    fn until_response(
        &mut self,
        id: u64,
        person: &mut dyn FnMut(&Value) -> Value,
    ) -> Result<(Value, Vec<Value>)> {
        let mut asked = Vec::new();
        loop {
            let m = self.read()?;
            if m["method"] == "elicitation/create" {
                let answer = person(&m["params"]);
                self.send(&json!({ "jsonrpc": "2.0", "id": m["id"], "result": answer }))?;
                asked.push(m["params"].clone());
            } else if m.get("id") == Some(&json!(id)) && m.get("method").is_none() {
                return Ok((m, asked));
            }
        }
    }
}

/// Runs the scripted client as the agent of `token`: two confirm-gated writes of the echo
/// pack, the first accepted by the person, the second declined.
///
/// # Errors
/// When `hcp mcp` cannot run, or a call does not answer as scripted.
pub fn person_in_the_loop(
    demo: &Demo,
    token: &str,
    out: &mut dyn Write,
    sum: &mut Summary,
) -> Result<()> {
    let w = |out: &mut dyn Write, text: &str| -> Result<()> {
        writeln!(out, "{text}").context("cannot write the transcript")
    };
    // The agent runs under the starting policy, which also puts a confirmed write to the
    // owner: the operator lets the person answer that approval through the client too.
    let config_path = demo.hcp_home.join("config.json");
    let mut config: serde_json::Value = match std::fs::read_to_string(&config_path) {
        Ok(t) => serde_json::from_str(&t).context("the demo's config.json")?,
        Err(_) => json!({}),
    };
    config["mcp"]["approve_by_elicitation"] = json!(true);
    std::fs::write(&config_path, config.to_string())
        .with_context(|| format!("cannot write `{}`", config_path.display()))?;
    w(
        out,
        "$ # config.json: \"mcp\": {\"approve_by_elicitation\": true}",
    )?;
    w(
        out,
        "$ HCP_SESSION=$AGENT hcp mcp    # an MCP client that asks its person (scripted: accept, then decline)",
    )?;
    let mut child = demo
        .command("hcp", &demo.work)
        .arg("mcp")
        .env("HCP_SESSION", token)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("cannot run `hcp mcp`")?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        bail!("`hcp mcp` has no stdio");
    };
    let mut c = Client {
        stdin,
        stdout: BufReader::new(stdout),
    };
    c.send(
        &json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": { "elicitation": { "form": {} } },
        "clientInfo": { "name": "demo-client", "version": "0" } } }),
    )?;
    let (init, _) = c.until_response(0, &mut |_| json!({ "action": "cancel" }))?;
    c.send(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }))?;
    w(
        out,
        &format!(
            "  ← initialize: MCP {}",
            init["result"]["protocolVersion"].as_str().unwrap_or("?")
        ),
    )?;
    let script = [
        ("approved.txt", "the person said yes", "accept"),
        ("declined.txt", "the person said no", "decline"),
    ];
    for (i, (name, text, action)) in script.into_iter().enumerate() {
        let id = u64::try_from(i).unwrap_or(0) + 1;
        let args = json!({ "name": name, "text": text });
        w(out, &format!("  → tools/call echo.echo.write {args}"))?;
        c.send(&json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call",
                        "params": { "name": "echo.echo.write", "arguments": args } }))?;
        let (r, asked) = c.until_response(id, &mut |_| {
            if action == "accept" {
                json!({ "action": "accept", "content": { "run": true } })
            } else {
                json!({ "action": action })
            }
        })?;
        if asked.is_empty() {
            bail!("`{name}`: the person was never asked");
        }
        let command = asked[0]["_meta"]["hcp"]["command"]["args"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|x| quote(x.as_str().unwrap_or("")))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default();
        w(
            out,
            "  ← elicitation/create: the person reads the exact command:",
        )?;
        w(out, &format!("      hcp-example-echo {command}"))?;
        w(out, &format!("  → the person answers `{action}`"))?;
        let result = &r["result"];
        let first = result["content"][0]["text"].as_str().unwrap_or("").trim();
        let written = demo.work.join(name).exists();
        match (action, result["isError"].as_bool(), written) {
            ("accept", Some(false), true) => {
                sum.ok += 1;
                w(out, &format!("  ok · {first}"))?;
            }
            ("decline", Some(true), false)
                if result["structuredContent"]["code"] == "confirm_required" =>
            {
                sum.refused += 1;
                w(out, &format!("  refused · confirm_required: {first}"))?;
            }
            _ => bail!("`{name}` answered {r} after `{action}` (file written: {written})"),
        }
    }
    drop(c);
    let st = child.wait().context("cannot wait for `hcp mcp`")?;
    if !st.success() {
        bail!("`hcp mcp` ended with {st}");
    }
    Ok(())
}
