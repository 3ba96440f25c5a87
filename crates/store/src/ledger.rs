//! The state ledger (RUNTIME §4 "Fault isolation", §6): `state/ledger.json`, what the
//! store's authority-carrying state files are *now*, so that an older copy of one put
//! back, or one put back after hcp removed it, is damage rather than authority.
//!
//! A state file's MAC ([`crate::stamp`]) binds its content to its name, not to time: a
//! copy of `state/grants/alice.json` saved before a `hcp revoke` and put back after it
//! still holds its MAC. The ledger closes that. It is one JSON object:
//!
//! ```json
//! {"version": 2, "generation": 7,
//!  "files": {"grants/alice.json": "<the file's mac>",
//!            "approvals/apr_….used": "sha256:…",
//!            "active/mail": "sha256:…",
//!            "bindings/alice/mail.json": "<the file's mac>",
//!            "../packs/mail/.hcp/record.json": "<the record's mac>"},
//!  "mac": "…"}
//! ```
//!
//! `files` maps each such file's path below `state/` to what it holds now: the `mac` of a
//! grant, session, approval or binding file (`bindings/<principal>/<family>.json`), the
//! `sha256:` digest of the bytes of a marker (an approval's `.used` marker, a pack's
//! activation marker `active/<id>`); and each install record, outside `state/`, by its path
//! from `state/` (`../packs/<id>/.hcp/record.json`) to its `mac`. A path that is not in
//! `files` is a file that must not exist. `generation` grows by one at every write. `mac` is 64 hex digits of HMAC-SHA-256 under the store's chain key of
//! `"hcp-state-ledger/1\n"` and the [`canonical_json`] of the object without `mac`.
//!
//! Every act that writes or removes such a file does so under the store lock and then
//! writes the ledger ([`note`]), before the lock is released; an admission that spends an
//! approval notes its `.used` marker under the store lock after the intent
//! ([`crate::state::FileState`]). A reader ([`vouch`]) checks a file against its entry:
//! one small file read and one HMAC per process and per version of the ledger (it is
//! kept while the file's inode, size and times stay the same). A mismatch found without
//! the lock is checked again under it, so a reader racing a writer never sees damage.
//! What does not match is damage for its own principal, session, approval or pack alone
//! (`store_damaged`), listed by `hcp doctor` with the repair of its kind.
//!
//! A process killed between a file and the ledger leaves that one file damaged (never
//! more authority: a revoke's file is refused as a grant's is), for its principal alone.
//!
//! Install records and bindings are vouched for by a ledger of version 2 on
//! ([`RECORDS_SINCE`]); a ledger of version 1 (this store's, written before) lists none, so
//! they are read by their MAC alone until the first call or act by this version enters
//! every one there under the store lock ([`migrate`], a `migrate` record whose `changed`
//! holds [`LEDGER_FIELD`]` = 2`). A ledger that cannot be believed at all (missing,
//! damaged, older than the trail) refuses every principal's call through its session and
//! grant files, and vouches for no install record or binding ([`vouch_record`]): every
//! call of a pack is refused, the owner's too, so an older pack directory or binding put
//! back with the ledger removed is never run; the owner's commands go on, `hcp state
//! reledger` among them.
//!
//! The ledger's own freshness: an act's completion record (`act made`) carries the
//! generation of the ledger it left ([`MADE_FIELD`]), and the trail's keyed anchor the
//! newest of them (`Anchor::ledger`), so a ledger put back together with the files it
//! vouched for is older than the anchor says: the first read of it in a process (the
//! anchor read first, then the ledger, so a reader racing an act never mistakes it) finds
//! that, and the ledger is believed by nothing, as a missing one, until `hcp state
//! reledger` ([`rebuild`]) writes it anew past every generation named. `hcp doctor` also
//! compares it with the whole trail ([`stale`]). Whoever restores the whole store —
//! trail, anchor and ledger together — is caught only by a witness (RUNTIME §6).
//!
//! A store of an earlier version has no ledger: its files are read as they are until the
//! first call or act by this version, which writes the ledger of what is there under the
//! store lock ([`migrate`]) and records a `migrate` act whose `changed` holds
//! [`LEDGER_FIELD`]; a store this version made says so in its `init` record and writes the
//! ledger at its first act. From then on a missing ledger (or one whose MAC does not hold)
//! refuses every file it would vouch for, and every act that would write one
//! ([`ready`]), until the owner writes it anew from the files there ([`rebuild`], `hcp
//! state reledger`, which `hcp doctor` names: [`unusable`]).

use crate::atomic::write_atomic;
use crate::audit::canonical_json;
use crate::error::{StoreError, StoreResult};
use crate::home::{Home, StoreDir};
use crate::lock::StoreLock;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The ledger's file name inside `state/`.
pub const LEDGER_FILE: &str = "ledger.json";

/// The domain tag of the ledger's MAC.
pub const LEDGER_TAG: &[u8] = b"hcp-state-ledger/1\n";

/// The field of an `init` or `migrate` record's `changed` that says the store keeps a
/// ledger from that record on (its value: [`LEDGER_VERSION`]).
pub const LEDGER_FIELD: &str = "state_ledger";

/// The field of an `act made` record's `changed` that holds the generation of the ledger
/// the act left, when it wrote the ledger; a `migrate` record that wrote the ledger holds
/// it too.
pub const MADE_FIELD: &str = "ledger";

/// Whether a record of `act` may name the generation of the ledger it left
/// ([`MADE_FIELD`]): an act's completion (`act made`), or a migration (`migrate`, which
/// is recorded as noticed, with no completion of its own).
pub fn names_ledger(act: &str) -> bool {
    act == crate::audit::ACT_MADE || act == "migrate"
}

/// The end of the reason of an install record or binding refused because the ledger
/// cannot be believed ([`vouch_record`]): its repair is `hcp state reledger`, not the
/// record's own.
pub const UNBELIEVED: &str = "so no install record or binding can be believed";

/// The hint of a refusal whose reason ends with [`UNBELIEVED`].
pub const UNBELIEVED_HINT: &str = "every pack is refused, the owner's calls too, until the owner writes the ledger anew from the files there: check `hcp list` and `hcp session list`, then `hcp state reledger`; `hcp doctor` names it";

/// The version of the ledger's format this version writes.
pub const LEDGER_VERSION: u64 = 2;

/// The first version of the ledger that lists install records and bindings (version 1
/// listed only grant, session and approval files and markers).
pub const RECORDS_SINCE: u64 = 2;

/// The ledger's content.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ledger {
    /// [`LEDGER_VERSION`], or 1 for a ledger written before install records and bindings
    /// were listed ([`RECORDS_SINCE`]).
    pub version: u64,
    /// One more at every write.
    pub generation: u64,
    /// Path below `state/` → the file's `mac`, or `sha256:` of a marker's bytes.
    pub files: BTreeMap<String, String>,
    /// Path → the `mac` of the install record or binding file that `files`' entry is
    /// replacing ([`stage`]): while an act is between the ledger and the file, either one
    /// is the file hcp wrote last. Settled by the act itself, or by the next write of the
    /// ledger when the act was killed ([`note`]). Absent when empty.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pending: BTreeMap<String, String>,
}

/// What identifies one version of the ledger file without reading it.
pub(crate) type Stamp = (u64, u64, u64, i64, i64, i64, i64);

fn stamp_of(m: &std::fs::Metadata) -> Stamp {
    (
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
    )
}

/// `state/ledger.json`.
pub fn path(home: &Home) -> PathBuf {
    home.dir(StoreDir::State).join(LEDGER_FILE)
}

/// The path of `path` below `state/`, `/`-separated; a path elsewhere in the store (an
/// install record) from `state/`: `../packs/<id>/.hcp/record.json`.
pub(crate) fn relative(home: &Home, path: &Path) -> String {
    let state = home.dir(StoreDir::State);
    let joined = |rel: &Path| {
        rel.components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/")
    };
    match (path.strip_prefix(&state), path.strip_prefix(home.root())) {
        (Ok(rel), _) => joined(rel),
        (Err(_), Ok(rel)) => format!("../{}", joined(rel)),
        _ => joined(path),
    }
}

/// The ledger's value for a marker's bytes.
pub fn marker_digest(bytes: &[u8]) -> String {
    crate::digest::sha256_tagged(bytes)
}

/// The ledger read from disk: `Ok(None)` when there is none; `Err(reason)` when it does
/// not parse, its MAC does not hold, or it is older than the trail's anchor says
/// ([`anchor_stale`]).
fn read_disk(home: &Home) -> StoreResult<Result<Option<(Stamp, Ledger)>, String>> {
    // The anchor first, then the ledger: an act writes its ledger before the record that
    // names it moves the anchor, so a ledger read after the anchor is never older than
    // the anchor says unless it was put back.
    let anchored = anchored(home);
    Ok(match read_disk_only(home)? {
        Ok(Some((_, l))) if anchored.is_some_and(|a| a > l.generation) => {
            Err(anchor_stale(l.generation, anchored.unwrap_or_default()))
        }
        r => r,
    })
}

/// The newest ledger generation the trail names (`audit::anchor::ledger_of`); `None`
/// without the chain key, under which no ledger can be believed anyway (its MAC).
fn anchored(home: &Home) -> Option<u64> {
    home.chain_key()
        .ok()
        .and_then(|k| crate::audit::anchor::ledger_of(home, k))
}

/// Why a ledger of `generation` is not believed when the trail's anchor names the later
/// `anchored`.
fn anchor_stale(generation: u64, anchored: u64) -> String {
    format!(
        "its generation {generation} is older than the {anchored} the audit trail's last act recorded: an older copy was put back, with the state files it vouched for, so none of them can be believed"
    )
}

/// The ledger file alone, as [`read_disk`] reads it, with no look at the anchor.
fn read_disk_only(home: &Home) -> StoreResult<Result<Option<(Stamp, Ledger)>, String>> {
    let p = path(home);
    // A FIFO, a link (to `/dev/zero`), a directory or an oversized file is a ledger that
    // cannot be believed, read without blocking and nothing of it kept.
    let (bytes, meta) = match crate::atomic::read_record_with_meta(&p) {
        Ok(Some(read)) => read,
        Ok(None) => return Ok(Ok(None)),
        Err(StoreError::Damaged { reason, .. }) => return Ok(Err(reason)),
        Err(e) => return Err(e),
    };
    let Ok(Value::Object(mut m)) = serde_json::from_slice::<Value>(&bytes) else {
        return Ok(Err("it is not a JSON object".into()));
    };
    let Some(Value::String(mac)) = m.remove(crate::stamp::MAC_FIELD) else {
        return Ok(Err("it carries no `mac`: it was written by hand".into()));
    };
    let body = Value::Object(m);
    let key = home.chain_key()?;
    if !key.tagged_mac_holds(LEDGER_TAG, &canonical_json(&body), &mac) {
        return Ok(Err(
            "its `mac` does not hold: it was edited by hand or copied from another store".into(),
        ));
    }
    match serde_json::from_value::<Ledger>(body) {
        Ok(l) if (1..=LEDGER_VERSION).contains(&l.version) => Ok(Ok(Some((stamp_of(&meta), l)))),
        Ok(l) => Ok(Err(format!(
            "version {} is not the supported {LEDGER_VERSION}",
            l.version
        ))),
        Err(e) => Ok(Err(e.to_string())),
    }
}

/// The ledger as readers see it, kept per process while its file stays the same.
fn current(home: &Home) -> StoreResult<Result<Option<Arc<Ledger>>, String>> {
    let p = path(home);
    let meta = match std::fs::symlink_metadata(&p) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(StoreError::io("read", &p, e)),
    };
    if let Some(m) = &meta
        && let Some(l) = home.ledger_cached(&stamp_of(m))
    {
        return Ok(Ok(Some(l)));
    }
    Ok(read_disk(home)?.map(|read| {
        read.map(|(stamp, l)| {
            let l = Arc::new(l);
            home.set_ledger_cached(stamp, Arc::clone(&l));
            l
        })
    }))
}

/// Whether the store keeps a ledger: what its trail says (an `init` or `migrate` record
/// whose `changed` holds [`LEDGER_FIELD`]), read once per process, and only when the
/// ledger file is missing. A trail that cannot be read answers yes; a home without one
/// (no store) no.
pub fn in_force(home: &Home) -> bool {
    if let Some(k) = home.ledgered_known() {
        return k;
    }
    // A home without a trail is no store (every command refuses it, `no_store` or
    // `missing_log`, before it reads a state file): it keeps no ledger.
    let k = crate::audit::AuditLog::new(home).path().exists()
        && crate::stamp::trail_says(home, LEDGER_FIELD);
    home.set_ledgered(k);
    k
}

/// Why the file at `path`, holding `value` (its `mac`, or [`marker_digest`] of a
/// marker), is not the one hcp wrote last; `None` when the ledger vouches for it, or the
/// store keeps none yet (an earlier version's, before its first call).
///
/// # Errors
/// [`StoreError::Io`] when the ledger or the chain key cannot be read.
pub fn vouch(home: &Home, path: &Path, value: &str) -> StoreResult<Option<String>> {
    let rel = relative(home, path);
    Ok(match current(home)? {
        Ok(Some(l)) => match l.files.get(&rel) {
            Some(v) if v == value => None,
            Some(_) => Some(
                "it is not the version hcp wrote last (`state/ledger.json`): an older copy was put back".into(),
            ),
            None => Some(
                "hcp's ledger (`state/ledger.json`) holds no such file: it was removed by hcp and put back, or made by hand".into(),
            ),
        },
        Ok(None) if !in_force(home) => None,
        Ok(None) if never_written(home) => Some(
            "hcp's ledger (`state/ledger.json`) holds no such file: it was made by hand".into(),
        ),
        Ok(None) => Some(
            "the state ledger `state/ledger.json` is missing, so no state file can be believed (hcp writes it at every act)"
                .into(),
        ),
        Err(why) => Some(format!(
            "the state ledger `state/ledger.json` is damaged ({why}), so no state file can be believed"
        )),
    })
}

/// Why the install record or binding file at `path`, holding the MAC `mac`, is not the
/// one hcp wrote last; `None` when the ledger vouches for it, or lists no such files yet
/// (a ledger of version 1, before the first call by this version enters them, or a store
/// without a ledger yet). A ledger that cannot be believed at all vouches for no record:
/// an older pack directory or binding put back with the ledger removed is never run, for
/// the owner either, until `hcp state reledger`.
///
/// # Errors
/// [`StoreError::Io`] when the ledger or the chain key cannot be read.
pub fn vouch_record(home: &Home, path: &Path, mac: &str) -> StoreResult<Option<String>> {
    let rel = relative(home, path);
    Ok(match current(home)? {
        Ok(Some(l)) if l.version < RECORDS_SINCE => None,
        Ok(Some(l)) => match l.files.get(&rel) {
            Some(v) if v == mac => None,
            Some(_) if l.pending.get(&rel).is_some_and(|v| v == mac) => None,
            Some(_) => Some(
                "it is not the version hcp wrote last (`state/ledger.json`): an older copy was put back".into(),
            ),
            None => Some(
                "hcp's ledger (`state/ledger.json`) holds no such file: it was removed by hcp and put back, or made by hand".into(),
            ),
        },
        Ok(None) if !in_force(home) || never_written(home) => None,
        Ok(None) => Some(
            format!("the state ledger `state/ledger.json` is missing (hcp writes it at every act), {UNBELIEVED}"),
        ),
        Err(why) => Some(format!(
            "the state ledger `state/ledger.json` is damaged ({why}), {UNBELIEVED}"
        )),
    })
}

/// Whether the ledger holds an entry for `path` (a marker that must exist): `Ok(None)`
/// when the store keeps no ledger yet; `Err` reason when the ledger cannot be believed.
///
/// # Errors
/// [`StoreError::Io`] when the ledger or the chain key cannot be read.
pub fn holds(home: &Home, path: &Path) -> StoreResult<Result<Option<bool>, String>> {
    let rel = relative(home, path);
    Ok(match current(home)? {
        Ok(Some(l)) => Ok(Some(l.files.contains_key(&rel))),
        Ok(None) if !in_force(home) => Ok(None),
        Ok(None) => Err("the state ledger `state/ledger.json` is missing".into()),
        Err(why) => Err(format!(
            "the state ledger `state/ledger.json` is damaged ({why})"
        )),
    })
}

/// Reads the ledger under the store lock for a write: `None` when the store keeps none
/// yet (an earlier version's, whose first call writes it whole, [`migrate`]).
fn load_locked(home: &Home) -> StoreResult<Option<Ledger>> {
    let damaged = |reason: String| StoreError::Damaged {
        path: path(home),
        reason,
    };
    match read_disk(home)? {
        Ok(Some((_, l))) => Ok(Some(l)),
        Ok(None) if !in_force(home) => Ok(None),
        // A store this version made writes its ledger at its first act: until then the
        // trail names no ledger written.
        Ok(None) if never_written(home) => Ok(Some(Ledger {
            version: LEDGER_VERSION,
            ..Ledger::default()
        })),
        Ok(None) => Err(damaged(
            "it is missing, so no state file can be believed; hcp writes it at every act".into(),
        )),
        Err(why) => Err(damaged(why)),
    }
}

/// Whether the trail names no ledger written yet: no `act made` record holds
/// [`MADE_FIELD`] and no `migrate` record holds [`LEDGER_FIELD`] (a store made by `init`
/// before its first act). Reads the whole trail; asked only when the ledger is missing.
fn never_written(home: &Home) -> bool {
    // No trail at all is no store: every command refuses it (`missing_log`) before this.
    !crate::audit::AuditLog::new(home).path().exists()
        || crate::stamp::trail_last_made(home, MADE_FIELD).is_none()
            && !crate::stamp::trail_says_in(home, &["migrate"], LEDGER_FIELD)
}

/// Checks, under the store lock the caller holds, that the ledger can take a write (it is
/// sound, or the store keeps none yet), before an act changes a file it vouches for: an
/// act never leaves a file the ledger could not note.
///
/// # Errors
/// As [`note`].
pub fn ready(home: &Home, _lock: &StoreLock) -> StoreResult<()> {
    load_locked(home).map(|_| ())
}

/// Writes `ledger`, its generation one more, with its MAC, keeping its version (only
/// [`migrate`] and [`rebuild`] make a ledger of version 1 one of [`LEDGER_VERSION`]: it
/// must list every install record and binding first).
fn save_locked(home: &Home, mut ledger: Ledger) -> StoreResult<u64> {
    ledger.generation += 1;
    let body = serde_json::to_value(&ledger).map_err(|e| StoreError::Damaged {
        path: path(home),
        reason: format!("cannot encode it: {e}"),
    })?;
    let mac = home
        .chain_key()?
        .tagged_mac(LEDGER_TAG, &canonical_json(&body));
    let mut body = body;
    if let Value::Object(m) = &mut body {
        m.insert(crate::stamp::MAC_FIELD.into(), Value::String(mac));
    }
    let mut bytes = serde_json::to_vec_pretty(&body).map_err(|e| StoreError::Damaged {
        path: path(home),
        reason: format!("cannot encode it: {e}"),
    })?;
    bytes.push(b'\n');
    write_atomic(&path(home), &bytes)?;
    home.note_ledger_written(ledger.generation);
    Ok(ledger.generation)
}

/// Notes in the ledger, under the store lock the caller holds, what the files at the
/// `changes`' paths hold now (`Some(value)`: the file's `mac`, or [`marker_digest`] of a
/// marker) or that they are gone (`None`). Called after the files are written or removed.
///
/// # Errors
/// [`StoreError::Damaged`] naming the ledger when it is damaged, or missing in a store
/// that keeps one; [`StoreError::Io`] when it cannot be written.
pub fn note(
    home: &Home,
    _lock: &StoreLock,
    changes: &[(&Path, Option<String>)],
) -> StoreResult<()> {
    let Some(mut l) = load_locked(home)? else {
        return Ok(());
    };
    for (p, v) in changes {
        let rel = relative(home, p);
        l.pending.remove(&rel);
        match v {
            Some(v) => l.files.insert(rel, v.clone()),
            None => l.files.remove(&rel),
        };
    }
    settle(home, &mut l);
    save_locked(home, l).map(|_| ())
}

/// Notes in the ledger, under the store lock the caller holds, that the install record
/// or binding file at `path` is about to hold the MAC `mac`, while the one it replaces
/// (the ledger's entry now) stays believed too: the act then writes the file and
/// [`note`]s it. A process killed between the two leaves both believed, never neither,
/// so an install killed after its swap or before it leaves the new or the old pack
/// whole; the next write of the ledger keeps the one in place ([`settle`]).
///
/// # Errors
/// As [`note`].
pub fn stage(home: &Home, _lock: &StoreLock, path: &Path, mac: &str) -> StoreResult<()> {
    let Some(mut l) = load_locked(home)? else {
        return Ok(());
    };
    let rel = relative(home, path);
    settle(home, &mut l);
    if let Some(old) = l.files.insert(rel.clone(), mac.to_owned())
        && old != mac
    {
        l.pending.insert(rel, old);
    }
    save_locked(home, l).map(|_| ())
}

/// Settles each pending entry of `l` (an act killed between [`stage`] and [`note`]) by
/// the file in place: its MAC is kept when it is one of the two, a file gone is no entry,
/// and any other file stays the damage it is.
fn settle(home: &Home, l: &mut Ledger) {
    let state = home.dir(StoreDir::State);
    for (rel, old) in std::mem::take(&mut l.pending) {
        let path = state.join(&rel);
        let placed = match crate::atomic::read_record(&path) {
            Ok(Some(bytes)) => serde_json::from_slice::<Value>(&bytes)
                .ok()
                .and_then(|v| v.get(crate::stamp::MAC_FIELD)?.as_str().map(str::to_owned)),
            Ok(None) => {
                l.files.remove(&rel);
                continue;
            }
            Err(_) => None,
        };
        if placed.as_deref() == Some(old.as_str()) {
            l.files.insert(rel, old);
        }
    }
}

/// The generation of the ledger this process wrote last, taken (so an act's completion
/// record names it once): `None` when it wrote none since.
pub fn take_written(home: &Home) -> Option<u64> {
    home.take_ledger_written()
}

/// How many files [`migrate`] entered in the ledger, by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Entered {
    /// Grant, session and approval files, and the runtime's keyed record of the watched
    /// files' digests (`authority-files.json`).
    pub files: usize,
    /// `.used` markers of approvals.
    pub used: usize,
    /// Activation markers.
    pub active: usize,
    /// Install records.
    pub records: usize,
    /// Binding files.
    pub bindings: usize,
    /// Each file entered, its path below `state/` and whether the ledger it replaced
    /// vouched for it as it is (`false`: it held no such entry, or another version, or
    /// could not be believed), in the order entered. Not part of the act's record.
    #[serde(skip)]
    pub adopted: Vec<(String, bool)>,
}

/// Every file the ledger vouches for, as it is now: (path, value).
fn present(home: &Home) -> Vec<(PathBuf, String, &'static str)> {
    let mut out = Vec::new();
    for (_, p) in crate::stamp::keyed_paths(home) {
        let Ok(Some(bytes)) = crate::atomic::read_record(&p) else {
            continue;
        };
        if let Ok(Value::Object(m)) = serde_json::from_slice::<Value>(&bytes)
            && let Some(Value::String(mac)) = m.get(crate::stamp::MAC_FIELD)
        {
            out.push((p, mac.clone(), "files"));
        }
    }
    let state = home.dir(StoreDir::State);
    // The keyed record of the watched files' digests (the runtime's
    // `authority-files.json`), by its MAC as a state file.
    let kept = state.join("authority-files.json");
    if let Ok(Some(bytes)) = crate::atomic::read_record(&kept)
        && let Ok(Value::Object(m)) = serde_json::from_slice::<Value>(&bytes)
        && let Some(Value::String(mac)) = m.get(crate::stamp::MAC_FIELD)
    {
        out.push((kept, mac.clone(), "files"));
    }
    for (dir, kind) in [("approvals", "used"), ("active", "active")] {
        let Ok(rd) = std::fs::read_dir(state.join(dir)) else {
            continue;
        };
        let mut paths: Vec<PathBuf> = rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                match kind {
                    "used" => name.ends_with(".used"),
                    _ => hcp_model::PackId::parse(name).is_ok() && p.is_file(),
                }
            })
            .collect();
        paths.sort();
        for p in paths {
            if let Ok(Some(b)) = crate::atomic::read_record(&p) {
                out.push((p, marker_digest(&b), kind));
            }
        }
    }
    out.extend(present_records(home));
    out
}

/// Every install record and binding file, as it is now, by its MAC (version 2 on,
/// [`RECORDS_SINCE`]); one without a MAC is left out (damage, or stamped first by
/// `crate::stamp::records::migrate`).
fn present_records(home: &Home) -> Vec<(PathBuf, String, &'static str)> {
    let records = crate::stamp::records::record_files(home)
        .into_iter()
        .map(|(_, p)| (p, "records"));
    let bindings = crate::stamp::records::binding_files(home)
        .into_iter()
        .map(|p| (p, "bindings"));
    records
        .chain(bindings)
        .filter_map(|(p, kind)| {
            let bytes = crate::atomic::read_record(&p).ok()??;
            match serde_json::from_slice::<Value>(&bytes).ok()? {
                Value::Object(m) => match m.get(crate::stamp::MAC_FIELD) {
                    Some(Value::String(mac)) => Some((p, mac.clone(), kind)),
                    _ => None,
                },
                _ => None,
            }
        })
        .collect()
}

/// Counts an entry of `kind` ([`present`]'s) in `entered`.
fn count(entered: &mut Entered, kind: &str) {
    match kind {
        "files" => entered.files += 1,
        "used" => entered.used += 1,
        "records" => entered.records += 1,
        "bindings" => entered.bindings += 1,
        _ => entered.active += 1,
    }
}

/// Writes the ledger of a store of an earlier version (one without a ledger that its
/// trail does not say keeps one) from the files there now, or enters the install records
/// and bindings there now in a sound ledger of version 1 and makes it one of
/// [`LEDGER_VERSION`], under the store lock the caller holds; `None`, writing nothing,
/// when the store's ledger is of this version already, or is missing or cannot be
/// believed (then `hcp state reledger`, [`rebuild`], writes it whole). The caller records
/// the `migrate` act with [`LEDGER_FIELD`], then [`mark_in_force`]. Run after
/// [`crate::stamp::migrate`] and `crate::stamp::records::migrate` (the files' MACs are
/// what it enters).
///
/// # Errors
/// [`StoreError`] when the chain key cannot be read or the ledger cannot be written.
pub fn migrate(home: &Home, _lock: &StoreLock) -> StoreResult<Option<Entered>> {
    if path(home).exists() {
        let Ok(Some((_, mut l))) = read_disk(home)? else {
            return Ok(None);
        };
        if l.version >= RECORDS_SINCE {
            return Ok(None);
        }
        let mut entered = Entered::default();
        for (p, v, kind) in present_records(home) {
            l.files.insert(relative(home, &p), v);
            count(&mut entered, kind);
        }
        l.version = LEDGER_VERSION;
        save_locked(home, l)?;
        return Ok(Some(entered));
    }
    if crate::stamp::trail_says(home, LEDGER_FIELD) {
        home.set_ledgered(true);
        return Ok(None);
    }
    let mut entered = Entered::default();
    // Past any generation the anchor names (a trail whose acts named a ledger since
    // removed), so the new ledger is not taken for an older one.
    let mut l = Ledger {
        version: LEDGER_VERSION,
        generation: anchored(home).unwrap_or(0),
        ..Ledger::default()
    };
    for (p, v, kind) in present(home) {
        l.files.insert(relative(home, &p), v);
        count(&mut entered, kind);
    }
    save_locked(home, l)?;
    Ok(Some(entered))
}

/// Writes the ledger anew from the files there now, under the store lock the caller
/// holds: `hcp state reledger`, the owner's repair of a ledger that is missing or damaged
/// (its word that the files there now are the current ones; files whose MAC does not hold
/// stay damaged, since the MAC is checked first). The caller records the act.
///
/// # Errors
/// [`StoreError`] when the chain key cannot be read or the ledger cannot be written.
pub fn rebuild(home: &Home, _lock: &StoreLock) -> StoreResult<Entered> {
    // Past every generation anything names: the ledger there (even one put back older),
    // the anchor and the trail, so that the new ledger is never taken for an old one.
    let (was, believed) = match read_disk(home)? {
        Ok(Some((_, l))) => (Some(l.generation), Some(l.files)),
        _ => match read_disk_only(home)? {
            Ok(Some((_, l))) => (Some(l.generation), None),
            _ => (None, None),
        },
    };
    let generation = [
        was,
        anchored(home),
        crate::stamp::trail_last_made(home, MADE_FIELD),
    ]
    .into_iter()
    .flatten()
    .max()
    .unwrap_or(0);
    let mut entered = Entered::default();
    let mut l = Ledger {
        version: LEDGER_VERSION,
        generation,
        ..Ledger::default()
    };
    for (p, v, kind) in present(home) {
        let rel = relative(home, &p);
        let vouched = believed.as_ref().and_then(|f| f.get(&rel)) == Some(&v);
        entered.adopted.push((rel.clone(), vouched));
        l.files.insert(rel, v);
        count(&mut entered, kind);
    }
    // A ledger that is no regular file (a directory, a FIFO, a link) is replaced: the
    // rename below would not go over a directory.
    let p = path(home);
    if let Ok(m) = std::fs::symlink_metadata(&p)
        && !m.is_file()
    {
        let removed = if m.is_dir() {
            std::fs::remove_dir_all(&p)
        } else {
            std::fs::remove_file(&p)
        };
        removed.map_err(|e| StoreError::io("remove", &p, e))?;
    }
    save_locked(home, l)?;
    Ok(entered)
}

/// Why the ledger cannot be believed at all (missing in a store that keeps one, or
/// damaged); `None` when it can, or the store keeps none yet (`hcp doctor`).
pub fn unusable(home: &Home) -> Option<String> {
    match current(home) {
        Ok(Ok(Some(_))) => None,
        Ok(Ok(None)) if !in_force(home) || never_written(home) => None,
        Ok(Ok(None)) => {
            Some("it is missing, so no state file it vouched for can be believed".into())
        }
        Ok(Err(why)) => Some(why),
        Err(e) => Some(e.to_string()),
    }
}

/// Keeps for this process that the store keeps a ledger (after [`migrate`]'s record).
pub fn mark_in_force(home: &Home) {
    home.set_ledgered(true);
}

/// Why the ledger is older than the trail says (the newest `act made` record holding
/// [`MADE_FIELD`] names a later generation): a ledger put back with the files it
/// vouched for. `None` when it is not, or the store keeps none. Reads the whole trail
/// (`hcp doctor`).
pub fn stale(home: &Home) -> Option<String> {
    let Ok(Ok(Some(l))) = current(home) else {
        return None;
    };
    let recorded = crate::stamp::trail_last_made(home, MADE_FIELD)?;
    (recorded > l.generation).then(|| {
        format!(
            "its generation {} is older than the {recorded} the audit trail recorded: an older copy was put back, with the state files it vouched for",
            l.generation
        )
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, Home) {
        let d = tempfile::tempdir().unwrap();
        crate::made::init(d.path(), crate::audit::Actor::owner(), None).unwrap();
        let home = Home::open(d.path()).unwrap();
        (d, home)
    }

    fn token(t: &str) -> serde_json::Map<String, Value> {
        serde_json::json!({ "token": t })
            .as_object()
            .unwrap()
            .clone()
    }

    /// A ledger of version 1 lists no binding: the binding is read by its MAC alone until
    /// [`migrate`] enters it (and makes the ledger one of version 2); from then on an
    /// older copy put back is damage. A second migration writes nothing.
    #[test]
    fn a_ledger_of_version_1_gains_the_bindings_at_migration_once() {
        let (d, home) = store();
        let lock = StoreLock::acquire(&home).unwrap();
        let now = jiff::Timestamp::now();
        crate::binding::save(&home, &lock, "alice", "mail", token("t1"), now).unwrap();
        let path = d.path().join("state/bindings/alice/mail.json");
        let old = std::fs::read(&path).unwrap();
        crate::binding::save(&home, &lock, "alice", "mail", token("t2"), now).unwrap();
        // The ledger an earlier version wrote: the same files, no binding, version 1.
        let Ok(Some((_, mut l))) = read_disk(&home).unwrap() else {
            panic!("no ledger");
        };
        assert_eq!(l.version, LEDGER_VERSION);
        assert_eq!(
            l.files
                .keys()
                .filter(|k| k.starts_with("bindings/"))
                .count(),
            1
        );
        l.files.retain(|k, _| !k.starts_with("bindings/"));
        l.version = 1;
        save_locked(&home, l).unwrap();
        let mac = |b: &[u8]| {
            let v: Value = serde_json::from_slice(b).unwrap();
            v["mac"].as_str().unwrap().to_owned()
        };
        assert_eq!(vouch_record(&home, &path, &mac(&old)).unwrap(), None);
        // An act writing the ledger of version 1 keeps it so.
        crate::binding::save(&home, &lock, "bob", "mail", token("b1"), now).unwrap();
        assert_eq!(read_disk(&home).unwrap().unwrap().unwrap().1.version, 1);
        let entered = migrate(&home, &lock).unwrap().unwrap();
        assert_eq!(
            (entered.bindings, entered.records, entered.files),
            (2, 0, 0)
        );
        let l = read_disk(&home).unwrap().unwrap().unwrap().1;
        assert_eq!(l.version, LEDGER_VERSION);
        assert!(l.files.contains_key("bindings/alice/mail.json"), "{l:?}");
        let now_mac = mac(&std::fs::read(&path).unwrap());
        assert_eq!(vouch_record(&home, &path, &now_mac).unwrap(), None);
        let why = vouch_record(&home, &path, &mac(&old)).unwrap().unwrap();
        assert!(why.contains("older copy"), "{why}");
        assert_eq!(migrate(&home, &lock).unwrap(), None);
    }

    /// An act killed between [`stage`] and [`note`]: both the file in place and the one
    /// staged are believed, never neither; the next write of the ledger keeps the one in
    /// place, and an older copy after that is damage again.
    #[test]
    fn a_staged_entry_believes_both_until_the_next_write_settles_it() {
        let (d, home) = store();
        let lock = StoreLock::acquire(&home).unwrap();
        let now = jiff::Timestamp::now();
        crate::binding::save(&home, &lock, "alice", "mail", token("t1"), now).unwrap();
        let path = d.path().join("state/bindings/alice/mail.json");
        let mac = |p: &Path| {
            let v: Value = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
            v["mac"].as_str().unwrap().to_owned()
        };
        let old = mac(&path);
        stage(&home, &lock, &path, "f00d").unwrap();
        assert_eq!(vouch_record(&home, &path, &old).unwrap(), None);
        assert_eq!(vouch_record(&home, &path, "f00d").unwrap(), None);
        assert!(vouch_record(&home, &path, "beef").unwrap().is_some());
        // The next act's write settles it by the file in place (the old one).
        crate::binding::save(&home, &lock, "bob", "mail", token("b1"), now).unwrap();
        let l = read_disk(&home).unwrap().unwrap().unwrap().1;
        assert!(l.pending.is_empty(), "{l:?}");
        assert_eq!(vouch_record(&home, &path, &old).unwrap(), None);
        assert!(vouch_record(&home, &path, "f00d").unwrap().is_some());
    }

    /// An install record's path from `state/`, and a binding's below it.
    #[test]
    fn paths_outside_state_are_named_from_it() {
        let (d, home) = store();
        let record = d.path().join("packs/mail/.hcp/record.json");
        assert_eq!(relative(&home, &record), "../packs/mail/.hcp/record.json");
        let binding = d.path().join("state/bindings/alice/mail.json");
        assert_eq!(relative(&home, &binding), "bindings/alice/mail.json");
    }
}
