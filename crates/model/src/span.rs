//! Where a value sits in a JSON text, for diagnostics about values that parsed fine but
//! mean something wrong (a land on a verb that does not exist, a bad placeholder).

use serde::Serialize;

/// A 1-based line and column (columns count characters, not bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Location {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
}

impl Location {
    /// The location of byte `offset` in `text`.
    pub fn of_offset(text: &str, offset: usize) -> Self {
        let before = &text[..offset.min(text.len())];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].chars().count() + 1;
        Self { line, column }
    }
}

/// Finds `path` in the JSON `text`: for an object member the location of its key, for an
/// array element (a decimal segment) the location of the element. An empty path is the
/// top-level value. `None` when the path is absent or the text is not JSON.
pub fn locate(text: &str, path: &[&str]) -> Option<Location> {
    let mut s = Scanner {
        b: text.as_bytes(),
        i: 0,
    };
    s.ws();
    let off = s.find(path)?;
    Some(Location::of_offset(text, off))
}

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
}

impl Scanner<'_> {
    fn ws(&mut self) {
        while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    /// At a value start; returns the offset of the path's target.
    fn find(&mut self, path: &[&str]) -> Option<usize> {
        let Some((first, rest)) = path.split_first() else {
            return Some(self.i);
        };
        match self.peek()? {
            b'{' => {
                self.i += 1;
                loop {
                    self.ws();
                    match self.peek()? {
                        b'}' => return None,
                        b',' => {
                            self.i += 1;
                            continue;
                        }
                        b'"' => {}
                        _ => return None,
                    }
                    let key_at = self.i;
                    let key = self.string()?;
                    self.ws();
                    if self.peek()? != b':' {
                        return None;
                    }
                    self.i += 1;
                    self.ws();
                    if key == *first {
                        if rest.is_empty() {
                            return Some(key_at);
                        }
                        return self.find(rest);
                    }
                    self.skip()?;
                }
            }
            b'[' => {
                let want: usize = first.parse().ok()?;
                self.i += 1;
                let mut n = 0;
                loop {
                    self.ws();
                    match self.peek()? {
                        b']' => return None,
                        b',' => {
                            self.i += 1;
                            continue;
                        }
                        _ => {}
                    }
                    if n == want {
                        return self.find(rest);
                    }
                    self.skip()?;
                    n += 1;
                }
            }
            _ => None,
        }
    }

    fn string(&mut self) -> Option<String> {
        let start = self.i + 1;
        self.i += 1;
        let mut escaped = false;
        while self.i < self.b.len() {
            let c = self.b[self.i];
            self.i += 1;
            if escaped {
                escaped = false;
            } else if c == b'\\' {
                escaped = true;
            } else if c == b'"' {
                let raw = &self.b[start - 1..self.i];
                return serde_json::from_slice::<String>(raw).ok();
            }
        }
        None
    }

    fn skip(&mut self) -> Option<()> {
        self.ws();
        match self.peek()? {
            b'"' => {
                self.string()?;
            }
            b'{' | b'[' => {
                let mut depth = 0usize;
                while self.i < self.b.len() {
                    match self.b[self.i] {
                        b'"' => {
                            self.string()?;
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                self.i += 1;
                                return Some(());
                            }
                        }
                        _ => {}
                    }
                    self.i += 1;
                }
                return None;
            }
            _ => {
                while self.i < self.b.len()
                    && !matches!(
                        self.b[self.i],
                        b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'
                    )
                {
                    self.i += 1;
                }
            }
        }
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &str = "{\n  \"a\": {\"b\": [1, {\"c\": \"x\\\"y\"}]},\n  \"d\": \"é\", \"e\": 2\n}";

    #[test]
    fn finds_keys_and_elements() {
        assert_eq!(locate(T, &["a"]), Some(Location { line: 2, column: 3 }));
        assert_eq!(
            locate(T, &["a", "b", "1", "c"]),
            Some(Location {
                line: 2,
                column: 19
            })
        );
        assert_eq!(
            locate(T, &["a", "b", "1"]),
            Some(Location {
                line: 2,
                column: 18
            })
        );
        assert_eq!(
            locate(T, &["e"]),
            Some(Location {
                line: 3,
                column: 13
            })
        );
        assert_eq!(locate(T, &["z"]), None);
        assert_eq!(locate(T, &[]), Some(Location { line: 1, column: 1 }));
    }
}
