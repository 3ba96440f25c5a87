//! `install` and `uninstall` (RUNTIME §3).

use super::bins::{self, BinLookup};
use super::fsops;
use super::read::{self, parse_id};
use super::record::{
    InstallRecord, PackSummaryFields, RECORD_DIR, RECORD_FILE, files_digest, sha256_tagged,
};
use super::{PackError, ensure_writable, pack_dir, remove_pack_state};
use crate::error::StoreError;
use crate::home::{Home, StoreDir};
use crate::lock::StoreLock;
use hcp_lint::{Diagnostic, Report};
use hcp_model::{Manifest, PolicyFile};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A named point of an install, in order. [`InstallOptions::step_hook`] is called at each
/// one; the `hcp` binary's debug builds use it as a crash-test seam
/// (`HCP_TEST_ABORT_AT=<name>` aborts the process there).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstallStep {
    /// The store lock is held; nothing has been written.
    Locked,
    /// Leftovers of earlier installs were removed from `staging/`.
    StagingCleaned,
    /// The first file is staged, the others are not.
    StagedPartial,
    /// The whole copy and its record are staged and synced.
    Staged,
    /// The staged copy is in place (`rename` or `renameat2(RENAME_EXCHANGE)`); on a
    /// reinstall the old copy now sits in `staging/`.
    Swapped,
    /// The old copy is removed.
    OldRemoved,
    /// `skills/<id>/SKILL.md` is (re)written (when the pack is or becomes active).
    SkillWritten,
    /// `state/active/<id>` exists (`--activate`).
    Activated,
}

impl InstallStep {
    /// Every step, in order.
    pub const ALL: [InstallStep; 8] = [
        Self::Locked,
        Self::StagingCleaned,
        Self::StagedPartial,
        Self::Staged,
        Self::Swapped,
        Self::OldRemoved,
        Self::SkillWritten,
        Self::Activated,
    ];

    /// The step's stable kebab-case name (`staged-partial`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Locked => "locked",
            Self::StagingCleaned => "staging-cleaned",
            Self::StagedPartial => "staged-partial",
            Self::Staged => "staged",
            Self::Swapped => "swapped",
            Self::OldRemoved => "old-removed",
            Self::SkillWritten => "skill-written",
            Self::Activated => "activated",
        }
    }
}

/// How to install.
#[derive(Default)]
pub struct InstallOptions<'a> {
    /// Replace an installed pack of the same id.
    pub force: bool,
    /// Also activate the pack (SKILL.md and `state/active/<id>`), under the same lock.
    pub activate: bool,
    /// Where bare program names are looked up (the installing process's `PATH`).
    pub lookup: BinLookup,
    /// Called at each [`InstallStep`] that is reached.
    pub step_hook: Option<&'a dyn Fn(InstallStep)>,
}

impl std::fmt::Debug for InstallOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InstallOptions")
            .field("force", &self.force)
            .field("activate", &self.activate)
            .field("lookup", &self.lookup)
            .finish_non_exhaustive()
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
}

/// Lints and installs the pack in `dir` into `home` (RUNTIME §3).
///
/// Nothing from the pack is executed and no symlink is followed. The bytes written are the
/// bytes linted. All writes happen under [`StoreLock`].
///
/// # Errors
/// [`PackError::Unreadable`], [`PackError::Lint`], [`PackError::BinMissing`],
/// [`PackError::BinUnsafe`], [`PackError::Openapi`] (a `kind: openapi` document that
/// cannot be read or used, or a verb naming no operation of it) before the store is
/// touched; [`PackError::AlreadyInstalled`]
/// without `force`; [`PackError::Store`] for an unusable home or an I/O failure.
pub fn install(home: &Home, dir: &Path, opts: &InstallOptions<'_>) -> Result<Installed, PackError> {
    let step = |s: InstallStep| {
        if let Some(h) = opts.step_hook {
            h(s);
        }
    };
    let src = hcp_lint::read_pack(dir).map_err(|source| PackError::Unreadable {
        path: dir.to_path_buf(),
        source,
    })?;
    let source_dir = std::fs::canonicalize(dir).map_err(|source| PackError::Unreadable {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut report = hcp_lint::check(&src);
    let parsed = if report.has_errors() {
        None
    } else {
        parse_checked(&src, &mut report)
    };
    let (manifest, _policy) = match parsed {
        Some(p) if !report.has_errors() => p,
        _ => return Err(PackError::Lint(Box::new(report))),
    };
    let id = manifest.id.clone();

    let mut files = BTreeMap::new();
    for name in hcp_model::PACK_FILES {
        files.insert(
            name.to_owned(),
            sha256_tagged(src.file(name).unwrap_or_default()),
        );
    }
    let digest = files_digest(&files);
    let mut pins = Vec::new();
    for program in manifest.programs() {
        pins.push(bins::pin(&program, &source_dir, &opts.lookup)?);
    }
    // `kind: openapi`: the document is read, checked and compiled before anything is
    // written; its digest joins the rug-pull guard's notion of content.
    let openapi = super::openapi::prepare(&manifest, src.document.as_ref(), &source_dir)?;

    ensure_writable(home)?;
    let lock = StoreLock::acquire(home)?;
    step(InstallStep::Locked);
    let staging = home.ensure(StoreDir::Staging)?;
    let packs = home.ensure(StoreDir::Packs)?;
    clean_staging(&staging)?;
    crate::skill::repair_locked(home, &lock)?;
    step(InstallStep::StagingCleaned);

    let target = pack_dir(home, &id);
    let exists = std::fs::symlink_metadata(&target).is_ok();
    if exists && !opts.force {
        return Err(PackError::AlreadyInstalled { id });
    }
    // A pack that will be active must be exportable before anything changes (RUNTIME §10).
    if read::is_active(home, &id) || opts.activate {
        crate::skill::preflight_locked(home, &lock, &id)?;
    }
    let old = if exists {
        let p = target.join(RECORD_DIR).join(RECORD_FILE);
        std::fs::read(&p)
            .ok()
            .and_then(|b| InstallRecord::from_bytes(&b, &p).ok())
    } else {
        None
    };
    let now = jiff::Timestamp::now().to_string();
    let doc_digest = openapi.as_ref().map(|p| p.pin.sha256.as_str());
    let (content_changed, content_changed_at) = match (&old, exists) {
        (Some(o), _)
            if o.files_digest == digest
                && o.openapi.as_ref().map(|p| p.sha256.as_str()) == doc_digest =>
        {
            (false, o.content_changed_at.clone())
        }
        // A damaged or missing old record: treat the content as changed (fail closed).
        (_, true) => (true, Some(now.clone())),
        (_, false) => (false, None),
    };
    let record = InstallRecord {
        pack_id: id.clone(),
        installed_at: now,
        // The record is JSON: a non-UTF-8 source path is kept lossily (it is informative;
        // pins and digests are what is checked).
        source: PathBuf::from(source_dir.to_string_lossy().into_owned()),
        files,
        files_digest: digest,
        bins: pins,
        content_changed_at,
        summary: PackSummaryFields {
            name: manifest.name.clone(),
            kind: kind_str(&manifest).to_owned(),
            verb_count: manifest.verbs.len(),
        },
        openapi: openapi.as_ref().map(|p| p.pin.clone()),
    };

    let stage = staging.join(format!("{id}.{}", uuid::Uuid::now_v7().simple()));
    let io = |action: &'static str, p: &Path| {
        let p = p.to_path_buf();
        move |e| StoreError::io(action, p, e)
    };
    std::fs::create_dir(&stage).map_err(io("create", &stage))?;
    for (i, name) in hcp_model::PACK_FILES.iter().enumerate() {
        let p = stage.join(name);
        fsops::write_new_synced(&p, src.file(name).unwrap_or_default()).map_err(io("write", &p))?;
        if i == 0 {
            step(InstallStep::StagedPartial);
        }
    }
    let rdir = stage.join(RECORD_DIR);
    std::fs::create_dir(&rdir).map_err(io("create", &rdir))?;
    if let Some(p) = &openapi {
        for (name, bytes) in [
            (super::openapi::DOCUMENT_FILE, &p.document),
            (super::openapi::VERBS_FILE, &p.verbs),
        ] {
            let path = rdir.join(name);
            fsops::write_new_synced(&path, bytes).map_err(io("write", &path))?;
        }
    }
    let rpath = rdir.join(RECORD_FILE);
    fsops::write_new_synced(&rpath, &record.to_bytes()).map_err(io("write", &rpath))?;
    fsops::sync_dir(&rdir).map_err(io("sync", &rdir))?;
    fsops::sync_dir(&stage).map_err(io("sync", &stage))?;
    step(InstallStep::Staged);

    // The skill must follow the swap: journal it first, so a crash before the skill is
    // written is repaired by the next writer.
    let will_be_active = read::is_active(home, &id) || opts.activate;
    if will_be_active {
        crate::skill::journal_locked(home, &lock, &id, opts.activate)?;
    }
    if exists {
        fsops::rename_exchange(&stage, &target).map_err(io("swap into place", &target))?;
    } else {
        fsops::rename_noreplace(&stage, &target).map_err(io("move into place", &target))?;
    }
    fsops::sync_dir(&packs).map_err(io("sync", &packs))?;
    fsops::sync_dir(&staging).map_err(io("sync", &staging))?;
    step(InstallStep::Swapped);
    if exists {
        // `stage` now holds the old copy.
        std::fs::remove_dir_all(&stage).map_err(io("remove", &stage))?;
        step(InstallStep::OldRemoved);
    }

    let was_active = read::is_active(home, &id);
    let active = was_active || opts.activate;
    if active {
        let pack = read::load(home, &id)?;
        crate::skill::write_skill_locked(home, &lock, &pack)?;
        step(InstallStep::SkillWritten);
        if !was_active {
            crate::skill::mark_active_locked(home, &lock, &id)?;
        }
        step(InstallStep::Activated);
        crate::skill::journal_done_locked(home, &lock, &id)?;
    }
    drop(lock);
    Ok(Installed {
        record,
        report,
        replaced: exists,
        content_changed,
        active,
    })
}

fn kind_str(m: &Manifest) -> &'static str {
    match m.kind {
        hcp_model::Kind::Wrap => "wrap",
        hcp_model::Kind::Composite => "composite",
        hcp_model::Kind::Openapi => "openapi",
    }
}

/// The checks install relies on whatever lint's rule set holds: both JSON files parse
/// strictly, the id is a valid pack id (it becomes a directory name) and the policy names
/// the same id. Findings are added to `report` as lint diagnostics (same codes).
fn parse_checked(
    src: &hcp_lint::PackSource,
    report: &mut Report,
) -> Option<(Manifest, PolicyFile)> {
    let text = |name: &str, report: &mut Report| -> Option<String> {
        let bytes = src.file(name)?;
        match std::str::from_utf8(bytes) {
            Ok(t) => Some(t.to_owned()),
            Err(_) => {
                report.push(Diagnostic::error("bad_json", "the file is not UTF-8").in_file(name));
                None
            }
        }
    };
    let parse_diag = |name: &str, e: hcp_model::ParseError| {
        let code = match e.code {
            hcp_model::ParseCode::BadJson => "bad_json",
            hcp_model::ParseCode::DuplicateKey => "duplicate_key",
            hcp_model::ParseCode::UnknownField => "unknown_field",
            hcp_model::ParseCode::BadLand => "bad_land",
            hcp_model::ParseCode::BadOperation => "bad_operation",
            hcp_model::ParseCode::BadVersion => "bad_version",
        };
        Diagnostic::error(code, e.message)
            .in_file(name)
            .at(e.line, e.column)
    };
    let mt = text(hcp_model::MANIFEST_FILE, report)?;
    let pt = text(hcp_model::POLICY_FILE, report)?;
    let manifest = match hcp_model::parse_manifest(&mt) {
        Ok(m) => m,
        Err(e) => {
            report.push(parse_diag(hcp_model::MANIFEST_FILE, e));
            return None;
        }
    };
    let policy = match hcp_model::parse_policy(&pt) {
        Ok(p) => p,
        Err(e) => {
            report.push(parse_diag(hcp_model::POLICY_FILE, e));
            return None;
        }
    };
    if let Err(msg) = hcp_model::validate_pack_id(&manifest.id) {
        if !report.diagnostics.iter().any(|d| d.code == "bad_pack_id") {
            report.push(Diagnostic::error("bad_pack_id", msg).in_file(hcp_model::MANIFEST_FILE));
        }
        return None;
    }
    if policy.surface_id != manifest.id
        && !report
            .diagnostics
            .iter()
            .any(|d| d.code == "surface_id_mismatch")
    {
        report.push(
            Diagnostic::error(
                "surface_id_mismatch",
                format!(
                    "`surface_id` is `{}` but the manifest id is `{}`",
                    policy.surface_id, manifest.id
                ),
            )
            .in_file(hcp_model::POLICY_FILE),
        );
    }
    Some((manifest, policy))
}

/// Removes everything in `staging/`: interrupted installs and old copies whose removal
/// was interrupted. Only called under the store lock, so no install is in progress.
fn clean_staging(staging: &Path) -> Result<(), StoreError> {
    let rd = std::fs::read_dir(staging).map_err(|e| StoreError::io("read", staging, e))?;
    for entry in rd {
        let entry = entry.map_err(|e| StoreError::io("read", staging, e))?;
        let p = entry.path();
        let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
        let r = if is_dir {
            std::fs::remove_dir_all(&p)
        } else {
            std::fs::remove_file(&p)
        };
        r.map_err(|e| StoreError::io("remove", p, e))?;
    }
    Ok(())
}

/// What `uninstall` removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removed {
    /// The pack id.
    pub id: String,
    /// Whether the pack was active (its SKILL.md and marker were removed).
    pub was_active: bool,
}

/// Removes pack `id`: its activation (marker and SKILL.md), the state other stores keep for
/// it (bindings, through a hook), then `packs/<id>` (moved into `staging/` with one rename,
/// then deleted). Under [`StoreLock`].
///
/// # Errors
/// [`PackError::NotInstalled`] for an unknown id or a text that is not a pack id;
/// [`PackError::Store`] for an unusable home or an I/O failure.
pub fn uninstall(home: &Home, id: &str) -> Result<Removed, PackError> {
    let id = parse_id(id)?;
    let target = pack_dir(home, id.as_str());
    if std::fs::symlink_metadata(&target).is_err() {
        return Err(PackError::NotInstalled { id: id.to_string() });
    }
    ensure_writable(home)?;
    let lock = StoreLock::acquire(home)?;
    if std::fs::symlink_metadata(&target).is_err() {
        return Err(PackError::NotInstalled { id: id.to_string() });
    }
    let staging = home.ensure(StoreDir::Staging)?;
    clean_staging(&staging)?;
    let was_active = crate::skill::deactivate_locked(home, &lock, id.as_str())?;
    remove_pack_state(home, &lock, id.as_str())?;
    let grave: PathBuf = staging.join(format!("{id}.{}.removed", uuid::Uuid::now_v7().simple()));
    std::fs::rename(&target, &grave).map_err(|e| StoreError::io("move aside", &target, e))?;
    let packs = home.dir(StoreDir::Packs);
    fsops::sync_dir(&packs).map_err(|e| StoreError::io("sync", &packs, e))?;
    std::fs::remove_dir_all(&grave).map_err(|e| StoreError::io("remove", &grave, e))?;
    drop(lock);
    Ok(Removed {
        id: id.to_string(),
        was_active,
    })
}
