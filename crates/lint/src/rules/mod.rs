//! The rules of RUNTIME §2, one module each, run in the order of [`RULES`].
//!
//! Each module's `//!` documentation says what it checks, why it matters and gives an
//! example; [`Rule::doc`] returns that text, and `cargo xtask generate` renders every
//! rule's into `docs/rules.md`.

use crate::context::Ctx;
use crate::diagnostic::{Diagnostic, Level};

/// One lint rule: a stable code (RUNTIME §2), its level and its check.
#[derive(Clone, Copy)]
pub struct Rule {
    /// The stable code every diagnostic of this rule carries (RUNTIME §2): its module's
    /// `CODE`, spelled as the module is named.
    pub code: hcp_model::Code,
    /// The level of its diagnostics.
    pub level: Level,
    /// One lowercase line saying what it finds.
    pub summary: &'static str,
    run: fn(&Ctx<'_>, &mut Vec<Diagnostic>),
    source: &'static str,
}

impl std::fmt::Debug for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rule")
            .field("code", &self.code)
            .field("level", &self.level)
            .finish_non_exhaustive()
    }
}

impl Rule {
    /// The rule's documentation (its module's `//!` text, Markdown).
    pub fn doc(&self) -> String {
        let mut out = String::new();
        for line in self.source.lines() {
            let Some(rest) = line.strip_prefix("//!") else {
                if line.trim().is_empty() {
                    continue;
                }
                break;
            };
            out.push_str(rest.strip_prefix(' ').unwrap_or(rest));
            out.push('\n');
        }
        out
    }

    pub(crate) fn run(&self, cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
        (self.run)(cx, out);
    }
}

macro_rules! rules {
    ($($module:ident: $level:ident, $summary:literal;)*) => {
        $(pub mod $module;)*

        /// Every rule, in the order [`crate::check`] runs them.
        pub static RULES: &[Rule] = &[$(
            Rule {
                code: $module::CODE,
                level: Level::$level,
                summary: $summary,
                run: $module::run,
                source: include_str!(concat!(stringify!($module), ".rs")),
            },
        )*];
    };
}

rules! {
    missing_file: Error, "one of `surface.json`, `policy.json`, `HARNESS.md` is missing or unreadable";
    bad_json: Error, "a pack file is not well-formed JSON, or a value has the wrong type";
    duplicate_key: Error, "the same key twice in one JSON object";
    unknown_field: Error, "a field the format does not define";
    bad_version: Error, "`version` (policy) or `hcp` (manifest) is not `1`";
    bad_land: Error, "a land token other than `personal`, `brain`, `local`";
    bad_operation: Error, "an operation other than `read`, `write`";
    bad_pack_id: Error, "the manifest `id` is not a valid pack id";
    surface_id_mismatch: Error, "the policy's `surface_id` differs from the manifest `id`";
    missing_verb: Error, "a manifest verb without a policy entry";
    extra_verb: Error, "a policy verb entry the manifest does not declare";
    missing_stimulus: Error, "a stimulus trigger without a policy entry";
    extra_stimulus: Error, "a policy stimulus entry no trigger declares";
    write_stimulus: Error, "a stimulus entry whose operation is not `read`";
    confirm_on_read: Error, "`confirm` on an entry that is not a write";
    connect_not_write: Error, "the connect verb is not a write";
    cli_bin_mismatch: Error, "a verb's program cannot be determined, or `cli[0]` differs from `cliBin`";
    bad_placeholder: Error, "a malformed `{{placeholder}}` in a command template";
    reserved_placeholder: Error, "a placeholder name the runtime keeps, or one that selects the tenant";
    exec_wrapper_bin: Error, "the program is a shell or runs its arguments as a command";
    hcp_bin_reserved: Error, "a pack other than the bootstrap pack `hcp-cli` whose bin is `hcp`";
    code_running_cli: Warning, "the program is a CLI known to run commands named in its arguments or input";
    secret_file: Error, "a `.env`, a `secrets/` directory or a private key in the pack";
    symlink_in_pack: Error, "a symbolic link inside the pack";
    unsafe_path: Error, "an entry whose name holds `..`, a control character or an absolute path";
    bad_binding: Error, "a binding that does not fit the plane or names no usable connect verb";
    bad_openapi: Error, "the OpenAPI document, or how the manifest uses it, is refused";
    unknown_operation: Error, "a verb of a `kind: openapi` pack names no operation of its document";
    confirm_not_mirrored: Warning, "a confirmed write whose command lacks the `--confirm` or `--apply` flag its program takes";
    verb_count: Warning, "fewer than 5 or more than 12 commands (verbs and trigger commands)";
    skill_too_long: Warning, "`HARNESS.md` is longer than one screen (60 lines)";
    skill_missing_section: Warning, "`HARNESS.md` lacks a title, a hot-path table or an anti-patterns section";
    absolute_path_in_skill: Warning, "a host-absolute path in `HARNESS.md`";
    extra_file: Warning, "an entry beside the three pack files";
    pass_through_present: Warning, "the manifest keeps the bootstrap `pass_through`";
    unsupported_kind: Warning, "a `kind` this runtime parses but does not execute";
}

/// The rule with `code`.
pub fn rule(code: &str) -> Option<&'static Rule> {
    RULES.iter().find(|r| r.code == code)
}

/// Reports the parse failure of either JSON file when its code is `code` (the rules
/// `bad_json`, `duplicate_key`, `unknown_field`, `bad_version`, `bad_land`,
/// `bad_operation` share this).
pub(crate) fn parse_failure(
    cx: &Ctx<'_>,
    code: hcp_model::ParseCode,
    hint: fn(&hcp_model::ParseError) -> Option<String>,
    out: &mut Vec<Diagnostic>,
) {
    let errors = [
        (hcp_model::MANIFEST_FILE, cx.manifest.error()),
        (hcp_model::POLICY_FILE, cx.policy.error()),
    ];
    for (file, e) in errors {
        let Some(e) = e.filter(|e| e.code == code) else {
            continue;
        };
        let mut d = Diagnostic::error(code.code(), e.message.clone())
            .in_file(file)
            .at(e.line, e.column);
        if let Some(h) = hint(e) {
            d = d.hint(h);
        }
        out.push(d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_is_documented_with_the_three_parts() {
        for r in RULES {
            let doc = r.doc();
            for part in ["## What it does", "## Why is this bad?", "## Example"] {
                assert!(doc.contains(part), "rule `{}` lacks `{part}`", r.code);
            }
        }
    }

    #[test]
    fn each_rule_module_names_its_own_code() {
        for r in RULES {
            let doc = r.doc();
            assert!(
                doc.starts_with(&format!("`{}` (", r.code)),
                "rule `{}`: {doc}",
                r.code
            );
        }
    }

    #[test]
    fn codes_are_the_ones_of_runtime_section_2() {
        let codes: Vec<&str> = RULES.iter().map(|r| r.code.as_str()).collect();
        let errors = [
            "missing_file",
            "bad_json",
            "duplicate_key",
            "unknown_field",
            "bad_pack_id",
            "surface_id_mismatch",
            "bad_version",
            "bad_land",
            "bad_operation",
            "missing_verb",
            "extra_verb",
            "missing_stimulus",
            "extra_stimulus",
            "write_stimulus",
            "confirm_on_read",
            "connect_not_write",
            "cli_bin_mismatch",
            "bad_placeholder",
            "reserved_placeholder",
            "exec_wrapper_bin",
            "secret_file",
            "symlink_in_pack",
            "unsafe_path",
            "bad_binding",
            "bad_openapi",
            "unknown_operation",
            // Issue 23 (RUNTIME §5.1): only the bootstrap pack sees the store.
            "hcp_bin_reserved",
        ];
        let warnings = [
            "confirm_not_mirrored",
            "verb_count",
            "skill_too_long",
            "skill_missing_section",
            "absolute_path_in_skill",
            "extra_file",
            "pass_through_present",
            "unsupported_kind",
            // Issue 12 (RUNTIME §4's "the owner is never reachable"): defence in depth.
            "code_running_cli",
        ];
        assert_eq!(codes.len(), errors.len() + warnings.len());
        for c in errors {
            assert_eq!(rule(c).map(|r| r.level), Some(Level::Error), "{c}");
        }
        for c in warnings {
            assert_eq!(rule(c).map(|r| r.level), Some(Level::Warning), "{c}");
        }
    }
}
