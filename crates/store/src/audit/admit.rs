//! The one spending step (RUNTIME §6, §7): [`AuditLog::admit`] takes every counter slot
//! and the approval a call needs, and makes its `intent` record durable, all or nothing.
//!
//! The intent record is the spend: it names the counters and the approval it takes
//! (`spends`). `state/counters/<key>.json` and `state/approvals/<id>.used` are caches of
//! the trail: each counter file carries the log offset through which it has counted
//! intents (`applied`), and the anchor carries the offset through which every intent's
//! spends are in their caches. Under the trail's lock, an admission first brings the
//! caches up to date from the records after that offset (idempotently, by each file's
//! own offset), then checks the limits and the approval on them, writes and syncs the
//! intent (the one sync), then updates the caches and the anchor without syncing. A kill
//! at any instant leaves either no intent (nothing spent) or an intent that the next
//! admission counts. The caches are trusted only within the boot that wrote them: after
//! a reboot, which may follow a power cut that lost their last writes, the first
//! admission rebuilds them from the whole trail.

use super::fields::{self, CounterKey, Intent, Spends};
use super::fsutil::replace_unsynced;
use super::record::Kind;
use super::writer::Locked;
use super::{AuditError, AuditLog, AuditStep, Repair};
use crate::approval::{self, UsedMarker};
use crate::counter::{self, Counters, Limits, MAX_RECENT, Verdict};
use crate::error::StoreError;
use crate::session::Timestamp;
use hcp_model::Code;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::PathBuf;

/// A counter slot a call takes: its key and the limits to check it against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterSpend {
    /// The principal identity (Histos `identity`).
    pub identity: String,
    /// The tool (`PACK.VERB`).
    pub tool: String,
    /// The tool's `rate_limit`, `budget` and window.
    pub limits: Limits,
}

/// The approval a call takes, and what it must match (RUNTIME §7: the same tool,
/// arguments, principal and policy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalSpend {
    /// `apr_…`.
    pub id: String,
    /// The tool.
    pub tool: String,
    /// The principal id.
    pub principal: String,
    /// The digest of the principal's other facts.
    pub principal_digest: String,
    /// The digest of the bound arguments.
    pub args_digest: String,
    /// The runtime policy's `content_hash`.
    pub policy_hash: String,
}

/// One admission: the intent record and what it spends.
#[derive(Debug, Clone, PartialEq)]
pub struct Admission {
    /// What the intent record says.
    pub intent: Intent,
    /// Counter slots to take.
    pub counters: Vec<CounterSpend>,
    /// The approvals to take (a call takes at most one; a sense of several refs may take
    /// several), each different.
    pub approvals: Vec<ApprovalSpend>,
}

/// An admitted call: its intent record.
#[derive(Debug, Clone, PartialEq)]
pub struct Admitted {
    /// The intent's `id`: the call's `audit_id`, which its outcome names.
    pub id: String,
    /// Its position in the chain.
    pub seq: u64,
    /// Its time (the time the counters were checked at).
    pub ts: Timestamp,
    /// Its hash.
    pub hash: String,
    /// The torn tail recovered first, if any.
    pub repair: Option<Repair>,
}

/// Why an approval cannot be taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalRefusal {
    /// No such approval, or not of this call.
    Unknown,
    /// Not granted (yet).
    NotApproved,
    /// Taken already.
    Used,
    /// Past its window.
    Expired,
}

/// Why [`AuditLog::admit`] refused. Nothing was spent and nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum AdmitError {
    /// A counter is full (`rate_limit`) or spent (`budget`).
    #[error("`{tool}` for `{identity}`: {}", if *.verdict == Verdict::Budget { "the budget is spent" } else { "the rate limit is reached" })]
    Limit {
        /// The identity.
        identity: String,
        /// The tool.
        tool: String,
        /// [`Verdict::Budget`] or [`Verdict::RateLimit`].
        verdict: Verdict,
    },
    /// The approval cannot be taken.
    #[error("approval `{id}` cannot be taken: {reason:?}")]
    Approval {
        /// The approval.
        id: String,
        /// Why.
        reason: ApprovalRefusal,
    },
    /// The intent could not be made durable (`audit_unavailable`, 74).
    #[error(transparent)]
    Unavailable(#[from] AuditError),
}

impl AdmitError {
    /// `budget`, `rate_limit`, `unknown_approval`, `requires_confirmation` (the approval
    /// is still pending), `approval_used`, `approval_expired`, or the audit's code.
    pub fn code(&self) -> Code {
        match self {
            Self::Limit { verdict, .. } => match verdict {
                Verdict::Budget => Code::Budget,
                _ => Code::RateLimit,
            },
            Self::Approval { reason, .. } => match reason {
                ApprovalRefusal::Unknown => Code::UnknownApproval,
                ApprovalRefusal::NotApproved => Code::RequiresConfirmation,
                ApprovalRefusal::Used => Code::ApprovalUsed,
                ApprovalRefusal::Expired => Code::ApprovalExpired,
            },
            Self::Unavailable(e) => e.code(),
        }
    }
}

impl From<Admitted> for super::Appended {
    fn from(a: Admitted) -> Self {
        Self {
            id: a.id,
            seq: a.seq,
            ts: a.ts,
            hash: a.hash,
            repair: a.repair,
        }
    }
}

impl From<StoreError> for AdmitError {
    fn from(e: StoreError) -> Self {
        Self::Unavailable(AuditError::Store(e))
    }
}

/// A spend found in the trail: the end of its intent's line, its time, what it names.
struct Found {
    end: u64,
    ts_ms: u64,
    id: String,
    spends: Spends,
}

/// The counter caches an admission touched.
struct Caches {
    counters: Counters,
    files: BTreeMap<CounterKey, (PathBuf, counter::Record, bool)>,
    /// Where the reconciliation started: a file that says nothing about its offset
    /// (written by `try_consume`) is taken as counted up to here.
    from: u64,
    /// A file that did not parse was started over: it needs every intent from the first.
    needs_full: bool,
}

impl Caches {
    fn new(home: &crate::Home, from: u64) -> Self {
        Self {
            counters: Counters::new(home),
            files: BTreeMap::new(),
            from,
            needs_full: false,
        }
    }

    fn get(&mut self, key: &CounterKey) -> Result<&mut counter::Record, AuditError> {
        let (path, _) = self.counters.paths(&key.identity, &key.tool);
        let from = self.from;
        let mut damaged = false;
        let entry = match self.files.entry(key.clone()) {
            std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::btree_map::Entry::Vacant(v) => {
                let rec = match Counters::read(&path) {
                    Ok(mut r) => {
                        if r.applied.is_none() {
                            r.applied = Some(from);
                        }
                        r
                    }
                    Err(StoreError::Damaged { .. }) => {
                        // Started over: counted again from the first record.
                        damaged = true;
                        counter::Record {
                            applied: Some(0),
                            ..counter::Record::default()
                        }
                    }
                    Err(e) => return Err(e.into()),
                };
                v.insert((path, rec, false))
            }
        };
        self.needs_full |= damaged && from > 0;
        let (_, r, dirty) = entry;
        *dirty = true;
        r.identity.clone_from(&key.identity);
        r.tool.clone_from(&key.tool);
        Ok(r)
    }

    fn apply(&mut self, f: &Found) -> Result<(), AuditError> {
        for key in &f.spends.counters {
            let r = self.get(key)?;
            if r.applied.is_some_and(|a| a >= f.end) {
                continue;
            }
            if r.recent.len() >= MAX_RECENT {
                r.recent.remove(0);
            }
            r.recent.push(f.ts_ms);
            r.total += 1;
            r.applied = Some(f.end);
        }
        Ok(())
    }

    /// Writes the touched counter files in place (one `pwrite` each, no sync, under the
    /// key's exclusive lock so that a dry check never reads half of one). A new content
    /// shorter than the old is padded with spaces, which JSON allows, so the file never
    /// shrinks and a kill never leaves a mix of two versions.
    fn save(&self) -> Result<(), AuditError> {
        if !self.files.values().any(|(_, _, d)| *d) {
            return Ok(());
        }
        // The key's lock makes the directory when it is missing.
        for (key, (path, rec, dirty)) in &self.files {
            if !*dirty {
                continue;
            }
            let (_, lock) = self.counters.paths(&key.identity, &key.tool);
            let _held = self.counters.lock(&lock, true)?;
            let mut bytes = serde_json::to_vec(rec).unwrap_or_default();
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(path)
                .map_err(|e| StoreError::io("open", path, e))?;
            let old = f
                .metadata()
                .map_err(|e| StoreError::io("read", path, e))?
                .len();
            if let Ok(old) = usize::try_from(old)
                && bytes.len() < old
            {
                bytes.resize(old, b' ');
            }
            std::os::unix::fs::FileExt::write_all_at(&f, &bytes, 0)
                .map_err(|e| StoreError::io("write", path, e))?;
        }
        Ok(())
    }
}

impl AuditLog {
    /// Admits one call (RUNTIME §6, §7): under the trail's lock, brings the spend caches
    /// up to date, checks every counter against its limits at the intent's time and the
    /// approval (granted, unused, in its window, of this call), then appends the
    /// `intent` record naming them and syncs it, then counts it in the caches. All or
    /// nothing: on any error nothing is spent and the call must not run.
    ///
    /// # Errors
    /// [`AdmitError::Limit`], [`AdmitError::Approval`], [`AdmitError::Unavailable`].
    pub fn admit(&self, a: &Admission) -> Result<Admitted, AdmitError> {
        self.admit_inner(a, None)
    }

    /// [`AuditLog::admit`] at `ts` (tests).
    ///
    /// # Errors
    /// As [`AuditLog::admit`].
    pub fn admit_at(&self, a: &Admission, ts: Timestamp) -> Result<Admitted, AdmitError> {
        self.admit_inner(a, Some(ts))
    }

    fn admit_inner(&self, a: &Admission, ts: Option<Timestamp>) -> Result<Admitted, AdmitError> {
        let spends = Spends {
            counters: a
                .counters
                .iter()
                .map(|c| CounterKey {
                    identity: c.identity.clone(),
                    tool: c.tool.clone(),
                })
                .collect(),
            approvals: a.approvals.iter().map(|x| x.id.clone()).collect(),
        };
        let fields = fields::intent_fields(&a.intent, &spends)?;
        let mut locked = self.open_locked()?;
        let ts = ts.unwrap_or_else(Timestamp::now);
        // Counters count in milliseconds: the record's time, to the millisecond.
        let ts = Timestamp::from_millisecond(ts.as_millisecond()).unwrap_or(ts);
        let ts_ms = u64::try_from(ts.as_millisecond()).unwrap_or(0);
        let prior = locked.anchor.applied_in(&locked.boot);
        let mut caches = self.reconcile_locked(&mut locked, &spends.counters)?;
        let refusal = self.check(&mut caches, a, ts, ts_ms)?;
        if let Some(r) = refusal {
            caches.save()?;
            let end = locked.tail.end;
            locked.write_anchor(Some(end));
            return Err(r);
        }
        let w = self.write_record(&mut locked, Kind::Intent, fields, ts, true)?;
        let end = locked.tail.end;
        // The intent is durable: the call is admitted and its spends count, whatever
        // becomes of the caches. One that cannot be written now is brought up to date by
        // the next admission (the watermark then stays where it was).
        let cached = caches
            .apply(&Found {
                end,
                ts_ms,
                id: w.id.clone(),
                spends: spends.clone(),
            })
            .and_then(|()| caches.save())
            .and_then(|()| {
                spends
                    .approvals
                    .iter()
                    .try_for_each(|id| self.mark_used(id, &w.id, ts))
            });
        self.step(AuditStep::CachesUpdated);
        locked.write_anchor(if cached.is_ok() { Some(end) } else { prior });
        self.step(AuditStep::AnchorWritten);
        Ok(Admitted {
            id: w.id,
            seq: w.seq,
            ts: w.ts,
            hash: w.hash,
            repair: locked.repair.take(),
        })
    }

    /// Checks the limits and the approval; `Some(refusal)` when the call may not pass.
    fn check(
        &self,
        caches: &mut Caches,
        a: &Admission,
        ts: Timestamp,
        ts_ms: u64,
    ) -> Result<Option<AdmitError>, AuditError> {
        for c in &a.counters {
            let key = CounterKey {
                identity: c.identity.clone(),
                tool: c.tool.clone(),
            };
            let r = caches.get(&key)?;
            let since = ts_ms.saturating_sub(c.limits.window_ms);
            r.recent.retain(|&t| t >= since);
            // Only the last `rate_limit` times can decide the next verdict.
            if let Some(rate) = c.limits.rate_limit
                && let Ok(keep) = usize::try_from(rate)
                && r.recent.len() > keep
            {
                r.recent.drain(..r.recent.len() - keep);
            }
            let v = Counters::verdict(r, c.limits, ts_ms);
            if v != Verdict::Ok {
                return Ok(Some(AdmitError::Limit {
                    identity: c.identity.clone(),
                    tool: c.tool.clone(),
                    verdict: v,
                }));
            }
        }
        for (i, s) in a.approvals.iter().enumerate() {
            let refuse = |reason| {
                Ok(Some(AdmitError::Approval {
                    id: s.id.clone(),
                    reason,
                }))
            };
            if a.approvals[..i].iter().any(|x| x.id == s.id) {
                return refuse(ApprovalRefusal::Used);
            }
            // Under the trail's lock: never wait for the store lock here.
            let Some(ap) = crate::lock::no_wait(|| approval::get(self.home(), &s.id))? else {
                return refuse(ApprovalRefusal::Unknown);
            };
            if !ap.matches(
                &s.tool,
                (&s.principal, &s.principal_digest),
                &s.args_digest,
                &s.policy_hash,
            ) {
                return refuse(ApprovalRefusal::Unknown);
            }
            match ap.state(ts) {
                "approved" => {}
                "used" => return refuse(ApprovalRefusal::Used),
                "expired" => return refuse(ApprovalRefusal::Expired),
                _ => return refuse(ApprovalRefusal::NotApproved),
            }
        }
        Ok(None)
    }

    fn mark_used(&self, id: &str, intent: &str, at: Timestamp) -> Result<(), AuditError> {
        let path = approval::used_marker(self.home(), id);
        if path.exists() {
            return Ok(());
        }
        let m = UsedMarker {
            intent: intent.to_owned(),
            at,
        };
        replace_unsynced(&path, &serde_json::to_vec(&m).unwrap_or_default())?;
        Ok(())
    }

    /// Brings every spend cache up to date with the trail (what an admission does first),
    /// then moves the anchor's watermark.
    ///
    /// # Errors
    /// [`AuditError`] as for an append.
    pub fn reconcile(&self) -> Result<(), AuditError> {
        let mut locked = self.open_locked()?;
        let caches = self.reconcile_locked(&mut locked, &[])?;
        caches.save()?;
        let end = locked.tail.end;
        locked.write_anchor(Some(end));
        Ok(())
    }

    /// The caches of `keys` and of every intent after the watermark, up to date.
    fn reconcile_locked(
        &self,
        locked: &mut Locked,
        keys: &[CounterKey],
    ) -> Result<Caches, AuditError> {
        let end = locked.tail.end;
        let from = locked
            .anchor
            .applied_in(&locked.boot)
            .filter(|&a| a <= end)
            .unwrap_or(0);
        let caches = self.reconcile_from(locked, from, end, keys)?;
        if caches.needs_full {
            return self.reconcile_from(locked, 0, end, keys);
        }
        Ok(caches)
    }

    fn reconcile_from(
        &self,
        locked: &Locked,
        from: u64,
        end: u64,
        keys: &[CounterKey],
    ) -> Result<Caches, AuditError> {
        let mut caches = Caches::new(self.home(), from);
        for k in keys {
            caches.get(k)?;
        }
        for f in self.spends_between(locked, from, end)? {
            caches.apply(&f)?;
            let at = Timestamp::from_millisecond(i64::try_from(f.ts_ms).unwrap_or(0))
                .unwrap_or(Timestamp::UNIX_EPOCH);
            for id in &f.spends.approvals {
                self.mark_used(id, &f.id, at)?;
            }
        }
        Ok(caches)
    }

    /// The intents with spends whose lines lie between `from` and `end`.
    fn spends_between(
        &self,
        locked: &Locked,
        from: u64,
        end: u64,
    ) -> Result<Vec<Found>, AuditError> {
        let path = self.path();
        let io = |e| AuditError::Store(StoreError::io("read", path, e));
        let mut out = Vec::new();
        if from >= end {
            return Ok(out);
        }
        let mut f = &locked.log;
        f.seek(SeekFrom::Start(from)).map_err(io)?;
        let mut reader = BufReader::with_capacity(64 * 1024, f);
        let mut at = from;
        let mut buf = Vec::new();
        let finder = memchr::memmem::Finder::new(b"\"spends\":");
        while at < end {
            buf.clear();
            let n = reader.read_until(b'\n', &mut buf).map_err(io)?;
            if n == 0 {
                break;
            }
            at += n as u64;
            if finder.find(&buf).is_none() {
                continue;
            }
            let Ok(v) = serde_json::from_slice::<Value>(&buf) else {
                continue;
            };
            if v.get("kind").and_then(Value::as_str) != Some(Kind::Intent.as_str()) {
                continue;
            }
            let Some(spends) = v
                .get("spends")
                .and_then(|s| serde_json::from_value::<Spends>(s.clone()).ok())
            else {
                continue;
            };
            let ts_ms = v
                .get("ts")
                .and_then(Value::as_str)
                .and_then(|t| t.parse::<Timestamp>().ok())
                .and_then(|t| u64::try_from(t.as_millisecond()).ok())
                .unwrap_or(0);
            let id = v.get("id").and_then(Value::as_str).unwrap_or("").to_owned();
            out.push(Found {
                end: at,
                ts_ms,
                id,
                spends,
            });
        }
        Ok(out)
    }
}
