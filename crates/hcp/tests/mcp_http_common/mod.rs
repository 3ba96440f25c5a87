//! What the Streamable HTTP tests share: `hcp mcp --http` started on a free loopback port
//! (or a Unix socket), and a small HTTP/1.1 client that says exactly what it sends.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use crate::common::{self, World};
use crate::mcp_common::world_command;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};

/// A running `hcp mcp --http`.
pub struct Http {
    pub child: Child,
    /// `HOST:PORT`, or the socket path for `unix:`.
    pub addr: String,
    pub unix: bool,
}

impl Http {
    /// Starts `hcp mcp --http 127.0.0.1:0` in `w`'s environment and reads the address it
    /// bound from its first line on stderr.
    pub fn start(w: &World) -> Self {
        Self::start_on(w, "127.0.0.1:0")
    }

    pub fn start_on(w: &World, addr: &str) -> Self {
        Self::start_with(w, &[addr])
    }

    /// `hcp mcp --http ARGS…` (the address first).
    // The child is waited for by `Http`'s drop, or before the panic of a server that
    // ended; a failed read of its stderr is a broken test run either way.
    #[allow(clippy::zombie_processes)]
    pub fn start_with(w: &World, args: &[&str]) -> Self {
        let mut child = world_command(w, common::hcp_bin())
            .args(["mcp", "--http"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        loop {
            line.clear();
            let n = err.read_line(&mut line).unwrap();
            if n == 0 {
                let status = child.wait().unwrap();
                panic!("hcp mcp --http ended before it listened ({status})");
            }
            if let Some(rest) = line.trim().strip_prefix("hcp mcp: listening on ") {
                let rest = rest.trim_end_matches("/mcp");
                let (unix, addr) = match rest.strip_prefix("unix:") {
                    Some(p) => (true, p.to_owned()),
                    None => (
                        false,
                        rest.trim_start_matches("http://")
                            .trim_start_matches("https://")
                            .replace("0.0.0.0:", "127.0.0.1:"),
                    ),
                };
                // The rest of stderr is drained, so the server never blocks on it.
                std::thread::spawn(move || {
                    let mut sink = String::new();
                    let _ = err.read_to_string(&mut sink);
                });
                return Self { child, addr, unix };
            }
        }
    }

    /// Sends `head` (request line and headers, without the blank line) and `body`; the
    /// connection closes after the answer. Answers the status, the headers (lower-cased
    /// names) and the body.
    pub fn raw(&self, head: &str, body: &[u8]) -> Response {
        let mut bytes = head.replace('\n', "\r\n").into_bytes();
        bytes.extend_from_slice(b"\r\n\r\n");
        bytes.extend_from_slice(body);
        let mut out = Vec::new();
        if self.unix {
            let mut s = std::os::unix::net::UnixStream::connect(&self.addr).unwrap();
            let _ = s.write_all(&bytes);
            let _ = s.read_to_end(&mut out);
        } else {
            let mut s = TcpStream::connect(&self.addr).unwrap();
            let _ = s.write_all(&bytes);
            let _ = s.read_to_end(&mut out);
        }
        Response::parse(&out)
    }

    /// A POST of `body` to `/mcp` with the usual headers, `extra` ones and, when given,
    /// `Authorization: Bearer TOKEN`.
    pub fn post(&self, token: Option<&str>, extra: &[(&str, &str)], body: &str) -> Response {
        let host = if self.unix {
            "localhost".to_owned()
        } else {
            self.addr.clone()
        };
        let mut head = format!(
            "POST /mcp HTTP/1.1\nHost: {host}\nContent-Type: application/json\nAccept: application/json, text/event-stream\nConnection: close\nContent-Length: {}",
            body.len()
        );
        if let Some(t) = token {
            head.push_str(&format!("\nAuthorization: Bearer {t}"));
        }
        for (k, v) in extra {
            head.push_str(&format!("\n{k}: {v}"));
        }
        self.raw(&head, body.as_bytes())
    }

    /// A JSON-RPC request of revision 2026-07-28: its `_meta` in `params`, and the headers
    /// that revision asks for (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name` for a call).
    pub fn rpc(&self, token: Option<&str>, method: &str, params: Value) -> Response {
        let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
        let mut headers = vec![
            ("MCP-Protocol-Version", "2026-07-28".to_owned()),
            ("Mcp-Method", method.to_owned()),
        ];
        if let Some(name) = params.get("name").and_then(Value::as_str) {
            headers.push(("Mcp-Name", name.to_owned()));
        }
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        self.post(token, &headers, &body.to_string())
    }
}

impl Drop for Http {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP response.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    fn parse(bytes: &[u8]) -> Self {
        let text = String::from_utf8_lossy(bytes).into_owned();
        let Some((head, body)) = text.split_once("\r\n\r\n") else {
            return Self {
                status: 0,
                headers: Vec::new(),
                body: text,
            };
        };
        let mut lines = head.lines();
        let status = lines
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        let chunked = headers
            .iter()
            .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
        let body = if chunked {
            dechunk(body)
        } else {
            body.to_owned()
        };
        Self {
            status,
            headers,
            body,
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC message of the body: the body itself, or the last `data:` line of an
    /// event stream.
    pub fn json(&self) -> Value {
        if let Ok(v) = serde_json::from_str(&self.body) {
            return v;
        }
        let data = self
            .body
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim)
            .rfind(|d| d.starts_with('{'))
            .unwrap_or_else(|| panic!("no JSON in {self:?}"));
        serde_json::from_str(data).unwrap()
    }
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            out.push_str(&rest[..n.min(rest.len())]);
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].strip_prefix("\r\n").unwrap_or(&rest[n..]);
    }
    out
}
