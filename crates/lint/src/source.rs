//! A pack directory read into memory without following symlinks.

use std::path::{Path, PathBuf};

/// The largest file read into a [`PackSource`], in bytes (1 MiB); a larger file is kept as
/// an entry without contents.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// The most entries walked in one pack directory (files, directories and links at any
/// depth); the walk stops there and [`PackSource::truncated`] is set.
pub const MAX_ENTRIES: usize = 4096;
/// The deepest directory level entered (the pack directory is level 0).
pub const MAX_DEPTH: usize = 16;

/// What an entry is, from `lstat` (a symlink is never followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (never followed).
    Symlink,
    /// Anything else (socket, fifo, device).
    Other,
}

/// One entry of the walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackEntry {
    /// Path relative to the pack directory, `/`-separated, lossily UTF-8.
    pub rel: String,
    /// What it is.
    pub kind: EntryKind,
    /// Size in bytes (for files).
    pub size: u64,
}

/// A pack directory in memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackSource {
    /// The directory as the caller named it.
    pub dir: PathBuf,
    /// Every entry, sorted by `rel`.
    pub entries: Vec<PackEntry>,
    /// Contents of the top-level regular files `surface.json`, `policy.json`, `HARNESS.md`
    /// that were readable and at most [`MAX_FILE_BYTES`]: `(name, bytes)`.
    pub files: Vec<(String, Vec<u8>)>,
    /// Whether the walk stopped at [`MAX_ENTRIES`].
    pub truncated: bool,
    /// The OpenAPI document of a `kind: openapi` pack whose `openapi.spec` is a path
    /// inside the pack (RUNTIME §1.3), read like the pack files (no symlink followed), up
    /// to [`hcp_openapi::MAX_DOCUMENT_BYTES`]. `None` for other packs and URL specs.
    pub document: Option<SpecDocument>,
}

/// The OpenAPI document beside a pack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecDocument {
    /// Its path relative to the pack directory, as `openapi.spec` writes it.
    pub rel: String,
    /// Its bytes, or why they could not be read (lowercase).
    pub bytes: Result<Vec<u8>, String>,
}

impl PackSource {
    /// The bytes of top-level file `name`, when read.
    pub fn file(&self, name: &str) -> Option<&[u8]> {
        self.files
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, b)| b.as_slice())
    }
}

/// Why a directory named as a pack cannot be read as one at all (RUNTIME §2, code
/// `bad_pack_dir`): the one message and hint that `hcp lint`, `hcp install` and `hcp pack
/// promote` give for an error of [`read_pack`], so the three say the same of the same
/// directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadPackDir {
    /// Lowercase, naming the directory as given: `` `DIR` does not exist ``.
    pub message: String,
    /// The next step.
    pub hint: &'static str,
}

/// The hint for a name that is not a pack directory.
const NAME_A_PACK_DIR: &str = "name a pack directory, the one holding `surface.json`, `policy.json` and `HARNESS.md` (docs/packs.md; the repository's gold packs are in `packs/`)";

/// [`BadPackDir`] for `dir`, whose [`read_pack`] failed with `e`.
pub fn bad_pack_dir(dir: &Path, e: &std::io::Error) -> BadPackDir {
    let shown = format!("`{}`", dir.display());
    let (message, hint) = match e.kind() {
        std::io::ErrorKind::NotFound => (format!("{shown} does not exist"), NAME_A_PACK_DIR),
        std::io::ErrorKind::NotADirectory => {
            (format!("{shown} is not a directory"), NAME_A_PACK_DIR)
        }
        std::io::ErrorKind::InvalidInput => (
            format!("{shown} is a symlink; no symlink is followed"),
            "name the directory the link points to",
        ),
        std::io::ErrorKind::PermissionDenied => (
            format!("cannot read {shown}: permission denied"),
            "name a pack directory this user may read and list",
        ),
        _ => (format!("cannot read {shown}: {e}"), NAME_A_PACK_DIR),
    };
    BadPackDir { message, hint }
}

/// Reads `dir` into a [`PackSource`]: walks it with `lstat` (never following a symlink,
/// including `dir` itself), and reads the three pack files when they are regular files.
///
/// The walk is breadth-first, the three pack files first and then by name, so no number of
/// other entries can crowd the pack files out of the walk; it
/// stops after [`MAX_ENTRIES`] entries or [`MAX_DEPTH`] levels, and does not enter a
/// top-level `.git` directory.
///
/// # Errors
/// The I/O error of opening `dir` itself: [`std::io::ErrorKind::NotFound`],
/// [`std::io::ErrorKind::NotADirectory`], [`std::io::ErrorKind::InvalidInput`] for a
/// symlink, or the error of listing it. Deeper, an entry whose `lstat` fails is kept as
/// [`EntryKind::Other`] and an unreadable subdirectory is listed but not entered.
pub fn read_pack(dir: &Path) -> std::io::Result<PackSource> {
    let meta = std::fs::symlink_metadata(dir)?;
    if meta.file_type().is_symlink() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the pack directory is a symlink",
        ));
    }
    if !meta.is_dir() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotADirectory,
            "not a directory",
        ));
    }
    let mut src = PackSource {
        dir: dir.to_path_buf(),
        entries: Vec::new(),
        files: Vec::new(),
        truncated: false,
        document: None,
    };
    walk(dir, &mut src)?;
    src.entries.sort_by(|a, b| a.rel.cmp(&b.rel));
    for name in hcp_model::PACK_FILES {
        let Some(e) = src.entries.iter().find(|e| e.rel == name) else {
            continue;
        };
        if e.kind == EntryKind::File
            && e.size <= MAX_FILE_BYTES
            && let Ok(bytes) = read_no_follow(&dir.join(name), MAX_FILE_BYTES)
        {
            src.files.push((name.to_owned(), bytes));
        }
    }
    src.document = read_document(dir, &src);
    Ok(src)
}

/// Reads the document `openapi.spec` names when it is a path inside the pack.
fn read_document(dir: &Path, src: &PackSource) -> Option<SpecDocument> {
    let text = std::str::from_utf8(src.file(hcp_model::MANIFEST_FILE)?).ok()?;
    let m = hcp_model::parse_manifest(text).ok()?;
    if m.kind != hcp_model::Kind::Openapi {
        return None;
    }
    let Ok(hcp_model::SpecSource::Path(rel)) = m.openapi.as_ref()?.source() else {
        return None;
    };
    let max = hcp_openapi::MAX_DOCUMENT_BYTES as u64;
    let bytes = match src.entries.iter().find(|e| e.rel == rel) {
        None => Err("there is no such file in the pack".to_owned()),
        Some(e) if e.kind == EntryKind::Symlink => Err("it is a symbolic link".to_owned()),
        Some(e) if e.kind != EntryKind::File => Err("it is not a regular file".to_owned()),
        Some(e) if e.size > max => Err(format!(
            "it is {} bytes, more than the {max} bytes (16 MiB) hcp reads",
            e.size
        )),
        Some(_) => read_no_follow(&dir.join(rel), max).map_err(|e| format!("cannot read it: {e}")),
    };
    Some(SpecDocument {
        rel: rel.to_owned(),
        bytes,
    })
}

fn read_no_follow(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    let mut buf = Vec::new();
    f.by_ref().take(max + 1).read_to_end(&mut buf)?;
    if buf.len() as u64 > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "file too large",
        ));
    }
    Ok(buf)
}

/// Walks breadth-first, so the top-level entries (the three pack files among them) are
/// always recorded before [`MAX_ENTRIES`] can stop the walk. A `.git` directory is listed
/// but not entered: version-control metadata is never part of a pack, and install copies
/// only the three files.
fn walk(root: &Path, src: &mut PackSource) -> std::io::Result<()> {
    let mut queue: std::collections::VecDeque<(PathBuf, String, usize)> =
        std::collections::VecDeque::new();
    queue.push_back((root.to_path_buf(), String::new(), 0));
    let mut first = true;
    while let Some((dir, prefix, depth)) = queue.pop_front() {
        let rd = match std::fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) if first => return Err(e),
            Err(_) => continue,
        };
        first = false;
        let mut names: Vec<(std::ffi::OsString, Option<std::fs::FileType>, Option<u64>)> =
            Vec::new();
        for entry in rd {
            let Ok(entry) = entry else { continue };
            let meta = std::fs::symlink_metadata(entry.path()).ok();
            names.push((
                entry.file_name(),
                meta.as_ref().map(std::fs::Metadata::file_type),
                meta.as_ref().map(std::fs::Metadata::len),
            ));
        }
        // The pack files first, so that no number of other entries can crowd them out.
        let is_pack_file = |n: &std::ffi::OsString| {
            depth == 0 && hcp_model::PACK_FILES.iter().any(|p| n.as_os_str() == *p)
        };
        names.sort_by(|a, b| (!is_pack_file(&a.0), &a.0).cmp(&(!is_pack_file(&b.0), &b.0)));
        for (name, ft, len) in names {
            if src.entries.len() >= MAX_ENTRIES {
                src.truncated = true;
                return Ok(());
            }
            let name = name.to_string_lossy().into_owned();
            let rel = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}/{name}")
            };
            let (kind, size) = match ft {
                Some(t) if t.is_symlink() => (EntryKind::Symlink, 0),
                Some(t) if t.is_file() => (EntryKind::File, len.unwrap_or(0)),
                Some(t) if t.is_dir() => (EntryKind::Dir, 0),
                _ => (EntryKind::Other, 0),
            };
            src.entries.push(PackEntry {
                rel: rel.clone(),
                kind,
                size,
            });
            if kind == EntryKind::Dir && !(depth == 0 && name == ".git") {
                if depth < MAX_DEPTH {
                    queue.push_back((dir.join(&name), rel, depth + 1));
                } else {
                    // What lies deeper is not seen, so the pack cannot be checked.
                    src.truncated = true;
                }
            }
        }
    }
    Ok(())
}
