//! Witnesses of the trail (RUNTIME §6): signed checkpoints kept outside the store, so a
//! trail rolled back or rewritten is caught even by someone holding its keys.
//!
//! `audit.witness` in `config.json` names one: a directory ([`DirWitness`]), or `"state"`
//! for the fleet's PostgreSQL database (a table the machines' role may only insert into,
//! in `hcp-state-pg`). A checkpoint is taken after every act of authority
//! ([`crate::state::State::record_authority`]) and by the call whose record is a multiple
//! of 100, after it has answered. `hcp audit verify` checks the trail against the newest
//! checkpoint the witness holds.
//!
//! # A directory
//! `DIR/<store id>.checkpoints`: one checkpoint a line (the JSON of
//! [`super::checkpoint::Checkpoint`]), appended with `O_APPEND` under the file's lock and
//! synced. Only ever appended to, so an operator may make it append-only
//! (`chattr +a`): then whoever holds the store's keys, but not the witness, cannot roll it
//! back either. The directory must exist: hcp never makes it (a witness that vanished is
//! `witness_unavailable`, not a fresh start). The newest checkpoint is the one with the
//! highest count among the last lines (64 KiB); a line there that is not a checkpoint of
//! this store, or whose signature fails, is reported rather than skipped. `hcp audit
//! verify` reads the whole file ([`Witness::held`]) and checks the trail against every
//! checkpoint in it.
//!
//! A crash mid-append leaves a last line without its `\n`: it is not judged (a torn last
//! line is a crash, not damage). The next checkpoint first ends it with `\n` and a
//! recovery line (`{"format": "hcp-witness-recovery/1", "torn_bytes": N}`, see
//! [`RECOVERY_FORMAT`]), then appends, so the torn fragment stays in the file as evidence
//! and a reader knows why the line before the recovery line is not a checkpoint. A line
//! that is not a checkpoint anywhere else (an edit) is a fault, named with its line.

use super::checkpoint::{Checkpoint, CheckpointError};
use crate::error::StoreError;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The suffix of a store's file in a witness directory.
pub const DIR_SUFFIX: &str = ".checkpoints";
/// How much of the end of a witness file is read for the newest checkpoint, in bytes.
pub const NEWEST_WINDOW: u64 = 64 * 1024;
/// A call whose record's `seq` is a multiple of this takes a checkpoint after it answers.
pub const CALLS_PER_CHECKPOINT: u64 = 100;
/// The `format` of the line that recovers a torn last line of a witness file.
pub const RECOVERY_FORMAT: &str = "hcp-witness-recovery/1";

/// Whether `line` is a recovery line ([`RECOVERY_FORMAT`]).
fn is_recovery(line: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(line.trim())
        .ok()
        .and_then(|v| v.get("format").and_then(|f| f.as_str()).map(str::to_owned))
        .is_some_and(|f| f == RECOVERY_FORMAT)
}

/// Everything a witness holds of one chain, for `hcp audit verify` (RUNTIME §6).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Held {
    /// The file read, when the witness is one (for messages).
    pub file: Option<PathBuf>,
    /// Each checkpoint whose signature holds, with its line in the file (from 1; 0 when
    /// the witness has no lines), in the file's order.
    pub checkpoints: Vec<(u64, Checkpoint)>,
    /// Torn lines: a crash mid-append (the last line, not ended yet; or a line a recovery
    /// line follows): `(line, bytes, recovered)`.
    pub torn: Vec<(u64, u64, bool)>,
    /// The first line that is not a valid checkpoint of this chain: `(line, reason)`.
    pub forged: Option<(u64, String)>,
}

impl Held {
    /// The checkpoint with the highest count.
    pub fn newest(&self) -> Option<&Checkpoint> {
        self.checkpoints
            .iter()
            .map(|(_, c)| c)
            .fold(None, |b: Option<&Checkpoint>, c| match b {
                Some(b) if b.count > c.count => Some(b),
                _ => Some(c),
            })
    }

    /// How a line of the witness is named in a message: `` `FILE` line N ``.
    pub fn place(&self, line: u64) -> String {
        match &self.file {
            Some(f) if line > 0 => format!("`{}` line {line}", f.display()),
            Some(f) => format!("`{}`", f.display()),
            None if line > 0 => format!("line {line}"),
            None => "the witness".to_owned(),
        }
    }

    /// Parses the text of a witness file (or a file of one checkpoint): see the module
    /// docs for torn lines and recovery lines.
    pub fn parse(
        text: &str,
        file: Option<PathBuf>,
        store: Option<&str>,
        machine: Option<&str>,
    ) -> Self {
        let mut held = Held {
            file,
            ..Held::default()
        };
        let ends = text.ends_with('\n');
        let lines: Vec<&str> = text.split('\n').collect();
        // `split` leaves an empty last piece after a final `\n`.
        let count = if ends { lines.len() - 1 } else { lines.len() };
        for (i, l) in lines.iter().take(count).enumerate() {
            let n = i as u64 + 1;
            if l.trim().is_empty() {
                continue;
            }
            if is_recovery(l) {
                continue;
            }
            let last_unended = !ends && i + 1 == count;
            let recovered_next = lines.get(i + 1).is_some_and(|next| is_recovery(next));
            match Checkpoint::parse(l) {
                Ok(c) => {
                    let ours = store.is_none_or(|s| c.store.as_deref() == Some(s))
                        && c.machine.as_deref() == machine;
                    if !ours && held.forged.is_none() {
                        held.forged = Some((
                            n,
                            format!("a checkpoint of another store or machine (`{}`)", c.origin),
                        ));
                    }
                    if ours {
                        held.checkpoints.push((n, c));
                    }
                }
                Err(_) if last_unended || recovered_next => {
                    held.torn.push((n, l.len() as u64, recovered_next));
                }
                Err(e) => {
                    if held.forged.is_none() {
                        held.forged = Some((n, e.to_string()));
                    }
                }
            }
        }
        held
    }
}

/// Why a witness cannot take or give a checkpoint (`witness_unavailable`, 74).
#[derive(Debug, thiserror::Error)]
pub enum WitnessError {
    /// The directory is missing, is not one, or cannot be written or read.
    #[error("the audit witness `{}` cannot be used: {reason}", .path.display())]
    Dir {
        /// The directory.
        path: PathBuf,
        /// Why, lowercase.
        reason: String,
    },
    /// A file of the witness cannot be written or read.
    #[error("the audit witness cannot {action} `{}`", .path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The state backend that keeps the checkpoints cannot be used.
    #[error("the audit witness `state` cannot be used: {0}")]
    State(String),
    /// The store's signing key cannot be read or made.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A test double told to fail.
    #[error("the audit witness refuses: {0}")]
    Refused(String),
    /// `config.json` does not parse, so which witness it names is not known.
    #[error("the audit witness is not known: {0}")]
    Config(String),
    /// `config.json` names no witness, or another, while the trail's last `witness`
    /// record names one: the witness was removed or changed by hand, not by the recorded
    /// act (`hcp config set` / `unset audit.witness`).
    #[error("{}", unrecorded(named, *seq, configured.as_deref()))]
    Unrecorded {
        /// The witness the trail names (`directory DIR`).
        named: String,
        /// The `seq` of the record naming it.
        seq: u64,
        /// The one `config.json` names, if any.
        configured: Option<String>,
    },
}

fn unrecorded(named: &str, seq: u64, configured: Option<&str>) -> String {
    match configured {
        None => format!(
            "`config.json` names no `audit.witness`, while record {seq} of the trail says its checkpoints go to the witness ({named}): the witness was removed from the configuration by hand, not by `hcp config unset audit.witness`"
        ),
        Some(c) => format!(
            "`config.json` names the witness ({c}), while record {seq} of the trail says its checkpoints go to the witness ({named}): the witness was changed by hand, not by `hcp config set audit.witness`"
        ),
    }
}

/// The witness of a file store as `config.json` names it (RUNTIME §6): a directory; none
/// for none (`"state"` needs a fleet's `state`, which the configuration's reading refuses
/// without one); one that refuses every checkpoint ([`UnknownWitness`]) when
/// `config.json` does not parse.
pub fn of_config(w: crate::config::WitnessChoice) -> Option<std::sync::Arc<dyn Witness>> {
    match w {
        Ok(Some(crate::config::WitnessConfig::Dir(d))) => {
            Some(std::sync::Arc::new(DirWitness::new(d)))
        }
        Ok(Some(crate::config::WitnessConfig::State) | None) => None,
        Err(e) => Some(std::sync::Arc::new(UnknownWitness { why: e.to_string() })),
    }
}

/// The witness of a `config.json` that does not parse: it takes nothing (an act of
/// authority is refused rather than left unwitnessed) and holds nothing.
#[derive(Debug, Clone)]
pub struct UnknownWitness {
    /// Why, as the configuration's error says it.
    pub why: String,
}

impl Witness for UnknownWitness {
    fn describe(&self) -> String {
        "unknown (`config.json` does not parse)".into()
    }

    fn ready(&self) -> Result<(), WitnessError> {
        Err(WitnessError::Config(self.why.clone()))
    }

    fn take(&self, _c: &Checkpoint) -> Result<(), WitnessError> {
        self.ready()
    }

    fn newest(&self, _store: &str, _machine: Option<&str>) -> Result<Newest, WitnessError> {
        Err(WitnessError::Config(self.why.clone()))
    }
}

impl WitnessError {
    /// What the operator can do.
    pub fn hint(&self) -> &'static str {
        if let Self::Unrecorded { .. } = self {
            return "record the change: `hcp config set audit.witness DIR` names the witness `config.json` is to name (put it back there first if it was removed by mistake), `hcp config unset audit.witness` stops it; both are recorded acts, and work while other acts are refused";
        }
        "`audit.witness` in `config.json` names where checkpoints go: make sure that directory exists and this user can write it (or that the fleet's database answers), then run the command again; or move the witness with `hcp config set audit.witness DIR` (or stop it with `hcp config unset audit.witness`), a recorded act that works while the witness is unavailable"
    }
}

/// What a witness holds as its newest checkpoint of a chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Newest {
    /// None was taken yet.
    None,
    /// A checkpoint whose signature holds (its key is checked against the store's by
    /// the verifier).
    Checkpoint(Checkpoint),
    /// A line that is not a checkpoint, or whose signature fails: forged or damaged.
    Forged {
        /// What it is, lowercase.
        reason: String,
    },
}

/// A place outside the store that keeps signed checkpoints (see the module docs).
pub trait Witness: Send + Sync + std::fmt::Debug {
    /// How `hcp doctor` and messages name it: `directory /srv/witness`, `state`.
    fn describe(&self) -> String;

    /// Whether a checkpoint could be taken now (a cheap look before an act of authority:
    /// the act does not happen when it could not be witnessed).
    ///
    /// # Errors
    /// [`WitnessError`].
    fn ready(&self) -> Result<(), WitnessError>;

    /// [`Witness::ready`] for the checkpoints of store `store` (its id, when known): a
    /// witness that keeps each store's checkpoints apart also checks that store's own
    /// place opens for writing, so an act it could not witness is refused before its
    /// record is written. The default is [`Witness::ready`].
    ///
    /// # Errors
    /// [`WitnessError`].
    fn ready_for(&self, store: Option<&str>) -> Result<(), WitnessError> {
        let _ = store;
        self.ready()
    }

    /// Keeps `c` durably.
    ///
    /// # Errors
    /// [`WitnessError`].
    fn take(&self, c: &Checkpoint) -> Result<(), WitnessError>;

    /// The newest checkpoint of the store `store` (and, for one machine's chain in a
    /// fleet, `machine`).
    ///
    /// # Errors
    /// [`WitnessError`] when the witness cannot be read.
    fn newest(&self, store: &str, machine: Option<&str>) -> Result<Newest, WitnessError>;

    /// Every checkpoint the witness holds of the store `store` (and `machine`), for `hcp
    /// audit verify` to check the trail against each. The default is [`Witness::newest`]
    /// alone (a witness that keeps only its newest).
    ///
    /// # Errors
    /// [`WitnessError`] when the witness cannot be read.
    fn held(&self, store: &str, machine: Option<&str>) -> Result<Held, WitnessError> {
        Ok(match self.newest(store, machine)? {
            Newest::None => Held::default(),
            Newest::Checkpoint(c) => Held {
                checkpoints: vec![(0, c)],
                ..Held::default()
            },
            Newest::Forged { reason } => Held {
                forged: Some((0, reason)),
                ..Held::default()
            },
        })
    }

    /// Whether the witness holds no checkpoint of `store` yet (a new witness for this
    /// store: the store then records which witness it has, RUNTIME §6). The default is
    /// `false` (a witness that cannot tell).
    ///
    /// # Errors
    /// [`WitnessError`] when the witness cannot be read.
    fn is_new_for(&self, store: &str) -> Result<bool, WitnessError> {
        let _ = store;
        Ok(false)
    }
}

/// A directory witness (see the module docs).
#[derive(Debug, Clone)]
pub struct DirWitness {
    dir: PathBuf,
}

impl DirWitness {
    /// The witness in `dir` (an absolute path; nothing is touched here).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file of store `store`.
    pub fn file(&self, store: &str) -> PathBuf {
        self.dir.join(format!("{store}{DIR_SUFFIX}"))
    }

    fn check_readable(&self) -> Result<(), WitnessError> {
        match std::fs::metadata(&self.dir) {
            Ok(m) if m.is_dir() => Ok(()),
            _ => Err(WitnessError::Dir {
                path: self.dir.clone(),
                reason: "it does not exist or is not a directory".into(),
            }),
        }
    }

    fn check_dir(&self) -> Result<(), WitnessError> {
        let bad = |reason: String| WitnessError::Dir {
            path: self.dir.clone(),
            reason,
        };
        match std::fs::metadata(&self.dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(bad("it is not a directory".into())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(bad("it does not exist".into()));
            }
            Err(e) => return Err(bad(format!("it cannot be read: {e}"))),
        }
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(self.dir.as_os_str().as_bytes())
            .map_err(|_| bad("its path holds a NUL".into()))?;
        // SAFETY: `c` is a valid C string for the duration of the call.
        if unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } != 0 {
            return Err(bad(format!(
                "it cannot be written: {}",
                std::io::Error::last_os_error()
            )));
        }
        Ok(())
    }
}

impl Witness for DirWitness {
    fn describe(&self) -> String {
        format!("directory {}", self.dir.display())
    }

    fn ready(&self) -> Result<(), WitnessError> {
        self.check_dir()
    }

    /// The directory's check, then a probe of the store's file: opened for appending
    /// (nothing is written), so a file made immutable or read-only is found before the
    /// act's record rather than after it. A file not made yet is covered by the
    /// directory's check.
    fn ready_for(&self, store: Option<&str>) -> Result<(), WitnessError> {
        self.check_dir()?;
        let Some(store) = store else {
            return Ok(());
        };
        let path = self.file(store);
        match OpenOptions::new().append(true).open(&path) {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(WitnessError::Io {
                action: "append to",
                path,
                source: e,
            }),
        }
    }

    fn take(&self, c: &Checkpoint) -> Result<(), WitnessError> {
        self.check_dir()?;
        let store = c.store.as_deref().unwrap_or("store");
        let path = self.file(store);
        let io = |action, e| WitnessError::Io {
            action,
            path: path.clone(),
            source: e,
        };
        let created = !path.exists();
        let mut f = OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| io("open", e))?;
        f.lock().map_err(|e| io("lock", e))?;
        // A torn last line (a crash mid-append) is ended, and said so, before this one.
        let torn = torn_tail(&path).map_err(|e| io("read", e))?;
        let mut line = String::new();
        if torn > 0 {
            line.push('\n');
            line.push_str(
                &serde_json::json!({"format": RECOVERY_FORMAT, "torn_bytes": torn}).to_string(),
            );
            line.push('\n');
        }
        line.push_str(&c.to_line());
        f.write_all(line.as_bytes())
            .and_then(|()| f.sync_data())
            .map_err(|e| io("append to", e))?;
        let _ = f.unlock();
        if created {
            crate::atomic::sync_dir(&self.dir)?;
        }
        Ok(())
    }

    fn held(&self, store: &str, machine: Option<&str>) -> Result<Held, WitnessError> {
        let path = self.file(store);
        self.check_readable()?;
        match std::fs::read(&path) {
            Ok(b) => Ok(Held::parse(
                &String::from_utf8_lossy(&b),
                Some(path),
                Some(store),
                machine,
            )),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Held {
                file: Some(path),
                ..Held::default()
            }),
            Err(e) => Err(WitnessError::Io {
                action: "read",
                path,
                source: e,
            }),
        }
    }

    fn is_new_for(&self, store: &str) -> Result<bool, WitnessError> {
        Ok(matches!(self.newest(store, None)?, Newest::None))
    }

    fn newest(&self, store: &str, machine: Option<&str>) -> Result<Newest, WitnessError> {
        let path = self.file(store);
        let io = |action, e| WitnessError::Io {
            action,
            path: path.clone(),
            source: e,
        };
        self.check_readable()?;
        let mut f = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Newest::None),
            Err(e) => return Err(io("read", e)),
        };
        let len = f.metadata().map_err(|e| io("read", e))?.len();
        let from = len.saturating_sub(NEWEST_WINDOW);
        f.seek(SeekFrom::Start(from)).map_err(|e| io("read", e))?;
        let mut buf = Vec::new();
        f.read_to_end(&mut buf).map_err(|e| io("read", e))?;
        let text = String::from_utf8_lossy(&buf);
        // A line the window cut is not judged.
        let text = match (from > 0, text.find('\n')) {
            (true, Some(i)) => &text[i + 1..],
            (true, None) => "",
            (false, _) => &text[..],
        };
        let held = Held::parse(text, None, Some(store), machine);
        Ok(match (held.forged.clone(), held.newest()) {
            (Some((_, reason)), _) => Newest::Forged {
                reason: format!("a line of it: {reason}"),
            },
            (None, Some(c)) => Newest::Checkpoint(c.clone()),
            (None, None) => Newest::None,
        })
    }
}

/// The bytes of a torn last line of `path` (one not ended with `\n`); 0 when there is
/// none or no file.
fn torn_tail(path: &Path) -> std::io::Result<u64> {
    let mut f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    let len = f.metadata()?.len();
    if len == 0 {
        return Ok(0);
    }
    let from = len.saturating_sub(NEWEST_WINDOW);
    f.seek(SeekFrom::Start(from))?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf)?;
    if buf.last() == Some(&b'\n') {
        return Ok(0);
    }
    let start = buf.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    Ok((buf.len() - start) as u64)
}

/// The newest of `lines` (checkpoints as JSON text): the highest count of those of `store`
/// (and `machine`), or the first line that is not a valid checkpoint.
pub fn newest_of<'a>(
    lines: impl Iterator<Item = &'a str>,
    store: &str,
    machine: Option<&str>,
) -> Newest {
    let mut best: Option<Checkpoint> = None;
    for l in lines {
        if is_recovery(l) {
            continue;
        }
        match Checkpoint::parse(l) {
            Ok(c) => {
                if c.store.as_deref() != Some(store) || c.machine.as_deref() != machine {
                    return Newest::Forged {
                        reason: format!(
                            "it holds a checkpoint of another store or machine (`{}`)",
                            c.origin
                        ),
                    };
                }
                if best.as_ref().is_none_or(|b| c.count >= b.count) {
                    best = Some(c);
                }
            }
            Err(e @ (CheckpointError::Malformed(_) | CheckpointError::BadSignature)) => {
                return Newest::Forged {
                    reason: format!("a line of it is {e}"),
                };
            }
        }
    }
    best.map_or(Newest::None, Newest::Checkpoint)
}

/// A witness held in memory: the test double of every act of authority (it keeps what it
/// was given, and can be told to refuse).
#[derive(Debug, Default)]
pub struct MemoryWitness {
    taken: Mutex<Vec<Checkpoint>>,
    refuse: Mutex<Option<String>>,
}

impl MemoryWitness {
    /// An empty witness that takes every checkpoint.
    pub fn new() -> Self {
        Self::default()
    }

    /// From now on refuses with `reason` (`None`: takes again).
    pub fn refuse(&self, reason: Option<&str>) {
        if let Ok(mut r) = self.refuse.lock() {
            *r = reason.map(str::to_owned);
        }
    }

    /// Every checkpoint taken, oldest first.
    pub fn taken(&self) -> Vec<Checkpoint> {
        self.taken.lock().map(|t| t.clone()).unwrap_or_default()
    }

    fn refusal(&self) -> Option<String> {
        self.refuse.lock().ok().and_then(|r| r.clone())
    }
}

impl Witness for MemoryWitness {
    fn describe(&self) -> String {
        "memory".into()
    }

    fn ready(&self) -> Result<(), WitnessError> {
        match self.refusal() {
            Some(r) => Err(WitnessError::Refused(r)),
            None => Ok(()),
        }
    }

    fn take(&self, c: &Checkpoint) -> Result<(), WitnessError> {
        self.ready()?;
        if let Ok(mut t) = self.taken.lock() {
            t.push(c.clone());
        }
        Ok(())
    }

    fn newest(&self, store: &str, machine: Option<&str>) -> Result<Newest, WitnessError> {
        let lines: Vec<String> = self.taken().iter().map(Checkpoint::to_line).collect();
        Ok(newest_of(
            lines.iter().map(|l| l.trim_end()),
            store,
            machine,
        ))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const RECOVERY: &str = r#"{"format":"hcp-witness-recovery/1","torn_bytes":5}"#;

    #[test]
    fn a_torn_last_line_is_a_crash_and_a_recovered_one_is_named_so() {
        let h = Held::parse("\n{\"form", None, Some("s"), None);
        assert_eq!((h.torn, h.forged), (vec![(2, 6, false)], None));
        let h = Held::parse(&format!("{{\"for\n{RECOVERY}\n"), None, Some("s"), None);
        assert_eq!((h.torn, h.forged), (vec![(1, 5, true)], None));
    }

    #[test]
    fn a_line_that_is_not_a_checkpoint_elsewhere_is_forged_with_its_line() {
        let h = Held::parse("{\"for\n\n{}\n", None, Some("s"), None);
        assert!(h.torn.is_empty());
        assert_eq!(h.forged.map(|(line, _)| line), Some(1));
        // A recovery line vouches only for the line just before it.
        let h = Held::parse(&format!("x\ny\n{RECOVERY}\n"), None, Some("s"), None);
        assert_eq!(h.forged.map(|(line, _)| line), Some(1));
        assert_eq!(h.torn, vec![(2, 1, true)]);
    }
}
