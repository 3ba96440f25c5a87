//! Keyed chains and witnesses of a fleet (RUNTIME §6, §9).
//!
//! Each machine's chain is keyed by that machine's chain key (`audit/chain.key` of its own
//! `$HCP_HOME`), which never reaches the database: the machine is its chain's only writer,
//! so it keeps the chain's head (seq and hash) in memory — read with the call's reads
//! ([`PgState::call_reads`], no round trip of its own) — computes the next record's hash
//! itself ([`keyed_chain_hash`]) and hands it with the head it was computed on to the
//! server, which appends only when that is still the head, in the same single statement
//! (`hcp_append_keyed`, `hcp_admit`); when another process of the machine appended first,
//! the server answers `stale` with the head, and the machine computes again. An `hcp
//! exec` is thus as many round trips as before: the reads, the admission, the outcome.
//!
//! ```text
//! hash = "hmac-sha256:" + hex(HMAC-SHA-256(chain key, prev + "\n" + seq + "\n" + body))
//! ```
//!
//! Records appended before keyed chains (schema 4 and earlier) keep the server's
//! `sha256:` hash; a machine's chain may hold them only before its first keyed record.
//! `hcp audit verify` checks this machine's keyed records under its key; another machine's
//! are checked for their structure (seq, prev, machine) and reported `not_checked`, since
//! only that machine holds its key.
//!
//! # Checkpoints of a fleet
//! One checkpoint per chain: a checkpoint of format 2 whose `machine` names the chain,
//! `store` the machine's store id, signed by that machine's checkpoint key
//! (`audit/checkpoint.key` of its store). `hcp audit checkpoint` prints this machine's.
//! A witness takes each machine's checkpoints of its own chain after every act of authority
//! and every 100th record: a directory (the machine's file there, as for a file store), or
//! `"state"`: the table `audit_witness`, into which the machines' role may only insert.
//! `hcp audit verify` checks each chain against the newest checkpoint of its machine;
//! a checkpoint of a machine whose key is not the one its first checkpoint named is
//! forged. `"state"` catches a machine's rewritten chain, not a restored database.

use crate::PgState;
use crate::error::PgError;
use hcp_store::audit::checkpoint::{self, Checkpoint};
use hcp_store::audit::witness::{DirWitness, Newest, Witness, WitnessError, newest_of};
use hcp_store::audit::{AuditError, AuditLog, ChainKey, KeyRead};
use hcp_store::session::Timestamp;
use hcp_store::{Home, StoreError};
use postgres::types::Type;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;

/// How many times an append computes its hash again on a head another process of the
/// machine moved, before it gives up (`state_unavailable`).
pub const MAX_STALE: usize = 64;

/// The keyed hash of a record of a fleet's chain (see the module docs).
pub fn keyed_chain_hash(key: &ChainKey, prev: &str, seq: u64, body: &str) -> String {
    key.hash_canonical(format!("{prev}\n{seq}\n{body}").as_bytes())
}

/// This machine's own store, as its chain and checkpoints need it.
#[derive(Clone)]
pub(crate) struct Local {
    pub(crate) key: ChainKey,
    log: AuditLog,
    store: Option<String>,
    origin: String,
}

/// Where a fleet's checkpoints are witnessed (`audit.witness`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum WitnessChoice {
    /// None.
    #[default]
    None,
    /// A directory.
    Dir(PathBuf),
    /// The database's `audit_witness` table.
    State,
    /// `config.json` does not parse, so the witness is not known: acts of authority are
    /// refused.
    Unknown(String),
}

fn witness_error(e: PgError) -> WitnessError {
    WitnessError::State(e.to_string())
}

impl PgState {
    /// Keys this machine's chain with the chain key of `home` (this machine's store) and
    /// signs its checkpoints with that store's key.
    ///
    /// # Errors
    /// [`StoreError`] when the store's chain key cannot be read (`missing_chain_key` when
    /// it is gone).
    pub fn with_local(mut self, home: &Home) -> Result<Self, StoreError> {
        let path = ChainKey::path(home);
        let key = match ChainKey::read(&path)? {
            KeyRead::Found(k) => k,
            KeyRead::Absent => {
                return Err(StoreError::Audit(Box::new(AuditError::Contradicted {
                    fault: hcp_store::audit::Fault::MissingChainKey,
                    detail: format!("`{}` is gone", path.display()),
                })));
            }
            KeyRead::Unreadable(e) => return Err(StoreError::io("read", &path, e)),
        };
        let store = hcp_store::made::Marker::read(home.root())?.map(|m| m.store_id);
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|s| s.trim().to_owned())
            .unwrap_or_else(|_| "localhost".into());
        self.local = Some(Local {
            key,
            log: AuditLog::new(home),
            store,
            origin: format!("{host}:{}", home.root().display()),
        });
        Ok(self)
    }

    /// Has `witness` take this machine's checkpoints.
    pub fn with_witness(mut self, witness: WitnessChoice) -> Self {
        self.witness = witness;
        self
    }

    /// The witness, as `hcp doctor` names it.
    pub fn witness_name(&self) -> Option<String> {
        match &self.witness {
            WitnessChoice::None => None,
            WitnessChoice::Dir(d) => Some(format!("directory {}", d.display())),
            WitnessChoice::State => Some("state".into()),
            WitnessChoice::Unknown(_) => Some("unknown (`config.json` does not parse)".into()),
        }
    }

    pub(crate) fn chain_key(&self) -> Option<&ChainKey> {
        self.local.as_ref().map(|l| &l.key)
    }

    pub(crate) fn head_guess(&self) -> Option<(u64, String)> {
        self.head.lock().ok().and_then(|h| h.clone())
    }

    pub(crate) fn set_head(&self, seq: u64, hash: String) {
        if let Ok(mut h) = self.head.lock() {
            *h = Some((seq, hash));
        }
    }

    /// Notes a record appended at `seq` of this machine's chain: a multiple of 100 makes a
    /// checkpoint due after the call.
    pub(crate) fn noted(&self, seq: u64) {
        if seq.is_multiple_of(hcp_store::audit::witness::CALLS_PER_CHECKPOINT) {
            self.due.store(true, Ordering::Relaxed);
        }
    }

    pub(crate) fn take_due(&self) -> bool {
        self.due.swap(false, Ordering::Relaxed)
    }

    /// A signed checkpoint of this machine's chain at `count` records ending with `head`.
    ///
    /// # Errors
    /// [`AuditError::Unsupported`] without this machine's store; the key's errors.
    pub fn chain_checkpoint(
        &self,
        count: u64,
        head: &str,
        time: Timestamp,
    ) -> Result<Checkpoint, AuditError> {
        let Some(l) = &self.local else {
            return Err(AuditError::Unsupported {
                backend: crate::BACKEND,
                what: "checkpoints without the machine's own store",
            });
        };
        Ok(checkpoint::sign_as(
            &l.log,
            &l.origin,
            l.store.clone(),
            Some(self.machine().as_str().to_owned()),
            count,
            head,
            time,
        )?)
    }

    /// Whether the witness could take a checkpoint now.
    ///
    /// # Errors
    /// [`WitnessError`].
    pub(crate) fn witness_ready(&self) -> Result<(), WitnessError> {
        match &self.witness {
            WitnessChoice::None => Ok(()),
            WitnessChoice::Dir(d) => {
                DirWitness::new(d).ready_for(self.local.as_ref().and_then(|l| l.store.as_deref()))
            }
            WitnessChoice::State => self.with(|_| Ok(())).map_err(witness_error),
            WitnessChoice::Unknown(why) => Err(WitnessError::Config(why.clone())),
        }
    }

    /// Has the witness take `c` (nothing without a witness).
    ///
    /// # Errors
    /// [`WitnessError`].
    pub(crate) fn witness_take(&self, c: &Checkpoint) -> Result<(), WitnessError> {
        match &self.witness {
            WitnessChoice::None => Ok(()),
            WitnessChoice::Dir(d) => DirWitness::new(d).take(c),
            WitnessChoice::State => {
                let machine = c.machine.clone().unwrap_or_default();
                let store = c.store.clone().unwrap_or_default();
                let count = i64::try_from(c.count).unwrap_or(i64::MAX);
                let text = c.to_line();
                self.with(|conn| {
                    conn.execute_typed(
                        "INSERT INTO @.audit_witness (machine, store, count, head, key, checkpoint)
                         VALUES ($1, $2, $3, $4, $5, $6)",
                        &[
                            (&machine, Type::TEXT),
                            (&store, Type::TEXT),
                            (&count, Type::INT8),
                            (&c.head, Type::TEXT),
                            (&c.key, Type::TEXT),
                            (&text.trim_end(), Type::TEXT),
                        ],
                    )?;
                    Ok(())
                })
                .map_err(witness_error)
            }
            WitnessChoice::Unknown(why) => Err(WitnessError::Config(why.clone())),
        }
    }

    /// The newest witnessed checkpoint of each machine's chain the witness holds: every
    /// machine's for `"state"` (one statement), this machine's for a directory (it holds
    /// only its own store's file); empty without a witness.
    ///
    /// # Errors
    /// [`WitnessError`] when the witness cannot be read.
    pub(crate) fn witness_newest(&self) -> Result<BTreeMap<String, Newest>, WitnessError> {
        let own = self.machine().as_str().to_owned();
        let mut out = BTreeMap::new();
        match &self.witness {
            WitnessChoice::None => {}
            WitnessChoice::Dir(d) => {
                if let Some(Local { store: Some(s), .. }) = &self.local {
                    out.insert(own.clone(), DirWitness::new(d).newest(s, Some(&own))?);
                }
            }
            WitnessChoice::State => {
                let rows: Vec<(String, String, String, Vec<String>)> = self
                    .with(|conn| {
                        let rows = conn.query_typed(
                            "SELECT DISTINCT ON (w.machine) w.machine, w.checkpoint, w.store,
                                    (SELECT array_agg(k.key ORDER BY k.first) FROM
                                        (SELECT x.key, min(x.gid) AS first FROM @.audit_witness x
                                         WHERE x.machine = w.machine GROUP BY x.key) k)
                             FROM @.audit_witness w
                             ORDER BY w.machine, w.count DESC, w.gid DESC",
                            &[],
                        )?;
                        rows.iter()
                            .map(|r| {
                                Ok((
                                    r.try_get(0)?,
                                    r.try_get(1)?,
                                    r.try_get(2)?,
                                    r.try_get::<_, Option<Vec<String>>>(3)?.unwrap_or_default(),
                                ))
                            })
                            .collect::<Result<_, PgError>>()
                    })
                    .map_err(witness_error)?;
                let own_key = self
                    .local
                    .as_ref()
                    .and_then(|l| checkpoint::public_key(&l.log).ok().flatten());
                for (machine, text, store, keys) in rows {
                    let found = newest_of(std::iter::once(text.as_str()), &store, Some(&machine));
                    // A machine's key is its own store's for this machine, else the one its
                    // first witnessed checkpoint named.
                    let key = if machine == own {
                        own_key.clone()
                    } else {
                        keys.first().cloned()
                    };
                    let found = match found {
                        Newest::Checkpoint(c) if Some(&c.key) != key.as_ref() => Newest::Forged {
                            reason: format!(
                                "it holds a checkpoint of machine `{machine}` signed by another key than the machine's"
                            ),
                        },
                        other => other,
                    };
                    out.insert(machine, found);
                }
            }
            WitnessChoice::Unknown(why) => return Err(WitnessError::Config(why.clone())),
        }
        Ok(out)
    }
}
