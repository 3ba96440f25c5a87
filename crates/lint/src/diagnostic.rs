//! Diagnostics as data: code, severity, message, location, hint. The renderers are
//! beside them in [`crate::render`].

use hcp_model::Code;
use serde::Serialize;
use std::path::PathBuf;

/// Severity, ordered: an error outranks a warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Reported; does not refuse install.
    Warning,
    /// Refuses install.
    Error,
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// Stable code of RUNTIME §2.
    pub code: Code,
    /// Severity.
    pub level: Level,
    /// Lowercase message, user values in backticks.
    pub message: String,
    /// The file inside the pack (`policy.json`), or `None` for the pack as a whole.
    pub file: Option<String>,
    /// 1-based line, 0 when not known.
    pub line: usize,
    /// 1-based column, 0 when not known.
    pub column: usize,
    /// How to fix it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl Diagnostic {
    /// An error with `code` and `message`.
    pub fn error(code: Code, message: impl Into<String>) -> Self {
        Self {
            code,
            level: Level::Error,
            message: message.into(),
            file: None,
            line: 0,
            column: 0,
            hint: None,
        }
    }
    /// A warning with `code` and `message`.
    pub fn warning(code: Code, message: impl Into<String>) -> Self {
        Self {
            level: Level::Warning,
            ..Self::error(code, message)
        }
    }
    /// Sets the file.
    pub fn in_file(mut self, file: impl Into<String>) -> Self {
        self.file = Some(file.into());
        self
    }
    /// Sets line and column.
    pub fn at(mut self, line: usize, column: usize) -> Self {
        self.line = line;
        self.column = column;
        self
    }
    /// Sets the hint.
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

/// All findings for one pack directory, sorted by place (see [`crate::check`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The pack directory as the user named it.
    pub dir: PathBuf,
    /// Findings.
    pub diagnostics: Vec<Diagnostic>,
}

impl Report {
    /// An empty report for `dir`.
    pub fn new(dir: PathBuf) -> Self {
        Self {
            dir,
            diagnostics: Vec::new(),
        }
    }
    /// Adds a finding.
    pub fn push(&mut self, d: Diagnostic) {
        self.diagnostics.push(d);
    }
    /// Whether any finding is an error.
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(|d| d.level == Level::Error)
    }
    /// Number of errors.
    pub fn error_count(&self) -> usize {
        self.diagnostics
            .iter()
            .filter(|d| d.level == Level::Error)
            .count()
    }
}
