//! The process facts of a call ([`Caller`]), gathered once by the face: what the steps
//! read of the caller's session, project, directory, environment and limits.

use std::ffi::OsString;
use std::path::PathBuf;

/// The process facts a call reads, gathered once by the face (the binary reads the real
/// environment; tests build them).
#[derive(Debug, Clone)]
pub struct Caller {
    /// `HCP_SESSION`, when set (even empty: a present but bad token is refused).
    pub session_token: Option<OsString>,
    /// `HCP_PROJECT`, when set and not empty.
    pub project: Option<String>,
    /// The caller's current directory.
    pub cwd: PathBuf,
    /// The caller's environment; the adapter keeps only the allowed names.
    pub parent_env: Vec<(OsString, OsString)>,
    /// `HCP_LIMITS`: per-call resource limits, which can only tighten `config.json`'s.
    pub limit_overrides: hcp_adapter::LimitOverrides,
}

/// Parses `HCP_LIMITS` (`NAME=N,…`): per-call resource limits that can only tighten the
/// runtime configuration's (each effective limit is the smaller of the two).
///
/// # Errors
/// A message naming an unknown name, a repeated name, or a value that is not a positive
/// integer.
pub fn parse_limits(text: &str) -> Result<hcp_adapter::LimitOverrides, String> {
    let mut o = hcp_adapter::LimitOverrides::default();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((name, value)) = part.split_once('=') else {
            return Err(format!("`HCP_LIMITS`: `{part}` is not NAME=N"));
        };
        let n: u64 = match value.trim().parse() {
            Ok(n) if n > 0 => n,
            _ => {
                return Err(format!(
                    "`HCP_LIMITS`: `{name}` needs a positive integer, not `{value}`"
                ));
            }
        };
        let slot = match name.trim() {
            "cpu_seconds" => &mut o.cpu_seconds,
            "address_space_bytes" => &mut o.address_space_bytes,
            "open_files" => &mut o.open_files,
            "file_size_bytes" => &mut o.file_size_bytes,
            "processes" => &mut o.processes,
            "tmp_bytes" => &mut o.tmp_bytes,
            "memory_bytes" => &mut o.memory_bytes,
            other => return Err(format!("`HCP_LIMITS`: unknown limit `{other}`")),
        };
        if slot.replace(n).is_some() {
            return Err(format!("`HCP_LIMITS`: `{name}` is given twice"));
        }
    }
    Ok(o)
}
