//! The `$HCP_HOME` store of RUNTIME §3.
//!
//! This crate owns everything hcp keeps on disk: where the home is ([`home`]), the store
//! lock that serialises writers ([`lock`]), atomic file replacement ([`atomic`]), and the
//! records built on them (installed packs, activation, sessions, grants, the audit trail).
//! Every write is a whole-file replace by rename in the same directory, so a reader, or a
//! process killed at any instant, sees the old state or the new one, never a mix.
//!
//! It does not decide anything: the gate (`hcp-gate`) decides, the adapter
//! (`hcp-adapter`) runs processes; this crate reads and writes what they need.

#![deny(missing_docs)]

pub mod approval;
pub mod atomic;
pub mod audit;
pub mod binding;
pub mod config;
pub mod counter;
pub mod damage;
pub mod digest;
pub mod error;
pub mod grant;
pub mod home;
pub mod ledger;
pub mod lock;
pub mod made;
pub mod pack;
pub mod quarantine;
pub mod session;
pub mod skill;
pub mod stamp;
pub mod state;
pub mod stimulus;
pub mod tenant;
pub mod tenant_admin;

pub use error::{StoreError, StoreResult};
pub use home::{Home, StoreDir, resolve_home};
pub use lock::StoreLock;
pub use state::{FileState, State};
