//! The one error type of the binary and its one renderer: `error: …`, `code: …`,
//! `Caused by: …`, `hint: …`, lowercase, user values in backticks (STYLE.md §4).

use std::fmt;
use std::io::Write;

/// A failure of a subcommand, with its stable code and exit status.
#[derive(Debug)]
pub struct CliError {
    /// Stable snake_case code (RUNTIME §2, §5).
    pub code: String,
    /// Lowercase message.
    pub message: String,
    /// Causes, outermost first.
    pub causes: Vec<String>,
    /// A hint for the user.
    pub hint: Option<String>,
    /// The process exit status.
    pub exit: u8,
}

impl CliError {
    /// A new error.
    pub fn new(code: impl Into<String>, message: impl Into<String>, exit: u8) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
            causes: Vec::new(),
            hint: None,
            exit,
        }
    }

    /// Adds a hint.
    #[allow(dead_code)]
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Adds a cause.
    #[allow(dead_code)]
    pub fn cause(mut self, cause: impl fmt::Display) -> Self {
        self.causes.push(cause.to_string());
        self
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Writes `e` to stderr (RUNTIME §5, "a refusal prints `error: MESSAGE` and the code"):
///
/// ```text
/// error: MESSAGE
///   code: CODE
///   Caused by: CAUSE
///   hint: HINT
/// ```
pub fn render(e: &CliError) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "error: {}", e.message);
    let _ = writeln!(err, "  code: {}", e.code);
    for c in &e.causes {
        let _ = writeln!(err, "  Caused by: {c}");
    }
    if let Some(h) = &e.hint {
        let _ = writeln!(err, "  hint: {h}");
    }
}

/// The result of a subcommand: an exit status, or an error.
pub type CliResult = Result<u8, CliError>;
