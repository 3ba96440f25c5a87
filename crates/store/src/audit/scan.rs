//! Reading the audit file from its end, without reading the whole file.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};

/// Bytes read per step when scanning backwards.
const CHUNK: u64 = 4096;

/// Reads `len` bytes at `offset`.
pub(super) fn read_at(file: &File, offset: u64, len: u64) -> io::Result<Vec<u8>> {
    let mut f = file;
    f.seek(SeekFrom::Start(offset))?;
    let mut buf = vec![0u8; usize::try_from(len).map_err(io::Error::other)?];
    f.read_exact(&mut buf)?;
    Ok(buf)
}

/// The position of the last `\n` strictly before `before`, if any.
pub(super) fn rfind_newline(file: &File, before: u64) -> io::Result<Option<u64>> {
    let mut end = before;
    while end > 0 {
        let start = end.saturating_sub(CHUNK);
        let buf = read_at(file, start, end - start)?;
        if let Some(i) = buf.iter().rposition(|&b| b == b'\n') {
            return Ok(Some(start + i as u64));
        }
        end = start;
    }
    Ok(None)
}

/// The end of a file of `len` bytes as the appender sees it.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct End {
    /// The offset just after the last `\n` (0 when there is none): where complete lines
    /// end. Bytes from here to the end of the file are a torn tail.
    pub complete_end: u64,
    /// The last complete line (offset of its first byte, its bytes without `\n`).
    pub last: Option<(u64, Vec<u8>)>,
}

/// Finds the last complete line and any torn tail of a file of `len` bytes.
pub(super) fn end(file: &File, len: u64) -> io::Result<End> {
    let Some(nl) = rfind_newline(file, len)? else {
        return Ok(End {
            complete_end: 0,
            last: None,
        });
    };
    let start = rfind_newline(file, nl)?.map_or(0, |p| p + 1);
    Ok(End {
        complete_end: nl + 1,
        last: Some((start, read_at(file, start, nl - start)?)),
    })
}

/// The line that ends (with its `\n`) just before offset `end`: its start and bytes
/// without `\n`; `None` when the byte before `end` is not a `\n`.
pub(super) fn line_ending_at(file: &File, end: u64) -> io::Result<Option<(u64, Vec<u8>)>> {
    if end == 0 || read_at(file, end - 1, 1)? != b"\n" {
        return Ok(None);
    }
    let nl = end - 1;
    let start = rfind_newline(file, nl)?.map_or(0, |p| p + 1);
    Ok(Some((start, read_at(file, start, nl - start)?)))
}

/// How many `\n` the bytes from `from` to `to` hold.
pub(super) fn count_lines_between(file: &File, from: u64, to: u64) -> io::Result<u64> {
    let mut n = 0;
    let mut at = from;
    while at < to {
        let len = (to - at).min(64 * 1024);
        let buf = read_at(file, at, len)?;
        n += buf.iter().filter(|&&b| b == b'\n').count() as u64;
        at += len;
    }
    Ok(n)
}

/// How many `\n` the first `end` bytes hold.
pub(super) fn count_lines(file: &File, end: u64) -> io::Result<u64> {
    count_lines_between(file, 0, end)
}

/// The last `n` complete lines (oldest first, without `\n`) and the length of a torn tail.
pub(super) fn last_lines(file: &File, len: u64, n: usize) -> io::Result<(Vec<Vec<u8>>, u64)> {
    let complete_end = rfind_newline(file, len)?.map_or(0, |p| p + 1);
    let mut lines = Vec::new();
    let mut line_end = complete_end;
    while lines.len() < n && line_end > 0 {
        let nl = line_end - 1;
        let start = rfind_newline(file, nl)?.map_or(0, |p| p + 1);
        lines.push(read_at(file, start, nl - start)?);
        line_end = start;
    }
    lines.reverse();
    Ok((lines, len - complete_end))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::result_large_err)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::io::Write;

    fn file(bytes: &[u8]) -> (tempfile::NamedTempFile, u64) {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(bytes).unwrap();
        (f, bytes.len() as u64)
    }

    #[test]
    fn finds_the_last_line_and_a_torn_tail() {
        let (f, len) = file(b"");
        assert_eq!(
            end(f.as_file(), len).unwrap(),
            End {
                complete_end: 0,
                last: None
            }
        );
        let (f, len) = file(b"torn");
        assert_eq!(end(f.as_file(), len).unwrap().complete_end, 0);
        let (f, len) = file(b"one\ntwo\n");
        assert_eq!(
            end(f.as_file(), len).unwrap(),
            End {
                complete_end: 8,
                last: Some((4, b"two".to_vec()))
            }
        );
        let (f, len) = file(b"one\ntwo\nthr");
        assert_eq!(
            end(f.as_file(), len).unwrap(),
            End {
                complete_end: 8,
                last: Some((4, b"two".to_vec()))
            }
        );
    }

    #[test]
    fn lines_longer_than_a_chunk_are_read_whole() {
        let long = "x".repeat(10_000);
        let (f, len) = file(format!("{long}\n{long}y\n").as_bytes());
        let e = end(f.as_file(), len).unwrap();
        assert_eq!(e.last, Some((10_001, format!("{long}y").into_bytes())));
        let (lines, torn) = last_lines(f.as_file(), len, 5).unwrap();
        assert_eq!(
            lines,
            vec![long.clone().into_bytes(), format!("{long}y").into_bytes()]
        );
        assert_eq!(torn, 0);
    }

    #[test]
    fn last_lines_takes_n_and_reports_the_torn_length() {
        let (f, len) = file(b"a\nb\nc\nxy");
        let (lines, torn) = last_lines(f.as_file(), len, 2).unwrap();
        assert_eq!(lines, vec![b"b".to_vec(), b"c".to_vec()]);
        assert_eq!(torn, 2);
    }
}
