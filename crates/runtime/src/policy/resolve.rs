//! The resource resolvers of the runtime policy (RUNTIME §7, HISTOS-ENGINE §5):
//! `config.json` `"resolvers": {"TOOL": "PACK.VERB"}` names, for a tool with `resource`
//! constraints, a `read` verb whose JSON stdout is the resource.
//!
//! The resolver verb is called with the tool's arguments (after `bind`; those it takes)
//! under the same principal, as a JSON-face call of its own through the whole pipeline:
//! its own grant, its own runtime-policy contract and limits, its own audit record. What
//! it answers becomes the resource:
//!
//! | the resolver verb                              | the tool's decision |
//! |------------------------------------------------|---------------------|
//! | exits 0, stdout a JSON object                  | the resource (constraints decide) |
//! | exits 0, stdout `false`, `0`, `""`, `[]`, `{}` | an empty resource |
//! | exits 0, stdout `null`                         | `resource_not_found` |
//! | is a `write`                                   | `resolver_error`, received `resolver_not_read` (it is not run) |
//! | exits 0, any other stdout (not JSON, a list …) | `resolver_error`, received `resolver_output_invalid` |
//! | exits non-zero                                 | `resolver_error`, received `resolver_failed` |
//! | is refused (not active, no grant, …) or times out | `resolver_error`, received its code (`pack_inactive`, `missing_grant`, `timeout` …) |
//!
//! A resolver call never resolves a resource of its own: a resolver verb whose tool has
//! `resource` constraints is refused `no_resource_resolver` (no loop). The call is made by
//! the [`Runner`] the pipeline hands step 7, whose own calls are handed none.

use crate::call::{Answer, Call, CallArgs};
use hcp_gate::Face;
use hcp_model::facts::ResolverRun;
use hcp_model::{ArgValue, Code, Operation};
use hcp_store::Home;
use histos::engine::Args;
use histos::{Map, ResolveError, ResourceResolver};
use std::borrow::Cow;
use std::cell::RefCell;
use std::time::Duration;

/// How a resolver's call is made: through the whole pipeline, as the caller of the call
/// whose tool it resolves ([`crate::pipeline`] hands one to step 7).
pub trait Runner: Sync {
    /// Makes `call` and answers it.
    fn run(&self, call: Call) -> Answer;
}

/// A resolver verb of `config.json` as the engine's [`ResourceResolver`], for one call.
pub struct VerbResolver<'a> {
    runner: &'a dyn Runner,
    home: &'a Home,
    verb: &'a str,
    timeout: Option<Duration>,
    run: RefCell<Option<ResolverRun>>,
}

impl<'a> VerbResolver<'a> {
    /// The resolver `verb` (`PACK.VERB`) of the store `home`, called through `runner`
    /// within `timeout` (the tool's call's own, else the default).
    pub fn new(
        runner: &'a dyn Runner,
        home: &'a Home,
        verb: &'a str,
        timeout: Option<Duration>,
    ) -> Self {
        Self {
            runner,
            home,
            verb,
            timeout,
            run: RefCell::new(None),
        }
    }

    /// What its call did, once the engine asked it.
    pub fn run(&self) -> Option<ResolverRun> {
        self.run.borrow().clone()
    }

    fn note(&self, audit_id: Option<String>, code: Option<Code>) {
        *self.run.borrow_mut() = Some(ResolverRun {
            verb: self.verb.to_owned(),
            audit_id,
            code,
        });
    }

    fn refused(&self, audit_id: Option<String>, code: Code, message: String) -> ResolveError {
        self.note(audit_id, Some(code));
        ResolveError::Refused {
            code: code.as_str().to_owned(),
            message: format!("resolver `{}`: {message}", self.verb),
        }
    }

    /// The arguments of the tool that the resolver verb takes, as its call's values.
    fn arguments(
        &self,
        takes: Option<&[(String, bool)]>,
        args: &Args<'_>,
    ) -> Vec<(String, ArgValue)> {
        args.iter()
            .filter(|(k, _)| takes.is_none_or(|t| t.iter().any(|(n, _)| n == k)))
            .filter_map(|(k, v)| super::to_arg(v).map(|a| (k.to_owned(), a)))
            .collect()
    }
}

impl ResourceResolver for VerbResolver<'_> {
    fn resolve<'r>(
        &'r self,
        _tool: &str,
        args: &Args<'_>,
    ) -> Result<Option<Cow<'r, Map>>, ResolveError> {
        // What the verb is and takes; a target that does not resolve is left to the call,
        // which refuses it with its own record.
        let found = crate::target::resolve(self.home, None, self.verb).ok();
        let mut takes = None;
        if let Some((pack, key)) = &found {
            if pack.policy.verbs.get(key).map(|e| e.operation) != Some(Operation::Read) {
                return Err(self.refused(
                    None,
                    Code::ResolverNotRead,
                    "a resolver must be a `read` verb; it was not run".into(),
                ));
            }
            takes = pack
                .manifest
                .plan_verb(key)
                .ok()
                .map(|p| hcp_model::manifest::arguments(&p));
        }
        let call = Call {
            pack_id: None,
            target: self.verb.to_owned(),
            args: CallArgs::Named(self.arguments(takes.as_deref(), args)),
            face: Face::Json,
            timeout: self.timeout,
        };
        // The call runs on a thread of its own: the engine deciding the tool is inside
        // this callback on this thread, and a call decides its own tool with the engine.
        let answer = std::thread::scope(|scope| scope.spawn(|| self.runner.run(call)).join());
        let Ok(answer) = answer else {
            return Err(self.refused(None, Code::InternalError, "its call failed".into()));
        };
        let r = &answer.result;
        let audit_id = r.audit_id.clone();
        if let Some(code) = r.code {
            let why = r.error.clone().unwrap_or_else(|| code.as_str().to_owned());
            return Err(self.refused(audit_id, code, why));
        }
        if r.exit_code != Some(0) {
            let status = r.exit_code.unwrap_or(-1);
            return Err(self.refused(
                audit_id,
                Code::ResolverFailed,
                format!("it exited with status {status}"),
            ));
        }
        if r.truncated {
            return Err(self.refused(
                audit_id,
                Code::ResolverOutputInvalid,
                "its output was cut short".into(),
            ));
        }
        let text = String::from_utf8_lossy(&answer.stdout);
        if text.trim() == "null" {
            self.note(audit_id, Some(Code::ResourceNotFound));
            return Err(ResolveError::NotFound);
        }
        match ResolveError::resource_from_json(&text) {
            Ok(m) => {
                self.note(audit_id, None);
                Ok(Some(Cow::Owned(m)))
            }
            Err(ResolveError::Failed(why)) => {
                Err(self.refused(audit_id, Code::ResolverOutputInvalid, why))
            }
            Err(other) => {
                self.note(audit_id, Some(Code::ResolverError));
                Err(other)
            }
        }
    }
}
