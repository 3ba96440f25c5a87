//! The confirm gate answered by the person (RUNTIME §10): what a confirm-gated call would
//! run, shown before it runs, and the binding of the person's accept to exactly that.
//!
//! When step 6 refuses a call of the MCP face with `confirm_required`, the pipeline
//! renders the command that call would run — as child preparation would: the runtime
//! policy's `bind` applied, argv rendered from the verb's template, the pinned bin, the
//! working directory — without verifying the bin, spending or running anything, and
//! hands it back with the refusal ([`Preview`], `Answer::preview`). `hcp mcp` shows it to
//! the person (an elicitation); on an accept it calls again with the preview's
//! [`Preview::digest`] ([`crate::pipeline::Mode::Answered`]): the gate then counts the call
//! as confirmed, and after child preparation the runtime refuses it (`confirm_required`,
//! nothing spent) unless the command it is about to run has that very digest.
//!
//! A call the runtime policy paused for `confirmation` may be put to the person the same
//! way when the operator opts in (`config.json` `"mcp": {"approve_by_elicitation": true}`):
//! [`ApprovalPrompt`] shows the pending approval, [`approve`] grants exactly that one
//! through [`hcp_store::state::State::approve`], as `hcp approve` does.
//!
//! The answer of the person is checked here too ([`accepted`]): an accept counts only with
//! exactly the content asked for.

use crate::Runtime;
use crate::refusal::Refusal;
use hcp_adapter::SessionValues;
use hcp_gate::{Context, Decision};
use hcp_model::{ArgValue, Code, Land, Operation, Principal};
use hcp_store::approval::Approval;
use hcp_store::pack::InstalledPack;
use jiff::Timestamp;
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The property of the elicitation's form the person sets to go ahead.
pub const RUN_KEY: &str = "run";

/// What the person answered through the face for one call
/// ([`crate::pipeline::Mode::Answered`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Answered {
    /// The [`Preview::digest`] of the command they accepted at the confirm gate.
    pub command: Option<String>,
    /// The approval they granted ([`approve`]).
    pub approval: Option<String>,
}

/// What a confirm-gated call would run: shown to the person before it runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Preview {
    /// The pack.
    pub pack_id: String,
    /// The verb key.
    pub verb_key: String,
    /// The verb's operation.
    pub operation: Operation,
    /// The verb's land.
    pub land: Land,
    /// Who calls (`owner` without a session).
    pub principal: String,
    /// The pinned program that runs (absolute path).
    pub bin: String,
    /// `argv[0]` as the program sees it (the CLI name).
    pub argv0: String,
    /// `argv[1..]`, each element whole (lossy UTF-8 for display; the digest is over bytes).
    pub args: Vec<String>,
    /// The working directory.
    pub workdir: String,
    /// [`digest`] of the command: what an accept is bound to.
    pub digest: String,
}

/// The digest an accept is bound to: SHA-256 over the pack id, the verb key, the pinned
/// bin's path and digest, `argv[0]`, every element of `argv[1..]` and the working
/// directory, each as its length (8 bytes, little-endian) and its bytes; `sha256:HEX`.
pub fn digest(
    pack_id: &str,
    verb_key: &str,
    bin: &hcp_adapter::BinPin,
    argv0: &OsStr,
    args: &[OsString],
    workdir: &Path,
) -> String {
    let mut h = Vec::new();
    let mut part = |b: &[u8]| {
        h.extend_from_slice(&(b.len() as u64).to_le_bytes());
        h.extend_from_slice(b);
    };
    part(pack_id.as_bytes());
    part(verb_key.as_bytes());
    part(bin.path.as_os_str().as_bytes());
    part(bin.sha256.to_string().as_bytes());
    part(argv0.as_bytes());
    part(&(args.len() as u64).to_le_bytes());
    for a in args {
        part(a.as_bytes());
    }
    part(workdir.as_os_str().as_bytes());
    hcp_store::audit::sha256_tagged(&h)
}

/// The call's arguments with `confirm: true` added: what the gate checks for a call the
/// person confirmed (the call's own arguments, and so its audit digest, stay as sent).
pub fn with_confirm(args: &[(String, ArgValue)]) -> Vec<(String, ArgValue)> {
    let mut out = args.to_vec();
    out.push(("confirm".into(), ArgValue::Bool(true)));
    out
}

/// What the preview needs of the call beyond the gate's context.
pub(crate) struct PreviewOf<'a> {
    pub pack: &'a InstalledPack,
    pub verb_key: &'a str,
    pub args: &'a [(String, ArgValue)],
    pub policy: Option<&'a histos::Policy>,
    pub principal: &'a Principal,
}

/// The command a call refused at step 6 would run once confirmed, rendered as child
/// preparation renders it (the policy's `bind` from the session's attributes, the argv
/// template, the pin, the working directory). `None` when the call would be refused
/// anyway before it runs (another gate step, a `bind` with no attribute, a render error):
/// then nobody is asked.
pub(crate) fn preview(ctx: &Context<'_>, p: &PreviewOf<'_>) -> Option<Preview> {
    let confirmed = with_confirm(p.args);
    let Decision::Allow(allowed) = hcp_gate::check(ctx, confirmed.iter().map(|(k, v)| (k, v)))
    else {
        return None;
    };
    let mut values: BTreeMap<String, ArgValue> = allowed.values.clone();
    if let (Some(policy), Some(s)) = (p.policy, &p.principal.session) {
        let tool = format!("{}.{}", p.pack.id, p.verb_key);
        for (arg, attr) in policy
            .tool(&tool)
            .map_or(&[][..], |t| t.bindings.as_slice())
        {
            let v = s.attributes.get(attr)?;
            values.insert(arg.clone(), ArgValue::String(v.clone()));
        }
    }
    let session = SessionValues {
        principal_id: p.principal.id.clone(),
        project_id: allowed.project.clone(),
        workdir: allowed.workdir.clone(),
    };
    let args = hcp_adapter::render(&allowed.plan.args, &values, &session, p.verb_key).ok()?;
    let pin = crate::pins::pin_of(p.pack, &allowed.plan.program).ok()?;
    let argv0 = OsString::from(
        p.pack
            .manifest
            .cli_bin
            .clone()
            .unwrap_or_else(|| allowed.plan.program.clone()),
    );
    let digest = digest(
        p.pack.id.as_str(),
        p.verb_key,
        &pin,
        &argv0,
        &args,
        &crate::prepare::child_cwd(allowed.land, &allowed.workdir),
    );
    let lossy = |s: &OsStr| s.to_string_lossy().into_owned();
    Some(Preview {
        pack_id: p.pack.id.to_string(),
        verb_key: p.verb_key.to_owned(),
        operation: allowed.operation,
        land: allowed.land,
        principal: p.principal.id.clone(),
        bin: lossy(pin.path.as_os_str()),
        argv0: lossy(&argv0),
        args: args.iter().map(|a| lossy(a)).collect(),
        workdir: lossy(allowed.workdir.as_os_str()),
        digest,
    })
}

/// The refusal of a confirmed call whose command is not the one the person accepted.
pub(crate) fn changed() -> Refusal {
    Refusal::new(Code::ConfirmRequired, "confirm required").hint(
        "the command this call would run changed since the person accepted it (the pack, its bin, the runtime policy's binding or the working directory); nothing ran: call again to be asked again",
    )
}

/// A word as a POSIX shell would need it quoted to read it back whole; control characters
/// shown escaped, so one element never looks like two lines.
pub fn shell_word(w: &str) -> String {
    let plain = !w.is_empty()
        && w.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:=@,+%".contains(&b));
    if plain {
        return w.to_owned();
    }
    if w.chars().any(char::is_control) {
        let escaped: String = w.chars().flat_map(char::escape_default).collect();
        return format!("$'{}'", escaped.replace('\'', "\\'"));
    }
    format!("'{}'", w.replace('\'', r"'\''"))
}

impl Preview {
    /// The command as one shell line (each element quoted as needed).
    pub fn command_line(&self) -> String {
        std::iter::once(&self.argv0)
            .chain(&self.args)
            .map(|w| shell_word(w))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// What the person reads: who asks to run which verb, and the exact command.
    pub fn message(&self) -> String {
        format!(
            "`{who}` asks to run `{pack}.{verb}` ({op}, land {land}), which needs your confirmation. It runs exactly:\n\n    {line}\n\nprogram {bin}\nin {dir}\n\nAccept runs this once; decline or cancel refuses it (`confirm required`).",
            who = self.principal,
            pack = self.pack_id,
            verb = self.verb_key,
            op = self.operation,
            land = self.land,
            line = self.command_line(),
            bin = self.bin,
            dir = self.workdir,
        )
    }

    /// The `elicitation/create` params (form mode, MCP 2025-06-18 and later): the message,
    /// a form of one required boolean [`RUN_KEY`], and the command in `_meta.hcp`.
    pub fn elicitation(&self) -> Value {
        elicitation(
            &self.message(),
            "Run this command",
            json!({ "command": self }),
        )
    }
}

/// The `elicitation/create` params of a question with one required boolean [`RUN_KEY`].
pub fn elicitation(message: &str, title: &str, meta: Value) -> Value {
    json!({
        "mode": "form",
        "message": message,
        "requestedSchema": {
            "type": "object",
            "properties": { RUN_KEY: { "type": "boolean", "title": title,
                                       "description": "true to go ahead, once" } },
            "required": [RUN_KEY]
        },
        "_meta": { "hcp": meta }
    })
}

/// Whether an elicitation result (`{"action", "content"?}`) is an accept of exactly what
/// was asked: action `accept` and content exactly `{"run": true}`. Anything else — decline,
/// cancel, an accept without content, with `run: false`, with another key or another
/// type — is not.
pub fn accepted(result: &Value) -> bool {
    result.get("action") == Some(&json!("accept"))
        && result.get("content") == Some(&json!({ RUN_KEY: true }))
}

/// The arguments of a call from a client that asks its person: without `confirm` and
/// `apply` (`hcp_gate::args::CONFIRM_NAMES`), so the model cannot confirm in the person's
/// place (or after the person declined); the gate then asks for confirmation and the face
/// puts the question to the person.
pub fn for_the_person(args: Vec<(String, ArgValue)>) -> Vec<(String, ArgValue)> {
    args.into_iter()
        .filter(|(k, _)| !hcp_gate::args::CONFIRM_NAMES.contains(&k.as_str()))
        .collect()
}

/// Marks a `confirm_required` answer the person did not accept (declined, cancelled, other
/// content, no answer in time): its hint says so instead of inviting `confirm: true`.
pub fn not_accepted(answer: &mut crate::Answer) {
    answer.result.hint = Some(
        "the person did not accept this command (declined, cancelled, or no answer in time); it did not run. Ask them before calling again"
            .into(),
    );
}

/// A pending approval of the runtime policy put to the person (`approve_by_elicitation`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalPrompt {
    /// The approval as it was shown.
    pub approval: Approval,
}

impl ApprovalPrompt {
    /// The approval `id` a call of `tool` by `principal` was just paused with, when it is
    /// still pending at `now` and is that call's (same tool and principal): what the person
    /// is shown. `None` otherwise (then nobody is asked).
    pub fn load(
        rt: &Runtime,
        id: &str,
        tool: &str,
        principal: &str,
        now: Timestamp,
    ) -> Option<Self> {
        let approval = rt
            .state()
            .approvals_list()
            .ok()?
            .into_iter()
            .find(|a| a.id == id)?;
        (approval.state(now) == "pending"
            && approval.tool == tool
            && approval.principal == principal)
            .then_some(Self { approval })
    }

    /// What the person reads: the tool, who asks, the arguments (as `hcp approvals`
    /// summarises them) and the window.
    pub fn message(&self) -> String {
        let a = &self.approval;
        let args: Vec<String> = a
            .summary
            .iter()
            .map(|(k, v)| format!("    {k} = {}", shell_word(v)))
            .collect();
        format!(
            "The runtime policy asks for your approval: `{who}` calls `{tool}` with\n\n{args}\n\nApproval {id} (policy {policy}). Accept approves exactly this call, once, within {window} s, as `hcp approve {id}` would; decline or cancel leaves it pending.",
            who = a.principal,
            tool = a.tool,
            args = if args.is_empty() {
                "    (no arguments)".to_owned()
            } else {
                args.join("\n")
            },
            id = a.id,
            policy = a.policy_hash,
            window = a.window_s,
        )
    }

    /// The `elicitation/create` params: the message and the one required boolean
    /// [`RUN_KEY`]; the approval in `_meta.hcp`.
    pub fn elicitation(&self) -> Value {
        let a = &self.approval;
        elicitation(
            &self.message(),
            "Approve this call",
            json!({ "approval": {
                "id": a.id, "tool": a.tool, "principal": a.principal,
                "args_digest": a.args_digest, "policy_hash": a.policy_hash,
                "summary": a.summary, "window_s": a.window_s,
            }}),
        )
    }
}

/// Grants the approval the person accepted, once, through the one store path of `hcp
/// approve` ([`hcp_store::state::State::approve`]), if it is still pending and still the
/// call shown (tool, principal and its facts, arguments, policy hash).
///
/// # Errors
/// `requires_confirmation` when it changed, was used, expired or went; the store's code
/// when it cannot be granted.
pub fn approve(rt: &Runtime, shown: &ApprovalPrompt, now: Timestamp) -> Result<Approval, Refusal> {
    let s = &shown.approval;
    let gone = || {
        Refusal::new(
            Code::RequiresConfirmation,
            format!(
                "approval `{}` is no longer the pending approval the person was shown",
                s.id
            ),
        )
    };
    let now_pending =
        ApprovalPrompt::load(rt, &s.id, &s.tool, &s.principal, now).ok_or_else(gone)?;
    let a = &now_pending.approval;
    if (
        &a.principal_digest,
        &a.args_digest,
        &a.policy_hash,
        a.requested_at,
    ) != (
        &s.principal_digest,
        &s.args_digest,
        &s.policy_hash,
        s.requested_at,
    ) {
        return Err(gone());
    }
    rt.state()
        .approve(&s.id, now)
        .map_err(|e| Refusal::new(e.code(), e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn only_the_exact_accept_counts() {
        assert!(accepted(
            &json!({"action": "accept", "content": {"run": true}})
        ));
        for no in [
            json!({"action": "accept"}),
            json!({"action": "accept", "content": {}}),
            json!({"action": "accept", "content": {"run": false}}),
            json!({"action": "accept", "content": {"run": "true"}}),
            json!({"action": "accept", "content": {"run": true, "text": "other"}}),
            json!({"action": "decline", "content": {"run": true}}),
            json!({"action": "cancel"}),
            json!({"content": {"run": true}}),
            json!(null),
        ] {
            assert!(!accepted(&no), "{no}");
        }
    }

    #[test]
    fn words_are_shown_whole() {
        assert_eq!(shell_word("a.txt"), "a.txt");
        assert_eq!(shell_word("two words"), "'two words'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word(""), "''");
        assert_eq!(shell_word("a\nrm -rf /"), r"$'a\nrm -rf /'");
    }

    #[test]
    fn the_digest_covers_every_element_and_its_boundaries() {
        let pin = hcp_adapter::BinPin {
            path: "/usr/bin/tp".into(),
            sha256: format!("sha256:{}", "0".repeat(64)).parse().unwrap(),
            fingerprint: None,
        };
        let d = |args: &[&str], dir: &str| {
            let args: Vec<OsString> = args.iter().map(OsString::from).collect();
            digest("p", "v", &pin, OsStr::new("tp"), &args, Path::new(dir))
        };
        let base = d(&["a", "b"], "/w");
        assert!(base.starts_with("sha256:"));
        assert_eq!(base, d(&["a", "b"], "/w"));
        for other in [
            d(&["ab"], "/w"),
            d(&["a", "b", ""], "/w"),
            d(&["a", "b"], "/x"),
        ] {
            assert_ne!(base, other);
        }
    }
}
