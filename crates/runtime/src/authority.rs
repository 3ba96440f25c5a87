//! Acts of authority (RUNTIME §6, "Every act of authority is a record too"): the one
//! way the runtime and `hcp`'s commands record one. Every act goes through
//! [`hcp_store::state::State::record_authority`] in the same order, write-ahead like a
//! call: the act is checked, its intent recorded (and witnessed), then made, then a
//! second record says it was made ([`hcp_store::audit::ACT_MADE`]) or failed
//! ([`hcp_store::audit::ACT_FAILED`], with the code and the error); an act that cannot be
//! recorded does not happen (`audit_unavailable` or `witness_unavailable`, 74), and
//! nothing of it is written. An intent without its completion (hcp killed between the
//! two) is `interrupted` in `hcp audit verify`, as a call's intent without its outcome.
//!
//! Also the acts no command makes: a runtime policy or `config.json` that changed since
//! the last record of it is recorded once, with its digest, by the next call that sees it
//! ([`note_files`]); a witness that cannot take that record's checkpoint never refuses
//! the call (the checkpoint is left to the next act of authority or 100th call).

use crate::Runtime;
use hcp_store::StoreError;
use hcp_store::audit::Appended;
use hcp_store::audit::{Actor, AuditError, Authority};
use serde_json::{Value, json};

/// Records the act `act` (`grant`, `session start` …) made by `actor`, with what it
/// changes (`changed`: a JSON object of the act's facts, never a secret).
///
/// # Errors
/// [`AuditError`]: the act must not happen (74).
pub fn record(
    rt: &Runtime,
    act: &str,
    actor: Actor,
    changed: Value,
) -> Result<Appended, AuditError> {
    rt.state()
        .record_authority(&Authority::new(act, actor, changed))
}

/// An act of authority being made (RUNTIME §6), in the one order every act keeps: the
/// files a call would notice are noted first ([`note_files`], so a hand edit of
/// `config.json` before the act is recorded as its own change), the act is checked by
/// its command, then [`Act::record`]ed as an intent (after a look that its witness and the
/// state directory can take it), then made through [`Act::settle`], which appends the
/// completion: [`hcp_store::audit::ACT_MADE`] naming the intent's `seq`, or, when the
/// change failed, [`hcp_store::audit::ACT_FAILED`] naming it with the code and the error,
/// so the trail never states an act that did not happen. A recorded act must be settled
/// exactly once; one that is not (hcp killed) stays `interrupted`.
#[derive(Debug)]
pub struct Act<'a> {
    rt: &'a Runtime,
    act: &'a str,
    actor: Actor,
    /// The act, `seq` and `changed` of the act's record, once made.
    recorded: std::cell::RefCell<Option<(String, u64, Value)>>,
    /// For an act that changes the witness itself: the new one (`None`: none), which
    /// takes the act's checkpoint instead of the configured one.
    new_witness: std::cell::RefCell<Option<NewWitness>>,
}

/// The witness an act that changes `audit.witness` installs (`None`: none from then on).
pub type NewWitness = Option<std::sync::Arc<dyn hcp_store::audit::witness::Witness>>;

impl<'a> Act<'a> {
    /// Begins the act `act` (`grant`, `session start` …) of `actor`: when its witness and
    /// the state directory could take it, notes the watched files. Call it before taking
    /// the store lock ([`note_files`] takes it).
    ///
    /// # Errors
    /// [`note_files`]'s: a change that cannot be recorded refuses the act (74).
    pub fn begin(rt: &'a Runtime, act: &'a str, actor: Actor) -> Result<Self, StoreError> {
        // An act that could not be recorded writes nothing, not even what it noticed: the
        // files are noted only when the look passes (the next act or call records them
        // otherwise). The look's refusal itself comes at [`Act::record`], after the
        // command's own checks, so a bad argument or `config.json` is named as such.
        if rt.state().authority_ready().is_ok() && state_writable(rt).is_ok() {
            note_files(rt)?;
        }
        Ok(Self::noted(rt, act, actor))
    }

    /// The act `act` of `actor` inside a call that noted the watched files already
    /// (`connect`, `disconnect`: the call's first step did), or under the store lock
    /// ([`note_files`] takes it). Does no I/O.
    pub fn noted(rt: &'a Runtime, act: &'a str, actor: Actor) -> Self {
        Self {
            rt,
            act,
            actor,
            recorded: std::cell::RefCell::new(None),
            new_witness: std::cell::RefCell::new(None),
        }
    }

    /// Makes this an act that changes the witness (`hcp config set` / `unset
    /// audit.witness`, RUNTIME §6): its record is witnessed by `witness`, the new one, and
    /// followed by the record naming it, whose checkpoint is the new witness's first; the
    /// configured witness is not asked, so a witness that is gone does not lock out the
    /// act that replaces it.
    pub fn changes_witness(&self, witness: NewWitness) {
        *self.new_witness.borrow_mut() = Some(witness);
    }

    /// [`Act::begin`] for the owner (the running process's uid).
    ///
    /// # Errors
    /// As [`Act::begin`].
    pub fn by_owner(rt: &'a Runtime, act: &'a str) -> Result<Self, StoreError> {
        Self::begin(rt, act, Actor::owner())
    }

    /// Records the act with what it changes (`changed`: a JSON object of the act's facts,
    /// never a secret), after checking that the state directory opens for writing (a
    /// change that could not be made is refused before its record); the witness is
    /// probed first by [`hcp_store::state::State::record_authority`].
    ///
    /// # Errors
    /// [`StoreError`]: the act must not happen (74; nothing written, or, when the witness
    /// failed after the record, an `act failed` record beside it).
    pub fn record(&self, changed: Value) -> Result<(), StoreError> {
        self.record_named(self.act, changed)
    }

    /// [`Act::record`] under another name of the act, known only once it is checked
    /// (`install --join-family` for an `install`).
    ///
    /// # Errors
    /// As [`Act::record`].
    pub fn record_named(&self, act: &str, changed: Value) -> Result<(), StoreError> {
        state_writable(self.rt)?;
        let intent = Authority::write_ahead(act, self.actor.clone(), changed.clone());
        // Only the ledger the act itself writes is named by its completion.
        let _ = hcp_store::ledger::take_written(self.rt.home());
        let a = match self.new_witness.borrow_mut().take() {
            Some(w) => self.rt.state().record_witness_change(&intent, w),
            None => self.rt.state().record_authority(&intent),
        }
        .map_err(store_error)?;
        *self.recorded.borrow_mut() = Some((act.to_owned(), a.seq, changed));
        // The crash tests' point between the intent and the change (debug builds).
        self.rt.seam().reach(crate::seam::Point::ActRecorded);
        Ok(())
    }

    /// Whether the act was recorded.
    pub fn is_recorded(&self) -> bool {
        self.recorded.borrow().is_some()
    }

    /// The change's result, passed on, after the act's completion is recorded (when the
    /// act was recorded): an `act made` record naming its intent's `seq` when the change
    /// was made, an `act failed` record with the `seq`, `code(&error)` and the error's
    /// message when it failed. The witness takes a checkpoint after it when it can (a
    /// witness that cannot leaves it to the next act or 100th call). That record is best
    /// effort: a change made cannot be taken back, so a trail that cannot take its
    /// completion leaves the act `interrupted` (docs/DESIGN.md says what a reader makes of
    /// it). The first call settles the act; later calls record nothing.
    ///
    /// # Errors
    /// The change's own error, unchanged.
    pub fn settle<T, E: std::fmt::Display>(
        &self,
        result: Result<T, E>,
        code: impl FnOnce(&E) -> hcp_model::Code,
    ) -> Result<T, E> {
        let Some((act, seq, changed)) = self.recorded.borrow_mut().take() else {
            return result;
        };
        let asked = Authority::write_ahead(act, self.actor.clone(), changed);
        let completion = match &result {
            // The ledger the act left, so a ledger put back older than it is found
            // (`hcp_store::ledger::stale`).
            Ok(_) => {
                let mut made = asked.made(seq);
                if let Some(g) = hcp_store::ledger::take_written(self.rt.home()) {
                    made.changed[hcp_store::ledger::MADE_FIELD] = Value::from(g);
                }
                made
            }
            Err(e) => asked.failed_because(seq, code(e).as_str(), &e.to_string()),
        };
        let _ = self.rt.state().record_noticed(&completion);
        result
    }
}

/// The state directory, when it exists, can be written (`access(2)` with `W_OK`, which
/// the kernel answers `EPERM` for an immutable directory and `EROFS` on a read-only
/// mount, root or not): a directory that refuses the act's change is found before its
/// record rather than after it.
///
/// # Errors
/// `store_io` naming the directory.
fn state_writable(rt: &Runtime) -> Result<(), StoreError> {
    use std::os::unix::ffi::OsStrExt;
    let dir = rt.home().dir(hcp_store::home::StoreDir::State);
    if !dir.is_dir() {
        return Ok(());
    }
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return Ok(());
    };
    // SAFETY: `c` is a valid C string for the duration of the call.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } != 0 {
        return Err(StoreError::io(
            "write in",
            &dir,
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// [`record`] for the owner (the running process's uid), its error as the store's.
///
/// # Errors
/// [`StoreError::Audit`] (or [`StoreError::Witness`]'s code through it): the act must not
/// happen.
pub fn by_owner(rt: &Runtime, act: &str, changed: Value) -> Result<Appended, StoreError> {
    record(rt, act, Actor::owner(), changed).map_err(store_error)
}

/// An [`AuditError`] as a [`StoreError`] (its code and hint kept).
pub fn store_error(e: AuditError) -> StoreError {
    StoreError::Audit(Box::new(e))
}

/// The store file that keeps the digests of the runtime policy and `config.json` as last
/// recorded (`state/authority-files.json`), keyed: its `mac` is the HMAC-SHA-256 under the
/// store's chain key (which no call can see) of [`STAMP_TAG`] and the canonical JSON of
/// the rest, so whoever edits `config.json` and this file together cannot make the edit
/// look recorded.
const FILES_RECORD: &str = "authority-files.json";

/// The domain tag of [`FILES_RECORD`]'s MAC.
const STAMP_TAG: &[u8] = b"hcp-authority-files/1\n";

/// The field of [`FILES_RECORD`] that holds its MAC.
const STAMP_MAC: &str = "mac";

/// The digests last recorded, as [`FILES_RECORD`] keeps them, when its MAC holds; else
/// nothing is known (every watched file present counts as changed), and why: `"no mac"`
/// (a stamp of an earlier version, or one written by hand), `"bad mac"` (edited or
/// forged), `"no key"` (the chain key cannot be read). A missing file is no stamp at all
/// (a store that never recorded a digest), not a refused one.
struct Kept {
    last: serde_json::Map<String, Value>,
    refused: Option<&'static str>,
    /// The file is missing.
    missing: bool,
    /// The file is there but is no record: not a regular file (a directory, a FIFO, a
    /// link), too large, or unreadable. Nothing can be kept in it until the owner
    /// removes it ([`kept_damaged`]).
    damaged: Option<StoreError>,
}

/// The store's chain key: the state's (read once per process, the same read the call's
/// own records need), else `audit/chain.key` read here.
fn stamp_key(rt: &Runtime) -> Option<hcp_store::audit::ChainKey> {
    rt.state().stamp_key().or_else(|| {
        match hcp_store::audit::ChainKey::read(&hcp_store::audit::ChainKey::path(rt.home())) {
            Ok(hcp_store::audit::KeyRead::Found(k)) => Some(k),
            _ => None,
        }
    })
}

/// Reads [`FILES_RECORD`] at `path` and checks its MAC (one file, one HMAC).
fn read_kept(rt: &Runtime, path: &std::path::Path) -> Kept {
    let bytes = match hcp_store::atomic::read_record(path) {
        Ok(Some(bytes)) => bytes,
        read => {
            return Kept {
                last: serde_json::Map::new(),
                refused: None,
                missing: matches!(read, Ok(None)),
                damaged: read.err(),
            };
        }
    };
    let mut map = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|v| v.as_object().cloned())
        .unwrap_or_default();
    let refused = match map.remove(STAMP_MAC) {
        Some(Value::String(mac)) => match stamp_key(rt) {
            Some(key) => {
                let body = hcp_store::audit::canonical_json(&Value::Object(map.clone()));
                if !key.tagged_mac_holds(STAMP_TAG, &body, &mac) {
                    Some("bad mac")
                } else if !vouched(rt, path, &mac) {
                    Some("not the version hcp wrote last")
                } else {
                    None
                }
            }
            None => Some("no key"),
        },
        _ => Some("no mac"),
    };
    Kept {
        last: if refused.is_some() {
            serde_json::Map::new()
        } else {
            map
        },
        refused,
        missing: false,
        damaged: None,
    }
}

/// Whether the state ledger vouches for [`FILES_RECORD`] at `path` holding `mac`: an older
/// copy put back (its MAC holds, its digests are old) is no record, so a runtime policy
/// removed with it put back is not dropped quietly. A ledger that cannot be believed at
/// all, or a store that keeps none yet, does not refuse it on that ground (every
/// principal's call is refused by the ledger itself then).
fn vouched(rt: &Runtime, path: &std::path::Path, mac: &str) -> bool {
    match hcp_store::ledger::vouch(rt.home(), path, mac) {
        Ok(None) => true,
        Ok(Some(_)) => hcp_store::ledger::unusable(rt.home()).is_some(),
        Err(_) => false,
    }
}

/// Writes `last` to [`FILES_RECORD`] at `path` with its MAC, and notes it in the state
/// ledger under the store lock `lock` the caller holds (best effort: a ledger that cannot
/// take it leaves the next call to record the watched files again).
///
/// # Errors
/// `store_io` naming the file; `audit_unavailable` when the chain key cannot be read.
fn write_kept(
    rt: &Runtime,
    lock: &hcp_store::StoreLock,
    path: &std::path::Path,
    mut last: serde_json::Map<String, Value>,
) -> Result<(), StoreError> {
    last.remove(STAMP_MAC);
    let key = stamp_key(rt).ok_or_else(|| {
        StoreError::io(
            "read",
            hcp_store::audit::ChainKey::path(rt.home()),
            std::io::Error::other("the chain key cannot be read"),
        )
    })?;
    let body = hcp_store::audit::canonical_json(&Value::Object(last.clone()));
    last.insert(
        STAMP_MAC.into(),
        Value::String(key.tagged_mac(STAMP_TAG, &body)),
    );
    let mac = last
        .get(STAMP_MAC)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let bytes = serde_json::to_vec(&Value::Object(last))
        .map_err(|e| StoreError::io("encode", path, std::io::Error::other(e)))?;
    hcp_store::atomic::write_atomic(path, &bytes)?;
    let _ = hcp_store::ledger::note(rt.home(), lock, &[(path, Some(mac))]);
    Ok(())
}

/// Which files [`note_files`] watches, as their records name them: the act and the file
/// names in the store's root, in order of preference.
const WATCHED: [(&str, &[&str]); 2] = [
    ("policy changed", &["policy.json", "policy.yaml"]),
    ("config changed", &["config.json"]),
];

/// The watched file of `names` in `root` that exists, with its stamp (inode, size,
/// modification and change times in ns): what tells a file unchanged without reading it.
fn stamp_of(root: &std::path::Path, names: &[&str]) -> Option<(String, String)> {
    use std::os::unix::fs::MetadataExt;
    names.iter().find_map(|n| {
        let m = std::fs::metadata(root.join(n)).ok()?;
        Some((
            (*n).to_owned(),
            format!(
                "{}:{}:{}.{}:{}.{}",
                m.ino(),
                m.size(),
                m.mtime(),
                m.mtime_nsec(),
                m.ctime(),
                m.ctime_nsec()
            ),
        ))
    })
}

/// What the watched files are now, by stamp alone: act → stamp (`null`: absent).
fn stamps(root: &std::path::Path) -> Vec<(&'static str, Value)> {
    WATCHED
        .iter()
        .map(|(act, names)| {
            (
                *act,
                stamp_of(root, names).map_or(Value::Null, |(_, s)| Value::String(s)),
            )
        })
        .collect()
}

/// What the watched files are now: act → `{"file", "digest", "stamp"}` or `null`
/// (absent).
fn current(root: &std::path::Path) -> Vec<(&'static str, Value)> {
    WATCHED
        .iter()
        .map(|(act, names)| {
            let v = stamp_of(root, names)
                .and_then(|(file, stamp)| {
                    // As the policy's loader reads it (a link followed: an operator may
                    // keep the policy elsewhere), never waiting on a FIFO.
                    let bytes = hcp_store::atomic::read_regular(
                        &root.join(&file),
                        hcp_store::atomic::RECORD_CAP,
                    )
                    .ok()??;
                    Some(json!({
                        "file": file,
                        "digest": hcp_store::digest::sha256_tagged(&bytes),
                        "stamp": stamp,
                    }))
                })
                .unwrap_or(Value::Null);
            (*act, v)
        })
        .collect()
}

/// The part of a kept entry a record compares: the file and its digest.
fn content(v: Option<&Value>) -> Value {
    match v {
        Some(Value::Object(o)) => json!({"file": o.get("file"), "digest": o.get("digest")}),
        _ => Value::Null,
    }
}

/// Notices a runtime policy or `config.json` changed since it was last recorded (RUNTIME
/// §6) and records each change once, with its digest (`policy changed`, `config changed`,
/// actor the owner: only the owner can write the store). The digests last recorded are
/// kept in `state/authority-files.json` with each file's stamp, under a MAC of the chain
/// key; a call whose files have the stamps kept reads nothing more (one file, one HMAC).
/// A kept file whose MAC does not hold is no record: every watched file counts as
/// changed, and its record names why (`stamp_refused`). Otherwise the check and the record are made under
/// the store lock, so concurrent calls record a change once, and a file touched but not
/// changed is not recorded. A store that never recorded a digest records the files it
/// finds (a first policy is a change too).
///
/// The same file keeps whether the store's state files carry their MACs
/// (`hcp_store::stamp`): until it does, the first call gives a store of an earlier version
/// its MACs and records the `migrate` act under the store lock ([`state_macs`]).
///
/// Called by each call before its first step.
///
/// # Errors
/// [`StoreError`]: the change cannot be recorded in the trail, so the call must not go on
/// under it (`audit_unavailable`, 74). A witness that cannot take the checkpoint after the
/// record does not refuse the call ([`hcp_store::state::State::record_noticed`]): the
/// checkpoint is left to the next act of authority or the next 100th call.
pub fn note_files(rt: &Runtime) -> Result<(), StoreError> {
    note_files_for_call(rt).map(drop)
}

/// [`note_files`] for a call: also says when `state/authority-files.json` is damaged (not
/// a regular file, too large, unreadable). Then nothing is noted or written (no change
/// could be kept as recorded, so none is recorded until the owner removes the file: the
/// first call after that records every watched file afresh), the owner's calls go on,
/// and the call refuses a session's call with the returned `store_damaged`
/// ([`kept_damaged`]): a session must not run under a policy or `config.json` whose
/// change the trail may not hold.
///
/// # Errors
/// As [`note_files`].
pub fn note_files_for_call(rt: &Runtime) -> Result<Option<StoreError>, StoreError> {
    match note_files_now(rt) {
        // A `config.json` that does not load stops every call with its place (`bad_config`,
        // a later step): no call runs under it, and its change is recorded by the first
        // call after it is fixed.
        Err(e)
            if e.code() == hcp_model::Code::BadConfig
                || hcp_store::config::RuntimeConfig::load(rt.home().root()).is_err() =>
        {
            Ok(None)
        }
        r => r,
    }
}

fn note_files_now(rt: &Runtime) -> Result<Option<StoreError>, StoreError> {
    let home = rt.home();
    let root = home.root();
    let path = home
        .dir(hcp_store::home::StoreDir::State)
        .join(FILES_RECORD);
    let Kept { last, damaged, .. } = read_kept(rt, &path);
    if let Some(e) = damaged {
        return Ok(Some(kept_damage(&path, &e)));
    }
    let keyed = kept_keyed(&last)
        && last.get(STATE_LEDGER) == Some(&Value::from(hcp_store::ledger::LEDGER_VERSION));
    let same = keyed
        && stamps(root).iter().all(|(act, stamp)| {
            let kept = last
                .get(*act)
                .and_then(|v| v.get("stamp"))
                .unwrap_or(&Value::Null);
            kept == stamp
        });
    if same {
        return Ok(None);
    }
    home.ensure(hcp_store::home::StoreDir::State)?;
    let lock = hcp_store::StoreLock::acquire(home)?;
    // Read again under the lock: another call may have recorded it meanwhile; and read
    // the files again, so what is recorded is what is there now.
    let Kept {
        mut last,
        refused,
        missing,
        damaged,
    } = read_kept(rt, &path);
    if let Some(e) = damaged {
        return Ok(Some(kept_damage(&path, &e)));
    }
    if !kept_keyed(&last) {
        state_macs(rt, &lock)?;
        last.insert(
            STATE_MACS.into(),
            Value::from(hcp_store::stamp::KEYED_VERSION),
        );
        last.insert(
            RECORD_MACS.into(),
            Value::from(hcp_store::stamp::records::RECORDS_VERSION),
        );
        write_kept(rt, &lock, &path, last.clone())?;
    }
    if last.get(STATE_LEDGER) != Some(&Value::from(hcp_store::ledger::LEDGER_VERSION)) {
        state_ledger(rt, &lock)?;
        last.insert(
            STATE_LEDGER.into(),
            Value::from(hcp_store::ledger::LEDGER_VERSION),
        );
        write_kept(rt, &lock, &path, last.clone())?;
    }
    note_changes(rt, &lock, &path, last, refused, missing).map(|()| None)
}

/// `state/authority-files.json` at `path`, damaged as `e` says, as the `store_damaged`
/// that refuses the sessions' calls.
fn kept_damage(path: &std::path::Path, e: &StoreError) -> StoreError {
    let reason = match e {
        StoreError::Damaged { reason, .. } => reason.clone(),
        e => e.to_string(),
    };
    StoreError::Damaged {
        path: path.to_owned(),
        reason: format!(
            "{reason}: it keeps the digests of the runtime policy and `config.json` as the trail last recorded them, and no change of theirs can be recorded until it is removed"
        ),
    }
}

/// `state/authority-files.json`, when it is damaged (not a regular file, too large,
/// unreadable), as the `store_damaged` that refuses every session's call until the owner
/// removes it ([`note_files_for_call`]); `None` when it is a record or missing. One
/// `open` and `fstat` (and the read of a small file). `hcp doctor` lists it.
pub fn kept_damaged(rt: &Runtime) -> Option<StoreError> {
    let path = rt
        .home()
        .dir(hcp_store::home::StoreDir::State)
        .join(FILES_RECORD);
    read_kept(rt, &path).damaged.map(|e| kept_damage(&path, &e))
}

/// Records each watched file that changed since `last` (what [`FILES_RECORD`] at `path`
/// keeps, refused and why, or missing), under the store lock the caller holds, keeping
/// each new digest after its record.
///
/// # Errors
/// As [`note_files`].
fn note_changes(
    rt: &Runtime,
    lock: &hcp_store::StoreLock,
    path: &std::path::Path,
    mut last: serde_json::Map<String, Value>,
    refused: Option<&'static str>,
    missing: bool,
) -> Result<(), StoreError> {
    let root = rt.home().root();
    // What the trail last recorded of each watched file, for a file gone while the stamp
    // that kept it is gone too (or refused): read once, only then.
    let mut trail: Option<Vec<(&str, Value)>> = None;
    for (act, now) in current(root) {
        let mut was = last.get(act).cloned().unwrap_or(Value::Null);
        let mut unkept = false;
        if was.is_null() && now.is_null() && (missing || refused.is_some()) {
            // Removing a watched file together with this stamp must not pass for a store
            // that never had it: the trail says what was last recorded.
            let t = trail.get_or_insert_with(|| trail_last(rt));
            was = t
                .iter()
                .find(|(a, _)| *a == act)
                .map_or(Value::Null, |(_, v)| v.clone());
            unkept = !was.is_null();
        }
        if was == now {
            continue;
        }
        let (before, after) = (content(Some(&was)), content(Some(&now)));
        let lost = was.get(LOST).is_some_and(|l| l == &Value::Bool(true));
        if lost && after.is_null() {
            // Recorded when it was found gone; kept so (a stamp made anew must say so too),
            // and refused for sessions until it is back.
            if last.get(act) != Some(&was) {
                last.insert(act.to_owned(), was);
                write_kept(rt, lock, path, last.clone())?;
            }
            continue;
        }
        // The runtime policy gone with the stamp that kept it: no act of the owner removed
        // it (`hcp` never removes the stamp), so it is not dropped quietly: recorded once,
        // and every session's call is refused until it is back ([`policy_lost`]).
        let lose = unkept && act == POLICY_CHANGED;
        if before != after {
            let mut changed = if after.is_null() {
                json!({"removed": true, "was": before, "digest": ABSENT})
            } else {
                after
            };
            // A stamp whose MAC does not hold hides nothing: the file counts as changed,
            // and the record says why it was not known.
            if let Some(why) = refused {
                changed["stamp_refused"] = Value::String(why.into());
            } else if missing && unkept {
                changed["stamp_refused"] = Value::String("missing".into());
            }
            if lose {
                changed[LOST] = Value::Bool(true);
            }
            // Noticed, not made: the witness never refuses the call (RUNTIME §6).
            rt.state()
                .record_noticed(&Authority::new(act, Actor::owner(), changed))
                .map_err(store_error)?;
        }
        let keep = if lose {
            let mut v = before.clone();
            v[LOST] = Value::Bool(true);
            v
        } else {
            now
        };
        last.insert(act.to_owned(), keep);
        // Kept after each record, so a failure later records nothing twice.
        write_kept(rt, lock, path, last.clone())?;
    }
    Ok(())
}

/// The act that records a changed runtime policy.
const POLICY_CHANGED: &str = "policy changed";

/// The digest a record gives a watched file that is gone.
const ABSENT: &str = "absent";

/// The field of a kept entry (and of its record) that says the runtime policy went with
/// the stamp that kept it ([`policy_lost`]).
const LOST: &str = "lost";

/// What the trail last recorded of each watched file, by act: `{"file", "digest"}`, or
/// `null` when its last record says it was removed or there is none. Reads the whole
/// trail: only for a watched file that is gone while [`FILES_RECORD`] is missing or
/// refused.
fn trail_last(rt: &Runtime) -> Vec<(&'static str, Value)> {
    use std::io::BufRead;
    let mut out: Vec<(&'static str, Value)> =
        WATCHED.iter().map(|(act, _)| (*act, Value::Null)).collect();
    let log = hcp_store::audit::AuditLog::new(rt.home());
    let Ok(f) = std::fs::File::open(log.path()) else {
        return out;
    };
    let mut reader = std::io::BufReader::with_capacity(64 * 1024, f);
    let mut line = Vec::new();
    while matches!(reader.read_until(b'\n', &mut line), Ok(n) if n > 0) {
        if line.windows(9).any(|w| w == b" changed\"")
            && let Ok(v) = serde_json::from_slice::<Value>(&line)
            && let Some(slot) = out
                .iter_mut()
                .find(|(act, _)| v.get("act").and_then(Value::as_str) == Some(act))
        {
            let c = v.get("changed").unwrap_or(&Value::Null);
            slot.1 = match (c.get("file"), c.get("digest")) {
                (Some(file), Some(Value::String(d))) if d != ABSENT => {
                    json!({"file": file, "digest": d})
                }
                // Found gone with its stamp: it still governs (what it was, marked lost),
                // so removing the stamp again does not pass for a store without one.
                _ if c.get(LOST) == Some(&Value::Bool(true)) => match content(c.get("was")) {
                    Value::Object(mut o) => {
                        o.insert(LOST.into(), Value::Bool(true));
                        Value::Object(o)
                    }
                    _ => Value::Null,
                },
                _ => Value::Null,
            };
        }
        line.clear();
    }
    out
}

/// Whether the runtime policy went with the stamp that kept its digest (RUNTIME §6, §7):
/// [`note_files`] found it gone with `state/authority-files.json` (removed or forged)
/// while the trail's last record of it says it governs the sessions' calls, recorded that
/// once, and keeps it so (or will at the next call: the stamp is missing or refused, the
/// policy gone, and the trail says it was there). Then every session's call is refused
/// with this `store_damaged` (naming the file and its digest) until the policy is back;
/// the owner's calls, which the policy does not govern, go on. One small read and one
/// HMAC when the stamp holds; `None` otherwise.
pub fn policy_lost(rt: &Runtime) -> Option<StoreError> {
    let path = rt
        .home()
        .dir(hcp_store::home::StoreDir::State)
        .join(FILES_RECORD);
    let kept = read_kept(rt, &path);
    let found;
    let entry = if kept.missing || kept.refused.is_some() {
        // Not noted yet (`hcp doctor` before the next call): what the next call finds.
        if stamp_of(rt.home().root(), WATCHED[0].1).is_some() {
            return None;
        }
        found = trail_last(rt)
            .into_iter()
            .find(|(a, _)| *a == POLICY_CHANGED)
            .map(|(_, v)| v)
            .filter(|v| !v.is_null())?;
        &found
    } else {
        let e = kept.last.get(POLICY_CHANGED)?;
        if e.get(LOST) != Some(&Value::Bool(true)) {
            return None;
        }
        e
    };
    let file = entry
        .get("file")
        .and_then(Value::as_str)
        .unwrap_or("policy.yaml");
    let digest = entry.get("digest").and_then(Value::as_str).unwrap_or("");
    Some(StoreError::Damaged {
        path: rt.home().root().join(file),
        reason: format!(
            "it is gone, with the keyed record of its digest (`state/authority-files.json`), and no act removed it: the trail's last record of it (digest `{digest}`) says it governs every session's calls"
        ),
    })
}

/// The key of [`FILES_RECORD`] that says the store's state files carry their MACs
/// (`hcp_store::stamp`): once it is kept, a call reads nothing more for them.
const STATE_MACS: &str = "state_macs";

/// The key of [`FILES_RECORD`] that says the store's install records and bindings carry
/// their MACs (`hcp_store::stamp::records`), as [`STATE_MACS`].
const RECORD_MACS: &str = "record_macs";

/// Whether `last` (what [`FILES_RECORD`] keeps) says the state files, install records and
/// bindings carry their MACs.
fn kept_keyed(last: &serde_json::Map<String, Value>) -> bool {
    last.get(STATE_MACS) == Some(&Value::from(hcp_store::stamp::KEYED_VERSION))
        && last.get(RECORD_MACS) == Some(&Value::from(hcp_store::stamp::records::RECORDS_VERSION))
}

/// Gives the state files, install records and bindings of a store of an earlier version
/// their MACs ([`hcp_store::stamp::migrate`], [`hcp_store::stamp::records::migrate`]) and
/// records it as one `migrate` act (actor the owner) whose `changed` says which
/// (`"state_macs": 1, "state_files": {…}` and `"record_macs": 1, "record_files":
/// {"records", "bindings"}`), under the store lock the caller holds; nothing when the trail
/// says they have them (a store this version made, or one migrated before). Noticed, not
/// made: the witness never refuses the call.
///
/// # Errors
/// [`StoreError`]: a file cannot be stamped, or the record cannot be made (74).
fn state_macs(rt: &Runtime, lock: &hcp_store::StoreLock) -> Result<(), StoreError> {
    let home = rt.home();
    let files = hcp_store::stamp::migrate(home, lock)?;
    let records = hcp_store::stamp::records::migrate(home, lock)?;
    let mut changed = serde_json::Map::new();
    if let Some(stamped) = &files {
        changed.insert(
            hcp_store::stamp::KEYED_FIELD.into(),
            hcp_store::stamp::KEYED_VERSION.into(),
        );
        changed.insert("state_files".into(), json!(stamped));
    }
    if let Some(stamped) = &records {
        changed.insert(
            hcp_store::stamp::records::RECORDS_FIELD.into(),
            hcp_store::stamp::records::RECORDS_VERSION.into(),
        );
        changed.insert("record_files".into(), json!(stamped));
    }
    if changed.is_empty() {
        return Ok(());
    }
    rt.state()
        .record_noticed(&Authority::new(
            "migrate",
            Actor::owner(),
            Value::Object(changed),
        ))
        .map_err(store_error)?;
    if files.is_some() {
        hcp_store::stamp::mark_keyed(home);
    }
    if records.is_some() {
        hcp_store::stamp::records::mark_keyed(home);
    }
    Ok(())
}

/// The key of [`FILES_RECORD`] that says the store keeps its state ledger
/// (`hcp_store::ledger`): once it is kept, a call reads nothing more for it.
const STATE_LEDGER: &str = "state_ledger";

/// Writes the state ledger of a store of an earlier version from the files it holds
/// ([`hcp_store::ledger::migrate`]) and records it as a `migrate` act (actor the owner),
/// under the store lock the caller holds, after [`state_macs`]; nothing when the store
/// keeps one already. Noticed, not made: the witness never refuses the call.
///
/// # Errors
/// [`StoreError`]: the ledger cannot be written, or the record cannot be made (74).
fn state_ledger(rt: &Runtime, lock: &hcp_store::StoreLock) -> Result<(), StoreError> {
    let home = rt.home();
    let Some(entered) = hcp_store::ledger::migrate(home, lock)? else {
        return Ok(());
    };
    let mut changed = json!({
        hcp_store::ledger::LEDGER_FIELD: hcp_store::ledger::LEDGER_VERSION,
        "ledger_entries": entered,
    });
    // The generation the migration left, as an act's completion names it: the anchor
    // carries it, so a ledger put back from before the migration is found older.
    if let Some(g) = hcp_store::ledger::take_written(home) {
        changed[hcp_store::ledger::MADE_FIELD] = Value::from(g);
    }
    rt.state()
        .record_noticed(&Authority::new("migrate", Actor::owner(), changed))
        .map_err(store_error)?;
    hcp_store::ledger::mark_in_force(home);
    Ok(())
}

/// An owner's command that writes a watched file itself (`hcp config set` / `unset`,
/// RUNTIME §3, §6): notes the watched files first ([`note_files`], so an edit by hand
/// before it is recorded as its own change), then under the store lock records `act`
/// with `changed` ([`Act`]), then runs `write`, which writes the file (an `act failed`
/// record follows when it fails), then keeps the file's new digest, so the next call does not
/// record the same change again as `config changed`. When the record fails nothing is
/// written.
///
/// # Errors
/// [`StoreError`]: the record's refusal (74; `write` not run), or `write`'s.
pub fn change_file(
    rt: &Runtime,
    act: &str,
    changed: Value,
    write: impl FnOnce() -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    edit_file(rt, act, || Ok(Some((changed, ()))), |()| write()).map(|_| ())
}

/// [`change_file`] whose change is worked out under the store lock: `prepare` reads the
/// file and returns what the act changes with what `write` is to write, or `None` when
/// there is nothing to change (nothing recorded, nothing written: `Ok(false)`). A
/// refusal of `prepare` records nothing, and no other `hcp` can change the file between
/// what `prepare` read and what `write` writes. The lock that orders acts
/// ([`hcp_store::state::State::hold_acts`]) is held from `prepare` to the end, so no act
/// reads `config.json` between the record and the write.
///
/// # Errors
/// `prepare`'s refusal, the record's (74; `write` not run), or `write`'s.
pub fn edit_file<E: From<StoreError>, P>(
    rt: &Runtime,
    act: &str,
    prepare: impl FnOnce() -> Result<Option<(Value, P)>, E>,
    write: impl FnOnce(P) -> Result<(), StoreError>,
) -> Result<bool, E> {
    edit_file_as(rt, act, prepare, |_| None, write)
}

/// [`edit_file`] for an edit that may change the witness: `new_witness` answers, from
/// what `prepare` worked out, the witness the edit installs (`Some(None)`: none from
/// then on; `None`: the witness does not change), which then takes the act's checkpoint
/// ([`Act::changes_witness`]).
///
/// # Errors
/// As [`edit_file`].
pub fn edit_file_as<E: From<StoreError>, P>(
    rt: &Runtime,
    act: &str,
    prepare: impl FnOnce() -> Result<Option<(Value, P)>, E>,
    new_witness: impl FnOnce(&P) -> Option<NewWitness>,
    write: impl FnOnce(P) -> Result<(), StoreError>,
) -> Result<bool, E> {
    let home = rt.home();
    // The edit's digest is kept in `state/authority-files.json` once made: a damaged one
    // refuses the edit before anything is written.
    if let Some(e) = kept_damaged(rt) {
        return Err(e.into());
    }
    // An edit by hand before this act is its own change, recorded first.
    let made = Act::by_owner(rt, act)?;
    home.ensure(hcp_store::home::StoreDir::State)?;
    let lock = hcp_store::StoreLock::acquire(home)?;
    // From the record to the write: an act of another process never sees the trail name
    // one witness and `config.json` another between the two (RUNTIME §6).
    let _acts = rt.state().hold_acts().map_err(store_error)?;
    let Some((changed, what)) = prepare()? else {
        return Ok(false);
    };
    if let Some(w) = new_witness(&what) {
        made.changes_witness(w);
    }
    made.record(changed)?;
    made.settle(write(what), StoreError::code)?;
    let path = home
        .dir(hcp_store::home::StoreDir::State)
        .join(FILES_RECORD);
    let mut last = read_kept(rt, &path).last;
    for (act, now) in current(home.root()) {
        last.insert(act.to_owned(), now);
    }
    write_kept(rt, &lock, &path, last)?;
    Ok(true)
}
