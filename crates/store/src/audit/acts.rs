//! The order of acts of authority and of changes of the witness (RUNTIME §6,
//! "Witnesses"), and what the trail's own tail says a witness took.
//!
//! Every act of authority reads the witness it uses (`audit.witness` in `config.json`),
//! checks it, appends its record and has that witness take its checkpoint under one
//! lock, [`ActsLock`]: an exclusive `flock(2)` on the `audit/` directory itself (no file
//! is made for it). `hcp config set` / `unset audit.witness` holds the same lock from its
//! record to the write of `config.json`, so no act ever sees the trail naming one witness
//! and `config.json` naming another because the two were changed one after the other,
//! and no act's checkpoint goes to a witness the trail moved from. The lock is taken
//! after the store lock (`state/store.lock`) when both are held, and before the trail's
//! own lock (the anchor's), never the other way round. It is reentrant within a thread:
//! an act recorded while the same thread holds it (the change of the witness) does not
//! wait for itself.
//!
//! [`AuditLog::owed_since`] reads the trail backwards from its end down to a count: the
//! acts of authority there whose witness took their checkpoint when they were made (an
//! intent with its `act made` completion, or an act made whole followed by a later act),
//! so that the witness's own file, not `audit/witnessed.json`, decides whether it lost
//! checkpoints ([`super::witnessed`]).

use super::{AuditError, AuditLog};
use crate::error::StoreError;
use serde_json::Value;
use std::cell::RefCell;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

thread_local! {
    /// The `audit/` directories this thread holds the lock of, each with its open
    /// directory and how many [`ActsLock`]s share it.
    static HELD: RefCell<Vec<(PathBuf, Option<File>, usize)>> = const { RefCell::new(Vec::new()) };
}

/// The lock that orders acts of authority and changes of the witness (see the module
/// docs), held until dropped. Not `Send`: it belongs to the thread that took it.
#[derive(Debug)]
pub struct ActsLock {
    dir: PathBuf,
    _thread: std::marker::PhantomData<*const ()>,
}

impl Drop for ActsLock {
    fn drop(&mut self) {
        HELD.with(|h| {
            let mut h = h.borrow_mut();
            if let Some(i) = h.iter().position(|(d, _, _)| *d == self.dir) {
                h[i].2 -= 1;
                if h[i].2 == 0 {
                    // Closing the directory releases the lock.
                    h.remove(i);
                }
            }
        });
    }
}

impl AuditLog {
    /// Takes [`ActsLock`] (blocks while another process or thread holds it). A store
    /// whose `audit/` does not exist is not locked (its acts fail at their record).
    ///
    /// # Errors
    /// [`AuditError::Store`] when the directory cannot be opened or locked.
    pub fn lock_acts(&self) -> Result<ActsLock, AuditError> {
        let dir = self.dir().to_path_buf();
        HELD.with(|h| {
            let mut h = h.borrow_mut();
            if let Some(e) = h.iter_mut().find(|(d, _, _)| *d == dir) {
                e.2 += 1;
            } else {
                let f = match File::open(&dir) {
                    Ok(f) => {
                        f.lock()
                            .map_err(|e| AuditError::Store(StoreError::io("lock", &dir, e)))?;
                        Some(f)
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                    Err(e) => return Err(AuditError::Store(StoreError::io("open", &dir, e))),
                };
                h.push((dir.clone(), f, 1));
            }
            Ok(ActsLock {
                dir,
                _thread: std::marker::PhantomData,
            })
        })
    }

    /// The acts of authority after record `floor` whose witness took a checkpoint of
    /// their own record when they were made, oldest first, read from the trail's end
    /// backwards and stopping at record `floor` or at the last [`super::WITNESS_ACT`]
    /// record (which begins the present witness's part of the trail; its own `seq` is
    /// given as well when it is after `floor`, owed when the act that named it was made or a
    /// later act followed it). An intent counts once its `act made`
    /// record follows; an act recorded whole once a later act follows it (hcp may have
    /// been killed before its checkpoint otherwise); one an `act failed` record withdrew
    /// never. Lines that do not parse are left to `hcp audit verify`.
    ///
    /// # Errors
    /// [`AuditError::Store`] when the trail cannot be read.
    pub fn owed_since(&self, floor: u64) -> Result<Owed, AuditError> {
        let path = self.path().to_path_buf();
        let io = |e| AuditError::Store(StoreError::io("read", &path, e));
        let mut f = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Owed::default()),
            Err(e) => return Err(io(e)),
        };
        let mut end = f.metadata().map_err(io)?.len();
        let mut carry: Vec<u8> = Vec::new();
        let mut walk = Walk::default();
        const CHUNK: u64 = 64 * 1024;
        while end > 0 {
            let from = end.saturating_sub(CHUNK);
            let mut buf = vec![0u8; (end - from) as usize];
            f.seek(SeekFrom::Start(from)).map_err(io)?;
            f.read_exact(&mut buf).map_err(io)?;
            buf.extend_from_slice(&carry);
            // The first piece may be a line the chunk cut: kept for the next chunk.
            let mut pieces: Vec<&[u8]> = buf.split(|&b| b == b'\n').collect();
            let first = if from > 0 {
                pieces.remove(0).to_vec()
            } else {
                Vec::new()
            };
            for line in pieces.iter().rev() {
                if walk.line(line, floor) {
                    return Ok(walk.done());
                }
            }
            carry = first;
            end = from;
        }
        Ok(walk.done())
    }
}

/// What [`AuditLog::owed_since`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Owed {
    /// The `seq` of each act owed a checkpoint, oldest first.
    pub acts: Vec<u64>,
    /// The `seq` of the last [`super::WITNESS_ACT`] record no `act failed` record
    /// withdrew, when it is after the floor, and the witness it names (`None`: none from
    /// then on).
    pub named: Option<(u64, Option<String>)>,
    /// Whether the walk stopped at the floor (else at a `witness` record, or at the
    /// trail's first record: then no witness was named before the acts found).
    pub bounded: bool,
}

/// The backward walk of [`AuditLog::owed_since`].
#[derive(Default)]
struct Walk {
    acts: Vec<u64>,
    named: Option<(u64, Option<String>)>,
    bounded: bool,
    withdrawn: std::collections::BTreeSet<u64>,
    made: std::collections::BTreeSet<u64>,
    /// Whether an act was seen after the one being read (an act recorded whole is owed
    /// then).
    later_act: bool,
}

impl Walk {
    /// Reads one line; `true` once the walk is done.
    fn line(&mut self, line: &[u8], floor: u64) -> bool {
        let Ok(Value::Object(m)) = serde_json::from_slice::<Value>(line) else {
            return false;
        };
        let Some(seq) = m.get("seq").and_then(Value::as_u64) else {
            return false;
        };
        if seq <= floor {
            self.bounded = true;
            return true;
        }
        let Some(act) = m.get("act").and_then(Value::as_str) else {
            return false;
        };
        let of = m
            .get("changed")
            .and_then(|c| c.get("seq"))
            .and_then(Value::as_u64);
        match act {
            super::ACT_FAILED => {
                if let Some(of) = of {
                    self.withdrawn.insert(of);
                }
            }
            super::ACT_MADE => {
                if let Some(of) = of {
                    self.made.insert(of);
                }
            }
            super::WITNESS_ACT => {
                if !self.withdrawn.contains(&seq) {
                    let named = m
                        .get("changed")
                        .and_then(|c| c.get("witness"))
                        .and_then(Value::as_str)
                        .map(str::to_owned);
                    self.named = Some((seq, named));
                    // Its checkpoint was taken once the act that named it was made, or
                    // once a later act followed it.
                    if self.later_act || self.made.contains(&seq.saturating_sub(1)) {
                        self.acts.push(seq);
                    }
                    return true;
                }
            }
            // Noticed at a call: its checkpoint is the next act's or 100th call's.
            "policy changed" | "config changed" => {}
            _ => {
                let intent = m.get("phase").and_then(Value::as_str) == Some(super::PHASE_INTENT);
                let authority =
                    m.get("kind").and_then(Value::as_str) == Some(super::Kind::Authority.as_str());
                let owed = authority
                    && !self.withdrawn.contains(&seq)
                    && if intent {
                        self.made.contains(&seq)
                    } else {
                        self.later_act
                    };
                if owed {
                    self.acts.push(seq);
                }
                self.later_act = true;
            }
        }
        false
    }

    fn done(mut self) -> Owed {
        self.acts.reverse();
        Owed {
            acts: self.acts,
            named: self.named,
            bounded: self.bounded,
        }
    }
}
