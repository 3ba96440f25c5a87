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
//!   [`start`]: the same child with its output streamed to the caller (`hcp sense`);
//! - [`Confinement`]: kernel confinement applied in the child before `execve`, for every
//!   land ([`Confinement::for_call`], with its [`SandboxReport`]): the call's [`View`]
//!   (mount, PID and IPC namespaces, a root of its own holding only what the call was
//!   given), its network (a seccomp filter, or a network namespace of its own with a
//!   listener for the egress proxy), no capabilities, resource limits, pids and memory
//!   cgroups; [`scan_etc`], what of `/etc` a view covers;
//! - [`inside_non_owner_call`]: whether the calling process descends from a non-owner
//!   call (RUNTIME §4 `nested_call`).
//!
//! What it does not own: deciding whether a call may run (the gate, `hcp-gate`), where
//! pins and bindings are stored (`hcp-store`), reading the real process environment or
//! signals of `hcp` itself, and how results are shown (the `hcp` binary). The gate has
//! already validated the arguments; the checks here are repeated defensively.
//!
//! Linux only (`clone`, `execveat`, pidfd, the mount API, Landlock, seccomp, namespaces,
//! cgroups, process groups).
#![deny(missing_docs)]

mod call;
mod cgroup;
mod channel;
mod confine;
mod env;
mod error;
mod limits;
mod netns;
mod notify;
mod pin;
mod privileges;
mod procs;
mod render;
mod report;
mod ruleset;
mod run;
mod seccomp;
mod spawn;
mod stream;
mod system;
pub mod view;
mod workdir;

pub use call::{CallPolicy, CallSandbox, KernelSupport};
pub use cgroup::{
    Bases, Bounds, CallCgroup, delegated_memory_base, memory_cgroup_base, pids_cgroup_base,
};
pub use confine::{Confinement, LimitOverrides, Network, ResourceLimits, Rlimit, running_as_root};
pub use env::{
    BINDING_PREFIX, CallVars, ChildEnv, HARDENING, HCP_VARS, PARENT_ALLOWED, PROXY_VARS,
    agent_env_refusal, agent_env_value_refusal, parent_allowed,
};
pub use error::AdapterError;
pub use netns::{EGRESS_PORT, EGRESS_PROXY_URL};
pub use pin::{
    BinPin, DigestParseError, RACY_MARGIN, Sha256Digest, StatFingerprint, VerifiedBin, pin_bin,
    verify_bin,
};
pub use privileges::capability_sets;
pub use procs::{ProcessMechanism, become_subreaper, end_orphans, process_mechanism};
pub use render::{ArgSource, SessionValues, render};
pub use report::{NetworkField, SandboxField, SandboxMode, SandboxReport, Status};
pub use ruleset::{LandlockSupport, SCOPE_LANDLOCK_ABI, TESTED_LANDLOCK_ABI};
pub use run::{
    DEFAULT_GRACE, DEFAULT_OUTPUT_CAP, DEFAULT_TIMEOUT, ENDED_AT_CAP, Egress, GROUP_EXIT_WAIT,
    Invocation, Limits, Outcome, run,
};
pub use seccomp::{MARK_ERRNO, PROBE_ARG, PROBE_OPTION, inside_non_owner_call, seccomp_available};
pub use stream::{Started, start};
pub use system::resolve_system_path;
pub use view::{
    EtcIndex, PROTECTED_IN_WORKDIR, VIEW_HOME, VIEW_TMP, View, ViewEntry, bin_dirs, scan_etc,
};
pub use workdir::{NOT_A_SANDBOX, SHARED_ROOTS, SandboxPaths};

/// The mechanisms a call's child applies between its view and `execve`, one system call
/// or a few each, for the `confine_pairs` benchmark's full floor (RUNTIME §5.4; the
/// bench's `floor` module): not an API, and no promise of stability.
#[doc(hidden)]
pub mod floor_parts {
    pub use crate::seccomp::SockFilter;
    use std::os::fd::RawFd;

    /// hcp's seccomp program of a non-owner call under `deny` (the nested-call marker, the
    /// listener for `socket(2)`), built once per process; build it in the parent.
    pub fn deny_program() -> &'static [SockFilter] {
        crate::seccomp::program(crate::seccomp::Filter {
            net: crate::seccomp::Net::Deny,
            unix: false,
            marker: true,
            notify: true,
        })
    }

    /// Installs `prog` (after `PR_SET_NO_NEW_PRIVS`), with a new listener when
    /// `listener`: the listener's descriptor (or 0), or `-errno`. Async-signal-safe.
    pub fn install(prog: &[SockFilter], listener: bool) -> i32 {
        crate::seccomp::install(prog, listener)
    }

    /// Empties every capability set (the bounding set up to `bounding` too, as root): 0
    /// or the errno. Async-signal-safe.
    pub fn drop_caps(bounding: Option<u32>) -> i32 {
        crate::privileges::drop_all(bounding)
    }

    /// The highest capability number the kernel knows.
    pub fn last_cap() -> u32 {
        crate::privileges::last_cap()
    }

    /// Landlock's scope ruleset (abstract Unix sockets and signals), made in the parent;
    /// `None` below Landlock ABI 6.
    pub fn scope_ruleset() -> Option<RawFd> {
        crate::ruleset::scope_ruleset()
    }
}
