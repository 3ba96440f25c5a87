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
//!
//! Compilation is lazy: loading parses and screens the pattern and checks that the
//! matcher's own parser accepts it (patterns with look-around, back-references or atomic
//! groups are compiled at load, so their compile errors stay load errors); the matcher
//! itself is built on first use and shared by every field with the same source.
//!
//! Modules: `dialect` (Python → Rust regex text), `charset` and `parse` (the parse tree
//! the screen reads), `screen` (the refused shapes).

mod charset;
mod dialect;
mod parse;
mod screen;

use std::sync::{Arc, OnceLock};

use crate::error::{PolicyCode, PolicyError};

/// Maximum total split charge of adjacent overlapping repeats (HISTOS-ENGINE §2d rule 3).
pub const SPLIT_BUDGET: f64 = 4_000_000.0;
/// Cap of an unbounded repeat in the cost model.
const CAP: u32 = 4096;
/// Longest string (in code points) a pattern is applied to; longer → `arg_schema`.
pub const MAX_PATTERN_INPUT: usize = 4096;

/// A screened field pattern whose matcher is compiled on first use. Cloning shares the
/// matcher.
#[derive(Clone)]
pub struct Pattern {
    inner: Arc<Inner>,
}

struct Inner {
    source: String,
    /// The matcher, or why it could not be built.
    re: OnceLock<Result<fancy_regex::Regex, String>>,
}

impl std::fmt::Debug for Pattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pattern")
            .field("source", &self.inner.source)
            .field("compiled", &self.inner.re.get().is_some())
            .finish()
    }
}

fn invalid(m: impl std::fmt::Display) -> PolicyError {
    PolicyError::new(
        PolicyCode::InvalidField,
        format!("pattern does not compile: {m}"),
    )
}

fn compile(source: &str) -> Result<fancy_regex::Regex, String> {
    let translated = dialect::translate(source);
    // In verbose mode a `#` comment runs to the end of a line: end it before the anchor.
    let end = if source.contains("(?x") { "\n" } else { "" };
    fancy_regex::Regex::new(&format!("\\A(?:{translated}{end})\\z")).map_err(|e| e.to_string())
}

impl Pattern {
    /// Screens `source` (HISTOS-ENGINE §2d) and checks that it compiles; the matcher is
    /// built on first use.
    ///
    /// # Errors
    /// `unsafe_pattern` for a refused shape, `invalid_field` when it does not compile.
    pub fn new(source: &str) -> Result<Pattern, PolicyError> {
        let node = parse::Parser::new(source).parse().map_err(invalid)?;
        let re = OnceLock::new();
        if parse::needs_backtracking(&node) {
            // Look-around, back-references, atomic groups: compile now, so that what the
            // matcher refuses (a variable-length look-behind) is a load error.
            let _ = re.set(Ok(compile(source).map_err(invalid)?));
        } else {
            let translated = dialect::translate(source);
            let end = if source.contains("(?x") { "\n" } else { "" };
            fancy_regex::Expr::parse_tree(&format!("\\A(?:{translated}{end})\\z"))
                .map_err(invalid)?;
        }
        screen::screen(&node)
            .map_err(|m| PolicyError::new(PolicyCode::UnsafePattern, m.to_string()))?;
        Ok(Pattern {
            inner: Arc::new(Inner {
                source: source.to_string(),
                re,
            }),
        })
    }

    /// A pattern already screened by an earlier load of the same engine version (the
    /// compiled policy cache): nothing is parsed or screened again.
    pub(crate) fn screened(source: String) -> Pattern {
        Pattern {
            inner: Arc::new(Inner {
                source,
                re: OnceLock::new(),
            }),
        }
    }

    /// The pattern as written.
    pub fn source(&self) -> &str {
        &self.inner.source
    }

    /// Full match (`re.fullmatch`); `None` when the input is longer than
    /// [`MAX_PATTERN_INPUT`] code points, when matching failed, or when the matcher
    /// cannot be built (fail closed: the caller denies).
    pub fn full_match(&self, s: &str) -> Option<bool> {
        if s.len() > MAX_PATTERN_INPUT && s.chars().count() > MAX_PATTERN_INPUT {
            return None;
        }
        let re = self.inner.re.get_or_init(|| compile(&self.inner.source));
        re.as_ref().ok()?.is_match(s).ok()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod lazy_tests {
    use super::Pattern;
    use crate::error::PolicyCode;

    #[test]
    fn a_plain_pattern_compiles_on_first_use_and_clones_share_it() {
        let p = Pattern::new("^[a-z]{2,8}$").unwrap();
        assert!(p.inner.re.get().is_none(), "not compiled at load");
        let q = p.clone();
        assert_eq!(p.full_match("abc"), Some(true));
        assert!(q.inner.re.get().is_some(), "the clone shares the matcher");
        assert_eq!(q.full_match("a"), Some(false));
    }

    #[test]
    fn what_the_matcher_refuses_is_still_a_load_error() {
        // A variable-length look-behind is refused, as Python's `re` refuses it.
        let e = Pattern::new("(?<=a+)b").unwrap_err();
        assert_eq!(e.code, PolicyCode::InvalidField, "{e}");
        assert!(Pattern::new("(?<=ab|cd)x").is_ok());
        assert!(Pattern::new("(?<!a{3})x").is_ok());
        assert_eq!(
            Pattern::new("(?<=ab|c)x").unwrap_err().code,
            PolicyCode::InvalidField
        );
        // Syntax the matcher's parser refuses is found without compiling.
        assert_eq!(
            Pattern::new("[a-").unwrap_err().code,
            PolicyCode::InvalidField
        );
        assert_eq!(
            Pattern::new("a{2,1}").unwrap_err().code,
            PolicyCode::InvalidField
        );
        // Look-ahead compiles at load and matches.
        let p = Pattern::new("^(?!.*\\.\\.)[A-Za-z0-9._-]+$").unwrap();
        assert_eq!(p.full_match("a.b"), Some(true));
        assert_eq!(p.full_match("a..b"), Some(false));
    }
}
