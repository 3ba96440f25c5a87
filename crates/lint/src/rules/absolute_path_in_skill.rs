//! `absolute_path_in_skill` (warning): a host-absolute path in `HARNESS.md`.
//!
//! ## What it does
//! Finds path-like words in `HARNESS.md` that start at the root of one machine: `/` with
//! at least two segments (`/usr/local/bin/transit`, `/home/ana/x`), `~/…`, or a Windows
//! drive (`C:\…`). URLs are not paths.
//!
//! ## Why is this bad?
//! A pack moves unchanged between runtimes and machines. A skill that
//! tells the agent to run `/home/ana/bin/transit` works for Ana only; teach the `hcp exec`
//! form or the bare CLI name instead ("host-absolute paths in this Skill" is a listed
//! anti-pattern).
//!
//! ## Example
//! ```md
//! | `find` | `/Users/ana/bin/transit find "Central" --json` |
//! ```

use crate::context::{Ctx, tick};
use crate::diagnostic::Diagnostic;

/// The rule's code.
pub(crate) const CODE: hcp_model::Code = hcp_model::Code::AbsolutePathInSkill;

const STARTS: &[char] = &['`', '\'', '"', '(', '<', '[', '=', ':', ','];
const ENDS: &[char] = &['`', '\'', '"', ')', '>', ']', ',', ';', '|'];

/// Host-absolute paths in `line`: `(byte offset, path)`.
fn find(line: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut prev: Option<char> = None;
    for (i, c) in line.char_indices() {
        let at_boundary = prev.is_none_or(|p| p.is_whitespace() || STARTS.contains(&p));
        prev = Some(c);
        if !at_boundary {
            continue;
        }
        let rest = &line[i..];
        let unix = rest.starts_with('/') || rest.starts_with('~');
        let end = rest
            .find(|c: char| c.is_whitespace() || ENDS.contains(&c) || (unix && c == ':'))
            .unwrap_or(rest.len());
        let word = rest[..end].trim_end_matches(['.', ':']);
        let absolute = if let Some(after) = word.strip_prefix('/') {
            after.starts_with(|c: char| c.is_alphanumeric() || c == '_' || c == '.')
                && after.contains('/')
                && !after.starts_with('/')
        } else if let Some(after) = word.strip_prefix("~/") {
            !after.is_empty()
        } else {
            let b = word.as_bytes();
            b.len() > 3 && b[0].is_ascii_alphabetic() && b[1] == b':' && b[2] == b'\\'
        };
        if absolute {
            out.push((i, word));
        }
    }
    out
}

pub(crate) fn run(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let Some(skill) = &cx.skill else {
        return;
    };
    for (n, line) in skill.lines().enumerate() {
        for (offset, path) in find(line) {
            let column = line[..offset].chars().count() + 1;
            out.push(
                Diagnostic::warning(CODE,
                    format!("host-absolute path {} in the skill", tick(path)),
                )
                .in_file(hcp_model::SKILL_FILE)
                .at(n + 1, column)
                .hint(
                    "teach the bare CLI name or the `hcp exec` form; a pack moves between machines",
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::find;
    use pretty_assertions::assert_eq;

    #[test]
    fn finds_host_paths_not_urls() {
        let paths = |l| find(l).into_iter().map(|(_, p)| p).collect::<Vec<_>>();
        assert_eq!(
            paths("run `/usr/local/bin/transit find`"),
            vec!["/usr/local/bin/transit"]
        );
        assert_eq!(
            paths("see ~/notes/x.md, and C:\\tools\\t.exe."),
            vec!["~/notes/x.md", "C:\\tools\\t.exe"]
        );
        assert_eq!(
            paths("PATH=/opt/x/bin:/home/a/bin"),
            vec!["/opt/x/bin", "/home/a/bin"]
        );
        assert!(paths("https://example.com/a/b and a/b/c and /v1 and and/or").is_empty());
        assert_eq!(find("é /tmp/x/y")[0].0, 3);
    }
}
