//! Policy errors that teach (issue 16): the engine's `unknown_key` message names the keys
//! allowed at that place and the nearest one; the CLI shows the fault as the message and
//! the lesson as its `hint:` line.

use histos::{PolicyCode, PolicyError};

/// A policy error as a message (the fault, with its place) and a hint (what to write
/// instead), when the engine gave one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taught {
    /// The fault: `unknown key `maxLength` (at tools.t.args.q)`.
    pub message: String,
    /// The lesson: `did you mean `max_length`? keys allowed here: …`.
    pub hint: Option<String>,
}

const ALLOWED: &str = " (keys allowed here: ";

/// Splits `e` into the fault and the lesson. Only `unknown_key` carries a lesson; every
/// other error is its message as it is.
pub fn split(e: &PolicyError) -> Taught {
    let at = e
        .location
        .as_deref()
        .map(|l| format!(" (at {l})"))
        .unwrap_or_default();
    let whole = || Taught {
        message: format!("{}{at}", e.message),
        hint: None,
    };
    if e.code != PolicyCode::UnknownKey {
        return whole();
    }
    let (before, allowed) = match e.message.split_once(ALLOWED) {
        Some((b, a)) => (b, a.strip_suffix(')').unwrap_or(a)),
        None => (e.message.as_str(), ""),
    };
    let (fault, lesson) = match before.split_once("; ") {
        Some((f, l)) => (f, l),
        None => (before, ""),
    };
    let mut hint = lesson.to_owned();
    if !allowed.is_empty() {
        if !hint.is_empty() {
            hint.push_str(if hint.ends_with('?') { " " } else { "; " });
        }
        hint.push_str("keys allowed here: ");
        hint.push_str(allowed);
    }
    Taught {
        message: format!("{fault}{at}"),
        hint: (!hint.is_empty()).then_some(hint),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn err(yaml: &str) -> PolicyError {
        histos::Policy::load_yaml(yaml).unwrap_err()
    }

    #[test]
    fn an_unknown_key_is_the_fault_and_the_lesson() {
        let t = split(&err(
            "schema_version: histos.policy/0.1\ntools:\n  t:\n    args:\n      q: {type: string, maxLength: 5}\n",
        ));
        assert_eq!(t.message, "unknown key `maxLength` (at tools.t.args.q)");
        let hint = t.hint.unwrap();
        assert!(
            hint.starts_with("did you mean `max_length`? keys allowed here: "),
            "{hint}"
        );
        assert!(hint.contains("max_length, maximum, min_items"), "{hint}");
        let t = split(&err(
            "schema_version: histos.policy/0.1\ntools:\n  t:\n    args: {}\n    limits: {rate: 5}\n",
        ));
        assert_eq!(t.message, "unknown key `limits` (at tools.t)");
        assert!(
            t.hint
                .as_deref()
                .unwrap()
                .starts_with("did you mean `budget` or `rate_limit`? keys allowed here: "),
            "{t:?}"
        );
    }

    #[test]
    fn other_errors_are_their_message() {
        let e = err(
            "schema_version: histos.policy/0.1\ntools:\n  t:\n    args: {}\n    rate_limit: 10.0\n",
        );
        let t = split(&e);
        assert_eq!(t.hint, None);
        assert!(t.message.starts_with(&e.message));
    }
}
