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
//! Order of writes: activate writes SKILL.md, then the marker; deactivate removes the
//! marker, then SKILL.md. A crash in between leaves a skill without a marker, which exec
//! treats as inactive (fail closed); running the command again completes it.

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
    let pid = parse_id(id)?;
    if std::fs::symlink_metadata(pack_dir(home, pid.as_str())).is_err() {
        return Err(PackError::NotInstalled { id: id.to_owned() });
    }
    ensure_writable(home)?;
    let lock = StoreLock::acquire(home)?;
    repair_locked(home, &lock)?;
    let pack = load(home, pid.as_str())?;
    write_skill_locked(home, &lock, &pack)?;
    mark_active_locked(home, &lock, pid.as_str())?;
    Ok(pack)
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
        || std::fs::symlink_metadata(home.dir(StoreDir::Skills).join(pid.as_str())).is_ok();
    if !installed && !leftovers {
        return Err(PackError::NotInstalled { id: id.to_owned() });
    }
    ensure_writable(home)?;
    let lock = StoreLock::acquire(home)?;
    repair_locked(home, &lock)?;
    Ok(deactivate_locked(home, &lock, pid.as_str())?)
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

/// Records, before an install swaps pack `id`, that its skill must follow. `activate`:
/// the install also activates it. The caller holds the lock.
pub(crate) fn journal_locked(
    home: &Home,
    _lock: &StoreLock,
    id: &str,
    activate: bool,
) -> Result<(), StoreError> {
    write_atomic(
        &journal_path(home, id),
        if activate { b"activate" } else { b"refresh" },
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
        let activate = std::fs::read(e.path()).is_ok_and(|b| b == b"activate");
        let active = crate::pack::is_active(home, &id) || activate;
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

/// Writes `skills/<id>/SKILL.md` for `pack` (atomic replace). The caller holds the lock.
pub(crate) fn write_skill_locked(
    home: &Home,
    _lock: &StoreLock,
    pack: &InstalledPack,
) -> Result<(), StoreError> {
    home.ensure(StoreDir::Skills)?;
    write_atomic(&skill_path(home, pack.id.as_str()), render(pack).as_bytes())
}

/// Creates `state/active/<id>`. The caller holds the lock.
pub(crate) fn mark_active_locked(
    home: &Home,
    _lock: &StoreLock,
    id: &str,
) -> Result<(), StoreError> {
    write_atomic(&marker_path(home, id), b"")
}

/// Removes the marker, then the skill directory. Returns whether the marker existed. The
/// caller holds the lock.
pub(crate) fn deactivate_locked(
    home: &Home,
    _lock: &StoreLock,
    id: &str,
) -> Result<bool, StoreError> {
    let marker = marker_path(home, id);
    let was = match std::fs::remove_file(&marker) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Err(StoreError::io("remove", marker, e)),
    };
    if let Some(d) = marker.parent().filter(|_| was) {
        sync_dir(d)?;
    }
    let dir = home.dir(StoreDir::Skills).join(id);
    match std::fs::remove_dir_all(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(StoreError::io("remove", dir, e)),
    }
    Ok(was)
}

/// The SKILL.md text of `pack`.
pub fn render(pack: &InstalledPack) -> String {
    let m = &pack.manifest;
    let mut out = String::new();
    out.push_str("---\n");
    let _ = writeln!(out, "name: {}", pack.id);
    let _ = writeln!(out, "description: {}", yaml_quote(&description(pack)));
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
/// it (seeds §4.5).
pub fn exec_form(pack: &InstalledPack, key: &str) -> String {
    let mut s = format!("hcp exec {}", exec_target(pack, key));
    let mut seen: Vec<String> = Vec::new();
    if let Ok(plan) = pack.manifest.plan_verb(key) {
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
