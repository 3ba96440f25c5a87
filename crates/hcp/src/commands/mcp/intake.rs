//! The stdio transport of `hcp mcp`: hcp reads the client's lines itself, before the SDK
//! does, so that every line gets the answer JSON-RPC 2.0 asks for (RUNTIME §10) and a
//! client that goes away ends its calls at once.
//!
//! - A line that is not JSON (or not UTF-8) is answered with **-32700** (id `null`); the
//!   SDK alone drops it and the client waits forever.
//! - A request whose params do not fit its method (`"arguments": [1]`, a `name` that is no
//!   string) is answered with **-32602** and its id; the SDK alone takes it for an unknown
//!   method (-32601).
//! - A key repeated anywhere in a message (`{"a": 1, "a": 2}` in `arguments`) is refused:
//!   -32602 under `params`, else -32600. `serde_json` would keep the last one silently, so
//!   the gate could check one value while a log shows another.
//! - A batch (an array), or an object that is no JSON-RPC message, is -32600 (id `null`
//!   when none can be read). A notification or a response that does not parse gets no
//!   answer (there is no one to answer); it is logged.
//! - A line longer than [`MAX_REQUEST_BYTES`] is never held in memory: its top-level `id` is
//!   picked out while it streams past ([`IdScanner`]) and it is answered with -32600
//!   (`data.code`: `request_too_large`).
//! - When the client goes away — the reading end of hcp's stdout closes ([`watch_reader`]
//!   sees it at once, for a pipe or a socket) or a write to it fails — [`Gone`] runs: the
//!   server ends every call in flight (their process groups, then their audit records) and
//!   starts no other, instead of leaving them to the SDK's drain, which waits up to 5 s for
//!   the handlers. A client that only closes stdin and keeps reading (`printf … | hcp mcp`)
//!   has not gone: its calls in flight are answered (within that drain).
//!
//! Answers written here and the SDK's messages share one writer ([`Output`]), one whole line
//! each.

use rmcp::RoleServer;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use std::pin::Pin;
use std::sync::Arc;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

/// The largest message read from the client, in bytes (1 MiB). One argv element may hold
/// at most 128 KiB on Linux, so no verb can take more than this anyway.
pub const MAX_REQUEST_BYTES: usize = 1024 * 1024;

/// JSON-RPC 2.0: the line is not JSON.
pub const PARSE_ERROR: i32 = -32700;
/// JSON-RPC 2.0: the JSON is not a valid request.
pub const INVALID_REQUEST: i32 = -32600;
/// JSON-RPC 2.0: the params do not fit the method.
pub const INVALID_PARAMS: i32 = -32602;

/// The requests the SDK parses into typed params (the client requests of the MCP revisions
/// rmcp 3.11 knows). One of these that reaches the server as an untyped request had params
/// that did not fit: `server::Server::on_custom_request` answers -32602 for it.
pub const KNOWN_METHODS: &[&str] = &[
    "ping",
    "initialize",
    "server/discover",
    "completion/complete",
    "logging/setLevel",
    "prompts/get",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/directory/read",
    "subscriptions/listen",
    "resources/subscribe",
    "resources/unsubscribe",
    "tools/call",
    "tools/list",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
    "skills/list",
    "skills/get",
];

/// What one line is.
#[derive(Debug)]
pub enum Line {
    /// A message for the SDK.
    Message(Box<ClientJsonRpcMessage>),
    /// An error response to write back at once.
    Answer(Value),
    /// Nothing to answer (an empty line, a notification or response that does not parse);
    /// why, for the log.
    Drop(String),
}

/// A JSON-RPC error response.
pub fn error_response(
    id: Option<&Value>,
    code: i32,
    message: String,
    data: Option<Value>,
) -> Value {
    let mut error = json!({ "code": code, "message": message });
    if let Some(d) = data {
        error["data"] = d;
    }
    json!({ "jsonrpc": "2.0", "id": id.cloned().unwrap_or(Value::Null), "error": error })
}

/// The id of a message when it is a valid JSON-RPC id (a string or a number).
fn valid_id(v: &Value) -> Option<&Value> {
    v.get("id").filter(|i| i.is_string() || i.is_number())
}

/// Classifies one line (without its newline) as the module says.
pub fn classify(line: &[u8]) -> Line {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Line::Drop("an empty line".into());
    }
    let not_json = |inner: &serde_json::Error| {
        Line::Answer(error_response(
            None,
            PARSE_ERROR,
            format!("parse error: the line is not JSON ({inner})"),
            None,
        ))
    };
    let mut de = serde_json::Deserializer::from_slice(line);
    let strict: Result<hcp_model::StrictValue, _> = serde_path_to_error::deserialize(&mut de);
    let value = match strict {
        Ok(hcp_model::StrictValue(v)) => {
            if let Err(e) = de.end() {
                return not_json(&e);
            }
            v
        }
        Err(e) => {
            use serde_json::error::Category;
            let inner = e.inner();
            if matches!(
                inner.classify(),
                Category::Syntax | Category::Eof | Category::Io
            ) {
                return not_json(inner);
            }
            // A repeated key: find the id and method the lenient way to answer.
            let loose: Value = serde_json::from_slice(line).unwrap_or(Value::Null);
            let path = e.path().to_string();
            let message = inner.to_string();
            let key = message.split('`').nth(1).unwrap_or_default().to_owned();
            if loose.get("method").is_none() || valid_id(&loose).is_none() {
                return Line::Drop(format!(
                    "a message that is no request repeats a key ({message})"
                ));
            }
            let under_params = path == "params" || path.starts_with("params.");
            let (code, what) = if under_params {
                (INVALID_PARAMS, "invalid params")
            } else {
                (INVALID_REQUEST, "invalid request")
            };
            let at = if path.is_empty() || path == "." {
                "the request".to_owned()
            } else {
                format!("`{path}`")
            };
            return Line::Answer(error_response(
                valid_id(&loose),
                code,
                format!(
                    "{what}: key `{key}` appears twice in {at}; hcp refuses a repeated key rather than keep one"
                ),
                Some(json!({ "code": hcp_model::Code::DuplicateKey, "key": key, "path": path })),
            ));
        }
    };
    let Value::Object(obj) = &value else {
        let what = if value.is_array() {
            "a batch (an array): MCP has no batches since revision 2025-06-18; send one message a line"
        } else {
            "not a JSON-RPC message (an object)"
        };
        return Line::Answer(error_response(
            None,
            INVALID_REQUEST,
            format!("invalid request: the line is {what}"),
            None,
        ));
    };
    let id = valid_id(&value).cloned();
    let method = obj.get("method");
    if method.is_none() && !is_answer_to_hcp(obj) {
        return Line::Drop(format!(
            "a response whose id {} is no id hcp sent (hcp's requests have integer ids)",
            obj.get("id")
                .map_or_else(|| "(none)".to_owned(), Value::to_string)
        ));
    }
    if let (Some(Value::String(m)), Some(id)) = (method, &id)
        && let Some(fault) = params_fault(m, obj.get("params"))
    {
        return Line::Answer(error_response(
            Some(id),
            INVALID_PARAMS,
            format!("invalid params of `{m}`: {fault}"),
            None,
        ));
    }
    let is_request = method.is_some() && obj.contains_key("id");
    match serde_json::from_value::<ClientJsonRpcMessage>(value.clone()) {
        Ok(m) => Line::Message(Box::new(m)),
        Err(e) if is_request => Line::Answer(error_response(
            id.as_ref(),
            INVALID_REQUEST,
            format!("invalid request: {e}"),
            None,
        )),
        Err(e) => Line::Drop(format!(
            "a notification or response that does not parse: {e}"
        )),
    }
}

/// Whether a response (`result` or `error`, no `method`) answers a request hcp could have
/// sent: the SDK numbers the server's requests (`elicitation/create` …) with integers, and
/// an answer counts only when its `id` is exactly such a JSON value. The SDK alone would
/// take the string `"1"` for the number `1`; a person's answer must never reach another
/// question than the one it answers.
pub fn is_answer_to_hcp(obj: &serde_json::Map<String, Value>) -> bool {
    obj.get("id")
        .and_then(Value::as_number)
        .is_some_and(|n| n.is_u64() || n.is_i64())
}

/// Why `params` do not fit `method`, when hcp can tell before the SDK: `tools/call` needs
/// an object with a string `name` and, if present, an object (or null) `arguments`; every
/// method the SDK knows takes an object (or nothing).
fn params_fault(method: &str, params: Option<&Value>) -> Option<String> {
    let kind = |v: &Value| match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    if !KNOWN_METHODS.contains(&method) {
        return None;
    }
    let params = match params {
        None | Some(Value::Null) => {
            return (method == "tools/call")
                .then(|| "`params` are missing; they are an object with the tool's `name`".into());
        }
        Some(Value::Object(p)) => p,
        Some(other) => return Some(format!("`params` is {}; it is an object", kind(other))),
    };
    if method != "tools/call" {
        return None;
    }
    match params.get("name") {
        Some(Value::String(_)) => {}
        None => return Some("`name` is missing: the tool to call".into()),
        Some(other) => {
            return Some(format!(
                "`name` is {}; it is the tool's name, a string",
                kind(other)
            ));
        }
    }
    match params.get("arguments") {
        None | Some(Value::Null | Value::Object(_)) => None,
        Some(other) => Some(format!(
            "`arguments` is {}; it is an object of the tool's arguments by name",
            kind(other)
        )),
    }
}

/// Called once when the client is gone (stdin ended or stdout failed).
pub type Gone = Arc<dyn Fn() + Send + Sync>;

/// The one writer to the client: whole lines, in the order they are written.
#[derive(Clone)]
pub struct Output {
    writer: Arc<tokio::sync::Mutex<Pin<Box<dyn AsyncWrite + Send>>>>,
    gone: Gone,
}

impl Output {
    /// A writer over `w`; `gone` runs when a write fails.
    pub fn new(w: impl AsyncWrite + Send + 'static, gone: Gone) -> Self {
        Self {
            writer: Arc::new(tokio::sync::Mutex::new(Box::pin(w))),
            gone,
        }
    }

    /// Writes `msg` as one line and flushes.
    ///
    /// # Errors
    /// The write's error (the client went away; `gone` has run).
    pub async fn line(&self, msg: &impl serde::Serialize) -> std::io::Result<()> {
        let mut bytes = serde_json::to_vec(msg)?;
        bytes.push(b'\n');
        let mut w = self.writer.lock().await;
        let r = match w.write_all(&bytes).await {
            Ok(()) => w.flush().await,
            Err(e) => Err(e),
        };
        if r.is_err() {
            (self.gone)();
        }
        r
    }
}

/// The SDK's side of the transport: messages from [`pump`], answers through [`Output`].
pub struct Intake {
    incoming: mpsc::Receiver<ClientJsonRpcMessage>,
    out: Output,
}

impl Intake {
    /// The transport and the sender [`pump`] feeds.
    pub fn new(out: Output) -> (Self, mpsc::Sender<ClientJsonRpcMessage>) {
        let (tx, rx) = mpsc::channel(64);
        (Self { incoming: rx, out }, tx)
    }
}

impl Transport<RoleServer> for Intake {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let out = self.out.clone();
        async move { out.line(&item).await }
    }

    fn receive(&mut self) -> impl Future<Output = Option<ClientJsonRpcMessage>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.incoming.close();
        Ok(())
    }
}

/// Watches `fd` (hcp's stdout) on a thread of its own and runs `gone` as soon as its
/// reading end is closed: `poll(2)` with no events reports `POLLERR` on a pipe without
/// readers and `POLLHUP` on a socket whose peer went away. Anything else (a file, a
/// terminal, `/dev/null`) never loses its reader and is not watched; a failed write still
/// tells. `fd` is a duplicate the thread keeps; the thread ends with the process.
pub fn watch_reader(fd: std::os::fd::OwnedFd, gone: Gone) {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use nix::sys::stat::{SFlag, fstat};
    use std::os::fd::AsFd;
    let Ok(st) = fstat(fd.as_fd()) else { return };
    let kind = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
    if kind != SFlag::S_IFIFO && kind != SFlag::S_IFSOCK {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("hcp-mcp-reader".into())
        .spawn(move || {
            loop {
                let mut fds = [PollFd::new(fd.as_fd(), PollFlags::empty())];
                match poll(&mut fds, PollTimeout::NONE) {
                    Ok(_) => {
                        let ended = PollFlags::POLLERR | PollFlags::POLLHUP | PollFlags::POLLNVAL;
                        if fds[0].revents().is_some_and(|r| r.intersects(ended)) {
                            gone();
                            return;
                        }
                    }
                    Err(nix::errno::Errno::EINTR) => {}
                    Err(_) => return,
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("cannot watch stdout for the client going away: {e}");
    }
}

/// Reads `input` line by line until it ends (the client closed stdin) or the SDK is gone,
/// and hands each line's message to `to_sdk` or its answer to `out`, as the module says.
/// The end of `input` is not the client going away (it may still read the answers):
/// returning drops `to_sdk`, and the SDK finishes the calls in flight.
pub async fn pump<R>(
    mut input: R,
    to_sdk: mpsc::Sender<ClientJsonRpcMessage>,
    out: Output,
    max: usize,
) where
    R: AsyncBufRead + Unpin,
{
    let mut line: Vec<u8> = Vec::new();
    let mut oversized: Option<IdScanner> = None;
    let mut oversized_bytes: usize = 0;
    loop {
        let (consumed, ended) = {
            let buf = match input.fill_buf().await {
                Ok(b) if !b.is_empty() => b,
                _ => return,
            };
            let newline = buf.iter().position(|b| *b == b'\n');
            let take = newline.map_or(buf.len(), |i| i + 1);
            let chunk = &buf[..take];
            if let Some(scan) = oversized.as_mut() {
                scan.feed(chunk);
                oversized_bytes = oversized_bytes.saturating_add(chunk.len());
            } else if line.len() + chunk.len() > max {
                let mut scan = IdScanner::default();
                scan.feed(&line);
                scan.feed(chunk);
                oversized_bytes = line.len() + chunk.len();
                line = Vec::new();
                oversized = Some(scan);
            } else {
                line.extend_from_slice(chunk);
            }
            (take, newline.is_some())
        };
        input.consume(consumed);
        if !ended {
            continue;
        }
        let what = match oversized.take() {
            Some(scan) => match scan.id() {
                Some(id) => Line::Answer(error_response(
                    Some(&id),
                    INVALID_REQUEST,
                    format!(
                        "the request is larger than {max} bytes (at least {oversized_bytes} read); it was not read"
                    ),
                    Some(json!({ "code": hcp_model::Code::RequestTooLarge, "max_bytes": max })),
                )),
                None => Line::Drop(format!(
                    "a line of {oversized_bytes} bytes or more with no id"
                )),
            },
            None => classify(line.strip_suffix(b"\n").unwrap_or(&line)),
        };
        line.clear();
        match what {
            Line::Message(m) => {
                if to_sdk.send(*m).await.is_err() {
                    return;
                }
            }
            Line::Answer(a) => {
                if out.line(&a).await.is_err() {
                    return;
                }
            }
            Line::Drop(why) => tracing::debug!("dropped {why}"),
        }
    }
}

/// Picks the top-level `"id"` out of a JSON object streamed in pieces, keeping at most a
/// few hundred bytes whatever the object's size.
#[derive(Debug, Default)]
pub struct IdScanner {
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// The current top-level string (a key, or a value), capped.
    text: Vec<u8>,
    text_over: bool,
    /// The last top-level string was the key `id` and a `:` followed it.
    in_id_value: bool,
    last_string_was_id_key: bool,
    /// The raw text of the `id` value.
    raw: Vec<u8>,
    raw_over: bool,
    id_done: bool,
}

const CAP: usize = 256;

impl IdScanner {
    /// Feeds the next bytes of the object.
    pub fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.byte(b);
        }
    }

    fn byte(&mut self, b: u8) {
        if self.in_id_value && self.depth == 1 && !self.in_string && matches!(b, b',' | b'}') {
            self.in_id_value = false;
            self.id_done = true;
        }
        if self.in_id_value {
            if self.raw.len() < CAP {
                self.raw.push(b);
            } else {
                self.raw_over = true;
            }
        }
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_string = false;
                if self.depth == 1 && !self.in_id_value {
                    self.last_string_was_id_key = !self.text_over && self.text == b"id";
                }
                return;
            }
            if self.depth == 1 && self.text.len() < CAP {
                self.text.push(b);
            } else {
                self.text_over = true;
            }
            return;
        }
        match b {
            b'"' => {
                self.in_string = true;
                self.text.clear();
                self.text_over = false;
            }
            b'{' | b'[' => self.depth += 1,
            b'}' | b']' => self.depth = self.depth.saturating_sub(1),
            b':' if self.depth == 1 => {
                if self.last_string_was_id_key && !self.id_done {
                    self.in_id_value = true;
                    self.raw.clear();
                }
                self.last_string_was_id_key = false;
            }
            b' ' | b'\t' | b'\r' | b'\n' => {}
            _ if self.depth == 1 => self.last_string_was_id_key = false,
            _ => {}
        }
    }

    /// The id, when one was seen whole: a string or a number.
    pub fn id(&self) -> Option<Value> {
        if !self.id_done || self.raw_over {
            return None;
        }
        match serde_json::from_slice::<Value>(&self.raw) {
            Ok(v @ (Value::String(_) | Value::Number(_))) => Some(v),
            _ => None,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use tokio::io::AsyncReadExt;

    fn scan(text: &str) -> Option<Value> {
        let mut s = IdScanner::default();
        // Feed in awkward pieces, as a pipe would.
        for piece in text.as_bytes().chunks(3) {
            s.feed(piece);
        }
        s.id()
    }

    #[test]
    fn finds_the_top_level_id_anywhere() {
        assert_eq!(
            scan(r#"{"jsonrpc":"2.0","id":7,"method":"x"}"#),
            Some(json!(7))
        );
        assert_eq!(
            scan(r#"{"method":"x","params":{"id":1,"a":"\"id\":2"},"id" : "r-1" }"#),
            Some(json!("r-1"))
        );
        assert_eq!(scan(r#"{"params":{"id":1},"method":"x"}"#), None);
        assert_eq!(scan(r#"{"id":{"x":1}}"#), None);
        assert_eq!(scan(r#"{"id":"#), None);
    }

    fn answer(line: &str) -> Value {
        match classify(line.as_bytes()) {
            Line::Answer(a) => a,
            other => panic!("{line}: {other:?}"),
        }
    }

    fn code_and_id(line: &str) -> (i64, Value) {
        let a = answer(line);
        (a["error"]["code"].as_i64().unwrap(), a["id"].clone())
    }

    #[test]
    fn lines_that_are_not_json_are_parse_errors_with_a_null_id() {
        for line in [
            "{",
            "not json",
            "{\"id\": 1,}",
            "\"a\" \"b\"",
            "\u{7f}\u{1}",
        ] {
            assert_eq!(code_and_id(line), (-32700, Value::Null), "{line}");
        }
        let bad_utf8 = classify(b"{\"id\": 1, \"method\": \"\xff\"}");
        assert!(matches!(bad_utf8, Line::Answer(a) if a["error"]["code"] == -32700));
    }

    #[test]
    fn params_that_do_not_fit_are_invalid_params_with_the_id() {
        for (params, needle) in [
            (
                json!({"name": "a.b", "arguments": [1]}),
                "`arguments` is an array",
            ),
            (
                json!({"name": "a.b", "arguments": "x"}),
                "`arguments` is a string",
            ),
            (json!({"name": 7}), "`name` is a number"),
            (json!({"arguments": {}}), "`name` is missing"),
            (json!([1]), "`params` is an array"),
            (Value::Null, "`params` are missing"),
        ] {
            let line = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": params})
                .to_string();
            let a = answer(&line);
            assert_eq!(
                (a["error"]["code"].as_i64(), &a["id"]),
                (Some(-32602), &json!(4)),
                "{line}"
            );
            assert!(
                a["error"]["message"].as_str().unwrap().contains(needle),
                "{a}"
            );
        }
        let a = answer(r#"{"jsonrpc": "2.0", "id": "x", "method": "tools/list", "params": 3}"#);
        assert_eq!(a["error"]["code"], -32602);
        // A method hcp does not know is the server's to answer (method not found); params
        // that are no structured value make any request invalid.
        assert!(matches!(
            classify(br#"{"jsonrpc": "2.0", "id": 1, "method": "x/y", "params": {"a": 3}}"#),
            Line::Message(_)
        ));
        assert_eq!(
            code_and_id(r#"{"jsonrpc": "2.0", "id": 1, "method": "x/y", "params": 3}"#),
            (-32600, json!(1))
        );
    }

    #[test]
    fn a_repeated_key_is_refused_never_last_wins() {
        let line = r#"{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "a.b", "arguments": {"to": "alice", "to": "mallory"}}}"#;
        let a = answer(line);
        assert_eq!(a["id"], 9);
        assert_eq!(a["error"]["code"], -32602);
        assert_eq!(a["error"]["data"]["code"], "duplicate_key");
        assert_eq!(a["error"]["data"]["key"], "to");
        assert_eq!(a["error"]["data"]["path"], "params.arguments");
        let a = answer(r#"{"jsonrpc": "2.0", "id": 9, "id": 10, "method": "ping"}"#);
        assert_eq!(a["error"]["code"], -32600);
        // A notification that repeats a key has no one to answer.
        assert!(matches!(
            classify(br#"{"jsonrpc": "2.0", "method": "x", "method": "y"}"#),
            Line::Drop(_)
        ));
    }

    #[test]
    fn an_answer_counts_only_with_the_exact_id_hcp_sent() {
        for line in [
            r#"{"jsonrpc": "2.0", "id": "1", "result": {"action": "accept"}}"#,
            r#"{"jsonrpc": "2.0", "id": 1.5, "result": {}}"#,
            r#"{"jsonrpc": "2.0", "id": null, "result": {}}"#,
            r#"{"jsonrpc": "2.0", "result": {}}"#,
            r#"{"jsonrpc": "2.0", "id": "0", "error": {"code": 1, "message": "x"}}"#,
        ] {
            assert!(matches!(classify(line.as_bytes()), Line::Drop(_)), "{line}");
        }
        assert!(matches!(
            classify(br#"{"jsonrpc": "2.0", "id": 1, "result": {"action": "accept"}}"#),
            Line::Message(_)
        ));
    }

    #[test]
    fn batches_and_non_messages_are_invalid_requests() {
        assert_eq!(code_and_id("[]"), (-32600, Value::Null));
        assert_eq!(
            code_and_id(r#"[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]"#),
            (-32600, Value::Null)
        );
        assert_eq!(code_and_id("3"), (-32600, Value::Null));
        assert_eq!(
            code_and_id(r#"{"jsonrpc": "2.0", "id": 5, "method": 3}"#),
            (-32600, json!(5))
        );
        assert!(matches!(classify(b"  \r"), Line::Drop(_)));
        assert!(matches!(
            classify(br#"{"jsonrpc": "2.0", "id": 1, "method": "ping"}"#),
            Line::Message(_)
        ));
    }

    #[test]
    fn a_pipe_whose_reader_closes_is_seen_at_once() {
        use std::os::fd::AsFd;
        let (r, w) = std::io::pipe().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        watch_reader(
            w.as_fd().try_clone_to_owned().unwrap(),
            Arc::new(move || {
                let _ = tx.send(());
            }),
        );
        drop(r);
        // Blocks until the watcher runs `gone` (no timing involved).
        rx.recv().unwrap();
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_pump_answers_bad_lines_and_passes_the_rest() {
        let big = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{{\"name\":\"a.b\",\"arguments\":{{\"x\":\"{}\"}}}}}}\n",
            "y".repeat(5000)
        );
        let input = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}}\nnot json\n{big}{{\"c\":\"{}\"}}\n{{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}}\n",
            "z".repeat(5000)
        );
        let (w, mut r) = tokio::io::duplex(1 << 20);
        let went = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let gone: Gone = {
            let went = went.clone();
            Arc::new(move || {
                went.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            })
        };
        let out = Output::new(w, gone);
        let (mut intake, tx) = Intake::new(out.clone());
        pump(input.as_bytes(), tx, out, 1000).await;
        assert_eq!(
            went.load(std::sync::atomic::Ordering::SeqCst),
            0,
            "stdin ending is not the client going away"
        );
        let mut ids = Vec::new();
        while let Some(m) = intake.receive().await {
            ids.push(serde_json::to_value(&m).unwrap()["id"].clone());
        }
        assert_eq!(ids, vec![json!(1), json!(2)]);
        drop(intake);
        let mut text = String::new();
        r.read_to_string(&mut text).await.unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let codes: Vec<(Value, Value)> = lines
            .iter()
            .map(|l| (l["id"].clone(), l["error"]["code"].clone()))
            .collect();
        assert_eq!(
            codes,
            vec![(Value::Null, json!(-32700)), (json!(3), json!(-32600))]
        );
        assert_eq!(lines[1]["error"]["data"]["code"], "request_too_large");
    }
}
