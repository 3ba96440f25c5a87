//! The export loop (RUNTIME §11): read a batch of verified records after the cursor,
//! make their spans, send them until the collector acknowledges them, then move the
//! cursor; at the end of the trail stop, or with `follow` wait for the next record.
//!
//! Delivery is at least once and never leaves a gap: the cursor moves only after the
//! collector acknowledged every span of the records before it, so a crash or an outage
//! repeats at most the batch in flight (said on the next start, with the same span ids).
//! The loop reads through [`State::audit_read`], which takes no lock on the trail, so an
//! export never slows a call.

use crate::cursor::{Cursor, Sending};
use crate::error::ExportError;
use crate::send::{Collector, SendError, backoff};
use crate::span::{self, End};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use prost::Message;
use serde_json::{Map, Value};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::Duration;

use hcp_store::Home;
use hcp_store::state::State;

/// How an export runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// The collector's OTLP/HTTP traces endpoint.
    pub url: String,
    /// After the end of the trail, wait for new records instead of stopping.
    pub follow: bool,
    /// Records read per batch (each makes at most two spans).
    pub batch: usize,
    /// How long a call may go without an outcome before its span is sent as
    /// `interrupted`.
    pub interrupted_after: Duration,
    /// The time-out of one request.
    pub timeout: Duration,
    /// The longest wait between two tries.
    pub max_backoff: Duration,
    /// Tries of one batch before a one-shot export gives up (`follow` tries forever).
    pub tries: u32,
    /// `service.instance.id` of the spans' resource: which store they come from.
    pub instance: String,
}

impl Options {
    /// The defaults for `url`: batches of 512 records, calls `interrupted` after one
    /// hour without an outcome, 10 s per request, backoff up to 30 s, 8 tries.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            follow: false,
            batch: 512,
            interrupted_after: Duration::from_secs(3600),
            timeout: Duration::from_secs(10),
            max_backoff: Duration::from_secs(30),
            tries: 8,
            instance: String::new(),
        }
    }
}

/// What happened along the way, for the caller to print.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Resuming after `records` records; `repeat` when the batch in flight at the last
    /// stop goes again (the collector may hold its spans already).
    Resumed {
        /// Records already exported.
        records: u64,
        /// The batch that was in flight: its records and spans.
        repeat: Option<Sending>,
    },
    /// A batch was acknowledged.
    Sent {
        /// Its records.
        records: u64,
        /// Its spans.
        spans: u64,
        /// Spans the collector said it dropped.
        rejected: i64,
    },
    /// A try failed; the next comes after `wait`.
    Retry {
        /// What happened.
        reason: String,
        /// The wait.
        wait: Duration,
    },
}

/// The totals of an export.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Report {
    /// Records read and exported in this run.
    pub records: u64,
    /// Spans acknowledged in this run.
    pub spans: u64,
    /// Requests acknowledged.
    pub batches: u64,
    /// Failed tries.
    pub retries: u64,
    /// Records exported in all runs (the cursor's position).
    pub total: u64,
    /// Calls whose outcome has not come (held for a later run).
    pub held: usize,
    /// Spans the collector said it dropped.
    pub rejected: i64,
    /// Whether the run ended because it was asked to stop.
    pub stopped: bool,
    /// The record that does not verify, where the export stopped (every record before it
    /// was exported).
    pub fault: Option<hcp_store::audit::ReadFault>,
}

/// Something that says when to stop: a descriptor that becomes readable (a signalfd),
/// checked between batches and during every wait.
#[derive(Debug, Clone, Copy)]
pub struct Stop<'a> {
    fd: Option<BorrowedFd<'a>>,
}

impl<'a> Stop<'a> {
    /// Stops when `fd` is readable.
    pub fn on(fd: BorrowedFd<'a>) -> Self {
        Self { fd: Some(fd) }
    }

    /// Never stops early.
    pub fn never() -> Self {
        Self { fd: None }
    }

    /// Waits up to `d`; `true` when it is time to stop.
    pub fn sleep(&self, d: Duration) -> bool {
        let ms = i32::try_from(d.as_millis()).unwrap_or(i32::MAX);
        match self.fd {
            None => {
                std::thread::sleep(d);
                false
            }
            Some(fd) => {
                let mut p = libc::pollfd {
                    fd: fd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: `p` is one live, initialised pollfd.
                let r = unsafe { libc::poll(&mut p, 1, ms) };
                r > 0
            }
        }
    }

    /// Whether it is time to stop, now.
    pub fn now(&self) -> bool {
        self.fd.is_some() && self.sleep(Duration::ZERO)
    }

    fn fds(&self) -> Vec<BorrowedFd<'a>> {
        self.fd.into_iter().collect()
    }
}

fn text(key: &str, v: &str) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(v.to_owned())),
        }),
        ..Default::default()
    }
}

/// The OTLP request of `spans`: one resource (`service.name` = `hcp`, its version, the
/// store as `service.instance.id`), one scope (`hcp.audit`), the [`span::SCHEMA_URL`] on
/// both.
pub fn request(spans: Vec<Span>, instance: &str) -> ExportTraceServiceRequest {
    let mut attributes = vec![
        text("service.name", "hcp"),
        text("service.version", env!("CARGO_PKG_VERSION")),
    ];
    if !instance.is_empty() {
        attributes.push(text("service.instance.id", instance));
    }
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes,
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: "hcp.audit".to_owned(),
                    version: env!("CARGO_PKG_VERSION").to_owned(),
                    ..Default::default()
                }),
                spans,
                schema_url: span::SCHEMA_URL.to_owned(),
            }],
            schema_url: span::SCHEMA_URL.to_owned(),
        }],
    }
}

fn str_of<'a>(m: &'a Map<String, Value>, k: &str) -> Option<&'a str> {
    m.get(k).and_then(Value::as_str)
}

/// The spans of `records` (read in chain order), with the cursor's held calls: an intent
/// is held until its outcome comes.
pub fn spans_of(records: &[Map<String, Value>], cursor: &mut Cursor) -> Vec<Span> {
    let mut out = Vec::new();
    for m in records {
        match str_of(m, "kind") {
            Some("intent") => cursor.held.push(m.clone()),
            Some("outcome") => {
                let of = str_of(m, "intent").unwrap_or_default();
                match cursor.held.iter().position(|h| str_of(h, "id") == Some(of)) {
                    Some(i) => {
                        let intent = cursor.held.remove(i);
                        out.extend(span::call_spans(&intent, End::Outcome(m)));
                    }
                    None => {
                        let parent = cursor
                            .interrupted
                            .iter()
                            .find(|s| s.id == of)
                            .map(|s| s.hash.clone());
                        out.push(span::late_outcome_span(m, parent.as_deref()));
                    }
                }
            }
            Some("refusal") => out.extend(span::call_spans(m, End::Refused)),
            Some(_) => out.push(span::record_span(m)),
            None if str_of(m, "decision") == Some("deny") => {
                out.extend(span::call_spans(m, End::Refused));
            }
            None => out.push(span::record_span(m)),
        }
    }
    out
}

/// Moves the held calls older than `after` (at `now`, nanoseconds) out as `interrupted`.
pub fn interrupted(cursor: &mut Cursor, now: u64, after: Duration) -> Vec<Span> {
    let limit = u64::try_from(after.as_nanos()).unwrap_or(u64::MAX);
    let mut out = Vec::new();
    let mut kept = Vec::new();
    for h in std::mem::take(&mut cursor.held) {
        if now.saturating_sub(span::ts_nanos(&h)) >= limit {
            out.extend(span::call_spans(&h, End::Interrupted));
            cursor.note_interrupted(
                str_of(&h, "id").unwrap_or_default(),
                str_of(&h, "hash").unwrap_or_default(),
            );
        } else {
            kept.push(h);
        }
    }
    cursor.held = kept;
    out
}

fn now_nanos() -> u64 {
    u64::try_from(jiff::Timestamp::now().as_nanosecond()).unwrap_or(0)
}

/// Sends `body` until the collector takes it; `None` when asked to stop first.
fn deliver(
    collector: &Collector,
    body: &[u8],
    o: &Options,
    stop: &Stop<'_>,
    report: &mut Report,
    progress: &mut dyn FnMut(&Event),
) -> Result<Option<crate::send::Accepted>, ExportError> {
    let mut attempt = 0u32;
    loop {
        match collector.send(body) {
            Ok(a) => return Ok(Some(a)),
            Err(SendError::Fatal { reason }) => {
                return Err(ExportError::Collector {
                    url: o.url.clone(),
                    reason,
                });
            }
            Err(SendError::Retry { reason, after }) => {
                attempt += 1;
                report.retries += 1;
                if !o.follow && attempt >= o.tries {
                    return Err(ExportError::Collector {
                        url: o.url.clone(),
                        reason: format!("{reason} ({attempt} tries)"),
                    });
                }
                let wait = backoff(attempt, after, o.max_backoff);
                progress(&Event::Retry { reason, wait });
                if stop.sleep(wait) {
                    return Ok(None);
                }
            }
        }
    }
}

/// How long a follower waits for a record before it looks at the held calls and the stop
/// signal again.
const IDLE: Duration = Duration::from_millis(500);

/// Runs an export of `state`'s trail to `o.url`, its cursor in `home` (see the module
/// docs). A record that does not verify ends it once every record before it was
/// exported: [`Report::fault`] names it.
///
/// # Errors
/// [`ExportError`].
pub fn run(
    state: &dyn State,
    home: &Home,
    o: &Options,
    stop: Stop<'_>,
    progress: &mut dyn FnMut(&Event),
) -> Result<Report, ExportError> {
    let collector = Collector::new(&o.url, o.timeout).map_err(|e| ExportError::Collector {
        url: o.url.clone(),
        reason: match e {
            SendError::Fatal { reason } | SendError::Retry { reason, .. } => reason,
        },
    })?;
    let mut cursor = Cursor::load(home, &o.url)?;
    if cursor.records() > 0 || cursor.sending.is_some() {
        progress(&Event::Resumed {
            records: cursor.records(),
            repeat: cursor.sending.clone(),
        });
    }
    let mut report = Report::default();
    let mut follower = None;
    loop {
        if stop.now() {
            report.stopped = true;
            break;
        }
        let batch = state.audit_read(&cursor.chains, o.batch.max(1))?;
        let at_end = batch.records.len() < o.batch.max(1);
        let mut next = cursor.clone();
        let fields: Vec<Map<String, Value>> =
            batch.records.iter().map(|r| r.fields.clone()).collect();
        for r in &batch.records {
            match next
                .chains
                .iter_mut()
                .find(|c| c.machine == r.after.machine)
            {
                Some(c) => *c = r.after.clone(),
                None => next.chains.push(r.after.clone()),
            }
        }
        let mut spans = spans_of(&fields, &mut next);
        if at_end && batch.fault.is_none() {
            spans.extend(interrupted(&mut next, now_nanos(), o.interrupted_after));
        }
        let records = batch.records.len() as u64;
        if !spans.is_empty() {
            let count = spans.len() as u64;
            let body = request(spans, &o.instance).encode_to_vec();
            cursor.sending = Some(Sending {
                records,
                spans: count,
            });
            cursor.save(home)?;
            let Some(accepted) = deliver(&collector, &body, o, &stop, &mut report, progress)?
            else {
                report.stopped = true;
                break;
            };
            report.spans += count;
            report.batches += 1;
            report.rejected += accepted.rejected;
            progress(&Event::Sent {
                records,
                spans: count,
                rejected: accepted.rejected,
            });
        }
        if records > 0 || next.held != cursor.held || cursor.sending.is_some() {
            next.sending = None;
            next.save(home)?;
        }
        cursor = next;
        report.records += records;
        if let Some(f) = batch.fault {
            report.fault = Some(f);
            break;
        }
        if !at_end {
            continue;
        }
        if !o.follow {
            break;
        }
        if follower.is_none() {
            follower = Some(state.audit_follow(0)?);
        }
        if let Some(f) = follower.as_mut() {
            f.next(IDLE, &stop.fds())?;
        }
    }
    report.total = cursor.records();
    report.held = cursor.held.len();
    Ok(report)
}
