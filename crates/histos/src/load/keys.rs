//! Unknown keys, reported so that they teach: the error names the keys allowed at that
//! place and the nearest one (`maxLength` → `max_length`, a `limits:` block → the
//! tool's `rate_limit` and `budget`). The code stays `unknown_key` (HISTOS-ENGINE §2).

use crate::doc::Node;
use crate::error::{PolicyCode as C, PolicyError};
use crate::value::fast_eq;

use super::{Loc, err, shown};

/// Refuses the first key of `m` not in `allowed`, with the keys allowed there and, when
/// one is close, a suggestion.
pub(super) fn check_keys<'d>(
    m: impl Node<'d>,
    allowed: &[&str],
    loc: &Loc<'_>,
) -> Result<(), PolicyError> {
    for (k, _) in m.entries() {
        if !allowed.contains(&k) {
            return Err(unknown_key(shown(k), allowed, loc));
        }
    }
    Ok(())
}

/// The value of each key of `allowed` in `m` (by position), refusing the first key of
/// `m` not in `allowed` as [`check_keys`] does: one pass over the mapping in place of a
/// lookup per key.
pub(super) fn take_keys<'d, N: Node<'d>, const K: usize>(
    m: N,
    allowed: &[&str; K],
    loc: &Loc<'_>,
) -> Result<[Option<N>; K], PolicyError> {
    let mut out = [None; K];
    for (k, v) in m.entries() {
        match allowed.iter().position(|a| fast_eq(a, k)) {
            Some(i) => out[i] = Some(v),
            None => return Err(unknown_key(shown(k), allowed, loc)),
        }
    }
    Ok(out)
}

/// The `unknown_key` error for `key` at `loc`.
pub(super) fn unknown_key(key: &str, allowed: &[&str], loc: &Loc<'_>) -> PolicyError {
    let mut msg = match loc {
        Loc::Root => format!("unknown top-level key `{key}`"),
        _ => format!("unknown key `{key}`"),
    };
    let near = nearest(key, allowed);
    if !near.is_empty() {
        let names: Vec<String> = near.iter().map(|n| format!("`{n}`")).collect();
        msg.push_str(&format!("; did you mean {}?", names.join(" or ")));
    } else if let Some(h) = hint(key) {
        msg.push_str("; ");
        msg.push_str(h);
    }
    let mut sorted: Vec<&str> = allowed.to_vec();
    sorted.sort_unstable();
    msg.push_str(&format!(" (keys allowed here: {})", sorted.join(", ")));
    match loc {
        Loc::Root => PolicyError::new(C::UnknownKey, msg).at(key),
        _ => err(C::UnknownKey, msg, loc),
    }
}

/// Words people reach for that the format spells differently.
const SYNONYMS: [(&str, &[&str]); 12] = [
    ("limits", &["rate_limit", "budget"]),
    ("limit", &["rate_limit", "budget"]),
    ("ratelimit", &["rate_limit"]),
    ("items", &["item_type", "item_enum"]),
    ("confirm", &["confirmation"]),
    ("requiresconfirmation", &["confirmation"]),
    ("escalation", &["escalate"]),
    ("grants", &["allow"]),
    ("tools", &["allow"]),
    ("extends", &["inherits"]),
    ("parent", &["inherits"]),
    ("arguments", &["args"]),
];

/// A hint for a key that has no counterpart in the format.
fn hint(key: &str) -> Option<&'static str> {
    Some(match key {
        "permissions" | "policy_version" | "role_inherits" => {
            "that is a constructor spelling, not a bundle key"
        }
        "description" | "title" | "default" | "examples" | "$comment" => {
            "the format has no such key; write a comment instead"
        }
        "properties" | "additionalProperties" | "$schema" => {
            "a Histos schema is not a JSON Schema: `args` maps each argument name to its field"
        }
        _ => return None,
    })
}

/// Lowercase with `_`, `-` and `$` removed (`maxLength` and `max_length` agree).
fn fold(s: &str) -> String {
    s.chars()
        .filter(|c| !matches!(c, '_' | '-' | '$'))
        .flat_map(char::to_lowercase)
        .collect()
}

/// The allowed keys `key` most likely meant (same letters ignoring case and separators,
/// a synonym, or the closest within a small edit distance).
pub(super) fn nearest<'a>(key: &str, allowed: &[&'a str]) -> Vec<&'a str> {
    let k = fold(key);
    if let Some(a) = allowed.iter().find(|a| fold(a) == k) {
        return vec![*a];
    }
    if let Some((_, to)) = SYNONYMS.iter().find(|(w, _)| *w == k) {
        let hits: Vec<&'a str> = allowed.iter().copied().filter(|a| to.contains(a)).collect();
        if !hits.is_empty() {
            return hits;
        }
    }
    let limit = (k.chars().count() / 3).clamp(1, 3);
    let mut best: Option<(usize, &'a str)> = None;
    for a in allowed {
        let d = distance(&k, &fold(a));
        if d <= limit && best.is_none_or(|(b, _)| d < b) {
            best = Some((d, a));
        }
    }
    best.map(|(_, a)| vec![a]).unwrap_or_default()
}

/// Optimal string alignment distance (Levenshtein plus adjacent transpositions).
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let w = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * w];
    for i in 0..=a.len() {
        d[i * w] = i;
    }
    for (j, slot) in d.iter_mut().enumerate().take(w) {
        *slot = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[(i - 1) * w + j] + 1)
                .min(d[i * w + j - 1] + 1)
                .min(d[(i - 1) * w + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[(i - 2) * w + j - 2] + 1);
            }
            d[i * w + j] = v;
        }
    }
    d[a.len() * w + b.len()]
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::nearest;

    const FIELD: [&str; 5] = ["max_length", "min_length", "pattern", "type", "maximum"];
    const TOOL: [&str; 4] = ["args", "budget", "rate_limit", "returns"];

    #[test]
    fn camel_case_json_schema_spellings_find_their_snake_case_key() {
        assert_eq!(nearest("maxLength", &FIELD), ["max_length"]);
        assert_eq!(nearest("MinLength", &FIELD), ["min_length"]);
        assert_eq!(nearest("patern", &FIELD), ["pattern"]);
        assert_eq!(nearest("limits", &TOOL), ["budget", "rate_limit"]);
        assert!(nearest("zzzzzz", &FIELD).is_empty());
    }
}
