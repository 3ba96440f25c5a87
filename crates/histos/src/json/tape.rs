//! A JSON document as one flat array of tokens whose strings stay in the source text
//! (only strings with escapes are decoded, into one side buffer): what the policy loader
//! reads a JSON policy from, without an owned tree to build and drop (HISTOS-ENGINE §2,
//! §3.5). Same reader, same errors and locations as [`super::parse`].

use crate::doc::{Kind, Node};
use crate::error::{PolicyCode, PolicyError};
use crate::value::Value;

use super::{MAX_DEPTH, Parser};

/// One token. A container is followed by its contents (a mapping by key, value, key,
/// value …) and knows the index just past its last token.
#[derive(Debug, Clone, Copy)]
enum Tok {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    /// Text at `at..at + len` of the source, or of the side buffer when `side`.
    Str {
        at: u32,
        len: u32,
        side: bool,
    },
    /// An integer outside `i64`: canonical digits in the side buffer.
    Big {
        at: u32,
        len: u32,
    },
    List {
        len: u32,
        end: u32,
    },
    Map {
        len: u32,
        end: u32,
    },
}

/// A parsed JSON document (see the module doc).
pub(crate) struct Tape<'s> {
    src: &'s str,
    side: String,
    toks: Vec<Tok>,
}

/// Reads `text` (at most 4 GiB: offsets are 32-bit; a policy is at most 4 MiB) into a
/// tape.
///
/// # Errors
/// Those of [`super::parse`], at the same places.
pub(crate) fn tape(text: &str) -> Result<Tape<'_>, PolicyError> {
    if u32::try_from(text.len()).is_err() {
        return Err(PolicyError::new(
            PolicyCode::PolicyTooLarge,
            "a JSON document larger than 4 GiB",
        ));
    }
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
        text,
    };
    let mut b = Build {
        t: Tape {
            src: text,
            side: String::new(),
            toks: Vec::with_capacity(text.len() / 14 + 8),
        },
        keys: Vec::new(),
    };
    p.ws();
    p.tape_value(&mut b, 0)?;
    p.ws();
    if p.i != p.s.len() {
        return Err(p.err(PolicyCode::Unparseable, "extra data after the document"));
    }
    Ok(b.t)
}

struct Build<'s> {
    t: Tape<'s>,
    /// Key token indices of the mappings being read (innermost last).
    keys: Vec<u32>,
}

impl Tape<'_> {
    /// The document's root.
    pub(crate) fn root(&self) -> TNode<'_> {
        TNode { tape: self, i: 0 }
    }

    #[inline]
    fn text(&self, at: u32, len: u32, side: bool) -> &str {
        let (a, b) = (at as usize, (at + len) as usize);
        if side {
            &self.side[a..b]
        } else {
            &self.src[a..b]
        }
    }

    /// The text of the string token at `i`.
    #[inline]
    fn str_at(&self, i: u32) -> &str {
        match self.toks[i as usize] {
            Tok::Str { at, len, side } => self.text(at, len, side),
            _ => "",
        }
    }

    /// The index just past the token at `i` and its contents.
    #[inline]
    fn skip(&self, i: u32) -> u32 {
        match self.toks[i as usize] {
            Tok::List { end, .. } | Tok::Map { end, .. } => end,
            _ => i + 1,
        }
    }
}

impl Parser<'_> {
    fn tape_value(&mut self, b: &mut Build<'_>, depth: usize) -> Result<(), PolicyError> {
        if depth > MAX_DEPTH {
            return Err(self.err(PolicyCode::Unparseable, "nesting too deep"));
        }
        let tok = match self.s.get(self.i) {
            None => return Err(self.err(PolicyCode::Unparseable, "unexpected end of input")),
            Some(b'{') => return self.tape_object(b, depth),
            Some(b'[') => return self.tape_array(b, depth),
            Some(b'"') => self.tape_string(b)?,
            Some(b't') => {
                self.word("true")?;
                Tok::Bool(true)
            }
            Some(b'f') => {
                self.word("false")?;
                Tok::Bool(false)
            }
            Some(b'n') => {
                self.word("null")?;
                Tok::Null
            }
            Some(b'-' | b'0'..=b'9') => match self.number()? {
                Value::Int(i) => Tok::Int(i),
                Value::Float(f) => Tok::Float(f),
                Value::BigInt(s) => {
                    let at = b.t.side.len() as u32;
                    b.t.side.push_str(&s);
                    Tok::Big {
                        at,
                        len: s.len() as u32,
                    }
                }
                _ => return Err(self.err(PolicyCode::Unparseable, "bad number")),
            },
            Some(b'N' | b'I') => {
                return Err(self.err(PolicyCode::Unparseable, "NaN and Infinity are not JSON"));
            }
            Some(_) => return Err(self.err(PolicyCode::Unparseable, "expected a value")),
        };
        b.t.toks.push(tok);
        Ok(())
    }

    fn tape_string(&mut self, b: &mut Build<'_>) -> Result<Tok, PolicyError> {
        let at = b.t.side.len();
        Ok(match self.string_into(&mut b.t.side)? {
            Some((s, e)) => Tok::Str {
                at: s as u32,
                len: (e - s) as u32,
                side: false,
            },
            None => Tok::Str {
                at: at as u32,
                len: (b.t.side.len() - at) as u32,
                side: true,
            },
        })
    }

    fn tape_object(&mut self, b: &mut Build<'_>, depth: usize) -> Result<(), PolicyError> {
        self.i += 1;
        let open = b.t.toks.len();
        b.t.toks.push(Tok::Map { len: 0, end: 0 });
        let base = b.keys.len();
        self.ws();
        let mut n = 0u32;
        if self.s.get(self.i) == Some(&b'}') {
            self.i += 1;
        } else {
            loop {
                self.ws();
                if self.s.get(self.i) != Some(&b'"') {
                    return Err(self.err(PolicyCode::Unparseable, "expected a string key"));
                }
                let key_at = self.i;
                let key = self.tape_string(b)?;
                self.ws();
                if self.s.get(self.i) != Some(&b':') {
                    return Err(self.err(PolicyCode::Unparseable, "expected `:`"));
                }
                self.i += 1;
                self.ws();
                let k = b.t.toks.len() as u32;
                b.t.toks.push(key);
                self.tape_value(b, depth + 1)?;
                let name = b.t.str_at(k);
                if b.keys[base..].iter().any(|&j| b.t.str_at(j) == name) {
                    self.i = key_at;
                    return Err(
                        self.err(PolicyCode::DuplicateKey, &format!("duplicate key `{name}`"))
                    );
                }
                b.keys.push(k);
                n += 1;
                self.ws();
                match self.s.get(self.i) {
                    Some(b',') => self.i += 1,
                    Some(b'}') => {
                        self.i += 1;
                        break;
                    }
                    _ => return Err(self.err(PolicyCode::Unparseable, "expected `,` or `}`")),
                }
            }
        }
        b.keys.truncate(base);
        let end = b.t.toks.len() as u32;
        b.t.toks[open] = Tok::Map { len: n, end };
        Ok(())
    }

    fn tape_array(&mut self, b: &mut Build<'_>, depth: usize) -> Result<(), PolicyError> {
        self.i += 1;
        let open = b.t.toks.len();
        b.t.toks.push(Tok::List { len: 0, end: 0 });
        self.ws();
        let mut n = 0u32;
        if self.s.get(self.i) == Some(&b']') {
            self.i += 1;
        } else {
            loop {
                self.ws();
                self.tape_value(b, depth + 1)?;
                n += 1;
                self.ws();
                match self.s.get(self.i) {
                    Some(b',') => self.i += 1,
                    Some(b']') => {
                        self.i += 1;
                        break;
                    }
                    _ => return Err(self.err(PolicyCode::Unparseable, "expected `,` or `]`")),
                }
            }
        }
        let end = b.t.toks.len() as u32;
        b.t.toks[open] = Tok::List { len: n, end };
        Ok(())
    }
}

/// A node of a [`Tape`].
#[derive(Clone, Copy)]
pub(crate) struct TNode<'t> {
    tape: &'t Tape<'t>,
    i: u32,
}

/// The entries of a mapping node, in order.
pub(crate) struct Entries<'t> {
    tape: &'t Tape<'t>,
    next: u32,
    end: u32,
}

impl<'t> Iterator for Entries<'t> {
    type Item = (&'t str, TNode<'t>);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.end {
            return None;
        }
        let k = self.next;
        let v = k + 1;
        self.next = self.tape.skip(v);
        Some((
            self.tape.str_at(k),
            TNode {
                tape: self.tape,
                i: v,
            },
        ))
    }
}

/// The elements of a list node, in order.
pub(crate) struct Items<'t> {
    tape: &'t Tape<'t>,
    next: u32,
    end: u32,
}

impl<'t> Iterator for Items<'t> {
    type Item = TNode<'t>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.end {
            return None;
        }
        let i = self.next;
        self.next = self.tape.skip(i);
        Some(TNode { tape: self.tape, i })
    }
}

impl<'t> TNode<'t> {
    /// The contents' range of a container (empty for anything else).
    #[inline]
    fn inner(self) -> (u32, u32) {
        match self.tape.toks[self.i as usize] {
            Tok::List { end, .. } | Tok::Map { end, .. } => (self.i + 1, end),
            _ => (0, 0),
        }
    }
}

impl<'t> Node<'t> for TNode<'t> {
    #[inline]
    fn kind(self) -> Kind<'t> {
        match self.tape.toks[self.i as usize] {
            Tok::Null => Kind::Null,
            Tok::Bool(b) => Kind::Bool(b),
            Tok::Int(i) => Kind::Int(i),
            Tok::Float(f) => Kind::Float(f),
            Tok::Str { at, len, side } => Kind::Str(self.tape.text(at, len, side)),
            Tok::Big { at, len } => Kind::Big(self.tape.text(at, len, true)),
            Tok::List { .. } => Kind::List,
            Tok::Map { .. } => Kind::Map,
        }
    }

    #[inline]
    fn entries(self) -> impl Iterator<Item = (&'t str, Self)> {
        let (next, end) = match self.tape.toks[self.i as usize] {
            Tok::Map { end, .. } => (self.i + 1, end),
            _ => (0, 0),
        };
        Entries {
            tape: self.tape,
            next,
            end,
        }
    }

    #[inline]
    fn items(self) -> impl Iterator<Item = Self> {
        let (next, end) = match self.tape.toks[self.i as usize] {
            Tok::List { .. } => self.inner(),
            _ => (0, 0),
        };
        Items {
            tape: self.tape,
            next,
            end,
        }
    }

    #[inline]
    fn len(self) -> usize {
        match self.tape.toks[self.i as usize] {
            Tok::List { len, .. } | Tok::Map { len, .. } => len as usize,
            _ => 0,
        }
    }

    fn to_value(self) -> Value {
        match self.kind() {
            Kind::Null => Value::Null,
            Kind::Bool(b) => Value::Bool(b),
            Kind::Int(i) => Value::Int(i),
            Kind::Big(s) => Value::BigInt(s.into()),
            Kind::Float(f) => Value::Float(f),
            Kind::Str(s) => Value::Str(s.to_string()),
            Kind::Timestamp(s) => Value::Timestamp(s.into()),
            Kind::List => Value::List(self.items().map(TNode::to_value).collect()),
            Kind::Map => {
                let mut m = crate::value::Map::new();
                for (k, v) in self.entries() {
                    m.push_unchecked(k.to_string(), v.to_value());
                }
                Value::Map(m)
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// The tape reads every document as the tree reader does, and fails where it fails.
    #[test]
    fn the_tape_agrees_with_the_tree_reader() {
        for text in [
            r#"{"a": [1, 2.5, -3, 123456789012345678901234567890, true, false, null], "b\n": {"c": "d\u00e9\ud83d\ude00"}, "": {}}"#,
            "[]",
            "{}",
            r#""x\"y""#,
            "  7  ",
            r#"{"a": 1, "b": {"a": 2, "a": 3}}"#,
            r#"{"a\u0062": 1, "ab": 2}"#,
            r#"{"a": 1,}"#,
            r#"[1, 2"#,
            r#"{"a" 1}"#,
            "[NaN]",
            "-Infinity",
            "01",
            "1.",
            "\"\u{1}\"",
            r#""\ud800""#,
            r#"{"a": 1} x"#,
            "",
        ] {
            let tree = super::super::parse(text);
            let tape = tape(text).map(|t| t.root().to_value());
            assert_eq!(tree, tape, "{text}");
        }
    }

    #[test]
    fn deep_nesting_is_unparseable_on_the_tape_too() {
        let text = "[".repeat(600) + &"]".repeat(600);
        assert_eq!(tape(&text).err(), super::super::parse(&text).err());
    }
}
