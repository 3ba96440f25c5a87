//! Where each node of a policy document is, in its text: for a tool that edits a policy
//! in place (`hcp policy init --merge`) and keeps every byte it does not change — the
//! comments, the order, the layout — and for naming the line and column of a fault the
//! loader reports by path (`tools.t.args.x`).
//!
//! [`yaml`] and [`json`] give the same [`Node`]s: one per scalar, mapping and sequence, in
//! document order, each with its path, its byte range and (under a mapping) where its key
//! is. They read a document the loader would read; what they cannot read is the loader's
//! error, with its place.

use crate::error::{PolicyCode, PolicyError};

/// A place in a document's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pos {
    /// Byte offset from the start of the text.
    pub byte: usize,
    /// Line, 1-based.
    pub line: usize,
    /// Column in characters, 1-based.
    pub col: usize,
}

/// What a node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    /// A scalar (a string, a number, a boolean, null).
    Scalar,
    /// A mapping (an object).
    Map,
    /// A sequence (an array).
    Seq,
}

/// One node of a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// The keys (and, in a sequence, `[i]`) from the root down to it; empty for the root.
    pub path: Vec<String>,
    /// What it is.
    pub kind: NodeKind,
    /// Whether it is written in flow style (`{…}`, `[…]`; every JSON collection).
    pub flow: bool,
    /// Where its key starts, for a node under a mapping.
    pub key: Option<Pos>,
    /// Where its value starts.
    pub start: Pos,
    /// Where its value ends (exclusive): after the closing bracket of a flow collection,
    /// after the last child's value of a block one.
    pub end: Pos,
    /// How many children it has (entries of a mapping, items of a sequence).
    pub children: usize,
}

impl Node {
    /// The dotted path as the loader renders a fault's place (`tools.t.args.x`,
    /// `roles.r.allow[0]`).
    pub fn dotted(&self) -> String {
        let mut out = String::new();
        for p in &self.path {
            if !p.starts_with('[') && !out.is_empty() {
                out.push('.');
            }
            out.push_str(p);
        }
        out
    }
}

/// The node at `path` (keys and `[i]` from the root).
pub fn find<'a>(nodes: &'a [Node], path: &[&str]) -> Option<&'a Node> {
    nodes
        .iter()
        .find(|n| n.path.len() == path.len() && n.path.iter().zip(path).all(|(a, b)| a == b))
}

/// Where the fault a loader reported at `location` (a dotted path) is: the key of the
/// deepest node whose dotted path is `location` or a prefix of it, else that node's value.
pub fn locate(nodes: &[Node], location: &str) -> Option<Pos> {
    nodes
        .iter()
        .filter(|n| !n.path.is_empty())
        .filter(|n| {
            let d = n.dotted();
            location == d
                || location
                    .strip_prefix(d.as_str())
                    .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
        })
        .max_by_key(|n| n.path.len())
        .map(|n| n.key.unwrap_or(n.start))
}

/// The line and column (1-based) of byte `at` of `text`.
pub fn pos_of(text: &str, at: usize) -> Pos {
    let at = at.min(text.len());
    let before = &text[..at];
    let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    Pos {
        byte: at,
        line,
        col: before[line_start..].chars().count() + 1,
    }
}

/// The nodes of a YAML document, in document order.
///
/// # Errors
/// `unparseable` with the line and column of a syntax fault, or for a stream that is not
/// one document.
pub fn yaml(text: &str) -> Result<Vec<Node>, PolicyError> {
    use granit_parser::{Event, Parser, Span, StructureStyle};

    fn pos(text: &str, span: &Span, end: bool) -> Pos {
        let m = if end { span.end } else { span.start };
        pos_of(text, m.byte_offset().unwrap_or(0))
    }
    fn bad(msg: &str) -> PolicyError {
        PolicyError::new(PolicyCode::Unparseable, format!("invalid YAML: {msg}"))
    }

    struct Walk<'t> {
        text: &'t str,
        parser: Parser<'t, granit_parser::StrInput<'t>>,
        out: Vec<Node>,
    }

    impl<'t> Walk<'t> {
        fn next(&mut self) -> Result<(Event<'t>, Span), PolicyError> {
            loop {
                match self.parser.next_event() {
                    None => return Err(bad("unexpected end")),
                    Some(Err(e)) => {
                        return Err(bad(&e.info().to_string()).at(format!(
                            "line {} column {}",
                            e.marker().line(),
                            e.marker().col() + 1
                        )));
                    }
                    Some(Ok((Event::Anchor(..), _))) => continue,
                    Some(Ok(x)) => return Ok(x),
                }
            }
        }

        /// One node and everything below it; its index in `out`.
        fn node(
            &mut self,
            ev: Event<'t>,
            span: Span,
            path: Vec<String>,
            key: Option<Pos>,
        ) -> Result<usize, PolicyError> {
            if path.len() > crate::json::MAX_DEPTH {
                return Err(bad("nesting too deep"));
            }
            let start = pos(self.text, &span, false);
            let at = self.out.len();
            let (kind, flow) = match &ev {
                Event::MappingStart(s, ..) => (NodeKind::Map, *s == StructureStyle::Flow),
                Event::SequenceStart(s, ..) => (NodeKind::Seq, *s == StructureStyle::Flow),
                _ => (NodeKind::Scalar, false),
            };
            self.out.push(Node {
                path: path.clone(),
                kind,
                flow,
                key,
                start,
                end: pos(self.text, &span, true),
                children: 0,
            });
            let mut children = 0;
            let mut last_end = start;
            match ev {
                Event::MappingStart(..) => loop {
                    let (k, ks) = self.next()?;
                    if matches!(k, Event::MappingEnd) {
                        if flow {
                            last_end = pos(self.text, &ks, true);
                        }
                        break;
                    }
                    let name = match &k {
                        Event::Scalar(t, ..) => t.to_string(),
                        _ => String::from("?"),
                    };
                    let key_pos = pos(self.text, &ks, false);
                    let key_end = self.node(k, ks, path_with(&path, "?"), None)?;
                    // The key is not a node of its own in the outline.
                    self.out.truncate(key_end);
                    let (v, vs) = self.next()?;
                    let i = self.node(v, vs, path_with(&path, &name), Some(key_pos))?;
                    if !flow {
                        last_end = self.out[i].end.max_by_byte(last_end);
                        last_end = self.deepest_end(i).max_by_byte(last_end);
                    }
                    children += 1;
                },
                Event::SequenceStart(..) => loop {
                    let (v, vs) = self.next()?;
                    if matches!(v, Event::SequenceEnd) {
                        if flow {
                            last_end = pos(self.text, &vs, true);
                        }
                        break;
                    }
                    let i = self.node(v, vs, path_with(&path, &format!("[{children}]")), None)?;
                    if !flow {
                        last_end = self.deepest_end(i).max_by_byte(last_end);
                    }
                    children += 1;
                },
                Event::Scalar(..) | Event::Alias(..) => return Ok(at),
                _ => return Err(bad("unexpected event")),
            }
            self.out[at].children = children;
            self.out[at].end = last_end;
            Ok(at)
        }

        /// The furthest end of node `i` and the nodes after it (its descendants).
        fn deepest_end(&self, i: usize) -> Pos {
            self.out[i..]
                .iter()
                .map(|n| n.end)
                .fold(self.out[i].end, |a, b| b.max_by_byte(a))
        }
    }

    let mut w = Walk {
        text,
        parser: Parser::new_from_str(text),
        out: Vec::new(),
    };
    let mut seen = false;
    loop {
        let (ev, span) = w.next()?;
        match ev {
            Event::StreamStart | Event::DocumentEnd => {}
            Event::StreamEnd => break,
            Event::DocumentStart(..) => {
                if seen {
                    return Err(bad("expected a single document"));
                }
                seen = true;
                let (ev, span) = w.next()?;
                w.node(ev, span, Vec::new(), None)?;
            }
            _ => {
                return Err(bad("unexpected event").at(format!(
                    "line {} column {}",
                    span.start.line(),
                    span.start.col() + 1
                )));
            }
        }
    }
    Ok(w.out)
}

impl Pos {
    fn max_by_byte(self, other: Pos) -> Pos {
        if self.byte >= other.byte { self } else { other }
    }
}

fn path_with(path: &[String], next: &str) -> Vec<String> {
    let mut p = path.to_vec();
    p.push(next.to_owned());
    p
}

/// The nodes of a JSON document, in document order.
///
/// # Errors
/// `unparseable` with the line and column of a syntax fault.
pub fn json(text: &str) -> Result<Vec<Node>, PolicyError> {
    let mut r = JsonWalk {
        text,
        b: text.as_bytes(),
        at: 0,
        out: Vec::new(),
    };
    r.ws();
    r.value(Vec::new(), None)?;
    r.ws();
    if r.at != r.b.len() {
        return Err(r.bad("trailing characters after the document"));
    }
    Ok(r.out)
}

struct JsonWalk<'t> {
    text: &'t str,
    b: &'t [u8],
    at: usize,
    out: Vec<Node>,
}

impl JsonWalk<'_> {
    fn bad(&self, msg: &str) -> PolicyError {
        let p = pos_of(self.text, self.at);
        PolicyError::new(PolicyCode::Unparseable, format!("invalid JSON: {msg}"))
            .at(format!("line {} column {}", p.line, p.col))
    }

    fn ws(&mut self) {
        while self
            .b
            .get(self.at)
            .is_some_and(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r'))
        {
            self.at += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.b.get(self.at) == Some(&c) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    /// A string's contents (escapes kept as written: keys are compared as the loader
    /// reads them only for plain keys, which is every key a policy has).
    fn string(&mut self) -> Result<String, PolicyError> {
        if !self.eat(b'"') {
            return Err(self.bad("expected a string"));
        }
        let from = self.at;
        loop {
            match self.b.get(self.at) {
                None => return Err(self.bad("unterminated string")),
                Some(b'"') => break,
                Some(b'\\') => self.at += 2,
                Some(_) => self.at += 1,
            }
        }
        let s = self.text.get(from..self.at).unwrap_or_default().to_owned();
        self.at += 1;
        Ok(s)
    }

    fn value(&mut self, path: Vec<String>, key: Option<Pos>) -> Result<usize, PolicyError> {
        if path.len() > crate::json::MAX_DEPTH {
            return Err(self.bad("nesting too deep"));
        }
        let start = pos_of(self.text, self.at);
        let i = self.out.len();
        let kind = match self.b.get(self.at) {
            Some(b'{') => NodeKind::Map,
            Some(b'[') => NodeKind::Seq,
            _ => NodeKind::Scalar,
        };
        self.out.push(Node {
            path: path.clone(),
            kind,
            flow: kind != NodeKind::Scalar,
            key,
            start,
            end: start,
            children: 0,
        });
        let mut children = 0;
        match kind {
            NodeKind::Map => {
                self.at += 1;
                self.ws();
                if !self.eat(b'}') {
                    loop {
                        self.ws();
                        let kp = pos_of(self.text, self.at);
                        let name = self.string()?;
                        self.ws();
                        if !self.eat(b':') {
                            return Err(self.bad("expected `:`"));
                        }
                        self.ws();
                        self.value(path_with(&path, &name), Some(kp))?;
                        children += 1;
                        self.ws();
                        if self.eat(b'}') {
                            break;
                        }
                        if !self.eat(b',') {
                            return Err(self.bad("expected `,` or `}`"));
                        }
                    }
                }
            }
            NodeKind::Seq => {
                self.at += 1;
                self.ws();
                if !self.eat(b']') {
                    loop {
                        self.ws();
                        self.value(path_with(&path, &format!("[{children}]")), None)?;
                        children += 1;
                        self.ws();
                        if self.eat(b']') {
                            break;
                        }
                        if !self.eat(b',') {
                            return Err(self.bad("expected `,` or `]`"));
                        }
                    }
                }
            }
            NodeKind::Scalar => {
                if self.b.get(self.at) == Some(&b'"') {
                    self.string()?;
                } else {
                    let from = self.at;
                    while self.b.get(self.at).is_some_and(|c| {
                        !matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
                    }) {
                        self.at += 1;
                    }
                    if self.at == from {
                        return Err(self.bad("expected a value"));
                    }
                }
            }
        }
        self.out[i].children = children;
        self.out[i].end = pos_of(self.text, self.at);
        Ok(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    const YAML: &str = "# head\nschema_version: histos.policy/0.1\ntools:\n  # a tool\n  t.a:\n    access: read\n    args: {}\n\n  t.b:\n    args:\n      q: {type: string}\n# roles\nroles:\n  r:\n    allow: [t.a]\n";

    #[test]
    fn yaml_nodes_know_their_keys_and_ends() {
        let n = yaml(YAML).unwrap();
        let tools = find(&n, &["tools"]).unwrap();
        assert_eq!(
            (tools.kind, tools.flow, tools.children),
            (NodeKind::Map, false, 2)
        );
        // a block mapping ends where its last value ends
        assert_eq!(
            &YAML[..tools.end.byte],
            &YAML[..YAML.find("string}").unwrap() + 7]
        );
        let b = find(&n, &["tools", "t.b"]).unwrap();
        assert_eq!((b.key.unwrap().line, b.key.unwrap().col), (9, 3));
        let allow = find(&n, &["roles", "r", "allow"]).unwrap();
        assert_eq!((allow.flow, allow.children), (true, 1));
        assert_eq!(&YAML[allow.start.byte..allow.end.byte], "[t.a]");
        let p = locate(&n, "tools.t.b.args.q.maxLength").unwrap();
        assert_eq!((p.line, p.col), (11, 7));
    }

    #[test]
    fn json_nodes_know_their_keys_and_ends() {
        let text = "{\n  \"tools\": {\n    \"t.a\": {\"args\": {}}\n  },\n  \"roles\": {\"r\": {\"allow\": [\"t.a\", \"x\\\"y\"]}}\n}\n";
        let n = json(text).unwrap();
        let tools = find(&n, &["tools"]).unwrap();
        assert_eq!(
            &text[tools.start.byte..tools.end.byte],
            "{\n    \"t.a\": {\"args\": {}}\n  }"
        );
        let allow = find(&n, &["roles", "r", "allow"]).unwrap();
        assert_eq!(allow.children, 2);
        let p = locate(&n, "tools.t.a.args").unwrap();
        assert_eq!((p.line, p.col), (3, 13));
        let e = json("{\"a\": }").unwrap_err();
        assert_eq!(e.location.as_deref(), Some("line 1 column 7"));
    }
}
