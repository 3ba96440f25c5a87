//! The bounded reader in front of the SDK's stdio transport: lines (JSON-RPC messages)
//! pass through unchanged up to [`MAX_REQUEST_BYTES`]; a longer one is never held in
//! memory. Its top-level `id` is picked out while it streams past and the line is replaced
//! by a small `hcp/request_too_large` request with that id, which the server answers with
//! an Invalid Request error, so the client is told instead of waiting forever (the SDK
//! alone would drop the line and answer nothing).

use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};

/// The largest message read from the client, in bytes (1 MiB). One argv element may hold
/// at most 128 KiB on Linux, so no verb can take more than this anyway.
pub const MAX_REQUEST_BYTES: usize = 1024 * 1024;

/// The method of the stand-in request for a line over [`MAX_REQUEST_BYTES`]; its params
/// are `{"bytes": N}` (N: the bytes read before the line was cut off from memory).
pub const TOO_LARGE_METHOD: &str = "hcp/request_too_large";

/// Copies `input` to `output` line by line until `input` ends (the client closed stdin)
/// or `output` is closed, replacing lines over `max` bytes as the module says. Returns
/// when either side is done; dropping `output` then tells the SDK the client went away.
pub async fn pump<R, W>(mut input: R, mut output: W, max: usize)
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut line: Vec<u8> = Vec::new();
    let mut oversized: Option<IdScanner> = None;
    let mut oversized_bytes: usize = 0;
    loop {
        let (consumed, ended) = {
            let buf = match input.fill_buf().await {
                Ok(b) => b,
                Err(_) => return,
            };
            if buf.is_empty() {
                return;
            }
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
        let out = match oversized.take() {
            Some(scan) => match scan.id() {
                Some(id) => {
                    let stand_in = serde_json::json!({
                        "jsonrpc": "2.0",
                        "id": id,
                        "method": TOO_LARGE_METHOD,
                        "params": { "bytes": oversized_bytes },
                    });
                    let mut text = stand_in.to_string().into_bytes();
                    text.push(b'\n');
                    text
                }
                // A notification (or garbage) has no one to answer: dropped.
                None => Vec::new(),
            },
            None => std::mem::take(&mut line),
        };
        if !out.is_empty()
            && (output.write_all(&out).await.is_err() || output.flush().await.is_err())
        {
            return;
        }
        line.clear();
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
    use serde_json::json;

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

    #[tokio::test(flavor = "current_thread")]
    async fn long_lines_become_a_small_stand_in() {
        let big = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{{\"name\":\"a.b\",\"arguments\":{{\"x\":\"{}\"}}}}}}\n",
            "y".repeat(5000)
        );
        let input = format!(
            "{{\"a\":1}}\n{big}{{\"b\":2}}\n{{\"c\":\"{}\"}}\n",
            "z".repeat(5000)
        );
        let mut out = Vec::new();
        pump(input.as_bytes(), &mut out, 1000).await;
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(
            lines,
            vec![
                json!({"a": 1}),
                json!({"jsonrpc": "2.0", "id": 3, "method": TOO_LARGE_METHOD, "params": {"bytes": big.len()}}),
                json!({"b": 2}),
            ]
        );
    }
}
