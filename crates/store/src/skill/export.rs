//! Exported copies of the skills (RUNTIME §10): `config.json` `"skills": {"export":
//! [DIR…]}` names folders where harnesses look for skills (`~/.agents/skills`,
//! `~/.claude/skills` …); activation also writes `DIR/ID/SKILL.md` in each.
//!
//! - **The marker.** An exported SKILL.md carries, in its front matter, `metadata:` with
//!   `generated-by: hcp` and `hcp-store: "<store id>"` (Agent Skills allows `metadata`, a map
//!   of strings, so `skills-ref validate` still passes). The store id is a random id kept in
//!   `state/store-id`, made by the first export. A skill is *hcp's* when its SKILL.md is a
//!   regular file whose marker names this store; anything else in the place of `DIR/ID` — a
//!   skill without the marker, one another store wrote, a file, a symlink, a folder holding
//!   other things — is *foreign* and is never written over or removed (`skill_collision`).
//! - **The ledger.** `state/skill-exports/<id>` lists the folders hcp wrote the pack's skill
//!   in, one absolute path a line. It is written (synced) before the first write into a new
//!   folder, so removal finds every copy even after `skills.export` changed; removal uses the
//!   ledger alone, never the configuration.
//! - **Before anything changes** ([`preflight_locked`]): every folder must exist, be a folder
//!   (a symlink to one is fine), be writable (`access(2)`), lie outside the store, and hold
//!   nothing foreign named like the pack. Any fault refuses the whole activation (or install
//!   with `--activate`, or reinstall of an active pack) and leaves the store and every folder
//!   as they were: a harness never sees a pack half exported.
//! - **Writes** are whole-file replaces (temporary file in `DIR/ID`, synced, renamed over
//!   `SKILL.md`, the folder synced). Removal deletes `SKILL.md`, then `DIR/ID` when it is
//!   empty. Both run under the store lock and follow the skill journal, so a crash at any
//!   point is repaired by the next writer like the store's own skill.
//!
//! `~` in an export folder is expanded from `HOME` when the folder is used
//! ([`ExportDir::resolve`]); the ledger keeps the expanded path.

use crate::atomic::{sync_dir, write_atomic};
use crate::config::{ConfigError, ExportDir, RuntimeConfig};
use crate::error::StoreError;
use crate::home::{Home, StoreDir};
use crate::lock::StoreLock;
use crate::pack::InstalledPack;
use serde::Serialize;
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The front-matter key that says hcp wrote a skill.
pub const MARKER_KEY: &str = "generated-by";
/// The key naming the store that wrote it.
pub const STORE_KEY: &str = "hcp-store";
/// The largest SKILL.md read to look for the marker, in bytes.
const MAX_SKILL_BYTES: u64 = 1024 * 1024;

/// Why a skill cannot be exported. Nothing was changed when one is returned.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// `skill_collision` (exit 1): the place of `DIR/ID` holds something hcp did not write.
    #[error(
        "cannot export the skill: `{}` is {what}, and hcp never writes over what it did not write",
        path.display()
    )]
    Collision {
        /// `DIR/ID` (or `DIR/ID/SKILL.md`).
        path: PathBuf,
        /// What is there, lowercase (`a skill hcp did not write`, `a symlink` …).
        what: String,
    },
    /// `skill_export_unusable` (exit 1): an export folder cannot take the skill.
    #[error(
        "skill export folder `{raw}`{} (config.json line {line}, column {column}) {reason}",
        dir.as_ref().filter(|d| d.as_os_str() != raw.as_str()).map(|d| format!(" = `{}`", d.display())).unwrap_or_default()
    )]
    Unusable {
        /// The entry as written in `skills.export`.
        raw: String,
        /// The folder it names, when it could be resolved.
        dir: Option<PathBuf>,
        /// 1-based line of the entry in `config.json` (0 when unknown).
        line: usize,
        /// 1-based column of the entry.
        column: usize,
        /// Why, lowercase (`does not exist`, `is not writable: …`).
        reason: String,
    },
    /// `bad_config` (78) or `store_io` (74): `config.json` cannot be used.
    #[error(transparent)]
    Config(#[from] ConfigError),
}

impl ExportError {
    /// The stable code: `skill_collision`, `skill_export_unusable`, or the configuration's.
    pub fn code(&self) -> hcp_model::Code {
        match self {
            Self::Collision { .. } => hcp_model::Code::SkillCollision,
            Self::Unusable { .. } => hcp_model::Code::SkillExportUnusable,
            Self::Config(e) => e.code(),
        }
    }

    /// The exit status: 1 for a collision or an unusable folder, else the configuration's
    /// (the code table's statuses in an owner command).
    pub fn exit_status(&self) -> u8 {
        self.code().command_exit_status()
    }

    /// What the owner can do about it.
    pub fn hint(&self) -> String {
        match self {
            Self::Collision { path, .. } => format!(
                "move `{}` away yourself, or drop its folder from `skills.export` in config.json",
                path.display()
            ),
            Self::Unusable { .. } => {
                "create the folder (`mkdir -p`), make it writable, or drop it from `skills.export` in config.json".into()
            }
            Self::Config(_) => "fix config.json; `hcp doctor` reads it".into(),
        }
    }
}

/// One export folder, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Folder {
    /// The absolute folder.
    pub dir: PathBuf,
    /// The entry of `skills.export` it came from.
    pub entry: ExportDir,
}

impl Folder {
    fn unusable(&self, reason: impl Into<String>) -> ExportError {
        match unusable(&self.entry, reason) {
            ExportError::Unusable {
                raw,
                line,
                column,
                reason,
                ..
            } => ExportError::Unusable {
                raw,
                dir: Some(self.dir.clone()),
                line,
                column,
                reason,
            },
            e => e,
        }
    }
}

fn unusable(entry: &ExportDir, reason: impl Into<String>) -> ExportError {
    ExportError::Unusable {
        raw: entry.raw.clone(),
        dir: None,
        line: entry.at.line,
        column: entry.at.column,
        reason: reason.into(),
    }
}

/// The export folders of `config` with `~` expanded from `home_var` (the caller's `HOME`),
/// in order, each once.
///
/// # Errors
/// [`ExportError::Unusable`] for an entry that cannot be resolved (`~` without `HOME`).
pub fn folders_of(
    config: &RuntimeConfig,
    home_var: Option<&std::ffi::OsStr>,
) -> Result<Vec<Folder>, ExportError> {
    let mut out: Vec<Folder> = Vec::new();
    for entry in &config.skills.export {
        let dir = entry.resolve(home_var).map_err(|r| unusable(entry, r))?;
        if !out.iter().any(|f| f.dir == dir) {
            out.push(Folder {
                dir,
                entry: entry.clone(),
            });
        }
    }
    Ok(out)
}

/// The export folders of the store's `config.json`, `~` from this process's `HOME`.
///
/// # Errors
/// [`ExportError::Config`] for a configuration that does not load;
/// [`ExportError::Unusable`] as [`folders_of`].
pub fn folders(home: &Home) -> Result<Vec<Folder>, ExportError> {
    let config = RuntimeConfig::load(home.root())?;
    folders_of(&config, std::env::var_os("HOME").as_deref())
}

/// Why `folder` cannot take skills, if it cannot: absent, not a folder, not writable, or
/// inside the store.
fn fault(home: &Home, folder: &Folder) -> Option<String> {
    let root = home.root();
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    if folder.dir.starts_with(root) || canon(&folder.dir).starts_with(canon(root)) {
        return Some("lies inside the store; name a folder a harness reads".into());
    }
    let meta = match std::fs::metadata(&folder.dir) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Some("does not exist".into());
        }
        Err(e) => return Some(format!("cannot be read: {e}")),
    };
    if !meta.is_dir() {
        return Some("is not a folder".into());
    }
    if let Err(e) = crate::pack::fsops::access_writable(&folder.dir) {
        return Some(format!("is not writable: {e}"));
    }
    None
}

/// What is in the place of `DIR/ID`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// Nothing, or an empty folder.
    Free,
    /// A SKILL.md this store wrote (its text).
    Ours(String),
    /// Something else: what, lowercase.
    Foreign(String),
}

/// Reads what is at `dir/id`, never following a symlink there. `store_id`: this store's
/// id, `None` when it has none yet (then nothing is ours).
///
/// # Errors
/// [`StoreError::Io`] when the place cannot be read.
pub fn classify(dir: &Path, id: &str, store_id: Option<&str>) -> Result<Entry, StoreError> {
    let place = dir.join(id);
    let meta = match std::fs::symlink_metadata(&place) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Entry::Free),
        Err(e) => return Err(StoreError::io("read", place, e)),
    };
    let ft = meta.file_type();
    if ft.is_symlink() {
        return Ok(Entry::Foreign("a symlink".into()));
    }
    if !ft.is_dir() {
        return Ok(Entry::Foreign("a file, not a skill folder".into()));
    }
    let md = place.join(super::SKILL_MD);
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(&md);
    let file = match opened {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let empty = std::fs::read_dir(&place)
                .map_err(|e| StoreError::io("read", &place, e))?
                .next()
                .is_none();
            return Ok(if empty {
                Entry::Free
            } else {
                Entry::Foreign("a folder hcp did not write".into())
            });
        }
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Ok(Entry::Foreign("a skill whose SKILL.md is a symlink".into()));
        }
        Err(e) => return Err(StoreError::io("read", md, e)),
    };
    let m = file
        .metadata()
        .map_err(|e| StoreError::io("read", &md, e))?;
    if !m.is_file() {
        return Ok(Entry::Foreign(
            "a skill whose SKILL.md is not a file".into(),
        ));
    }
    let mut text = String::new();
    if file
        .take(MAX_SKILL_BYTES)
        .read_to_string(&mut text)
        .is_err()
    {
        return Ok(Entry::Foreign("a skill hcp did not write".into()));
    }
    Ok(match (marker(&text), store_id) {
        (Some(s), Some(ours)) if s == ours => Entry::Ours(text),
        (Some(_), _) => Entry::Foreign("a skill another hcp store wrote".into()),
        (None, _) => Entry::Foreign("a skill hcp did not write".into()),
    })
}

/// The store id of the marker in the front matter of `text`, when it has one.
pub fn marker(text: &str) -> Option<&str> {
    let front = text.strip_prefix("---\n")?;
    let end = front.find("\n---")?;
    let front = &front[..end];
    let mut lines = front.lines().skip_while(|l| *l != "metadata:").skip(1);
    let mut by_hcp = false;
    let mut store = None;
    for l in lines.by_ref().take_while(|l| l.starts_with("  ")) {
        if l == format!("  {MARKER_KEY}: hcp") {
            by_hcp = true;
        } else if let Some(v) = l.strip_prefix(&format!("  {STORE_KEY}: \"")) {
            store = v.strip_suffix('"');
        }
    }
    store.filter(|_| by_hcp)
}

/// The front-matter lines of the marker for store `store_id`.
pub fn marker_lines(store_id: &str) -> String {
    format!("metadata:\n  {MARKER_KEY}: hcp\n  {STORE_KEY}: \"{store_id}\"\n")
}

fn store_id_path(home: &Home) -> PathBuf {
    home.dir(StoreDir::State).join("store-id")
}

/// This store's id, when it has one (read only).
pub fn store_id(home: &Home) -> Option<String> {
    let bytes = crate::atomic::read_record(&store_id_path(home)).ok()??;
    let text = String::from_utf8(bytes).ok()?;
    let id = text.trim();
    (!id.is_empty() && id.bytes().all(|b| b.is_ascii_hexdigit())).then(|| id.to_owned())
}

/// This store's id, made (random, synced) when it has none. The caller holds the lock.
fn store_id_locked(home: &Home, _lock: &StoreLock) -> Result<String, StoreError> {
    if let Some(id) = store_id(home) {
        return Ok(id);
    }
    let id = uuid::Uuid::now_v7().simple().to_string();
    write_atomic(&store_id_path(home), format!("{id}\n").as_bytes())?;
    Ok(id)
}

fn ledger_path(home: &Home, id: &str) -> PathBuf {
    home.dir(StoreDir::State).join("skill-exports").join(id)
}

/// The folders the ledger says hcp wrote pack `id`'s skill in.
pub fn ledger(home: &Home, id: &str) -> Vec<PathBuf> {
    std::fs::read_to_string(ledger_path(home, id))
        .map(|t| {
            t.lines()
                .filter(|l| l.starts_with('/'))
                .map(PathBuf::from)
                .collect()
        })
        .unwrap_or_default()
}

/// The packs that have a ledger.
pub fn ledger_ids(home: &Home) -> Vec<String> {
    let dir = home.dir(StoreDir::State).join("skill-exports");
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut ids: Vec<String> = rd
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
        .filter(|n| crate::pack::parse_id(n).is_ok())
        .collect();
    ids.sort();
    ids
}

fn write_ledger(home: &Home, id: &str, dirs: &[PathBuf]) -> Result<(), StoreError> {
    let p = ledger_path(home, id);
    if dirs.is_empty() {
        return match std::fs::remove_file(&p) {
            Ok(()) => p.parent().map_or(Ok(()), sync_dir),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StoreError::io("remove", p, e)),
        };
    }
    let mut text = String::new();
    for d in dirs {
        text.push_str(&d.to_string_lossy());
        text.push('\n');
    }
    write_atomic(&p, text.as_bytes())
}

/// Checks, before anything is written, that every export folder can take pack `id`'s
/// skill and holds nothing foreign in its place. Returns the folders. The caller holds
/// the lock.
///
/// # Errors
/// [`ExportError`]: the configuration does not load, a folder is unusable, or the place
/// holds something hcp did not write; [`ExportError::Unusable`] also when the place cannot
/// be read.
pub fn preflight_locked(
    home: &Home,
    _lock: &StoreLock,
    id: &str,
) -> Result<Vec<Folder>, ExportError> {
    let folders = folders(home)?;
    let ours = store_id(home);
    for f in &folders {
        if let Some(reason) = fault(home, f) {
            return Err(f.unusable(reason));
        }
        match classify(&f.dir, id, ours.as_deref()) {
            Ok(Entry::Foreign(what)) => {
                return Err(ExportError::Collision {
                    path: f.dir.join(id),
                    what,
                });
            }
            Ok(_) => {}
            Err(e) => return Err(f.unusable(e.to_string())),
        }
    }
    Ok(folders)
}

/// Writes `text` as `DIR/ID/SKILL.md` of every folder in `folders` whose place is free or
/// ours; a foreign place or an unusable folder is skipped (callers that must refuse ran
/// [`preflight_locked`] first). The ledger names every folder before its first write.
/// The caller holds the lock.
///
/// # Errors
/// [`StoreError`] when the ledger, the store id or a skill cannot be written.
pub(crate) fn write_locked(
    home: &Home,
    lock: &StoreLock,
    pack: &InstalledPack,
    folders: &[Folder],
) -> Result<(), StoreError> {
    if folders.is_empty() {
        return Ok(());
    }
    let id = pack.id.as_str();
    let store = store_id_locked(home, lock)?;
    let text = super::render_marked(pack, Some(&store));
    let mut ledger = ledger(home, id);
    for f in folders {
        if fault(home, f).is_some() {
            continue;
        }
        match classify(&f.dir, id, Some(&store))? {
            Entry::Foreign(_) => continue,
            Entry::Ours(old) if old == text => continue,
            _ => {}
        }
        if !ledger.contains(&f.dir) {
            ledger.push(f.dir.clone());
            write_ledger(home, id, &ledger)?;
        }
        write_one(&f.dir, id, &text)?;
    }
    Ok(())
}

/// Writes `dir/id/SKILL.md` whole, mode 0644 (the skill holds nothing secret and other
/// tools of the user read it).
fn write_one(dir: &Path, id: &str, text: &str) -> Result<(), StoreError> {
    let place = dir.join(id);
    let created = match std::fs::create_dir(&place) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => false,
        Err(e) => return Err(StoreError::io("create", place, e)),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".SKILL.md.hcp-")
        .tempfile_in(&place)
        .map_err(|e| StoreError::io("create a temporary file in", &place, e))?;
    let io = |action: &'static str, p: &Path| {
        let p = p.to_path_buf();
        move |e| StoreError::io(action, p, e)
    };
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o644))
        .map_err(io("write", tmp.path()))?;
    tmp.write_all(text.as_bytes())
        .map_err(io("write", tmp.path()))?;
    tmp.as_file().sync_all().map_err(io("sync", tmp.path()))?;
    let md = place.join(super::SKILL_MD);
    tmp.persist(&md)
        .map_err(|e| StoreError::io("rename into", &md, e.error))?;
    sync_dir(&place)?;
    if created {
        sync_dir(dir)?;
    }
    Ok(())
}

/// Removes pack `id`'s skill from every folder of its ledger where the skill is ours, and
/// `DIR/ID` when that leaves it empty; a foreign one is left alone. The ledger then goes.
/// The caller holds the lock.
///
/// # Errors
/// [`StoreError`] when a skill or the ledger cannot be removed; the ledger keeps the
/// folders not yet done.
pub(crate) fn remove_locked(home: &Home, _lock: &StoreLock, id: &str) -> Result<(), StoreError> {
    let mut left = ledger(home, id);
    if left.is_empty() {
        return Ok(());
    }
    let store = store_id(home);
    while let Some(dir) = left.first().cloned() {
        if let Entry::Ours(_) = classify(&dir, id, store.as_deref())? {
            let place = dir.join(id);
            let md = place.join(super::SKILL_MD);
            match std::fs::remove_file(&md) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::io("remove", md, e)),
            }
            match std::fs::remove_dir(&place) {
                Ok(()) => sync_dir(&dir)?,
                // Something else lives beside the skill: keep the folder, and it.
                Err(_) => sync_dir(&place)?,
            }
        }
        left.remove(0);
        write_ledger(home, id, &left)?;
    }
    Ok(())
}

/// Checks, before anything is removed, that [`remove_locked`] could remove every copy of
/// pack `id`'s skill the ledger names, and the ledger itself ([`super::check_removable`]).
/// The caller holds the lock.
///
/// # Errors
/// [`StoreError::Io`] naming the first file or folder that would refuse.
pub(crate) fn removable_locked(home: &Home, _lock: &StoreLock, id: &str) -> Result<(), StoreError> {
    let left = ledger(home, id);
    if left.is_empty() {
        return Ok(());
    }
    let store = store_id(home);
    for dir in &left {
        if let Entry::Ours(_) = classify(dir, id, store.as_deref())? {
            super::check_removable(&dir.join(id).join(super::SKILL_MD))?;
            super::check_removable(&dir.join(id))?;
        }
    }
    super::check_removable(&ledger_path(home, id))
}

/// One export folder as `hcp doctor` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct FolderHealth {
    /// The entry as written.
    pub entry: String,
    /// The folder, resolved (absent when it cannot be).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dir: Option<PathBuf>,
    /// Whether it is listed in `skills.export` now (false: only the ledger names it).
    pub configured: bool,
    /// `ok`, or why skills cannot be written there.
    pub status: String,
    /// Entries that need the owner: `missing`, `stale`, `foreign`.
    pub entries: Vec<EntryHealth>,
}

/// One entry of an export folder that needs the owner.
#[derive(Debug, Clone, Serialize)]
pub struct EntryHealth {
    /// The skill's name (a pack id).
    pub id: String,
    /// `missing` (an active pack's skill is not there), `stale` (hcp's copy of a pack
    /// that is not active here, or that differs from what activation writes now), or
    /// `foreign` (a skill hcp did not write, named like an active pack).
    pub state: &'static str,
    /// What to do, lowercase.
    pub detail: String,
}

/// The export folders (configured, and any a ledger still names) with their problems, for
/// `hcp doctor`. Reads only. Each problem is also pushed to `problems` as a sentence.
pub fn health(
    home: &Home,
    config: &RuntimeConfig,
    home_var: Option<&std::ffi::OsStr>,
    problems: &mut Vec<String>,
) -> Vec<FolderHealth> {
    let active: Vec<String> = crate::pack::active_ids(home)
        .map(|v| v.into_iter().map(|p| p.to_string()).collect())
        .unwrap_or_default();
    let store = store_id(home);
    let mut out = Vec::new();
    let mut seen: Vec<PathBuf> = Vec::new();
    for entry in &config.skills.export {
        let dir = match entry.resolve(home_var) {
            Ok(d) => d,
            Err(reason) => {
                problems.push(format!("skill export folder `{}`: {reason}", entry.raw));
                out.push(FolderHealth {
                    entry: entry.raw.clone(),
                    dir: None,
                    configured: true,
                    status: reason,
                    entries: Vec::new(),
                });
                continue;
            }
        };
        if seen.contains(&dir) {
            continue;
        }
        seen.push(dir.clone());
        let folder = Folder {
            dir: dir.clone(),
            entry: entry.clone(),
        };
        let status = fault(home, &folder);
        if let Some(s) = &status {
            problems.push(format!("skill export folder `{}` {s}", dir.display()));
        }
        let entries = if status.is_none() {
            examine(home, &dir, &active, store.as_deref(), true, problems)
        } else {
            Vec::new()
        };
        out.push(FolderHealth {
            entry: entry.raw.clone(),
            dir: Some(dir),
            configured: true,
            status: status.unwrap_or_else(|| "ok".into()),
            entries,
        });
    }
    // Folders only a ledger names (taken out of `skills.export` since): hcp's copies
    // there are stale.
    let mut extra: Vec<PathBuf> = Vec::new();
    for id in ledger_ids(home) {
        for d in ledger(home, &id) {
            if !seen.contains(&d) && !extra.contains(&d) {
                extra.push(d);
            }
        }
    }
    for dir in extra {
        let entries = examine(home, &dir, &[], store.as_deref(), false, problems);
        out.push(FolderHealth {
            entry: dir.to_string_lossy().into_owned(),
            dir: Some(dir),
            configured: false,
            status: "not in `skills.export`".into(),
            entries,
        });
    }
    out
}

/// The entries of `dir` that need the owner. `configured`: the folder is in
/// `skills.export`, so every active pack should be there.
fn examine(
    home: &Home,
    dir: &Path,
    active: &[String],
    store: Option<&str>,
    configured: bool,
    problems: &mut Vec<String>,
) -> Vec<EntryHealth> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.file_name().to_str().map(str::to_owned))
                .filter(|n| crate::pack::parse_id(n).is_ok())
                .collect()
        })
        .unwrap_or_default();
    for a in active {
        if !names.contains(a) {
            names.push(a.clone());
        }
    }
    names.sort();
    let mut out = Vec::new();
    for id in names {
        let is_active = active.contains(&id);
        let found = match classify(dir, &id, store) {
            Ok(e) => e,
            Err(e) => Entry::Foreign(e.to_string()),
        };
        let (state, detail) = match found {
            Entry::Free if is_active && configured => {
                ("missing", format!("`hcp activate {id}` writes it again"))
            }
            Entry::Ours(_) if !is_active => (
                "stale",
                if configured {
                    format!("`{id}` is not active here; `hcp deactivate {id}` removes it")
                } else {
                    format!("the folder left `skills.export`; `hcp deactivate {id}` removes it")
                },
            ),
            Entry::Ours(text) => match crate::pack::load(home, &id) {
                Ok(pack) if super::render_marked(&pack, store) != text => (
                    "stale",
                    format!("it differs from the installed pack; `hcp activate {id}` rewrites it"),
                ),
                _ => continue,
            },
            Entry::Foreign(what) if is_active && configured => (
                "foreign",
                format!(
                    "{what} holds the name: the pack's skill cannot be exported (`skill_collision`)"
                ),
            ),
            _ => continue,
        };
        problems.push(format!(
            "skill `{}`: {state}: {detail}",
            dir.join(&id).display()
        ));
        out.push(EntryHealth { id, state, detail });
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn the_marker_is_read_from_the_front_matter_only() {
        let m = |s: &str| {
            format!(
                "---\nname: a\ndescription: \"d\"\n{}---\n\nbody\n",
                marker_lines(s)
            )
        };
        assert_eq!(marker(&m("abc1")), Some("abc1"));
        assert_eq!(
            marker("---\nname: a\n---\n\nmetadata:\n  generated-by: hcp\n  hcp-store: \"x\"\n"),
            None
        );
        assert_eq!(
            marker("---\nname: a\nmetadata:\n  hcp-store: \"x\"\n---\n"),
            None
        );
        assert_eq!(marker("no front matter"), None);
    }

    #[test]
    fn places_are_classified_without_following_symlinks() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path();
        assert_eq!(classify(dir, "p", Some("s")).unwrap(), Entry::Free);
        std::fs::create_dir(dir.join("p")).unwrap();
        assert_eq!(classify(dir, "p", Some("s")).unwrap(), Entry::Free);
        std::fs::write(dir.join("p/notes.txt"), "x").unwrap();
        assert!(matches!(
            classify(dir, "p", Some("s")).unwrap(),
            Entry::Foreign(_)
        ));
        let ours = format!("---\nname: p\n{}---\n", marker_lines("s"));
        std::fs::write(dir.join("p/SKILL.md"), &ours).unwrap();
        assert_eq!(classify(dir, "p", Some("s")).unwrap(), Entry::Ours(ours));
        assert_eq!(
            classify(dir, "p", Some("t")).unwrap(),
            Entry::Foreign("a skill another hcp store wrote".into())
        );
        assert_eq!(
            classify(dir, "p", None).unwrap(),
            Entry::Foreign("a skill another hcp store wrote".into())
        );
        std::fs::write(dir.join("q"), "x").unwrap();
        assert!(matches!(
            classify(dir, "q", None).unwrap(),
            Entry::Foreign(_)
        ));
        std::os::unix::fs::symlink(dir.join("p"), dir.join("r")).unwrap();
        assert_eq!(
            classify(dir, "r", Some("s")).unwrap(),
            Entry::Foreign("a symlink".into())
        );
        std::fs::create_dir(dir.join("t")).unwrap();
        std::os::unix::fs::symlink(dir.join("p/SKILL.md"), dir.join("t/SKILL.md")).unwrap();
        assert!(matches!(
            classify(dir, "t", Some("s")).unwrap(),
            Entry::Foreign(_)
        ));
    }
}
