//! `hcp policy init --merge FILE` (RUNTIME §7 "Contracts from packs"): the tools of the
//! active packs that an existing policy does not name yet, added to it in place. Every
//! byte of the file that is not an addition is kept — the rules, the roles, the order,
//! the layout and, in YAML, the comments (JSON has none to keep); the additions are
//! written as `hcp policy init` writes them (a comment per tool in YAML), at the end of
//! `tools`, and, with a role, at the end of that role's `allow`.
//!
//! A tool the file names is never touched, whatever it says: the owner's edits win. The
//! result is loaded again before it is handed back, and must name every added tool; a
//! file that does not load is refused with its POLICY code and the line and column of the
//! fault, and nothing is merged.

use super::contracts::{self, init_tool, valid_tool_name};
use crate::refusal::Refusal;
use hcp_model::Code;
use hcp_store::pack::InstalledPack;
use histos::init::InitTool;
use histos::outline::{self, Node, NodeKind, Pos};
use histos::{Policy, PolicyError};

/// What a merge made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merged {
    /// The new text of the file; the old text when nothing was added.
    pub text: String,
    /// The tools added, in name order; empty when the file named every tool already.
    pub added: Vec<String>,
    /// The role the added tools were allowed for, when one was given.
    pub role: Option<String>,
    /// Tools of the packs that cannot be named in a policy (not a Histos tool name).
    pub skipped: Vec<String>,
}

/// The format of the file, as its name says (`.json` is JSON, anything else YAML, as
/// [`Policy::load_path`] reads it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// YAML: comments are kept.
    Yaml,
    /// JSON.
    Json,
}

/// A fault of `file` reported with its line and column when the loader gave a path.
fn located(file: &str, text: &str, format: Format, e: &PolicyError) -> Refusal {
    let t = super::teach::split(e);
    let nodes = match format {
        Format::Yaml => outline::yaml(text),
        Format::Json => outline::json(text),
    };
    let at = match (&e.location, &nodes) {
        (Some(l), _) if l.starts_with("line ") => parse_line_col(l),
        (Some(l), Ok(n)) => outline::locate(n, l).map(|p| (p.line, p.col)),
        _ => None,
    };
    let place = at.map_or_else(|| file.to_owned(), |(l, c)| format!("{file}:{l}:{c}"));
    // A syntax fault's place is said once, before the message.
    let fault = match &e.location {
        Some(l) if l.starts_with("line ") => t
            .message
            .strip_suffix(&format!(" (at {l})"))
            .unwrap_or(&t.message)
            .to_owned(),
        _ => t.message.clone(),
    };
    let message = format!("{place}: policy does not load: {fault}");
    let r = Refusal::new(Code::from(e.code), message);
    match t.hint {
        Some(h) => r.hint(h),
        None => {
            r.hint("fix the file (`hcp policy check FILE` says what is wrong), then merge again")
        }
    }
}

fn parse_line_col(l: &str) -> Option<(usize, usize)> {
    let rest = l.strip_prefix("line ")?;
    let (line, col) = rest.split_once(" column ")?;
    Some((line.trim().parse().ok()?, col.trim().parse().ok()?))
}

fn unsupported(file: &str, at: Pos, what: &str, hint: &str) -> Refusal {
    Refusal::new(
        Code::BadInput,
        format!("{file}:{}:{}: {what}", at.line, at.col),
    )
    .hint(hint.to_owned())
}

/// Adds to `text` (the policy file `file`, in `format`) the tools of `packs` it does not
/// name, and allows them for `role` when given (see the module docs).
///
/// # Errors
/// The file's POLICY code when it does not load, naming `file:line:col`; `bad_input`
/// (naming the place) for a shape the merge cannot extend in place — `tools` written as a
/// non-empty flow mapping in YAML, or a `role` the file has no `allow` list for; the
/// projection's refusal of a verb; `internal_error` when the result does not load (a
/// defect, reported rather than written).
pub fn merge(
    file: &str,
    text: &str,
    format: Format,
    packs: &[InstalledPack],
    role: Option<&str>,
) -> Result<Merged, Refusal> {
    let policy = match format {
        Format::Yaml => Policy::load_yaml(text),
        Format::Json => Policy::load_json(text),
    }
    .map_err(|e| located(file, text, format, &e))?;
    let mut new = Vec::new();
    let mut skipped = Vec::new();
    for p in packs {
        for t in contracts::tools_of(p) {
            if policy.tool(&t.name).is_some() {
                continue;
            }
            if !valid_tool_name(&t.name) {
                skipped.push(t.name);
                continue;
            }
            let tool = init_tool(p, &t).map_err(|e| {
                Refusal::new(Code::from(e.code), format!("`{}`: {}", t.name, e.message))
            })?;
            new.push(tool);
        }
    }
    new.sort_by(|a, b| a.name.cmp(&b.name));
    let added: Vec<String> = new.iter().map(|t| t.name.clone()).collect();
    if new.is_empty() {
        return Ok(Merged {
            text: text.to_owned(),
            added,
            role: role.map(str::to_owned),
            skipped,
        });
    }
    let nodes = match format {
        Format::Yaml => outline::yaml(text),
        Format::Json => outline::json(text),
    }
    .map_err(|e| located(file, text, format, &e))?;
    let mut edits = vec![tools_edit(file, text, format, &nodes, &new)?];
    if let Some(r) = role {
        edits.push(allow_edit(file, text, format, &nodes, r, &added)?);
    }
    // From the end of the text back, so each edit's offsets still hold.
    edits.sort_by_key(|e| std::cmp::Reverse(e.at));
    let mut out = text.to_owned();
    for e in edits {
        out.replace_range(e.at..e.at + e.remove, &e.insert);
    }
    let reloaded = match format {
        Format::Yaml => Policy::load_yaml(&out),
        Format::Json => Policy::load_json(&out),
    }
    .map_err(|e| {
        Refusal::new(
            Code::InternalError,
            format!(
                "the merged policy does not load ({}): nothing was written",
                e.message
            ),
        )
    })?;
    let allowed = |name: &str| role.is_none_or(|r| reloaded.allows(r, name));
    if let Some(lost) = added
        .iter()
        .find(|n| reloaded.tool(n).is_none() || !allowed(n))
    {
        return Err(Refusal::new(
            Code::InternalError,
            format!("the merged policy does not hold `{lost}`: nothing was written"),
        ));
    }
    Ok(Merged {
        text: out,
        added,
        role: role.map(str::to_owned),
        skipped,
    })
}

/// One change of the text: `remove` bytes at `at` replaced by `insert`.
struct Edit {
    at: usize,
    remove: usize,
    insert: String,
}

/// The end of the line holding byte `at` (the offset of its `\n`, or the text's end).
fn line_end(text: &str, at: usize) -> usize {
    text[at..].find('\n').map_or(text.len(), |i| at + i)
}

/// The indentation of the line holding byte `at`.
fn indent_of_line(text: &str, at: usize) -> usize {
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    text[start..].chars().take_while(|c| *c == ' ').count()
}

fn children_of<'a>(nodes: &'a [Node], parent: &Node) -> impl Iterator<Item = &'a Node> {
    let depth = parent.path.len() + 1;
    let prefix = parent.path.clone();
    nodes
        .iter()
        .filter(move |n| n.path.len() == depth && n.path[..depth - 1] == prefix[..])
}

/// `text` with every line indented by `by` more spaces (blank lines kept blank).
fn shifted(text: &str, by: usize) -> String {
    let pad = " ".repeat(by);
    let mut out = String::new();
    for line in text.split_inclusive('\n') {
        if line.trim().is_empty() {
            out.push_str(line);
        } else {
            out.push_str(&pad);
            out.push_str(line);
        }
    }
    out
}

fn tools_edit(
    file: &str,
    text: &str,
    format: Format,
    nodes: &[Node],
    new: &[InitTool],
) -> Result<Edit, Refusal> {
    let Some(tools) = outline::find(nodes, &["tools"]) else {
        // The loader requires `tools`; a policy without it does not reach here.
        return Err(Refusal::new(
            Code::InternalError,
            "the policy has no `tools`",
        ));
    };
    match format {
        Format::Yaml => yaml_tools_edit(file, text, nodes, tools, new),
        Format::Json => json_tools_edit(text, nodes, tools, new),
    }
}

fn yaml_tools_edit(
    file: &str,
    text: &str,
    nodes: &[Node],
    tools: &Node,
    new: &[InitTool],
) -> Result<Edit, Refusal> {
    let key_col = tools.key.map_or(0, |k| k.col - 1);
    let rendered = histos::init::render_tools(new);
    if tools.kind != NodeKind::Map {
        return Err(unsupported(
            file,
            tools.start,
            "`tools` is not a mapping",
            "write `tools:` as a mapping of tool names",
        ));
    }
    if tools.flow && tools.children > 0 {
        return Err(unsupported(
            file,
            tools.start,
            "`tools` is written as a flow mapping (`{…}`): the merge adds tools to a block mapping only",
            "write `tools:` as a block mapping, one tool name per line as `hcp policy init` writes it, then merge again",
        ));
    }
    if tools.flow {
        // `tools: {}`: the braces give way to a block mapping under the key.
        let body = shifted(&rendered, key_col);
        let insert = format!("\n{}", body.trim_end_matches('\n'));
        return Ok(Edit {
            at: tools.start.byte,
            remove: tools.end.byte - tools.start.byte,
            insert,
        });
    }
    // A block mapping: the new entries after its last line, at the indentation of its keys.
    let first = children_of(nodes, tools).next();
    let indent = first.and_then(|n| n.key).map_or(key_col + 2, |k| k.col - 1);
    let body = shifted(&rendered, indent.saturating_sub(2));
    Ok(after_block(
        text,
        tools,
        &format!("\n{}", body.trim_end_matches('\n')),
    ))
}

/// The edit that adds `lines` (no trailing newline) on the lines after block collection
/// `node`'s last line.
fn after_block(text: &str, node: &Node, lines: &str) -> Edit {
    let at = line_end(text, node.end.byte.saturating_sub(1).max(node.start.byte));
    let mut insert = format!("\n{lines}");
    if at == text.len() {
        insert.push('\n');
    }
    Edit {
        at,
        remove: 0,
        insert,
    }
}

fn json_entry(t: &InitTool, indent: usize) -> Result<String, Refusal> {
    let v = histos::init::tool_json(t)
        .map_err(|e| Refusal::new(Code::InternalError, format!("`{}`: {}", t.name, e.message)))?;
    let body = serde_json::to_string_pretty(&v)
        .map_err(|e| Refusal::new(Code::InternalError, e.to_string()))?;
    let name = serde_json::to_string(&t.name)
        .map_err(|e| Refusal::new(Code::InternalError, e.to_string()))?;
    let pad = " ".repeat(indent);
    let body = body.replace('\n', &format!("\n{pad}"));
    Ok(format!("{pad}{name}: {body}"))
}

fn json_tools_edit(
    text: &str,
    nodes: &[Node],
    tools: &Node,
    new: &[InitTool],
) -> Result<Edit, Refusal> {
    let last = children_of(nodes, tools).last();
    let indent = match last.and_then(|n| n.key) {
        Some(k) if k.line != tools.start.line => k.col - 1,
        _ => indent_of_line(text, tools.start.byte) + 2,
    };
    let mut entries = Vec::new();
    for t in new {
        entries.push(json_entry(t, indent)?);
    }
    let joined = entries.join(",\n");
    match last {
        Some(n) => Ok(Edit {
            at: n.end.byte,
            remove: 0,
            insert: format!(",\n{joined}"),
        }),
        None => {
            let close = indent_of_line(text, tools.start.byte);
            Ok(Edit {
                at: tools.start.byte,
                remove: tools.end.byte - tools.start.byte,
                insert: format!("{{\n{joined}\n{}}}", " ".repeat(close)),
            })
        }
    }
}

fn allow_edit(
    file: &str,
    text: &str,
    format: Format,
    nodes: &[Node],
    role: &str,
    added: &[String],
) -> Result<Edit, Refusal> {
    let Some(allow) = outline::find(nodes, &["roles", role, "allow"]) else {
        let at = outline::find(nodes, &["roles", role])
            .or_else(|| outline::find(nodes, &["roles"]))
            .map_or_else(Pos::default, |n| n.key.unwrap_or(n.start));
        return Err(unsupported(
            file,
            Pos {
                line: at.line.max(1),
                col: at.col.max(1),
                ..at
            },
            &format!("role `{role}` has no `allow` list to add the new tools to"),
            &format!(
                "add `allow: []` under `roles.{role}` (or leave out `--role` and allow the tools by hand), then merge again"
            ),
        ));
    };
    if allow.kind != NodeKind::Seq {
        return Err(unsupported(
            file,
            allow.start,
            &format!("`roles.{role}.allow` is not a list"),
            "write `allow` as a list of tool names",
        ));
    }
    let items: Vec<&Node> = children_of(nodes, allow).collect();
    let quoted = |n: &str| -> Result<String, Refusal> {
        match format {
            Format::Json => serde_json::to_string(n)
                .map_err(|e| Refusal::new(Code::InternalError, e.to_string())),
            // Tool names are `[A-Za-z_][A-Za-z0-9_.-]*`: plain YAML scalars, but for the
            // words YAML 1.1 reads as something else.
            Format::Yaml => Ok(yaml_name(n)),
        }
    };
    let names = added
        .iter()
        .map(|n| quoted(n))
        .collect::<Result<Vec<_>, _>>()?;
    if allow.flow {
        let at = match items.last() {
            Some(n) => n.end.byte,
            None => allow.start.byte + 1,
        };
        let sep = if items.is_empty() { "" } else { ", " };
        return Ok(Edit {
            at,
            remove: 0,
            insert: format!("{sep}{}", names.join(", ")),
        });
    }
    // A block sequence: `- NAME` lines after its last item, at its dash's column.
    let last = items.last().map_or(allow.start, |n| n.start);
    let line_start = text[..last.byte].rfind('\n').map_or(0, |i| i + 1);
    let dash_col = text[line_start..last.byte].rfind('-').map_or_else(
        || indent_of_line(text, last.byte),
        |d| text[line_start..line_start + d].chars().count(),
    );
    let pad = " ".repeat(dash_col);
    let lines: Vec<String> = names.iter().map(|n| format!("{pad}- {n}")).collect();
    Ok(after_block(text, allow, &lines.join("\n")))
}

/// A tool name as a YAML scalar: plain, unless YAML 1.1 would read it as a boolean or
/// null.
fn yaml_name(n: &str) -> String {
    let lower = n.to_ascii_lowercase();
    if matches!(
        lower.as_str(),
        "yes" | "no" | "on" | "off" | "y" | "n" | "true" | "false" | "null" | "~"
    ) {
        format!("\"{n}\"")
    } else {
        n.to_owned()
    }
}
