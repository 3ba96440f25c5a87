//! The one credential redaction (RUNTIME §8: a credential never leaves the store through
//! a call's output), for exec's output, connect's stderr and sense's relayed events and
//! stderr: every string value of the credential of [`MIN_SECRET_BYTES`] or more, as
//! written and as it appears inside a JSON string (`"` → `\"`, `/` kept, control
//! characters escaped), becomes [`REDACTED`].

use serde_json::{Map, Value};

/// What a redacted value reads as.
pub const REDACTED: &str = "[redacted]";

/// The shortest credential value that is redacted, in bytes: shorter values (`true`,
/// `v1`) would redact ordinary text.
pub const MIN_SECRET_BYTES: usize = 4;

/// The forms of a credential's values to redact, longest first (so that a value that
/// contains another is replaced whole).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Redactor {
    forms: Vec<String>,
}

impl Redactor {
    /// The redactor of `secret` (a credential object).
    pub fn new(secret: &Map<String, Value>) -> Self {
        let mut forms: Vec<String> = Vec::new();
        for s in secret
            .values()
            .filter_map(Value::as_str)
            .filter(|s| s.len() >= MIN_SECRET_BYTES)
        {
            forms.push(s.to_owned());
            if let Ok(q) = serde_json::to_string(s) {
                forms.push(q[1..q.len() - 1].to_owned());
            }
        }
        forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
        forms.dedup();
        Self { forms }
    }

    /// Whether there is nothing to redact.
    pub fn is_empty(&self) -> bool {
        self.forms.is_empty()
    }

    /// `text` with every form replaced.
    pub fn text(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for f in &self.forms {
            if out.contains(f.as_str()) {
                out = out.replace(f.as_str(), REDACTED);
            }
        }
        out
    }

    /// `bytes` with every form replaced; output that is not UTF-8 is read lossily when it
    /// holds a form, and returned as it is otherwise.
    pub fn bytes(&self, bytes: &[u8]) -> Vec<u8> {
        let text = String::from_utf8_lossy(bytes);
        if !self.forms.iter().any(|f| text.contains(f.as_str())) {
            return bytes.to_vec();
        }
        self.text(&text).into_bytes()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn plain_and_json_escaped_forms_are_redacted() {
        let secret = json!({"token": "ab\"cd/ef\\gh", "short": "ab", "n": 12345})
            .as_object()
            .cloned()
            .unwrap();
        let r = Redactor::new(&secret);
        let plain = "token=ab\"cd/ef\\gh.";
        assert_eq!(r.text(plain), "token=[redacted].");
        let escaped = json!({"echo": "ab\"cd/ef\\gh"}).to_string();
        assert_eq!(r.text(&escaped), r#"{"echo":"[redacted]"}"#);
        // short and non-string values are not secrets
        assert_eq!(r.text("ab 12345"), "ab 12345");
        // bytes that are not UTF-8 and hold nothing are returned as they are
        assert_eq!(r.bytes(b"\xff\xfe"), b"\xff\xfe".to_vec());
    }
}
