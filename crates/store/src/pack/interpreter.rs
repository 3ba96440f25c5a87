//! A script bin's interpreter, pinned at install with the bin (RUNTIME §5.1, "the pinned
//! bin": "Install pins a script bin's interpreter (its `#!` line, `env` resolved through
//! `PATH`) with the bin").
//!
//! The kernel runs a `#!` script by running its interpreter; `#!/usr/bin/env NAME` looks
//! `NAME` up in the `PATH` of whoever runs it. A call must run exactly what install pinned,
//! not what a `PATH` finds at call time, so install does what the kernel and `env` would do
//! and records the outcome ([`PinnedInterpreter`]): the files that run, each by path and
//! digest (the script's interpreter first; a script interpreter's own interpreter next, up
//! to the kernel's four levels; the program executed last), and the arguments that program
//! gets before the call's own. A call then executes the last file itself, through its
//! verified descriptor, with those arguments; `env` never runs.
//!
//! The line is read as the kernel reads it: the first 256 bytes, the interpreter up to the
//! first blank, the rest of the line (blanks trimmed) one argument. Of `env`'s options only
//! `-S` (`--split-string`, words split on blanks) is understood; any other option, quoting
//! or `$` in it, a relative interpreter, or a name `PATH` does not find cannot be pinned and
//! refuses the install (`bin_missing`), with the reason.

use super::PackError;
use super::bins::{BinLookup, hash_file};
use super::record::{PinnedFile, PinnedInterpreter};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Bytes of a file's start the kernel reads for its `#!` line (`BINPRM_BUF_SIZE`).
const HEAD_BYTES: usize = 256;

/// Scripts run by scripts at most (the kernel's `BINPRM_MAX_RECURSION`).
const MAX_LEVELS: usize = 4;

/// The interpreter of the script at `script` (absolute, resolved) when it starts with `#!`,
/// resolved and pinned (see the module docs); `None` for a file that is not a script.
/// `program` names the bin in errors; `lookup` is where `env` finds a name (the installing
/// process's `PATH`, as for a bare bin).
///
/// # Errors
/// [`PackError::BinMissing`] when the interpreter cannot be found, read or pinned.
pub fn pin_interpreter(
    program: &str,
    script: &Path,
    lookup: &BinLookup,
) -> Result<Option<PinnedInterpreter>, PackError> {
    let missing = |reason: String| PackError::BinMissing {
        program: program.to_owned(),
        reason,
    };
    let head = read_head(script).map_err(&missing)?;
    if !head.starts_with(b"#!") {
        return Ok(None);
    }
    let line = first_line(&head).ok_or_else(|| {
        missing(format!(
            "the `#!` line of `{}` is not UTF-8 or does not end within {HEAD_BYTES} bytes",
            script.display()
        ))
    })?;
    let placeholder = String::new();
    // What the program that runs gets before the call's own arguments; the first element
    // is the call's argv[0], which the kernel drops at the first level.
    let mut argv = vec![placeholder];
    let mut files = Vec::new();
    let mut called = utf8(script).map_err(&missing)?;
    let mut head = head;
    for _ in 0..MAX_LEVELS {
        let text = first_line(&head).ok_or_else(|| {
            missing(format!(
                "the `#!` line of `{called}` is not UTF-8 or does not end within {HEAD_BYTES} bytes"
            ))
        })?;
        let (words, file) = resolve(&text, lookup)
            .map_err(|r| missing(format!("{r} (the `#!` line of `{called}`)")))?;
        let rest = argv.split_off(1);
        argv = words;
        argv.push(called);
        argv.extend(rest);
        let path = utf8(&file).map_err(&missing)?;
        let sha256 = hash_file(&file).map_err(|r| missing(format!("its interpreter: {r}")))?;
        files.push(PinnedFile {
            path: file.clone(),
            sha256,
        });
        head = read_head(&file).map_err(&missing)?;
        if !head.starts_with(b"#!") {
            return Ok(Some(PinnedInterpreter { line, argv, files }));
        }
        called = path;
    }
    Err(missing(format!(
        "its interpreters nest more than {MAX_LEVELS} levels deep"
    )))
}

/// The words the interpreter of `#!` line `text` (after `#!`) runs with before the script's
/// path, and the file that runs them, resolved.
fn resolve(text: &str, lookup: &BinLookup) -> Result<(Vec<String>, PathBuf), String> {
    let text = text.trim_start_matches([' ', '\t']);
    let (name, arg) = match text.find([' ', '\t']) {
        Some(i) => (&text[..i], text[i..].trim_matches([' ', '\t'])),
        None => (text, ""),
    };
    if name.is_empty() {
        return Err("it names no interpreter".into());
    }
    let canon = |p: &Path| {
        std::fs::canonicalize(p).map_err(|e| format!("interpreter `{}`: {e}", p.display()))
    };
    if Path::new(name).file_name().is_some_and(|n| n == "env") {
        let words = env_words(arg)?;
        let found = if words[0].contains('/') {
            PathBuf::from(&words[0])
        } else {
            which::which_in(&words[0], lookup.path.as_ref(), &lookup.cwd)
                .map_err(|e| format!("`{}` is not found on `PATH`: {e}", words[0]))?
        };
        return Ok((words, canon(&found)?));
    }
    if !Path::new(name).is_absolute() {
        return Err(format!(
            "interpreter `{name}` is not an absolute path, which the kernel would look up in the caller's directory"
        ));
    }
    let mut words = vec![name.to_owned()];
    if !arg.is_empty() {
        words.push(arg.to_owned());
    }
    Ok((words, canon(Path::new(name))?))
}

/// The program and arguments `env` runs for its argument `arg` (one word, or `-S` and the
/// words it splits).
fn env_words(arg: &str) -> Result<Vec<String>, String> {
    let split = arg
        .strip_prefix("--split-string")
        .or_else(|| arg.strip_prefix("-S"));
    let words: Vec<String> = match split {
        Some(rest) => {
            let rest = rest.strip_prefix('=').unwrap_or(rest);
            if rest.contains(['\\', '$', '"', '\'']) {
                return Err(format!(
                    "`env -S` is given `{rest}`, whose quoting or variables hcp does not pin; name the interpreter's path in the `#!` line"
                ));
            }
            rest.split_whitespace().map(str::to_owned).collect()
        }
        None => vec![arg.to_owned()],
    };
    match words.first() {
        None => Err("`env` is given no program".into()),
        Some(w) if w.is_empty() => Err("`env` is given no program".into()),
        Some(w) if w.starts_with('-') => Err(format!(
            "`env` is given the option `{}`, which hcp does not pin; name the interpreter's path in the `#!` line",
            w.split_whitespace().next().unwrap_or(w)
        )),
        Some(w) if w.contains([' ', '\t']) => Err(format!(
            "`env` is given `{w}` as one name (without `-S` it does not split words)"
        )),
        Some(_) => Ok(words),
    }
}

/// The `#!` line of `head` without `#!` and the newline, when it is UTF-8 and ends within
/// the bytes the kernel reads.
fn first_line(head: &[u8]) -> Option<String> {
    let body = head.strip_prefix(b"#!")?;
    let end = body.iter().position(|b| *b == b'\n')?;
    let line = std::str::from_utf8(&body[..end]).ok()?;
    Some(line.trim_end_matches(['\r', ' ', '\t']).to_owned())
}

/// The first [`HEAD_BYTES`] of the file at `path`, opened without following a symlink at
/// its end.
fn read_head(path: &Path) -> Result<Vec<u8>, String> {
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| format!("cannot open `{}`: {e}", path.display()))?;
    let mut buf = vec![0u8; HEAD_BYTES];
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("cannot read `{}`: {e}", path.display())),
        }
    }
    buf.truncate(n);
    Ok(buf)
}

fn utf8(p: &Path) -> Result<String, String> {
    p.to_str().map(str::to_owned).ok_or_else(|| {
        format!(
            "the path `{}` is not UTF-8, so it cannot be pinned",
            p.display()
        )
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::os::unix::fs::PermissionsExt;

    fn exe(p: &Path, body: &str) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn lookup(path: &Path) -> BinLookup {
        BinLookup {
            path: Some(path.as_os_str().to_owned()),
            cwd: path.to_owned(),
        }
    }

    #[test]
    fn env_is_resolved_through_path_and_the_arguments_are_the_kernels() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path().canonicalize().unwrap();
        let sh = std::fs::canonicalize("/bin/sh").unwrap();
        std::fs::create_dir_all(r.join("bin")).unwrap();
        std::os::unix::fs::symlink(&sh, r.join("bin/myinterp")).unwrap();
        exe(&r.join("s1"), "#!/usr/bin/env myinterp\necho\n");
        let p = pin_interpreter("s1", &r.join("s1"), &lookup(&r.join("bin")))
            .unwrap()
            .unwrap();
        assert_eq!(p.argv, ["myinterp", r.join("s1").to_str().unwrap()]);
        assert_eq!(p.files.len(), 1);
        assert_eq!(p.files[0].path, sh);
        assert_eq!(p.line, "/usr/bin/env myinterp");
        exe(&r.join("s2"), "#!/usr/bin/env -S myinterp -e -u\n");
        let p = pin_interpreter("s2", &r.join("s2"), &lookup(&r.join("bin")))
            .unwrap()
            .unwrap();
        assert_eq!(
            p.argv,
            ["myinterp", "-e", "-u", r.join("s2").to_str().unwrap()]
        );
        exe(&r.join("s3"), "#!/bin/sh  -e -u  \n");
        let p = pin_interpreter("s3", &r.join("s3"), &BinLookup::default())
            .unwrap()
            .unwrap();
        assert_eq!(p.argv, ["/bin/sh", "-e -u", r.join("s3").to_str().unwrap()]);
        // A script interpreter: its own interpreter runs, with it as its script.
        exe(&r.join("bin/shim"), "#!/bin/sh\nexec \"$@\"\n");
        exe(&r.join("s4"), "#!/usr/bin/env shim\n");
        let p = pin_interpreter("s4", &r.join("s4"), &lookup(&r.join("bin")))
            .unwrap()
            .unwrap();
        assert_eq!(
            p.argv,
            [
                "/bin/sh",
                r.join("bin/shim").to_str().unwrap(),
                r.join("s4").to_str().unwrap()
            ]
        );
        let paths: Vec<&Path> = p.files.iter().map(|f| f.path.as_path()).collect();
        assert_eq!(paths, [r.join("bin/shim").as_path(), sh.as_path()]);
        // Not a script.
        std::fs::copy("/bin/true", r.join("elf")).unwrap();
        assert_eq!(
            pin_interpreter("elf", &r.join("elf"), &BinLookup::default()).unwrap(),
            None
        );
    }

    #[test]
    fn what_cannot_be_pinned_refuses_with_the_reason() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path().canonicalize().unwrap();
        for (body, says) in [
            (
                "#!/usr/bin/env nosuch-interpreter-x\n",
                "not found on `PATH`",
            ),
            ("#!/usr/bin/env -i sh\n", "option `-i`"),
            ("#!/usr/bin/env python3 -u\n", "as one name"),
            ("#!/usr/bin/env -S sh -c \"$X\"\n", "quoting or variables"),
            ("#!sh\n", "not an absolute path"),
            ("#!/no/such/interp\n", "/no/such/interp"),
            ("#!/usr/bin/env\n", "no program"),
        ] {
            exe(&r.join("s"), body);
            let e = pin_interpreter("s", &r.join("s"), &lookup(&r)).unwrap_err();
            assert_eq!(e.code(), "bin_missing", "{body}");
            assert!(e.to_string().contains(says), "{body}: {e}");
        }
        // Five levels of scripts.
        let mut prev = "/bin/sh".to_owned();
        for i in 0..5 {
            let p = r.join(format!("l{i}"));
            exe(&p, &format!("#!{prev}\n"));
            prev = p.display().to_string();
        }
        let e = pin_interpreter("l4", &r.join("l4"), &lookup(&r)).unwrap_err();
        assert!(e.to_string().contains("nest"), "{e}");
    }
}
