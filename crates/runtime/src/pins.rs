//! The one bin verifier (RUNTIME §3, §5 step 9) for every caller — exec, sense, doctor:
//! an install record's pin checked by `hcp_adapter::verify_bin`, with the stat fast path
//! across calls; for a script, each file of the interpreter install pinned with it too
//! (RUNTIME §5.1), which is then what runs it (`hcp_adapter::VerifiedBin::run_by`).
//!
//! After a verify that had to hash the bin, the stat fingerprint it vouched for is kept in
//! `packs/<id>/.hcp/fingerprints.json` so the next call checks a `stat` instead of
//! hashing the file (see `hcp_adapter::pin`); a call keeps it only once it is admitted
//! ([`Fresh`]), so a refused call writes nothing. An entry counts only for the exact pin (path
//! and sha256) of the current install record, so an entry left by an older install, or
//! written while a reinstall swapped the pack directory, is ignored. The file is replaced
//! whole by rename; concurrent calls may each write it and any of their writes is valid.

use crate::refusal::Refusal;
use hcp_adapter::{AdapterError, BinPin, StatFingerprint, VerifiedBin};
use hcp_model::Code;
use hcp_store::pack::{InstalledPack, PinnedBin, PinnedFile};
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

const FILE: &str = ".hcp/fingerprints.json";

#[derive(Debug, Default, Serialize, Deserialize)]
struct Cache {
    entries: Vec<Entry>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Entry {
    path: PathBuf,
    sha256: String,
    fingerprint: StatFingerprint,
}

/// The fingerprint kept for the file pinned at `path` with digest `sha256`, when there is
/// one for exactly this pin.
fn cached(pack_dir: &Path, path: &Path, sha256: &str) -> Option<StatFingerprint> {
    // A cache only: a FIFO, a link or an oversized file there is no cache (the bin is
    // hashed), never read to its end or waited on.
    let bytes = hcp_store::atomic::read_record(&pack_dir.join(FILE)).ok()??;
    let cache: Cache = serde_json::from_slice(&bytes).ok()?;
    cache
        .entries
        .into_iter()
        .find(|e| e.path == path && e.sha256 == sha256)
        .map(|e| e.fingerprint)
}

/// The fingerprints of the bins a verify just hashed, not yet kept: a call keeps them
/// ([`Fresh::keep`]) only once it is admitted, so a call refused before it runs (its
/// audit cannot be written, RUNTIME §6) writes nothing, not even this cache.
#[derive(Debug, Default)]
pub struct Fresh {
    pack_dir: PathBuf,
    entries: Vec<Entry>,
}

impl Fresh {
    /// Notes the fingerprint of a bin that was just hashed and matched `pin`.
    fn note(&mut self, pack_dir: &Path, pin: &BinPin, verified: &VerifiedBin) {
        let Some(fingerprint) = verified.refreshed() else {
            return;
        };
        pack_dir.clone_into(&mut self.pack_dir);
        self.entries.push(Entry {
            path: pin.path.clone(),
            sha256: pin.sha256.to_string(),
            fingerprint,
        });
    }

    /// Keeps the fingerprints noted in the pack's cache (`packs/<id>/.hcp/fingerprints.json`),
    /// once; the next call then checks a `stat` instead of hashing. Best effort: a
    /// failure only means the next call hashes again.
    pub fn keep(&mut self) {
        if self.entries.is_empty() {
            return;
        }
        let path = self.pack_dir.join(FILE);
        let mut cache: Cache = hcp_store::atomic::read_record(&path)
            .ok()
            .flatten()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        for e in self.entries.drain(..) {
            cache.entries.retain(|o| o.path != e.path);
            cache.entries.push(e);
        }
        if let Ok(bytes) = serde_json::to_vec(&cache) {
            let _ = hcp_store::atomic::write_atomic(&path, &bytes);
        }
    }
}

/// The adapter's pin of an install record's bin.
///
/// # Errors
/// `store_damaged` when the record's digest is not a sha256 digest.
pub fn bin_pin(pin: &PinnedBin, fingerprint: Option<StatFingerprint>) -> Result<BinPin, Refusal> {
    file_pin(&pin.program, &pin.path, &pin.sha256, fingerprint)
}

/// The adapter's pin of a file pinned at `path` with `sha256` for `program`.
fn file_pin(
    program: &str,
    path: &Path,
    sha256: &str,
    fingerprint: Option<StatFingerprint>,
) -> Result<BinPin, Refusal> {
    Ok(BinPin {
        path: path.to_owned(),
        sha256: sha256.parse().map_err(|_| {
            Refusal::new(
                Code::StoreDamaged,
                format!("pin of `{program}` is not a sha256 digest"),
            )
        })?,
        fingerprint,
    })
}

/// The pin of the bin `program` of `pack`, with the fingerprint kept for it.
///
/// # Errors
/// `bin_missing` when the record has no pin for `program`; `store_damaged` for a bad pin.
pub fn pin_of(pack: &InstalledPack, program: &str) -> Result<BinPin, Refusal> {
    let pin = pack.record.bin(program).ok_or_else(|| {
        Refusal::new(
            Code::BinMissing,
            format!("program `{program}` has no pin in the install record"),
        )
        .hint(format!(
            "reinstall with `hcp install --force`: pack `{}`",
            pack.id
        ))
    })?;
    bin_pin(pin, cached(&pack.dir, &pin.path, &pin.sha256))
}

/// Verifies the bin `program` of `pack` against its pin and holds it open for the run:
/// the stat fast path when a fingerprint is kept, else a hash (whose fingerprint is then
/// kept).
///
/// # Errors
/// As [`pin_of`] and [`verify_pin`].
pub fn verify(pack: &InstalledPack, program: &str) -> Result<VerifiedBin, Refusal> {
    let (verified, mut fresh) = verify_deferred(pack, program)?;
    fresh.keep();
    Ok(verified)
}

/// [`verify`], the fingerprints of what it hashed returned rather than kept: a call keeps
/// them once admitted ([`Fresh::keep`]).
///
/// # Errors
/// As [`verify`].
pub fn verify_deferred(
    pack: &InstalledPack,
    program: &str,
) -> Result<(VerifiedBin, Fresh), Refusal> {
    let mut fresh = Fresh::default();
    let verified = verify_pin_into(pack, &pin_of(pack, program)?, &mut fresh)?;
    if !verified.is_script() {
        return Ok((verified, fresh));
    }
    let reinstall = || {
        format!(
            "review the script and its interpreter, then `hcp install --force` the pack `{}`",
            pack.id
        )
    };
    let Some(interpreter) = pack
        .record
        .bin(program)
        .and_then(|b| b.interpreter.as_ref())
    else {
        return Err(Refusal::new(
            Code::BinChanged,
            format!(
                "the interpreter of the script `{}` was not pinned at install (an install by an earlier hcp), so a call cannot know what runs it",
                verified.path().display()
            ),
        )
        .hint(reinstall()));
    };
    let mut files = Vec::with_capacity(interpreter.files.len());
    for f in &interpreter.files {
        files.push(verify_interpreter(
            pack,
            program,
            verified.path(),
            f,
            &mut fresh,
        )?);
    }
    let argv = interpreter.argv.iter().map(OsString::from).collect();
    let verified = verified
        .run_by(argv, files)
        .map_err(|e| Refusal::adapter(&e).hint(reinstall()))?;
    Ok((verified, fresh))
}

/// Verifies one file of a script's pinned interpreter (`bin_missing` when it is gone,
/// `bin_changed` when it changed, each naming it), with the stat fast path.
fn verify_interpreter(
    pack: &InstalledPack,
    program: &str,
    script: &Path,
    f: &PinnedFile,
    fresh: &mut Fresh,
) -> Result<VerifiedBin, Refusal> {
    let pin = file_pin(
        program,
        &f.path,
        &f.sha256,
        cached(&pack.dir, &f.path, &f.sha256),
    )?;
    let verified = hcp_adapter::verify_bin(&pin).map_err(|e| {
        let r = Refusal::adapter(&e);
        Refusal::new(
            r.code,
            format!(
                "the interpreter of `{}` (pinned at install): {}",
                script.display(),
                r.message
            ),
        )
        .hint(format!(
            "the interpreter changed or moved since install; review it, then `hcp install --force` the pack `{}`",
            pack.id
        ))
    })?;
    if verified.hashed() {
        fresh.note(&pack.dir, &pin, &verified);
    }
    Ok(verified)
}

/// Verifies `pin`, a pin of `pack` ([`pin_of`]).
///
/// # Errors
/// The adapter's `bin_missing`, `bin_not_executable`, `bin_changed`, with a hint to
/// reinstall.
pub fn verify_pin(pack: &InstalledPack, pin: &BinPin) -> Result<VerifiedBin, Refusal> {
    let mut fresh = Fresh::default();
    let verified = verify_pin_into(pack, pin, &mut fresh)?;
    fresh.keep();
    Ok(verified)
}

fn verify_pin_into(
    pack: &InstalledPack,
    pin: &BinPin,
    fresh: &mut Fresh,
) -> Result<VerifiedBin, Refusal> {
    let verified = hcp_adapter::verify_bin(pin).map_err(|e| {
        Refusal::adapter(&e).hint(format!(
            "the program changed or moved since install; review it, then `hcp install --force` the pack `{}`",
            pack.id
        ))
    })?;
    if verified.hashed() {
        fresh.note(&pack.dir, pin, &verified);
    }
    Ok(verified)
}

/// A full check of one pinned bin and the files of its pinned interpreter, hashing each
/// whatever its fingerprint (`hcp doctor`): `Ok`, or why not, as `(missing, reason)`.
///
/// # Errors
/// `(true, reason)` when a file is gone, `(false, reason)` when one changed or is not an
/// executable file.
pub fn check(pin: &PinnedBin) -> Result<(), (bool, String)> {
    check_file(&pin.program, "pinned bin", &pin.path, &pin.sha256)?;
    for f in pin.interpreter.iter().flat_map(|i| i.files.iter()) {
        check_file(&pin.program, "pinned interpreter", &f.path, &f.sha256)?;
    }
    Ok(())
}

fn check_file(program: &str, what: &str, path: &Path, sha256: &str) -> Result<(), (bool, String)> {
    let p = file_pin(program, path, sha256, None).map_err(|r| (false, r.message))?;
    match hcp_adapter::verify_bin(&p) {
        Ok(_) => Ok(()),
        Err(AdapterError::BinMissing { path, source }) => Err((
            true,
            format!(
                "{what} `{}` of `{program}` is missing: {}",
                path.display(),
                source.map_or_else(|| "it is not an absolute path".into(), |e| e.to_string())
            ),
        )),
        Err(AdapterError::BinChanged {
            path,
            pinned,
            actual,
        }) => Err((
            false,
            format!(
                "{what} `{}` of `{program}` changed since install: digest is `{actual}`, pinned `{pinned}`",
                path.display(),
            ),
        )),
        Err(e) => Err((
            false,
            format!(
                "{what} `{}` of `{program}` changed since install: {e}",
                path.display(),
            ),
        )),
    }
}
