//! OpenAPI documents of `kind: openapi` packs (RUNTIME §1.3), from bytes to one HTTP
//! request.
//!
//! This crate owns: loading a document and refusing what hcp cannot use
//! ([`Document::parse`], `bad_openapi` with the JSON pointer of the fault); compiling one
//! operation into a verb's arguments, request shape and credential placement
//! ([`Document::operation`] → [`Operation`], with [`Operation::arguments`] and
//! [`Operation::input_schema`]); checking a call's arguments and building its request
//! before anything is sent ([`plan`] → [`RequestPlan`], or a [`Refusal`]); and, with the
//! `http` feature (on by default), sending it ([`send`] → [`HttpOutcome`]) and fetching
//! a document from its URL ([`fetch`]).
//!
//! It does not own the gate (grants, land, confirm, runtime policy, binding mint: the
//! caller runs every step of RUNTIME §5 first and hands [`plan`] the binding's
//! credential), the store (install keeps the pinned copy), nor the result's shape.
//!
//! ## Why untyped JSON rather than an OpenAPI model crate
//! `openapiv3` reads 3.0 only and `oas3` 3.1 only (its documentation warns that 3.0
//! documents may not parse); the two dialects differ exactly where hcp must be exact:
//! `nullable` against `type` arrays, boolean against numeric `exclusiveMinimum`.
//! Typed models also resolve or reject `$ref`s their own way and report faults as serde
//! paths. hcp needs a small part of a document (servers, paths, parameters, the request
//! body's top-level properties, security schemes) and a JSON pointer for every fault, so
//! it walks a `serde_json::Value` (read strictly: a repeated key is refused) and follows
//! local `$ref`s itself, with loop detection.

#![deny(missing_docs)]

mod compile;
mod error;
mod load;
mod operation;
mod plan;
mod pointer;
pub mod schema;
#[cfg(feature = "http")]
mod send;
mod server;

pub use error::{BadOpenapi, OperationError, Refusal};
pub use load::{Document, MAX_DOCUMENT_BYTES, Version};
pub use operation::{
    ArgIn, ArgSpec, Auth, Body, Dropped, Method, Operation, QueryStyle, RESERVED_NAMES, Security,
    TENANT_NAMES, arg_name,
};
pub use plan::{Checked, Credential, Header, RequestPlan, check, plan};
pub use schema::{JsonType, Schema};
#[cfg(feature = "http")]
pub use send::{DEFAULT_BODY_CAP, DEFAULT_TIMEOUT, HttpAnswer, HttpOutcome, Limits, fetch, send};
pub use server::ServerUrl;
