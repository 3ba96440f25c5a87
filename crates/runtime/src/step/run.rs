//! Step 9c of RUNTIME §5: the run — the adapter runs the verb's child (no shell, clean
//! environment, bounds, its timeout, the face's cancel), or hcp sends a `kind: openapi`
//! verb's request ([`crate::http`]), or the relay runs a sense's triggers
//! ([`crate::sense::relay`]) until stopped.

use super::Stop;
use crate::Runtime;
use crate::egress::CallEgress;
use crate::http::Work;
use crate::prepare::Child;
use crate::record::Record;
use crate::redact::Redactor;
use crate::refusal::Refusal;
use crate::seam::Point;
use crate::sense::{Sense, Sinks};
use hcp_adapter::{Limits, Outcome};
use hcp_gate::Allowed;
use hcp_store::config::{ConfigError, RuntimeConfig};
use hcp_store::pack::InstalledPack;
use std::io::Write;
use std::os::fd::BorrowedFd;
use std::time::Duration;

/// A verb's run: what the child did, and when it ended, in milliseconds since the call
/// started.
pub(crate) struct Ran {
    pub outcome: Outcome,
    pub limits: Limits,
    pub duration_ms: u64,
}

/// Runs the verb's child (or sends its request) within `timeout` (default 60 s) until
/// `cancel` fires; releases what preparation took. A protected name the call created in a
/// writable workdir is moved into the quarantine before it answers ([`crate::quarantine`]).
///
/// # Errors
/// The adapter's failure to start the child (`spawn_failed`, `bin_changed` …): after
/// admission, the call's outcome.
pub(crate) fn verb(
    rt: &Runtime,
    (work, allowed, config): (&mut Work, &Allowed, &Result<RuntimeConfig, ConfigError>),
    (timeout, cancel): (Option<Duration>, Option<BorrowedFd<'_>>),
    rec: &mut Record,
) -> Result<Ran, Stop> {
    let limits = Limits {
        timeout: timeout.unwrap_or(hcp_adapter::DEFAULT_TIMEOUT),
        // RUNTIME §5: a read's child ends once its output is past the cap.
        end_at_cap: allowed.operation == hcp_model::Operation::Read,
        ..Limits::default()
    };
    let protected = crate::quarantine::watch_call(allowed.land, &allowed.workdir, config);
    rt.seam().watch_child();
    let run = work.run(limits, cancel, rec);
    rt.seam().reach(Point::ChildExited);
    work.clean_up();
    let audit_id = rec.admitted_id().unwrap_or_default();
    crate::quarantine::after_run(rt.home(), protected.as_ref(), &audit_id, &mut rec.facts);
    Ok(Ran {
        outcome: run?,
        limits,
        duration_ms: rec.elapsed_ms(),
    })
}

/// What a sense's relay did: its exit status (or the refusal of a trigger that could not
/// start), the bytes it relayed on stdout (events) and stderr (the triggers' lines and its
/// notes), and how many events.
pub(crate) struct Relayed {
    pub status: Result<u8, Refusal>,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    pub events: u64,
    /// The triggers' egress proxies' connections, by ref (`None`: no trigger had one).
    pub connections: Option<serde_json::Value>,
}

/// A sense to relay: the pack, whose recorded stimuli it relays for `principal`, the
/// refs, the prepared triggers, what to redact, and `--count`.
pub(crate) struct Relay<'a> {
    pub pack: &'a InstalledPack,
    pub principal: &'a str,
    pub refs: &'a [String],
    pub triggers: Vec<(String, Child)>,
    pub redact: &'a Redactor,
    pub count: Option<u64>,
}

/// Relays a sense until `stop` fires, its output is closed, after `count` events, or
/// every trigger it runs has exited. `unbound`: the triggers do not run for want of a
/// binding (its code): the relay says so, then relays the recorded stimuli alone.
pub(crate) fn stimuli(
    rt: &Runtime,
    r: Relay<'_>,
    sinks: Sinks<'_>,
    (stop, unbound): (Option<BorrowedFd<'_>>, Option<hcp_model::Code>),
) -> Relayed {
    let Sinks {
        events,
        notes,
        events_fd,
    } = sinks;
    if let Some(code) = unbound {
        let _ = writeln!(
            notes,
            "hcp: sense: the triggers of `{}` cannot run ({code}); relaying recorded stimuli only",
            r.pack.id
        );
    }
    let mut out = Counting::new(events);
    let mut err = Counting::new(notes);
    let mut triggers = r.triggers;
    let egress: Vec<Option<CallEgress>> =
        triggers.iter_mut().map(|(_, c)| c.egress.take()).collect();
    let refs: Vec<String> = triggers.iter().map(|(r, _)| r.clone()).collect();
    let sense = Sense {
        pack: r.pack,
        principal: r.principal,
        refs: r.refs,
        triggers,
        egress: &egress,
        redact: r.redact,
        count: r.count,
    };
    let sinks = Sinks {
        events: &mut out,
        notes: &mut err,
        events_fd,
    };
    let status = crate::sense::relay(rt, sense, sinks, stop);
    // Every trigger has ended: each proxy ends, its log by ref for the outcome.
    let by_ref = refs.iter().map(String::as_str).zip(egress);
    Relayed {
        status,
        stdout_bytes: out.bytes,
        stderr_bytes: err.bytes,
        events: out.lines,
        connections: crate::egress::trigger_connections(by_ref),
    }
}

/// A writer that counts what passes through it.
struct Counting<'a> {
    inner: &'a mut dyn Write,
    bytes: u64,
    lines: u64,
}

impl<'a> Counting<'a> {
    fn new(inner: &'a mut dyn Write) -> Self {
        Self {
            inner,
            bytes: 0,
            lines: 0,
        }
    }
}

impl Write for Counting<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        self.lines += buf[..n].iter().filter(|b| **b == b'\n').count() as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}
