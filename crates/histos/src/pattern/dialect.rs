//! Translation of a Python `re` pattern into the Rust regex dialect (HISTOS-ENGINE §2d).

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
pub(super) fn translate(src: &str) -> String {
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
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod dialect_tests {
    use crate::pattern::Pattern;

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
