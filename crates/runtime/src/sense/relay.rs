//! The relay loop of `hcp sense`: runs the admitted triggers and relays their JSON lines
//! and the recorded stimuli until stopped (see [`crate::sense`] and DESIGN.md).

use super::{MAX_LINE_BYTES, RECORDED_POLL, STOP_GRACE};
use crate::Runtime;
use crate::egress::CallEgress;
use crate::prepare::Child;
use crate::redact::Redactor;
use crate::refusal::Refusal;
use hcp_model::{Code, exit};
use hcp_store::pack::InstalledPack;
use hcp_store::stimulus;
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use serde_json::{Value, json};
use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Instant;

/// One running trigger.
struct Running {
    reference: String,
    child: Option<hcp_adapter::Started>,
    out: Option<OwnedFd>,
    err: Option<OwnedFd>,
    out_buf: Vec<u8>,
    err_buf: Vec<u8>,
    out_skipping: bool,
    exit_code: Option<i32>,
    /// Held until the trigger ends: its confinement (its cgroups).
    confinement: Option<hcp_adapter::Confinement>,
}

impl Running {
    /// Ends the group (TERM, then KILL after [`STOP_GRACE`]) and reaps the child.
    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            self.exit_code = c.stop(STOP_GRACE);
        }
        self.release();
    }

    /// After the direct child exited: ends the rest of its group and reaps it.
    fn finish(&mut self) {
        if let Some(mut c) = self.child.take() {
            self.exit_code = Some(c.finish().unwrap_or(128));
        }
        self.release();
    }

    /// Drops the confinement (its cgroups go back to the pool).
    fn release(&mut self) {
        drop(self.confinement.take());
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // Dropping the started child kills its group and reaps it.
        drop(self.child.take());
        self.release();
    }
}

/// Starts trigger `reference`'s child (streaming, no timeout: `hcp_adapter::start`); its
/// listener, under `{"allow": …}`, is served by `egress`.
fn spawn(reference: String, c: Child, egress: Option<&CallEgress>) -> Result<Running, Refusal> {
    let Child {
        bin,
        argv0,
        args,
        env,
        cwd,
        confinement,
        ..
    } = c;
    let inv = hcp_adapter::Invocation {
        bin: &bin,
        argv0,
        args,
        env: &env,
        cwd,
        limits: hcp_adapter::Limits::default(),
        confine: Some(&confinement),
        cancel: None,
        egress: None,
    };
    let mut child = hcp_adapter::start(&inv).map_err(|e| {
        let r = Refusal::adapter(&e);
        Refusal {
            message: format!("trigger `{reference}` could not be started: {}", r.message),
            ..r
        }
    })?;
    crate::egress::serve_trigger(egress, child.take_egress_listener());
    let out = child.take_stdout();
    let err = child.take_stderr();
    for fd in [&out, &err].into_iter().flatten() {
        use nix::fcntl::{FcntlArg, OFlag, fcntl};
        let _ = fcntl(fd, FcntlArg::F_SETFL(OFlag::O_NONBLOCK));
    }
    Ok(Running {
        reference,
        child: Some(child),
        out,
        err,
        out_buf: Vec::new(),
        err_buf: Vec::new(),
        out_skipping: false,
        exit_code: None,
        confinement: Some(confinement),
    })
}

/// Why the loop ended.
#[derive(Debug, PartialEq, Eq)]
enum Stop {
    /// SIGINT/SIGTERM, `--count`, or stdout closed.
    Asked,
    /// Every trigger exited.
    Done,
}

/// Where the relay writes.
pub struct Sinks<'a> {
    /// The events, one JSON line each, flushed per line (hcp's stdout).
    pub events: &'a mut dyn Write,
    /// The triggers' stderr, relayed line by line, and the relay's notes (hcp's stderr).
    pub notes: &'a mut dyn Write,
    /// The descriptor of `events`, watched for its reader going away.
    pub events_fd: Option<BorrowedFd<'a>>,
}

impl std::fmt::Debug for Sinks<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sinks").finish_non_exhaustive()
    }
}

/// The writer of relayed lines: one JSON object a line, flushed per line, with the
/// credential's string values redacted.
struct Relay<'a, 'b> {
    pack_id: &'a str,
    redact: &'a Redactor,
    sent: u64,
    count: Option<u64>,
    events: &'b mut dyn Write,
    notes: &'b mut dyn Write,
}

impl Relay<'_, '_> {
    /// Writes one event; `Err` when the reader is gone.
    fn send(&mut self, reference: &str, event: Value) -> std::io::Result<()> {
        let line = json!({"pack_id": self.pack_id, "ref": reference, "event": event}).to_string();
        let mut line = self.redact.text(&line);
        line.push('\n');
        self.events.write_all(line.as_bytes())?;
        self.events.flush()?;
        self.sent += 1;
        Ok(())
    }

    fn done(&self) -> bool {
        self.count.is_some_and(|c| self.sent >= c)
    }

    fn note(&mut self, reference: &str, what: &str) {
        let _ = writeln!(self.notes, "hcp: sense: trigger `{reference}` {what}");
    }
}

/// An admitted sense, as the relay runs it.
pub(crate) struct Sense<'a> {
    /// The pack.
    pub pack: &'a InstalledPack,
    /// The principal whose recorded stimuli are relayed.
    pub principal: &'a str,
    /// The refs asked for.
    pub refs: &'a [String],
    /// The prepared child of each trigger that runs, by ref.
    pub triggers: Vec<(String, Child)>,
    /// The egress proxy of each trigger, in the order of `triggers` (under
    /// `{"allow": …}`): its listener is served when it starts.
    pub egress: &'a [Option<CallEgress>],
    /// What to redact from what they print.
    pub redact: &'a Redactor,
    /// Stop after relaying this many events.
    pub count: Option<u64>,
}

/// What the relay waits on besides the triggers' streams: `stop`, readable (or hung up)
/// when the relay must stop (the signal pipe), and the reader of `events` going away.
#[derive(Clone, Copy)]
struct Watch<'a> {
    stop: Option<BorrowedFd<'a>>,
    events_fd: Option<BorrowedFd<'a>>,
}

/// Runs the admitted triggers and relays events until stopped, at most `count` of them;
/// answers the exit status: 0 when asked to stop (`stop` readable, `--count`, the reader
/// gone), else, once every trigger has exited on its own, the first failure's status.
///
/// # Errors
/// A trigger that cannot be started (`spawn_failed`, `bin_changed` …) or a failed `poll`
/// (`supervise_failed`); the triggers already started are stopped first.
pub(crate) fn relay(
    rt: &Runtime,
    mut sense: Sense<'_>,
    sinks: Sinks<'_>,
    stop: Option<BorrowedFd<'_>>,
) -> Result<u8, Refusal> {
    let Sinks {
        events,
        notes,
        events_fd,
    } = sinks;
    let mut relay = Relay {
        pack_id: sense.pack.id.as_str(),
        redact: sense.redact,
        sent: 0,
        count: sense.count,
        events,
        notes,
    };
    let triggers = std::mem::take(&mut sense.triggers);
    let n_planned = triggers.len();
    let mut running = start_all(triggers, sense.egress)?;
    let watch = Watch { stop, events_fd };
    let ended = match supervise(rt, &sense, &mut running, &mut relay, watch, n_planned) {
        Ok(e) => e,
        Err(e) => {
            for r in &mut running {
                r.stop();
            }
            return Err(e);
        }
    };
    for r in &mut running {
        r.stop();
    }
    if ended == Stop::Asked {
        return Ok(exit::OK);
    }
    // Every trigger ended on its own: the first failure's status, else 0.
    let status = running
        .iter()
        .filter_map(|r| r.exit_code)
        .find(|c| *c != 0)
        .map_or(exit::OK, |c| u8::try_from(c.clamp(1, 255)).unwrap_or(1));
    for r in &running {
        if let Some(c) = r.exit_code.filter(|c| *c != 0) {
            let _ = writeln!(
                relay.notes,
                "hcp: sense: trigger `{}` exited with status {c}",
                r.reference
            );
        }
    }
    Ok(status)
}

/// Starts every trigger; when one cannot be started, those already started are stopped.
fn start_all(
    triggers: Vec<(String, Child)>,
    egress: &[Option<CallEgress>],
) -> Result<Vec<Running>, Refusal> {
    let mut running: Vec<Running> = Vec::new();
    for (i, (reference, child)) in triggers.into_iter().enumerate() {
        match spawn(reference, child, egress.get(i).and_then(Option::as_ref)) {
            Ok(r) => running.push(r),
            Err(e) => {
                for r in &mut running {
                    r.stop();
                }
                return Err(e);
            }
        }
    }
    Ok(running)
}

/// The relay's loop: the recorded stimuli every [`RECORDED_POLL`], the triggers' lines as
/// they come, until asked to stop or every trigger has exited.
fn supervise(
    rt: &Runtime,
    sense: &Sense<'_>,
    running: &mut [Running],
    relay: &mut Relay<'_, '_>,
    watch: Watch<'_>,
    n_planned: usize,
) -> Result<Stop, Refusal> {
    let refs: Vec<&str> = sense.refs.iter().map(String::as_str).collect();
    let mut delivered: Vec<String> = Vec::new();
    let mut next_recorded = Instant::now();
    loop {
        if Instant::now() >= next_recorded {
            let pending = (sense.pack, sense.principal, refs.as_slice());
            if deliver_recorded(rt, pending, &mut delivered, relay).is_err() || relay.done() {
                return Ok(Stop::Asked);
            }
            next_recorded = Instant::now() + RECORDED_POLL;
        }
        if n_planned > 0 && running.iter().all(|r| r.child.is_none()) {
            return Ok(Stop::Done);
        }
        let wait = next_recorded.saturating_duration_since(Instant::now());
        if let Some(stop) = poll_once(running, relay, watch, wait)? {
            return Ok(stop);
        }
    }
}

/// One `poll` over the triggers' streams, the stop descriptor and the reader of our
/// stdout, at most `wait`; relays what became readable and finishes the triggers whose
/// direct child exited. `Some` when the relay must end.
fn poll_once(
    running: &mut [Running],
    relay: &mut Relay<'_, '_>,
    watch: Watch<'_>,
    wait: std::time::Duration,
) -> Result<Option<Stop>, Refusal> {
    let mut fds: Vec<PollFd<'_>> = Vec::new();
    let mut which: Vec<(usize, bool)> = Vec::new();
    for (i, r) in running.iter().enumerate() {
        if let Some(fd) = &r.out {
            fds.push(PollFd::new(fd.as_fd(), PollFlags::POLLIN));
            which.push((i, true));
        }
        if let Some(fd) = &r.err {
            fds.push(PollFd::new(fd.as_fd(), PollFlags::POLLIN));
            which.push((i, false));
        }
    }
    let n_streams = fds.len();
    if let Some(fd) = watch.stop {
        fds.push(PollFd::new(fd, PollFlags::POLLIN));
    }
    if let Some(fd) = watch.events_fd {
        fds.push(PollFd::new(fd, PollFlags::empty()));
    }
    let timeout = PollTimeout::try_from(wait.as_millis().max(1)).unwrap_or(PollTimeout::MAX);
    match poll(&mut fds, timeout) {
        Ok(_) | Err(Errno::EINTR) => {}
        Err(e) => {
            return Err(Refusal::new(
                Code::SuperviseFailed,
                format!("poll failed: {e}"),
            ));
        }
    }
    let ready: Vec<bool> = fds
        .iter()
        .map(|f| f.revents().is_some_and(|r| !r.is_empty()))
        .collect();
    drop(fds);
    if ready[n_streams..].iter().any(|r| *r) {
        // A signal, or whoever reads our stdout went away.
        return Ok(Some(Stop::Asked));
    }
    for (k, (i, is_out)) in which.iter().enumerate() {
        if !ready[k] {
            continue;
        }
        let r = &mut running[*i];
        if *is_out {
            if read_events(r, relay).is_err() || relay.done() {
                return Ok(Some(Stop::Asked));
            }
        } else {
            read_stderr(r, relay);
        }
    }
    Ok(finish_exited(running, relay))
}

/// The triggers whose direct child is done: relays what is already written, then ends
/// the rest of the group (like exec) and reaps it. `Some` when our stdout closed.
fn finish_exited(running: &mut [Running], relay: &mut Relay<'_, '_>) -> Option<Stop> {
    for r in running {
        let exited = r
            .child
            .as_ref()
            .is_some_and(hcp_adapter::Started::has_exited);
        if r.child.is_some() && (r.out.is_none() && r.err.is_none() || exited) {
            if read_events(r, relay).is_err() {
                return Some(Stop::Asked);
            }
            read_stderr(r, relay);
            r.finish();
            r.out = None;
            r.err = None;
        }
    }
    None
}

/// Relays the recorded stimuli not yet delivered by this process, then acknowledges them.
/// `Err` when stdout is closed.
fn deliver_recorded(
    rt: &Runtime,
    (pack, principal, refs): (&InstalledPack, &str, &[&str]),
    delivered: &mut Vec<String>,
    relay: &mut Relay<'_, '_>,
) -> Result<(), ()> {
    let home = rt.home();
    let Ok(pending) = stimulus::pending(home, principal, pack.id.as_str(), Some(refs)) else {
        return Ok(());
    };
    let mut acked = Vec::new();
    for s in pending {
        if delivered.contains(&s.id) {
            continue;
        }
        if relay.done() {
            break;
        }
        if relay.send(&s.reference, s.event).is_err() {
            let _ = stimulus::ack(home, principal, pack.id.as_str(), &acked);
            return Err(());
        }
        delivered.push(s.id.clone());
        acked.push(s.id);
    }
    let _ = stimulus::ack(home, principal, pack.id.as_str(), &acked);
    Ok(())
}

/// Reads what the fd holds now into `buf`; `true` at end of file.
fn read_into(fd: BorrowedFd<'_>, buf: &mut Vec<u8>) -> bool {
    let mut chunk = [0u8; 64 * 1024];
    loop {
        match nix::unistd::read(fd, &mut chunk) {
            Ok(0) => return true,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(Errno::EINTR) => {}
            Err(_) => return false,
        }
        if buf.len() > 2 * MAX_LINE_BYTES {
            return false;
        }
    }
}

/// Relays each complete JSON line of a trigger's stdout; a line that is not JSON, or is
/// longer than [`MAX_LINE_BYTES`], is dropped with a note on stderr (never quoted: it may
/// hold anything). `Err` when stdout is closed.
fn read_events(r: &mut Running, relay: &mut Relay<'_, '_>) -> std::io::Result<()> {
    let Some(fd) = &r.out else {
        return Ok(());
    };
    let eof = read_into(fd.as_fd(), &mut r.out_buf);
    while let Some(nl) = r.out_buf.iter().position(|b| *b == b'\n') {
        let line: Vec<u8> = r.out_buf.drain(..=nl).collect();
        if std::mem::take(&mut r.out_skipping) {
            continue;
        }
        event_line(&r.reference, &line, relay)?;
        if relay.done() {
            return Ok(());
        }
    }
    if r.out_buf.len() > MAX_LINE_BYTES {
        relay.note(&r.reference, "printed a line longer than the cap; dropped");
        r.out_buf.clear();
        r.out_skipping = true;
    }
    if eof {
        let rest = std::mem::take(&mut r.out_buf);
        if !r.out_skipping && !rest.iter().all(u8::is_ascii_whitespace) {
            event_line(&r.reference, &rest, relay)?;
        }
        r.out = None;
    }
    Ok(())
}

fn event_line(reference: &str, line: &[u8], relay: &mut Relay<'_, '_>) -> std::io::Result<()> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Ok(());
    }
    match serde_json::from_slice::<Value>(line) {
        Ok(event) => relay.send(reference, event),
        Err(_) => {
            relay.note(
                reference,
                &format!(
                    "printed a line that is not JSON ({} bytes); dropped",
                    line.len()
                ),
            );
            Ok(())
        }
    }
}

/// Relays a trigger's stderr to ours, line by line, the credential redacted.
fn read_stderr(r: &mut Running, relay: &mut Relay<'_, '_>) {
    let Some(fd) = &r.err else {
        return;
    };
    let eof = read_into(fd.as_fd(), &mut r.err_buf);
    while let Some(nl) = r.err_buf.iter().position(|b| *b == b'\n') {
        let line: Vec<u8> = r.err_buf.drain(..=nl).collect();
        let _ = relay.notes.write_all(
            relay
                .redact
                .text(&String::from_utf8_lossy(&line))
                .as_bytes(),
        );
    }
    if eof || r.err_buf.len() > MAX_LINE_BYTES {
        let rest = std::mem::take(&mut r.err_buf);
        if !rest.is_empty() {
            let _ = writeln!(
                relay.notes,
                "{}",
                relay.redact.text(&String::from_utf8_lossy(&rest))
            );
        }
    }
    if eof {
        r.err = None;
    }
}
