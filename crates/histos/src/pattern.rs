//! Field patterns: Python `re` dialect, full-match semantics, and the load-time ReDoS
//! shape screen (HISTOS-ENGINE §2d, stage 1).
//!
//! The screen parses the pattern the way CPython's `re` parser does where it matters
//! (common alternation prefixes factored out, alternations of single characters turned
//! into a class, non-capturing groups transparent), computes first/last character sets
//! over ASCII plus four non-ASCII buckets, and refuses the three shapes of §2d: a
//! variable repeat nested in an ambiguous repeat, an alternation inside an ambiguous
//! repeat, and runs of adjacent overlapping repeats whose split cost exceeds
//! [`SPLIT_BUDGET`]. The timing probe (stage 2) is not reproduced: every corpus pattern
//! is decided by stage 1, and matching here is linear-time or bounded.

use crate::error::{PolicyCode, PolicyError};

/// Maximum total split charge of adjacent overlapping repeats (HISTOS-ENGINE §2d rule 3).
pub const SPLIT_BUDGET: f64 = 4_000_000.0;
/// Cap of an unbounded repeat in the cost model.
const CAP: u32 = 4096;
/// Longest string (in code points) a pattern is applied to; longer → `arg_schema`.
pub const MAX_PATTERN_INPUT: usize = 4096;

/// A compiled, screened field pattern.
#[derive(Debug, Clone)]
pub struct Pattern {
    source: String,
    re: fancy_regex::Regex,
}

impl Pattern {
    /// Screens and compiles `source` (HISTOS-ENGINE §2d).
    ///
    /// # Errors
    /// `unsafe_pattern` for a refused shape, `invalid_field` when it does not compile.
    pub fn new(source: &str) -> Result<Pattern, PolicyError> {
        let node = Parser::new(source).parse().map_err(|m| {
            PolicyError::new(
                PolicyCode::InvalidField,
                format!("pattern does not compile: {m}"),
            )
        })?;
        let translated = translate(source);
        // In verbose mode a `#` comment runs to the end of a line: end it before the anchor.
        let end = if source.contains("(?x") { "\n" } else { "" };
        let re = fancy_regex::Regex::new(&format!("\\A(?:{translated}{end})\\z")).map_err(|e| {
            PolicyError::new(
                PolicyCode::InvalidField,
                format!("pattern does not compile: {e}"),
            )
        })?;
        screen(&node).map_err(|m| PolicyError::new(PolicyCode::UnsafePattern, m.to_string()))?;
        Ok(Pattern {
            source: source.to_string(),
            re,
        })
    }

    /// The pattern as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Full match (`re.fullmatch`); `None` when the input is longer than
    /// [`MAX_PATTERN_INPUT`] code points or matching failed.
    pub fn full_match(&self, s: &str) -> Option<bool> {
        if s.len() > MAX_PATTERN_INPUT && s.chars().count() > MAX_PATTERN_INPUT {
            return None;
        }
        self.re.is_match(s).ok()
    }
}

/// Python `re` (str patterns) → Rust regex, where the two read the same text
/// differently:
///
/// - `\Z` is `\z`;
/// - `\w`/`\W` are Python's word characters, `str.isalnum()` or `_` (letters and numbers,
///   `[\p{L}\p{N}_]`), not Rust's, which also hold combining marks and joiners;
/// - `\s`/`\S` also hold `\x1c`–`\x1f`, which `str.isspace()` counts;
/// - inside a class, `[` is a literal (so `[[:alpha:]]` is no POSIX class) and `&&`, `--`,
///   `~~` are two literal characters (no set operations), and a `]` first in a class is a
///   literal.
fn translate(src: &str) -> String {
    const WORD: &str = r"\p{L}\p{N}_";
    const SPACE: &str = r"\s\x1c-\x1f";
    let mut out = String::with_capacity(src.len() + 16);
    let chars: Vec<char> = src.chars().collect();
    let mut i = 0;
    let mut in_class = false;
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' {
            let Some(&n) = chars.get(i + 1) else {
                out.push('\\');
                break;
            };
            i += 2;
            match (n, in_class) {
                ('Z', false) => out.push_str(r"\z"),
                ('w', true) => out.push_str(WORD),
                ('w', false) => out.push_str(&format!("[{WORD}]")),
                ('W', _) => out.push_str(&format!("[^{WORD}]")),
                ('s', true) => out.push_str(SPACE),
                ('s', false) => out.push_str(&format!("[{SPACE}]")),
                ('S', _) => out.push_str(&format!("[^{SPACE}]")),
                // Octal escapes: `\0`, `\0o`, `\0oo`, and `\ooo` of three octal digits
                // (at most 0o377); other digits are group references.
                (d @ '0'..='7', _) if d == '0' || octal3(&chars, i - 1) => {
                    let mut v = d.to_digit(8).unwrap_or(0);
                    let max = 2;
                    let mut taken = 0;
                    while taken < max {
                        match chars.get(i).and_then(|c| c.to_digit(8)) {
                            Some(x) => {
                                v = v * 8 + x;
                                i += 1;
                                taken += 1;
                            }
                            None => break,
                        }
                    }
                    out.push_str(&format!("\\x{{{v:x}}}"));
                }
                (n, _) => {
                    out.push('\\');
                    out.push(n);
                }
            }
            continue;
        }
        if !in_class {
            out.push(c);
            i += 1;
            if c == '[' {
                in_class = true;
                if chars.get(i) == Some(&'^') {
                    out.push('^');
                    i += 1;
                }
                if chars.get(i) == Some(&']') {
                    out.push_str(r"\]");
                    i += 1;
                }
            }
            continue;
        }
        match c {
            ']' => {
                in_class = false;
                out.push(']');
            }
            '[' => out.push_str(r"\["),
            '&' | '-' | '~' if chars.get(i + 1) == Some(&c) => {
                out.push(c);
                out.push('\\');
                out.push(c);
                i += 1;
            }
            _ => out.push(c),
        }
        i += 1;
    }
    out
}

/// Whether `chars[at..]` starts with three octal digits worth at most 0o377 (Python's
/// octal escape `\ooo`, as opposed to a group reference).
fn octal3(chars: &[char], at: usize) -> bool {
    let d: Vec<u32> = chars
        .iter()
        .skip(at)
        .take(3)
        .filter_map(|c| c.to_digit(8))
        .collect();
    d.len() == 3 && d[0] <= 3
}

#[cfg(test)]
mod dialect_tests {
    use super::Pattern;

    fn m(p: &str, s: &str) -> bool {
        Pattern::new(p).unwrap().full_match(s).unwrap()
    }

    #[test]
    fn python_reads_these_patterns_this_way() {
        // `[[:alpha:]]` is the class `[:alph` then `]` in Python.
        assert!(!m("^[[:alpha:]]$", "b"));
        assert!(m("^[[:alpha:]]$", "a]"));
        // `\w` is letters, numbers and `_`: no combining marks, no joiners.
        assert!(m(r"^\w+$", "admin_42é"));
        assert!(!m(r"^\w+$", "admin\u{0338}\u{200d}"));
        assert!(!m(r"\w", "\u{0300}"));
        assert!(m(r"[\w-]+", "a-b"));
        assert!(!m(r"\W", "a") && m(r"\W", "\u{200d}"));
        // No set operations inside a class.
        assert!(m("[a-c&&b]", "a") && m("[a-c&&b]", "&"));
        assert!(m("[a-z--c]", "c"));
        assert!(m("[~~]", "~"));
        // `str.isspace()` counts the information separators.
        assert!(m(r"\s", "\u{1c}") && !m(r"\S", "\u{1c}"));
        assert!(m(r"\s", " ") && m(r"[\s]", "\t"));
        // A `]` first in a class is a literal; `\Z` ends the text.
        assert!(m("[]a]", "]") && m("[^]a]", "b") && !m("[^]a]", "]"));
        assert!(m(r"ab\Z", "ab"));
        // Octal escapes, and a verbose pattern with a comment.
        assert!(m(r"\101", "A") && m(r"\0", "\0") && m(r"\0101", "\u{8}1"));
        assert!(m("(?x) a b # c", "ab"));
    }
}

// ---------------------------------------------------------------------------------
// Character sets: ASCII exactly plus four non-ASCII buckets.

const B_DIGIT: u8 = 1;
const B_WORD: u8 = 2;
const B_SPACE: u8 = 4;
const B_OTHER: u8 = 8;
const B_ALL: u8 = 15;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct CSet {
    lo: u64,
    hi: u64,
    b: u8,
}

impl CSet {
    fn empty() -> Self {
        Self::default()
    }
    fn all() -> Self {
        CSet {
            lo: u64::MAX,
            hi: u64::MAX,
            b: B_ALL,
        }
    }
    fn add(&mut self, c: u32) {
        if c < 64 {
            self.lo |= 1 << c;
        } else if c < 128 {
            self.hi |= 1 << (c - 64);
        } else if let Some(ch) = char::from_u32(c) {
            self.b |= if ch.is_numeric() {
                B_DIGIT
            } else if ch.is_alphanumeric() {
                B_WORD
            } else if ch.is_whitespace() {
                B_SPACE
            } else {
                B_OTHER
            };
        }
    }
    fn add_range(&mut self, a: u32, z: u32) {
        for c in a..=z.min(127) {
            self.add(c);
        }
        if z >= 128 {
            self.b |= B_WORD | B_OTHER | if a <= 0x660 { B_DIGIT } else { 0 };
        }
    }
    fn union(self, o: CSet) -> CSet {
        CSet {
            lo: self.lo | o.lo,
            hi: self.hi | o.hi,
            b: self.b | o.b,
        }
    }
    fn intersects(self, o: CSet) -> bool {
        self.lo & o.lo != 0 || self.hi & o.hi != 0 || self.b & o.b != 0
    }
    fn negate(self) -> CSet {
        CSet {
            lo: !self.lo,
            hi: !self.hi,
            b: B_ALL,
        }
    }
    fn fold_case(mut self) -> CSet {
        for c in b'a'..=b'z' {
            let (l, u) = (c as u32, (c - 32) as u32);
            let has = |s: &CSet, x: u32| {
                if x < 64 {
                    s.lo >> x & 1 == 1
                } else {
                    s.hi >> (x - 64) & 1 == 1
                }
            };
            if has(&self, l) || has(&self, u) {
                self.add(l);
                self.add(u);
            }
        }
        self
    }
    fn category(c: char) -> Option<CSet> {
        let mut s = CSet::empty();
        match c {
            'd' => {
                s.add_range('0' as u32, '9' as u32);
                s.b = B_DIGIT;
            }
            'w' => {
                s.add_range('0' as u32, '9' as u32);
                s.add_range('a' as u32, 'z' as u32);
                s.add_range('A' as u32, 'Z' as u32);
                s.add('_' as u32);
                s.b = B_DIGIT | B_WORD;
            }
            's' => {
                for c in [9u32, 10, 11, 12, 13, 28, 29, 30, 31, 32] {
                    s.add(c);
                }
                s.b = B_SPACE;
            }
            'D' => return CSet::category('d').map(CSet::negate),
            'W' => return CSet::category('w').map(CSet::negate),
            'S' => return CSet::category('s').map(CSet::negate),
            _ => return None,
        }
        Some(s)
    }
}

// ---------------------------------------------------------------------------------
// Parse tree (shaped like CPython's `re._parser` output where the screen cares).

#[derive(Debug, Clone, PartialEq)]
enum Node {
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

struct Parser<'a> {
    chars: Vec<char>,
    i: usize,
    ignore_case: bool,
    _src: &'a str,
}

type PResult<T> = Result<T, String>;

impl<'a> Parser<'a> {
    fn new(src: &'a str) -> Self {
        Parser {
            chars: src.chars().collect(),
            i: 0,
            ignore_case: false,
            _src: src,
        }
    }

    fn parse(mut self) -> PResult<Vec<Node>> {
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

// ---------------------------------------------------------------------------------
// Set analysis.

#[derive(Debug, Clone, Copy)]
struct Sets {
    first: CSet,
    last: CSet,
    nullable: bool,
    unknown: bool,
}

fn seq_sets(seq: &[Node]) -> Sets {
    let mut first = CSet::empty();
    let mut unknown = false;
    let mut nullable = true;
    for n in seq {
        let s = node_sets(n);
        unknown |= s.unknown;
        if nullable {
            first = first.union(s.first);
        }
        if !s.nullable {
            nullable = false;
        }
    }
    let mut last = CSet::empty();
    for n in seq.iter().rev() {
        let s = node_sets(n);
        last = last.union(s.last);
        if !s.nullable {
            break;
        }
    }
    Sets {
        first,
        last,
        nullable,
        unknown,
    }
}

fn node_sets(n: &Node) -> Sets {
    match n {
        Node::Leaf { set, unknown, .. } => Sets {
            first: *set,
            last: *set,
            nullable: false,
            unknown: *unknown,
        },
        Node::Zero | Node::Look(_) => Sets {
            first: CSet::empty(),
            last: CSet::empty(),
            nullable: true,
            unknown: false,
        },
        Node::Branch(bs) => {
            let mut s = Sets {
                first: CSet::empty(),
                last: CSet::empty(),
                nullable: false,
                unknown: false,
            };
            for b in bs {
                let t = seq_sets(b);
                s.first = s.first.union(t.first);
                s.last = s.last.union(t.last);
                s.nullable |= t.nullable;
                s.unknown |= t.unknown;
            }
            s
        }
        Node::Repeat { min, body, .. } => {
            let mut s = seq_sets(body);
            s.nullable |= *min == 0;
            s
        }
        Node::Group(b) | Node::Atomic(b) => seq_sets(b),
        Node::Unknown(_) => Sets {
            first: CSet::all(),
            last: CSet::all(),
            nullable: true,
            unknown: true,
        },
    }
}

fn one_char(n: &Node) -> Option<CSet> {
    match n {
        Node::Leaf {
            set,
            unknown: false,
            ..
        } => Some(*set),
        Node::Group(b) if b.len() == 1 => one_char(&b[0]),
        _ => None,
    }
}

/// Flattens transparent groups so a body is a plain item list.
fn flat(seq: &[Node]) -> Vec<&Node> {
    let mut out = Vec::new();
    for n in seq {
        match n {
            Node::Group(b) => out.extend(flat(b)),
            n => out.push(n),
        }
    }
    out
}

fn anchored(body: &[&Node]) -> bool {
    let (Some(first), rest) = (body.first(), body.get(1..).unwrap_or(&[])) else {
        return false;
    };
    let Some(c) = one_char(first) else {
        return false;
    };
    let rest: Vec<Node> = rest.iter().map(|n| (*n).clone()).collect();
    let s = seq_sets(&rest);
    !rest.is_empty() && !s.nullable && !s.unknown && !c.intersects(s.first) && !c.intersects(s.last)
}

fn terminated(body: &[&Node]) -> bool {
    let Some((last, rest)) = body.split_last() else {
        return false;
    };
    let Some(c) = one_char(last) else {
        return false;
    };
    let rest: Vec<Node> = rest.iter().map(|n| (*n).clone()).collect();
    let s = seq_sets(&rest);
    !rest.is_empty() && !s.nullable && !s.unknown && !c.intersects(s.first) && !c.intersects(s.last)
}

fn variable(min: u32, max: Option<u32>) -> bool {
    max != Some(min)
}

fn multi(max: Option<u32>) -> bool {
    max.is_none_or(|m| m > 1)
}

fn cap(max: Option<u32>) -> f64 {
    f64::from(max.unwrap_or(CAP).min(CAP))
}

fn contains(seq: &[Node], pred: &dyn Fn(&Node) -> bool) -> bool {
    seq.iter().any(|n| {
        pred(n)
            || match n {
                Node::Branch(bs) => bs.iter().any(|b| contains(b, pred)),
                Node::Repeat { body, .. } => contains(body, pred),
                Node::Group(b) | Node::Atomic(b) | Node::Unknown(b) => contains(b, pred),
                Node::Look(_) | Node::Leaf { .. } | Node::Zero => false,
            }
    })
}

fn screen(root: &[Node]) -> Result<(), &'static str> {
    nested(root)?;
    let mut charge = 0.0;
    adjacency(root, &mut charge)?;
    Ok(())
}

/// Rules 1 and 2: inside an ambiguous repeat, no variable repeat and no alternation.
fn nested(seq: &[Node]) -> Result<(), &'static str> {
    for n in seq {
        match n {
            Node::Repeat {
                min,
                max,
                body,
                possessive,
                ..
            } => {
                let f = flat(body);
                let ambiguous = !possessive
                    && variable(*min, *max)
                    && multi(*max)
                    && !anchored(&f)
                    && !terminated(&f);
                if ambiguous {
                    if contains(
                        body,
                        &|x| matches!(x, Node::Repeat { min, max, .. } if variable(*min, *max)),
                    ) {
                        return Err(
                            "a variable-length repeat nested inside another repeat, e.g. `(a+)+`",
                        );
                    }
                    if contains(body, &|x| matches!(x, Node::Branch(_))) {
                        return Err("an alternation inside a repeat, e.g. `(a|ab)*`");
                    }
                }
                nested(body)?;
            }
            Node::Branch(bs) => {
                for b in bs {
                    nested(b)?;
                }
            }
            Node::Group(b) | Node::Look(b) | Node::Atomic(b) | Node::Unknown(b) => nested(b)?,
            Node::Leaf { .. } | Node::Zero => {}
        }
    }
    Ok(())
}

struct Member {
    last: CSet,
    dot: bool,
    cap: f64,
    body: Vec<Node>,
}

const ADJACENT: &str =
    "two repeats in a row that can match the same character make every split a choice";

/// Rule 3: adjacent overlapping repeats, charged cumulatively (HISTOS-ENGINE §2d).
///
/// A run's cost is the product of its members' caps; a run whose first junction crosses
/// a held separator does not count its first member (the separator pins one boundary).
fn adjacency(seq: &[Node], charge: &mut f64) -> Result<(), &'static str> {
    let items = flat(seq);
    let mut pending: Vec<Member> = Vec::new();
    let mut held: Option<CSet> = None;
    let mut run_cost = 0.0f64;
    let mut run_open = false;
    macro_rules! reset {
        () => {{
            pending.clear();
            held = None;
            run_cost = 0.0;
            run_open = false;
        }};
    }
    for (idx, n) in items.iter().enumerate() {
        match n {
            Node::Zero | Node::Group(_) => {}
            Node::Look(b) => adjacency(b, charge)?,
            Node::Atomic(b) | Node::Unknown(b) => {
                adjacency(b, charge)?;
                reset!();
            }
            Node::Branch(bs) => {
                for b in bs {
                    adjacency(b, charge)?;
                }
                reset!();
            }
            Node::Leaf { set, .. } => {
                if pending.is_empty() {
                    continue;
                }
                if pending.iter().all(|m| !m.last.intersects(*set)) {
                    reset!();
                } else {
                    held = Some(held.map_or(*set, |h| h.union(*set)));
                }
            }
            Node::Repeat {
                min,
                max,
                body,
                possessive,
                greedy,
            } => {
                adjacency(body, charge)?;
                if *possessive {
                    reset!();
                    continue;
                }
                if !multi(*max) {
                    // `?` / `{0,1}` never join a run.
                    continue;
                }
                let f = flat(body);
                if anchored(&f) || terminated(&f) {
                    reset!();
                    continue;
                }
                let s = seq_sets(body);
                let is_dot = matches!(f.as_slice(), [Node::Leaf { dot: true, .. }]);
                let tail = items[idx + 1..].iter().all(|x| matches!(x, Node::Zero));
                if is_dot && *greedy && tail && !pending.iter().any(|m| m.dot) {
                    continue;
                }
                if !variable(*min, *max) {
                    // A fixed-count repeat has no movable boundary of its own.
                    if *min >= 1 && !pending.iter().any(|m| m.last.intersects(s.first)) {
                        reset!();
                    }
                    continue;
                }
                let me = Member {
                    last: s.last,
                    dot: is_dot,
                    cap: cap(*max),
                    body: body.clone(),
                };
                let old = run_cost;
                if let Some(h) = held.take() {
                    if !s.first.intersects(h) {
                        // Pinned: not charged; members that cannot absorb the separator drop.
                        pending.retain(|m| m.last.intersects(h));
                        pending.push(me);
                        continue;
                    }
                    if !pending.is_empty() {
                        run_cost = if run_open { run_cost * me.cap } else { me.cap };
                        run_open = true;
                    }
                } else {
                    let overlaps = pending.iter().any(|m| {
                        if s.unknown {
                            m.body == me.body
                        } else {
                            m.last.intersects(s.first)
                        }
                    });
                    if !overlaps {
                        if *min >= 1 {
                            reset!();
                        }
                        pending.push(me);
                        continue;
                    }
                    let prev = pending.last().map_or(1.0, |m| m.cap);
                    run_cost = if run_open {
                        run_cost * me.cap
                    } else {
                        prev * me.cap
                    };
                    run_open = true;
                }
                *charge += run_cost - old;
                pending.push(me);
                if *charge > SPLIT_BUDGET {
                    return Err(ADJACENT);
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn refused(p: &str) -> bool {
        match Pattern::new(p) {
            Ok(_) => false,
            Err(e) => {
                assert_eq!(e.code, PolicyCode::UnsafePattern, "{p}: {e}");
                true
            }
        }
    }

    #[test]
    fn refuses_the_documented_shapes() {
        for p in [
            r"^(a+)+$",
            r"^([a-z]+)*$",
            r"^(?:[a-z]*-)*[a-z]*$",
            r"^Q(?:[a-z]+){1,40}$",
            r"^(a|ab)*$",
            r"(a|a)+",
            r"(?:ab|cd)+",
            r"\d+\d+",
            r"^[a-z]{1,512}[a-z]{1,512}[a-z]{1,512}$",
            r"^[a-z]{1,4000}[a-z]{1,4000}$",
            r"^.*.+$",
            r"^[a-z]+_?[a-z]+$",
            r"^.+,[^\n]+,[^\n]+$",
            r"^.+,\d+,.+,\d+,.+$",
            r"^(?:zz)+(?:zzz)+(?:zzzzz)+$",
            r"^[a-z]+[a-z0-9]*[a-z0-9._-]*@example\.com$",
            r"^[A-Za-z0-9]+[A-Za-z0-9_-]+[A-Za-z0-9]+$",
        ] {
            assert!(refused(p), "should refuse {p}");
        }
    }

    #[test]
    fn loads_the_documented_safe_shapes() {
        for p in [
            r"^(a+)?$",
            r"^\d+(?:,\d+)*$",
            r"(?:[^/]+/)*",
            r"^(?:[a-z]+[-_]){2,4}$",
            r"(a|b)*",
            r"^[a-z]{1,512}[a-z]{1,512}$",
            r"^\w{1,64}\w{1,64}$",
            r"^[a-z]+.*$",
            r"^\w+.+$",
            r"^\w+\s+\w+$",
            r"^[A-Za-z0-9.-]+\.[A-Za-z]{2,}$",
            r"^.+,[^\n]+$",
            r"^(?!.*\.\.)[A-Za-z0-9._-]+$",
            r"^ORD-[0-9]{1,10}$",
            r"^[a-z0-9_]+$",
        ] {
            assert!(!refused(p), "should load {p}");
        }
    }

    #[test]
    fn full_match_semantics() {
        let p = Pattern::new(r"[a-z]+").unwrap();
        assert_eq!(p.full_match("abc"), Some(true));
        assert_eq!(p.full_match("abc1"), Some(false));
        let alt = Pattern::new(r"a|ab").unwrap();
        assert_eq!(alt.full_match("ab"), Some(true));
        assert_eq!(p.full_match(&"a".repeat(5000)), None);
    }

    #[test]
    fn bad_pattern_is_invalid_field() {
        assert_eq!(
            Pattern::new("(").unwrap_err().code,
            PolicyCode::InvalidField
        );
    }
}
