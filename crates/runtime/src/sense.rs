//! `hcp sense PACK [REF]` (RUNTIME §8): the relay of its triggers' JSON lines and of the
//! recorded stimuli, `{"pack_id", "ref", "event"}` one a line, until stopped. The sense is
//! one call of [`crate::pipeline::run`] (its subject [`crate::pipeline::Stimuli`]):
//! admitted through the same steps as exec, each trigger prepared by the one
//! [`crate::prepare::child`], then relayed here, its outcome recorded when the relay stops.
//!
//! A trigger runs with the hygiene and the confinement of exec (pinned and verified bin,
//! no shell, cleared environment plus the allow-list, `agent_env`, `HCP_*`, the binding in
//! its environment only, null stdin, its own process group, the kernel confinement of its
//! land with a private `TMPDIR`) but with no timeout and streamed output
//! (`hcp_adapter::start`). The relay stops, ending each trigger's process group
//! (`SIGTERM`, then `SIGKILL` after [`STOP_GRACE`]), when the stop descriptor becomes
//! readable (a signal), its output is closed, after `--count` events, or when every
//! trigger it runs has exited.

use crate::refusal::Refusal;
use hcp_model::Code;
use hcp_store::pack::InstalledPack;
use std::time::Duration;

mod relay;

pub use relay::Sinks;
pub(crate) use relay::{Sense, relay};

/// The longest line a trigger may print, in bytes (1 MiB); a longer one is dropped.
pub const MAX_LINE_BYTES: usize = 1024 * 1024;
/// How often recorded stimuli are looked for: every 200 ms.
pub const RECORDED_POLL: Duration = Duration::from_millis(200);
/// Time between `SIGTERM` and `SIGKILL` to a trigger's group when sense stops: 1 s.
pub const STOP_GRACE: Duration = Duration::from_secs(1);

/// The refs of `hcp sense PACK [REF]`: `REF` when the pack declares it, else every ref.
///
/// # Errors
/// `unknown_stimulus` (66) for an undeclared ref or a pack without stimuli.
pub fn refs(pack: &InstalledPack, reference: Option<&str>) -> Result<Vec<String>, Refusal> {
    let declared: Vec<String> = pack
        .manifest
        .stimulus_triggers
        .iter()
        .map(|t| t.reference.clone())
        .collect();
    match reference {
        Some(r) if declared.iter().any(|d| d == r) => Ok(vec![r.to_owned()]),
        Some(r) => Err(Refusal::new(
            Code::UnknownStimulus,
            format!("pack `{}` declares no stimulus `{r}`", pack.id),
        )
        .hint(known(&declared))),
        None if declared.is_empty() => Err(Refusal::new(
            Code::UnknownStimulus,
            format!("pack `{}` declares no stimuli", pack.id),
        )),
        None => Ok(declared),
    }
}

fn known(declared: &[String]) -> String {
    if declared.is_empty() {
        return "the pack declares no stimuli".into();
    }
    format!(
        "the pack declares: {}",
        declared
            .iter()
            .map(|d| format!("`{d}`"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}
