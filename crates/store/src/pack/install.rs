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
    /// The act of authority's gate (RUNTIME §6): called under the store lock once the new
    /// copy is staged and before anything is put in place, with what the install is about
    /// to do. An `Err` refuses the install and leaves the store as it was (the staged copy
    /// is removed): the caller records the act here, and checks what must be checked under
    /// the lock (a `binding.family` another pack holds, RUNTIME §8).
    pub authorize: Option<&'a Authorize<'a>>,
}

/// The act of authority's gate of an install ([`InstallOptions::authorize`]).
pub type Authorize<'a> = dyn Fn(&Pending<'_>) -> Result<(), PackError> + 'a;

/// What an install is about to do, as [`InstallOptions::authorize`] is shown it.
#[derive(Debug, Clone, Copy)]
pub struct Pending<'a> {
    /// The record the install will put in place.
    pub record: &'a InstallRecord,
    /// Whether an installed copy is replaced.
    pub replaced: bool,
    /// Whether the replaced copy had different content (the rug-pull guard fires).
    pub content_changed: bool,
    /// Whether the pack will be active.
    pub active: bool,
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

/// A pack the caller has read and checked (`hcp_runtime::install` reads it without
/// following a symlink and lints it): its three files' bytes, what they parse to, and the
/// canonical source directory its relative programs are resolved in. Install writes
/// exactly these bytes.
#[derive(Debug, Clone)]
pub struct CheckedPack {
    /// `surface.json`, parsed from [`CheckedPack::files`].
    pub manifest: Manifest,
    /// `policy.json`, parsed from [`CheckedPack::files`].
    pub policy: PolicyFile,
    /// The bytes of `surface.json`, `policy.json` and `HARNESS.md`, in that order.
    pub files: [Vec<u8>; 3],
    /// The pack directory, absolute and canonical.
    pub source_dir: PathBuf,
    /// The OpenAPI document beside a `kind: openapi` pack whose `openapi.spec` is a path,
    /// as the caller read it with the pack (RUNTIME §1.3); a URL spec is read by install.
    pub document: Option<super::openapi::BesideDocument>,
}

/// Why [`CheckedPack::parse`] refuses: a file that is not UTF-8 or does not parse, an id
/// that cannot be a pack id, or a policy for another id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseRefusal {
    /// The file (`surface.json`, `policy.json`).
    pub file: &'static str,
    /// The code (`bad_json`, `duplicate_key`, … `bad_pack_id`, `surface_id_mismatch`).
    pub code: hcp_model::Code,
    /// The message.
    pub message: String,
    /// 1-based line and column, when known.
    pub at: Option<(usize, usize)>,
}

impl CheckedPack {
    /// The checks install relies on whatever a lint rule set holds: both JSON files parse
    /// strictly, the id is a valid pack id (it becomes a directory name) and the policy
    /// names the same id.
    ///
    /// # Errors
    /// The first [`ParseRefusal`].
    pub fn parse(files: [Vec<u8>; 3], source_dir: PathBuf) -> Result<Self, ParseRefusal> {
        use hcp_model::{Code, MANIFEST_FILE, POLICY_FILE};
        let text = |i: usize, file: &'static str| {
            std::str::from_utf8(&files[i]).map_err(|e| {
                let valid = &files[i][..e.valid_up_to()];
                let at = hcp_model::span::Location::of_offset(
                    &String::from_utf8_lossy(valid),
                    valid.len(),
                );
                ParseRefusal {
                    file,
                    code: Code::BadJson,
                    message: "the file is not UTF-8".into(),
                    at: Some((at.line, at.column)),
                }
            })
        };
        let parsed = |file: &'static str, e: hcp_model::ParseError| ParseRefusal {
            file,
            code: e.code.code(),
            message: e.message,
            at: Some((e.line, e.column)),
        };
        let manifest = hcp_model::parse_manifest(text(0, MANIFEST_FILE)?)
            .map_err(|e| parsed(MANIFEST_FILE, e))?;
        let policy =
            hcp_model::parse_policy(text(1, POLICY_FILE)?).map_err(|e| parsed(POLICY_FILE, e))?;
        if let Err(message) = hcp_model::validate_pack_id(&manifest.id) {
            return Err(ParseRefusal {
                file: MANIFEST_FILE,
                code: Code::BadPackId,
                message,
                at: None,
            });
        }
        if policy.surface_id != manifest.id {
            return Err(ParseRefusal {
                file: POLICY_FILE,
                code: Code::SurfaceIdMismatch,
                message: format!(
                    "`surface_id` is `{}` but the manifest id is `{}`",
                    policy.surface_id, manifest.id
                ),
                at: None,
            });
        }
        Ok(Self {
            manifest,
            policy,
            files,
            source_dir,
            document: None,
        })
    }
}

/// What an install did.
#[derive(Debug, Clone)]
pub struct Installed {
    /// The record now in `packs/<id>/.hcp/record.json`.
    pub record: InstallRecord,
    /// Whether an installed copy was replaced (`--force`).
    pub replaced: bool,
    /// Whether the replaced copy had different content (the rug-pull guard fired).
    pub content_changed: bool,
    /// Whether the pack is active after the install.
    pub active: bool,
}

/// Installs `pack` into `home` (RUNTIME §3): pins its programs, stages its files and its
/// record, puts them in place in one rename, (re)writes its skill when it is or becomes
/// active. Install policy (what may be installed: lint) is the caller's
/// (`hcp_runtime::install`); this writes exactly the bytes of `pack`.
///
/// Nothing from the pack is executed and no symlink is followed. All writes happen under
/// [`StoreLock`].
///
/// # Errors
/// [`PackError::BinMissing`], [`PackError::BinUnsafe`], [`PackError::Openapi`] (a
/// `kind: openapi` document that cannot be read or used, or a verb naming no operation of
/// it) before the store is touched;
/// [`PackError::AlreadyInstalled`] without `force`; [`PackError::Store`] for an unusable
/// home or an I/O failure.
pub fn install(
    home: &Home,
    pack: &CheckedPack,
    opts: &InstallOptions<'_>,
) -> Result<Installed, PackError> {
    let step = |s: InstallStep| {
        if let Some(h) = opts.step_hook {
            h(s);
        }
    };
    let manifest = &pack.manifest;
    let source_dir = &pack.source_dir;
    let id = manifest.id.clone();

    let mut files = BTreeMap::new();
    for (name, bytes) in hcp_model::PACK_FILES.iter().zip(&pack.files) {
        files.insert((*name).to_owned(), sha256_tagged(bytes));
    }
    let digest = files_digest(&files);
    let mut pins = Vec::new();
    for program in manifest.programs() {
        pins.push(bins::pin(&program, source_dir, &opts.lookup)?);
    }
    // `kind: openapi`: the document is read, checked and compiled before anything is
    // written; its digest joins the rug-pull guard's notion of content.
    let openapi = super::openapi::prepare(manifest, pack.document.as_ref(), source_dir)?;

    ensure_writable(home)?;
    let lock = StoreLock::acquire(home)?;
    // The state ledger lists the record (`crate::ledger`): it must take the write before
    // anything changes.
    crate::ledger::ready(home, &lock)?;
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
        // A record whose MAC does not hold is no record: the content counts as changed.
        crate::atomic::read_record(&p)
            .ok()
            .flatten()
            .and_then(|b| InstallRecord::open(home, &id, &p, &b).ok())
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
            kind: kind_str(manifest).to_owned(),
            verb_count: manifest.verbs.len(),
        },
        openapi: openapi.as_ref().map(|p| p.pin.clone()),
        // The grants that cover the pack, counted from the grant files under this lock.
        grants: crate::grant::counts_for(home, &lock, &id, old.as_ref().map(|o| &o.grants)),
    };

    let stage = staging.join(format!("{id}.{}", uuid::Uuid::now_v7().simple()));
    let io = |action: &'static str, p: &Path| {
        let p = p.to_path_buf();
        move |e| StoreError::io(action, p, e)
    };
    std::fs::create_dir(&stage).map_err(io("create", &stage))?;
    for (i, (name, bytes)) in hcp_model::PACK_FILES.iter().zip(&pack.files).enumerate() {
        let p = stage.join(name);
        fsops::write_new_synced(&p, bytes).map_err(io("write", &p))?;
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
    // Sealed for the name it has once in place (`packs/<id>/.hcp/record.json`).
    let (sealed, mac) = record.seal_mac(home, &rpath)?;
    fsops::write_new_synced(&rpath, &sealed).map_err(io("write", &rpath))?;
    fsops::sync_dir(&rdir).map_err(io("sync", &rdir))?;
    fsops::sync_dir(&stage).map_err(io("sync", &stage))?;
    step(InstallStep::Staged);

    let will_be_active = read::is_active(home, &id) || opts.activate;
    if let Some(authorize) = opts.authorize {
        let pending = Pending {
            record: &record,
            replaced: exists,
            content_changed,
            active: will_be_active,
        };
        if let Err(e) = authorize(&pending) {
            let _ = std::fs::remove_dir_all(&stage);
            let _ = fsops::sync_dir(&staging);
            return Err(e);
        }
    }

    // The ledger believes the new record from here on, and the old one until the swap
    // is noted below: a process killed in between leaves either pack whole.
    let placed = target.join(RECORD_DIR).join(RECORD_FILE);
    crate::ledger::stage(home, &lock, &placed, &mac)?;
    // The skill must follow the swap: journal it first, so a crash before the skill is
    // written is repaired by the next writer.
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
    // The record in place is the one the ledger vouches for from now on.
    crate::ledger::note(home, &lock, &[(&placed, Some(mac))])?;
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
    uninstall_with(home, id, &|_| Ok(()))
}

/// [`uninstall`], with the act of authority's gate (RUNTIME §6): `authorize` is called
/// under the store lock, once the pack is known to be installed and before anything is
/// removed, with what will be removed (`was_active` tells whether it is active). An `Err`
/// refuses the uninstall and leaves the store as it was.
///
/// # Errors
/// As [`uninstall`]; `authorize`'s error.
pub fn uninstall_with(
    home: &Home,
    id: &str,
    authorize: &dyn Fn(&Removed) -> Result<(), PackError>,
) -> Result<Removed, PackError> {
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
    // A damaged grant file may hold grants on the pack, and a ledger that cannot take a
    // write would keep the record: refused before anything changes, and before the act is
    // recorded.
    crate::grant::check_files(home)?;
    crate::ledger::ready(home, &lock)?;
    authorize(&Removed {
        id: id.to_string(),
        was_active: read::is_active(home, id.as_str()),
    })?;
    let staging = home.ensure(StoreDir::Staging)?;
    clean_staging(&staging)?;
    let was_active = crate::skill::deactivate_locked(home, &lock, id.as_str())?;
    remove_pack_state(home, &lock, id.as_str())?;
    let grave: PathBuf = staging.join(format!("{id}.{}.removed", uuid::Uuid::now_v7().simple()));
    std::fs::rename(&target, &grave).map_err(|e| StoreError::io("move aside", &target, e))?;
    let packs = home.dir(StoreDir::Packs);
    fsops::sync_dir(&packs).map_err(|e| StoreError::io("sync", &packs, e))?;
    let record = target.join(RECORD_DIR).join(RECORD_FILE);
    crate::ledger::note(home, &lock, &[(&record, None)])?;
    std::fs::remove_dir_all(&grave).map_err(|e| StoreError::io("remove", &grave, e))?;
    drop(lock);
    Ok(Removed {
        id: id.to_string(),
        was_active,
    })
}
