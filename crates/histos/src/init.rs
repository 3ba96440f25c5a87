//! A starting policy written from tool contracts, as YAML a person would keep: a comment
//! per tool saying where it came from, tools in name order, the same bytes from run to
//! run, and text that [`Policy::load_yaml`] accepts (RUNTIME §7 `hcp policy init`).
//!
//! Every tool gets `access` and its projected `args`; a confirm-gated tool gets
//! `confirmation: {required: true}`. Nothing is granted unless a role is given, in which
//! case that role is granted every tool. Scalars are written plain only where the YAML
//! 1.1 resolver reads them back as the same string; everything else is double-quoted
//! with non-ASCII escaped, and floats always carry a `.` so they stay floats.

use std::fmt::Write as _;

use crate::error::{PolicyCode, PolicyError};
use crate::model::{Field, Policy, Schema};
use crate::value::{Value, canonical_number, py_float_repr};

/// `read` or `write` (the pack's operation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reads only.
    Read,
    /// Changes something.
    Write,
}

impl Access {
    /// The format's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
        }
    }
}

/// One tool of a starting policy.
#[derive(Debug, Clone)]
pub struct InitTool {
    /// Tool name (hcp: `PACK_ID.VERB_KEY`).
    pub name: String,
    /// `access`.
    pub access: Access,
    /// The projected argument contract; `None` is written as `args: {}` (no arguments).
    pub args: Option<Schema>,
    /// The tool's description, shown (first line, shortened) in its comment.
    pub description: Option<String>,
    /// Whether calls need an out-of-band approval (`confirmation: {required: true}`).
    pub confirm: bool,
    /// Where the tool came from, for its comment (`pack mail 1.2.0, verb send`).
    pub source: String,
}

/// A starting policy: a header comment, the tools, and the role (if any) granted all.
#[derive(Debug, Clone, Default)]
pub struct PolicyInit {
    /// Header comment lines (without `#`), written first.
    pub header: Vec<String>,
    /// The tools, in any order (written in name order).
    pub tools: Vec<InitTool>,
    /// A role granted every tool; `None` grants nothing.
    pub role: Option<String>,
}

/// Longest description text kept in a tool's comment, in characters.
const COMMENT_CHARS: usize = 100;

impl PolicyInit {
    /// Renders the policy as YAML and checks that it loads.
    ///
    /// # Errors
    /// `policy_invalid` for a tool name the format refuses, a tool named twice or an
    /// empty role; any error of [`Policy::load_yaml`] on the result (a defect here,
    /// reported rather than written).
    pub fn render(&self) -> Result<String, PolicyError> {
        let mut tools: Vec<&InitTool> = self.tools.iter().collect();
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        for w in tools.windows(2) {
            if w[0].name == w[1].name {
                return Err(PolicyError::new(
                    PolicyCode::PolicyInvalid,
                    format!("tool `{}` is listed twice", w[0].name),
                ));
            }
        }
        for t in &tools {
            if !crate::load::valid_tool_name(&t.name) {
                return Err(PolicyError::new(
                    PolicyCode::PolicyInvalid,
                    format!("`{}` is not a valid tool name", t.name),
                ));
            }
        }
        let mut out = String::new();
        for h in &self.header {
            out.push_str("# ");
            out.push_str(&one_line(h, usize::MAX));
            out.push('\n');
        }
        out.push_str("schema_version: histos.policy/0.1\n");
        if tools.is_empty() {
            out.push_str("tools: {}\n");
        } else {
            out.push_str("tools:\n");
        }
        for (i, t) in tools.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            write_tool(t, &mut out);
        }
        match &self.role {
            None => out.push_str("roles: {}\n"),
            Some(r) if r.is_empty() => {
                return Err(PolicyError::new(
                    PolicyCode::PolicyInvalid,
                    "a role name must not be empty",
                ));
            }
            Some(r) => {
                let _ = writeln!(out, "roles:\n  {}:", scalar(r));
                if tools.is_empty() {
                    out.push_str("    allow: []\n");
                } else {
                    out.push_str("    allow:\n");
                    for t in &tools {
                        let _ = writeln!(out, "      - {}", scalar(&t.name));
                    }
                }
            }
        }
        Policy::load_yaml(&out)?;
        Ok(out)
    }
}

/// The tool entries of `tools` as `hcp policy init` writes them under `tools:` (two
/// spaces in, a comment each, a blank line between two), in name order: what a merge adds
/// to a YAML policy it keeps.
pub fn render_tools(tools: &[InitTool]) -> String {
    let mut sorted: Vec<&InitTool> = tools.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let mut out = String::new();
    for (i, t) in sorted.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        write_tool(t, &mut out);
    }
    out
}

/// The definition of `tool` (what [`render_tools`] writes under its name) as a JSON value:
/// what a merge adds to a JSON policy, which has no comments.
///
/// # Errors
/// A defect of this writer: the rendered entry does not read back.
pub fn tool_json(tool: &InitTool) -> Result<serde_json::Value, PolicyError> {
    let mut text = String::from("tools:\n");
    write_tool(tool, &mut text);
    let v = crate::yaml::parse(&text)?;
    let entry = match &v {
        Value::Map(m) => match m.get("tools") {
            Some(Value::Map(t)) => t.get(&tool.name),
            _ => None,
        },
        _ => None,
    };
    entry.map(serde_json::Value::from).ok_or_else(|| {
        PolicyError::new(
            PolicyCode::PolicyInvalid,
            format!("the entry of `{}` does not read back", tool.name),
        )
    })
}

fn one_line(s: &str, max: usize) -> String {
    let line: String = s
        .lines()
        .next()
        .unwrap_or("")
        .chars()
        .map(|c| {
            if c.is_control() || crate::detect::is_cf(c) || matches!(c, '\u{2028}' | '\u{2029}') {
                ' '
            } else {
                c
            }
        })
        .collect();
    let line = line.trim();
    if line.chars().count() > max {
        let cut: String = line.chars().take(max.saturating_sub(1)).collect();
        format!("{}…", cut.trim_end())
    } else {
        line.to_string()
    }
}

fn write_tool(t: &InitTool, out: &mut String) {
    let mut note = format!(
        "{}: {}; {}",
        t.name,
        one_line(&t.source, 200),
        t.access.as_str()
    );
    if t.confirm {
        note.push_str(", confirm-gated");
    }
    if let Some(d) = &t.description {
        let d = one_line(d, COMMENT_CHARS);
        if !d.is_empty() {
            note.push_str(". ");
            note.push_str(&d);
        }
    }
    let _ = writeln!(out, "  # {note}");
    let _ = writeln!(out, "  {}:", scalar(&t.name));
    let _ = writeln!(out, "    access: {}", t.access.as_str());
    if t.confirm {
        out.push_str("    confirmation: {required: true}\n");
    }
    match &t.args {
        Some(s) if !s.fields.is_empty() || s.allow_extra => {
            out.push_str("    args:\n");
            write_schema(s, out);
        }
        _ => out.push_str("    args: {}\n"),
    }
}

fn write_schema(s: &Schema, out: &mut String) {
    if s.allow_extra {
        out.push_str("      $allow_extra: true\n");
    }
    for f in &s.fields {
        let _ = writeln!(
            out,
            "      {}: {{{}}}",
            scalar(&f.name),
            field_items(f).join(", ")
        );
    }
}

fn field_items(f: &Field) -> Vec<String> {
    let mut v = vec![format!("type: {}", f.ty.as_str())];
    if !f.required {
        v.push("required: false".into());
    }
    if f.nullable {
        v.push("nullable: true".into());
    }
    if let Some(e) = &f.enum_values {
        v.push(format!("enum: {}", flow_list(e)));
    }
    let mut count = |k: &str, n: Option<u64>| {
        if let Some(n) = n {
            v.push(format!("{k}: {n}"));
        }
    };
    count("min_length", f.min_length);
    count("max_length", f.max_length);
    if let Some(p) = &f.pattern {
        v.push(format!("pattern: {}", quoted(p.source())));
    }
    for (k, b) in [
        ("minimum", &f.minimum),
        ("maximum", &f.maximum),
        ("exclusive_minimum", &f.exclusive_minimum),
        ("exclusive_maximum", &f.exclusive_maximum),
        ("multiple_of", &f.multiple_of),
    ] {
        if let Some(b) = b {
            v.push(format!("{k}: {}", value(b)));
        }
    }
    if let Some(t) = f.item_type {
        v.push(format!("item_type: {}", t.as_str()));
    }
    if let Some(e) = &f.item_enum {
        v.push(format!("item_enum: {}", flow_list(e)));
    }
    if let Some(n) = f.min_items {
        v.push(format!("min_items: {n}"));
    }
    if let Some(n) = f.max_items {
        v.push(format!("max_items: {n}"));
    }
    if f.unique_items {
        v.push("unique_items: true".into());
    }
    if let Some(s) = f.sensitive {
        v.push(format!("sensitive: {}", s.as_str()));
    }
    v
}

fn flow_list(l: &[Value]) -> String {
    let items: Vec<String> = l.iter().map(value).collect();
    format!("[{}]", items.join(", "))
}

/// A value in flow context.
fn value(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Int(_) | Value::BigInt(_) => canonical_number(v).unwrap_or_default(),
        Value::Float(f) => float(*f),
        Value::Str(s) => scalar(s),
        Value::Timestamp(s) => quoted(s),
        Value::List(l) => flow_list(l),
        Value::Map(m) => {
            let items: Vec<String> = m
                .iter()
                .map(|(k, x)| format!("{}: {}", scalar(k), value(x)))
                .collect();
            format!("{{{}}}", items.join(", "))
        }
    }
}

/// A float that the YAML 1.1 resolver reads back as the same float: Python's repr, with
/// a `.0` before a bare exponent (`1e-05` would be a string).
fn float(f: f64) -> String {
    let r = py_float_repr(f);
    match r.split_once('e') {
        Some((m, e)) if !m.contains('.') => format!("{m}.0e{e}"),
        _ => r,
    }
}

/// A string: plain when it is a simple word the resolver reads back as itself, else
/// double-quoted.
fn scalar(s: &str) -> String {
    let simple = !s.is_empty()
        && s.len() <= 200
        && s.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/'));
    // YAML 1.1 booleans other tools read as such (this engine keeps them strings).
    let boolish = matches!(
        s.to_ascii_lowercase().as_str(),
        "yes" | "no" | "on" | "off" | "y" | "n" | "true" | "false"
    );
    if simple && !boolish && reads_back(s) {
        s.to_string()
    } else {
        quoted(s)
    }
}

fn reads_back(s: &str) -> bool {
    matches!(crate::yaml::parse(&format!("k: {s}\n")), Ok(Value::Map(m)) if m.get("k") == Some(&Value::Str(s.to_string())))
}

/// A YAML double-quoted string with every non-ASCII or control character escaped.
fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if c.is_ascii() => out.push(c),
            c if (c as u32) <= 0xffff => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\U{:08x}", c as u32);
            }
        }
    }
    out.push('"');
    out
}
