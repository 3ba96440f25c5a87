//! Every environment variable hcp reads, in one place.

/// The store directory (RUNTIME §3). Unset: the platform data directory.
pub const HCP_HOME: &str = "HCP_HOME";
/// A session token (RUNTIME §4). Unset: the caller is the owner.
pub const HCP_SESSION: &str = "HCP_SESSION";
/// Any value turns colour off.
#[allow(dead_code)]
pub const NO_COLOR: &str = "NO_COLOR";
/// Which of the session's projects a call is for (RUNTIME §5 step 5, `brain` land).
pub const HCP_PROJECT: &str = "HCP_PROJECT";
/// Per-call resource limits for `hcp exec` (`NAME=N,…`), which can only tighten those of
/// `config.json` (RUNTIME §5, the child).
pub const HCP_LIMITS: &str = "HCP_LIMITS";
