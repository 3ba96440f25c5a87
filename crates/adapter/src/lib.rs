//! Runs a wrapped CLI for `hcp exec` (RUNTIME §5 step 9 and "The child").
//!
//! What this crate owns:
//! - [`render`]: argv from a parsed template by whole-element substitution (RUNTIME §1.2);
//! - [`ChildEnv`]: the child's exact environment, a pure function of explicit inputs;
//! - [`pin_bin`] / [`verify_bin`]: the install-time pin of a bin and the pre-spawn check
//!   that it did not change (`bin_missing`, `bin_not_executable`, `bin_changed`), with
//!   a stat fast path instead of hashing on every exec;
//! - [`run`]: one child, never through a shell, with null stdin, its own process group,
//!   a timeout that ends the whole group, capped and concurrently drained output;
//! - [`Confinement`]: kernel confinement applied in the child before `execve`: resource
//!   limits for every child, and for `local` land a Landlock ruleset
//!   ([`Confinement::for_local_land`], with its [`SandboxReport`]) and a [`PrivateTmp`].
//!
//! What it does not own: deciding whether a call may run (the gate, `hcp-gate`), where
//! pins and bindings are stored (`hcp-store`), reading the real process environment or
//! signals of `hcp` itself, and how results are shown (the `hcp` binary). The gate has
//! already validated the arguments; the checks here are repeated defensively.
//!
//! Linux only (`clone`, `execveat`, pidfd, Landlock, process groups).
#![deny(missing_docs)]

mod confine;
mod env;
mod error;
mod pin;
mod render;
mod ruleset;
mod run;
mod spawn;
mod tmp;

pub use confine::{
    Confinement, LandlockSupport, LimitOverrides, NETWORK_LANDLOCK_ABI, NOT_A_SANDBOX, Network,
    NetworkReport, ResourceLimits, Rlimit, SCOPE_LANDLOCK_ABI, SHARED_ROOTS, SYSTEM_DEVICES_RW,
    SYSTEM_READ_NO_EXEC, SYSTEM_READ_ONLY, SandboxMode, SandboxPaths, SandboxPolicy, SandboxReport,
    TESTED_LANDLOCK_ABI, running_as_root,
};
pub use env::{
    BINDING_PREFIX, CallVars, ChildEnv, HARDENING, HCP_VARS, PARENT_ALLOWED, agent_env_refusal,
    agent_env_value_refusal, parent_allowed,
};
pub use error::AdapterError;
pub use pin::{
    BinPin, DigestParseError, RACY_MARGIN, Sha256Digest, StatFingerprint, VerifiedBin, pin_bin,
    verify_bin,
};
pub use render::{ArgSource, SessionValues, render};
pub use run::{
    DEFAULT_GRACE, DEFAULT_OUTPUT_CAP, DEFAULT_TIMEOUT, GROUP_EXIT_WAIT, Invocation, Limits,
    Outcome, run,
};
pub use tmp::PrivateTmp;
