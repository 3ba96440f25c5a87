//! `exec_wrapper_bin` (error): the program is a shell or runs its arguments as a command.
//!
//! ## What it does
//! Takes the basename of each program the pack runs — `wrap.bin` for a `wrap` pack, each
//! verb's and trigger's `cli[0]` for a `composite` pack — lowercases it, drops a version
//! suffix (`python3.12` → `python`, `ksh93` → `ksh`) and reports it when it is:
//!
//! - a shell: `sh`, `bash`, `dash`, `zsh`, `fish`, `ksh`, `mksh`, `ash`, `csh`, `tcsh`,
//!   `yash`, `rc`, `nu`, `elvish`, `xonsh`, `pwsh`, `powershell`, `cmd`;
//! - a multi-call binary: `busybox`, `toybox`;
//! - a program that runs the rest of its argv as a command: `env`, `xargs`, `nice`,
//!   `ionice`, `chrt`, `taskset`, `numactl`, `nohup`, `timeout`, `time`, `sudo`, `doas`,
//!   `su`, `runuser`, `pkexec`, `ssh`, `exec`, `eval`, `command`, `builtin`, `strace`,
//!   `ltrace`, `gdb`, `valgrind`, `stdbuf`, `setsid`, `setpriv`, `chroot`, `unshare`,
//!   `nsenter`, `flock`, `watch`, `parallel`, `script`, `expect`, `systemd-run`,
//!   `firejail`, `bwrap`, `proot`, `fakeroot`, `setarch`, `linux32`, `linux64`;
//! - a language whose first argument is a program text: `awk`, `gawk`, `mawk`, `nawk`;
//! - an interpreter — `python`, `pypy`, `perl`, `ruby`, `node`, `nodejs`, `deno`, `bun`,
//!   `php`, `lua`, `luajit`, `tclsh`, `wish`, `rscript`, `osascript` — when a template
//!   element passes code on the command line (`-c`, `-e`, `-E`, `-r`, `-p`, `--eval`,
//!   `--print`, `--command`, `eval`) or the first template element, the script, is a
//!   placeholder.
//!
//! ## Why is this bad?
//! hcp never involves a shell: each argument reaches the program as one argv element, so
//! a value holding `;`, `$()` or a newline stays data. A program that
//! evaluates its arguments undoes that — `sh -c`, `env`, `xargs` or `sudo` turn argument
//! values back into code, and the gate's view of "one verb" no longer says what runs.
//!
//! ## Example
//! ```json
//! "wrap": { "bin": "/bin/sh", "argv_template": ["-c", "ledger {{verb}}"] }
//! ```
//! Name the CLI itself: `"wrap": { "bin": "ledger" }`.

use crate::context::{Ctx, program_findings, tick};
use crate::diagnostic::Diagnostic;

/// The rule's code.
pub(crate) const CODE: hcp_model::Code = hcp_model::Code::ExecWrapperBin;

/// Programs refused whatever their arguments.
pub(crate) const ALWAYS: &[&str] = &[
    "sh",
    "bash",
    "dash",
    "zsh",
    "fish",
    "ksh",
    "mksh",
    "pdksh",
    "ash",
    "csh",
    "tcsh",
    "yash",
    "rc",
    "nu",
    "elvish",
    "xonsh",
    "pwsh",
    "powershell",
    "cmd",
    "busybox",
    "toybox",
    "env",
    "xargs",
    "nice",
    "ionice",
    "chrt",
    "taskset",
    "numactl",
    "nohup",
    "timeout",
    "time",
    "sudo",
    "doas",
    "su",
    "runuser",
    "pkexec",
    "ssh",
    "exec",
    "eval",
    "command",
    "builtin",
    "strace",
    "ltrace",
    "gdb",
    "valgrind",
    "stdbuf",
    "setsid",
    "setpriv",
    "chroot",
    "unshare",
    "nsenter",
    "flock",
    "watch",
    "parallel",
    "script",
    "expect",
    "systemd-run",
    "firejail",
    "bwrap",
    "proot",
    "fakeroot",
    "setarch",
    "linux32",
    "linux64",
    "awk",
    "gawk",
    "mawk",
    "nawk",
];

/// Interpreters, refused when code comes from the command line.
const INTERPRETERS: &[&str] = &[
    "python",
    "pypy",
    "perl",
    "ruby",
    "node",
    "nodejs",
    "deno",
    "bun",
    "php",
    "lua",
    "luajit",
    "tclsh",
    "wish",
    "rscript",
    "osascript",
];

/// Flags and subcommands that make an interpreter run code from its argv.
const EVAL_FLAGS: &[&str] = &[
    "-c",
    "-e",
    "-E",
    "-r",
    "-p",
    "--eval",
    "--print",
    "--command",
    "eval",
];

/// The name a program is matched by: basename, lowercased, without a version suffix.
pub(crate) fn normalize(program: &str) -> String {
    let base = program.rsplit('/').next().unwrap_or(program).to_lowercase();
    let trimmed = base.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    let trimmed = trimmed.strip_suffix('-').unwrap_or(trimmed);
    if trimmed.is_empty() {
        base
    } else {
        trimmed.to_owned()
    }
}

fn is_eval_flag(el: &str) -> bool {
    EVAL_FLAGS.iter().any(|f| {
        el == *f || (f.starts_with("--") && el.strip_prefix(f).is_some_and(|r| r.starts_with('=')))
    }) || (el.len() > 2
        && el.starts_with('-')
        && !el.starts_with("--")
        && el[1..].chars().all(|c| c.is_ascii_alphabetic())
        && el[1..].contains(['c', 'e']))
}

/// Why `program`, run with `templates` (each the argv after the program), turns arguments
/// into code; `None` when it does not.
pub(crate) fn refusal(program: &str, templates: &[&[String]]) -> Option<String> {
    let name = normalize(program);
    if ALWAYS.contains(&name.as_str()) {
        return Some(format!(
            "program {} is a shell or runs its arguments as a command",
            tick(program)
        ));
    }
    if INTERPRETERS.contains(&name.as_str()) {
        for t in templates {
            if let Some(flag) = t.iter().find(|e| is_eval_flag(e)) {
                return Some(format!(
                    "program {} is an interpreter given code on the command line ({})",
                    tick(program),
                    tick(flag)
                ));
            }
            if t.first().is_some_and(|e| e.contains("{{")) {
                return Some(format!(
                    "program {} is an interpreter whose script is an argument",
                    tick(program)
                ));
            }
        }
    }
    None
}

const HINT: &str = "name the CLI itself as the program; hcp passes each argument as one argv element and never uses a shell (docs/packs.md)";

pub(crate) fn run(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    program_findings(cx, Diagnostic::error, CODE, HINT, refusal, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| (*x).to_owned()).collect()
    }

    #[test]
    fn names_are_matched_by_normalized_basename() {
        assert_eq!(normalize("/usr/bin/python3.12"), "python");
        assert_eq!(normalize("ksh93"), "ksh");
        assert_eq!(normalize("./bins/BASH"), "bash");
        assert_eq!(normalize("7z"), "7z");
        assert_eq!(normalize("hcp-example-transit"), "hcp-example-transit");
        for p in [
            "sh",
            "/bin/bash",
            "env",
            "/usr/bin/xargs",
            "busybox",
            "sudo",
            "ssh",
            "timeout",
        ] {
            assert!(refusal(p, &[]).is_some(), "{p}");
        }
        for p in ["transit", "ledger", "git", "shasum", "envsubst", "bashful"] {
            assert_eq!(refusal(p, &[]), None, "{p}");
        }
    }

    #[test]
    fn interpreters_only_with_code_from_argv() {
        let script = s(&["bins/tool.py", "{{q}}"]);
        assert_eq!(refusal("python3", &[&script]), None);
        for t in [
            s(&["-c", "print(1)"]),
            s(&["--eval={{code}}"]),
            s(&["-le", "print"]),
            s(&["{{script}}"]),
        ] {
            assert!(refusal("python3", &[&t]).is_some(), "{t:?}");
            assert!(refusal("node", &[&t]).is_some(), "{t:?}");
        }
    }
}
