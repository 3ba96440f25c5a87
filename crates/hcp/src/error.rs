//! The one error type of the binary and its one renderer: `error: …`, `code: …`,
//! `Caused by: …`, `hint: …`, lowercase, user values in backticks (STYLE.md §4).

use hcp_model::Code;
use hcp_runtime::Refusal;
use std::fmt;
use std::io::Write;

/// A failure of a subcommand, with its stable code and exit status.
#[derive(Debug)]
pub struct CliError {
    /// The stable code (RUNTIME §2–§10).
    pub code: Code,
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
    /// A refusal of an owner command (install, session, grant, approve, policy …): its exit
    /// status is the code's in a command (`Code::command_exit_status`).
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            causes: Vec::new(),
            hint: None,
            exit: code.command_exit_status(),
        }
    }

    /// A refusal of a call (exec, connect, sense, MCP): its exit status is the code's in a
    /// call (`Code::exit_status`).
    pub fn call(code: Code, message: impl Into<String>) -> Self {
        Self {
            exit: code.exit_status(),
            ..Self::new(code, message)
        }
    }

    /// Adds a hint.
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Adds a cause.
    pub fn cause(mut self, cause: impl fmt::Display) -> Self {
        self.causes.push(cause.to_string());
        self
    }
}

impl CliError {
    /// An owner command's refusal given as the runtime's [`Refusal`].
    pub fn command(r: Refusal) -> Self {
        let e = Self::new(r.code, r.message);
        match r.hint {
            Some(h) => e.hint(h),
            None => e,
        }
    }
}

impl From<Refusal> for CliError {
    /// A call's refusal.
    fn from(r: Refusal) -> Self {
        let e = Self::call(r.code, r.message);
        match r.hint {
            Some(h) => e.hint(h),
            None => e,
        }
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
    // Every refusal names its next step: its own hint, else its code's (the code table).
    let hint = e.hint.as_deref().unwrap_or_else(|| e.code.next_step());
    let _ = writeln!(err, "  hint: {hint}");
}

/// The result of a subcommand: an exit status, or an error.
pub type CliResult = Result<u8, CliError>;
