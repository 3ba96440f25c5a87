//! The steps of RUNTIME §5, one file each, in the contract's order. [`crate::pipeline`]
//! calls them top to bottom for each subject; each answers its result or a [`Stop`].
//!
//! ```text
//!  0 snapshot ........ crate::snapshot  every read up front (session, pack, grants, …)
//!  1 target .......... target.rs        the verb, the stimuli, the binding's pack
//!  2 principal ....... principal.rs     the session's principal, or the owner
//!  3–6 gate .......... gate.rs          hcp-gate: arguments, grant, land, confirm
//!  7 runtime policy .. policy.rs        the tool lock; Histos, dry (nothing spent)
//!  8 binding ......... binding.rs       connect_only; the credential; binding.degraded
//!  9a prepare ........ prepare.rs       the children (crate::prepare::child), or the request
//!  9b admit .......... admit.rs         the one step that spends; the durable intent
//!  9c run ............ run.rs           the adapter, the request, or the sense relay
//!  post-gate ......... post.rs          the credential redacted; the output controls
//!  outcome ........... outcome.rs       the outcome record and the answer; a stop's record
//!  binding act ....... bind.rs          connect stores the credential, disconnect removes it
//! ```
//!
//! Every refusal from step 2 on is recorded ([`Stop::Recorded`]); one that no record can
//! take — the trail or the state cannot be written — or that comes before anything is
//! recorded is [`Stop::Unrecorded`]. After admission a stop is the call's `outcome`, not a
//! refusal (RUNTIME §6: every intent gets an outcome unless hcp dies).

pub(crate) mod admit;
pub(crate) mod bind;
pub(crate) mod binding;
pub(crate) mod gate;
pub(crate) mod outcome;
pub(crate) mod policy;
pub(crate) mod post;
pub(crate) mod prepare;
pub(crate) mod principal;
pub(crate) mod run;
pub(crate) mod target;

use crate::refusal::Refusal;

/// Why a call stopped before answering with a run.
#[derive(Debug)]
pub(crate) enum Stop {
    /// A refusal the trail records (or, after admission, the call's outcome).
    Recorded(Refusal),
    /// A refusal no record can take: the trail or the state cannot be written, the
    /// outcome of a run could not be written, or nothing of the call is recorded yet.
    Unrecorded(Refusal),
}

impl Stop {
    /// The refusal.
    pub(crate) fn refusal(&self) -> &Refusal {
        match self {
            Self::Recorded(r) | Self::Unrecorded(r) => r,
        }
    }

    /// The refusal, taken.
    pub(crate) fn into_refusal(self) -> Refusal {
        match self {
            Self::Recorded(r) | Self::Unrecorded(r) => r,
        }
    }
}

impl From<Refusal> for Stop {
    /// A refusal the trail records.
    fn from(r: Refusal) -> Self {
        Self::Recorded(r)
    }
}
