//! Shared helpers of the example CLIs that hcp's gold packs wrap.
//!
//! Every example CLI (`hcp-example-transit`, `-echo`, `-ledger`, `-mail`, `-probe`) follows
//! one contract: arguments are parsed by hand with [`parse_args`] (no shell, no option
//! clustering, `--` ends the options), results go to stdout (compact JSON with `--json`,
//! readable text without), and an error is one lowercase `error: …` line on stderr with a
//! non-zero exit status: [`EXIT_FAILURE`] when the request could not be done,
//! [`EXIT_USAGE`] for a malformed command line, [`EXIT_REFUSED`] when a gate of the CLI's
//! own refused (a missing `--confirm`, a missing binding token).

pub mod api;
pub mod hostile;
pub mod skipped;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

/// Exit status: the request was well formed but could not be done (not found, invalid
/// data, an I/O error).
pub const EXIT_FAILURE: u8 = 1;
/// Exit status: the command line is malformed (unknown subcommand or option, a missing or
/// extra argument).
pub const EXIT_USAGE: u8 = 2;
/// Exit status: the CLI refused on its own gate (no `--confirm` on a write, no binding
/// token).
pub const EXIT_REFUSED: u8 = 3;

/// Why a command failed: the exit status and a lowercase message for stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The process exit status.
    pub code: u8,
    /// One lowercase line.
    pub message: String,
}

impl Failure {
    /// A failure with exit status [`EXIT_FAILURE`].
    pub fn fail(message: impl Into<String>) -> Self {
        Self {
            code: EXIT_FAILURE,
            message: message.into(),
        }
    }

    /// A failure with exit status [`EXIT_USAGE`].
    pub fn usage(message: impl Into<String>) -> Self {
        Self {
            code: EXIT_USAGE,
            message: message.into(),
        }
    }

    /// A failure with exit status [`EXIT_REFUSED`].
    pub fn refused(message: impl Into<String>) -> Self {
        Self {
            code: EXIT_REFUSED,
            message: message.into(),
        }
    }

    /// An I/O failure, with what was being done.
    pub fn io(context: impl std::fmt::Display, err: &std::io::Error) -> Self {
        Self::fail(format!("{context}: {err}"))
    }
}

/// The result type of every command.
pub type Outcome = Result<(), Failure>;

/// Runs `body` with the program's arguments (after the program name) and turns its
/// outcome into an exit status, printing a failure as `error: MESSAGE` on stderr, and for
/// a usage failure the `usage` text after it.
pub fn run(usage: &str, body: impl FnOnce(Vec<String>) -> Outcome) -> ExitCode {
    let outcome = utf8_args(std::env::args_os().skip(1)).and_then(body);
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            let mut err = std::io::stderr().lock();
            // Nothing better can be done when stderr itself is gone.
            let _ = writeln!(err, "error: {}", f.message);
            if f.code == EXIT_USAGE {
                let _ = writeln!(err, "{usage}");
            }
            ExitCode::from(f.code)
        }
    }
}

fn utf8_args(args: impl Iterator<Item = OsString>) -> Result<Vec<String>, Failure> {
    args.map(|a| {
        a.into_string()
            .map_err(|a| Failure::usage(format!("argument {a:?} is not valid utf-8")))
    })
    .collect()
}

/// An option a command accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opt {
    /// The long name without dashes (`json` for `--json`).
    pub name: &'static str,
    /// Whether it takes a value (`--name VALUE` or `--name=VALUE`).
    pub takes_value: bool,
}

impl Opt {
    /// A boolean switch.
    pub const fn switch(name: &'static str) -> Self {
        Self {
            name,
            takes_value: false,
        }
    }

    /// An option with a value.
    pub const fn value(name: &'static str) -> Self {
        Self {
            name,
            takes_value: true,
        }
    }
}

/// A parsed command line: positionals in order and options by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsed {
    /// The positional arguments, in order.
    pub positionals: Vec<String>,
    options: BTreeMap<&'static str, Option<String>>,
}

impl Parsed {
    /// Whether the switch or option `name` was given.
    pub fn has(&self, name: &str) -> bool {
        self.options.contains_key(name)
    }

    /// The value of option `name`, when given.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.options.get(name).and_then(|v| v.as_deref())
    }

    /// Whether `--json` was given.
    pub fn json(&self) -> bool {
        self.has("json")
    }

    /// The positionals, requiring exactly `names.len()` of them (named in the error).
    ///
    /// # Errors
    /// A usage failure naming the first missing argument, or the first extra one.
    pub fn exactly(&self, names: &[&str]) -> Result<&[String], Failure> {
        if let Some(missing) = names.get(self.positionals.len()) {
            return Err(Failure::usage(format!("missing argument <{missing}>")));
        }
        if let Some(extra) = self.positionals.get(names.len()) {
            return Err(Failure::usage(format!("unexpected argument `{extra}`")));
        }
        Ok(&self.positionals)
    }

    /// At most `max` positionals.
    ///
    /// # Errors
    /// A usage failure naming the first extra argument.
    pub fn at_most(&self, max: usize) -> Result<&[String], Failure> {
        match self.positionals.get(max) {
            Some(extra) => Err(Failure::usage(format!("unexpected argument `{extra}`"))),
            None => Ok(&self.positionals),
        }
    }
}

/// Parses `args` against `opts`. `--` ends the options; an argument starting with `-`
/// (other than `-` itself) before it must be a known long option; options are long only
/// and given at most once. Values never get re-split: `--memo=a b` is one value.
///
/// # Errors
/// A usage failure for an unknown or repeated option, a missing value, or a value given
/// to a switch.
pub fn parse_args(args: &[String], opts: &[Opt]) -> Result<Parsed, Failure> {
    let mut parsed = Parsed::default();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if arg == "--" {
            parsed.positionals.extend(rest.by_ref().cloned());
            break;
        }
        let Some(body) = arg.strip_prefix("--") else {
            if arg.starts_with('-') && arg != "-" {
                return Err(Failure::usage(format!(
                    "unknown option `{arg}` (put `--` before a value that starts with `-`)"
                )));
            }
            parsed.positionals.push(arg.clone());
            continue;
        };
        let (name, inline) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v.to_owned())),
            None => (body, None),
        };
        let Some(opt) = opts.iter().find(|o| o.name == name) else {
            return Err(Failure::usage(format!("unknown option `--{name}`")));
        };
        if parsed.options.contains_key(opt.name) {
            return Err(Failure::usage(format!("option `--{name}` given twice")));
        }
        let value = match (opt.takes_value, inline) {
            (false, None) => None,
            (false, Some(_)) => {
                return Err(Failure::usage(format!("option `--{name}` takes no value")));
            }
            (true, Some(v)) => Some(v),
            (true, None) => match rest.next() {
                Some(v) => Some(v.clone()),
                None => {
                    return Err(Failure::usage(format!("option `--{name}` needs a value")));
                }
            },
        };
        parsed.options.insert(opt.name, value);
    }
    Ok(parsed)
}

/// Writes `text` and a newline to stdout.
///
/// # Errors
/// A failure when stdout is closed or broken.
pub fn out_line(text: &str) -> Outcome {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")
        .and_then(|()| out.flush())
        .map_err(|e| Failure::io("cannot write to stdout", &e))
}

/// Writes `value` as one line of compact JSON to stdout.
///
/// # Errors
/// A failure when stdout is closed or broken.
pub fn out_json(value: &serde_json::Value) -> Outcome {
    out_line(&value.to_string())
}

/// Parses a non-negative integer strictly (ASCII digits only, no sign, no leading zero
/// unless it is `0`), naming `what` in the error.
///
/// # Errors
/// A usage failure for anything else or an overflow.
pub fn parse_count(text: &str, what: &str) -> Result<u64, Failure> {
    let digits_only = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    let canonical = text == "0" || !text.starts_with('0');
    if !digits_only || !canonical {
        return Err(Failure::usage(format!(
            "{what} `{text}` is not a non-negative integer"
        )));
    }
    text.parse::<u64>()
        .map_err(|_| Failure::usage(format!("{what} `{text}` is too large")))
}

/// Whether `name` is a plain file name: not empty, not `.` or `..`, no `/`, no NUL, no
/// control character, not starting with `-`.
pub fn is_plain_file_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && !name.starts_with('-')
        && !name.chars().any(|c| c == '/' || c.is_control())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    const OPTS: &[Opt] = &[Opt::switch("json"), Opt::value("at")];

    #[test]
    fn parses_options_and_positionals() {
        let p = parse_args(&args(&["a", "--json", "--at", "07:00", "b"]), OPTS).unwrap();
        assert_eq!(p.positionals, args(&["a", "b"]));
        assert!(p.json());
        assert_eq!(p.value("at"), Some("07:00"));
        let p = parse_args(&args(&["--at=-1", "--", "--json", "-x"]), OPTS).unwrap();
        assert_eq!(p.value("at"), Some("-1"));
        assert!(!p.json());
        assert_eq!(p.positionals, args(&["--json", "-x"]));
    }

    #[test]
    fn refuses_bad_command_lines() {
        for bad in [
            &["-x"][..],
            &["--nope"],
            &["--json=1"],
            &["--at"],
            &["--json", "--json"],
            &["-5"],
        ] {
            let e = parse_args(&args(bad), OPTS).unwrap_err();
            assert_eq!(e.code, EXIT_USAGE, "{bad:?}");
        }
    }

    #[test]
    fn counts_are_strict() {
        assert_eq!(parse_count("0", "n").unwrap(), 0);
        assert_eq!(parse_count("42", "n").unwrap(), 42);
        for bad in ["", "-1", "+1", "01", "1.0", " 1", "99999999999999999999999"] {
            assert!(parse_count(bad, "n").is_err(), "{bad}");
        }
    }

    #[test]
    fn plain_names() {
        assert!(is_plain_file_name("notes.txt"));
        for bad in ["", ".", "..", "a/b", "-f", "a\nb", "/etc"] {
            assert!(!is_plain_file_name(bad), "{bad}");
        }
    }
}
