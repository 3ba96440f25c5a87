//! A stand-alone engine for the **Histos Policy Format 0.1** (HISTOS-ENGINE, corpus 0.6.0).
//!
//! What this crate owns:
//! * strict loading of JSON and YAML policies with the reference's POLICY codes
//!   ([`Policy::load_json`], [`Policy::load_yaml`], [`Policy::load_path`]; §2, §3.5),
//!   including the load-time ReDoS pattern screen (§2d);
//! * `content_hash`, bit-for-bit with the reference ([`Policy::content_hash`]; §3);
//! * the pre-gate decision pipeline ([`Engine::pre`]; §1, §4–§7) and the output
//!   post-gate ([`Engine::post`]; §1e), as pure functions whose decisions are values;
//! * the seams a host fills: [`LimitStore`] (with [`MemoryLimitStore`]),
//!   [`ResourceResolver`], [`EscalationTier`], [`Confirmer`], and a caller clock;
//! * the JSON-Schema projection of tool definitions into contracts and the three lock
//!   hashes ([`projection`]; §11), tool locks and drift ([`lock`]), starting policies
//!   written as YAML ([`init`]), and the compiled form of a loaded policy for a host's
//!   cache ([`cache`]).
//!
//! What it does not own: audit sinks and hash chains (§9), approval stores, the
//! process wrapper, optional content rules (`injection_pattern`/`exfiltration_pattern`),
//! and any I/O besides [`Policy::load_path`] and [`lock::Lock::load_path`] reading one
//! file.
#![deny(missing_docs)]

pub mod cache;
pub mod decision;
pub mod detect;
mod doc;
pub mod engine;
pub mod error;
mod fasthash;
pub mod hash;
pub mod init;
pub mod json;
pub mod limits;
mod load;
pub mod lock;
pub mod model;
pub mod outline;
pub mod pattern;
pub mod post;
pub mod projection;
pub mod validate;
pub mod value;
pub mod yaml;

pub use decision::{Decision, Effect, Rule};
pub use engine::{
    Call, Confirmer, Context, Engine, Escalation, EscalationTier, Mode, Principal, ResolveError,
    ResourceResolver,
};
pub use error::{PolicyCode, PolicyError};
pub use limits::{LimitKey, LimitSpec, LimitStore, LimitVerdict, MemoryLimitStore};
pub use load::{FEATURES, MAX_POLICY_BYTES, SCHEMA_VERSION};
pub use model::Policy;
pub use post::PostOutcome;
pub use value::{Map, Value};
