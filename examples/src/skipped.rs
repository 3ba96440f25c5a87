//! The skipped tests of one `cargo test` run, counted: each test that skips (its tool or
//! server is missing) says `skipped: TEST: REASON` on stderr and also appends one line to
//! a file beside the test binaries, `target/<triple>/<profile>/hcp-skipped.tsv`; the
//! last test binary of the workspace (`xtask`'s) and `cargo xtask test` print the run's
//! total as one line, `N skipped: REASON: TEST, …`.
//!
//! A line is `RUN\tTEST\tREASON`, where RUN is the parent process of the test binary: the
//! `cargo test` that runs every binary of the run, so lines of earlier runs (or of a single
//! binary run by hand) are not counted. One `write(2)` of a line under `O_APPEND`, so the
//! binaries of one run, which may run at the same time, never tear each other's lines.

use std::io::Write;
use std::path::PathBuf;

/// How many tests of one reason the summary names; the rest are counted.
pub const NAMED: usize = 3;

/// The file's name, in the profile directory of the test binaries.
pub const FILE: &str = "hcp-skipped.tsv";

/// The file of this profile: `target/<triple>/<profile>/hcp-skipped.tsv`, found from the
/// running executable (`…/<profile>/deps/NAME-HASH` for a test, `…/<profile>/NAME` for a
/// binary). `None` when the executable's path cannot be read.
pub fn file() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    let profile = if dir.file_name().is_some_and(|n| n == "deps") {
        dir.parent()?
    } else {
        dir
    };
    Some(profile.join(FILE))
}

/// The run this process belongs to: its parent's pid (the `cargo test` or `cargo xtask
/// test` that started it).
pub fn run_id() -> u32 {
    // SAFETY: getppid has no preconditions and cannot fail.
    let id = unsafe { libc::getppid() };
    u32::try_from(id).unwrap_or(0)
}

/// Records that `test` was skipped because of `reason` (tabs and newlines become spaces).
/// Best effort: a file that cannot be written loses the line, never the test.
pub fn record(test: &str, reason: &str) {
    let Some(path) = file() else {
        return;
    };
    let flat = |s: &str| s.replace(['\t', '\n', '\r'], " ");
    let line = format!("{}\t{}\t{}\n", run_id(), flat(test), flat(reason));
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
    {
        let _ = f.write_all(line.as_bytes());
    }
}

/// The skips recorded by run `run`: (test, reason), in the order they were written.
pub fn of_run(run: u32) -> Vec<(String, String)> {
    let Some(text) = file().and_then(|p| std::fs::read_to_string(p).ok()) else {
        return Vec::new();
    };
    parse(&text, run)
}

fn parse(text: &str, run: u32) -> Vec<(String, String)> {
    let run = run.to_string();
    text.lines()
        .filter_map(|l| {
            let mut parts = l.splitn(3, '\t');
            let (r, t, why) = (parts.next()?, parts.next()?, parts.next()?);
            (r == run).then(|| (t.to_owned(), why.to_owned()))
        })
        .collect()
}

/// The one summary line of `skips`: `N skipped: REASON: TEST, TEST; REASON: TEST`, the
/// tests grouped by reason in the order first seen, each reason named once, or `0
/// skipped`. A reason shared by more than [`NAMED`] tests names the first of them and
/// counts the rest (`REASON: T1, T2, T3 and 110 more`): each test's own `skipped:` line
/// is above it.
pub fn summary(skips: &[(String, String)]) -> String {
    if skips.is_empty() {
        return "0 skipped".to_owned();
    }
    let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
    for (t, why) in skips {
        match groups.iter_mut().find(|(w, _)| *w == why.as_str()) {
            Some((_, tests)) => tests.push(t),
            None => groups.push((why, vec![t])),
        }
    }
    let items: Vec<String> = groups
        .iter()
        .map(|(why, tests)| {
            if tests.len() > NAMED {
                let more = tests.len() - NAMED;
                format!("{why}: {} and {more} more", tests[..NAMED].join(", "))
            } else {
                format!("{why}: {}", tests.join(", "))
            }
        })
        .collect();
    format!("{} skipped: {}", skips.len(), items.join("; "))
}

/// Prints the summary of this process's run where a plain `cargo test` shows it (the
/// process's standard error, which the test harness does not capture), and drops the
/// lines of other runs from the file, so it does not grow. For the last test of a run.
pub fn print_summary_of_this_run() {
    let run = run_id();
    let skips = of_run(run);
    let _ = writeln!(std::io::stderr().lock(), "\n{}", summary(&skips));
    let Some(path) = file() else {
        return;
    };
    let kept: String = std::fs::read_to_string(&path)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.split('\t').next() == Some(run.to_string().as_str()))
        .map(|l| format!("{l}\n"))
        .collect();
    let tmp = path.with_extension("tsv.tmp");
    if std::fs::write(&tmp, kept).is_ok() {
        let _ = std::fs::rename(&tmp, &path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_of_other_runs_are_not_counted() {
        let text = "7\ta::b\tno psql\n8\tc\tother run\n7\td\tno node\nbroken line\n";
        let skips = parse(text, 7);
        assert_eq!(
            skips,
            vec![
                ("a::b".to_owned(), "no psql".to_owned()),
                ("d".to_owned(), "no node".to_owned())
            ]
        );
        assert_eq!(summary(&skips), "2 skipped: no psql: a::b; no node: d");
        let same = [
            ("t1".to_owned(), "no server".to_owned()),
            ("t2".to_owned(), "no node".to_owned()),
            ("t3".to_owned(), "no server".to_owned()),
        ];
        assert_eq!(summary(&same), "3 skipped: no server: t1, t3; no node: t2");
        assert_eq!(summary(&[]), "0 skipped");
    }

    #[test]
    fn a_reason_of_many_tests_is_named_once_and_its_tests_counted() {
        let mut skips: Vec<(String, String)> = (1..=113)
            .map(|i| {
                (
                    format!("t{i}"),
                    "`nobody` cannot reach the checkout".to_owned(),
                )
            })
            .collect();
        skips.push(("u".to_owned(), "no node".to_owned()));
        let line = summary(&skips);
        assert_eq!(
            line,
            "114 skipped: `nobody` cannot reach the checkout: t1, t2, t3 and 110 more; no node: u"
        );
        assert_eq!(line.matches("cannot reach").count(), 1);
    }

    #[test]
    fn the_file_is_beside_the_test_binaries() {
        let f = file().unwrap_or_default();
        assert!(f.ends_with(FILE), "{}", f.display());
        assert!(
            !f.parent().is_some_and(|p| p.ends_with("deps")),
            "{}",
            f.display()
        );
    }
}
