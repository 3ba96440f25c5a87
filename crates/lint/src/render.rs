//! Renderers of [`Report`]s: [`concise`] text and [`json()`].

use crate::diagnostic::{Diagnostic, Level, Report};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// The path a diagnostic names: the pack directory as the user gave it, joined with the
/// file when there is one.
pub fn diagnostic_path(dir: &Path, d: &Diagnostic) -> PathBuf {
    match &d.file {
        Some(f) => dir.join(f),
        None => dir.to_path_buf(),
    }
}

fn level_str(level: Level) -> &'static str {
    match level {
        Level::Error => "error",
        Level::Warning => "warning",
    }
}

/// Control characters escaped, so that no value can forge a line of output.
fn clean(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let escaped: Vec<char> = if c.is_control() {
                c.escape_default().collect()
            } else {
                vec![c]
            };
            escaped
        })
        .collect()
}

/// The concise form: one line a diagnostic, `path:line:col: level[code]: message`
/// (`path: level[code]: message` when the place in the file is unknown), each followed by
/// `  hint: …` when it has a hint. Empty for a clean report.
pub fn concise(report: &Report) -> String {
    let mut out = String::new();
    for d in &report.diagnostics {
        let path = clean(&diagnostic_path(&report.dir, d).display().to_string());
        out.push_str(&path);
        if d.line > 0 {
            out.push_str(&format!(":{}:{}", d.line, d.column.max(1)));
        }
        out.push_str(&format!(
            ": {}[{}]: {}\n",
            level_str(d.level),
            d.code,
            clean(&d.message)
        ));
        if let Some(h) = &d.hint {
            out.push_str(&format!("  hint: {}\n", clean(h)));
        }
    }
    out
}

/// One line that sums up `reports`: `2 errors, 1 warning in 3 packs`.
pub fn summary(reports: &[Report]) -> String {
    let count = |l: Level| {
        reports
            .iter()
            .flat_map(|r| &r.diagnostics)
            .filter(|d| d.level == l)
            .count()
    };
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    format!(
        "{}, {} in {}",
        plural(count(Level::Error), "error"),
        plural(count(Level::Warning), "warning"),
        plural(reports.len(), "pack")
    )
}

/// The JSON form of one report:
/// `{"dir", "ok", "errors", "warnings", "diagnostics": [{"code", "level", "message",
/// "file", "path", "line", "column", "hint"}]}`; `ok` is true when there is no error;
/// `file`, `line`, `column` and `hint` are `null` when unknown.
pub fn json_report(report: &Report) -> Value {
    let diagnostics: Vec<Value> = report
        .diagnostics
        .iter()
        .map(|d| {
            let known = |n: usize| if n > 0 { Value::from(n) } else { Value::Null };
            json!({
                "code": d.code,
                "level": level_str(d.level),
                "message": d.message,
                "file": d.file,
                "path": diagnostic_path(&report.dir, d).display().to_string(),
                "line": known(d.line),
                "column": if d.line > 0 { known(d.column.max(1)) } else { Value::Null },
                "hint": d.hint,
            })
        })
        .collect();
    let errors = report.error_count();
    json!({
        "dir": report.dir.display().to_string(),
        "ok": errors == 0,
        "errors": errors,
        "warnings": report.diagnostics.len() - errors,
        "diagnostics": diagnostics,
    })
}

/// The JSON form of several reports: an array of [`json_report`] objects, in order.
pub fn json(reports: &[Report]) -> Value {
    Value::Array(reports.iter().map(json_report).collect())
}
