//! `hcp-example-echo`: the sandbox-safe CLI of the `echo` gold pack.
//!
//! It works only on its arguments and on plain file names in its current directory (the
//! sandbox working directory when hcp runs it in land `local`).
//!
//! ```text
//! echo say TEXT… [--json]            print the text (words joined by one space)
//! echo upper TEXT… [--json]          print it upper-cased
//! echo count [--json]                count files and directories in the current directory
//! echo write NAME TEXT --confirm [--json]   write NAME (not a dot file) in the current directory
//! echo read NAME [--json]            print the file NAME of the current directory
//! echo where [--json]                print the current directory and HOME
//! ```

use hcp_examples::{
    Failure, Opt, Outcome, is_plain_file_name, out_json, out_line, parse_args, run,
};
use serde_json::json;
use std::io::Write;
use std::process::ExitCode;

const USAGE: &str = "usage: echo say TEXT... [--json]
       echo upper TEXT... [--json]
       echo count [--json]
       echo write NAME TEXT --confirm [--json]
       echo read NAME [--json]
       echo where [--json]";

/// The largest file `read` prints and `write` writes, bytes.
const MAX_FILE: u64 = 1 << 20;

fn main() -> ExitCode {
    run(USAGE, dispatch)
}

fn dispatch(args: Vec<String>) -> Outcome {
    let Some((cmd, rest)) = args.split_first() else {
        return Err(Failure::usage("missing command"));
    };
    match cmd.as_str() {
        "say" => say(rest, false),
        "upper" => say(rest, true),
        "count" => count(rest),
        "write" => write(rest),
        "read" => read(rest),
        "where" => where_(rest),
        "help" | "--help" => out_line(USAGE),
        other => Err(Failure::usage(format!("unknown command `{other}`"))),
    }
}

fn say(args: &[String], upper: bool) -> Outcome {
    let p = parse_args(args, &[Opt::switch("json")])?;
    if p.positionals.is_empty() {
        return Err(Failure::usage("missing argument <text>"));
    }
    let text = p.positionals.join(" ");
    let text = if upper { text.to_uppercase() } else { text };
    if p.json() {
        out_json(&json!({ "text": text }))
    } else {
        out_line(&text)
    }
}

fn checked_name(name: &str) -> Result<&str, Failure> {
    if is_plain_file_name(name) {
        Ok(name)
    } else {
        Err(Failure::fail(format!(
            "`{name}` is not a plain file name in the working directory"
        )))
    }
}

fn count(args: &[String]) -> Outcome {
    let p = parse_args(args, &[Opt::switch("json")])?;
    p.exactly(&[])?;
    let entries =
        std::fs::read_dir(".").map_err(|e| Failure::io("cannot list the working directory", &e))?;
    let (mut files, mut dirs, mut other) = (0u64, 0u64, 0u64);
    for entry in entries {
        let entry = entry.map_err(|e| Failure::io("cannot list the working directory", &e))?;
        let ty = entry
            .file_type()
            .map_err(|e| Failure::io("cannot read an entry's type", &e))?;
        if ty.is_file() {
            files += 1;
        } else if ty.is_dir() {
            dirs += 1;
        } else {
            other += 1;
        }
    }
    if p.json() {
        out_json(&json!({ "files": files, "dirs": dirs, "other": other }))
    } else {
        out_line(&format!("{files} files, {dirs} directories, {other} other"))
    }
}

fn write(args: &[String]) -> Outcome {
    let p = parse_args(args, &[Opt::switch("json"), Opt::switch("confirm")])?;
    let [name, text] = p.exactly(&["name", "text"])? else {
        return Err(Failure::usage("missing argument <text>"));
    };
    let name = checked_name(name)?;
    if name.starts_with('.') {
        // Dot files (`.gitconfig`, `.gitattributes`, `.profile`) steer other programs
        // that may run in the same working directory.
        return Err(Failure::fail(format!(
            "`{name}` is a dot file; echo writes only visible files"
        )));
    }
    if !p.has("confirm") {
        return Err(Failure::refused(format!(
            "refusing to write `{name}` without --confirm"
        )));
    }
    if text.len() as u64 > MAX_FILE {
        return Err(Failure::fail(format!(
            "the text is larger than {MAX_FILE} bytes"
        )));
    }
    // Write a temporary sibling and rename it over the target: a reader never sees half a
    // file, and a symlink named NAME is replaced, never followed.
    let tmp = format!(".{name}.{}.tmp", std::process::id());
    let result = std::fs::File::create_new(&tmp)
        .and_then(|mut f| {
            f.write_all(text.as_bytes())?;
            f.sync_all()
        })
        .and_then(|()| std::fs::rename(&tmp, name));
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(Failure::io(format!("cannot write `{name}`"), &e));
    }
    if p.json() {
        out_json(&json!({ "written": name, "bytes": text.len() }))
    } else {
        out_line(&format!("wrote {} bytes to {name}", text.len()))
    }
}

fn read(args: &[String]) -> Outcome {
    let p = parse_args(args, &[Opt::switch("json")])?;
    let [name] = p.exactly(&["name"])? else {
        return Err(Failure::usage("missing argument <name>"));
    };
    let name = checked_name(name)?;
    let meta =
        std::fs::metadata(name).map_err(|e| Failure::io(format!("cannot read `{name}`"), &e))?;
    if !meta.is_file() {
        return Err(Failure::fail(format!("`{name}` is not a regular file")));
    }
    if meta.len() > MAX_FILE {
        return Err(Failure::fail(format!(
            "`{name}` is larger than {MAX_FILE} bytes"
        )));
    }
    let bytes =
        std::fs::read(name).map_err(|e| Failure::io(format!("cannot read `{name}`"), &e))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| Failure::fail(format!("`{name}` is not utf-8 text")))?;
    if p.json() {
        out_json(&json!({ "name": name, "text": text }))
    } else {
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .map_err(|e| Failure::io("cannot write to stdout", &e))
    }
}

fn where_(args: &[String]) -> Outcome {
    let p = parse_args(args, &[Opt::switch("json")])?;
    p.exactly(&[])?;
    let cwd = std::env::current_dir()
        .map_err(|e| Failure::io("cannot read the working directory", &e))?;
    let cwd = cwd.to_string_lossy().into_owned();
    let home = std::env::var("HOME").ok();
    if p.json() {
        out_json(&json!({ "cwd": cwd, "home": home }))
    } else {
        out_line(&format!("cwd: {cwd}"))?;
        out_line(&format!("home: {}", home.as_deref().unwrap_or("(unset)")))
    }
}
