//! A strict JSON reader (HISTOS-ENGINE §3.5): duplicate keys refused anywhere
//! (`duplicate_key`), `NaN`/`Infinity` refused (`unparseable`), integers kept exact and
//! distinct from floats.

use crate::error::{PolicyCode, PolicyError};
use crate::value::{Map, Value};

mod tape;
pub(crate) use tape::tape;

/// Maximum nesting depth of a document (containers), beyond which it is `unparseable`.
pub(crate) const MAX_DEPTH: usize = 512;

/// Parses one JSON document into a [`Value`].
///
/// # Errors
/// `unparseable` for malformed input, `duplicate_key` for a repeated key in any object.
pub fn parse(text: &str) -> Result<Value, PolicyError> {
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
        text,
    };
    p.ws();
    let v = p.value(0)?;
    p.ws();
    if p.i != p.s.len() {
        return Err(p.err(PolicyCode::Unparseable, "extra data after the document"));
    }
    Ok(v)
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    text: &'a str,
}

impl Parser<'_> {
    fn err(&self, code: PolicyCode, msg: &str) -> PolicyError {
        let upto = &self.text.as_bytes()[..self.i.min(self.s.len())];
        let line = upto.iter().filter(|&&b| b == b'\n').count() + 1;
        let col = upto.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
        PolicyError::new(code, format!("invalid JSON: {msg}"))
            .at(format!("line {line} column {col}"))
    }

    fn ws(&mut self) {
        let rest = self.s.get(self.i..).unwrap_or_default();
        self.i += rest
            .iter()
            .position(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
            .unwrap_or(rest.len());
    }

    fn value(&mut self, depth: usize) -> Result<Value, PolicyError> {
        if depth > MAX_DEPTH {
            return Err(self.err(PolicyCode::Unparseable, "nesting too deep"));
        }
        match self.s.get(self.i) {
            None => Err(self.err(PolicyCode::Unparseable, "unexpected end of input")),
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => Ok(Value::Str(self.string()?)),
            Some(b't') => self.lit("true", Value::Bool(true)),
            Some(b'f') => self.lit("false", Value::Bool(false)),
            Some(b'n') => self.lit("null", Value::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b'N' | b'I') => {
                Err(self.err(PolicyCode::Unparseable, "NaN and Infinity are not JSON"))
            }
            Some(_) => Err(self.err(PolicyCode::Unparseable, "expected a value")),
        }
    }

    fn lit(&mut self, word: &str, v: Value) -> Result<Value, PolicyError> {
        self.word(word).map(|()| v)
    }

    fn word(&mut self, word: &str) -> Result<(), PolicyError> {
        if self.s[self.i..].starts_with(word.as_bytes()) {
            self.i += word.len();
            Ok(())
        } else {
            Err(self.err(PolicyCode::Unparseable, "expected a value"))
        }
    }

    fn object(&mut self, depth: usize) -> Result<Value, PolicyError> {
        self.i += 1;
        let mut m = Map::new();
        self.ws();
        if self.s.get(self.i) == Some(&b'}') {
            self.i += 1;
            return Ok(Value::Map(m));
        }
        loop {
            self.ws();
            if self.s.get(self.i) != Some(&b'"') {
                return Err(self.err(PolicyCode::Unparseable, "expected a string key"));
            }
            let key_at = self.i;
            let k = self.string()?;
            self.ws();
            if self.s.get(self.i) != Some(&b':') {
                return Err(self.err(PolicyCode::Unparseable, "expected `:`"));
            }
            self.i += 1;
            self.ws();
            let v = self.value(depth + 1)?;
            if m.contains_key(&k) {
                self.i = key_at;
                return Err(self.err(PolicyCode::DuplicateKey, &format!("duplicate key `{k}`")));
            }
            m.push_unchecked(k, v);
            self.ws();
            match self.s.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Ok(Value::Map(m));
                }
                _ => return Err(self.err(PolicyCode::Unparseable, "expected `,` or `}`")),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Value, PolicyError> {
        self.i += 1;
        let mut l = Vec::new();
        self.ws();
        if self.s.get(self.i) == Some(&b']') {
            self.i += 1;
            return Ok(Value::List(l));
        }
        loop {
            self.ws();
            l.push(self.value(depth + 1)?);
            self.ws();
            match self.s.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return Ok(Value::List(l));
                }
                _ => return Err(self.err(PolicyCode::Unparseable, "expected `,` or `]`")),
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, PolicyError> {
        let h = self
            .s
            .get(self.i..self.i + 4)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .ok_or_else(|| self.err(PolicyCode::Unparseable, "bad \\u escape"))?;
        self.i += 4;
        Ok(h)
    }

    fn string(&mut self) -> Result<String, PolicyError> {
        let mut out = String::new();
        Ok(match self.string_into(&mut out)? {
            // The common case, no escape: one exact allocation.
            Some((a, b)) => self.text[a..b].to_string(),
            None => out,
        })
    }

    /// Reads the string at `self.i` (its opening quote). Without escapes it returns the
    /// byte range of its text in the source and writes nothing; otherwise it appends the
    /// decoded text to `out` and returns `None`.
    pub(super) fn string_into(
        &mut self,
        out: &mut String,
    ) -> Result<Option<(usize, usize)>, PolicyError> {
        self.i += 1;
        let mut decoded = false;
        loop {
            let start = self.i;
            let rest = self.s.get(self.i..).unwrap_or_default();
            self.i += rest
                .iter()
                .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
                .unwrap_or(rest.len());
            if !decoded && self.s.get(self.i) == Some(&b'"') {
                self.i += 1;
                return Ok(Some((start, self.i - 1)));
            }
            decoded = true;
            out.push_str(&self.text[start..self.i]);
            match self.s.get(self.i) {
                None => return Err(self.err(PolicyCode::Unparseable, "unterminated string")),
                Some(b'"') => {
                    self.i += 1;
                    return Ok(None);
                }
                Some(b'\\') => {
                    self.i += 1;
                    let e = self.s.get(self.i).copied();
                    self.i += 1;
                    match e {
                        Some(b'"') => out.push('"'),
                        Some(b'\\') => out.push('\\'),
                        Some(b'/') => out.push('/'),
                        Some(b'b') => out.push('\u{8}'),
                        Some(b'f') => out.push('\u{c}'),
                        Some(b'n') => out.push('\n'),
                        Some(b'r') => out.push('\r'),
                        Some(b't') => out.push('\t'),
                        Some(b'u') => {
                            let hi = self.hex4()?;
                            let c = if (0xD800..0xDC00).contains(&hi) {
                                if self.s.get(self.i..self.i + 2) == Some(b"\\u") {
                                    self.i += 2;
                                    let lo = self.hex4()?;
                                    if !(0xDC00..0xE000).contains(&lo) {
                                        return Err(
                                            self.err(PolicyCode::Unparseable, "lone surrogate")
                                        );
                                    }
                                    char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))
                                } else {
                                    None
                                }
                            } else {
                                char::from_u32(hi)
                            };
                            match c {
                                Some(c) => out.push(c),
                                None => {
                                    return Err(self.err(PolicyCode::Unparseable, "lone surrogate"));
                                }
                            }
                        }
                        _ => return Err(self.err(PolicyCode::Unparseable, "bad escape")),
                    }
                }
                Some(_) => {
                    return Err(self.err(PolicyCode::Unparseable, "control character in string"));
                }
            }
        }
    }

    fn number(&mut self) -> Result<Value, PolicyError> {
        let start = self.i;
        if self.s.get(self.i) == Some(&b'-') {
            self.i += 1;
        }
        if self.s[self.i..].starts_with(b"Infinity") {
            return Err(self.err(PolicyCode::Unparseable, "NaN and Infinity are not JSON"));
        }
        let digits = |p: &mut Self| {
            let st = p.i;
            while p.s.get(p.i).is_some_and(u8::is_ascii_digit) {
                p.i += 1;
            }
            p.i - st
        };
        let int_start = self.i;
        let n = digits(self);
        if n == 0 || (n > 1 && self.s[int_start] == b'0') {
            return Err(self.err(PolicyCode::Unparseable, "bad number"));
        }
        let mut is_float = false;
        if self.s.get(self.i) == Some(&b'.') {
            self.i += 1;
            is_float = true;
            if digits(self) == 0 {
                return Err(self.err(PolicyCode::Unparseable, "bad number"));
            }
        }
        if matches!(self.s.get(self.i), Some(b'e' | b'E')) {
            self.i += 1;
            is_float = true;
            if matches!(self.s.get(self.i), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if digits(self) == 0 {
                return Err(self.err(PolicyCode::Unparseable, "bad number"));
            }
        }
        let t = &self.text[start..self.i];
        Ok(number_value(t, is_float))
    }
}

/// A number from validated decimal text (`is_float` when it has a fraction or exponent).
pub(crate) fn number_value(t: &str, is_float: bool) -> Value {
    if is_float {
        return Value::Float(t.parse::<f64>().unwrap_or(f64::NAN));
    }
    match t.parse::<i64>() {
        Ok(i) => Value::Int(i),
        Err(_) => {
            let neg = t.starts_with('-');
            let d = t.trim_start_matches(['-', '+']).trim_start_matches('0');
            if d.is_empty() {
                Value::Int(0)
            } else {
                Value::BigInt(format!("{}{}", if neg { "-" } else { "" }, d).into())
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_keys_are_refused_at_any_depth() {
        let e = parse(r#"{"a": {"b": 1, "b": 2}}"#).unwrap_err();
        assert_eq!(e.code, PolicyCode::DuplicateKey);
    }

    #[test]
    fn nan_and_infinity_are_unparseable() {
        for t in ["NaN", "[Infinity]", "[-Infinity]"] {
            assert_eq!(parse(t).unwrap_err().code, PolicyCode::Unparseable, "{t}");
        }
    }

    #[test]
    fn integers_stay_integers_and_floats_floats() {
        assert_eq!(parse("5").unwrap(), Value::Int(5));
        assert_eq!(parse("5.0").unwrap(), Value::Float(5.0));
        assert_eq!(
            parse("123456789012345678901234567890").unwrap(),
            Value::BigInt("123456789012345678901234567890".into())
        );
        assert_eq!(parse("1e400").unwrap(), Value::Float(f64::INFINITY));
    }

    #[test]
    fn strings_unescape() {
        assert_eq!(
            parse(r#""a\u00e9\ud83d\ude00\n""#).unwrap(),
            Value::Str("aé😀\n".into())
        );
    }
}
