//! `hcp_bin_reserved` (error): a pack other than the bootstrap pack whose bin is `hcp`.
//!
//! ## What it does
//! Takes the basename of each program the pack runs (as `exec_wrapper_bin` does:
//! `wrap.bin`, or each composite verb's and trigger's `cli[0]`, lowercased, without a
//! version suffix) and reports it when it is `hcp`, unless the pack is the bootstrap pack:
//! id `hcp-cli`, kind `wrap`, plane `runtime`, binding `local`. Install
//! refuses the same, and also a program that resolves to the very file of the running
//! `hcp` under another name (a hard link).
//!
//! ## Why is this bad?
//! `hcp` is the owner's own tool: from inside a call it either refuses (`nested_call`) or,
//! for the bootstrap pack alone, reads the store read-only without its secrets. A second
//! pack wrapping `hcp` would be a second door to the store, and a pack that merely calls
//! itself `hcp` would be mistaken for the bootstrap pack by whoever reads its skill.
//!
//! ## Example
//! ```json
//! { "id": "admin", "kind": "wrap", "cliBin": "hcp", "wrap": { "bin": "hcp" } }
//! ```
//! Use the gold pack `hcp-cli` for what an agent may read of hcp, or wrap another CLI.

use crate::context::{Ctx, program_findings, tick};
use crate::diagnostic::Diagnostic;
use crate::rules::exec_wrapper_bin::normalize;
use hcp_model::{BindingMode, Kind, Manifest, Plane};

/// The rule's code.
pub(crate) const CODE: hcp_model::Code = hcp_model::Code::HcpBinReserved;

/// The id of the bootstrap pack, the one pack whose bin may be `hcp`.
pub const BOOTSTRAP_PACK: &str = "hcp-cli";

/// Whether `m` is the bootstrap pack: id `hcp-cli`, kind `wrap`, plane `runtime`, binding
/// `local`.
pub fn is_bootstrap(m: &Manifest) -> bool {
    m.id == BOOTSTRAP_PACK
        && m.kind == Kind::Wrap
        && m.plane == Plane::Runtime
        && m.binding.mode == BindingMode::Local
}

/// Whether `program` (as a manifest writes it) names `hcp`.
pub fn names_hcp(program: &str) -> bool {
    normalize(program) == "hcp"
}

fn message(m: &Manifest, program: &str) -> String {
    if m.id == BOOTSTRAP_PACK {
        format!(
            "program {} is reserved to the bootstrap pack, which is kind `wrap`, plane `runtime`, binding `local`",
            tick(program)
        )
    } else {
        format!(
            "program {} is reserved to the bootstrap pack `{BOOTSTRAP_PACK}`",
            tick(program)
        )
    }
}

const HINT: &str = "only the bootstrap pack `hcp-cli` wraps hcp; wrap another CLI";

pub(crate) fn run(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let Some((m, _)) = cx.manifest() else {
        return;
    };
    if is_bootstrap(m) {
        return;
    }
    let reason = |program: &str, _: &[&[String]]| names_hcp(program).then(|| message(m, program));
    program_findings(cx, Diagnostic::error, CODE, HINT, reason, out);
}

#[cfg(test)]
mod tests {
    use crate::testing::{POLICY, SKILL, SURFACE, edit, found, lint};
    use pretty_assertions::assert_eq;

    fn bootstrap_like(id: &str, binding: &str) -> (String, String) {
        let s = edit(SURFACE, "\"id\": \"sample\"", &format!("\"id\": \"{id}\""));
        let s = edit(&s, "\"bin\": \"hcp-example-sample\"", "\"bin\": \"hcp\"");
        let s = edit(
            &s,
            "\"mode\": \"public\"",
            &format!("\"mode\": \"{binding}\""),
        );
        let p = edit(
            POLICY,
            "\"surface_id\": \"sample\"",
            &format!("\"surface_id\": \"{id}\""),
        );
        (s, p)
    }

    fn codes(s: &str, p: &str) -> Vec<(&'static str, Option<String>, usize)> {
        found(&lint(s, p, SKILL))
            .into_iter()
            .filter(|(c, _, _)| *c == "hcp_bin_reserved")
            .map(|(c, f, l)| (c, f.map(str::to_owned), l))
            .collect()
    }

    #[test]
    fn only_the_bootstrap_pack_may_wrap_hcp() {
        let (s, p) = bootstrap_like("hcp-cli", "local");
        assert_eq!(codes(&s, &p), vec![]);
        let (s, p) = bootstrap_like("admin", "local");
        assert_eq!(
            codes(&s, &p),
            vec![("hcp_bin_reserved", Some("surface.json".into()), 7)]
        );
        // The bootstrap id with another binding is not the bootstrap pack.
        let (s, p) = bootstrap_like("hcp-cli", "public");
        assert_eq!(codes(&s, &p).len(), 1);
    }

    #[test]
    fn names_are_matched_like_exec_wrapper_bin() {
        for p in ["hcp", "/usr/local/bin/hcp", "./bins/HCP", "hcp2"] {
            assert!(super::names_hcp(p), "{p}");
        }
        for p in ["hcp-example-echo", "hcpd", "xhcp"] {
            assert!(!super::names_hcp(p), "{p}");
        }
    }
}
