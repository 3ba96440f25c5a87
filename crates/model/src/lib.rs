//! The file and wire types of hcp, and nothing else.
//!
//! This crate owns the serde types of a pack's `surface.json` ([`Manifest`], RUNTIME §1.1)
//! and `policy.json` ([`PolicyFile`], seeds §4.1), the argv template language
//! ([`template`], RUNTIME §1.2), the exec envelope and result ([`exec`], RUNTIME §5), and
//! the strict JSON reading that every other crate relies on ([`strict`]): an unknown field
//! at any depth, a repeated key, a wrong type or a bad token is an error naming the line
//! and column.
//!
//! It also holds the code table ([`code`]): every stable code of hcp with its step and
//! exit status; the one shape of the caller ([`Principal`], RUNTIME §4); and what a call
//! learned for its records and result ([`CallFacts`], RUNTIME §5, §6).
//!
//! It does no I/O: callers hand it text and get values or a [`ParseError`]. Lint rules
//! live in `hcp-lint`, the store in `hcp-store`, the gate in `hcp-gate`.

#![deny(missing_docs)]

pub mod capability;
pub mod code;
pub mod exec;
pub mod facts;
pub mod id;
pub mod manifest;
pub mod policy;
pub mod principal;
pub mod span;
pub mod strict;
pub mod template;

pub use capability::{Capability, UnknownCapability};
pub use code::{Code, Step, exit};
pub use exec::{ArgValue, Envelope, ExecResult};
pub use facts::CallFacts;
pub use id::{PackId, validate_pack_id};
pub use manifest::{
    Binding, BindingMode, Kind, Manifest, OpenapiRef, PassThrough, Plane, SpecSource, Transport,
    Trigger, VerbSpec, Wrap, program_path_problem,
};
pub use policy::{Land, Operation, PolicyEntry, PolicyFile, Privacy};
pub use principal::{Principal, SessionFacts};
pub use span::{Location, locate};
pub use strict::{ParseCode, ParseError, StrictMap, StrictValue, parse_strict};

/// The three file names of a pack, exact and case-sensitive (Pack concept, RUNTIME §1).
pub const PACK_FILES: [&str; 3] = [MANIFEST_FILE, POLICY_FILE, SKILL_FILE];
/// The manifest's file name (`surface.json`, kept for wire stability).
pub const MANIFEST_FILE: &str = "surface.json";
/// The policy's file name (seeds §4).
pub const POLICY_FILE: &str = "policy.json";
/// The skill's file name.
pub const SKILL_FILE: &str = "HARNESS.md";
/// The largest pack file read (at lint, install and load), in bytes (1 MiB).
pub const MAX_PACK_FILE_BYTES: u64 = 1024 * 1024;

/// Parses `surface.json` text strictly (RUNTIME §1.1).
///
/// # Errors
/// A [`ParseError`] with its code, message, line and column: `bad_json` for syntax errors,
/// wrong types and missing fields, `unknown_field`, `duplicate_key`, `bad_version` (the
/// `hcp` affinity field).
pub fn parse_manifest(text: &str) -> Result<Manifest, ParseError> {
    parse_strict(text)
}

/// Parses `policy.json` text strictly (seeds §4.1: unknown fields at any level fail).
///
/// # Errors
/// A [`ParseError`]: `bad_json`, `unknown_field`, `duplicate_key`, `bad_land` (a land token
/// other than the three of §4.3.1), `bad_operation`, `bad_version`.
pub fn parse_policy(text: &str) -> Result<PolicyFile, ParseError> {
    parse_strict(text)
}
