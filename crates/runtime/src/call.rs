//! What a face hands the pipeline: the caller's process facts ([`Caller`]), one call
//! ([`Call`]); and what it gets back ([`Answer`]).

use hcp_gate::Face;
use hcp_model::{ArgValue, ExecResult};
use std::time::Duration;

pub use crate::caller::{Caller, parse_limits};

/// The words of a CLI-face call after the target: named values, positional values and
/// `--confirm`/`--apply`, matched to the verb's arguments once the verb is known
/// ([`Words::assign`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Words {
    /// `--NAME VALUE` and `--NAME=VALUE` pairs, names with `-` read as `_`, in order.
    pub named: Vec<(String, String)>,
    /// Values without a name, in order.
    pub positional: Vec<String>,
    /// `--confirm` or `--apply` was given (as `"true"`, §4.5.2), or its value.
    pub confirm: Option<String>,
}

impl Words {
    /// The call's arguments for a verb taking `takes` (names in template order): named
    /// values, then positional values given to the arguments not named, in order, then
    /// `confirm`. A positional value with no argument left to take it is kept under the
    /// name `_extra_N` (1-based), which the gate refuses as unknown.
    pub fn assign(&self, takes: &[String]) -> Vec<(String, ArgValue)> {
        let mut out: Vec<(String, ArgValue)> = self
            .named
            .iter()
            .map(|(n, v)| (n.clone(), ArgValue::String(v.clone())))
            .collect();
        let mut free = takes
            .iter()
            .filter(|t| !self.named.iter().any(|(n, _)| n == *t));
        for (i, v) in self.positional.iter().enumerate() {
            let name = free
                .next()
                .cloned()
                .unwrap_or_else(|| format!("_extra_{}", i + 1));
            out.push((name, ArgValue::String(v.clone())));
        }
        if let Some(c) = &self.confirm {
            out.push(("confirm".into(), ArgValue::String(c.clone())));
        }
        out
    }
}

/// The arguments of a call as its face gave them.
#[derive(Debug, Clone)]
pub enum CallArgs {
    /// By name (the JSON face, MCP).
    Named(Vec<(String, ArgValue)>),
    /// CLI words: positional values are matched to the verb's arguments once it is known.
    Words(Words),
}

impl CallArgs {
    /// The arguments for a verb taking `takes`.
    pub fn for_verb(&self, takes: &[String]) -> Vec<(String, ArgValue)> {
        match self {
            Self::Named(v) => v.clone(),
            Self::Words(w) => w.assign(takes),
        }
    }
}

/// One call.
#[derive(Debug, Clone)]
pub struct Call {
    /// The pack, when the face names it apart (`pack_id` of an envelope, MCP, connect).
    pub pack_id: Option<String>,
    /// `PACK.VERB` or a verb key (the verb key when `pack_id` is given).
    pub target: String,
    /// The arguments.
    pub args: CallArgs,
    /// The face.
    pub face: Face,
    /// `--timeout`, when given.
    pub timeout: Option<Duration>,
}

/// What a call answered and the exit status it means.
#[derive(Debug)]
pub struct Answer {
    /// The result object of RUNTIME §5.
    pub result: ExecResult,
    /// The exit status of RUNTIME §5.
    pub exit: u8,
    /// Raw child output (text mode prints it as it is).
    pub stdout: Vec<u8>,
    /// Raw child stderr.
    pub stderr: Vec<u8>,
    /// With a `confirm_required` refusal of the MCP face: the command the call would run
    /// once the person confirms it (RUNTIME §10, [`crate::confirm`]).
    pub preview: Option<Box<crate::confirm::Preview>>,
    /// The principal the call was made and recorded as (`owner` without a session,
    /// `unknown` for a session that cannot be used); `None` before any was known.
    pub principal: Option<String>,
    /// What the call learned (`result.extra` holds those of them the result shows).
    pub facts: hcp_model::CallFacts,
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn s(v: &str) -> ArgValue {
        ArgValue::String(v.into())
    }

    #[test]
    fn positional_values_fill_the_arguments_not_named() {
        let w = Words {
            named: vec![("to".into(), "B".into())],
            positional: vec!["A".into(), "C".into()],
            confirm: Some("true".into()),
        };
        assert_eq!(
            w.assign(&["from".into(), "to".into()]),
            vec![
                ("to".into(), s("B")),
                ("from".into(), s("A")),
                ("_extra_2".into(), s("C")),
                ("confirm".into(), s("true"))
            ]
        );
    }

    #[test]
    fn limits_parse_strictly() {
        let o = parse_limits("cpu_seconds=5, processes=10").unwrap();
        assert_eq!(
            (o.cpu_seconds, o.processes, o.open_files),
            (Some(5), Some(10), None)
        );
        for bad in [
            "cpu=5",
            "cpu_seconds=0",
            "cpu_seconds=-1",
            "cpu_seconds",
            "cpu_seconds=1,cpu_seconds=2",
            "open_files=x",
        ] {
            assert!(parse_limits(bad).is_err(), "{bad}");
        }
        assert!(parse_limits("").unwrap().cpu_seconds.is_none());
    }
}
