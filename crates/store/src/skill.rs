//! Activation: `skills/<id>/SKILL.md` in the Agent Skills format and the marker
//! `state/active/<id>` (RUNTIME §3, "activate writes a SKILL.md").
//!
//! SKILL.md is YAML front matter in block style with `name` (= the pack id, which is also
//! the skill directory's name, as Agent Skills requires) and `description` (≤ 1024
//! characters), then the pack's `HARNESS.md`, then a generated table of the `hcp exec`
//! forms of its verbs with operation, land and confirm.
//!
//! The description is always a YAML double-quoted scalar whose every character that could
//! end or confuse the front matter is escaped: quotes, backslashes, control characters and
//! line breaks of any kind, and every `-` that would make a run of three dashes (Agent
//! Skills readers split the file on `---`).
//!
//! Order of writes: activate writes SKILL.md, then the exported copies ([`export`]), then
//! the marker; deactivate removes the marker, then the exported copies hcp wrote, then
//! SKILL.md. Both first write a skill journal entry and clear it at the end, so a crash in
//! between is completed by the next writer (activate: the skills are written and the
//! marker made; deactivate: the rest is removed). Until then a skill without a marker is
//! treated as inactive by exec (fail closed).
//!
//! Activation fails as a whole: an export folder that cannot take the skill, or a foreign
//! skill in its place, refuses it before anything is written ([`ExportError`]); an I/O
//! failure midway undoes what it wrote (a pack that was not active stays inactive).

pub mod export;

pub use export::{ExportError, Folder};

use crate::atomic::{sync_dir, write_atomic};
use crate::error::StoreError;
use crate::home::{Home, StoreDir};
use crate::lock::StoreLock;
use crate::pack::{InstalledPack, PackError, ensure_writable, load, pack_dir, parse_id};
use hcp_model::template::Element;
use std::fmt::Write as _;
use std::path::PathBuf;

/// The skill file's name.
pub const SKILL_MD: &str = "SKILL.md";
/// The longest description Agent Skills accepts, in characters (Unicode scalar values).
pub const MAX_DESCRIPTION_CHARS: usize = 1024;

/// `skills/<id>/SKILL.md`.
pub fn skill_path(home: &Home, id: &str) -> PathBuf {
    home.dir(StoreDir::Skills).join(id).join(SKILL_MD)
}

fn marker_path(home: &Home, id: &str) -> PathBuf {
    home.dir(StoreDir::State).join("active").join(id)
}

/// Activates installed pack `id` under [`StoreLock`]: writes its SKILL.md, then its
/// marker. Activating an active pack rewrites its SKILL.md.
///
/// # Errors
/// [`PackError::NotInstalled`], [`PackError::Store`] (an unusable home, a damaged pack, an
/// I/O failure).
pub fn activate(home: &Home, id: &str) -> Result<InstalledPack, PackError> {
    activate_authorized(home, id, |_| Ok(()))
}

/// [`activate`] as an act of authority (RUNTIME §6): `authorize` is called under the lock
/// once the pack is loaded and every export folder is checked, before anything is
/// written; its error stops the activation with nothing changed. A refused activation
/// (an export folder that cannot take the skill, a skill hcp did not write) so leaves no
/// record of an act that did not happen.
///
/// # Errors
/// As [`activate`], and `authorize`'s error.
pub fn activate_authorized(
    home: &Home,
    id: &str,
    authorize: impl FnOnce(&InstalledPack) -> Result<(), PackError>,
) -> Result<InstalledPack, PackError> {
    let pid = parse_id(id)?;
    if std::fs::symlink_metadata(pack_dir(home, pid.as_str())).is_err() {
        return Err(PackError::NotInstalled { id: id.to_owned() });
    }
    ensure_writable(home)?;
    let lock = StoreLock::acquire(home)?;
    repair_locked(home, &lock)?;
    let pack = load(home, pid.as_str())?;
    let id = pid.as_str();
    // Every export folder is checked before anything is written.
    export::preflight_locked(home, &lock, id)?;
    authorize(&pack)?;
    let was_active = crate::pack::is_active(home, id);
    journal_write(home, id, Journal::Activate)?;
    let done =
        write_skill_locked(home, &lock, &pack).and_then(|()| mark_active_locked(home, &lock, id));
    if let Err(e) = done {
        if !was_active {
            // Undo: the journal now says so, so a failure here is finished by the next writer.
            let _ = journal_write(home, id, Journal::Deactivate)
                .and_then(|()| deactivate_locked(home, &lock, id));
        }
        return Err(e.into());
    }
    journal_done_locked(home, &lock, id)?;
    Ok(pack)
}

/// Checks that every export folder can take pack `id`'s skill, before an install that will
/// leave it active changes anything (RUNTIME §10). The caller holds the lock.
///
/// # Errors
/// [`PackError::Export`] as [`export::preflight_locked`].
pub(crate) fn preflight_locked(home: &Home, lock: &StoreLock, id: &str) -> Result<(), PackError> {
    export::preflight_locked(home, lock, id)?;
    Ok(())
}

/// Deactivates pack `id` under [`StoreLock`]: removes its marker, then its SKILL.md.
/// Returns whether it was active.
///
/// # Errors
/// [`PackError::NotInstalled`] when the pack is neither installed nor active;
/// [`PackError::Store`] for an unusable home or an I/O failure.
pub fn deactivate(home: &Home, id: &str) -> Result<bool, PackError> {
    let pid = parse_id(id)?;
    let installed = std::fs::symlink_metadata(pack_dir(home, pid.as_str())).is_ok();
    let leftovers = std::fs::symlink_metadata(marker_path(home, pid.as_str())).is_ok()
        || std::fs::symlink_metadata(home.dir(StoreDir::Skills).join(pid.as_str())).is_ok()
        || !export::ledger(home, pid.as_str()).is_empty();
    if !installed && !leftovers {
        return Err(PackError::NotInstalled { id: id.to_owned() });
    }
    ensure_writable(home)?;
    let lock = StoreLock::acquire(home)?;
    repair_locked(home, &lock)?;
    // All or nothing: every file it removes is checked first, so one that refuses (an
    // immutable skill, a read-only export folder) fails the deactivation with nothing
    // changed, naming the file.
    removable_locked(home, &lock, pid.as_str())?;
    Ok(deactivate_locked(home, &lock, pid.as_str())?)
}

/// Checks that `path`, when it exists, could be removed now: its directory can be written
/// (`access(2)`, `W_OK | X_OK`: `EACCES`, an immutable directory's `EPERM`, a read-only
/// mount's `EROFS`), and it is not immutable or on a read-only mount itself (`EPERM`,
/// `EROFS` for `W_OK`; its mode bits alone do not stop an unlink); a directory's entries
/// are checked the same way, depth first.
///
/// # Errors
/// [`StoreError::Io`] naming the file or directory that would refuse.
pub(crate) fn check_removable(path: &std::path::Path) -> Result<(), StoreError> {
    use std::os::unix::ffi::OsStrExt;
    let access = |p: &std::path::Path, mode: libc::c_int| -> Result<(), std::io::Error> {
        let c = std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        // SAFETY: `c` is a valid C string for the duration of the call.
        if unsafe { libc::access(c.as_ptr(), mode) } == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    };
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Ok(());
    };
    if let Some(parent) = path.parent() {
        access(parent, libc::W_OK | libc::X_OK).map_err(|e| StoreError::io("remove", path, e))?;
    }
    if !meta.file_type().is_symlink() {
        match access(path, libc::W_OK) {
            Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM | libc::EROFS)) => {
                return Err(StoreError::io("remove", path, e));
            }
            _ => {}
        }
    }
    if meta.is_dir() {
        let rd = std::fs::read_dir(path).map_err(|e| StoreError::io("read", path, e))?;
        for e in rd.flatten() {
            check_removable(&e.path())?;
        }
    }
    Ok(())
}

/// [`check_removable`] of everything [`deactivate_locked`] removes or writes: the
/// activation marker, the journal entry's folder, the exported copies and their ledger,
/// the store's `skills/<id>`. The caller holds the lock.
///
/// # Errors
/// As [`check_removable`].
fn removable_locked(home: &Home, lock: &StoreLock, id: &str) -> Result<(), StoreError> {
    let marker = marker_path(home, id);
    if std::fs::symlink_metadata(&marker).is_ok() || !export::ledger(home, id).is_empty() {
        // The journal entry is written before anything goes.
        let state = home.dir(StoreDir::State);
        let pending = state.join("skill-pending");
        writable_dir(if pending.is_dir() { &pending } else { &state })?;
    }
    check_removable(&marker)?;
    export::removable_locked(home, lock, id)?;
    check_removable(&home.dir(StoreDir::Skills).join(id))
}

/// `dir` can be written (`access(2)` `W_OK | X_OK`).
///
/// # Errors
/// [`StoreError::Io`] naming `dir`.
fn writable_dir(dir: &std::path::Path) -> Result<(), StoreError> {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return Ok(());
    };
    // SAFETY: `c` is a valid C string for the duration of the call.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } != 0 {
        return Err(StoreError::io(
            "write in",
            dir,
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// The skill journal: `state/skill-pending/<id>` names a pack whose SKILL.md and activation
/// an install is about to change. It is written (and synced) before the pack directory is
/// swapped and removed once SKILL.md and the activation marker agree with the new copy,
/// so a writer killed in between leaves the entry, and the next writer repairs it
/// ([`repair_locked`]): the pack's skill is written again from the installed copy when
/// the pack is active (or the entry says `activate`), removed otherwise.
fn journal_path(home: &Home, id: &str) -> std::path::PathBuf {
    home.dir(StoreDir::State).join("skill-pending").join(id)
}

/// What a journal entry asks of the next writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Journal {
    /// Make the skills follow the installed copy, active as the marker says (`refresh`).
    Refresh,
    /// Write the skills and make the pack active (`activate`).
    Activate,
    /// Remove the marker and every skill hcp wrote (`deactivate`).
    Deactivate,
}

fn journal_write(home: &Home, id: &str, j: Journal) -> Result<(), StoreError> {
    write_atomic(
        &journal_path(home, id),
        match j {
            Journal::Refresh => b"refresh",
            Journal::Activate => b"activate",
            Journal::Deactivate => b"deactivate",
        },
    )
}

/// Records, before an install swaps pack `id`, that its skill must follow. `activate`:
/// the install also activates it. The caller holds the lock.
pub(crate) fn journal_locked(
    home: &Home,
    _lock: &StoreLock,
    id: &str,
    activate: bool,
) -> Result<(), StoreError> {
    journal_write(
        home,
        id,
        if activate {
            Journal::Activate
        } else {
            Journal::Refresh
        },
    )
}

/// Clears the journal entry of `id` once its skill follows the installed copy.
pub(crate) fn journal_done_locked(
    home: &Home,
    _lock: &StoreLock,
    id: &str,
) -> Result<(), StoreError> {
    let p = journal_path(home, id);
    match std::fs::remove_file(&p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StoreError::io("remove", p, e)),
    }
}

/// Repairs what an interrupted install left (see [`journal_locked`]): for each journal
/// entry, the pack's SKILL.md and activation are made to follow the installed copy.
/// Returns how many were repaired. The caller holds the lock.
///
/// # Errors
/// [`StoreError`] when a skill cannot be written or an entry removed.
pub(crate) fn repair_locked(home: &Home, lock: &StoreLock) -> Result<usize, StoreError> {
    let dir = home.dir(StoreDir::State).join("skill-pending");
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return Ok(0);
    };
    let mut n = 0;
    for e in rd.flatten() {
        let id = e.file_name().to_string_lossy().into_owned();
        if parse_id(&id).is_err() {
            continue;
        }
        let entry = std::fs::read(e.path()).unwrap_or_default();
        let active = match entry.as_slice() {
            b"activate" => true,
            b"deactivate" => false,
            _ => crate::pack::is_active(home, &id),
        };
        match load(home, &id) {
            Ok(pack) if active => {
                write_skill_locked(home, lock, &pack)?;
                mark_active_locked(home, lock, &id)?;
            }
            _ => {
                deactivate_locked(home, lock, &id)?;
            }
        }
        journal_done_locked(home, lock, &id)?;
        n += 1;
    }
    Ok(n)
}

/// Writes `skills/<id>/SKILL.md` for `pack` (atomic replace), then its copy in each export
/// folder that can take it ([`export::write_locked`]; a caller that must refuse a folder
/// that cannot ran [`preflight_locked`] first). A `config.json` that does not load exports
/// nothing here (the preflight refused it). The caller holds the lock.
pub(crate) fn write_skill_locked(
    home: &Home,
    lock: &StoreLock,
    pack: &InstalledPack,
) -> Result<(), StoreError> {
    home.ensure(StoreDir::Skills)?;
    write_atomic(&skill_path(home, pack.id.as_str()), render(pack).as_bytes())?;
    let folders = export::folders(home).unwrap_or_default();
    export::write_locked(home, lock, pack, &folders)
}

/// Creates `state/active/<id>`. The caller holds the lock.
pub(crate) fn mark_active_locked(
    home: &Home,
    lock: &StoreLock,
    id: &str,
) -> Result<(), StoreError> {
    let marker = marker_path(home, id);
    crate::ledger::ready(home, lock)?;
    write_atomic(&marker, b"")?;
    crate::ledger::note(
        home,
        lock,
        &[(&marker, Some(crate::ledger::marker_digest(b"")))],
    )
}

/// Removes the marker, then the exported copies hcp wrote, then the skill directory, under
/// a `deactivate` journal entry that the next writer finishes if this one is killed.
/// Returns whether the marker existed. The caller holds the lock.
pub(crate) fn deactivate_locked(
    home: &Home,
    lock: &StoreLock,
    id: &str,
) -> Result<bool, StoreError> {
    let exported = !export::ledger(home, id).is_empty();
    let marker = marker_path(home, id);
    let was_marked = std::fs::symlink_metadata(&marker).is_ok();
    if was_marked || exported {
        journal_write(home, id, Journal::Deactivate)?;
    }
    // A marker made a directory (damage) is removed as one: `hcp deactivate` is its repair.
    let is_dir = std::fs::symlink_metadata(&marker).is_ok_and(|m| m.is_dir());
    let removed = if is_dir {
        std::fs::remove_dir_all(&marker)
    } else {
        std::fs::remove_file(&marker)
    };
    let was = match removed {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Err(StoreError::io("remove", marker, e)),
    };
    if let Some(d) = marker.parent().filter(|_| was) {
        sync_dir(d)?;
        crate::ledger::note(home, lock, &[(&marker, None)])?;
    }
    export::remove_locked(home, lock, id)?;
    let dir = home.dir(StoreDir::Skills).join(id);
    match std::fs::remove_dir_all(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(StoreError::io("remove", dir, e)),
    }
    if was_marked || exported {
        journal_done_locked(home, lock, id)?;
    }
    Ok(was)
}

/// The SKILL.md text of `pack` (the store's copy, `skills/<id>/SKILL.md`).
pub fn render(pack: &InstalledPack) -> String {
    render_marked(pack, None)
}

/// The SKILL.md text of `pack`; with `store_id`, the exported copy, whose front matter
/// carries hcp's marker ([`export::marker_lines`]).
pub fn render_marked(pack: &InstalledPack, store_id: Option<&str>) -> String {
    let m = &pack.manifest;
    let mut out = String::new();
    out.push_str("---\n");
    let _ = writeln!(out, "name: {}", pack.id);
    let _ = writeln!(out, "description: {}", yaml_quote(&description(pack)));
    if let Some(s) = store_id {
        out.push_str(&export::marker_lines(s));
    }
    out.push_str("---\n\n");
    out.push_str(pack.harness.trim_end());
    out.push_str("\n\n## `hcp exec` forms\n\n");
    let _ = writeln!(
        out,
        "Run these verbs only through `hcp exec`; the gate checks grants, land and confirm.\n"
    );
    out.push_str("| verb | command | operation | land | confirm |\n");
    out.push_str("|---|---|---|---|---|\n");
    for (key, _) in m.verbs.iter() {
        let entry = pack.policy.verbs.get(key);
        let (op, land, confirm) = match entry {
            Some(e) => (
                e.operation.as_str(),
                e.privacy.land.as_str(),
                if e.needs_confirm() { "yes" } else { "no" },
            ),
            None => ("?", "?", "?"),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {op} | {land} | {confirm} |",
            code_cell(&exec_target(pack, key)),
            code_cell(&exec_form(pack, key)),
        );
    }
    // RUNTIME §8: the skill says which family a pack shares.
    if let Some(family) = &m.binding.family {
        let _ = write!(
            out,
            "\n## Binding family\n\nThis pack is of binding family `{family}`: every installed pack of that family uses the one credential a principal connects for it (`hcp show {}` names them).\n",
            pack.id
        );
    }
    out
}

/// The shortest `hcp exec` target that names verb `key` of `pack` exactly (RUNTIME §5):
/// the key itself when it already starts with `PACK.` and no other verb is keyed by the
/// rest (`mail.send` in pack `mail`), else `PACK.VERB`.
pub fn exec_target(pack: &InstalledPack, key: &str) -> String {
    let id = pack.id.as_str();
    match key.strip_prefix(id).and_then(|r| r.strip_prefix('.')) {
        Some(rest) if !rest.is_empty() && !pack.manifest.verbs.contains_key(rest) => key.to_owned(),
        _ => format!("{id}.{key}"),
    }
}

/// The `hcp exec` form of verb `key`: `hcp exec PACK.VERB --name NAME …` (target as
/// [`exec_target`]), optional arguments in brackets, `--confirm` when the policy asks for
/// it (seeds §4.5). A `kind: openapi` verb's arguments are its operation's, each value
/// shown as the document allows it (`--status open|done`, `--limit N`).
pub fn exec_form(pack: &InstalledPack, key: &str) -> String {
    let mut s = format!("hcp exec {}", exec_target(pack, key));
    let mut seen: Vec<String> = Vec::new();
    if pack.manifest.kind == hcp_model::Kind::Openapi {
        // The operation's parameters and body properties (RUNTIME §1.3), from the pinned
        // copy, each with its value's stand-in from the document (`open|done`, `N`).
        if let Ok(op) = crate::pack::openapi::pinned_operation(pack, key) {
            for a in op.positional() {
                let flag = format!("--{} {}", a.name, a.value_hint());
                if a.required {
                    let _ = write!(s, " {flag}");
                } else {
                    let _ = write!(s, " [{flag}]");
                }
            }
        }
    } else if let Ok(plan) = pack.manifest.plan_verb(key) {
        for el in &plan.args {
            if let Element::Arg { name, optional, .. } = el {
                if seen.contains(name) {
                    continue;
                }
                seen.push(name.clone());
                let flag = format!("--{name} {}", name.to_uppercase());
                if *optional {
                    let _ = write!(s, " [{flag}]");
                } else {
                    let _ = write!(s, " {flag}");
                }
            }
        }
    }
    if pack
        .policy
        .verbs
        .get(key)
        .is_some_and(|e| e.needs_confirm())
    {
        s.push_str(" --confirm");
    }
    s
}

/// The front matter description: the manifest name, what the pack is, and its verbs,
/// on one line, cut to [`MAX_DESCRIPTION_CHARS`] characters.
pub fn description(pack: &InstalledPack) -> String {
    let name: String = one_line(&pack.manifest.name);
    let mut d = format!(
        "{name} (hcp pack `{id}`). Verbs, run through `hcp exec`:",
        id = pack.id
    );
    let mut first = true;
    for key in pack.manifest.verbs.keys() {
        let k = one_line(key);
        let piece = if first {
            format!(" {k}")
        } else {
            format!(", {k}")
        };
        if d.chars().count() + piece.chars().count() + 1 > MAX_DESCRIPTION_CHARS {
            d.push_str(" …");
            break;
        }
        d.push_str(&piece);
        first = false;
    }
    if d.chars().count() > MAX_DESCRIPTION_CHARS {
        d = d.chars().take(MAX_DESCRIPTION_CHARS - 1).collect();
        d.push('…');
    } else if !d.ends_with('…') {
        d.push('.');
        if d.chars().count() > MAX_DESCRIPTION_CHARS {
            d.pop();
        }
    }
    d
}

/// Whitespace runs (line breaks included) become one space; control characters go.
fn one_line(s: &str) -> String {
    let mut out = String::new();
    let mut space = false;
    for c in s.chars() {
        if c.is_whitespace() {
            space = true;
        } else if !c.is_control() {
            if space && !out.is_empty() {
                out.push(' ');
            }
            space = false;
            out.push(c);
        }
    }
    out
}

/// A YAML double-quoted scalar holding `s` exactly: `"` and `\` escaped, every control or
/// line-breaking character as `\uXXXX` (or a short escape), and a `-` that follows two
/// dashes as `\x2d`, so the text never holds `---`.
pub fn yaml_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    let mut dashes = 0;
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '-' if dashes >= 2 => out.push_str("\\x2d"),
            c if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{85}') => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
        dashes = if c == '-' { dashes + 1 } else { 0 };
    }
    out.push('"');
    out
}

/// A Markdown table cell holding `s` as inline code: the fence is longer than any run of
/// backticks inside, `|` is escaped and line breaks become spaces.
fn code_cell(s: &str) -> String {
    let s = one_line(s).replace('|', "\\|");
    let mut longest = 0;
    let mut run = 0;
    for c in s.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest + 1);
    if longest > 0 {
        format!("{fence} {s} {fence}")
    } else {
        format!("{fence}{s}{fence}")
    }
}

#[cfg(test)]
mod export_tests;

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn quoting_escapes_what_breaks_front_matter() {
        assert_eq!(yaml_quote("a: b"), "\"a: b\"");
        assert_eq!(yaml_quote("x---y"), "\"x--\\x2dy\"");
        assert_eq!(yaml_quote("----"), "\"--\\x2d\\x2d\"");
        assert_eq!(
            yaml_quote("q\"\\\n\u{2028}\u{7}"),
            "\"q\\\"\\\\\\n\\u2028\\u0007\""
        );
        assert!(!yaml_quote("-- --- ----").contains("---"));
    }

    #[test]
    fn cells_and_lines() {
        assert_eq!(one_line(" a\n\tb  c "), "a b c");
        assert_eq!(code_cell("a|b"), "`a\\|b`");
        assert_eq!(code_cell("a`b"), "`` a`b ``");
    }
}
