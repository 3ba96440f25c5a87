//! Questions put to the person as an input-required result (MCP 2026-07-28, RUNTIME §10):
//! the server keeps what it asked, under an unguessable handle it hands the client as the
//! result's `requestState`; the client answers by retrying the call with that handle and
//! its `inputResponses`. [`Questions::take`] gives the question back once, and only to the
//! retry that matches it: the same client (the stdio connection, or over HTTP the bearer
//! token), the same principal, the same tool with the same arguments, within the
//! question's time. Anything else finds no question, and the call is answered as if
//! nobody had been asked (`confirm required`, or the approval left pending).
//!
//! The handle is 32 bytes of `/dev/urandom` in hex, so a client cannot guess another's,
//! and nothing in it is trusted: it only names the server's own record.

use crate::confirm::{Answered, ApprovalPrompt};
use hcp_model::ArgValue;
use jiff::Timestamp;
use std::collections::HashMap;
use std::io::Read;
use std::sync::Mutex;

/// The key of the one input request in an input-required result hcp sends.
pub const INPUT_KEY: &str = "hcp_person";

/// At most this many questions wait at once (per server); asking one more forgets the
/// oldest, whose answer then finds nothing (it is refused as unanswered).
pub const MAX_PENDING: usize = 1024;

/// What was asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Asked {
    /// The confirm gate: run this command (its [`crate::confirm::Preview::digest`]).
    Command(String),
    /// The runtime policy's approval (`mcp.approve_by_elicitation`).
    Approval(Box<ApprovalPrompt>),
}

/// One question waiting for the client's retry.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    /// Who the server asked: the stdio connection, or a digest of the HTTP bearer token.
    pub client: String,
    /// The principal the call ran as.
    pub principal: String,
    /// The tool called (`PACK.VERB`).
    pub tool: String,
    /// The call's arguments, as the gate got them.
    pub args: Vec<(String, ArgValue)>,
    /// What was asked.
    pub asked: Asked,
    /// What the person already answered for this call (an accepted command before an
    /// approval is asked).
    pub answered: Answered,
    /// Until when an answer counts.
    pub expires: Timestamp,
}

/// The questions waiting, by handle.
#[derive(Debug, Default)]
pub struct Questions {
    waiting: Mutex<HashMap<String, (u64, Question)>>,
    next: Mutex<u64>,
}

/// A fresh handle: 32 bytes of `/dev/urandom`, in hex.
///
/// # Errors
/// When `/dev/urandom` cannot be read (then nobody is asked).
pub fn new_handle() -> std::io::Result<String> {
    let mut b = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

impl Questions {
    /// Keeps `q` and answers its handle.
    ///
    /// # Errors
    /// When no handle can be made.
    pub fn ask(&self, q: Question) -> std::io::Result<String> {
        let handle = new_handle()?;
        let n = {
            let mut n = self.next.lock().unwrap_or_else(|p| p.into_inner());
            *n += 1;
            *n
        };
        let mut w = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
        let now = Timestamp::now();
        w.retain(|_, (_, q)| q.expires > now);
        if w.len() >= MAX_PENDING
            && let Some(oldest) = w
                .iter()
                .min_by_key(|(_, (i, _))| *i)
                .map(|(h, _)| h.clone())
        {
            w.remove(&oldest);
        }
        w.insert(handle.clone(), (n, q));
        Ok(handle)
    }

    /// The question `handle` names, removed (an answer counts once), when the retry is
    /// its own: the same `client`, `principal`, `tool` and `args`, before it expired at
    /// `now`. A handle presented by anyone else is removed too, and answers `None`: a
    /// question is answered at most once, and never by another.
    pub fn take(
        &self,
        handle: &str,
        client: &str,
        principal: &str,
        tool: &str,
        args: &[(String, ArgValue)],
        now: Timestamp,
    ) -> Option<Question> {
        let (_, q) = self
            .waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(handle)?;
        (q.client == client
            && q.principal == principal
            && q.tool == tool
            && same_args(&q.args, args)
            && q.expires > now)
            .then_some(q)
    }

    /// How many questions wait.
    pub fn len(&self) -> usize {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether none waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The same arguments, whatever their order.
fn same_args(a: &[(String, ArgValue)], b: &[(String, ArgValue)]) -> bool {
    let mut a: Vec<_> = a.iter().collect();
    let mut b: Vec<_> = b.iter().collect();
    a.sort_by(|x, y| x.0.cmp(&y.0));
    b.sort_by(|x, y| x.0.cmp(&y.0));
    a == b
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn question(client: &str) -> Question {
        Question {
            client: client.into(),
            principal: "agent-1".into(),
            tool: "echo.echo.write".into(),
            args: vec![
                ("name".into(), ArgValue::String("a.txt".into())),
                ("text".into(), ArgValue::String("hi".into())),
            ],
            asked: Asked::Command("sha256:00".into()),
            answered: Answered::default(),
            expires: Timestamp::now() + jiff::SignedDuration::from_secs(300),
        }
    }

    #[test]
    fn a_question_is_answered_once_and_only_by_its_own_retry() {
        let qs = Questions::default();
        let q = question("c1");
        let now = Timestamp::now();
        let args = q.args.clone();
        let h = qs.ask(q.clone()).unwrap();
        assert_eq!(h.len(), 64);
        // Another client with the handle: nothing, and the question is gone.
        assert_eq!(
            qs.take(&h, "c2", "agent-1", "echo.echo.write", &args, now),
            None
        );
        assert_eq!(
            qs.take(&h, "c1", "agent-1", "echo.echo.write", &args, now),
            None
        );
        for (client, principal, tool, other_args) in [
            ("c1", "agent-2", "echo.echo.write", args.clone()),
            ("c1", "agent-1", "echo.echo.say", args.clone()),
            ("c1", "agent-1", "echo.echo.write", args[..1].to_vec()),
        ] {
            let h = qs.ask(q.clone()).unwrap();
            assert_eq!(qs.take(&h, client, principal, tool, &other_args, now), None);
        }
        let h = qs.ask(q.clone()).unwrap();
        let mut reordered = args.clone();
        reordered.reverse();
        assert_eq!(
            qs.take(&h, "c1", "agent-1", "echo.echo.write", &reordered, now),
            Some(q.clone())
        );
        assert_eq!(
            qs.take(&h, "c1", "agent-1", "echo.echo.write", &args, now),
            None
        );
        // Too late.
        let h = qs.ask(q.clone()).unwrap();
        let later = now + jiff::SignedDuration::from_secs(301);
        assert_eq!(
            qs.take(&h, "c1", "agent-1", "echo.echo.write", &args, later),
            None
        );
        assert!(qs.is_empty());
        // A handle never given.
        assert_eq!(
            qs.take("nope", "c1", "agent-1", "echo.echo.write", &args, now),
            None
        );
    }
}
