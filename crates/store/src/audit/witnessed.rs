//! What the trail says its witness holds (RUNTIME §6, "Witnesses"), kept small for the
//! look before every act of authority: `audit/witnessed.json`, one JSON object,
//!
//! ```json
//! {"format": "hcp-witnessed/1", "witness": "directory /srv/w", "named": 2, "count": 57}
//! ```
//!
//! `witness` and `named` are the witness the trail's last [`super::WITNESS_ACT`] record
//! names and that record's `seq` (`null` and 0: the trail names none); `count` is the
//! highest count of a checkpoint that witness took of this trail since (0: not known).
//! It is a cache of the trail, never the evidence: it is written after the witness took
//! a checkpoint (so it never names more than the witness was given), without a sync; a
//! count lowered or removed changes no answer, because whether the witness holds what it
//! took is decided by its own file and the trail's tail ([`AuditLog::check_witnessed`]);
//! absent or unreadable, it is made again from a walk of the trail
//! ([`AuditLog::scan_witnessed`]); and before an act is refused because the configuration
//! names another witness than it does, the trail is walked to confirm it. `hcp audit
//! verify` reads the trail itself, never this file.
//!
//! With it, an act of authority is refused ([`AuditLog::check_named`],
//! [`AuditLog::check_witnessed`]) when `config.json` names no witness, or another, while
//! the trail's last `witness` record names one (the witness was removed or changed by
//! hand: `witness_unavailable`), and when the witness holds no checkpoint of the store, or
//! only older ones, while it took one of `count` records (its file deleted, emptied or
//! cut: `checkpoint_mismatch`).

use super::witness::{Witness, WitnessError};
use super::{AuditError, AuditLog, Fault};
use serde::{Deserialize, Serialize};
use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

/// The file's name inside `audit/`.
pub const WITNESSED_FILE: &str = "witnessed.json";
/// Its `format`.
pub const WITNESSED_FORMAT: &str = "hcp-witnessed/1";

/// What the trail says of its witness (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Witnessed {
    /// [`WITNESSED_FORMAT`].
    pub format: String,
    /// The witness the trail's last `witness` record names, as the runtime names it
    /// (`directory DIR`); `None`: none (from that record on, or ever).
    pub witness: Option<String>,
    /// That record's `seq`; 0 when the trail has none.
    pub named: u64,
    /// The highest count of a checkpoint the witness took of this trail since; 0 when it
    /// is not known.
    pub count: u64,
}

impl Witnessed {
    fn new(witness: Option<String>, named: u64, count: u64) -> Self {
        Self {
            format: WITNESSED_FORMAT.to_owned(),
            witness,
            named,
            count,
        }
    }

    /// `next` over `self`: a later `witness` record wins; the same one keeps the highest
    /// count; an earlier one changes nothing (two processes writing at once).
    fn merged(&self, next: &Self) -> Self {
        if next.named > self.named {
            return next.clone();
        }
        if next.named == self.named && next.witness == self.witness {
            return Self::new(self.witness.clone(), self.named, self.count.max(next.count));
        }
        self.clone()
    }
}

impl AuditLog {
    fn witnessed_path(&self) -> PathBuf {
        self.dir().join(WITNESSED_FILE)
    }

    /// The file's content, `None` when it is absent or does not parse.
    fn read_witnessed(&self) -> Option<Witnessed> {
        let b = super::read_small(&self.witnessed_path(), 4096).ok()?;
        serde_json::from_slice::<Witnessed>(&b)
            .ok()
            .filter(|w| w.format == WITNESSED_FORMAT)
    }

    /// Rewrites the file as `f` answers from what it holds, under its own lock (best
    /// effort: it is a cache; a write that fails leaves the next look to walk the trail).
    fn update_witnessed(&self, f: impl FnOnce(Option<Witnessed>) -> Option<Witnessed>) {
        let path = self.witnessed_path();
        let Ok(mut file) = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
        else {
            return;
        };
        if file.lock().is_err() {
            return;
        }
        let mut text = Vec::new();
        let old = file
            .read_to_end(&mut text)
            .ok()
            .and_then(|_| serde_json::from_slice::<Witnessed>(&text).ok())
            .filter(|w| w.format == WITNESSED_FORMAT);
        let Some(new) = f(old.clone()) else {
            return;
        };
        if old.as_ref() == Some(&new) {
            return;
        }
        let Ok(line) = serde_json::to_string(&new) else {
            return;
        };
        let _ = file
            .set_len(0)
            .and_then(|()| file.seek(SeekFrom::Start(0)))
            .and_then(|_| file.write_all(format!("{line}\n").as_bytes()));
        let _ = file.unlock();
    }

    /// Notes the `witness` record `named` naming `witness` (`None`: none from then on),
    /// whose checkpoint the witness took (`count`: its `seq`; 0 for none).
    pub(super) fn note_named(&self, witness: Option<String>, named: u64, count: u64) {
        let next = Witnessed::new(witness, named, count);
        self.update_witnessed(|old| Some(old.map_or_else(|| next.clone(), |o| o.merged(&next))));
    }

    /// Notes that `witness` took a checkpoint of `count` records: the file's count rises
    /// when it names that witness (a file that names another, or none, is left alone).
    pub(super) fn note_taken(&self, witness: &str, count: u64) {
        self.update_witnessed(|old| {
            let o = old?;
            (o.witness.as_deref() == Some(witness) && count > o.count)
                .then(|| Witnessed::new(o.witness.clone(), o.named, count))
        });
    }

    /// What the trail's own records say of its witness: a walk of the whole trail
    /// ([`AuditLog::verify`]: the last `witness` record an `act failed` record did not
    /// withdraw), kept as the file when the walk found the trail sound. The count is not
    /// known from the walk (0).
    ///
    /// # Errors
    /// [`AuditError`] when the trail cannot be read.
    pub fn scan_witnessed(&self) -> Result<Witnessed, AuditError> {
        let r = self.verify()?;
        let found = r.witness_named.last().map_or_else(
            || Witnessed::new(None, 0, 0),
            |n| Witnessed::new(n.witness.clone(), n.seq, 0),
        );
        if r.broken.is_none() {
            self.update_witnessed(|old| {
                Some(old.map_or_else(|| found.clone(), |o| o.merged(&found)))
            });
        }
        Ok(match self.read_witnessed() {
            Some(kept) if kept.named == found.named && kept.witness == found.witness => kept,
            _ => found,
        })
    }

    /// What the trail says of its witness: the file, else [`AuditLog::scan_witnessed`].
    ///
    /// # Errors
    /// As [`AuditLog::scan_witnessed`].
    pub fn witnessed(&self) -> Result<Witnessed, AuditError> {
        match self.read_witnessed() {
            Some(w) => Ok(w),
            None => self.scan_witnessed(),
        }
    }

    /// Holds the configured witness (`configured`, as the runtime names it; `None`: none)
    /// to the one the trail's last `witness` record names (RUNTIME §6): another, or none,
    /// while the trail names one, is `witness_unavailable`, confirmed by a walk of the
    /// trail before it is answered (the file may be older than the trail after a crash).
    ///
    /// # Errors
    /// [`AuditError::Witness`] ([`WitnessError::Unrecorded`]); as
    /// [`AuditLog::scan_witnessed`].
    pub fn check_named(&self, configured: Option<&str>) -> Result<(), AuditError> {
        let differs = |w: &Witnessed| w.witness.is_some() && w.witness.as_deref() != configured;
        if !differs(&self.witnessed()?) {
            return Ok(());
        }
        let w = self.scan_witnessed()?;
        match w.witness {
            Some(named) if Some(named.as_str()) != configured => {
                Err(AuditError::Witness(WitnessError::Unrecorded {
                    named,
                    seq: w.named,
                    configured: configured.map(str::to_owned),
                }))
            }
            _ => Ok(()),
        }
    }

    /// Whether `witness`, which holds no checkpoint of this store yet, may be named the
    /// trail's witness now by a `witness` record of its own: when the trail names none
    /// (a witness configured for the first time, or after `hcp config unset
    /// audit.witness`), or names this one without a count (hcp killed before its first
    /// checkpoint). Not when the trail names it and it took checkpoints (they were removed:
    /// `checkpoint_mismatch`), nor when the trail names another (this process's
    /// configuration is older than the trail's last `witness` record, or was changed by
    /// hand: `witness_unavailable`), so that neither a call nor the completion of an act
    /// starts a witness's file again over a loss, or names a witness the trail moved from.
    ///
    /// # Errors
    /// As above; as [`AuditLog::witnessed`].
    pub(super) fn may_name(&self, witness: &dyn Witness) -> Result<(), AuditError> {
        let w = self.witnessed()?;
        let name = witness.describe();
        match w.witness {
            None => Ok(()),
            Some(n) if n == name => self.check_kept(witness, None),
            Some(named) => Err(AuditError::Witness(WitnessError::Unrecorded {
                named,
                seq: w.named,
                configured: Some(name),
            })),
        }
    }

    /// Whether `witness` holds what the trail says it took (RUNTIME §6): its newest
    /// checkpoint (`newest`, its count; `None`: it holds none of this store) must be at
    /// least as new as every act of authority the trail says it witnessed. The witness's
    /// own file and the trail decide, never this file: the trail is read backwards from
    /// its end down to `newest` ([`AuditLog::owed_since`]), and an act there that was
    /// witnessed when it was made (in the present witness's part of the trail) was lost
    /// from the witness. The file only answers sooner: when it names `witness` with a
    /// count past `newest` (it is written only after the witness took that checkpoint),
    /// the act is refused without the read.
    ///
    /// # Errors
    /// [`AuditError::Behind`] (`checkpoint_mismatch`); [`AuditError::Store`] when the
    /// trail cannot be read.
    pub(super) fn check_kept(
        &self,
        witness: &dyn Witness,
        newest: Option<u64>,
    ) -> Result<(), AuditError> {
        let name = witness.describe();
        let holds = |n: Option<u64>| match n {
            None => "holds no checkpoint of this store".to_owned(),
            Some(n) => format!("holds checkpoints of at most {n} records"),
        };
        let removed = "checkpoints were removed from it (its file deleted, emptied or cut)";
        if let Some(w) = self.read_witnessed()
            && w.witness.as_deref() == Some(name.as_str())
            && w.count > newest.unwrap_or(0)
        {
            return Err(AuditError::Behind {
                fault: Fault::CheckpointMismatch,
                detail: format!(
                    "the witness ({name}) {}, while it took one of {} records of this trail (the trail names it at record {}): {removed}",
                    holds(newest),
                    w.count,
                    w.named
                ),
            });
        }
        let owed = self.owed_since(newest.unwrap_or(0))?;
        // Acts after the last `witness` record naming another (or none), or in a trail
        // that never named one, are not its.
        match &owed.named {
            Some((_, named)) if named.as_deref() != Some(name.as_str()) => return Ok(()),
            None if !owed.bounded => return Ok(()),
            _ => {}
        }
        match owed.acts.last() {
            None => Ok(()),
            Some(act) => Err(AuditError::Behind {
                fault: Fault::CheckpointMismatch,
                detail: format!(
                    "the witness ({name}) {}, while it took the checkpoint of the act of authority at record {act} of this trail when it was made: {removed}",
                    holds(newest)
                ),
            }),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_later_record_wins_and_the_same_one_keeps_the_highest_count() {
        let a = Witnessed::new(Some("directory /a".into()), 2, 9);
        let b = Witnessed::new(Some("directory /b".into()), 12, 12);
        assert_eq!(a.merged(&b), b);
        assert_eq!(b.merged(&a), b, "an earlier record changes nothing");
        let lower = Witnessed::new(Some("directory /b".into()), 12, 0);
        assert_eq!(b.merged(&lower), b);
        assert_eq!(lower.merged(&b), b);
    }
}
