//! The relay loop of `hcp sense`: runs the admitted triggers and relays their JSON lines
//! and the recorded stimuli until stopped (see [`crate::sense`] and DESIGN.md).

use crate::Runtime;
use crate::pipeline::SenseAdmitted;
use crate::redact::Redactor;
use crate::refusal::Refusal;
use crate::sense::{MAX_LINE_BYTES, Planned, RECORDED_POLL, STOP_GRACE};
use hcp_model::{Code, exit};
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

fn spawn(p: &mut Planned) -> Result<Running, Refusal> {
    let inv = hcp_adapter::Invocation {
        bin: &p.bin,
        argv0: p.argv0.clone().into(),
        args: p.args.clone(),
        env: &p.env,
        cwd: p.workdir.clone(),
        limits: hcp_adapter::Limits::default(),
        confine: Some(&p.confinement),
        cancel: None,
        egress: None,
    };
    let mut child = hcp_adapter::start(&inv).map_err(|e| {
        let r = Refusal::adapter(&e);
        Refusal {
            message: format!(
                "trigger `{}` could not be started: {}",
                p.reference, r.message
            ),
            ..r
        }
    })?;
    crate::egress::serve_trigger(p.egress.as_ref(), child.take_egress_listener());
    let out = child.take_stdout();
    let err = child.take_stderr();
    for fd in [&out, &err].into_iter().flatten() {
        use nix::fcntl::{FcntlArg, OFlag, fcntl};
        let _ = fcntl(fd, FcntlArg::F_SETFL(OFlag::O_NONBLOCK));
    }
    Ok(Running {
        reference: p.reference.clone(),
        child: Some(child),
        out,
        err,
        out_buf: Vec::new(),
        err_buf: Vec::new(),
        out_skipping: false,
        exit_code: None,
        confinement: Some(std::mem::take(&mut p.confinement)),
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

/// Where the relay writes and what stops it.
pub struct Sinks<'a> {
    /// The events, one JSON line each, flushed per line (hcp's stdout).
    pub events: &'a mut dyn Write,
    /// The triggers' stderr, relayed line by line, and the relay's notes (hcp's stderr).
    pub notes: &'a mut dyn Write,
    /// Readable (or hung up) when the relay must stop: the signal pipe.
    pub stop: BorrowedFd<'a>,
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

/// Runs the admitted triggers and relays events until stopped, at most `count` of them;
/// answers the exit status: 0 when asked to stop (signal, `--count`, the reader gone),
/// else, once every trigger has exited on its own, the first failure's status.
///
/// # Errors
/// A trigger that cannot be started (`spawn_failed`, `bin_changed` …) or a failed `poll`
/// (`supervise_failed`); the triggers already started are stopped first.
pub fn relay(
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
    let pack = &admitted.pack;
    let principal = admitted.principal.as_str();
    let refs = &admitted.refs;
    let planned = &mut admitted.triggers;
    let mut relay = Relay {
        pack_id: pack.id.as_str(),
        redact: &admitted.redactor,
        sent: 0,
        count,
        events,
        notes,
    };
    let mut running = Vec::new();
    let n_planned = planned.len();
    for p in planned.iter_mut() {
        match spawn(p) {
            Ok(r) => running.push(r),
            Err(e) => {
                for r in &mut running {
                    r.stop();
                }
                return Err(e);
            }
        }
    }
    let ref_strs: Vec<&str> = refs.iter().map(String::as_str).collect();
    let mut delivered: Vec<String> = Vec::new();
    let mut next_recorded = Instant::now();
    let stop = 'main: loop {
        if Instant::now() >= next_recorded {
            match deliver_recorded(rt, pack, principal, &ref_strs, &mut delivered, &mut relay) {
                Ok(()) => {}
                Err(()) => break 'main Stop::Asked,
            }
            if relay.done() {
                break 'main Stop::Asked;
            }
            next_recorded = Instant::now() + RECORDED_POLL;
        }
        if n_planned > 0 && running.iter().all(|r| r.child.is_none()) {
            break 'main Stop::Done;
        }
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
        fds.push(PollFd::new(stop, PollFlags::POLLIN));
        if let Some(fd) = events_fd {
            fds.push(PollFd::new(fd, PollFlags::empty()));
        }
        let wait = next_recorded.saturating_duration_since(Instant::now());
        let timeout = PollTimeout::try_from(wait.as_millis().max(1)).unwrap_or(PollTimeout::MAX);
        match poll(&mut fds, timeout) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => {
                for r in &mut running {
                    r.stop();
                }
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
        if ready[n_streams] || ready.get(n_streams + 1).copied().unwrap_or(false) {
            // A signal, or whoever reads our stdout went away.
            break 'main Stop::Asked;
        }
        for (k, (i, is_out)) in which.iter().enumerate() {
            if !ready[k] {
                continue;
            }
            let r = &mut running[*i];
            if *is_out {
                if read_events(r, &mut relay).is_err() {
                    break 'main Stop::Asked;
                }
                if relay.done() {
                    break 'main Stop::Asked;
                }
            } else {
                read_stderr(r, &mut relay);
            }
        }
        for r in &mut running {
            let exited = r
                .child
                .as_ref()
                .is_some_and(hcp_adapter::Started::has_exited);
            if r.child.is_some() && (r.out.is_none() && r.err.is_none() || exited) {
                // The direct child is done: relay what is already written, then end the
                // rest of its group (like exec) and reap it.
                if read_events(r, &mut relay).is_err() {
                    break 'main Stop::Asked;
                }
                read_stderr(r, &mut relay);
                r.finish();
                r.out = None;
                r.err = None;
            }
        }
    };
    for r in &mut running {
        r.stop();
    }
    if stop == Stop::Asked {
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

/// Relays the recorded stimuli not yet delivered by this process, then acknowledges them.
/// `Err` when stdout is closed.
fn deliver_recorded(
    rt: &Runtime,
    pack: &hcp_store::pack::InstalledPack,
    principal: &str,
    refs: &[&str],
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
