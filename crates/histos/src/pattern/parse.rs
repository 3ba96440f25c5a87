//! The pattern parse tree, shaped like CPython's `re._parser` output where the screen
//! cares (HISTOS-ENGINE §2d).

use super::charset::*;

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Node {
    /// One character from a set (literal, class, category); `dot` for `.`.
    Leaf { set: CSet, dot: bool, unknown: bool },
    /// Zero-width assertion (`^ $ \b \A \Z`).
    Zero,
    /// Alternation that survived normalisation (CPython BRANCH).
    Branch(Vec<Vec<Node>>),
    /// A repeat.
    Repeat {
        min: u32,
        max: Option<u32>,
        body: Vec<Node>,
        possessive: bool,
        greedy: bool,
    },
    /// A (capturing or not) group: transparent.
    Group(Vec<Node>),
    /// Look-around: analysed as an independent sub-pattern.
    Look(Vec<Node>),
    /// Atomic group: resets the adjacency analysis.
    Atomic(Vec<Node>),
    /// Backreference or a scoped-flag group: unknown character sets.
    Unknown(Vec<Node>),
}

pub(super) struct Parser<'a> {
    chars: Vec<char>,
    i: usize,
    ignore_case: bool,
    _src: &'a str,
}

pub(super) type PResult<T> = Result<T, String>;

impl<'a> Parser<'a> {
    pub(super) fn new(src: &'a str) -> Self {
        Parser {
            chars: src.chars().collect(),
            i: 0,
            ignore_case: false,
            _src: src,
        }
    }

    pub(super) fn parse(mut self) -> PResult<Vec<Node>> {
        let n = self.alternation()?;
        if self.i < self.chars.len() {
            return Err("unbalanced parenthesis".into());
        }
        if self.ignore_case {
            return Ok(fold(n));
        }
        Ok(n)
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.i).copied()
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn alternation(&mut self) -> PResult<Vec<Node>> {
        let mut branches = vec![self.sequence()?];
        while self.eat('|') {
            branches.push(self.sequence()?);
        }
        if branches.len() == 1 {
            return Ok(branches.pop().unwrap_or_default());
        }
        // CPython: factor out a common prefix, then turn single-char branches into a set.
        let mut prefix = Vec::new();
        while let Some(first) = branches[0].first().cloned() {
            if branches.iter().all(|b| b.first() == Some(&first)) {
                for b in branches.iter_mut() {
                    b.remove(0);
                }
                prefix.push(first);
            } else {
                break;
            }
        }
        let mut set = CSet::empty();
        let mut all_single = true;
        for b in &branches {
            match b.as_slice() {
                [
                    Node::Leaf {
                        set: s,
                        dot: false,
                        unknown: false,
                    },
                ] => set = set.union(*s),
                _ => {
                    all_single = false;
                    break;
                }
            }
        }
        if all_single {
            prefix.push(Node::Leaf {
                set,
                dot: false,
                unknown: false,
            });
        } else {
            prefix.push(Node::Branch(branches));
        }
        Ok(prefix)
    }

    fn sequence(&mut self) -> PResult<Vec<Node>> {
        let mut seq: Vec<Node> = Vec::new();
        while let Some(c) = self.peek() {
            if c == '|' || c == ')' {
                break;
            }
            let atom = self.atom()?;
            let Some(atom) = atom else { continue };
            let atom = self.quantifier(atom)?;
            seq.push(atom);
        }
        Ok(seq)
    }

    fn quantifier(&mut self, atom: Node) -> PResult<Node> {
        let (min, max) = match self.peek() {
            Some('*') => {
                self.i += 1;
                (0, None)
            }
            Some('+') => {
                self.i += 1;
                (1, None)
            }
            Some('?') => {
                self.i += 1;
                (0, Some(1))
            }
            Some('{') => match self.braces() {
                Some(mm) => mm,
                None => return Ok(atom),
            },
            _ => return Ok(atom),
        };
        if matches!(atom, Node::Zero) {
            return Err("nothing to repeat".into());
        }
        if matches!(atom, Node::Repeat { .. }) {
            return Err("multiple repeat".into());
        }
        let greedy = !self.eat('?');
        let possessive = greedy && self.eat('+');
        let body = match atom {
            Node::Group(b) => b,
            other => vec![other],
        };
        if let Some(mx) = max
            && mx < min
        {
            return Err("min repeat greater than max repeat".into());
        }
        Ok(Node::Repeat {
            min,
            max,
            body,
            possessive,
            greedy,
        })
    }

    fn braces(&mut self) -> Option<(u32, Option<u32>)> {
        let start = self.i;
        self.i += 1;
        let num = |p: &mut Self| {
            let s = p.i;
            while p.peek().is_some_and(|c| c.is_ascii_digit()) {
                p.i += 1;
            }
            let t: String = p.chars[s..p.i].iter().collect();
            if t.is_empty() {
                None
            } else {
                Some(t.parse::<u32>().unwrap_or(u32::MAX))
            }
        };
        let lo = num(self);
        let r = if self.eat(',') {
            let hi = num(self);
            (lo.unwrap_or(0), hi)
        } else {
            match lo {
                Some(l) => (l, Some(l)),
                None => {
                    self.i = start;
                    return None;
                }
            }
        };
        if !self.eat('}') {
            self.i = start;
            return None;
        }
        Some(r)
    }

    fn leaf(set: CSet) -> Node {
        Node::Leaf {
            set,
            dot: false,
            unknown: false,
        }
    }

    fn atom(&mut self) -> PResult<Option<Node>> {
        let Some(c) = self.peek() else {
            return Ok(None);
        };
        self.i += 1;
        Ok(Some(match c {
            '.' => {
                let mut s = CSet::all();
                s.lo &= !(1 << 10);
                Node::Leaf {
                    set: s,
                    dot: true,
                    unknown: false,
                }
            }
            '^' | '$' => Node::Zero,
            '[' => Self::leaf(self.class()?),
            '(' => return self.group().map(Some),
            '\\' => self.escape(false)?,
            '*' | '+' | '?' => return Err("nothing to repeat".into()),
            '{' => {
                self.i -= 1;
                if self.braces().is_some() {
                    return Err("nothing to repeat".into());
                }
                self.i += 1;
                let mut s = CSet::empty();
                s.add('{' as u32);
                Self::leaf(s)
            }
            c => {
                let mut s = CSet::empty();
                s.add(c as u32);
                Self::leaf(s)
            }
        }))
    }

    fn escape(&mut self, in_class: bool) -> PResult<Node> {
        let Some(c) = self.peek() else {
            return Err("bad escape (end of pattern)".into());
        };
        self.i += 1;
        if let Some(s) = CSet::category(c) {
            return Ok(Self::leaf(s));
        }
        let lit = |v: u32| {
            let mut s = CSet::empty();
            s.add(v);
            Node::Leaf {
                set: s,
                dot: false,
                unknown: false,
            }
        };
        Ok(match c {
            'A' | 'Z' | 'b' | 'B' if !in_class => Node::Zero,
            'b' => lit(8),
            'n' => lit(10),
            't' => lit(9),
            'r' => lit(13),
            'f' => lit(12),
            'v' => lit(11),
            'a' => lit(7),
            'x' => lit(self.hex(2)?),
            'u' => lit(self.hex(4)?),
            'U' => lit(self.hex(8)?),
            'N' => return Err("named unicode escapes are not supported".into()),
            '0' => lit(self.octal_rest()),
            '1'..='9' if !in_class => {
                while self.peek().is_some_and(|c| c.is_ascii_digit()) {
                    self.i += 1;
                }
                Node::Unknown(Vec::new())
            }
            c if c.is_ascii_alphanumeric() => return Err(format!("bad escape \\{c}")),
            c => lit(c as u32),
        })
    }

    fn octal_rest(&mut self) -> u32 {
        let mut v = 0u32;
        for _ in 0..2 {
            match self.peek() {
                Some(d @ '0'..='7') => {
                    v = v * 8 + d as u32 - '0' as u32;
                    self.i += 1;
                }
                _ => break,
            }
        }
        v
    }

    fn hex(&mut self, n: usize) -> PResult<u32> {
        let t: String = self
            .chars
            .get(self.i..self.i + n)
            .map(|s| s.iter().collect())
            .unwrap_or_default();
        if t.len() != n {
            return Err("incomplete escape".into());
        }
        self.i += n;
        u32::from_str_radix(&t, 16).map_err(|_| "bad hex escape".to_string())
    }

    fn class(&mut self) -> PResult<CSet> {
        let neg = self.eat('^');
        let mut set = CSet::empty();
        let mut first = true;
        loop {
            let Some(c) = self.peek() else {
                return Err("unterminated character set".into());
            };
            if c == ']' && !first {
                self.i += 1;
                break;
            }
            first = false;
            self.i += 1;
            let lo: Option<u32> = if c == '\\' {
                match self.escape(true)? {
                    Node::Leaf { set: s, .. } => {
                        // A category or a single literal.
                        if s.b == 0 && (s.lo.count_ones() + s.hi.count_ones()) == 1 {
                            Some(if s.lo != 0 {
                                s.lo.trailing_zeros()
                            } else {
                                64 + s.hi.trailing_zeros()
                            })
                        } else {
                            set = set.union(s);
                            None
                        }
                    }
                    _ => None,
                }
            } else {
                Some(c as u32)
            };
            if let Some(lo) = lo {
                if self.peek() == Some('-') && self.chars.get(self.i + 1).is_some_and(|&n| n != ']')
                {
                    self.i += 1;
                    let hc = self.peek().ok_or("unterminated character set")?;
                    self.i += 1;
                    let hi = if hc == '\\' {
                        match self.escape(true)? {
                            Node::Leaf { set: s, .. }
                                if s.b == 0 && (s.lo.count_ones() + s.hi.count_ones()) == 1 =>
                            {
                                if s.lo != 0 {
                                    s.lo.trailing_zeros()
                                } else {
                                    64 + s.hi.trailing_zeros()
                                }
                            }
                            _ => return Err("bad character range".into()),
                        }
                    } else {
                        hc as u32
                    };
                    if hi < lo {
                        return Err("bad character range".into());
                    }
                    set.add_range(lo, hi);
                } else {
                    set.add(lo);
                }
            }
        }
        Ok(if neg { set.negate() } else { set })
    }

    fn group(&mut self) -> PResult<Node> {
        let start = self.i - 1;
        if self.eat('?') {
            let c = self.peek().ok_or("unexpected end of pattern")?;
            self.i += 1;
            match c {
                ':' => {
                    let b = self.alternation()?;
                    self.close()?;
                    Ok(Node::Group(b))
                }
                'P' => {
                    if self.eat('<') {
                        while self.peek().is_some_and(|c| c != '>') {
                            self.i += 1;
                        }
                        if !self.eat('>') {
                            return Err("missing >".into());
                        }
                        let b = self.alternation()?;
                        self.close()?;
                        Ok(Node::Group(b))
                    } else if self.eat('=') {
                        while self.peek().is_some_and(|c| c != ')') {
                            self.i += 1;
                        }
                        self.close()?;
                        Ok(Node::Unknown(Vec::new()))
                    } else {
                        Err("unknown extension ?P".into())
                    }
                }
                '=' | '!' => {
                    let b = self.alternation()?;
                    self.close()?;
                    Ok(Node::Look(b))
                }
                '<' => {
                    if self.eat('=') || self.eat('!') {
                        let b = self.alternation()?;
                        self.close()?;
                        if fixed_width(&b).is_none() {
                            // Python's `re`: "look-behind requires fixed-width pattern".
                            return Err("look-behind requires fixed-width pattern".into());
                        }
                        Ok(Node::Look(b))
                    } else {
                        while self.peek().is_some_and(|c| c != '>') {
                            self.i += 1;
                        }
                        if !self.eat('>') {
                            return Err("missing >".into());
                        }
                        let b = self.alternation()?;
                        self.close()?;
                        Ok(Node::Group(b))
                    }
                }
                '>' => {
                    let b = self.alternation()?;
                    self.close()?;
                    Ok(Node::Atomic(b))
                }
                '#' => {
                    while self.peek().is_some_and(|c| c != ')') {
                        self.i += 1;
                    }
                    self.close()?;
                    Ok(Node::Zero)
                }
                c if "aiLmsux-".contains(c) => {
                    let mut flags = String::from(c);
                    while let Some(f) = self.peek() {
                        if "aiLmsux-".contains(f) {
                            flags.push(f);
                            self.i += 1;
                        } else {
                            break;
                        }
                    }
                    if self.eat(')') {
                        if start != 0 {
                            // CPython 3.11+: "global flags not at the start of the expression".
                            return Err("global flags not at the start of the expression".into());
                        }
                        if flags.contains('i') && !flags.starts_with('-') {
                            self.ignore_case = true;
                        }
                        Ok(Node::Zero)
                    } else if self.eat(':') {
                        let b = self.alternation()?;
                        self.close()?;
                        Ok(Node::Unknown(b))
                    } else {
                        Err("unknown flag".into())
                    }
                }
                _ => Err(format!("unknown extension ?{c}")),
            }
        } else {
            let b = self.alternation()?;
            self.close()?;
            Ok(Node::Group(b))
        }
    }

    fn close(&mut self) -> PResult<()> {
        if self.eat(')') {
            Ok(())
        } else {
            Err("missing ), unterminated subpattern".into())
        }
    }
}

fn fold(nodes: Vec<Node>) -> Vec<Node> {
    nodes
        .into_iter()
        .map(|n| match n {
            Node::Leaf { set, dot, unknown } => Node::Leaf {
                set: set.fold_case(),
                dot,
                unknown,
            },
            Node::Branch(bs) => Node::Branch(bs.into_iter().map(fold).collect()),
            Node::Repeat {
                min,
                max,
                body,
                possessive,
                greedy,
            } => Node::Repeat {
                min,
                max,
                body: fold(body),
                possessive,
                greedy,
            },
            Node::Group(b) => Node::Group(fold(b)),
            Node::Look(b) => Node::Look(fold(b)),
            Node::Atomic(b) => Node::Atomic(fold(b)),
            Node::Unknown(b) => Node::Unknown(fold(b)),
            z => z,
        })
        .collect()
}

/// Whether the tree holds a construct only a backtracking matcher runs (look-around,
/// back-references, atomic groups, possessive repeats) or one whose character sets are
/// unknown (scoped flags).
pub(super) fn needs_backtracking(seq: &[Node]) -> bool {
    seq.iter().any(|n| match n {
        Node::Leaf { .. } | Node::Zero => false,
        Node::Look(_) | Node::Atomic(_) | Node::Unknown(_) => true,
        Node::Repeat {
            possessive, body, ..
        } => *possessive || needs_backtracking(body),
        Node::Group(b) => needs_backtracking(b),
        Node::Branch(bs) => bs.iter().any(|b| needs_backtracking(b)),
    })
}

/// The width in characters every match of `seq` has, when it is fixed (CPython's
/// `getwidth()` with equal bounds); `None` when it varies or is unknown.
fn fixed_width(seq: &[Node]) -> Option<u64> {
    let mut w: u64 = 0;
    for n in seq {
        let x = match n {
            Node::Leaf { .. } => 1,
            Node::Zero | Node::Look(_) => 0,
            Node::Repeat { min, max, body, .. } => {
                if Some(*min) != *max {
                    return None;
                }
                u64::from(*min).checked_mul(fixed_width(body)?)?
            }
            Node::Group(b) | Node::Atomic(b) => fixed_width(b)?,
            Node::Branch(bs) => {
                let mut it = bs.iter().map(|b| fixed_width(b));
                let first = it.next().flatten()?;
                if it.all(|x| x == Some(first)) {
                    first
                } else {
                    return None;
                }
            }
            Node::Unknown(_) => return None,
        };
        w = w.checked_add(x)?;
    }
    Some(w)
}
