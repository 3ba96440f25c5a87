//! Step 4 of RUNTIME §5: the one grant check (§4.6, §9.4) and the rug-pull guard of
//! RUNTIME §3, for every face: exec's verbs, the connect verb, `hcp disconnect`'s
//! `pack.connect` and `hcp sense`'s `sense.enable`.

use crate::check::Refusal;
use crate::code::{Code, Step};
use hcp_model::Capability;
use jiff::Timestamp;

/// Whether a principal may use a capability on a pack, once the rug-pull guard is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantStatus {
    /// Granted, by a grant made at or after the pack's last content change.
    Held {
        /// The newest grant's time.
        granted_at: Timestamp,
    },
    /// Granted, but only before the pack's content changed: suspended until granted again
    /// (RUNTIME §3). Refused as `missing_grant`, with a hint to grant again.
    Suspended {
        /// The newest grant's time.
        granted_at: Timestamp,
        /// The pack's `content_changed_at`.
        content_changed_at: Timestamp,
    },
    /// Not granted at all.
    Missing,
}

/// The rug-pull guard (RUNTIME §3): whether `capability` is usable given the grants a
/// non-owner principal holds on the pack (`(capability, granted_at)`, the pack's own and
/// `*` grants alike) and the pack's `content_changed_at` (from its install record; `None`
/// when its content never changed).
///
/// A grant counts when `granted_at >= content_changed_at`; a grant made strictly before
/// the change is suspended. With several grants of the same capability (the pack's own
/// and `*`), the newest decides, so renewing either one lifts the suspension. Pure.
pub fn status(
    held: impl IntoIterator<Item = (Capability, Timestamp)>,
    capability: Capability,
    content_changed_at: Option<Timestamp>,
) -> GrantStatus {
    let Some(granted_at) = held
        .into_iter()
        .filter(|(c, _)| *c == capability)
        .map(|(_, t)| t)
        .max()
    else {
        return GrantStatus::Missing;
    };
    match content_changed_at {
        Some(changed) if granted_at < changed => GrantStatus::Suspended {
            granted_at,
            content_changed_at: changed,
        },
        _ => GrantStatus::Held { granted_at },
    }
}

/// Requires `capability` of principal `principal_id` on pack `pack_id` ([`status`]).
///
/// # Errors
/// A `missing_grant` [`Refusal`] of step 4 when the capability is missing or suspended,
/// its hint naming the `hcp grant` that lifts it.
pub fn require(
    principal_id: &str,
    pack_id: &str,
    held: impl IntoIterator<Item = (Capability, Timestamp)>,
    capability: Capability,
    content_changed_at: Option<Timestamp>,
) -> Result<(), Refusal> {
    let refuse = |message: String, hint: String| Refusal {
        code: Code::MissingGrant,
        step: Step::Grant,
        message,
        hint: Some(hint),
        operation: None,
        land: None,
    };
    match status(held, capability, content_changed_at) {
        GrantStatus::Held { .. } => Ok(()),
        GrantStatus::Missing => Err(refuse(
            format!("principal `{principal_id}` lacks `{capability}` on pack `{pack_id}`"),
            format!("the owner runs `hcp grant {principal_id} {pack_id} {capability}`"),
        )),
        GrantStatus::Suspended { .. } => Err(refuse(
            format!(
                "the grant of `{capability}` to `{principal_id}` is suspended: pack `{pack_id}` changed since it was granted"
            ),
            format!(
                "the owner reviews the pack and runs `hcp grant {principal_id} {pack_id} {capability}` again"
            ),
        )),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use Capability::*;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn the_newest_grant_decides_and_a_change_suspends() {
        let t1 = t("2026-01-01T00:00:00Z");
        let t2 = t("2026-02-01T00:00:00Z");
        let t3 = t("2026-03-01T00:00:00Z");
        let held = [(VerbExecRead, t1), (VerbExecRead, t3), (SenseEnable, t1)];
        assert_eq!(
            status(held, VerbExecRead, Some(t2)),
            GrantStatus::Held { granted_at: t3 }
        );
        assert_eq!(
            status(held, SenseEnable, Some(t2)),
            GrantStatus::Suspended {
                granted_at: t1,
                content_changed_at: t2
            }
        );
        assert_eq!(status(held, PackConnect, None), GrantStatus::Missing);
        // a grant made at the very instant of the change counts
        assert!(require("a", "p", [(PackConnect, t2)], PackConnect, Some(t2)).is_ok());
        let r = require("a", "p", held, SenseEnable, Some(t2)).unwrap_err();
        assert_eq!((r.code, r.step), (Code::MissingGrant, Step::Grant));
        assert!(r.message.contains("suspended"), "{}", r.message);
        let r = require("a", "p", held, PackConnect, None).unwrap_err();
        assert_eq!(
            r.hint.as_deref(),
            Some("the owner runs `hcp grant a p pack.connect`")
        );
    }
}
