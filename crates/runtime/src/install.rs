//! Install policy (RUNTIME §2, §3): what may enter the store. [`install`] reads the pack
//! directory once without following a symlink (`hcp_lint::read_pack`), runs every lint
//! rule on those bytes (`hcp_lint::check`) and the checks install relies on whatever the
//! rule set holds (`hcp_store::pack::CheckedPack::parse`), then hands exactly those bytes
//! to the store (`hcp_store::pack::install`), and tells the state of every install (the
//! rug-pull guard, [`State::pack_installed`]: a reinstall that changed the content, and
//! with a fleet's database a pack installed with other content than another machine's,
//! suspend the non-owner grants on it).
//!
//! [`State::pack_installed`]: hcp_store::state::State::pack_installed

use crate::Runtime;
use hcp_lint::{Diagnostic, Report};
use hcp_model::Code;
use hcp_store::pack::{self, CheckedPack, InstallOptions, InstallRecord, PackError};
use jiff::Timestamp;
use std::path::Path;

pub use hcp_store::pack::{InstallStep, Removed};

/// Why an install was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// `lint_failed`: lint found errors (RUNTIME §2); the report holds every finding.
    #[error("`{}` has {} lint error(s); nothing was installed", .0.dir.display(), .0.error_count())]
    Lint(Box<Report>),
    /// The store's refusal or failure.
    #[error(transparent)]
    Pack(#[from] PackError),
}

impl InstallError {
    /// The stable code.
    pub fn code(&self) -> Code {
        match self {
            Self::Lint(_) => Code::LintFailed,
            Self::Pack(e) => e.code(),
        }
    }
}

/// What an install did.
#[derive(Debug, Clone)]
pub struct Installed {
    /// The record now in `packs/<id>/.hcp/record.json`.
    pub record: InstallRecord,
    /// Lint's report (warnings only: errors refuse the install).
    pub report: Report,
    /// Whether an installed copy was replaced (`--force`).
    pub replaced: bool,
    /// Whether the replaced copy had different content (the rug-pull guard fired).
    pub content_changed: bool,
    /// Whether the pack is active after the install.
    pub active: bool,
    /// What of the pack's bins (and script interpreters) a call's view holds when that is
    /// not all of their prefix (RUNTIME §5.1, "the pinned bin"): one sentence each, with
    /// the key the operator may add the rest with.
    pub view_notes: Vec<String>,
}

/// Lints the pack in `dir` and installs it into the store of `rt` (RUNTIME §3). Nothing
/// from the pack is executed and no symlink is followed; the bytes written are the bytes
/// linted.
///
/// # Errors
/// [`PackError::Unreadable`] for a directory that cannot be read, [`InstallError::Lint`]
/// when lint finds errors (nothing is written), the store's refusals
/// (`already_installed`, `bin_missing` …) and failures.
pub fn install(
    rt: &Runtime,
    dir: &Path,
    opts: &InstallOptions<'_>,
) -> Result<Installed, InstallError> {
    install_joining(rt, dir, opts, None)
}

/// [`install`], with the owner's `--join-family FAMILY` (RUNTIME §8): a pack whose
/// `binding.family` another installed pack uses is installed only when `join` names that
/// family. The install is an act of authority (RUNTIME §6): once the pack is checked and
/// staged, under the store lock, it is recorded (`install`, or `install --join-family`
/// when it joins a family another pack holds) before anything is put in place; a record
/// that cannot be made refuses the install and leaves the store as it was.
///
/// # Errors
/// As [`install`]; [`PackError::FamilyClaimed`] (`family_claimed`, 1) for a family
/// another pack holds and `join` does not name; [`PackError::FamilyNotDeclared`]
/// (`usage`) for a `join` the pack does not declare; the audit's refusal (74).
pub fn install_joining(
    rt: &Runtime,
    dir: &Path,
    opts: &InstallOptions<'_>,
    join: Option<&str>,
) -> Result<Installed, InstallError> {
    let unreadable = |source| PackError::Unreadable {
        path: dir.to_path_buf(),
        source,
    };
    let src = hcp_lint::read_pack(dir).map_err(unreadable)?;
    let source_dir = std::fs::canonicalize(dir).map_err(unreadable)?;
    let mut report = hcp_lint::check(&src);
    if report.has_errors() {
        return Err(InstallError::Lint(Box::new(report)));
    }
    let files = hcp_model::PACK_FILES.map(|n| src.file(n).unwrap_or_default().to_vec());
    let checked = match CheckedPack::parse(files, source_dir) {
        // A `kind: openapi` document beside the pack: the very bytes lint read.
        Ok(c) => CheckedPack {
            document: src.document.map(|d| pack::openapi::BesideDocument {
                rel: d.rel,
                bytes: d.bytes,
            }),
            ..c
        },
        Err(r) => {
            // Lint's rules cover these; should a rule set miss one, say it as lint would.
            if !report.diagnostics.iter().any(|d| d.code == r.code.as_str()) {
                let mut d = Diagnostic::error(r.code, r.message).in_file(r.file);
                if let Some((line, column)) = r.at {
                    d = d.at(line, column);
                }
                report.push(d);
            }
            return Err(InstallError::Lint(Box::new(report)));
        }
    };
    reserved_bins(&checked, &opts.lookup)?;
    check_join(&checked.manifest, join)?;
    // A state that cannot be told of the install refuses it before anything is written.
    crate::backend::ready(rt).map_err(PackError::Store)?;
    let made = crate::authority::Act::by_owner(rt, "install").map_err(PackError::Store)?;
    let manifest = &checked.manifest;
    let authorize = |p: &pack::Pending<'_>| -> Result<(), PackError> {
        if let Some(a) = opts.authorize {
            a(p)?;
        }
        authorize_install(rt, &made, manifest, join, p)
    };
    let opts = InstallOptions {
        force: opts.force,
        activate: opts.activate,
        lookup: opts.lookup.clone(),
        step_hook: opts.step_hook,
        authorize: Some(&authorize),
    };
    let done = made.settle(pack::install(rt.home(), &checked, &opts), PackError::code)?;
    if let Ok(id) = hcp_model::PackId::parse(&checked.manifest.id) {
        // Every install, so that a repeat after a failure here tells the state again.
        let changed_at = done
            .record
            .content_changed_at
            .as_deref()
            .and_then(|t| t.parse::<Timestamp>().ok());
        rt.state()
            .pack_installed(&id, &done.record.files_digest, changed_at, Timestamp::now())
            .map_err(PackError::Store)?;
    }
    // The index of /etc every view needs is made again at each install (RUNTIME §5.1);
    // a call that finds none makes it itself.
    let _ = crate::view_index::refresh_view_index(rt.home());
    let view_notes = view_notes(rt, &done.record);
    Ok(Installed {
        record: done.record,
        report,
        replaced: done.replaced,
        content_changed: done.content_changed,
        active: done.active,
        view_notes,
    })
}

/// What lint's `hcp_bin_reserved` cannot see (RUNTIME §5.1): a program of a pack other
/// than the bootstrap pack that resolves to the very file of the running `hcp` under
/// another name (a hard link, a symlink on `PATH`). A program that cannot be resolved is
/// left to the pin, which refuses it with its own code.
///
/// # Errors
/// [`PackError::BinUnsafe`] with code `hcp_bin_reserved`.
fn reserved_bins(pack: &CheckedPack, lookup: &pack::BinLookup) -> Result<(), PackError> {
    if hcp_lint::rules::hcp_bin_reserved::is_bootstrap(&pack.manifest) {
        return Ok(());
    }
    for program in pack.manifest.programs() {
        if let Ok(path) = pack::bins::resolve(&program, &pack.source_dir, lookup)
            && crate::prepare::is_running_hcp(&path)
        {
            return Err(PackError::BinUnsafe {
                code: Code::HcpBinReserved,
                reason: format!(
                    "it is the running `hcp` (`{}`), which only the bootstrap pack `{}` wraps",
                    path.display(),
                    hcp_lint::rules::hcp_bin_reserved::BOOTSTRAP_PACK
                ),
                program,
            });
        }
    }
    Ok(())
}

/// The notes of [`Installed::view_notes`] (RUNTIME §5.1: "warns when either lies outside
/// the view"): a pinned bin outside the system directories when the view binds less than
/// its prefix (the file alone, or its `bin` directory without the directory above), and
/// each file of a script's pinned interpreter that lies outside the system directories,
/// with what of it the view binds.
fn view_notes(rt: &Runtime, record: &hcp_store::pack::InstallRecord) -> Vec<String> {
    let homes =
        crate::workdir::machine_homes(std::env::var_os("HOME").map(std::path::PathBuf::from));
    let stores = [rt.home().root().to_owned()];
    let id = &record.pack_id;
    let mut notes = Vec::new();
    for b in &record.bins {
        let path = b.path.as_path();
        if let Some(d) = hcp_adapter::bin_dirs(path, &homes, &stores)
            .into_iter()
            .next()
        {
            let dir = path.parent();
            let cut = d == path
                || (dir.and_then(Path::file_name).is_some_and(|n| n == "bin")
                    && Some(d.as_path()) == dir);
            // A static executable loads nothing beside itself: the file is all it needs.
            if cut && !static_elf(path) {
                notes.push(format!(
                    "the bin `{}` of `{id}` lies outside the system directories and its calls see `{}` alone; add what else it needs with `packs.{id}.read` in `config.json`",
                    path.display(),
                    d.display()
                ));
            }
        }
        for f in b.interpreter.iter().flat_map(|i| i.files.iter()) {
            let shown = hcp_adapter::bin_dirs(&f.path, &homes, &stores);
            if let Some(d) = shown.first() {
                notes.push(format!(
                    "the interpreter `{}` of `{}` (pinned with it) lies outside the system directories and its calls see `{}` of it; add what else it needs with `packs.{id}.read` in `config.json`",
                    f.path.display(),
                    path.display(),
                    d.display()
                ));
            }
        }
    }
    notes
}

/// Whether `path` is a 64-bit little-endian ELF executable with no program interpreter
/// (`PT_INTERP`): statically linked, so its calls need no file of its directory to start.
/// Anything it cannot read as such (a script, another format, a file that does not read)
/// is not.
fn static_elf(path: &Path) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    const PT_INTERP: u32 = 3;
    let Ok(mut f) = std::fs::File::open(path) else {
        return false;
    };
    let mut head = [0u8; 64];
    if f.read_exact(&mut head).is_err() || &head[..6] != b"\x7fELF\x02\x01" {
        return false;
    }
    let u16_at = |o: usize| u16::from_le_bytes([head[o], head[o + 1]]);
    let mut off = [0u8; 8];
    off.copy_from_slice(&head[0x20..0x28]);
    let (phoff, phentsize, phnum) = (u64::from_le_bytes(off), u16_at(0x36), u16_at(0x38));
    if phentsize < 4 || phnum == 0 || f.seek(SeekFrom::Start(phoff)).is_err() {
        return false;
    }
    let mut table = vec![0u8; usize::from(phentsize) * usize::from(phnum)];
    if f.read_exact(&mut table).is_err() {
        return false;
    }
    !table
        .chunks_exact(usize::from(phentsize))
        .any(|ph| u32::from_le_bytes([ph[0], ph[1], ph[2], ph[3]]) == PT_INTERP)
}

pub use crate::refusal::pack_refusal;

/// `--join-family FAMILY` must name the family the pack declares (RUNTIME §8).
///
/// # Errors
/// [`PackError::FamilyNotDeclared`].
fn check_join(manifest: &hcp_model::Manifest, join: Option<&str>) -> Result<(), PackError> {
    let Some(given) = join else { return Ok(()) };
    let declared = manifest.binding.family.as_deref();
    if declared == Some(given) {
        return Ok(());
    }
    Err(PackError::FamilyNotDeclared {
        given: given.to_owned(),
        declared: declared.map_or_else(
            || "it declares no `binding.family`".to_owned(),
            |f| format!("it declares `binding.family` `{f}`"),
        ),
    })
}

/// The install's act of authority, under the store lock with the new copy staged: a
/// family another installed pack holds needs the owner's `join` (RUNTIME §8), then the
/// act is recorded (`install`, or `install --join-family` with the packs it joins).
///
/// # Errors
/// [`PackError::FamilyClaimed`]; the audit's refusal as [`PackError::Store`].
fn authorize_install(
    rt: &Runtime,
    made: &crate::authority::Act<'_>,
    manifest: &hcp_model::Manifest,
    join: Option<&str>,
    p: &pack::Pending<'_>,
) -> Result<(), PackError> {
    let family = manifest.family();
    let holders = family_holders(rt.home(), &manifest.id, family);
    // A reinstall of a pack already in the family (it claimed it first, or the owner
    // joined it) needs nothing more.
    let admitted = pack::load(rt.home(), &manifest.id).is_ok_and(|p| p.manifest.family() == family);
    let joins = !holders.is_empty() && !admitted;
    if joins && join != Some(family) {
        return Err(PackError::FamilyClaimed {
            family: family.to_owned(),
            holder: holders[0].clone(),
        });
    }
    let mut changed = serde_json::json!({
        "pack_id": p.record.pack_id,
        "files_digest": p.record.files_digest,
        "bins": p.record.bins.iter().map(|b| serde_json::json!({
            "path": b.path.to_string_lossy(),
            "sha256": b.sha256,
        })).collect::<Vec<_>>(),
        "replaced": p.replaced,
        "content_changed": p.content_changed,
        "active": p.active,
        "family": family,
    });
    if joins {
        changed["joined"] = serde_json::json!(holders);
    }
    let act = if joins {
        "install --join-family"
    } else {
        "install"
    };
    made.record_named(act, changed)?;
    Ok(())
}

/// The installed packs other than `id` whose binding family (`binding.family`, else their
/// id) is `family`, in id order. A pack that cannot be read is left out (its own
/// commands report it).
pub fn family_holders(home: &hcp_store::Home, id: &str, family: &str) -> Vec<String> {
    let Ok(ids) = pack::installed_ids(home) else {
        return Vec::new();
    };
    let mut holders: Vec<String> = ids
        .into_iter()
        .map(|i| i.to_string())
        .filter(|i| i != id)
        .filter(|i| pack::load(home, i).is_ok_and(|p| p.manifest.family() == family))
        .collect();
    holders.sort();
    holders
}

/// Removes pack `id` from the store of `rt` (its activation, bindings, stimuli, grants),
/// and what the state keeps for it ([`hcp_store::state::State::pack_removed`]).
///
/// # Errors
/// The store's (`not_installed` …).
pub fn uninstall(rt: &Runtime, id: &str) -> Result<Removed, PackError> {
    uninstall_purging(rt, id, false)
}

/// [`uninstall`], an act of authority (RUNTIME §6): recorded (`uninstall`, with the pack,
/// whether it was active and whether its tenant homes are purged too) under the store
/// lock before anything is removed; a record that cannot be made refuses it, the store as
/// it was. `purge` only says so in the record: the caller removes the homes
/// ([`crate::home::purge`]) once this returns.
///
/// # Errors
/// As [`uninstall`]; the audit's refusal (74).
pub fn uninstall_purging(rt: &Runtime, id: &str, purge: bool) -> Result<Removed, PackError> {
    crate::backend::ready(rt).map_err(PackError::Store)?;
    let made = crate::authority::Act::by_owner(rt, "uninstall")?;
    let authorize = |r: &Removed| -> Result<(), PackError> {
        made.record(
            serde_json::json!({"pack_id": r.id, "was_active": r.was_active, "purge": purge}),
        )?;
        Ok(())
    };
    let removed = made.settle(
        pack::uninstall_with(rt.home(), id, &authorize),
        PackError::code,
    )?;
    if let Ok(pid) = hcp_model::PackId::parse(&removed.id) {
        rt.state().pack_removed(&pid)?;
    }
    Ok(removed)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::static_elf;

    /// An ELF64 little-endian header with one program header of type `p_type`.
    fn elf(p_type: u32) -> Vec<u8> {
        let mut b = vec![0u8; 64 + 56];
        b[..6].copy_from_slice(b"\x7fELF\x02\x01");
        b[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
        b[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        b[0x38..0x3a].copy_from_slice(&1u16.to_le_bytes());
        b[64..68].copy_from_slice(&p_type.to_le_bytes());
        b
    }

    #[test]
    fn only_an_elf_without_an_interpreter_is_static() {
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str, bytes: &[u8]| {
            let p = dir.path().join(name);
            std::fs::write(&p, bytes).unwrap();
            p
        };
        assert!(static_elf(&file("static", &elf(1))));
        assert!(!static_elf(&file("dynamic", &elf(3))));
        assert!(!static_elf(&file("script", b"#!/bin/sh\necho hi\n")));
        assert!(!static_elf(&file("short", &elf(1)[..80])));
        assert!(!static_elf(&dir.path().join("missing")));
    }
}
