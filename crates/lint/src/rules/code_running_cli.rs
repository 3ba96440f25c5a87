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
//! - `git` when a template passes `-c` with a value an argument fills (`-c {{cfg}}`,
//!   `-c{{cfg}}`: a configuration value such as `core.pager`, `core.sshCommand` or an alias
//!   starting with `!` is a command) or `--config-env`; a `-c` whose value the template
//!   writes out (`-c core.pager=cat`) is the author pinning git's configuration, which no
//!   argument reaches, so it is not warned of;
//! - an interpreter told to run something other than a script file of its template:
//!   `python3 -m MODULE`, `python3 -I -m MODULE` (`-Im`; a module such as `pdb`, `code`,
//!   `timeit` or `pip` runs code or commands named in its arguments), `node -e` / `-p`,
//!   `perl -e` / `-E`, `ruby -e`.
//!
//! Programs `exec_wrapper_bin` already refuses (shells, `awk`, `env`, an interpreter given
//! code on its command line: `node -e`, `perl -e`, `ruby -e` …) are not repeated.
//!
//! ## Why is this bad?
//! Every argument still reaches the program as one argv element, but such a program can
//! be told, through an argument value or what it reads, to start another one: a `query`
//! verb of `sqlite3` given `.shell …` runs a shell. This warning is defence in depth, not
//! the boundary: every call's child is confined by the kernel in every land,
//! so what such a command starts is confined the same way and never reaches the owner
//! (`nested_call`). Prefer a CLI without an escape, pin its options so that
//! no argument can reach the escape (`sqlite3 -safe`, `find` without `{{…}}` expressions),
//! or accept the warning knowingly.
//!
//! ## Example
//! ```json
//! "wrap": { "bin": "sqlite3" },
//! "verbs": { "query": { "description": "Run a query.", "cli": ["sqlite3", "-readonly", ":memory:", "{{sql}}"] } }
//! ```

use crate::context::{Ctx, program_findings, tick};
use crate::diagnostic::Diagnostic;
use crate::rules::exec_wrapper_bin::{ALWAYS, normalize, refusal};

/// The rule's code.
pub(crate) const CODE: hcp_model::Code = hcp_model::Code::CodeRunningCli;

/// Programs that can run commands whatever the template.
const RUNS_COMMANDS: &[&str] = &[
    "sqlite", "duckdb", "psql", "mysql", "mariadb", "find", "tar", "rsync", "zip", "sed",
    "make", "gmake", "gnuplot", "dc", "ed", "less", "more", "most", "man", "vi", "vim", "nvim",
    "ex", "view", "emacs", "nano",
];

/// Interpreters and the options that make each run code that is not a script file:
/// `(name, options)`. `-m` runs a module by name (Python).
const INTERPRETER_CODE: &[(&str, &[&str])] = &[
    ("python", &["-m", "-c"]),
    ("pypy", &["-m", "-c"]),
    ("node", &["-e", "-p", "--eval", "--print"]),
    ("nodejs", &["-e", "-p", "--eval", "--print"]),
    ("perl", &["-e", "-E"]),
    ("ruby", &["-e"]),
];

/// Python options that take the next element as their value (so it is not the script).
const PYTHON_VALUED: &[&str] = &["-W", "-X", "--check-hash-based-pycs"];

/// The option of `template` (the argv after the program) that makes interpreter `name` run
/// code other than a script file, if any: only the leading options count (what follows
/// the script or `--` is the script's own).
fn interpreter_code<'t>(name: &str, template: &'t [String]) -> Option<&'t str> {
    let (_, options) = INTERPRETER_CODE.iter().find(|(n, _)| *n == name)?;
    let mut it = template.iter();
    while let Some(el) = it.next() {
        if el == "--" || !el.starts_with('-') || el.contains("{{") {
            return None;
        }
        let long = el.starts_with("--");
        let hit = options.iter().any(|o| {
            el == o
                || (o.starts_with("--") && el.strip_prefix(o).is_some_and(|r| r.starts_with('=')))
                || (!long
                    && o.len() == 2
                    && el.len() > 2
                    && el[1..].chars().all(|c| c.is_ascii_alphabetic())
                    && el[1..].contains(&o[1..]))
        });
        if hit {
            return Some(el);
        }
        if PYTHON_VALUED.contains(&el.as_str()) && name.starts_with("py") {
            it.next();
        }
    }
    None
}

/// Why `program`, run with `templates`, may run commands; `None` when it is not known to.
fn reason(program: &str, templates: &[&[String]]) -> Option<String> {
    let name = normalize(program);
    if ALWAYS.contains(&name.as_str()) {
        return None;
    }
    if let Some(opt) = templates
        .iter()
        .find_map(|t| interpreter_code(&name, t))
    {
        return Some(format!(
            "program {} is an interpreter told to run code that is not a script file ({})",
            tick(program),
            tick(opt)
        ));
    }
    if RUNS_COMMANDS.contains(&name.as_str()) {
        return Some(format!(
            "program {} can run commands named in its arguments or input",
            tick(program)
        ));
    }
    if name == "git" {
        // A `-c` whose value an argument fills; a literal one pins the configuration.
        let configures = templates.iter().any(|t| {
            t.iter().enumerate().any(|(i, e)| {
                e.starts_with("--config-env")
                    || (e.starts_with("-c") && e.contains("{{"))
                    || (e == "-c" && t.get(i + 1).is_none_or(|v| v.contains("{{")))
            })
        });
        if configures {
            return Some(format!(
                "program {} is given `-c` with a value an argument fills: a configuration value (`core.pager`, `core.sshCommand`, an alias) can be a command",
                tick(program)
            ));
        }
    }
    None
}

const HINT: &str = "defence in depth only: the kernel confines what it starts; prefer a CLI without a command escape, or pin the options that reach it";

pub(crate) fn run(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    // What `exec_wrapper_bin` refuses is not repeated.
    let unless_refused = |program: &str, templates: &[&[String]]| {
        refusal(program, templates)
            .is_none()
            .then(|| reason(program, templates))
            .flatten()
    };
    program_findings(
        cx,
        Diagnostic::warning,
        CODE,
        HINT,
        unless_refused,
        out,
    );
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
        // a value the template writes out pins the configuration; one an argument fills
        // does not
        let pinned = s(&["-c", "core.pager=cat", "log"]);
        assert!(reason("git", &[&plain, &pinned]).is_none());
        for filled in [
            s(&["-c", "{{cfg}}", "log"]),
            s(&["-c{{cfg}}", "log"]),
            s(&["--config-env=core.pager=PAGER", "log"]),
            s(&["log", "-c"]),
        ] {
            assert!(reason("git", &[&plain, &filled]).is_some(), "{filled:?}");
        }
        // Already an error of `exec_wrapper_bin`: not repeated.
        assert!(reason("awk", &[]).is_none());
        assert!(reason("hcp-example-transit", &[]).is_none());
    }

    #[test]
    fn interpreters_running_a_module_or_code_warn() {
        for (program, t) in [
            ("python3", s(&["-m", "http.server"])),
            ("/usr/bin/python3.12", s(&["-I", "-m", "pydoc", "{{topic}}"])),
            ("python3", s(&["-Im", "timeit", "--", "{{stmt}}"])),
            ("python3", s(&["-W", "ignore", "-m", "json.tool"])),
            ("node", s(&["-e", "process.exit(0)"])),
            ("node", s(&["-p", "1"])),
            ("node", s(&["--eval=1"])),
            ("perl", s(&["-e", "print 1"])),
            ("perl", s(&["-le", "print 1"])),
            ("ruby", s(&["-e", "p 1"])),
        ] {
            assert!(reason(program, &[&t]).is_some(), "{program} {t:?}");
        }
        for (program, t) in [
            ("python3", s(&["bins/tool.py", "-m", "x"])),
            ("python3", s(&["-I", "tool.py"])),
            ("node", s(&["server.js", "-e"])),
            ("perl", s(&["--", "-e"])),
            ("ruby", s(&["-w", "script.rb"])),
        ] {
            assert!(reason(program, &[&t]).is_none(), "{program} {t:?}");
        }
    }
}
