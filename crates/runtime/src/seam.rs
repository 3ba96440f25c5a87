//! The crash-test seam of debug builds: `HCP_TEST_ABORT_AT=STEP[:N]` kills hcp with
//! SIGKILL the Nth time (default the first) a call reaches STEP, as `kill -9` from outside
//! would, so that the tests of RUNTIME §6 ("a crash at any instant never makes `verify`
//! report damage"; a slot or an approval is spent only with a durable intent) can aim at
//! every point of a call. Release builds read nothing and do nothing.
//!
//! STEP is one of the audit trail's write path ([`hcp_store::audit::AuditStep`]:
//! `locked`, `intent_written`, `intent_synced`, `caches_updated`, `anchor_written`,
//! `outcome_written`, `refusal_synced`, `recovered` …), given to the file state's trail
//! ([`hcp_store::FileState::with_step_hook`]), or one of the runtime's own points
//! ([`Point`]): `admitted` (the intent is durable, the child not started), `child_running`
//! (the child has exec'd its program and runs), `child_exited` (the run is over, its
//! outcome not written), `act_recorded` (an act of authority's intent is durable, its
//! change not made: [`crate::authority::Act`]).

use hcp_store::audit::StepHook;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The environment variable (the same one `hcp install`'s crash tests use).
pub const HCP_TEST_ABORT_AT: &str = "HCP_TEST_ABORT_AT";
/// Debug builds: `KIND_write` (`outcome_write` …) makes every write of that kind of
/// record fail with `EIO` (the tests of `outcome_deferred`, RUNTIME §6).
pub const HCP_TEST_FAIL_AT: &str = "HCP_TEST_FAIL_AT";
/// Debug builds: the audit's reserve in bytes instead of 1 MiB (the tests that exhaust it
/// on a small disk, RUNTIME §5.4).
pub const HCP_TEST_RESERVE_BYTES: &str = "HCP_TEST_RESERVE_BYTES";

/// A point of a call where the seam can kill hcp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    /// Admission returned: the intent is durable and nothing has started.
    Admitted,
    /// The child runs (it has exec'd its program).
    ChildRunning,
    /// The child has ended; its outcome is not written yet.
    ChildExited,
    /// An act of authority's intent is durable (and witnessed); its change is not made.
    ActRecorded,
}

impl Point {
    /// `admitted`, `child_running`, `child_exited`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Admitted => "admitted",
            Self::ChildRunning => "child_running",
            Self::ChildExited => "child_exited",
            Self::ActRecorded => "act_recorded",
        }
    }
}

/// What `HCP_TEST_ABORT_AT` asks for (nothing in release builds).
#[derive(Clone, Default)]
pub struct Seam {
    at: Option<(String, usize)>,
    seen: Arc<AtomicUsize>,
    fail_at: Option<String>,
    reserve: Option<u64>,
}

impl std::fmt::Debug for Seam {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Seam").field("at", &self.at).finish()
    }
}

fn sigkill_self() {
    // SAFETY: signalling this process; SIGKILL does not return.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
}

impl Seam {
    /// The seam `HCP_TEST_ABORT_AT` names, in debug builds; none otherwise.
    pub fn from_env() -> Self {
        #[cfg(debug_assertions)]
        {
            let mut s = match std::env::var(HCP_TEST_ABORT_AT) {
                Ok(spec) => Self::parse(&spec),
                Err(_) => Self::default(),
            };
            s.fail_at = std::env::var(HCP_TEST_FAIL_AT).ok();
            s.reserve = std::env::var(HCP_TEST_RESERVE_BYTES)
                .ok()
                .and_then(|v| v.parse().ok());
            s
        }
        #[cfg(not(debug_assertions))]
        Self::default()
    }

    /// The reserve `HCP_TEST_RESERVE_BYTES` asks for (debug builds), for a store being
    /// made (`hcp init`, `hcp install` into a home that is no store).
    pub fn reserve_bytes(&self) -> Option<u64> {
        self.reserve
    }

    /// The file state's trail as the seam asks: a failing write (`HCP_TEST_FAIL_AT`), a
    /// reserve of another size (`HCP_TEST_RESERVE_BYTES`). Unchanged in release builds.
    pub fn audit_log(&self, log: hcp_store::audit::AuditLog) -> hcp_store::audit::AuditLog {
        let log = match self.reserve {
            Some(n) => log.with_reserve(n),
            None => log,
        };
        match &self.fail_at {
            Some(spec) => log.clone().failing_at(spec).unwrap_or(log),
            None => log,
        }
    }

    #[cfg(any(debug_assertions, test))]
    fn parse(spec: &str) -> Self {
        let (step, n) = match spec.split_once(':') {
            Some((s, n)) => (s, n.parse::<usize>().unwrap_or(0)),
            None => (spec, 1),
        };
        Self {
            at: (n > 0).then(|| (step.to_owned(), n)),
            seen: Arc::new(AtomicUsize::new(0)),
            fail_at: None,
            reserve: None,
        }
    }

    /// The store's hook for a step of its write path, when the seam names one.
    pub fn store_hook(&self) -> Option<StepHook> {
        let (step, n) = self.at.as_ref()?;
        hcp_store::audit::abort_hook(&format!("{step}:{n}"))
    }

    fn aims_at(&self, p: Point) -> bool {
        self.at.as_ref().is_some_and(|(s, _)| s == p.name())
    }

    /// Kills hcp here when the seam names `p` and this is its Nth time.
    pub fn reach(&self, p: Point) {
        if let Some((_, n)) = &self.at
            && self.aims_at(p)
            && self.seen.fetch_add(1, Ordering::SeqCst) + 1 == *n
        {
            sigkill_self();
        }
    }

    /// For [`Point::ChildRunning`]: a thread that kills hcp once a child of it has exec'd
    /// (its name is no longer hcp's), polling `/proc` every millisecond (nothing else
    /// tells this process that the adapter's child has started). Nothing when the seam
    /// names another point.
    pub fn watch_child(&self) {
        if !self.aims_at(Point::ChildRunning) {
            return;
        }
        let Some((_, n)) = &self.at else { return };
        if self.seen.fetch_add(1, Ordering::SeqCst) + 1 != *n {
            return;
        }
        let own = std::fs::read_to_string("/proc/self/comm").unwrap_or_default();
        std::thread::spawn(move || {
            loop {
                if exec_child(&own) {
                    sigkill_self();
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        });
    }
}

/// Whether a child of this process runs another program than `own` (its `comm`).
fn exec_child(own: &str) -> bool {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return false;
    };
    tasks.flatten().any(|t| {
        std::fs::read_to_string(t.path().join("children"))
            .unwrap_or_default()
            .split_whitespace()
            .any(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|c| !c.is_empty() && c != own)
            })
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_seam_names_a_store_step_or_a_point_of_the_runtime() {
        assert!(Seam::parse("intent_synced").store_hook().is_some());
        assert!(Seam::parse("outcome_written:2").store_hook().is_some());
        let s = Seam::parse("child_exited");
        assert!(s.store_hook().is_none() && s.aims_at(Point::ChildExited));
        assert!(!Seam::parse("child_exited:0").aims_at(Point::ChildExited));
        assert!(!Seam::default().aims_at(Point::Admitted));
        // Reached at another point: nothing happens.
        Seam::parse("admitted").reach(Point::ChildExited);
    }
}
