//! `code_running_cli` (warning): the program is a CLI known to run commands named in its
//! arguments or its input.
//!
//! ## What it does
//! Takes the basename of each program the pack runs (as `exec_wrapper_bin` does: `wrap.bin`,
//! or each composite verb's and trigger's `cli[0]`, lowercased, without a version suffix)
//! and warns when it is one of:
//!
//! - database shells with a shell escape: `sqlite3` (`.shell`, `.system`), `duckdb`,
//!   `psql` (`\!`), `mysql`, `mariadb`;
//! - programs with a command option or action: `find` (`-exec`, `-ok`), `tar`
//!   (`--to-command`, `--use-compress-program`, `--checkpoint-action`), `rsync` (`-e`),
//!   `zip` (`--unzip-command`), `sed` (`e`), `make`, `gnuplot` (`system`), `dc` (`!`),
//!   `ed` (`!`);
//! - pagers and editors, which run a shell on a keystroke: `less`, `more`, `most`,
//!   `man`, `vi`, `vim`, `nvim`, `ex`, `view`, `emacs`, `nano`;
//! - `git` when a template passes `-c` (a configuration value such as `core.pager`,
//!   `core.sshCommand` or an alias starting with `!` is a command) or `--config-env`.
//!
//! Programs `exec_wrapper_bin` already refuses (shells, `awk`, `env` …) are not repeated.
//!
//! ## Why is this bad?
//! Every argument still reaches the program as one argv element, but such a program can
//! be told, through an argument value or what it reads, to start another one: a `query`
//! verb of `sqlite3` given `.shell …` runs a shell. This warning is defence in depth, not
//! the boundary: every call's child is confined by the kernel in every land (RUNTIME §5),
//! so what such a command starts is confined the same way and never reaches the owner
//! (RUNTIME §4, `nested_call`). Prefer a CLI without an escape, pin its options so that
//! no argument can reach the escape (`sqlite3 -safe`, `find` without `{{…}}` expressions),
//! or accept the warning knowingly.
//!
//! ## Example
//! ```json
//! "wrap": { "bin": "sqlite3" },
//! "verbs": { "query": { "description": "Run a query.", "cli": ["sqlite3", "-readonly", ":memory:", "{{sql}}"] } }
//! ```

use crate::context::{Ctx, in_manifest, in_manifest_at, tick, written};
use crate::diagnostic::Diagnostic;
use crate::rules::exec_wrapper_bin::{ALWAYS, normalize};
use hcp_model::Kind;

/// The rule's code.
pub(crate) const CODE: hcp_model::Code = hcp_model::Code::CodeRunningCli;

/// Programs that can run commands whatever the template.
const RUNS_COMMANDS: &[&str] = &[
    "sqlite", "duckdb", "psql", "mysql", "mariadb", "find", "tar", "rsync", "zip", "sed",
    "make", "gmake", "gnuplot", "dc", "ed", "less", "more", "most", "man", "vi", "vim", "nvim",
    "ex", "view", "emacs", "nano",
];

/// Why `program`, run with `templates`, may run commands; `None` when it is not known to.
fn reason(program: &str, templates: &[&[String]]) -> Option<String> {
    let name = normalize(program);
    if ALWAYS.contains(&name.as_str()) {
        return None;
    }
    if RUNS_COMMANDS.contains(&name.as_str()) {
        return Some(format!(
            "program {} can run commands named in its arguments or input",
            tick(program)
        ));
    }
    if name == "git" {
        let configures = templates.iter().any(|t| {
            t.iter().any(|e| {
                e == "-c" || e.starts_with("--config-env") || (e.starts_with("-c") && e.contains("{{"))
            })
        });
        if configures {
            return Some(format!(
                "program {} is given `-c`: a configuration value (`core.pager`, `core.sshCommand`, an alias) can be a command",
                tick(program)
            ));
        }
    }
    None
}

const HINT: &str = "defence in depth only: the kernel confines what it starts (RUNTIME §5); prefer a CLI without a command escape, or pin the options that reach it";

pub(crate) fn run(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let Some((m, text)) = cx.manifest() else {
        return;
    };
    let all = written(m);
    match m.kind {
        Kind::Wrap => {
            let Some(wrap) = &m.wrap else { return };
            let templates: Vec<&[String]> = all
                .iter()
                .map(|w| {
                    if w.has_program {
                        w.elements.get(1..).unwrap_or(&[])
                    } else {
                        w.elements
                    }
                })
                .collect();
            if let Some(why) = reason(&wrap.bin, &templates) {
                out.push(
                    in_manifest(
                        Diagnostic::warning(CODE, why),
                        text,
                        &["wrap", "bin"],
                    )
                    .hint(HINT),
                );
            }
        }
        Kind::Composite => {
            for w in all.iter().filter(|w| w.has_program) {
                let Some(program) = w.elements.first() else {
                    continue;
                };
                let rest = w.elements.get(1..).unwrap_or(&[]);
                if let Some(why) = reason(program, &[rest]) {
                    out.push(
                        in_manifest_at(
                            Diagnostic::warning(CODE, format!("{}: {why}", w.owner)),
                            text,
                            &w.element_path(0),
                        )
                        .hint(HINT),
                    );
                }
            }
        }
        Kind::Openapi => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| (*x).to_owned()).collect()
    }

    #[test]
    fn known_programs_warn_and_git_only_with_dash_c() {
        assert!(reason("/usr/bin/sqlite3", &[]).is_some());
        assert!(reason("find", &[]).is_some());
        assert!(reason("vim", &[]).is_some());
        let plain = s(&["status", "--porcelain"]);
        assert!(reason("git", &[&plain]).is_none());
        let dash_c = s(&["-c", "core.pager=cat", "log"]);
        assert!(reason("git", &[&plain, &dash_c]).is_some());
        // Already an error of `exec_wrapper_bin`: not repeated.
        assert!(reason("awk", &[]).is_none());
        assert!(reason("hcp-example-transit", &[]).is_none());
    }
}
