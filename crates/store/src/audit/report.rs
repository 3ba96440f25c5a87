//! What a state backend answers about its audit records ([`crate::state::State`]): the
//! verification of every chain it keeps (one for the file store, one per machine for a
//! database, RUNTIME §9), and a follower of new records (`hcp audit tail --follow`).

use super::{AuditError, VerifyReport};
use serde::Serialize;
use std::os::fd::BorrowedFd;
use std::time::Duration;

/// One chain as verified: the file store's trail, or one machine's chain in a database.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChainVerify {
    /// The machine whose chain it is; `None` for the file store's one trail.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    /// What the walk found. For a database's chain, `line` means `seq` and there are no
    /// anchor lags, torn tails or recoveries.
    #[serde(flatten)]
    pub report: VerifyReport,
}

/// Every chain of a backend, as `hcp audit verify` reports them (RUNTIME §6, §9).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct AuditReport {
    /// One per chain, in a stable order (by machine).
    pub chains: Vec<ChainVerify>,
}

impl AuditReport {
    /// The report of one unnamed chain (the file store).
    pub fn single(report: VerifyReport) -> Self {
        Self {
            chains: vec![ChainVerify {
                machine: None,
                report,
            }],
        }
    }

    /// Whether every chain is sound.
    pub fn is_clean(&self) -> bool {
        self.chains.iter().all(|c| c.report.is_clean())
    }

    /// Sound records of all chains together.
    pub fn records(&self) -> u64 {
        self.chains.iter().map(|c| c.report.records).sum()
    }

    /// Calls with an intent and no outcome, in all chains together.
    pub fn interrupted(&self) -> usize {
        self.chains.iter().map(|c| c.report.interrupted.len()).sum()
    }

    /// The first chain with a fault, if any.
    pub fn first_broken(&self) -> Option<&ChainVerify> {
        self.chains.iter().find(|c| !c.report.is_clean())
    }
}

/// A reader of records as a backend appends them ([`crate::state::State::audit_follow`]).
pub trait AuditFollow: Send {
    /// The records appended since the last call (the first call: the last N asked for),
    /// each one JSON object as the backend presents it (the file store: the line as
    /// stored), oldest first. When there are none yet, waits up to `wait`, or until one of
    /// `wake` is readable (or reports an error or a hang-up), then looks once more; so the
    /// answer may be empty.
    ///
    /// # Errors
    /// [`AuditError`] when the records cannot be read.
    fn next(&mut self, wait: Duration, wake: &[BorrowedFd<'_>])
    -> Result<Vec<Vec<u8>>, AuditError>;
}
