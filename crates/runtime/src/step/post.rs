//! The post-gate of RUNTIME §5: the credential never leaves (redacted from what the child
//! printed, in its plain and JSON-escaped forms: [`crate::redact`]), the signal that ended
//! a child is named, and for a session under a runtime policy its output controls
//! (projection, strict returns, redaction, canary scan: RUNTIME §7) decide what the caller
//! sees.

use super::run::Ran;
use crate::policy::{self, RuntimePolicy};
use crate::record::Record;
use crate::redact::Redactor;
use hcp_model::facts::Signal;
use hcp_model::{Code, Principal, exit};
use hcp_store::binding::Credential;

/// What the caller gets of a run: the run (stderr as shown), the stdout it may see, its
/// exit status, and the code and message of a run that did not end on its own
/// (`timeout`, `cancelled`, `output_withheld`).
pub(crate) struct Posted {
    pub ran: Ran,
    pub stdout: Vec<u8>,
    pub exit: u8,
    pub code: Option<Code>,
    pub error: Option<String>,
    /// The runtime policy withheld the output.
    pub withheld: Withheld,
}

/// Whether the output controls withheld the child's stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Withheld {
    /// Shown (or changed) as the controls allow.
    No,
    /// Withheld: the caller sees none of it (`output_withheld`).
    Yes,
}

/// The post-gate of a verb's run.
pub(crate) fn verb(
    mut ran: Ran,
    (principal, tool): (&Principal, &str),
    (credential, policy): (Option<&Credential>, Option<&RuntimePolicy>),
    rec: &mut Record,
) -> Posted {
    let (exit, mut code, mut error) = ended(&ran);
    let outcome = &mut ran.outcome;
    if let Some(c) = credential {
        // The credential reaches the child only: a verb that prints it (its environment,
        // an error quoting it) does not hand it to the caller (RUNTIME §8).
        let r = Redactor::new(&c.secret);
        outcome.stdout = r.bytes(&outcome.stdout);
        outcome.stderr = r.bytes(&outcome.stderr);
    }
    if let Some(sig) = outcome
        .signal
        .filter(|_| !outcome.timed_out && !outcome.cancelled)
    {
        // A limit the kernel enforced ends the child with a signal: say which.
        rec.facts.signal = Some(Signal {
            number: sig,
            name: signal_name(sig),
        });
    }
    let mut stdout = std::mem::take(&mut outcome.stdout);
    let mut withheld = Withheld::No;
    if let Some(rp) = policy.filter(|_| !principal.is_owner()) {
        let post = policy::post(rp, principal, tool, &stdout, &outcome.stderr);
        outcome.stderr = post.stderr;
        rec.facts.post_rule = Some(post.rule);
        match post.stdout {
            Some(b) => stdout = b,
            None => {
                stdout = Vec::new();
                withheld = Withheld::Yes;
            }
        }
    }
    let exit = if withheld == Withheld::Yes && code.is_none() {
        code = Some(Code::OutputWithheld);
        error = Some("the runtime policy withheld the verb's output".to_string());
        Code::OutputWithheld.exit_status()
    } else {
        exit
    };
    Posted {
        ran,
        stdout,
        exit,
        code,
        error,
        withheld,
    }
}

/// How the run ended: its exit status, and the code and message of a timeout, a cancel or
/// the memory limit of the call's processes together (`memory_exceeded`).
fn ended(ran: &Ran) -> (u8, Option<Code>, Option<String>) {
    let o = &ran.outcome;
    if o.timed_out {
        (
            Code::Timeout.exit_status(),
            Some(Code::Timeout),
            Some(format!(
                "the verb ran past its timeout of {:.3} s",
                ran.limits.timeout.as_secs_f64()
            )),
        )
    } else if o.cancelled {
        (
            // The caller went away (no face prints this status).
            Code::Cancelled.exit_status(),
            Some(Code::Cancelled),
            Some("the caller abandoned the call; its process group was ended".to_string()),
        )
    } else if o.memory_exceeded {
        (
            Code::MemoryExceeded.exit_status(),
            Some(Code::MemoryExceeded),
            Some(crate::prepare::MEMORY_EXCEEDED.to_string()),
        )
    } else {
        (
            u8::try_from(o.exit_code.clamp(0, 255)).unwrap_or(exit::REFUSED),
            None,
            None,
        )
    }
}

/// The name and meaning of a signal that ended a child, for the answer.
fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGKILL => {
            "SIGKILL (killed: after the grace of the timeout or of a read ended at its output cap, the CPU-time limit's hard stop, or from outside)"
        }
        libc::SIGTERM => "SIGTERM (the timeout, or a read verb ended at its output cap)",
        libc::SIGXCPU => "SIGXCPU (the CPU-time limit)",
        libc::SIGXFSZ => "SIGXFSZ (the file-size limit)",
        libc::SIGSEGV => "SIGSEGV (a crash, or the address-space limit)",
        libc::SIGABRT => "SIGABRT (the program aborted)",
        libc::SIGPIPE => "SIGPIPE",
        _ => "a signal",
    }
}
