//! `hcp-example-probe`: a CLI for testing the runtime's adapter, not a gold pack's bin.
//!
//! ```text
//! probe env                 print the environment as one JSON object
//! probe argv ARG…           print the arguments after `argv` as a JSON array, as received
//! probe cwd                 print {"cwd": …}
//! probe fds                 print {"fds": [N, …]}, the open descriptors below 4096
//! probe stdin               read stdin to its end and print {"bytes": N}
//! probe sleep SECS          sleep (decimal seconds, at most three decimals), then print {"slept": SECS}
//! probe spew                print numbered lines until stdout breaks
//! probe fork-hold [SECS]    start a grandchild holding stdout and stderr open for SECS
//!                           (default 300), print {"grandchild": PID}, and exit 0 at once
//! probe write PATH TEXT     write TEXT to PATH, print {"written": PATH, "bytes": N}
//! probe fill PATH           write zeros to PATH until its disk is full, print
//!                           {"filled": PATH, "bytes": N} (the disk being full is no error)
//! probe read PATH           print PATH's bytes as they are
//! probe exit N              exit with status N (0 to 255), printing nothing
//! probe big N [--stderr]    print exactly N bytes of `x` (to stderr with --stderr)
//! probe try COMMAND …       a hostile attempt (`hcp_examples::hostile`): `ok …` or
//!                           `denied ERRNO`, exit 0 or 1
//! ```
//!
//! No option parsing beyond what each subcommand says: `argv` echoes everything verbatim.

use hcp_examples::{Failure, Opt, Outcome, out_json, out_line, parse_args, parse_count, run};
use serde_json::json;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

const USAGE: &str = "usage: probe env | argv ARG... | cwd | stdin | sleep SECS | spew
       | fork-hold [SECS] | write PATH TEXT | fill PATH | read PATH | exit N
       | big N [--stderr] | try COMMAND...";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    // `try …` prints its own line and sets its own status.
    if let Some((cmd, rest)) = args.split_first()
        && cmd == "try"
    {
        let Some((what, rest)) = rest.split_first() else {
            return run(USAGE, |_| Err(Failure::usage("try takes a COMMAND")));
        };
        return match hcp_examples::hostile::dispatch(what, rest) {
            Some(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
            None => run(USAGE, |_| {
                Err(Failure::usage(format!("unknown hostile command `{what}`")))
            }),
        };
    }
    // `exit N` must control the status itself, so it is handled before `run`.
    if let [cmd, n] = args.as_slice()
        && cmd == "exit"
    {
        return match parse_count(n, "status")
            .ok()
            .and_then(|n| u8::try_from(n).ok())
        {
            Some(code) => ExitCode::from(code),
            None => run(USAGE, |_| {
                Err(Failure::usage(format!("status `{n}` is not 0 to 255")))
            }),
        };
    }
    run(USAGE, |_| dispatch(&args))
}

fn dispatch(args: &[String]) -> Outcome {
    let Some((cmd, rest)) = args.split_first() else {
        return Err(Failure::usage("missing command"));
    };
    match cmd.as_str() {
        "env" => env(rest),
        "argv" => out_json(&json!(rest)),
        "cwd" => cwd(rest),
        "fds" => fds(rest),
        "stdin" => stdin(rest),
        "sleep" => sleep(rest),
        "spew" => spew(rest),
        "fork-hold" => fork_hold(rest),
        "write" => write(rest),
        "fill" => fill(rest),
        "read" => read(rest),
        "exit" => Err(Failure::usage("exit takes one status, 0 to 255")),
        "big" => big(rest),
        "help" | "--help" => out_line(USAGE),
        other => Err(Failure::usage(format!("unknown command `{other}`"))),
    }
}

fn no_args(args: &[String]) -> Outcome {
    match args.first() {
        Some(extra) => Err(Failure::usage(format!("unexpected argument `{extra}`"))),
        None => Ok(()),
    }
}

fn env(args: &[String]) -> Outcome {
    no_args(args)?;
    let vars: BTreeMap<String, String> = std::env::vars_os()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect();
    out_json(&json!(vars))
}

fn cwd(args: &[String]) -> Outcome {
    no_args(args)?;
    let cwd = std::env::current_dir()
        .map_err(|e| Failure::io("cannot read the working directory", &e))?;
    out_json(&json!({ "cwd": cwd.to_string_lossy() }))
}

fn fds(args: &[String]) -> Outcome {
    no_args(args)?;
    // `fcntl(F_GETFD)` on each number below 4096, not a listing of /proc/self/fd, which
    // a Landlock-confined child cannot read.
    let fds: Vec<i32> = (0..4096)
        // SAFETY: F_GETFD takes integers only; -1 (EBADF) for a number that is not open.
        .filter(|&fd| unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0)
        .collect();
    out_json(&json!({ "fds": fds }))
}

fn stdin(args: &[String]) -> Outcome {
    no_args(args)?;
    let mut buf = Vec::new();
    std::io::stdin()
        .read_to_end(&mut buf)
        .map_err(|e| Failure::io("cannot read stdin", &e))?;
    out_json(&json!({ "bytes": buf.len() }))
}

/// Parses decimal seconds (`2`, `0.25`) into milliseconds.
fn parse_secs(text: &str) -> Result<u64, Failure> {
    let (int, frac) = text.split_once('.').unwrap_or((text, ""));
    let bad = || Failure::usage(format!("`{text}` is not seconds like `2` or `0.25`"));
    if frac.len() > 3 || (text.contains('.') && frac.is_empty()) {
        return Err(bad());
    }
    let whole = parse_count(int, "seconds").map_err(|_| bad())?;
    let mut ms = 0u64;
    for (i, b) in frac.bytes().enumerate() {
        if !b.is_ascii_digit() {
            return Err(bad());
        }
        ms += u64::from(b - b'0') * [100, 10, 1][i];
    }
    whole
        .checked_mul(1000)
        .and_then(|w| w.checked_add(ms))
        .ok_or_else(bad)
}

fn sleep(args: &[String]) -> Outcome {
    let [secs] = args else {
        return Err(Failure::usage("sleep takes one argument, SECS"));
    };
    let ms = parse_secs(secs)?;
    std::thread::sleep(Duration::from_millis(ms));
    out_json(&json!({ "slept": secs }))
}

fn spew(args: &[String]) -> Outcome {
    no_args(args)?;
    let mut out = std::io::stdout().lock();
    let mut n: u64 = 0;
    loop {
        writeln!(
            out,
            "spew {n} xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
        )
        .map_err(|e| Failure::io("stdout closed", &e))?;
        n = n.wrapping_add(1);
    }
}

fn fork_hold(args: &[String]) -> Outcome {
    let secs = match args {
        [] => "300".to_owned(),
        [s] => {
            parse_secs(s)?;
            s.clone()
        }
        _ => return Err(Failure::usage("fork-hold takes at most one argument, SECS")),
    };
    let me = std::env::current_exe().map_err(|e| Failure::io("cannot find this program", &e))?;
    // stdout and stderr are inherited: the grandchild keeps the pipes open after we exit.
    let child = Command::new(me)
        .arg("sleep")
        .arg(&secs)
        .stdin(Stdio::null())
        .spawn()
        .map_err(|e| Failure::io("cannot start the grandchild", &e))?;
    out_json(&json!({ "grandchild": child.id() }))
}

fn write(args: &[String]) -> Outcome {
    let [path, text] = args else {
        return Err(Failure::usage("write takes two arguments, PATH and TEXT"));
    };
    std::fs::write(path, text.as_bytes())
        .map_err(|e| Failure::io(format!("cannot write `{path}`"), &e))?;
    out_json(&json!({ "written": path, "bytes": text.len() }))
}

fn fill(args: &[String]) -> Outcome {
    let [path] = args else {
        return Err(Failure::usage("fill takes one argument, PATH"));
    };
    let mut f = std::fs::File::create(path)
        .map_err(|e| Failure::io(format!("cannot create `{path}`"), &e))?;
    let block = [0u8; 4096];
    let mut bytes = 0u64;
    loop {
        match f.write(&block) {
            Ok(0) => break,
            Ok(n) => bytes += n as u64,
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
            Err(e) => return Err(Failure::io(format!("cannot write `{path}`"), &e)),
        }
    }
    // The last bytes of the disk, a page at a time did not take.
    while f.write(&[0u8]).is_ok_and(|n| n == 1) {
        bytes += 1;
    }
    out_json(&json!({ "filled": path, "bytes": bytes }))
}

fn read(args: &[String]) -> Outcome {
    let [path] = args else {
        return Err(Failure::usage("read takes one argument, PATH"));
    };
    let bytes =
        std::fs::read(path).map_err(|e| Failure::io(format!("cannot read `{path}`"), &e))?;
    let mut out = std::io::stdout().lock();
    out.write_all(&bytes)
        .and_then(|()| out.flush())
        .map_err(|e| Failure::io("cannot write to stdout", &e))
}

fn big(args: &[String]) -> Outcome {
    let p = parse_args(args, &[Opt::switch("stderr")])?;
    let [n] = p.exactly(&["bytes"])? else {
        return Err(Failure::usage("missing argument <bytes>"));
    };
    let mut left = parse_count(n, "bytes")?;
    let chunk = [b'x'; 8192];
    let mut sink: Box<dyn Write> = if p.has("stderr") {
        Box::new(std::io::stderr().lock())
    } else {
        Box::new(std::io::stdout().lock())
    };
    while left > 0 {
        let take = usize::try_from(left.min(chunk.len() as u64)).unwrap_or(chunk.len());
        sink.write_all(&chunk[..take])
            .map_err(|e| Failure::io("cannot write", &e))?;
        left -= take as u64;
    }
    sink.flush().map_err(|e| Failure::io("cannot write", &e))
}
