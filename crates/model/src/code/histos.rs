//! The Histos engine's codes in the code table (RUNTIME §7): its RUNTIME rules, its POLICY
//! load codes and its tool-lock codes. The engine is stand-alone and keeps its own enums
//! (`histos::Rule`, `histos::PolicyCode`, `histos::lock::LockCode`); these conversions are
//! the one place they meet hcp's [`Code`]. Each match lists every variant, so a code the
//! engine adds does not compile here until it has its row in the table.

use super::Code;
use histos::PolicyCode;
use histos::Rule;
use histos::lock::LockCode;

/// A rule that decides without refusing (`allow`, `confirmed`, `escalated`) or names what
/// the output controls did (`post_redaction`, `exception_redaction`, `output_schema`): the
/// audit keeps it as a record's `rule`, and it is no code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotARefusal(pub Rule);

impl TryFrom<Rule> for Code {
    type Error = NotARefusal;

    fn try_from(r: Rule) -> Result<Self, NotARefusal> {
        Ok(match r {
            Rule::Allow
            | Rule::Confirmed
            | Rule::Escalated
            | Rule::PostRedaction
            | Rule::ExceptionRedaction
            | Rule::OutputSchema => return Err(NotARefusal(r)),
            Rule::UnknownTool => Code::UnknownTool,
            Rule::NoArgSchema => Code::NoArgSchema,
            Rule::NoPrincipal => Code::NoPrincipal,
            Rule::Rbac => Code::Rbac,
            Rule::ArgSchema => Code::ArgSchema,
            Rule::ArgBindingUnresolved => Code::ArgBindingUnresolved,
            Rule::ResourceConstraint => Code::ResourceConstraint,
            Rule::NoResourceResolver => Code::NoResourceResolver,
            Rule::ResourceNotFound => Code::ResourceNotFound,
            Rule::ResolverError => Code::ResolverError,
            Rule::CanaryExfil => Code::CanaryExfil,
            Rule::SecretDetected => Code::SecretDetected,
            Rule::InjectionPattern => Code::InjectionPattern,
            Rule::ExfiltrationPattern => Code::ExfiltrationPattern,
            Rule::RateLimit => Code::RateLimit,
            Rule::Budget => Code::Budget,
            Rule::LimitStoreCapacity => Code::LimitStoreCapacity,
            Rule::RequiresConfirmation => Code::RequiresConfirmation,
            Rule::ConfirmError => Code::ConfirmError,
            Rule::EscalationDenied => Code::EscalationDenied,
            Rule::EscalationError => Code::EscalationError,
            Rule::NoEscalationTier => Code::NoEscalationTier,
            Rule::InternalError => Code::InternalError,
            Rule::ConfirmSuspended => Code::ConfirmSuspended,
            Rule::ConfirmCancelled => Code::ConfirmCancelled,
            Rule::PreCancelled => Code::PreCancelled,
            Rule::UnnameableArgs => Code::UnnameableArgs,
            Rule::UninspectableOutput => Code::UninspectableOutput,
        })
    }
}

impl From<PolicyCode> for Code {
    fn from(p: PolicyCode) -> Self {
        match p {
            PolicyCode::DuplicateKey => Code::DuplicateKey,
            PolicyCode::InvalidBinding => Code::InvalidBinding,
            PolicyCode::InvalidGrant => Code::InvalidGrant,
            PolicyCode::NotAnObject => Code::NotAnObject,
            PolicyCode::NotFound => Code::NotFound,
            PolicyCode::ToolsNotAMapping => Code::ToolsNotAMapping,
            PolicyCode::UnknownKey => Code::UnknownKey,
            PolicyCode::Unparseable => Code::Unparseable,
            PolicyCode::UnsafePattern => Code::UnsafePattern,
            PolicyCode::UnsupportedFeature => Code::UnsupportedFeature,
            PolicyCode::UnsupportedVersion => Code::UnsupportedVersion,
            PolicyCode::PolicyInvalid => Code::PolicyInvalid,
            PolicyCode::InvalidField => Code::InvalidField,
            PolicyCode::InvalidContract => Code::InvalidContract,
            PolicyCode::InvalidCanary => Code::InvalidCanary,
            PolicyCode::MissingKey => Code::MissingKey,
            PolicyCode::NotAList => Code::NotAList,
            PolicyCode::NotAMapping => Code::NotAMapping,
            PolicyCode::PolicyTooLarge => Code::PolicyTooLarge,
            PolicyCode::InvalidImport => Code::InvalidImport,
        }
    }
}

impl From<LockCode> for Code {
    fn from(l: LockCode) -> Self {
        match l {
            LockCode::Unparseable => Code::LockUnparseable,
            LockCode::DuplicateKey => Code::LockDuplicateKey,
            LockCode::UnsupportedVersion => Code::LockUnsupportedVersion,
            LockCode::Invalid => Code::LockInvalid,
            LockCode::TooLarge => Code::LockTooLarge,
            LockCode::NotFound => Code::LockNotFound,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::code::Step;

    #[test]
    fn every_refusing_rule_refuses_a_call_at_step_7_under_its_own_spelling() {
        for r in Rule::ALL {
            match Code::try_from(*r) {
                Ok(c) => {
                    assert_eq!(c.as_str(), r.as_str());
                    assert_eq!(
                        (c.step(), c.exit_status()),
                        (Step::RuntimePolicy, 77),
                        "{c}"
                    );
                }
                Err(NotARefusal(n)) => assert_eq!(n, *r),
            }
        }
    }

    #[test]
    fn policy_and_lock_codes_keep_their_spelling_and_refuse_a_call_at_step_7() {
        for p in PolicyCode::ALL {
            let c = Code::from(*p);
            assert_eq!(c.as_str(), p.as_str());
            // in a call: refused by the gate; in `hcp policy check`: refused (1)
            assert_eq!((c.exit_status(), c.command_exit_status()), (77, 1), "{c}");
        }
        for l in LockCode::ALL {
            let c = Code::from(*l);
            assert_eq!(c.as_str(), l.as_str());
            assert_eq!(c.step(), Step::RuntimePolicy, "{c}");
        }
    }
}
