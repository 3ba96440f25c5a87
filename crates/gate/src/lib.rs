//! The exec gate of RUNTIME §5: a pure function from a call and what the store knows to a
//! [`Decision`].
//!
//! This crate owns the order of checks and every refusal code of the gate: target
//! resolution helpers ([`target`]), arguments ([`args`]), the one grant check and the
//! rug-pull guard ([`grant`]), land and the confirm gate ([`check`](mod@check)). Its codes are those of
//! the table in `hcp-model` ([`hcp_model::code`]). It does no I/O: sessions, grants, install records and the clock come in
//! through [`Context`], so every decision is a value that can be explained and tested.
//!
//! It does not resolve sessions (`hcp-store`), run the Histos runtime policy (`histos`),
//! mint bindings or spawn anything (`hcp-adapter`); `hcp-runtime` wires those in the
//! order RUNTIME §5 gives.

#![deny(missing_docs)]

pub mod args;
pub mod check;
pub mod code;
pub mod grant;
pub mod target;

pub use check::{
    Allowed, Context, Decision, Face, GrantView, PackView, StimulusAllowed, check, check_operation,
    check_stimulus,
};
pub use code::{Code, Step};
pub use grant::GrantStatus;
pub use hcp_model::{Principal, SessionFacts};
