//! `hcp audit export --otlp URL [--follow]` (RUNTIME §11): the audit trail shipped to an
//! OpenTelemetry collector as spans over OTLP/HTTP (protobuf, through the official
//! definitions of the `opentelemetry-proto` crate).
//!
//! - [`span`]: records as spans — one `execute_tool PACK.VERB` span per call with the
//!   gate's decision as its `apply_guardrail` child, one span per act of authority (GenAI
//!   semantic conventions, [`span::SCHEMA_URL`]); ids derived from the records' hashes.
//! - [`cursor`]: where the export stands, kept in the store, so that a crash or an outage
//!   repeats at most the batch in flight and never leaves a gap.
//! - [`send`]: one OTLP/HTTP request and what its answer means (retry, fatal).
//! - [`run`]: the loop, reading through the state backend's
//!   [`hcp_store::state::State::audit_read`] (the file store's trail or a fleet's chains)
//!   without the trail's lock.
//!
//! What this crate does not own: the records and their verification (`hcp-store`), the
//! command line and signals (the `hcp` binary).

#![deny(missing_docs)]

pub mod cursor;
pub mod error;
pub mod run;
pub mod send;
pub mod span;

pub use cursor::Cursor;
pub use error::ExportError;
pub use run::{Event, Options, Report, Stop, run};
