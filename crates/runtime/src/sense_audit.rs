//! `hcp sense` as one long call of RUNTIME §6: its intent is written at admission
//! ([`crate::pipeline::sense`]), its outcome when the relay stops ([`run`]): how it ended
//! (the relay's exit status, or the code of a trigger that could not start), how long it
//! ran, the bytes it relayed on stdout (events) and stderr (the triggers' lines and the
//! relay's notes), and how many events.

use crate::Runtime;
use crate::pipeline::SenseAdmitted;
use crate::record::Facts;
use crate::refusal::Refusal;
use crate::sense::{Sinks, relay};
use std::io::Write;

/// The admitted sense's facts, kept for its outcome record.
#[derive(Debug)]
pub struct SenseAudit {
    facts: Option<Facts>,
}

impl SenseAudit {
    pub(crate) fn new(facts: Facts) -> Self {
        Self { facts: Some(facts) }
    }

    /// The call's `audit_id`: its intent record's `id`.
    pub fn audit_id(&self) -> Option<&str> {
        self.facts
            .as_ref()
            .and_then(|f| f.admitted.as_ref())
            .map(|(id, _)| id.as_str())
    }
}

/// A writer that counts what passes through it.
struct Counting<'a> {
    inner: &'a mut dyn Write,
    bytes: u64,
    lines: u64,
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

/// Runs the relay of an admitted sense ([`relay`]) and writes its outcome record when it
/// stops, whatever the reason; answers as the relay does. The record is best effort: the
/// relay's answer stands, and a missing outcome shows the sense as interrupted.
///
/// # Errors
/// The relay's (a trigger that cannot be started, a failed `poll`).
pub fn run(
    rt: &Runtime,
    admitted: &mut SenseAdmitted,
    count: Option<u64>,
    sinks: Sinks<'_>,
) -> Result<u8, Refusal> {
    let Sinks {
        events,
        notes,
        stop,
        events_fd,
    } = sinks;
    let mut out = Counting {
        inner: events,
        bytes: 0,
        lines: 0,
    };
    let mut err = Counting {
        inner: notes,
        bytes: 0,
        lines: 0,
    };
    let answer = relay(
        rt,
        admitted,
        count,
        Sinks {
            events: &mut out,
            notes: &mut err,
            stop,
            events_fd,
        },
    );
    if let Some(mut facts) = admitted.audit.facts.take() {
        facts.learned.events = Some(out.lines);
        let (code, exit) = match &answer {
            Ok(status) => (None, Some(i32::from(*status))),
            Err(r) => (Some(r.code), None),
        };
        if let Some(o) = facts.outcome(code, exit, (out.bytes, err.bytes), false) {
            let _ = rt.state().record_outcome(&o);
        }
    }
    answer
}
