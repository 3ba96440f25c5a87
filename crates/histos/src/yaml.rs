//! A YAML reader with the reference's YAML 1.1 scalar rules (HISTOS-ENGINE §3.5).
//!
//! Events come from `granit-parser`; this module composes them into a [`Value`] the way
//! PyYAML's `SafeLoader` would, with the reference's two changes: duplicate mapping keys
//! are refused and only `true/True/TRUE/false/False/FALSE` are booleans (`yes`, `on`, `y`
//! … stay strings). YAML 1.1 ints (`012` octal, `0x1f`, `0b101`, `1_000`, `1:30`
//! sexagesimal, `+5`), floats (`1.`, `1.0e+3`, `.inf`, `.nan`; but `1e3` is a string),
//! nulls (`~`, `null`, empty) and timestamps are resolved as 1.1 does. Anchors, aliases
//! and `<<` merge keys work; expansion is capped at [`MAX_NODES`] (`policy_too_large`).

use std::collections::HashMap;

use granit_parser::{Event, Parser, ScalarStyle, Span};

use crate::error::{PolicyCode, PolicyError};
use crate::json::{MAX_DEPTH, number_value};
use crate::value::{Map, NON_STRING_KEY_PREFIX, Value};

/// Maximum number of nodes after alias expansion (HISTOS-ENGINE §2a step 2).
pub const MAX_NODES: usize = 200_000;

/// Parses one YAML document.
///
/// # Errors
/// `unparseable` (syntax, empty or multi-document stream, unsupported tag),
/// `duplicate_key`, `policy_too_large` (alias expansion past [`MAX_NODES`]).
pub fn parse(text: &str) -> Result<Value, PolicyError> {
    let mut c = Composer {
        parser: Parser::new_from_str(text),
        anchors: HashMap::new(),
        nodes: 0,
    };
    let mut doc: Option<Value> = None;
    loop {
        let (ev, span) = c.next()?;
        match ev {
            Event::StreamStart | Event::DocumentEnd => {}
            Event::StreamEnd => break,
            Event::DocumentStart(..) => {
                if doc.is_some() {
                    return Err(err_at(
                        PolicyCode::Unparseable,
                        "expected a single document",
                        &span,
                    ));
                }
                let (ev, span) = c.next()?;
                if matches!(ev, Event::DocumentEnd) {
                    return Err(err_at(PolicyCode::Unparseable, "empty document", &span));
                }
                doc = Some(c.node(ev, span, 0)?);
            }
            _ => return Err(err_at(PolicyCode::Unparseable, "unexpected event", &span)),
        }
    }
    doc.ok_or_else(|| PolicyError::new(PolicyCode::Unparseable, "empty YAML document"))
}

fn err_at(code: PolicyCode, msg: &str, span: &Span) -> PolicyError {
    PolicyError::new(code, format!("invalid YAML: {msg}")).at(format!(
        "line {} column {}",
        span.start.line(),
        span.start.col() + 1
    ))
}

struct Composer<'a> {
    parser: Parser<'a, granit_parser::StrInput<'a>>,
    anchors: HashMap<usize, (Value, usize)>,
    nodes: usize,
}

impl<'a> Composer<'a> {
    fn next(&mut self) -> Result<(Event<'a>, Span), PolicyError> {
        loop {
            match self.parser.next_event() {
                None => {
                    return Err(PolicyError::new(
                        PolicyCode::Unparseable,
                        "invalid YAML: unexpected end",
                    ));
                }
                Some(Err(e)) => {
                    return Err(PolicyError::new(
                        PolicyCode::Unparseable,
                        format!("invalid YAML: {}", e.info()),
                    )
                    .at(format!(
                        "line {} column {}",
                        e.marker().line(),
                        e.marker().col() + 1
                    )));
                }
                Some(Ok((ev, span))) => match ev {
                    Event::Anchor(..) => continue,
                    #[allow(unreachable_patterns)]
                    _ => return Ok((ev, span)),
                },
            }
        }
    }

    fn count(&mut self, n: usize, span: &Span) -> Result<(), PolicyError> {
        self.nodes += n;
        if self.nodes > MAX_NODES {
            return Err(err_at(
                PolicyCode::PolicyTooLarge,
                "alias expansion exceeds 200000 nodes",
                span,
            ));
        }
        Ok(())
    }

    fn node(&mut self, ev: Event<'a>, span: Span, depth: usize) -> Result<Value, PolicyError> {
        if depth > MAX_DEPTH {
            return Err(err_at(PolicyCode::Unparseable, "nesting too deep", &span));
        }
        let before = self.nodes;
        self.count(1, &span)?;
        let (value, anchor) = match ev {
            Event::Alias(id) => {
                let (v, n) = self
                    .anchors
                    .get(&id)
                    .cloned()
                    .ok_or_else(|| err_at(PolicyCode::Unparseable, "unknown alias", &span))?;
                self.count(n, &span)?;
                return Ok(v);
            }
            Event::Scalar(text, style, anchor, tag) => {
                let v = resolve_scalar(&text, style, tag.as_deref(), &span)?;
                (v, anchor)
            }
            Event::SequenceStart(_, anchor, tag) => {
                check_collection_tag(tag.as_deref(), "seq", &span)?;
                let mut items = Vec::new();
                loop {
                    let (ev, sp) = self.next()?;
                    if matches!(ev, Event::SequenceEnd) {
                        break;
                    }
                    items.push(self.node(ev, sp, depth + 1)?);
                }
                (Value::List(items), anchor)
            }
            Event::MappingStart(_, anchor, tag) => {
                check_collection_tag(tag.as_deref(), "map", &span)?;
                (Value::Map(self.mapping(depth)?), anchor)
            }
            _ => return Err(err_at(PolicyCode::Unparseable, "unexpected event", &span)),
        };
        if anchor != 0 {
            let size = self.nodes - before;
            self.anchors.insert(anchor, (value.clone(), size));
        }
        Ok(value)
    }

    fn mapping(&mut self, depth: usize) -> Result<Map, PolicyError> {
        let mut explicit = Map::new();
        let mut merged: Vec<Map> = Vec::new();
        loop {
            let (ev, kspan) = self.next()?;
            if matches!(ev, Event::MappingEnd) {
                break;
            }
            let is_merge =
                matches!(&ev, Event::Scalar(t, ScalarStyle::Plain, _, None) if t == "<<");
            let key = self.node(ev, kspan, depth + 1)?;
            let (vev, vspan) = self.next()?;
            let value = self.node(vev, vspan, depth + 1)?;
            if is_merge {
                match value {
                    Value::Map(m) => merged.push(m),
                    Value::List(items) => {
                        for it in items {
                            match it {
                                Value::Map(m) => merged.push(m),
                                _ => {
                                    return Err(err_at(
                                        PolicyCode::Unparseable,
                                        "a merge key takes mappings",
                                        &kspan,
                                    ));
                                }
                            }
                        }
                    }
                    _ => {
                        return Err(err_at(
                            PolicyCode::Unparseable,
                            "a merge key takes mappings",
                            &kspan,
                        ));
                    }
                }
                continue;
            }
            let k = match key {
                Value::Str(s) => s,
                Value::List(_) | Value::Map(_) => {
                    return Err(err_at(
                        PolicyCode::Unparseable,
                        "unhashable mapping key",
                        &kspan,
                    ));
                }
                other => {
                    let mut s = String::new();
                    s.push(NON_STRING_KEY_PREFIX);
                    other.write_py_str(&mut s);
                    s
                }
            };
            if explicit.contains_key(&k) {
                return Err(err_at(
                    PolicyCode::DuplicateKey,
                    &format!(
                        "duplicate key `{}`",
                        k.trim_start_matches(NON_STRING_KEY_PREFIX)
                    ),
                    &kspan,
                ));
            }
            explicit.push_unchecked(k, value);
        }
        if merged.is_empty() {
            return Ok(explicit);
        }
        // PyYAML: merged pairs first (later merge sources do not override earlier ones),
        // explicit keys override.
        let mut out = Map::new();
        for m in merged {
            for (k, v) in m.iter() {
                if !out.contains_key(k) {
                    out.push_unchecked(k.clone(), v.clone());
                }
            }
        }
        for (k, v) in explicit.iter() {
            out.insert(k.clone(), v.clone());
        }
        Ok(out)
    }
}

fn check_collection_tag(
    tag: Option<&granit_parser::Tag>,
    want: &str,
    span: &Span,
) -> Result<(), PolicyError> {
    match tag {
        None => Ok(()),
        Some(t) if t.is_yaml_core_schema_tag(want) => Ok(()),
        Some(t) => Err(err_at(
            PolicyCode::Unparseable,
            &format!("unsupported tag `{}{}`", t.handle(), t.suffix()),
            span,
        )),
    }
}

fn resolve_scalar(
    text: &str,
    style: ScalarStyle,
    tag: Option<&granit_parser::Tag>,
    span: &Span,
) -> Result<Value, PolicyError> {
    if let Some(t) = tag {
        let core = ["str", "int", "float", "bool", "null"]
            .into_iter()
            .find(|s| t.is_yaml_core_schema_tag(s));
        return match core {
            Some("str") => Ok(Value::Str(text.to_string())),
            Some("int") => {
                resolve_int(text).ok_or_else(|| err_at(PolicyCode::Unparseable, "not an int", span))
            }
            Some("float") => resolve_float(text)
                .or_else(|| resolve_int(text).and_then(|v| v.as_f64().map(Value::Float)))
                .ok_or_else(|| err_at(PolicyCode::Unparseable, "not a float", span)),
            Some("bool") => match text {
                "true" | "True" | "TRUE" => Ok(Value::Bool(true)),
                "false" | "False" | "FALSE" => Ok(Value::Bool(false)),
                _ => Err(err_at(PolicyCode::Unparseable, "not a bool", span)),
            },
            Some("null") => Ok(Value::Null),
            _ if t.handle() == "!" && t.suffix().is_empty() => Ok(Value::Str(text.to_string())),
            _ => Err(err_at(
                PolicyCode::Unparseable,
                &format!("unsupported tag `{}{}`", t.handle(), t.suffix()),
                span,
            )),
        };
    }
    if style != ScalarStyle::Plain {
        return Ok(Value::Str(text.to_string()));
    }
    resolve_plain(text, span)
}

/// YAML 1.1 implicit resolution of a plain scalar, as the reference's loader does it.
fn resolve_plain(t: &str, span: &Span) -> Result<Value, PolicyError> {
    match t {
        "" | "~" | "null" | "Null" | "NULL" => return Ok(Value::Null),
        "true" | "True" | "TRUE" => return Ok(Value::Bool(true)),
        "false" | "False" | "FALSE" => return Ok(Value::Bool(false)),
        "=" => {
            return Err(err_at(
                PolicyCode::Unparseable,
                "the `=` value tag is not supported",
                span,
            ));
        }
        _ => {}
    }
    let first = t.as_bytes()[0];
    if first.is_ascii_digit() || matches!(first, b'-' | b'+' | b'.') {
        if let Some(v) = resolve_int(t) {
            return Ok(v);
        }
        if let Some(v) = resolve_float(t) {
            return Ok(v);
        }
        if is_timestamp(t) {
            return Ok(Value::Timestamp(t.into()));
        }
    }
    Ok(Value::Str(t.to_string()))
}

fn split_sign(t: &str) -> (bool, &str) {
    match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    }
}

fn all(s: &str, f: impl Fn(u8) -> bool) -> bool {
    s.bytes().all(f)
}

/// YAML 1.1 int: `[-+]?0b[01_]+ | [-+]?0[0-7_]+ | [-+]?(0|[1-9][0-9_]*) |
/// [-+]?0x[0-9a-fA-F_]+ | [-+]?[1-9][0-9_]*(:[0-5]?[0-9])+`.
fn resolve_int(t: &str) -> Option<Value> {
    let (neg, body) = split_sign(t);
    if body.is_empty() {
        return None;
    }
    let radix_value = |digits: &str, radix: u32| -> Option<Value> {
        let d: String = digits.chars().filter(|&c| c != '_').collect();
        if d.is_empty() {
            return Some(Value::Int(0));
        }
        let v = i128::from_str_radix(&d, radix).ok()?;
        let v = if neg { -v } else { v };
        Some(
            i64::try_from(v)
                .map(Value::Int)
                .unwrap_or_else(|_| Value::BigInt(v.to_string().into())),
        )
    };
    if let Some(b) = body.strip_prefix("0b") {
        return (!b.is_empty() && all(b, |c| matches!(c, b'0' | b'1' | b'_')))
            .then(|| radix_value(b, 2))
            .flatten();
    }
    if let Some(h) = body.strip_prefix("0x") {
        return (!h.is_empty() && all(h, |c| c.is_ascii_hexdigit() || c == b'_'))
            .then(|| radix_value(h, 16))
            .flatten();
    }
    if body == "0" {
        return Some(Value::Int(0));
    }
    if body.len() > 1 && body.starts_with('0') {
        return all(&body[1..], |c| matches!(c, b'0'..=b'7' | b'_'))
            .then(|| radix_value(&body[1..], 8))
            .flatten();
    }
    if !body.as_bytes()[0].is_ascii_digit() {
        return None;
    }
    if body.contains(':') {
        let mut parts = body.split(':');
        let head = parts.next()?;
        if !all(head, |c| c.is_ascii_digit() || c == b'_') {
            return None;
        }
        let mut acc: i128 = head.replace('_', "").parse().ok()?;
        for p in parts {
            if p.is_empty() || p.len() > 2 || !all(p, |c| c.is_ascii_digit()) {
                return None;
            }
            if p.len() == 2 && p.as_bytes()[0] > b'5' {
                return None;
            }
            acc = acc.checked_mul(60)?.checked_add(p.parse::<i128>().ok()?)?;
        }
        let v = if neg { -acc } else { acc };
        return i64::try_from(v).ok().map(Value::Int);
    }
    if all(body, |c| c.is_ascii_digit() || c == b'_') {
        let d: String = body.chars().filter(|&c| c != '_').collect();
        let text = if neg { format!("-{d}") } else { d };
        return Some(number_value(&text, false));
    }
    None
}

/// YAML 1.1 float: `[-+]?[0-9][0-9_]*\.[0-9_]*([eE][-+][0-9]+)? | \.[0-9][0-9_]*([eE][-+][0-9]+)?
/// | [-+]?[0-9][0-9_]*(:[0-5]?[0-9])+\.[0-9_]* | [-+]?\.(inf|Inf|INF) | \.(nan|NaN|NAN)`.
fn resolve_float(t: &str) -> Option<Value> {
    match t {
        ".nan" | ".NaN" | ".NAN" => return Some(Value::Float(f64::NAN)),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Some(Value::Float(f64::INFINITY));
        }
        "-.inf" | "-.Inf" | "-.INF" => return Some(Value::Float(f64::NEG_INFINITY)),
        _ => {}
    }
    let (neg, body) = split_sign(t);
    let (mantissa, exp) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    if let Some(e) = exp {
        let eb = e.as_bytes();
        if eb.len() < 2 || !matches!(eb[0], b'-' | b'+') || !all(&e[1..], |c| c.is_ascii_digit()) {
            return None;
        }
    }
    let (int_part, frac) = mantissa.split_once('.')?;
    if !all(frac, |c| c.is_ascii_digit() || c == b'_') {
        return None;
    }
    if int_part.is_empty() {
        // `\.[0-9][0-9_]*` — no sign allowed in this branch.
        if t.starts_with(['-', '+']) || !frac.as_bytes().first().is_some_and(u8::is_ascii_digit) {
            return None;
        }
    } else if int_part.contains(':') {
        if exp.is_some() {
            return None;
        }
        let mut parts = int_part.split(':');
        let head = parts.next()?;
        if head.is_empty()
            || !head.as_bytes()[0].is_ascii_digit()
            || !all(head, |c| c.is_ascii_digit() || c == b'_')
        {
            return None;
        }
        let mut acc: f64 = head.replace('_', "").parse().ok()?;
        for p in parts {
            if p.is_empty()
                || p.len() > 2
                || !all(p, |c| c.is_ascii_digit())
                || (p.len() == 2 && p.as_bytes()[0] > b'5')
            {
                return None;
            }
            acc = acc * 60.0 + p.parse::<f64>().ok()?;
        }
        let f: f64 = format!("0.{}", frac.replace('_', ""))
            .parse()
            .unwrap_or(0.0);
        let v = acc + f;
        return Some(Value::Float(if neg { -v } else { v }));
    } else if !int_part.as_bytes()[0].is_ascii_digit()
        || !all(int_part, |c| c.is_ascii_digit() || c == b'_')
    {
        return None;
    }
    let mut s = String::with_capacity(t.len() + 2);
    if neg {
        s.push('-');
    }
    s.push_str(if int_part.is_empty() { "0" } else { int_part });
    s.push('.');
    s.push_str(if frac.is_empty() { "0" } else { frac });
    if let Some(e) = exp {
        s.push('e');
        s.push_str(e);
    }
    let s = s.replace('_', "");
    s.parse::<f64>().ok().map(Value::Float)
}

/// YAML 1.1 timestamp (date or date-time).
fn is_timestamp(t: &str) -> bool {
    let b = t.as_bytes();
    let d = |i: usize| b.get(i).is_some_and(u8::is_ascii_digit);
    if b.len() == 10
        && (0..4).all(d)
        && b[4] == b'-'
        && d(5)
        && d(6)
        && b[7] == b'-'
        && d(8)
        && d(9)
    {
        return true;
    }
    // Loose date-time form: YYYY-M(M)-D(D)(T| )H(H):MM:SS...
    if b.len() >= 14 && (0..4).all(d) && b[4] == b'-' {
        let rest = &t[5..];
        let sep = rest.find(['T', 't', ' ', '\t']);
        if let Some(i) = sep {
            let date = &rest[..i];
            let time = rest[i + 1..].trim_start();
            let dparts: Vec<&str> = date.split('-').collect();
            let date_ok = dparts.len() == 2
                && dparts
                    .iter()
                    .all(|p| (1..=2).contains(&p.len()) && all(p, |c| c.is_ascii_digit()));
            let tb = time.as_bytes();
            let hh = tb.iter().take_while(|c| c.is_ascii_digit()).count();
            let time_ok = (1..=2).contains(&hh)
                && tb.get(hh) == Some(&b':')
                && tb.len() >= hh + 6
                && tb[hh + 1].is_ascii_digit()
                && tb[hh + 2].is_ascii_digit()
                && tb[hh + 3] == b':'
                && tb[hh + 4].is_ascii_digit()
                && tb[hh + 5].is_ascii_digit();
            return date_ok && time_ok;
        }
    }
    false
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn scalar(t: &str) -> Value {
        match parse(&format!("k: {t}\n")).unwrap() {
            Value::Map(m) => m.get("k").cloned().unwrap(),
            _ => panic!("not a map"),
        }
    }

    #[test]
    fn yaml_1_1_scalars_resolve_like_the_reference() {
        assert_eq!(scalar("012"), Value::Int(10));
        assert_eq!(scalar("0x1f"), Value::Int(31));
        assert_eq!(scalar("0b101"), Value::Int(5));
        assert_eq!(scalar("1_000"), Value::Int(1000));
        assert_eq!(scalar("1:30"), Value::Int(90));
        assert_eq!(scalar("+5"), Value::Int(5));
        assert_eq!(scalar("1."), Value::Float(1.0));
        assert_eq!(scalar("1.0e+3"), Value::Float(1000.0));
        assert_eq!(scalar("500.00"), Value::Float(500.0));
        for s in [
            "1e3", "1.5e3", "-.5", "0o17", "yes", "no", "on", "off", "y", "n",
        ] {
            assert_eq!(scalar(s), Value::Str(s.into()), "{s}");
        }
        assert_eq!(scalar(".inf"), Value::Float(f64::INFINITY));
        assert_eq!(scalar("~"), Value::Null);
        assert_eq!(scalar(""), Value::Null);
        assert_eq!(scalar("True"), Value::Bool(true));
        assert_eq!(scalar("2026-01-01"), Value::Timestamp("2026-01-01".into()));
        assert_eq!(scalar("'012'"), Value::Str("012".into()));
    }

    #[test]
    fn duplicate_keys_are_refused() {
        assert_eq!(
            parse("a: 1\na: 2\n").unwrap_err().code,
            PolicyCode::DuplicateKey
        );
    }

    #[test]
    fn empty_and_multi_documents_are_unparseable() {
        assert_eq!(parse("").unwrap_err().code, PolicyCode::Unparseable);
        assert_eq!(
            parse("a: 1\n---\nb: 2\n").unwrap_err().code,
            PolicyCode::Unparseable
        );
    }

    #[test]
    fn alias_bomb_is_too_large() {
        let mut y = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..10 {
            let p = i - 1;
            y.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        assert_eq!(parse(&y).unwrap_err().code, PolicyCode::PolicyTooLarge);
    }

    #[test]
    fn merge_keys_work() {
        let v = parse("base: &b {x: 1, y: 2}\nd:\n  <<: *b\n  y: 3\n").unwrap();
        let d = v
            .as_map()
            .unwrap()
            .get("d")
            .unwrap()
            .as_map()
            .unwrap()
            .clone();
        assert_eq!(d.get("x"), Some(&Value::Int(1)));
        assert_eq!(d.get("y"), Some(&Value::Int(3)));
    }
}
